//! End to end under the real launchers: Open MPI's `mpirun`, MPICH's `mpiexec.hydra` and
//! a throwaway single-node Slurm. Each rank runs `binder SHAPE -- probe`, and the probe
//! reports the affinity the kernel really gave it; that must be what
//! `binder --dry-run --local-rank r --local-size N` promised.
//!
//! A missing launcher follows the one rule of `common::prerequisite`: a failure, under
//! `CI=true` always, elsewhere unless `BINDER_ALLOW_SKIP=1` makes it a visible skip.
#[path = "../common/mod.rs"]
mod common;
mod flux;
mod install;
mod ledger;
mod nodes;
mod site;
mod spank;
mod steps;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use binder::exit_code::SUCCESS;
use common::{binder, root, run};

const SHAPE: &str = "shapes/cores-packed.yaml";
const TASKS: usize = 2;
/// Prints `rank|affinity|BINDER_CPUS|BINDER_LOCAL_SIZE` from inside the task.
const PROBE: &str = r#"printf '%s|%s|%s|%s\n' "$BINDER_LOCAL_RANK" "$(grep Cpus_allowed_list /proc/self/status | cut -f2)" "$BINDER_CPUS" "$BINDER_LOCAL_SIZE""#;

/// Whether `program` can be used (see `common::prerequisite`).
fn available(program: &str) -> bool {
    common::require_tool(program, "the end-to-end tests")
}

/// What `--dry-run` promises each rank, by rank: its CPU list.
fn promised(shape: &str, size: usize) -> BTreeMap<usize, String> {
    let out = run(
        binder().args([
            "-n",
            "--format",
            "json",
            "--local-size",
            &size.to_string(),
            shape,
        ]),
        SUCCESS,
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["local_rank"].as_u64().unwrap() as usize,
                v["cpulist"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Runs `launcher_args… binder SHAPE -- sh -c PROBE` and checks every rank's report.
fn check(launcher: &mut Command) {
    let bin = common::binder_exe();
    // The job's ranks meet in a ledger of this check's own (tests run in parallel); the
    // caller's SLURM_CONF stays.
    common::hermetic(launcher)
        .args([bin, SHAPE, "--", "sh", "-c", PROBE])
        .env("BINDER_LEDGER_DIR", common::private_ledger());
    let out = run(launcher, SUCCESS);
    let text = String::from_utf8(out.stdout).unwrap();
    let want = promised(SHAPE, TASKS);
    let mut seen = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        assert_eq!(f.len(), 4, "probe line {line:?} in\n{text}");
        let rank: usize = f[0].parse().unwrap_or_else(|_| panic!("rank in {line:?}"));
        assert_eq!(
            f[1], want[&rank],
            "rank {rank}: kernel affinity vs dry-run\n{text}"
        );
        assert_eq!(f[2], want[&rank], "rank {rank}: BINDER_CPUS\n{text}");
        assert_eq!(
            f[3],
            TASKS.to_string(),
            "rank {rank}: BINDER_LOCAL_SIZE\n{text}"
        );
        seen.insert(rank, ());
    }
    assert_eq!(seen.len(), TASKS, "every rank reported once:\n{text}");
}

fn mpirun() -> Command {
    let mut cmd = Command::new("mpirun");
    common::isolated(&mut cmd).args(["--allow-run-as-root", "--oversubscribe"]);
    cmd
}

#[test]
fn open_mpi_without_binding() {
    if !available("mpirun") {
        return;
    }
    check(mpirun().args(["--bind-to", "none", "-np", &TASKS.to_string()]));
}

/// Open MPI binds each rank to a core by default; binder plans over the allowed set, so
/// the plan must not change, and binder rebinds to it.
#[test]
fn open_mpi_with_its_default_binding() {
    if !available("mpirun") {
        return;
    }
    check(mpirun().args(["-np", &TASKS.to_string()]));
    check(mpirun().args([
        "--bind-to",
        "core",
        "--map-by",
        "core",
        "-np",
        &TASKS.to_string(),
    ]));
}

/// Per-rank rules (`ranks:`, issue #13) under `mpirun`: local rank 0 of
/// `shapes/master-worker.yaml` keeps the affinity it inherited (here, without Open MPI's
/// binding, every CPU this test may use), the other ranks get what the dry-run promises.
#[test]
fn per_rank_rules_under_mpirun() {
    if !available("mpirun") {
        return;
    }
    let shape = "shapes/master-worker.yaml";
    let tasks = TASKS + 1;
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let inherited = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned();
    let bin = common::binder_exe();
    let mut launcher = mpirun();
    launcher
        .args(["--bind-to", "none", "-np", &tasks.to_string()])
        .args([bin, shape, "--", "sh", "-c", PROBE]);
    let out = run(&mut launcher, SUCCESS);
    let text = String::from_utf8(out.stdout).unwrap();
    let want = promised(shape, tasks);
    assert_eq!(want[&0], "", "the dry-run leaves rank 0 unbound");
    let mut seen = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        let rank: usize = f[0].parse().unwrap();
        if rank == 0 {
            assert_eq!(f[1], inherited, "rank 0 keeps its affinity\n{text}");
            assert_eq!(f[2], "", "rank 0 has no BINDER_CPUS\n{text}");
        } else {
            assert_eq!(f[1], want[&rank], "rank {rank}: kernel vs dry-run\n{text}");
            assert_eq!(f[2], want[&rank], "rank {rank}: BINDER_CPUS\n{text}");
        }
        seen += 1;
    }
    assert_eq!(seen, tasks, "{text}");
}

/// MPMD: two app contexts of one `mpirun` with different shapes are one job's ranks; one
/// plan cannot hold both, so the later one is refused with the one line that says how to
/// write it as one shape with `ranks:` rules, and nothing runs unbound.
#[test]
fn mpmd_contexts_with_different_shapes_are_refused_with_the_remedy() {
    if !available("mpirun") {
        return;
    }
    let bin = common::binder_exe();
    let mut cmd = mpirun();
    cmd.args([
        "--bind-to",
        "none",
        "-np",
        "1",
        bin,
        "shapes/cores-packed.yaml",
    ])
    .args([
        "--",
        "sleep",
        "2",
        ":",
        "-np",
        "1",
        bin,
        "shapes/cores-scatter.yaml",
    ])
    .args(["--", "sleep", "2"]);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("binder: local rank "))
        .unwrap_or_else(|| panic!("no refusal in:\n{stderr}"));
    assert!(
        line.contains("the job's other ranks on this node run with another shape")
            && line.contains("`ranks:` rule"),
        "{line}"
    );
}

