//! `binder convert --from torchrun` (`options.numa-binding`) against a model of
//! PyTorch's `torch/numa/binding.py` (#61), on every fixture with GPUs. The model is
//! written from PyTorch's rules, not from binder's code, and asks hwloc-calc every
//! question a node's sysfs answers PyTorch: which NUMA node a GPU's PCI device is near
//! (the first; none or −1 is node 0), that node's CPUs, its package's, its cores' and its
//! last-level caches'. Worker r takes GPU r in the runtime's order: CUDA's PCI order for
//! NVIDIA, ROCm's (hwloc's `rsmiN`, each partition one GPU) for AMD.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::common;

/// `hwloc-calc --input XML ARGS` as numbers (its comma-separated output).
fn calc(xml: &Path, args: &[&str]) -> Vec<usize> {
    let out = Command::new("hwloc-calc")
        .arg("--input")
        .arg(xml)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "hwloc-calc {args:?}");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

/// The OS numbers of a location's PUs.
fn pus(xml: &Path, location: &str) -> BTreeSet<usize> {
    calc(xml, &["--po", "-I", "pu", location])
        .into_iter()
        .collect()
}

/// The XML's GPUs in the runtime's order: each `(PCI bus id, runtime index)`.
fn gpus(xml: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(xml).unwrap();
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!("{name}=\""))? + name.len() + 2;
        Some(tag[at..].split('"').next()?.to_owned())
    };
    // (vendor order, runtime index, bus) per GPU.
    let mut found: Vec<(u8, usize, String)> = Vec::new();
    let starts: Vec<usize> = text
        .match_indices("<object type=\"PCIDev\"")
        .map(|(i, _)| i)
        .collect();
    for (k, &start) in starts.iter().enumerate() {
        let tag = &text[start..start + text[start..].find('>').unwrap()];
        let (Some(bus), Some(kind)) = (attr(tag, "pci_busid"), attr(tag, "pci_type")) else {
            continue;
        };
        let class = &kind[..2];
        let vendor = kind
            .split('[')
            .nth(1)
            .unwrap_or("")
            .split(':')
            .next()
            .unwrap_or("");
        let vendor = match vendor {
            "10de" => 0,
            "1002" => 1,
            "8086" => 2,
            _ => continue,
        };
        if class != "03" && class != "12" {
            continue;
        }
        // Its OS devices: what follows its tag up to the next PCI device.
        let end = starts.get(k + 1).copied().unwrap_or(text.len());
        let body = &text[start..end];
        let rsmi: Vec<usize> = body
            .match_indices("name=\"rsmi")
            .filter_map(|(i, _)| {
                body[i + 10..]
                    .split('"')
                    .next()
                    .and_then(|n| n.parse().ok())
            })
            .collect();
        if vendor == 1 && !rsmi.is_empty() {
            for r in rsmi {
                found.push((vendor, r, bus.clone()));
            }
        } else {
            found.push((vendor, usize::MAX, bus));
        }
    }
    // NVIDIA (and AMD without ROCm indices): PCI order.
    found.sort_by(|a, b| (a.0, a.1, &a.2).cmp(&(b.0, b.1, &b.2)));
    found.into_iter().map(|(_, _, bus)| bus).collect()
}

