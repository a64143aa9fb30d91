//! The command line: help, schema, dry-run text and JSON, and every refusal.

use binder::exit_code::{REFUSED, SUCCESS};
use serde::Deserialize;

use crate::common::{binder, run};

const SYN: &str = "pack:2 numa:2 core:4 pu:2";

fn stdout(args: &[&str]) -> String {
    String::from_utf8(run(binder().args(args), SUCCESS).stdout).unwrap()
}

fn refusal(args: &[&str]) -> String {
    let out = run(binder().args(args), REFUSED);
    assert!(out.stdout.is_empty(), "a refusal prints no report");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn help_is_stable() {
    insta::assert_snapshot!("help", stdout(&["--help"]));
    insta::assert_snapshot!("short_help", stdout(&["-h"]));
}

#[test]
fn schema_matches_the_committed_file() {
    let committed =
        std::fs::read_to_string(crate::common::root().join("schemas/shape.schema.json")).unwrap();
    assert_eq!(stdout(&["schema"]), committed);
}

#[test]
fn dry_run_text_lists_every_rank_and_the_unused_units() {
    let text = stdout(&[
        "--dry-run",
        "--synthetic",
        SYN,
        "--local-size",
        "3",
        "shapes/cores-packed.yaml",
    ]);
    insta::assert_snapshot!(text, @r#"
    # binder --dry-run shapes/cores-packed.yaml on synthetic "pack:2 numa:2 core:4 pu:2": 3 tasks, unit core (implicit), pattern packed
    rank 0/3  core:0-4    cpus 0-9    0x000003ff
    rank 1/3  core:5-9    cpus 10-19  0x000ffc00
    rank 2/3  core:10-14  cpus 20-29  0x3ff00000
    unused: core:15 (1 core)
    "#);
}

#[test]
fn local_rank_prints_one_line() {
    let text = stdout(&[
        "-n",
        "--synthetic",
        SYN,
        "--local-size",
        "4",
        "--local-rank",
        "2",
        "--cof",
        "list",
        "shapes/cores-scatter.yaml",
    ]);
    insta::assert_snapshot!(text, @r#"
    # binder --dry-run shapes/cores-scatter.yaml on synthetic "pack:2 numa:2 core:4 pu:2": 4 tasks, unit core (implicit), pattern scatter
    rank 2/4  core:2,6,10,14  cpus 4-5,12-13,20-21,28-29  4-5,12-13,20-21,28-29
    "#);
    let e = refusal(&[
        "-n",
        "--synthetic",
        SYN,
        "--local-size",
        "4",
        "--local-rank",
        "4",
        "shapes/cores-packed.yaml",
    ]);
    assert_eq!(
        e.trim(),
        "binder: task identity: local rank 4 is not below local size 4; give a --local-rank below --local-size"
    );
}

#[test]
fn under_a_launcher_dry_run_prints_this_task() {
    let out = run(
        binder()
            .args(["-n", "--synthetic", SYN, "shapes/cores-packed.yaml"])
            .env("OMPI_COMM_WORLD_LOCAL_RANK", "1")
            .env("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
        SUCCESS,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(
        text.contains("2 tasks") && text.contains("rank 1/2  core:8-15"),
        "{text}"
    );
    let e = String::from_utf8(
        run(
            binder()
                .args(["-n", "--synthetic", SYN, "shapes/cores-packed.yaml"])
                .env("SLURM_LOCALID", "0")
                .env("SLURM_NODEID", "1")
                .env("SLURM_STEP_TASKS_PER_NODE", "2(x"),
            REFUSED,
        )
        .stderr,
    )
    .unwrap();
    assert!(
        e.starts_with("binder: slurm task identity: SLURM_STEP_TASKS_PER_NODE=\"2(x\""),
        "{e}"
    );
}

/// SEMANTICS §7, mirrored with `deny_unknown_fields`: a renamed or added field fails here.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct Record {
    local_rank: usize,
    local_size: usize,
    unit: String,
    rule: String,
    pattern: String,
    reverse: bool,
    locality: String,
    cpus: Vec<usize>,
    cpulist: String,
    cpuset: String,
    objects: Vec<String>,
    objects_physical: Vec<String>,
    gpus: Vec<usize>,
    gpu_busids: Vec<String>,
    gpu_ids: Vec<String>,
    gpu_local: Vec<bool>,
    bind_width: Option<String>,
    slot: Option<usize>,
    spans: SpansRecord,
    nics: Vec<String>,
    ge_topology: String,
    env: std::collections::BTreeMap<String, String>,
    membind: Option<Vec<usize>>,
    mempolicy: Option<String>,
    rank_rule: Option<String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct SpansRecord {
    package: usize,
    numa: usize,
    l3: usize,
}

#[test]
fn json_contract() {
    let text = stdout(&[
        "-n",
        "--format",
        "json",
        "--synthetic",
        "pack:2 core:2 pu:2",
        "--local-size",
        "2",
        "shapes/cores-packed.yaml",
    ]);
    let records: Vec<Record> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 2);
    let r = &records[1];
    assert_eq!((r.local_rank, r.local_size), (1, 2));
    assert_eq!(
        (r.unit.as_str(), r.rule.as_str(), r.pattern.as_str()),
        ("core", "implicit", "packed")
    );
    assert_eq!(r.cpus, [4, 5, 6, 7]);
    assert_eq!(
        (r.cpulist.as_str(), r.cpuset.as_str()),
        ("4-7", "0x000000f0")
    );
    assert_eq!(r.objects, ["core:2", "core:3"]);
    assert!(r.gpus.is_empty());
    // Cores 2-3 are package 1 of a node without NUMA or L3 levels (hand reasoning:
    // hwloc gives a synthetic node one NUMA node, spanning both packages).
    assert_eq!(
        r.spans,
        SpansRecord {
            package: 1,
            numa: 1,
            l3: 0
        }
    );
    assert_eq!((r.slot, r.bind_width.as_deref()), (None, None));
    assert!(r.gpu_local.is_empty() && r.nics.is_empty());
    // pack:2 core:2 pu:2 is NSCTTCTTSCTTCTT; packed, rank 1 has both cores of package 1.
    assert_eq!(r.ge_topology, "NSCTTCTTscttctt");
    // What a launch of rank 1 would set (launch::env's rules; no `openmp`, no GPUs).
    let env: Vec<(&str, &str)> = r
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        env,
        [
            ("BINDER_CPUS", "4-7"),
            ("BINDER_CPUSET", "0x000000f0"),
            ("BINDER_LOCAL_RANK", "1"),
            ("BINDER_LOCAL_SIZE", "2"),
            ("BINDER_UNIT", "core"),
        ]
    );
    assert_eq!(
        (r.membind.clone(), r.mempolicy.clone(), r.rank_rule.clone()),
        (None, None, None)
    );
    // unit none: no CPUs, an empty mask as hwloc prints it.
    let text = stdout(&[
        "-n",
        "--format",
        "json",
        "--synthetic",
        "pack:1 core:2 pu:1",
        "shapes/bind-none.yaml",
    ]);
    let r: Record = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(
        (r.unit.as_str(), r.cpus.len(), r.cpuset.as_str()),
        ("none", 0, "0x0")
    );
}

#[test]
fn bad_shapes_name_file_line_column_and_fix() {
    let mut all = String::new();
    let mut names: Vec<_> = std::fs::read_dir(crate::common::root().join("tests/fixtures/shapes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    for name in names {
        let path = format!("tests/fixtures/shapes/{name}");
        let out = binder()
            .args(["-n", "--synthetic", "pack:1 core:4 pu:2", &path])
            .output()
            .unwrap();
        if out.status.code() == Some(SUCCESS) {
            continue;
        }
        assert_eq!(out.status.code(), Some(REFUSED), "{name}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        all.push_str(&err);
    }
    insta::assert_snapshot!("shape_errors", all);
}

#[test]
fn other_refusals_exit_125() {
    let cases: &[&[&str]] = &[
        &["-n", "no-such-shape.yaml"],
        &[
            "-n",
            "--topology",
            "/nonexistent.xml",
            "shapes/cores-packed.yaml",
        ],
        &["-n", "--synthetic", "pack:two", "shapes/cores-packed.yaml"],
        &[
            "-n",
            "--synthetic",
            "pack:1 core:2 pu:1",
            "--local-size",
            "3",
            "shapes/cores-packed.yaml",
        ],
        &["-n", "--format", "yaml", "shapes/cores-packed.yaml"],
        &["--no-such-flag"],
        &["shapes/cores-packed.yaml"],
        &[
            "--synthetic",
            "core:2",
            "shapes/cores-packed.yaml",
            "--",
            "true",
        ],
    ];
    let mut all = String::new();
    for args in cases {
        all.push_str(&format!("$ binder {}\n", args.join(" ")));
        let err = refusal(args);
        all.push_str(err.lines().next().unwrap_or_default());
        all.push('\n');
    }
    insta::assert_snapshot!("other_refusals", all);
}

#[test]
fn closed_stdout_is_not_an_error() {
    use std::process::Stdio;
    let mut child = binder()
        .args([
            "-n",
            "--synthetic",
            "pack:4 core:64 pu:4",
            "--local-size",
            "1024",
            "shapes/pus-interleave.yaml",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(SUCCESS),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

mod docs;
mod names;
