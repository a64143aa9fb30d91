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
//!
//! Listing `/proc` itself still cost 1.3 ms for 2,000 processes, so a look also records
//! where the PID counter stood ([`Mark`]: `/proc/loadavg`'s last PID, in this PID
//! namespace) and the other processes it found, and the next look, when it comes soon
//! enough that the counter cannot have wrapped round ([`Mark::follows`]), looks only at
//! those, the root processes not settled yet, and the PIDs handed out since: no new
//! process can hide among the old PIDs without the counter wrapping, which takes
//! `pid_max` allocations and so, at [`MAX_PID_RATE`], longer than the window.
//!
//! Such a look reads and writes only that small record, in the lines of the view it
//! shares (`kview`: [`Settled::mark_lines`]), not the settled roots (`kroot`:
//! [`Settled::roots_bytes`], 28 bytes each, written by a listing alone): reading, searching and writing 2,000 of them again was half of what a
//! look within the window cost. A settled root is checked again by a listing, and one
//! lists at least every [`RELIST`], so that it is checked within its recheck period and
//! [`RELIST`] (40 s at most, as before).

/// How long a process must have been root's, between two checks, to be skipped.
pub const SETTLED_AFTER: u64 = 1_000;
/// The shortest period after which a skipped process is checked again (ms; the PID
/// spreads it over as long again).
const RECHECK: u64 = 15_000;
/// The longest a look may follow the last without listing `/proc` since the last listing
/// (ms): a settled root is checked again by a listing alone, within its recheck period
/// (15-30 s) and this.
pub const RELIST: u64 = 10_000;
/// The most processes remembered (a file of 28 bytes each).
const MAX_REMEMBERED: usize = 1 << 17;
/// The settled roots' file's first bytes; its records follow in binary, little-endian (a
/// look of 2,000 processes read and wrote 63 KB of text at 0.6 ms; these are read as
/// they lie).
const ROOTS_HEADER: &[u8] = b"binder-kroot 4\n";
/// The most PIDs a node hands out per second, failed clones included (every clone takes
/// a global lock to allocate its PID and another to free it; a node does not reach a
/// tenth of this): what bounds how soon `pid_max` PIDs can wrap the counter round.
pub const MAX_PID_RATE: u64 = 10_000_000;
/// The most new PIDs a look reads one by one instead of listing `/proc` (a `statat` of
/// a PID costs about what listing two processes does).
pub const MAX_NEW: u32 = 512;

/// One remembered process of root's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    pid: u32,
    /// The inode number `/proc`'s listing gave it (0: not listed yet).
    ino: u64,
    /// When it was first seen as root's, and last checked (ms, `CLOCK_MONOTONIC`).
    first: u64,
    checked: u64,
}

impl Entry {
    /// Whether it may be skipped `now`, listed under `ino`.
    fn skips(&self, ino: u64, now: u64) -> bool {
        self.ino == ino
            && self.checked.saturating_sub(self.first) >= SETTLED_AFTER
            && now.saturating_sub(self.checked) < RECHECK + u64::from(self.pid) * 7919 % RECHECK
    }
}

/// Root's processes a look found (see the module doc), the other processes it found, and
/// where the PID counter stood. A look's own record is made in any order; the parsers
/// give one sorted by PID, which is what lookups take.
///
/// Read from the view's file (`kview`: [`Settled::from_lines`]), its root entries are
/// those a look within the window checks: the ones not settled at the last listing, and those found since. Read
/// from both files ([`Settled::with_roots`]), they are every root process remembered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    entries: Vec<Entry>,
    /// Every other process (this user's and other users'), by PID.
    users: Vec<u32>,
    /// Where the PID counter stood when the look began.
    pub mark: Option<Mark>,
    /// When the last look that listed `/proc` began (ms, `CLOCK_MONOTONIC`; 0: none).
    pub listed: u64,
    /// Whether this look listed `/proc`: its root entries are every one remembered, to
    /// be written as the settled roots' file.
    pub listing: bool,
}

/// Where this PID namespace's PID counter stood, read before a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The PID namespace (`/proc/self/ns/pid`'s inode).
    pub ns: u64,
    /// The last PID handed out (`/proc/loadavg`'s last field).
    pub last: u32,
    /// When (ms, `CLOCK_MONOTONIC`).
    pub at: u64,
    /// `/proc/sys/kernel/pid_max` (this PID namespace's since Linux 6.14).
    pub pid_max: u32,
}

