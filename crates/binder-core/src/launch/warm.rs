//! The `binder` executable's launch: as far as a plain launch line goes without hwloc and
//! without parsing the shape. It binds from the node cache, or from the plan the job's
//! first task recorded in the node ledger, and execs, never returning; it returns the
//! error that stopped the launch ([`Stop::Refused`]), or [`Stop::HandOver`], having
//! changed nothing, for everything that needs the topology or the parsed shape (a cache
//! miss, other jobs to plan around, `membind`), and for a ledger that cannot be trusted.
//! Then `binder-full` runs the whole command line again and says why.
//!
//! The hand-over is this front's own outcome, not an error a user could meet, so it lives
//! here ([`Stop`]) and not in [`Error`], which every front shares.

use std::io::Write;

use super::flow::{self, Front};
use super::job::{Job, JobSpec};
use super::ledgered::{Avoid, Planned, Planner};
use super::line::{site_text, LaunchLine, Requests};
use super::{exec, prepare_cached, Options};
use crate::cache::launch as cache;
use crate::envelope::Envelope;
use crate::error::Error;
use crate::identity::{self, Env, Identity, IdentityError};
use crate::launch::LaunchError;
use crate::ledger::{LedgerError, Scan};
use crate::view::TaskView;

/// Why the warm launch stopped short of exec.
#[derive(Debug)]
pub enum Stop {
    /// A refusal, said and exited with as `binder-full` would.
    Refused(Error),
    /// The launch needs hwloc or the parsed shape (a node cache miss, other jobs to plan
    /// around, `--verbose`, `membind`, any refusal to explain): the `binder` executable
    /// hands it to `binder-full`, having changed nothing. Never shown to a user.
    HandOver,
}

/// The flow's errors are refusals.
macro_rules! refused_from {
    ($($e:ty),*) => {$(
        impl From<$e> for Stop {
            fn from(e: $e) -> Stop {
                Stop::Refused(e.into())
            }
        }
    )*};
}
refused_from!(Error, IdentityError, LaunchError, LedgerError);

/// The warm front: plans from the node cache or nothing, binds with the kernel's
/// `sched_setaffinity` (no hwloc), and hands over whatever needs more.
struct Warm<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    line: &'e LaunchLine,
    identity: &'e Identity,
    report: bool,
}

impl Planner for Warm<'_> {
    type Error = Stop;

    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Stop> {
        cache::open(self.env, job.text(), job.identity.size, None, err)
            .and_then(|pair| cache::lookup(&pair, self.env, err))
            .ok_or(Stop::HandOver)
    }

    fn around(
        &mut self,
        _: &Job<'_>,
        _: &Scan,
        _: &Avoid,
        _: &mut impl Write,
    ) -> Result<Planned, Stop> {
        Err(Stop::HandOver)
    }

    /// A hand-over is no refusal: `binder-full` plans (and looks again where it refuses).
    fn refuses(&self, error: &Stop) -> bool {
        !matches!(error, Stop::HandOver)
    }

    /// Unknown without the parsed shape: a joining rank reads it from its job's plan,
    /// and anything else that would need it hands over to `binder-full`.
    fn shares(&self) -> bool {
        false
    }
}

impl<'e> Front for Warm<'e> {
    type Planner = Self;

    fn planner(&mut self) -> &mut Self {
        self
    }

    /// The kernel binds; `membind` needs hwloc, so it hands over (the flow takes the
    /// claim and the binding back first).
    fn bind(
        &mut self,
        view: &TaskView,
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<Vec<(String, String)>, Stop> {
        if view.membind.is_some() {
            return Err(Stop::HandOver);
        }
        let options = Options::for_view(view, self.report, false, started_on, &super::process_env)
            .running(&self.line.command, &[]);
        Ok(prepare_cached(view, self.identity, &options, err)?)
    }

    /// binder-full says why, or refuses under `BINDER_LEDGER=require`.
    fn uncoordinated(
        &mut self,
        _: &Job<'_>,
        _: String,
        _: &dyn Fn(&str) -> Option<String>,
        _: &mut impl Write,
    ) -> Result<(), Stop> {
        Err(Stop::HandOver)
    }
}

/// Runs `line` (`report`: `--report` or `BINDER_REPORT`); returns only when it stopped
/// (see the module doc).
pub fn warm(line: &LaunchLine, report: bool, env: &dyn Env, err: &mut impl Write) -> Stop {
    let get = |k: &str| env.var(k);
    let identity = match identity::identify(line.local_rank, line.local_size, env) {
        Ok(identity) => identity,
        Err(e) => return e.into(),
    };
    // binder-full says what is wrong with the shape or the site file.
    let path = super::line::resolve_shape(&line.shape);
    let Ok(shape) = crate::input::read_bounded(&path, crate::input::MAX_SHAPE_BYTES) else {
        return Stop::HandOver;
    };
    let (Ok(shape), Ok(site)) = (String::from_utf8(shape), site_text(&get)) else {
        return Stop::HandOver;
    };
    let site = site.as_ref().map(|(_, text)| text.as_str());
    let origin = crate::text::printable(&path.display().to_string(), 200);
    let envelope = Envelope::here(&identity, &get);
    let job = JobSpec::new(&origin, &shape, &Requests::default(), site, &get, envelope);
    let mut front = Warm {
        env: &get,
        line,
        identity: &identity,
        report,
    };
    // (The flow says its warnings only when the task runs here: a hand-over runs the
    // flow again in binder-full, which says them then.)
    match flow::launch(&job.task(&identity), env, &mut front, err) {
        Ok(vars) => Stop::Refused(exec(&line.command, &vars, &[]).into()),
        Err(e) => e,
    }
}
