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
use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};

use super::settled::{self, Settled};
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

/// [`others`], skipping root's long-lived processes `before` remembers (see
/// [`super::settled`]), with what this look found of root's processes for the next one.
pub(super) fn others_settled(me: u32, before: &Settled) -> Option<(Vec<Other>, Settled)> {
    let now = settled::now_ms();
    let mut after = Settled::default();
    let mut out = Vec::new();
    let skip = |pid: u32, ino: u64| before.skips(pid, ino, now);
    each_process_skipping(skip, |proc, pid, ino, task, st| match st {
        None => after.keep(before, pid),
        Some(st) if st.st_uid == 0 => after.root(before, pid, ino, now),
        Some(st) if st.st_uid == me => {}
        Some(st) => {
            if let Some(other) = one(proc, pid, task, st) {
                out.push(other);
            }
        }
    })?;
    Some((out, after))
}

/// A process of another user, with every thread's affinity (`None` when it ended).
fn one(proc: &OwnedFd, pid: u32, task: &str, st: &rfs::Stat) -> Option<Other> {
    // `st_nlink` is u64 on x86_64 but u32 on other targets.
    #[allow(clippy::useless_conversion)]
    let count = u64::from(st.st_nlink).saturating_sub(2);
    let threads: Vec<Vec<usize>> = if count <= 1 {
        affinity(Some(pid)).into_iter().collect()
    } else {
        threads(proc, task)
    };
    (!threads.is_empty()).then_some(Other {
        pid,
        uid: st.st_uid,
        threads,
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
            threads(proc, task)
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
fn each_process(mut each: impl FnMut(&OwnedFd, u32, &str, &rfs::Stat)) -> Option<()> {
    each_process_skipping(
        |_, _| false,
        |proc, pid, _, task, st| {
            if let Some(st) = st {
                each(proc, pid, task, st);
            }
        },
    )
}

/// [`each_process`], with the inode number each is listed under, and no `statat` (a
/// `None` status) for those `skip` names.
fn each_process_skipping(
    skip: impl Fn(u32, u64) -> bool,
    mut each: impl FnMut(&OwnedFd, u32, u64, &str, Option<&rfs::Stat>),
) -> Option<()> {
    let proc = rfs::openat(
        rfs::CWD,
        "/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut listing = rfs::Dir::read_from(&proc).ok()?;
    for entry in listing.by_ref().take(MAX_PROCESSES) {
        let Ok(entry) = entry else {
            break;
        };
        let Some(pid) = number(entry.file_name()) else {
            continue;
        };
        let ino = entry.ino();
        if skip(pid, ino) {
            each(&proc, pid, ino, "", None);
            continue;
        }
        let task = format!("{pid}/task");
        let Ok(st) = rfs::statat(&proc, task.as_str(), AtFlags::empty()) else {
            continue;
        };
        each(&proc, pid, ino, &task, Some(&st));
    }
    Some(())
}

/// Every thread's affinity of a threaded process (at most [`MAX_THREADS`]).
fn threads(proc: &impl rustix::fd::AsFd, task: &str) -> Vec<Vec<usize>> {
    let Ok(dir) = rfs::openat(
        proc,
        task,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return Vec::new();
    };
    let Ok(listing) = rfs::Dir::new(dir) else {
        return Vec::new();
    };
    listing
        .take(MAX_THREADS + 2)
        .map_while(Result::ok)
        .filter_map(|e| number(e.file_name()))
        .filter_map(|tid| affinity(Some(tid)))
        .collect()
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
    if let Ok(status) = super::read_small("/proc/self/status", 16 << 10) {
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
