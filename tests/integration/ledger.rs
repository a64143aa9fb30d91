//! The ledger's planning and its report, through the library: packing policies on a
//! synthetic node (expectations by hand), and `binder node` on a synthetic ledger of a
//! real topology (processes described by hand, PU numbers from `hwloc-calc`).

use std::collections::HashMap;

use binder_core::identity::job::JobId;
use binder_core::ledger::{self, Claim, Scan};
use binder_core::procfs::{Procs, Stat, Status};
use binder_host::node;
use binder_plan::shape::{Pack, Shape};
use binder_plan::topology::{Source, Topology};

/// `pack:2 core:4 pu:1`: package 0 = PUs 0-3, package 1 = PUs 4-7.
fn two_packages() -> Topology {
    binder_host::load(&Source::Synthetic("pack:2 core:4 pu:1".into()), false).unwrap()
}

fn cpus_around(yaml: &str, pack: Pack, held: &[usize]) -> Result<Vec<Vec<usize>>, String> {
    let mut shape = Shape::from_yaml(yaml, "t.yaml").unwrap();
    shape.options.pack = Some(pack);
    binder_plan::plan_around(
        &binder_plan::PlanRequest::new(&shape, &two_packages(), 1)
            .origin("t.yaml")
            .held(held),
    )
    .map(|p| p.tasks.iter().map(|t| t.cpuset.to_vec()).collect())
    .map_err(|e| e.to_string())
}

const TWO_CORES: &str = "resources:\n  - type: core\n    count: 2\n";
const ALL_CORES: &str = "resources:\n  - type: core\n    count: all\n";
const GE_TWO: &str = "options:\n  ge: -bunit C -bamount 2 -btype host\n";

#[test]
fn policies_choose_containers() {
    // Another job holds PU 0 (package 0).
    let held = [0];
    assert_eq!(
        cpus_around(TWO_CORES, Pack::Fill, &held),
        Ok(vec![vec![1, 2]])
    );
    assert_eq!(
        cpus_around(TWO_CORES, Pack::Spread, &held),
        Ok(vec![vec![4, 5]])
    );
    assert_eq!(
        cpus_around(TWO_CORES, Pack::Exclusive, &held),
        Ok(vec![vec![4, 5]])
    );
    // `count: all` keeps meaning every free unit whatever the policy.
    for pack in [Pack::Fill, Pack::Spread] {
        assert_eq!(
            cpus_around(ALL_CORES, pack, &held),
            Ok(vec![vec![1, 2, 3, 4, 5, 6, 7]])
        );
    }
    assert_eq!(
        cpus_around(ALL_CORES, Pack::Exclusive, &held),
        Ok(vec![vec![4, 5, 6, 7]])
    );
    // Both packages partly used: no whole free package for an exclusive job.
    assert!(cpus_around(TWO_CORES, Pack::Exclusive, &[0, 4]).is_err());
    // Fill prefers the fuller package: package 1 has 1 free PU, too few; package 0 fits.
    assert_eq!(
        cpus_around(TWO_CORES, Pack::Fill, &[0, 4, 5, 6]),
        Ok(vec![vec![1, 2]])
    );
    assert_eq!(
        cpus_around(TWO_CORES, Pack::Fill, &[0, 1, 4]),
        Ok(vec![vec![2, 3]])
    );
    // Spread prefers the freer package.
    assert_eq!(
        cpus_around(TWO_CORES, Pack::Spread, &[0, 4, 5]),
        Ok(vec![vec![1, 2]])
    );
}

#[test]
fn policies_become_the_grid_engine_walk_order() {
    let held = [0];
    assert_eq!(cpus_around(GE_TWO, Pack::Fill, &held), Ok(vec![vec![1, 2]]));
    assert_eq!(
        cpus_around(GE_TWO, Pack::Spread, &held),
        Ok(vec![vec![4, 5]])
    );
    assert_eq!(
        cpus_around(GE_TWO, Pack::Exclusive, &held),
        Ok(vec![vec![4, 5]])
    );
}

/// Processes by PID: (uid, start, affinity); PID 66 is a zombie.
struct Fake(HashMap<u32, (u32, u64, Vec<usize>)>);

