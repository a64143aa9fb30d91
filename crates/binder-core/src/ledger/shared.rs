//! The kernel's view, taken once and shared by the user's launches that follow within
//! [`FRESH`] (SEMANTICS §13.3).
//!
//! A look at the whole node costs a system call per thread of every other user: a
//! co-tenant's 8,000 idle threads made each of 64 concurrent launches pay for them
//! again, one after the other under the user's lock (#45: launches took 0.7 s at the
//! median instead of 21 ms). One launch now writes what it saw in the user's own
//! directory (`kview`: nobody else can write there), and the user's launches within
//! [`FRESH`] of it read that instead of looking again; every claim another user wrote is
//! still checked against its own process *now* ([`super::kernel::KernelView::ask`]), so
//! a rival that bound since is seen. Only a task another user bound without a claim in
//! the last [`FRESH`] can be missed, as one bound just after any look is.
//!
//! The file holds the bound processes alone, a line each: `PID UID CPUS`, and the look's
//! record for the next look (`crate::procfs::settled`: where it left the PID counter, the
//! processes it found), which a look within the window after it reads instead of listing
//! `/proc`.

use std::io::Write;
use std::os::fd::AsFd;
use std::time::{Duration, SystemTime};

use rustix::fs::{self as rfs, FileType, Mode, OFlags};

use super::kernel::{KernelView, Seen};
use super::store::{RootRead, Stamp};
use crate::procfs::settled::Settled;
use crate::procfs::Procs;

/// How long a view taken by one launch serves the user's next ones: 100 ms still let a
/// burst of 64 launches beside 8,000 idle threads take 2-4.6x its unattacked time (one
/// look per 100 ms, each slow under the burst); 250 ms keeps it within 2x.
pub const FRESH: Duration = Duration::from_millis(250);
/// The shared view's name in the user's own directory.
pub(crate) const NAME: &str = super::own_dir::VIEW;
/// The longest file read (a line per bound process).
const MAX_BYTES: u64 = 8 << 20;
const HEADER: &str = "binder-kview 3";

/// The view this user's last launch took within [`FRESH`], when there is one and
/// `afresh` is not asked, else a new look, written for the next launches; `None` when
/// `/proc` cannot be listed.
pub(crate) fn look(
    dir: &impl AsFd,
    procs: &dyn Procs,
    me: u32,
    afresh: bool,
) -> Option<KernelView> {
    if !procs.shares_views() {
        return KernelView::look(procs, me);
    }
    // One file holds the last look's view and where it left the PID counter: one read
    // serves a launch within `FRESH` (the view) or the look after (the mark).
    // Only a whole file counts, without its last line.
    let last = read_aged(dir, NAME, me, Duration::MAX).and_then(|(mut text, age)| {
        text.truncate(complete(&text)?.len());
        Some((text, age))
    });
    if let Some(view) = last
        .as_ref()
        .filter(|(_, age)| !afresh && *age < FRESH)
        .and_then(|(text, _)| parse(text, me))
    {
        return Some(view);
    }
    // Root's long-lived processes the last look found are not looked at one by one
    // again (`crate::procfs::settled`, SEMANTICS §13.5): a look within the window after
    // the last reads and writes the small mark's record alone; one that lists `/proc`
    // reads the settled roots too, and writes them.
    let before = last.map_or_else(Settled::default, |(text, _)| {
        Settled::from_lines(text.lines())
    });
    let roots = || {
        read_aged_bytes(dir, ROOTS_NAME, me, Duration::MAX)
            .map_or_else(Settled::default, |(bytes, _)| Settled::parse_roots(&bytes))
    };
    let (view, after) = KernelView::look_settled(procs, me, &before, &roots)?;
    if after.listing {
        replace(dir, ROOTS_NAME, &after.roots_bytes());
    }
    // Every look's mark differs from the last (the PID counter moves), so the file is
    // written without comparing the two. A look within the window needs its lines
    // alone; a roots' file left from an earlier listing only costs the next listing
    // `statat`s.
    write(dir, &view, &after);
    Some(view)
}

/// The name of the settled root processes a listing found (`crate::procfs::settled`) in
/// the user's own directory.
const ROOTS_NAME: &str = super::own_dir::ROOTS;

/// The text of the file `name` of this user's directory, with its age, when it is this
/// user's own regular file, written within `fresh`.
pub(super) fn read_aged(
    dir: &impl AsFd,
    name: &str,
    me: u32,
    fresh: Duration,
) -> Option<(String, Duration)> {
    let (bytes, age) = read_aged_bytes(dir, name, me, fresh)?;
    Some((String::from_utf8(bytes).ok()?, age))
}

