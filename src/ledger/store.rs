//! Where the ledger lives and how it is read and written (SEMANTICS §13.1).
//!
//! The ledger root is `$BINDER_LEDGER_DIR`, else `/dev/shm` (tmpfs: gone at reboot, like
//! the processes it describes; every user's tasks can reach it). It must be a real
//! directory owned by root or by this user, and sticky if everyone may write in it, so
//! nobody can remove another user's entries. No administrator setup is needed.
//!
//! Each user has a directory of their own in it, `binder-ledger.<uid>`, mode 0755, made
//! with `mkdir` (which fails rather than reuse what exists). When another user took that
//! name first, binder uses (or makes) `binder-ledger.<uid>.<16 random hex digits>`: a
//! name nobody can guess in advance. A directory counts only when it is a real directory
//! (never followed through a link), owned by its user and writable by nobody else;
//! whatever else carries the prefix is skipped.
//!
//! Reading another user's directory is bounded: at most [`MAX_DIRS_PER_USER`]
//! directories per owner, [`MAX_DIR_ENTRIES`] names per directory, [`MAX_CLAIM_BYTES`]
//! per file, and [`SCAN_BUDGET`] of time for the whole scan; a claim file is read only
//! when its name names a live process, so dead or junk names cost a `/proc` lookup each
//! and nothing more. Files are opened relative to the directory descriptor, never through
//! a link, never blocking (a FIFO cannot hang a reader), and believed only as far as
//! [`super::verify`] confirms.

use std::collections::{BTreeMap, HashSet};
use std::ffi::CStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags, FileType, FlockOperation, Mode, OFlags};

use super::verify::{self, claim_name};
use super::{Claim, JobPlan, LedgerError, RawJobPlan, Reserved, Scan, GRACE_SECS};
use crate::identity::job::JobId;
use crate::procfs::Procs;

/// The prefix of every user's ledger directory.
pub const PREFIX: &str = "binder-ledger.";
/// The largest claim file read (binder writes a few hundred bytes; every other PU of a
/// 16,384-PU node is 48 KB; more is junk).
pub const MAX_CLAIM_BYTES: u64 = 128 << 10;
/// The largest plan file read (a plan of 65,536 ranks fits).
pub const MAX_PLAN_BYTES: u64 = 16 << 20;
/// The most names read from one user directory.
pub const MAX_DIR_ENTRIES: usize = 65_536;
/// The most names read from the ledger root.
pub const MAX_ROOT_ENTRIES: usize = 1 << 20;
/// The most directories of one owner read.
pub const MAX_DIRS_PER_USER: usize = 4;
/// The time one scan of the other users' directories may take.
pub const SCAN_BUDGET: Duration = Duration::from_millis(500);
/// How long a launch waits for its own user's lock by default (`BINDER_LEDGER_WAIT`).
pub const DEFAULT_WAIT_SECS: u64 = 30;
/// Above this many claim names in one directory, `/proc` is listed once instead of read
/// per name.
const LIST_PIDS_ABOVE: usize = 64;
/// The most of this user's dead files one launch removes.
pub const MAX_REMOVALS: usize = 64;

/// This node's ledger as one user sees it: the root, and that user's own directory.
#[derive(Debug, Clone)]
pub struct Ledger {
    root: PathBuf,
    own: PathBuf,
    uid: u32,
    wait: Duration,
    require: bool,
}

/// The user's lock, held; dropping it (or exec: the descriptor is close-on-exec)
/// releases it.
#[derive(Debug)]
pub struct Guard {
    _fd: OwnedFd,
}

/// One of this user's claims, known from its name alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnClaim {
    /// File name.
    pub name: String,
    /// Its task's PID.
    pub pid: u32,
    /// Its task's start time.
    pub start: u64,
    /// Its local rank.
    pub rank: usize,
    /// Its job, as a file-name part.
    pub job: String,
}

/// What this user's directory holds, by name.
#[derive(Debug, Clone, Default)]
pub struct Own {
    /// Claims whose task is alive.
    pub live: Vec<OwnClaim>,
    /// Claims whose task has ended (each launch removes up to [`MAX_REMOVALS`] of their
    /// files; they stay listed here for the launch that found them).
    pub dead: Vec<OwnClaim>,
    /// Job plan files (their job file-name parts).
    pub plans: Vec<String>,
}

