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
//! Other users' directories are read by [`super::others`], within hard caps; files
//! are read and written through `super::fsio`.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, FileType, FlockOperation, Mode, OFlags};

use super::fsio::{for_names, read_at, write_new, MAX_DIR_ENTRIES};
use super::verify::{self, claim_name};
use super::{Claim, JobPlan, LedgerError, RawJobPlan, Reserved, Scan, GRACE_SECS};
use crate::identity::job::JobId;
use crate::procfs::Procs;

/// The largest claim file read (binder writes a few hundred bytes; every other PU of a
/// 16,384-PU node is 48 KB; more is junk).
pub(crate) const MAX_CLAIM_BYTES: u64 = 128 << 10;
/// The largest plan file read (a plan of 65,536 ranks fits).
pub(crate) const MAX_PLAN_BYTES: u64 = 16 << 20;
/// How long a launch waits for its own user's lock by default (`BINDER_LEDGER_WAIT`).
pub(crate) const DEFAULT_WAIT_SECS: u64 = 30;
/// The file a launch that could not have its user's lock touches ([`Ledger::mark_fallback`]).
const FALLBACK: &str = "fallback";
/// The most of this user's dead files one launch removes.
pub(crate) const MAX_REMOVALS: usize = 64;

/// This node's ledger as one user sees it: the root, and that user's own directory.
#[derive(Debug, Clone)]
pub struct Ledger {
    root: PathBuf,
    own: PathBuf,
    /// The own directory, opened once: every file of it is reached relative to this.
    own_fd: Arc<OwnedFd>,
    uid: u32,
    wait: Duration,
    require: bool,
    /// Whether the kernel's view is taken on every scan, with no other user's entry in
    /// sight too (SEMANTICS §13.3; `BINDER_KERNEL_VIEW=in-sight` turns that off).
    look_always: bool,
    /// Whether `own` is a fallback directory ([`Ledger::in_fallback`]).
    fallback: bool,
    /// What this launch's last read of the root found (`super::root`):
    /// while the root's link count stays, no directory was made there since, and a task
    /// settling its claim reads the same directories again without listing the root.
    pub(super) read_at: Arc<std::sync::Mutex<Option<RootRead>>>,
    /// Whether this launch's next looks at the kernel are its own, not the user's
    /// shared view ([`Ledger::look_afresh`]).
    afresh: Arc<std::sync::atomic::AtomicBool>,
}

/// A read of the ledger root: its stamp before the listing (`None`: the root had just
/// changed, and the read is not reused), the other directories read, and why the read
/// was partial.
#[derive(Debug, Clone)]
pub(crate) struct RootRead {
    pub(crate) stamp: Option<Stamp>,
    pub(crate) dirs: Vec<String>,
    pub(crate) incomplete: Option<String>,
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
    /// Claims whose task has ended (each launch removes up to `MAX_REMOVALS` of their
    /// files; they stay listed here for the launch that found them).
    pub dead: Vec<OwnClaim>,
    /// Job plan files (their job file-name parts).
    pub plans: Vec<String>,
    /// Confirmation markers (`ok.<pid>.<start>` names).
    pub markers: Vec<String>,
    /// Claims of the job [`Ledger::list_own_but`] was asked to leave unread, whose
    /// tasks' liveness is not known yet ([`Own::resolve`] reads it): a task joining its
    /// job's young plan needs none of it, and reading it made the n-th task of a job read
    /// the n-1 processes before it, under the user's lock (256 tasks: 32,640 reads).
    pub unread: Vec<OwnClaim>,
    /// Temporary files of this user's launches (`.tmp.PID`, and `NAME.PID` for each name
    /// of `own_dir::REPLACED`) other than this process's: one is written and renamed
    /// under the user's lock, so a launch that finds another's was killed between the
    /// two ([`Ledger::tidy`]).
    pub temps: Vec<String>,
}

impl Own {
    /// Whether rank `rank` of job `part` has started (alive or not).
    pub fn started(&self, part: &str, rank: usize) -> bool {
        self.live
            .iter()
            .chain(&self.dead)
            .chain(&self.unread)
            .any(|c| c.job == part && c.rank == rank)
    }