impl Mark {
    /// The counter now, `now` ms, when `/proc` is this process's PID namespace's (which
    /// `/proc/loadavg` numbers by) and every part reads; `None` otherwise.
    pub fn read(now: u64) -> Option<Mark> {
        let ns = super::pid_ns();
        let self_link = rustix::fs::readlink("/proc/self", Vec::new()).ok()?;
        let pid = rustix::process::getpid().as_raw_nonzero().get();
        if ns == 0 || self_link.to_str().ok()?.parse::<i32>().ok()? != pid {
            return None;
        }
        let loadavg = super::read_small("/proc/loadavg", 256).ok()?;
        let last = loadavg.split_whitespace().nth(4)?.parse().ok()?;
        let pid_max = super::read_small("/proc/sys/kernel/pid_max", 64)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Mark {
            ns,
            last,
            at: now,
            pid_max,
        })
    }

    /// The PIDs handed out since `before` (a look's mark), when no PID can have been
    /// handed out twice since (the counter did not wrap round): the same namespace, a
    /// counter that did not go back, too few PIDs between to list `/proc` for, and
    /// less time than `pid_max` allocations take at [`MAX_PID_RATE`] (419 ms for a
    /// `pid_max` of 4,194,304, systemd's; never for the kernel's 32,768).
    pub fn follows(&self, before: &Mark) -> Option<std::ops::RangeInclusive<u32>> {
        let elapsed = self.at.checked_sub(before.at)?;
        let pid_max = u64::from(self.pid_max.min(before.pid_max));
        let wrap_ms = pid_max.saturating_sub(300) * 1000 / MAX_PID_RATE;
        (self.ns == before.ns
            && self.last >= before.last
            && self.last - before.last <= MAX_NEW
            && elapsed < wrap_ms)
            .then(|| before.last.saturating_add(1)..=self.last)
    }
}

/// Now, in ms of `CLOCK_MONOTONIC` (the same for every process of the node).
pub fn now_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1000 + u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000
}

impl Settled {
    fn find(&self, pid: u32) -> Option<&Entry> {
        self.entries
            .binary_search_by_key(&pid, |e| e.pid)
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Whether the process listed as `pid` with inode number `ino` may be skipped now.
    pub fn skips(&self, pid: u32, ino: u64, now: u64) -> bool {
        self.find(pid).is_some_and(|e| e.skips(ino, now))
    }

    /// Every PID remembered as root's, with whether a look that lists no `/proc` may
    /// skip it `now` ([`Mark::follows`]: no PID was handed out twice since, so it is the
    /// same process or none).
    pub fn roots(&self, now: u64) -> impl Iterator<Item = (u32, bool)> + '_ {
        self.entries
            .iter()
            .map(move |e| (e.pid, e.skips(e.ino, now)))
    }

