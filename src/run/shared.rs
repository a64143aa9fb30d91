//! A launch through the node ledger (SEMANTICS §13): under the ledger's lock, join this
//! job's plan if another task of the job made one, else plan around the units other live
//! jobs hold; bind; record this task; release the lock; exec.
//!
//! Binding happens *before* the task is recorded and while the lock is held, so any other
//! binder that reads the entry finds this PID already bound as the entry says (an entry
//! whose PIDs are not bound as recorded counts for nothing).
//!
//! The flow is shared by the two executables through [`Planner`]: `binder-full` loads the
//! hwloc topology when it must ([`Full`]); the `binder` front, linked without libhwloc,
//! only reads the node cache and hands over when that is not enough ([`Warm`]).

use std::ffi::OsString;
use std::io::Write;

use super::{cache_lookup, cache_store, launch_options, node_cache, Job};
use crate::error::Error;
use crate::identity::job::{job_of, JobId};
use crate::identity::Env;
use crate::launch::env::TaskView;
use crate::ledger::{self, Entry, Ledger, LedgerError, LiveJob, Member, RawEntry, Scan};
use crate::procfs::{Procs, RealOnce};
use crate::shape::{Pack, Shape};
use crate::topology::{self, Source, Topology};
use crate::{launch, pack, report};

