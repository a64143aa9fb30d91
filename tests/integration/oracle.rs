//! binder against hwloc's own tools: `fixtures/tools/oracle.py` computes each rank's
//! CPUs with `hwloc-calc` and compares them with `binder --dry-run --format json`, for
//! every CPU shape of the catalog on real machine topologies at local sizes 1, 2, 3, 8.

use std::process::Command;

use crate::common::{python_with_yaml, root, shared};

/// Eight real machines covering the numbering and allowed-set traps (see MANIFEST.tsv),
/// one test each (a failure names its machine, and nextest runs them side by side).
macro_rules! oracle_on {
    ($($test:ident: $xml:literal,)*) => {
        /// Every topology the sweep runs on.
        const TOPOLOGIES: [&str; [$($xml),*].len()] = [$($xml),*];
        $(
            #[test]
            fn $test() {
                catalog_agrees_with_hwloc_calc_on($xml);
            }
        )*
    };
}

oracle_on! {
    oracle_genoa: "epyc9654-genoa-2s-192c-smt2.xml",
    oracle_skylake: "skylake-2s-36c-smt2.xml",
    oracle_raptorlake: "raptorlake-i7-1370p-hybrid.xml",
    oracle_opteron_cgroup: "opteron-4s-8numa-cgroup-disallowed.xml",
    oracle_naples: "epyc7451-naples-2s-48c-smt2-8numa.xml",
    oracle_power8: "power8-coralea-2s-20c-smt8-4p100.xml",
    oracle_knl: "knl7250-snc4-flat-68c-smt4-8numa.xml",
    oracle_xeon_offline: "xeon-2s-offline-cpu0-node0.xml",
}

