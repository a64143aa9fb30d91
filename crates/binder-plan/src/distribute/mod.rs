//! Turns a selection into every local task's binding: the `Plan` (SEMANTICS §4, §5, §9–11).
//!
//! Without slots, the pool is the list of unit objects (cores or PUs) that hold the
//! selected CPUs, in logical order; it is reversed and reordered as asked, then dealt to
//! the `n` local tasks in equal shares ([`pool`]). With slots, each task gets one whole
//! slot ([`slots`]). Then each task's cpuset is widened to `bind: numa|…` objects, and its
//! GPUs and NICs are chosen to match its CPUs ([`devices`]). Every task of a node computes
//! this same plan independently, so nothing here may depend on anything but the topology
//! and the request.
//! With `gpu-local`/`gpu-remote`, tasks are first grouped by the CPUs their GPUs ask for
//! and each group is dealt its own, disjoint part of the pool.

pub mod devices;
mod pool;
pub mod slots;

use std::fmt;

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::object::TopologyObject;

use crate::gpu::Gpu;
use crate::nic::Nic;
use crate::select::Selection;
use crate::shape::{ObjType, Pattern};
use crate::topology::Topology;
use crate::unit::{Unit, UnitChoice};

pub use pool::deal;

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
    /// The node's performance PUs, when it has more than one kind of core.
    pub performance: Option<CpuSet>,
    /// `options.kind: balanced`: deal each kind of core separately (SEMANTICS §11).
    pub balanced: bool,
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
    fn of(topology: &Topology, obj: &TopologyObject) -> UnitObj {
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
    pub const LEVELS: [ObjType; 3] = [ObjType::Package, ObjType::Numa, ObjType::L3];

    /// The count for one of [`Spans::LEVELS`] (0 for any other type).
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
}

impl Plan {
    /// The unit of local rank `rank`: its rule's, else the plan's.
    pub fn unit_of(&self, rank: usize) -> UnitChoice {
        self.tasks[rank].unit.unwrap_or(self.unit)
    }
}

