//! What binder reads about *processes* (never about the topology: hwloc owns that): a
//! process's parent, process group, start time and command name (`/proc/PID/stat`), and
//! its owner and real CPU affinity (`/proc/PID/status`). The node ledger checks every
//! entry against these, and job identity walks up to the launcher's daemon with them.
//!
//! Behind the [`Procs`] trait so tests can describe processes that do not exist. Every
//! read is bounded (a status file is a few KiB; more is refused) and every number parsed
//! is checked, so a hostile `comm` (it may hold spaces and parentheses) cannot confuse it.

mod others;
pub mod settled;

pub use others::MAX_PROCESSES;

/// The biggest `/proc` file read (status files are about 1.5 KiB).
const MAX_PROC_BYTES: u64 = 64 << 10;

/// From `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// The command name (`comm`, at most 15 bytes).
    pub comm: String,
    /// The state letter: `Z` (zombie) and `X` (dead) mean the process has ended even
    /// though its `/proc` entry is still there.
    pub state: char,
    /// Parent PID.
    pub ppid: u32,
    /// Process group.
    pub pgrp: u32,
    /// Start time in clock ticks since boot: with the PID, names one process for the
    /// whole uptime (a PID is reused, the pair is not).
    pub start: u64,
    /// `num_threads`: the process's live threads. A process whose main thread exited
    /// (`pthread_exit` in `main`) is a zombie leader whose workers still run.
    pub threads: u64,
}

/// From `/proc/PID/status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Real user id.
    pub uid: u32,
    /// `Cpus_allowed_list`: the main thread's affinity, OS numbers ascending.
    pub cpus: Vec<usize>,
}

/// Another user's process as the kernel shows it ([`Procs::others`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other {
    /// Its PID.
    pub pid: u32,
    /// Its owner (effective uid).
    pub uid: u32,
    /// Every thread's affinity (OS numbers, ascending), at most `MAX_THREADS` threads.
    pub threads: Vec<Vec<usize>>,
}

/// The most ancestors [`Procs::lineage`] walks (a deeper tree is cut there).
pub const MAX_LINEAGE: usize = 64;

