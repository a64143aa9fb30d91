//! The planning entry points: a shape on a topology for a node's tasks, to a [`Plan`].
//! Pure: values in, a plan or a [`PlanError`] out; no environment, no output.

use crate::error::PlanError;
use crate::{distribute, ge, gpu, nic, pack, report, select, shape, topology, unit};
use binder_core::identity;

use distribute::{Locality, Plan, Request};
use hwlocality::cpu::cpuset::CpuSet;
use shape::{Bind, Shape};
use topology::{Source, Topology};

/// Loads the topology `shape` needs from `source`: with I/O discovery only when GPUs are
/// involved, because on a host that costs more than the rest of binder together.
pub fn load_topology(
    shape: &Shape,
    source: &Source,
    gpus_per_task: Option<usize>,
) -> Result<Topology, PlanError> {
    let io = shape.needs_io() || gpus_per_task.is_some();
    Ok(topology::load(source, io)?)
}

/// Plans `shape` for `local_size` tasks on `topology`. `origin` names the shape in errors;
/// `gpus_per_task` overrides the shape's `options.gpus-per-task`.
///
/// Threads taken by other jobs (a topology string's lowercase units) and the shape's
/// `options.reserve` are never given out: a Grid Engine request (`options.ge`) walks
/// around them, a YAML shape plans on the topology without them.
pub fn plan(
    shape: &Shape,
    origin: &str,
    topology: &Topology,
    local_size: usize,
    gpus_per_task: Option<usize>,
) -> Result<Plan, PlanError> {
    plan_taking(shape, origin, topology, local_size, gpus_per_task, &[])
}

/// [`plan`] with the PUs `held` (OS numbers) held by other jobs (the node ledger, SEMANTICS
/// §13): they are skipped like a topology string's lowercase units. On a Grid Engine
/// request without `-bsort`/`-bstart`/`-bstop`, the shape's `options.pack` supplies them.
///
/// With per-rank rules (`ranks:`), each rule's ranks are planned first, lowest rank first,
/// as a job of their own around what earlier rules took; then the other ranks are planned
/// with the shape around all of it, as if they were the whole job. A rule with
/// `bind: none` and no resources takes nothing.
pub fn plan_taking(
    shape: &Shape,
    origin: &str,
    topology: &Topology,
    local_size: usize,
    gpus_per_task: Option<usize>,
    held: &[usize],
) -> Result<Plan, PlanError> {
    plan_traced(
        shape,
        origin,
        topology,
        local_size,
        gpus_per_task,
        held,
        None,
    )
}

