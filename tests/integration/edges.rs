//! Regression tests for the promises kept at the edges (issue #22), each named for its
//! item and checked on the shared XMLs against hwloc-calc or hand reasoning.

use binder_plan::shape::Shape;
use binder_plan::topology::{self, Source};

use crate::common::{
    all_topologies, binder, hwloc_calc_lines, hwloc_objects, parse_hwloc_mask, require_tool, run,
    shared, topology as xml_path,
};

/// `bind: WIDTH` (SEMANTICS §11) on every shared topology: a plan widens each task to
/// exactly the hwloc-calc objects its units touch, and is refused exactly when some unit
/// lies in no such object, with a message naming a width that covers them. Before #22 the
/// width was silently dropped for those units (`numa-bind.yaml` on the offline-CPU Xeon gave
/// ranks of node 0 a bare core each).
#[test]
fn a_missing_bind_width_is_refused_never_dropped() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "the width sweep") {
        return;
    }
    let widths = [
        ("numa", "numa"),
        ("l3", "l3cache"),
        ("l2", "l2cache"),
        ("die", "die"),
        ("package", "package"),
    ];
    let (mut planned, mut refused) = (0, 0);
    for name in all_topologies(&shared) {
        let xml = xml_path(&shared, &name);
        let topo = topology::load(&Source::Xml(xml.clone()), false).expect("loads");
        let cores: Vec<Vec<usize>> = hwloc_objects(&xml, "core").into_values().collect();
        for (word, kind) in widths {
            let objects: Vec<Vec<usize>> = hwloc_objects(&xml, kind).into_values().collect();
            let covered = |pu: &usize| objects.iter().any(|o| o.contains(pu));
            let shape = Shape::from_yaml(
                &format!("options:\n  bind: {word}\nresources:\n  - type: core\n    count: all\n"),
                "w.yaml",
            )
            .unwrap();
            let n = cores.len().min(4);
            match binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topo, n).origin("w.yaml"),
            ) {
                Ok(plan) => {
                    planned += 1;
                    for task in &plan.tasks {
                        let pus: Vec<usize> =
                            task.units.iter().flat_map(|u| u.pus.clone()).collect();
                        assert!(
                            pus.iter().all(covered),
                            "{name} {word}: a unit outside every {kind} was planned"
                        );
                        let mut want: Vec<usize> = objects
                            .iter()
                            .filter(|o| o.iter().any(|p| pus.contains(p)))
                            .flatten()
                            .copied()
                            .collect();
                        want.sort_unstable();
                        want.dedup();
                        let got: Vec<usize> = task.cpuset.iter_set().map(usize::from).collect();
                        assert_eq!(got, want, "{name} {word} rank {}", task.local_rank);
                    }
                }
                Err(e) => {
                    refused += 1;
                    let msg = e.to_string();
                    // Every core is dealt (count: all), so some core lies outside.
                    assert!(
                        cores.iter().flatten().any(|p| !covered(p)),
                        "{name} {word}: refused though every core is covered: {msg}"
                    );
                    assert!(
                        msg.contains(&format!("`bind: {word}` cannot widen")),
                        "{name}: {msg}"
                    );
                    assert!(msg.contains("core:"), "{name}: names the units: {msg}");
                    assert!(
                        msg.contains("use `bind: ") || msg.contains("drop the width"),
                        "{msg}"
                    );
                }
            }
        }
    }
    assert!(
        planned > 60 && refused > 0,
        "{planned} planned, {refused} refused"
    );
}

/// The offline-CPU Xeon: NUMA node 0 is offline, so package 0's cores (L#0-8, `lstopo`
/// shows no NUMANode above them) lie in no NUMA node; binder names them and offers
/// `bind: package`.
#[test]
fn numa_width_on_the_offline_cpu_xeon_names_the_cores_and_package() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "xeon-2s-offline-cpu0-node0.xml");
    let topo = topology::load(&Source::Xml(xml), false).expect("loads");
    let shape = Shape::from_yaml(
        "options:\n  bind: numa\nresources:\n  - type: core\n    count: all\n",
        "numa-bind.yaml",
    )
    .unwrap();
    let err = binder_plan::plan(
        &binder_plan::PlanRequest::new(&shape, &topo, 16).origin("numa-bind.yaml"),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "numa-bind.yaml: `bind: numa` cannot widen 9 unit(s), core:0-8: they lie in no numa of this node; select only units inside one, or use `bind: package`, which covers them"
    );
}