/// The selection cannot be dealt to the tasks.
#[derive(Debug, thiserror::Error)]
pub enum DistributeError {
    /// Per-rank rules took every CPU before the other ranks were planned.
    #[error("{origin}: the `ranks:` rules ({rules}) take every cpu, leaving none for the other {rest} rank(s); give the rules fewer resources or add `bind: none` ranks")]
    RulesTakeAll {
        /// The shape.
        origin: String,
        /// The rules' keys.
        rules: String,
        /// How many ranks are left to plan.
        rest: usize,
    },
    /// Fewer units than tasks.
    #[error(
        "{origin}: {tasks} tasks but only {units} {unit} in the pool{scope}; run fewer tasks per node{finer}",
        finer = if *.unit == Unit::Core {
            ", select more resources, or bind to a finer unit (`bind: pu`)"
        } else {
            " or select more resources"
        }
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
    /// A `bind:` width that some chosen units lie outside of (SEMANTICS §11).
    #[error("{origin}: `bind: {width}` cannot widen {units}: {why}")]
    WidthMissing {
        /// The shape file.
        origin: String,
        /// The width asked for, as hwloc names it.
        width: String,
        /// How many units lie outside, and which (`16 unit(s), core:16-31`).
        units: String,
        /// Why (the node has none of that type, or these units lie outside them) and a
        /// width that covers them, or what else to do.
        why: String,
    },
    /// `interleave` with unit core.
    #[error(
        "{origin}: pattern `interleave` deals PUs of cores and needs unit pu, but the unit is {unit} ({rule}); {fix}",
        fix = if *.unit == Unit::None {
            "`bind: none` deals nothing, so drop `pattern: interleave` (or bind to `pu`)"
        } else {
            "add `bind: pu` to `options` or use `packed`/`scatter`"
        }
    )]
    InterleaveNeedsPu {
        /// The shape file.
        origin: String,
        /// The unit the shape has.
        unit: Unit,
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
    /// More tasks than slots.
    #[error("{origin}: {tasks} tasks but the shape has only {slots} slot(s) on {source_desc} ({detail}); run at most {slots} task{s} per node, or ask for more, smaller slots", s = if *.slots == 1 { "" } else { "s" })]
    TooFewSlots {
        /// The shape file.
        origin: String,
        /// Local tasks.
        tasks: usize,
        /// Slots taken.
        slots: usize,
        /// Where the slots are (`2 in package:0, 1 in package:1`).
        detail: String,
        /// The topology source.
        source_desc: String,
    },
    /// A slot whose `with` took devices but no CPUs.
    #[error("{origin}: slot {slot} (in {within}) has no CPUs, only devices; add a `core` or `pu` item inside the slot so its task has CPUs to run on")]
    SlotWithoutCpus {
        /// The shape file.
        origin: String,
        /// The slot, by position.
        slot: usize,
        /// Its parent.
        within: String,
    },
    /// `gpu-local` tasks whose GPUs' localities overlap cannot all get CPUs of their own.
    #[error("{origin}: `gpu-local` cannot give {tasks} task(s){scope} CPUs of their own: {units} {unit} are left there after tasks with narrower GPU localities took theirs; give each task GPUs near one another (lower `gpus-per-task`) or run fewer tasks")]
    OverlappingLocality {
        /// The shape file.
        origin: String,
        /// Tasks in the group.
        tasks: usize,
        /// Units left to them.
        units: usize,
        /// The unit.
        unit: Unit,
        /// The GPUs, for the message (` near gpu:2 (package:0), gpu:3 (package:1)`).
        scope: String,
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
    nics: Vec<Nic>,
    request: &Request,
    origin: &str,
) -> Result<Plan, DistributeError> {
    let n = request.local_size.max(1);
    if request.pattern == Pattern::Interleave && request.unit.unit != Unit::Pu {
        return Err(DistributeError::InterleaveNeedsPu {
            origin: origin.to_owned(),
            unit: request.unit.unit,
            rule: request.unit.rule.to_string(),
        });
    }
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
                gpus: Vec::new(),
                nics: Vec::new(),
                slot: None,
                spans: Spans::default(),
                ge_topology: String::new(),
                rule: None,
                unit: None,
            })
            .collect(),
        unused: Vec::new(),
        gpus,
        nics,
        slots: selection.slots.len(),
        unused_slots: Vec::new(),
        levels: Vec::new(),
        ge: None,
        kinds: None,
    };
    if let Some(preset) = &selection.preset {
        deal_preset(topology, preset, request, &mut plan);
    } else if selection.slots.is_empty() {
        deal_pool(topology, selection, request, &mut plan, origin)?;
    } else {
        deal_slots(topology, selection, request, &mut plan, origin)?;
    }
    if let Some(performance) = &request.performance {
        plan.kinds = Some(count_kinds(&plan, performance, request.balanced));
    }
    if let Some(width) = request.unit.width {
        widen(topology, width, &mut plan, origin)?;
    }
    // GPUs follow CPUs: tasks not placed by their GPUs take the GPUs nearest their cpuset.
    if request.locality == Locality::Any {
        if let Some(g) = request.gpus_per_task {
            let need: Vec<usize> = (0..n).filter(|&r| plan.tasks[r].gpus.is_empty()).collect();
            let taken: Vec<usize> = plan.tasks.iter().flat_map(|t| t.gpus.clone()).collect();
            let free: Vec<usize> = (0..plan.gpus.len())
                .filter(|g| !taken.contains(g))
                .collect();
            // The GPUs left after slots took theirs (all of them without slots).
            check_gpu_count(topology, free.len(), need.len(), g, origin)?;
            let cpus: Vec<CpuSet> = need.iter().map(|&r| plan.tasks[r].cpuset.clone()).collect();
            let localities: Vec<CpuSet> = free
                .iter()
                .map(|&i| plan.gpus[i].locality.clone())
                .collect();
            for (&r, mine) in need.iter().zip(devices::follow_cpus(&cpus, &localities, g)) {
                plan.tasks[r].gpus = mine.into_iter().map(|i| free[i]).collect();
            }
        }
    }
    // NICs: each task's nearest among those the shape named (its slot's, when it has any).
    if !selection.nics.is_empty() {
        for task in &mut plan.tasks {
            let own = task
                .slot
                .map(|s| selection.slots[s].nics.clone())
                .filter(|nics| !nics.is_empty())
                .unwrap_or_else(|| selection.nics.clone());
            let candidates: Vec<(usize, &CpuSet)> =
                own.iter().map(|&i| (i, &plan.nics[i].locality)).collect();
            task.nics = devices::nearest(&task.cpuset, &candidates);
        }
    }
    // Objects with the same CPUs count once: a KNL cluster's DDR and MCDRAM NUMA nodes
    // (or a node's DRAM and HBM) are one place for the CPUs.
    let levels: Vec<Vec<CpuSet>> = Spans::LEVELS
        .iter()
        .map(|&l| {
            let mut sets: Vec<CpuSet> = Vec::new();
            for set in topology.objects(l).iter().filter_map(|o| o.cpuset()) {
                if !sets.contains(&*set) {
                    sets.push(set.clone_target());
                }
            }
            sets
        })
        .collect();
    for task in &mut plan.tasks {
        let touches = |sets: &[CpuSet]| sets.iter().filter(|s| s.intersects(&task.cpuset)).count();
        task.spans = Spans {
            package: touches(&levels[0]),
            numa: touches(&levels[1]),
            l3: touches(&levels[2]),
        };
    }
    Ok(plan)
}

