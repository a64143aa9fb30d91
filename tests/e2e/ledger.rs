//! The node ledger under real launchers (SEMANTICS §13): concurrent jobs on the 2-CPU
//! machine get different CPUs, a third is refused with the occupant named, an ended or
//! killed job frees its CPUs, forged entries count for nothing, and many jobs of many
//! tasks started at once each share one plan with nothing lost or torn.
//!
//! Each test has a ledger directory of its own (`BINDER_LEDGER_DIR`), so tests running in
//! parallel are not jobs on each other's node.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{self, binder, run};
use binder::exit_code::{REFUSED, SUCCESS};

/// A scratch directory with a one-core shape and an all-cores shape.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("binder-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("one.yaml"), "resources:\n  - type: core\n").unwrap();
    std::fs::write(
        dir.join("all.yaml"),
        "resources:\n  - type: core\n    count: all\n",
    )
    .unwrap();
    dir
}

/// Starts jobs A and B (one task each, sleeping), then C (refused), ends A, then D; prints
/// `TAG JOB CPUS` lines and `C rc=N`. `$1` is the scratch dir, the rest the launcher words.
const SCENARIO: &str = r#"
set -u
dir=$1; shift
start() { exec "$@" "$BIN" "$dir/one.yaml" -- sh -c 'echo "$0 $BINDER_JOB $BINDER_CPUS"; exec sleep 60' "$TAG" ; }
wait_for() { for _ in $(seq 300); do [ -s "$dir/$1.out" ] && return 0; sleep 0.1; done; echo "no $1" >&2; return 1; }
TAG=A start "$@" >"$dir/A.out" 2>"$dir/A.err" & a=$!
wait_for A
TAG=B start "$@" >"$dir/B.out" 2>"$dir/B.err" & b=$!
wait_for B
"$@" "$BIN" "$dir/one.yaml" -- true >"$dir/C.out" 2>"$dir/C.err"; echo "C rc=$?"
kill "$a"; wait "$a" 2>/dev/null
TAG=D start "$@" >"$dir/D.out" 2>"$dir/D.err" & d=$!
wait_for D
kill "$b" "$d"; wait 2>/dev/null
cat "$dir/A.out" "$dir/B.out" "$dir/D.out"
"#;

/// Runs [`SCENARIO`] under `wrapper` (empty, or `salloc …` for Slurm steps) with
/// `launcher` words before each binder, and checks it: A and B on different CPUs, C
/// refused naming both jobs, D on A's CPUs once A has ended. Job ids start with `id`.
pub fn two_jobs_then_a_third(
    name: &str,
    wrapper: &[&str],
    launcher: &[&str],
    id: &str,
    env: &[(&str, &str)],
) {
    let dir = scratch(name);
    let dir_arg = dir.to_str().unwrap();
    let mut words: Vec<&str> = wrapper.to_vec();
    words.extend(["bash", "-c", SCENARIO, "scenario", dir_arg]);
    words.extend_from_slice(launcher);
    let mut cmd = Command::new(words[0]);
    cmd.args(&words[1..]);
    for (key, _) in std::env::vars() {
        if common::is_launcher_var(&key) && !key.starts_with("SLURM_CONF") {
            cmd.env_remove(key);
        }
    }
    cmd.envs(env.iter().copied())
        .env("BIN", crate::common::binder_exe())
        .env("BINDER_LEDGER_DIR", dir.join("ledger"))
        .env("BINDER_SITE_FILE", "/nonexistent")
        .current_dir(common::root());
    let out = run(&mut cmd, SUCCESS);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let jobs: BTreeMap<String, (String, String)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3).then(|| (f[0].to_owned(), (f[1].to_owned(), f[2].to_owned())))
        })
        .collect();
    let err =
        |tag: &str| std::fs::read_to_string(dir.join(format!("{tag}.err"))).unwrap_or_default();
    let all_err = format!("A: {}\nB: {}\nD: {}", err("A"), err("B"), err("D"));
    let (Some(a), Some(b), Some(d)) = (jobs.get("A"), jobs.get("B"), jobs.get("D")) else {
        panic!("missing job lines:\n{text}\n{all_err}");
    };
    assert_ne!(a.1, b.1, "A and B share cpus:\n{text}");
    assert_ne!(a.0, b.0, "A and B are one job:\n{text}");
    assert!(
        a.0.starts_with(id) && b.0.starts_with(id),
        "job ids {} and {} are not {id}…",
        a.0,
        b.0
    );
    assert!(text.contains(&format!("C rc={REFUSED}")), "C ran:\n{text}");
    let c = err("C");
    assert!(
        c.contains("too few free units on this node")
            && c.contains(&format!("job {} of ", a.0))
            && c.contains(&format!("job {} of ", b.0)),
        "C's refusal does not name A and B:\n{c}"
    );
    assert_eq!(d.1, a.1, "D did not get A's cpus back:\n{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_open_mpi_jobs_then_a_third() {
    if !common::require_tool("mpirun", "the ledger tests") {
        return;
    }
    let mpirun = [
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
        "--bind-to",
        "none",
        "-np",
        "1",
    ];
    two_jobs_then_a_third("ompi", &[], &mpirun, "openmpi:", &[]);
}