impl Procs for Fake {
    fn me(&self) -> u32 {
        1
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        self.0.get(&pid).map(|(_, start, _)| Stat {
            comm: "app".into(),
            state: 'S',
            ppid: 1,
            pgrp: pid,
            start: *start,
            threads: 1,
        })
    }
    fn status(&self, pid: u32) -> Option<Status> {
        self.0.get(&pid).map(|(uid, _, cpus)| Status {
            uid: *uid,
            cpus: cpus.clone(),
        })
    }
}

/// A task of `job` on Naples cores `cores` (core c is PUs c and c + 48, `hwloc-calc
/// --po -I pu`), pid `pid`, as its claim file says.
fn claim(
    job: &str,
    rank: usize,
    size: usize,
    pack: Pack,
    cores: std::ops::RangeInclusive<usize>,
    pid: u32,
) -> Claim {
    let mut cpus: Vec<usize> = cores.clone().flat_map(|c| [c, c + 48]).collect();
    cpus.sort_unstable();
    Claim {
        format: ledger::FORMAT,
        job: JobId(job.into()),
        rank,
        size,
        pid,
        start: 500,
        cpus,
        gpus: Vec::new(),
        pack: pack.into(),
        unit: "core".into(),
        places: cores.count(),
        pidns: 0,
    }
}

/// The scan of claim files (owner, name, content) as the ledger reads them.
fn scan(files: Vec<(u32, String, String)>, procs: &Fake) -> Scan {
    let mut scan = Scan::default();
    for (owner, name, text) in files {
        let (pid, start, _) = ledger::verify::claim_name(&name).unwrap();
        match ledger::verify_claim(owner, (pid, start), || Ok(text), true, procs) {
            Ok(h) => scan.holders.push(h),
            Err(why) => scan.ignore(&name, Some(owner), why),
        }
    }
    scan
}

fn file(owner: u32, c: &Claim) -> (u32, String, String) {
    let name = format!("c.{}.{}.{}.{}", c.pid, c.start, c.rank, c.job.file_part());
    (owner, name, serde_json::to_string(c).unwrap())
}

/// Naples (2 packages × 4 NUMA × 2 L3 × 3 cores × 2 PUs; core c is PUs c and c + 48):
/// alice's Open MPI job on cores 0-3 and 12-15, bob's exclusive Slurm step on cores
/// 24-25 (package 1), and three claims that count for nothing.
#[test]
fn node_report_on_a_synthetic_ledger() {
    let Some(shared) = crate::common::shared() else {
        return;
    };
    let xml = crate::common::topology(&shared, "epyc7451-naples-2s-48c-smt2-8numa.xml");
    let topology = binder_host::load(&Source::Xml(xml), false).unwrap();
    let alice0 = claim("openmpi:100", 0, 2, Pack::Fill, 0..=3, 101);
    let alice1 = claim("openmpi:100", 1, 2, Pack::Fill, 12..=15, 102);
    let bob = claim("slurm:7.0", 0, 1, Pack::Exclusive, 24..=25, 201);
    let forged = claim("pgid-9-9", 0, 1, Pack::Fill, 30..=30, 301);
    let dead = claim("hydra:77-1", 0, 1, Pack::Spread, 40..=40, 401);
    let procs = Fake(
        [
            (101, (1000, 500, alice0.cpus.clone())),
            // An OpenMP main thread narrowed to its first place holds that place only.
            (102, (1000, 500, vec![12, 60])),
            (201, (1001, 500, bob.cpus.clone())),
            // Alive, but not bound as its claim says.
            (301, (1000, 500, (0..=95).collect())),
        ]
        .into(),
    );
    let mut files = vec![
        file(1000, &alice0),
        file(1000, &alice1),
        file(1001, &bob),
        file(1000, &forged),
        file(1001, &dead),
    ];
    files.push((
        1000,
        "c.101.500.0.torn".into(),
        format!("{{\"format\":{},\"job\"", ledger::FORMAT),
    ));
    let scan = scan(files, &procs);
    let users = |uid: u32| match uid {
        1000 => "alice".to_owned(),
        1001 => "bob".to_owned(),
        other => other.to_string(),
    };
    let report = node::build(&topology, &scan, "/dev/shm", "node17", &users);
    // By hand: alice's rank 1 holds only its narrowed place (core 12, PUs 12 and 60), so
    // 14 PUs are bound of 96; bob holds all of package 1 (48 PUs). Alice's 10 PUs need 1
    // package, 1 NUMA node (12 PUs) and 2 L3s (6 PUs); she uses 1, 2 (NUMA 0 and 2) and
    // 3 (L3 0, 1, 4). Bob needs and uses 1 of each. In use: 2 packages (96 PUs), 3 NUMA
    // nodes (36), 4 L3s (24).
    assert_eq!((report.bound, report.allowed, report.held), (14, 96, 58));
    let metrics: Vec<(&str, usize, usize, usize, f64, f64)> = report
        .levels
        .iter()
        .map(|l| {
            (
                l.level,
                l.in_use,
                l.needed,
                l.used,
                l.packing_index,
                l.fill_factor,
            )
        })
        .collect();
    assert_eq!(
        metrics,
        [
            ("package", 2, 2, 2, 1.0, 0.15),
            ("numa", 3, 2, 3, 0.67, 0.39),
            ("l3", 4, 3, 4, 0.75, 0.58),
        ]
    );
    assert_eq!(report.jobs[0].packing["l3"], 0.67);
    assert_eq!(report.jobs[1].held, "24-47,72-95");
    insta::assert_snapshot!("node_text", node::render_text(&report));
    insta::assert_snapshot!("node_json", serde_json::to_string_pretty(&report).unwrap());
}

