//! Grid Engine (SEMANTICS §12): the 254 cases of `fixtures/cases/ocs-cases.yaml` (OCS 9.1,
//! SoGE 8.1.9, the SGE 6.2u5 spec) run through the real binary with `--ge-topology` and
//! `--ge`; the few that test OCS internals (`op:`, sorting, pe tuples) run against the
//! library's codec. Expectations are the file's, never binder's output; where binder
//! deliberately differs (documented in the README), the case checks binder's documented
//! behaviour and is counted as such.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use binder_plan::ge::codec::{Letter, Tree};
use binder_plan::ge::request::Mark;
use binder_plan::ge::walk;
use serde_json::Value as Json;
use yaml_serde::Value;

use crate::common::{binder, run, shared};

mod cases;
mod ocs;

use cases::*;
use ocs::*;

/// `-binstance env`: the child keeps its affinity and reads its CPUs from the variables.
#[test]
fn binstance_env_leaves_affinity_alone() {
    let before = std::fs::read_to_string("/proc/self/status").unwrap();
    let allowed = before
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .unwrap()
        .to_owned();
    let out = run(
        binder().args([
            "--ge",
            "-binstance env -bunit T -bamount 1",
            "--",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status; echo SGE_BINDING=$SGE_BINDING; echo GCS_BINDING=$GCS_BINDING; echo GCS_BINDING_INSTANCE=$GCS_BINDING_INSTANCE",
        ]),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert_eq!(lines.next().unwrap(), allowed, "env must not bind");
    let first = allowed
        .split_whitespace()
        .last()
        .unwrap()
        .split([',', '-'])
        .next()
        .unwrap();
    assert_eq!(lines.next().unwrap(), format!("SGE_BINDING={first}"));
    assert_eq!(lines.next().unwrap(), format!("GCS_BINDING={first}"));
    assert_eq!(lines.next().unwrap(), "GCS_BINDING_INSTANCE=env");
    // `set` binds the same CPU.
    let out = run(
        binder().args([
            "--ge",
            "-bunit T -bamount 1",
            "--",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status; echo $GCS_BINDING_INSTANCE",
        ]),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().next().unwrap(),
        format!("Cpus_allowed_list:\t{first}")
    );
    assert_eq!(text.lines().nth(1).unwrap(), "set");
}

/// `binder topology` of a shared XML.
fn topology_string(xml: &std::path::Path) -> String {
    let out = run(binder().arg("topology").arg("--topology").arg(xml), 0);
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Topology strings written by hand from each machine's description (lstopo, vendor
/// documentation): letters where hwloc attaches them, E for hwloc's less efficient kinds.
#[test]
fn topology_strings_of_shared_nodes() {
    let Some(shared) = shared() else { return };
    let r = |unit: &str, n: usize| unit.repeat(n);
    // EPYC 9654: per socket 12 CCDs (L3) of 8 SMT2 cores with private L2; NPS1.
    let genoa_socket = format!("SN{}", r(&format!("X{}", r("YCTT", 8)), 12));
    // KNL 7250 SNC4: 34 tiles (L2 pairs) of 4-thread cores, 9+9+8+8 tiles per quadrant
    // (MCDRAM nodes share their quadrant's N).
    let knl_quadrant = |tiles: usize| format!("N{}", r("YCTTTTCTTTT", tiles));
    let knl = format!(
        "S{}{}{}{}",
        knl_quadrant(9),
        knl_quadrant(9),
        knl_quadrant(8),
        knl_quadrant(8)
    );
    // POWER9 sierra: 4-thread cores in pairs sharing L2 and L3; 22 + 20 cores enabled.
    let pair = "XYCTTTTCTTTT";
    let single = "XYCTTTT";
    let sierra = format!(
        "NS{}NS{}{}{}{}{}",
        r(pair, 11),
        r(pair, 2),
        single,
        r(pair, 4),
        single,
        r(pair, 4)
    );
    let cases = [
        // i7-1370P: 6 hyper-threaded P-cores, then two clusters of 4 E-cores sharing L2.
        (
            "raptorlake-i7-1370p-hybrid.xml",
            format!("SNX{}{}", r("YCTT", 6), r("YEEEE", 2)),
        ),
        (
            "raptorlake-i7-1370p-hybrid-sysfs.xml",
            format!("SNX{}{}", r("YCTT", 6), r("YEEEE", 2)),
        ),
        // Lakefield: 4 Tremont E-cores sharing an L2, one Sunny Cove P-core.
        ("lakefield-hybrid-1p4e.xml", "SNXYEEEEYC".to_owned()),
        // GB10: two clusters of 5 Cortex-A725 then 5 Cortex-X925, each core its own L2.
        (
            "gb10-arm-hybrid-20c.xml",
            format!("SN{}", r(&format!("X{}{}", r("YE", 5), r("YC", 5)), 2)),
        ),
        ("epyc9654-genoa-2s-192c-smt2.xml", r(&genoa_socket, 2)),
        ("knl7250-snc4-flat-68c-smt4-8numa.xml", knl),
        ("power9-sierra-2s-44c-smt4-4v100-gpunuma.xml", sierra),
        // Opteron 6272 in a cgroup: only 6 cores of package 0 allowed, 4 under the first
        // L3 (its NUMA node attached there), 2 under the second.
        (
            "opteron-4s-8numa-cgroup-disallowed.xml",
            format!("SXN{}XN{}", r("YC", 4), r("YC", 2)),
        ),
        // Skylake 2×18 SMT2, one machine-wide NUMA node.
        (
            "skylake-2s-36c-smt2.xml",
            format!("N{}", r(&format!("SX{}", r("YCTT", 18)), 2)),
        ),
        // SPR 8480 SNC4: per socket one L3 and four NUMA nodes of 14 cores.
        (
            "spr8480-2s-112c-smt2-snc4-4h100.xml",
            r(&format!("SX{}", r(&format!("N{}", r("YCTT", 14)), 4)), 2),
        ),
    ];
    for (name, want) in cases {
        let got = topology_string(&crate::common::topology(&shared, name));
        assert_eq!(got, want, "{name}");
    }
    // Every shared topology gives a string that reads back (and has one T per PU).
    for name in crate::common::all_topologies(&shared) {
        let xml = crate::common::topology(&shared, &name);
        let s = topology_string(&xml);
        let tree = Tree::parse(&s).unwrap_or_else(|e| panic!("{name}: {e}"));
        let pus = crate::common::hwloc_calc_lines(&xml, &["--number-of", "pu", "all"], &[]);
        let threads = tree.nodes.iter().filter(|n| n.letter == Letter::T).count();
        assert_eq!(threads.to_string(), pus[0], "{name}: {s}");
    }
}

/// `kind: performance|efficiency` against `hwloc-calc --cpukind N`: the P-kinds are the
/// most efficient-ranked kind and those of its maximum frequency (hand-read from each
/// XML's <cpukind> list).
#[test]
fn core_kinds_match_hwloc_calc() {
    let Some(shared) = shared() else { return };
    if !crate::common::require_tool("hwloc-calc", "hwloc-calc (Debian's hwloc)") {
        return;
    }
    for (name, p_kinds, e_kinds) in [
        ("raptorlake-i7-1370p-hybrid.xml", &[1][..], &[0][..]),
        ("lakefield-hybrid-1p4e.xml", &[1][..], &[0][..]),
        ("gb10-arm-hybrid-20c.xml", &[2, 3, 4][..], &[0, 1][..]),
    ] {
        let xml = crate::common::topology(&shared, name);
        let union = |kinds: &[usize]| -> Vec<usize> {
            let mut all = Vec::new();
            for k in kinds {
                let line = crate::common::hwloc_calc_lines(
                    &xml,
                    &["--cpukind", &k.to_string(), "all"],
                    &[],
                );
                all.extend(crate::common::parse_hwloc_mask(&line[0]));
            }
            all.sort_unstable();
            all
        };
        for (kind, want) in [
            ("performance", union(p_kinds)),
            ("efficiency", union(e_kinds)),
        ] {
            let dir = tempdir();
            let shape = dir.join("kind.yaml");
            std::fs::write(
                &shape,
                format!("options: {{kind: {kind}}}\nresources: [{{type: pu, count: all}}]\n"),
            )
            .unwrap();
            let out = run(
                binder()
                    .args(["--dry-run", "--format", "json", "--topology"])
                    .arg(&xml)
                    .arg(&shape),
                0,
            );
            let rank: Json = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(cpus(&rank), want, "{name} {kind}");
            // The same through Grid Engine's letters: all C threads, all E threads.
            let unit = if kind == "performance" { "T" } else { "ET" };
            let out = run(
                binder()
                    .args(["--dry-run", "--format", "json", "--topology"])
                    .arg(&xml)
                    .args(["--ge", &format!("-bunit {unit} -bamount all -btype host")]),
                0,
            );
            let rank: Json = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(cpus(&rank), want, "{name} -bunit {unit}");
        }
    }
    // A node with one kind has only performance cores: efficiency is refused.
    let dir = tempdir();
    let shape = dir.join("e.yaml");
    std::fs::write(&shape, "resources: [{type: core, kind: efficiency}]\n").unwrap();
    let out = run(
        binder()
            .args(["--dry-run", "--synthetic", "pack:1 core:4 pu:1"])
            .arg(&shape),
        125,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no allowed efficiency core"), "{err}");
}

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = crate::common::scratch().join(format!("ge-{}", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Reserved units are in no rank's cpuset, on every shared topology, for a YAML shape and
/// a Grid Engine request alike; the reserved PUs come from hwloc-calc.
#[test]
fn reserved_units_are_never_given() {
    let Some(shared) = shared() else { return };
    if !crate::common::require_tool("hwloc-calc", "hwloc-calc (Debian's hwloc)") {
        return;
    }
    let mut checked = 0;
    for name in crate::common::all_topologies(&shared) {
        let xml = crate::common::topology(&shared, &name);
        let packages: usize =
            crate::common::hwloc_calc_lines(&xml, &["--number-of", "package", "all"], &[])[0]
                .parse()
                .unwrap();
        let cores: usize =
            crate::common::hwloc_calc_lines(&xml, &["--number-of", "core", "all"], &[])[0]
                .parse()
                .unwrap();
        let locations: Vec<String> = (0..packages.max(1))
            .map(|p| {
                if packages == 0 {
                    "core:0".to_owned()
                } else {
                    format!("package:{p}.core:0")
                }
            })
            .collect();
        let reserved: Vec<usize> = crate::common::hwloc_calc_lines(&xml, &[], &locations)
            .iter()
            .flat_map(|m| crate::common::parse_hwloc_mask(m))
            .collect();
        let tasks = (cores - reserved.len().min(cores)).clamp(1, 4);
        for extra in [
            vec!["shapes/cores-packed.yaml"],
            vec!["--ge", "-bunit C -bamount 1"],
        ] {
            let out = binder()
                .args(["--dry-run", "--format", "json", "--topology"])
                .arg(&xml)
                .args(["--reserve", "first-core-per-socket", "--local-size"])
                .arg(tasks.to_string())
                .args(&extra)
                .output()
                .unwrap();
            if !out.status.success() {
                // Too few cores left for the tasks is a refusal, never a reserved core.
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.starts_with("binder: "), "{name}: {err}");
                continue;
            }
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let rank: Json = serde_json::from_str(line).unwrap();
                for c in cpus(&rank) {
                    assert!(
                        !reserved.contains(&c),
                        "{name} {extra:?}: cpu {c} is reserved"
                    );
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "only {checked} ranks checked");
}

/// The site's reservation (`BINDER_SITE_FILE`) applies to every shape; a broken site file
/// is refused, not ignored.
#[test]
fn site_reservation() {
    let dir = tempdir();
    let site = dir.join("site.yaml");
    std::fs::write(&site, "reserve: [first-core]\n").unwrap();
    let out = run(
        binder().env("BINDER_SITE_FILE", &site).args([
            "topology",
            "--synthetic",
            "pack:2 core:2 pu:2",
        ]),
        0,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "NScttCTTSCTTCTT\n");
    let out = run(
        binder().env("BINDER_SITE_FILE", &site).args([
            "--dry-run",
            "--synthetic",
            "pack:2 core:2 pu:2",
            "--format",
            "json",
            "--local-size",
            "3",
            "shapes/cores-packed.yaml",
        ]),
        0,
    );
    let all: Vec<usize> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .flat_map(|l| cpus(&serde_json::from_str(l).unwrap()))
        .collect();
    assert_eq!(all, [2, 3, 4, 5, 6, 7], "core 0 (PUs 0-1) is the site's");
    std::fs::write(&site, "reserve: first-core\n").unwrap();
    let out = run(
        binder()
            .env("BINDER_SITE_FILE", &site)
            .args(["--dry-run", "--ge", "-bunit C"]),
        125,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("site file"));
}

/// `--format rankfile`: Open MPI's `rank R=HOST slot=SOCKET:CORE,...`, cores counted within
/// their socket. Two packed ranks on 2 sockets × 2 cores get a socket each.
#[test]
fn rankfile_names_socket_and_core() {
    let out = run(
        binder().args([
            "--dry-run",
            "--format",
            "rankfile",
            "--synthetic",
            "pack:2 core:2 pu:2",
            "--local-size",
            "2",
            "shapes/cores-packed.yaml",
        ]),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, want) in lines.iter().zip(["slot=0:0,0:1", "slot=1:0,1:1"]) {
        assert!(line.ends_with(want), "{line}");
    }
    assert!(lines[0].starts_with("rank 0=") && lines[1].starts_with("rank 1="));
}

/// `GCS_BINDING` names the job's CPUs once each (issue 22: `-btype host` and every SGE
/// `-binding` strategy listed each CPU once per task, `0 0 1 1` for two tasks).
#[test]
fn gcs_binding_lists_each_cpu_once() {
    for request in ["-btype host -bunit C -bamount 2", "-binding linear:2"] {
        let out = run(
            binder().args([
                "--dry-run",
                "--synthetic",
                "pack:1 core:4 pu:1",
                "--local-size",
                "2",
                "--ge",
                request,
                "--format",
                "json",
                "--show-env",
            ]),
            0,
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: Json = serde_json::from_str(line).unwrap();
            // By hand: both tasks are bound to cores 0 and 1 (PUs 0 and 1).
            assert_eq!(v["env"]["GCS_BINDING"], "0 1", "{request}: {line}");
        }
    }
}

/// A rankfile names whole cores: two tasks on the two hardware threads of one core would get
/// the same line and Open MPI would bind both to the core (issue 36). By hand: 4 tasks
/// of `pu: 4` on `core:2 pu:2` get a PU each, task 0 PU 0 and task 1 PU 1, both threads of core
/// 0:0, so the rankfile is refused with the task and core named and nothing is written.
#[test]
fn rankfile_refuses_part_of_a_core() {
    let out = run(
        binder().args([
            "--dry-run",
            "--format",
            "rankfile",
            "--synthetic",
            "pack:1 core:2 pu:2",
            "--local-size",
            "4",
            "shapes/pu-4.yaml",
        ]),
        125,
    );
    assert!(out.stdout.is_empty(), "nothing is written");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("task 0 holds 1 of the 2 hardware threads of core 0:0")
            && err.contains("bind: core"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
