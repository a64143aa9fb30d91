//! A launch through the node ledger (SEMANTICS §13, §13.1).
//!
//! Under this user's own lock: join this job's plan if another task of the job made one
//! (re-planning when another job meanwhile took this rank's units), else plan around what
//! other live jobs hold; bind; write this task's claim; read the other users' claims
//! again and settle any overlap (`ledger::verdict`); confirm; exec.
//!
//! Binding happens *before* the claim is written, so a reader finds this PID bound as its
//! claim says (a claim whose task is not bound inside it counts for nothing).
//!
//! Every launcher shares this flow through [`Planner`], which makes a plan when the
//! ledger has none: the `binder` executable's from the node cache only (`super::warm`),
//! `binder-full`'s and the SPANK plugin's with hwloc (`binder_host::around`). Binding
//! with the topology (`membind`, `--verbose`) and exec are the caller's, after [`claim`].

use std::cell::Cell;
use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

use super::LaunchError;
use crate::identity::job::{job_of, JobId};
use crate::identity::Env;
use crate::ledger::store::{Guard, Own};
use crate::ledger::{self, Claim, JobPlan, Ledger, LedgerError, Scan, Verdict};
use crate::procfs::{Procs, RealOnce};
use crate::view::Packing;
use crate::view::TaskView;

use super::job::Job;

mod afresh;

/// Units of the launching job's own running ranks, which a re-plan of its other ranks
/// must leave to them.
#[derive(Debug, Clone, Default)]
pub struct Avoid {
    /// Their CPUs.
    pub cpus: Vec<usize>,
    /// Their GPUs (bus ids).
    pub gpus: Vec<String>,
}

impl Avoid {
    /// Whether there is nothing to avoid.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty() && self.gpus.is_empty()
    }
}

/// A new job's plan: every rank's view, and the packing policy recorded with the job.
pub type Planned = (Vec<TaskView>, Packing);

/// What the ledger's flow cannot read from the ledger: a plan when this job has none
/// yet. A planner may answer an error that means "not here" (the warm path's hand-over)
/// before anything was changed: the flow takes back what it did.
pub trait Planner {
    /// The planner's refusal.
    type Error: From<LedgerError> + From<LaunchError>;
    /// The plan when no other job holds anything.
    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Self::Error>;
    /// The plan around what `scan` holds and `avoid` (this job's own running ranks).
    fn around(
        &mut self,
        job: &Job<'_>,
        scan: &Scan,
        avoid: &Avoid,
        err: &mut impl Write,
    ) -> Result<Planned, Self::Error>;
    /// Whether the job may share units with other jobs (`--share`, `options.share`).
    fn shares(&self) -> bool;
    /// Whether `error` refuses the plan (worth a fresh look at the kernel before it
    /// stands: SEMANTICS §13.4), rather than handing the launch on.
    fn refuses(&self, error: &Self::Error) -> bool {
        let _ = error;
        true
    }
}

/// How long a refusal that only unclaimed bound processes decide waits for one of them
/// to let go (looking every `WATCH_EVERY`), and the most thread affinities the watch
/// reads in all (SEMANTICS §13.5: the rule is the same for any thread count, the cost
/// bounded: a 65-thread squatter bound 9 ms in 10 costs 40 looks of 65 reads; one of
/// thousands of threads is watched until the reads run out, then holds).
const WATCH: Duration = Duration::from_millis(20);
const WATCH_EVERY: Duration = Duration::from_micros(500);
const WATCH_READS: usize = 20_000;

/// How many times a task may move because other jobs' claims overlap its own.
const MAX_ROUNDS: usize = 8;
/// How long a task that moved waits before looking again when no units are left.
const RETRY: Duration = Duration::from_millis(20);
/// How long a task waits for a later task that overlaps it to move or confirm.
const SETTLE: Duration = Duration::from_millis(100);
/// A launch whose process started longer ago than this may have been stopped, and a
/// launch of its user's may have run without the ledger meanwhile
/// (`Attempt::ran_meanwhile`).
const STOPPED_AFTER: Duration = Duration::from_millis(100);