/// What PyTorch's mode gives each worker of a node with `gpus` (bus ids, worker order):
/// its CPUs, or `None` where PyTorch refuses (`exclusive` with fewer cores than GPUs).
fn model(xml: &Path, gpus: &[String], mode: &str) -> Option<Vec<BTreeSet<usize>>> {
    let numa_of: Vec<usize> = gpus
        .iter()
        .map(|bus| {
            calc(xml, &[&format!("pci={bus}"), "--intersect", "numa"])
                .first()
                .copied()
                .unwrap_or(0)
        })
        .collect();
    let mut out = Vec::new();
    for (r, &node) in numa_of.iter().enumerate() {
        let node_pus = pus(xml, &format!("numa:{node}"));
        let on_node: Vec<usize> = (0..gpus.len()).filter(|&g| numa_of[g] == node).collect();
        let place = on_node.iter().position(|&g| g == r).unwrap();
        let set = match mode {
            "node" => node_pus,
            "socket" => {
                let package = calc(xml, &[&format!("numa:{node}"), "--intersect", "package"])[0];
                pus(xml, &format!("package:{package}"))
            }
            "exclusive" => {
                let mut cores: Vec<BTreeSet<usize>> =
                    calc(xml, &[&format!("numa:{node}"), "--intersect", "core"])
                        .into_iter()
                        .map(|c| &pus(xml, &format!("core:{c}")) & &node_pus)
                        .filter(|c| !c.is_empty())
                        .collect();
                cores.sort_by_key(|c| *c.iter().next().unwrap());
                let each = cores.len() / on_node.len();
                let extra = cores.len() % on_node.len();
                if each == 0 {
                    return None;
                }
                let start = place * each + place.min(extra);
                let end = start + each + usize::from(place < extra);
                cores[start..end].iter().flatten().copied().collect()
            }
            "core-complex" => {
                let mut groups: Vec<BTreeSet<usize>> = Vec::new();
                for level in ["l3cache", "l2cache", "l1cache"] {
                    groups = calc(xml, &[&format!("numa:{node}"), "--intersect", level])
                        .into_iter()
                        .map(|c| &pus(xml, &format!("{level}:{c}")) & &node_pus)
                        .filter(|c| !c.is_empty())
                        .collect();
                    if !groups.is_empty() {
                        break;
                    }
                }
                groups.sort_by_key(|g| (std::cmp::Reverse(g.len()), *g.iter().next().unwrap()));
                groups[place % groups.len()].clone()
            }
            _ => unreachable!(),
        };
        out.push(set);
    }
    Some(out)
}

/// binder's plan for `n` workers of the shape `binder convert --from torchrun --
/// --nproc-per-node N --numa-binding MODE` prints: each rank's CPUs and GPU bus id, or
/// `None` when it refuses.
fn planned(xml: &Path, mode: &str, n: usize) -> Option<Vec<(BTreeSet<usize>, String)>> {
    let converted = common::binder()
        .args(["convert", "--from", "torchrun", "--", "--nproc-per-node"])
        .arg(n.to_string())
        .args(["--numa-binding", mode])
        .output()
        .unwrap();
    assert!(
        converted.status.success(),
        "{}",
        String::from_utf8_lossy(&converted.stderr)
    );
    let shape = common::scratch().join(format!("torch-{mode}.yaml"));
    std::fs::write(&shape, &converted.stdout).unwrap();
    let out = common::binder()
        .args([
            "--dry-run",
            "--format",
            "json",
            "--local-size",
            &n.to_string(),
            "--topology",
        ])
        .arg(xml)
        .arg(&shape)
        .output()
        .unwrap();
    if out.status.code() == Some(125) {
        return None;
    }
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.lines()
            .filter(|l| l.starts_with("{\"local_rank\""))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let cpus = v["cpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap() as usize)
                    .collect();
                let bus = v["gpu_busids"][0].as_str().unwrap_or("").to_owned();
                (cpus, bus)
            })
            .collect(),
    )
}

#[test]
fn numa_binding_places_every_worker_as_pytorch_does_on_every_gpu_fixture() {
    let Some(shared) = common::shared() else {
        return;
    };
    if !common::require_tool("hwloc-calc", "hwloc-calc (the model's sysfs)") {
        return;
    }
    let mut checked = 0;
    for name in common::all_topologies(&shared) {
        let xml = common::topology(&shared, &name);
        let order = gpus(&xml);
        if order.is_empty() {
            continue;
        }
        for mode in ["node", "socket", "exclusive", "core-complex"] {
            let want = model(&xml, &order, mode);
            let got = planned(&xml, mode, order.len());
            match (want, got) {
                (None, None) => {}
                (Some(want), Some(got)) => {
                    assert_eq!(got.len(), order.len(), "{name} {mode}");
                    for (r, ((cpus, bus), model)) in got.iter().zip(&want).enumerate() {
                        // A bus id names a PCI device; a partition shares its parent's.
                        assert_eq!(bus, &order[r], "{name} {mode}: worker {r}'s GPU");
                        assert_eq!(cpus, model, "{name} {mode}: worker {r}'s cpus");
                    }
                }
                (want, got) => panic!(
                    "{name} {mode}: the model {} but binder {}",
                    if want.is_some() { "places" } else { "refuses" },
                    if got.is_some() { "places" } else { "refuses" }
                ),
            }
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} fixture-mode pairs had GPUs");
}