/// [`plan_taking`], recording what each resource request matched in `trace` (for
/// `binder explain`); a rule's requests are prefixed with its ranks.
pub fn plan_traced(
    shape: &Shape,
    origin: &str,
    topology: &Topology,
    local_size: usize,
    gpus_per_task: Option<usize>,
    held: &[usize],
    mut trace: Option<&mut Vec<select::Step>>,
) -> Result<Plan, PlanError> {
    if shape.ranks.is_empty() {
        return plan_one(
            shape,
            origin,
            topology,
            local_size,
            gpus_per_task,
            Held {
                cpus: held,
                gpus: &[],
            },
            trace,
        );
    }
    // `--ge` comes after the shape was checked: the same rule as `check_ranks`.
    if shape.options.ge.is_some() {
        return Err(PlanError::Usage(
            "`ranks:` with a Grid Engine request (`--ge`): the request places the whole job; drop one of them".into(),
        ));
    }
    let (groups, rest) = shape.rank_groups(local_size);
    let mut taken = held.to_vec();
    // GPUs (bus ids) an earlier group's ranks took: a later group's never get them.
    let mut taken_gpus: Vec<String> = Vec::new();
    let mut parts: Vec<(Vec<usize>, Option<String>, Option<Plan>)> = Vec::new();
    for group in groups {
        let plan = match &group.shape {
            Some(sub) => {
                let label = format!("{origin} (ranks {})", group.label);
                let mut steps = Vec::new();
                let result = plan_one(
                    sub,
                    &label,
                    topology,
                    group.ranks.len(),
                    gpus_per_task,
                    Held {
                        cpus: &taken,
                        gpus: &taken_gpus,
                    },
                    trace.is_some().then_some(&mut steps),
                );
                if let Some(t) = trace.as_deref_mut() {
                    for mut step in steps {
                        step.path = format!("ranks {}: {}", group.label, step.path);
                        t.push(step);
                    }
                }
                let plan = result?;
                taken.extend(plan.tasks.iter().flat_map(|t| report::cpus_of(&t.cpuset)));
                taken_gpus.extend(
                    plan.tasks
                        .iter()
                        .flat_map(|t| t.gpus.iter().map(|&g| plan.gpus[g].busid.clone())),
                );
                Some(plan)
            }
            None => None,
        };
        parts.push((group.ranks, Some(group.label), plan));
    }
    let allowed = report::cpus_of(&topology.hw().allowed_cpuset());
    if !rest.is_empty() && allowed.iter().all(|p| taken.contains(p)) {
        let rules: Vec<String> = parts.iter().filter_map(|p| p.1.clone()).collect();
        return Err(distribute::DistributeError::RulesTakeAll {
            origin: origin.to_owned(),
            rules: rules.join(", "),
            rest: rest.len(),
        }
        .into());
    }
    let main = if rest.is_empty() {
        None
    } else {
        Some(plan_one(
            shape,
            origin,
            topology,
            rest.len(),
            gpus_per_task,
            Held {
                cpus: &taken,
                gpus: &taken_gpus,
            },
            trace,
        )?)
    };
    // The merged plan keeps the main plan's header (or the first rule's when every rank
    // has a rule) and takes each task from the plan that placed it.
    let mut base = match (&main, parts.iter().find_map(|p| p.2.as_ref())) {
        (Some(m), _) | (None, Some(m)) => m.clone(),
        // Every rank is `bind: none`: nothing was planned, nothing is used.
        (None, None) => Plan {
            unit: unit::UnitChoice {
                unit: unit::Unit::None,
                rule: unit::Rule::Explicit,
                width: None,
            },
            pattern: shape.pattern(),
            reverse: shape.reverse(),
            locality: Locality::Any,
            tasks: Vec::new(),
            unused: Vec::new(),
            gpus: Vec::new(),
            nics: Vec::new(),
            slots: 0,
            unused_slots: Vec::new(),
            levels: Vec::new(),
            ge: None,
            kinds: None,
        },
    };
    let unbound = |rank: usize| distribute::Task {
        local_rank: rank,
        units: Vec::new(),
        cpuset: CpuSet::new(),
        gpus: Vec::new(),
        nics: Vec::new(),
        slot: None,
        spans: distribute::Spans::default(),
        ge_topology: String::new(),
        rule: None,
        unit: Some(unit::UnitChoice {
            unit: unit::Unit::None,
            rule: unit::Rule::Explicit,
            width: None,
        }),
    };
    // Each group's GPU numbers index its own list (later groups see fewer GPUs): the merged
    // plan lists every GPU any group saw, in the node's order, and renumbers the tasks'.
    let mut plans: Vec<&mut Plan> = parts.iter_mut().filter_map(|p| p.2.as_mut()).collect();
    let mut main = main;
    plans.extend(main.as_mut());
    base.gpus = merge_gpus(&mut plans);
    let mut tasks: Vec<Option<distribute::Task>> = vec![None; local_size];
    if let Some(main) = main {
        for (task, &rank) in main.tasks.into_iter().zip(&rest) {
            tasks[rank] = Some(distribute::Task {
                local_rank: rank,
                ..task
            });
        }
    }
    for (ranks, label, plan) in parts {
        let rule_unit = plan.as_ref().map(|p| p.unit);
        let mut dealt = plan.map(|p| p.tasks.into_iter());
        for rank in ranks {
            let task = dealt.as_mut().and_then(Iterator::next).map_or_else(
                || unbound(rank),
                |t| distribute::Task {
                    local_rank: rank,
                    unit: rule_unit,
                    ..t
                },
            );
            tasks[rank] = Some(distribute::Task {
                rule: label.clone(),
                ..task
            });
        }
    }
    base.tasks = tasks.into_iter().flatten().collect();
    Ok(base)
}

/// Every GPU the `plans` list, once each in the node's order, with each plan's tasks'
/// GPU numbers rewritten to positions in that list.
fn merge_gpus(plans: &mut [&mut Plan]) -> Vec<gpu::Gpu> {
    let mut all: Vec<gpu::Gpu> = Vec::new();
    for plan in plans.iter() {
        for g in &plan.gpus {
            if !all.iter().any(|a| a.busid == g.busid) {
                all.push(g.clone());
            }
        }
    }
    all.sort_by_key(|g| g.number);
    for (i, g) in all.iter_mut().enumerate() {
        g.index = i;
    }
    for plan in plans.iter_mut() {
        let to: Vec<usize> = plan
            .gpus
            .iter()
            .map(|g| all.iter().position(|a| a.busid == g.busid).unwrap_or(0))
            .collect();
        for task in &mut plan.tasks {
            for g in &mut task.gpus {
                *g = to[*g];
            }
        }
    }
    all
}

/// What other jobs and earlier `ranks:` groups hold: OS CPU numbers, and GPUs by bus id.
#[derive(Clone, Copy)]
struct Held<'a> {
    cpus: &'a [usize],
    gpus: &'a [String],
}

