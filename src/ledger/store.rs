//! Where the ledger lives and how it is read and written.
//!
//! `$BINDER_LEDGER_DIR`, else `/dev/shm/binder-ledger` (tmpfs: gone at reboot, like the
//! processes it describes; every user's tasks can reach it). binder creates it mode 1777
//! (sticky, like /tmp) when it is missing. It is used only when it is a real directory
//! (not a link), sticky, and owned by root or by this user: a directory another user owns
//! could have its entries removed by that user, so binder will not rely on it. Sites
//! create it at boot owned by root (`d /dev/shm/binder-ledger 1777 root root -` in
//! tmpfiles.d). `BINDER_LEDGER=off` turns the ledger off.
//!
//! Writers hold an exclusive `flock` on `.lock` in that directory (a lock works on a
//! read-only descriptor, so the file can stay mode 0444 and nobody can truncate it); a
//! file is written to a temporary name and renamed, so a reader sees a whole file or the
//! previous one. Readers open nothing through a link, read regular files of at most
//! [`MAX_FILE_BYTES`], at most [`MAX_FILES`] of them, and trust none of it until
//! [`super::verify`].

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Entry, LedgerError, Member, Raw, RawEntry};
use crate::identity::job::JobId;

/// The largest job file read (a plan of 65,536 ranks fits).
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The most job files read; more are ignored (and listed by `binder node`).
pub const MAX_FILES: usize = 4096;
/// How long a launch waits for the lock by default (`BINDER_LEDGER_WAIT` seconds).
pub const DEFAULT_WAIT_SECS: u64 = 30;

/// The ledger directory of this node.
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
    uid: u32,
    wait: Duration,
}

/// The held lock; dropping it (or exec, which closes the descriptor) releases it.
#[derive(Debug)]
pub struct Guard {
    _file: fs::File,
}

impl Ledger {
    /// The ledger this process uses, or why there is none (off, or not trustworthy).
    pub fn open(env: &dyn Fn(&str) -> Option<String>) -> Result<Ledger, String> {
        if env("BINDER_LEDGER").is_some_and(|v| ["off", "0", "no", "false"].contains(&v.trim())) {
            return Err("BINDER_LEDGER=off".into());
        }
        let dir = env("BINDER_LEDGER_DIR")
            .filter(|d| !d.is_empty())
            .map_or_else(|| PathBuf::from("/dev/shm/binder-ledger"), PathBuf::from);
        let wait = env("BINDER_LEDGER_WAIT")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_WAIT_SECS)
            .min(3600);
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        // One `lstat` on every launch; the directory is made only when it is missing.
        let meta = fs::symlink_metadata(&dir).or_else(|_| {
            if fs::DirBuilder::new().mode(0o700).create(&dir).is_ok() {
                // Sticky and open to all, set after creation so the umask does not narrow it.
                let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777));
            }
            fs::symlink_metadata(&dir)
        });
        let meta = meta.map_err(|e| format!("{}: {e}", dir.display()))?;
        let shown = dir.display();
        if !meta.is_dir() {
            return Err(format!("{shown} is not a directory"));
        }
        if meta.uid() != 0 && meta.uid() != uid {
            return Err(format!(
                "{shown} belongs to uid {}, neither root nor you, who could remove others' entries; remove it, or have root create it (mode 1777)",
                meta.uid()
            ));
        }
        if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(format!(
                "{shown} is writable by all but not sticky (mode {:o}), so anyone could remove entries; `chmod +t` it",
                meta.mode() & 0o7777
            ));
        }
        Ok(Ledger {
            dir,
            uid,
            wait: Duration::from_secs(wait),
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// This user's file for `job`.
    pub fn file_of(&self, job: &JobId) -> PathBuf {
        self.dir
            .join(format!("job.{}.{}.json", self.uid, job.file_part()))
    }

    /// Takes the lock, exclusive for a launch or shared for `binder node`, waiting at most
    /// `BINDER_LEDGER_WAIT` seconds.
    pub fn lock(&self, exclusive: bool) -> Result<Guard, LedgerError> {
        let path = self.dir.join(".lock");
        let busy = || LedgerError::Busy {
            lock: path.display().to_string(),
            secs: self.wait.as_secs(),
        };
        let file = fs::OpenOptions::new()
            .read(true)
            .write(false)
            .create(false)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .or_else(|_| {
                // Create it read-only for all; a racing creator's file is as good.
                let _ = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o444)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path);
                fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                    .open(&path)
            })
            .map_err(|_| busy())?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(busy());
        }
        let op = if exclusive {
            libc::LOCK_EX
        } else {
            libc::LOCK_SH
        };
        let deadline = Instant::now() + self.wait;
        let mut pause = Duration::from_micros(50);
        loop {
            // SAFETY: the descriptor is open for the duration of the call.
            let rc =
                unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), op | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(Guard { _file: file });
            }
            if Instant::now() >= deadline {
                return Err(busy());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }

    /// Every job file, read but not believed (see [`super::verify`]).
    pub fn read_all(&self) -> Vec<Raw> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut names: Vec<PathBuf> = dir
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("job.") && n.ends_with(".json"))
            })
            .collect();
        names.sort();
        let mut out: Vec<Raw> = Vec::with_capacity(names.len().min(MAX_FILES));
        for (i, path) in names.into_iter().enumerate() {
            if i >= MAX_FILES {
                out.push((path, None, Err(format!("more than {MAX_FILES} job files"))));
                continue;
            }
            let (owner, entry) = read_one(&path);
            out.push((path, owner, entry));
        }
        out
    }

    /// One job file with its plan unparsed (a joining task's read), not believed: its
    /// owner and entry, or why not.
    pub fn read_raw(&self, path: &Path) -> (Option<u32>, Result<RawEntry, String>) {
        read_one(path)
    }

    /// Writes `entry` as this user's file for its job: a temporary file, then a rename.
    pub fn write<T: serde::Serialize>(&self, path: &Path, entry: &T) -> Result<(), String> {
        let text = serde_json::to_string(entry).map_err(|e| e.to_string())?;
        let tmp = self
            .dir
            .join(format!(".tmp.{}.{}", self.uid, std::process::id()));
        let create = || {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
        };
        let write = || -> std::io::Result<()> {
            // A temporary file left by a crashed process of the same pid is removed only
            // when it is in the way (one syscall fewer on every write).
            let mut file = create().or_else(|e| {
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(e);
                }
                fs::remove_file(&tmp)?;
                create()
            })?;
            file.write_all(text.as_bytes())?;
            fs::rename(&tmp, path)?;
            // The file now holds every member: appended ones would only repeat them, and
            // a fresh job reusing the name must not inherit an old job's. Best effort: a
            // members file planted by another user cannot be removed in a sticky
            // directory, and readers ignore it anyway.
            let _ = fs::remove_file(members_path(path));
            Ok(())
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })
    }

    /// Records one more task of a job whose file `path` is this user's: a line appended
    /// to its members file, so a joining task never rewrites the plan (O(1) per task,
    /// where rewriting made a job's start O(n²)). Called under the lock, like `write`.
    pub fn append(&self, path: &Path, member: &Member) -> Result<(), String> {
        let target = members_path(path);
        let fail = |e: std::io::Error| format!("cannot append to {}: {e}", target.display());
        let mut file = fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&target)
            .map_err(fail)?;
        let meta = file.metadata().map_err(fail)?;
        if !meta.is_file() || meta.uid() != self.uid || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is not this user's own file; remove it",
                target.display()
            ));
        }
        let mut line = serde_json::to_string(member).map_err(|e| e.to_string())?;
        line.push('\n');
        file.write_all(line.as_bytes()).map_err(fail)
    }

    /// Removes one of this user's files (a stale job's, with its appended members);
    /// others' files are left alone.
    pub fn remove(&self, path: &Path, owner: Option<u32>) {
        if owner == Some(self.uid) {
            let _ = fs::remove_file(path);
            let _ = fs::remove_file(members_path(path));
        }
    }

    /// This process's effective uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }
}

