//! What distributing produces: the [`Plan`] (every local task's units, CPUs, GPUs and
//! NICs, and what was left over) and the request it answers.

use std::fmt;

use crate::cpuset::CpuSet;
use hwlocality::object::TopologyObject;

use crate::gpu::Gpu;
use crate::nic::Nic;
use crate::shape::{ObjType, Pattern};
use crate::topology::Topology;
use crate::unit::UnitChoice;

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
#[derive(Debug, Clone)]
pub(crate) struct Request {
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
    /// The node's performance PUs, when it has more than one kind of core.
    pub performance: Option<CpuSet>,
    /// `options.kind: balanced`: deal each kind of core separately (SEMANTICS §11).
    pub balanced: bool,
    /// Why the job may use fewer GPUs than the node has (its allocation, other jobs), for
    /// a refusal that would otherwise blame the topology.
    pub gpus_note: Option<String>,
    /// `options.numa-binding`: PyTorch's rules place every task (`torch`).
    pub numa_binding: Option<crate::shape::NumaBinding>,
}

/// How many units of each kind of core every task got, on a node with more than one
/// kind (SEMANTICS §11): the dry-run says when they are unequal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindCounts {
    /// Whether each kind was dealt separately (`options.kind: balanced`).
    pub balanced: bool,
    /// Per task, its units on performance cores.
    pub performance: Vec<usize>,
    /// Per task, its other units.
    pub efficiency: Vec<usize>,
    /// Units on performance cores that no task got.
    pub unused_performance: usize,
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
    /// `obj` with its logical index on the whole node (also when `topology` has other
    /// jobs' or reserved PUs taken out, which hwloc renumbers).
    pub(super) fn of(topology: &Topology, obj: &TopologyObject) -> UnitObj {
        UnitObj {
            logical: topology.logical_index(obj),
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
    /// Its nearest NICs among those the shape named, as indices into [`Plan::nics`].
    pub nics: Vec<usize>,
    /// The slot it got, by position in selection order (shapes with slots only).
    pub slot: Option<usize>,
    /// How many packages, NUMA nodes and L3 caches its cpuset touches.
    pub spans: Spans,
    /// The node's topology string with this task's units lowercase (SEMANTICS §12): set
    /// by a Grid Engine request's plan, else by [`crate::fill_ge_topology`] (reports only).
    pub ge_topology: String,
    /// The `ranks:` rule that planned this task (its key, `0` or `1-2`), if one did.
    pub rule: Option<String>,
    /// The rule's unit, when a rule planned the task (else the plan's).
    pub unit: Option<UnitChoice>,
}

impl Task {
    /// The CPUs whose NUMA nodes its memory policy uses: its own, or for an unbound task
    /// (`bind: none`) every allowed one (a launch uses the affinity it inherited).
    pub(crate) fn memory_cpus(&self, topology: &Topology) -> CpuSet {
        if self.units.is_empty() {
            topology.allowed()
        } else {
            self.cpuset.clone()
        }
    }
}

/// How many objects of each container level a task's cpuset touches (SEMANTICS §10);
/// objects with identical cpusets (a cluster's DDR and MCDRAM NUMA nodes) count once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spans {
    /// Packages (sockets).
    pub package: usize,
    /// NUMA nodes with CPUs.
    pub numa: usize,
    /// L3 caches.
    pub l3: usize,
}

impl Spans {
    /// The levels spans are counted for, in report order.
    pub(crate) const LEVELS: [ObjType; 3] = [ObjType::Package, ObjType::Numa, ObjType::L3];

    /// The count for one of `Spans::LEVELS` (0 for any other type).
    pub fn of(&self, level: ObjType) -> usize {
        match level {
            ObjType::Package => self.package,
            ObjType::Numa => self.numa,
            ObjType::L3 => self.l3,
            _ => 0,
        }
    }
}

/// A slot no task got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusedSlot {
    /// Its position in selection order.
    pub index: usize,
    /// Its parent (`numa:3`).
    pub within: String,
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
    /// The node's NICs (empty unless the shape names a NIC).
    pub nics: Vec<Nic>,
    /// Number of slots the shape took (0 without slots).
    pub slots: usize,
    /// Slots no task got.
    pub unused_slots: Vec<UnusedSlot>,
    /// The container levels the shape selects (package, numa, l3): a task whose cpuset
    /// touches more than one object of such a level is flagged in the text form.
    pub levels: Vec<ObjType>,
    /// What a Grid Engine request gave the node, when one placed the tasks.
    pub ge: Option<crate::ge::Summary>,
    /// Units of each core kind per task, on a node with more than one kind.
    pub kinds: Option<KindCounts>,
    /// `options.numa-binding`, when PyTorch's rules placed the tasks (their workers share
    /// a node or package by design).
    pub numa_binding: Option<crate::shape::NumaBinding>,
}

impl Plan {
    /// This plan's tasks dealt again from the first until there are `size` (task `r`
    /// gets what task `r mod n` got): `oversubscribe`'s plan, made for as many tasks as
    /// there are units.
    pub(crate) fn dealt_again(mut self, size: usize) -> Plan {
        let n = self.tasks.len().max(1);
        let tasks: Vec<Task> = (0..size)
            .map(|r| Task {
                local_rank: r,
                ..self.tasks[r % n].clone()
            })
            .collect();
        self.tasks = tasks;
        self
    }

    /// This plan's tasks dealt again in blocks until there are `size`: task `b`'s block
    /// holds `size / n` consecutive ranks, one more for the first `size mod n` (`pattern:
    /// balanced`'s oversubscription, ranks filling one unit before the next, as Open MPI
    /// 5's FILL ranking).
    pub(crate) fn dealt_in_blocks(mut self, size: usize) -> Plan {
        let n = self.tasks.len().max(1);
        let (each, extra) = (size / n, size % n);
        let tasks: Vec<Task> = (0..size)
            .map(|r| {
                // The first `extra` blocks hold each + 1 ranks.
                let long = extra * (each + 1);
                let b = if r < long {
                    r / (each + 1)
                } else {
                    extra + (r - long) / each.max(1)
                };
                Task {
                    local_rank: r,
                    ..self.tasks[b.min(n - 1)].clone()
                }
            })
            .collect();
        self.tasks = tasks;
        self
    }

    /// Whether two tasks were dealt one unit (an oversubscribed plan). Tasks whose
    /// binding width overlaps (`bind: numa` around distinct cores) were not.
    pub fn oversubscribed(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.tasks
            .iter()
            .flat_map(|t| t.units.iter().map(|u| u.pus.clone()))
            .any(|pus| !seen.insert(pus))
    }

    /// The unit of local rank `rank`: its rule's, else the plan's.
    pub fn unit_of(&self, rank: usize) -> UnitChoice {
        self.tasks[rank].unit.unwrap_or(self.unit)
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
