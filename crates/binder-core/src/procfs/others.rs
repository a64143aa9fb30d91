//! Other users' processes as the kernel shows them (SEMANTICS §13.2): who runs where,
//! read in about two system calls per process so that a look at the whole node costs
//! about a millisecond, not one file read per thread.
//!
//! Per process: one `statat` of `/proc/PID/task` gives its owner (the directory's uid,
//! the process's effective uid) and its thread count (the directory's link count less
//! two); a single-threaded process then costs one `sched_getaffinity`, which any user
//! may call on any thread, and a threaded one a listing of its threads and one call
//! each. Root's processes (kernel threads among them) and this user's own are skipped:
//! the system's own pinned daemons are not jobs, and a user's own jobs are known from
//! that user's own ledger files.

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};

use super::settled::{self, Mark, Settled};
use super::{affinity, Other, MAX_THREADS};

/// The most processes looked at (a node's `pid_max` is at most 4,194,304; far fewer run).
pub const MAX_PROCESSES: usize = 1 << 20;

/// Every process of a user other than `me` and root (see the module text); `None` when
/// `/proc` cannot be listed.
pub(super) fn others(me: u32) -> Option<Vec<Other>> {
    processes(|uid| uid != me && uid != 0)
}

/// Every process of `me` (a launch that cannot use the ledger finds the user's own jobs
/// here: SEMANTICS §13.3); `None` when `/proc` cannot be listed.
pub(super) fn mine(me: u32) -> Option<Vec<Other>> {
    processes(|uid| uid == me)
}

/// [`others`], skipping root's long-lived processes remembered (see [`super::settled`]),
/// with what this look found for the next one: without listing `/proc` where `before`'s
/// mark (read with the shared view) shows that no PID was handed out twice since, else by
/// a listing that skips the settled roots `roots` reads (`kroot`, read only then).
pub(super) fn others_settled(
    me: u32,
    before: &Settled,
    roots: &dyn Fn() -> Settled,
) -> Option<(Vec<Other>, Settled)> {
    let now = settled::now_ms();
    let mut after = Settled::default();
    // Read before the look: a process started during it has a later PID, which the next
    // look reads.
    after.mark = Mark::read(now);
    let since = after
        .mark
        .zip(before.mark)
        .filter(|_| {
            // Within `RELIST` of the last listing, and holding few enough root processes
            // to read one by one (a first listing finds them all new: the listing after
            // they settle hands over none).
            before.listed != 0
                && now
                    .checked_sub(before.listed)
                    .is_some_and(|age| age < settled::RELIST)
                && before.len() <= settled::MAX_NEW as usize
        })
        .and_then(|(now_mark, then)| now_mark.follows(&then));
    let listing_before;
    let before = match since {
        Some(_) => {
            after.listed = before.listed;
            before
        }
        None => {
            after.listed = now;
            after.listing = true;
            listing_before = before.clone().with_roots(roots());
            &listing_before
        }
    };
    let mut out = Vec::new();
    let mut each =
        |proc: BorrowedFd<'_>, pid: u32, ino: u64, task: &str, st: Option<&rfs::Stat>| match st {
            None => after.keep(before, pid),
            Some(st) if st.st_uid == 0 => after.root(before, pid, ino, now),
            Some(st) if st.st_uid == me => {
                if leads(proc, pid, task, st) {
                    after.user(pid);
                }
            }
            Some(st) => {
                if let Some(other) = one(proc, pid, task, st) {
                    out.push(other);
                    after.user(pid);
                }
            }
        };
    let whole = match since {
        Some(new) => each_known(before, new, now, &mut each).map(|()| true)?,
        None => each_process_skipping(|pid, ino| before.skips(pid, ino, now), each)?,
    };
    // A listing cut short is no record a later look may follow without listing.
    if !whole {
        after.partial();
    }
    Some((out, after))
}

