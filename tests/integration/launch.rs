//! Running a task on this host (no launcher): the binding it really gets, its
//! environment, exit status, PID and signals, and that bad input never runs it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use binder::exit_code::{NOT_EXECUTABLE, NOT_FOUND, REFUSED, SUCCESS};

use crate::common::{binder, run};

mod process;

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

/// `membind: interleave | preferred` (issue 36): the kernel's policy for the task, read
/// back by numactl, is the one numactl's own `--interleave`/`--preferred` would set, on
/// the NUMA nodes of the task's CPUs (the first of them for `preferred`; hwloc may ask
/// Linux for `preferred-many` with that one node).
#[test]
fn membind_interleave_and_preferred_set_the_kernels_policy() {
    if !crate::common::require_tool("numactl", "membind") {
        return;
    }
    let got = task_output(
        &["tests/fixtures/shapes/membind-interleave.yaml"],
        "numactl --show",
    );
    assert!(got.contains("policy: interleave"), "{got}");
    let got = task_output(
        &["tests/fixtures/shapes/membind-preferred.yaml"],
        "numactl --show",
    );
    assert!(got.contains("policy: preferred"), "{got}");
    assert!(got.contains("preferred node: 0"), "{got}");
}

#[test]
fn bind_none_keeps_the_inherited_affinity() {
    let out = run(
        crate::common::isolated(&mut Command::new("taskset"))
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
                "env | grep ^BINDER_ | grep -v -e ^BINDER_SITE_FILE= -e ^BINDER_LEDGER_DIR= -e ^BINDER_CACHE_DIR= -e ^BINDER_KERNEL_VIEW= | sort",
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
        crate::common::isolated(&mut Command::new("taskset"))
            .args([
                "-c",
                "0",
                crate::common::binder_exe(),
                "-v",
                "shapes/bind-none.yaml",
                "--",
                "true",
            ])
            .current_dir(crate::common::root())
            .env("MPI_LOCALRANKID", "0")
            .env("MPI_LOCALNRANKS", "1"),
        SUCCESS,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("`bind: none` keeps that binding") && !err.contains("rebinds"),
        "{err}"
    );
}

/// Without a launcher, `taskset -c 0 binder …` is the job's allocation (SEMANTICS §4.1):
/// binder plans inside it, and `-v` says where it came from.
#[test]
fn without_a_launcher_the_inherited_affinity_is_the_allocation() {
    if host_cores() < 2 {
        return;
    }
    let out = run(
        crate::common::isolated(&mut Command::new("taskset"))
            .args([
                "-c",
                "1",
                crate::common::binder_exe(),
                "-v",
                "shapes/cores-packed.yaml",
                "--",
                "sh",
                "-c",
                "grep Cpus_allowed_list /proc/self/status | cut -f2",
            ])
            .current_dir(crate::common::root())
            .env("BINDER_LEDGER_DIR", crate::common::private_ledger()),
        SUCCESS,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains(
            "job's allocation here: cpus 1, from the affinity binder started with (no launcher)"
        ),
        "{err}"
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), "1", "{err}");
}

/// Adding `--dry-run` to a launch line previews the plan and runs nothing.
#[test]
fn dry_run_with_a_command_previews_and_runs_nothing() {
    let marker = crate::common::scratch().join("dry");
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
        crate::common::isolated(&mut Command::new("taskset"))
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
            lines
                .iter()
                .any(|l| l.contains("started bound to cpus 0 of the allocation")
                    && l.contains("`mpiexec -bind-to none`")),
            "{err}"
        );
    }
    // Which job the ledger counts the task in (#65): Hydra names none, so its proxy or
    // the task's parent does.
    assert!(
        lines.iter().any(|l| l.starts_with("binder: job hydra:")
            && l.contains(": this task's job on this node (")),
        "{err}"
    );
    let report = lines.last().unwrap();
    assert!(
        report.starts_with(&format!(
            "binder: {host} rank 0 (local 0/1) [hydra] unit core: core:"
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
    assert!(String::from_utf8(out.stderr).unwrap().starts_with(&format!(
        "binder: {host} rank 0 (local 0/1) [none] unit core"
    )));
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

/// `memory:` at launch (issue 46), read back by numactl: `all` interleaves over every
/// node of this host, a node number binds there, and a node the host does not have is
/// refused before the task runs.
#[test]
fn memory_nodes_reach_the_kernels_policy() {
    if !crate::common::require_tool("numactl", "membind") {
        return;
    }
    let dir = crate::common::scratch().join("memory-launch");
    std::fs::create_dir_all(&dir).unwrap();
    let shape = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let all = shape(
        "all.yaml",
        "options:\n  membind: interleave\n  memory: all\nresources:\n  - type: core\n",
    );
    let got = task_output(&[&all], "numactl --show");
    let nodes = String::from_utf8(
        Command::new("numactl")
            .arg("--hardware")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    // `available: 2 nodes (0-1)` → `interleavemask: 0 1`.
    let every = nodes
        .lines()
        .find_map(|l| l.strip_prefix("available: "))
        .and_then(|l| l.split_once('('))
        .map(|(_, r)| r.trim_end_matches(')').to_owned())
        .unwrap();
    let want: Vec<String> = binder_core::procfs::parse_list(&every)
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(got.contains("policy: interleave"), "{got}");
    assert!(
        got.contains(&format!("interleavemask: {}", want.join(" "))),
        "{got}"
    );
    let first = &want[0];
    let one = shape(
        "one.yaml",
        &format!("options:\n  memory: {first}\nresources:\n  - type: core\n"),
    );
    let got = task_output(&[&one], "numactl --show");
    assert!(
        got.contains("policy: bind") && got.contains(&format!("membind: {first}")),
        "{got}"
    );
    let marker = dir.join("ran");
    let missing = shape(
        "missing.yaml",
        "options:\n  memory: 4000\nresources:\n  - type: core\n",
    );
    let out = run(
        binder().args([&missing, "--", "touch", marker.to_str().unwrap()]),
        125,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("NUMA node(s) 4000"));
    assert!(!marker.exists());
}