/// How a ledgered launch stopped before its task could run.
#[derive(Debug)]
pub enum Stopped<E> {
    /// The planner's refusal, or the ledger's under `BINDER_LEDGER=require`.
    Error(E),
    /// The ledger could not coordinate this launch (why): the caller runs the task
    /// without it, with a warning, unless `BINDER_LEDGER=require`.
    Uncoordinated(String),
}

/// This task's place in the ledger: bound to its view's CPUs and claimed, under the
/// ledger's lock until it is dropped. The caller binds with the topology when it needs
/// to, sets the task's environment (with [`Claimed::job`] as `BINDER_JOB`) and execs;
/// when the task cannot run after all, [`Claimed::undo`] takes the claim and the binding
/// back.
#[derive(Debug)]
pub struct Claimed<'a> {
    /// This rank's view.
    pub view: TaskView,
    /// The job's id in the ledger.
    pub job: JobId,
    ledger: &'a Ledger,
    _guard: Guard,
    me: (u32, u64),
    claimed: Option<String>,
    original: Option<Vec<usize>>,
}

impl Claimed<'_> {
    /// The affinity this process had before the flow bound it (OS numbers), when it did.
    pub fn started_on(&self) -> Option<&[usize]> {
        self.original.as_deref()
    }

    /// Takes back the claim and gives the process its affinity back.
    pub fn undo(self) {
        undo(self.ledger, self.me, self.claimed, self.original);
    }
}

/// Takes back what a launch that does not run left: its claim and its binding.
fn undo(ledger: &Ledger, me: (u32, u64), claimed: Option<String>, original: Option<Vec<usize>>) {
    if let Some(name) = claimed {
        ledger.withdraw(&name, me.0, me.1);
    }
    if let Some(original) = original {
        let _ = super::affinity::bind_cpus_raw(&original);
    }
}

/// Under the ledger's lock, joins or makes this job's plan, binds this process to its
/// rank's CPUs and claims them, settled against every other user's claims.
pub fn claim<'l, P: Planner>(
    ledger: &'l Ledger,
    job: &Job<'_>,
    env: &dyn Env,
    planner: &mut P,
    err: &mut impl Write,
) -> Result<Claimed<'l>, Stopped<P::Error>> {
    let procs = RealOnce::new();
    let me = procs.me();
    let Some(my_start) = procs.stat(me).map(|s| s.start) else {
        return Err(Stopped::Uncoordinated("cannot read /proc/self/stat".into()));
    };
    let guard = ledger.lock().map_err(|e| {
        // The launch runs on the kernel's view alone, unclaimed: a launch that holds
        // the lock meanwhile looks for it before it runs (`Attempt::ran_meanwhile`).
        ledger.mark_fallback();
        Stopped::Uncoordinated(e.to_string())
    })?;
    let mut flow = Attempt {
        ledger,
        key: format!(
            "{}\n#size:{}\n#gpus:{:?}",
            job.text(),
            job.identity.size,
            job.gpus_per_task
        ),
        job,
        procs: &procs,
        me: (me, my_start),
        claimed: None,
        original: None,
        warned: Cell::new(false),
        notes: std::cell::RefCell::new(Vec::new()),
        own_kernel: Cell::new(false),
        lineage: std::cell::OnceCell::new(),
        momentary: std::cell::RefCell::new(Vec::new()),
        enclosing: env
            .var("BINDER_JOB")
            .filter(|j| !j.is_empty() && j.len() <= 256),
    };
    let ran = flow.run(env, planner, err);
    // The scan's warnings, said by the process that runs the task or refuses it: a
    // launch handed over to `binder-full` says them there, once (SEMANTICS §13.5: a
    // flood's warning was said twice).
    let handed_over = matches!(&ran, Err(Stopped::Error(e)) if !planner.refuses(e));
    if !handed_over {
        for note in flow.notes.take() {
            crate::text::emit(err, &note);
        }
    }
    match ran {
        Ok((view, id)) => Ok(Claimed {
            view,
            job: id,
            ledger,
            _guard: guard,
            me: flow.me,
            claimed: flow.claimed.take(),
            original: flow.original.take(),
        }),
        Err(stopped) => {
            // Nothing runs: take the claim back, and the affinity.
            undo(ledger, flow.me, flow.claimed.take(), flow.original.take());
            Err(stopped)
        }
    }
}