    /// Every other process the look found.
    pub fn users(&self) -> impl Iterator<Item = u32> + '_ {
        self.users.iter().copied()
    }

    /// Records another process (this user's or another user's) the look found.
    pub fn user(&mut self, pid: u32) {
        if self.users.len() < MAX_REMEMBERED {
            self.users.push(pid);
        } else {
            self.partial();
        }
    }

    /// The look did not record every process it found (or did not find every one): no
    /// later look may follow it without listing `/proc`.
    pub fn partial(&mut self) {
        self.mark = None;
    }

    /// The inode number `pid` was listed under, when remembered as root's.
    pub fn ino(&self, pid: u32) -> Option<u64> {
        self.find(pid).map(|e| e.ino)
    }

    /// Carries `pid`'s entry from `before` (a process skipped this time).
    pub fn keep(&mut self, before: &Settled, pid: u32) {
        if let Some(e) = before.find(pid) {
            if self.entries.len() < MAX_REMEMBERED {
                self.entries.push(*e);
            } else {
                self.partial();
            }
        }
    }

    /// Records that `pid` (inode number `ino`) was root's when checked `now`, first seen
    /// so in `before` when it was the same process.
    pub fn root(&mut self, before: &Settled, pid: u32, ino: u64, now: u64) {
        let first = before
            .find(pid)
            .filter(|e| e.ino == ino)
            .map_or(now, |e| e.first);
        if self.entries.len() < MAX_REMEMBERED {
            self.entries.push(Entry {
                pid,
                ino,
                first,
                checked: now,
            });
        } else {
            self.partial();
        }
    }

    /// How many processes it remembers as root's.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it remembers none as root's.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The settled roots' file (`kroot`, written by a listing): the header, when the
    /// listing began, then root's entries (a count, then PID, INO, FIRST, CHECKED each),
    /// sorted by PID.
    pub fn roots_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ROOTS_HEADER.len() + 12 + 28 * self.entries.len());
        out.extend_from_slice(ROOTS_HEADER);
        out.extend_from_slice(&self.listed.to_le_bytes());
        put_entries(&mut out, &self.entries, |_| true);
        out
    }

    /// The first words of the lines [`Settled::mark_lines`] writes (the view's own lines
    /// skip them).
    pub const LINE_KINDS: [&'static str; 3] = ["mark", "held", "user"];

    /// The lines this record adds to the shared view's file (`kview`, written by every
    /// look: one look, one file): `mark NS LAST AT PID_MAX LISTED` (none without a mark),
    /// a `held PID INO FIRST CHECKED` for each root entry a look within the window checks
    /// (after a listing, those not settled; after another look, all it has), and a `user
    /// PID` for each other process.
    pub fn mark_lines(&self, out: &mut String) {
        use std::fmt::Write as _;
        let Some(m) = self.mark else {
            return;
        };
        let _ = writeln!(
            out,
            "mark {} {} {} {} {}",
            m.ns, m.last, m.at, m.pid_max, self.listed
        );
        let mut held: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| !self.listing || !e.skips(e.ino, m.at))
            .collect();
        held.sort_unstable_by_key(|e| e.pid);
        held.dedup_by_key(|e| e.pid);
        for e in held {
            let _ = writeln!(out, "held {} {} {} {}", e.pid, e.ino, e.first, e.checked);
        }
        let mut users = self.users.clone();
        users.sort_unstable();
        users.dedup();
        for pid in users {
            let _ = writeln!(out, "user {pid}");
        }
    }

    /// The record [`Settled::mark_lines`] wrote, from the file's lines (others are the
    /// view's, skipped); none (no mark: the next look lists) where one is not well formed
    /// or there are too many.
    pub fn from_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Settled {
        let parsed = (|| {
            let mut out = Settled::default();
            for line in lines {
                let Some((kind, rest)) = line.split_once(' ') else {
                    continue;
                };
                let mut n = rest.split(' ').map(str::parse::<u64>);
                let mut next = || n.next()?.ok();
                match kind {
                    "mark" => {
                        out.mark = Some(Mark {
                            ns: next()?,
                            last: u32::try_from(next()?).ok()?,
                            at: next()?,
                            pid_max: u32::try_from(next()?).ok()?,
                        });
                        out.listed = next()?;
                    }
                    "held" if out.entries.len() < MAX_REMEMBERED => out.entries.push(Entry {
                        pid: u32::try_from(next()?).ok()?,
                        ino: next()?,
                        first: next()?,
                        checked: next()?,
                    }),
                    "user" if out.users.len() < MAX_REMEMBERED => {
                        out.users.push(u32::try_from(next()?).ok()?);
                    }
                    "held" | "user" => return None,
                    _ => continue,
                }
                if next().is_some() {
                    return None;
                }
            }
            // Written sorted; sorted again so that no file makes a lookup wrong.
            out.entries.sort_unstable_by_key(|e| e.pid);
            out.entries.dedup_by_key(|e| e.pid);
            out.users.sort_unstable();
            out.users.dedup();
            out.mark.is_some().then_some(out)
        })();
        parsed.unwrap_or_default()
    }

    /// The settled roots' file's record; empty when the bytes are not one.
    pub fn parse_roots(bytes: &[u8]) -> Settled {
        let parsed = (|| {
            let mut r = Reader(bytes.strip_prefix(ROOTS_HEADER)?);
            let listed = u64::from_le_bytes(r.take()?);
            let entries = take_entries(&mut r)?;
            r.0.is_empty().then_some(Settled {
                entries,
                listed,
                ..Settled::default()
            })
        })();
        parsed.unwrap_or_default()
    }

    /// This record (the view file's, sorted) with the settled roots of `roots` (the
    /// roots' file's) under its own entries, which are newer: what a look that lists
    /// `/proc` skips by.
    pub fn with_roots(mut self, roots: Settled) -> Settled {
        let mine = std::mem::take(&mut self.entries);
        let mut entries: Vec<Entry> = roots
            .entries
            .into_iter()
            .filter(|e| mine.binary_search_by_key(&e.pid, |m| m.pid).is_err())
            .collect();
        entries.extend(mine);
        entries.sort_unstable_by_key(|e| e.pid);
        self.entries = entries;
        self
    }
}