/// Reads processes; [`Real`] reads `/proc`.
pub trait Procs {
    /// This process's PID.
    fn me(&self) -> u32;
    /// A process's stat line, `None` when it does not exist or cannot be read.
    fn stat(&self, pid: u32) -> Option<Stat>;
    /// A process's status, `None` when it does not exist or cannot be read.
    fn status(&self, pid: u32) -> Option<Status>;
    /// This process and its ancestors, as (PID, start time), nearest first, at most
    /// [`MAX_LINEAGE`] of them: a task runs inside what they hold (a plugin that bound
    /// this process before a wrapper ran in it, a bound batch shell or broker), so their
    /// claims are its envelope, never another job's (SEMANTICS §4.2).
    fn lineage(&self) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let mut pid = self.me();
        while pid > 1 && out.len() < MAX_LINEAGE {
            let Some(stat) = self.stat(pid) else { break };
            out.push((pid, stat.start));
            pid = stat.ppid;
        }
        out
    }
    /// Every thread's affinity (`/proc/PID/task/*/status`, at most `MAX_THREADS`
    /// threads), `None` when the process cannot be read. A task is held where *any* of
    /// its threads may run, so the main thread's list alone is not enough.
    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        self.status(pid).map(|s| vec![s.cpus])
    }
    /// Every live PID (`/proc`'s directory), `None` when unknown: one directory read
    /// answers for thousands of names that a `/proc/PID/stat` each would cost.
    fn pids(&self) -> Option<std::collections::HashSet<u32>> {
        None
    }
    /// The node's online CPUs (`/sys/devices/system/cpu/online`), `None` when unknown: a
    /// thread that may run on all of them is bound by nobody.
    fn online(&self) -> Option<Vec<usize>> {
        None
    }
    /// The CPUs a thread bound by nobody may run on: the online CPUs, less those the
    /// system keeps from every process (PID 1's affinity: `isolcpus`, systemd's
    /// `CPUAffinity=`). A thread allowed on all of them is not bound.
    fn everywhere(&self) -> Option<Vec<usize>> {
        self.online()
    }
    /// Every process of a user other than `me` and root, with every thread's affinity
    /// (SEMANTICS §13.2: between users, the kernel's view decides); `None` when `/proc`
    /// cannot be listed.
    fn others(&self, me: u32) -> Option<Vec<Other>> {
        let mut out = Vec::new();
        for pid in self.pids()? {
            let Some(status) = self.status(pid) else {
                continue;
            };
            if status.uid == me || status.uid == 0 {
                continue;
            }
            if let Some(threads) = self.threads(pid) {
                out.push(Other {
                    pid,
                    uid: status.uid,
                    threads,
                });
            }
        }
        out.sort_by_key(|o| o.pid);
        Some(out)
    }
    /// [`Procs::others`], skipping root's long-lived processes remembered ([`settled`]:
    /// `before` is the mark's record, `roots` reads the settled roots when the look lists
    /// `/proc`), with what this look found of root's processes for the next one (a fake
    /// remembers nothing).
    fn others_settled(
        &self,
        me: u32,
        before: &settled::Settled,
        roots: &dyn Fn() -> settled::Settled,
    ) -> Option<(Vec<Other>, settled::Settled)> {
        let _ = (before, roots);
        Some((self.others(me)?, settled::Settled::default()))
    }
    /// Every user but `me` and root with a live process (as [`Procs::others`] has them,
    /// without reading a thread); `None` when `/proc` cannot be listed.
    fn users(&self, me: u32) -> Option<std::collections::BTreeSet<u32>> {
        Some(self.others(me)?.into_iter().map(|o| o.uid).collect())
    }
    /// Every process of `me`, with every thread's affinity; `None` when `/proc` cannot
    /// be listed (or, for a test's fake, when it says nothing of them).
    fn mine(&self, _me: u32) -> Option<Vec<Other>> {
        None
    }
    /// The value of `name` in `pid`'s environment (`/proc/PID/environ`, readable for
    /// one's own processes); `None` when unset or unreadable.
    fn environ_var(&self, _pid: u32, _name: &str) -> Option<String> {
        None
    }
    /// Why `/proc` hides other users' processes from this one (`hidepid`, a PID
    /// namespace of its own), when it does.
    fn hidden(&self) -> Option<String> {
        None
    }
    /// Whether a view of the whole node taken through this may be shared with the
    /// user's next launches (`ledger::shared`): the real `/proc`'s, never a test's.
    fn shares_views(&self) -> bool {
        false
    }
    /// The PID namespace this process numbers PIDs in (the inode of `/proc/self/ns/pid`;
    /// 0 when unknown): a claim records it, so a reader knows whether the claim's PID
    /// names a process it can address.
    fn pid_ns(&self) -> u64 {
        0
    }
    /// The main thread's affinity of `pid` by one system call, which `hidepid` does not
    /// hide (`None`: no such process); a fake answers from [`Procs::threads`].
    fn affinity_of(&self, pid: u32) -> Option<Vec<usize>> {
        self.threads(pid)?.into_iter().next()
    }
}

/// The initial PID namespace's inode number (`PROC_PID_INIT_INO`, fixed since Linux 3.8).
pub(crate) const INIT_PID_NS: u64 = 0xEFFF_FFFC;
/// The initial time namespace's inode number (`PROC_TIME_INIT_INO`).
const INIT_TIME_NS: u64 = 0xEFFF_FFFA;