/// CPUs chosen before distribution (a Grid Engine request): each task's units are the
/// unit objects holding its CPUs, each with only the CPUs granted (one OpenMP place each).
fn deal_preset(topology: &Topology, preset: &[CpuSet], request: &Request, plan: &mut Plan) {
    let Some(unit_type) = request.unit.unit.obj_type() else {
        return;
    };
    let owners = topology.pu_owners(unit_type);
    for (task, cpus) in plan.tasks.iter_mut().zip(preset) {
        task.cpuset = cpus.clone();
        task.units = pool::units_in(&owners, cpus)
            .into_iter()
            .map(|u| {
                let mut unit = UnitObj::of(topology, u);
                unit.pus.retain(|&p| cpus.is_set(p));
                unit
            })
            .collect();
    }
}

/// Without slots: the pool dealt in equal shares, per GPU-locality group (SEMANTICS §4, §9).
fn deal_pool(
    topology: &Topology,
    selection: &Selection<'_>,
    request: &Request,
    plan: &mut Plan,
    origin: &str,
) -> Result<(), DistributeError> {
    let n = plan.tasks.len();
    if request.locality != Locality::Any {
        let task_gpus = assign_gpus(topology, &plan.gpus, request, n, origin)?;
        for (task, gpus) in plan.tasks.iter_mut().zip(task_gpus) {
            task.gpus = gpus;
        }
    }
    let Some(unit_type) = request.unit.unit.obj_type() else {
        return Ok(());
    };
    let pool = pool::pool(
        topology,
        &selection.cpuset(),
        unit_type,
        request.pattern,
        request.reverse,
    );
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
    let unit_sets: Vec<CpuSet> = pool
        .iter()
        .map(|u| u.cpuset().map(|s| s.clone_target()).unwrap_or_default())
        .collect();
    let parts: Vec<Vec<usize>> = match request.locality {
        Locality::Any => vec![(0..pool.len()).collect()],
        // gpu-local: disjoint parts, narrow localities first (SEMANTICS §11).
        Locality::GpuLocal => {
            let localities: Vec<CpuSet> = groups
                .iter()
                .map(|(w, _, _)| w.clone().unwrap_or_default())
                .collect();
            devices::local_parts(&unit_sets, &localities)
        }
        // gpu-remote: each group its NUMA node, shared with any other group sent there.
        Locality::GpuRemote => groups
            .iter()
            .map(|(w, _, _)| {
                let w = w.clone().unwrap_or_default();
                (0..pool.len())
                    .filter(|&i| w.includes(&unit_sets[i]))
                    .collect()
            })
            .collect(),
    };
    let mut used = vec![false; pool.len()];
    for ((within, scope, ranks), part) in groups.iter().zip(&parts) {
        // `kind: balanced`: each kind of core is dealt on its own, performance cores first,
        // so every task gets as many of each; a kind with fewer units than tasks goes unused.
        let kinds: Vec<Vec<usize>> = match (&request.performance, request.balanced) {
            (Some(p), true) => {
                let (fast, slow): (Vec<usize>, Vec<usize>) =
                    part.iter().partition(|&&i| p.includes(&unit_sets[i]));
                vec![fast, slow]
            }
            _ => vec![part.clone()],
        };
        let dealt: Vec<(Vec<Vec<usize>>, &Vec<usize>)> = kinds
            .iter()
            .map(|k| (deal(k.len(), ranks.len(), request.pattern), k))
            .filter(|(shares, _)| !shares.is_empty())
            .collect();
        if dealt.is_empty() {
            let units_inside = within.as_ref().map_or(pool.len(), |w| {
                unit_sets.iter().filter(|s| w.includes(*s)).count()
            });
            if request.locality == Locality::GpuLocal && units_inside >= ranks.len() {
                return Err(DistributeError::OverlappingLocality {
                    origin: origin.to_owned(),
                    tasks: ranks.len(),
                    units: part.len(),
                    unit: request.unit.unit,
                    scope: scope.clone(),
                });
            }
            return Err(DistributeError::TooFewUnits {
                origin: origin.to_owned(),
                tasks: ranks.len(),
                units: part.len(),
                unit: request.unit.unit,
                scope: scope.clone(),
            });
        }
        for (shares, part) in dealt {
            for (share, &r) in shares.iter().zip(ranks) {
                let task = &mut plan.tasks[r];
                for &k in share {
                    let obj = pool[part[k]];
                    used[part[k]] = true;
                    task.units.push(UnitObj::of(topology, obj));
                    task.cpuset |= &unit_sets[part[k]];
                }
            }
        }
    }
    plan.unused = pool
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(obj, _)| UnitObj::of(topology, obj))
        .collect();
    Ok(())
}