/// Calls `each` as [`each_process_skipping`] does, without listing `/proc`: for the
/// processes `before` found (the root processes it holds that it may skip now with no
/// status; the settled ones it does not hold are not called for at all), and the PIDs
/// `new` handed out since (a thread's among them is no process: [`one`] drops it).
fn each_known(
    before: &Settled,
    new: std::ops::RangeInclusive<u32>,
    now: u64,
    mut each: impl FnMut(BorrowedFd<'_>, u32, u64, &str, Option<&rfs::Stat>),
) -> Option<()> {
    // Each by its whole path (`/proc/PID/task`): opening `/proc` first cost two system
    // calls more than the few PIDs a look within the window reads.
    let proc = rfs::CWD;
    let mut pids: BTreeSet<u32> = before.users().collect();
    for (pid, skip) in before.roots(now) {
        if skip {
            each(proc, pid, 0, "", None);
        } else {
            pids.insert(pid);
        }
    }
    pids.extend(new);
    for pid in pids {
        let task = format!("/proc/{pid}/task");
        let Ok(st) = rfs::statat(proc, task.as_str(), AtFlags::empty()) else {
            continue;
        };
        // A remembered root process keeps the inode number it was listed under (no PID
        // was reused since); a new one has none until a listing gives it one.
        each(proc, pid, before.ino(pid).unwrap_or(0), &task, Some(&st));
    }
    Some(())
}

/// A process of another user, with every thread's affinity (`None` when it ended, or
/// when `pid` is a thread of another process: `/proc/TID` answers for a thread too, and
/// a process's thread listing starts with its leader).
fn one(proc: BorrowedFd<'_>, pid: u32, task: &str, st: &rfs::Stat) -> Option<Other> {
    // `st_nlink` is u64 on x86_64 but u32 on other targets.
    #[allow(clippy::useless_conversion)]
    let count = u64::from(st.st_nlink).saturating_sub(2);
    let threads: Vec<Vec<usize>> = if count <= 1 {
        affinity(Some(pid)).into_iter().collect()
    } else {
        let (leader, threads) = threads(&proc, task);
        if leader.is_some_and(|l| l != pid) {
            return None;
        }
        threads
    };
    (!threads.is_empty()).then_some(Other {
        pid,
        uid: st.st_uid,
        threads,
    })
}

/// Whether `pid` (listed as `task`, with that directory's status `st`) is a process and
/// not another's thread: a single-threaded one is its own leader, and a process's thread
/// listing starts with its leader.
fn leads(proc: BorrowedFd<'_>, pid: u32, task: &str, st: &rfs::Stat) -> bool {
    // `st_nlink` is u64 on x86_64 but u32 on other targets.
    #[allow(clippy::useless_conversion)]
    let count = u64::from(st.st_nlink).saturating_sub(2);
    if count <= 1 {
        return true;
    }
    let Some(dir) = open_dir(&proc, task) else {
        return false;
    };
    rfs::Dir::new(dir).is_ok_and(|listing| {
        listing
            .map_while(Result::ok)
            .find_map(|e| number(e.file_name()))
            == Some(pid)
    })
}

/// Every process whose owner `keep` accepts, with every thread's affinity.
fn processes(keep: impl Fn(u32) -> bool) -> Option<Vec<Other>> {
    let mut out = Vec::new();
    each_process(|proc, pid, task, st| {
        if !keep(st.st_uid) {
            return;
        }
        // `st_nlink` is u64 on x86_64 but u32 on other targets.
        #[allow(clippy::useless_conversion)]
        let count = u64::from(st.st_nlink).saturating_sub(2);
        let threads = if count <= 1 {
            affinity(Some(pid)).into_iter().collect()
        } else {
            threads(&proc, task).1
        };
        if !threads.is_empty() {
            out.push(Other {
                pid,
                uid: st.st_uid,
                threads,
            });
        }
    })?;
    Some(out)
}

/// Every user but `me` and root with a live process, at one `statat` per process and
/// no thread read: whose canonical ledger directories a launch looks up by name while
/// the ledger root churns (`crate::ledger`); `None` when `/proc` cannot be listed.
pub(super) fn users(me: u32) -> Option<BTreeSet<u32>> {
    let mut out = BTreeSet::new();
    each_process(|_, _, _, st| {
        if st.st_uid != me && st.st_uid != 0 {
            out.insert(st.st_uid);
        }
    })?;
    Some(out)
}

/// Calls `each(/proc, PID, "PID/task", its status)` for every process `/proc` lists, at
/// most [`MAX_PROCESSES`] (the `task` directory's owner is the process's effective uid,
/// its link count its threads and two); `None` when `/proc` cannot be listed.
fn each_process(mut each: impl FnMut(BorrowedFd<'_>, u32, &str, &rfs::Stat)) -> Option<()> {
    each_process_skipping(
        |_, _| false,
        |proc, pid, _, task, st| {
            if let Some(st) = st {
                each(proc, pid, task, st);
            }
        },
    )
    .map(|_| ())
}

/// [`each_process`], with the inode number each is listed under, and no `statat` (a
/// `None` status) for those `skip` names; `Some(false)` when the listing was cut short
/// (past [`MAX_PROCESSES`], or a read that failed).
fn each_process_skipping(
    skip: impl Fn(u32, u64) -> bool,
    mut each: impl FnMut(BorrowedFd<'_>, u32, u64, &str, Option<&rfs::Stat>),
) -> Option<bool> {
    let proc = open_dir(&rfs::CWD, "/proc")?;
    let listing = rfs::Dir::read_from(&proc).ok()?;
    let mut seen = 0;
    for entry in listing {
        let Ok(entry) = entry else {
            return Some(false);
        };
        seen += 1;
        if seen > MAX_PROCESSES {
            return Some(false);
        }
        let Some(pid) = number(entry.file_name()) else {
            continue;
        };
        let ino = entry.ino();
        if skip(pid, ino) {
            each(proc.as_fd(), pid, ino, "", None);
            continue;
        }
        let task = format!("{pid}/task");
        let Ok(st) = rfs::statat(&proc, task.as_str(), AtFlags::empty()) else {
            continue;
        };
        each(proc.as_fd(), pid, ino, &task, Some(&st));
    }
    Some(true)
}

/// Every thread's affinity of a threaded process (at most [`MAX_THREADS`]), with the
/// first thread listed (its leader).
fn threads(proc: &impl AsFd, task: &str) -> (Option<u32>, Vec<Vec<usize>>) {
    let Some(dir) = open_dir(proc, task) else {
        return (None, Vec::new());
    };
    let Ok(listing) = rfs::Dir::new(dir) else {
        return (None, Vec::new());
    };
    let tids: Vec<u32> = listing
        .take(MAX_THREADS + 2)
        .map_while(Result::ok)
        .filter_map(|e| number(e.file_name()))
        .collect();
    let threads = tids.iter().filter_map(|&tid| affinity(Some(tid))).collect();
    (tids.first().copied(), threads)
}

/// The directory `path` (relative to `at`), opened to be listed.
fn open_dir(at: &impl AsFd, path: &str) -> Option<OwnedFd> {
    rfs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// A `/proc` entry's name as a PID, when it is one.
fn number(name: &CStr) -> Option<u32> {
    let bytes = name.to_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// Why `/proc` hides other users' processes from this one, when it does: `hidepid`
/// (PID 1 cannot be read, or is not there at all) or a PID namespace of its own (the
/// `NSpid` line names more than one PID). Root sees through `hidepid`.
pub(super) fn hidden(me_uid: u32) -> Option<String> {
    // The initial PID namespace has no parent: `NSpid` names one PID there, and reading
    // `/proc/self/status` (formatted field by field, the dearest file a look reads) is
    // needed only in another. Not the namespace alone: `NSpid` counts from the namespace
    // of `/proc`'s mount, so a namespace with a `/proc` of its own (a container's, the
    // hostile tests') names one PID too, and that `/proc` is read as a node's.
    let initial = super::pid_ns() == super::INIT_PID_NS;
    if let Some(status) = (!initial)
        .then(|| super::read_small("/proc/self/status", 16 << 10).ok())
        .flatten()
    {
        let nspid = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .map_or(1, |v| v.split_whitespace().count());
        if nspid > 1 {
            return Some("binder runs in a PID namespace of its own, so /proc shows only the processes of that namespace".into());
        }
    }
    if me_uid != 0 && super::read_small("/proc/1/stat", 4096).is_err() {
        return Some(
            "/proc is mounted with hidepid, so other users' processes are hidden from you".into(),
        );
    }
    None
}