fn catalog_agrees_with_hwloc_calc_on(topology: &str) {
    let Some(shared) = shared() else { return };
    if !crate::common::require_tool("hwloc-calc", "the oracle") {
        return;
    }
    let python = python_with_yaml();
    if !crate::common::prerequisite(python.is_some(), "python3 with yaml (for the oracle)") {
        return;
    }
    let python = python.expect("checked");
    let mut shapes: Vec<String> = std::fs::read_dir(root().join("shapes"))
        .unwrap()
        .map(|e| format!("shapes/{}", e.unwrap().file_name().to_string_lossy()))
        // The oracle implements SEMANTICS §1–5: shapes with slots, devices or a binding
        // width are checked by `placement.rs` instead; per-rank rules below.
        .filter(|s| {
            let shape = binder_host::shape_file(&root().join(s)).unwrap();
            !shape.has_slots()
                && !shape.needs_io()
                && binder_plan::unit::choose(&shape).width.is_none()
                && shape.ranks.is_empty()
                // `memory: hbm` plans only where HBM is (its CPUs are cores-packed's).
                && shape.options.memory.is_none()
        })
        .collect();
    shapes.sort();
    let out = Command::new(python)
        .current_dir(root())
        .arg("tests/oracle/sweep.py")
        .arg(crate::common::binder_exe())
        .arg(&shared)
        .args([
            "--topologies",
            topology,
            "--shapes",
            &shapes.join(","),
            "--sizes",
            "1,2,3,8",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let failures: Vec<&str> = text.lines().filter(|l| !l.starts_with("ok ")).collect();
    assert!(
        out.status.success(),
        "oracle disagrees:\n{}\n{}",
        failures.join("\n"),
        String::from_utf8_lossy(&out.stderr)
    );
    let want = format!("{} passed, 0 failed", shapes.len() * 4);
    assert_eq!(text.lines().last(), Some(want.as_str()));
}

/// `shapes/master-worker.yaml` is `cores-packed.yaml` with rank 0 left unbound: its ranks
/// 1..n must be exactly what `cores-packed` gives n-1 tasks, which the sweep above checks
/// against hwloc-calc.
#[test]
fn master_worker_is_cores_packed_for_the_other_ranks() {
    let Some(shared) = shared() else { return };
    let load = |f: &str| binder_host::shape_file(&root().join(f)).unwrap();
    let (master, packed) = (
        load("shapes/master-worker.yaml"),
        load("shapes/cores-packed.yaml"),
    );
    for name in TOPOLOGIES {
        let source = binder_plan::topology::Source::Xml(crate::common::topology(&shared, name));
        let topology = binder_host::load(&source, false).unwrap();
        for n in [2, 3, 8] {
            let (m, p) = match (
                binder_plan::plan(
                    &binder_plan::PlanRequest::new(&master, &topology, n).origin("m"),
                ),
                binder_plan::plan(
                    &binder_plan::PlanRequest::new(&packed, &topology, n - 1).origin("p"),
                ),
            ) {
                (Ok(m), Ok(p)) => (m, p),
                // Too few cores for n-1 tasks: both refuse.
                (Err(_), Err(_)) => continue,
                (m, p) => panic!("{name} n={n}: {:?} vs {:?}", m.err(), p.err()),
            };
            assert!(m.tasks[0].cpuset.is_empty(), "{name} n={n}: rank 0 unbound");
            for r in 1..n {
                assert_eq!(
                    m.tasks[r].cpuset,
                    p.tasks[r - 1].cpuset,
                    "{name} n={n} rank {r}"
                );
            }
        }
    }
}

/// `index:` (issue 36) against hwloc-calc on every fixture topology: a one-task plan of
/// `type: T, index: LIST` binds exactly the allowed PUs hwloc-calc gives for `T:LIST`
/// (whole-node logical indexes, the numbering lstopo and hwloc-calc use), for the first
/// object, the last, and the two after the first, of cores, PUs, NUMA nodes, packages and
/// L3s (objects without CPUs, a GPU's NUMA node, are never named).
#[test]
fn index_names_the_objects_hwloc_calc_names() {
    let Some(shared) = shared() else { return };
    if !crate::common::require_tool("hwloc-calc", "the index oracle") {
        return;
    }
    let dir = crate::common::scratch().join("index-oracle");
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    for name in crate::common::all_topologies(&shared) {
        let xml = crate::common::topology(&shared, &name);
        for (ours, hwloc) in [
            ("core", "Core"),
            ("pu", "PU"),
            ("numa", "NUMANode"),
            ("package", "Package"),
            ("l3", "L3Cache"),
        ] {
            let objects: Vec<(usize, Vec<usize>)> = crate::common::hwloc_objects(&xml, hwloc)
                .into_iter()
                .filter(|(_, pus)| !pus.is_empty())
                .collect();
            let Some(&(last, _)) = objects.last() else {
                continue;
            };
            let mut picks = vec![vec![objects[0].0], vec![last]];
            if objects.len() >= 3 {
                picks.push(vec![objects[1].0, objects[2].0]);
            }
            for pick in picks {
                let list: Vec<String> = pick.iter().map(usize::to_string).collect();
                let list = list.join(",");
                let shape = dir.join(format!("{ours}.yaml"));
                std::fs::write(
                    &shape,
                    format!("resources:\n  - type: {ours}\n    index: \"{list}\"\n"),
                )
                .unwrap();
                let out = crate::common::run(
                    crate::common::binder()
                        .args(["-n", "--format", "json", "--topology"])
                        .arg(&xml)
                        .arg(&shape),
                    0,
                );
                let v: serde_json::Value =
                    serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
                let got: Vec<usize> = v["cpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap() as usize)
                    .collect();
                let mut want: Vec<usize> = objects
                    .iter()
                    .filter(|(i, _)| pick.contains(i))
                    .flat_map(|(_, pus)| pus.iter().copied())
                    .collect();
                want.sort_unstable();
                want.dedup();
                assert_eq!(got, want, "{name}: {ours}:{list}");
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked} placements checked");
}
