//! [`run`]: a validated configuration through the stages, for the CLI. The library's
//! pure stages are in `lib.rs`; this file adds what a command line needs around them: the
//! site file, the node cache, the node ledger, and where output goes.

use std::io::Write;

use crate::config::{Action, Config};
use crate::error::Error;
use binder_core::launch::job::JobSpec;
use binder_core::launch::line::Requests;
use binder_core::{identity, launch, ledger};
use binder_plan::shape::{self, Shape};
use binder_plan::topology::Source;
use binder_plan::{fill_ge_topology, plan, PlanRequest};
use binder_plan::{ge, report};

mod front;

/// `binder node`: this host's topology and the ledger, verified.
fn node(env: &dyn identity::Env, json: bool, out: &mut impl Write) -> Result<(), Error> {
    // I/O discovery names each job's GPUs by binder's number.
    let topology = binder_host::load(&Source::Host, true)?;
    let procs = binder_core::procfs::Real;
    let (dir, scan) = match ledger::Ledger::open(&|k| env.var(k)) {
        Ok(l) => {
            let (now, hz) = (ledger::now_ticks(), ledger::clock_hz());
            let own = l.list_own(&procs);
            let mut scan = ledger::Scan::new(l.uid());
            l.scan_own(&own, None, &procs, now, hz, &mut scan);
            l.scan_others(&procs, &mut scan);
            (l.root().display().to_string(), scan)
        }
        // Without the ledger, the kernel still shows where other users' tasks run.
        Err(why) => (
            format!("not used ({})", binder_core::text::printable(&why, 200)),
            ledger::others::kernel_scan(&procs, binder_core::procfs::euid()),
        ),
    };
    let node = binder_host::node::build(
        &topology,
        &scan,
        &dir,
        &identity::hostname(),
        &binder_core::procfs::user_name,
    );
    let text = if json {
        serde_json::to_string_pretty(&node).unwrap_or_default() + "\n"
    } else {
        binder_host::node::render_text(&node)
    };
    out.write_all(text.as_bytes()).map_err(Error::Output)
}

/// A launch's options: the rank's own from its view, the rest from the command line.
pub(crate) fn launch_options<'a>(
    config: &Config,
    view: &binder_core::view::TaskView,
    command: &'a [std::ffi::OsString],
    scrub: &'a [&'static str],
) -> launch::Options<'a> {
    launch::Options::for_view(
        view,
        config.report,
        config.verbose,
        None,
        &launch::process_env,
    )
    .running(command, scrub)
}

/// The shape file's bytes and where they came from (`--ge` alone: no file).
fn shape_text(config: &Config) -> Result<(String, String), Error> {
    match &config.shape {
        // Shown escaped: a path may hold control bytes that must not reach a terminal.
        Some(path) => Ok((
            binder_core::text::printable(&path.display().to_string(), 200),
            binder_host::shape_text(path)?,
        )),
        None => Ok(("--ge".to_owned(), String::new())),
    }
}

/// The shape, parsed, with the command line's and the site file's (from
/// `binder_core::launch::line::site_text`) requests applied.
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
    ge::reserve::add_site(&mut shape, site)?;
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

