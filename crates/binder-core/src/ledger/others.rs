//! Reading the other users' ledger directories (SEMANTICS §13.1): every directory of the
//! ledger root that carries the prefix, but this user's own, within hard caps: at most
//! [`MAX_DIRS_PER_USER`] directories per owner (canonical names first, so a flood of
//! names cannot push a real directory out of its owner's quota), [`MAX_DIR_ENTRIES`]
//! names per directory and [`SCAN_BUDGET`] of time; a claim file is read only when its
//! name names a live process.

use std::collections::{BTreeMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags, FileType};

use super::fsio::{for_names, list_dir, open_dir, read_at};
use super::store::{Ledger, MAX_CLAIM_BYTES, PREFIX};
use super::verify::{self, claim_name};
use super::Scan;
use crate::procfs::Procs;

/// The most names read from one user directory.
pub const MAX_DIR_ENTRIES: usize = 65_536;
/// The most names read from the ledger root.
pub const MAX_ROOT_ENTRIES: usize = 1 << 20;
/// The most directories of one owner read.
pub const MAX_DIRS_PER_USER: usize = 4;
/// The time one scan of the other users' directories may take.
pub const SCAN_BUDGET: Duration = Duration::from_millis(500);
/// Above this many claim names in one directory, `/proc` is listed once instead of read
/// per name.
const LIST_PIDS_ABOVE: usize = 64;

impl Ledger {
    /// Every other directory's live claims (other users', and any second directory of
    /// this user's), verified, into `scan`; bounded as the module text says.
    pub fn scan_others(&self, procs: &dyn Procs, scan: &mut Scan) {
        let deadline = Instant::now() + SCAN_BUDGET;
        let Some(mut listing) = list_dir(rfs::CWD, self.root()) else {
            return;
        };
        let own_name = self
            .dir()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let mut names = Vec::new();
        let mut seen = 0usize;
        let complete = for_names(&mut listing, MAX_ROOT_ENTRIES, |name, kind| {
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
            scan.incomplete = Some(format!("{} holds too many names", self.root().display()));
        }
        let Ok(root) = listing.fd() else {
            return;
        };
        // Canonical names first, then the rest in name order: a flood of names cannot
        // push a real directory out of its owner's quota of `MAX_DIRS_PER_USER`.
        names.sort_by_key(|n| (n[PREFIX.len()..].contains('.'), n.clone()));
        let mut per_owner: BTreeMap<u32, usize> = BTreeMap::new();
        let mut live = None;
        for name in names {
            if Instant::now() >= deadline {
                scan.incomplete = Some(format!(
                    "reading {} took longer than {} ms",
                    self.root().display(),
                    SCAN_BUDGET.as_millis()
                ));
                return;
            }
            // One `statat` says whose it is; only a user's first few are opened.
            let Ok(st) = rfs::statat(root, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) else {
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
    let Ok(mut listing) = rfs::Dir::new(dir) else {
        return;
    };
    let mut seen = 0usize;
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
    let Ok(dir) = listing.fd() else {
        return;
    };
    for (name, pid, start) in claims {
        if Instant::now() >= deadline {
            scan.incomplete = Some("reading the other users' claims took too long".into());
            return;
        }
        let read = || read_at(dir, &name, owner, MAX_CLAIM_BYTES);
        let confirmed = markers.contains(&(pid, start));
        match verify::verify_claim(owner, (pid, start), read, confirmed, procs) {
            Ok(h) => scan.holders.push(h),
            Err(why) => scan.ignore(&format!("{dir_name}/{name}"), Some(owner), why),
        }
    }
}