/// One launch's state through the ledger.
struct Attempt<'a, 'j> {
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
    /// Whether the partial-scan and hidden-/proc warnings were printed (once a launch).
    warned: Cell<bool>,
    /// Those warnings, said once the launch ends (not by a launch handed over).
    notes: std::cell::RefCell<Vec<String>>,
    /// Whether scans add the kernel's view of this user's own bound tasks of other jobs
    /// (a launch that was stopped while it held the lock: `Attempt::ran_meanwhile`).
    own_kernel: Cell<bool>,
    /// This process and its ancestors (`Procs::lineage`), read once when a scan first
    /// finds a holder: what they hold is this task's envelope, not another job's.
    lineage: std::cell::OnceCell<Vec<(u32, u64)>>,
    /// Other users' processes the watch saw let go of their binding (`Attempt::let_go`):
    /// momentary bindings, which steer and never move this task.
    momentary: std::cell::RefCell<Vec<u32>>,
    /// The job that encloses this one (SEMANTICS §4.3, nested steps): the `BINDER_JOB`
    /// this task inherited, which an outer binder exported to the shell that started
    /// this job (`srun --pty bash`, `srun -n1 -c8 bash -c 'srun …'`). Its claims, this
    /// user's, are this job's envelope, never a competitor.
    enclosing: Option<String>,
}

