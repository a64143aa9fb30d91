//! Running a task on this host (no launcher): the binding it really gets, its
//! environment, exit status, PID and signals, and that bad input never runs it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use binder::exit_code::{NOT_EXECUTABLE, NOT_FOUND, REFUSED, SUCCESS};

use crate::common::{binder, run};

/// The plan `--dry-run` promises on this host for `rank` of `size`, as JSON.
fn promised(shape: &str, rank: usize, size: usize) -> serde_json::Value {
    let out = run(
        binder().args([
            "-n",
            "--format",
            "json",
            "--local-rank",
            &rank.to_string(),
            "--local-size",
            &size.to_string(),
            shape,
        ]),
        SUCCESS,
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Tasks this host can hold with one core each (at least 1).
fn host_cores() -> usize {
    let out = run(
        binder().args(["-n", "--format", "json", "shapes/cores-packed.yaml"]),
        SUCCESS,
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["objects"].as_array().unwrap().len()
}

fn task_output(args: &[&str], probe: &str) -> String {
    let out = run(binder().args(args).args(["--", "sh", "-c", probe]), SUCCESS);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn each_rank_gets_the_promised_affinity_and_environment() {
    let size = host_cores().min(2);
    for rank in 0..size {
        let want = promised("shapes/cores-packed.yaml", rank, size);
        let got = task_output(
            &[
                "--local-rank",
                &rank.to_string(),
                "--local-size",
                &size.to_string(),
                "shapes/cores-packed.yaml",
            ],
            "grep Cpus_allowed_list /proc/self/status; env | grep ^BINDER_ | sort",
        );
        let cpulist = want["cpulist"].as_str().unwrap();
        assert!(
            got.contains(&format!("Cpus_allowed_list:\t{cpulist}\n")),
            "{got}"
        );
        for line in [
            format!("BINDER_CPUS={cpulist}"),
            format!("BINDER_CPUSET={}", want["cpuset"].as_str().unwrap()),
            format!("BINDER_LOCAL_RANK={rank}"),
            format!("BINDER_LOCAL_SIZE={size}"),
            "BINDER_UNIT=core".to_owned(),
        ] {
            assert!(got.lines().any(|l| l == line), "missing {line} in\n{got}");
        }
    }
}

#[test]
fn openmp_places_follow_the_units() {
    let want = promised("tests/fixtures/shapes/openmp-pu.yaml", 0, 1);
    let cpus: Vec<u64> = want["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    let got = task_output(
        &["tests/fixtures/shapes/openmp-pu.yaml"],
        "env | grep ^OMP_ | sort",
    );
    let places: Vec<String> = cpus.iter().map(|c| format!("{{{c}}}")).collect();
    assert!(
        got.contains(&format!("OMP_NUM_THREADS={}\n", cpus.len())),
        "{got}"
    );
    assert!(
        got.contains(&format!("OMP_PLACES={}\n", places.join(","))),
        "{got}"
    );
    assert!(got.contains("OMP_PROC_BIND=close\n"), "{got}");
    // A user's own thread count is kept.
    let out = run(
        binder()
            .args([
                "tests/fixtures/shapes/openmp-pu.yaml",
                "--",
                "sh",
                "-c",
                "echo $OMP_NUM_THREADS",
            ])
            .env("OMP_NUM_THREADS", "7"),
        SUCCESS,
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "7\n");
    // Without `openmp: true` nothing OpenMP is set.
    let got = task_output(
        &["shapes/cores-packed.yaml"],
        "env | grep ^OMP_PLACES || true",
    );
    assert_eq!(got, "");
}

#[test]
fn membind_local_binds_memory_to_the_tasks_numa_nodes() {
    if !crate::common::require_tool("numactl", "membind") {
        return;
    }
    let got = task_output(
        &["tests/fixtures/shapes/openmp-membind.yaml"],
        "numactl --show",
    );
    assert!(got.contains("policy: bind"), "{got}");
    let plain = task_output(&["shapes/cores-packed.yaml"], "numactl --show");
    assert!(plain.contains("policy: default"), "{plain}");
}

#[test]
fn bind_none_keeps_the_inherited_affinity() {
    let out = run(
        Command::new("taskset")
            .args(["-c", "0", crate::common::binder_exe(), "shapes/bind-none.yaml", "--"])
            .args(["sh", "-c", "grep Cpus_allowed_list /proc/self/status; echo unit=$BINDER_UNIT cpus=${BINDER_CPUS-unset}"])
            .current_dir(crate::common::root()),
        SUCCESS,
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "Cpus_allowed_list:\t0\nunit=none cpus=unset\n"
    );
}

/// A task of an outer binder (or a user) may carry BINDER_CPUS etc.; under `bind: none`
/// binder sets none of them, so stale ones must not reach the task.
#[test]
fn stale_binder_variables_never_reach_the_task() {
    let out = run(
        binder()
            .args([
                "shapes/bind-none.yaml",
                "--",
                "sh",
                "-c",
                "env | grep ^BINDER_ | grep -v -e ^BINDER_SITE_FILE= -e ^BINDER_LEDGER_DIR= | sort",
            ])
            .env("BINDER_CPUS", "0-99")
            .env("BINDER_CPUSET", "0xffffffff")
            .env("BINDER_GPUS", "7")
            .env("BINDER_NICS", "ib9")
            .env("BINDER_JOB", "stale"),
        SUCCESS,
    );
    // BINDER_JOB is the ledger's name for the job: outside a launcher, the process group.
    let text = String::from_utf8(out.stdout).unwrap();
    let (job, rest) = text.split_once('\n').unwrap();
    assert!(job.starts_with("BINDER_JOB=pgid-"), "{text}");
    assert_eq!(
        rest,
        "BINDER_LOCAL_RANK=0\nBINDER_LOCAL_SIZE=1\nBINDER_UNIT=none\n"
    );
}

/// Under `bind: none` with an inherited mask, `-v` says the mask is kept, not rebound.
#[test]
fn verbose_under_bind_none_says_the_binding_is_kept() {
    if host_cores() < 2 {
        return;
    }
    let out = run(
        Command::new("taskset")
            .args([
                "-c",
                "0",
                crate::common::binder_exe(),
                "-v",
                "shapes/bind-none.yaml",
                "--",
                "true",
            ])
            .current_dir(crate::common::root()),
        SUCCESS,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("`bind: none` keeps that binding") && !err.contains("rebinds"),
        "{err}"
    );
}

/// Adding `--dry-run` to a launch line previews the plan and runs nothing.
#[test]
fn dry_run_with_a_command_previews_and_runs_nothing() {
    let marker = std::env::temp_dir().join(format!("binder-dry-{}", std::process::id()));
    let out = run(
        binder()
            .args(["--dry-run", "shapes/bind-none.yaml", "--", "touch"])
            .arg(&marker),
        SUCCESS,
    );
    assert!(String::from_utf8(out.stdout).unwrap().contains("rank 0/1"));
    assert!(!marker.exists());
}

/// `-v` with `--dry-run` says where the task identity came from, on stderr.
#[test]
fn verbose_dry_run_names_the_identity() {
    let out = run(
        binder()
            .args(["-n", "-v", "shapes/bind-none.yaml"])
            .env("OMPI_COMM_WORLD_LOCAL_RANK", "1")
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        SUCCESS,
    );
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!(
            "binder: {}: local rank 1/2 from openmpi (OMPI_COMM_WORLD_LOCAL_RANK=1 OMPI_COMM_WORLD_LOCAL_SIZE=2)\n",
            binder_core::identity::hostname()
        )
    );
}

#[test]
fn report_and_verbose_lines() {
    let out = run(
        Command::new("taskset")
            .args([
                "-c",
                "0",
                crate::common::binder_exe(),
                "--report",
                "--verbose",
                "shapes/cores-packed.yaml",
                "--",
                "true",
            ])
            .current_dir(crate::common::root())
            .env("MPI_LOCALRANKID", "0")
            .env("MPI_LOCALNRANKS", "1"),
        SUCCESS,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    let host = binder_core::identity::hostname();
    assert!(
        lines[0].starts_with(&format!(
            "binder: {host}: local rank 0/1 from hydra (MPI_LOCALRANKID=0 MPI_LOCALNRANKS=1)"
        )),
        "{err}"
    );
    if host_cores() > 1 {
        assert!(
            lines[1].contains("started bound to cpus 0 of the allowed")
                && lines[1].contains("`mpiexec -bind-to none`"),
            "{err}"
        );
    }
    let report = lines.last().unwrap();
    assert!(
        report.starts_with(&format!(
            "binder: {host} local rank 0/1 [hydra] unit core: core:"
        )),
        "{err}"
    );
    assert!(
        report.contains(" cpus ") && report.contains(" mask 0x"),
        "{err}"
    );
    // BINDER_REPORT=1 does the same as --report.
    let out = run(
        binder()
            .args(["shapes/cores-packed.yaml", "--", "true"])
            .env("BINDER_REPORT", "1"),
        SUCCESS,
    );
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .starts_with(&format!("binder: {host} local rank 0/1 [none] unit core")));
    // With the launcher's job-wide rank, the report names it (Open MPI's and Slurm's style).
    let out = run(
        binder()
            .args(["--report", "shapes/cores-packed.yaml", "--", "true"])
            .env("OMPI_COMM_WORLD_RANK", "12")
            .env("OMPI_COMM_WORLD_LOCAL_RANK", "0")
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
        SUCCESS,
    );
    assert!(String::from_utf8(out.stderr).unwrap().starts_with(&format!(
        "binder: {host} rank 12 (local 0/1) [openmpi] unit core"
    )));
}

#[test]
fn exit_status_passes_through() {
    run(
        binder().args(["shapes/cores-packed.yaml", "--", "sh", "-c", "exit 7"]),
        7,
    );
    let out = run(
        binder().args(["shapes/cores-packed.yaml", "--", "no-such-command-xyz"]),
        NOT_FOUND,
    );
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("command `no-such-command-xyz` not found"));
    run(
        binder().args(["shapes/cores-packed.yaml", "--", "/etc/passwd"]),
        NOT_EXECUTABLE,
    );
    run(
        binder().args(["shapes/cores-packed.yaml", "--", "./shapes"]),
        NOT_EXECUTABLE,
    );
}

#[test]
fn the_pid_is_the_tasks_and_signals_reach_it() {
    let mut child = binder()
        .args(["shapes/cores-packed.yaml", "--", "sh", "-c"])
        .arg("trap 'echo got-term; exit 3' TERM; echo $$; while :; do sleep 0.05; done")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim(),
        child.id().to_string(),
        "binder execs, so the task keeps its PID"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "got-term\n");
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

#[test]
fn bad_input_never_runs_the_command() {
    let dir = std::env::temp_dir().join(format!("binder-never-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (vec!["tests/fixtures/shapes/typo-key.yaml"], vec![]),
        (vec!["tests/fixtures/shapes/too-many-cores.yaml"], vec![]),
        (vec!["no-such-shape.yaml"], vec![]),
        (
            vec!["--local-size", "4096", "shapes/cores-packed.yaml"],
            vec![],
        ),
        (
            vec!["shapes/cores-packed.yaml"],
            vec![
                ("OMPI_COMM_WORLD_LOCAL_RANK", "x"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ],
        ),
        (
            vec!["shapes/cores-packed.yaml"],
            vec![("PALS_LOCAL_RANKID", "0")],
        ),
    ];
    for (args, env) in cases {
        let mut cmd = binder();
        cmd.args(&args).args(touch).envs(env.iter().copied());
        run(&mut cmd, REFUSED);
        assert!(!marker.exists(), "{args:?} {env:?} ran the command");
    }
    run(
        binder().args(["shapes/cores-packed.yaml"]).args(touch),
        SUCCESS,
    );
    assert!(marker.exists(), "the control case runs it");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// binder trims hwloc's host discovery (plugins, x86 backend) through environment
/// variables; the task must not inherit them, and a user's own setting must survive.
#[test]
fn hwloc_plugin_blocklist_does_not_leak_into_the_task() {
    let got = task_output(
        &["shapes/cores-packed.yaml"],
        "env | grep ^HWLOC_ || echo none",
    );
    assert_eq!(got, "none\n");
    let out = run(
        binder()
            .args([
                "shapes/cores-packed.yaml",
                "--",
                "sh",
                "-c",
                "echo $HWLOC_PLUGINS_BLACKLIST",
            ])
            .env("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl"),
        SUCCESS,
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hwloc_gl\n");
}

/// binder ignores SIGPIPE for itself (so `--dry-run | head` ends quietly) and starts from
/// the C runtime (`no_main`); the task must still get what a shell gives it: SIGPIPE not
/// ignored and nothing blocked. `--dry-run | head -c1` ends quietly.
#[test]
fn the_task_starts_with_default_signal_dispositions() {
    let got = task_output(
        &["shapes/cores-packed.yaml"],
        "grep -E '^Sig(Ign|Blk)' /proc/self/status",
    );
    // The same probe under taskset, which changes no signal state, is the reference:
    // whatever the harness ignores is inherited alike, and SIGPIPE must not differ.
    let reference = run(
        Command::new("taskset").args([
            "-c",
            "0",
            "sh",
            "-c",
            "grep -E '^Sig(Ign|Blk)' /proc/self/status",
        ]),
        SUCCESS,
    );
    assert_eq!(got, String::from_utf8(reference.stdout).unwrap());
    assert!(got.contains("SigBlk:\t0000000000000000\n"), "{got}");
    let out = Command::new("sh")
        .args([
            "-c",
            &format!(
                "{} -n --local-size 64 --synthetic 'pack:64 core:64 pu:1' shapes/cores-packed.yaml | head -c1 >/dev/null; echo ${{PIPESTATUS:-}}$?",
                crate::common::binder_exe()
            ),
        ])
        .current_dir(crate::common::root())
        .env("BINDER_LEDGER_DIR", crate::common::private_ledger())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).is_empty(), "{out:?}");
}