/// [`read_aged`], as bytes.
fn read_aged_bytes(
    dir: &impl AsFd,
    name: &str,
    me: u32,
    fresh: Duration,
) -> Option<(Vec<u8>, Duration)> {
    let fd = rfs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let st = rfs::fstat(&fd).ok()?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || st.st_uid != me
        || st.st_size as u64 > MAX_BYTES
    {
        return None;
    }
    let written = SystemTime::UNIX_EPOCH
        + Duration::new(
            u64::try_from(st.st_mtime).ok()?,
            u32::try_from(st.st_mtime_nsec).ok()?,
        );
    // A clock that went back makes the file look young: then it is not trusted.
    let age = SystemTime::now().duration_since(written).ok()?;
    if age >= fresh {
        return None;
    }
    let mut bytes = crate::input::read_sized(
        std::fs::File::from(fd),
        u64::try_from(st.st_size).ok()?,
        MAX_BYTES,
    )
    .ok()?;
    bytes.truncate(usize::try_from(MAX_BYTES).unwrap_or(usize::MAX));
    Some((bytes, age))
}

/// The name of the shared read of the ledger root in the user's own directory.
pub(crate) const ROOT_NAME: &str = super::own_dir::ROOT_READ;
const ROOT_HEADER: &str = "binder-rview 3";

/// The other directories the user's last launch found in the ledger root within
/// `fresh`, with the root's stamp then (`None`: it had just changed), and how long ago.
/// A launch beside a flood of names reads them instead of listing the root again (a
/// 400,000-name root takes the whole 250 ms budget to list): as they are while the stamp
/// holds (no name made or removed there since: `super::store::Stamp`), else as the names
/// to read again beside the canonical ones looked up (`super::root`: a root that churns).
pub(crate) fn read_root(dir: &impl AsFd, me: u32, fresh: Duration) -> Option<(RootRead, Duration)> {
    let (text, age) = read_aged(dir, ROOT_NAME, me, fresh)?;
    let mut lines = text.lines();
    if lines.next()? != ROOT_HEADER {
        return None;
    }
    let stamp = lines.next()?.strip_prefix("stamp ")?;
    let stamp = if stamp == "none" {
        None
    } else {
        let mut words = stamp.split(' ');
        let mut number = || words.next()?.parse::<i64>().ok();
        Some(Stamp {
            links: u64::try_from(number()?).ok()?,
            ctime: (number()?, number()?),
        })
    };
    let mut read = RootRead {
        stamp,
        dirs: Vec::new(),
        incomplete: None,
    };
    for line in lines {
        if let Some(why) = line.strip_prefix("partial ") {
            read.incomplete = Some(why.to_owned());
        } else {
            read.dirs.push(dir_line(line)?.to_owned());
        }
    }
    Some((read, age))
}

/// The directory a shared file's `dir NAME` line names: a ledger directory's name in the
/// root, never a path (`None` for anything else, and the file is then no read).
pub(super) fn dir_line(line: &str) -> Option<&str> {
    let name = line.strip_prefix("dir ")?;
    (name.starts_with(super::own_dir::PREFIX) && !name.contains('/')).then_some(name)
}

/// Writes a read of the ledger root for the user's next launches (as [`write`] does).
pub(crate) fn write_root(dir: &impl AsFd, read: &RootRead) {
    let stamp = read.stamp.map_or_else(
        || "none".to_owned(),
        |s| format!("{} {} {}", s.links, s.ctime.0, s.ctime.1),
    );
    let mut text = format!("{ROOT_HEADER}\nstamp {stamp}\n");
    if let Some(why) = &read.incomplete {
        text.push_str(&format!("partial {}\n", why.replace('\n', " ")));
    }
    for name in &read.dirs {
        text.push_str(&format!("dir {name}\n"));
    }
    replace(dir, ROOT_NAME, text.as_bytes());
}

/// A view from the file's text (see the module doc).
fn parse(text: &str, me: u32) -> Option<KernelView> {
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    // Whether /proc hides anything is what the look that wrote the file found (a line
    // below says so): not asked again.
    let mut view = KernelView::empty(me);
    view.whole = true;
    view.stale = true;
    for line in lines {
        if let Some(why) = line.strip_prefix("hidden ") {
            view.hidden = Some(why.to_owned());
            continue;
        }
        // The look's record for the next look (`Settled::mark_lines`).
        if line
            .split_once(' ')
            .is_some_and(|(kind, _)| Settled::LINE_KINDS.contains(&kind))
        {
            continue;
        }
        let mut f = line.split(' ');
        let (Some(pid), Some(uid), Some(cpus), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            return None;
        };
        let cpus = crate::procfs::parse_list(cpus)?;
        view.procs.insert(
            pid.parse().ok()?,
            Seen {
                uid: uid.parse().ok()?,
                cpus,
            },
        );
    }
    Some(view)
}

/// Writes `view` for the next launches, and the look's record for the next look
/// (`mark`: `crate::procfs::settled`), over the last in place: every launch reads and
/// writes it under the user's lock, and creating a file and renaming it over the last
/// (as [`replace`] does) cost twice as much (60 against 30 us on the 2-CPU VM). A launch
/// killed while writing leaves a file without its last line (`end`), which is no file
/// ([`complete`]). A failure costs the next launches a look of their own.
fn write(dir: &impl AsFd, view: &KernelView, mark: &Settled) {
    let mut text = format!("{HEADER}\n");
    mark.mark_lines(&mut text);
    if let Some(why) = &view.hidden {
        text.push_str(&format!("hidden {}\n", why.replace('\n', " ")));
    }
    for (pid, seen) in view.procs.iter().filter(|(_, s)| !s.cpus.is_empty()) {
        text.push_str(&format!(
            "{pid} {} {}\n",
            seen.uid,
            crate::cpulist::cpu_list(&seen.cpus)
        ));
    }
    text.push_str(END);
    let Ok(fd) = rfs::openat(
        dir,
        NAME,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) else {
        return;
    };
    if std::fs::File::from(fd).write_all(text.as_bytes()).is_err() {
        let _ = rfs::unlinkat(dir, NAME, rfs::AtFlags::empty());
    }
}

