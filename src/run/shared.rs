//! A launch through the node ledger (SEMANTICS §13, §13.1).
//!
//! Under this user's own lock: join this job's plan if another task of the job made one
//! (re-planning when another job meanwhile took this rank's units), else plan around what
//! other live jobs hold; bind; write this task's claim; read the other users' claims
//! again and settle any overlap ([`ledger::verdict`]); confirm; exec.
//!
//! Binding happens *before* the claim is written, so a reader finds this PID bound as its
//! claim says (a claim whose task is not bound inside it counts for nothing).
//!
//! The flow is shared by the two executables through [`Planner`] (`super::planner`).

use std::ffi::OsString;
use std::io::Write;
use std::time::{Duration, Instant};

use super::around::Avoid;
use super::planner::Planner;
use super::Job;
use crate::error::Error;
use binder_core::identity::job::{job_of, JobId};
use binder_core::identity::Env;
use binder_core::launch;
use binder_core::ledger::store::Own;
use binder_core::ledger::{self, Claim, JobPlan, Ledger, LedgerError, Scan, Verdict};
use binder_core::procfs::{Procs, RealOnce};
use binder_core::view::Packing;
use binder_core::view::TaskView;

/// How many times a task may move because other jobs' claims overlap its own.
const MAX_ROUNDS: usize = 8;
/// How long a task waits for a later task that overlaps it to move or confirm.
const SETTLE: Duration = Duration::from_millis(100);

/// How a ledgered launch ended without exec'ing.
pub(super) enum Stopped {
    /// binder's own refusal (or exec's failure, or [`Error::HandOver`]).
    Error(Error),
    /// The ledger could not coordinate this launch (why): the caller runs the task
    /// without it, with a warning, unless `BINDER_LEDGER=require`.
    Uncoordinated(String),
}

impl From<Error> for Stopped {
    fn from(e: Error) -> Stopped {
        Stopped::Error(e)
    }
}

/// Runs the launch; returns only on failure (the process became the task otherwise).
pub(super) fn launch(
    ledger: &Ledger,
    job: &Job<'_>,
    env: &dyn Env,
    command: &[OsString],
    planner: &mut impl Planner,
    err: &mut impl Write,
) -> Stopped {
    let procs = RealOnce::new();
    let me = procs.me();
    let Some(my_start) = procs.stat(me).map(|s| s.start) else {
        return Stopped::Uncoordinated("cannot read /proc/self/stat".into());
    };
    let guard = match ledger.lock() {
        Ok(guard) => guard,
        Err(e) => return Stopped::Uncoordinated(e.to_string()),
    };
    let mut flow = Flow {
        ledger,
        key: format!(
            "{}\n#size:{}\n#gpus:{:?}",
            job.text, job.identity.size, job.config.gpus_per_task
        ),
        job,
        procs: &procs,
        me: (me, my_start),
        claimed: None,
        original: None,
    };
    let result = flow.run(env, planner, err);
    let stopped = match result {
        Ok((view, id)) => match planner.prepare(job, &view, command, flow.original.as_deref(), err)
        {
            Ok((mut task_env, scrub)) => {
                task_env.push(("BINDER_JOB".into(), id.to_string()));
                drop(guard);
                return Stopped::Error(launch::exec(command, &task_env, &scrub).into());
            }
            Err(e) => Stopped::Error(e),
        },
        Err(stopped) => stopped,
    };
    // Nothing runs: take the claim back, and give a handed-over launch its affinity back.
    flow.undo();
    stopped
}

/// One launch's state through the ledger.
struct Flow<'a, 'j> {
    ledger: &'a Ledger,
    /// What the plan depends on: the job's text, its size and `--gpus-per-task`.
    key: String,
    job: &'a Job<'j>,
    procs: &'a RealOnce,
    /// This task's PID and start time (its priority, and its claim's name).
    me: (u32, u64),
    /// The claim written, by name.
    claimed: Option<String>,
    /// The affinity before binder bound this process.
    original: Option<Vec<usize>>,
}

