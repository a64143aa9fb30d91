//! Reading the other users' ledger directories (SEMANTICS §13.1, §13.2), as
//! `super::root` finds them: every directory of the ledger root that carries the
//! prefix, but this user's own, within hard caps: at
//! most `MAX_DIRS_PER_USER` directories per owner (canonical names first, so a flood of
//! names cannot push a real directory out of its owner's quota), `MAX_DIR_ENTRIES`
//! names per directory and `SCAN_BUDGET` of time once the first `ALWAYS_READ`
//! directories and claims are read (a loaded node's launch may spend its budget before
//! its first read; a small root is always read whole); a claim file is read only when its
//! name names a live process of the directory's owner, once per process.
//!
//! What these files say never decides another user's CPUs: the kernel's view is taken
//! on every scan ([`super::kernel`], shared between a user's launches by
//! [`super::shared`]) and every bound process of another user holds where it runs,
//! claimed or not, with an entry in this root or without. A budget spent by a flood of
//! names therefore costs only the GPUs and job names of the claims left unread, never a
//! CPU.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags, FileType};

use super::fsio::{for_names, open_dir, read_at, MAX_DIR_ENTRIES};
use super::kernel::{self, KernelView};
use super::own_dir::PREFIX;
use super::store::{Ledger, MAX_CLAIM_BYTES};
use super::verify::{self, claim_name, parse_claim};
use super::Scan;
use crate::procfs::Procs;

/// The most directories of one owner read.
pub(crate) const MAX_DIRS_PER_USER: usize = 4;
/// The time one scan of the other users' directories may take (past it, only GPUs and
/// job names of the unread claims are missed: the kernel's view has every CPU).
pub(crate) const SCAN_BUDGET: Duration = Duration::from_millis(250 * SLOWER);
/// How many times a launch's time budgets the unit tests have. They check what a read
/// finds, not how fast (the hostile tests time the release binary), and run unoptimised,
/// in `.ci/portability` under qemu-aarch64 too: there a listing of 5,000 names took
/// 20-36 ms of `LIST_BUDGET`'s 40, and on a loaded machine all of it.
#[cfg(test)]
pub(crate) const SLOWER: u64 = 20;
#[cfg(not(test))]
pub(crate) const SLOWER: u64 = 1;
/// The directories and claims every scan reads whatever the time (past them,
/// `SCAN_BUDGET` applies): on a loaded node a launch can spend its budget waiting for a
/// CPU before it reads a single name, and a claim left unread is a task that may not be
/// bound yet, which no look at the kernel shows. This many reads cost a few milliseconds
/// on an idle node; only a flood of names goes past them.
pub(crate) const ALWAYS_READ: usize = 256;
/// Above this many claim names in one of this user's other directories, `/proc` is
/// listed once instead of read per name.
const LIST_PIDS_ABOVE: usize = 64;

/// The most unverifiable claims (where `/proc` hides their processes) that steer a plan.
const MAX_STEER: usize = 256;

/// What one scan of the other directories carries from directory to directory.
pub(super) struct Reading<'a> {
    procs: &'a dyn Procs,
    me: u32,
    pub(super) view: Option<KernelView>,
    deadline: Instant,
    /// Directories and claims read so far (the first `ALWAYS_READ` are read past the
    /// deadline).
    spent: usize,
    /// Why the read stopped before its end, if it did.
    pub(super) stopped: Option<String>,
    /// This user's live PIDs, listed once when one of its other directories is large.
    live: Option<Option<HashSet<u32>>>,
    /// Processes whose claim was already read (a second one is a duplicate).
    /// (A BTreeSet: a HashSet's random keys cost a `getrandom` on every launch.)
    seen: BTreeSet<u32>,
    /// Unverifiable claims read to steer.
    steered: usize,
    /// The PID namespace this launch numbers PIDs in, and whether it is not the
    /// initial one (a container's, with its own `/proc`): a claim of a PID this `/proc`
    /// does not show may then name a process outside it.
    ns: u64,
    nested: bool,
    /// The CPUs an unbound thread may run on, read when first needed.
    everywhere: Option<Option<Vec<usize>>>,
}

/// The kernel's view alone, as user `me` would plan around it when the ledger cannot be
/// used (SEMANTICS §13.2: the fallback is the kernel's view, never an empty node).
pub fn kernel_scan(procs: &dyn Procs, me: u32) -> Scan {
    let mut scan = Scan::new(me);
    if let Some(view) = kernel::look(procs, &mut scan) {
        kernel::add_unclaimed(&view, procs, &mut scan);
    }
    scan
}

impl Reading<'_> {
    /// Whether the next directory or claim is past the budget: one more read counted,
    /// and the deadline passed after the first `ALWAYS_READ` of them.
    fn out_of_time(&mut self) -> bool {
        self.spent += 1;
        self.spent > ALWAYS_READ && Instant::now() >= self.deadline
    }
}

