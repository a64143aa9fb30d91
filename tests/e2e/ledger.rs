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

mod forged;
mod many;

/// A scratch directory with a one-core shape and an all-cores shape.
fn scratch(name: &str) -> PathBuf {
    let dir = common::scratch().join(format!("e2e-{name}"));
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
pub(crate) fn two_jobs_then_a_third(
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
    common::hermetic(&mut cmd)
        .args(&words[1..])
        .envs(env.iter().copied())
        .env("BIN", common::binder_exe())
        .env("BINDER_LEDGER_DIR", dir.join("ledger"));
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

/// This user's own directory in the scratch ledger root.
fn own_dir(dir: &Path) -> PathBuf {
    let uid = rustix::process::geteuid().as_raw();
    dir.join("ledger").join(format!("binder-ledger.{uid}"))
}