impl Own {
    /// Whether rank `rank` of job `part` has started (alive or not).
    pub fn started(&self, part: &str, rank: usize) -> bool {
        self.live
            .iter()
            .chain(&self.dead)
            .any(|c| c.job == part && c.rank == rank)
    }

    /// Whether a task of job `part` is alive.
    pub fn alive(&self, part: &str) -> bool {
        self.live.iter().any(|c| c.job == part)
    }
}

/// Whether `BINDER_LEDGER` turns the ledger off.
fn off(value: &str) -> bool {
    ["off", "0", "no", "false"].contains(&value.trim())
}

impl Ledger {
    /// The ledger this process uses, or why there is none (off, or the root cannot be
    /// trusted). An error that starts with `BINDER_LEDGER=` means it was turned off.
    pub fn open(env: &dyn Fn(&str) -> Option<String>) -> Result<Ledger, String> {
        let mode = env("BINDER_LEDGER");
        if mode.as_deref().is_some_and(off) {
            return Err("BINDER_LEDGER=off".into());
        }
        let require = mode.as_deref().is_some_and(|v| v.trim() == "require");
        let root = env("BINDER_LEDGER_DIR")
            .filter(|d| !d.is_empty())
            .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from);
        let wait = env("BINDER_LEDGER_WAIT")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_WAIT_SECS)
            .min(3600);
        let uid = rustix::process::geteuid().as_raw();
        let own = own_dir(&root, uid)?;
        Ok(Ledger {
            root,
            own,
            uid,
            wait: Duration::from_secs(wait),
            require,
        })
    }

    /// This user's own directory.
    pub fn dir(&self) -> &Path {
        &self.own
    }

    /// The ledger root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This process's effective uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Whether `BINDER_LEDGER=require` asks to refuse rather than run uncoordinated.
    pub fn required(&self) -> bool {
        self.require
    }

    /// Takes this user's lock (its own 0600 file: no other user can open it, so none can
    /// hold it), waiting at most `BINDER_LEDGER_WAIT` seconds for the user's own launches.
    pub fn lock(&self) -> Result<Guard, LedgerError> {
        let path = self.own.join(".lock");
        let busy = || LedgerError::Busy {
            lock: path.display().to_string(),
            secs: self.wait.as_secs(),
        };
        let fd = rfs::openat(
            rfs::CWD,
            &path,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|_| busy())?;
        let st = rfs::fstat(&fd).map_err(|_| busy())?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_uid != self.uid {
            return Err(busy());
        }
        let deadline = Instant::now() + self.wait;
        let mut pause = Duration::from_micros(50);
        loop {
            if rfs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
                return Ok(Guard { _fd: fd });
            }
            if Instant::now() >= deadline {
                return Err(busy());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    /// This user's directory by name; with `procs`, claims are sorted into live and dead.
    pub fn list_own(&self, procs: &dyn Procs) -> Own {
        let mut own = Own::default();
        let Ok(fd) = open_dir(rfs::CWD, &self.own) else {
            return own;
        };
        for_names(Some(fd), MAX_DIR_ENTRIES, |name, _| {
            if let Some(part) = name.strip_prefix("job.") {
                own.plans.push(part.to_owned());
            } else if let Some((pid, start, rank)) = claim_name(name) {
                let claim = OwnClaim {
                    name: name.to_owned(),
                    pid,
                    start,
                    rank,
                    job: name.splitn(5, '.').nth(4).unwrap_or_default().to_owned(),
                };
                if verify::alive(procs, pid, start) {
                    own.live.push(claim);
                } else {
                    own.dead.push(claim);
                }
            }
            true
        });
        own
    }

    /// Removes this user's dead claims (with their markers) and plans that no live task
    /// uses and that are past their grace period: at most [`MAX_REMOVALS`] files, so a
    /// launch after a burst of short jobs does bounded work.
    pub fn tidy(&self, own: &mut Own, now: u64, hz: u64) {
        let Ok(dir) = open_dir(rfs::CWD, &self.own) else {
            return;
        };
        // The dead stay listed: whether a rank of a job already ran is still asked.
        let mut budget = MAX_REMOVALS;
        for claim in own.dead.iter().take(budget) {
            let _ = rfs::unlinkat(&dir, claim.name.as_str(), AtFlags::empty());
            let _ = rfs::unlinkat(
                &dir,
                marker(claim.pid, claim.start).as_str(),
                AtFlags::empty(),
            );
        }
        budget = budget.saturating_sub(own.dead.len());
        let plans = std::mem::take(&mut own.plans);
        for part in plans {
            let name = format!("job.{part}");
            let old = budget > 0
                && !own.alive(&part)
                && rfs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| age_ticks(st.st_mtime, now, hz) >= GRACE_SECS * hz);
            if old {
                budget -= 1;
                let _ = rfs::unlinkat(&dir, name.as_str(), AtFlags::empty());
            } else {
                own.plans.push(part);
            }
        }
    }

    /// This user's plan of job `job`, its views unparsed.
    pub fn read_plan(&self, job: &JobId) -> Option<RawJobPlan> {
        let text = read_file(
            &self.own,
            &format!("job.{}", job.file_part()),
            self.uid,
            MAX_PLAN_BYTES,
        )
        .ok()?;
        let plan: RawJobPlan = serde_json::from_str(&text).ok()?;
        (plan.format == super::FORMAT && plan.job == *job).then_some(plan)
    }

    /// Writes this user's plan of a job: a temporary file, then a rename, so the same
    /// user's readers see a whole plan or the previous one.
    pub fn write_plan(&self, plan: &JobPlan) -> Result<(), String> {
        let text = serde_json::to_string(plan).map_err(|e| e.to_string())?;
        let name = format!("job.{}", plan.job.file_part());
        let fail =
            |e: std::io::Error| format!("cannot write {}: {e}", self.own.join(&name).display());
        let dir = open_dir(rfs::CWD, &self.own).map_err(fail)?;
        let tmp = format!(".tmp.{}", std::process::id());
        let _ = rfs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        write_new(&dir, &tmp, text.as_bytes(), 0o600).map_err(fail)?;
        rfs::renameat(&dir, tmp.as_str(), &dir, name.as_str()).map_err(|e| fail(e.into()))
    }

    /// Writes this task's claim under its name (readable by all: other users' launches
    /// check against it); returns the name.
    pub fn write_claim(&self, claim: &Claim) -> Result<String, String> {
        let text = serde_json::to_string(claim).map_err(|e| e.to_string())?;
        let name = format!(
            "c.{}.{}.{}.{}",
            claim.pid,
            claim.start,
            claim.rank,
            claim.job.file_part()
        );
        let fail =
            |e: std::io::Error| format!("cannot write {}: {e}", self.own.join(&name).display());
        let dir = open_dir(rfs::CWD, &self.own).map_err(fail)?;
        match write_new(&dir, &name, text.as_bytes(), 0o644) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // This very process claimed before (a nested binder, or an earlier round).
                let _ = rfs::unlinkat(&dir, name.as_str(), AtFlags::empty());
                write_new(&dir, &name, text.as_bytes(), 0o644).map_err(fail)?;
            }
            other => other.map_err(fail)?,
        }
        Ok(name)
    }

    /// Marks this task's claim confirmed: it read the others after writing it.
    pub fn confirm(&self, pid: u32, start: u64) {
        if let Ok(dir) = open_dir(rfs::CWD, &self.own) {
            let _ = write_new(&dir, &marker(pid, start), b"", 0o644);
        }
    }

    /// Takes a claim back (the task moves, or hands over).
    pub fn withdraw(&self, name: &str, pid: u32, start: u64) {
        if let Ok(dir) = open_dir(rfs::CWD, &self.own) {
            let _ = rfs::unlinkat(&dir, name, AtFlags::empty());
            let _ = rfs::unlinkat(&dir, marker(pid, start).as_str(), AtFlags::empty());
        }
    }

    /// This user's live claims of jobs other than `except` (a file-name part), and the
    /// units of this user's starting jobs' unstarted ranks, into `scan`.
    pub fn scan_own(
        &self,
        own: &Own,
        except: Option<&str>,
        procs: &dyn Procs,
        now: u64,
        hz: u64,
        scan: &mut Scan,
    ) {
        for c in &own.dead {
            scan.ignore(&c.name, Some(self.uid), format!("pid {} is gone", c.pid));
        }
        for c in own.live.iter().filter(|c| Some(c.job.as_str()) != except) {
            let read = || read_file(&self.own, &c.name, self.uid, MAX_CLAIM_BYTES);
            // This user's launches take turns, so their claims are final.
            match verify::verify_claim(self.uid, (c.pid, c.start), read, true, procs) {
                Ok(h) => scan.holders.push(h),
                Err(why) => scan.ignore(&c.name, Some(self.uid), why),
            }
        }
        let Ok(dir) = open_dir(rfs::CWD, &self.own) else {
            return;
        };
        // A job whose tasks have all ended keeps nothing, however young its plan.
        let starting = own
            .plans
            .iter()
            .filter(|p| Some(p.as_str()) != except && own.alive(p));
        for part in starting {
            let name = format!("job.{part}");
            let young = rfs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| age_ticks(st.st_mtime, now, hz) < GRACE_SECS * hz);
            if !young {
                continue;
            }
            let Some(plan) = read_file(&self.own, &name, self.uid, MAX_PLAN_BYTES)
                .ok()
                .and_then(|t| serde_json::from_str::<JobPlan>(&t).ok())
            else {
                continue;
            };
            let mut reserved = Reserved {
                job: plan.job.clone(),
                pack: plan.pack,
                cpus: Vec::new(),
                gpus: Vec::new(),
            };
            for (rank, view) in plan.tasks.iter().enumerate() {
                if own.started(part, rank) {
                    continue;
                }
                if view.is_bound() && view.apply {
                    reserved.cpus.extend(view.cpus.iter().copied());
                }
                reserved
                    .gpus
                    .extend(view.gpus.iter().map(|g| g.busid.clone()));
            }
            reserved.cpus.sort_unstable();
            reserved.cpus.dedup();
            if !reserved.cpus.is_empty() || !reserved.gpus.is_empty() {
                scan.reserved.push(reserved);
            }
        }
    }

    /// Every other directory's live claims (other users', and any second directory of
    /// this user's), verified, into `scan`; bounded as the module text says.
    pub fn scan_others(&self, procs: &dyn Procs, scan: &mut Scan) {
        let deadline = Instant::now() + SCAN_BUDGET;
        let Ok(root) = open_dir(rfs::CWD, &self.root) else {
            return;
        };
        let own_name = self
            .own
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let mut names = Vec::new();
        let mut seen = 0usize;
        let complete = for_names(root.try_clone().ok(), MAX_ROOT_ENTRIES, |name, kind| {
            if name.starts_with(PREFIX)
                && name != own_name
                && matches!(kind, FileType::Directory | FileType::Unknown)
            {
                names.push(name.to_owned());
            }
            seen += 1;
            seen % 1024 != 0 || Instant::now() < deadline
        });
        if !complete {
            scan.incomplete = Some(format!("{} holds too many names", self.root.display()));
        }
        // Canonical names first, then the rest in name order: a flood of names cannot
        // push a real directory out of its owner's quota of `MAX_DIRS_PER_USER`.
        names.sort_by_key(|n| (n[PREFIX.len()..].contains('.'), n.clone()));
        let mut per_owner: BTreeMap<u32, usize> = BTreeMap::new();
        let mut live = None;
        for name in names {
            if Instant::now() >= deadline {
                scan.incomplete = Some(format!(
                    "reading {} took longer than {} ms",
                    self.root.display(),
                    SCAN_BUDGET.as_millis()
                ));
                return;
            }
            // One `statat` says whose it is; only a user's first few are opened.
            let Ok(st) = rfs::statat(&root, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) else {
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
            let Ok(dir) = open_dir(&root, Path::new(&name)) else {
                continue;
            };
            let same = rfs::fstat(&dir).is_ok_and(|now| {
                now.st_uid == owner && now.st_ino == st.st_ino && now.st_mode & 0o022 == 0
            });
            if !same {
                continue;
            }
            scan_dir(dir, &name, owner, procs, deadline, &mut live, scan);
        }
    }
}

