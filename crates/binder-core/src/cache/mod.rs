//! The node cache: what a launch needs, so that only the first task of a job on a node
//! pays hwloc's discovery (every other task, and every later job with the same shape and
//! size, binds from the cache).
//!
//! # What is cached, and keyed on what
//!
//! One file per (shape, local size, GPUs per task) holds every local rank's
//! [`TaskView`]: its CPUs, OpenMP places, GPUs, NICs and report text. Its [`Key`] holds
//! everything that can change the answer, compared in full (never only a hash): the boot
//! id, the online CPUs, this process's cpuset cgroup and that cgroup's effective CPUs and
//! memory nodes (the allowed set hwloc would compute), hwloc's and binder's versions (and
//! the executable's size and time, so a rebuilt binder starts afresh), every `HWLOC_*`
//! variable (`HWLOC_XMLFILE`, `HWLOC_SYNTHETIC`, `HWLOC_ALLOW`, … change what hwloc
//! sees), the shape's bytes, the local size and `--gpus-per-task`. The job's allocation (the
//! envelope, SEMANTICS §4.1) is part of the shape's text ([`crate::envelope::Envelope::key`]),
//! so a job inside other cores never reads another's plan; under a launcher it is what the
//! launcher says alike to every task (a task's own inherited mask is not in it, so
//! `mpirun`'s per-rank binding still hits). These
//! files are only compared as opaque bytes, never parsed for topology (hwloc remains the
//! source of truth for that).
//!
//! # Where, and why it is safe on a shared node
//!
//! The cgroup's files are found through `/proc/self/mountinfo`, as hwloc finds them, when
//! an entry is stored; the entry records the cgroup directories it found, and a lookup
//! reads the files of those directories instead of the mount table (which costs more than
//! the rest of the key), having compared this process's mount namespace and cgroup lines
//! with the entry's. A cgroup v2 directory is looked at afresh for its `cpuset.*` files,
//! so enabling the cpuset controller later (`systemctl set-property … AllowedCPUs=`)
//! misses. What goes unseen is the mount table changing inside one mount namespace after
//! the entry was written (a cpuset hierarchy mounted where none was): hwloc could not see
//! that cgroup before either, the kernel confines the task all the same, and binder's
//! read-back of the binding refuses rather than runs it elsewhere.
//!
//! `$BINDER_CACHE_DIR`, else `$XDG_RUNTIME_DIR/binder`, else `/dev/shm/binder-UID`, else
//! `/tmp/binder-UID`. The directory must be this user's, mode 0700, not a symlink; a file
//! is read only when it is a regular file of this user not writable by others, opened
//! without following links, at most 16 MiB. So no user can plant a cache another user's
//! task trusts: each user has their own. Files are written to a temporary name and
//! renamed, so a reader sees a whole file or none; an unreadable, foreign or corrupt
//! file is a miss and is rewritten. `BINDER_CACHE=off` turns the cache off.
//!
//! Launches on the host use it (through [`launch`]) without `--verbose` or `membind`,
//! both of which need the hwloc topology itself.

mod key;
pub mod launch;

use key::{cpuset_dirs, cpuset_files, euid, read_small};
pub use key::{CgroupDir, Key, Library};

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::view::Packing as Pack;
use crate::view::TaskView;

/// The largest cache file read.
const MAX_BYTES: u64 = 16 << 20;

/// One cache file.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    key: Key,
    tasks: Vec<TaskView>,
    /// The shape's packing policy, which the ledger records with a new job.
    pack: Pack,
}

/// Why the cache was not used, or what it did (for `BINDER_CACHE_TRACE=1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The views came from the cache.
    Hit,
    /// No usable entry; the reason.
    Miss(String),
    /// The cache is off or unusable here; the reason.
    Off(String),
}

