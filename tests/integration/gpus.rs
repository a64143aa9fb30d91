//! GPUs on every real GPU topology: discovery (and what is not a GPU), one and two tasks
//! per GPU checked against hwloc-calc's view of each GPU's locality, gpu-remote, and the
//! visible-devices variables set on the exec path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use binder::exit_code::{REFUSED, SUCCESS};
use binder_plan::topology::Source;

use crate::common::{binder, root, run, shared, topology as xml_path};

/// Every GPU topology of `fixtures/topologies` with the GPUs binder must find: PCI
/// functions, except MI300A in CPX mode where each of the 4 APUs shows 6 partitions.
const GPU_TOPOLOGIES: [(&str, usize); 10] = [
    ("aws-g4dn-metal-2s-48c-smt2-8t4.xml", 8),
    ("dgx2-16v100-restricted.xml", 16),
    ("power8-4p100-restricted.xml", 4),
    ("power8-coralea-2s-20c-smt8-4p100.xml", 4),
    ("epyc7a53-tioga-1s-64c-smt2-8mi250x.xml", 8),
    ("epyc7402-corona-2s-48c-smt2-8mi50.xml", 8),
    ("spr8480-2s-112c-smt2-snc4-4h100.xml", 4),
    ("power9-sierra-2s-44c-smt4-4v100-gpunuma.xml", 4),
    ("mi300a-4apu-96c-smt2-spx.xml", 4),
    ("mi300a-4apu-96c-smt2-cpx.xml", 24),
];

/// A real single-NUMA GPU node, exported with `lstopo --of xml` on an H100 VM.
fn h100_vm() -> PathBuf {
    root().join("tests/fixtures/topologies/h100-vm-16c-1numa.xml")
}

fn gpus_of(xml: &Path) -> Vec<binder_plan::gpu::Gpu> {
    let t = binder_host::load(&Source::Xml(xml.to_owned()), true).expect("loads");
    binder_plan::gpu::discover(&t)
}

#[test]
fn discovery_counts_gpus_and_skips_management_vga() {
    let Some(shared) = shared() else { return };
    for (name, want) in GPU_TOPOLOGIES {
        let gpus = gpus_of(&xml_path(&shared, name));
        assert_eq!(gpus.len(), want, "{name}");
        let busids: Vec<&str> = gpus.iter().map(|g| g.busid.as_str()).collect();
        let mut sorted = busids.clone();
        sorted.sort();
        assert_eq!(busids, sorted, "{name}: PCI bus order");
        assert!(gpus.iter().enumerate().all(|(i, g)| g.index == i), "{name}");
    }
    // These have an ASPEED/Matrox VGA (a BMC's display) and no GPU.
    for name in [
        "broadwell-2s-36c-ht-offline.xml",
        "knl7250-snc4-flat-68c-smt4-8numa.xml",
        "xeon-24s-192c-smt2-12groups.xml",
    ] {
        assert!(gpus_of(&xml_path(&shared, name)).is_empty(), "{name}");
    }
    // CPX partitions: 6 per APU, numbered in bus order then partition, sharing a locality.
    let cpx = gpus_of(&xml_path(&shared, "mi300a-4apu-96c-smt2-cpx.xml"));
    assert!(cpx[..6]
        .iter()
        .all(|g| g.busid == cpx[0].busid && g.locality == cpx[0].locality));
    assert_ne!(cpx[6].busid, cpx[0].busid);
    assert_eq!(cpx[7].vendor_index, 7);
}

#[test]
fn real_h100_node() {
    let gpus = gpus_of(&h100_vm());
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].busid, "0000:00:06.0");
    assert_eq!(gpus[0].vendor, binder_plan::gpu::Vendor::Nvidia);
}