    /// Reads the liveness of the claims left unread, into `live` and `dead`.
    pub fn resolve(&mut self, procs: &dyn Procs) {
        for claim in std::mem::take(&mut self.unread) {
            if verify::alive(procs, claim.pid, claim.start) {
                self.live.push(claim);
            } else {
                self.dead.push(claim);
            }
        }
    }

    /// Whether a task of job `part` is alive.
    pub fn alive(&self, part: &str) -> bool {
        self.live.iter().any(|c| c.job == part)
    }
}

/// Whether `BINDER_LEDGER=require` asks to refuse a launch the ledger cannot coordinate,
/// rather than run it bound but uncoordinated (SEMANTICS §13.1 item 3).
pub fn required(env: &dyn Fn(&str) -> Option<String>) -> bool {
    crate::settings::ledger_mode(env) == Ok(crate::settings::LedgerMode::Require)
}

/// Whether the kernel's view reaches beyond the users in sight (SEMANTICS §13.3): every
/// user's bound tasks on every launch, and this user's own of other jobs where the
/// ledger cannot be used. `BINDER_KERNEL_VIEW=in-sight` keeps it to other users with an
/// entry in the ledger root, for runs whose result must not depend on other jobs on the
/// machine (binder's own test suite).
pub(crate) fn looks_beyond_sight(env: &dyn Fn(&str) -> Option<String>) -> bool {
    crate::settings::kernel_view_in_sight(env) != Ok(true)
}

/// Whether the user turned the ledger off (`BINDER_LEDGER=off` or another off word).
pub(crate) fn turned_off(env: &dyn Fn(&str) -> Option<String>) -> bool {
    crate::settings::ledger_mode(env) == Ok(crate::settings::LedgerMode::Off)
}

impl Ledger {
    /// The ledger this process uses, or why there is none (off, or the root cannot be
    /// trusted). An error that starts with `BINDER_LEDGER=` means it was turned off.
    pub fn open(env: &dyn Fn(&str) -> Option<String>) -> Result<Ledger, String> {
        Ledger::open_with(env, super::keyring::key)
    }