/// `binder node` names each job's GPUs by binder's number on this node (issue #23): on the
/// DGX-2 XML (PCI order: 0000:34 is GPU 0, 0000:36 GPU 1, 0000:b7 GPU 8), a job holding
/// the GPUs at 0000:36:00.0 and 0000:b7:00.0 shows `gpu:1,gpu:8` in text and JSON; a bus
/// id the node does not have is shown as written.
#[test]
fn node_report_names_each_jobs_gpus() {
    let Some(shared) = crate::common::shared() else {
        return;
    };
    let xml = crate::common::topology(&shared, "dgx2-16v100-restricted.xml");
    let topology = binder_host::load(&Source::Xml(xml), true).unwrap();
    let with_gpus = |job: &str, cpu: usize, gpus: &[&str], pid: u32| Claim {
        format: ledger::FORMAT,
        job: JobId(job.into()),
        rank: 0,
        size: 1,
        pid,
        start: 500,
        cpus: vec![cpu],
        gpus: gpus.iter().map(|g| g.to_string()).collect(),
        pack: Pack::Fill.into(),
        unit: "core".into(),
        places: 1,
        pidns: 0,
    };
    let a = with_gpus("slurm:5.0", 0, &["0000:36:00.0", "0000:b7:00.0"], 101);
    let b = with_gpus("slurm:6.0", 1, &["0000:99:00.0"], 102);
    let procs = Fake(
        [
            (101, (1000, 500, a.cpus.clone())),
            (102, (1000, 500, b.cpus.clone())),
        ]
        .into(),
    );
    let scan = scan(vec![file(1000, &a), file(1000, &b)], &procs);
    let report = node::build(&topology, &scan, "/dev/shm", "node17", &|u| u.to_string());
    let gpus: Vec<(&str, Vec<String>)> = report
        .jobs
        .iter()
        .map(|j| (j.job.as_str(), j.gpus.clone()))
        .collect();
    assert_eq!(
        gpus,
        [
            ("slurm:5.0", vec!["gpu:1".to_string(), "gpu:8".to_string()]),
            ("slurm:6.0", vec!["0000:99:00.0".to_string()]),
        ]
    );
    let text = node::render_text(&report);
    let row = text.lines().find(|l| l.starts_with("slurm:5.0")).unwrap();
    assert!(row.contains(" gpu:1,gpu:8 "), "{text}");
    assert!(text.contains(" GPUS "), "{text}");
}

/// The `Cpus_allowed_list` of a `/proc/PID/status` text.
fn allowed_list(status: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned()
}

