//! Regression tests for the promises kept at the edges (issue #22), each named for its
//! item and checked on the shared XMLs against hwloc-calc or hand reasoning.

use binder_plan::shape::Shape;
use binder_plan::topology::Source;

use crate::common::{
    all_topologies, binder, hwloc_calc_lines, hwloc_objects, parse_hwloc_mask, require_tool, root,
    run, shared, topology as xml_path,
};

mod gpus;
mod kinds;

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
        let topo = binder_host::load(&Source::Xml(xml.clone()), false).expect("loads");
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
                        let got: Vec<usize> = task.cpuset.iter_set().collect();
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
    let topo = binder_host::load(&Source::Xml(xml), false).expect("loads");
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

/// A fresh directory for a test's files.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = crate::common::private_ledger();
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
    assert_eq!(err, "binder: s.yaml: 3 tasks but only 2 PUs in the pool; run fewer tasks per node, select more resources, or let tasks share units (`oversubscribe: true`)\n");
    let (_, _, err) = dry(
        "resources:\n  - type: core\n    count: 2\n",
        &["--local-size", "3", "--synthetic", "core:4 pu:2"],
    );
    assert!(
        err.ends_with(
            "bind to a finer unit (`bind: pu`), or let tasks share units (`oversubscribe: true`)\n"
        ),
        "{err}"
    );
    // Without SMT a finer unit gives nothing more (#46).
    let (_, _, err) = dry(
        "resources:\n  - type: core\n    count: 2\n",
        &["--local-size", "3", "--synthetic", "core:4 pu:1"],
    );
    assert_eq!(err, "binder: s.yaml: 3 tasks but only 2 cores in the pool; run fewer tasks per node, select more resources, or let tasks share units (`oversubscribe: true`)\n");
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

/// `membind: interleave | preferred` in the dry-run (issue 36), by hand on 2 packages × 2
/// NUMA nodes × 2 cores: two packed tasks get a package each, so interleave uses its two
/// nodes (0-1 and 2-3); one task on the whole node interleaves over all four and prefers
/// node 0, the first of its nodes. JSON says the policy beside the nodes.
#[test]
fn membind_policies_show_their_nodes() {
    let node = ["--synthetic", "pack:2 numa:2 core:2 pu:1"];
    let interleave =
        "options:\n  membind: interleave\nresources:\n  - type: core\n    count: all\n";
    let (code, out, err) = dry(interleave, &[&["--local-size", "2"][..], &node].concat());
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cpus 0-3  0x0000000f  mems 0-1 interleave"),
        "{out}"
    );
    assert!(
        out.contains("cpus 4-7  0x000000f0  mems 2-3 interleave"),
        "{out}"
    );
    let preferred = interleave.replace("interleave", "preferred");
    let (code, out, err) = dry(&preferred, &node);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("cpus 0-7  0x000000ff  mems 0 preferred"),
        "{out}"
    );
    let (code, out, err) = dry(&preferred, &[&["--format", "json"][..], &node].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["membind"].clone(), v["mempolicy"].clone()),
        (serde_json::json!([0]), serde_json::json!("preferred"))
    );
    let (code, _, err) = dry(&interleave.replace("interleave", "interleaved"), &node);
    assert_eq!(code, 125);
    assert!(err.contains("did you mean `interleave`?"), "{err}");
}

