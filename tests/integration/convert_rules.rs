//! `binder convert`'s Slurm and hwloc-bind rules (#55) against their peers' own: `bind:
//! slurm-auto` against a transcription of Slurm's automatic binding
//! (`lllp_distribution` in `src/plugins/task/affinity/dist_tasks.c`, Slurm 25.11): with
//! `m` = tasks × CPUs per task, a step without `--cpu-bind` binds each task to whole
//! sockets when `m` equals the allocation's whole sockets, to whole cores when it equals
//! its whole cores (laid out over cores, a core's other threads skipped: no two tasks on
//! one core of an SMT node), to its CPUs when it equals its CPUs, else to the whole
//! allocation.
//! The node is the whole XML here (an exclusive allocation); the objects come from
//! hwloc-calc, the tasks' CPUs from the same shape planned without the binding.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{binder, hwloc_objects, require_tool, scratch, shared, topology};

fn plan(xml: &Path, shape: &Path, n: usize) -> Vec<Vec<usize>> {
    crate::common::dry_run_cpus(xml, shape, n).expect("binder plans it")
}

/// Each rank's PUs widened to the whole objects they touch.
fn widen(ranks: &[Vec<usize>], objects: &BTreeMap<usize, Vec<usize>>) -> Vec<Vec<usize>> {
    ranks
        .iter()
        .map(|pus| {
            let mut wide: Vec<usize> = objects
                .values()
                .filter(|o| o.iter().any(|p| pus.contains(p)))
                .flatten()
                .copied()
                .collect();
            wide.sort_unstable();
            wide.dedup();
            wide
        })
        .collect()
}

#[test]
fn slurm_auto_binding_follows_dist_tasks() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "Slurm's automatic binding") {
        return;
    }
    let dir = scratch().join("slurm-auto");
    std::fs::create_dir_all(&dir).unwrap();
    let mut chosen: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, c) in [
        ("power9-sierra-2s-44c-smt4-4v100-gpunuma.xml", 2),
        ("skylake-2s-36c-smt2.xml", 1),
        ("epyc7451-naples-2s-48c-smt2-8numa.xml", 2),
        ("haswell-2s-24c-smt1-cod.xml", 1),
    ] {
        let xml = topology(&shared, name);
        let shape = |bind: &str, unit: &str| {
            let path = dir.join(format!("c{c}{unit}{}.yaml", bind.len()));
            std::fs::write(
                &path,
                format!("options:\n  pattern: scatter\n{bind}resources:\n  - type: socket\n    count: all\n    with:\n      - type: slot\n        count: all\n        with:\n          - type: {unit}\n            count: {c}\n"),
            )
            .unwrap();
            path
        };
        let (dealt, auto) = (shape("", "pu"), shape("  bind: slurm-auto\n", "pu"));
        // Bound to cores, Slurm lays the tasks out over cores and skips a core's other
        // threads (#64): the same dealing, by cores instead of PUs.
        let by_cores = shape("", "core");
        let packages = hwloc_objects(&xml, "package");
        let cores = hwloc_objects(&xml, "core");
        let pus: Vec<usize> = hwloc_objects(&xml, "pu").into_values().flatten().collect();
        let mut all = pus.clone();
        all.sort_unstable();
        for n in [1, 2, 3, packages.len() / c, cores.len() / c, pus.len() / c] {
            if n == 0 {
                continue;
            }
            let ranks = plan(&xml, &dealt, n);
            let m = n * c;
            let (what, want) = if m == packages.len() {
                ("sockets", widen(&ranks, &packages))
            } else if m == cores.len() {
                ("cores", plan(&xml, &by_cores, n))
            } else if m == pus.len() {
                ("threads", ranks.clone())
            } else {
                ("allocation", vec![all.clone(); n])
            };
            *chosen.entry(what).or_default() += 1;
            assert_eq!(plan(&xml, &auto, n), want, "{name} -n {n} -c {c}: {what}");
        }
    }
    // Every branch of the rule was taken.
    assert_eq!(chosen.len(), 4, "{chosen:?}");
}

/// `binder convert --from hwloc-bind` (#55): the PUs a converted location's shape deals
/// out, over as many tasks as it has units, are the PUs hwloc-calc gives that location,
/// on every fixture XML that has it (hierarchical `socket:1.core:0-1` included).
#[test]
fn converted_hwloc_bind_locations_are_hwloc_calcs() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "hwloc-bind locations") {
        return;
    }
    let dir = scratch().join("hwloc-bind-locations");
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    // (location, unit dealt, units the location must hold on a node that has it whole)
    for (i, (location, unit, whole)) in [
        ("core:4-7", "core", 4),
        ("socket:1", "core", 1),
        ("socket:1.core:0-1", "core", 2),
        ("numa:1.core:0", "core", 1),
        ("numa:1", "core", 1),
        ("pu:3-5", "pu", 3),
    ]
    .into_iter()
    .enumerate()
    {
        let out = binder()
            .args(["convert", "--from", "hwloc-bind", "--", location])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{location}: {out:?}");
        let shape = dir.join(format!("loc{i}.yaml"));
        std::fs::write(&shape, &out.stdout).unwrap();
        for name in crate::common::all_topologies(&shared) {
            let xml = topology(&shared, &name);
            let line = |args: &[&str]| {
                crate::common::hwloc_calc_lines(&xml, args, &[])
                    .first()
                    .cloned()
                    .unwrap_or_default()
            };
            let n: usize = line(&["-N", unit, location]).trim().parse().unwrap_or(0);
            let want: Vec<usize> = line(&["--po", "-I", "pu", location])
                .split(',')
                .filter_map(|p| p.trim().parse().ok())
                .collect();
            let allowed: Vec<usize> = line(&["--po", "-I", "pu", "all"])
                .split(',')
                .filter_map(|p| p.trim().parse().ok())
                .collect();
            // Only where the location holds whole, allowed objects (restricted XMLs
            // aside): the shape deals allowed units, hwloc-calc names the location.
            if n < whole
                || want.iter().any(|p| !allowed.contains(p))
                || name.contains("restricted")
                || name.contains("disallowed")
                || name.contains("offline")
            {
                continue;
            }
            let mut got: Vec<usize> = plan(&xml, &shape, n).into_iter().flatten().collect();
            got.sort_unstable();
            got.dedup();
            let mut want = want;
            want.sort_unstable();
            assert_eq!(got, want, "{name}: hwloc-bind {location}");
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} locations checked");
}