impl Attempt<'_, '_> {
    /// Plans or joins, binds, claims and settles; this task's view and job id.
    fn run<P: Planner>(
        &mut self,
        env: &dyn Env,
        planner: &mut P,
        err: &mut impl Write,
    ) -> Result<(TaskView, JobId), Stopped<P::Error>> {
        let (job, ledger) = (self.job, self.ledger);
        let identity = job.identity;
        let (now, hz) = (ledger::now_ticks(), ledger::clock_hz());
        let key = &self.key;
        let base = job_of(identity, env, self.procs);
        if job.verbose {
            // Which job the ledger counts this task in: a refusal that names another
            // job's ranks is read against it.
            let from = if base.from_launcher() {
                "named by its launcher"
            } else {
                "named after its process, as its launcher names none"
            };
            crate::text::emit(
                err,
                &format!("job {base}: this task's job on this node ({from})"),
            );
        }
        let part = base.file_part();
        // Whether this job's tasks live is read only when its plan does not answer: a
        // task joining a young plan reads none of its job's other tasks.
        let mut own = ledger.list_own_but(self.procs, Some(&part));
        let young = |made: u64| now.saturating_sub(made) < ledger::GRACE_SECS * hz;
        let plan = own
            .plans
            .contains(&part)
            .then(|| ledger.read_plan(&base))
            .flatten();
        if !plan.as_ref().is_some_and(|p| young(p.made)) {
            own.resolve(self.procs);
        }
        ledger.tidy(&mut own);
        let in_use = own.alive(&part) || plan.as_ref().is_some_and(|p| young(p.made));
        // A launcher's job whose ranks on this node planned another shape: MPMD app
        // contexts with different shapes. One job's ranks share one plan: refused, saying
        // how to write it with `ranks:` (SEMANTICS §4.1; the README's MPMD). A launcher's
        // job id names one launch, so its young plan says so even when the ranks that
        // made it have already ended (a context that ran `true` before this one started):
        // refused every time, whatever order the contexts start in (SEMANTICS §4.2).
        if let Some(other) = plan.as_ref().filter(|p| p.key != *key) {
            if base.from_launcher()
                && (own.alive(&part) || young(other.made))
                && other.tasks.len() == identity.size
                && !own.started(&part, identity.rank)
            {
                return Err(Stopped::Error(
                    LedgerError::OtherShape {
                        job: crate::text::printable(&base.0, 60),
                        rank: identity.rank,
                        origin: crate::text::printable(job.origin, 120),
                    }
                    .into(),
                ));
            }
        }
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
        // A task that does not join plans around every other task of this user, its
        // job's own included (a new instance counts the base job's tasks as another's).
        if joined.is_none() {
            own.resolve(self.procs);
        }
        let mut scan = self.scan(&own, &id, now, hz)?;
        let mut share = planner.shares();
        let mut view_pack = None;
        if let Some(raw) = &joined {
            let view = raw.view(identity.rank).ok_or_else(|| {
                Stopped::Uncoordinated(format!("job {id}'s plan has no rank {}", identity.rank))
            })?;
            // A late rank whose units another job took meanwhile plans again.
            let claim = Claim::of(&id, identity.rank, identity.size, raw.pack, &view);
            share |= raw.share;
            // Inside a scheduler's allocation, only the scheduler's work stands in the
            // way of a joining rank (SEMANTICS §4.3), as of a planning one.
            let outside = scan.scheduler_only().map(|(only, _)| only);
            let in_the_way = outside.as_ref().unwrap_or(&scan);
            if share || !in_the_way.overlaps(&claim.cpus, &claim.gpus) {
                if job.verbose {
                    crate::text::emit(
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
        let (mut looked_afresh, mut moved, mut watched) = (false, false, false);
        for round in 1..=MAX_ROUNDS {
            let planned = match view_pack.take() {
                Some(vp) => Ok(vp),
                None => {
                    // A late rank planning again avoids its job's running ranks.
                    own.resolve(self.procs);
                    self.plan(&id, &own, &scan, planner, now, hz, err)
                }
            };
            let (view, pack) = match planned {
                Ok(vp) => vp,
                // A refusal is decided on a fresh look at the kernel (SEMANTICS §13.4),
                // not on the view the user's launches share for 250 ms: a binding that
                // ended since that look refuses nobody. Once per launch, and only where
                // that view's holders alone hold a CPU (a claim is always checked live,
                // a claimed task's children run on its CPUs, and another user's
                // thousands of threads cost a fresh look).
                Err(Stopped::Error(e))
                    if !looked_afresh
                        && round < MAX_ROUNDS
                        && scan.stale_decides()
                        && planner.refuses(&e) =>
                {
                    looked_afresh = true;
                    ledger.look_afresh();
                    own = ledger.list_own(self.procs);
                    scan = self.scan(&own, &id, now, hz)?;
                    continue;
                }
                // A refusal that bound processes no claim accounts for decide stands only
                // if they keep holding for a moment (SEMANTICS §13.4): one that lets go
                // within it (bound half the time, a chaser) steers and never refuses.
                Err(Stopped::Error(e))
                    if !watched && round < MAX_ROUNDS && planner.refuses(&e) && {
                        watched = true;
                        let gone = self.let_go(&scan.unclaimed_deciders());
                        let before = scan.holders.len();
                        scan.holders.retain(|h| !gone.contains(&h.claim.pid));
                        scan.holders.len() < before
                    } =>
                {
                    continue;
                }
                // After a move, the units left may be taken by tasks that took this
                // one's claim and are about to let go (another user's process that
                // follows its claims): a moment later, the node is looked at again.
                Err(Stopped::Error(e)) if moved && round < MAX_ROUNDS && planner.refuses(&e) => {
                    std::thread::sleep(RETRY);
                    own = ledger.list_own(self.procs);
                    scan = self.scan(&own, &id, now, hz)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.bind(&view)?;
            let mut claim = Claim::of(&id, identity.rank, identity.size, pack, &view);
            (claim.pid, claim.start) = self.me;
            claim.pidns = self.procs.pid_ns();
            let name = ledger.write_claim(&claim).map_err(Stopped::Uncoordinated)?;
            self.claimed = Some(name.clone());
            // Every plan is settled against the claims of other jobs' tasks, the last one
            // too: a task never runs on units it did not verify (#45). A process that
            // follows this task's claims writes none, so it cannot make the task refuse:
            // each plan avoids every CPU the kernel showed bound a moment ago.
            let settled = if share {
                Some(true)
            } else {
                self.settle(&claim, &scan)
            };
            let settled = settled
                .filter(|_| !self.ran_meanwhile(&claim, &id))
                .filter(|_| {
                    // Planned on inputs that could have missed another user's claim:
                    // the CPUs bound to are checked against the kernel now, and the
                    // next plan looks afresh (SEMANTICS §13.5).
                    let collides = !share && self.collides_afresh(&claim, &scan);
                    if collides {
                        ledger.look_afresh();
                    }
                    !collides
                });
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
            moved = true;
            if round == MAX_ROUNDS {
                break;
            }
            own = ledger.list_own(self.procs);
            scan = self.scan(&own, &id, now, hz)?;
        }
        // Tasks of other jobs that started first took every plan's units: the node has
        // none free for this task at the moment, and running it anyway would share them.
        Err(Stopped::Error(
            LedgerError::Contended { rounds: MAX_ROUNDS }.into(),
        ))
    }

    /// What other jobs hold now (this user's other jobs, and every other user's).
    fn scan<E: From<LedgerError>>(
        &self,
        own: &Own,
        id: &JobId,
        now: u64,
        hz: u64,
    ) -> Result<Scan, Stopped<E>> {
        let mut scan = Scan::new(self.ledger.uid());
        scan.allocation = id.allocation();
        self.ledger
            .scan_own(own, Some(&id.file_part()), self.procs, now, hz, &mut scan);
        self.ledger.scan_others(self.procs, &mut scan);
        // In a fallback directory, this user's other jobs may have claimed in another
        // one that a flood of names hid from this launch: the kernel shows them all.
        if self.ledger.in_fallback() || self.own_kernel.get() {
            ledger::kernel::add_own(self.procs, self.ledger.uid(), id, &mut scan);
        }
        self.not_mine(&mut scan.holders);
        if let Some(why) = &scan.incomplete {
            if self.ledger.required() {
                return Err(Stopped::Error(LedgerError::Required(why.clone()).into()));
            }
        }
        if self.job.identity.rank == 0 && !self.warned.replace(true) {
            if let Some(why) = &scan.incomplete {
                let after = if scan.kernel {
                    "other users' CPUs come from the kernel's view, but GPUs they claim may have been missed"
                } else {
                    "planning around what was read"
                };
                self.notes.borrow_mut().push(format!(
                    "warning: node ledger read in part ({why}); {after}"
                ));
            }
            if let Some(why) = &scan.hidden {
                self.notes.borrow_mut().push(format!(
                    "warning: {why}: binder goes around what their ledger entries say, but cannot see their bound tasks that have none, so this job may share their CPUs (ask for hidepid's gid= exemption, or run jobs that share a node in one PID namespace)"
                ));
            }
        }
        Ok(scan)
    }

    /// Drops the holders that are this process or one of its ancestors, or this user's
    /// claims of the job that encloses this one (the inherited `BINDER_JOB`): a claim of the
    /// task's own process (a plugin bound it before the wrapper ran in it) or of an
    /// enclosing job's process (a bound batch shell, a Flux broker) is the envelope this
    /// task runs in, never a competitor (SEMANTICS §4.2). Costs nothing while nobody
    /// holds anything.
    fn not_mine(&self, holders: &mut Vec<ledger::Holder>) {
        if holders.is_empty() {
            return;
        }
        let lineage = self.lineage.get_or_init(|| self.procs.lineage());
        let uid = self.ledger.uid();
        holders.retain(|h| {
            !lineage.contains(&(h.claim.pid, h.claim.start))
                && !encloses(self.enclosing.as_deref(), uid, h)
        });
    }

    /// A fresh plan for job `id` (this rank's view) around what `scan` holds and this
    /// job's own running ranks, recorded for the job's other ranks.
    #[allow(clippy::too_many_arguments)]
    fn plan<P: Planner>(
        &self,
        id: &JobId,
        own: &Own,
        scan: &Scan,
        planner: &mut P,
        now: u64,
        hz: u64,
        err: &mut impl Write,
    ) -> Result<(TaskView, Packing), Stopped<P::Error>> {
        let part = id.file_part();
        let mut mine = Scan::new(self.ledger.uid());
        if own.alive(&part) {
            self.ledger
                .scan_own(own, None, self.procs, now, hz, &mut mine);
            mine.holders.retain(|h| h.claim.job == *id);
            self.not_mine(&mut mine.holders);
        }
        let avoid = Avoid {
            cpus: mine.cpus(),
            gpus: mine.gpus(),
        };
        let (tasks, pack) = if scan.is_empty() && avoid.is_empty() {
            planner.plain(self.job, err).map_err(Stopped::Error)?
        } else {
            planner
                .around(self.job, scan, &avoid, err)
                .map_err(Stopped::Error)?
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
    fn bind<E: From<LaunchError>>(&mut self, view: &TaskView) -> Result<(), Stopped<E>> {
        if view.is_bound() && view.apply {
            if self.original.is_none() {
                self.original = Some(super::affinity::current_raw());
            }
            super::affinity::bind_cpus_raw(&view.cpus).map_err(|e| Stopped::Error(e.into()))?;
        }
        Ok(())
    }
}

/// Whether holder `h` is a task of the job that encloses this one (`enclosing`, the
/// `BINDER_JOB` this task inherited) and of this user (`uid`): a step started from inside
/// another step of the same scheduler job (`srun --overlap` under `srun --pty bash`), or a
/// job inside an allocation whose shell binder bound. Only this user's own claims are
/// taken so: a name in one's own environment never makes another user's task invisible.
fn encloses(enclosing: Option<&str>, uid: u32, h: &ledger::Holder) -> bool {
    enclosing.is_some_and(|outer| h.owner == uid && h.claim.job.0 == outer)
}

#[cfg(test)]
mod enclosing_tests {
    use super::*;
    use crate::ledger::Holder;

    fn holder(owner: u32, job: &str) -> Holder {
        Holder {
            owner,
            claim: Claim {
                format: ledger::FORMAT,
                job: JobId(job.into()),
                rank: 0,
                size: 1,
                pid: 42,
                start: 1,
                cpus: vec![0, 1],
                gpus: Vec::new(),
                pack: Packing::Fill,
                unit: "core".into(),
                places: 2,
                pidns: 0,
            },
            cpus: vec![0, 1],
            confirmed: true,
        }
    }

    #[test]
    fn the_enclosing_step_is_the_envelope_not_a_holder() {
        let outer = holder(1000, "slurm:7.0");
        assert!(encloses(Some("slurm:7.0"), 1000, &outer));
        // Another step, another user's claim of that name, or nothing inherited: held.
        assert!(!encloses(
            Some("slurm:7.0"),
            1000,
            &holder(1000, "slurm:7.1")
        ));
        assert!(!encloses(
            Some("slurm:7.0"),
            1000,
            &holder(1001, "slurm:7.0")
        ));
        assert!(!encloses(None, 1000, &outer));
    }
}
