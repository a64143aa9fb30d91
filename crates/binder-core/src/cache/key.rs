//! The cache key: everything a cached answer depends on (the host, the cgroup, the
//! libraries, the shape), read from this host, compared in full.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::MAX_BYTES;
// The cache files' format version is the one of everything binder persists: bump
// `crate::view::FORMAT` when the key or `Entry` changes.
use crate::view::FORMAT;

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
    /// was stored (`None` in a lookup's key: the entry's are taken, see `Cache::lookup`);
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
pub(super) fn cpuset_lines(proc_cgroup: &str) -> Vec<String> {
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
pub(super) fn cpuset_dirs(lines: &[String], mountinfo: &str) -> Vec<CgroupDir> {
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
pub(super) fn cpuset_files(dirs: &[CgroupDir]) -> Result<Vec<String>, String> {
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
pub(super) fn read_small(path: &str) -> Result<String, String> {
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

pub(super) fn euid() -> u32 {
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
