//! Root's long-lived processes, remembered between looks (SEMANTICS §13.5: a launch's
//! cost does not grow with the node's processes).
//!
//! A look at the whole node costs a `statat` per process to learn its owner, and a large
//! node's kernel threads and root daemons number thousands: 2,000 of them made the first
//! task after a quiet spell cost 3.7x `taskset` (the 2-CPU VM). They are no user's jobs
//! (root's processes are skipped, SEMANTICS §13.2), and a listing of `/proc` names each
//! process with an inode number that a new process under a reused PID does not get (procfs
//! draws a new one per instance, from a counter), so a look remembers them, in the user's
//! own ledger directory (`kroot`: nobody else can write there), and the next look skips
//! a process listed under the same PID and inode number, when it was root's at two checks
//! at least [`SETTLED_AFTER`] apart (a root process that drops to a user does so right
//! after its fork) and was checked within its recheck period (20-40 s, spread by PID so
//! that no one launch checks them all again). Anything else is looked at as before.

use std::collections::BTreeMap;

/// How long a process must have been root's, between two checks, to be skipped.
pub const SETTLED_AFTER: u64 = 1_000;
/// The shortest period after which a skipped process is checked again (ms; the PID
/// spreads it over as long again).
const RECHECK: u64 = 20_000;
/// The most processes remembered (a file of about 30 bytes each).
const MAX_REMEMBERED: usize = 1 << 17;
const HEADER: &str = "binder-kroot 1";

/// One remembered process of root's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    /// The inode number `/proc`'s listing gave it.
    ino: u64,
    /// When it was first seen as root's, and last checked (ms, `CLOCK_MONOTONIC`).
    first: u64,
    checked: u64,
}

/// Root's processes a look found (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    entries: BTreeMap<u32, Entry>,
}

/// Now, in ms of `CLOCK_MONOTONIC` (the same for every process of the node).
pub fn now_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1000 + u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000
}

impl Settled {
    /// Whether the process listed as `pid` with inode number `ino` may be skipped now.
    pub fn skips(&self, pid: u32, ino: u64, now: u64) -> bool {
        self.entries.get(&pid).is_some_and(|e| {
            e.ino == ino
                && e.checked.saturating_sub(e.first) >= SETTLED_AFTER
                && now.saturating_sub(e.checked) < RECHECK + u64::from(pid) * 7919 % RECHECK
        })
    }

    /// Carries `pid`'s entry from `before` (a process skipped this time).
    pub fn keep(&mut self, before: &Settled, pid: u32) {
        if let Some(e) = before.entries.get(&pid) {
            if self.entries.len() < MAX_REMEMBERED {
                self.entries.insert(pid, *e);
            }
        }
    }

    /// Records that `pid` (inode number `ino`) was root's when checked `now`, first seen
    /// so in `before` when it was the same process.
    pub fn root(&mut self, before: &Settled, pid: u32, ino: u64, now: u64) {
        let first = before
            .entries
            .get(&pid)
            .filter(|e| e.ino == ino)
            .map_or(now, |e| e.first);
        if self.entries.len() < MAX_REMEMBERED {
            self.entries.insert(
                pid,
                Entry {
                    ino,
                    first,
                    checked: now,
                },
            );
        }
    }

    /// How many processes it remembers.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it remembers none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The file's text.
    pub fn text(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for (pid, e) in &self.entries {
            out.push_str(&format!("{pid} {} {} {}\n", e.ino, e.first, e.checked));
        }
        out
    }

    /// From the file's text; empty when it is not one.
    pub fn parse(text: &str) -> Settled {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Settled::default();
        }
        let mut entries = BTreeMap::new();
        for line in lines.take(MAX_REMEMBERED) {
            let mut f = line.split(' ').map(str::parse::<u64>);
            let (Some(Ok(pid)), Some(Ok(ino)), Some(Ok(first)), Some(Ok(checked)), None) =
                (f.next(), f.next(), f.next(), f.next(), f.next())
            else {
                return Settled::default();
            };
            let Ok(pid) = u32::try_from(pid) else {
                return Settled::default();
            };
            entries.insert(
                pid,
                Entry {
                    ino,
                    first,
                    checked,
                },
            );
        }
        Settled { entries }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_process_long_root_and_lately_checked_is_skipped() {
        let none = Settled::default();
        let mut first = Settled::default();
        first.root(&none, 40, 900, 10_000);
        // Seen once: not settled yet.
        assert!(!first.skips(40, 900, 10_100));
        let mut second = Settled::default();
        second.root(&first, 40, 900, 10_500);
        assert!(!second.skips(40, 900, 10_600), "root for only 500 ms");
        let mut third = Settled::default();
        third.root(&second, 40, 900, 11_000);
        assert!(third.skips(40, 900, 11_100));
        // A new process under the same PID has another inode number.
        assert!(!third.skips(40, 901, 11_100));
        // Past its recheck period (20-40 s), it is checked again.
        assert!(!third.skips(40, 900, 11_000 + 2 * RECHECK));
        // A new inode number starts it afresh.
        let mut again = Settled::default();
        again.root(&third, 40, 901, 11_200);
        assert!(!again.skips(40, 901, 11_300));
        // Kept as it was when skipped; the file round-trips; junk is empty.
        let mut kept = Settled::default();
        kept.keep(&third, 40);
        assert_eq!(kept, third);
        assert_eq!(Settled::parse(&third.text()), third);
        assert!(Settled::parse("binder-kroot 1\n1 2 3\n").is_empty());
        assert!(Settled::parse("junk").is_empty());
    }
}
