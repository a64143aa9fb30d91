//! Reading the ledger root (SEMANTICS §13.1, §13.3, §13.4): its names listed within
//! `MAX_ROOT_ENTRIES` and the scan's time budget, the other directories among them read
//! by [`super::others`], and a read of a large root shared: a launch that lists a root of
//! more than `SHARE_ROOT_ABOVE` names writes the directories it found into the user's
//! own directory (`super::shared::write_root`). The user's next launches, like a task
//! settling its claim after its own launch's read, then read those directories again
//! without listing the root: alone while the root's stamp holds (no name made or removed
//! there since; for `KEEP_UNCHANGED`), else, for [`CHURN_RELIST`], with every live
//! user's canonical directory looked up by name (a root that churns). A flood of names
//! then costs one listing per second at most, not three per launch.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustix::fs::{self as rfs, AtFlags};

use super::fsio::{dirs_named, list_dir, open_dir};
use super::kernel::{self, KernelView};
use super::others::{SCAN_BUDGET, SLOWER};
use super::own_dir::{CANONICAL, PREFIX};
use super::store::{Ledger, RootRead, Stamp};
use super::Scan;
use crate::procfs::Procs;

#[cfg(test)]
thread_local! {
    /// How many times this thread listed a ledger root (the unit tests count them).
    pub(super) static ROOT_LISTINGS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// A root read that saw more names than this (or ran out of time) is shared with the
/// user's next launches (`super::shared::read_root`): a root this large takes a while
/// to list, a small one less time than the shared file would.
const SHARE_ROOT_ABOVE: usize = 4096;
/// How long a listing of a large root serves the user's next launches while the root
/// keeps changing (SEMANTICS §13.4): with a directory made and removed every 5 ms beside
/// 100,000 names, listing the root again on every launch cost each one 129-155 ms
/// against 10-14 ms (the 2-CPU VM).
pub(crate) const CHURN_RELIST: Duration = Duration::from_secs(1);
/// How long a listing of a large root serves the user's next launches while the root is
/// as it was (no name made or removed there since: nothing to list again).
const KEEP_UNCHANGED: Duration = Duration::from_secs(30);
/// The longest a launch lists the ledger root's names (a flood of 100,000 takes longer):
/// past it the live users' own directories are looked up by name instead (a listing
/// under the user's lock made 64 concurrent launches wait behind it: p50 9.5x).
const LIST_BUDGET: Duration = Duration::from_millis(40 * SLOWER);
/// The first line of the shared lookup of canonical directories (`CANONICAL`).
const CANONICAL_HEADER: &str = "binder-rusers 1";

/// The smallest root directory size at which a shared read is looked for: 4,096 names
/// on tmpfs (20 bytes each); an ext4 directory of that many names is larger still.
const SHARED_ROOT_SIZE: i64 = 4096 * 20;

impl Ledger {
    /// Every other directory's live claims (other users', and any second directory of
    /// this user's), verified, into `scan`; bounded as the module text says.
    pub fn scan_others(&self, procs: &dyn Procs, scan: &mut Scan) {
        self.scan_others_in(procs, scan, true);
    }

    /// [`Ledger::scan_others`] as a task settling its claim reads them again: the claims
    /// alone, each checked against its own process (the kernel's view of the whole node,
    /// unclaimed bound processes included, was taken when the task planned).
    pub fn scan_claims_of_others(&self, procs: &dyn Procs, scan: &mut Scan) {
        self.scan_others_in(procs, scan, false);
    }

    fn scan_others_in(&self, procs: &dyn Procs, scan: &mut Scan, whole: bool) {
        let deadline = Instant::now() + SCAN_BUDGET;
        // The root's stamp before it is listed (its link count and ctime): a name made
        // or removed after this look changes it, whether or not the listing below sees
        // the name, and no other user can set it back (`Stamp`).
        let st = rfs::statat(rfs::CWD, self.root(), AtFlags::SYMLINK_NOFOLLOW).ok();
        let stamp = st.as_ref().and_then(Stamp::of);
        // A directory's size grows with its names (tmpfs: 20 bytes a name; ext4: a block
        // per few hundred): only a root this large can have had its read shared.
        let large = st.is_some_and(|st| st.st_size >= SHARED_ROOT_SIZE);
        // What the last listing found: this launch's own when settling (since it
        // planned); the user's last launch's when planning, where the root is too large
        // to list each time (a flood of names: a second full listing cost each launch
        // its whole budget), written within `KEEP_UNCHANGED`.
        let last = if whole {
            large
                .then(|| super::shared::read_root(self.own_fd(), scan.me, KEEP_UNCHANGED))
                .flatten()
        } else {
            let read = self.read_at.lock().map_or(None, |r| r.clone());
            read.map(|r| (r, Duration::ZERO))
        };
        if let Some((mut known, age)) = last {
            // The root unchanged since (subdirectories count in its links; a file system
            // that does not count them, with fewer than 3 links, is always listed): the
            // directories found then are all there is to read, their claims again, not
            // the root's names.
            let unchanged = stamp.is_some_and(|s| s.links >= 3) && known.stamp == stamp;
            // A large root that changed since (names made and removed all the time: a
            // churn): the directories found then, and the canonical directory of every
            // user with a live process, looked up by name (SEMANTICS §13.4; the lookup
            // shared for `shared::FRESH`: `canonical_shared`). A user's first job's
            // directory is one of those, so churn hides no new user for longer than
            // that. A directory under a name nobody else can guess (a homeless user's)
            // can be new and unread until the next listing (`CHURN_RELIST`), so the scan
            // is in doubt and the task checks its CPUs afresh once bound (SEMANTICS §13.5).
            // Not where `/proc` hides users: they would be missed.
            let churned = !unchanged && large && age < CHURN_RELIST && procs.hidden().is_none();
            let canonical = churned
                .then(|| self.canonical_shared(procs, scan.me))
                .flatten();
            if unchanged || canonical.is_some() {
                let (canonical, squatted) = canonical.unwrap_or_default();
                if squatted {
                    // A live user's own name is another's: that user's directory may be
                    // one nobody can guess, unread until the next listing. Not listed
                    // again for it (400 ms a launch beside 100,000 names): the task's
                    // CPUs are checked afresh once bound instead (SEMANTICS §13.5).
                    scan.doubt =
                        Some("a live user's ledger directory name is another user's".into());
                }
                for name in canonical {
                    if !known.dirs.contains(&name) {
                        known.dirs.push(name);
                    }
                }
                if !unchanged {
                    known.stamp = None;
                    // A directory made since under a name nobody can guess (a new
                    // user's secret one, where a squat stood) is not among these: the
                    // task checks its CPUs afresh once bound (SEMANTICS §13.5).
                    scan.doubt = Some("the ledger root changed since its last listing".into());
                }
                self.remember(known.clone());
                // (As below: with nobody's names in sight, `in-sight` takes no look.)
                let nobody = known.dirs.is_empty() && known.incomplete.is_none();
                let view = if whole && nobody && !self.looks_always() {
                    None
                } else if whole {
                    self.whole_view(procs, scan)
                } else if known.dirs.is_empty() {
                    // Nothing to check claims against: no view to build (it reads
                    // /proc/self/status for hidepid).
                    None
                } else {
                    Some(KernelView::claimed(procs, scan.me))
                };
                self.read_known(known, view, procs, scan, deadline);
                return;
            }
        }
        #[cfg(test)]
        ROOT_LISTINGS.with(|n| n.set(n.get() + 1));
        let Some(mut listing) = list_dir(rfs::CWD, self.root()) else {
            scan.incomplete = Some(format!("{} cannot be read", self.root().display()));
            if let Some(view) = kernel::look(procs, scan) {
                kernel::add_unclaimed(&view, procs, scan);
            }
            return;
        };
        let own_name = self.dir().file_name().and_then(|n| n.to_str());
        // A flood of names is not listed past `LIST_BUDGET` (SEMANTICS §13.5): every live
        // user's own directory is then looked up by name, and the task checks its CPUs
        // afresh once bound, for a directory nobody can guess that the listing missed.
        let until = deadline.min(Instant::now() + LIST_BUDGET);
        let mut found = dirs_named(&mut listing, PREFIX, until);
        found.names.retain(|n| Some(n.as_str()) != own_name);
        let (mut names, seen, complete) = (found.names, found.seen, found.complete);
        let listed = (!complete).then(|| format!("{} holds too many names", self.root().display()));
        if listed.is_some() {
            scan.incomplete.clone_from(&listed);
            if procs.hidden().is_none() {
                if let Some((canonical, _)) = self.canonical_dirs(procs, scan.me) {
                    for name in canonical {
                        if !names.contains(&name) && Some(name.as_str()) != own_name {
                            names.push(name);
                        }
                    }
                }
            }
        }
        // No other user's files in sight: nothing to read, but their bound tasks still
        // count whether or not they use binder or this root (SEMANTICS §13.3: `taskset`,
        // `BINDER_LEDGER=off`, another `BINDER_LEDGER_DIR`). The look is shared
        // (`super::shared`), so a user alone on the node pays for one per 250 ms; a
        // `/proc` that cannot be listed costs nothing here (there is nobody to miss but
        // those, and the fallback says so where it looks). `BINDER_KERNEL_VIEW=in-sight`
        // skips this look (the test suite's runs, whose expected CPUs must not depend on
        // other users' jobs on the machine).
        if names.is_empty() && complete {
            self.remember(RootRead {
                stamp,
                dirs: Vec::new(),
                incomplete: None,
            });
            if whole && self.looks_always() {
                if let Some(view) =
                    super::shared::look(self.own_fd(), procs, scan.me, self.afresh())
                {
                    kernel::add_unclaimed(&view, procs, scan);
                }
            }
            return;
        }
        let view = if whole {
            self.whole_view(procs, scan)
        } else {
            Some(KernelView::claimed(procs, scan.me))
        };
        let mut reading = self.reading(procs, view, deadline);
        let Ok(root) = listing.fd() else {
            return;
        };
        let dirs = self.read_dirs(root, names, &mut reading, scan);
        // What is missing from the read of the root itself (not a /proc that could
        // not be listed: a later launch looks at /proc itself).
        let read = RootRead {
            stamp,
            dirs,
            incomplete: listed.or(reading.stopped.take()),
        };
        if whole && (seen > SHARE_ROOT_ABOVE || !complete) {
            // (Under churn too, with no stamp: the next launches then read these
            // directories and the canonical names, and list the root once per
            // `CHURN_RELIST`.)
            super::shared::write_root(self.own_fd(), &read);
        }
        self.remember(read);
        if let Some(view) = reading.view.as_ref().filter(|v| v.whole) {
            kernel::add_unclaimed(view, procs, scan);
        }
    }

    /// Whether another user's entry is in the ledger root (a directory named with the
    /// ledger's prefix, not this user's own), as far as a read within the scan's budget
    /// shows (a read cut short counts as yes). Under `BINDER_KERNEL_VIEW=in-sight` a
    /// launch that cannot use the ledger looks at other users' bound tasks only then,
    /// as a launch through it does (`scan_others_in`).
    pub fn others_in_sight(&self) -> bool {
        let Some(mut listing) = list_dir(rfs::CWD, self.root()) else {
            return true;
        };
        let own = self.dir().file_name().and_then(|n| n.to_str());
        let found = dirs_named(&mut listing, PREFIX, Instant::now() + SCAN_BUDGET);
        !found.complete || found.names.iter().any(|n| Some(n.as_str()) != own)
    }

    /// The canonical directory names of every user but `me` with a live process (and
    /// root) that are theirs, and whether one of those names is another user's (its user
    /// may have a directory of a name nobody else can guess); `None` when `/proc` cannot
    /// be listed.
    fn canonical_dirs(&self, procs: &dyn Procs, me: u32) -> Option<(Vec<String>, bool)> {
        let root = open_dir(rfs::CWD, self.root()).ok()?;
        let mut names = Vec::new();
        let mut squatted = false;
        for uid in procs.users(me)? {
            let name = format!("{PREFIX}{uid}");
            match rfs::statat(&root, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if st.st_uid == uid => names.push(name),
                Ok(_) => squatted = true,
                Err(_) => {}
            }
        }
        // Root's own directory too: `Procs::users` leaves root out, as the kernel's view
        // does its daemons, but a listing reads root's claims like any other's. (Its name
        // taken by another user is no reason to list: root's launches are rare, and
        // anyone could take it.)
        let name = format!("{PREFIX}0");
        let roots = rfs::statat(&root, name.as_str(), AtFlags::SYMLINK_NOFOLLOW);
        if me != 0 && roots.is_ok_and(|st| st.st_uid == 0) {
            names.push(name);
        }
        Some((names, squatted))
    }

    /// [`Ledger::canonical_dirs`] as the user's launch within `shared::FRESH` found
    /// them, else looked up and written for the next ones (`CANONICAL` in the user's own
    /// directory: nobody else can write there). Looking them up lists `/proc`, a `statat`
    /// per process: under the user's lock, 256 concurrent launches beside a churning
    /// root each paid 0.2-0.6 ms for it (the 2-CPU VM, 1,000 processes). A user whose
    /// first directory appeared since is read at the next lookup; the launch is in doubt
    /// all the same (the root changed since its listing), so its CPUs are checked afresh
    /// once bound (SEMANTICS §13.5), as for a process bound within the shared view's
    /// `FRESH`. A launch that looks afresh looks these up afresh too.
    fn canonical_shared(&self, procs: &dyn Procs, me: u32) -> Option<(Vec<String>, bool)> {
        let shares = procs.shares_views() && !self.afresh();
        if let Some(found) = shares
            .then(|| super::shared::read_aged(self.own_fd(), CANONICAL, me, super::shared::FRESH))
            .flatten()
            .and_then(|(text, _)| parse_canonical(&text))
        {
            return Some(found);
        }
        let found = self.canonical_dirs(procs, me)?;
        if shares {
            let mut text = format!("{CANONICAL_HEADER}\nsquatted {}\n", u8::from(found.1));
            for name in &found.0 {
                text.push_str(&format!("dir {name}\n"));
            }
            super::shared::replace(self.own_fd(), CANONICAL, text.as_bytes());
        }
        Some(found)
    }

    /// The kernel's view of the whole node (shared: `super::shared`), or why not.
    fn whole_view(&self, procs: &dyn Procs, scan: &mut Scan) -> Option<KernelView> {
        let view = super::shared::look(self.own_fd(), procs, scan.me, self.afresh());
        if view.is_none() {
            scan.incomplete = Some("/proc cannot be listed".into());
        }
        view
    }

    /// Keeps what a read of the root found, for the settling reads of this launch.
    fn remember(&self, read: RootRead) {
        if let Ok(mut r) = self.read_at.lock() {
            *r = Some(read);
        }
    }

    /// The claims of the directories a read of the root found (the root unchanged
    /// since), each checked again to be what it was, through `view`.
    fn read_known(
        &self,
        known: RootRead,
        view: Option<KernelView>,
        procs: &dyn Procs,
        scan: &mut Scan,
        deadline: Instant,
    ) {
        let mut reading = self.reading(procs, view, deadline);
        if !known.dirs.is_empty() {
            if let Ok(root) = open_dir(rfs::CWD, self.root()) {
                self.read_dirs(root.as_fd(), known.dirs, &mut reading, scan);
            }
        }
        if scan.incomplete.is_none() {
            scan.incomplete = known.incomplete;
        }
        if let Some(view) = reading.view.as_ref().filter(|v| v.whole) {
            kernel::add_unclaimed(view, procs, scan);
        }
    }
}

/// The canonical directories and whether a live user's name is another's, from the
/// text [`Ledger::canonical_shared`] wrote; `None` for anything else.
fn parse_canonical(text: &str) -> Option<(Vec<String>, bool)> {
    let mut lines = text.lines();
    if lines.next()? != CANONICAL_HEADER {
        return None;
    }
    let squatted = match lines.next()? {
        "squatted 0" => false,
        "squatted 1" => true,
        _ => return None,
    };
    let dirs = lines
        .map(|line| super::shared::dir_line(line).map(str::to_owned))
        .collect::<Option<Vec<_>>>()?;
    Some((dirs, squatted))
}
