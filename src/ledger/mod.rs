//! The node ledger (SEMANTICS §13): which jobs hold which CPUs of this node, so that two
//! jobs that share a node never bind to the same units, with no daemon.
//!
//! One JSON file per job per node in a sticky, world-writable directory ([`store`]): the
//! job's plan (every local rank's [`TaskView`]), its packing policy, and the tasks that
//! have started (rank, PID, process start time). The first task of a job computes the
//! plan under the ledger's lock and writes the file; every other task of the job reads the
//! plan from it and adds itself. A user can only write their own files (the kernel's
//! sticky-bit rule), and nothing in a file is believed until [`verify`] has checked it
//! against `/proc`:
//!
//! - a task counts while its PID is alive with the recorded start time, belongs to the
//!   file's owner, and its real affinity is a non-empty subset of its rank's CPUs (a task
//!   may narrow its own affinity, as OpenMP runtimes do, never widen it);
//! - a job counts while at least one of its tasks does; it holds the CPUs of its counted
//!   tasks, and of ranks not started yet for [`GRACE_SECS`] after its first task started;
//!   an `exclusive` job holds the whole containers those CPUs touch;
//! - everything else is ignored (and said so by `binder node`), so a forged or stale file
//!   can keep nobody from anything beyond what its owner's live, really bound processes
//!   use.

pub mod node;
pub mod store;

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::identity::job::JobId;
use crate::launch::env::TaskView;
use crate::procfs::Procs;
use crate::shape::Pack;

pub use store::Ledger;

/// Format of the job files; a file of another format is ignored (and replaced by its owner).
pub const FORMAT: u32 = 1;

/// How long after a job's first task started its other ranks hold their CPUs before they
/// have started themselves (launchers start a node's tasks within seconds).
pub const GRACE_SECS: u64 = 60;

