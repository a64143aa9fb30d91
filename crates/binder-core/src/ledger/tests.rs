//! The ledger's trust rules and its settling of overlaps, on processes described by hand,
//! and its directories on a scratch root.

use super::*;
use crate::procfs::{Procs, Stat, Status};
use std::collections::HashMap;

/// Processes: pid → (uid, start, every thread's affinity); PID 66 is a zombie.
struct Fake(HashMap<u32, (u32, u64, Vec<Vec<usize>>)>);

impl Procs for Fake {
    fn me(&self) -> u32 {
        1
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        self.0.get(&pid).map(|(_, start, _)| Stat {
            comm: "app".into(),
            state: if pid == 66 { 'Z' } else { 'S' },
            ppid: 1,
            pgrp: pid,
            start: *start,
            threads: 1,
        })
    }
    fn status(&self, pid: u32) -> Option<Status> {
        self.0.get(&pid).map(|(uid, _, threads)| Status {
            uid: *uid,
            cpus: threads[0].clone(),
        })
    }
    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        self.0.get(&pid).map(|(_, _, threads)| threads.clone())
    }
    /// A node of 8 CPUs.
    fn online(&self) -> Option<Vec<usize>> {
        Some((0..8).collect())
    }
}

fn procs(list: &[(u32, u32, u64, &[&[usize]])]) -> Fake {
    Fake(
        list.iter()
            .map(|&(pid, uid, start, threads)| {
                (
                    pid,
                    (uid, start, threads.iter().map(|t| t.to_vec()).collect()),
                )
            })
            .collect(),
    )
}

fn claim(pid: u32, start: u64, cpus: &[usize], gpus: &[&str]) -> Claim {
    Claim {
        format: FORMAT,
        job: JobId("test:1".into()),
        rank: 0,
        size: 1,
        pid,
        start,
        cpus: cpus.to_vec(),
        gpus: gpus.iter().map(|g| (*g).to_owned()).collect(),
        pack: Pack::Fill,
        unit: "core".into(),
        places: cpus.len(),
        pidns: 0,
    }
}

/// A claim of `c`'s, in uid 1000's directory under the name of (10, 50).
fn check(c: &Claim, procs: &Fake) -> Result<Vec<usize>, String> {
    let text = serde_json::to_string(c).unwrap();
    verify_claim(1000, (10, 50), || Ok(text), true, procs).map(|h| h.cpus)
}

#[test]
fn a_bound_live_task_holds_what_its_threads_may_use() {
    let p = procs(&[(10, 1000, 50, &[&[0, 1]])]);
    assert_eq!(check(&claim(10, 50, &[0, 1], &[]), &p), Ok(vec![0, 1]));
    // Narrowed threads (OpenMP) hold only where they may run: `taskset -c 0` inside a
    // claim of 0-1 holds 0, not 1.
    let p = procs(&[(10, 1000, 50, &[&[0], &[0]])]);
    assert_eq!(check(&claim(10, 50, &[0, 1], &[]), &p), Ok(vec![0]));
    let p = procs(&[(10, 1000, 50, &[&[0], &[1]])]);
    assert_eq!(check(&claim(10, 50, &[0, 1, 2], &[]), &p), Ok(vec![0, 1]));
    // An unbound task holds no CPU, only its GPUs.
    let p = procs(&[(10, 1000, 50, &[&[0, 1, 2, 3]])]);
    assert_eq!(
        check(&claim(10, 50, &[], &["0000:01:00.0"]), &p),
        Ok(vec![])
    );
}

#[test]
fn forged_or_stale_claims_count_for_nothing() {
    let c = claim(10, 50, &[0], &[]);
    let err = |p: &Fake| check(&c, p).unwrap_err();
    // Dead, a zombie, a reused PID.
    assert!(err(&procs(&[])).contains("pid 10 is gone"));
    let zombie = claim(66, 50, &[0], &[]);
    let text = serde_json::to_string(&zombie).unwrap();
    let p = procs(&[(66, 1000, 50, &[&[0]])]);
    assert!(verify_claim(1000, (66, 50), || Ok(text), true, &p).is_err());
    assert!(err(&procs(&[(10, 1000, 99, &[&[0]])])).contains("another process"));
    // Any thread wider than the claim (an unbound `sleep` beside a forged claim).
    assert!(err(&procs(&[(10, 1000, 50, &[&[0, 1]])])).contains("not inside"));
    assert!(err(&procs(&[(10, 1000, 50, &[&[0], &[0, 1]])])).contains("not inside"));
    // Another user's process named in my file.
    assert!(err(&procs(&[(10, 0, 50, &[&[0]])])).contains("belongs to uid 0"));
    // Content naming another process than the name; another format; junk; too many GPUs.
    let p = procs(&[(10, 1000, 50, &[&[0]])]);
    assert!(check(&claim(11, 50, &[0], &[]), &p)
        .unwrap_err()
        .contains("another process"));
    let mut old = c.clone();
    old.format = 1;
    assert!(check(&old, &p).unwrap_err().contains("format 1"));
    let junk = verify_claim(1000, (10, 50), || Ok("\u{1b}[2J{".into()), true, &p);
    assert!(junk.unwrap_err().starts_with("corrupt"));
    let many: Vec<String> = (0..300).map(|g| format!("{g}")).collect();
    let mut greedy = c.clone();
    greedy.gpus = many;
    assert!(check(&greedy, &p).unwrap_err().contains("too many GPUs"));
    // CPU numbers far beyond the node are just numbers; never a crash.
    let huge = claim(10, 50, &[2_147_483_648], &[]);
    assert!(check(&huge, &p).is_err());
}