/// The number of CPU kinds `lstopo --cpukinds` lists for `xml`, and the PUs of the last
/// (most performant) one per `hwloc-calc --cpukind N`.
fn cpu_kinds(xml: &std::path::Path) -> (usize, Vec<usize>) {
    let out = std::process::Command::new("lstopo-no-graphics")
        .arg("--cpukinds")
        .arg("-i")
        .arg(xml)
        .output()
        .expect("lstopo runs");
    let kinds = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("CPU kind #"))
        .count();
    if kinds < 2 {
        return (kinds, Vec::new());
    }
    let last = (kinds - 1).to_string();
    let mask = hwloc_calc_lines(xml, &["--cpukind", &last, "all"], &[]);
    (kinds, parse_hwloc_mask(&mask[0]))
}

/// `options.kind: balanced` (SEMANTICS §11) on every shared node with two CPU kinds: each
/// task gets ⌊P/n⌋ performance cores and ⌊E/n⌋ others, where hwloc-calc's `--cpukind`
/// says which cores are which; the rest is left unused and listed.
#[test]
fn kind_balanced_gives_every_task_as_many_cores_of_each_kind() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "the CPU kinds")
        || !require_tool("lstopo-no-graphics", "the CPU kinds")
    {
        return;
    }
    let shape = Shape::from_yaml(
        "options:\n  kind: balanced\nresources:\n  - type: core\n    count: all\n",
        "balanced.yaml",
    )
    .unwrap();
    let mut nodes = 0;
    for name in all_topologies(&shared) {
        let xml = xml_path(&shared, &name);
        let (kinds, fast) = cpu_kinds(&xml);
        // GB10's five kinds are two core types split by capacity; binder groups them by
        // frequency, which hwloc-calc cannot say.
        if kinds != 2 {
            continue;
        }
        nodes += 1;
        let topo = topology::load(&Source::Xml(xml.clone()), false).expect("loads");
        let cores: Vec<Vec<usize>> = hwloc_objects(&xml, "core").into_values().collect();
        let is_fast = |pus: &[usize]| pus.iter().all(|p| fast.contains(p));
        let p = cores.iter().filter(|c| is_fast(c)).count();
        let e = cores.len() - p;
        for n in 2..=4 {
            let plan = binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topo, n).origin("balanced.yaml"),
            )
            .unwrap();
            for task in &plan.tasks {
                let got_p = task.units.iter().filter(|u| is_fast(&u.pus)).count();
                let got_e = task.units.len() - got_p;
                assert_eq!(
                    (got_p, got_e),
                    (p / n, e / n),
                    "{name} n={n} rank {}",
                    task.local_rank
                );
            }
            assert_eq!(plan.unused.len(), p % n + e % n, "{name} n={n}");
        }
    }
    assert!(nodes >= 2, "only {nodes} two-kind nodes");
}

/// Raptor Lake i7-1370P (6 two-thread P-cores core:0-5, 8 E-cores core:6-13): packed
/// `cores-packed.yaml` with 2 tasks gives rank 0 six P-cores and an E-core and rank 1
/// seven E-cores; the dry-run says so and points at `kind: balanced`, which gives each
/// three P-cores and four E-cores.
#[test]
fn unequal_kinds_are_reported_and_balanced_evens_them() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "raptorlake-i7-1370p-hybrid.xml");
    let out = run(
        binder()
            .args([
                "-n",
                "shapes/cores-packed.yaml",
                "--local-size",
                "2",
                "--topology",
            ])
            .arg(&xml),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kinds: tasks get unequal numbers of performance core units (rank 0: 6 P + 1 E, rank 1: 0 P + 7 E); `kind: balanced` in `options`"),
        "{text}"
    );
    let dir = tempfile_dir();
    let shape = dir.join("balanced.yaml");
    std::fs::write(
        &shape,
        "options:\n  kind: balanced\nresources:\n  - type: core\n    count: all\n",
    )
    .unwrap();
    let out = run(
        binder()
            .arg("-n")
            .arg(&shape)
            .args(["--local-size", "2", "--topology"])
            .arg(&xml),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rank 0/2  core:0-2,6-9    cpus 0-5,12-15"),
        "{text}"
    );
    assert!(
        text.contains("rank 1/2  core:3-5,10-13  cpus 6-11,16-19"),
        "{text}"
    );
    assert!(
        text.contains("kinds: balanced, each task 3 performance + 4 efficiency core unit(s)"),
        "{text}"
    );
}

