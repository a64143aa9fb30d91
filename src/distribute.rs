//! Turns a selection into every local task's binding: the `Plan` (SEMANTICS §4, §5, §9).
//!
//! The pool is the list of unit objects (cores or PUs) that hold the selected CPUs, in
//! logical order; it is reversed and reordered as asked, then dealt to the `n` local tasks
//! in equal shares. Every task of a node computes this same plan independently, so
//! nothing here may depend on anything but the topology and the request.
//! With `gpu-local`/`gpu-remote`, tasks are first grouped by the CPUs their GPUs ask for
//! and each group is dealt its own part of the pool.

use std::fmt;

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::gpu::{object_label, Gpu};
use crate::select::Selection;
use crate::shape::{ObjType, Pattern};
use crate::topology::Topology;
use crate::unit::{Unit, UnitChoice};

/// Where each task's CPUs must be relative to its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locality {
    /// Anywhere in the pool.
    Any,
    /// Among the CPUs near the task's GPUs.
    GpuLocal,
    /// On the nearest NUMA node that has none of the task's GPUs.
    GpuRemote,
}

/// What to distribute, beyond the selection.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    /// The binding unit.
    pub unit: UnitChoice,
    /// How the pool is dealt.
    pub pattern: Pattern,
    /// Reverse the pool first.
    pub reverse: bool,
    /// Number of tasks on this node.
    pub local_size: usize,
    /// GPUs per task, when asked for.
    pub gpus_per_task: Option<usize>,
    /// GPU locality of the CPUs.
    pub locality: Locality,
}

/// One unit object given to a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitObj {
    /// hwloc logical index (`core:3` is L#3).
    pub logical: usize,
    /// OS (physical) index, when hwloc knows one.
    pub os: Option<usize>,
    /// OS numbers of its PUs, ascending (one OpenMP place).
    pub pus: Vec<usize>,
}

impl UnitObj {
    fn of(obj: &TopologyObject) -> UnitObj {
        UnitObj {
            logical: obj.logical_index(),
            os: obj.os_index(),
            pus: obj
                .cpuset()
                .map(|s| s.iter_set().map(usize::from).collect())
                .unwrap_or_default(),
        }
    }
}

/// One local task's binding.
#[derive(Debug, Clone)]
pub struct Task {
    /// Local rank, from 0.
    pub local_rank: usize,
    /// The unit objects it gets, in the order dealt.
    pub units: Vec<UnitObj>,
    /// Its CPUs (OS numbering); empty for unit none.
    pub cpuset: CpuSet,
    /// Its GPUs, as indices into [`Plan::gpus`].
    pub gpus: Vec<usize>,
}

/// The whole node's placement: what every local task gets.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The unit and the rule that chose it.
    pub unit: UnitChoice,
    /// The pattern used.
    pub pattern: Pattern,
    /// Whether the pool was reversed.
    pub reverse: bool,
    /// GPU locality of the CPUs.
    pub locality: Locality,
    /// One entry per local rank.
    pub tasks: Vec<Task>,
    /// Pool units no task got (the `P mod n` remainder, or units outside every GPU's
    /// locality), in pool order.
    pub unused: Vec<UnitObj>,
    /// The node's GPUs (empty unless the shape uses GPUs).
    pub gpus: Vec<Gpu>,
}

/// The selection cannot be dealt to the tasks.
#[derive(Debug, thiserror::Error)]
pub enum DistributeError {
    /// Fewer units than tasks.
    #[error(
        "{origin}: {tasks} tasks but only {units} {unit} in the pool{scope}; run fewer tasks per node, \
         select more resources, or bind to a finer unit (`bind: pu`)"
    )]
    TooFewUnits {
        /// The shape file.
        origin: String,
        /// Tasks that share the pool.
        tasks: usize,
        /// Units in the pool.
        units: usize,
        /// The unit.
        unit: Unit,
        /// Which part of the pool, for GPU localities (` near gpu:0 (package:0)`).
        scope: String,
    },
    /// `interleave` with unit core.
    #[error("{origin}: pattern `interleave` deals PUs of cores and needs unit pu, but the unit is core ({rule}); add `bind: pu` to `options` or use `packed`/`scatter`")]
    InterleaveNeedsPu {
        /// The shape file.
        origin: String,
        /// How the unit was chosen.
        rule: String,
    },
    /// More GPUs asked for than the node has.
    #[error("{origin}: {tasks} task(s) × {per_task} GPU(s) per task need {need} GPU(s), but {source_desc} has {have}{hint}")]
    TooFewGpus {
        /// The shape file.
        origin: String,
        /// Local tasks.
        tasks: usize,
        /// GPUs per task.
        per_task: usize,
        /// Total needed.
        need: usize,
        /// GPUs found.
        have: usize,
        /// The topology source.
        source_desc: String,
        /// What to do.
        hint: String,
    },
    /// `gpu-remote` on a node where no NUMA node is free of the task's GPUs.
    #[error("{origin}: `bind: gpu-remote` needs a NUMA node without gpu:{gpu}, but {source_desc} has {numa} NUMA node(s) with CPUs and all are near it; use `gpu-local` here")]
    NoRemoteNuma {
        /// The shape file.
        origin: String,
        /// The GPU.
        gpu: usize,
        /// NUMA nodes with CPUs.
        numa: usize,
        /// The topology source.
        source_desc: String,
    },
}

