//! One job's plan: a shape without per-rank rules (or one rule's shape) on the topology,
//! around what is held; a Grid Engine request walks the node's tree, a YAML shape selects
//! and distributes.

use crate::cpuset::CpuSet;

use super::PlanRequest;
use crate::distribute::{self, Locality, Plan, Request};
use crate::error::PlanError;
use crate::shape::{self, Bind};
use crate::{ge, gpu, nic, pack, select, unit};

/// Plans `request` (whose shape has no `ranks:`, or is one rule's) with the GPUs (bus ids)
/// `held_gpus` taken by earlier rules, recording each request's matches in `trace`.
pub(super) fn plan(
    request: &PlanRequest<'_>,
    held_gpus: &[String],
    trace: Option<&mut Vec<select::Step>>,
) -> Result<Plan, PlanError> {
    let PlanRequest {
        shape,
        origin,
        topology,
        local_size,
        gpus_per_task,
        held,
        grant,
    } = *request;
    let mut ge_request = shape
        .options
        .ge
        .as_deref()
        .map(ge::Request::parse)
        .transpose()?;
    if let Some(ge_request) = ge_request.as_mut().filter(|_| !held.is_empty()) {
        pack::into_request(ge_request, shape.options.pack.unwrap_or_default());
    }
    // The Grid Engine tree only when something needs it: a request, reservations, or a
    // topology string's taken units (not on a plain launch).
    let tree =
        if ge_request.is_some() || !shape.options.reserve.is_empty() || topology.is_ge_string() {
            let mut tree = topology.ge_tree();
            ge::reserve::apply(&mut tree, &shape.options.reserve)?;
            ge::reserve::take(&mut tree, held);
            Some(tree)
        } else {
            None
        };
    let mut taken = tree.as_ref().map_or_else(Vec::new, ge::Tree::used_pus);
    taken.extend_from_slice(held);
    let whole = topology;
    // The node's performance PUs, when it has more than one kind of core (SEMANTICS §11).
    let performance = crate::topology::performance_pus(whole.hw());
    let without;
    let topology = if ge_request.is_none() && !taken.is_empty() {
        without = topology.without(&taken)?;
        &without
    } else {
        topology
    };
    let mut gpus_note = None;
    let (gpus, nics) = if topology.has_io() {
        // Every GPU of the node, numbered over the node (SEMANTICS §9), whatever was cut.
        let all = gpu::discover(topology);
        let node = all.len();
        let visible = grant.visible(all);
        if let Some(why) = grant.misnamed(&visible) {
            return Err(PlanError::Gpus(why));
        }
        let mut gpus = grant.apply(visible);
        gpus.retain(|g| !held_gpus.contains(&g.claim_id()));
        let gpus = near_the_job(gpus, grant, &topology.allowed());
        if let Some(why) = grant.uuid_missing(&gpus) {
            return Err(PlanError::Gpus(why));
        }
        gpus_note = grant.why_fewer(node, &gpus);
        (gpus, nic::discover(topology))
    } else {
        (Vec::new(), Vec::new())
    };
    let mut unit = unit::choose(shape);
    let devices = select::Devices {
        gpus: &gpus,
        nics: &nics,
    };
    let mut placed = None;
    let selection = match (&ge_request, &tree) {
        (Some(ge_request), Some(tree)) => {
            let (placement, seen) = ge::place(tree, ge_request, local_size)?;
            let sets: Vec<CpuSet> = placement
                .tasks
                .iter()
                .map(|t| {
                    let mut set = CpuSet::new();
                    for pu in ge::pus(&seen, t) {
                        set.set(pu);
                    }
                    set
                })
                .collect();
            unit.unit = if placement.tasks.iter().all(Vec::is_empty) {
                unit::Unit::None
            } else if placement.threads {
                unit::Unit::Pu
            } else {
                unit::Unit::Core
            };
            unit.rule = unit::Rule::Explicit;
            placed = Some((ge_request.clone(), placement, seen));
            select::Selection {
                picks: Vec::new(),
                nics: Vec::new(),
                slots: Vec::new(),
                preset: Some(sets),
            }
        }
        _ => {
            // Slots are cut from binding units; with `bind: none` they are counted in cores.
            let unit_type = unit.unit.obj_type().unwrap_or(shape::ObjType::Core);
            let kinds = select::Kinds {
                default: shape
                    .options
                    .kind
                    .filter(|k| *k != shape::CoreKind::Balanced),
                performance: performance.clone(),
            };
            select::select_traced(
                topology,
                devices,
                &shape.resources,
                unit_type,
                &kinds,
                origin,
                trace,
            )?
        }
    };
    let locality = match shape.options.bind {
        Some(Bind::GpuLocal) => Locality::GpuLocal,
        Some(Bind::GpuRemote) => Locality::GpuRemote,
        _ => Locality::Any,
    };
    let request_d = Request {
        unit,
        pattern: shape.pattern(),
        reverse: shape.reverse(),
        local_size,
        gpus_per_task: gpus_per_task.or(shape.options.gpus_per_task.map(|g| g.get() as usize)),
        locality,
        performance,
        balanced: shape.options.kind == Some(shape::CoreKind::Balanced),
        gpus_note,
        numa_binding: shape.options.numa_binding,
    };
    let mut plan = distribute::distribute(topology, &selection, gpus, nics, &request_d, origin)?;
    plan.levels = distribute::Spans::LEVELS
        .into_iter()
        .filter(|level| shape.items().iter().any(|r| r.kind == *level))
        .collect();
    // A Grid Engine request's topology strings come with its placement (SEMANTICS §12).
    if let Some((ge_request, placement, seen)) = placed {
        for (r, task) in plan.tasks.iter_mut().enumerate() {
            let cores = placement.cores.as_ref().map(|c| &c[r][..]);
            task.ge_topology = ge::job_string(&seen, &placement.tasks[r], cores);
        }
        let all: Vec<usize> = placement.tasks.concat();
        let cores: Option<Vec<usize>> = placement.cores.as_ref().map(|c| c.concat());
        plan.ge = Some(ge::Summary {
            request: ge_request.text.clone(),
            instance: ge_request.instance,
            job_topology: ge::job_string(&seen, &all, cores.as_deref()),
            job_cpus: ge::pus(&seen, &all),
            pe: ge::walk::pe_column(&seen, &all, placement.threads),
        });
    }
    Ok(plan)
}

/// The job's GPUs ordered for placing tasks by (SEMANTICS §9): those near its CPUs
/// (`allowed`) first, each with the part of its locality the job has, then the others.
/// A far GPU the allocation names is near every CPU of the job (a scheduler that gave
/// far CPUs has the last word, and `gpu-local` places its tasks on the job's CPUs); an
/// unnamed far one keeps its own locality, so that a task takes a GPU near its CPUs
/// before it and `gpu-local` refuses to reach it for want of cores near it. Returned
/// renumbered from 0.
fn near_the_job(gpus: Vec<gpu::Gpu>, grant: &gpu::Grant, allowed: &CpuSet) -> Vec<gpu::Gpu> {
    let (mut kept, mut far) = (Vec::new(), Vec::new());
    for mut g in gpus {
        let near = &g.locality & allowed;
        if !near.is_empty() {
            g.locality = near;
            kept.push(g);
        } else {
            if grant.names(g.vendor) {
                g.locality = allowed.clone();
            }
            far.push(g);
        }
    }
    kept.extend(far);
    for (i, g) in kept.iter_mut().enumerate() {
        g.index = i;
    }
    kept
}