impl Flow<'_, '_> {
    /// Plans or joins, binds, claims and settles; this task's view and job id.
    fn run(
        &mut self,
        env: &dyn Env,
        planner: &mut impl Planner,
        err: &mut impl Write,
    ) -> Result<(TaskView, JobId), Stopped> {
        let (job, ledger) = (self.job, self.ledger);
        let (config, identity) = (job.config, job.identity);
        let (now, hz) = (ledger::now_ticks(), ledger::clock_hz());
        let key = &self.key;
        let base = job_of(identity, env, self.procs);
        let mut own = ledger.list_own(self.procs);
        ledger.tidy(&mut own);
        let young = |made: u64| now.saturating_sub(made) < ledger::GRACE_SECS * hz;
        let part = base.file_part();
        let plan = own
            .plans
            .contains(&part)
            .then(|| ledger.read_plan(&base))
            .flatten();
        let in_use = own.alive(&part) || plan.as_ref().is_some_and(|p| young(p.made));
        let joined = plan.filter(|p| {
            p.key == *key
                && p.tasks.len() == identity.size
                && !own.started(&part, identity.rank)
                && (young(p.made) || own.alive(&part))
        });
        // A job id still in use (a task of it lives, or its plan is young) that this task
        // cannot join belongs to another instance (the same process group launching
        // again, two `binder … &` lines of one script): a new id. One-task jobs write no
        // plan, so their live claims are what says so.
        let id = if joined.is_none() && in_use {
            base.instance(self.me.0)
        } else {
            base
        };
        let part = id.file_part();
        let mut scan = self.scan(&own, &part, now, hz, err)?;
        let mut share = planner.shares();
        let mut view_pack = None;
        if let Some(raw) = &joined {
            let view = raw.view(identity.rank).ok_or_else(|| {
                Stopped::Uncoordinated(format!("job {id}'s plan has no rank {}", identity.rank))
            })?;
            // A late rank whose units another job took meanwhile plans again.
            let claim = Claim::of(&id, identity.rank, identity.size, raw.pack, &view);
            share |= raw.share;
            if share || !scan.overlaps(&claim.cpus, &claim.gpus) {
                if config.verbose {
                    binder_core::text::emit(
                        err,
                        &format!(
                            "job {id}: joins the plan its first task recorded in {}",
                            ledger.dir().display()
                        ),
                    );
                }
                view_pack = Some((view, raw.pack));
            }
        }
        for _ in 0..MAX_ROUNDS {
            let (view, pack) = match view_pack.take() {
                Some(vp) => vp,
                None => self.plan(&id, &own, &scan, planner, now, hz, err)?,
            };
            self.bind(&view)?;
            let mut claim = Claim::of(&id, identity.rank, identity.size, pack, &view);
            (claim.pid, claim.start) = self.me;
            let name = ledger.write_claim(&claim).map_err(Stopped::Uncoordinated)?;
            self.claimed = Some(name.clone());
            let settled = if share {
                Some(true)
            } else {
                self.settle(&claim)
            };
            if let Some(seen) = settled {
                // The marker tells a rival that started earlier and overlaps this claim
                // that this task has read the others: it then moves instead of waiting.
                // With nobody else's claim in sight there is no rival to tell (one that
                // comes later and overlaps waits at most `SETTLE`, then moves).
                if seen {
                    ledger.confirm(self.me.0, self.me.1);
                }
                return Ok((view, id));
            }
            // Another job's task goes first: take the claim back and plan around it.
            ledger.withdraw(&name, self.me.0, self.me.1);
            self.claimed = None;
            own = ledger.list_own(self.procs);
            scan = self.scan(&own, &part, now, hz, err)?;
        }
        Err(Stopped::Uncoordinated(format!(
            "other jobs' tasks kept claiming the same units through {MAX_ROUNDS} plans"
        )))
    }