/// Lakefield (one P-core, core:4, and four E-cores): two packed tasks leave the P-core
/// unused; the dry-run says so.
#[test]
fn an_unused_performance_core_is_reported() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "lakefield-hybrid-1p4e.xml");
    let out = run(
        binder()
            .args([
                "-n",
                "shapes/cores-packed.yaml",
                "--local-size",
                "2",
                "--topology",
            ])
            .arg(&xml),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unused: core:4 (1 core)"), "{text}");
    assert!(
        text.contains(
            "kinds: 1 performance core unit(s) left unused while tasks get efficiency ones"
        ),
        "{text}"
    );
}

/// A fresh directory for a test's files.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = crate::common::private_ledger();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `ranks:` rules with `--gpus-per-task` (SEMANTICS §9): every planned rank gets its own
/// GPUs, the rules' ranks included, and no GPU goes to two ranks. Before #22 each group
/// numbered the node's GPUs on its own, so rank 0 (a rule) and rank 1 got the same GPU.
#[test]
fn rank_rules_with_gpus_per_task_never_share_a_gpu() {
    let Some(shared) = shared() else { return };
    let dir = tempfile_dir();
    let shape = dir.join("rules.yaml");
    std::fs::write(
        &shape,
        "resources:\n  - type: core\n    count: all\nranks:\n  \"0\":\n    resources:\n      - type: core\n        count: 2\n",
    )
    .unwrap();
    for (xml, n, g) in [
        ("aws-g4dn-metal-2s-48c-smt2-8t4.xml", 4, 1),
        ("aws-g4dn-metal-2s-48c-smt2-8t4.xml", 4, 2),
        ("epyc7402-corona-2s-48c-smt2-8mi50.xml", 8, 1),
    ] {
        let out = run(
            binder()
                .arg("-n")
                .arg(&shape)
                .args(["--format", "json", "--local-size", &n.to_string()])
                .args(["--gpus-per-task", &g.to_string(), "--topology"])
                .arg(xml_path(&shared, xml)),
            0,
        );
        let mut seen: Vec<String> = Vec::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let rank: serde_json::Value = serde_json::from_str(line).unwrap();
            let busids: Vec<String> = rank["gpu_busids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(busids.len(), g, "{xml}: {line}");
            seen.extend(busids);
        }
        let count = seen.len();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), count, "{xml} g={g}: a GPU went to two ranks");
        assert_eq!(count, n * g, "{xml}");
    }
}

/// Each GPU's bus id and the OS device names hwloc shows under it, per `lstopo -v`, in
/// the order lstopo prints them; with each OS device's `NVIDIAUUID`/`AMDUUID` when set.
fn lstopo_gpus(xml: &std::path::Path) -> Vec<(String, String, Option<String>)> {
    let out = std::process::Command::new("lstopo-no-graphics")
        .args(["-v", "-i"])
        .arg(xml)
        .output()
        .expect("lstopo runs");
    let mut busid = String::new();
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.trim_start().strip_prefix("PCI L#") {
            busid = rest
                .split("busid=")
                .nth(1)
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("")
                .to_owned();
        } else if line.trim_start().starts_with("GPU(") {
            let name = line.rsplit('"').nth(1).unwrap_or("").to_owned();
            let uuid = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("NVIDIAUUID=").or(w.strip_prefix("AMDUUID=")))
                .map(|u| u.trim_end_matches(')').to_owned());
            found.push((busid.clone(), name, uuid));
        }
    }
    found
}

/// The `(gpu_busids, gpu_ids, env)` of every rank of a JSON dry-run.
fn gpu_rows(
    args: &[&str],
    xml: &std::path::Path,
) -> Vec<(Vec<String>, Vec<String>, serde_json::Value)> {
    let out = run(
        binder()
            .args(["-n", "--format", "json"])
            .args(args)
            .arg("--topology")
            .arg(xml),
        0,
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let rank: serde_json::Value = serde_json::from_str(line).unwrap();
            let strings = |key: &str| -> Vec<String> {
                rank[key]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().to_owned())
                    .collect()
            };
            (
                strings("gpu_busids"),
                strings("gpu_ids"),
                rank["env"].clone(),
            )
        })
        .collect()
}

