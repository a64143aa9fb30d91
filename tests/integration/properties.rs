//! Properties of the planner (proptest), checked against an independent model.
//!
//! On a synthetic topology `pack:P [numa:N] core:C pu:T` hwloc numbers PUs 0.. in order,
//! so every object is a contiguous PU range and SEMANTICS §3–5 reduce to index arithmetic:
//! the model below computes the selection, the pool (reverse, interleave) and every
//! task's PUs without calling binder's selection or dealing code. The generators size
//! counts and local sizes from the model, so most cases plan (the ratio is asserted);
//! the others must be refused for a reason the model predicts.
//!
//! A second test checks determinism across processes: every task of a node plans alone,
//! so two binder processes started with different `taskset` masks must print the same plan.

use std::process::Command;

use binder_plan::shape::Shape;
use binder_plan::topology::Source;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::common::{binder, has, run};

/// A synthetic node: packages, NUMA nodes per package (0 = no NUMA level), cores per
/// NUMA node (or package), PUs per core.
#[derive(Debug, Clone, Copy)]
struct Node {
    p: usize,
    n: usize,
    c: usize,
    t: usize,
}

impl Node {
    fn desc(&self) -> String {
        if self.n > 0 {
            format!(
                "pack:{} numa:{} core:{} pu:{}",
                self.p, self.n, self.c, self.t
            )
        } else {
            format!("pack:{} core:{} pu:{}", self.p, self.c, self.t)
        }
    }
    fn pus(&self) -> usize {
        self.p * self.n.max(1) * self.c * self.t
    }
    /// PUs per object of a type. Without a NUMA level hwloc gives the machine one.
    fn width(&self, kind: &str) -> usize {
        match kind {
            "machine" => self.pus(),
            "socket" => self.pus() / self.p,
            "numa" if self.n == 0 => self.pus(),
            "numa" => self.c * self.t,
            "core" => self.t,
            "pu" => 1,
            _ => unreachable!(),
        }
    }
    fn count(&self, kind: &str) -> usize {
        self.pus() / self.width(kind)
    }
}

/// The generated shape, in model terms.
#[derive(Debug, Clone)]
struct Model {
    node: Node,
    outer: &'static str,
    outer_count: Option<usize>, // None = all
    inner: Option<(&'static str, Option<usize>)>,
    bind: Option<&'static str>,
    pattern: &'static str,
    reverse: bool,
    tasks: usize,
}

impl Model {
    fn yaml(&self) -> String {
        let count = |c: Option<usize>| c.map_or("all".to_owned(), |c| c.to_string());
        let mut y = format!(
            "options:\n  pattern: {}\n  reverse: {}\n",
            self.pattern, self.reverse
        );
        if let Some(b) = self.bind {
            y.push_str(&format!("  bind: {b}\n"));
        }
        y.push_str(&format!(
            "resources:\n  - type: {}\n    count: {}\n",
            self.outer,
            count(self.outer_count)
        ));
        if let Some((kind, c)) = self.inner {
            y.push_str(&format!(
                "    with:\n      - type: {kind}\n        count: {}\n",
                count(c)
            ));
        }
        y
    }

    /// SEMANTICS §2.
    fn unit(&self) -> &'static str {
        match self.bind {
            Some(b) => b,
            None if self.outer == "pu" || self.inner.is_some_and(|(k, _)| k == "pu") => "pu",
            None => "core",
        }
    }

