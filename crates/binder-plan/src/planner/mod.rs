//! The planning entry point: a [`PlanRequest`] (a shape on a topology for a node's tasks)
//! to a [`Plan`] or a [`PlanError`]. Pure: values in, a plan out; no environment, no
//! output.
//!
//! A shape with per-rank rules (`ranks:`) is planned rule by rule (`ranks`), each rule's
//! ranks as a job of their own (`one`); `preview` adds what reports show besides.

mod one;
mod preview;
mod ranks;

pub use preview::{fill_ge_topology, preview};

use crate::error::PlanError;
use crate::{select, shape, topology};

use crate::distribute::Plan;
use crate::gpu::Grant;
use shape::Shape;
use topology::Topology;

/// What to plan: `shape` for `local_size` tasks on `topology`, and what else the plan
/// depends on (each with a default, set with the methods below).
///
/// ```
/// # fn main() -> Result<(), binder_plan::PlanError> {
/// use binder_plan::{shape::Shape, topology::Topology, PlanRequest};
/// let shape = Shape::from_yaml("resources: [{type: core, count: all}]", "cores.yaml")?;
/// let topology = Topology::from_synthetic("pack:2 core:4 pu:2", shape.needs_io())?;
/// let plan = binder_plan::plan(&PlanRequest::new(&shape, &topology, 4).origin("cores.yaml"))?;
/// // Eight cores, four tasks: two whole cores (four PUs) each, in order.
/// assert_eq!(plan.tasks[1].cpuset.to_vec(), [4, 5, 6, 7]);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy)]
pub struct PlanRequest<'a> {
    /// The shape.
    pub shape: &'a Shape,
    /// The topology of the node.
    pub topology: &'a Topology,
    /// The tasks on this node.
    pub local_size: usize,
    /// The shape's name in refusals (its file name); `shape` by default.
    pub origin: &'a str,
    /// Overrides the shape's `options.gpus-per-task` (`--gpus-per-task`).
    pub gpus_per_task: Option<usize>,
    /// PUs (OS numbers) other jobs hold (the node ledger, SEMANTICS §13): skipped like a
    /// topology string's lowercase units. On a Grid Engine request without
    /// `-bsort`/`-bstart`/`-bstop`, the shape's `options.pack` orders what is left.
    pub held: &'a [usize],
    /// The GPUs the job may have (SEMANTICS §9: its allocation, less what other jobs
    /// hold); every GPU of the node by default.
    pub grant: &'a Grant,
}

/// Every GPU of the node: a request's default grant.
static EVERY_GPU: Grant = Grant::EVERY;

impl<'a> PlanRequest<'a> {
    /// `shape` for `local_size` tasks on `topology`, nothing held, the shape's own GPUs per
    /// task.
    pub fn new(shape: &'a Shape, topology: &'a Topology, local_size: usize) -> Self {
        PlanRequest {
            shape,
            topology,
            local_size,
            origin: "shape",
            gpus_per_task: None,
            held: &[],
            grant: &EVERY_GPU,
        }
    }

    /// Names the shape in refusals.
    #[must_use]
    pub fn origin(self, origin: &'a str) -> Self {
        PlanRequest { origin, ..self }
    }

    /// Overrides the shape's `options.gpus-per-task` when `Some`.
    #[must_use]
    pub fn gpus_per_task(self, gpus_per_task: Option<usize>) -> Self {
        PlanRequest {
            gpus_per_task,
            ..self
        }
    }

    /// Gives out only the GPUs `grant` allows.
    #[must_use]
    pub fn grant(self, grant: &'a Grant) -> Self {
        PlanRequest { grant, ..self }
    }

    /// Plans around the PUs `held` by other jobs.
    #[must_use]
    pub fn held(self, held: &'a [usize]) -> Self {
        PlanRequest { held, ..self }
    }
}

/// Plans `request`: every local task's CPUs, GPUs and NICs.
///
/// Threads taken by other jobs (a topology string's lowercase units, `held`) and the
/// shape's `options.reserve` are never given out: a Grid Engine request (`options.ge`)
/// walks around them, a YAML shape plans on the topology without them.
///
/// With per-rank rules (`ranks:`), each rule's ranks are planned first, lowest rank first,
/// as a job of their own around what earlier rules took; then the other ranks are planned
/// with the shape around all of it, as if they were the whole job. A rule with
/// `bind: none` and no resources takes nothing.
pub fn plan(request: &PlanRequest<'_>) -> Result<Plan, PlanError> {
    oversubscribed(request, ranks::plan(request, None)).and_then(|plan| memory_fits(request, plan))
}

/// With `options.oversubscribe`, a plan refused for too few units (or slots) is made for
/// as many tasks as there are, and dealt again from its first task: task `r` gets what
/// task `r mod units` got (SEMANTICS §11, as Open MPI's `--oversubscribe` round robin).
/// Only for a pool that is the whole selection (not a GPU's locality) and shapes without
/// `ranks:` (refused by the shape's checks).
fn oversubscribed(
    request: &PlanRequest<'_>,
    planned: Result<Plan, PlanError>,
) -> Result<Plan, PlanError> {
    use crate::distribute::DistributeError::{TooFewSlots, TooFewUnits};
    if !request.shape.options.oversubscribe {
        return planned;
    }
    let units = match &planned {
        Err(PlanError::Distribute(TooFewUnits { units, scope, .. }))
            if *units > 0 && scope.is_empty() =>
        {
            *units
        }
        Err(PlanError::Distribute(TooFewSlots { slots, .. })) if *slots > 0 => *slots,
        _ => return planned,
    };
    let fit = PlanRequest {
        local_size: units,
        ..*request
    };
    match ranks::plan(&fit, None) {
        // `pattern: balanced` fills one unit's ranks before the next's.
        Ok(base) if request.shape.pattern() == shape::Pattern::Balanced => {
            Ok(base.dealt_in_blocks(request.local_size))
        }
        Ok(base) => Ok(base.dealt_again(request.local_size)),
        Err(_) => planned,
    }
}

/// The plan, if every task with a memory policy has NUMA nodes to apply it on (`memory:
/// hbm` on a node without HBM near a task is refused here, in a dry-run as at launch).
fn memory_fits(request: &PlanRequest<'_>, plan: Plan) -> Result<Plan, PlanError> {
    for (rank, task) in plan.tasks.iter().enumerate() {
        let Some(policy) = request.shape.membind_for(rank) else {
            continue;
        };
        let cpus = task.memory_cpus(request.topology);
        let memory = request.shape.memory_for(rank);
        topology::memory_nodes(request.topology, &cpus, policy, &memory).map_err(|why| {
            crate::distribute::DistributeError::NoMemory {
                origin: request.origin.to_owned(),
                rank,
                why,
            }
        })?;
    }
    Ok(plan)
}

/// Plans `request` around the PUs it holds (`held`, other jobs'), with the shape's packing
/// policy (`options.pack`, [`crate::pack`]).
pub fn plan_around(request: &PlanRequest<'_>) -> Result<Plan, PlanError> {
    crate::pack::around(request.shape, request.topology, request.held, |skip| {
        plan(&request.held(skip))
    })
}

/// [`plan`], recording what each resource request matched in `trace` (for
/// `binder explain`); a rule's requests are prefixed with its ranks.
pub fn plan_traced(
    request: &PlanRequest<'_>,
    trace: &mut Vec<select::Step>,
) -> Result<Plan, PlanError> {
    let planned = ranks::plan(request, Some(trace));
    oversubscribed(request, planned).and_then(|plan| memory_fits(request, plan))
}
