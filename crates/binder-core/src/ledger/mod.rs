//! The node ledger (SEMANTICS §13, §13.1): which jobs hold which CPUs and GPUs of this
//! node, so that jobs sharing a node never bind to the same units, with no daemon and no
//! file that one user could use against another.
//!
//! **Where.** Each user writes only in a directory of their own, `binder-ledger.<uid>`
//! (or `binder-ledger.<uid>.<random>` when another user took that name first) inside
//! the ledger root (`$BINDER_LEDGER_DIR`, else `/dev/shm`); see [`store`]. Nobody else
//! can create, replace, fill or lock anything in it, so nothing another user does can
//! touch a user's own files. There is no shared lock and no shared directory.
//!
//! **What.** Per job, a plan file (`job.<job>`: every local rank's [`TaskView`]), read
//! only by the same user's later ranks; per started task, a *claim*
//! (`c.<pid>.<start>.<rank>.<job>`: the task's CPUs and GPUs) that every user reads, and
//! once the task has checked it collides with nobody, a marker `ok.<pid>.<start>`.
//!
//! **Trust.** A claim counts only as far as `/proc` confirms it ([`verify`]): its PID is
//! alive with the start time its name records, runs as the directory's owner, and every
//! thread's affinity lies inside the claim's CPUs; it then holds exactly the CPUs those
//! threads may run on, and its GPUs while it lives. Anything else (junk, forged, dead,
//! oversized, unreadable) counts for nothing and is skipped. The not-yet-started ranks of
//! a starting job hold their units only against the same user's jobs.
//!
//! **Concurrent starts.** One user's launches take turns on a lock file in that user's
//! own directory (mode 0600: no one else can open it). Different users never wait on
//! each other: a task writes its claim, reads the others' again, and when a claim of
//! another job overlaps its own, one of the two moves ([`Verdict`]): the one whose
//! rival already confirmed, or whose rival started earlier (start time, then PID).
//! Because every task writes before it re-reads, of two overlapping tasks at least one
//! sees the other, and the markers tell it whether the other has seen it.

mod fsio;
mod keyring;
mod own_dir;
mod root;

pub mod kernel;
pub mod others;
pub mod shared;
pub mod store;
pub mod verify;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::identity::job::JobId;
use crate::view::Packing as Pack;
use crate::view::TaskView;

pub use store::Ledger;
pub use verify::verify_claim;

/// Format of plan and claim files: the one of everything binder persists
/// ([`crate::view::FORMAT`]); a file of another format counts for nothing.
pub use crate::view::FORMAT;

/// How long after a job's plan was made its not-yet-started ranks keep their units from
/// the same user's other jobs, and may still join it (launchers start a node's tasks
/// within seconds).
pub(crate) const GRACE_SECS: u64 = 60;

/// A job's plan, in its owner's directory: what the job's later ranks bind to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPlan {
    /// [`FORMAT`].
    pub format: u32,
    /// The job.
    pub job: JobId,
    /// What the plan depends on (shape bytes, requests, size): a task whose key differs
    /// is not of this job.
    pub key: String,
    /// Packing policy the job was planned with.
    pub pack: Pack,
    /// Whether the job shares units with other jobs (`--share`).
    #[serde(default)]
    pub share: bool,
    /// Clock ticks since boot when it was planned.
    pub made: u64,
    /// One view per local rank.
    pub tasks: Vec<TaskView>,
}

/// A [`JobPlan`] with its views left as JSON text: a joining task parses only its own
/// rank's (a 1,001-rank job's plan is 150 KB, and 256 tasks may join at once).
#[derive(Debug, Serialize, Deserialize)]
pub struct RawJobPlan {
    /// [`FORMAT`].
    pub format: u32,
    /// As [`JobPlan::job`].
    pub job: JobId,
    /// As [`JobPlan::key`].
    pub key: String,
    /// As [`JobPlan::pack`].
    pub pack: Pack,
    /// As [`JobPlan::share`].
    #[serde(default)]
    pub share: bool,
    /// As [`JobPlan::made`].
    pub made: u64,
    /// The views, unparsed.
    pub tasks: Vec<Box<serde_json::value::RawValue>>,
}

