//! `binder-full`'s front on the one launch flow (`binder_core::launch::flow`): planning is
//! `binder_host::around`'s; what is left here is the CLI's: trimming hwloc's plugins in its
//! own environment, taking the shell's own XML for this host, and binding with the
//! topology (`--verbose`, `membind`) before exec.

use std::ffi::OsString;
use std::io::Write;

use super::launch_options;
use crate::config::Config;
use crate::error::Error;
use binder_core::identity::{Env, Identity};
use binder_core::launch::flow::{self, Front};
use binder_core::launch::job::Job;
use binder_core::view::TaskView;
use binder_host::around::HostPlanner;
use binder_plan::gpu::Grant;
use binder_plan::shape::Shape;
use binder_plan::topology::{Source, Topology};

/// This host's topology for a launch, with hwloc's unused plugins blocked first (the CLI
/// is single-threaded, so it may set that in its own environment); refused when hwloc
/// describes another machine (but for the job shell's XML of this very host).
pub(super) fn load_host(shape: &Shape, gpus_per_task: Option<usize>) -> Result<Topology, Error> {
    crate::hwenv::block_unused_plugins(shape.needs_io() || gpus_per_task.is_some());
    let mut t = binder_host::for_shape(shape, &Source::Host, gpus_per_task)?;
    if crate::hwenv::trust_own_xml(&t) {
        t = binder_host::for_shape(shape, &Source::Host, gpus_per_task)?;
    }
    crate::host_launch::this_system(&t)?;
    Ok(t)
}

/// The CLI's front: the host planner, and binding through hwloc.
struct Cli<'a> {
    planner: HostPlanner<'a, Error>,
    config: &'a Config,
    shape: &'a Shape,
    identity: &'a Identity,
    command: &'a [OsString],
}

impl<'a> Front for Cli<'a> {
    type Planner = HostPlanner<'a, Error>;

    fn planner(&mut self) -> &mut Self::Planner {
        &mut self.planner
    }

    fn bind(
        &mut self,
        view: &TaskView,
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<Vec<(String, String)>, Error> {
        let gpus = self.config.gpus_per_task;
        // `--verbose` and `membind` bind through hwloc: load a topology if planning did
        // not. Without the ledger's binding (`started_on`), a view planned with the
        // topology binds through it too.
        if (self.config.verbose || view.membind.is_some()) && self.planner.topology.is_none() {
            self.planner.topology = Some(load_host(self.shape, gpus)?);
        }
        // What binder set in its own environment for hwloc is kept from the task.
        let scrub = crate::hwenv::set_here();
        let options = binder_core::launch::Options {
            started_on,
            ..launch_options(self.config, view, self.command, &scrub)
        };
        let topology = self.planner.topology.as_ref();
        Ok(crate::host_launch::prepare(
            view,
            topology,
            self.identity,
            &options,
            err,
        )?)
    }
}

/// Runs the launch; returns only when it stopped (the process became the task otherwise).
#[allow(clippy::too_many_arguments)]
pub(super) fn launch(
    job: &Job<'_>,
    config: &Config,
    shape: &Shape,
    grant: Grant,
    env: &dyn Env,
    command: &[OsString],
    err: &mut impl Write,
) -> Error {
    let get = |k: &str| env.var(k);
    let gpus = config.gpus_per_task;
    let load = Box::new(move |shape: &Shape| load_host(shape, gpus));
    let mut front = Cli {
        planner: HostPlanner::new(shape, grant, &get, load),
        config,
        shape,
        identity: job.identity,
        command,
    };
    match flow::launch(job, env, &mut front, err) {
        Ok(vars) => binder_core::launch::exec(command, &vars, &crate::hwenv::set_here()).into(),
        Err(e) => e,
    }
}