    /// [`Ledger::open`], with the user keyring's key read by `keyring` (a test's
    /// `|| None` reaches the bounded search a keyring that cannot be used leaves).
    pub(super) fn open_with(
        env: &dyn Fn(&str) -> Option<String>,
        keyring: fn() -> Option<String>,
    ) -> Result<Ledger, String> {
        if turned_off(env) {
            return Err("BINDER_LEDGER=off".into());
        }
        let require = required(env);
        let root = env("BINDER_LEDGER_DIR")
            .filter(|d| !d.is_empty())
            .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from);
        // A relative root would be a different directory for every task's working
        // directory (and made there): one job's tasks could not see each other.
        if root.is_relative() {
            return Err(format!(
                "BINDER_LEDGER_DIR={} is a relative path; give an absolute one (every task of every job must name the same directory)",
                crate::text::printable(&root.display().to_string(), 120)
            ));
        }
        let wait = crate::settings::ledger_wait(env)
            .ok()
            .flatten()
            .unwrap_or(DEFAULT_WAIT_SECS);
        let look_always = looks_beyond_sight(env);
        let uid = rustix::process::geteuid().as_raw();
        let home = env("HOME").filter(|h| h.starts_with('/'));
        let (own, own_fd, fallback) =
            super::own_dir::own_dir(&root, uid, home.as_deref(), keyring)?;
        Ok(Ledger {
            root,
            own,
            own_fd: Arc::new(own_fd),
            fallback,
            read_at: Arc::default(),
            afresh: Arc::default(),
            uid,
            wait: Duration::from_secs(wait),
            require,
            look_always,
        })
    }

    /// Whether this user's directory is a fallback one (the canonical name was taken and
    /// no secret name could be kept): another launch of this user may have made another
    /// one, so its own bound tasks are taken from the kernel's view too (SEMANTICS §13.3).
    pub fn in_fallback(&self) -> bool {
        self.fallback
    }

    /// This user's own directory.
    pub fn dir(&self) -> &Path {
        &self.own
    }

    /// The ledger root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes this launch's next looks at the kernel fresh ones, not the view the user's
    /// launches share for 250 ms (SEMANTICS §13.4: a refusal is decided on a fresh look,
    /// so a binding that has ended since the shared look refuses nobody). The fresh view
    /// is shared in turn.
    pub fn look_afresh(&self) {
        self.afresh
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`Ledger::look_afresh`] was asked.
    pub(crate) fn afresh(&self) -> bool {
        self.afresh.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the kernel's view is taken with no other user's entry in sight too.
    pub(crate) fn looks_always(&self) -> bool {
        self.look_always
    }

    /// The own directory, open: what this user alone may write in.
    pub(crate) fn own_fd(&self) -> &OwnedFd {
        &self.own_fd
    }

    /// This process's effective uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// Whether `BINDER_LEDGER=require` asks to refuse rather than run uncoordinated.
    pub fn required(&self) -> bool {
        self.require
    }

    /// Says, in the user's own directory, that a launch of this user runs without the
    /// ledger from now (its lock could not be had: a launch holding it is stopped, or
    /// took too long): `fallback`, whose time a launch that held the lock meanwhile
    /// compares with its own start (`Ledger::fell_back_since`).
    pub fn mark_fallback(&self) {
        // Opening with O_TRUNC sets its time, whether or not it existed: that is the mark
        // (the descriptor is closed at once).
        let _ = rfs::openat(
            &*self.own_fd,
            FALLBACK,
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        );
    }

    /// Whether a launch of this user marked a fallback ([`Ledger::mark_fallback`]) in
    /// the last `ago`: one `statat`.
    pub(crate) fn fell_back_since(&self, ago: Duration) -> bool {
        let Ok(st) = rfs::statat(&*self.own_fd, FALLBACK, AtFlags::SYMLINK_NOFOLLOW) else {
            return false;
        };
        let Ok(now) = SystemTime::now().duration_since(UNIX_EPOCH) else {
            return true;
        };
        let marked = Duration::new(
            u64::try_from(st.st_mtime).unwrap_or(0),
            u32::try_from(st.st_mtime_nsec).unwrap_or(0),
        );
        // (A clock that went back makes the mark look new: looked at, which is safe.)
        now.saturating_sub(marked) <= ago
    }

    /// Takes this user's lock (its own 0600 file: no other user can open it, so none can
    /// hold it), waiting at most `BINDER_LEDGER_WAIT` seconds for the user's own launches.
    pub fn lock(&self) -> Result<Guard, LedgerError> {
        let path = self.own.join(".lock");
        let shown = || path.display().to_string();
        let busy = || LedgerError::Busy {
            lock: shown(),
            secs: self.wait.as_secs(),
        };
        let fd = rfs::openat(
            &*self.own_fd,
            ".lock",
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| LedgerError::NoLock {
            lock: shown(),
            why: e.to_string(),
        })?;
        let st = rfs::fstat(&fd).map_err(|_| busy())?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile || st.st_uid != self.uid {
            return Err(LedgerError::NoLock {
                lock: shown(),
                why: "not a regular file of yours".into(),
            });
        }
        let start = Instant::now();
        let deadline = start + self.wait;
        let mut pause = Duration::from_micros(50);
        let mut looked = start;
        loop {
            if rfs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
                return Ok(Guard { _fd: fd });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(busy());
            }
            // A launch of this user's that holds the lock and is stopped will not let
            // go: said at once rather than after the whole wait.
            if now.duration_since(looked) >= Duration::from_millis(20) {
                looked = now;
                if let Some(pid) = stopped_holder(&st) {
                    return Err(LedgerError::Stopped { lock: shown(), pid });
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    /// This user's directory by name; with `procs`, claims are sorted into live and dead.
    pub fn list_own(&self, procs: &dyn Procs) -> Own {
        self.list_own_but(procs, None)
    }

    /// [`Ledger::list_own`], but the claims of job `unread` (a file-name part) are listed
    /// in [`Own::unread`] without reading whether their tasks live.
    pub fn list_own_but(&self, procs: &dyn Procs, unread: Option<&str>) -> Own {
        let mut own = Own::default();
        // A descriptor of its own to list from (`Dir::read_from` asks the flags first).
        let Ok(mut listing) = rfs::openat(
            &*self.own_fd,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(drop)
        .and_then(|fd| rfs::Dir::new(fd).map_err(drop)) else {
            return own;
        };
        let me = std::process::id().to_string();
        for_names(&mut listing, MAX_DIR_ENTRIES, |name, _| {
            if std::iter::once(".tmp")
                .chain(super::own_dir::REPLACED)
                .find_map(|p| name.strip_prefix(p)?.strip_prefix('.'))
                .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()) && pid != me)
            {
                own.temps.push(name.to_owned());
            } else if let Some(part) = name.strip_prefix("job.") {
                own.plans.push(part.to_owned());
            } else if name.starts_with("ok.") {
                own.markers.push(name.to_owned());
            } else if let Some((pid, start, rank)) = claim_name(name) {
                let claim = OwnClaim {
                    name: name.to_owned(),
                    pid,
                    start,
                    rank,
                    job: name.splitn(5, '.').nth(4).unwrap_or_default().to_owned(),
                };
                if unread == Some(claim.job.as_str()) {
                    own.unread.push(claim);
                } else if verify::alive(procs, pid, start) {
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
    /// uses and that are past their grace period: at most `MAX_REMOVALS` files, so a
    /// launch after a burst of short jobs does bounded work.
    pub fn tidy(&self, own: &mut Own) {
        let dir = &*self.own_fd;
        // The dead stay listed: whether a rank of a job already ran is still asked.
        let mut budget = MAX_REMOVALS;
        for claim in own.dead.iter().take(budget) {
            let _ = rfs::unlinkat(dir, claim.name.as_str(), AtFlags::empty());
            let marker = marker(claim.pid, claim.start);
            if own.markers.contains(&marker) {
                let _ = rfs::unlinkat(dir, marker.as_str(), AtFlags::empty());
            }
        }
        budget = budget.saturating_sub(own.dead.len());
        // Temporary files of killed launches (written and renamed under this lock, so
        // another's is one that never reached its rename).
        for name in std::mem::take(&mut own.temps) {
            if budget == 0 {
                break;
            }
            budget -= 1;
            let _ = rfs::unlinkat(dir, name.as_str(), AtFlags::empty());
        }
        // A plan is read only by its job's later ranks; when none of its tasks lives (a
        // launch writes its plan and its claim under this user's lock, so a plan without
        // a live claim is one whose tasks all ended), a late rank plans again.
        // A launcher's job is kept while its plan is young even when no task of it lives:
        // its plan records the shape the job's first ranks ran, which an MPMD context
        // that starts after they ended must still be refused against (SEMANTICS §4.2).
        // A job whose claims were left unread (`list_own_but`) is the launching task's
        // own, joining its young plan: never removed here.
        let plans = std::mem::take(&mut own.plans);
        for part in plans {
            let unread = own.unread.iter().any(|c| c.job == part);
            if budget > 0 && !unread && !own.alive(&part) && !self.young_launcher_plan(&part) {
                budget -= 1;
                let _ = rfs::unlinkat(dir, format!("job.{part}").as_str(), AtFlags::empty());
            } else {
                own.plans.push(part);
            }
        }
    }

    /// Whether `job.<part>` is a launcher's job (named by its launcher, not by binder from a
    /// process) whose plan was written less than `GRACE_SECS` ago.
    fn young_launcher_plan(&self, part: &str) -> bool {
        if !crate::identity::job::named_by_launcher(part) {
            return false;
        }
        let Ok(st) = rfs::statat(
            &*self.own_fd,
            format!("job.{part}").as_str(),
            AtFlags::SYMLINK_NOFOLLOW,
        ) else {
            return false;
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let made = u64::try_from(st.st_mtime).unwrap_or(0);
        now.saturating_sub(made) < GRACE_SECS
    }

    /// This user's plan of job `job`, its views unparsed.
    pub fn read_plan(&self, job: &JobId) -> Option<RawJobPlan> {
        let name = format!("job.{}", job.file_part());
        let text = read_at(&*self.own_fd, &name, self.uid, MAX_PLAN_BYTES).ok()?;
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
        let dir = &*self.own_fd;
        let tmp = format!(".tmp.{}", std::process::id());
        let _ = rfs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
        write_new(dir, &tmp, text.as_bytes(), 0o600).map_err(fail)?;
        rfs::renameat(dir, tmp.as_str(), dir, name.as_str()).map_err(|e| fail(e.into()))
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
        let dir = &*self.own_fd;
        match write_new(dir, &name, text.as_bytes(), 0o644) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // This very process claimed before (a nested binder, or an earlier round).
                let _ = rfs::unlinkat(dir, name.as_str(), AtFlags::empty());
                write_new(dir, &name, text.as_bytes(), 0o644).map_err(fail)?;
            }
            other => other.map_err(fail)?,
        }
        Ok(name)
    }

    /// Marks this task's claim confirmed: it read the others after writing it.
    pub fn confirm(&self, pid: u32, start: u64) {
        let _ = write_new(&*self.own_fd, &marker(pid, start), b"", 0o644);
    }

    /// Takes a claim back (the task moves, or hands over).
    pub fn withdraw(&self, name: &str, pid: u32, start: u64) {
        let dir = &*self.own_fd;
        let _ = rfs::unlinkat(dir, name, AtFlags::empty());
        let _ = rfs::unlinkat(dir, marker(pid, start).as_str(), AtFlags::empty());
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
            let read = || read_at(&*self.own_fd, &c.name, self.uid, MAX_CLAIM_BYTES);
            // This user's launches take turns, so their claims are final.
            match verify::verify_claim(self.uid, (c.pid, c.start), read, true, procs) {
                Ok(h) => scan.holders.push(h),
                Err(why) => scan.ignore(&c.name, Some(self.uid), why),
            }
        }
        // A job whose tasks have all ended keeps nothing, however young its plan.
        let starting = own
            .plans
            .iter()
            .filter(|p| Some(p.as_str()) != except && own.alive(p));
        for part in starting {
            let name = format!("job.{part}");
            let Some(plan) = read_at(&*self.own_fd, &name, self.uid, MAX_PLAN_BYTES)
                .ok()
                .and_then(|t| serde_json::from_str::<JobPlan>(&t).ok())
                .filter(|p| now.saturating_sub(p.made) < GRACE_SECS * hz)
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
}

/// The PID holding the `flock` on the file `st` describes, when that process is stopped
/// (state `T` or `t` in `/proc/PID/stat`), from `/proc/locks` (`N: FLOCK ADVISORY WRITE
/// PID MAJ:MIN:INODE 0 EOF`).
fn stopped_holder(st: &rfs::Stat) -> Option<u32> {
    let locks = crate::procfs::read_small("/proc/locks", 1 << 20).ok()?;
    let id = format!(
        "{:02x}:{:02x}:{}",
        rfs::major(st.st_dev),
        rfs::minor(st.st_dev),
        st.st_ino
    );
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Waiters' lines carry a `->` field first; the holder's does not.
        if f.len() < 6 || f[1] != "FLOCK" || f[5] != id {
            return None;
        }
        let pid: u32 = f[4].parse().ok()?;
        let state = crate::procfs::Real.stat(pid)?.state;
        matches!(state, 'T' | 't').then_some(pid)
    })
}

/// The name of a claim's confirmation marker.
fn marker(pid: u32, start: u64) -> String {
    format!("ok.{pid}.{start}")
}

/// What says whether the ledger root changed since a read of it (SEMANTICS §13.4): its
/// link count and its ctime. Any name made or removed there sets the ctime to the
/// clock's time, and no user can set a ctime back: another user's `mkdir` then `rmdir`
/// restores the link count, never the ctime, so a cached read keyed by both never hides
/// a directory made since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) links: u64,
    pub(crate) ctime: (i64, i64),
}

/// How long before a stamp is taken the root must have last changed for a read under
/// it to be reused: the kernel sets a ctime from a coarse clock (a tick of 1 to 10 ms),
/// so a change in the tick the stamp was taken in could leave the ctime as it was.
const SETTLED: Duration = Duration::from_millis(30);

impl Stamp {
    /// The stamp of the root whose status is `st`, if a read under it may be reused:
    /// its last change is older than [`SETTLED`] by this machine's clock.
    /// (`st_nlink` is a u64 on x86_64 and a u32 on aarch64.)
    pub(crate) fn of(st: &rustix::fs::Stat) -> Option<Stamp> {
        #[allow(clippy::unnecessary_cast)]
        let stamp = Stamp {
            links: st.st_nlink as u64,
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
        let changed = Duration::new(
            u64::try_from(stamp.ctime.0).ok()?,
            u32::try_from(stamp.ctime.1).ok()?,
        );
        (now.checked_sub(changed)? >= SETTLED).then_some(stamp)
    }
}
