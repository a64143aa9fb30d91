//! binder: from a YAML shape to every local task's cpuset, then bind and exec.
//!
//! A one-way pipeline, one module per stage, each with its own error type:
//!
//! ```text
//! shape → topology → unit → select → distribute → launch (bind, env, exec)
//!                                              ↘ report (dry-run text/JSON)
//! ```
//!
//! [`config`] turns the command line into a validated [`config::Config`] once; [`run`]
//! drives the stages. Everything before `launch` is pure and can be used on its own:
//! load a [`topology::Topology`], parse a [`shape::Shape`] and call [`plan`].
#![warn(missing_docs)]

pub mod cache;
pub mod cli;
pub mod config;
pub mod error;
pub mod exit_code;

pub mod distribute;
pub mod ge;
pub mod gpu;
pub mod identity;
pub mod launch;
pub mod nic;
pub mod report;
pub mod select;
pub mod shape;
pub mod topology;
pub mod unit;

use std::io::Write;

pub use error::Error;

use config::{Action, Config};
use distribute::{Locality, Plan, Request};
use hwlocality::cpu::cpuset::CpuSet;
use shape::{Bind, Membind, Shape};
use topology::{Source, Topology};

/// Loads the topology `shape` needs from `source`: with I/O discovery only when GPUs are
/// involved, because on a host that costs more than the rest of binder together.
pub fn load_topology(
    shape: &Shape,
    source: &Source,
    gpus_per_task: Option<usize>,
) -> Result<Topology, Error> {
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
) -> Result<Plan, Error> {
    let request = shape
        .options
        .ge
        .as_deref()
        .map(ge::Request::parse)
        .transpose()?;
    // The Grid Engine tree only when something needs it: a request, reservations, or a
    // topology string's taken units (not on a plain launch).
    let tree = if request.is_some() || !shape.options.reserve.is_empty() || topology.is_ge_string()
    {
        let mut tree = topology.ge_tree();
        ge::reserve::apply(&mut tree, &shape.options.reserve)?;
        Some(tree)
    } else {
        None
    };
    let taken = tree.as_ref().map_or_else(Vec::new, ge::Tree::used_pus);
    let without;
    let topology = if request.is_none() && !taken.is_empty() {
        without = topology.without(&taken)?;
        &without
    } else {
        topology
    };
    let (gpus, nics) = if topology.has_io() {
        (gpu::discover(topology), nic::discover(topology))
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
            let asks_kind = shape.items().iter().any(|r| shape.kind_of(r).is_some());
            let kinds = select::Kinds {
                default: shape.options.kind,
                performance: asks_kind
                    .then(|| ge::hwloc::performance_pus(topology.hw()))
                    .flatten(),
            };
            select::select(
                topology,
                devices,
                &shape.resources,
                unit_type,
                &kinds,
                origin,
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

fn launch_options<'a>(
    config: &Config,
    shape: &Shape,
    command: &'a [std::ffi::OsString],
    scrub: &'a [&'static str],
) -> launch::Options<'a> {
    launch::Options {
        command,
        openmp: shape.options.openmp,
        membind: shape.options.membind == Some(Membind::Local),
        report: config.report,
        verbose: config.verbose,
        scrub,
    }
}