/// OS PU numbers hwloc-calc gives for `location` in `xml`.
fn calc_pus(xml: &Path, location: &str) -> BTreeSet<u64> {
    let out = Command::new("hwloc-calc")
        .arg("--input")
        .arg(xml)
        .args(["--physical-output", "-I", "pu", location])
        .output()
        .expect("hwloc-calc runs");
    assert!(
        out.status.success(),
        "hwloc-calc {location}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

fn plan_json(xml: &Path, shape: &str, n: usize) -> Vec<serde_json::Value> {
    let out = run(
        binder()
            .args([
                "-n",
                "--format",
                "json",
                "--local-size",
                &n.to_string(),
                "--topology",
            ])
            .arg(xml)
            .arg(shape),
        SUCCESS,
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn set_of(v: &serde_json::Value, key: &str) -> BTreeSet<u64> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn hwloc_calc_or_skip() -> bool {
    crate::common::require_tool("hwloc-calc", "GPU locality against hwloc-calc")
}

#[test]
fn one_and_two_tasks_per_gpu_stay_in_its_locality() {
    let Some(shared) = shared() else { return };
    if !hwloc_calc_or_skip() {
        return;
    }
    for (name, g) in GPU_TOPOLOGIES {
        let xml = xml_path(&shared, name);
        // dgx2's XML keeps 4 PUs for 16 GPUs: one core per task is not there to give.
        if name.starts_with("dgx2") {
            continue;
        }
        for task in plan_json(&xml, "shapes/gpu-local.yaml", g) {
            let busids = task["gpu_busids"].as_array().unwrap();
            assert_eq!(busids.len(), 1, "{name}: one GPU per task");
            let near = calc_pus(&xml, &format!("pci={}", busids[0].as_str().unwrap()));
            let cpus = set_of(&task, "cpus");
            assert!(
                !cpus.is_empty() && cpus.is_subset(&near),
                "{name} rank {}: {cpus:?} not near its GPU {near:?}",
                task["local_rank"]
            );
        }
        let tasks = plan_json(&xml, "shapes/gpu-local-shared.yaml", 2 * g);
        for pair in tasks.chunks(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert_eq!(a["gpus"], b["gpus"], "{name}: two tasks per GPU");
            let near = calc_pus(
                &xml,
                &format!("pci={}", a["gpu_busids"][0].as_str().unwrap()),
            );
            let (ca, cb) = (set_of(a, "cpus"), set_of(b, "cpus"));
            assert!(
                ca.is_subset(&near) && cb.is_subset(&near),
                "{name}: shared locality"
            );
            assert!(
                ca.is_disjoint(&cb) && ca.len() == cb.len() && !ca.is_empty(),
                "{name}: disjoint equal halves"
            );
        }
    }
}

#[test]
fn gpu_remote_lands_on_a_numa_node_without_the_gpu() {
    let Some(shared) = shared() else { return };
    if !hwloc_calc_or_skip() {
        return;
    }
    for (name, g) in GPU_TOPOLOGIES {
        if name.starts_with("dgx2") {
            continue;
        }
        let xml = xml_path(&shared, name);
        for task in plan_json(&xml, "shapes/gpu-remote.yaml", g) {
            let near = calc_pus(
                &xml,
                &format!("pci={}", task["gpu_busids"][0].as_str().unwrap()),
            );
            let cpus = set_of(&task, "cpus");
            assert!(
                !cpus.is_empty() && cpus.is_disjoint(&near),
                "{name}: remote cpus {cpus:?} touch the GPU's {near:?}"
            );
            let numas = calc_pus(&xml, &format!("numa:{}", first_numa(&xml, &cpus)));
            assert!(cpus.is_subset(&numas), "{name}: one NUMA node");
        }
    }
    let out = run(
        binder()
            .args(["-n", "--topology"])
            .arg(h100_vm())
            .arg("shapes/gpu-remote.yaml"),
        REFUSED,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("needs a NUMA node without gpu:0") && err.contains("use `gpu-local` here"),
        "{err}"
    );
}

/// The logical index of the NUMA node holding the first of `cpus`.
fn first_numa(xml: &Path, cpus: &BTreeSet<u64>) -> String {
    let first = cpus.iter().next().unwrap();
    let out = Command::new("hwloc-calc")
        .arg("--input")
        .arg(xml)
        .args(["--physical-input", "-I", "numa", &format!("pu:{first}")])
        .output()
        .unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .split(',')
        .next()
        .unwrap()
        .to_owned()
}

/// Runs `launch_child` in a child process (it execs, so it cannot run in this one) and
/// checks what the task's environment holds.
#[test]
fn exec_path_sets_visible_devices() {
    let Some(shared) = shared() else { return };
    let cases = [
        (
            "aws-g4dn-metal-2s-48c-smt2-8t4.xml",
            [
                "CUDA_VISIBLE_DEVICES=1",
                "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                "BINDER_GPUS=1",
            ],
        ),
        (
            "epyc7a53-tioga-1s-64c-smt2-8mi250x.xml",
            [
                "ROCR_VISIBLE_DEVICES=1",
                "BINDER_GPUS=1",
                "BINDER_UNIT=none",
            ],
        ),
    ];
    for (name, want) in cases {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "gpus::launch_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("BINDER_TEST_CHILD_XML", xml_path(&shared, name))
            .current_dir(root())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for line in want {
            assert!(
                text.contains(&format!("{line}\n")),
                "{name}: no {line} in\n{text}"
            );
        }
        assert!(
            !text.contains("CUDA_VISIBLE") || !text.contains("ROCR_VISIBLE"),
            "one vendor's variable"
        );
    }
}

/// Rank 1 of 2 with `gpu-devices-only.yaml` (no CPU binding, so a foreign topology is
/// safe to launch with): execs `sh`, which prints the GPU variables.
#[test]
#[ignore = "run in a child process by exec_path_sets_visible_devices"]
fn launch_child() {
    // Only meaningful as exec_path_sets_visible_devices' child: run alone it would pass
    // having checked nothing, so it fails instead.
    let xml = std::env::var("BINDER_TEST_CHILD_XML")
        .expect("launch_child runs only as the child of exec_path_sets_visible_devices");
    let shape = binder_host::shape_file(Path::new("shapes/gpu-devices-only.yaml")).unwrap();
    let topology = binder_host::load(&Source::Xml(xml.into()), true).unwrap();
    let plan = binder_plan::plan(
        &binder_plan::PlanRequest::new(&shape, &topology, 2).origin("gpu-devices-only.yaml"),
    )
    .unwrap();
    let identity = binder_core::identity::Identity::given(1, 2);
    let command: Vec<std::ffi::OsString> =
        ["sh", "-c", "env | grep -E '^(CUDA|ROCR|ZE|BINDER)_' | sort"]
            .iter()
            .map(Into::into)
            .collect();
    let view = binder_plan::rank_view::launch_view(&plan, &shape, 1);
    let options = binder_core::launch::Options::for_view(
        &view,
        false,
        false,
        None,
        &binder_core::launch::process_env,
    )
    .running(&command, &[]);
    let err = binder::host_launch::run(
        &topology,
        &view,
        &identity,
        &options,
        &mut std::io::stderr(),
    );
    panic!("exec failed: {err}");
}

/// MIG instances in an inherited `CUDA_VISIBLE_DEVICES` (issue 36): each is a device of
/// its own on its parent GPU, placed in that GPU's locality (hwloc-calc's `os=cuda2`),
/// passed on as written; the parent of a `MIG-<uuid>` comes from the driver's listing (a
/// stand-in `nvidia-smi -L` on PATH, in the layout NVIDIA documents), and an instance the
/// listing does not name is refused with the entry said, never guessed. The XML's UUIDs are
/// anonymised (all zero), so the listing's index places the parent.
#[test]
fn mig_instances_follow_their_parent_gpu() {
    let Some(shared) = shared() else { return };
    if !hwloc_calc_or_skip() {
        return;
    }
    let xml = xml_path(&shared, "spr8480-2s-112c-smt2-snc4-4h100.xml");
    let dir = crate::common::scratch().join("fake-nvidia-smi");
    std::fs::create_dir_all(&dir).unwrap();
    let smi = dir.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\ncat <<'X'\nGPU 0: NVIDIA H100 (UUID: GPU-0a)\nGPU 2: NVIDIA H100 (UUID: GPU-2a)\n  MIG 3g.40gb Device  0: (UUID: MIG-aaaa0000-0000-5000-8000-000000000000)\n  MIG 3g.40gb Device  1: (UUID: MIG-bbbb0000-0000-5000-8000-000000000000)\nX\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap());
    let mig = [
        "MIG-aaaa0000-0000-5000-8000-000000000000",
        "MIG-bbbb0000-0000-5000-8000-000000000000",
    ];
    let out = run(
        binder()
            .env("PATH", &path)
            .env("CUDA_VISIBLE_DEVICES", mig.join(","))
            .args([
                "-n",
                "--format",
                "json",
                "--show-env",
                "--local-size",
                "2",
                "--topology",
            ])
            .arg(&xml)
            .arg(root().join("shapes/gpu-local.yaml")),
        SUCCESS,
    );
    let near = calc_pus(&xml, "os=cuda2");
    let tasks: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tasks.len(), 2);
    let mut all = BTreeSet::new();
    for (task, entry) in tasks.iter().zip(mig) {
        let cpus = set_of(task, "cpus");
        assert!(!cpus.is_empty() && cpus.is_subset(&near), "{task}");
        assert!(
            all.is_disjoint(&cpus),
            "each instance's task has CPUs of its own"
        );
        all.extend(cpus);
        assert_eq!(task["env"]["CUDA_VISIBLE_DEVICES"], entry, "{task}");
    }
    // An instance the listing does not name: refused, the entry named.
    let out = run(
        binder()
            .env("PATH", &path)
            .env(
                "CUDA_VISIBLE_DEVICES",
                "MIG-cccc0000-0000-5000-8000-000000000000",
            )
            .args(["-n", "--topology"])
            .arg(&xml)
            .arg(root().join("shapes/gpu-local.yaml")),
        REFUSED,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MIG instance(s) MIG-cccc0000") && err.contains("`nvidia-smi -L`"),
        "{err}"
    );
}

/// The driver's listing costs an `nvidia-smi` run (tens of ms on a GPU node), so a launch
/// asks for it only when it computes a plan: the first launch of a job with a `MIG-<uuid>`
/// entry runs the stand-in `nvidia-smi` (it leaves a mark), the next one, served by the
/// node cache, does not (issue 37). Run through `binder-full`, the front the plugins share
/// (`binder` itself never gets that far on a hit).
#[test]
fn a_warm_launch_never_asks_nvidia_smi() {
    let dir = crate::common::scratch().join("lazy-nvidia-smi");
    std::fs::create_dir_all(&dir).unwrap();
    let mark = dir.join("ran");
    let smi = dir.join("nvidia-smi");
    std::fs::write(
        &smi,
        format!(
            "#!/bin/sh\ntouch '{}'\necho 'GPU 0: NVIDIA H100 (UUID: GPU-0a)'\n",
            mark.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap());
    let launch = || {
        let mut full = Command::new(env!("CARGO_BIN_EXE_binder-full"));
        crate::common::isolated(&mut full);
        run(
            full.env("PATH", &path)
                .env("BINDER_CACHE_DIR", dir.join("cache"))
                .env(
                    "CUDA_VISIBLE_DEVICES",
                    "MIG-aaaa0000-0000-5000-8000-000000000000",
                )
                .arg(root().join("shapes/cores-packed.yaml"))
                .args(["--", "true"]),
            SUCCESS,
        )
    };
    launch();
    assert!(mark.exists(), "a launch that plans asks the driver");
    std::fs::remove_file(&mark).unwrap();
    launch();
    assert!(!mark.exists(), "a node-cache hit ran nvidia-smi");
}

/// `CUDA_VISIBLE_DEVICES=-1` (what Flux exports to a job run without `-g`) on a GPU node:
/// the refusal says the job's allocation holds no GPU and how to ask Flux for one, not
/// that the topology lacks I/O (issue 36).
#[test]
fn a_job_given_no_gpus_is_told_why() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "spr8480-2s-112c-smt2-snc4-4h100.xml");
    let out = run(
        binder()
            .env("CUDA_VISIBLE_DEVICES", "-1")
            .args(["-n", "--local-size", "2", "--topology"])
            .arg(&xml)
            .arg(root().join("shapes/gpu-local.yaml")),
        REFUSED,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has 0 for this job (4 in all; its allocation says CUDA_VISIBLE_DEVICES=-1)")
            && err.contains("add `-g N`")
            && !err.contains("include I/O"),
        "{err}"
    );
}
