//! The shape catalog, snapshot-tested: every `shapes/*.yaml` planned on real and
//! synthetic topologies at several local sizes, in the readable `--dry-run` text form.
//!
//! One snapshot per shape; each block starts with the equivalent command line, so a
//! reviewer can rerun any of them. CPU shapes run on the CPU list below at local sizes 1
//! and 4; GPU shapes on every GPU topology with 1 task, one task per GPU and two.
#[path = "../common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::path::Path;

use binder_plan::report::{self, CpusetFormat, Format};
use binder_plan::topology::{Source, Topology};

/// Synthetic topologies: SMT2 with NUMA and L3, no SMT, and SMT4 with odd core counts.
const SYNTHETIC: [&str; 3] = [
    "pack:2 numa:2 l3:1 core:4 pu:2",
    "pack:1 core:8 pu:1",
    "pack:2 l3:2 core:3 pu:4",
];

/// Real machines for CPU shapes: far-apart SMT numbering and ≥256 PUs (genoa),
/// socket-interleaved numbering (skylake), hybrid P/E cores (raptorlake), disallowed PUs
/// (two cgroup cases), 8 NUMA nodes (naples), SMT4 POWER with CPU-less GPU-memory NUMA
/// nodes (sierra), SMT4 without L3 (KNL), offline PUs (broadwell).
const CPU_XMLS: [&str; 9] = [
    "epyc9654-genoa-2s-192c-smt2.xml",
    "skylake-2s-36c-smt2.xml",
    "raptorlake-i7-1370p-hybrid.xml",
    "opteron-4s-8numa-cgroup-disallowed.xml",
    "xeon-4s-16c-cpuset-disallowed-reorder.xml",
    "epyc7451-naples-2s-48c-smt2-8numa.xml",
    "power9-sierra-2s-44c-smt4-4v100-gpunuma.xml",
    "knl7250-snc4-flat-68c-smt4-8numa.xml",
    "broadwell-2s-36c-ht-offline.xml",
];

/// Every topology of `fixtures/topologies` with GPUs (MANIFEST.tsv, column gpus).
const GPU_XMLS: [&str; 10] = [
    "aws-g4dn-metal-2s-48c-smt2-8t4.xml",
    "dgx2-16v100-restricted.xml",
    "power8-4p100-restricted.xml",
    "power8-coralea-2s-20c-smt8-4p100.xml",
    "epyc7a53-tioga-1s-64c-smt2-8mi250x.xml",
    "epyc7402-corona-2s-48c-smt2-8mi50.xml",
    "spr8480-2s-112c-smt2-snc4-4h100.xml",
    "power9-sierra-2s-44c-smt4-4v100-gpunuma.xml",
    "mi300a-4apu-96c-smt2-spx.xml",
    "mi300a-4apu-96c-smt2-cpx.xml",
];

/// Topologies with NICs: Ethernet with many virtual functions, InfiniBand on POWER9,
/// Ethernet and InfiniBand on a SNC4 Sapphire Rapids, KNL with an Omni-Path HFI.
const NIC_XMLS: [&str; 4] = [
    "xeon-2s-16c-nic-manyvfs.xml",
    "power9-sierra-2s-44c-smt4-4v100-gpunuma.xml",
    "spr8480-2s-112c-smt2-snc4-4h100.xml",
    "knl7250-snc4-flat-68c-smt4-8numa.xml",
];

#[test]
fn catalog() {
    let Some(shared) = common::shared() else {
        return;
    };
    let mut cache: HashMap<(String, bool), Topology> = HashMap::new();
    let redact = |text: String| text.replace(&format!("{}/", shared.display()), "fixtures/");
    insta::glob!("../../shapes", "*.yaml", |path| {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let origin = format!("shapes/{name}");
        let shape = binder_host::shape_file(path).expect("catalog shapes parse");
        let io = shape.needs_io();
        let sources: Vec<(String, Source)> = if shape.needs_nics() && !shape.needs_gpus() {
            NIC_XMLS
                .iter()
                .map(|x| {
                    (
                        format!("--topology fixtures/topologies/{x}"),
                        xml(&shared, x),
                    )
                })
                .collect()
        } else if io {
            GPU_XMLS
                .iter()
                .map(|x| {
                    (
                        format!("--topology fixtures/topologies/{x}"),
                        xml(&shared, x),
                    )
                })
                .collect()
        } else {
            SYNTHETIC
                .iter()
                .map(|d| {
                    (
                        format!("--synthetic \"{d}\""),
                        Source::Synthetic((*d).into()),
                    )
                })
                .chain(CPU_XMLS.iter().map(|x| {
                    (
                        format!("--topology fixtures/topologies/{x}"),
                        xml(&shared, x),
                    )
                }))
                .collect()
        };
        let mut text = String::new();
        for (flag, source) in sources {
            let topology = cache
                .entry((flag.clone(), io))
                .or_insert_with(|| binder_host::for_shape(&shape, &source, None).expect("loads"));
            let sizes = if shape.needs_nics() && !shape.needs_gpus() {
                vec![1, 2]
            } else if io {
                let g = binder_plan::gpu::discover(topology).len().max(1);
                vec![1, g, 2 * g]
            } else {
                vec![1, 4]
            };
            for n in sizes {
                text.push_str(&format!(
                    "$ binder --dry-run {flag} --local-size {n} {origin}\n"
                ));
                match binder_plan::plan(
                    &binder_plan::PlanRequest::new(&shape, topology, n).origin(&origin),
                ) {
                    Ok(plan) => {
                        let mut out = Vec::new();
                        report::render(
                            &plan,
                            None,
                            Format::Text,
                            CpusetFormat::Hwloc,
                            "plan",
                            &mut out,
                        )
                        .expect("renders");
                        text.push_str(&String::from_utf8(out).expect("utf-8"));
                    }
                    Err(e) => {
                        let e = binder::Error::from(e);
                        text.push_str(&format!("refused (exit {}): {e}\n", e.exit_code()))
                    }
                }
                text.push('\n');
            }
        }
        insta::assert_snapshot!(redact(text));
    });
}

fn xml(shared: &Path, name: &str) -> Source {
    Source::Xml(common::topology(shared, name))
}
