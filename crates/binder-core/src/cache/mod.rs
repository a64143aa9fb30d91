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
//! sees), the shape's bytes, the local size and `--gpus-per-task`. The inherited affinity is *not*
//! part of it: binder plans over the allowed set, so `taskset -c 0 binder …` hits. These
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

pub mod launch;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::view::Packing as Pack;
use crate::view::TaskView;

/// Format version of the cache files: the one of everything binder persists
/// ([`crate::view::FORMAT`]); bump that when [`Entry`] changes.
use crate::view::FORMAT;
/// The largest cache file read.
const MAX_BYTES: u64 = 16 << 20;

/// Everything the cached answer depends on, compared in full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    /// [`FORMAT`].
    pub format: u32,
    /// binder's version and both executables' sizes and modification times, so a
    /// rebuilt binder never reads what another build planned.
    pub binder: String,
    /// The libhwloc `binder-full` planned with, named and stamped (see [`Library`]).
    pub hwloc: Option<Library>,
    /// The loader's variables that can make `binder-full` load another libhwloc.
    pub loader: Vec<String>,
    /// Every `HWLOC_*` variable as `NAME=value`, sorted: they change what hwloc discovers
    /// (`HWLOC_XMLFILE`, `HWLOC_SYNTHETIC`, `HWLOC_ALLOW`, `HWLOC_COMPONENTS`, …).
    pub hwloc_env: Vec<String>,
    /// `/proc/sys/kernel/random/boot_id`.
    pub boot: String,
    /// `/sys/devices/system/cpu/online`.
    pub online: String,
    /// This process's lines of `/proc/self/cgroup` for the cpuset controller (v1
    /// `N:…cpuset…:/path`, v2 `0::/path`).
    pub cgroup: Vec<String>,
    /// This process's mount namespace (`/proc/self/ns/mnt`): the same namespace and
    /// cgroup lines find the same cgroup directories.
    pub mounts: String,
    /// The directories of those cgroups, found through the mount table when the entry
    /// was stored (`None` in a lookup's key: the entry's are taken, see [`Cache::lookup`]);
    /// not part of the file's name.
    pub cpuset_dirs: Option<Vec<CgroupDir>>,
    /// The effective CPUs and memory nodes of those directories, `FILE=CONTENTS`.
    pub cpuset_files: Vec<String>,
    /// The shape file's bytes.
    pub shape: String,
    /// Local size.
    pub local_size: usize,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<usize>,
}

/// A shared library as the loader found it, and its size and modification time: a
/// package upgrade replaces the file, and the stamp with it.
///
/// `binder-full` names the libhwloc it loaded. The `binder` executable is linked without
/// libhwloc, so it cannot ask hwloc for a version: it stamps the library the cache file
/// names and compares that, after the loader's variables (which could make `binder-full`
/// load another one) compared equal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Library {
    /// Its path, as the loader opened it.
    pub path: String,
    /// `SIZE MTIME.NSEC` of that path now.
    pub stamp: String,
}

impl Library {
    /// The library at `path`, stamped now (an unreadable path gets an empty stamp).
    pub fn at(path: &str) -> Library {
        Library {
            path: path.to_owned(),
            stamp: stamp(Path::new(path)),
        }
    }
}