/// One other directory's claims: names first (markers, claims of live processes), then
/// the files of those alone.
fn scan_dir(
    dir: OwnedFd,
    dir_name: &str,
    owner: u32,
    procs: &dyn Procs,
    deadline: Instant,
    live: &mut Option<Option<HashSet<u32>>>,
    scan: &mut Scan,
) {
    let mut claims = Vec::new();
    let mut markers = HashSet::new();
    let reader = dir.try_clone().ok();
    let mut seen = 0usize;
    let complete = for_names(reader, MAX_DIR_ENTRIES, |name, _| {
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
        seen % 1024 != 0 || Instant::now() < deadline
    });
    if !complete {
        scan.ignore(
            dir_name,
            Some(owner),
            format!("more than {MAX_DIR_ENTRIES} names, or too slow to read: the rest is skipped"),
        );
    }
    // Many names: one read of /proc's directory rules out the dead PIDs at once.
    if claims.len() > LIST_PIDS_ABOVE {
        let pids = live.get_or_insert_with(|| procs.pids());
        if let Some(pids) = pids {
            claims.retain(|(_, pid, _)| pids.contains(pid));
        }
    }
    for (name, pid, start) in claims {
        if Instant::now() >= deadline {
            scan.incomplete = Some("reading the other users' claims took too long".into());
            return;
        }
        let read = || read_at(&dir, &name, owner, MAX_CLAIM_BYTES);
        let confirmed = markers.contains(&(pid, start));
        match verify::verify_claim(owner, (pid, start), read, confirmed, procs) {
            Ok(h) => scan.holders.push(h),
            Err(why) => scan.ignore(&format!("{dir_name}/{name}"), Some(owner), why),
        }
    }
}