/// [`plan_taking`] for a shape without per-rank rules (or one rule's shape).
fn plan_one(
    shape: &Shape,
    origin: &str,
    topology: &Topology,
    local_size: usize,
    gpus_per_task: Option<usize>,
    held: Held<'_>,
    trace: Option<&mut Vec<select::Step>>,
) -> Result<Plan, PlanError> {
    let (held, held_gpus) = (held.cpus, held.gpus);
    let mut request = shape
        .options
        .ge
        .as_deref()
        .map(ge::Request::parse)
        .transpose()?;
    if let Some(request) = request.as_mut().filter(|_| !held.is_empty()) {
        pack::into_request(request, shape.options.pack.unwrap_or_default());
    }
    // The Grid Engine tree only when something needs it: a request, reservations, or a
    // topology string's taken units (not on a plain launch).
    let tree = if request.is_some() || !shape.options.reserve.is_empty() || topology.is_ge_string()
    {
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
    let topology = if request.is_none() && !taken.is_empty() {
        without = topology.without(&taken)?;
        &without
    } else {
        topology
    };
    let (gpus, nics) = if topology.has_io() {
        let mut gpus = gpu::discover(topology);
        gpus.retain(|g| !held_gpus.contains(&g.busid));
        for (i, g) in gpus.iter_mut().enumerate() {
            g.index = i;
        }
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
    let selection = match (&request, &tree) {
        (Some(request), Some(tree)) => {
            let (placement, seen) = ge::place(tree, request, local_size)?;
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
            placed = Some((request.clone(), placement, seen));
            select::Selection {
                picks: Vec::new(),
                gpus: Vec::new(),
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
    };
    let mut plan = distribute::distribute(topology, &selection, gpus, nics, &request_d, origin)?;
    plan.levels = distribute::Spans::LEVELS
        .into_iter()
        .filter(|level| shape.items().iter().any(|r| r.kind == *level))
        .collect();
    // A Grid Engine request's topology strings come with its placement (SEMANTICS §12).
    if let Some((request, placement, seen)) = placed {
        for (r, task) in plan.tasks.iter_mut().enumerate() {
            let cores = placement.cores.as_ref().map(|c| &c[r][..]);
            task.ge_topology = ge::job_string(&seen, &placement.tasks[r], cores);
        }
        let all: Vec<usize> = placement.tasks.concat();
        let cores: Option<Vec<usize>> = placement.cores.as_ref().map(|c| c.concat());
        plan.ge = Some(ge::Summary {
            request: request.text.clone(),
            instance: request.instance,
            job_topology: ge::job_string(&seen, &all, cores.as_deref()),
            job_cpus: ge::pus(&seen, &all),
            pe: ge::walk::pe_column(&seen, &all, placement.threads),
        });
    }
    Ok(plan)
}

/// What each task of `plan` would get besides its CPUs, computed as a launch computes it:
/// the environment ([`binder_core::launch::env::task_env`], with `get` reading the inherited
/// variables, so a user's `OMP_NUM_THREADS` shows as kept) and, with `membind: local`,
/// the NUMA nodes of its CPUs (of the allowed CPUs for an unbound task, which at launch
/// keeps what it inherited). The second value is the warnings rank 0 would print.
pub fn preview(
    topology: &Topology,
    plan: &Plan,
    shape: &Shape,
    get: &dyn Fn(&str) -> Option<String>,
) -> (Vec<report::Preview>, Vec<String>) {
    let size = plan.tasks.len();
    let mut warnings = Vec::new();
    let previews = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(rank, task)| {
            let view = crate::view::task_view(plan, rank);
            let who = identity::Identity::given(rank, size);
            let env = binder_core::launch::env::task_env(
                &view,
                &who,
                shape.options_for(rank).openmp,
                get,
            );
            if rank == 0 {
                warnings = env.warnings;
            }
            let mems = shape.membind_for(rank).then(|| {
                let allowed;
                let cpus = if task.units.is_empty() {
                    allowed = topology.hw().allowed_cpuset().clone_target();
                    &allowed
                } else {
                    &task.cpuset
                };
                hwlocality::memory::nodeset::NodeSet::from_cpuset(topology.hw(), cpus)
                    .iter_set()
                    .map(usize::from)
                    .collect()
            });
            report::Preview {
                env: env.vars,
                mems,
            }
        })
        .collect();
    (previews, warnings)
}

/// Fills each task's `ge_topology` (the node's string, the task's CPUs lowercase) for a
/// plan a YAML shape made; a Grid Engine request's plan has them already. Only reports
/// need them, so launching never pays for it.
pub fn fill_ge_topology(topology: &Topology, plan: &mut Plan) {
    if plan.ge.is_some() {
        return;
    }
    let tree = topology.ge_tree();
    let by_pu: std::collections::HashMap<usize, usize> = tree
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(n, node)| (node.letter == ge::Letter::T).then_some((node.os?, n)))
        .collect();
    for task in &mut plan.tasks {
        let threads: Vec<usize> = report::cpus_of(&task.cpuset)
            .iter()
            .filter_map(|p| by_pu.get(p).copied())
            .collect();
        task.ge_topology = ge::job_string(&tree, &threads, None);
    }
}
