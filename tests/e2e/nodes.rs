//! Multi-node Slurm on this host (SEMANTICS §4.2, §6): `slurm.sh` with two `slurmd -N
//! nodeK`, each in a mount namespace of its own whose /dev/shm (binder's default ledger
//! root) is a private tmpfs, so each node keeps its own node ledger as real nodes do.
//! `-N2 -n3 -m cyclic` through the wrapper and the SPANK plugin: each task's local rank
//! and size are its node's, and its CPUs are what the dry-run promises for that many tasks
//! on a node; two concurrent 2-node jobs are kept apart on every node; a heterogeneous
//! job (`srun -N1 -n1 : -N1 -n2`, one component per node: Slurm gives components
//! distinct nodes) is one job whose tasks on each node are that node's.

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};

use super::{promised, Slurm};
use crate::common::{self, root};

/// `node|rank|affinity|BINDER_CPUS|BINDER_LOCAL_RANK|BINDER_LOCAL_SIZE`.
const PROBE: &str = r#"printf '%s|%s|%s|%s|%s|%s\n' "$SLURMD_NODENAME" "$SLURM_PROCID" "$(grep Cpus_allowed_list /proc/self/status | cut -f2)" "$BINDER_CPUS" "$BINDER_LOCAL_RANK" "$BINDER_LOCAL_SIZE""#;

/// `srun ARGS` with this Slurm; the ledger is each node's own (/dev/shm of its slurmd).
fn srun(slurm: &Slurm, args: &[&str]) -> Command {
    let mut srun = Command::new("srun");
    // Each node's tasks use the default ledger in that node's own /dev/shm.
    common::hermetic(&mut srun)
        .env("SLURM_CONF", &slurm.conf)
        .args(args);
    srun
}

/// Global rank -> the probe's fields, for a step that must have succeeded.
fn tasks(out: &Output, what: &str) -> BTreeMap<usize, Vec<String>> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stdout}\n{stderr}");
    eprintln!("{what}:\n{stdout}");
    stdout
        .lines()
        .filter(|l| l.matches('|').count() == 5)
        .map(|l| {
            let f: Vec<String> = l.split('|').map(str::to_owned).collect();
            (f[1].parse().unwrap(), f)
        })
        .collect()
}

#[test]
fn slurm_two_nodes() {
    let config = [
        ("E2E_SLURM_NODES", "2".to_owned()),
        // Heterogeneous jobs need the backfill scheduler.
        ("E2E_SLURM_SCHEDULER", "sched/backfill".to_owned()),
    ];
    let Some(slurm) = Slurm::start_with(&config) else {
        return;
    };
    let shape = "shapes/cores-packed.yaml";
    let binder = common::binder_exe();
    // -m cyclic: ranks 0 and 2 on node1 (local 0 and 1 of 2), rank 1 alone on node2.
    let want = [("node1", 0, 2), ("node2", 0, 1), ("node1", 1, 2)];
    let wrapper = srun(&slurm, &["-N2", "-n3", "-m", "cyclic", "--overcommit"])
        .args([binder, shape, "--", "sh", "-c", PROBE])
        .output()
        .unwrap();
    let plugin = srun(&slurm, &["-N2", "-n3", "-m", "cyclic", "--overcommit"])
        .args([&format!("--binder={shape}"), "sh", "-c", PROBE])
        .output()
        .unwrap();
    for (out, what) in [(wrapper, "wrapper"), (plugin, "plugin")] {
        let seen = tasks(&out, &format!("srun -N2 -n3 -m cyclic, {what}"));
        assert_eq!(seen.len(), 3, "{what}: {seen:?}");
        for (rank, (node, local, size)) in want.iter().enumerate() {
            let f = &seen[&rank];
            assert_eq!(
                (f[0].as_str(), f[4].as_str(), f[5].as_str()),
                (*node, local.to_string().as_str(), size.to_string().as_str()),
                "{what}: rank {rank}: {f:?}"
            );
            let promised = promised(shape, *size);
            assert_eq!(f[2], promised[local], "{what}: rank {rank} affinity: {f:?}");
            assert_eq!(
                f[3], promised[local],
                "{what}: rank {rank} BINDER_CPUS: {f:?}"
            );
        }
    }

    // A heterogeneous job: component 0 (rank 0) alone on node1, component 1 (ranks 1
    // and 2) on node2; wrapper, and the plugin asked for on either component's options
    // (srun applies it to the whole step).
    let het = [("node1", 0, 1), ("node2", 0, 2), ("node2", 1, 2)];
    let abs = format!("--binder={}", root().join(shape).display());
    let runs = [
        (
            "wrapper",
            vec!["-N1", "-n1", ":", "-N1", "-n2", binder, shape, "--"],
        ),
        (
            "plugin on component 0",
            vec!["-N1", "-n1", &abs, ":", "-N1", "-n2"],
        ),
        (
            "plugin on component 1",
            vec!["-N1", "-n1", ":", "-N1", "-n2", &abs],
        ),
    ];
    for (what, args) in runs {
        let out = srun(&slurm, &args)
            .args(["sh", "-c", PROBE])
            .output()
            .unwrap();
        let seen = tasks(&out, &format!("heterogeneous job, {what}"));
        assert_eq!(seen.len(), 3, "{what}: {seen:?}");
        for (rank, (node, local, size)) in het.iter().enumerate() {
            let f = &seen[&rank];
            let promised = promised(shape, *size);
            assert_eq!(
                (f[0].as_str(), f[4].as_str(), f[5].as_str(), &f[2], &f[3]),
                (
                    *node,
                    local.to_string().as_str(),
                    size.to_string().as_str(),
                    &promised[local],
                    &promised[local]
                ),
                "{what}: rank {rank}: {f:?}"
            );
        }
    }

    // Two 2-node jobs at once, one PU per task: on each node they get different PUs from
    // that node's own ledger.
    let one = common::private_ledger().with_extension("one-pu.yaml");
    std::fs::write(&one, "resources:\n  - type: pu\n    count: 1\n").unwrap();
    let spawn = |delay: &str| {
        srun(&slurm, &["-N2", "-n2", "--overcommit"])
            .arg(format!("--binder={}", one.display()))
            .args(["sh", "-c", &format!("sleep {delay}; {PROBE}; sleep 2")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("0"), spawn("0.5"));
    let a = tasks(&a.wait_with_output().unwrap(), "concurrent 2-node job a");
    let b = tasks(&b.wait_with_output().unwrap(), "concurrent 2-node job b");
    for rank in 0..2 {
        assert_eq!(a[&rank][0], b[&rank][0], "same node for rank {rank}");
        assert_ne!(
            a[&rank][2], b[&rank][2],
            "two jobs on one PU of {}: {a:?} {b:?}",
            a[&rank][0]
        );
    }
    let _ = std::fs::remove_file(&one);
}