/// Writes the count of the entries `keep` accepts, then each, sorted by PID.
fn put_entries(out: &mut Vec<u8>, entries: &[Entry], keep: impl Fn(&Entry) -> bool) {
    let mut kept: Vec<&Entry> = entries.iter().filter(|e| keep(e)).collect();
    kept.sort_unstable_by_key(|e| e.pid);
    kept.dedup_by_key(|e| e.pid);
    out.extend_from_slice(&u32::try_from(kept.len()).unwrap_or(0).to_le_bytes());
    for e in kept {
        out.extend_from_slice(&e.pid.to_le_bytes());
        out.extend_from_slice(&e.ino.to_le_bytes());
        out.extend_from_slice(&e.first.to_le_bytes());
        out.extend_from_slice(&e.checked.to_le_bytes());
    }
}

/// Entries as [`put_entries`] writes them, sorted by PID (again, so that no file makes a
/// lookup wrong).
fn take_entries(r: &mut Reader<'_>) -> Option<Vec<Entry>> {
    let n = usize::try_from(u32::from_le_bytes(r.take()?)).ok()?;
    if n > MAX_REMEMBERED || r.0.len() < 28 * n {
        return None;
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        entries.push(Entry {
            pid: u32::from_le_bytes(r.take()?),
            ino: u64::from_le_bytes(r.take()?),
            first: u64::from_le_bytes(r.take()?),
            checked: u64::from_le_bytes(r.take()?),
        });
    }
    entries.sort_unstable_by_key(|e| e.pid);
    entries.dedup_by_key(|e| e.pid);
    Some(entries)
}

