//! The one launch flow every front runs (the `binder` executable's warm path,
//! `binder-full`, the SPANK plugin, a Flux shell plugin): identity and envelope come in
//! with the [`Job`], then the node ledger (join or plan, bind, claim, settle), or the plan
//! alone when the ledger is off or unusable, then the front's own binding and the task's
//! environment; on any failure after the claim, the claim and the binding are taken back.
//! Exec (or handing the variables to the launcher) is the front's.
//!
//! A front differs from another only in how it plans ([`Planner`]) and how it binds its
//! task ([`Front::bind`]): the kernel's `sched_setaffinity` from a cached view, hwloc with
//! `membind` and `--verbose`, a plugin's `setenv`. What to do when the ledger cannot
//! coordinate is one rule for all ([`Front::uncoordinated`]'s default), which only the
//! warm path overrides (it hands over to `binder-full`, which says why).

use std::io::Write;

use super::job::Job;
use super::ledgered::{self, Planner, Stopped};
use crate::identity::job::job_of;
use crate::identity::Env;
use crate::ledger::{others, store, Ledger, LedgerError};
use crate::view::TaskView;

/// Whether the node ledger takes part in this launch.
#[derive(Debug)]
pub(crate) enum LedgerState {
    /// `BINDER_LEDGER=off`: the user turned it off.
    Off,
    /// It cannot be used here (why): the launch runs without it, said once per node,
    /// unless `BINDER_LEDGER=require`.
    Unusable(String),
    /// Open.
    Open(Ledger),
}

impl LedgerState {
    /// The ledger for `env` (`BINDER_LEDGER`, `BINDER_LEDGER_DIR`).
    pub(crate) fn open(env: &dyn Fn(&str) -> Option<String>) -> LedgerState {
        if store::turned_off(env) {
            return LedgerState::Off;
        }
        match Ledger::open(env) {
            Ok(ledger) => LedgerState::Open(ledger),
            Err(why) => LedgerState::Unusable(why),
        }
    }
}

/// A front's error: its planner's.
pub(crate) type FrontError<F> = <<F as Front>::Planner as Planner>::Error;

/// A front: how it plans (its [`Planner`], often `binder_host::around::HostPlanner`
/// itself) and how it binds its own task.
pub trait Front {
    /// The planner the flow asks for a plan.
    type Planner: Planner;

    /// That planner.
    fn planner(&mut self) -> &mut Self::Planner;