/// The node cache of this user.
#[derive(Debug)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// This user's cache directory, created if needed, or why there is none.
    pub fn open(env: &dyn Fn(&str) -> Option<String>) -> Result<Cache, String> {
        if crate::settings::cache_on(env) == Ok(false) {
            return Err("BINDER_CACHE=off".into());
        }
        let uid = euid();
        let candidates: Vec<PathBuf> = match env("BINDER_CACHE_DIR") {
            Some(dir) => vec![PathBuf::from(dir)],
            None => {
                let mut c = Vec::new();
                if let Some(run) = env("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
                    c.push(Path::new(&run).join("binder"));
                }
                c.push(PathBuf::from(format!("/dev/shm/binder-{uid}")));
                c.push(PathBuf::from(format!("/tmp/binder-{uid}")));
                c
            }
        };
        let mut why = String::new();
        for dir in candidates {
            // One `lstat` on every launch; the directory is made only when it is missing.
            let meta = fs::symlink_metadata(&dir).or_else(|_| {
                let _ = fs::DirBuilder::new().mode(0o700).create(&dir);
                fs::symlink_metadata(&dir)
            });
            match meta {
                Ok(m) if !m.is_dir() => why = format!("{} is not a directory", dir.display()),
                Ok(m) if m.uid() != uid => {
                    why = format!("{} belongs to uid {}", dir.display(), m.uid())
                }
                Ok(m) if m.mode() & 0o077 != 0 => {
                    why = format!(
                        "{} is open to others (mode {:o})",
                        dir.display(),
                        m.mode() & 0o777
                    )
                }
                Ok(_) => return Ok(Cache { dir }),
                Err(e) => why = format!("{}: {e}", dir.display()),
            }
        }
        Err(why)
    }

    /// The directory in use.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of `key`; the library is not part of the name (see [`Library`]).
    fn path(&self, key: &Key) -> PathBuf {
        self.dir.join(format!("plan-{:016x}.json", key.digest()))
    }

    /// The views cached for `key`, or why not. A key without cgroup directories takes the
    /// entry's and reads their files now; a key without a library (made by the `binder`
    /// executable, which has not loaded libhwloc) takes the library the file names,
    /// stamped now. Then the whole key is compared.
    pub fn lookup(&self, key: &Key) -> Result<(Vec<TaskView>, Pack), String> {
        let path = self.path(key);
        let file = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        if !meta.is_file() || meta.uid() != euid() || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is not a private file of this user",
                path.display()
            ));
        }
        if meta.len() > MAX_BYTES {
            return Err(format!(
                "{} is larger than {MAX_BYTES} bytes",
                path.display()
            ));
        }
        let mut bytes =
            crate::input::read_sized(file, meta.len(), MAX_BYTES).map_err(|e| e.to_string())?;
        bytes.truncate(MAX_BYTES as usize);
        let text =
            String::from_utf8(bytes).map_err(|e| format!("{} is corrupt: {e}", path.display()))?;
        let entry: Entry = serde_json::from_str(&text)
            .map_err(|e| format!("{} is corrupt: {e}", path.display()))?;
        let mut key = key.clone();
        if key.cpuset_dirs.is_none() {
            let dirs = entry.key.cpuset_dirs.clone().unwrap_or_default();
            key.cpuset_files = cpuset_files(&dirs)?;
            key.cpuset_dirs = Some(dirs);
        }
        if key.hwloc.is_none() {
            key.hwloc = entry.key.hwloc.as_ref().map(|l| Library::at(&l.path));
        }
        if entry.key != key {
            return Err("the node, cgroup, versions or shape changed".into());
        }
        if entry.tasks.len() != key.local_size {
            return Err(format!("{} is inconsistent", path.display()));
        }
        // A plan names only CPUs the node has: an entry that names another (edited, or
        // damaged) is a miss, and the fresh plan replaces it.
        let online = crate::procfs::parse_list(key.online.trim()).unwrap_or_default();
        let off = entry
            .tasks
            .iter()
            .filter(|t| t.is_bound() && t.apply)
            .flat_map(|t| &t.cpus)
            .find(|c| online.binary_search(c).is_err());
        if let Some(cpu) = off {
            return Err(format!(
                "{} names cpu {cpu}, which is not online",
                path.display()
            ));
        }
        // A bound task with no CPU (`"cpus":[]`: edited or damaged) would be refused at
        // every launch; the entry is a miss and the fresh plan replaces it (#54).
        if entry
            .tasks
            .iter()
            .any(|t| t.is_bound() && t.apply && t.cpus.is_empty())
        {
            return Err(format!("{} binds a task to no CPU", path.display()));
        }
        Ok((entry.tasks, entry.pack))
    }

    /// Writes the views for `key`: a temporary file of this process, then a rename. A key
    /// without cgroup directories is completed from the mount table first.
    pub fn store(&self, key: &Key, tasks: Vec<TaskView>, pack: Pack) -> Result<(), String> {
        let mut key = key.clone();
        if key.cpuset_dirs.is_none() {
            let mountinfo = read_small("/proc/self/mountinfo")?;
            let dirs = cpuset_dirs(&key.cgroup, &mountinfo);
            key.cpuset_files = cpuset_files(&dirs)?;
            key.cpuset_dirs = Some(dirs);
        }
        let key = &key;
        let path = self.path(key);
        let tmp = self
            .dir
            .join(format!(".tmp-{}-{:016x}", std::process::id(), key.digest()));
        let entry = Entry {
            key: key.clone(),
            tasks,
            pack,
        };
        let text = serde_json::to_string(&entry).map_err(|e| e.to_string())?;
        let write = || -> std::io::Result<()> {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            file.write_all(text.as_bytes())?;
            fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            format!("{}: {e}", path.display())
        })
    }
}

#[cfg(test)]
mod tests;