/// The NIC variables UCX and NCCL read (issue 36), beside `BINDER_NICS`, when the shape
/// names a NIC. On the SPR node, hwloc-calc puts `mlx5_3` (with its interface `ibp218s0`)
/// in package 1 and the XML reports its port 1 (down, the only one); package 0's first NIC
/// in PCI order is the Ethernet `eno8303`, which UCX takes by interface and NCCL's HCA list
/// does not. A user's own `UCX_NET_DEVICES` is kept.
#[test]
fn nic_variables_for_ucx_and_nccl() {
    let Some(shared) = shared() else {
        return;
    };
    let xml = xml_path(&shared, "spr8480-2s-112c-smt2-snc4-4h100.xml");
    if require_tool("hwloc-calc", "NIC locality") {
        let out = std::process::Command::new("hwloc-calc")
            .arg("--input")
            .arg(&xml)
            .args(["os=mlx5_3", "--intersect", "package"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");
    }
    let json = |extra: &[(&str, &str)]| -> Vec<serde_json::Value> {
        let mut cmd = binder();
        for (k, v) in extra {
            cmd.env(k, v);
        }
        let out = run(
            cmd.args(["-n", "--format", "json", "--local-size", "2", "--topology"])
                .arg(&xml)
                .arg(root().join("tests/fixtures/shapes/nic-per-socket.yaml")),
            0,
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let tasks = json(&[]);
    assert_eq!(tasks[0]["env"]["BINDER_NICS"], "eno8303");
    assert_eq!(tasks[0]["env"]["UCX_NET_DEVICES"], "eno8303");
    assert!(tasks[0]["env"].get("NCCL_IB_HCA").is_none(), "{}", tasks[0]);
    assert_eq!(tasks[1]["env"]["BINDER_NICS"], "ibp218s0,mlx5_3");
    assert_eq!(tasks[1]["env"]["UCX_NET_DEVICES"], "mlx5_3:1");
    assert_eq!(tasks[1]["env"]["NCCL_IB_HCA"], "=mlx5_3:1");
    let tasks = json(&[("UCX_NET_DEVICES", "mlx5_0:1")]);
    assert!(
        tasks[1]["env"].get("UCX_NET_DEVICES").is_none(),
        "the user's is kept: {}",
        tasks[1]
    );
    assert_eq!(tasks[1]["env"]["NCCL_IB_HCA"], "=mlx5_3:1");
}

/// `memory:` (issue 46) picks the NUMA nodes a policy uses, by hwloc's subtypes, read by
/// hand from the KNL XML (SNC4 flat): cluster 0's cores 0-16 have DDR node P#0 and MCDRAM
/// node P#4 (subtype `MCDRAM`); the node has P#0-7. The same XML with the subtype
/// renamed `HBM` (hwloc 2.10's tiers) or `CXL-DRAM` moves P#4 between the words.
#[test]
fn memory_picks_nodes_by_kind_or_number() {
    let Some(shared) = shared() else { return };
    let knl = xml_path(&shared, "knl7250-snc4-flat-68c-smt4-8numa.xml");
    let shape = |memory: &str| {
        format!("options:\n  membind: local\n  memory: {memory}\nresources:\n  - type: core\n    count: 2\n")
    };
    let on = |yaml: &str, xml: &std::path::Path| {
        dry(
            yaml,
            &["--local-size", "1", "--topology", xml.to_str().unwrap()],
        )
    };
    for (memory, mems) in [
        ("near", "mems 0,4"),
        ("hbm", "mems 4"),
        ("dram", "mems 0"),
        ("all", "mems 0-7"),
        ("\"5-6\"", "mems 5-6"),
        ("1", "mems 1"),
    ] {
        let (code, out, err) = on(&shape(memory), &knl);
        assert_eq!(code, 0, "{memory}: {err}");
        assert!(
            out.lines().nth(1).unwrap().ends_with(mems),
            "{memory}: {out}"
        );
    }
    let (code, _, err) = on(&shape("cxl"), &knl);
    assert_eq!(code, 125);
    assert!(
        err.contains("`memory: cxl` finds no such NUMA node near cpus")
            && err.contains("near them hwloc has node 0 (no kind named), 4 (MCDRAM)"),
        "{err}"
    );
    let (code, _, err) = on(&shape("9"), &knl);
    assert_eq!(code, 125);
    assert!(
        err.contains("NUMA node(s) 9 that the node does not have") && err.contains("(it has 0-7)"),
        "{err}"
    );
    let (code, _, err) = on(&shape("hmb"), &knl);
    assert_eq!(code, 125);
    assert!(err.contains("did you mean `hbm`?"), "{err}");
    // `memory` alone binds strictly there; with `membind: none` it is refused.
    let alone = shape("hbm").replace("  membind: local\n", "");
    let (_, out, _) = on(&alone, &knl);
    assert!(out.lines().nth(1).unwrap().ends_with("mems 4"), "{out}");
    let (code, _, err) = on(&shape("hbm").replace("local", "none"), &knl);
    assert_eq!(code, 125);
    assert!(err.contains("`memory:` with `membind: none`"), "{err}");
    // hwloc 2.10's subtypes.
    let dir = tempfile_dir();
    let text = std::fs::read_to_string(&knl).unwrap();
    for (subtype, word, other) in [("HBM", "hbm", "cxl"), ("CXL-DRAM", "cxl", "hbm")] {
        let xml = dir.join(format!("{subtype}.xml"));
        std::fs::write(
            &xml,
            text.replace("subtype=\"MCDRAM\"", &format!("subtype=\"{subtype}\"")),
        )
        .unwrap();
        let (code, out, err) = on(&shape(word), &xml);
        assert_eq!(code, 0, "{subtype}: {err}");
        assert!(
            out.lines().nth(1).unwrap().ends_with("mems 4"),
            "{subtype}: {out}"
        );
        assert_eq!(on(&shape(other), &xml).0, 125, "{subtype} is no {other}");
    }
}

/// `oversubscribe: true` (issue 46's last row): more tasks than units deals the units
/// again from the first, as Open MPI 4.1's `--oversubscribe --bind-to
/// core:overload-allowed` does (seen on this VM's 2 cores: ranks 0, 2, 4 on core 0 and 1,
/// 3 on core 1). By hand on 4 one-PU cores: 6 tasks, ranks 4 and 5 get cores 0 and 1,
/// and the text says the tasks share; slots are dealt again the same way. Without it the
/// refusal names the option; with `ranks:` it is refused.
#[test]
fn oversubscribe_deals_the_units_again() {
    let node = ["--synthetic", "core:4 pu:1", "--local-size", "6"];
    let shape = "options:\n  oversubscribe: true\nresources:\n  - type: core\n    count: all\n";
    let (code, out, err) = dry(shape, &node);
    assert_eq!(code, 0, "{err}");
    let cpus: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("rank "))
        .map(|l| l.split_whitespace().nth(4).unwrap())
        .collect();
    assert_eq!(cpus, ["0", "1", "2", "3", "0", "1"], "{out}");
    assert!(
        out.contains("oversubscribed: 6 tasks share their units"),
        "{out}"
    );
    let slots = "options:\n  oversubscribe: true\nresources:\n  - type: slot\n    count: all\n    with:\n      - type: core\n";
    let (code, out, err) = dry(slots, &node);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("rank 5/6  core:1  cpus 1"), "{out}");
    // Four tasks fit: nothing is shared, nothing said.
    let (_, out, _) = dry(shape, &["--synthetic", "core:4 pu:1", "--local-size", "4"]);
    assert!(!out.contains("oversubscribed"), "{out}");
    let (code, _, err) = dry(&shape.replace("  oversubscribe: true\n", ""), &node);
    assert_eq!(code, 125);
    assert!(
        err.contains("or let tasks share units (`oversubscribe: true`)"),
        "{err}"
    );
    let (code, _, err) = dry(&format!("{shape}ranks:\n  0:\n    bind: none\n"), &node);
    assert_eq!(code, 125);
    assert!(err.contains("`oversubscribe` with `ranks:`"), "{err}");
}