/// Deals the selection to `request.local_size` tasks.
pub fn distribute(
    topology: &Topology,
    selection: &Selection<'_>,
    gpus: Vec<Gpu>,
    request: &Request,
    origin: &str,
) -> Result<Plan, DistributeError> {
    let n = request.local_size.max(1);
    let task_gpus = assign_gpus(topology, &gpus, request, n, origin)?;
    let mut plan = Plan {
        unit: request.unit,
        pattern: request.pattern,
        reverse: request.reverse,
        locality: request.locality,
        tasks: (0..n)
            .map(|r| Task {
                local_rank: r,
                units: Vec::new(),
                cpuset: CpuSet::new(),
                gpus: task_gpus[r].clone(),
            })
            .collect(),
        unused: Vec::new(),
        gpus,
    };
    let Some(unit_type) = request.unit.unit.obj_type() else {
        return Ok(plan);
    };
    if request.pattern == Pattern::Interleave && request.unit.unit != Unit::Pu {
        return Err(DistributeError::InterleaveNeedsPu {
            origin: origin.to_owned(),
            rule: request.unit.rule.to_string(),
        });
    }
    let pool = pool(topology, selection, unit_type, request);

    // Group the tasks by the CPUs they must stay within, in order of first appearance.
    let mut groups: Vec<(Option<CpuSet>, String, Vec<usize>)> = Vec::new();
    for r in 0..n {
        let (within, scope) = match request.locality {
            Locality::Any => (None, String::new()),
            Locality::GpuLocal => local_cpus(&plan.gpus, &plan.tasks[r].gpus),
            Locality::GpuRemote => remote_cpus(topology, &plan.gpus, &plan.tasks[r].gpus, origin)?,
        };
        match groups.iter_mut().find(|(w, _, _)| *w == within) {
            Some((_, _, ranks)) => ranks.push(r),
            None => groups.push((within, scope, vec![r])),
        }
    }

    let mut used = vec![false; pool.len()];
    for (within, scope, ranks) in &groups {
        let part: Vec<usize> = (0..pool.len())
            .filter(|&i| {
                within
                    .as_ref()
                    .is_none_or(|w| pool[i].cpuset().is_some_and(|s| w.includes(&*s)))
            })
            .collect();
        let shares = deal(part.len(), ranks.len(), request.pattern);
        if shares.is_empty() {
            return Err(DistributeError::TooFewUnits {
                origin: origin.to_owned(),
                tasks: ranks.len(),
                units: part.len(),
                unit: request.unit.unit,
                scope: scope.clone(),
            });
        }
        for (share, &r) in shares.iter().zip(ranks) {
            let task = &mut plan.tasks[r];
            for &k in share {
                let obj = pool[part[k]];
                used[part[k]] = true;
                task.units.push(UnitObj::of(obj));
                if let Some(set) = obj.cpuset() {
                    task.cpuset |= &*set;
                }
            }
        }
    }
    plan.unused = pool
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(obj, _)| UnitObj::of(obj))
        .collect();
    Ok(plan)
}

/// The pool: unit objects holding selected CPUs, in logical order, reversed and
/// reordered as asked.
fn pool<'t>(
    topology: &'t Topology,
    selection: &Selection<'_>,
    unit_type: ObjType,
    request: &Request,
) -> Vec<&'t TopologyObject> {
    let selected = selection.cpuset();
    let mut pool: Vec<&TopologyObject> = topology
        .objects(unit_type)
        .into_iter()
        .filter(|u| u.cpuset().is_some_and(|s| s.intersects(&selected)))
        .collect();
    if request.reverse {
        pool.reverse();
    }
    if request.pattern == Pattern::Interleave {
        // Stable: within one sibling rank the (possibly reversed) pool order stays.
        pool.sort_by_cached_key(|pu| sibling_rank_in_core(topology, pu));
    }
    pool
}

/// A PU's position among its core's PUs (0 for the first hardware thread).
fn sibling_rank_in_core(topology: &Topology, pu: &TopologyObject) -> usize {
    pu.first_ancestor_with_type(ObjectType::Core)
        .map_or(0, |core| {
            topology
                .pus_of(core)
                .iter()
                .position(|p| p.logical_index() == pu.logical_index())
                .unwrap_or(0)
        })
}