/// The inode of a namespace link of this process (`/proc/self/ns/KIND`): `kind:[N]`.
fn ns_inode(kind: &str) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/self/ns/{kind}")).ok()?;
    link.to_str()?
        .strip_prefix(kind)?
        .strip_prefix(":[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// This process's PID namespace (see [`Procs::pid_ns`]); 0 when it cannot be read.
pub(crate) fn pid_ns() -> u64 {
    static NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NS.get_or_init(|| ns_inode("pid").unwrap_or(0))
}

/// This process's time namespace's boot-clock offset in clock ticks: 0 in the initial
/// one (one `readlink` says so) or where the kernel has none. A time namespace shifts
/// every start time its `/proc` shows and its `CLOCK_BOOTTIME` by this much, so binder
/// takes it off both ([`Real`]'s `stat`, [`crate::ledger::now_ticks`]): start times in
/// claims are then the initial namespace's wherever a launch ran, and a launch in a
/// container with its own boot clock and one outside find each other's claims (#45).
pub(crate) fn boot_offset_ticks() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| {
        if ns_inode("time").is_none_or(|ns| ns == INIT_TIME_NS) {
            return 0;
        }
        read_small("/proc/self/timens_offsets", 4096)
            .ok()
            .and_then(|t| parse_boot_offset(&t, rustix::param::clock_ticks_per_second().max(1)))
            .unwrap_or(0)
    })
}

/// The `boottime SECS NSECS` line of `/proc/PID/timens_offsets`, in `hz` ticks.
pub(crate) fn parse_boot_offset(text: &str, hz: u64) -> Option<i64> {
    let line = text.lines().find(|l| l.starts_with("boottime"))?;
    let mut words = line.split_whitespace().skip(1);
    let secs: i64 = words.next()?.parse().ok()?;
    let nanos: i64 = words.next()?.parse().ok()?;
    let hz = i64::try_from(hz).ok()?;
    secs.checked_mul(hz)?
        .checked_add(nanos.checked_mul(hz)? / 1_000_000_000)
}

/// The most threads of one process whose affinity is read (more are not looked at).
pub(crate) const MAX_THREADS: usize = 4096;

/// The affinity of process `pid` (`None`: this thread) as the kernel has it, OS numbers
/// ascending; `None` when it cannot be read (the process is gone). Any user may read any
/// process's affinity: the envelope reads the launcher daemon's (`crate::envelope`).
pub fn affinity(pid: Option<u32>) -> Option<Vec<usize>> {
    // Large enough for any kernel's mask (65,536 CPUs).
    let mut got = vec![0u64; 1024];
    let pid = pid.map_or(0, |p| libc::pid_t::try_from(p).unwrap_or(-1));
    // SAFETY: the pointer and length describe `got`, which outlives the call; the kernel
    // writes at most `got.len() * 8` bytes.
    let n = unsafe { libc::sched_getaffinity(pid, got.len() * 8, got.as_mut_ptr().cast()) };
    if n != 0 {
        return None;
    }
    let mut read = Vec::new();
    for (w, &word) in got.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            read.push(w * 64 + bits.trailing_zeros() as usize);
            bits &= bits - 1;
        }
    }
    Some(read)
}

/// The real `/proc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Real;

impl Stat {
    /// Whether the process has ended (a zombie not yet reaped still has a stat line; a
    /// zombie *leader* whose other threads run has not).
    pub fn ended(&self) -> bool {
        match self.state {
            'X' | 'x' => true,
            // A zombie leader with live workers still runs where they run (#45).
            'Z' => self.threads <= 1,
            _ => false,
        }
    }
}

impl Procs for Real {
    fn me(&self) -> u32 {
        std::process::id()
    }

    fn stat(&self, pid: u32) -> Option<Stat> {
        let mut stat = parse_stat(&read(&format!("/proc/{pid}/stat"))?)?;
        stat.start = stat.start.saturating_add_signed(-boot_offset_ticks());
        Some(stat)
    }

    fn status(&self, pid: u32) -> Option<Status> {
        parse_status(&read(&format!("/proc/{pid}/status"))?)
    }

    fn pid_ns(&self) -> u64 {
        pid_ns()
    }

    fn affinity_of(&self, pid: u32) -> Option<Vec<usize>> {
        affinity(Some(pid))
    }

