//! [`run`]: a validated configuration through the stages, for the CLI. The library's
//! pure stages are in `lib.rs`; this file adds what a command line needs around them: the
//! site file, the node cache, the node ledger, and where output goes.

use std::io::Write;

use crate::config::{Action, Config};
use crate::error::Error;
use binder_core::view::Packing;
use binder_core::{cache, identity, launch, ledger};
use binder_plan::shape::{self, Shape};
use binder_plan::topology::{self, Source};
use binder_plan::{fill_ge_topology, load_topology, plan};
use binder_plan::{ge, report};

mod around;
mod planner;
mod shared;

/// What a launch plans, for the ledger's path. The parsed shape is the planner's
/// (`shared::Full`): the `binder` executable's warm path does not parse it.
struct Job<'a> {
    config: &'a Config,
    origin: &'a str,
    /// The shape's bytes and every request that changes the plan (the cache key's text).
    text: &'a str,
    identity: &'a identity::Identity,
    /// The GPUs the job's allocation grants (SEMANTICS §9).
    gpus: binder_plan::gpu::Grant,
}

/// `binder node`: this host's topology and the ledger, verified.
fn node(env: &dyn identity::Env, json: bool, out: &mut impl Write) -> Result<(), Error> {
    // I/O discovery names each job's GPUs by binder's number.
    let topology = topology::load(&Source::Host, true)?;
    let procs = binder_core::procfs::Real;
    let (dir, scan) = match ledger::Ledger::open(&|k| env.var(k)) {
        Ok(l) => {
            let (now, hz) = (ledger::now_ticks(), ledger::clock_hz());
            let own = l.list_own(&procs);
            let mut scan = ledger::Scan::default();
            l.scan_own(&own, None, &procs, now, hz, &mut scan);
            l.scan_others(&procs, &mut scan);
            (l.root().display().to_string(), scan)
        }
        Err(why) => (format!("not used ({why})"), ledger::Scan::default()),
    };
    let node = binder_plan::node::build(
        &topology,
        &scan,
        &dir,
        &identity::hostname(),
        &binder_core::procfs::user_name,
    );
    let text = if json {
        serde_json::to_string_pretty(&node).unwrap_or_default() + "\n"
    } else {
        binder_plan::node::render_text(&node)
    };
    out.write_all(text.as_bytes()).map_err(Error::Output)
}

/// Whether `BINDER_CACHE_TRACE=1` asks for the cache's decisions on stderr.
fn tracing() -> bool {
    std::env::var("BINDER_CACHE_TRACE").is_ok_and(|v| v == "1")
}

/// The node cache and this launch's key, or `None` when the cache is off or cannot key
/// this host. `--verbose` and `membind` need the hwloc topology itself, so they skip it.
fn node_cache(
    config: &Config,
    membind: bool,
    text: &str,
    size: usize,
    err: &mut impl Write,
) -> Option<(cache::Cache, cache::Key)> {
    if config.verbose || membind {
        return None;
    }
    cache::Cache::open(&|k| std::env::var(k).ok())
        .and_then(|c| Ok((c, cache::Key::for_host(text, size, config.gpus_per_task)?)))
        .map_err(|why| {
            if tracing() {
                binder_core::text::emit(err, &format!("cache off: {why}"));
            }
        })
        .ok()
}

/// The cached views for the key and the shape's packing policy, if any.
fn cache_lookup(
    (c, key): &(cache::Cache, cache::Key),
    err: &mut impl Write,
) -> Option<(Vec<binder_core::view::TaskView>, Packing)> {
    match c.lookup(key) {
        Ok(hit) => {
            if tracing() {
                binder_core::text::emit(err, &format!("cache hit: {}", c.dir().display()));
            }
            Some(hit)
        }
        Err(why) => {
            if tracing() {
                binder_core::text::emit(err, &format!("cache miss: {why}"));
            }
            None
        }
    }
}