/// `numactl -l` (#55) on a node whose CPU 0's NUMA node the job may not use: the refusal
/// names the nodes it may use and never advises `memory: near`, the setting that failed.
#[test]
fn a_failed_near_memory_never_advises_near() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, "xeon-2s-offline-cpu0-node0.xml");
    let out = binder()
        .args(["convert", "--from", "numactl", "--", "-l"])
        .output()
        .unwrap();
    let shape = scratch().join("numactl-l.yaml");
    std::fs::write(&shape, &out.stdout).unwrap();
    let out = binder()
        .args(["--dry-run", "--local-size", "1"])
        .arg(&shape)
        .arg("--topology")
        .arg(&xml)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(!err.contains("use `memory: near`"), "{err}");
    assert!(err.contains("nodes the job may use (1)"), "{err}");
}

/// `binder convert --from slurm -- -m block:block` (`bind: slurm-auto`) with as many
/// tasks as cores on SMT2 and SMT4 nodes: every task its own core, in logical order, every
/// core used (#64: ranks 0 and 1 both got core 0's threads and package 1 stayed idle).
#[test]
fn slurm_auto_gives_each_task_its_own_core_on_smt_nodes() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "the nodes' cores") {
        return;
    }
    let out = binder()
        .args(["convert", "--from", "slurm", "--", "-m", "block:block"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shape = scratch().join("block-block.yaml");
    std::fs::write(&shape, &out.stdout).unwrap();
    for name in [
        "skylake-2s-36c-smt2.xml",
        "power9-sierra-2s-44c-smt4-4v100-gpunuma.xml",
    ] {
        let xml = topology(&shared, name);
        let cores: Vec<Vec<usize>> = hwloc_objects(&xml, "core").into_values().collect();
        let got = plan(&xml, &shape, cores.len());
        assert_eq!(got, cores, "{name}: task r on core r, alone");
    }
}

/// A plain `srun` line (`binder convert --from slurm --` with nothing after it) converts:
/// Slurm binds it by its own rule, `bind: slurm-auto`, the same as `-n 4` alone; the
/// other peers still need their options, and the example is their own, never Open MPI's
/// for them (#64).
#[test]
fn a_plain_srun_converts_and_other_peers_name_their_own_example() {
    let plain = binder()
        .args(["convert", "--from", "slurm", "--"])
        .output()
        .unwrap();
    assert!(plain.status.success(), "{plain:?}");
    let with_n = binder()
        .args(["convert", "--from", "slurm", "--", "-n", "4"])
        .output()
        .unwrap();
    let body = |o: &std::process::Output| -> String {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        body(&plain).contains("bind: slurm-auto"),
        "{}",
        body(&plain)
    );
    assert_eq!(body(&plain), body(&with_n));
    for (peer, example) in [
        ("numactl", "--from numactl --"),
        ("hwloc-bind", "--from hwloc-bind --"),
        ("torchrun", "--from torchrun --"),
        ("ompi", "--from ompi --"),
    ] {
        let out = binder()
            .args(["convert", "--from", peer, "--"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{peer}: {err}");
        assert!(err.contains(example), "{peer}: {err}");
    }
}

/// Slurm's `mask_ldom` naming a NUMA node the node lacks says which NUMA nodes are there
/// (#64: the refusal blamed only reserved or taken units): on the one-NUMA-node skylake
/// fixture, `mask_ldom:0x4` (node 2) names node 0 as the one there.
#[test]
fn a_numa_node_the_node_lacks_names_those_it_has() {
    let Some(shared) = shared() else { return };
    let out = binder()
        .args([
            "convert",
            "--from",
            "slurm",
            "--",
            "--cpu-bind=mask_ldom:0x4",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let shape = scratch().join("mask-ldom-4.yaml");
    std::fs::write(&shape, &out.stdout).unwrap();
    let xml = topology(&shared, "skylake-2s-36c-smt2.xml");
    let out = binder()
        .args(["--dry-run", "--local-size", "1", "--topology"])
        .arg(&xml)
        .arg(&shape)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains("numa P#2 is not there: numa P#0 is here"),
        "{err}"
    );
}