#[test]
fn two_hydra_jobs_then_a_third() {
    if !common::require_tool("mpiexec.hydra", "the ledger tests") {
        return;
    }
    two_jobs_then_a_third("hydra", &[], &["mpiexec.hydra", "-np", "1"], "hydra:", &[]);
}

/// A running binder job started directly (no launcher): the child and its pid.
fn background(dir: &Path, shape: &str) -> std::process::Child {
    let mut child = binder()
        .env("BINDER_LEDGER_DIR", dir.join("ledger"))
        .args([dir.join(shape).to_str().unwrap(), "--", "sleep", "60"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until it is recorded.
    let deadline = Instant::now() + Duration::from_secs(20);
    while node_json(dir)["jobs"].as_array().map_or(0, Vec::len) == 0 {
        assert!(Instant::now() < deadline, "the job never appeared");
        if let Ok(Some(s)) = child.try_wait() {
            panic!("binder exited with {s}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn node_json(dir: &Path) -> serde_json::Value {
    let out = run(
        binder()
            .env("BINDER_LEDGER_DIR", dir.join("ledger"))
            .args(["node", "--format", "json"]),
        SUCCESS,
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The CPUs an all-cores job gets now.
fn all_cores_get(dir: &Path) -> String {
    let out = run(
        binder().env("BINDER_LEDGER_DIR", dir.join("ledger")).args([
            dir.join("all.yaml").to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status | cut -f2",
        ]),
        SUCCESS,
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn allowed() -> String {
    let out = run(
        Command::new("sh").args(["-c", "grep Cpus_allowed_list /proc/self/status | cut -f2"]),
        SUCCESS,
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_killed_job_blocks_nobody() {
    let dir = scratch("killed");
    let mut job = background(&dir, "one.yaml");
    let held = node_json(&dir)["jobs"][0]["cpus"]
        .as_str()
        .unwrap()
        .to_owned();
    let rest = all_cores_get(&dir);
    assert!(!rest.is_empty() && rest != held, "{rest} vs {held}");
    // SIGKILL: no cleanup at all; the claim stays in the ledger, and counts for nothing.
    job.kill().unwrap();
    job.wait().unwrap();
    let killed = format!("c.{}.", job.id());
    let claims = || {
        std::fs::read_dir(own_dir(&dir))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&killed)
            })
            .count()
    };
    assert_eq!(claims(), 1, "the killed job's claim is still there");
    let node = node_json(&dir);
    assert!(
        node["ignored"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["why"].as_str().unwrap().contains("is gone")),
        "{node}"
    );
    assert_eq!(all_cores_get(&dir), allowed());
    // That launch removed the dead claim.
    assert_eq!(claims(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// This user's own directory in the scratch ledger root.
fn own_dir(dir: &Path) -> PathBuf {
    let uid = rustix::process::geteuid().as_raw();
    dir.join("ledger").join(format!("binder-ledger.{uid}"))
}

/// A hand-written claim of `pid` on `cpu` (format 2).
fn entry(pid: u32, start: u64, cpu: usize) -> String {
    serde_json::json!({
        "format": binder_core::ledger::FORMAT, "job": "forged:1", "rank": 0, "size": 1, "pid": pid, "start": start,
        "cpus": cpu.to_string(), "gpus": [], "pack": "fill", "unit": "core", "places": 1
    })
    .to_string()
}

fn start_of(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn forged_entries_count_for_nothing_and_true_ones_count() {
    let dir = scratch("forged");
    let ledger = own_dir(&dir);
    std::fs::create_dir_all(&ledger).unwrap();
    let first = allowed()
        .split([',', '-'])
        .next()
        .unwrap()
        .parse::<usize>()
        .unwrap();
    // An unbound live process claiming one cpu: its affinity is wider than the claim.
    let mut loose = Command::new("sleep").arg("60").spawn().unwrap();
    let name = |pid: u32, start: u64, what: &str| format!("c.{pid}.{start}.0.{what}");
    let write = |name: String, text: String| std::fs::write(ledger.join(name), text).unwrap();
    let loose_start = start_of(loose.id());
    write(
        name(loose.id(), loose_start, "loose"),
        entry(loose.id(), loose_start, first),
    );
    // A dead PID.
    write(name(4_000_000, 1, "dead"), entry(4_000_000, 1, first));
    // Torn JSON, for a live process.
    write(
        name(loose.id(), loose_start, "torn"),
        entry(loose.id(), loose_start, first)[..40].to_owned(),
    );
    let node = node_json(&dir);
    let whys: Vec<&str> = node["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["why"].as_str().unwrap())
        .collect();
    assert!(
        whys.iter().any(|w| w.contains("not inside its claim's")),
        "{whys:?}"
    );
    assert!(whys.iter().any(|w| w.contains("is gone")), "{whys:?}");
    assert!(whys.iter().any(|w| w.starts_with("corrupt")), "{whys:?}");
    assert_eq!(all_cores_get(&dir), allowed(), "a forged entry counted");
    // That launch removed this user's dead claim; the live forgeries stay ignored.
    assert!(!ledger.join(name(4_000_000, 1, "dead")).exists());
    // The same entry for a process really bound to that cpu counts.
    let mut bound = Command::new("taskset")
        .args(["-c", &first.to_string(), "sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let bound_start = start_of(bound.id());
    write(
        name(bound.id(), bound_start, "true"),
        entry(bound.id(), bound_start, first),
    );
    let got = all_cores_get(&dir);
    let cpus: BTreeSet<usize> = binder_core::procfs::parse_list(&got)
        .unwrap()
        .into_iter()
        .collect();
    assert!(
        !cpus.contains(&first),
        "{got} includes the bound cpu {first}"
    );
    for child in [&mut loose, &mut bound] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// 8 jobs × 32 tasks started at once under Open MPI (`bind: none`: 256 tasks on 2 CPUs).
/// Every task of a job names the same job; the jobs are 8; each job's file lists its 32
/// ranks once each: no lost update, no torn file.
#[test]
fn eight_jobs_of_thirty_two_tasks_at_once() {
    if !common::require_tool("mpirun", "the ledger tests") {
        return;
    }
    let dir = scratch("many");
    let started = Instant::now();
    let children: Vec<_> = (0..8)
        .map(|_| {
            let mut cmd = Command::new("mpirun");
            for (key, _) in std::env::vars() {
                if common::is_launcher_var(&key) {
                    cmd.env_remove(key);
                }
            }
            cmd.current_dir(common::root())
                .env("BINDER_LEDGER_DIR", dir.join("ledger"))
                .args([
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                    "-np",
                    "32",
                    crate::common::binder_exe(),
                    "shapes/bind-none.yaml",
                    "--",
                    "sh",
                    "-c",
                    "echo $BINDER_JOB $BINDER_LOCAL_RANK",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut jobs = BTreeSet::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<(&str, usize)> = text
            .lines()
            .map(|l| {
                let (job, rank) = l.split_once(' ').unwrap();
                (job, rank.parse().unwrap())
            })
            .collect();
        let ids: BTreeSet<&str> = lines.iter().map(|(j, _)| *j).collect();
        let ranks: BTreeSet<usize> = lines.iter().map(|(_, r)| *r).collect();
        assert_eq!(ids.len(), 1, "one mpirun, several jobs: {ids:?}");
        assert_eq!(ranks, (0..32).collect(), "{text}");
        jobs.insert(ids.into_iter().next().unwrap().to_owned());
    }
    let elapsed = started.elapsed();
    assert_eq!(jobs.len(), 8, "{jobs:?}");
    // One plan per job, of 32 ranks: every rank of a job joined its first task's plan (a
    // rank that planned again would have printed another job id above). Plans whose tasks
    // all ended are removed by later launches, so at most 8 are left.
    let mut files = 0;
    for e in std::fs::read_dir(own_dir(&dir)).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("job.") {
            continue;
        }
        files += 1;
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(jobs.contains(v["job"].as_str().unwrap()), "{path:?}");
        assert_eq!(v["tasks"].as_array().unwrap().len(), 32);
    }
    assert!((1..=8).contains(&files), "{files} plans");
    eprintln!("8 jobs x 32 tasks through the ledger: {elapsed:?}, failures 0");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `bind: none` task binds no CPU, so a node whose CPUs are all held still runs it.
#[test]
fn bind_none_runs_on_a_full_node() {
    let dir = scratch("bind-none");
    let mut a = background(&dir, "one.yaml");
    let mut b = background(&dir, "one.yaml");
    let out = run(
        binder().env("BINDER_LEDGER_DIR", dir.join("ledger")).args([
            "shapes/bind-none.yaml",
            "--",
            "sh",
            "-c",
            "echo ran",
        ]),
        SUCCESS,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ran");
    // A job that binds is refused there, naming the two.
    let refused = run(
        binder().env("BINDER_LEDGER_DIR", dir.join("ledger")).args([
            dir.join("one.yaml").to_str().unwrap(),
            "--",
            "true",
        ]),
        REFUSED,
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("wait for them to end"), "{err}");
    for job in [&mut a, &mut b] {
        job.kill().unwrap();
        job.wait().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--share` on a full node spreads jobs over the least loaded CPUs (it put 252 of 256
/// tasks on CPU 0 once): 8 sharing one-core jobs on the 2 CPUs, 4 on each.
#[test]
fn sharing_jobs_spread_over_the_node() {
    let host = allowed();
    let cpus = binder_core::procfs::parse_list(&host).unwrap();
    let dir = scratch("share");
    let mut jobs = Vec::new();
    let mut got: BTreeMap<usize, usize> = BTreeMap::new();
    for _ in 0..(4 * cpus.len()) {
        let mut child = binder()
            .env("BINDER_LEDGER_DIR", dir.join("ledger"))
            .args([
                "--share",
                dir.join("one.yaml").to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "grep Cpus_allowed_list /proc/self/status | cut -f2; exec sleep 60",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // One at a time, each once it is bound: the next one sees it.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let cpu: usize = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        *got.entry(cpu).or_default() += 1;
        jobs.push(child);
    }
    for mut job in jobs {
        job.kill().unwrap();
        job.wait().unwrap();
    }
    let counts: Vec<usize> = got.values().copied().collect();
    assert_eq!(got.len(), cpus.len(), "{got:?}");
    assert!(counts.iter().all(|&n| n == 4), "{got:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
