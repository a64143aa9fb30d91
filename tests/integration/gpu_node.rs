//! GPUs as a real job sees them (#61, SEMANTICS §9's GPU names): real launches on an XML
//! of this host's two CPUs as 2 packages × 2 NVIDIA GPUs (cpu 0: GPUs 10:00.0, 11:00.0 |
//! cpu 1: GPUs 12:00.0, 13:00.0), loaded as this system, inside allocations made with
//! `taskset`, with UUIDs from a fake driver (an `nvidia-smi` on PATH, a `/proc/driver/
//! nvidia` tree in a private mount namespace), a container's variable, and torchrun-style
//! workers. Every expectation is hand reasoning from that layout: GPU `k` (PCI order) is
//! CUDA's `k` on the node, near cpu `k / 2`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common;

/// The 2 × 2 XML, without UUIDs (as Debian's hwloc, which has no NVML backend, exports).
pub(crate) fn node_xml() -> PathBuf {
    let mut gp = 100;
    let mut next = || {
        gp += 1;
        gp
    };
    let mut packages = String::new();
    for p in 0..2usize {
        let mask = 1u32 << p;
        let mut gpus = String::new();
        for k in 2 * p..2 * p + 2 {
            gpus.push_str(&format!(
                "<object type=\"PCIDev\" gp_index=\"{}\" pci_busid=\"0000:{:02x}:00.0\" pci_type=\"0302 [10de:2335] [10de:18be] a1\" pci_link_speed=\"0.000000\">\
                 <info name=\"PCIVendor\" value=\"NVIDIA Corporation\"/><info name=\"PCIDevice\" value=\"H200\"/>\
                 <object type=\"OSDev\" gp_index=\"{}\" name=\"cuda{k}\" subtype=\"CUDA\" osdev_type=\"5\"><info name=\"Backend\" value=\"CUDA\"/></object>\
                 </object>\n",
                next(),
                0x10 + k,
                next()
            ));
        }
        let set = format!("cpuset=\"0x{mask:08x}\" complete_cpuset=\"0x{mask:08x}\" nodeset=\"0x1\" complete_nodeset=\"0x1\"");
        packages.push_str(&format!(
            "<object type=\"Package\" os_index=\"{p}\" {set} gp_index=\"{}\">\
             <object type=\"Core\" os_index=\"{p}\" {set} gp_index=\"{}\">\
             <object type=\"PU\" os_index=\"{p}\" {set} gp_index=\"{}\"/></object>\n{gpus}</object>\n",
            next(),
            next(),
            next()
        ));
    }
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n\
         <object type=\"Machine\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" allowed_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\" allowed_nodeset=\"0x1\" gp_index=\"1\">\n\
         <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\" nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\" local_memory=\"1073741824\"/>\n\
         {packages}</object>\n</topology>\n"
    );
    let path = common::scratch().join("two-packages-four-gpus.xml");
    std::fs::write(&path, xml).unwrap();
    path
}

/// The UUIDs the fake driver gives GPUs 0-3: 0 and 1 share the prefix `58648`, 2 and 3
/// share `7777`.
const UUIDS: [&str; 4] = [
    "GPU-58648fc4-d5f0-41b1-9c2b-000000000010",
    "GPU-58649aaa-d5f0-41b1-9c2b-000000000011",
    "GPU-77770000-d5f0-41b1-9c2b-000000000012",
    "GPU-77771111-d5f0-41b1-9c2b-000000000013",
];

/// A directory with an `nvidia-smi` that answers binder's query as the driver would.
fn fake_smi() -> PathBuf {
    let dir = common::scratch().join("fake-smi");
    std::fs::create_dir_all(&dir).unwrap();
    let lines: String = UUIDS
        .iter()
        .enumerate()
        .map(|(k, u)| format!("00000000:{:02x}:00.0, {u}\\n", 0x10 + k))
        .collect();
    let path = dir.join("nvidia-smi");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$*\" in *query-gpu=pci.bus_id,uuid*) printf '{lines}' ;; *) exit 1 ;; esac\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// What a task prints: its CUDA_VISIBLE_DEVICES and CPUs.
const PROBE: &str = "echo \"$CUDA_VISIBLE_DEVICES $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)\"";

/// `binder --report SHAPE -- sh -c PROBE` under `taskset -c CPUS` (or none), with `env`;
/// its ledger is `ledger`.
fn launch(ledger: &Path, cpus: Option<&str>, env: &[(&str, &str)], shape: &str) -> Command {
    launch_script(ledger, cpus, env, shape, PROBE)
}

/// The same with the task's script `script`.
fn launch_script(
    ledger: &Path,
    cpus: Option<&str>,
    env: &[(&str, &str)],
    shape: &str,
    script: &str,
) -> Command {
    let base = common::binder();
    let mut cmd = match cpus {
        Some(c) => {
            let mut t = Command::new("taskset");
            t.args(["-c", c]).arg(base.get_program());
            t
        }
        None => Command::new(base.get_program()),
    };
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.current_dir(common::root())
        .env("HWLOC_XMLFILE", node_xml())
        .env("HWLOC_THISSYSTEM", "1")
        .env("BINDER_LEDGER_DIR", ledger)
        .env("BINDER_CACHE", "off")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("NVIDIA_VISIBLE_DEVICES")
        .envs(env.iter().copied())
        .args(["--report", shape, "--", "sh", "-c", script]);
    cmd
}

/// `cmd` in a session of its own (`setsid`), as a job of its own.
fn own_session(cmd: &Command) -> Command {
    let mut out = Command::new("setsid");
    out.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => out.env(k, v),
            None => out.env_remove(k),
        };
    }
    out.current_dir(common::root());
    out
}