#[test]
fn a_dead_claim_is_not_even_read() {
    let read = || -> Result<String, String> { panic!("read a dead claim") };
    assert!(verify_claim(1000, (10, 50), read, true, &procs(&[])).is_err());
}

fn holder(pid: u32, start: u64, cpus: &[usize], gpus: &[&str], confirmed: bool) -> Holder {
    Holder {
        owner: 1001,
        claim: claim(pid, start, cpus, gpus),
        cpus: cpus.to_vec(),
        confirmed,
    }
}

#[test]
fn overlaps_are_settled_by_confirmation_then_priority() {
    let me = (100, 7);
    let gpu = ["0000:01:00.0".to_owned()];
    // Nothing in common.
    assert_eq!(
        verdict(&[0], &[], me, &[holder(8, 50, &[1], &[], true)]),
        Verdict::Clear
    );
    // A confirmed rival goes first whatever its priority (it may not have seen me).
    assert_eq!(
        verdict(&[0], &[], me, &[holder(8, 500, &[0], &[], true)]),
        Verdict::Yield
    );
    // An unconfirmed rival that started earlier goes first.
    assert_eq!(
        verdict(&[0], &[], me, &[holder(8, 50, &[0], &[], false)]),
        Verdict::Yield
    );
    // Same start: the lower PID goes first.
    assert_eq!(
        verdict(&[0], &[], me, &[holder(6, 100, &[0], &[], false)]),
        Verdict::Yield
    );
    assert_eq!(
        verdict(&[0], &[], me, &[holder(8, 100, &[0], &[], false)]),
        Verdict::Wait
    );
    // A later unconfirmed rival: wait for it to move or confirm.
    assert_eq!(
        verdict(&[0], &[], me, &[holder(8, 500, &[0], &[], false)]),
        Verdict::Wait
    );
    // GPUs clash like CPUs, also for unbound tasks.
    assert_eq!(
        verdict(
            &[],
            &gpu,
            me,
            &[holder(8, 500, &[], &["0000:01:00.0"], true)]
        ),
        Verdict::Yield
    );
    assert_eq!(
        verdict(
            &[],
            &gpu,
            me,
            &[holder(8, 500, &[], &["0000:02:00.0"], true)]
        ),
        Verdict::Clear
    );
}

