//! The pool of binding units and how it is dealt (SEMANTICS §4): pure index arithmetic,
//! plus the one walk over the topology that lists the units.

use std::collections::HashMap;

use crate::cpuset::CpuSet;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::shape::{ObjType, Pattern};
use crate::topology::Topology;

/// The unit objects holding any CPU of `selected`, in logical order, reversed and
/// reordered (interleave) as asked.
pub(super) fn pool<'t>(
    topology: &'t Topology,
    selected: &CpuSet,
    unit: ObjType,
    pattern: Pattern,
    reverse: bool,
) -> Vec<&'t TopologyObject> {
    let mut pool: Vec<&TopologyObject> = topology
        .objects(unit)
        .into_iter()
        .filter(|u| crate::topology::touches(u, selected))
        .collect();
    if reverse {
        pool.reverse();
    }
    match pattern {
        Pattern::Interleave => {
            let ranks = sibling_ranks(topology);
            // Stable: within one sibling rank the (possibly reversed) pool order stays.
            pool.sort_by_key(|pu| ranks.get(&pu.logical_index()).copied().unwrap_or(0));
        }
        // Packed and scatter differ in how the pool is dealt, not in its order.
        Pattern::Packed | Pattern::Scatter | Pattern::Balanced => {}
    }
    pool
}

/// Each PU's position among its core's allowed PUs (0 for the first hardware thread), by
/// PU logical index: one pass over the cores, so interleave stays linear in the PUs.
fn sibling_ranks(topology: &Topology) -> HashMap<usize, usize> {
    let mut ranks = HashMap::new();
    let mut by_core: HashMap<usize, usize> = HashMap::new();
    for pu in topology.objects(ObjType::Pu) {
        let rank = match pu.first_ancestor_with_type(ObjectType::Core) {
            Some(core) => {
                let next = by_core.entry(core.logical_index()).or_insert(0);
                *next += 1;
                *next - 1
            }
            None => 0,
        };
        ranks.insert(pu.logical_index(), rank);
    }
    ranks
}

/// The unit objects holding any CPU of `set`, in logical order, each once.
pub(super) fn units_in<'t>(
    owners: &HashMap<usize, &'t TopologyObject>,
    set: &CpuSet,
) -> Vec<&'t TopologyObject> {
    let mut units: Vec<&TopologyObject> = set
        .iter_set()
        .filter_map(|pu| owners.get(&pu).copied())
        .collect();
    units.sort_by_key(|u| u.logical_index());
    units.dedup_by_key(|u| u.logical_index());
    units
}

/// Which positions of a pool of `units` each of `tasks` tasks gets; empty when there are
/// fewer units than tasks. The `units mod tasks` left over go to nobody.
pub(crate) fn deal(units: usize, tasks: usize, pattern: Pattern) -> Vec<Vec<usize>> {
    let k = units / tasks.max(1);
    if k == 0 {
        return Vec::new();
    }
    (0..tasks)
        .map(|r| match pattern {
            Pattern::Packed | Pattern::Interleave | Pattern::Balanced => {
                (r * k..(r + 1) * k).collect()
            }
            Pattern::Scatter => (0..k).map(|i| r + i * tasks).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;

    #[test]
    fn packed_and_scatter_shares() {
        assert_eq!(
            deal(7, 3, Pattern::Packed),
            vec![vec![0, 1], vec![2, 3], vec![4, 5]]
        );
        assert_eq!(
            deal(7, 3, Pattern::Scatter),
            vec![vec![0, 3], vec![1, 4], vec![2, 5]]
        );
        assert_eq!(
            deal(4, 4, Pattern::Interleave),
            vec![vec![0], vec![1], vec![2], vec![3]]
        );
        assert!(deal(2, 3, Pattern::Packed).is_empty());
        assert!(deal(0, 1, Pattern::Scatter).is_empty());
    }

    #[test]
    fn interleave_puts_first_threads_first() {
        // 2 cores × 2 PUs: PU logical order 0,1 | 2,3 → first threads 0,2 then 1,3.
        let t = Topology::from_synthetic("core:2 pu:2", false).unwrap();
        let all = t.complete();
        let order = |reverse| -> Vec<usize> {
            pool(&t, &all, ObjType::Pu, Pattern::Interleave, reverse)
                .iter()
                .map(|p| p.logical_index())
                .collect()
        };
        assert_eq!(order(false), [0, 2, 1, 3]);
        assert_eq!(order(true), [2, 0, 3, 1]);
    }

    #[test]
    fn units_of_a_cpuset() {
        let t = Topology::from_synthetic("core:4 pu:2", false).unwrap();
        let owners = t.pu_owners(ObjType::Core);
        let mut set = CpuSet::new();
        set.set(1);
        set.set(6);
        set.set(7);
        let cores: Vec<usize> = units_in(&owners, &set)
            .iter()
            .map(|c| c.logical_index())
            .collect();
        assert_eq!(cores, [0, 3]);
    }
}