/// AMD GPUs are named in ROCm's numbering, which hwloc reports as `rsmiN` (SEMANTICS §9):
/// on Corona bus 03 is rsmi2, so the task given it gets `ROCR_VISIBLE_DEVICES=2` (before
/// #22: 0, which ROCm would open as the GPU at bus 63 on the other socket). MI300A in CPX
/// mode has six partitions per APU, each its own rsmi index.
#[test]
fn amd_gpus_are_named_by_rocm_index() {
    let Some(shared) = shared() else { return };
    if !require_tool("lstopo-no-graphics", "the GPU names") {
        return;
    }
    for (name, n) in [
        ("epyc7402-corona-2s-48c-smt2-8mi50.xml", 8),
        ("epyc7a53-tioga-1s-64c-smt2-8mi250x.xml", 8),
        ("mi300a-4apu-96c-smt2-cpx.xml", 24),
    ] {
        let xml = xml_path(&shared, name);
        let lstopo = lstopo_gpus(&xml);
        let rows = gpu_rows(
            &[
                "shapes/gpu-devices-only.yaml",
                "--local-size",
                &n.to_string(),
            ],
            &xml,
        );
        let mut checked = 0;
        for (busids, ids, env) in &rows {
            assert_eq!((busids.len(), ids.len()), (1, 1), "{name}");
            let rsmi = format!("rsmi{}", ids[0]);
            assert!(
                lstopo
                    .iter()
                    .any(|(b, dev, _)| b == &busids[0] && *dev == rsmi),
                "{name}: {} is not {rsmi} per lstopo",
                busids[0]
            );
            assert_eq!(env["ROCR_VISIBLE_DEVICES"], ids[0].as_str(), "{name}");
            checked += 1;
        }
        assert_eq!(checked, n, "{name}");
        let mut all: Vec<&String> = rows.iter().map(|r| &r.1[0]).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "{name}: every task its own ROCm index");
    }
    let corona = xml_path(&shared, "epyc7402-corona-2s-48c-smt2-8mi50.xml");
    let rows = gpu_rows(
        &["shapes/gpu-devices-only.yaml", "--local-size", "8"],
        &corona,
    );
    assert_eq!(rows[0].0, ["0000:03:00.0"]);
    assert_eq!(rows[0].1, ["2"]);
}

/// NVIDIA GPUs keep PCI order, with `CUDA_DEVICE_ORDER=PCI_BUS_ID` so that CUDA agrees;
/// `--gpu-ids uuid` (and `options.gpu-ids: uuid`) exports hwloc's NVIDIAUUID instead.
#[test]
fn nvidia_gpus_in_pci_order_or_by_uuid() {
    let Some(shared) = shared() else { return };
    if !require_tool("lstopo-no-graphics", "the GPU UUIDs") {
        return;
    }
    let xml = xml_path(&shared, "aws-g4dn-metal-2s-48c-smt2-8t4.xml");
    let rows = gpu_rows(&["shapes/gpu-devices-only.yaml", "--local-size", "8"], &xml);
    let mut busids: Vec<&String> = rows.iter().map(|r| &r.0[0]).collect();
    let ids: Vec<&String> = rows.iter().map(|r| &r.1[0]).collect();
    assert_eq!(ids, ["0", "1", "2", "3", "4", "5", "6", "7"]);
    let unsorted = busids.clone();
    busids.sort();
    assert_eq!(busids, unsorted, "rank order is PCI order");
    assert!(rows
        .iter()
        .all(|r| r.2["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"));
    let lstopo = lstopo_gpus(&xml);
    let args = [
        "shapes/gpu-devices-only.yaml",
        "--local-size",
        "8",
        "--gpu-ids",
        "uuid",
    ];
    for (busid, ids, env) in gpu_rows(&args, &xml) {
        let uuid = lstopo
            .iter()
            .find(|(b, _, u)| *b == busid[0] && u.is_some())
            .and_then(|(_, _, u)| u.clone())
            .expect("lstopo shows a UUID");
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], uuid.as_str());
        assert_eq!(ids, [uuid]);
    }
    let dir = tempfile_dir();
    let shape = dir.join("uuid.yaml");
    std::fs::write(
        &shape,
        "options:\n  bind: none\n  gpus-per-task: 1\n  gpu-ids: uuid\nresources:\n  - type: machine\n",
    )
    .unwrap();
    let rows = gpu_rows(&[shape.to_str().unwrap(), "--local-size", "2"], &xml);
    assert!(rows.iter().all(|r| r.1[0].starts_with("GPU-")), "{rows:?}");
}

