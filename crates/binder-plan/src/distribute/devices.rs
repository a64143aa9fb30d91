//! Devices and CPUs kept consistent (SEMANTICS §9, §11): which GPUs each task gets, which
//! part of the pool a GPU locality may use, and which NICs are nearest a task.
//!
//! Everything but [`remote_numa`] works on plain cpusets, so it is unit-tested on
//! hand-built inputs.

use crate::cpuset::CpuSet;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::shape::ObjType;
use crate::topology::Topology;

/// How many PUs two cpusets share.
fn overlap(a: &CpuSet, b: &CpuSet) -> usize {
    (a & b).weight()
}

/// GPUs for tasks whose CPUs come from the shape: in rank order, each task takes the
/// `per_task` untaken GPUs whose locality shares the most PUs with its cpuset (ties: PCI
/// order). The caller makes sure there are `per_task × tasks` GPUs.
pub(crate) fn follow_cpus(
    tasks: &[CpuSet],
    localities: &[CpuSet],
    per_task: usize,
) -> Vec<Vec<usize>> {
    let mut taken = vec![false; localities.len()];
    tasks
        .iter()
        .map(|cpus| {
            let mut free: Vec<(usize, usize)> = (0..localities.len())
                .filter(|&g| !taken[g])
                .map(|g| (overlap(cpus, &localities[g]), g))
                .collect();
            // Most shared PUs first, then PCI order.
            free.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            let mine: Vec<usize> = free.iter().take(per_task).map(|&(_, g)| g).collect();
            for &g in &mine {
                taken[g] = true;
            }
            let mut mine = mine;
            mine.sort_unstable();
            mine
        })
        .collect()
}

/// The part of the pool each GPU locality may deal from, so that no two groups of tasks
/// ever share a unit (SEMANTICS §11). `pool` holds each unit's cpuset, `localities` each
/// group's CPUs. Narrower localities choose first (fewest units inside, then group
/// order), each taking the units inside it that no earlier group took; a locality that
/// contains another is left what the narrower one did not use.
pub(crate) fn local_parts(pool: &[CpuSet], localities: &[CpuSet]) -> Vec<Vec<usize>> {
    let inside: Vec<Vec<usize>> = localities
        .iter()
        .map(|l| (0..pool.len()).filter(|&i| l.includes(&pool[i])).collect())
        .collect();
    let mut order: Vec<usize> = (0..localities.len()).collect();
    order.sort_by_key(|&g| (inside[g].len(), g));
    let mut used = vec![false; pool.len()];
    let mut parts = vec![Vec::new(); localities.len()];
    for g in order {
        for &i in &inside[g] {
            if !used[i] {
                used[i] = true;
                parts[g].push(i);
            }
        }
    }
    parts
}

/// The devices nearest a task among `candidates` (index, locality): those whose locality
/// shares the most PUs with `cpus`, all of them on a tie; every candidate when the task
/// is unbound or shares nothing with any.
pub(crate) fn nearest(cpus: &CpuSet, candidates: &[(usize, &CpuSet)]) -> Vec<usize> {
    let best = candidates
        .iter()
        .map(|(_, l)| overlap(cpus, l))
        .max()
        .unwrap_or(0);
    candidates
        .iter()
        .filter(|(_, l)| overlap(cpus, l) == best)
        .map(|(i, _)| *i)
        .collect()
}