/// The site file's path and text (`BINDER_SITE_FILE`, else `/etc/binder/site.yaml`),
/// read here: the planning library parses it (`ge::reserve::parse_site`) but reads no file.
fn site_file(env: &dyn identity::Env) -> Result<Option<(String, String)>, Error> {
    launch::line::site_text(&|k| env.var(k))
        .map_err(|(what, why)| ge::GeError::Reserve { what, why }.into())
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
        let topology = binder_host::load(&config.source, false)?;
        let mut tree = topology.ge_tree();
        let mut entries = match site_file(env)? {
            Some((path, text)) => ge::reserve::parse_site(&path, &text)?,
            None => Vec::new(),
        };
        entries.extend(reserve.iter().cloned());
        ge::reserve::apply(&mut tree, &entries)?;
        return writeln!(out, "{}", tree.occupancy_string()).map_err(Error::Output);
    }
    if let Action::Node(json) = config.action {
        return node(env, json, out);
    }
    let identity = identity::identify(config.local_rank, config.local_size, env)?;
    let (origin, shape_bytes) = shape_text(config)?;
    let site = site_file(env)?;
    let shape = job_shape(config, &origin, &shape_bytes, site.as_ref())?;
    let requests = Requests {
        ge: config.ge.clone(),
        reserve: config.reserve.clone(),
        pack: config.pack.map(|p| format!("{p:?}")),
        share: config.share,
        gpu_ids: config.gpu_ids.map(|g| format!("{g:?}")),
        gpus_per_task: config.gpus_per_task,
    };
    let site_bytes = site.as_ref().map(|(_, text)| text.as_str());
    // The job's allocation on this node (SEMANTICS §4.1): launches and dry-runs on this
    // host plan inside it; another machine's topology has none.
    let envelope = if config.source == Source::Host {
        binder_core::envelope::Envelope::here(&identity, &|k| env.var(k))
    } else {
        binder_core::envelope::Envelope::allowed()
    };
    let spec = JobSpec::new(
        &origin,
        &shape_bytes,
        &requests,
        site_bytes,
        &|k| env.var(k),
        envelope,
    )
    .verbose(config.verbose);
    if config.verbose && matches!(config.action, Action::Launch(_)) {
        binder_core::text::emit(err, &identity.describe());
        binder_core::text::emit(err, &spec.envelope().describe());
    }
    // A launch's planner asks `nvidia-smi` about MIG entries only when it plans (not on a
    // node-cache hit); the dry-run below always plans.
    let grant = binder_plan::gpu::Grant::from_env(&|k| env.var(k))
        .by_uuid(shape.options.gpu_ids == Some(shape::GpuIds::Uuid));
    if let Action::Launch(command) = &config.action {
        // Every launch runs the one launch flow: the node ledger unless it is off, the
        // node cache, the plan inside the job's allocation, hwloc's binding, exec.
        return Err(front::launch(
            &spec.task(&identity),
            config,
            &shape,
            grant,
            env,
            command,
            err,
        ));
    }
    // The CLI is single-threaded and loads one topology: it may trim hwloc's plugins
    // through the environment (process-wide, so never done by `binder_host::for_shape` itself).
    match config.source {
        Source::Host => {
            crate::hwenv::block_unused_plugins(shape.needs_io() || config.gpus_per_task.is_some());
        }
        Source::GeString(_) => {
            crate::hwenv::block_libxml();
        }
        _ => {}
    }
    let mut topology = binder_host::for_shape(&shape, &config.source, config.gpus_per_task)?;
    if config.source == Source::Host && crate::hwenv::trust_own_xml(&topology) {
        topology = binder_host::for_shape(&shape, &config.source, config.gpus_per_task)?;
    }
    let topology = topology
        .within(spec.envelope().cpus.as_deref())
        .map_err(binder_plan::PlanError::from)?;
    // The job's GPUs are those its allocation grants, in a dry-run too (SEMANTICS §9).
    let mut grant = grant
        .place_mig(binder_core::vendor::nvidia_listing)
        .place_split(binder_core::scheduler::slurm_job_gpus);
    // This host's drivers name this host's GPUs only (not another node's XML).
    if config.source == Source::Host {
        grant = grant.place_driver(binder_core::driver::read);
    }
    let request = PlanRequest::new(&shape, &topology, identity.size)
        .grant(&grant)
        .origin(&origin)
        .gpus_per_task(config.gpus_per_task);
    if config.action == Action::Explain {
        let header = format!("binder explain {origin} on {}", config.source);
        let ranks = identity.rank_known.then_some([identity.rank]);
        let (text, result) =
            binder_plan::explain::explain(&request, ranks.as_ref().map(|r| &r[..]), &header);
        out.write_all(text.as_bytes()).map_err(Error::Output)?;
        return result.map_err(Error::from);
    }
    let mut plan = plan(&request)?;
    if config.verbose {
        binder_core::text::emit(err, &identity.describe());
    }
    let ranks = identity.rank_known.then_some([identity.rank]);
    let header = format!("binder --dry-run {origin} on {}", config.source);
    // One dispatch for every output format: those that draw or number the machine take
    // the topology; the others are the plan's lines (with each task's environment).
    match config.format {
        report::Format::Rankfile => {
            let host = identity::hostname();
            return report::rankfile(&topology, &plan, &host, out).map_err(|e| match e {
                report::RankfileError::Output(e) => Error::Output(e),
                refused => Error::Usage(refused.to_string()),
            });
        }
        report::Format::Map | report::Format::Svg => {
            // Colour only for a person at a terminal, as anstream decides it (NO_COLOR,
            // CLICOLOR, CLICOLOR_FORCE, TERM=dumb); NO_COLOR also through `env`.
            let colour = anstream::AutoStream::choice(&std::io::stdout())
                != anstream::ColorChoice::Never
                && env.var("NO_COLOR").is_none();
            let blocked = report::map::blocked(&topology, &shape.options.reserve)
                .map_err(binder_plan::PlanError::from)?;
            return report::picture(
                &topology,
                &plan,
                &blocked,
                config.format,
                &header,
                colour,
                out,
            )
            .map_err(Error::Output);
        }
        report::Format::Pe if plan.ge.is_none() => {
            return Err(Error::Usage(
                "--format pe prints a Grid Engine request's binding; give one with --ge or `options.ge`".into(),
            ));
        }
        report::Format::Pe | report::Format::Text | report::Format::Json => {}
    }
    fill_ge_topology(&topology, &mut plan);
    let (previews, warnings) = binder_plan::preview(&topology, &plan, &shape, &|k| env.var(k));
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
