//! Where this user's own ledger directory is (SEMANTICS §13.1, §13.3): the canonical
//! name `binder-ledger.<uid>`; when another user took it, a name only this user can
//! compute, from a key in the user's home or in the kernel's user keyring
//! (`super::keyring`); without either, a bounded search among the names with this user's
//! prefix, else a new random one (a fallback: [`super::Ledger::in_fallback`]).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags, FileType, Mode};

use super::fsio::{dirs_named, list_dir, make, open_usable, random_hex};

/// The prefix of every user's ledger directory.
pub(crate) const PREFIX: &str = "binder-ledger.";

/// The shared view's file in the user's own directory (`super::shared`).
pub(crate) const VIEW: &str = "kview";
/// The shared read of the ledger root's file there (`super::shared::read_root`).
pub(crate) const ROOT_READ: &str = "rview";
/// The settled root processes a listing of `/proc` found (`crate::procfs::settled`).
pub(crate) const ROOTS: &str = "kroot";
/// The live users' canonical directories a launch beside a churning root looked up
/// (`super::root`), for the user's launches that follow within `super::shared::FRESH`.
pub(crate) const CANONICAL: &str = "rusers";
/// The files whose temporaries (`NAME.PID`) a launch tidies (`super::Ledger::tidy`): a
/// launch killed between writing one and renaming it into place leaves it. Every file
/// `super::shared` replaces so, and the shared view, which it wrote so until it wrote it
/// in place.
pub(crate) const REPLACED: [&str; 4] = [VIEW, ROOT_READ, ROOTS, CANONICAL];

/// The key of this user's directory when another user took the canonical one
/// ([`secret_name`]): `$HOME/.cache/binder/ledger-key`, 128 random bits only this user
/// can read, made on first need. `None` without a usable home (then the kernel's user
/// keyring keeps one: `super::keyring`).
fn home_key(uid: u32, home: &str) -> Option<String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let dir = Path::new(home).join(".cache/binder");
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir);
    let path = dir.join("ledger-key");
    let read = || -> Option<String> {
        let meta = std::fs::symlink_metadata(&path).ok()?;
        (meta.is_file() && meta.uid() == uid && meta.mode() & 0o077 == 0 && meta.len() == 32)
            .then(|| std::fs::read_to_string(&path).ok())
            .flatten()
    };
    read().or_else(|| {
        let text = random_hex::<16>()?;
        // Written whole under a private name, then linked into place: two first launches
        // at once both end up reading the one key that won the link.
        // The private name is the key itself: unique to this attempt, so two threads (or
        // processes) never remove or reuse each other's.
        let tmp = dir.join(format!(".ledger-key.{text}"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .ok()?;
        let written = std::io::Write::write_all(&mut file, text.as_bytes()).is_ok();
        drop(file);
        if written {
            let _ = std::fs::hard_link(&tmp, &path);
        }
        let _ = std::fs::remove_file(&tmp);
        read()
    })
}

/// The name of this user's directory when another user took the canonical one, from a
/// key only this user can read and this boot's id: nobody else can take it first, and
/// it is found with one look however many names others planted.
pub(super) fn secret_name(uid: u32, key: &str) -> Option<String> {
    use std::hash::{Hash, Hasher};
    let boot = crate::procfs::read_small("/proc/sys/kernel/random/boot_id", 64).ok()?;
    let mut hasher = std::hash::DefaultHasher::new();
    (key, boot.trim()).hash(&mut hasher);
    Some(format!("{PREFIX}{uid}.{:016x}", hasher.finish()))
}

/// How long this user's own directory is searched for among names others planted (when
/// neither the canonical nor the secret name can be used).
const OWN_SEARCH: Duration = Duration::from_millis(200);

/// This user's directory in `root`, made when missing (see the module text), and
/// whether it is a fallback one ([`super::Ledger::in_fallback`]).
pub(super) fn own_dir(
    root: &Path,
    uid: u32,
    home: Option<&str>,
    keyring: fn() -> Option<String>,
) -> Result<(PathBuf, OwnedFd, bool), String> {
    let shown = root.display();
    // A root named by BINDER_LEDGER_DIR that does not exist yet is this user's to make
    // (other users' launches will not trust it: it is not root's).
    let meta = rfs::statat(rfs::CWD, root, AtFlags::SYMLINK_NOFOLLOW)
        .or_else(|_| {
            let _ = rfs::mkdirat(rfs::CWD, root, Mode::from_raw_mode(0o755));
            rfs::statat(rfs::CWD, root, AtFlags::SYMLINK_NOFOLLOW)
        })
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
    let mine = |dir: &Path| open_usable(dir, uid).map(|fd| (dir.to_owned(), fd, false));
    let made_or_found = |dir: &Path| {
        mine(dir).or_else(|| {
            make(dir);
            mine(dir)
        })
    };
    // Made, or found made: a task of this user's that started at the same moment may make
    // it between this one's first look and its `mkdir` (which then fails with EEXIST), so
    // the second look does not depend on which of them made it. Seen with the two tasks of
    // a SPANK step in a fresh ledger: the loser took a fallback directory, planned alone
    // and found its own job's rank 0 in the way.
    if let Some(found) = made_or_found(&canonical) {
        return Ok(found);
    }
    // Somebody else has the name: the name only this user can know, made or found,
    // from the key in the user's home, else in the kernel's user keyring.
    let key = home.and_then(|h| home_key(uid, h)).or_else(keyring);
    if let Some(secret) = key.and_then(|k| secret_name(uid, &k)) {
        if let Some(found) = made_or_found(&root.join(secret)) {
            return Ok(found);
        }
    }
    // No home to keep a key in: this user's other directory (names with this user's
    // prefix are looked at for a bounded time: another user may have made thousands of
    // them to hide it), else a new one.
    let fallback = format!("{PREFIX}{uid}.");
    let until = Instant::now() + OWN_SEARCH;
    let mut names = list_dir(rfs::CWD, root)
        .map(|mut listing| dirs_named(&mut listing, &fallback, until).names)
        .unwrap_or_default();
    names.sort();
    // Each candidate costs a `statat`; the same deadline bounds them (every candidate is
    // looked at while it lasts, so a few planted names never hide this user's own).
    let owned = names
        .iter()
        .map(|n| root.join(n))
        .take_while(|_| Instant::now() < until)
        .find(|d| {
            rfs::statat(rfs::CWD, d, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| st.st_uid == uid)
        });
    let in_fallback = |(dir, fd, _)| (dir, fd, true);
    if let Some(found) = owned.as_deref().and_then(mine) {
        return Ok(in_fallback(found));
    }
    let suffix = random_hex::<8>().ok_or("cannot draw a random directory name")?;
    let dir = root.join(format!("{fallback}{suffix}"));
    if make(&dir) {
        if let Some(found) = mine(&dir) {
            return Ok(in_fallback(found));
        }
    }
    Err(format!(
        "cannot make a ledger directory of your own in {shown}"
    ))
}