/// The nearest NUMA node (with CPUs) that holds none of `near`: smallest hwloc NUMA
/// distance from the NUMA nodes that do, when the topology has a matrix; ties (and
/// topologies without one) go to the next NUMA node after the first near one, in logical
/// order, wrapping. Positions are counted among the NUMA nodes with CPUs only, so
/// CPU-less NUMA nodes (GPU memory) cannot skew the wrap.
pub(crate) fn remote_numa<'t>(topology: &'t Topology, near: &CpuSet) -> Option<&'t TopologyObject> {
    let numas = topology.objects(ObjType::Numa);
    let is_near = |n: &TopologyObject| crate::topology::touches(n, near);
    let first_own = numas.iter().position(|n| is_near(n)).unwrap_or(0);
    let own: Vec<&TopologyObject> = numas.iter().copied().filter(|n| is_near(n)).collect();
    let distances = topology
        .hw()
        .distances_with_type(None, ObjectType::NUMANode)
        .ok();
    let matrix = distances.as_ref().and_then(|d| d.first());
    let distance = |candidate: &TopologyObject| -> u64 {
        matrix.map_or(0, |m| {
            own.iter()
                .filter_map(|o| m.object_pair_distance((o, candidate)).map(|(d, _)| d))
                .min()
                .unwrap_or(u64::MAX)
        })
    };
    let count = numas.len();
    numas
        .iter()
        .enumerate()
        .filter(|(_, n)| !is_near(n))
        .min_by_key(|(pos, n)| (distance(n), (pos + count - first_own) % count))
        .map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> CpuSet {
        let mut s = CpuSet::new();
        for &c in cpus {
            s.set(c);
        }
        s
    }

    #[test]
    fn gpus_follow_the_tasks_cpus() {
        // GPUs 0,1 near CPUs 0-3; GPUs 2,3 near CPUs 4-7. Task 0 sits on 4-7, task 1 on 0-3.
        let localities = [
            set(&[0, 1, 2, 3]),
            set(&[0, 1, 2, 3]),
            set(&[4, 5, 6, 7]),
            set(&[4, 5, 6, 7]),
        ];
        let tasks = [set(&[4, 5]), set(&[0, 1])];
        assert_eq!(follow_cpus(&tasks, &localities, 1), [vec![2], vec![0]]);
        assert_eq!(
            follow_cpus(&tasks, &localities, 2),
            [vec![2, 3], vec![0, 1]]
        );
        // More GPUs per task than are local: the local ones first, then PCI order.
        assert_eq!(follow_cpus(&tasks[..1], &localities, 3), [vec![0, 2, 3]]);
        // Unbound tasks (empty cpusets) get PCI order.
        let unbound = [CpuSet::new(), CpuSet::new()];
        assert_eq!(
            follow_cpus(&unbound, &localities, 2),
            [vec![0, 1], vec![2, 3]]
        );
    }

    #[test]
    fn gpu_local_parts_never_overlap() {
        // Units 0..4 are cores {0},{1},{2},{3}. Group 0's GPU is near cores 0-1; group 1's
        // GPUs are near everything (their localities' union): it gets what is left.
        let pool: Vec<CpuSet> = (0..4).map(|c| set(&[c])).collect();
        let parts = local_parts(&pool, &[set(&[0, 1]), set(&[0, 1, 2, 3])]);
        assert_eq!(parts, [vec![0, 1], vec![2, 3]]);
        // The wide group first in rank order changes nothing: narrow ones choose first.
        let parts = local_parts(&pool, &[set(&[0, 1, 2, 3]), set(&[2, 3])]);
        assert_eq!(parts, [vec![0, 1], vec![2, 3]]);
        // Equal localities are one group upstream; disjoint ones keep their own units.
        let parts = local_parts(&pool, &[set(&[0]), set(&[3])]);
        assert_eq!(parts, [vec![0], vec![3]]);
        // A locality inside a taken one is left with nothing.
        let parts = local_parts(&pool, &[set(&[0, 1]), set(&[0, 1])]);
        assert_eq!(parts, [vec![0, 1], vec![]]);
    }

    #[test]
    fn nearest_devices() {
        let a = set(&[0, 1]);
        let b = set(&[2, 3]);
        let c = set(&[0, 1, 2, 3]);
        let devices = [(0, &a), (1, &b), (2, &c)];
        assert_eq!(nearest(&set(&[0, 1]), &devices), [0, 2]);
        assert_eq!(nearest(&set(&[2]), &devices), [1, 2]);
        assert_eq!(nearest(&set(&[0, 1, 2, 3]), &devices), [2]);
        assert_eq!(nearest(&CpuSet::new(), &devices), [0, 1, 2]);
    }
}