/// A task whose main thread exited while its workers run (`pthread_exit` in `main`: a
/// zombie leader) still holds its CPU (#45): the next job of the same user goes elsewhere.
#[test]
fn a_zombie_leader_with_live_workers_still_holds_its_cpu() {
    use std::process::{Command, Stdio};
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let cc = crate::common::has("cc");
    if cpus < 2 || !crate::common::prerequisite(cc, "cc (builds the zombie-leader program)") {
        return;
    }
    let dir = crate::common::scratch().join("zombie-leader");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("z.c"),
        "#include <pthread.h>\n#include <unistd.h>\nstatic void *work(void *a) { (void)a; sleep(4); return 0; }\nint main(void) { pthread_t t; pthread_create(&t, 0, work, 0); pthread_exit(0); }\n",
    )
    .unwrap();
    let built = Command::new("cc")
        .args(["-O", "-pthread", "-o"])
        .arg(dir.join("z"))
        .arg(dir.join("z.c"))
        .status()
        .unwrap();
    assert!(built.success());
    std::fs::write(
        dir.join("one.yaml"),
        "resources:\n  - type: core\n    count: 1\n",
    )
    .unwrap();
    let ledger = crate::common::private_ledger();
    let launch = |cmd: &[&str]| {
        let mut c = crate::common::binder();
        c.env("BINDER_LEDGER_DIR", &ledger)
            .arg(dir.join("one.yaml"))
            .arg("--")
            .args(cmd);
        c
    };
    let z = dir.join("z").display().to_string();
    let mut first = launch(&[&z]).stdout(Stdio::null()).spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    let state = std::fs::read_to_string(format!("/proc/{}/status", first.id())).unwrap();
    let held = allowed_list(&state);
    assert!(
        state.contains("State:\tZ"),
        "not a zombie leader yet: {state}"
    );
    let out = launch(&[
        "sh",
        "-c",
        "grep Cpus_allowed_list /proc/self/status | cut -f2",
    ])
    .output()
    .unwrap();
    let second = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(second, held, "the second job took the zombie leader's CPU");
    let _ = first.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ulimit -Sn 5` (#45): binder raises its soft open-file limit for the launch, so it
/// still reads the ledger and /proc (the next job of the user goes around the first), and
/// gives the task the user's limit back.
#[test]
fn a_low_open_file_limit_neither_blinds_the_launch_nor_reaches_the_task() {
    use std::process::{Command, Stdio};
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 || !crate::common::prerequisite(crate::common::has("bash"), "bash") {
        return;
    }
    let dir = crate::common::scratch().join("low-nofile");
    std::fs::create_dir_all(&dir).unwrap();
    let shape = dir.join("one.yaml");
    std::fs::write(&shape, "resources:\n  - type: core\n    count: 1\n").unwrap();
    let ledger = crate::common::private_ledger();
    let mut first = crate::common::binder();
    first
        .env("BINDER_LEDGER_DIR", &ledger)
        .arg(&shape)
        .args(["--", "sleep", "3"])
        .stdout(Stdio::null());
    let mut first = first.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let held =
        allowed_list(&std::fs::read_to_string(format!("/proc/{}/status", first.id())).unwrap());
    let mut second = Command::new("bash");
    crate::common::isolated(&mut second)
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 5; exec '{}' '{}' -- sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2; ulimit -Sn'",
            crate::common::binder_exe(),
            shape.display()
        ))
        // The first job's ledger (after `isolated`'s own: the last setting stands).
        .env("BINDER_LEDGER_DIR", &ledger);
    let out = second.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}{stderr}");
    assert_ne!(
        lines[0], held,
        "planned as if the first job did not run: {stderr}"
    );
    assert_eq!(lines[1], "5", "the task keeps the user's own limit");
    assert!(!stderr.contains("read in part"), "{stderr}");
    let _ = first.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Limits fail closed (SEMANTICS §13.4): with a hard open-file limit of 5 a launch cannot
/// read /proc or the ledger, so it refuses with one line (said once: the warm `binder`
/// that hands the launch over to `binder-full`, here on a cold node cache, leaves the
/// saying to it, #45), exit 125, and the task never runs. It used to run on what it could
/// read, where another user's job may have been (#54: `ulimit -n 6`).
#[test]
fn a_hard_open_file_limit_too_low_to_look_refuses_once() {
    let cache = crate::common::scratch().join("said-once-cache");
    let _ = std::fs::remove_dir_all(&cache);
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "ulimit -n 5; exec '{}' shapes/cores-packed.yaml -- echo ran",
            crate::common::binder_exe()
        ))
        .current_dir(crate::common::root());
    for (k, v) in crate::common::binder().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = cmd.env("BINDER_CACHE_DIR", &cache).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(125), "{stdout}{stderr}");
    assert!(!stdout.contains("ran"), "the task ran: {stdout}{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("binder: ")
            && lines[0].contains("open-file limit is 5")
            && lines[0].contains("ulimit -n"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&cache);
}

/// 64 tasks of one job started at once with no launcher (`--local-rank`, one session:
/// the job is the process group) join the one plan its first task made: one job id. A
/// task joining leaves its job's claims unread (#45), and the tidying of plans once took
/// that for a job with no live task and removed the plan under the later ranks (108 jobs
/// of 256 tasks).
#[test]
fn tasks_of_one_job_started_at_once_join_one_plan() {
    use std::process::Command;
    if !crate::common::prerequisite(crate::common::has("setsid"), "setsid") {
        return;
    }
    let n = 64;
    let mut batch = Command::new("setsid");
    batch.args(["--wait", "bash", "-c"]).arg(format!(
        "for i in $(seq 0 {}); do '{}' --local-rank $i --local-size {n} shapes/bind-none.yaml -- sh -c 'echo $BINDER_JOB' & done; wait",
        n - 1,
        crate::common::binder_exe(),
    ));
    let out = crate::common::isolated(&mut batch).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let jobs: std::collections::BTreeSet<&str> = stdout.lines().collect();
    assert_eq!(stdout.lines().count(), n, "{stdout}{stderr}");
    assert_eq!(jobs.len(), 1, "{jobs:?}\n{stderr}");
}

/// SEMANTICS §13.4, a stop fails closed: a launch stopped while it holds its user's lock
/// (here held at one system call by `strace`'s delay, as SIGSTOP or `scontrol suspend`
/// would at any phase) makes the user's next launch fall back to the kernel's view, which
/// cannot show the stopped one's CPU before it binds; that launch runs unclaimed. The
/// stopped one, continued, must not run there: it looks at its user's own bound tasks
/// before it runs. (Before: the two shared CPU 0 where the stop came before the binding
/// or the claim's rename.)
#[test]
fn a_launch_stopped_at_any_phase_never_runs_on_a_job_started_meanwhile() {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if cpus < 2 || !crate::common::prerequisite(crate::common::has("strace"), "strace") {
        return;
    }
    let dir = crate::common::scratch().join("stopped-phase");
    std::fs::create_dir_all(&dir).unwrap();
    let shape = dir.join("one.yaml");
    std::fs::write(&shape, "resources:\n  - type: core\n").unwrap();
    let probe = |file: &std::path::Path| {
        format!(
            "grep Cpus_allowed_list /proc/self/status | cut -f2 > '{}'; exec sleep 2",
            file.display()
        )
    };
    for (call, when) in [
        ("sched_setaffinity", 1),
        ("rename", 1),
        ("flock", 1),
        ("execve", 2),
    ] {
        let ledger = crate::common::private_ledger();
        let (a, b) = (
            dir.join(format!("{call}{when}.a")),
            dir.join(format!("{call}{when}.b")),
        );
        let _ = (std::fs::remove_file(&a), std::fs::remove_file(&b));
        let mut first = Command::new("strace");
        crate::common::isolated(&mut first)
            .args(["-o", "/dev/null", "-f", "-e"])
            .arg(format!("trace={call}"))
            .arg("-e")
            .arg(format!("inject={call}:delay_enter=700000:when={when}"))
            .arg(crate::common::binder_exe())
            .arg(&shape)
            .args(["--", "sh", "-c", &probe(&a)])
            .env("BINDER_LEDGER_DIR", &ledger)
            .stderr(Stdio::piped())
            // Each its own job (binder names a job without a launcher by its process
            // group), as two `binder … &` lines of a shell are.
            .process_group(0);
        let mut first = first.spawn().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(250));
        let mut second = crate::common::binder();
        second
            .env("BINDER_LEDGER_DIR", &ledger)
            .arg(&shape)
            .args(["--", "sh", "-c", &probe(&b)])
            .stderr(Stdio::piped())
            .process_group(0);
        let mut second = second.spawn().unwrap();
        // A probe's file exists before its line is written: wait for the lines.
        let written =
            |f: &std::path::Path| std::fs::read_to_string(f).is_ok_and(|t| t.ends_with('\n'));
        for _ in 0..200 {
            if written(&a) && written(&b) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (a_cpus, b_cpus) = (
            std::fs::read_to_string(&a).unwrap_or_default(),
            std::fs::read_to_string(&b).unwrap_or_default(),
        );
        let _ = (first.kill(), second.kill());
        let (first, second) = (
            first.wait_with_output().unwrap(),
            second.wait_with_output().unwrap(),
        );
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&first.stderr),
            String::from_utf8_lossy(&second.stderr)
        );
        assert!(
            !a_cpus.trim().is_empty() && !b_cpus.trim().is_empty(),
            "{call}#{when}: a task did not run (a: {a_cpus:?}, b: {b_cpus:?}): {said}"
        );
        assert_ne!(
            a_cpus.trim(),
            b_cpus.trim(),
            "{call}#{when}: both on one CPU: {said}"
        );
        let _ = std::fs::remove_dir_all(&ledger);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A refusal is one line, never a warning and then the refusal (#54: under load a launch
/// that could not lock the ledger, or read it only in part, printed its warning, then its
/// fallback refused). Here the user's lock is held (`BINDER_LEDGER_WAIT=0`: the ledger is
/// not used, a warning when the task runs) and one-core jobs of the user's hold every
/// core, which the fallback's kernel view shows: exit 125, one `binder:` line, no task.
#[test]
fn a_refusal_after_a_warning_is_one_line() {
    use std::process::{Command, Stdio};
    if !crate::common::prerequisite(crate::common::has("flock"), "flock")
        || !crate::common::prerequisite(crate::common::has("setsid"), "setsid")
    {
        return;
    }
    let ledger = crate::common::private_ledger();
    let one = crate::common::scratch().join("one-line-one-core.yaml");
    std::fs::write(&one, "resources:\n  - type: core\n").unwrap();
    let launch = |cmd: &mut Command| {
        crate::common::hermetic(cmd)
            .env("BINDER_LEDGER_DIR", &ledger)
            // The user's own other jobs count in the fallback (the default).
            .env_remove("BINDER_KERNEL_VIEW");
    };
    // A one-core job per CPU, each its own (a core's second PU is refused a core).
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut jobs: Vec<std::process::Child> = (0..cpus)
        .map(|_| {
            let mut job = Command::new("setsid");
            job.arg(crate::common::binder_exe())
                .arg(&one)
                .args(["--", "sleep", "20"]);
            launch(&mut job);
            let child = job
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            // Bound, and its claim written, once its sleep runs (or refused).
            for _ in 0..200 {
                std::thread::sleep(std::time::Duration::from_millis(25));
                let comm = std::fs::read_to_string(format!("/proc/{}/comm", child.id()));
                if comm.map_or(true, |c| c == "sleep\n") {
                    break;
                }
            }
            child
        })
        .collect();
    let dir = std::fs::read_dir(&ledger)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join(".lock").exists())
        .expect("the user's ledger directory");
    // (-F: flock itself runs the sleep and holds the lock, so killing it lets go.)
    let mut holder = Command::new("flock")
        .arg("-F")
        .arg(dir.join(".lock"))
        .args(["sleep", "20"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut late = Command::new("setsid");
    late.arg(crate::common::binder_exe())
        .arg(&one)
        .args(["--", "echo", "ran"])
        .env("BINDER_LEDGER_WAIT", "0");
    launch(&mut late);
    let out = late.output().unwrap();
    let held: Vec<String> = jobs
        .iter()
        .map(|j| {
            let status = std::fs::read_to_string(format!("/proc/{}/status", j.id()));
            status.map_or("ended".into(), |s| allowed_list(&s))
        })
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(125),
        "{stdout}{stderr}(the jobs on {held:?})"
    );
    assert!(!stdout.contains("ran"), "the task ran: {stdout}{stderr}");
    let _ = (holder.kill(), holder.wait());
    for job in &mut jobs {
        let _ = (job.kill(), job.wait());
    }
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].starts_with("binder: "), "{stderr}");
}