    /// Binds this process to `view` (the flow already bound its CPUs when `started_on`
    /// is given: the affinity it had before) and returns the task's variables.
    fn bind(
        &mut self,
        view: &TaskView,
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<Vec<(String, String)>, FrontError<Self>>;

    /// The ledger cannot coordinate this launch (`why`): refused under
    /// `BINDER_LEDGER=require`, else one warning from local rank 0 and the launch goes on
    /// without it (SEMANTICS §13.1 item 3).
    fn uncoordinated(
        &mut self,
        job: &Job<'_>,
        why: String,
        env: &dyn Fn(&str) -> Option<String>,
        err: &mut impl Write,
    ) -> Result<(), FrontError<Self>> {
        if store::required(env) {
            return Err(LedgerError::Required(why).into());
        }
        if job.identity.rank == 0 {
            // What the fallback really looks at (`launch_inner`): under
            // BINDER_KERNEL_VIEW=in-sight the user's own other jobs are not looked for (#54).
            let whose = if store::looks_beyond_sight(env) {
                "yours and other users'"
            } else {
                "other users' in sight of the ledger root; your own other jobs are not looked for under BINDER_KERNEL_VIEW=in-sight, and may share them"
            };
            crate::text::emit(
                err,
                &format!(
                    "warning: node ledger not used ({}): planned around the cpus bound tasks of other jobs run on ({whose}), as the kernel shows them; GPUs are not coordinated",
                    crate::text::printable(&why, 200)
                ),
            );
        }
        Ok(())
    }
}

/// Runs `job` through the ledger (or without it) and `front`'s binding: the task's
/// variables, `BINDER_JOB` among them when the ledger named the job; the process is
/// bound. Nothing is left claimed or bound when it returns an error.
pub fn launch<F: Front>(
    job: &Job<'_>,
    env: &dyn Env,
    front: &mut F,
    err: &mut impl Write,
) -> Result<Vec<(String, String)>, FrontError<F>> {
    // A launch reads /proc and the ledger through file descriptors: with `ulimit -n` at a
    // handful it could list neither and plan as if nobody ran (#45). The soft limit is
    // raised for the launch (within the hard one) and given back before the task runs;
    // where the hard limit keeps it too low, the launch refuses (SEMANTICS §13.4: limits
    // fail closed) rather than run where it could not look.
    // A misspelt setting is one line, never silently the default (#54).
    crate::settings::check(&|k| env.var(k))
        .map_err(|why| FrontError::<F>::from(super::LaunchError::Setting(why)))?;
    let _files = Files::enough().map_err(|limit| {
        FrontError::<F>::from(super::LaunchError::FileLimit {
            limit,
            need: LAUNCH_FILES,
        })
    })?;
    // The warnings of a launch are said only when its task runs (or under `--verbose`):
    // a refusal is one line, never a warning and then the refusal (#54: under load a
    // partial read or a ledger that could not be locked printed its warning, then the
    // fallback refused), and a hand-over to binder-full, which runs the flow again,
    // says them there once (#45). Each line is still whole in the one write.
    let mut said = Vec::new();
    let outcome = launch_inner(job, env, front, &mut said);
    if (outcome.is_ok() || job.verbose) && !said.is_empty() {
        let _ = err.write_all(&said);
    }
    outcome
}

/// The soft `RLIMIT_NOFILE` a launch needs: a few directories and files open at once.
const LAUNCH_FILES: u64 = 64;

/// Raises the soft file limit to [`LAUNCH_FILES`] (never above the hard limit) while it
/// lives, and gives the original back when dropped: the task runs with the user's limit.
struct Files(Option<rustix::process::Rlimit>);

impl Files {
    /// Enough files for a launch, or the limit that stays too low.
    fn enough() -> Result<Files, u64> {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let now = getrlimit(Resource::Nofile);
        let Some(current) = now.current.filter(|&c| c < LAUNCH_FILES) else {
            return Ok(Files(None));
        };
        if now.maximum.is_some_and(|m| m < LAUNCH_FILES) {
            return Err(current);
        }
        let raised = Rlimit {
            current: Some(LAUNCH_FILES),
            maximum: now.maximum,
        };
        setrlimit(Resource::Nofile, raised)
            .map(|()| Files(Some(now)))
            .map_err(|_| current)
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        if let Some(original) = self.0.take() {
            let _ = rustix::process::setrlimit(rustix::process::Resource::Nofile, original);
        }
    }
}

/// [`launch`] once the launch may open what it needs.
fn launch_inner<F: Front>(
    job: &Job<'_>,
    env: &dyn Env,
    front: &mut F,
    err: &mut impl Write,
) -> Result<Vec<(String, String)>, FrontError<F>> {
    let get = |k: &str| env.var(k);
    let state = LedgerState::open(&get);
    let off = matches!(state, LedgerState::Off);
    // Whether the fallback below looks at other users' bound tasks: always, but under
    // `BINDER_KERNEL_VIEW=in-sight` only where another user's entry is in the ledger root,
    // as a launch through the ledger does (a test's private ledger holds none).
    let mut others_in_sight = true;
    match state {
        LedgerState::Open(ledger) => match ledgered::claim(&ledger, job, env, front.planner(), err)
        {
            Ok(claimed) => {
                return match front.bind(&claimed.view, claimed.started_on(), err) {
                    Ok(mut vars) => {
                        vars.push(("BINDER_JOB".into(), claimed.job.to_string()));
                        Ok(vars)
                    }
                    Err(e) => {
                        claimed.undo();
                        Err(e)
                    }
                };
            }
            Err(Stopped::Error(e)) => return Err(e),
            Err(Stopped::Uncoordinated(why)) => {
                others_in_sight = store::looks_beyond_sight(&get) || ledger.others_in_sight();
                front.uncoordinated(job, why, &get, err)?;
            }
        },
        LedgerState::Unusable(why) => front.uncoordinated(job, why, &get, err)?,
        LedgerState::Off => {}
    }
    // Without the ledger, the kernel's view still says where other users' bound tasks
    // run, and this user's own of other jobs: the plan avoids them (SEMANTICS §13.2,
    // §13.3), it never plans on an empty node. The task carries its job's name
    // (`BINDER_JOB`), by which a later rank of this job tells its own job's tasks apart.
    let fallback_job = (!off).then(|| job_of(job.identity, env, &crate::procfs::Real));
    let scan = match &fallback_job {
        None => crate::ledger::Scan::default(),
        Some(id) => {
            let me = crate::procfs::euid();
            let mut scan = if others_in_sight {
                others::kernel_scan(&crate::procfs::Real, me)
            } else {
                crate::ledger::Scan::new(me)
            };
            scan.allocation = id.allocation();
            if store::looks_beyond_sight(&get) {
                crate::ledger::kernel::add_own(&crate::procfs::Real, me, id, &mut scan);
            }
            scan
        }
    };
    if let Some(why) = scan.incomplete.as_ref().filter(|_| job.identity.rank == 0) {
        crate::text::emit(
            err,
            &format!(
                "warning: the kernel's view of other users' tasks could not be taken either ({}): planned as if none ran; raise the open-file limit (`ulimit -n`, at least {LAUNCH_FILES}) to let binder see them",
                crate::text::printable(why, 120)
            ),
        );
    }
    let (views, _) = if scan.is_empty() {
        front.planner().plain(job, err)?
    } else {
        front
            .planner()
            .around(job, &scan, &ledgered::Avoid::default(), err)?
    };
    let rank = job.identity.rank;
    let view = views
        .into_iter()
        .nth(rank)
        .ok_or_else(|| FrontError::<F>::from(LedgerError::NoRank(rank)))?;
    let mut vars = front.bind(&view, None, err)?;
    if let Some(id) = fallback_job {
        vars.push(("BINDER_JOB".into(), id.to_string()));
    }
    Ok(vars)
}
