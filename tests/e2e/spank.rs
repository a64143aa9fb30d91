//! binder's SPANK plugin under the throwaway Slurm of `slurm.sh` (`srun --binder=…`): each
//! task's real affinity against the dry-run, a refusal, GPU variables from a shared XML,
//! and two concurrent steps kept apart by the node ledger.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use super::{promised, PROBE};
use crate::common;

/// `srun ARGS` from the repository root with the test's Slurm and a ledger of `ledger`
/// (the site configurations' tests use it too).
pub(super) fn srun(conf: &str, ledger: &std::path::Path, args: &[&str]) -> Command {
    let mut srun = Command::new("srun");
    common::hermetic(&mut srun)
        .env("SLURM_CONF", conf)
        .env("BINDER_LEDGER_DIR", ledger)
        .args(args);
    srun
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `rank|affinity|BINDER_CPUS|BINDER_LOCAL_SIZE` lines, by rank.
fn probes(stdout: &str) -> BTreeMap<usize, Vec<String>> {
    stdout
        .lines()
        .map(|l| {
            let f: Vec<String> = l.split('|').map(str::to_owned).collect();
            (f[0].parse().unwrap_or_else(|_| panic!("rank in {l:?}")), f)
        })
        .collect()
}

pub(crate) fn srun_binder(conf: &str) {
    let ledger = common::private_ledger();
    // Each task's CPUs are the dry-run's, set by the plugin before exec.
    let shape = "shapes/cores-packed.yaml";
    let out = srun(
        conf,
        &ledger,
        &["-n", "2", "--overcommit", "--cpu-bind=none"],
    )
    .args([&format!("--binder={shape}"), "sh", "-c", PROBE])
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "srun --binder: {stdout}\n{stderr}");
    let want = promised(shape, 2);
    let seen = probes(&stdout);
    assert_eq!(seen.len(), 2, "{stdout}");
    for (rank, f) in &seen {
        assert_eq!(
            f[1], want[rank],
            "rank {rank}: affinity vs dry-run\n{stdout}"
        );
        assert_eq!(f[2], want[rank], "rank {rank}: BINDER_CPUS\n{stdout}");
        assert_eq!(f[3], "2", "rank {rank}: BINDER_LOCAL_SIZE\n{stdout}");
    }
    eprintln!("srun --binder={shape}:\n{stdout}");

    // SEMANTICS §4.3, an option that exists does something: `--binder-report` prints each
    // task's binding line, `--binder-verbose` where the envelope came from (on 6eb4e5b
    // both were registered and never read: nothing was printed).
    let out = srun(
        conf,
        &ledger,
        &["-n", "2", "--overcommit", "--cpu-bind=none"],
    )
    .args([&format!("--binder={shape}"), "--binder-report", "true"])
    .output()
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "--binder-report: {stdout}\n{stderr}");
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("binder: ") && l.contains("[slurm]"))
        .collect();
    assert_eq!(reports.len(), 2, "one report line per task: {stderr}");
    for rank in 0..2 {
        let want = format!("local {rank}/2) [slurm]");
        assert!(
            reports
                .iter()
                .any(|l| l.contains(&want) && l.contains(&promised(shape, 2)[&rank])),
            "rank {rank}'s line with its cpus: {stderr}"
        );
    }
    let out = srun(conf, &ledger, &["-n", "1", "--cpu-bind=none"])
        .args([&format!("--binder={shape}"), "--binder-verbose", "true"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "--binder-verbose: {stdout}\n{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("binder: job's allocation here: ")),
        "--binder-verbose says where the envelope came from: {stderr}"
    );

    // `--binder-report` alone (no --binder, no site default here): the task runs, and
    // its one line says why nothing was bound (#63: it did nothing, silently).
    let out = srun(conf, &ledger, &["-n", "1", "--binder-report"])
        .args(["true"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "--binder-report alone: {stdout}\n{stderr}"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(
                |l| l.starts_with("binder: nothing to report") && l.contains("no --binder=SHAPE")
            )
            .count(),
        1,
        "--binder-report alone says why: {stderr}"
    );

    // A bad shape: the step fails with binder's one line, and the command never runs.
    let dir = common::scratch().join("spank");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(&bad, "resources:\n  - type: corre\n").unwrap();
    let marker = dir.join("ran");
    let out = srun(conf, &ledger, &["-n", "1", "--cpu-bind=none"])
        .arg(format!("--binder={}", bad.display()))
        .args(["touch", &marker.display().to_string()])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "a bad shape ran: {stdout}\n{stderr}");
    assert!(!marker.exists(), "the command ran despite the refusal");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("binder: "))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains("bad.yaml:2:") && lines[0].contains("core"),
        "{}",
        lines[0]
    );
    eprintln!("srun --binder=bad.yaml: {stderr}");

    // `membind: local` through the plugin: memory bound through hwloc, as `binder` does.
    if common::has("numactl") {
        let out = srun(conf, &ledger, &["-n", "1", "--cpu-bind=none"])
            .args([
                "--binder=shapes/hybrid-numa-openmp.yaml",
                "numactl",
                "--show",
            ])
            .output()
            .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "membind: {stdout}\n{stderr}");
        assert!(
            stdout.contains("policy: bind") && stdout.contains("membind: 0"),
            "membind: {stdout}\n{stderr}"
        );
    }

    // srun's own binding and binder's both: refused, saying which to drop.
    let out = srun(conf, &ledger, &["-n", "1", "--cpu-bind=map_cpu:0"])
        .args([&format!("--binder={shape}"), "true"])
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("binder: srun --cpu-bind=") && stderr.contains("both bind"),
        "{stderr}"
    );

    // A GPU shape on a shared XML (HWLOC_THISSYSTEM=1: binding nothing but devices):
    // the plugin's discovery sees the job's HWLOC_* variables, as `binder` would.
    if let Some(shared) = common::shared() {
        let xml = common::topology(&shared, "aws-g4dn-metal-2s-48c-smt2-8t4.xml");
        let out = srun(
            conf,
            &ledger,
            &["-n", "2", "--overcommit", "--cpu-bind=none"],
        )
        .env("HWLOC_XMLFILE", &xml)
        .env("HWLOC_THISSYSTEM", "1")
        .args([
            "--binder=shapes/gpu-devices-only.yaml",
            "sh",
            "-c",
            r#"echo "$BINDER_LOCAL_RANK|$CUDA_VISIBLE_DEVICES|$BINDER_GPUS|$CUDA_DEVICE_ORDER""#,
        ])
        .output()
        .unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        let mut lines: Vec<&str> = stdout.lines().collect();
        lines.sort();
        // One T4 each, in PCI order (as `binder` gives rank 1 GPU 1 in tests/integration/gpus.rs).
        assert_eq!(lines, ["0|0|0|PCI_BUS_ID", "1|1|1|PCI_BUS_ID"], "{stderr}");
    }

    // Two steps at once, one PU each: the ledger keeps them apart.
    let one = dir.join("one-pu.yaml");
    std::fs::write(&one, "resources:\n  - type: pu\n    count: 1\n").unwrap();
    let run_two = || {
        let spawn = || {
            srun(conf, &ledger, &["-n", "1", "--cpu-bind=none"])
                .arg(format!("--binder={}", one.display()))
                .args([
                    "sh",
                    "-c",
                    "grep Cpus_allowed_list /proc/self/status | cut -f2; sleep 2",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let a = spawn();
        std::thread::sleep(std::time::Duration::from_millis(500));
        let b = spawn();
        (a.wait_with_output().unwrap(), b.wait_with_output().unwrap())
    };
    let (a, b) = run_two();
    let (a_out, a_err) = text(&a);
    let (b_out, b_err) = text(&b);
    assert!(a.status.success() && b.status.success(), "{a_err}\n{b_err}");
    assert_ne!(
        a_out.trim(),
        b_out.trim(),
        "two concurrent steps got the same PU: {a_out} {b_out}"
    );
    eprintln!(
        "two concurrent steps: {} and {}",
        a_out.trim(),
        b_out.trim()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