    fn online(&self) -> Option<Vec<usize>> {
        read("/sys/devices/system/cpu/online").and_then(|t| parse_list(t.trim()))
    }

    fn everywhere(&self) -> Option<Vec<usize>> {
        let online = self.online()?;
        match affinity(Some(1)).filter(|a| !a.is_empty()) {
            Some(init) => Some(
                online
                    .into_iter()
                    .filter(|c| init.binary_search(c).is_ok())
                    .collect(),
            ),
            None => Some(online),
        }
    }

    fn others(&self, me: u32) -> Option<Vec<Other>> {
        others::others(me)
    }

    fn others_settled(
        &self,
        me: u32,
        before: &settled::Settled,
        roots: &dyn Fn() -> settled::Settled,
    ) -> Option<(Vec<Other>, settled::Settled)> {
        others::others_settled(me, before, roots)
    }

    fn hidden(&self) -> Option<String> {
        others::hidden(rustix::process::geteuid().as_raw())
    }

    fn users(&self, me: u32) -> Option<std::collections::BTreeSet<u32>> {
        others::users(me)
    }

    fn shares_views(&self) -> bool {
        true
    }

    fn mine(&self, me: u32) -> Option<Vec<Other>> {
        others::mine(me)
    }

    fn environ_var(&self, pid: u32, name: &str) -> Option<String> {
        // An environment may be megabytes; binder's variables are set by binder at exec,
        // so a bounded read that does not find one counts as unset.
        let env = read_small(&format!("/proc/{pid}/environ"), 1 << 20).ok()?;
        env.split('\0')
            .find_map(|e| e.strip_prefix(name)?.strip_prefix('='))
            .map(str::to_owned)
    }

    fn pids(&self) -> Option<std::collections::HashSet<u32>> {
        let dir = std::fs::read_dir("/proc").ok()?;
        Some(
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect(),
        )
    }

    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        let dir = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
        let mut out = Vec::new();
        for entry in dir.take(MAX_THREADS).flatten() {
            let tid = entry.file_name();
            let Some(tid) = tid.to_str().and_then(|t| t.parse::<u32>().ok()) else {
                continue;
            };
            // One system call, for any user's thread; a thread that ended meanwhile is
            // simply not there any more.
            if let Some(cpus) = affinity(Some(tid)) {
                out.push(cpus);
            }
        }
        (!out.is_empty()).then_some(out)
    }
}

fn read(path: &str) -> Option<String> {
    read_small(path, MAX_PROC_BYTES as usize).ok()
}