impl RawJobPlan {
    /// Local rank `rank`'s view, parsed.
    pub fn view(&self, rank: usize) -> Option<TaskView> {
        serde_json::from_str(self.tasks.get(rank)?.get()).ok()
    }
}

/// One started task's claim: what it holds while it lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// [`FORMAT`].
    pub format: u32,
    /// Its job.
    pub job: JobId,
    /// Its local rank.
    pub rank: usize,
    /// Its job's local size.
    pub size: usize,
    /// PID (binder's, then the task's: binder execs in place).
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat`), so a reused PID is not it.
    pub start: u64,
    /// Its CPUs (OS numbers, ascending); empty for a task binder does not bind. Written
    /// as a kernel CPU list (`0-3,8`): short, and quick to read back.
    #[serde(with = "cpu_list_text")]
    pub cpus: Vec<usize>,
    /// Its GPUs, by PCI bus id (stable whatever numbering a runtime uses).
    pub gpus: Vec<String>,
    /// Its job's packing policy (an exclusive job holds whole containers).
    pub pack: Pack,
    /// Its binding unit (`core`, `pu`, `none`).
    pub unit: String,
    /// How many units it has.
    pub places: usize,
    /// The PID namespace `pid` is numbered in (`Procs::pid_ns`; 0: unknown). A reader
    /// in another one (a container with its own `/proc`, or the host reading a
    /// container's claim) cannot address the process, so the claim only steers there.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pidns: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Claim {
    /// This task's claim of `view`.
    pub fn of(job: &JobId, rank: usize, size: usize, pack: Pack, view: &TaskView) -> Claim {
        Claim {
            format: FORMAT,
            job: job.clone(),
            rank,
            size,
            pid: 0,
            start: 0,
            cpus: if view.is_bound() && view.apply {
                view.cpus.clone()
            } else {
                Vec::new()
            },
            gpus: view.gpus.iter().map(|g| g.busid.clone()).collect(),
            pack,
            unit: view.unit.clone(),
            places: view.places.len(),
            pidns: 0,
        }
    }
}

/// The most CPUs a claim may name (more than any node binder plans on).
pub(crate) const MAX_CLAIM_CPUS: usize = 65_536;

/// A claim's CPUs as a kernel CPU list string.
mod cpu_list_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(cpus: &[usize], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&crate::cpulist::cpu_list(cpus))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<usize>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        crate::procfs::parse_list_max(&text, super::MAX_CLAIM_CPUS).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "not a list of at most {} cpus",
                super::MAX_CLAIM_CPUS
            ))
        })
    }
}

/// A claim `/proc` confirms: a live task of another job and what it really holds.
#[derive(Debug, Clone)]
pub struct Holder {
    /// The uid that owns the claim and runs the task.
    pub owner: u32,
    /// The claim.
    pub claim: Claim,
    /// The CPUs its threads may run on (within the claim's CPUs); empty when unbound.
    pub cpus: Vec<usize>,
    /// Whether the task has confirmed its claim (read the others after writing it).
    pub confirmed: bool,
}

impl Holder {
    /// Who goes first when two tasks claim one unit: the earlier start, then the lower
    /// PID. Both come from `/proc`, so nobody can forge an earlier one.
    pub fn priority(&self) -> (u64, u32) {
        (self.claim.start, self.claim.pid)
    }
}

/// Units the same user's starting job keeps for ranks that have not started yet.
#[derive(Debug, Clone)]
pub struct Reserved {
    /// The job.
    pub job: JobId,
    /// Its packing policy.
    pub pack: Pack,
    /// The CPUs of its unstarted bound ranks.
    pub cpus: Vec<usize>,
    /// Their GPUs (bus ids).
    pub gpus: Vec<String>,
}

/// A file the ledger does not believe, and why (names and reasons are printable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The file's name, escaped and clipped.
    pub file: String,
    /// Its owner, when known.
    pub owner: Option<u32>,
    /// Why it counts for nothing.
    pub why: String,
}

/// What the ledger holds now, apart from the launching job itself.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// The user who looks: this user's claims are believed as written, every other
    /// user's only as far as the kernel shows (SEMANTICS §13.2).
    pub me: u32,
    /// Live tasks of other jobs: this user's from their claims, every other user's bound
    /// tasks from the kernel's view (with their claims' job and GPUs when read).
    pub holders: Vec<Holder>,
    /// The same user's starting jobs' unstarted ranks.
    pub reserved: Vec<Reserved>,
    /// Files that count for nothing (kept for `binder node`, at most `MAX_IGNORED`).
    pub ignored: Vec<Ignored>,
    /// Why the scan may have missed something (a time or size limit was reached).
    pub incomplete: Option<String>,
    /// Why the scan's inputs could have missed another user's claim though nothing was
    /// cut short: the root changed since the listing it reused, or a directory vanished
    /// while it was read (a lifted squat). With [`Scan::incomplete`], it makes the task
    /// check the CPUs it bound to against the kernel afresh (SEMANTICS §13.5,
    /// [`Scan::doubtful`]).
    pub doubt: Option<String>,
    /// Whether the kernel's view of the other users' tasks was taken (it is whenever
    /// another user's ledger entry is in sight, or the ledger cannot be used).
    pub kernel: bool,
    /// The processes of holders that came from a view of the kernel another launch took
    /// (shared for 250 ms): a refusal that only they decide looks again first
    /// (SEMANTICS §13.4, [`Scan::stale_decides`]).
    pub stale: Vec<u32>,
    /// Why `/proc` hides other users' tasks from this one (`hidepid`, a PID namespace).
    pub hidden: Option<String>,
    /// CPUs that other users' unverifiable entries name (where `/proc` hides them): a
    /// plan avoids them when it can, never refuses for them.
    pub steer_cpus: Vec<usize>,
    /// CPUs of other users' processes that `/proc` hides (`hidepid`) but the kernel
    /// shows bound (`sched_getaffinity` on the PID a claim names): held like any other
    /// user's bound task, whatever the claim says.
    pub held_cpus: Vec<usize>,
    /// GPUs (bus ids) that other users' claims name: a plan avoids them when it can and
    /// the job's allocation does not name them, never refuses for them.
    pub steer_gpus: Vec<String>,
    /// The scheduler allocation the looking job runs in (`JobId::allocation`: `slurm:J.`,
    /// `flux:`), `None` outside one. Inside it, what is not of the allocation steers
    /// and never refuses (SEMANTICS §4.3).
    pub allocation: Option<String>,
}

/// The most ignored files a scan keeps to report.
pub(crate) const MAX_IGNORED: usize = 64;

impl Scan {
    /// The holders `picked` chooses that hold a CPU no other holder holds: only they
    /// decide a refusal (a claimed task's unclaimed children, on its CPUs, decide nothing).
    fn deciding(&self, picked: impl Fn(&Holder) -> bool) -> impl Iterator<Item = &Holder> {
        let held: BTreeSet<usize> = self
            .holders
            .iter()
            .filter(|h| !picked(h))
            .flat_map(|h| h.claim.cpus.iter().copied())
            .collect();
        self.holders
            .iter()
            .filter(move |h| picked(h) && h.claim.cpus.iter().any(|c| !held.contains(c)))
    }

    /// The processes the kernel alone shows holding a CPU no other holder holds (other
    /// users' bound processes no claim accounts for, `pid:` jobs): a refusal they decide
    /// stands only if they keep holding (SEMANTICS §13.4, a momentary binding steers).
    pub fn unclaimed_deciders(&self) -> Vec<u32> {
        self.deciding(|h| h.owner != self.me && h.claim.job.is_unclaimed())
            .map(|h| h.claim.pid)
            .collect()
    }

    /// Whether holders from a shared view of the kernel ([`Scan::stale`]) hold a CPU
    /// that no other holder does: only then can a fresh look free one.
    pub fn stale_decides(&self) -> bool {
        !self.stale.is_empty()
            && self
                .deciding(|h| self.stale.contains(&h.claim.pid))
                .next()
                .is_some()
    }

    /// Why a task planned on this scan must check its CPUs against the kernel afresh
    /// once bound (SEMANTICS §13.5): a read cut short, a root changed since the listing
    /// it reused, a directory that vanished; `None` when the read was whole and as is.
    pub fn doubtful(&self) -> Option<&str> {
        self.incomplete.as_deref().or(self.doubt.as_deref())
    }

    /// An empty scan as user `me` sees the node.
    pub fn new(me: u32) -> Scan {
        Scan {
            me,
            ..Scan::default()
        }
    }

    /// Adds what only steers a plan (SEMANTICS §13.2), kept sorted and deduplicated (a
    /// few hundred claims of 65,536 CPUs each stay one list of distinct CPUs).
    pub fn steer(&mut self, cpus: &[usize], gpus: &[String]) {
        self.steer_cpus.extend_from_slice(cpus);
        self.steer_cpus.sort_unstable();
        self.steer_cpus.dedup();
        self.steer_gpus.extend_from_slice(gpus);
        self.steer_gpus.sort_unstable();
        self.steer_gpus.dedup();
    }

    /// Adds CPUs held by other users' bound processes that `/proc` hides (`held_cpus`).
    pub fn hold(&mut self, cpus: &[usize]) {
        self.held_cpus.extend_from_slice(cpus);
        self.held_cpus.sort_unstable();
        self.held_cpus.dedup();
    }

    /// Records an ignored file (only the first `MAX_IGNORED`).
    pub fn ignore(&mut self, file: &str, owner: Option<u32>, why: String) {
        if self.ignored.len() < MAX_IGNORED {
            self.ignored.push(Ignored {
                file: crate::text::printable(file, 80),
                owner,
                why: crate::text::printable(&why, 160),
            });
        }
    }

    /// Whether nothing is held by anyone (a live task that holds no CPU and no GPU, an
    /// unbound one, keeps nothing from a plan).
    pub fn is_empty(&self) -> bool {
        self.holders
            .iter()
            .all(|h| h.cpus.is_empty() && h.claim.gpus.is_empty())
            && self.reserved.is_empty()
            && self.steer_cpus.is_empty()
            && self.held_cpus.is_empty()
            && self.steer_gpus.is_empty()
    }

    /// The GPUs a plan must leave alone: this user's other jobs' (their claims are this
    /// user's own word). Other users' GPU claims only steer ([`Scan::steer_gpus`]).
    pub fn own_gpus(&self) -> Vec<String> {
        union(
            self.holders
                .iter()
                .filter(|h| h.owner == self.me)
                .map(|h| &h.claim.gpus)
                .chain(self.reserved.iter().map(|r| &r.gpus)),
        )
    }

    /// The CPUs held (OS numbers, ascending, deduplicated), before an exclusive job's
    /// widening to whole containers (which needs the topology: `node::held_pus`).
    pub fn cpus(&self) -> Vec<usize> {
        union(
            self.holders
                .iter()
                .map(|h| &h.cpus)
                .chain(self.reserved.iter().map(|r| &r.cpus)),
        )
    }

    /// The GPUs held (bus ids, sorted, deduplicated).
    pub fn gpus(&self) -> Vec<String> {
        union(
            self.holders
                .iter()
                .map(|h| &h.claim.gpus)
                .chain(self.reserved.iter().map(|r| &r.gpus)),
        )
    }

    /// Whether anything held (a live task's, or a same-user starting job's unstarted
    /// ranks') shares a CPU with `cpus` (ascending) or a GPU with `gpus`.
    pub fn overlaps(&self, cpus: &[usize], gpus: &[String]) -> bool {
        let cpu = |held: &Vec<usize>| held.iter().any(|c| cpus.binary_search(c).is_ok());
        let gpu = |held: &Vec<String>| held.iter().any(|g| gpus.contains(g));
        self.holders
            .iter()
            .any(|h| cpu(&h.cpus) || gpu(&h.claim.gpus))
            || self.reserved.iter().any(|r| cpu(&r.cpus) || gpu(&r.gpus))
    }

    /// Whether a holder may stand in the way of the looking job: anything outside a
    /// scheduler's allocation; inside one (SEMANTICS §4.3), only a task of a scheduler
    /// job: a bound process that is none steers the plan and never refuses or moves a task
    /// the scheduler placed.
    pub fn in_the_way(&self, h: &Holder) -> bool {
        self.allocation
            .as_deref()
            .is_none_or(|a| h.claim.job.of_scheduler(a))
    }

    /// The scan less what cannot stand in the way ([`Scan::in_the_way`]), and what was
    /// left out; `None` when nothing is (outside an allocation, or nobody outside it).
    pub fn scheduler_only(&self) -> Option<(Scan, Vec<Holder>)> {
        self.allocation.as_ref()?;
        // The common case, nobody outside, costs no copy (a joining rank asks on every launch).
        if self.held_cpus.is_empty() && self.holders.iter().all(|h| self.in_the_way(h)) {
            return None;
        }
        let (inside, outside): (Vec<Holder>, Vec<Holder>) = self
            .holders
            .iter()
            .cloned()
            .partition(|h| self.in_the_way(h));
        if outside.is_empty() && self.held_cpus.is_empty() {
            return None;
        }
        let mut only = self.clone();
        only.holders = inside;
        // CPUs that hidden processes of other users hold (`hidepid`) are no scheduler's
        // task either.
        only.held_cpus.clear();
        Some((only, outside))
    }

    /// The live jobs, grouped from their tasks (owner, job), in first-seen order.
    pub fn jobs(&self) -> Vec<LiveJob<'_>> {
        let mut jobs: Vec<LiveJob<'_>> = Vec::new();
        for h in &self.holders {
            match jobs
                .iter_mut()
                .find(|j| j.owner == h.owner && j.job == h.claim.job)
            {
                Some(j) => j.tasks.push(h),
                None => jobs.push(LiveJob {
                    owner: h.owner,
                    job: h.claim.job.clone(),
                    pack: h.claim.pack,
                    tasks: vec![h],
                }),
            }
        }
        jobs
    }
}

/// One job's live tasks, as `binder node` and refusals show them.
#[derive(Debug, Clone)]
pub struct LiveJob<'s> {
    /// Its owner's uid.
    pub owner: u32,
    /// The job.
    pub job: JobId,
    /// Its packing policy.
    pub pack: Pack,
    /// Its live tasks.
    pub tasks: Vec<&'s Holder>,
}

impl LiveJob<'_> {
    /// The CPUs its tasks hold (ascending).
    pub fn cpus(&self) -> Vec<usize> {
        union(self.tasks.iter().map(|t| &t.cpus))
    }

    /// The GPUs its tasks hold (sorted).
    pub fn gpus(&self) -> Vec<String> {
        union(self.tasks.iter().map(|t| &t.claim.gpus))
    }

    /// Its PIDs.
    pub fn pids(&self) -> Vec<u32> {
        self.tasks.iter().map(|t| t.claim.pid).collect()
    }
}

/// The sorted union of some lists.
fn union<'a, T: Ord + Clone + 'a>(lists: impl Iterator<Item = &'a Vec<T>>) -> Vec<T> {
    let set: BTreeSet<&T> = lists.flatten().collect();
    set.into_iter().cloned().collect()
}

/// What a task does about the other claims that overlap its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing overlaps: confirm and run.
    Clear,
    /// Another task goes first (it confirmed already, or started earlier): move.
    Yield,
    /// Only later, unconfirmed tasks overlap: they will see this claim and move, or
    /// confirm without having seen it; look again shortly.
    Wait,
}

/// The verdict for `mine` (CPUs and GPU bus ids, and this task's priority) against the
/// other jobs' live tasks.
pub(crate) fn verdict(
    cpus: &[usize],
    gpus: &[String],
    me: (u64, u32),
    others: &[Holder],
) -> Verdict {
    let mut wait = false;
    for h in others {
        let cpu_clash = h.cpus.iter().any(|c| cpus.binary_search(c).is_ok());
        let gpu_clash = h.claim.gpus.iter().any(|g| gpus.contains(g));
        if !cpu_clash && !gpu_clash {
            continue;
        }
        if h.confirmed || h.priority() < me {
            return Verdict::Yield;
        }
        wait = true;
    }
    if wait {
        Verdict::Wait
    } else {
        Verdict::Clear
    }
}

/// Why a launch could not use or honour the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// One of this user's own launches kept the user's lock too long.
    #[error("the node ledger's lock {lock} (yours alone) was held for more than {secs} s by another of your launches; find it with `fuser {lock}`, or launch without the ledger (BINDER_LEDGER=off)")]
    Busy {
        /// The lock file.
        lock: String,
        /// How long binder waited.
        secs: u64,
    },
    /// One of this user's own launches holds the user's lock and is stopped (SIGSTOP,
    /// `scontrol suspend`): waiting for it could take forever.
    #[error("the node ledger's lock {lock} (yours alone) is held by your launch pid {pid}, which is stopped (SIGSTOP or `scontrol suspend`); resume it (`kill -CONT {pid}`) or end it")]
    Stopped {
        /// The lock file.
        lock: String,
        /// The stopped holder.
        pid: u32,
    },
    /// The lock cannot be opened at all (a read-only or full file system).
    #[error("cannot open the node ledger's lock {lock}: {why}")]
    NoLock {
        /// The lock file.
        lock: String,
        /// The system's words.
        why: String,
    },
    /// Too few units are free because other jobs hold them.
    #[error("{what}: {held}; wait for {them} to end, or share {their} units with --share (or `options.share: true`)")]
    Occupied {
        /// What the shape needs, from the planner's refusal.
        what: String,
        /// Who holds the units in the way.
        held: String,
        /// "it" or "them".
        them: &'static str,
        /// "its" or "their".
        their: &'static str,
    },
    /// Ranks of one launcher job on one node asked for different shapes (MPMD app
    /// contexts, `srun --multi-prog`): one job's ranks share one plan, so binder refuses
    /// rather than deal either shape's units twice (SEMANTICS §4.1, the README's MPMD).
    #[error("local rank {rank} of job {job} asks for {origin}, but the job's other ranks on this node run with another shape or options; ranks of one job share one plan, so give every app context the same shape and write each context's placement as a `ranks:` rule of it (e.g. `ranks: [{{ranks: \"0\", bind: none}}, {{ranks: \"1-7\", resources: ...}}]`)")]
    OtherShape {
        /// The job, printable.
        job: String,
        /// This task's local rank.
        rank: usize,
        /// This task's shape.
        origin: String,
    },
    /// Tasks of other jobs that started first took the units of every plan this task
    /// made: it is not run on units it could not verify (#45).
    #[error("tasks of other jobs that started first took the units of each of this task's {rounds} plans: the node has none free for it at this moment, and the task was not started; launch it again, or share units with --share (or `options.share: true`)")]
    Contended {
        /// The plans made.
        rounds: usize,
    },
    /// A plan without this task's rank (every plan has a view per local rank: a bug).
    #[error("the plan has no local rank {0}; this is a bug in binder, please report it")]
    NoRank(usize),
    /// The ledger could not be used and `BINDER_LEDGER=require` asked for it.
    #[error("{0}; BINDER_LEDGER=require asks for the node ledger, so the task was not started (unset it to run bound without coordination)")]
    Required(String),
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, which rustix reads from the auxiliary
/// vector), the unit of `/proc`'s start times.
pub fn clock_hz() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

/// Clock ticks since boot, comparable with the start times of `/proc/PID/stat`: both
/// count from boot, suspend included (`CLOCK_BOOTTIME`, which `/proc/uptime` also reads;
/// this asks the vDSO instead of reading a file), in the initial time namespace's count
/// as start times are (`crate::procfs::boot_offset_ticks`).
pub fn now_ticks() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    let hz = clock_hz();
    (secs * hz + nanos * hz / 1_000_000_000)
        .saturating_add_signed(-crate::procfs::boot_offset_ticks())
}

#[cfg(test)]
mod tests;
