//! The `binder` executable's launch: as far as a plain launch line goes without hwloc and
//! without parsing the shape. It binds from the node cache, or from the plan the job's
//! first task recorded in the node ledger, and execs, never returning; it returns the
//! error that stopped the launch, or [`Error::HandOver`], having changed nothing, for
//! everything that needs the topology or the parsed shape (a cache miss, other jobs to
//! plan around, `membind`), and for a ledger that cannot be trusted. Then `binder-full`
//! runs the whole command line again and says why.

use std::io::Write;

use super::ledgered::{self, Avoid, Job, Planned, Planner, Stopped};
use super::line::{job_text, site_text, LaunchLine, Requests};
use super::{exec, prepare_cached, run_cached, Options};
use crate::cache::launch as cache;
use crate::error::Error;
use crate::identity::{self, Env};
use crate::ledger::{Ledger, Scan};
use crate::view::TaskView;

/// The warm planner: the node cache or nothing.
struct Warm<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
}

impl Planner for Warm<'_> {
    type Error = Error;

    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Error> {
        cache::open(self.env, job.text, job.identity.size, None, err)
            .and_then(|pair| cache::lookup(&pair, self.env, err))
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

    /// Unknown without the parsed shape: a joining rank reads it from its job's plan,
    /// and anything else that would need it hands over to `binder-full`.
    fn shares(&self) -> bool {
        false
    }
}

/// A launch's options from this rank's view and the line.
fn options<'a>(line: &'a LaunchLine, report: bool, view: &TaskView) -> Options<'a> {
    Options {
        command: &line.command,
        openmp: view.openmp,
        membind: view.membind,
        report,
        verbose: false,
        scrub: &[],
        started_on: None,
        inherited: &super::process_env,
    }
}

/// Runs `line` (`report`: `--report` or `BINDER_REPORT`); returns only when it stopped
/// (see the module doc).
pub fn warm(line: &LaunchLine, report: bool, env: &dyn Env, err: &mut impl Write) -> Error {
    let get = |k: &str| env.var(k);
    let identity = match identity::identify(line.local_rank, line.local_size, env) {
        Ok(identity) => identity,
        Err(e) => return e.into(),
    };
    // binder-full says what is wrong with the shape or the site file.
    let Ok(shape) = crate::input::read_bounded(&line.shape, crate::input::MAX_SHAPE_BYTES) else {
        return Error::HandOver;
    };
    let (Ok(shape), Ok(site)) = (String::from_utf8(shape), site_text(&get)) else {
        return Error::HandOver;
    };
    let site = site.as_ref().map(|(_, text)| text.as_str());
    let text = job_text(&shape, &Requests::default(), site, &get);
    let origin = line.shape.display().to_string();
    match Ledger::open(&get) {
        Ok(ledger) => {
            let job = Job {
                origin: &origin,
                text: &text,
                identity: &identity,
                gpus_per_task: None,
                verbose: false,
            };
            let claimed = match ledgered::claim(&ledger, &job, env, &mut Warm { env: &get }, err) {
                Ok(claimed) => claimed,
                Err(Stopped::Error(e)) => return e,
                // binder-full says why, or refuses under BINDER_LEDGER=require.
                Err(Stopped::Uncoordinated(_)) => return Error::HandOver,
            };
            if claimed.view.membind {
                claimed.undo();
                return Error::HandOver;
            }
            let options = Options {
                started_on: claimed.started_on(),
                ..options(line, report, &claimed.view)
            };
            match prepare_cached(&claimed.view, &identity, &options, err) {
                Ok(mut task_env) => {
                    task_env.push(("BINDER_JOB".into(), claimed.job.to_string()));
                    drop(claimed);
                    exec(&line.command, &task_env, &[]).into()
                }
                Err(e) => {
                    claimed.undo();
                    e.into()
                }
            }
        }
        Err(why) if why.starts_with("BINDER_LEDGER=") => {
            let found = cache::open(&get, &text, identity.size, None, err)
                .and_then(|pair| cache::lookup(&pair, &get, err));
            match found {
                Some((views, _)) if !views[identity.rank].membind => {
                    let view = &views[identity.rank];
                    run_cached(view, &identity, &options(line, report, view), err).into()
                }
                _ => Error::HandOver,
            }
        }
        // binder-full says why, once per node.
        Err(_) => Error::HandOver,
    }
}