/// One started task of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Local rank.
    pub rank: usize,
    /// PID (binder's, then the task's: binder execs in place).
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat`), so a reused PID is not it.
    pub start: u64,
}

/// One job's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// [`FORMAT`].
    pub format: u32,
    /// The job.
    pub job: JobId,
    /// What the plan depends on (shape bytes, requests, size): a task whose key differs is
    /// not of this job.
    pub key: String,
    /// Packing policy the job was planned with.
    pub pack: Pack,
    /// The plan: one view per local rank.
    pub tasks: Vec<TaskView>,
    /// Tasks started so far.
    pub members: Vec<Member>,
}

/// An [`Entry`] with its plan left as JSON text, for a task joining its job: it parses
/// only its own rank's view (a 1,001-rank job's file is 150 KB; 256 tasks starting at
/// once each join it), and records itself by appending a line ([`Ledger::append`]).
#[derive(Debug, Serialize, Deserialize)]
pub struct RawEntry {
    /// [`FORMAT`].
    pub format: u32,
    /// The job.
    pub job: JobId,
    /// As [`Entry::key`].
    pub key: String,
    /// As [`Entry::pack`].
    pub pack: Pack,
    /// The plan: one view per local rank, unparsed.
    pub tasks: Vec<Box<serde_json::value::RawValue>>,
    /// Tasks started so far.
    pub members: Vec<Member>,
}

impl RawEntry {
    /// Local rank `rank`'s view, parsed.
    pub fn view(&self, rank: usize) -> Option<TaskView> {
        serde_json::from_str(self.tasks.get(rank)?.get()).ok()
    }
}

/// A job the ledger believes.
#[derive(Debug, Clone)]
pub struct LiveJob {
    /// Its file.
    pub file: PathBuf,
    /// The file's owner.
    pub owner: u32,
    /// The file.
    pub entry: Entry,
    /// Its tasks that count (alive, bound as recorded).
    pub live: Vec<Member>,
    /// The CPUs of its counted tasks and of ranks still in their grace period (OS numbers,
    /// ascending); [`node`] widens an exclusive job's to whole containers.
    pub cpus: Vec<usize>,
}

/// A file the ledger does not believe, and why.
#[derive(Debug, Clone)]
pub struct Ignored {
    /// The file.
    pub file: PathBuf,
    /// Its owner, when it could be read.
    pub owner: Option<u32>,
    /// Its entry, when it parsed.
    pub entry: Option<Entry>,
    /// Why it counts for nothing.
    pub why: String,
}

/// What the ledger holds now.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Jobs that count.
    pub live: Vec<LiveJob>,
    /// Files that do not.
    pub ignored: Vec<Ignored>,
}

/// Whether a job is still starting: its first recorded task started less than
/// [`GRACE_SECS`] ago (`now` in clock ticks since boot, `hz` ticks per second).
pub fn starting(members: &[Member], now: u64, hz: u64) -> bool {
    members
        .iter()
        .map(|m| m.start)
        .min()
        .is_some_and(|s| now.saturating_sub(s) < GRACE_SECS * hz.max(1))
}

/// A file as read: its path, owner, and its entry or why it could not be read.
pub type Raw = (PathBuf, Option<u32>, Result<Entry, String>);

/// Checks every file against the processes (see the module text). `now` is the clock
/// ticks since boot and `hz` ticks per second.
pub fn verify(files: Vec<Raw>, procs: &dyn Procs, now: u64, hz: u64) -> Scan {
    let mut scan = Scan::default();
    for (file, owner, entry) in files {
        let (owner, entry) = match (owner, entry) {
            (Some(o), Ok(e)) => (o, e),
            (owner, Err(why)) => {
                scan.ignored.push(Ignored {
                    file,
                    owner,
                    entry: None,
                    why,
                });
                continue;
            }
            (None, Ok(e)) => {
                scan.ignored.push(Ignored {
                    file,
                    owner: None,
                    entry: Some(e),
                    why: "its owner cannot be read".into(),
                });
                continue;
            }
        };
        match check(&entry, owner, procs, now, hz) {
            Ok((live, cpus)) => scan.live.push(LiveJob {
                file,
                owner,
                entry,
                live,
                cpus,
            }),
            Err(why) => scan.ignored.push(Ignored {
                file,
                owner: Some(owner),
                entry: Some(entry),
                why,
            }),
        }
    }
    scan
}

/// The counted tasks and held CPUs of one entry, or why it counts for nothing.
fn check(
    entry: &Entry,
    owner: u32,
    procs: &dyn Procs,
    now: u64,
    hz: u64,
) -> Result<(Vec<Member>, Vec<usize>), String> {
    if entry.format != FORMAT {
        return Err(format!("format {} (binder writes {FORMAT})", entry.format));
    }
    let mut live = Vec::new();
    let mut first_why = None;
    for m in &entry.members {
        let Some(task) = entry.tasks.get(m.rank) else {
            first_why.get_or_insert_with(|| format!("rank {} is not in its plan", m.rank));
            continue;
        };
        match member_counts(m, task, owner, procs) {
            Ok(()) => {
                live.push(m.clone());
            }
            Err(why) => {
                first_why.get_or_insert(why);
            }
        }
    }
    if live.is_empty() {
        return Err(first_why.unwrap_or_else(|| "no task recorded".into()));
    }
    let in_grace = starting(&live, now, hz);
    let mut cpus = BTreeSet::new();
    for (rank, task) in entry.tasks.iter().enumerate() {
        if !task.is_bound() || !task.apply {
            continue;
        }
        let started = entry.members.iter().any(|m| m.rank == rank);
        let counted = live.iter().any(|m| m.rank == rank);
        if counted || (!started && in_grace) {
            cpus.extend(task.cpus.iter().copied());
        }
    }
    Ok((live, cpus.into_iter().collect()))
}

/// Whether one recorded task is alive, the file owner's, and bound inside its rank's CPUs.
fn member_counts(m: &Member, task: &TaskView, owner: u32, procs: &dyn Procs) -> Result<(), String> {
    let pid = m.pid;
    let stat = procs
        .stat(pid)
        .filter(|s| !s.ended())
        .ok_or_else(|| format!("pid {pid} is gone"))?;
    if stat.start != m.start {
        return Err(format!("pid {pid} is another process now"));
    }
    let status = procs
        .status(pid)
        .ok_or_else(|| format!("pid {pid} cannot be read"))?;
    if status.uid != owner {
        return Err(format!(
            "pid {pid} belongs to uid {}, the file to uid {owner}",
            status.uid
        ));
    }
    if task.is_bound() && task.apply {
        let mine: BTreeSet<usize> = task.cpus.iter().copied().collect();
        if status.cpus.is_empty() || !status.cpus.iter().all(|c| mine.contains(c)) {
            return Err(format!(
                "pid {pid} runs on cpus {}, not inside its rank's {}",
                crate::report::cpu_list(&status.cpus),
                crate::report::cpu_list(&task.cpus)
            ));
        }
    }
    Ok(())
}

/// Why a launch could not use or honour the ledger.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// Another process kept the lock too long.
    #[error("the node ledger's lock {lock} was held for more than {secs} s; find the holder with `fuser {lock}`, or launch without the ledger (BINDER_LEDGER=off)")]
    Busy {
        /// The lock file.
        lock: String,
        /// How long binder waited.
        secs: u64,
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
    /// The job's entry could not be written.
    #[error("{0}; the ledger keeps jobs on this node apart, so the task was not started (BINDER_LEDGER=off launches without it)")]
    Write(String),
}

/// The live jobs that hold CPUs, but for the one in `except` (the file being replaced).
pub fn held_by_others<'s>(scan: &'s Scan, except: Option<&std::path::Path>) -> Vec<&'s LiveJob> {
    scan.live
        .iter()
        .filter(|j| except != Some(j.file.as_path()))
        .filter(|j| !j.cpus.is_empty())
        .collect()
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`), the unit of `/proc`'s start times.
pub fn clock_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).unwrap_or(100).max(1)
}

/// Clock ticks since boot, comparable with the start times of `/proc/PID/stat`: both
/// count from boot, suspend included (`CLOCK_BOOTTIME`, which `/proc/uptime` also reads;
/// this asks the vDSO instead of reading a file).
pub fn now_ticks() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec for the kernel (or vDSO) to write.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut now) } != 0 {
        return 0;
    }
    let secs = u64::try_from(now.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(now.tv_nsec).unwrap_or(0);
    let hz = clock_hz();
    secs * hz + nanos * hz / 1_000_000_000
}

#[cfg(test)]
mod tests;