    /// SEMANTICS §3–4: the pool as PU lists, one per unit, in dealing order.
    fn pool(&self) -> Vec<Vec<usize>> {
        let node = self.node;
        let wo = node.width(self.outer);
        let outers = self.outer_count.unwrap_or(node.count(self.outer));
        let mut selected = vec![false; node.pus()];
        for o in 0..outers {
            match self.inner {
                None => (o * wo..(o + 1) * wo).for_each(|p| selected[p] = true),
                Some((kind, c)) => {
                    let wi = node.width(kind);
                    let take = c.unwrap_or(wo / wi);
                    for i in 0..take {
                        let start = o * wo + i * wi;
                        (start..start + wi).for_each(|p| selected[p] = true);
                    }
                }
            }
        }
        let wu = node.width(self.unit());
        let mut pool: Vec<Vec<usize>> = (0..node.pus() / wu)
            .map(|u| (u * wu..(u + 1) * wu).collect::<Vec<_>>())
            .filter(|pus| pus.iter().any(|&p| selected[p]))
            .collect();
        if self.reverse {
            pool.reverse();
        }
        if self.pattern == "interleave" {
            // A PU's rank inside its core is its index mod T; the sort is stable.
            pool.sort_by_key(|pus| pus[0] % node.t);
        }
        pool
    }

    /// Every task's PUs, sorted; `None` when the model says the plan is refused.
    fn expected(&self) -> Option<Vec<Vec<usize>>> {
        if self.pattern == "interleave" && self.unit() != "pu" {
            return None;
        }
        let pool = self.pool();
        let k = pool.len() / self.tasks;
        if k == 0 {
            return None;
        }
        let tasks = (0..self.tasks)
            .map(|r| {
                let picks: Vec<usize> = match self.pattern {
                    "scatter" => (0..k).map(|i| r + i * self.tasks).collect(),
                    _ => (r * k..(r + 1) * k).collect(),
                };
                let mut pus: Vec<usize> = picks.iter().flat_map(|&i| pool[i].clone()).collect();
                pus.sort_unstable();
                pus
            })
            .collect();
        Some(tasks)
    }
}

fn node() -> impl Strategy<Value = Node> {
    (1..=3usize, 0..=2usize, 1..=6usize, 1..=4usize).prop_map(|(p, n, c, t)| Node { p, n, c, t })
}

fn count_up_to(max: usize) -> impl Strategy<Value = Option<usize>> {
    prop_oneof![3 => (1..=max).prop_map(Some), 1 => Just(None)]
}

/// A shape sized to its node: counts never exceed what the node has, and the local size
/// is at most the pool, except in about one case in ten (to see refusals).
fn model() -> impl Strategy<Value = Model> {
    node().prop_flat_map(|node| {
        let outer = prop::sample::select(vec!["machine", "socket", "numa", "core", "pu"]);
        (Just(node), outer).prop_flat_map(move |(node, outer)| {
            let inners: Vec<&'static str> = ["core", "pu"]
                .into_iter()
                .filter(|k| node.width(k) < node.width(outer))
                .collect();
            let inner = if inners.is_empty() {
                Just(None).boxed()
            } else {
                prop::option::of(prop::sample::select(inners).prop_flat_map(move |k| {
                    let per = node.width(outer) / node.width(k);
                    (Just(k), count_up_to(per))
                }))
                .boxed()
            };
            let bind = prop::sample::select(vec![None, Some("core"), Some("pu")]);
            let pattern = prop::sample::select(vec!["packed", "scatter", "interleave"]);
            (
                Just(node),
                Just(outer),
                count_up_to(node.count(outer)),
                inner,
                bind,
                pattern,
                any::<bool>(),
                0..10usize,
                any::<prop::sample::Index>(),
            )
                .prop_map(
                    |(node, outer, outer_count, inner, bind, pattern, reverse, over, pick)| {
                        let mut m = Model {
                            node,
                            outer,
                            outer_count,
                            inner,
                            bind,
                            pattern,
                            reverse,
                            tasks: 1,
                        };
                        // interleave with unit core is a refusal; keep it rare by switching
                        // most of those cases to packed.
                        if m.pattern == "interleave" && m.unit() != "pu" && over > 0 {
                            m.pattern = "packed";
                        }
                        let units = m.pool().len().max(1);
                        m.tasks = if over == 0 {
                            units + 1
                        } else {
                            pick.index(units) + 1
                        };
                        m
                    },
                )
        })
    })
}