/// A scratch ledger root of this test's own.
fn root(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("binder-ledger-unit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn open(dir: &std::path::Path) -> Ledger {
    let d = dir.display().to_string();
    Ledger::open(&|k| (k == "BINDER_LEDGER_DIR").then(|| d.clone())).unwrap()
}

#[test]
fn each_user_writes_in_a_directory_of_their_own() {
    use std::os::unix::fs::PermissionsExt;
    let dir = root("own");
    let ledger = open(&dir);
    let uid = ledger.uid();
    assert_eq!(ledger.dir(), dir.join(format!("binder-ledger.{uid}")));
    let mode = std::fs::metadata(ledger.dir())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o777,
        0o755,
        "readable by all, writable by its owner alone"
    );
    // A claim written is read back by name, and a plan by its job.
    let me = crate::procfs::Real;
    let (pid, start) = (
        std::process::id(),
        me.stat(std::process::id()).unwrap().start,
    );
    let mut c = claim(pid, start, &[], &["0000:01:00.0"]);
    c.job = JobId("slurm:7.0".into());
    let name = ledger.write_claim(&c).unwrap();
    assert_eq!(name, format!("c.{pid}.{start}.0.slurm_7.0"));
    let own = ledger.list_own(&me);
    assert_eq!(own.live.len(), 1);
    assert!(own.started("slurm_7.0", 0) && !own.started("slurm_7.0", 1));
    let mut scan = Scan::default();
    ledger.scan_own(&own, None, &me, now_ticks(), clock_hz(), &mut scan);
    assert_eq!(scan.gpus(), ["0000:01:00.0"]);
    ledger.withdraw(&name, pid, start);
    assert!(ledger.list_own(&me).live.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_name_taken_by_someone_else_gets_an_unguessable_fallback() {
    let dir = root("taken");
    let uid = rustix::process::geteuid().as_raw();
    // Planted first: a file, then a world-writable directory under this user's name.
    std::fs::write(dir.join(format!("binder-ledger.{uid}")), "x").unwrap();
    // No home and no keyring: the bounded search among names with this user's prefix.
    let d = dir.display().to_string();
    let open = |_: &std::path::Path| {
        Ledger::open_with(&|k| (k == "BINDER_LEDGER_DIR").then(|| d.clone()), || None).unwrap()
    };
    let ledger = open(&dir);
    assert!(ledger.in_fallback());
    let name = ledger
        .dir()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let suffix = name.strip_prefix(&format!("binder-ledger.{uid}.")).unwrap();
    assert_eq!(suffix.len(), 16);
    // The next launch finds the same fallback.
    assert_eq!(open(&dir).dir(), ledger.dir());
    // Even when another user made a hundred names with this user's prefix that sort
    // before it (needs root to make them another user's; CI is root).
    let mut planted = true;
    for n in 0..100 {
        let d = dir.join(format!("binder-ledger.{uid}.{n:016x}"));
        std::fs::create_dir(&d).unwrap();
        planted &= std::os::unix::fs::chown(&d, Some(4242), None).is_ok();
    }
    if planted {
        assert_eq!(open(&dir).dir(), ledger.dir());
    } else {
        eprintln!("SKIPPED (not root): another user's names with this user's prefix");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_root_must_be_safe_from_other_users() {
    use std::os::unix::fs::PermissionsExt;
    let dir = root("unsafe");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let d = dir.display().to_string();
    let e = Ledger::open(&|k| (k == "BINDER_LEDGER_DIR").then(|| d.clone())).unwrap_err();
    assert!(e.contains("not sticky"), "{e}");
    // The setup a site may make (tmpfiles.d `d /run/binder-ledger 1777 root root -`):
    // sticky and open to all, owned by root (here, this user).
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let ledger = Ledger::open(&|k| (k == "BINDER_LEDGER_DIR").then(|| d.clone())).unwrap();
    assert!(ledger.dir().starts_with(&dir));
    assert_eq!(
        Ledger::open(&|k| (k == "BINDER_LEDGER").then(|| "off".into())).unwrap_err(),
        "BINDER_LEDGER=off"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_relative_root_is_refused_and_never_made() {
    let cwd = std::env::current_dir().unwrap();
    let e =
        Ledger::open(&|k| (k == "BINDER_LEDGER_DIR").then(|| "ledger-here".into())).unwrap_err();
    assert!(e.contains("relative") && e.contains("ledger-here"), "{e}");
    assert!(!cwd.join("ledger-here").exists());
}

#[test]
fn a_late_rank_sees_live_tasks_and_reserved_units_alike() {
    let mut scan = Scan::default();
    scan.holders
        .push(holder(8, 50, &[2, 3], &["0000:01:00.0"], true));
    scan.reserved.push(Reserved {
        job: JobId("mine:1".into()),
        pack: Pack::Fill,
        cpus: vec![6],
        gpus: vec!["0000:02:00.0".into()],
    });
    let gpu = |g: &str| vec![g.to_owned()];
    assert!(!scan.overlaps(&[0, 1, 4], &[]));
    assert!(scan.overlaps(&[1, 3], &[]));
    assert!(scan.overlaps(&[6], &[]));
    assert!(scan.overlaps(&[], &gpu("0000:01:00.0")));
    assert!(scan.overlaps(&[], &gpu("0000:02:00.0")));
    assert!(!scan.overlaps(&[], &gpu("0000:03:00.0")));
    assert_eq!(scan.cpus(), [2, 3, 6]);
    assert_eq!(scan.gpus(), ["0000:01:00.0", "0000:02:00.0"]);
}

/// Tasks of one user that open a fresh ledger at the same moment all get the same
/// directory: the one that loses the race to `mkdir` finds the winner's, instead of
/// taking a fallback directory and planning as if its own job were another's.
#[test]
fn concurrent_first_opens_share_one_directory() {
    for round in 0..20 {
        let root = std::env::temp_dir().join(format!("binder-race-{}-{round}", std::process::id()));
        let root_text = root.display().to_string();
        let start = std::sync::Arc::new(std::sync::Barrier::new(8));
        let dirs: Vec<std::path::PathBuf> = (0..8)
            .map(|_| {
                let (start, root_text) = (start.clone(), root_text.clone());
                std::thread::spawn(move || {
                    let env = move |k: &str| (k == "BINDER_LEDGER_DIR").then(|| root_text.clone());
                    start.wait();
                    Ledger::open(&env).expect("ledger").dir().to_path_buf()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let _ = std::fs::remove_dir_all(&root);
        assert!(
            dirs.iter().all(|d| *d == dirs[0]),
            "round {round}: {dirs:?}"
        );
    }
}

#[test]
fn a_taken_name_with_a_home_is_one_only_this_user_can_know() {
    let dir = root("secret");
    let home = root("secret-home");
    let uid = rustix::process::geteuid().as_raw();
    std::fs::write(dir.join(format!("binder-ledger.{uid}")), "x").unwrap();
    let (d, h) = (dir.display().to_string(), home.display().to_string());
    let env = move |k: &str| match k {
        "BINDER_LEDGER_DIR" => Some(d.clone()),
        "HOME" => Some(h.clone()),
        _ => None,
    };
    // Eight first launches at once agree on one key, hence one directory.
    let dirs: Vec<std::path::PathBuf> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Ledger::open(&env).unwrap().dir().to_owned()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(dirs.iter().all(|d| *d == dirs[0]), "{dirs:?}");
    // The key is this user's alone, and the name is not the key.
    let key = home.join(".cache/binder/ledger-key");
    let meta = std::fs::metadata(&key).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o077,
        0
    );
    let text = std::fs::read_to_string(&key).unwrap();
    assert_eq!(text.len(), 32);
    assert!(!dirs[0].display().to_string().contains(&text[..16]));
    // Planted names with this user's prefix change nothing: it is found with one look.
    for n in 0..100 {
        std::fs::create_dir(dir.join(format!("binder-ledger.{uid}.{n:016x}"))).unwrap();
    }
    assert_eq!(Ledger::open(&env).unwrap().dir(), dirs[0]);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&home);
}

/// A task settling its claim reads the directories its launch found without listing the
/// root again while no directory was made in it, and lists it again once one was: a
/// directory made after the plan (another user's first launch on the node, here this
/// user's second directory) is read, its claim counted, and read again after.
#[test]
fn settling_lists_the_root_again_once_a_directory_appears() {
    let dir = root("settle");
    let d = dir.display().to_string();
    let ledger = Ledger::open(&|k| match k {
        "BINDER_LEDGER_DIR" => Some(d.clone()),
        "BINDER_KERNEL_VIEW" => Some("in-sight".into()),
        _ => None,
    })
    .unwrap();
    let me = crate::procfs::Real;
    // A read of a root that changed just now is not reused (`Stamp`): let it settle.
    settle();
    let mut scan = Scan::default();
    ledger.scan_others(&me, &mut scan);
    assert!(scan.holders.is_empty());
    assert!(
        ledger
            .read_at
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|r| r.stamp.is_some_and(|s| s.links >= 3) && r.dirs.is_empty()),
        "tmpfs and ext4 count subdirectories: the shortcut applies"
    );
    // A second directory appears, holding a claim of a live task (this one).
    let (pid, start) = (
        std::process::id(),
        me.stat(std::process::id()).unwrap().start,
    );
    let name = ledger
        .write_claim(&claim(pid, start, &[], &["0000:07:00.0"]))
        .unwrap();
    let other = dir.join(format!("binder-ledger.{}.00000000000000aa", ledger.uid()));
    std::fs::create_dir(&other).unwrap();
    std::fs::rename(ledger.dir().join(&name), other.join(&name)).unwrap();
    let mut again = Scan::default();
    ledger.scan_claims_of_others(&me, &mut again);
    assert_eq!(again.gpus(), ["0000:07:00.0"], "{again:?}");
    // A name that is not a directory, added since, changes the root's ctime: listed
    // again, the one directory found again.
    std::fs::write(dir.join("binder-ledger.junk"), "").unwrap();
    let mut third = Scan::default();
    ledger.scan_claims_of_others(&me, &mut third);
    assert_eq!(third.gpus(), ["0000:07:00.0"], "{third:?}");
    assert_eq!(
        ledger
            .read_at
            .lock()
            .unwrap()
            .as_ref()
            .map(|r| r.dirs.len()),
        Some(1)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A task joining its job's plan reads whether the other jobs' tasks live, not its own
/// job's (the n-th task of a job would read the n-1 before it, under the lock): they are
/// listed unread, still count as started, and are read on demand.
#[test]
fn a_joining_task_leaves_its_own_jobs_claims_unread() {
    let dir = root("unread");
    let ledger = open(&dir);
    let me = crate::procfs::Real;
    let (pid, start) = (
        std::process::id(),
        me.stat(std::process::id()).unwrap().start,
    );
    let mut mine = claim(pid, start, &[], &[]);
    mine.job = JobId("slurm:7.0".into());
    ledger.write_claim(&mine).unwrap();
    // A task of job 7.0 that has ended (no such start time), and one of another job.
    let mut ended = claim(pid, start + 1, &[], &[]);
    ended.job = JobId("slurm:7.0".into());
    ended.rank = 1;
    ledger.write_claim(&ended).unwrap();
    let mut other = claim(pid, start, &[], &[]);
    other.job = JobId("slurm:8.0".into());
    other.rank = 2;
    ledger.write_claim(&other).unwrap();
    let mut own = ledger.list_own_but(&me, Some("slurm_7.0"));
    assert_eq!(own.unread.len(), 2);
    assert_eq!(own.live.len(), 1, "job 8.0's task, read");
    assert!(own.started("slurm_7.0", 0) && own.started("slurm_7.0", 1));
    assert!(!own.alive("slurm_7.0"), "not read yet");
    own.resolve(&me);
    assert!(own.unread.is_empty());
    assert!(own.alive("slurm_7.0"));
    assert_eq!((own.live.len(), own.dead.len()), (2, 1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A user with no home whose name another user took still gets the one directory only
/// they can name, from the key in the kernel's user keyring: found again with one look
/// (not a fallback searched among planted names), whatever names were planted.
#[test]
fn a_taken_name_without_a_home_is_named_by_the_keyring() {
    let Some(key) = keyring::key() else {
        eprintln!("SKIPPED: the user keyring cannot be used here (keyctl refused)");
        return;
    };
    let dir = root("keyring");
    let uid = rustix::process::geteuid().as_raw();
    std::fs::write(dir.join(format!("binder-ledger.{uid}")), "x").unwrap();
    for n in 0..100 {
        std::fs::create_dir(dir.join(format!("binder-ledger.{uid}.{n:016x}"))).unwrap();
    }
    let ledger = open(&dir);
    let want = own_dir::secret_name(uid, &key).unwrap();
    assert_eq!(ledger.dir(), dir.join(&want));
    assert!(!ledger.in_fallback());
    assert_eq!(open(&dir).dir(), ledger.dir());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scratch ledger root holding 5,000 names (past `SHARE_ROOT_ABOVE`), and the
/// environment of a launch that uses it.
fn flooded(name: &str) -> (std::path::PathBuf, impl Fn(&str) -> Option<String> + Clone) {
    let dir = root(name);
    for n in 0..5000 {
        std::fs::write(dir.join(format!("junk.{n}")), "").unwrap();
    }
    let d = dir.display().to_string();
    let env = move |k: &str| match k {
        "BINDER_LEDGER_DIR" => Some(d.clone()),
        "BINDER_KERNEL_VIEW" => Some("in-sight".into()),
        _ => None,
    };
    (dir, env)
}

/// A launch beside a flood of names shares its read of the root with the user's next
/// launches (`rview`): they read the directories it found, alone while the root's stamp
/// holds, with every live user's canonical directory when it churns, and list it again
/// a second after the last listing, or where a live user's canonical name is another's.
#[test]
fn a_large_roots_read_is_shared_until_a_directory_appears() {
    let (dir, env) = flooded("rview");
    let me = Alone;
    let (pid, start) = (
        std::process::id(),
        me.stat(std::process::id()).unwrap().start,
    );
    // This user's second directory, with a claim of this live task.
    let ledger = Ledger::open(&env).unwrap();
    let plant = |suffix: &str, gpu: &str| {
        let mut c = claim(pid, start, &[], &[gpu]);
        c.job = JobId(format!("test:{suffix}"));
        let name = ledger.write_claim(&c).unwrap();
        let other = dir.join(format!("binder-ledger.{}.{suffix}", ledger.uid()));
        std::fs::create_dir(&other).unwrap();
        std::fs::rename(ledger.dir().join(&name), other.join(&name)).unwrap();
    };
    plant("00000000000000a1", "0000:0a:00.0");
    // A spare directory of another user's (mallory's, in the attack below).
    std::fs::create_dir(dir.join("binder-ledger.spare")).unwrap();
    settle();
    let mut first = Scan::default();
    ledger.scan_others(&me, &mut first);
    assert_eq!(first.gpus(), ["0000:0a:00.0"]);
    let shared = std::fs::read_to_string(ledger.dir().join("rview")).unwrap();
    assert!(shared.contains("00000000000000a1"), "{shared}");
    // The next launch reads what the first found, without listing the root; so does
    // its settling read.
    let listings = || root::ROOT_LISTINGS.with(|n| n.get());
    let before = listings();
    let next = Ledger::open(&env).unwrap();
    let mut second = Scan::default();
    next.scan_others(&me, &mut second);
    assert_eq!(second.gpus(), ["0000:0a:00.0"]);
    let mut settling = Scan::default();
    next.scan_claims_of_others(&me, &mut settling);
    assert_eq!(settling.gpus(), ["0000:0a:00.0"]);
    assert_eq!(listings(), before, "the root was listed again");
    // A directory made since, and another user's spare one removed so that the link
    // count is what it was (SEMANTICS §13.4, the link-count keeper): the ctime changed,
    // so the root is not read as it was. It churns (SEMANTICS §13.4): the directories
    // found then are read again, and the canonical one of every user with a live
    // process, by name, without a listing. This one has a name nobody else can guess
    // (a homeless user's): it is read at the next listing, a second after the last.
    plant("00000000000000b2", "0000:0b:00.0");
    std::fs::remove_dir(dir.join("binder-ledger.spare")).unwrap();
    settle();
    let users = |uids: &[u32]| Among(uids.iter().copied().collect());
    let mut third = Scan::default();
    let ledger = Ledger::open(&env).unwrap();
    ledger.scan_others(&users(&[]), &mut third);
    assert_eq!(third.gpus(), ["0000:0a:00.0"]);
    assert_eq!(listings(), before, "a churned root was listed again");
    // A new user's first directory, under the canonical name: read at once. (Its
    // owner must be that user: only root can make one for another uid here.)
    if rustix::process::geteuid().is_root() {
        let theirs = dir.join("binder-ledger.4242");
        std::fs::create_dir(&theirs).unwrap();
        rustix::fs::chown(&theirs, Some(rustix::fs::Uid::from_raw(4242)), None).unwrap();
        let next = Ledger::open(&env).unwrap();
        next.scan_others(&users(&[4242]), &mut Scan::default());
        let read = next.read_at.lock().unwrap().clone().unwrap();
        assert!(
            read.dirs.contains(&"binder-ledger.4242".to_owned()),
            "{read:?}"
        );
        assert_eq!(listings(), before, "a churned root was listed again");
        std::fs::remove_dir(&theirs).unwrap();
    } else {
        eprintln!("SKIPPED: another uid's canonical directory (needs root to chown it)");
    }
    // A live user's canonical name taken by another: that user may have a directory
    // nobody else can name. The root is not listed again for it (SEMANTICS §13.5: 400
    // ms a launch beside 100,000 names): the scan is in doubt, so the task checks its
    // CPUs against the kernel afresh once bound.
    assert!(
        third.doubtful().is_some(),
        "a churned root is a read in doubt"
    );
    std::fs::create_dir(dir.join("binder-ledger.4243")).unwrap();
    settle();
    let mut fourth = Scan::default();
    Ledger::open(&env)
        .unwrap()
        .scan_others(&users(&[4243]), &mut fourth);
    assert_eq!(fourth.gpus(), ["0000:0a:00.0"]);
    assert!(fourth.doubt.is_some());
    assert_eq!(listings(), before);
    // A second after the last listing, a churned root is listed again: the homeless
    // user's directory is read then.
    plant("00000000000000c3", "0000:0c:00.0");
    settle();
    let mut fifth = Scan::default();
    Ledger::open(&env)
        .unwrap()
        .scan_others(&users(&[]), &mut fifth);
    assert_eq!(fifth.gpus(), ["0000:0a:00.0"]);
    let old = rustix::fs::Timespec {
        tv_sec: rustix::time::clock_gettime(rustix::time::ClockId::Realtime).tv_sec - 2,
        tv_nsec: 0,
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        ledger.dir().join("rview"),
        &rustix::fs::Timestamps {
            last_access: old,
            last_modification: old,
        },
        rustix::fs::AtFlags::empty(),
    )
    .unwrap();
    let mut sixth = Scan::default();
    Ledger::open(&env)
        .unwrap()
        .scan_others(&users(&[]), &mut sixth);
    assert_eq!(
        sixth.gpus(),
        ["0000:0a:00.0", "0000:0b:00.0", "0000:0c:00.0"]
    );
    assert_eq!(listings(), before + 1);
    // A shared read naming a path is no read.
    std::fs::write(
        ledger.dir().join("rview"),
        "binder-rview 3\nstamp none\ndir binder-ledger.x/../..\n",
    )
    .unwrap();
    assert!(shared::read_root(ledger.own_fd(), ledger.uid(), root::CHURN_RELIST).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// [`Alone`], with the users `/proc` shows a live process of.
struct Among(BTreeSet<u32>);

impl Procs for Among {
    fn me(&self) -> u32 {
        Alone.me()
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        Alone.stat(pid)
    }
    fn status(&self, pid: u32) -> Option<Status> {
        Alone.status(pid)
    }
    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        Alone.threads(pid)
    }
    fn online(&self) -> Option<Vec<usize>> {
        Alone.online()
    }
    fn others(&self, me: u32) -> Option<Vec<crate::procfs::Other>> {
        Alone.others(me)
    }
    fn users(&self, _: u32) -> Option<BTreeSet<u32>> {
        Some(self.0.clone())
    }
}

/// This machine's processes as `Real` shows them, but no other user's: a test's whole
/// view of the node is then quick however busy the machine is.
struct Alone;

impl Procs for Alone {
    fn me(&self) -> u32 {
        crate::procfs::Real.me()
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        crate::procfs::Real.stat(pid)
    }
    fn status(&self, pid: u32) -> Option<Status> {
        crate::procfs::Real.status(pid)
    }
    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        crate::procfs::Real.threads(pid)
    }
    fn online(&self) -> Option<Vec<usize>> {
        crate::procfs::Real.online()
    }
    fn others(&self, _: u32) -> Option<Vec<crate::procfs::Other>> {
        Some(Vec::new())
    }
}

/// A launch that reaches the other directories after its time budget (a loaded node: it
/// waited for a CPU) still reads the first `ALWAYS_READ` of them: a claim left unread
/// may be a task not bound yet, which no look at the kernel shows. Past them, a flood
/// of names is cut by the deadline.
#[test]
fn a_late_read_still_reads_the_first_directories() {
    use std::os::fd::AsFd;
    let dir = root("late");
    let ledger = open(&dir);
    let me = Alone;
    let (pid, start) = (
        std::process::id(),
        me.stat(std::process::id()).unwrap().start,
    );
    let name = ledger
        .write_claim(&claim(pid, start, &[], &["0000:0c:00.0"]))
        .unwrap();
    let other = dir.join(format!("binder-ledger.{}.00000000000000c3", ledger.uid()));
    std::fs::create_dir(&other).unwrap();
    std::fs::rename(ledger.dir().join(&name), other.join(&name)).unwrap();
    let late = std::time::Instant::now() - std::time::Duration::from_secs(1);
    let read = |names: Vec<String>| {
        let root = fsio::open_dir(rustix::fs::CWD, &dir).unwrap();
        let mut scan = Scan::default();
        let mut reading = ledger.reading(&me, None, late);
        let read = ledger.read_dirs(root.as_fd(), names, &mut reading, &mut scan);
        (read, scan, reading.stopped)
    };
    let first = other.file_name().unwrap().to_str().unwrap().to_owned();
    let (got, scan, stopped) = read(vec![first.clone()]);
    assert_eq!(got, std::slice::from_ref(&first));
    assert_eq!(scan.gpus(), ["0000:0c:00.0"], "{scan:?}");
    assert!(stopped.is_none() && scan.incomplete.is_none(), "{scan:?}");
    // A flood past the first `ALWAYS_READ` names: the late read stops there.
    let flood: Vec<String> = (0..others::ALWAYS_READ + 10)
        .map(|n| format!("binder-ledger.{}.f{n:015x}", ledger.uid()))
        .chain([first])
        .collect();
    let (_, scan, stopped) = read(flood);
    assert!(stopped.is_some() && scan.incomplete.is_some(), "{scan:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Lets a scratch root's last change age past `Stamp`'s settling time, so that a read
/// of it is cached (a read of a root changed just now is never reused).
fn settle() {
    std::thread::sleep(std::time::Duration::from_millis(40));
}

/// A launch killed between writing a temporary file and renaming it (`kview.PID`,
/// `rview.PID`, `kroot.PID`, a plan's `.tmp.PID`) leaves it behind; the next
/// launch, under the same lock, removes it (#54: they were never tidied; `kroot.PID` was
/// not either). This process's own are kept.
#[test]
fn temporary_files_of_killed_launches_are_tidied() {
    let dir = root("temps");
    let ledger = open(&dir);
    let me = std::process::id();
    let left = [
        "kview.999999",
        "rview.999999",
        "kroot.999997",
        ".tmp.999998",
    ];
    for name in left {
        std::fs::write(ledger.dir().join(name), "x").unwrap();
    }
    let mine = format!("kview.{me}");
    std::fs::write(ledger.dir().join(&mine), "x").unwrap();
    // Names that only look alike are no temporary files.
    std::fs::write(ledger.dir().join("kview"), "x").unwrap();
    std::fs::write(ledger.dir().join("kview.x1"), "x").unwrap();
    let mut own = ledger.list_own(&crate::procfs::Real);
    assert_eq!(own.temps.len(), left.len(), "{:?}", own.temps);
    ledger.tidy(&mut own);
    for name in left {
        assert!(!ledger.dir().join(name).exists(), "{name} left");
    }
    for name in [mine.as_str(), "kview", "kview.x1"] {
        assert!(ledger.dir().join(name).exists(), "{name} removed");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A launch that could not have its user's lock marks that it runs unclaimed; a launch
/// that held the lock meanwhile finds the mark with one look (SEMANTICS §13.4).
#[test]
fn a_fallback_is_marked_for_the_launch_that_held_the_lock() {
    let dir = root("fallback");
    let ledger = open(&dir);
    assert!(!ledger.fell_back_since(std::time::Duration::from_secs(5)));
    ledger.mark_fallback();
    assert!(ledger.fell_back_since(std::time::Duration::from_secs(5)));
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert!(!ledger.fell_back_since(std::time::Duration::from_millis(20)));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A refusal looks at the kernel again only where holders from the shared view hold a
/// CPU nothing else does (SEMANTICS §13.4): a claimed task's unclaimed children, on its
/// CPUs, decide nothing, and another user's many threads then cost no second look.
#[test]
fn only_holders_of_a_shared_view_alone_call_for_a_fresh_look() {
    let mut scan = Scan::default();
    scan.holders.push(holder(10, 1, &[0], &[], true));
    assert!(!scan.stale_decides(), "no holder from a shared view");
    // A child of the claimed task, seen bound in the shared view, on its CPU.
    scan.holders.push(holder(11, 2, &[0], &[], true));
    scan.stale.push(11);
    assert!(!scan.stale_decides());
    // A process bound elsewhere, seen only in the shared view.
    scan.holders.push(holder(12, 3, &[1], &[], true));
    scan.stale.push(12);
    assert!(scan.stale_decides());
}

/// A refusal waits for a moment on the bound processes no claim accounts for only where
/// they alone hold a CPU (SEMANTICS §13.4, a momentary binding steers): another user's,
/// never the looking user's own, and not where a claimed task holds the CPU too.
#[test]
fn only_unclaimed_processes_holding_a_cpu_alone_are_watched() {
    let unclaimed = |pid: u32, owner: u32, cpus: &[usize]| {
        let mut h = holder(pid, 1, cpus, &[], true);
        h.owner = owner;
        h.claim.job = JobId::unclaimed(pid);
        h
    };
    let mut scan = Scan::new(1000);
    scan.holders.push(holder(10, 1, &[0], &[], true));
    assert!(scan.unclaimed_deciders().is_empty(), "a claim only");
    // Another user's bound process on the claimed CPU decides nothing.
    scan.holders.push(unclaimed(11, 1001, &[0]));
    assert!(scan.unclaimed_deciders().is_empty());
    // The looking user's own bound task elsewhere is not watched.
    scan.holders.push(unclaimed(12, 1000, &[1]));
    assert!(scan.unclaimed_deciders().is_empty());
    // Another user's bound process alone on a CPU is.
    scan.holders.push(unclaimed(13, 1001, &[2, 0]));
    assert_eq!(scan.unclaimed_deciders(), vec![13]);
}

/// Under `BINDER_KERNEL_VIEW=in-sight`, a launch that cannot use the ledger looks at
/// other users' bound tasks only where another entry is in the root, as a launch through
/// it does: the user's own directory and files of other names are not one.
#[test]
fn others_are_in_sight_only_with_an_entry_in_the_root() {
    let dir = root("sight");
    let ledger = open(&dir);
    std::fs::write(dir.join("binder-ledger.junk"), "").unwrap();
    std::fs::create_dir(dir.join("something-else")).unwrap();
    assert!(!ledger.others_in_sight());
    std::fs::create_dir(dir.join("binder-ledger.4242")).unwrap();
    assert!(ledger.others_in_sight());
    let _ = std::fs::remove_dir_all(&dir);
}

/// [`Among`] whose views are shared as the real `/proc`'s are, counting its lookups of
/// the live users.
struct Sharing(Among, std::cell::Cell<usize>);

impl Procs for Sharing {
    fn me(&self) -> u32 {
        self.0.me()
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        self.0.stat(pid)
    }
    fn status(&self, pid: u32) -> Option<Status> {
        self.0.status(pid)
    }
    fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
        self.0.threads(pid)
    }
    fn online(&self) -> Option<Vec<usize>> {
        self.0.online()
    }
    fn others(&self, me: u32) -> Option<Vec<crate::procfs::Other>> {
        self.0.others(me)
    }
    fn users(&self, me: u32) -> Option<BTreeSet<u32>> {
        self.1.set(self.1.get() + 1);
        self.0.users(me)
    }
    fn shares_views(&self) -> bool {
        true
    }
}

/// Beside a churning root, the live users' canonical directories one launch looked up
/// (a `statat` per process of the node) serve the user's launches within the shared
/// view's `FRESH`, as read from the user's own directory; past it, or from a file that
/// is not what a launch writes, they are looked up again. A launch that looks afresh
/// looks them up itself.
#[test]
fn canonical_lookups_beside_a_churning_root_are_shared_briefly() {
    let (dir, env) = flooded("rusers");
    let ledger = Ledger::open(&env).unwrap();
    let (pid, start) = (
        std::process::id(),
        Alone.stat(std::process::id()).unwrap().start,
    );
    // This user's second directory with a live claim, found by the first listing.
    let mut c = claim(pid, start, &[], &["0000:0a:00.0"]);
    c.job = JobId("test:canon".into());
    let name = ledger.write_claim(&c).unwrap();
    let other = dir.join(format!("binder-ledger.{}.00000000000000d4", ledger.uid()));
    std::fs::create_dir(&other).unwrap();
    std::fs::rename(ledger.dir().join(&name), other.join(&name)).unwrap();
    settle();
    let procs = Sharing(Among(BTreeSet::new()), std::cell::Cell::new(0));
    ledger.scan_others(&procs, &mut Scan::default());
    assert_eq!(procs.1.get(), 0, "a listing looks up no canonical name");
    // The root churns: two launches within FRESH look the users up once.
    std::fs::create_dir(dir.join("binder-ledger.poke")).unwrap();
    std::fs::remove_dir(dir.join("binder-ledger.poke")).unwrap();
    let scan = |procs: &Sharing| {
        let mut scan = Scan::default();
        Ledger::open(&env).unwrap().scan_others(procs, &mut scan);
        assert_eq!(scan.gpus(), ["0000:0a:00.0"]);
        assert!(scan.doubt.is_some(), "a churned root is a read in doubt");
    };
    let began = std::time::Instant::now();
    scan(&procs);
    scan(&procs);
    // (Unless the two took longer than FRESH: an emulated, loaded machine.)
    if began.elapsed() < shared::FRESH {
        assert_eq!(procs.1.get(), 1);
    } else {
        eprintln!(
            "two scans took {:?}: the second looked up again",
            began.elapsed()
        );
        procs.1.set(1);
    }
    let shared = std::fs::read_to_string(ledger.dir().join(own_dir::CANONICAL)).unwrap();
    assert_eq!(shared, "binder-rusers 1\nsquatted 0\n");
    // Past FRESH, looked up again.
    std::thread::sleep(shared::FRESH);
    scan(&procs);
    assert_eq!(procs.1.get(), 2);
    // A launch that looks afresh (a refusal's second look) looks them up itself.
    let afresh = Ledger::open(&env).unwrap();
    afresh.look_afresh();
    afresh.scan_others(&procs, &mut Scan::default());
    assert_eq!(procs.1.get(), 3);
    // A file naming a path, or of another form, is no lookup.
    for junk in [
        "binder-rusers 1\nsquatted 0\ndir binder-ledger.x/..\n",
        "binder-rusers 1\nsquatted 2\n",
        "binder-rusers 0\nsquatted 0\n",
    ] {
        std::fs::write(ledger.dir().join(own_dir::CANONICAL), junk).unwrap();
        scan(&procs);
    }
    assert_eq!(procs.1.get(), 6);
    let _ = std::fs::remove_dir_all(&dir);
}