/// Which positions of a pool of `units` each of `tasks` tasks gets; empty when there are
/// fewer units than tasks. The `units mod tasks` left over go to nobody.
pub fn deal(units: usize, tasks: usize, pattern: Pattern) -> Vec<Vec<usize>> {
    let k = units / tasks.max(1);
    if k == 0 {
        return Vec::new();
    }
    (0..tasks)
        .map(|r| match pattern {
            Pattern::Packed | Pattern::Interleave => (r * k..(r + 1) * k).collect(),
            Pattern::Scatter => (0..k).map(|i| r + i * tasks).collect(),
        })
        .collect()
}

/// Each task's GPUs: `g` consecutive GPUs per task in bus order; without `g` under a GPU
/// locality, the GPUs are shared out like CPUs (`G div n` each, or consecutive tasks
/// sharing one GPU when there are more tasks than GPUs).
fn assign_gpus(
    topology: &Topology,
    gpus: &[Gpu],
    request: &Request,
    n: usize,
    origin: &str,
) -> Result<Vec<Vec<usize>>, DistributeError> {
    let have = gpus.len();
    let too_few = |per_task: usize, hint: &str| DistributeError::TooFewGpus {
        origin: origin.to_owned(),
        tasks: n,
        per_task,
        need: n * per_task,
        have,
        source_desc: topology.source().to_string(),
        hint: hint.to_owned(),
    };
    match (request.gpus_per_task, request.locality) {
        (Some(g), _) => {
            if n * g > have {
                let hint = if have == 0 {
                    "; binder finds GPUs as PCI devices, so the topology must include I/O (`lstopo --of xml` does by default)"
                } else {
                    "; lower `gpus-per-task` or run fewer tasks per node"
                };
                return Err(too_few(g, hint));
            }
            Ok((0..n).map(|r| (g * r..g * r + g).collect()).collect())
        }
        (None, Locality::Any) => Ok(vec![Vec::new(); n]),
        (None, _) if have == 0 => Err(too_few(
            1,
            "; `gpu-local`/`gpu-remote` need GPUs in the topology",
        )),
        (None, _) if n <= have => {
            let g = have / n;
            Ok((0..n).map(|r| (g * r..g * r + g).collect()).collect())
        }
        (None, _) => Ok((0..n).map(|r| vec![r * have / n]).collect()),
    }
}

/// The CPUs near a task's GPUs, and how to name them in messages.
fn local_cpus(gpus: &[Gpu], mine: &[usize]) -> (Option<CpuSet>, String) {
    let mut set = CpuSet::new();
    let mut names = Vec::new();
    for &g in mine {
        set |= &gpus[g].locality;
        names.push(format!("gpu:{} ({})", g, gpus[g].attached_to));
    }
    (Some(set), format!(" near {}", names.join(", ")))
}

/// The CPUs of the nearest NUMA node that has none of the task's GPUs: smallest hwloc
/// NUMA distance from the GPUs' own NUMA nodes when the topology has a matrix, ties (and
/// topologies without one) broken by the next NUMA node after the GPU's in logical order.
fn remote_cpus(
    topology: &Topology,
    gpus: &[Gpu],
    mine: &[usize],
    origin: &str,
) -> Result<(Option<CpuSet>, String), DistributeError> {
    let (near, _) = local_cpus(gpus, mine);
    let near = near.unwrap_or_default();
    let numas = topology.objects(ObjType::Numa);
    let own: Vec<&TopologyObject> = numas
        .iter()
        .copied()
        .filter(|n| n.cpuset().is_some_and(|s| s.intersects(&near)))
        .collect();
    let first_own = own.first().map_or(0, |n| n.logical_index());
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
    let best = numas
        .iter()
        .filter(|n| !n.cpuset().is_some_and(|s| s.intersects(&near)))
        .min_by_key(|n| {
            (
                distance(n),
                (n.logical_index() + count - first_own) % count.max(1),
            )
        });
    match best {
        Some(numa) => Ok((
            numa.cpuset().map(|s| s.clone_target()),
            format!(
                " of {} (remote from gpu:{})",
                object_label(numa),
                mine.first().copied().unwrap_or(0)
            ),
        )),
        None => Err(DistributeError::NoRemoteNuma {
            origin: origin.to_owned(),
            gpu: mine.first().copied().unwrap_or(0),
            numa: count,
            source_desc: topology.source().to_string(),
        }),
    }
}

impl fmt::Display for Locality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Locality::Any => "any",
            Locality::GpuLocal => "gpu-local",
            Locality::GpuRemote => "gpu-remote",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