/// The name of a claim's confirmation marker.
fn marker(pid: u32, start: u64) -> String {
    format!("ok.{pid}.{start}")
}

/// Clock ticks since a file's modification time (`mtime`, seconds since the epoch),
/// against `now` ticks since boot: both converted to seconds of wall time ago.
fn age_ticks(mtime: i64, _now: u64, hz: u64) -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mtime = u64::try_from(mtime).unwrap_or(0);
    wall.saturating_sub(mtime) * hz
}

/// Opens a directory relative to `at`, never through a link, close-on-exec.
fn open_dir<Fd: AsFd>(at: Fd, path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rfs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Calls `each(name, type)` for every entry of a directory, at most `max`, while it
/// answers true; returns whether the whole directory was read.
fn for_names(
    fd: Option<OwnedFd>,
    max: usize,
    mut each: impl FnMut(&str, FileType) -> bool,
) -> bool {
    let Some(fd) = fd else {
        return false;
    };
    let Ok(dir) = rfs::Dir::new(fd) else {
        return false;
    };
    for (n, entry) in dir.enumerate() {
        if n >= max {
            return false;
        }
        let Ok(entry) = entry else {
            return false;
        };
        let name: &CStr = entry.file_name();
        let Ok(name) = name.to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        if !each(name, entry.file_type()) {
            return false;
        }
    }
    true
}

/// A file of `dir` owned by `owner`, at most `max` bytes (see [`read_at`]).
fn read_file(dir: &Path, name: &str, owner: u32, max: u64) -> Result<String, String> {
    let dir = open_dir(rfs::CWD, dir).map_err(|e| e.to_string())?;
    read_at(&dir, name, owner, max)
}

/// A regular file of the directory `dir`, owned by `owner` and writable by nobody else,
/// at most `max` bytes: opened without following a link and without blocking (a FIFO
/// does not hang), size checked before reading.
pub fn read_at(dir: &OwnedFd, name: &str, owner: u32, max: u64) -> Result<String, String> {
    let fd = rfs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open: {e}"))?;
    let st = rfs::fstat(&fd).map_err(|e| format!("cannot stat: {e}"))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err("not a regular file".into());
    }
    if st.st_uid != owner {
        return Err(format!(
            "owned by uid {}, not by its directory's owner",
            st.st_uid
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err("writable by others than its owner".into());
    }
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    if size > max {
        return Err(format!("larger than {max} bytes"));
    }
    let mut text = String::with_capacity(size as usize + 1);
    std::fs::File::from(fd)
        .take(max)
        .read_to_string(&mut text)
        .map_err(|e| format!("unreadable: {e}"))?;
    Ok(text)
}

/// Creates `name` in `dir` (never over an existing file or link), writes `bytes` and
/// sets `mode` (whatever the umask).
fn write_new(dir: &OwnedFd, name: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let fd = rfs::openat(
        dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    rfs::fchmod(&fd, Mode::from_raw_mode(mode))?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)
}

/// This user's directory in `root`, made when missing (see the module text).
fn own_dir(root: &Path, uid: u32) -> Result<PathBuf, String> {
    let shown = root.display();
    // A root named by BINDER_LEDGER_DIR that does not exist yet is this user's to make
    // (other users' launches will not trust it: it is not root's).
    if rfs::statat(rfs::CWD, root, AtFlags::SYMLINK_NOFOLLOW).is_err() {
        let _ = rfs::mkdirat(rfs::CWD, root, Mode::from_raw_mode(0o755));
    }
    let meta = rfs::statat(rfs::CWD, root, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| format!("{shown}: {e}"))?;
    if FileType::from_raw_mode(meta.st_mode) != FileType::Directory {
        return Err(format!("{shown} is not a directory"));
    }
    if meta.st_uid != 0 && meta.st_uid != uid {
        return Err(format!(
            "{shown} belongs to uid {}, neither root nor you, who could remove others' entries; point BINDER_LEDGER_DIR at /dev/shm or a directory root made",
            meta.st_uid
        ));
    }
    if meta.st_mode & 0o002 != 0 && meta.st_mode & 0o1000 == 0 {
        return Err(format!(
            "{shown} is writable by all but not sticky (mode {:o}), so anyone could remove entries; `chmod +t` it",
            meta.st_mode & 0o7777
        ));
    }
    let canonical = root.join(format!("{PREFIX}{uid}"));
    if usable(&canonical, uid) {
        return Ok(canonical);
    }
    if make(&canonical) && usable(&canonical, uid) {
        return Ok(canonical);
    }
    // Somebody else has the name: this user's other directories, else a new one.
    let fallback = format!("{PREFIX}{uid}.");
    let mut mine = Vec::new();
    if let Ok(fd) = open_dir(rfs::CWD, root) {
        for_names(Some(fd), MAX_ROOT_ENTRIES, |name, _| {
            if name.starts_with(&fallback) && mine.len() < 64 {
                mine.push(name.to_owned());
            }
            true
        });
    }
    mine.sort();
    if let Some(dir) = mine
        .into_iter()
        .map(|n| root.join(n))
        .find(|d| usable(d, uid))
    {
        return Ok(dir);
    }
    let mut random = [0u8; 8];
    rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty())
        .map_err(|e| format!("cannot draw a random directory name: {e}"))?;
    let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let dir = root.join(format!("{fallback}{suffix}"));
    if make(&dir) && usable(&dir, uid) {
        return Ok(dir);
    }
    Err(format!(
        "cannot make a ledger directory of your own in {shown}"
    ))
}

/// Makes a directory 0755 (whatever the umask: other users' launches must read it).
fn make(dir: &Path) -> bool {
    if rfs::mkdirat(rfs::CWD, dir, Mode::from_raw_mode(0o755)).is_err() {
        return false;
    }
    open_dir(rfs::CWD, dir).is_ok_and(|fd| rfs::fchmod(&fd, Mode::from_raw_mode(0o755)).is_ok())
}

/// Whether `dir` is a real directory of `uid`'s that nobody else can write in.
fn usable(dir: &Path, uid: u32) -> bool {
    rfs::statat(rfs::CWD, dir, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
        FileType::from_raw_mode(st.st_mode) == FileType::Directory
            && st.st_uid == uid
            && st.st_mode & 0o022 == 0
    })
}
