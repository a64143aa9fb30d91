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

/// What Slurm's automatic binding chose for a plan (`bind: slurm-auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AutoBinding {
    /// The tasks' CPUs are as many as the node's whole sockets: each task its sockets.
    Sockets,
    /// As many as its whole cores: each task its cores.
    Cores,
    /// As many as its PUs: each task the PUs it was dealt.
    Threads,
    /// None of those: every task the whole allocation (Slurm's "auto binding off").
    Allocation,
}

/// Slurm's automatic binding (`lllp_distribution` in `task/affinity/dist_tasks.c`, for a
/// step without `--cpu-bind`), on binder's pool: with `m` the PUs dealt to all tasks
/// (Slurm's tasks × `--cpus-per-task`), whole sockets when `m` is the count of sockets all
/// of whose PUs the allocation holds and none is held in part, else whole cores alike,
/// else the dealt PUs when `m` is every allowed PU, else the whole allocation for every
/// task. Slurm compares a CPU count with a socket count, and so does this: `srun -n 2` on
/// a two-socket node binds each task to a socket.
pub(super) fn slurm_auto(
    topology: &Topology,
    plan: &mut Plan,
    origin: &str,
) -> Result<(), DistributeError> {
    let allowed = topology.allowed();
    let whole = |kind: ObjType| -> (usize, usize) {
        let mut whole = 0;
        let mut part = 0;
        for o in topology.objects(kind) {
            let set = crate::topology::cpus(o);
            let held = set.iter_set().filter(|&p| allowed.is_set(p)).count();
            if held == 0 {
                continue;
            }
            if held == set.iter_set().count() {
                whole += 1;
            } else {
                part += 1;
            }
        }
        (whole, part)
    };
    let dealt: usize = plan.tasks.iter().map(|t| t.cpuset.iter_set().count()).sum();
    let (sockets, part_sockets) = whole(ObjType::Package);
    let (cores, part_cores) = whole(ObjType::Core);
    let threads = allowed.iter_set().count();
    let chosen = if dealt == sockets && part_sockets == 0 {
        AutoBinding::Sockets
    } else if dealt == cores && part_cores == 0 {
        AutoBinding::Cores
    } else if dealt == threads {
        AutoBinding::Threads
    } else {
        AutoBinding::Allocation
    };
    match chosen {
        AutoBinding::Sockets => widen(topology, ObjType::Package, plan, origin)?,
        AutoBinding::Cores => {
            cores_apart(topology, plan);
            widen(topology, ObjType::Core, plan, origin)?;
        }
        AutoBinding::Threads => {}
        AutoBinding::Allocation => {
            for task in &mut plan.tasks {
                task.cpuset = allowed.clone();
            }
        }
    }
    Ok(())
}

/// Slurm binding to cores gives every task cores of its own: `lllp_distribution` lays
/// tasks out over cores and skips a core's other threads, so on an SMT node tasks × `-c`
/// = cores never puts two tasks on one core (#64: binder dealt PUs, then widened each task
/// to its core, and 2 or 4 tasks shared a core while others stayed idle). Each PU a task
/// was dealt becomes a core of its own: the PU's core when no earlier task has it, else
/// the next free core of the same package in logical order (Slurm's block and cyclic
/// layouts alike), else the next free core anywhere. Tasks keep their rank order.
fn cores_apart(topology: &Topology, plan: &mut Plan) {
    let cores: Vec<CpuSet> = width_sets(topology, ObjType::Core);
    let packages: Vec<CpuSet> = width_sets(topology, ObjType::Package);
    // Looked up once (a 16k-PU node has 8k cores to search for every PU otherwise).
    let package: Vec<Option<usize>> = cores
        .iter()
        .map(|c| packages.iter().position(|p| p.intersects(c)))
        .collect();
    let package_of = |c: usize| package[c];
    let core_at: std::collections::HashMap<usize, usize> = cores
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.iter_set().map(move |pu| (pu, i)))
        .collect();
    let core_of = |pu: usize| core_at.get(&pu).copied();
    let pus: std::collections::HashMap<usize, &hwlocality::object::TopologyObject> = topology
        .objects(ObjType::Pu)
        .into_iter()
        .map(|o| (o.os_index().unwrap_or(usize::MAX), o))
        .collect();
    let mut taken = vec![false; cores.len()];
    for task in &mut plan.tasks {
        let mut cpuset = CpuSet::new();
        let mut units = Vec::new();
        for pu in task.cpuset.to_vec() {
            let Some(here) = core_of(pu) else {
                cpuset.set(pu);
                continue;
            };
            let package = package_of(here);
            let n = cores.len();
            let pick = (0..n)
                .map(|k| (here + k) % n)
                .find(|&c| !taken[c] && package_of(c) == package)
                .or_else(|| (0..n).map(|k| (here + k) % n).find(|&c| !taken[c]))
                .unwrap_or(here);
            taken[pick] = true;
            let first = cores[pick].first_set().unwrap_or(pu);
            cpuset.set(first);
            if let Some(obj) = pus.get(&first) {
                units.push(UnitObj::of(topology, obj));
            }
        }
        if units.len() == task.units.len() {
            task.units = units;
        }
        task.cpuset = cpuset;
    }
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