/// The unread rest of a file's bytes.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    /// The next `N` bytes.
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window a look may skip `/proc`'s listing in: by hand, `pid_max` 4,194,304
    /// less the 300 reserved PIDs takes 419 ms at 10 million PIDs a second.
    #[test]
    fn a_look_follows_the_last_only_while_no_pid_can_repeat() {
        let then = Mark {
            ns: 7,
            last: 1000,
            at: 50_000,
            pid_max: 4_194_304,
        };
        let at = |last: u32, ms: u64| Mark {
            last,
            at: 50_000 + ms,
            ..then
        };
        assert_eq!(at(1010, 300).follows(&then), Some(1001..=1010));
        assert!(at(1000, 418)
            .follows(&then)
            .is_some_and(|new| new.is_empty()));
        assert_eq!(at(1000, 419).follows(&then), None, "past the window");
        assert_eq!(at(999, 10).follows(&then), None, "the counter went back");
        assert_eq!(
            at(1000 + MAX_NEW + 1, 10).follows(&then),
            None,
            "list instead"
        );
        assert_eq!(
            at(1000, 0).follows(&Mark { at: 60_000, ..then }),
            None,
            "clock back"
        );
        assert_eq!(
            Mark {
                ns: 8,
                ..at(1001, 10)
            }
            .follows(&then),
            None,
            "another namespace"
        );
        let small = Mark {
            pid_max: 32_768,
            ..then
        };
        assert_eq!(
            Mark {
                at: 50_004,
                ..small
            }
            .follows(&small),
            None,
            "32,768 PIDs wrap in 3 ms at the bound"
        );
        // The mark's file keeps the mark and the other processes; a look's record
        // round-trips.
        let mut look = Settled {
            mark: Some(then),
            listed: 49_000,
            ..Settled::default()
        };
        look.user(42);
        look.user(41);
        look.root(&Settled::default(), 9, 90, 1);
        let lines = |s: &Settled| {
            let mut text = String::new();
            s.mark_lines(&mut text);
            text
        };
        let read = Settled::from_lines(lines(&look).lines());
        assert_eq!(read.mark, Some(then));
        assert_eq!(read.listed, 49_000);
        assert_eq!(read.users().collect::<Vec<_>>(), [41, 42]);
        assert_eq!(read.ino(9), Some(90));
        assert_eq!(read.roots(2).collect::<Vec<_>>(), [(9, false)]);
        let bytes = look.roots_bytes();
        for end in 0..bytes.len() {
            assert_eq!(Settled::parse_roots(&bytes[..end]), Settled::default());
        }
        // The view's own lines are skipped; a malformed mark line is no mark.
        let text = format!("binder-kview 2\n7 1001 0-3\n{}", lines(&look));
        assert_eq!(Settled::from_lines(text.lines()), read);
        for bad in ["mark 1 2", "held 9 90 1", "user x", "user 1 2"] {
            let text = format!("{}{bad}\n", lines(&look));
            assert_eq!(
                Settled::from_lines(text.lines()),
                Settled::default(),
                "{bad}"
            );
        }
        // Without a mark there is nothing to follow, and nothing is written.
        assert_eq!(lines(&Settled::default()), "");
        // A look that could not record every process leaves no mark to follow.
        for pid in 0..u32::try_from(MAX_REMEMBERED).unwrap() {
            look.user(pid);
        }
        assert_eq!(look.mark, None);
    }

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
        // Kept as it was when skipped; the roots' file round-trips; junk is empty.
        let mut kept = Settled::default();
        kept.keep(&third, 40);
        assert_eq!(kept, third);
        assert_eq!(Settled::parse_roots(&third.roots_bytes()), third);
        assert!(Settled::parse_roots(b"binder-kroot 3\n1 2 3 4\n").is_empty());
        assert!(Settled::parse_roots(b"junk").is_empty());
        assert!(Settled::from_lines("junk".lines()).mark.is_none());
        // Cut anywhere, it is no file.
        let bytes = third.roots_bytes();
        for end in 0..bytes.len() {
            assert_eq!(
                Settled::parse_roots(&bytes[..end]),
                Settled::default(),
                "cut at {end}"
            );
        }
    }

    /// A listing's record: its roots' file holds every root process, its mark's file only
    /// those a look within the window still checks (not settled yet); read back together,
    /// the mark's entries are newer than the roots' file's.
    #[test]
    fn a_listing_hands_the_window_only_what_is_not_settled() {
        let none = Settled::default();
        let mut first = Settled::default();
        first.root(&none, 40, 900, 10_000);
        first.root(&none, 41, 901, 10_000);
        let mut listing = Settled {
            mark: Some(Mark {
                ns: 7,
                last: 99,
                at: 11_500,
                pid_max: 4_194_304,
            }),
            listed: 11_500,
            listing: true,
            ..Settled::default()
        };
        // 40 checked again 1.5 s later: settled; 50 new.
        listing.root(&first, 40, 900, 11_500);
        listing.keep(&first, 41);
        listing.root(&none, 50, 950, 11_500);
        let roots = Settled::parse_roots(&listing.roots_bytes());
        assert_eq!(roots.len(), 3);
        assert_eq!(roots.listed, 11_500);
        let lines = |s: &Settled| {
            let mut text = String::new();
            s.mark_lines(&mut text);
            text
        };
        let mark = Settled::from_lines(lines(&listing).lines());
        let held: Vec<u32> = mark.roots(11_600).map(|(pid, _)| pid).collect();
        assert_eq!(
            held,
            [41, 50],
            "40 is settled: the window does not check it"
        );
        // A look within the window found 50 settled since, and 60 new.
        let mut window = Settled {
            listed: mark.listed,
            ..Settled::default()
        };
        window.keep(&mark, 41);
        window.root(&mark, 50, 950, 12_600);
        window.root(&none, 60, 0, 12_600);
        window.mark = listing.mark;
        let mark = Settled::from_lines(lines(&window).lines());
        assert_eq!(mark.listed, 11_500, "the listing's time is carried");
        let all = mark.clone().with_roots(roots);
        assert_eq!(all.len(), 4);
        assert_eq!(all.ino(60), Some(0));
        assert!(all.skips(40, 900, 12_700));
        assert!(
            all.skips(50, 950, 12_700),
            "the window's check of 50 is kept"
        );
    }
}