#[test]
fn mpich_hydra() {
    if !available("mpiexec.hydra") {
        return;
    }
    check(Command::new("mpiexec.hydra").args(["-np", &TASKS.to_string()]));
}

#[test]
fn exit_status_through_mpirun() {
    if !available("mpirun") {
        return;
    }
    let bin = common::binder_exe();
    let status = mpirun()
        .current_dir(root())
        .args([
            "--bind-to",
            "none",
            "-np",
            "1",
            bin,
            SHAPE,
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
}

/// A single-node Slurm on localhost, stopped when dropped. One at a time (slurmd and the
/// cgroup mount are not for sharing between parallel tests): each holds [`SLURM_LOCK`].
struct Slurm {
    dir: PathBuf,
    conf: String,
    _one: std::sync::MutexGuard<'static, ()>,
}

static SLURM_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Slurm {
    fn start() -> Option<Slurm> {
        Slurm::start_with(&[])
    }

    /// A Slurm configured by `slurm.sh`'s `E2E_*` variables (a site's task plugins,
    /// ConstrainCores, the plugin's plugstack arguments).
    fn start_with(config: &[(&str, String)]) -> Option<Slurm> {
        let root_user = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout == b"0\n");
        if !available("slurmd") || !available("munged") {
            return None;
        }
        if !common::prerequisite(root_user, "root (the Slurm e2e test starts slurmd)") {
            return None;
        }
        let one = SLURM_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let dir = std::env::temp_dir().join(format!("binder-slurm-{}", std::process::id()));
        let script = root().join("tests/e2e/slurm.sh");
        // binder's SPANK plugin, built beside the executables by the workspace's build.
        let spank = Path::new(common::binder_exe()).with_file_name("libbinder_spank.so");
        assert!(
            spank.is_file(),
            "{} is not built: `cargo build --release` builds it (`cargo test` alone builds only the rlib; .ci/run builds first)",
            spank.display()
        );
        let out = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(&dir)
            .env("BINDER_SPANK", &spank)
            .envs(config.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let slurm = Slurm {
            conf: stdout
                .trim()
                .strip_prefix("export SLURM_CONF=")
                .unwrap_or_default()
                .to_owned(),
            dir,
            _one: one,
        };
        assert!(
            out.status.success() && !slurm.conf.is_empty(),
            "slurm did not start:\n{}\n{}",
            stdout,
            String::from_utf8_lossy(&out.stderr)
        );
        Some(slurm)
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("tests/e2e/slurm.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn slurm_srun() {
    let Some(slurm) = Slurm::start() else { return };
    let mut srun = Command::new("srun");
    srun.env("SLURM_CONF", &slurm.conf).args([
        "-n",
        &TASKS.to_string(),
        "--overcommit",
        "--cpu-bind=none",
    ]);
    check(&mut srun);
    // Two steps of one allocation are two jobs to the ledger (one Slurm per test binary:
    // slurmd and the cgroup mount are not for sharing between parallel tests).
    ledger::two_jobs_then_a_third(
        "slurm",
        &["salloc", "-n", "2", "--overcommit"],
        &["srun", "-n1", "--overlap", "--cpu-bind=none"],
        "slurm:",
        &[("SLURM_CONF", &slurm.conf)],
    );
    spank::srun_binder(&slurm.conf);
    steps::multi_prog_contexts(&slurm);
}

/// 8 ranks sharing one stderr, 20 times, with `-v --report`: every line binder writes is
/// whole (one `write` per line), never two ranks' text spliced together.
#[test]
fn stderr_lines_of_eight_ranks_never_interleave() {
    if !available("mpiexec.hydra") {
        return;
    }
    let bin = common::binder_exe();
    let (mut lines, mut garbled) = (0, Vec::new());
    for _ in 0..20 {
        let mut cmd = Command::new("mpiexec.hydra");
        common::isolated(&mut cmd).args([
            "-np",
            "8",
            bin,
            "-v",
            "--report",
            "shapes/bind-none.yaml",
            "--",
            "true",
        ]);
        let out = run(&mut cmd, SUCCESS);
        for line in String::from_utf8_lossy(&out.stderr).lines() {
            lines += 1;
            let whole = line.starts_with("binder: ")
                && line.matches("binder: ").count() == 1
                && (line.contains("] unit none: not bound")
                    || (line.contains("local rank ") && line.ends_with(')'))
                    || (line.contains(": this task's job on this node (") && line.ends_with(')'))
                    || (line.contains(": joins the plan its first task recorded in ")
                        && line.contains("binder-tests-"))
                    || line.contains(": warning: ")
                    || (line.contains(": job's allocation here: ")
                        && line.ends_with("binder binds inside it")));
            if !whole {
                garbled.push(line.to_owned());
            }
        }
    }
    assert!(lines >= 20 * 24, "only {lines} lines from 20 × 8 ranks");
    assert!(garbled.is_empty(), "garbled lines:\n{}", garbled.join("\n"));
}
