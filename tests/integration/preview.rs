//! `--dry-run` shows what a launch sets (issue #13): for a CPU, an OpenMP and a GPU
//! shape, the environment the dry-run promises is exactly what the launched child sees,
//! checked by running the child and reading its environment.

use std::collections::BTreeMap;

use binder::exit_code::SUCCESS;

use crate::common::{binder, run, shared, topology};

/// The variables binder sets (or would): everything a dry-run's `env` may hold.
fn binders(name: &str) -> bool {
    (name.starts_with("BINDER_") && name != "BINDER_JOB")
        || name.starts_with("OMP_")
        || name.starts_with("CUDA_")
        || ["ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"].contains(&name)
}

/// Variables this test sets for binder itself, which the child inherits untouched.
const HARNESS: [&str; 5] = [
    "BINDER_SITE_FILE",
    "BINDER_LEDGER_DIR",
    "BINDER_CACHE",
    "BINDER_CACHE_DIR",
    "BINDER_KERNEL_VIEW",
];

/// The dry-run's `env` of `rank` and the child's own, for `shape` of `size` tasks, both
/// under `user` (inherited variables) and `host` (variables for the launch only: a GPU
/// node's XML in place of this host).
fn both(
    shape: &str,
    rank: usize,
    size: usize,
    dry: &[&str],
    user: &[(&str, &str)],
    host: &[(&str, String)],
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let (r, n) = (rank.to_string(), size.to_string());
    let mut cmd = binder();
    cmd.args([
        "-n",
        "--format",
        "json",
        "--local-rank",
        &r,
        "--local-size",
        &n,
    ])
    .args(dry)
    .arg(shape)
    .envs(user.iter().copied());
    let out = run(&mut cmd, SUCCESS);
    let record: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut promised: BTreeMap<String, String> = record["env"]
        .as_object()
        .expect("an env object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    // What the user set and binder left alone reaches the child as it was.
    for (k, v) in user {
        promised.entry((*k).to_owned()).or_insert((*v).to_owned());
    }
    let mut cmd = binder();
    cmd.args(["--local-rank", &r, "--local-size", &n, shape, "--", "env"])
        .envs(user.iter().copied())
        .envs(host.iter().map(|(k, v)| (*k, v.as_str())));
    let out = run(&mut cmd, SUCCESS);
    let seen: BTreeMap<String, String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| binders(k) && !HARNESS.contains(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    (promised, seen)
}

#[test]
fn dry_run_env_is_what_a_cpu_task_sees() {
    // Two tasks of one core each where this host has two cores, else one.
    let out = run(
        binder().args(["-n", "--format", "json", "shapes/cores-packed.yaml"]),
        SUCCESS,
    );
    let whole: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let size = whole["objects"].as_array().unwrap().len().min(2);
    for rank in 0..size {
        let (promised, seen) = both("shapes/cores-packed.yaml", rank, size, &[], &[], &[]);
        assert!(promised.contains_key("BINDER_CPUS"), "{promised:?}");
        assert_eq!(promised, seen, "rank {rank}");
    }
}

#[test]
fn dry_run_env_is_what_an_openmp_task_sees() {
    let shape = "tests/fixtures/shapes/openmp-pu.yaml";
    let (promised, seen) = both(shape, 0, 1, &[], &[], &[]);
    assert_eq!(
        promised.get("OMP_PROC_BIND").map(String::as_str),
        Some("close")
    );
    assert_eq!(promised, seen);
    // A user's thread count and abstract places are kept; an OMP_PROC_BIND OpenMP would
    // not read is replaced. The dry-run says so, and the child agrees.
    let user = [
        ("OMP_NUM_THREADS", "1"),
        ("OMP_PLACES", "threads"),
        ("OMP_PROC_BIND", "tight"),
    ];
    let (promised, seen) = both(shape, 0, 1, &[], &user, &[]);
    assert_eq!(promised["OMP_PLACES"], "threads");
    assert_eq!(promised["OMP_PROC_BIND"], "close");
    assert_eq!(promised["OMP_NUM_THREADS"], "1");
    assert_eq!(promised, seen);
    // `--verbose` says what became of each; more threads than places is a warning, at
    // launch and in the dry-run alike.
    let user = [
        ("OMP_NUM_THREADS", "4096"),
        ("OMP_PLACES", "{0:4096}"),
        ("OMP_PROC_BIND", "tight"),
    ];
    let out = run(
        binder()
            .args(["-v", shape, "--", "true"])
            .envs(user.iter().copied()),
        SUCCESS,
    );
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(
        said.contains("binder: OMP_PLACES={0:4096} replaced by {"),
        "{said}"
    );
    assert!(said.contains("it names cpus"), "{said}");
    assert!(
        said.contains("binder: OMP_PROC_BIND=tight replaced by close: it is none of"),
        "{said}"
    );
    assert!(
        said.contains("binder: warning: OMP_NUM_THREADS=4096 is more than the "),
        "{said}"
    );
    let out = run(
        binder().args(["-n", shape]).envs(user.iter().copied()),
        SUCCESS,
    );
    let said = String::from_utf8(out.stderr).unwrap();
    assert!(
        said.starts_with("binder: warning: OMP_NUM_THREADS=4096"),
        "{said}"
    );
}

#[test]
fn dry_run_env_is_what_a_gpu_task_sees() {
    let Some(shared) = shared() else { return };
    // A GPU node's XML stands in for this host at launch (hwloc's own HWLOC_XMLFILE, with
    // HWLOC_THISSYSTEM=1), and the dry-run reads the same file with --topology, as a
    // user previewing a GPU node from a laptop would. `bind: none`: the XML's CPUs need
    // not exist here.
    let xml = topology(&shared, "dgx2-16v100-restricted.xml");
    let host = [
        ("HWLOC_XMLFILE", xml.display().to_string()),
        ("HWLOC_THISSYSTEM", "1".to_owned()),
        ("BINDER_CACHE", "off".to_owned()),
    ];
    let topology = xml.display().to_string();
    for rank in [0, 3] {
        let (promised, seen) = both(
            "shapes/gpu-devices-only.yaml",
            rank,
            4,
            &["--topology", &topology],
            &[],
            &host,
        );
        assert_eq!(promised["CUDA_VISIBLE_DEVICES"], rank.to_string());
        assert_eq!(promised["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
        assert_eq!(promised, seen, "rank {rank}");
    }
}

#[test]
fn dry_run_shows_memory_binding_and_text_env() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, "epyc7451-naples-2s-48c-smt2-8numa.xml");
    let out = run(
        binder()
            .args(["-n", "--show-env", "--local-size", "8", "--topology"])
            .arg(&xml)
            .arg("shapes/hybrid-numa-openmp.yaml"),
        SUCCESS,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    // Naples: 8 NUMA nodes of 6 cores; hwloc-calc --physical-output --intersect numa
    // numa:3 on this XML gives 3, and numa:3's cores are core:18-23.
    let rank3 = text.lines().find(|l| l.starts_with("rank 3/8")).unwrap();
    assert!(rank3.contains("core:18-23"), "{text}");
    assert!(rank3.ends_with("mems 3"), "{text}");
    let env3 = text
        .lines()
        .skip_while(|l| !l.starts_with("rank 3/8"))
        .nth(1)
        .unwrap();
    assert!(env3.starts_with("    env BINDER_LOCAL_RANK=3 "), "{env3}");
    assert!(env3.contains(" OMP_NUM_THREADS=6 "), "{env3}");
    // --show-env belongs to the dry-run.
    let out = run(
        binder().args(["--show-env", "shapes/cores-packed.yaml", "--", "true"]),
        binder::exit_code::REFUSED,
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --dry-run"));
}