impl Ledger {
    /// A read of the other directories, through `view`, until `deadline`.
    pub(super) fn reading<'p>(
        &self,
        procs: &'p dyn Procs,
        view: Option<KernelView>,
        deadline: Instant,
    ) -> Reading<'p> {
        let ns = procs.pid_ns();
        Reading {
            procs,
            me: self.uid(),
            view,
            deadline,
            spent: 0,
            stopped: None,
            live: None,
            seen: BTreeSet::new(),
            steered: 0,
            ns,
            nested: ![0, crate::procfs::INIT_PID_NS].contains(&ns),
            everywhere: None,
        }
    }

    /// The other directories named `names` (in the root `listing` holds open), each
    /// checked to be a real directory only its owner can write, into `scan`.
    /// Returns the names of the directories it read.
    pub(super) fn read_dirs(
        &self,
        root: BorrowedFd<'_>,
        mut names: Vec<String>,
        reading: &mut Reading<'_>,
        scan: &mut Scan,
    ) -> Vec<String> {
        let mut read = Vec::new();
        // Canonical names first, then the rest in name order: a flood of names cannot
        // push a real directory out of its owner's quota of `MAX_DIRS_PER_USER`.
        names.sort_by_key(|n| (n[PREFIX.len()..].contains('.'), n.clone()));
        let mut per_owner: BTreeMap<u32, usize> = BTreeMap::new();
        for name in names {
            if reading.out_of_time() {
                let why = format!(
                    "reading {} took longer than {} ms",
                    self.root().display(),
                    SCAN_BUDGET.as_millis()
                );
                scan.incomplete = Some(why.clone());
                reading.stopped = Some(why);
                return read;
            }
            // One `statat` says whose it is; only a user's first few are opened.
            let Ok(st) = rfs::statat(root, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                // Gone since it was listed: a lifted squat's user may have moved to a
                // directory this read does not know (SEMANTICS §13.5).
                scan.doubt =
                    Some("a directory of the ledger root vanished while it was read".into());
                continue;
            };
            let owner = st.st_uid;
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory || st.st_mode & 0o022 != 0
            {
                scan.ignore(
                    &name,
                    Some(owner),
                    "not a directory only its owner can write".into(),
                );
                continue;
            }
            let seen = per_owner.entry(owner).or_default();
            *seen += 1;
            if *seen > MAX_DIRS_PER_USER {
                scan.ignore(
                    &name,
                    Some(owner),
                    format!("more than {MAX_DIRS_PER_USER} directories of one user"),
                );
                continue;
            }
            // Opened without following a link, and checked again: it may have been
            // swapped since the `statat`.
            let Ok(dir) = open_dir(root, Path::new(&name)) else {
                continue;
            };
            let same = rfs::fstat(&dir).is_ok_and(|now| {
                now.st_uid == owner && now.st_ino == st.st_ino && now.st_mode & 0o022 == 0
            });
            if !same {
                continue;
            }
            scan_dir(dir, &name, owner, reading, scan);
            read.push(name);
        }
        read
    }
}