/// Stores a fresh plan's views.
fn cache_store(
    (c, key): &(cache::Cache, cache::Key),
    views: Vec<binder_core::view::TaskView>,
    shape: &Shape,
    err: &mut impl Write,
) {
    let stored = c.store(key, views, shape.options.pack.unwrap_or_default().into());
    if tracing() {
        let what = stored.map_or_else(|e| e, |()| c.dir().display().to_string());
        binder_core::text::emit(err, &format!("cache store: {what}"));
    }
}

/// A launch's options: the rank's own from its view, the rest from the command line.
fn launch_options<'a>(
    config: &Config,
    view: &binder_core::view::TaskView,
    command: &'a [std::ffi::OsString],
    scrub: &'a [&'static str],
) -> launch::Options<'a> {
    launch::Options {
        command,
        openmp: view.openmp,
        membind: view.membind,
        report: config.report,
        verbose: config.verbose,
        scrub,
        started_on: None,
    }
}

/// Binds as this rank's cached view says and execs the command (the ledger off); returns
/// only on failure.
fn run_cached(
    config: &Config,
    views: &[binder_core::view::TaskView],
    identity: &identity::Identity,
    command: &[std::ffi::OsString],
    err: &mut impl Write,
) -> Error {
    let view = &views[identity.rank];
    let options = launch_options(config, view, command, &[]);
    launch::run_cached(view, identity, &options, err).into()
}

/// The text the node cache and the ledger key a plan by: the shape file's bytes (none for
/// `--ge` alone), every request of the command line that changes the plan, and the site
/// file's bytes. Unparsed, so that both executables compute it alike and the warm path
/// parses no YAML; it names the same inputs the parsed shape is made of.
fn job_text(
    config: &Config,
    shape: &str,
    site: Option<&(String, String)>,
    env: &dyn identity::Env,
) -> String {
    let site = site.map_or("", |(_, text)| text.as_str());
    let gpus = binder_plan::gpu::Grant::env_text(&|k| env.var(k));
    format!(
        "{shape}\n#ge:{:?}\n#reserve:{:?}\n#pack:{:?}\n#share:{}\n#gpu-ids:{:?}\n#gpus-env:{gpus}\n#site:{site}",
        config.ge, config.reserve, config.pack, config.share, config.gpu_ids
    )
}

/// The shape file's bytes and where they came from (`--ge` alone: no file).
fn shape_text(config: &Config) -> Result<(String, String), Error> {
    match &config.shape {
        Some(path) => Ok((path.display().to_string(), shape::read_text(path)?)),
        None => Ok(("--ge".to_owned(), String::new())),
    }
}

/// The shape, parsed, with the command line's and the site file's (from
/// `ge::reserve::site_text`) requests applied.
fn job_shape(
    config: &Config,
    origin: &str,
    text: &str,
    site: Option<&(String, String)>,
) -> Result<Shape, Error> {
    let mut shape = match &config.shape {
        Some(_) => Shape::from_yaml(text, origin)?,
        // `--ge` alone: a shape of nothing but the request.
        None => Shape {
            version: None,
            options: shape::Options::default(),
            resources: Vec::new(),
            ranks: shape::Ranks::new(),
        },
    };
    if let Some(request) = &config.ge {
        shape.options.ge = Some(request.clone());
    }
    // The site's reservation comes first; the shape's adds to it (SEMANTICS §12).
    if let Some((path, text)) = site {
        let site = ge::reserve::parse_site(path, text)?;
        shape.options.reserve.splice(0..0, site);
    }
    shape.options.reserve.extend(config.reserve.iter().cloned());
    if config.pack.is_some() {
        shape.options.pack = config.pack;
    }
    shape.options.share |= config.share;
    if config.gpu_ids.is_some() {
        shape.options.gpu_ids = config.gpu_ids;
    }
    Ok(shape)
}