/// With slots: task r gets one whole slot, in the pattern's slot order (SEMANTICS §10).
fn deal_slots(
    topology: &Topology,
    selection: &Selection<'_>,
    request: &Request,
    plan: &mut Plan,
    origin: &str,
) -> Result<(), DistributeError> {
    let n = plan.tasks.len();
    let slots = &selection.slots;
    if n > slots.len() {
        let mut detail: Vec<(String, usize)> = Vec::new();
        for slot in slots {
            match detail.iter_mut().find(|(w, _)| *w == slot.within) {
                Some((_, c)) => *c += 1,
                None => detail.push((slot.within.clone(), 1)),
            }
        }
        let mut text: Vec<String> = detail
            .iter()
            .take(6)
            .map(|(w, c)| format!("{c} in {w}"))
            .collect();
        if detail.len() > 6 {
            text.push(format!("… {} parents in all", detail.len()));
        }
        return Err(DistributeError::TooFewSlots {
            origin: origin.to_owned(),
            tasks: n,
            slots: slots.len(),
            detail: text.join(", "),
            source_desc: topology.source().to_string(),
        });
    }
    let parents: Vec<usize> = slots.iter().map(|s| s.parent).collect();
    let order = slots::order(&parents, request.pattern, request.reverse);
    let owners = request
        .unit
        .unit
        .obj_type()
        .map(|unit| topology.pu_owners(unit));
    for (r, &s) in order.iter().take(n).enumerate() {
        let slot = &slots[s];
        let task = &mut plan.tasks[r];
        task.slot = Some(s);
        task.gpus.clone_from(&slot.gpus);
        let Some(owners) = &owners else { continue };
        if slot.cpus.is_empty() {
            return Err(DistributeError::SlotWithoutCpus {
                origin: origin.to_owned(),
                slot: s,
                within: slot.within.clone(),
            });
        }
        task.units = pool::units_in(owners, &slot.cpus)
            .into_iter()
            .map(|u| UnitObj::of(topology, u))
            .collect();
        task.cpuset = slot.cpus.clone();
    }
    for &s in &order[n..] {
        plan.unused_slots.push(UnusedSlot {
            index: s,
            within: slots[s].within.clone(),
        });
        if let Some(owners) = &owners {
            plan.unused.extend(
                pool::units_in(owners, &slots[s].cpus)
                    .into_iter()
                    .map(|u| UnitObj::of(topology, u)),
            );
        }
    }
    Ok(())
}

/// `bind: package|numa|…`: each task's cpuset becomes the whole objects of `width` that
/// its cpuset touches (SEMANTICS §11); its units stay as dealt. A unit outside every
/// object of that type (a die without memory has no NUMA node, an E-core no L3) refuses
/// the plan, as Open MPI does: a width is never silently dropped.
fn widen(
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

/// Each task's units on performance cores and on the others.
fn count_kinds(plan: &Plan, performance: &CpuSet, balanced: bool) -> KindCounts {
    let fast = |u: &UnitObj| u.pus.iter().all(|&p| performance.is_set(p));
    let tasks = &plan.tasks;
    KindCounts {
        unused_performance: plan.unused.iter().filter(|u| fast(u)).count(),
        balanced,
        performance: tasks
            .iter()
            .map(|t| t.units.iter().filter(|u| fast(u)).count())
            .collect(),
        efficiency: tasks
            .iter()
            .map(|t| t.units.iter().filter(|u| !fast(u)).count())
            .collect(),
    }
}

/// `width` as a shape writes it after `bind:`.
fn width_word(width: ObjType) -> &'static str {
    match width {
        ObjType::L2 => "l2",
        ObjType::L3 => "l3",
        other => other.hwloc_name(),
    }
}

