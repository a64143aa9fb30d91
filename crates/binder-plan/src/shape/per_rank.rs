//! What per-rank rules (`ranks:`, [`super::ranks`]) mean for a shape: the shape each
//! rule plans its ranks with, the options of one rank's task, the groups a plan is made
//! of, and the whole-shape checks of `ranks:`. Apart from the rules' data (`ranks`) so that
//! the data model has no circle: a [`Shape`] holds rules, and this reads both.

use std::collections::BTreeMap;

use super::{Bind, RankList, RankRule, Ranks, Shape};

/// Ranks and the shape that plans them.
#[derive(Debug, Clone)]
pub struct Group {
    /// The rule's key, for reports (`0`, `1-2`).
    pub label: String,
    /// The local ranks below the local size that it names.
    pub ranks: Vec<usize>,
    /// What plans them; `None` for `bind: none` without resources (nothing to plan).
    pub shape: Option<Shape>,
}

impl Shape {
    /// The shape a rule plans its ranks with: its options over the shape's, its resources.
    fn for_rule(&self, rule: &RankRule) -> Shape {
        let mut options = self.options.clone();
        options.gpus_per_task = rule.gpus_per_task;
        if rule.bind.is_some() {
            options.bind = rule.bind;
        }
        if rule.pattern.is_some() {
            options.pattern = rule.pattern;
        }
        if rule.reverse.is_some() {
            options.reverse = rule.reverse;
        }
        if let Some(openmp) = rule.openmp {
            options.openmp = openmp;
        }
        if rule.membind.is_some() {
            options.membind = rule.membind;
        }
        if rule.memory.is_some() {
            options.memory.clone_from(&rule.memory);
        }
        Shape {
            version: None,
            options,
            resources: rule.resources.clone(),
            ranks: Ranks::new(),
        }
    }

    /// The options that apply to local rank `rank`'s own task (OpenMP and memory
    /// binding): its rule's, else the shape's.
    pub(crate) fn options_for(&self, rank: usize) -> super::Options {
        self.ranks
            .iter()
            .find(|(list, _)| list.0.binary_search(&rank).is_ok())
            .map_or_else(
                || self.options.clone(),
                |(_, rule)| self.for_rule(rule).options,
            )
    }

    /// Local rank `rank`'s memory policy (`membind: local|interleave|preferred`), if any;
    /// `memory:` without `membind` binds strictly there (`local`).
    pub fn membind_for(&self, rank: usize) -> Option<binder_core::view::MemPolicy> {
        let options = self.options_for(rank);
        match (options.membind, options.memory) {
            (Some(membind), _) => membind.policy(),
            (None, Some(_)) => Some(binder_core::view::MemPolicy::Local),
            (None, None) => None,
        }
    }

    /// The NUMA nodes local rank `rank`'s memory policy uses (`memory:`).
    pub fn memory_for(&self, rank: usize) -> binder_core::view::MemNodes {
        self.options_for(rank)
            .memory
            .map(|m| m.0)
            .unwrap_or_default()
    }

    /// The rules' groups for `local_size` tasks, lowest rank first, and the ranks the
    /// shape itself plans (in order). Rules naming no rank below the size are left out.
    pub(crate) fn rank_groups(&self, local_size: usize) -> (Vec<Group>, Vec<usize>) {
        let mut groups: Vec<Group> = self
            .ranks
            .iter()
            .map(|(list, rule)| Group {
                label: list.to_string(),
                ranks: list.0.iter().copied().filter(|&r| r < local_size).collect(),
                shape: (!rule.resources.is_empty()).then(|| self.for_rule(rule)),
            })
            .filter(|g| !g.ranks.is_empty())
            .collect();
        groups.sort_by_key(|g| g.ranks[0]);
        let ruled: std::collections::HashSet<usize> = groups
            .iter()
            .flat_map(|g| g.ranks.iter().copied())
            .collect();
        let rest = (0..local_size).filter(|r| !ruled.contains(r)).collect();
        (groups, rest)
    }

    /// The whole-shape checks of `ranks:` (SEMANTICS-like rules, issue #13).
    pub(super) fn check_ranks(&self) -> Result<(), String> {
        if self.ranks.is_empty() {
            return Ok(());
        }
        if self.options.ge.is_some() {
            return Err("`ranks:` with `options.ge`: a Grid Engine request places the whole job; drop one of them".into());
        }
        let mut seen: BTreeMap<usize, &RankList> = BTreeMap::new();
        for (list, rule) in &self.ranks {
            for r in &list.0 {
                if let Some(other) = seen.insert(*r, list) {
                    return Err(format!(
                        "ranks `{other}` and `{list}` both name rank {r}; each rank may have one rule"
                    ));
                }
            }
            if rule.resources.is_empty() && rule.bind != Some(Bind::None) {
                return Err(format!(
                    "ranks `{list}`: a rule needs its own `resources` or `bind: none` (a rule on the shape's own resources would take what the other ranks need)"
                ));
            }
            let sub = self.for_rule(rule);
            if !rule.resources.is_empty() {
                sub.check_tree()
                    .map_err(|m| format!("ranks `{list}`: {m}"))?;
            }
            if sub.needs_gpus() && !rule.resources.is_empty() && self.needs_gpus() {
                return Err(format!(
                    "ranks `{list}` and the rest of the shape both use GPUs; each plan would deal the same GPUs, so give GPUs in one of them only"
                ));
            }
        }
        Ok(())
    }
}