/// Intel GPUs: `ZE_AFFINITY_MASK` in PCI order needs `ZE_ENABLE_PCI_ID_DEVICE_ORDER=1`,
/// or Level Zero orders devices its own way. No shared XML has an Intel GPU, so the T4
/// node's GPUs are relabelled Intel (PCI vendor 8086) in a copy.
#[test]
fn intel_gpus_ask_level_zero_for_pci_order() {
    let Some(shared) = shared() else { return };
    let text =
        std::fs::read_to_string(xml_path(&shared, "aws-g4dn-metal-2s-48c-smt2-8t4.xml")).unwrap();
    assert!(text.contains("[10de:1eb8]"));
    let dir = tempfile_dir();
    let xml = dir.join("intel.xml");
    std::fs::write(&xml, text.replace("[10de:1eb8]", "[8086:0bd5]")).unwrap();
    let rows = gpu_rows(&["shapes/gpu-devices-only.yaml", "--local-size", "2"], &xml);
    for (r, (_, ids, env)) in rows.iter().enumerate() {
        assert_eq!(ids, &[r.to_string()]);
        assert_eq!(env["ZE_AFFINITY_MASK"], r.to_string().as_str());
        assert_eq!(env["ZE_ENABLE_PCI_ID_DEVICE_ORDER"], "1");
        assert!(env.get("CUDA_VISIBLE_DEVICES").is_none());
    }
}

/// Runs a dry-run of the shape `yaml` with `args`, returning (exit code, stdout, stderr).
fn dry(yaml: &str, args: &[&str]) -> (i32, String, String) {
    let dir = tempfile_dir();
    let shape = dir.join("s.yaml");
    std::fs::write(&shape, yaml).unwrap();
    let out = binder().arg("-n").arg(&shape).args(args).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        err.replace(&shape.display().to_string(), "s.yaml"),
    )
}

/// Refusal hints say what can help: no "bind to a finer unit (`bind: pu`)" when the unit
/// is already pu, "1 task" not "1 tasks", and `bind: none` with `interleave` names unit
/// none (it said "core") and suggests dropping the pattern.
#[test]
fn refusal_hints_fit_the_shape() {
    let (code, _, err) = dry(
        "options:\n  bind: pu\nresources:\n  - type: pu\n    count: 2\n",
        &["--local-size", "3", "--synthetic", "core:4 pu:2"],
    );
    assert_eq!(code, 125);
    assert_eq!(err, "binder: s.yaml: 3 tasks but only 2 pu in the pool; run fewer tasks per node or select more resources\n");
    let (_, _, err) = dry(
        "resources:\n  - type: core\n    count: 2\n",
        &["--local-size", "3", "--synthetic", "core:4 pu:2"],
    );
    assert!(
        err.ends_with("or bind to a finer unit (`bind: pu`)\n"),
        "{err}"
    );
    let (code, _, err) = dry(
        "resources:\n  - type: package\n    with:\n      - type: slot\n",
        &["--local-size", "2", "--synthetic", "pack:1 core:4 pu:1"],
    );
    assert_eq!(code, 125);
    assert!(err.contains("run at most 1 task per node"), "{err}");
    let (code, _, err) = dry(
        "options:\n  bind: none\n  pattern: interleave\nresources:\n  - type: core\n",
        &["--synthetic", "core:4 pu:2"],
    );
    assert_eq!(code, 125);
    assert!(err.contains("but the unit is none (explicit); `bind: none` deals nothing, so drop `pattern: interleave`"), "{err}");
}

