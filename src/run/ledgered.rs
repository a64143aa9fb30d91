//! `binder-full`'s launch through the node ledger (SEMANTICS §13, §13.1): the flow is
//! `binder_core::launch::ledgered`'s, the planning `binder_plan::around`'s; what is left
//! here is the CLI's: trimming hwloc's plugins in its own environment, and binding with
//! the topology (`--verbose`, `membind`) before exec.

use std::ffi::OsString;
use std::io::Write;

use super::launch_options;
use crate::config::Config;
use crate::error::Error;
use binder_core::identity::Env;
use binder_core::launch;
use binder_core::launch::ledgered::{self, Job, Stopped};
use binder_core::ledger::Ledger;
use binder_plan::around::HostPlanner;
use binder_plan::gpu::Grant;
use binder_plan::shape::Shape;
use binder_plan::topology::{Source, Topology};

/// This host's topology for a launch, with hwloc's unused plugins blocked first (the CLI
/// is single-threaded, so it may set that in its own environment); refused when hwloc
/// describes another machine.
pub(super) fn load_host(shape: &Shape, gpus_per_task: Option<usize>) -> Result<Topology, Error> {
    crate::hwenv::block_unused_plugins(shape.needs_io() || gpus_per_task.is_some());
    let t = binder_plan::load_topology(shape, &Source::Host, gpus_per_task)?;
    crate::hwbind::this_system(&t)?;
    Ok(t)
}

/// Runs the launch; returns only when it stopped (the process became the task otherwise).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch(
    ledger: &Ledger,
    job: &Job<'_>,
    config: &Config,
    shape: &Shape,
    grant: Grant,
    env: &dyn Env,
    command: &[OsString],
    err: &mut impl Write,
) -> Stopped<Error> {
    let get = |k: &str| env.var(k);
    let gpus = config.gpus_per_task;
    let load = Box::new(move |shape: &Shape| load_host(shape, gpus));
    let mut planner = HostPlanner::new(shape, grant, &get, load);
    let claimed = match ledgered::claim(ledger, job, env, &mut planner, err) {
        Ok(claimed) => claimed,
        Err(stopped) => return stopped,
    };
    let view = &claimed.view;
    // `--verbose` and `membind` bind through hwloc: load a topology if planning did not.
    if (config.verbose || view.membind) && planner.topology.is_none() {
        match load_host(shape, gpus) {
            Ok(t) => planner.topology = Some(t),
            Err(e) => {
                claimed.undo();
                return Stopped::Error(e);
            }
        }
    }
    // hwloc's plugin blocklist, set in binder's environment when a topology was loaded,
    // is kept from the task.
    let scrub = if planner.topology.is_some() {
        crate::hwenv::block_unused_plugins(shape.needs_io() || gpus.is_some())
    } else {
        Vec::new()
    };
    let options = launch::Options {
        started_on: claimed.started_on(),
        ..launch_options(config, view, command, &scrub)
    };
    let prepared =
        crate::hwbind::prepare(view, planner.topology.as_ref(), job.identity, &options, err);
    match prepared {
        Ok(mut task_env) => {
            task_env.push(("BINDER_JOB".into(), claimed.job.to_string()));
            drop(claimed);
            Stopped::Error(launch::exec(command, &task_env, &scrub).into())
        }
        Err(e) => {
            claimed.undo();
            Stopped::Error(e.into())
        }
    }
}