/// A cgroup directory whose effective CPUs and memory nodes the key holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupDir {
    /// cgroup v2 (`cpuset.cpus.effective`), else v1 (`cpuset.effective_cpus`).
    pub v2: bool,
    /// The directory.
    pub dir: String,
}

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
        if env("BINDER_CACHE").is_some_and(|v| ["off", "0", "no", "false"].contains(&v.trim())) {
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
        let mut text = String::with_capacity(meta.len() as usize + 1);
        file.take(MAX_BYTES)
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
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

impl Key {
    /// The key for a launch on this host, or why the host cannot be keyed (a file that
    /// says what changes the answer could not be read: then the cache is not used).
    pub fn for_host(
        shape: &str,
        local_size: usize,
        gpus_per_task: Option<usize>,
    ) -> Result<Key, String> {
        let read = |path: &str| read_small(path).map(|s| s.trim().to_owned());
        Ok(Key {
            format: FORMAT,
            binder: build_identity(),
            hwloc: loaded_library("libhwloc.so").map(|path| Library::at(&path)),
            loader: ["LD_LIBRARY_PATH", "LD_PRELOAD"]
                .iter()
                .map(|v| std::env::var(v).unwrap_or_default())
                .collect(),
            hwloc_env: hwloc_env(),
            boot: read("/proc/sys/kernel/random/boot_id")?,
            online: read("/sys/devices/system/cpu/online")?,
            cgroup: cpuset_lines(&read("/proc/self/cgroup")?),
            mounts: fs::read_link("/proc/self/ns/mnt")
                .map(|l| l.display().to_string())
                .unwrap_or_default(),
            cpuset_dirs: None,
            cpuset_files: Vec::new(),
            shape: shape.to_owned(),
            local_size,
            gpus_per_task,
        })
    }

    /// A stable 64-bit digest (FNV-1a) naming the file; the key itself is compared in
    /// full. The library is left out: the `binder` executable learns it from the file.
    pub fn digest(&self) -> u64 {
        let named = Key {
            hwloc: None,
            cpuset_dirs: None,
            cpuset_files: Vec::new(),
            ..self.clone()
        };
        let text = serde_json::to_string(&named).unwrap_or_default();
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

/// The lines of `/proc/self/cgroup` for the cpuset controller: v1 `N:…cpuset…:/path`,
/// and v2's `0::/path` (whether its cpuset controller is enabled is seen in its directory).
fn cpuset_lines(proc_cgroup: &str) -> Vec<String> {
    proc_cgroup
        .lines()
        .filter(|line| {
            let mut parts = line.splitn(3, ':');
            match (parts.next(), parts.next(), parts.next()) {
                (Some(_), Some(controllers), Some(_)) => {
                    controllers.is_empty() || controllers.split(',').any(|c| c == "cpuset")
                }
                _ => false,
            }
        })
        .map(str::to_owned)
        .collect()
}

/// The directories of the cgroups named by `lines` (from [`cpuset_lines`]) under the
/// mount points `/proc/self/mountinfo` shows for them (where hwloc finds them too). None
/// mounted (a chroot): no directory, as hwloc sees no restriction either.
fn cpuset_dirs(lines: &[String], mountinfo: &str) -> Vec<CgroupDir> {
    // (v2?, mount root inside the hierarchy, mount point)
    let mut mounts: Vec<(bool, String, String)> = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(root), Some(point), Some(fstype), Some(options)) = (
            fields.get(3),
            fields.get(4),
            fields.get(dash + 1),
            fields.get(dash + 3),
        ) else {
            continue;
        };
        match *fstype {
            "cgroup2" => mounts.push((true, (*root).to_owned(), (*point).to_owned())),
            "cgroup" if options.split(',').any(|o| o == "cpuset") => {
                mounts.push((false, (*root).to_owned(), (*point).to_owned()))
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for line in lines {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let v2 = controllers.is_empty();
        for (_, root, point) in mounts.iter().filter(|(m2, _, _)| *m2 == v2) {
            let inner = path.strip_prefix(root.as_str()).unwrap_or(path);
            let dir = format!("{point}/{}", inner.trim_start_matches('/'));
            out.push(CgroupDir {
                v2,
                dir: dir.trim_end_matches('/').to_owned(),
            });
        }
    }
    out
}

/// `FILE=CONTENTS` of the effective CPUs and memory nodes of each directory. A v2
/// directory without the cpuset controller enabled has no such files: no limit. A file
/// that exists but cannot be read leaves no key: the allowed set would be unknown, so
/// the cache is not used.
fn cpuset_files(dirs: &[CgroupDir]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for CgroupDir { v2, dir } in dirs {
        let names: [&str; 2] = if *v2 {
            ["cpuset.cpus.effective", "cpuset.mems.effective"]
        } else {
            ["cpuset.effective_cpus", "cpuset.effective_mems"]
        };
        if *v2 && !Path::new(dir).join(names[0]).exists() {
            continue;
        }
        for name in names {
            let file = format!("{dir}/{name}");
            let text = read_small(&file)?;
            out.push(format!("{file}={}", text.trim()));
        }
    }
    Ok(out)
}

/// A small kernel file in one `read`: procfs and sysfs report size 0, and growing a buffer
/// from nothing costs a syscall per doubling on every warm launch.
fn read_small(path: &str) -> Result<String, String> {
    crate::procfs::read_small(path, MAX_BYTES as usize).map_err(|e| format!("{path}: {e}"))
}

/// `SIZE MTIME.NSEC` of a file, or nothing when it cannot be read.
fn stamp(path: &Path) -> String {
    fs::metadata(path)
        .map(|m| format!("{} {}.{}", m.len(), m.mtime(), m.mtime_nsec()))
        .unwrap_or_default()
}

/// binder's version and the stamps of `binder` and `binder-full`, which are installed
/// side by side: both executables compute the same identity, whichever runs.
fn build_identity() -> String {
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.to_owned()))
        .unwrap_or_default();
    format!(
        "{} {} / {}",
        env!("CARGO_PKG_VERSION"),
        stamp(&dir.join(crate::FRONT_EXE)),
        stamp(&dir.join(crate::FULL_EXE))
    )
}

/// The path of the loaded shared object whose file name starts with `prefix`, from the
/// loader's own list (`dl_iterate_phdr`): `None` in the `binder` executable, which is
/// linked without libhwloc.
fn loaded_library(prefix: &str) -> Option<String> {
    struct Search<'a> {
        prefix: &'a str,
        found: Option<String>,
    }
    unsafe extern "C" fn visit(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: the loader passes a valid `info` for the duration of the call, and
        // `data` is the `Search` given to `dl_iterate_phdr` below, used by no one else.
        let (info, search) = unsafe { (&*info, &mut *data.cast::<Search<'_>>()) };
        if info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: a non-null `dlpi_name` is a NUL-terminated string owned by the loader.
        let name = unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy();
        let file = name.rsplit('/').next().unwrap_or_default();
        if file.starts_with(search.prefix) {
            search.found = Some(name.into_owned());
            return 1;
        }
        0
    }
    let mut search = Search {
        prefix,
        found: None,
    };
    // SAFETY: `visit` matches the callback's signature and only reads what the loader
    // passes; `search` outlives the call.
    unsafe {
        libc::dl_iterate_phdr(Some(visit), (&raw mut search).cast());
    }
    search.found
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Every `HWLOC_*` variable of this process as `NAME=value`, sorted.
fn hwloc_env() -> Vec<String> {
    let mut vars: Vec<String> = std::env::vars_os()
        .filter(|(k, _)| k.as_encoded_bytes().starts_with(b"HWLOC_"))
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    vars.sort();
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(cpus: Vec<usize>) -> TaskView {
        TaskView {
            unit: "core".into(),
            places: vec![cpus.clone()],
            cpus,
            gpus: vec![crate::view::GpuView {
                number: 0,
                busid: "0000:01:00.0".into(),
                vendor: "nvidia".into(),
                export: "0".into(),
            }],
            nics: vec!["ib0".into()],
            binding: "unit core: core:0 cpus 0-1 mask 0x00000003".into(),
            ge_env: vec![("GCS_BINDING".into(), "0 1".into())],
            apply: true,
            openmp: false,
            membind: false,
        }
    }

    fn key(shape: &str) -> Key {
        Key {
            format: FORMAT,
            binder: "x".into(),
            hwloc: Some(Library {
                path: "/no/such/libhwloc.so.15".into(),
                stamp: String::new(),
            }),
            loader: vec![String::new(), String::new()],
            hwloc_env: Vec::new(),
            boot: "b".into(),
            online: "0-1".into(),
            cgroup: vec!["0::/".into()],
            mounts: "mnt:[1]".into(),
            cpuset_dirs: Some(Vec::new()),
            cpuset_files: Vec::new(),
            shape: shape.into(),
            local_size: 2,
            gpus_per_task: None,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("binder-cache-test-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn store_then_lookup_and_what_misses() {
        let dir = scratch("round");
        let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
        let cache = Cache::open(&get).unwrap();
        let views = vec![view(vec![0, 1]), view(vec![2, 3])];
        cache.store(&key("a"), views.clone(), Pack::Fill).unwrap();
        assert_eq!(cache.lookup(&key("a")).unwrap().0, views);
        // A changed shape is another key: a miss.
        assert!(cache.lookup(&key("b")).is_err());
        // A corrupt file is a miss, and a store repairs it.
        fs::write(cache.path(&key("a")), "{not json").unwrap();
        assert!(cache.lookup(&key("a")).unwrap_err().contains("corrupt"));
        cache.store(&key("a"), views.clone(), Pack::Fill).unwrap();
        assert_eq!(cache.lookup(&key("a")).unwrap().0, views);
        // A file others may write is never trusted.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(cache.path(&key("a")), fs::Permissions::from_mode(0o666)).unwrap();
        assert!(cache
            .lookup(&key("a"))
            .unwrap_err()
            .contains("not a private file"));
        let _ = fs::remove_dir_all(&dir);
    }

    /// The `binder` executable keys without a library (it has not loaded libhwloc): it
    /// stamps the one the file names, so a replaced library is a miss for it too.
    #[test]
    fn a_replaced_library_misses_for_both_executables() {
        let dir = scratch("library");
        let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
        let cache = Cache::open(&get).unwrap();
        let lib = dir.join("libhwloc.so.15");
        fs::write(&lib, "one").unwrap();
        // binder-full stamps the library it loaded, afresh on every launch.
        let full = || Key {
            hwloc: Some(Library::at(&lib.display().to_string())),
            ..key("a")
        };
        let front = Key {
            hwloc: None,
            ..key("a")
        };
        assert_eq!(full().digest(), front.digest(), "both name the same file");
        let views = vec![view(vec![0]), view(vec![1])];
        cache.store(&full(), views.clone(), Pack::Fill).unwrap();
        assert_eq!(cache.lookup(&full()).unwrap().0, views);
        assert_eq!(cache.lookup(&front).unwrap().0, views);
        // An upgrade replaces the file: another size (and time).
        fs::write(&lib, "two, longer").unwrap();
        assert!(cache.lookup(&full()).is_err());
        assert!(cache.lookup(&front).is_err());
        // The loader's variables could make binder-full load another libhwloc.
        let other_loader = Key {
            loader: vec!["/opt/hwloc/lib".into(), String::new()],
            ..front.clone()
        };
        cache.store(&full(), views.clone(), Pack::Fill).unwrap();
        assert_eq!(cache.lookup(&front).unwrap().0, views);
        assert!(cache.lookup(&other_loader).is_err());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("open");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
        assert!(Cache::open(&get).unwrap_err().contains("open to others"));
        let off = |k: &str| (k == "BINDER_CACHE").then(|| "off".to_owned());
        assert_eq!(Cache::open(&off).unwrap_err(), "BINDER_CACHE=off");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn cgroup_lines_name_their_effective_sets() {
        let mounts = "34 31 0:31 / /no/such/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
                      35 31 0:32 / /no/such/cpu rw - cgroup cgroup rw,cpu\n\
                      36 31 0:33 /job /no/such/v2 rw - cgroup2 cgroup2 rw\n";
        // Other controllers are not part of the key.
        assert_eq!(cpuset_lines("4:memory:/x\n"), Vec::<String>::new());
        let lines = cpuset_lines("4:memory:/x\n3:cpuset:/job\n0::/job/step\n");
        assert_eq!(lines, ["3:cpuset:/job", "0::/job/step"]);
        // Each line under its hierarchy's mount points; a v2 mount of a subtree (a
        // container's) is entered below its root.
        let dirs = cpuset_dirs(&lines, mounts);
        let named: Vec<(bool, &str)> = dirs.iter().map(|d| (d.v2, d.dir.as_str())).collect();
        assert_eq!(
            named,
            [(false, "/no/such/cpuset/job"), (true, "/no/such/v2/step")]
        );
        // A mounted v1 cpuset hierarchy whose files cannot be read: no key.
        let e = cpuset_files(&dirs[..1]).unwrap_err();
        assert!(
            e.contains("/no/such/cpuset/job/cpuset.effective_cpus"),
            "{e}"
        );
        // A v2 directory without the cpuset controller's files: no limit to key on.
        assert_eq!(cpuset_files(&dirs[1..]).unwrap(), Vec::<String>::new());
        // Not mounted where this process can see (a chroot): the lines alone.
        assert!(cpuset_dirs(&lines, "").is_empty());
        assert_eq!(key("a").digest(), key("a").digest());
        assert_ne!(key("a").digest(), key("b").digest());
        // The directories and files are not part of the name: a lookup learns them.
        let looked = Key {
            cpuset_dirs: None,
            ..key("a")
        };
        assert_eq!(looked.digest(), key("a").digest());
    }
}
