//! GPUs at the edges: `ranks:` rules with `--gpus-per-task`, and each vendor's numbering
//! (ROCm's rsmi index, CUDA's PCI order or UUIDs, Level Zero's PCI order).

use super::*;

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
