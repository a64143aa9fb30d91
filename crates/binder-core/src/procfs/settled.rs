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
//! those, the root processes due again, and the PIDs handed out since: no new process
//! can hide among the old PIDs without the counter wrapping, which takes `pid_max`
//! allocations and so, at [`MAX_PID_RATE`], longer than the window.

/// How long a process must have been root's, between two checks, to be skipped.
pub const SETTLED_AFTER: u64 = 1_000;
/// The shortest period after which a skipped process is checked again (ms; the PID
/// spreads it over as long again).
const RECHECK: u64 = 20_000;
/// The most processes remembered (a file of 28 bytes each).
const MAX_REMEMBERED: usize = 1 << 17;
/// The file's first bytes; its records follow in binary, little-endian (a look of 2,000
/// processes read and wrote 63 KB of text at 0.6 ms; these are read as they lie).
const HEADER: &[u8] = b"binder-kroot 3\n";
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
/// where the PID counter stood. A look's own record is made in any order; [`Settled::parse`]
/// gives one sorted by PID, which is what lookups take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    entries: Vec<Entry>,
    /// Every other process (this user's and other users'), by PID.
    users: Vec<u32>,
    /// Where the PID counter stood when the look began.
    pub mark: Option<Mark>,
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

    /// The file's bytes: the header, the mark (a flag, then NS, LAST, AT, PID_MAX), root's
    /// entries (a count, then PID, INO, FIRST, CHECKED each) and the other processes (a
    /// count, then each PID), sorted by PID.
    pub fn bytes(&self) -> Vec<u8> {
        let mut entries = self.entries.clone();
        entries.sort_unstable_by_key(|e| e.pid);
        entries.dedup_by_key(|e| e.pid);
        let mut users = self.users.clone();
        users.sort_unstable();
        users.dedup();
        let mut out = Vec::with_capacity(HEADER.len() + 32 + 28 * entries.len() + 4 * users.len());
        out.extend_from_slice(HEADER);
        let m = self.mark.unwrap_or(Mark {
            ns: 0,
            last: 0,
            at: 0,
            pid_max: 0,
        });
        out.push(u8::from(self.mark.is_some()));
        out.extend_from_slice(&m.ns.to_le_bytes());
        out.extend_from_slice(&m.last.to_le_bytes());
        out.extend_from_slice(&m.at.to_le_bytes());
        out.extend_from_slice(&m.pid_max.to_le_bytes());
        out.extend_from_slice(&u32::try_from(entries.len()).unwrap_or(0).to_le_bytes());
        for e in &entries {
            out.extend_from_slice(&e.pid.to_le_bytes());
            out.extend_from_slice(&e.ino.to_le_bytes());
            out.extend_from_slice(&e.first.to_le_bytes());
            out.extend_from_slice(&e.checked.to_le_bytes());
        }
        out.extend_from_slice(&u32::try_from(users.len()).unwrap_or(0).to_le_bytes());
        for pid in &users {
            out.extend_from_slice(&pid.to_le_bytes());
        }
        out
    }

    /// From the file's bytes, sorted by PID; empty when they are not one.
    pub fn parse(bytes: &[u8]) -> Settled {
        Settled::try_parse(bytes).unwrap_or_default()
    }

    fn try_parse(bytes: &[u8]) -> Option<Settled> {
        let mut r = Reader(bytes.strip_prefix(HEADER)?);
        let has_mark = r.take::<1>()?[0] == 1;
        let mark = Mark {
            ns: u64::from_le_bytes(r.take()?),
            last: u32::from_le_bytes(r.take()?),
            at: u64::from_le_bytes(r.take()?),
            pid_max: u32::from_le_bytes(r.take()?),
        };
        let n = usize::try_from(u32::from_le_bytes(r.take()?)).ok()?;
        if n > MAX_REMEMBERED {
            return None;
        }
        let mut entries = Vec::with_capacity(n.min(r.0.len() / 28));
        for _ in 0..n {
            entries.push(Entry {
                pid: u32::from_le_bytes(r.take()?),
                ino: u64::from_le_bytes(r.take()?),
                first: u64::from_le_bytes(r.take()?),
                checked: u64::from_le_bytes(r.take()?),
            });
        }
        let n = usize::try_from(u32::from_le_bytes(r.take()?)).ok()?;
        if n > MAX_REMEMBERED || r.0.len() != 4 * n {
            return None;
        }
        let mut users: Vec<u32> =
            r.0.chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
        // Written sorted; sorted again so that no file makes a lookup wrong.
        entries.sort_unstable_by_key(|e| e.pid);
        entries.dedup_by_key(|e| e.pid);
        users.sort_unstable();
        users.dedup();
        Some(Settled {
            entries,
            users,
            mark: has_mark.then_some(mark),
        })
    }
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
        // The file keeps the mark and the other processes; a look's record round-trips.
        let mut look = Settled {
            mark: Some(then),
            ..Settled::default()
        };
        look.user(42);
        look.user(41);
        look.root(&Settled::default(), 9, 90, 1);
        let read = Settled::parse(&look.bytes());
        assert_eq!(read.mark, Some(then));
        assert_eq!(read.users().collect::<Vec<_>>(), [41, 42]);
        assert_eq!(read.ino(9), Some(90));
        assert_eq!(read.roots(2).collect::<Vec<_>>(), [(9, false)]);
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
        // Kept as it was when skipped; the file round-trips; junk is empty.
        let mut kept = Settled::default();
        kept.keep(&third, 40);
        assert_eq!(kept, third);
        assert_eq!(Settled::parse(&third.bytes()), third);
        assert!(Settled::parse(b"binder-kroot 1\n1 2 3 4\n").is_empty());
        assert!(Settled::parse(b"junk").is_empty());
        // Cut anywhere, it is no file.
        let bytes = third.bytes();
        for end in 0..bytes.len() {
            assert_eq!(
                Settled::parse(&bytes[..end]),
                Settled::default(),
                "cut at {end}"
            );
        }
    }
}