/// SEMANTICS §3: a nested request considers the objects whose cpuset lies inside the
/// parent's, an equal cpuset included: `pu > core` on one-thread cores takes each PU's
/// core (refused before #22, as the walk looked only below the parent), and on two-thread
/// cores it is still refused (a core is not inside one of its PUs).
#[test]
fn a_child_with_its_parents_cpuset_lies_inside_it() {
    let nested = "resources:\n  - type: pu\n    count: 2\n    with:\n      - type: core\n";
    let (code, out, err) = dry(nested, &["--synthetic", "pack:1 core:4 pu:1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rank 0/1  pu:0-1  cpus 0-1"), "{out}");
    let (code, _, err) = dry(nested, &["--synthetic", "pack:1 core:4 pu:2"]);
    assert_eq!(code, 125, "{err}");
    // The offline-CPU Xeon's cores each have an L2 of their own.
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "xeon-2s-offline-cpu0-node0.xml");
    let (code, out, err) = dry(
        "resources:\n  - type: core\n    count: 2\n    with:\n      - type: l2\n",
        &["--topology", xml.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rank 0/1  core:0-1  cpus 4,6"), "{out}");
}

/// Runs `binder topology --ge-topology TEXT`: (exit code, stdout, stderr).
fn ge_topology(text: &str) -> (i32, String, String) {
    let out = binder()
        .args(["topology", "--ge-topology", text])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Grid Engine strings (SEMANTICS §12): the nested form nests a unit only in a coarser
/// one (`(S(S(S(C))))` was accepted before #22), 30,000 levels are refused at once (they
/// crashed the recursive parser), and a 16,384-thread node is read in either form (at
/// least 12,256 threads used to be refused) while one thread more is refused by name.
#[test]
fn ge_strings_are_bounded_and_well_formed() {
    for (text, want) in [
        ("(S(C(T)(T))(C(T)(T)))", "SCTTCTT\n"),
        ("(S(N(C)(C)))", "SNCC\n"),
        ("(N(S(X(Y(C(T))))))", "NSXYC\n"),
    ] {
        let (code, out, err) = ge_topology(text);
        assert_eq!((code, out.as_str()), (0, want), "{text}: {err}");
    }
    for (text, why) in [
        ("(S(S(S(C))))", "the S at position 4 is inside a S"),
        ("(N(N(C)))", "the N at position 4 is inside a N"),
        ("(C(S))", "the S at position 4 is inside a C"),
        ("(C(C))", "the C at position 4 is inside a C"),
        // Found by the ge fuzz target: an N does not make a socket fit in a socket.
        ("(S(N(S(C))))", "the S at position 6 is inside a N"),
    ] {
        let (code, _, err) = ge_topology(text);
        assert_eq!(code, 125, "{text}");
        assert!(err.contains(why), "{text}: {err}");
    }
    // Found by the ge fuzz target: an N after a thread opened inside it, and the string
    // printed back lost a thread. An N closes the open core and thread; ten cores remain.
    let (code, out, _) = ge_topology("ECTNEECTECTEETC");
    assert_eq!((code, out.as_str()), (0, "ECNEECECEEC\n"));
    let deep = format!("{}{}", "(S".repeat(30_000), ")".repeat(30_000));
    let (code, _, err) = ge_topology(&deep);
    assert_eq!(code, 125, "{err}");
    assert_eq!(err.lines().count(), 1);
    let product = format!("S{}", "CTT".repeat(8192));
    let nested = format!("(S{})", "(C(T)(T))".repeat(8192));
    for text in [&product, &nested] {
        let out = run(
            binder()
                .args([
                    "-n",
                    "--ge-topology",
                    text,
                    "--ge",
                    "-bunit C -bamount 1",
                    "--local-size",
                    "2",
                ])
                .arg("--format")
                .arg("json"),
            0,
        );
        let lines = String::from_utf8(out.stdout).unwrap();
        assert!(
            lines
                .lines()
                .nth(1)
                .unwrap()
                .contains("\"cpulist\":\"2-3\""),
            "{}",
            &lines[..200]
        );
    }
    let (code, _, err) = ge_topology(&format!("S{}", "CTT".repeat(8193)));
    assert_eq!(code, 125);
    assert!(
        err.contains("it describes 16386 threads; binder plans nodes of at most 16384"),
        "{err}"
    );
}

/// OCS per-slot `-bstart S`: the window is found once for the job on the node as other
/// jobs left it, so every slot binds inside it. Before #22 the second slot looked again,
/// found no wholly free socket (the first slot had taken a core of it) and was refused.
/// On `NSXCCccSXCCCC` (OS PUs 0-3 on the used socket, 4-7 on the free one) the sequence
/// of sge_binding(5) example 11 is `SX1234`: slots take PUs 4, 5, 6, 7, and a fifth slot
/// finds the window full.
#[test]
fn per_slot_bstart_binds_every_slot_in_the_window() {
    let ge = "-bunit C -bamount 1 -btype slot -bsort S -bstart S -bstop s";
    let cpus = |tasks: &str| {
        binder()
            .args(["-n", "--ge-topology", "NSXCCccSXCCCC", "--ge", ge])
            .args(["--local-size", tasks, "--format", "json"])
            .output()
            .unwrap()
    };
    let out = cpus("4");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lists: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["cpulist"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(lists, ["4", "5", "6", "7"]);
    let out = cpus("5");
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("task 4 of 5") && err.contains("0 of 1 free C unit"),
        "{err}"
    );
}