/// One file: its owner and entry, or why not. Not a regular file, a link, writable by
/// others than its owner, too large or not JSON of [`Entry`] are all refusals.
fn read_one<T: serde::de::DeserializeOwned + Members>(
    path: &Path,
) -> (Option<u32>, Result<T, String>) {
    let (owner, entry) = read_plan::<T>(path);
    let entry = entry.map(|mut e| {
        if let Some(owner) = owner {
            merge_members(path, owner, e.members_mut());
        }
        e
    });
    (owner, entry)
}

/// The members a job's later tasks appended ([`Ledger::append`]), in `members`: one
/// JSON object a line, the last one of a rank winning. The file must be the job file's
/// owner's and writable by nobody else; lines that do not parse (a torn last line) are
/// skipped. Nothing here is believed until [`super::verify`] checks it.
fn merge_members(path: &Path, owner: u32, members: &mut Vec<Member>) {
    let Ok(file) = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(members_path(path))
    else {
        return;
    };
    let ok = file.metadata().is_ok_and(|m| {
        m.is_file() && m.uid() == owner && m.mode() & 0o022 == 0 && m.len() <= MAX_FILE_BYTES
    });
    let mut text = String::new();
    if !ok || file.take(MAX_FILE_BYTES).read_to_string(&mut text).is_err() {
        return;
    }
    for line in text.lines() {
        if let Ok(member) = serde_json::from_str::<Member>(line) {
            members.retain(|m| m.rank != member.rank);
            members.push(member);
        }
    }
}

/// Where a job file's appended members live: `job.….members` beside `job.….json`.
fn members_path(path: &Path) -> PathBuf {
    path.with_extension("members")
}

/// What has a member list: both ways of reading a job file.
pub trait Members {
    /// The members, to merge appended ones into.
    fn members_mut(&mut self) -> &mut Vec<Member>;
}

impl Members for Entry {
    fn members_mut(&mut self) -> &mut Vec<Member> {
        &mut self.members
    }
}

impl Members for RawEntry {
    fn members_mut(&mut self) -> &mut Vec<Member> {
        &mut self.members
    }
}

/// The job file itself.
fn read_plan<T: serde::de::DeserializeOwned>(path: &Path) -> (Option<u32>, Result<T, String>) {
    let file = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => return (None, Err(format!("cannot open: {e}"))),
    };
    let Ok(meta) = file.metadata() else {
        return (None, Err("cannot stat".into()));
    };
    let owner = Some(meta.uid());
    if !meta.is_file() {
        return (owner, Err("not a regular file".into()));
    }
    if meta.mode() & 0o022 != 0 {
        return (owner, Err("writable by others than its owner".into()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return (owner, Err(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    let mut text = String::with_capacity(meta.len() as usize + 1);
    if let Err(e) = file.take(MAX_FILE_BYTES).read_to_string(&mut text) {
        return (owner, Err(format!("unreadable: {e}")));
    }
    let entry = serde_json::from_str::<T>(&text).map_err(|e| format!("corrupt: {e}"));
    (owner, entry)
}
