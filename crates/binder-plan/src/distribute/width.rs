//! Binding widths (`bind: package|numa|l3|…`, SEMANTICS §11): each task's cpuset widened
//! to the whole objects its units touch, or refused naming a width that covers them.

use crate::cpuset::CpuSet;

use super::{DistributeError, Plan, UnitObj};
use crate::shape::ObjType;
use crate::topology::Topology;

/// `bind: package|numa|…`: each task's cpuset becomes the whole objects of `width` that
/// its cpuset touches (SEMANTICS §11); its units stay as dealt. A unit outside every
/// object of that type (a die without memory has no NUMA node, an E-core no L3) refuses
/// the plan, as Open MPI does: a width is never silently dropped.
pub(super) fn widen(
    topology: &Topology,
    width: ObjType,
    plan: &mut Plan,
    origin: &str,
) -> Result<(), DistributeError> {
    let objects = width_sets(topology, width);
    let covered = objects.iter().fold(CpuSet::new(), |acc, s| acc | s);
    let outside: Vec<&UnitObj> = plan
        .tasks
        .iter()
        .flat_map(|t| &t.units)
        .filter(|u| u.pus.iter().any(|&p| !covered.is_set(p)))
        .collect();
    if !outside.is_empty() {
        let mut logical: Vec<usize> = outside.iter().map(|u| u.logical).collect();
        logical.sort_unstable();
        logical.dedup();
        let all: CpuSet = plan
            .tasks
            .iter()
            .fold(CpuSet::new(), |acc, t| acc | &t.cpuset);
        return Err(DistributeError::WidthMissing {
            origin: origin.to_owned(),
            width: width_word(width).to_owned(),
            units: format!(
                "{} unit(s), {}:{}",
                logical.len(),
                plan.unit.unit,
                binder_core::text::index_ranges(&logical)
            ),
            why: (if objects.is_empty() {
                format!("this node has no {} objects; ", width_word(width))
            } else {
                format!(
                    "they lie in no {} of this node; select only units inside one, or ",
                    width_word(width)
                )
            }) + &covering_width(topology, width, &all),
        });
    }
    for task in &mut plan.tasks {
        let mut wide = task.cpuset.clone();
        for set in objects.iter().filter(|s| s.intersects(&task.cpuset)) {
            wide |= set;
        }
        task.cpuset = wide;
    }
    Ok(())
}

/// `width` as a shape writes it after `bind:`.
pub(super) fn width_word(width: ObjType) -> &'static str {
    match width {
        ObjType::L2 => "l2",
        ObjType::L3 => "l3",
        other => other.hwloc_name(),
    }
}

/// The cpusets of the objects of `width` that hold a CPU.
pub(super) fn width_sets(topology: &Topology, width: ObjType) -> Vec<CpuSet> {
    topology
        .objects(width)
        .iter()
        .map(|o| crate::topology::cpus(o))
        .filter(|s| !s.is_empty())
        .collect()
}

/// What to write instead of `bind: <width>` so that every CPU in `cpus` is covered: the
/// nearest coarser width that covers them, else the nearest finer one, else the unit alone.
pub(super) fn covering_width(topology: &Topology, width: ObjType, cpus: &CpuSet) -> String {
    const FINE_TO_COARSE: [ObjType; 5] = [
        ObjType::L2,
        ObjType::L3,
        ObjType::Numa,
        ObjType::Die,
        ObjType::Package,
    ];
    let at = FINE_TO_COARSE.iter().position(|w| *w == width).unwrap_or(0);
    let covers = |w: ObjType| {
        let sets = width_sets(topology, w);
        !sets.is_empty() && {
            let union = sets.iter().fold(CpuSet::new(), |acc, s| acc | s);
            union.includes(cpus)
        }
    };
    let coarser = FINE_TO_COARSE[at + 1..].iter();
    let finer = FINE_TO_COARSE[..at].iter().rev();
    match coarser.chain(finer).find(|w| covers(**w)) {
        Some(w) => format!("use `bind: {}`, which covers them", width_word(*w)),
        None => "drop the width (bind to the units alone)".to_owned(),
    }
}