/// The task's environment, and the variables to remove from it.
type TaskEnv = (Vec<(String, String)>, Vec<&'static str>);

/// A new job's plan: every rank's view, and the packing policy recorded with the job.
type Planned = (Vec<TaskView>, Pack);

/// What the ledger's flow cannot read from the ledger: a plan when this job has none yet,
/// and the binding itself. Every method may answer [`Error::HandOver`] before anything
/// was changed; none may after [`Planner::prepare`] bound the process.
pub(super) trait Planner {
    /// The plan when no other job holds anything.
    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Error>;
    /// The plan around the units `others` hold.
    fn around(
        &mut self,
        job: &Job<'_>,
        others: &[&LiveJob],
        err: &mut impl Write,
    ) -> Result<Planned, Error>;
    /// Binds this process as `view` says; the task's environment and the variables to
    /// remove from it.
    fn prepare(
        &mut self,
        job: &Job<'_>,
        view: &TaskView,
        command: &[OsString],
        err: &mut impl Write,
    ) -> Result<TaskEnv, Error>;
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
        Ok((plain(job, self.shape, &mut self.topology, err)?, pack))
    }

    fn around(
        &mut self,
        job: &Job<'_>,
        others: &[&LiveJob],
        err: &mut impl Write,
    ) -> Result<Planned, Error> {
        let pack = self.shape.options.pack.unwrap_or_default();
        Ok((
            around(job, self.shape, others, &mut self.topology, err)?,
            pack,
        ))
    }

    /// `--verbose` and `membind` load a topology when planning did not.
    fn prepare(
        &mut self,
        job: &Job<'_>,
        view: &TaskView,
        command: &[OsString],
        err: &mut impl Write,
    ) -> Result<TaskEnv, Error> {
        let (config, identity, shape) = (job.config, job.identity, self.shape);
        if (config.verbose || view.membind) && self.topology.is_none() {
            self.topology = Some(load(job, shape)?);
        }
        // hwloc's plugin blocklist, set in binder's environment when a topology was
        // loaded, is kept from the task.
        let scrub = if self.topology.is_some() {
            topology::block_unused_plugins(shape.needs_io() || config.gpus_per_task.is_some())
        } else {
            Vec::new()
        };
        let options = launch_options(config, view, command, &scrub);
        let env = launch::prepare(view, self.topology.as_ref(), identity, &options, err)?;
        Ok((env, scrub))
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
        _: &[&LiveJob],
        _: &mut impl Write,
    ) -> Result<Planned, Error> {
        Err(Error::HandOver)
    }

    fn prepare(
        &mut self,
        job: &Job<'_>,
        view: &TaskView,
        command: &[OsString],
        err: &mut impl Write,
    ) -> Result<TaskEnv, Error> {
        if view.membind {
            return Err(Error::HandOver);
        }
        let (config, identity) = (job.config, job.identity);
        let options = launch_options(config, view, command, &[]);
        Ok((
            launch::prepare_cached(view, identity, &options, err)?,
            Vec::new(),
        ))
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
) -> Error {
    match attempt(ledger, job, env, command, planner, err) {
        Ok(e) | Err(e) => e,
    }
}

/// `Ok` carries exec's failure, `Err` everything that stopped binder before it.
fn attempt(
    ledger: &Ledger,
    job: &Job<'_>,
    env: &dyn Env,
    command: &[OsString],
    planner: &mut impl Planner,
    err: &mut impl Write,
) -> Result<Error, Error> {
    let (config, identity) = (job.config, job.identity);
    let procs = RealOnce::new();
    let me = procs.me();
    let my_start = procs
        .stat(me)
        .map(|s| s.start)
        .ok_or_else(|| LedgerError::Write("cannot read /proc/self/stat".into()))?;
    let key = format!(
        "{}\n#size:{}\n#gpus:{:?}",
        job.text, identity.size, config.gpus_per_task
    );
    let base = job_of(identity, env, &procs);
    let guard = ledger.lock(true)?;
    let (now, hz) = (ledger::now_ticks(), ledger::clock_hz());
    // A task of a job that is starting joins its plan by reading that one file; only a
    // task that cannot (the job's first, or a clash) reads and verifies the whole ledger.
    // Verifying every file for every task made 256 tasks of one job cost O(n²) /proc reads.
    if let Some((file, raw)) = quick_join(ledger, &base, &key, identity, &procs, now, hz) {
        joins(job, &raw.job, ledger, err);
        let view = raw.view(identity.rank);
        let id = raw.job.clone();
        // Appending is O(1); if it cannot be done (another user planted the members
        // file), the whole file is rewritten with this member, as the full path does.
        let record = |member: Member| {
            ledger.append(&file, &member).or_else(|_| {
                let mut raw = raw;
                raw.members.retain(|m| m.rank != member.rank);
                raw.members.push(member);
                ledger.write(&file, &raw)
            })
        };
        return finish(
            job,
            &id,
            view,
            planner,
            (me, my_start),
            record,
            guard,
            command,
            err,
        );
    }
    let scan = ledger::verify(ledger.read_all(), &procs, now, hz);
    tidy(ledger, &scan, now, hz);
    let joined = joinable(ledger, &scan, &base, &key, job, now, hz);
    let (id, file, mut entry) = match joined {
        Some((file, entry)) => {
            joins(job, &entry.job, ledger, err);
            (entry.job.clone(), file, entry)
        }
        None => {
            let (id, file) = fresh_name(ledger, &scan, &base, me);
            let others = ledger::held_by_others(&scan, Some(&file));
            let (tasks, pack) = if others.is_empty() {
                planner.plain(job, err)?
            } else {
                planner.around(job, &others, err)?
            };
            let entry = Entry {
                format: ledger::FORMAT,
                job: id.clone(),
                key,
                pack,
                tasks,
                members: Vec::new(),
            };
            (id, file, entry)
        }
    };
    let view = entry.tasks.get(identity.rank).cloned();
    let record = |member: Member| {
        entry.members.retain(|m| m.rank != member.rank);
        entry.members.push(member);
        ledger.write(&file, &entry)
    };
    finish(
        job,
        &id,
        view,
        planner,
        (me, my_start),
        record,
        guard,
        command,
        err,
    )
}

/// `--verbose`: this task joins a plan another task of its job made.
fn joins(job: &Job<'_>, id: &JobId, ledger: &Ledger, err: &mut impl Write) {
    if job.config.verbose {
        report::emit(
            err,
            &format!(
                "job {id}: joins the plan its first task recorded in {}",
                ledger.dir().display()
            ),
        );
    }
}

/// The end of every launch through the ledger: bind as `view` says, record this task
/// with `record`, release the lock, exec.
#[allow(clippy::too_many_arguments)]
fn finish(
    job: &Job<'_>,
    id: &JobId,
    view: Option<TaskView>,
    planner: &mut impl Planner,
    (me, my_start): (u32, u64),
    record: impl FnOnce(Member) -> Result<(), String>,
    guard: ledger::store::Guard,
    command: &[OsString],
    err: &mut impl Write,
) -> Result<Error, Error> {
    let identity = job.identity;
    let view =
        view.ok_or_else(|| LedgerError::Write(format!("job {id} has no rank {}", identity.rank)))?;
    let (mut task_env, scrub) = planner.prepare(job, &view, command, err)?;
    task_env.push(("BINDER_JOB".into(), id.to_string()));
    record(Member {
        rank: identity.rank,
        pid: me,
        start: my_start,
    })
    .map_err(LedgerError::Write)?;
    drop(guard);
    Ok(launch::exec(command, &task_env, &scrub).into())
}

/// This user's entry of this job that the task can join: same job (or one of its
/// instances), same shape and size, its rank not yet taken, and alive or young.
fn joinable(
    ledger: &Ledger,
    scan: &Scan,
    base: &JobId,
    key: &str,
    job: &Job<'_>,
    now: u64,
    hz: u64,
) -> Option<(std::path::PathBuf, Entry)> {
    let young = |e: &Entry| ledger::starting(&e.members, now, hz);
    let instance = format!("{base}+");
    let live = scan.live.iter().map(|j| (&j.file, j.owner, &j.entry, true));
    let dead = scan
        .ignored
        .iter()
        .filter_map(|i| Some((&i.file, i.owner?, i.entry.as_ref()?, false)));
    live.chain(dead)
        .filter(|(_, owner, _, _)| *owner == ledger.uid())
        .filter(|(_, _, e, _)| e.job == *base || e.job.0.starts_with(&instance))
        .find(|(_, _, e, is_live)| {
            e.key == key
                && e.tasks.len() == job.identity.size
                && !e.members.iter().any(|m| m.rank == job.identity.rank)
                && (*is_live || young(e))
        })
        .map(|(file, _, e, _)| (file.clone(), e.clone()))
}

/// This job's own file, when this task can join it without a scan: this user's, this
/// job's id, same shape and size, this rank not yet started, and the job starting
/// (its first task started within the grace period) or still alive. Anything else
/// returns `None`, and the full path decides (an instance, a fresh plan, a refusal).
fn quick_join(
    ledger: &Ledger,
    base: &JobId,
    key: &str,
    identity: &crate::identity::Identity,
    procs: &dyn Procs,
    now: u64,
    hz: u64,
) -> Option<(std::path::PathBuf, RawEntry)> {
    let file = ledger.file_of(base);
    let (owner, entry) = ledger.read_raw(&file);
    let entry = entry.ok()?;
    if owner != Some(ledger.uid())
        || entry.job != *base
        || entry.key != key
        || entry.tasks.len() != identity.size
    {
        return None;
    }
    // A rank runs once per job: a second task of the same rank is another instance of
    // the job (say, the same pgid launching again), which the full path plans afresh.
    if entry.members.iter().any(|m| m.rank == identity.rank) {
        return None;
    }
    let alive = |m: &Member| {
        procs
            .stat(m.pid)
            .is_some_and(|s| s.start == m.start && !s.ended())
    };
    (ledger::starting(&entry.members, now, hz) || entry.members.iter().any(alive))
        .then_some((file, entry))
}

/// The job id and file a new plan is written under: the launcher's id, or an instance of
/// it when a live job (or another user's planted file) already has that name.
fn fresh_name(ledger: &Ledger, scan: &Scan, base: &JobId, me: u32) -> (JobId, std::path::PathBuf) {
    let file = ledger.file_of(base);
    let taken = scan.live.iter().any(|j| j.file == file)
        || scan
            .ignored
            .iter()
            .any(|i| i.file == file && i.owner != Some(ledger.uid()));
    if taken {
        let id = base.instance(me);
        let file = ledger.file_of(&id);
        (id, file)
    } else {
        (base.clone(), file)
    }
}

/// Removes this user's files that count for nothing and are past their grace period.
fn tidy(ledger: &Ledger, scan: &Scan, now: u64, hz: u64) {
    for i in &scan.ignored {
        let old = i.entry.as_ref().is_none_or(|e| {
            e.members
                .iter()
                .map(|m| m.start)
                .max()
                .is_none_or(|s| now.saturating_sub(s) >= ledger::GRACE_SECS * hz)
        });
        if old {
            ledger.remove(&i.file, i.owner);
        }
    }
}

/// This host's topology, with hwloc's unused plugins blocked first (the CLI is
/// single-threaded, so it may set that in its own environment).
fn load(job: &Job<'_>, shape: &Shape) -> Result<Topology, Error> {
    let io = shape.needs_io() || job.config.gpus_per_task.is_some();
    topology::block_unused_plugins(io);
    crate::load_topology(shape, &Source::Host, job.config.gpus_per_task)
}

/// The plan when no other job holds anything: from the node cache when it has it.
fn plain(
    job: &Job<'_>,
    shape: &Shape,
    topology: &mut Option<Topology>,
    err: &mut impl Write,
) -> Result<Vec<TaskView>, Error> {
    let (config, identity) = (job.config, job.identity);
    let membind = shape.membind_for(job.identity.rank);
    let cache = node_cache(config, membind, job.text, identity.size, err);
    if let Some((views, _)) = cache.as_ref().and_then(|pair| cache_lookup(pair, err)) {
        return Ok(views);
    }
    let t = load(job, shape)?;
    let plan = crate::plan(shape, job.origin, &t, identity.size, config.gpus_per_task)?;
    let views: Vec<TaskView> = (0..plan.tasks.len())
        .map(|r| TaskView::for_launch(&plan, shape, r))
        .collect();
    if let Some(pair) = &cache {
        cache_store(pair, views.clone(), shape, err);
    }
    *topology = Some(t);
    Ok(views)
}

/// The plan around the units `others` hold, with the shape's packing policy; a refusal
/// names the jobs in the way unless the shape shares.
fn around(
    job: &Job<'_>,
    shape: &Shape,
    others: &[&LiveJob],
    topology: &mut Option<Topology>,
    err: &mut impl Write,
) -> Result<Vec<TaskView>, Error> {
    let (config, identity) = (job.config, job.identity);
    let t = load(job, shape)?;
    let mut held: Vec<usize> = others
        .iter()
        .flat_map(|j| ledger::node::held_pus(&t, j))
        .collect();
    held.sort_unstable();
    held.dedup();
    let size = identity.size;
    let gpus = config.gpus_per_task;
    let planned = pack::plan_around(shape, job.origin, &t, size, gpus, &held);
    let plan = match planned {
        Ok(plan) => {
            if config.verbose {
                report::emit(
                    err,
                    &format!(
                        "planned around cpus {} held by {} other job(s), pack {}",
                        report::cpu_list(&held),
                        others.len(),
                        shape.options.pack.unwrap_or_default()
                    ),
                );
            }
            plan
        }
        Err(refusal) => {
            // Would it fit on an empty node? Then the other jobs are why.
            let Ok(alone) = crate::plan(shape, job.origin, &t, size, gpus) else {
                return Err(refusal);
            };
            if shape.options.share {
                if config.verbose {
                    report::emit(
                        err,
                        "too few free units: shares units other jobs hold (share)",
                    );
                }
                alone
            } else {
                return Err(occupied(&refusal, &alone, others, &t, job.origin).into());
            }
        }
    };
    let views = (0..plan.tasks.len())
        .map(|r| TaskView::for_launch(&plan, shape, r))
        .collect();
    *topology = Some(t);
    Ok(views)
}

/// The most jobs a refusal names.
const MAX_NAMED: usize = 4;

/// The refusal that names the jobs holding what the plan would have used.
fn occupied(
    refusal: &Error,
    alone: &crate::distribute::Plan,
    others: &[&LiveJob],
    topology: &Topology,
    origin: &str,
) -> LedgerError {
    // Every job holding an allowed PU is in the way: the plan failed on what they leave.
    // Those holding the PUs the plan would have used come first.
    let wanted: std::collections::BTreeSet<usize> = alone
        .tasks
        .iter()
        .flat_map(|t| report::cpus_of(&t.cpuset))
        .collect();
    let allowed = topology.hw().allowed_cpuset();
    let mut in_way: Vec<(bool, &&LiveJob)> = others
        .iter()
        .filter_map(|j| {
            let held = ledger::node::held_pus(topology, j);
            held.iter()
                .any(|&p| allowed.is_set(p))
                .then(|| (!held.iter().any(|p| wanted.contains(p)), j))
        })
        .collect();
    in_way.sort_by_key(|(later, _)| *later);
    let more = in_way.len().saturating_sub(MAX_NAMED);
    let in_way: Vec<&&LiveJob> = in_way.into_iter().take(MAX_NAMED).map(|(_, j)| j).collect();
    let held: Vec<String> = in_way
        .iter()
        .map(|j| {
            let pids: Vec<String> = j.live.iter().map(|m| m.pid.to_string()).collect();
            format!(
                "job {} of {} holds cpus {} (pids {})",
                j.entry.job,
                ledger::node::user_name(j.owner),
                report::cpu_list(&ledger::node::held_pus(topology, j)),
                crate::error::clip(&pids.join(","), 60)
            )
        })
        .collect();
    // The planner's own words, without its advice (the advice here is to wait or share);
    // with every PU held there is nothing to plan on at all.
    let what = match refusal {
        Error::Topology(_) => "every allowed PU is held".to_owned(),
        other => {
            let text = other.to_string();
            text.split("; ").next().unwrap_or(&text).to_owned()
        }
    };
    let one = in_way.len() == 1;
    let mut held = held.join("; ");
    if more > 0 {
        held.push_str(&format!(
            "; and {more} more job(s) (`binder node` lists them)"
        ));
    }
    LedgerError::Occupied {
        what: format!("too few free units on this node for {origin} ({what})"),
        held,
        them: if one { "it" } else { "them" },
        their: if one { "its" } else { "their" },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::{Stat, Status};

    /// Processes by pid → start time; pid 66 is a zombie.
    struct Fake(Vec<(u32, u64)>);

    impl Procs for Fake {
        fn me(&self) -> u32 {
            1
        }
        fn stat(&self, pid: u32) -> Option<Stat> {
            let &(_, start) = self.0.iter().find(|(p, _)| *p == pid)?;
            Some(Stat {
                comm: "app".into(),
                state: if pid == 66 { 'Z' } else { 'S' },
                ppid: 1,
                pgrp: pid,
                start,
            })
        }
        fn status(&self, _: u32) -> Option<Status> {
            None
        }
    }

    fn identity(rank: usize, size: usize) -> crate::identity::Identity {
        crate::identity::Identity::given(rank, size)
    }

    const HZ: u64 = 100;
    const NOW: u64 = 3600 * HZ;

    /// The quick join takes exactly the cases the full path would join on this job's own
    /// file, and sends every other case to it.
    #[test]
    fn quick_join_only_when_the_full_path_would_join() {
        let dir = std::env::temp_dir().join(format!("binder-quick-join-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let d = dir.display().to_string();
        let ledger = Ledger::open(&|k| (k == "BINDER_LEDGER_DIR").then(|| d.clone())).unwrap();
        let base = JobId("test:7".into());
        let view = |c: usize| TaskView {
            unit: "core".into(),
            cpus: vec![c],
            places: vec![vec![c]],
            gpus: Vec::new(),
            nics: Vec::new(),
            binding: String::new(),
            ge_env: Vec::new(),
            apply: true,
            openmp: false,
            membind: false,
        };
        let write = |members: Vec<Member>| {
            let entry = Entry {
                format: ledger::FORMAT,
                job: base.clone(),
                key: "k".into(),
                pack: crate::shape::Pack::Fill,
                tasks: vec![view(0), view(1), view(2)],
                members,
            };
            ledger.write(&ledger.file_of(&base), &entry).unwrap();
        };
        let first = |start: u64| Member {
            rank: 0,
            pid: 40,
            start,
        };
        let join = |rank: usize, key: &str, procs: &Fake| {
            quick_join(&ledger, &base, key, &identity(rank, 3), procs, NOW, HZ).is_some()
        };
        let none = Fake(Vec::new());
        // Rank 0 started 10 s ago: rank 1 joins, even with rank 0 already gone.
        write(vec![first(NOW - 10 * HZ)]);
        assert!(join(1, "k", &none));
        // Not for a rank already started, another shape, or another size.
        assert!(!join(0, "k", &none));
        assert!(!join(1, "other", &none));
        assert!(quick_join(&ledger, &base, "k", &identity(1, 4), &none, NOW, HZ).is_none());
        // Past the grace period: only while a task of the job is alive (not a zombie,
        // not a reused pid).
        write(vec![first(NOW - 100 * HZ)]);
        assert!(!join(1, "k", &none));
        assert!(join(1, "k", &Fake(vec![(40, NOW - 100 * HZ)])));
        assert!(!join(1, "k", &Fake(vec![(40, NOW - 5 * HZ)])));
        write(vec![Member {
            rank: 0,
            pid: 66,
            start: NOW - 100 * HZ,
        }]);
        assert!(!join(1, "k", &Fake(vec![(66, NOW - 100 * HZ)])));
        // A joining task appends its member; readers see it merged, a second task of the
        // same rank then cannot join, and a full rewrite folds the appended lines in.
        write(vec![first(NOW - 10 * HZ)]);
        let file = ledger.file_of(&base);
        let second = Member {
            rank: 2,
            pid: 41,
            start: NOW - 9 * HZ,
        };
        ledger.append(&file, &second).unwrap();
        let (_, merged) = ledger.read_raw(&file);
        let ranks: Vec<usize> = merged.unwrap().members.iter().map(|m| m.rank).collect();
        assert_eq!(ranks, [0, 2]);
        assert!(!join(2, "k", &none));
        assert!(join(1, "k", &none));
        write(vec![first(NOW - 10 * HZ)]);
        let (_, rewritten) = ledger.read_raw(&file);
        assert_eq!(
            rewritten.unwrap().members.len(),
            1,
            "the old job's appended member is gone"
        );
        // A members file another user planted is neither believed nor appended to (the
        // launch then rewrites the job file instead). Needs root to plant it; CI is root.
        let planted = file.with_extension("members");
        std::fs::write(&planted, "{\"rank\":2,\"pid\":9,\"start\":1}\n").unwrap();
        if std::os::unix::fs::chown(&planted, Some(4242), None).is_ok() {
            let (_, read) = ledger.read_raw(&file);
            assert_eq!(
                read.unwrap().members.len(),
                1,
                "a planted member is ignored"
            );
            assert!(ledger.append(&file, &second).is_err());
        } else {
            eprintln!("SKIPPED (not root): the planted members file case");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