    /// What other jobs hold now (this user's other jobs, and every other user's).
    fn scan(
        &self,
        own: &Own,
        part: &str,
        now: u64,
        hz: u64,
        err: &mut impl Write,
    ) -> Result<Scan, Stopped> {
        let mut scan = Scan::default();
        self.ledger
            .scan_own(own, Some(part), self.procs, now, hz, &mut scan);
        self.ledger.scan_others(self.procs, &mut scan);
        if let Some(why) = &scan.incomplete {
            if self.ledger.required() {
                return Err(Stopped::Error(LedgerError::Required(why.clone()).into()));
            }
            if self.job.identity.rank == 0 {
                binder_core::text::emit(
                    err,
                    &format!(
                        "warning: node ledger read in part ({why}); planning around what was read"
                    ),
                );
            }
        }
        Ok(scan)
    }

    /// A fresh plan for job `id` (this rank's view) around what `scan` holds and this
    /// job's own running ranks, recorded for the job's other ranks.
    #[allow(clippy::too_many_arguments)]
    fn plan(
        &self,
        id: &JobId,
        own: &Own,
        scan: &Scan,
        planner: &mut impl Planner,
        now: u64,
        hz: u64,
        err: &mut impl Write,
    ) -> Result<(TaskView, Packing), Stopped> {
        let part = id.file_part();
        let mut mine = Scan::default();
        if own.alive(&part) {
            self.ledger
                .scan_own(own, None, self.procs, now, hz, &mut mine);
            mine.holders.retain(|h| h.claim.job == *id);
        }
        let avoid = Avoid {
            cpus: mine.cpus(),
            gpus: mine.gpus(),
        };
        let (tasks, pack) = if scan.is_empty() && avoid.is_empty() {
            planner.plain(self.job, err)?
        } else {
            planner.around(self.job, scan, &avoid, err)?
        };
        let rank = self.job.identity.rank;
        let view = tasks
            .get(rank)
            .cloned()
            .ok_or_else(|| Stopped::Uncoordinated(format!("job {id}'s plan has no rank {rank}")))?;
        let plan = JobPlan {
            format: ledger::FORMAT,
            job: id.clone(),
            key: self.key.clone(),
            pack,
            share: planner.shares(),
            made: now,
            tasks,
        };
        // Only the job's other ranks read a plan: a one-task job needs none.
        if self.job.identity.size > 1 {
            self.ledger
                .write_plan(&plan)
                .map_err(Stopped::Uncoordinated)?;
        }
        Ok((view, pack))
    }

    /// Binds this process to the view's CPUs (the affinity before is kept, to give it
    /// back if the launch is handed over).
    fn bind(&mut self, view: &TaskView) -> Result<(), Stopped> {
        if view.is_bound() && view.apply {
            if self.original.is_none() {
                self.original = Some(binder_core::launch::affinity::current_raw());
            }
            binder_core::launch::affinity::bind_cpus_raw(&view.cpus)
                .map_err(|e| Stopped::Error(e.into()))?;
        }
        Ok(())
    }

    /// Reads the other users' claims again until this claim is clear (`Some`: whether
    /// any other claim was in sight) or another task goes first (`None`).
    fn settle(&self, claim: &Claim) -> Option<bool> {
        let until = Instant::now() + SETTLE;
        let me = (self.me.1, self.me.0);
        loop {
            let mut again = Scan::default();
            self.ledger.scan_others(self.procs, &mut again);
            match ledger::verdict(&claim.cpus, &claim.gpus, me, &again.holders) {
                Verdict::Clear => return Some(!again.holders.is_empty()),
                Verdict::Yield => return None,
                Verdict::Wait if Instant::now() >= until => return None,
                Verdict::Wait => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Takes back what a launch that does not run left: its claim and its binding.
    fn undo(&mut self) {
        if let Some(name) = self.claimed.take() {
            self.ledger.withdraw(&name, self.me.0, self.me.1);
        }
        if let Some(original) = self.original.take() {
            let _ = binder_core::launch::affinity::bind_cpus_raw(&original);
        }
    }
}
