//! Turns a selection into every local task's binding: the `Plan` (SEMANTICS §4, §5, §9–11).
//!
//! Without slots, the pool is the list of unit objects (cores or PUs) that hold the
//! selected CPUs, in logical order; it is reversed and reordered as asked, then dealt to
//! the `n` local tasks in equal shares (`pool`). With slots, each task gets one whole
//! slot (`slots`). Then each task's cpuset is widened to `bind: numa|…` objects, and its
//! GPUs and NICs are chosen to match its CPUs (`devices`). Every task of a node computes
//! this same plan independently, so nothing here may depend on anything but the topology
//! and the request.
//! With `gpu-local`/`gpu-remote`, tasks are first grouped by the CPUs their GPUs ask for
//! and each group is dealt its own, disjoint part of the pool.

pub(crate) mod devices;
mod error;
mod gpus;
mod plan;
mod pool;
pub(crate) mod slots;
mod torch;
mod width;

use crate::cpuset::CpuSet;

use crate::gpu::Gpu;
use crate::nic::Nic;
use crate::select::Selection;
use crate::shape::Pattern;
use crate::topology::Topology;
use crate::unit::Unit;

pub use error::DistributeError;
use gpus::{assign_gpus, check_gpu_count, local_cpus, remote_cpus};
pub(crate) use plan::Request;
pub use plan::{KindCounts, Locality, Plan, Spans, Task, UnitObj, UnusedSlot};
pub(crate) use pool::deal;
use width::widen;

/// Deals the selection to `request.local_size` tasks.
pub(crate) fn distribute(
    topology: &Topology,
    selection: &Selection<'_>,
    gpus: Vec<Gpu>,
    nics: Vec<Nic>,
    request: &Request,
    origin: &str,
) -> Result<Plan, DistributeError> {
    let n = request.local_size.max(1);
    let interleave = match request.pattern {
        Pattern::Interleave => true,
        Pattern::Packed | Pattern::Scatter | Pattern::Balanced => false,
    };
    if interleave && request.unit.unit != Unit::Pu {
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
        numa_binding: request.numa_binding,
    };
    if let Some(mode) = request.numa_binding {
        torch::deal(topology, &selection.cpuset(), mode, &mut plan, origin)?;
    } else if let Some(preset) = &selection.preset {
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
    if request.unit.slurm_auto {
        width::slurm_auto(topology, &mut plan, origin)?;
    }
    // GPUs follow CPUs: tasks not placed by their GPUs take the GPUs nearest their cpuset.
    if request.locality == Locality::Any && request.numa_binding.is_none() {
        if let Some(g) = request.gpus_per_task {
            let need: Vec<usize> = (0..n).filter(|&r| plan.tasks[r].gpus.is_empty()).collect();
            let taken: Vec<usize> = plan.tasks.iter().flat_map(|t| t.gpus.clone()).collect();
            let free: Vec<usize> = (0..plan.gpus.len())
                .filter(|g| !taken.contains(g))
                .collect();
            // The GPUs left after slots took theirs (all of them without slots).
            check_gpu_count(topology, request, free.len(), need.len(), g, origin)?;
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
            for o in topology.objects(l) {
                let set = crate::topology::cpus(o);
                if !set.is_empty() && !sets.contains(&set) {
                    sets.push(set);
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
    let unit_sets: Vec<CpuSet> = pool.iter().map(|u| crate::topology::cpus(u)).collect();
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
                unit_sets.iter().filter(|s| w.includes(s)).count()
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
                // `bind: pu` helps only where a unit has more than one PU (SMT).
                finer: unit_sets.iter().any(|s| s.weight() > 1),
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
    let order = slots::order(&parents, request.pattern, request.reverse, n);
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