/// The cpusets of the objects of `width` that hold a CPU.
fn width_sets(topology: &Topology, width: ObjType) -> Vec<CpuSet> {
    topology
        .objects(width)
        .iter()
        .filter_map(|o| o.cpuset().map(|s| s.clone_target()))
        .collect()
}

/// What to write instead of `bind: <width>` so that every CPU in `cpus` is covered: the
/// nearest coarser width that covers them, else the nearest finer one, else the unit alone.
fn covering_width(topology: &Topology, width: ObjType, cpus: &CpuSet) -> String {
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

fn too_few_gpus(
    topology: &Topology,
    have: usize,
    n: usize,
    g: usize,
    origin: &str,
) -> DistributeError {
    let hint = if have == 0 {
        "; binder finds GPUs as PCI devices, so the topology must include I/O (`lstopo --of xml` does by default)"
    } else {
        "; lower `gpus-per-task` or run fewer tasks per node"
    };
    DistributeError::TooFewGpus {
        origin: origin.to_owned(),
        tasks: n,
        per_task: g,
        need: n.saturating_mul(g),
        have,
        source_desc: topology.source().to_string(),
        hint: hint.to_owned(),
    }
}

fn check_gpu_count(
    topology: &Topology,
    have: usize,
    n: usize,
    g: usize,
    origin: &str,
) -> Result<(), DistributeError> {
    match n.checked_mul(g) {
        Some(need) if need <= have => Ok(()),
        _ => Err(too_few_gpus(topology, have, n, g, origin)),
    }
}

/// Each task's GPUs under `gpu-local`/`gpu-remote`: `g` consecutive GPUs per task in bus
/// order; without `g`, the GPUs are shared out like CPUs (`G div n` each, or consecutive
/// tasks sharing one GPU when there are more tasks than GPUs).
fn assign_gpus(
    topology: &Topology,
    gpus: &[Gpu],
    request: &Request,
    n: usize,
    origin: &str,
) -> Result<Vec<Vec<usize>>, DistributeError> {
    let have = gpus.len();
    match request.gpus_per_task {
        Some(g) => {
            check_gpu_count(topology, have, n, g, origin)?;
            Ok((0..n).map(|r| (g * r..g * r + g).collect()).collect())
        }
        None if have == 0 => Err(DistributeError::TooFewGpus {
            origin: origin.to_owned(),
            tasks: n,
            per_task: 1,
            need: n,
            have,
            source_desc: topology.source().to_string(),
            hint: "; `gpu-local`/`gpu-remote` need GPUs in the topology".to_owned(),
        }),
        None if n <= have => {
            let g = have / n;
            Ok((0..n).map(|r| (g * r..g * r + g).collect()).collect())
        }
        None => Ok((0..n).map(|r| vec![r * have / n]).collect()),
    }
}

/// The CPUs near a task's GPUs, and how to name them in messages.
fn local_cpus(gpus: &[Gpu], mine: &[usize]) -> (Option<CpuSet>, String) {
    let mut set = CpuSet::new();
    let mut names = Vec::new();
    for &g in mine {
        set |= &gpus[g].locality;
        names.push(format!("gpu:{} ({})", gpus[g].number, gpus[g].attached_to));
    }
    (Some(set), format!(" near {}", names.join(", ")))
}

/// The CPUs of the nearest NUMA node that has none of the task's GPUs.
fn remote_cpus(
    topology: &Topology,
    gpus: &[Gpu],
    mine: &[usize],
    origin: &str,
) -> Result<(Option<CpuSet>, String), DistributeError> {
    let (near, _) = local_cpus(gpus, mine);
    let first = mine.first().map_or(0, |&g| gpus[g].number);
    match devices::remote_numa(topology, &near.unwrap_or_default()) {
        Some(numa) => Ok((
            numa.cpuset().map(|s| s.clone_target()),
            format!(" of {} (remote from gpu:{first})", topology.label(numa)),
        )),
        None => Err(DistributeError::NoRemoteNuma {
            origin: origin.to_owned(),
            gpu: first,
            numa: topology.objects(ObjType::Numa).len(),
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
