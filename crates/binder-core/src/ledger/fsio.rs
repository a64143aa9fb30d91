//! The few file operations the ledger makes, all of them safe against another user's
//! files: directories opened without following a link, names listed with a cap, files
//! read only when regular, owned as expected, writable by nobody else and small enough
//! (checked before reading, never blocking on a FIFO), and files created only where none
//! exists.

use std::ffi::CStr;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use rustix::fs::{self as rfs, FileType, Mode, OFlags};

/// The most names read from one user directory (the user's own, or another's).
pub(super) const MAX_DIR_ENTRIES: usize = 65_536;
/// The most names read from the ledger root.
pub(super) const MAX_ROOT_ENTRIES: usize = 1 << 20;

/// A directory to list, opened relative to `at` (see [`open_dir`]).
pub(super) fn list_dir<Fd: AsFd>(at: Fd, path: &Path) -> Option<rfs::Dir> {
    rfs::Dir::new(open_dir(at, path).ok()?).ok()
}

/// Opens a directory relative to `at`, never through a link, close-on-exec.
pub(super) fn open_dir<Fd: AsFd>(at: Fd, path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rfs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Calls `each(name, type)` for every entry of a directory, at most `max`, while it
/// answers true; returns whether the whole directory was read. The directory stays the
/// caller's: its descriptor (`Dir::fd`) reaches the files it names.
pub(super) fn for_names(
    dir: &mut rfs::Dir,
    max: usize,
    mut each: impl FnMut(&str, FileType) -> bool,
) -> bool {
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

/// What [`dirs_named`] found in a root listing.
pub(super) struct Named {
    /// The directories (or entries of unknown type) whose names start with the prefix.
    pub names: Vec<String>,
    /// How many entries were read in all.
    pub seen: usize,
    /// Whether the whole root was read (not cut by `MAX_ROOT_ENTRIES` or the deadline).
    pub complete: bool,
}

/// The directories of a ledger root listing whose names start with `prefix`, read at
/// most [`MAX_ROOT_ENTRIES`] and while `until` lasts (checked every 1,024 names: a flood
/// of planted names costs the reader its time budget, never more).
pub(super) fn dirs_named(listing: &mut rfs::Dir, prefix: &str, until: Instant) -> Named {
    let (mut names, mut seen) = (Vec::new(), 0usize);
    let complete = for_names(listing, MAX_ROOT_ENTRIES, |name, kind| {
        if name.starts_with(prefix) && matches!(kind, FileType::Directory | FileType::Unknown) {
            names.push(name.to_owned());
        }
        seen += 1;
        seen % 1024 != 0 || Instant::now() < until
    });
    Named {
        names,
        seen,
        complete,
    }
}

/// `N` random bytes in hex: a key, or a name nobody else can guess.
pub(super) fn random_hex<const N: usize>() -> Option<String> {
    let mut random = [0u8; N];
    rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty()).ok()?;
    Some(random.iter().map(|b| format!("{b:02x}")).collect())
}

/// A regular file of the directory `dir`, owned by `owner` and writable by nobody else,
/// at most `max` bytes: opened without following a link and without blocking (a FIFO
/// does not hang), size checked before reading.
pub(super) fn read_at(dir: impl AsFd, name: &str, owner: u32, max: u64) -> Result<String, String> {
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
pub(super) fn write_new(
    dir: impl AsFd,
    name: &str,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let fd = rfs::openat(
        &dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = rfs::fchmod(&file, Mode::from_raw_mode(mode))
        .map_err(std::io::Error::from)
        .and_then(|()| file.write_all(bytes));
    // A write cut short (`ulimit -f`, a full file system) leaves no empty or partial file
    // behind for anyone to read as a claim (SEMANTICS §13.5).
    if written.is_err() {
        let _ = rfs::unlinkat(&dir, name, rfs::AtFlags::empty());
    }
    written
}

/// Makes a directory 0755 (whatever the umask: other users' launches must read it).
pub(super) fn make(dir: &Path) -> bool {
    if rfs::mkdirat(rfs::CWD, dir, Mode::from_raw_mode(0o755)).is_err() {
        return false;
    }
    open_dir(rfs::CWD, dir).is_ok_and(|fd| rfs::fchmod(&fd, Mode::from_raw_mode(0o755)).is_ok())
}

/// `dir` opened, when it is a real directory of `uid`'s that nobody else can write in.
pub(super) fn open_usable(dir: &Path, uid: u32) -> Option<OwnedFd> {
    let fd = open_dir(rfs::CWD, dir).ok()?;
    let st = rfs::fstat(&fd).ok()?;
    (st.st_uid == uid && st.st_mode & 0o022 == 0).then_some(fd)
}