/// The `binder` executable's launch: [`run`]'s launch path as far as it goes without
/// hwloc and without parsing the shape, for the executable that is linked without
/// libhwloc (so that a warm launch does not pay for loading it). It binds from the node
/// cache or a plan the job's first task recorded in the ledger and execs, never
/// returning; it returns the error that stopped the launch, or [`Error::HandOver`] —
/// having changed nothing — for everything that needs the topology or the parsed shape (a
/// cache miss, other jobs to plan around, `--verbose`, `membind`), for anything but a
/// launch on this host, and for a ledger that cannot be trusted. Then `binder-full` runs
/// the whole command line again.
pub fn warm(config: &Config, env: &dyn identity::Env, err: &mut impl Write) -> Error {
    let Action::Launch(command) = &config.action else {
        return Error::HandOver;
    };
    if config.source != Source::Host || config.verbose {
        return Error::HandOver;
    }
    let identity = match identity::identify(config.local_rank, config.local_size, env) {
        Ok(identity) => identity,
        Err(e) => return e.into(),
    };
    let (origin, text) = match shape_text(config).and_then(|(origin, shape)| {
        let site = ge::reserve::site_text(&|k| env.var(k))?;
        Ok((origin, job_text(config, &shape, site.as_ref(), env)))
    }) {
        Ok(job) => job,
        // binder-full says what is wrong with the shape or the site file.
        Err(_) => return Error::HandOver,
    };
    match ledger::Ledger::open(&|k| env.var(k)) {
        Ok(ledger) => {
            let job = Job {
                config,
                origin: &origin,
                text: &text,
                identity: &identity,
                gpus: binder_plan::gpu::Grant::from_env(&|k| env.var(k)),
            };
            match shared::launch(&ledger, &job, env, command, &mut planner::Warm, err) {
                shared::Stopped::Error(e) => e,
                // binder-full says why, or refuses under BINDER_LEDGER=require.
                shared::Stopped::Uncoordinated(_) => Error::HandOver,
            }
        }
        Err(why) if why.starts_with("BINDER_LEDGER=") => {
            let cache = node_cache(config, false, &text, identity.size, err);
            match cache.and_then(|pair| cache_lookup(&pair, err)) {
                Some((views, _)) if !views[identity.rank].membind => {
                    run_cached(config, &views, &identity, command, err)
                }
                _ => Error::HandOver,
            }
        }
        // binder-full says why, once per node.
        Err(_) => Error::HandOver,
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
        if matches!(config.source, Source::GeString(_)) {
            crate::hwenv::block_libxml();
        }
        let topology = topology::load(&config.source, false)?;
        let mut tree = topology.ge_tree();
        let mut entries = ge::reserve::site(&|k| env.var(k))?;
        entries.extend(reserve.iter().cloned());
        ge::reserve::apply(&mut tree, &entries)?;
        return writeln!(out, "{}", tree.occupancy_string()).map_err(Error::Output);
    }
    if let Action::Node(json) = config.action {
        return node(env, json, out);
    }
    let identity = identity::identify(config.local_rank, config.local_size, env)?;
    let (origin, shape_bytes) = shape_text(config)?;
    let site = ge::reserve::site_text(&|k| env.var(k))?;
    let shape = job_shape(config, &origin, &shape_bytes, site.as_ref())?;
    let text = job_text(config, &shape_bytes, site.as_ref(), env);
    let grant = binder_plan::gpu::Grant::from_env(&|k| env.var(k))
        .by_uuid(shape.options.gpu_ids == Some(shape::GpuIds::Uuid));
    if let Action::Launch(command) = &config.action {
        // Every launch on the host goes through the node ledger unless it is off; one
        // that cannot coordinate runs bound all the same, said once per node (by local
        // rank 0), unless BINDER_LEDGER=require (SEMANTICS §13.1 item 3).
        let why = match ledger::Ledger::open(&|k| env.var(k)) {
            Ok(ledger) => {
                let job = Job {
                    config,
                    origin: &origin,
                    text: &text,
                    identity: &identity,
                    gpus: grant.clone(),
                };
                let mut planner = planner::Full::new(&shape);
                match shared::launch(&ledger, &job, env, command, &mut planner, err) {
                    shared::Stopped::Error(e) => return Err(e),
                    shared::Stopped::Uncoordinated(why) => Some(why),
                }
            }
            Err(why) if why.starts_with("BINDER_LEDGER=") => None,
            Err(why) => Some(why),
        };
        if let Some(why) = why {
            if ledger::store::required(&|k| env.var(k)) {
                return Err(ledger::LedgerError::Required(why).into());
            }
            if identity.rank == 0 {
                binder_core::text::emit(
                    err,
                    &format!("warning: node ledger not used, so other jobs on this node may get the same cpus and GPUs: {}", binder_core::text::printable(&why, 200)),
                );
            }
        }
    }
    let membind = shape.membind_for(identity.rank);
    // Launches on the host may bind from the node cache (see `cache`): no discovery.
    let cache = match &config.action {
        Action::Launch(_) if config.source == Source::Host => {
            node_cache(config, membind, &text, identity.size, err)
        }
        _ => None,
    };
    if let (Some(pair), Action::Launch(command)) = (&cache, &config.action) {
        if let Some((views, _)) = cache_lookup(pair, err) {
            return Err(run_cached(config, &views, &identity, command, err));
        }
    }
    // The CLI is single-threaded and loads one topology: it may trim hwloc's plugins
    // through the environment (process-wide, so never done by `load_topology` itself).
    let scrub = match config.source {
        Source::Host => {
            crate::hwenv::block_unused_plugins(shape.needs_io() || config.gpus_per_task.is_some())
        }
        Source::GeString(_) => crate::hwenv::block_libxml(),
        _ => Vec::new(),
    };
    let mut topology = load_topology(&shape, &config.source, config.gpus_per_task)?;
    // The job's GPUs are those its allocation grants, in a dry-run too (SEMANTICS §9).
    topology.set_gpu_grant(grant);
    if config.action == Action::Explain {
        let header = format!("binder explain {origin} on {}", config.source);
        let ranks = identity.rank_known.then_some([identity.rank]);
        let (text, result) = binder_plan::explain::explain(
            &shape,
            &origin,
            &topology,
            (identity.size, ranks.as_ref().map(|r| &r[..])),
            config.gpus_per_task,
            &header,
        );
        out.write_all(text.as_bytes()).map_err(Error::Output)?;
        return result.map_err(Error::from);
    }
    let mut plan = plan(
        &shape,
        &origin,
        &topology,
        identity.size,
        config.gpus_per_task,
    )?;
    if let Some(pair) = &cache {
        let views = (0..plan.tasks.len())
            .map(|r| binder_plan::view::launch_view(&plan, &shape, r))
            .collect();
        cache_store(pair, views, &shape, err);
    }
    match &config.action {
        Action::Launch(command) => {
            if config.verbose {
                if let Some(line) = report::kinds_line(&plan) {
                    binder_core::text::emit(err, &line);
                }
            }
            let view = binder_plan::view::launch_view(&plan, &shape, identity.rank);
            let options = launch_options(config, &view, command, &scrub);
            Err(crate::hwbind::run(&topology, &view, &identity, &options, err).into())
        }
        _ => {
            if config.verbose {
                binder_core::text::emit(err, &identity.describe());
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
            if matches!(config.format, report::Format::Map | report::Format::Svg) {
                // Colour only for a person at a terminal, as anstream decides it (NO_COLOR,
                // CLICOLOR, CLICOLOR_FORCE, TERM=dumb); NO_COLOR also through `env`.
                let colour = anstream::AutoStream::choice(&std::io::stdout())
                    != anstream::ColorChoice::Never
                    && env.var("NO_COLOR").is_none();
                return report::picture(&topology, &plan, config.format, &header, colour, out)
                    .map_err(Error::Output);
            }
            fill_ge_topology(&topology, &mut plan);
            let (previews, warnings) =
                binder_plan::preview(&topology, &plan, &shape, &|k| env.var(k));
            for warning in warnings {
                binder_core::text::emit(err, &format!("warning: {warning}"));
            }
            let extras = report::Extras {
                previews: &previews,
                show_env: config.show_env,
            };
            report::render_with(
                &plan,
                ranks.as_ref().map(|r| &r[..]),
                config.format,
                config.cpuset_format,
                &header,
                extras,
                out,
            )
            .map_err(Error::Output)
        }
    }
}
