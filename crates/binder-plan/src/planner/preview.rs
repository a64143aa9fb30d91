//! What reports show besides a plan's CPUs: each task's environment and memory binding as
//! a launch would compute them, and the Grid Engine topology strings of a YAML shape's plan.

use binder_core::identity;

use crate::distribute::Plan;
use crate::shape::Shape;
use crate::topology::Topology;
use crate::{ge, report};

/// What each task of `plan` would get besides its CPUs, computed as a launch computes it:
/// the environment ([`binder_core::launch::env::task_env`], with `get` reading the inherited
/// variables, so a user's `OMP_NUM_THREADS` shows as kept) and, with `membind: local`,
/// the NUMA nodes of its CPUs (of the allowed CPUs for an unbound task, which at launch
/// keeps what it inherited). The second value is the warnings rank 0 would print.
pub fn preview(
    topology: &Topology,
    plan: &Plan,
    shape: &Shape,
    get: &dyn Fn(&str) -> Option<String>,
) -> (Vec<report::Preview>, Vec<String>) {
    let size = plan.tasks.len();
    let mut warnings = Vec::new();
    let previews = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(rank, task)| {
            let view = crate::rank_view::task_view(plan, rank);
            let who = identity::Identity::given(rank, size);
            let env = binder_core::launch::env::task_env(
                &view,
                &who,
                shape.options_for(rank).openmp,
                get,
            );
            if rank == 0 {
                warnings = env.warnings;
            }
            let policy = shape.membind_for(rank);
            let mems = policy.map(|policy| {
                let cpus = task.memory_cpus(topology);
                // The plan checked that every task's nodes exist (`memory_fits`).
                crate::topology::memory_nodes(topology, &cpus, policy, &shape.memory_for(rank))
                    .unwrap_or_default()
            });
            report::Preview {
                env: env.vars,
                mems,
                mempolicy: policy,
            }
        })
        .collect();
    (previews, warnings)
}

/// Fills each task's `ge_topology` (the node's string, the task's CPUs lowercase) for a
/// plan a YAML shape made; a Grid Engine request's plan has them already. Only reports
/// need them, so launching never pays for it.
pub fn fill_ge_topology(topology: &Topology, plan: &mut Plan) {
    if plan.ge.is_some() {
        return;
    }
    let tree = topology.ge_tree();
    let by_pu: std::collections::HashMap<usize, usize> = tree
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(n, node)| (node.letter == ge::Letter::T).then_some((node.os?, n)))
        .collect();
    for task in &mut plan.tasks {
        let threads: Vec<usize> = task
            .cpuset
            .to_vec()
            .iter()
            .filter_map(|p| by_pu.get(p).copied())
            .collect();
        task.ge_topology = ge::job_string(&tree, &threads, None);
    }
}