/// `(CUDA_VISIBLE_DEVICES, cpus, the --report line)` of a task that ran.
fn ran(out: &Output) -> (String, String, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().next().unwrap_or("").to_owned();
    let (cvd, cpus) = line.rsplit_once(' ').unwrap_or(("", ""));
    (cvd.to_owned(), cpus.to_owned(), stderr)
}

/// The one `binder:` line of a refusal (exit 125, the task never ran).
fn refused(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(out.stdout.is_empty(), "the task ran");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

fn ready() -> Option<PathBuf> {
    if !common::two_cpus() || !common::require_tool("taskset", "taskset") {
        return None;
    }
    Some(common::private_ledger())
}

#[test]
fn a_job_on_the_second_package_exports_the_nodes_index() {
    let Some(ledger) = ready() else { return };
    // gpu-local inside `taskset -c 1`: the GPU next to cpu 1 is the node's GPU 2, and CUDA
    // (PCI order over the node) calls it 2. 23e2c73 exported 0: GPU 10:00.0, package 0.
    let out = launch(&ledger, Some("1"), &[], "gpu-local")
        .output()
        .unwrap();
    let (cvd, cpus, report) = ran(&out);
    assert_eq!((cvd.as_str(), cpus.as_str()), ("2", "1"), "{report}");
    assert!(report.contains("gpu:2 0000:12:00.0 cuda:2"), "{report}");
}

#[test]
fn a_second_job_beside_a_first_gets_a_gpu_no_job_holds() {
    let Some(ledger) = ready() else { return };
    // The first job (cpu 0, GPU 0) holds on; the second is planned around it.
    let hold = format!("{PROBE}; exec sleep 3");
    let mut child = own_session(&launch_script(&ledger, None, &[], "gpu-local", &hold))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "0 0", "the first job: GPU 0 next to cpu 0");
    let second = own_session(&launch(&ledger, None, &[], "gpu-local"))
        .output()
        .unwrap();
    let (cvd, cpus, report) = ran(&second);
    // GPU 1 lies next to the first job's cpu: the second takes GPU 2, named 2.
    assert_eq!((cvd.as_str(), cpus.as_str()), ("2", "1"), "{report}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn inherited_indices_name_the_nodes_gpus_inside_the_allocation() {
    let Some(ledger) = ready() else { return };
    // CUDA_VISIBLE_DEVICES=2 with the job's cpu on package 1: GPU 2 (23e2c73 refused,
    // "this host has 0 for this job").
    let out = launch(
        &ledger,
        Some("1"),
        &[("CUDA_VISIBLE_DEVICES", "2")],
        "gpu-local",
    )
    .output()
    .unwrap();
    let (cvd, cpus, report) = ran(&out);
    assert_eq!((cvd.as_str(), cpus.as_str()), ("2", "1"), "{report}");
    // Slurm with constrained devices: physical GPUs 2 and 3, which CUDA calls 0 and 1.
    let env = [("SLURM_STEP_GPUS", "2,3"), ("CUDA_VISIBLE_DEVICES", "0,1")];
    let out = launch(&ledger, Some("1"), &env, "gpu-local")
        .output()
        .unwrap();
    let (cvd, cpus, report) = ran(&out);
    assert_eq!((cvd.as_str(), cpus.as_str()), ("0", "1"), "{report}");
    assert!(report.contains("gpu:2 0000:12:00.0"), "{report}");
    // Every GPU named, the job on cpu 1: the one next to it first (23e2c73: 0).
    let env = [("CUDA_VISIBLE_DEVICES", "0,1,2,3")];
    let out = launch(&ledger, Some("1"), &env, "gpu-local")
        .output()
        .unwrap();
    assert_eq!(ran(&out).0, "2");
    // A GPU the allocation names far from the job's cpus is still the job's.
    let env = [("CUDA_VISIBLE_DEVICES", "0")];
    let out = launch(&ledger, Some("1"), &env, "gpu-local")
        .output()
        .unwrap();
    let (cvd, cpus, _) = ran(&out);
    assert_eq!((cvd.as_str(), cpus.as_str()), ("0", "1"));
}

#[test]
fn uuids_from_nvidia_smi_full_and_short_and_a_bad_prefix_refuses() {
    let Some(ledger) = ready() else { return };
    let path = format!(
        "{}:{}",
        fake_smi().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let with = |cvd: &str| {
        launch(
            &ledger,
            None,
            &[("PATH", path.as_str()), ("CUDA_VISIBLE_DEVICES", cvd)],
            "gpu-local",
        )
        .output()
        .unwrap()
    };
    // A full UUID (Kubernetes, NVIDIA's container runtime): GPU 2, next to cpu 1.
    let (cvd, cpus, report) = ran(&with(UUIDS[2]));
    assert_eq!((cvd.as_str(), cpus.as_str()), (UUIDS[2], "1"), "{report}");
    assert!(report.contains("gpu:2 0000:12:00.0"), "{report}");
    // HTCondor's short form, a unique prefix: GPU 1, next to cpu 0, written as inherited.
    let (cvd, cpus, _) = ran(&with("GPU-58649"));
    assert_eq!((cvd.as_str(), cpus.as_str()), ("GPU-58649", "0"));
    // A prefix of two UUIDs, and one of none: one line each, naming the entry.
    let line = refused(&with("GPU-7777"));
    assert!(
        line.contains("GPU-7777") && line.contains("prefix of 2"),
        "{line}"
    );
    assert!(
        line.contains(UUIDS[2]) && !line.contains(UUIDS[0]),
        "{line}"
    );
    let line = refused(&with("GPU-deadbeef"));
    assert!(line.contains("which no GPU of this node has"), "{line}");
    // No driver to ask: the refusal says UUIDs could not be read, and how to name GPUs.
    let out = launch(
        &ledger,
        None,
        &[("CUDA_VISIBLE_DEVICES", UUIDS[2])],
        "gpu-local",
    )
    .env("PATH", "/usr/bin:/bin")
    .output()
    .unwrap();
    let line = refused(&out);
    assert!(
        line.contains("no UUID") && line.contains("by index"),
        "{line}"
    );
}

#[test]
fn gpu_ids_uuid_names_gpus_by_the_drivers_uuid_or_says_it_cannot() {
    let Some(ledger) = ready() else { return };
    let shape = common::scratch().join("gpu-uuid.yaml");
    std::fs::write(
        &shape,
        "options:\n  bind: gpu-local\n  gpus-per-task: 1\n  gpu-ids: uuid\nresources:\n  - type: core\n    count: all\n",
    )
    .unwrap();
    let shape = shape.to_str().unwrap();
    let path = format!("{}:/usr/bin:/bin", fake_smi().display());
    let out = launch(&ledger, Some("1"), &[("PATH", path.as_str())], shape)
        .output()
        .unwrap();
    let (cvd, cpus, _) = ran(&out);
    assert_eq!((cvd.as_str(), cpus.as_str()), (UUIDS[2], "1"));
    // Without a driver 23e2c73 exported an index silently; now one line says so.
    let out = launch(&ledger, Some("1"), &[("PATH", "/usr/bin:/bin")], shape)
        .output()
        .unwrap();
    let line = refused(&out);
    assert!(
        line.contains("gpu-ids: uuid") && line.contains("gpu-ids: index"),
        "{line}"
    );
}

#[test]
fn a_containers_gpu_places_its_task_and_is_named_as_the_container_numbers_it() {
    let Some(ledger) = ready() else { return };
    // NVIDIA_VISIBLE_DEVICES=2: the container has the node's GPU 2 (package 1), which CUDA
    // inside it numbers 0.
    let out = launch(
        &ledger,
        None,
        &[("NVIDIA_VISIBLE_DEVICES", "2")],
        "gpu-local",
    )
    .output()
    .unwrap();
    let (cvd, cpus, report) = ran(&out);
    assert_eq!((cvd.as_str(), cpus.as_str()), ("0", "1"), "{report}");
    assert!(report.contains("gpu:2 0000:12:00.0 cuda:0"), "{report}");
    // By UUID (the runtime's other form), and `all`; `none` leaves it no GPU.
    let path = format!("{}:/usr/bin:/bin", fake_smi().display());
    let env = [
        ("NVIDIA_VISIBLE_DEVICES", UUIDS[3]),
        ("PATH", path.as_str()),
    ];
    let (cvd, cpus, _) = ran(&launch(&ledger, None, &env, "gpu-local").output().unwrap());
    assert_eq!((cvd.as_str(), cpus.as_str()), ("0", "1"));
    let env = [("NVIDIA_VISIBLE_DEVICES", "all")];
    let (cvd, cpus, _) = ran(&launch(&ledger, None, &env, "gpu-local").output().unwrap());
    assert_eq!((cvd.as_str(), cpus.as_str()), ("0", "0"));
    let env = [("NVIDIA_VISIBLE_DEVICES", "none")];
    refused(&launch(&ledger, None, &env, "gpu-local").output().unwrap());
}

#[test]
fn the_nvidia_proc_tree_and_device_files_in_a_private_mount_namespace() {
    let Some(ledger) = ready() else { return };
    // Root only (mounting over /proc/driver and /dev); CI is root.
    if !common::prerequisite(
        rustix::process::geteuid().is_root() && common::has("unshare"),
        "root and unshare (a private mount namespace with a fake NVIDIA driver)",
    ) {
        return;
    }
    // The driver's tree lists all four GPUs with their UUIDs and minors; the container's
    // /dev has only nvidia3 (the node's GPU 3): the task may use GPU 3 alone, CUDA's 0.
    let mut script = String::from(
        // /proc and /dev made private first (unshare leaves propagation as it is: inside a
        // chroot, as a fresh machine's check runs, `/` is no mount point to make private),
        // and every mount below them, so nothing reaches the host's namespace.
        "set -e; mount --make-rprivate /proc; mount --make-rprivate /dev; \
         mount -t tmpfs none /proc/driver; d=/proc/driver/dev; mkdir $d; \
         for f in null zero urandom random; do touch $d/$f; mount --bind /dev/$f $d/$f; done; \
         touch $d/nvidiactl $d/nvidia3; mount --bind $d /dev; ",
    );
    for (k, uuid) in UUIDS.iter().enumerate() {
        let bus = format!("0000:{:02x}:00.0", 0x10 + k);
        script.push_str(&format!(
            "mkdir -p /proc/driver/nvidia/gpus/{bus}; printf 'Model: \\t H200\\nGPU UUID: \\t {uuid}\\nBus Location: \\t {bus}\\nDevice Minor: \\t {k}\\n' > /proc/driver/nvidia/gpus/{bus}/information; "
        ));
    }
    script.push_str("exec \"$@\"");
    // `inner` run inside the namespace, with no nvidia-smi on PATH.
    let namespaced = |inner: Command| {
        let mut cmd = Command::new("unshare");
        cmd.args([
            "-m",
            "--propagation",
            "unchanged",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .current_dir(common::root());
        ran(&cmd.output().unwrap())
    };
    let all = [("NVIDIA_VISIBLE_DEVICES", "all")];
    let (cvd, cpus, report) = namespaced(launch(&ledger, None, &all, "gpu-local"));
    assert_eq!((cvd.as_str(), cpus.as_str()), ("0", "1"), "{report}");
    assert!(report.contains("gpu:3 0000:13:00.0 cuda:0"), "{report}");
    // The tree's UUIDs name GPUs with no nvidia-smi on PATH (a short form of GPU 3's).
    let short = [("CUDA_VISIBLE_DEVICES", "GPU-77771")];
    let (cvd, cpus, _) = namespaced(launch(&ledger, None, &short, "gpu-local"));
    assert_eq!((cvd.as_str(), cpus.as_str()), ("GPU-77771", "1"));
}

#[test]
fn the_gpu_smoke_check_passes_on_the_fake_node() {
    let Some(ledger) = ready() else { return };
    // tools/gpu-smoke.sh as a site runs it on a GPU node, here on the 2 × 2 XML with the
    // fake driver: discovery, each task's devices, both UUID forms, an ambiguous prefix,
    // torchrun-style workers.
    let path = format!("{}:/usr/bin:/bin:/usr/sbin:/sbin", fake_smi().display());
    // As every launch of the suite: other users' bound tasks on this machine must not
    // fill the node the script's launches plan on (`common::hermetic`).
    let mut bash = Command::new("bash");
    let out = common::hermetic(&mut bash)
        .arg(common::root().join("tools/gpu-smoke.sh"))
        .arg(common::binder_exe())
        .current_dir(common::root())
        .env("HWLOC_XMLFILE", node_xml())
        .env("HWLOC_THISSYSTEM", "1")
        .env("BINDER_LEDGER_DIR", &ledger)
        .env("BINDER_SMOKE_SHAPE", "gpu-devices-only")
        .env("PATH", path)
        .env_remove("CUDA_VISIBLE_DEVICES")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("ok ")).count(),
        10,
        "{text}"
    );
    assert!(
        text.contains("ok   tasks' devices distinct: 0 1 2 3"),
        "{text}"
    );
    assert!(text.contains("ok   an ambiguous prefix refuses"), "{text}");
}