/// A small kernel file, whole, in `open`, `read` (until end of file, see below), `close`: std's
/// `read_to_string` adds a `statx` and an `lseek` per file (procfs and sysfs report size
/// 0), about a third of the syscalls of a warm launch's reads. At most `max` bytes are
/// read; bytes that are not UTF-8 are replaced (a `comm` may hold any byte), so a file
/// always reads as text.
pub(crate) fn read_small(path: &str, max: usize) -> std::io::Result<String> {
    use rustix::fs::{Mode, OFlags};
    // rustix's `open` and `read` are these very syscalls, without std's extra ones; the
    // descriptor closes when dropped.
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    // Half a page holds a stat line, a CPU list, a boot id and a status file (about
    // 1.4 KiB) in one `read`; a larger file doubles the buffer.
    let mut buf = vec![0u8; 2048.min(max.max(1))];
    let mut len = 0;
    let result = loop {
        if len == buf.len() {
            if len >= max {
                break Ok(());
            }
            buf.resize((len * 2).min(max), 0);
        }
        match rustix::io::read(&fd, &mut buf[len..]) {
            Ok(0) => break Ok(()),
            // procfs and sysfs fill a read with every record that fits (seq_file) or
            // the whole attribute (kernfs), so a read that leaves more than half the
            // buffer empty reached the end: the read that would return 0 is skipped
            // (one syscall per file on the warm path). Records longer than half the
            // buffer would defeat this; none of the files read here has them.
            Ok(n) if len + n < buf.len() / 2 => {
                len += n;
                break Ok(());
            }
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => break Err(std::io::Error::from(e)),
        }
    };
    drop(fd);
    result?;
    buf.truncate(len);
    Ok(match String::from_utf8(buf) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// [`Real`], with this process's own stat line read once: a launch asks for it twice
/// (its start time, and its parent and process group for the job's identity).
#[derive(Debug)]
pub(crate) struct RealOnce {
    me: u32,
    stat: Option<Stat>,
}

impl RealOnce {
    /// Reads this process's stat line now.
    pub(crate) fn new() -> RealOnce {
        let me = std::process::id();
        RealOnce {
            me,
            stat: Real.stat(me),
        }
    }
}

impl Default for RealOnce {
    fn default() -> RealOnce {
        RealOnce::new()
    }
}

impl Procs for RealOnce {
    fn me(&self) -> u32 {
        self.me
    }

    fn stat(&self, pid: u32) -> Option<Stat> {
        if pid == self.me {
            self.stat.clone()
        } else {
            Real.stat(pid)
        }
    }

    fn status(&self, pid: u32) -> Option<Status> {
        Real.status(pid)
    }

    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        Real.threads(pid)
    }

    fn online(&self) -> Option<Vec<usize>> {
        Real.online()
    }

    fn pids(&self) -> Option<std::collections::HashSet<u32>> {
        Real.pids()
    }

    fn everywhere(&self) -> Option<Vec<usize>> {
        Real.everywhere()
    }

    fn others(&self, me: u32) -> Option<Vec<Other>> {
        Real.others(me)
    }

    fn others_settled(
        &self,
        me: u32,
        before: &settled::Settled,
        roots: &dyn Fn() -> settled::Settled,
    ) -> Option<(Vec<Other>, settled::Settled)> {
        Real.others_settled(me, before, roots)
    }

    fn pid_ns(&self) -> u64 {
        Real.pid_ns()
    }

    fn affinity_of(&self, pid: u32) -> Option<Vec<usize>> {
        Real.affinity_of(pid)
    }

    fn hidden(&self) -> Option<String> {
        Real.hidden()
    }

    fn users(&self, me: u32) -> Option<std::collections::BTreeSet<u32>> {
        Real.users(me)
    }

    fn shares_views(&self) -> bool {
        Real.shares_views()
    }

    fn mine(&self, me: u32) -> Option<Vec<Other>> {
        Real.mine(me)
    }

    fn environ_var(&self, pid: u32, name: &str) -> Option<String> {
        Real.environ_var(pid, name)
    }
}

/// Parses a stat line. `comm` sits in parentheses and may itself hold `)` and spaces, so
/// the fields are read after the *last* `)`.
pub(crate) fn parse_stat(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let comm = line.get(open + 1..close)?.to_owned();
    // After ") ": state(3) ppid(4) pgrp(5) session(6) ... starttime(22).
    let rest: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        comm,
        state: rest.first()?.chars().next()?,
        ppid: u32::try_from(field(4)?).ok()?,
        pgrp: u32::try_from(field(5)?).ok()?,
        start: field(22)?,
        threads: field(20).unwrap_or(1),
    })
}

/// Parses a status file's `Uid:` (the real one) and `Cpus_allowed_list:` lines.
pub(crate) fn parse_status(text: &str) -> Option<Status> {
    let mut uid = None;
    let mut cpus = None;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Uid:") {
            uid = v.split_whitespace().next().and_then(|u| u.parse().ok());
        } else if let Some(v) = line.strip_prefix("Cpus_allowed_list:") {
            cpus = parse_list(v.trim());
        }
    }
    Some(Status {
        uid: uid?,
        cpus: cpus?,
    })
}

/// The largest CPU number binder reads in a list (hwloc's own limit is far below).
pub(crate) const MAX_CPU: usize = 1 << 20;

