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
pub fn plan(
    shape: &Shape,
    origin: &str,
    topology: &Topology,
    local_size: usize,
    gpus_per_task: Option<usize>,
) -> Result<Plan, Error> {
    let (gpus, nics) = if topology.has_io() {
        (gpu::discover(topology), nic::discover(topology))
    } else {
        (Vec::new(), Vec::new())
    };
    let unit = unit::choose(shape);
    let devices = select::Devices {
        gpus: &gpus,
        nics: &nics,
    };
    // Slots are cut from binding units; with `bind: none` they are counted in cores.
    let unit_type = unit.unit.obj_type().unwrap_or(shape::ObjType::Core);
    let selection = select::select(topology, devices, &shape.resources, unit_type, origin)?;
    let locality = match shape.options.bind {
        Some(Bind::GpuLocal) => Locality::GpuLocal,
        Some(Bind::GpuRemote) => Locality::GpuRemote,
        _ => Locality::Any,
    };
    let request = Request {
        unit,
        pattern: shape.pattern(),
        reverse: shape.reverse(),
        local_size,
        gpus_per_task: gpus_per_task.or(shape.options.gpus_per_task.map(|g| g.get() as usize)),
        locality,
    };
    let mut plan = distribute::distribute(topology, &selection, gpus, nics, &request, origin)?;
    plan.levels = distribute::Spans::LEVELS
        .into_iter()
        .filter(|level| shape.items().iter().any(|r| r.kind == *level))
        .collect();
    Ok(plan)
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
    let identity = identity::identify(config.local_rank, config.local_size, env)?;
    let origin = config.shape.display().to_string();
    let text = shape::read_text(&config.shape)?;
    let shape = Shape::from_yaml(&text, &origin)?;
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
    let plan = plan(
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