/// Runs a validated configuration: reports go to `out`, `--report`/`--verbose` lines to
/// `err`. A launch that succeeds never returns (the process became the task).
pub fn run(
    config: &Config,
    env: &dyn identity::Env,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), Error> {
    if config.action == Action::Schema {
        return out
            .write_all(shape::schema_json().as_bytes())
            .map_err(Error::Output);
    }
    if let Action::Topology(reserve) = &config.action {
        let topology = topology::load(&config.source, false)?;
        let mut tree = topology.ge_tree();
        let mut entries = ge::reserve::site(&|k| env.var(k))?;
        entries.extend(reserve.iter().cloned());
        ge::reserve::apply(&mut tree, &entries)?;
        return writeln!(out, "{}", tree.occupancy_string()).map_err(Error::Output);
    }
    let identity = identity::identify(config.local_rank, config.local_size, env)?;
    let (origin, text, mut shape) = match &config.shape {
        Some(path) => {
            let origin = path.display().to_string();
            let text = shape::read_text(path)?;
            let shape = Shape::from_yaml(&text, &origin)?;
            (origin, text, shape)
        }
        // `--ge` alone: a shape of nothing but the request.
        None => {
            let shape = Shape {
                version: None,
                options: shape::Options::default(),
                resources: Vec::new(),
            };
            ("--ge".to_owned(), String::new(), shape)
        }
    };
    if let Some(request) = &config.ge {
        shape.options.ge = Some(request.clone());
    }
    // The site's reservation comes first; the shape's adds to it (SEMANTICS §12).
    let site = ge::reserve::site(&|k| env.var(k))?;
    shape.options.reserve.splice(0..0, site.iter().cloned());
    shape.options.reserve.extend(config.reserve.iter().cloned());
    // What the cache key must cover beyond the shape file.
    let text = format!(
        "{text}\n#ge:{:?}\n#reserve:{:?}",
        shape.options.ge, shape.options.reserve
    );
    let membind = shape.options.membind == Some(Membind::Local);
    // Launches on the host may bind from the node cache (see `cache`): no discovery.
    let trace = std::env::var("BINDER_CACHE_TRACE").is_ok_and(|v| v == "1");
    let cache = match &config.action {
        Action::Launch(_) if config.source == Source::Host && !config.verbose && !membind => {
            cache::Cache::open(&|k| std::env::var(k).ok())
                .and_then(|c| {
                    let key = cache::Key::for_host(&text, identity.size, config.gpus_per_task)?;
                    Ok((c, key))
                })
                .map_err(|why| {
                    if trace {
                        report::emit(err, &format!("cache off: {why}"));
                    }
                })
                .ok()
        }
        _ => None,
    };
    if let (Some((c, key)), Action::Launch(command)) = (&cache, &config.action) {
        match c.lookup(key) {
            Ok(views) => {
                if trace {
                    report::emit(err, &format!("cache hit: {}", c.dir().display()));
                }
                let options = launch_options(config, &shape, command, &[]);
                return Err(
                    launch::run_cached(&views[identity.rank], &identity, &options, err).into(),
                );
            }
            Err(why) if trace => report::emit(err, &format!("cache miss: {why}")),
            Err(_) => {}
        }
    }
    // The CLI is single-threaded and loads one topology: it may trim hwloc's plugins
    // through the environment (process-wide, so never done by `load_topology` itself).
    let scrub = if config.source == Source::Host {
        topology::block_unused_plugins(shape.needs_io() || config.gpus_per_task.is_some())
    } else {
        Vec::new()
    };
    let topology = load_topology(&shape, &config.source, config.gpus_per_task)?;
    let mut plan = plan(
        &shape,
        &origin,
        &topology,
        identity.size,
        config.gpus_per_task,
    )?;
    if let Some((c, key)) = &cache {
        let views = (0..plan.tasks.len())
            .map(|r| launch::env::TaskView::of(&plan, r))
            .collect();
        let stored = c.store(key, views);
        if trace {
            report::emit(
                err,
                &format!(
                    "cache store: {}",
                    stored.map_or_else(|e| e, |()| c.dir().display().to_string())
                ),
            );
        }
    }
    match &config.action {
        Action::Launch(command) => {
            let options = launch_options(config, &shape, command, &scrub);
            Err(launch::run(&topology, &plan, &identity, &options, err).into())
        }
        _ => {
            if config.verbose {
                report::emit(err, &identity.describe());
            }
            let ranks = identity.rank_known.then_some([identity.rank]);
            let header = format!("binder --dry-run {origin} on {}", config.source);
            if config.format == report::Format::Pe && plan.ge.is_none() {
                return Err(Error::Usage(
                    "--format pe prints a Grid Engine request's binding; give one with --ge or `options.ge`".into(),
                ));
            }
            if config.format == report::Format::Rankfile {
                return report::rankfile(&topology, &plan, out).map_err(Error::Output);
            }
            fill_ge_topology(&topology, &mut plan);
            report::render(
                &plan,
                ranks.as_ref().map(|r| &r[..]),
                config.format,
                config.cpuset_format,
                &header,
                out,
            )
            .map_err(Error::Output)
        }
    }
}