/// Parses a kernel CPU list (`0-3,8,10-11`) into ascending numbers; `None` when malformed
/// or naming a CPU above `MAX_CPU`. An empty string is the empty list.
pub fn parse_list(text: &str) -> Option<Vec<usize>> {
    parse_list_max(text, MAX_CPU + 1)
}

/// [`parse_list`] of at most `max` numbers before deduplication (`None` past that), for
/// lists another user wrote: `0-1048576` repeated would otherwise expand to billions.
/// The reader is [`crate::cpulist::parse_ranges`], the one every range list goes through.
pub fn parse_list_max(text: &str, max: usize) -> Option<Vec<usize>> {
    crate::cpulist::parse_ranges(text, MAX_CPU, max)
        .ok()
        .map(|r| r.values)
}

/// This process's effective uid: whose files the ledger writes, whose processes are
/// "this user's".
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A uid's login name (`getpwuid_r`), or the number when it has none.
pub fn user_name(uid: u32) -> String {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: zeroed passwd is a valid out-parameter; it is only read after success.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer describes memory that lives across the call; `buf.len()` is
    // its size.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pw.pw_name.is_null() {
        return uid.to_string();
    }
    // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`.
    unsafe { std::ffi::CStr::from_ptr(pw.pw_name) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_hostile_comm() {
        // Field numbers from proc(5): ppid 4, pgrp 5, starttime 22.
        let line =
            "4242 (a) b) c) S 17 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                comm: "a) b) c".into(),
                state: 'S',
                ppid: 17,
                pgrp: 4240,
                start: 987654,
                threads: 1
            })
        );
        assert_eq!(parse_stat("4242 (x) S 17"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_zombie_leader_with_live_threads_has_not_ended() {
        // num_threads is field 20 (proc(5)).
        let stat = |state: char, threads: u32| {
            parse_stat(&format!(
                "4242 (app) {state} 17 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 {threads} 0 987654 1000 200"
            ))
            .unwrap()
        };
        assert!(!stat('Z', 3).ended(), "main thread exited, workers run");
        assert!(stat('Z', 1).ended());
        assert!(stat('X', 3).ended());
        assert!(!stat('S', 1).ended());
    }

    #[test]
    fn status_lines() {
        let text = "Name:\tsleep\nUid:\t1000\t1000\t1000\t1000\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1,4\n";
        assert_eq!(
            parse_status(text),
            Some(Status {
                uid: 1000,
                cpus: vec![0, 1, 4]
            })
        );
        assert_eq!(parse_status("Uid:\t1000\n"), None);
    }

    #[test]
    fn time_namespace_offsets_in_ticks() {
        let text = "monotonic           0         0\nboottime       100000         0\n";
        assert_eq!(parse_boot_offset(text, 100), Some(10_000_000));
        // Negative offsets, nanoseconds: 2.5 s back at 100 Hz is 250 ticks.
        let text = "monotonic 0 0\nboottime -3 500000000\n";
        assert_eq!(parse_boot_offset(text, 100), Some(-250));
        assert_eq!(parse_boot_offset("monotonic 0 0\n", 100), None);
        assert_eq!(
            parse_boot_offset("boottime 99999999999999999 0\n", 100),
            None
        );
    }

    #[test]
    fn lists() {
        assert_eq!(parse_list("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_list(""), Some(vec![]));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(parse_list("0-99999999999"), None);
        assert_eq!(parse_list("a"), None);
        assert_eq!(parse_list_max("0-3,8", 5), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_list_max("0-3,8", 4), None);
        assert_eq!(parse_list_max(&"0-1048576,".repeat(1000), 65_536), None);
    }

    #[test]
    fn this_process_reads_back() {
        let me = Real.me();
        let stat = Real.stat(me).expect("own stat");
        assert_eq!(stat.ppid, std::os::unix::process::parent_id());
        let status = Real.status(me).expect("own status");
        // SAFETY: getuid has no preconditions.
        assert_eq!(status.uid, rustix::process::getuid().as_raw());
        assert!(!status.cpus.is_empty());
    }
}