/// One other directory's claims: names first (markers, claims of live processes), then
/// the files of those alone.
fn scan_dir(dir: OwnedFd, dir_name: &str, owner: u32, reading: &mut Reading<'_>, scan: &mut Scan) {
    let mut claims = Vec::new();
    let mut markers = BTreeSet::new();
    let Ok(mut listing) = rfs::Dir::new(dir) else {
        return;
    };
    let mut seen = 0usize;
    let deadline = reading.deadline;
    let always = ALWAYS_READ.saturating_sub(reading.spent);
    let complete = for_names(&mut listing, MAX_DIR_ENTRIES, |name, _| {
        if let Some((pid, start, _)) = claim_name(name) {
            claims.push((name.to_owned(), pid, start));
        } else if let Some(m) = name.strip_prefix("ok.") {
            if let Some((pid, start)) = m.split_once('.') {
                if let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) {
                    markers.insert((pid, start));
                }
            }
        }
        seen += 1;
        seen <= always || seen % 1024 != 0 || Instant::now() < deadline
    });
    if !complete {
        scan.ignore(
            dir_name,
            Some(owner),
            format!("more than {MAX_DIR_ENTRIES} names, or too slow to read: the rest is skipped"),
        );
    }
    let own = owner == reading.me;
    let hidden = reading.view.as_ref().is_some_and(|v| v.hidden.is_some());
    let nested = reading.nested;
    let procs = reading.procs;
    match reading.view.as_mut() {
        // Another user's: only the names of their live processes (one look at the
        // kernel's view rules out every other name at once), unless /proc hides them;
        // in a PID namespace of its own, also a bounded few it does not show (they may
        // name processes outside it: `unseen`).
        Some(view) if !own && !hidden => {
            let mut outside = 0usize;
            claims.retain(|(_, pid, _)| {
                view.ask(procs, *pid);
                view.procs.get(pid).is_some_and(|s| s.uid == owner)
                    || (nested && {
                        outside += 1;
                        outside <= MAX_STEER
                    })
            });
        }
        // Many names: one read of /proc's directory rules out the dead PIDs at once
        // (not where /proc hides other users' PIDs: that would rule out every one).
        _ if claims.len() > LIST_PIDS_ABOVE && (own || !hidden) => {
            let procs = reading.procs;
            let pids = reading.live.get_or_insert_with(|| procs.pids());
            if let Some(pids) = pids {
                claims.retain(|(_, pid, _)| pids.contains(pid));
            }
        }
        _ => {}
    }
    let Ok(dir) = listing.fd() else {
        return;
    };
    for (name, pid, start) in claims {
        if reading.out_of_time() {
            let why = String::from("reading the other users' claims took too long");
            scan.incomplete = Some(why.clone());
            reading.stopped = Some(why);
            return;
        }
        let read = || read_at(dir, &name, owner, MAX_CLAIM_BYTES);
        let confirmed = markers.contains(&(pid, start));
        let shown = format!("{dir_name}/{name}");
        if own {
            // This user's other directory: their own word, as in their own directory.
            match verify::verify_claim(owner, (pid, start), read, true, reading.procs) {
                Ok(h) => scan.holders.push(h),
                Err(why) => scan.ignore(&shown, Some(owner), why),
            }
            continue;
        }
        let Some(view) = reading.view.as_mut() else {
            continue;
        };
        view.ask(reading.procs, pid);
        if !reading.seen.insert(pid) {
            scan.ignore(&shown, Some(owner), format!("a second claim of pid {pid}"));
            continue;
        }
        match kernel::check(view, reading.procs, owner, (pid, start)) {
            Ok((cpus, started)) => match read().and_then(|t| parse_claim(&t, (pid, start))) {
                Ok(claim) => {
                    let holder = kernel::believe(owner, claim, cpus, confirmed || started);
                    scan.steer(&[], &holder.claim.gpus);
                    scan.holders.push(holder);
                }
                Err(why) => scan.ignore(&shown, Some(owner), why),
            },
            // Where /proc does not show them, the kernel and their word, bounded.
            Err(why) if (hidden || nested) && reading.steered < MAX_STEER => {
                reading.steered += 1;
                match read().and_then(|t| parse_claim(&t, (pid, start))) {
                    Ok(claim) => {
                        if !unseen(reading, &claim, hidden, scan) {
                            scan.ignore(&shown, Some(owner), why);
                        }
                    }
                    Err(why) => scan.ignore(&shown, Some(owner), why),
                }
            }
            Err(why) => scan.ignore(&shown, Some(owner), why),
        }
    }
}

/// Another user's claim whose process this `/proc` does not show (SEMANTICS §13.3):
/// - numbered in this PID namespace, under `hidepid`: the kernel still answers
///   `sched_getaffinity` for it. No such process: the claim counts for nothing (a file
///   with no process steers nobody onto a CPU in use). Bound: it holds where it runs,
///   as any other user's bound task does. Unbound: its word steers, and nothing more.
/// - numbered in another PID namespace (this launch's container, or the claim's): it
///   cannot be addressed, so its word steers; a launch in a container says so once.
///
/// `false`: it counts for nothing (numbered here, and this `/proc` shows everything, or
/// the kernel has no such process).
fn unseen(reading: &mut Reading<'_>, claim: &super::Claim, hidden: bool, scan: &mut Scan) -> bool {
    // A claim that does not say (binder always says: a hand-written one) is checked as
    // this namespace's: the kernel, not its word, then decides.
    let here = claim.pidns == 0 || claim.pidns == reading.ns;
    if here {
        let allowed = if hidden {
            reading.procs.affinity_of(claim.pid)
        } else {
            None
        };
        let Some(allowed) = allowed else {
            return false;
        };
        let procs = reading.procs;
        let everywhere = reading.everywhere.get_or_insert_with(|| procs.everywhere());
        let bound = kernel::bound_cpus(everywhere.as_deref(), &[allowed]);
        if bound.is_empty() {
            scan.steer(&claim.cpus, &claim.gpus);
        } else {
            scan.hold(&bound);
            scan.steer(&[], &claim.gpus);
        }
        return true;
    }
    if reading.nested && scan.hidden.is_none() {
        scan.hidden = Some(
            "binder runs in another PID namespace than other users' tasks (a container with its own /proc)"
                .into(),
        );
    }
    scan.steer(&claim.cpus, &claim.gpus);
    true
}
