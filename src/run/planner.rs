//! What the node ledger's launch flow ([`super::shared`]) cannot read from the ledger: a
//! plan when a job has none yet, and the binding itself. `binder-full` plans with the
//! hwloc topology ([`Full`]); the `binder` front, linked without libhwloc, only reads the
//! node cache and hands over when that is not enough ([`Warm`]).

use std::ffi::OsString;
use std::io::Write;

use super::around::{self, Avoid};
use super::{cache_lookup, launch_options, node_cache, Job};
use crate::error::Error;
use binder_core::launch;
use binder_core::ledger::Scan;
use binder_core::view::Packing;
use binder_core::view::TaskView;
use binder_plan::shape::Shape;
use binder_plan::topology::Topology;

/// The task's environment, and the variables to remove from it.
type TaskEnv = (Vec<(String, String)>, Vec<&'static str>);

/// A new job's plan: every rank's view, and the packing policy recorded with the job.
pub(super) type Planned = (Vec<TaskView>, Packing);

/// What the ledger's flow cannot read from the ledger: a plan when this job has none yet,
/// and the binding itself. Every method may answer [`Error::HandOver`] before anything
/// was changed; none may after [`Planner::prepare`] bound the process.
pub(crate) trait Planner {
    /// The plan when no other job holds anything.
    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Error>;
    /// The plan around what `scan` holds and `avoid` (this job's own running ranks).
    fn around(
        &mut self,
        job: &Job<'_>,
        scan: &Scan,
        avoid: &Avoid,
        err: &mut impl Write,
    ) -> Result<Planned, Error>;
    /// Binds this process as `view` says; the task's environment and the variables to
    /// remove from it. `started_on` is the affinity binder started with, when the flow
    /// bound the process already.
    fn prepare(
        &mut self,
        job: &Job<'_>,
        view: &TaskView,
        command: &[OsString],
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<TaskEnv, Error>;
    /// Whether the job may share units with other jobs (`--share`, `options.share`).
    fn shares(&self) -> bool;
}

/// `binder-full`'s planner: the parsed shape, the node cache, else the hwloc topology
/// (loaded once).
pub(super) struct Full<'a> {
    shape: &'a Shape,
    topology: Option<Topology>,
}

impl<'a> Full<'a> {
    pub(super) fn new(shape: &'a Shape) -> Full<'a> {
        Full {
            shape,
            topology: None,
        }
    }
}

impl Planner for Full<'_> {
    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Error> {
        let pack = self.shape.options.pack.unwrap_or_default();
        let views = around::plain(job, self.shape, &mut self.topology, err)?;
        Ok((views, pack.into()))
    }

    fn around(
        &mut self,
        job: &Job<'_>,
        scan: &Scan,
        avoid: &Avoid,
        err: &mut impl Write,
    ) -> Result<Planned, Error> {
        let pack = self.shape.options.pack.unwrap_or_default();
        let views = around::around(job, self.shape, scan, avoid, &mut self.topology, err)?;
        Ok((views, pack.into()))
    }

    /// `--verbose` and `membind` load a topology when planning did not.
    fn prepare(
        &mut self,
        job: &Job<'_>,
        view: &TaskView,
        command: &[OsString],
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<TaskEnv, Error> {
        let (config, identity, shape) = (job.config, job.identity, self.shape);
        if (config.verbose || view.membind) && self.topology.is_none() {
            self.topology = Some(around::load(job, shape)?);
        }
        // hwloc's plugin blocklist, set in binder's environment when a topology was
        // loaded, is kept from the task.
        let scrub = if self.topology.is_some() {
            crate::hwenv::block_unused_plugins(shape.needs_io() || config.gpus_per_task.is_some())
        } else {
            Vec::new()
        };
        let options = launch::Options {
            started_on,
            ..launch_options(config, view, command, &scrub)
        };
        let env = crate::hwbind::prepare(view, self.topology.as_ref(), identity, &options, err)?;
        Ok((env, scrub))
    }

    fn shares(&self) -> bool {
        self.shape.options.share
    }
}

/// The `binder` front's planner: the node cache or nothing. `--verbose` and `membind`
/// need the topology: its caller hands `--verbose` over, and it hands over a rank whose
/// view says `membind`.
pub(super) struct Warm;

impl Planner for Warm {
    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Error> {
        let (config, identity) = (job.config, job.identity);
        node_cache(config, false, job.text, identity.size, err)
            .and_then(|pair| cache_lookup(&pair, err))
            .ok_or(Error::HandOver)
    }

    fn around(
        &mut self,
        _: &Job<'_>,
        _: &Scan,
        _: &Avoid,
        _: &mut impl Write,
    ) -> Result<Planned, Error> {
        Err(Error::HandOver)
    }

    fn prepare(
        &mut self,
        job: &Job<'_>,
        view: &TaskView,
        command: &[OsString],
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<TaskEnv, Error> {
        if view.membind {
            return Err(Error::HandOver);
        }
        let (config, identity) = (job.config, job.identity);
        let options = launch::Options {
            started_on,
            ..launch_options(config, view, command, &[])
        };
        Ok((
            launch::prepare_cached(view, identity, &options, err)?,
            Vec::new(),
        ))
    }

    /// Unknown without the parsed shape: a joining rank reads it from its job's plan,
    /// and anything else that would need it hands over to `binder-full`.
    fn shares(&self) -> bool {
        false
    }
}
