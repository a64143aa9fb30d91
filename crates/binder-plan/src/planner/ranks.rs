//! A shape with per-rank rules (`ranks:`): each rule's ranks planned as a job of their own,
//! lowest rank first, around what earlier rules took; then the other ranks with the shape
//! around all of it; and the plans merged into one, each task from the plan that placed it.

use crate::cpuset::CpuSet;

use super::one;
use super::PlanRequest;
use crate::distribute::{self, Locality, Plan};
use crate::error::PlanError;
use crate::{gpu, select, unit};

/// Plans `request`, recording each resource request's matches in `trace` when given.
pub(super) fn plan(
    request: &PlanRequest<'_>,
    mut trace: Option<&mut Vec<select::Step>>,
) -> Result<Plan, PlanError> {
    let PlanRequest {
        shape,
        origin,
        topology,
        local_size,
        held,
        ..
    } = *request;
    if shape.ranks.is_empty() {
        return one::plan(request, &[], trace);
    }
    // `--ge` comes after the shape was checked: the same rule as `check_ranks`.
    if shape.options.ge.is_some() {
        return Err(PlanError::Usage(
            "`ranks:` with a Grid Engine request (`--ge`): the request places the whole job; drop one of them".into(),
        ));
    }
    let (groups, rest) = shape.rank_groups(local_size);
    let mut taken = held.to_vec();
    // GPUs (bus ids) an earlier group's ranks took: a later group's never get them.
    let mut taken_gpus: Vec<String> = Vec::new();
    let mut parts: Vec<(Vec<usize>, Option<String>, Option<Plan>)> = Vec::new();
    for group in groups {
        let plan = match &group.shape {
            Some(sub) => {
                let label = format!("{origin} (ranks {})", group.label);
                let mut steps = Vec::new();
                let rule = PlanRequest {
                    shape: sub,
                    origin: &label,
                    local_size: group.ranks.len(),
                    held: &taken,
                    ..*request
                };
                let result = one::plan(&rule, &taken_gpus, trace.is_some().then_some(&mut steps));
                if let Some(t) = trace.as_deref_mut() {
                    for mut step in steps {
                        step.path = format!("ranks {}: {}", group.label, step.path);
                        t.push(step);
                    }
                }
                let plan = result?;
                taken.extend(plan.tasks.iter().flat_map(|t| t.cpuset.to_vec()));
                taken_gpus.extend(
                    plan.tasks
                        .iter()
                        .flat_map(|t| t.gpus.iter().map(|&g| plan.gpus[g].claim_id())),
                );
                Some(plan)
            }
            None => None,
        };
        parts.push((group.ranks, Some(group.label), plan));
    }
    let allowed = topology.allowed().to_vec();
    if !rest.is_empty() && allowed.iter().all(|p| taken.contains(p)) {
        let rules: Vec<String> = parts.iter().filter_map(|p| p.1.clone()).collect();
        return Err(distribute::DistributeError::RulesTakeAll {
            origin: origin.to_owned(),
            rules: rules.join(", "),
            rest: rest.len(),
        }
        .into());
    }
    let main = if rest.is_empty() {
        None
    } else {
        let others = PlanRequest {
            local_size: rest.len(),
            held: &taken,
            ..*request
        };
        Some(one::plan(&others, &taken_gpus, trace)?)
    };
    // The merged plan keeps the main plan's header (or the first rule's when every rank
    // has a rule) and takes each task from the plan that placed it.
    let mut base = match (&main, parts.iter().find_map(|p| p.2.as_ref())) {
        (Some(m), _) | (None, Some(m)) => m.clone(),
        // Every rank is `bind: none`: nothing was planned, nothing is used.
        (None, None) => Plan {
            unit: unit::UnitChoice {
                unit: unit::Unit::None,
                rule: unit::Rule::Explicit,
                width: None,
                slurm_auto: false,
            },
            pattern: shape.pattern(),
            reverse: shape.reverse(),
            locality: Locality::Any,
            tasks: Vec::new(),
            unused: Vec::new(),
            gpus: Vec::new(),
            nics: Vec::new(),
            slots: 0,
            unused_slots: Vec::new(),
            levels: Vec::new(),
            ge: None,
            kinds: None,
            numa_binding: None,
        },
    };
    let unbound = |rank: usize| distribute::Task {
        local_rank: rank,
        units: Vec::new(),
        cpuset: CpuSet::new(),
        gpus: Vec::new(),
        nics: Vec::new(),
        slot: None,
        spans: distribute::Spans::default(),
        ge_topology: String::new(),
        rule: None,
        unit: Some(unit::UnitChoice {
            unit: unit::Unit::None,
            rule: unit::Rule::Explicit,
            width: None,
            slurm_auto: false,
        }),
    };
    // Each group's GPU numbers index its own list (later groups see fewer GPUs): the merged
    // plan lists every GPU any group saw, in the node's order, and renumbers the tasks'.
    let mut plans: Vec<&mut Plan> = parts.iter_mut().filter_map(|p| p.2.as_mut()).collect();
    let mut main = main;
    plans.extend(main.as_mut());
    base.gpus = merge_gpus(&mut plans);
    let mut tasks: Vec<Option<distribute::Task>> = vec![None; local_size];
    if let Some(main) = main {
        for (task, &rank) in main.tasks.into_iter().zip(&rest) {
            tasks[rank] = Some(distribute::Task {
                local_rank: rank,
                ..task
            });
        }
    }
    for (ranks, label, plan) in parts {
        let rule_unit = plan.as_ref().map(|p| p.unit);
        let mut dealt = plan.map(|p| p.tasks.into_iter());
        for rank in ranks {
            let task = dealt.as_mut().and_then(Iterator::next).map_or_else(
                || unbound(rank),
                |t| distribute::Task {
                    local_rank: rank,
                    unit: rule_unit,
                    ..t
                },
            );
            tasks[rank] = Some(distribute::Task {
                rule: label.clone(),
                ..task
            });
        }
    }
    base.tasks = tasks.into_iter().flatten().collect();
    Ok(base)
}

/// Every GPU the `plans` list, once each in the node's order, with each plan's tasks'
/// GPU numbers rewritten to positions in that list.
fn merge_gpus(plans: &mut [&mut Plan]) -> Vec<gpu::Gpu> {
    let mut all: Vec<gpu::Gpu> = Vec::new();
    for plan in plans.iter() {
        for g in &plan.gpus {
            if !all.iter().any(|a| a.claim_id() == g.claim_id()) {
                all.push(g.clone());
            }
        }
    }
    all.sort_by_key(|g| (g.number, g.export.clone()));
    for (i, g) in all.iter_mut().enumerate() {
        g.index = i;
    }
    for plan in plans.iter_mut() {
        let to: Vec<usize> = plan
            .gpus
            .iter()
            .map(|g| {
                all.iter()
                    .position(|a| a.claim_id() == g.claim_id())
                    .unwrap_or(0)
            })
            .collect();
        for task in &mut plan.tasks {
            for g in &mut task.gpus {
                *g = to[*g];
            }
        }
    }
    all
}