/// The shared view's last line.
const END: &str = "end\n";

/// The shared view's text without its last line, when the file is whole (see [`write`]).
fn complete(text: &str) -> Option<&str> {
    text.strip_suffix(END)
        .filter(|body| body.is_empty() || body.ends_with('\n'))
}

/// Writes `text` as the file `name` of this user's directory: under a private name, then
/// renamed into place, so a reader sees the old file or the new one. A failure costs the
/// next launches a look of their own.
pub(super) fn replace(dir: &impl AsFd, name: &str, bytes: &[u8]) {
    let tmp = format!("{name}.{}", std::process::id());
    let Ok(fd) = rfs::openat(
        dir,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) else {
        return;
    };
    let mut file = std::fs::File::from(fd);
    if file.write_all(bytes).is_err() || rfs::renameat(dir, tmp.as_str(), dir, name).is_err() {
        let _ = rfs::unlinkat(dir, tmp.as_str(), rfs::AtFlags::empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node whose one other process (pid 7 of uid 1001) runs on CPU 1 of 0-3.
    struct Node {
        looks: std::cell::Cell<usize>,
    }

    impl Procs for Node {
        fn me(&self) -> u32 {
            1
        }
        fn stat(&self, _: u32) -> Option<crate::procfs::Stat> {
            None
        }
        fn status(&self, _: u32) -> Option<crate::procfs::Status> {
            None
        }
        fn online(&self) -> Option<Vec<usize>> {
            Some(vec![0, 1, 2, 3])
        }
        fn others(&self, _: u32) -> Option<Vec<crate::procfs::Other>> {
            self.looks.set(self.looks.get() + 1);
            Some(vec![
                crate::procfs::Other {
                    pid: 7,
                    uid: 1001,
                    threads: vec![vec![1], vec![0, 1, 2, 3]],
                },
                crate::procfs::Other {
                    pid: 8,
                    uid: 1002,
                    threads: vec![vec![0, 1, 2, 3]],
                },
            ])
        }
        fn shares_views(&self) -> bool {
            true
        }
    }

    #[test]
    fn one_look_serves_the_launches_that_follow() {
        let dir = std::env::temp_dir().join(format!("binder-kview-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fd = rfs::open(&dir, OFlags::DIRECTORY | OFlags::RDONLY, Mode::empty()).unwrap();
        let me = rustix::process::geteuid().as_raw();
        let node = Node {
            looks: Default::default(),
        };
        let first = look(&fd, &node, me, false).unwrap();
        let second = look(&fd, &node, me, false).unwrap();
        assert_eq!(
            node.looks.get(),
            1,
            "the second launch read the first's view"
        );
        assert!(second.whole && second.stale);
        // A launch about to refuse looks afresh, whatever is shared (SEMANTICS §13.4).
        let fresh = look(&fd, &node, me, true).unwrap();
        assert_eq!(node.looks.get(), 2, "looked again");
        assert!(!fresh.stale);
        node.looks.set(1);
        // The bound process, as the look saw it; the unbound one holds nothing either way.
        assert_eq!(second.procs.get(&7), first.procs.get(&7));
        assert_eq!(second.procs[&7].cpus, [1]);
        assert!(!second.procs.contains_key(&8));
        // Past FRESH, a launch looks again.
        std::thread::sleep(FRESH);
        look(&fd, &node, me, false).unwrap();
        assert_eq!(node.looks.get(), 2);
        // A file of another shape is not a view: looked at again, and replaced.
        std::fs::write(dir.join(NAME), "junk\n").unwrap();
        look(&fd, &node, me, false).unwrap();
        assert_eq!(node.looks.get(), 3);
        let whole = std::fs::read_to_string(dir.join(NAME)).unwrap();
        assert!(whole.starts_with(HEADER) && whole.ends_with(END));
        // A file a launch killed while writing it left is cut short: no view either.
        for end in 0..whole.len() {
            assert_eq!(complete(&whole[..end]), None, "cut at {end}");
        }
        std::fs::write(dir.join(NAME), &whole[..whole.len() - END.len()]).unwrap();
        look(&fd, &node, me, false).unwrap();
        assert_eq!(node.looks.get(), 4);
        // The look's record for the next look is no part of the view.
        let with_mark =
            format!("{HEADER}\nmark 7 99 5 4194304 1\nheld 9 90 1 2\nuser 41\n7 1001 1\n");
        let view = parse(&with_mark, me).expect("a view with its mark lines");
        assert_eq!(view.procs.keys().collect::<Vec<_>>(), [&7]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