#[test]
fn plans_match_the_model_and_refusals_are_the_predicted_ones() {
    let mut runner = TestRunner::new(Config {
        cases: 400,
        ..Config::default()
    });
    let planned = std::cell::Cell::new(0usize);
    let refused = std::cell::Cell::new(0usize);
    runner
        .run(&model(), |m| {
            let yaml = m.yaml();
            let shape = Shape::from_yaml(&yaml, "p.yaml").expect("generated shapes are valid");
            let topology = binder_host::load(&Source::Synthetic(m.node.desc()), false).unwrap();
            let got = binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topology, m.tasks).origin("p.yaml"),
            );
            match (m.expected(), got) {
                (Some(want), Ok(plan)) => {
                    planned.set(planned.get() + 1);
                    prop_assert_eq!(plan.unit.unit.to_string(), m.unit());
                    let got: Vec<Vec<usize>> = plan
                        .tasks
                        .iter()
                        .map(|t| t.cpuset.iter_set().collect())
                        .collect();
                    prop_assert_eq!(got, want, "{} on {} n={}", yaml, m.node.desc(), m.tasks);
                }
                (None, Err(e)) => {
                    refused.set(refused.get() + 1);
                    let text = e.to_string();
                    prop_assert!(
                        text.contains("in the pool") || text.contains("needs unit pu"),
                        "an unexpected refusal: {}",
                        text
                    );
                    prop_assert_eq!(
                        binder::Error::from(e).exit_code(),
                        binder::exit_code::REFUSED
                    );
                }
                (want, got) => prop_assert!(
                    false,
                    "{} on {} n={}: model {:?}, binder {:?}",
                    yaml,
                    m.node.desc(),
                    m.tasks,
                    want.map(|_| "plans"),
                    got.map(|_| "plans").map_err(|e| e.to_string())
                ),
            }
            Ok(())
        })
        .unwrap();
    let (planned, refused) = (planned.get(), refused.get());
    let ratio = planned as f64 / (planned + refused) as f64;
    eprintln!(
        "properties: {planned} planned, {refused} refused ({:.0}% planned)",
        ratio * 100.0
    );
    assert!(
        ratio >= 0.8,
        "only {:.0}% of the cases planned",
        ratio * 100.0
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn shapes_survive_serialize_then_parse(m in model()) {
        let shape = Shape::from_yaml(&m.yaml(), "p.yaml").unwrap();
        let text = yaml_serde::to_string(&shape).unwrap();
        prop_assert_eq!(Shape::from_yaml(&text, "again.yaml").unwrap(), shape);
    }
}

/// Two tasks of a launcher with different inherited affinities plan the host
/// identically: under a launcher the plan depends on the allowed CPUs and the job's
/// allocation (which its daemon says alike to every task), never on the mask the launcher
/// left on one task. (Without a launcher the inherited affinity is the allocation:
/// `launch::without_a_launcher_the_inherited_affinity_is_the_allocation`.)
#[test]
fn plans_do_not_depend_on_the_inherited_affinity() {
    if !crate::common::prerequisite(has("taskset"), "taskset") {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let last = (cpus - 1).to_string();
    for shape in [
        "shapes/cores-packed.yaml",
        "shapes/pus-interleave.yaml",
        "shapes/cores-scatter.yaml",
        "shapes/numa-per-task.yaml",
    ] {
        let plan_under = |mask: &str| {
            let bin = binder();
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", mask]).arg(bin.get_program()).args([
                "-n",
                "--format",
                "json",
                "--local-size",
                "1",
                shape,
            ]);
            for (k, v) in bin.get_envs() {
                match v {
                    Some(v) => cmd.env(k, v),
                    None => cmd.env_remove(k),
                };
            }
            cmd.current_dir(crate::common::root())
                .env("OMPI_COMM_WORLD_LOCAL_RANK", "0")
                .env("OMPI_COMM_WORLD_LOCAL_SIZE", "1");
            String::from_utf8(run(&mut cmd, 0).stdout).unwrap()
        };
        assert_eq!(plan_under("0"), plan_under(&last), "{shape}");
    }
}
