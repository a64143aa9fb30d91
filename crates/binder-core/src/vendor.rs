//! One row per GPU vendor: every fact binder knows of one, in one place. GPU discovery
//! (the PCI vendor id), the job's GPU allocation (the variables it inherits), the node
//! cache's and the ledger's key ([`GPU_GRANT_VARS`]), the task's variables and the
//! manual's rows are all read from [`VENDORS`].
//!
//! Adding a vendor is a variant of [`Vendor`] and one row here: rows are in the enum's
//! order (a test holds it).

/// GPU vendors binder knows how to hand devices to; each one's facts are its row of
/// [`VENDORS`], in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vendor {
    /// NVIDIA (CUDA).
    Nvidia,
    /// AMD (ROCm).
    Amd,
    /// Intel (Level Zero).
    Intel,
}

/// Everything binder knows of one GPU vendor.
#[derive(Debug)]
pub struct VendorRow {
    /// Which vendor.
    pub vendor: Vendor,
    /// Its name in plans, reports and the cache (`nvidia`).
    pub name: &'static str,
    /// Its PCI vendor id, how hwloc's PCI devices say it.
    pub pci_id: u16,
    /// The variables that carry the job's allocation, first one set wins (SEMANTICS §9).
    pub allocation: &'static [&'static str],
    /// What an allocation entry may be, for the docs.
    pub entries: &'static str,
    /// The variable binder sets to the task's GPUs, and those it sets beside it.
    pub task_vars: &'static [(&'static str, Option<&'static str>)],
    /// Its runtime's short name in reports (`cuda:0`).
    pub runtime: &'static str,
    /// The hwloc info key holding a device's UUID (on the PCI device or its OS device),
    /// if hwloc reports one for this vendor.
    pub uuid_info: Option<&'static str>,
    /// The variable a container runtime reads to say which of the node's GPUs a
    /// container has (indices over the node, UUIDs, `all`, `none`, `void`), left in the
    /// container's environment (SEMANTICS §9, containers).
    pub container: Option<&'static str>,
}

/// Every vendor, in [`Vendor`]'s order.
pub const VENDORS: [VendorRow; 3] = [
    VendorRow {
        vendor: Vendor::Nvidia,
        name: "nvidia",
        pci_id: 0x10de,
        allocation: &["CUDA_VISIBLE_DEVICES"],
        entries: "index in PCI order, or `GPU-<uuid>` (a unique prefix)",
        task_vars: &[
            ("CUDA_VISIBLE_DEVICES", None),
            ("CUDA_DEVICE_ORDER", Some("PCI_BUS_ID")),
        ],
        runtime: "cuda",
        uuid_info: Some("NVIDIAUUID"),
        container: Some("NVIDIA_VISIBLE_DEVICES"),
    },
    VendorRow {
        vendor: Vendor::Amd,
        name: "amd",
        pci_id: 0x1002,
        allocation: &[
            "ROCR_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "GPU_DEVICE_ORDINAL",
        ],
        entries: "index, or `GPU-<uuid>`",
        task_vars: &[("ROCR_VISIBLE_DEVICES", None)],
        runtime: "rocr",
        uuid_info: Some("AMDUUID"),
        container: None,
    },
    VendorRow {
        vendor: Vendor::Intel,
        name: "intel",
        pci_id: 0x8086,
        allocation: &["ZE_AFFINITY_MASK"],
        entries: "index (`N` or `N.M`)",
        // Level Zero's order is the driver's unless asked for PCI order, which is the
        // order ZE_AFFINITY_MASK's indices are written in (SEMANTICS §9).
        task_vars: &[
            ("ZE_AFFINITY_MASK", None),
            ("ZE_ENABLE_PCI_ID_DEVICE_ORDER", Some("1")),
        ],
        runtime: "ze",
        uuid_info: None,
        container: None,
    },
];

/// A scheduler's GPU allocation for any vendor, first one set wins: Slurm's GPU indices.
pub const SCHEDULER_GPU_VARS: [&str; 2] = ["SLURM_STEP_GPUS", "SLURM_JOB_GPUS"];

/// How many GPUs the step has on this node, which Slurm exports to every task even where
/// it gives each task only some of them (`--gpus-per-task`, `--gpu-bind`): then the
/// task's own variables are not the job's (SEMANTICS §9).
pub const SCHEDULER_GPU_COUNT: &str = "SLURM_GPUS_ON_NODE";

/// Where Slurm gave this task only some of a batch job's GPUs and binder took the step's
/// to be the consecutive job GPUs around the task's own (SEMANTICS §9, GPUs per task),
/// why the GPUs a plan gives the task (`planned`: vendor name and how its variable names
/// each) are not the ones Slurm gave it: Slurm dealt the step's GPUs out of rank order
/// (`--gpu-bind=map_gpu`, `single`, `closest`), and no task can tell the step's GPUs from
/// its own then (no variable says how they were dealt). `None` when they are its own, or
/// the step's GPUs were known.
pub fn strays(planned: &[(&str, &str)], get: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let entries = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty() && *e != "NoDevFiles")
            .map(str::to_owned)
            .collect()
    };
    let k = task_split(get)?;
    let job = get(SCHEDULER_GPU_VARS[1]).map(|v| entries(&v).len())?;
    if job == k {
        return None;
    }
    for row in &VENDORS {
        let Some((var, own)) = row
            .allocation
            .iter()
            .find_map(|v| get(v).map(|value| (*v, entries(&value))))
        else {
            continue;
        };
        let mut mine: Vec<String> = planned
            .iter()
            .filter(|(vendor, _)| *vendor == row.name)
            .map(|(_, export)| (*export).to_owned())
            .collect();
        let mut own = own;
        mine.sort();
        own.sort();
        if !mine.is_empty() && mine != own {
            return Some(format!(
                "the plan gives this task GPU(s) {} but Slurm gave it {} ({var}): Slurm dealt the step's {k} GPU(s) out of rank order (--gpu-bind=map_gpu, single or closest), so which of this batch job's {job} are the step's is unknown here; give the step all the job's GPUs (`srun --gpus={job}` without `--gpus-per-task` or `--gpu-bind`), or let the plugin bind it (`srun --binder=SHAPE`), which reads the step's GPUs",
                mine.join(","),
                own.join(",")
            ));
        }
    }
    None
}

impl Vendor {
    /// Its row of [`VENDORS`].
    pub const fn row(self) -> &'static VendorRow {
        &VENDORS[self as usize]
    }

    /// The vendor of a PCI vendor id, if binder knows it.
    pub fn from_pci(id: u16) -> Option<Vendor> {
        VENDORS.iter().find(|r| r.pci_id == id).map(|r| r.vendor)
    }
}

impl std::fmt::Display for Vendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.row().name)
    }
}

/// The step's GPU count here ([`SCHEDULER_GPU_COUNT`]) when Slurm gave this task only
/// some of them: its `SLURM_STEP_GPUS` lists fewer. Its allocation variables are then
/// its own devices, not the job's: they neither key the job's plan (every task of the
/// step keys it alike) nor bound its GPUs.
pub fn task_split(get: &dyn Fn(&str) -> Option<String>) -> Option<usize> {
    let count: usize = get(SCHEDULER_GPU_COUNT)?.trim().parse().ok()?;
    let task = get(SCHEDULER_GPU_VARS[0])?;
    let listed = task
        .split(',')
        .filter(|e| !e.trim().is_empty() && e.trim() != "NoDevFiles")
        .count();
    (count > 0 && listed < count).then_some(count)
}

/// How many names [`GPU_GRANT_VARS`] has.
const GRANT_COUNT: usize = {
    let mut n = SCHEDULER_GPU_VARS.len() + 1;
    let mut i = 0;
    while i < VENDORS.len() {
        n += VENDORS[i].allocation.len();
        if VENDORS[i].container.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
};

/// Every variable that can change which GPUs a job gets (SEMANTICS §9): each vendor's
/// allocation variables, then the scheduler's and its count, then the container
/// runtimes'. The node cache and the ledger key a plan on their values, and the manual's
/// ENVIRONMENT row is this list.
pub const GPU_GRANT_VARS: [&str; GRANT_COUNT] = {
    let mut out = [""; GRANT_COUNT];
    let (mut i, mut k) = (0, 0);
    while i < VENDORS.len() {
        let mut j = 0;
        while j < VENDORS[i].allocation.len() {
            out[k] = VENDORS[i].allocation[j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    let mut s = 0;
    while s < SCHEDULER_GPU_VARS.len() {
        out[k] = SCHEDULER_GPU_VARS[s];
        k += 1;
        s += 1;
    }
    out[k] = SCHEDULER_GPU_COUNT;
    k += 1;
    let mut c = 0;
    while c < VENDORS.len() {
        if let Some(var) = VENDORS[c].container {
            out[k] = var;
            k += 1;
        }
        c += 1;
    }
    let _ = k;
    out
};

/// What the NVIDIA driver lists of the node's GPUs and their MIG instances
/// (`nvidia-smi -L`), read when an inherited `CUDA_VISIBLE_DEVICES` names a MIG instance
/// whose GPU only the driver knows (hwloc lists no MIG instances). `None` when the tool is
/// missing, fails, or takes longer than [`DRIVER_LISTING_TIMEOUT`] (a wedged GPU can hang
/// it; it is then killed), so a launch never waits on it for long.
pub fn nvidia_listing() -> Option<String> {
    tool_output("nvidia-smi", &["-L"], DRIVER_LISTING_TIMEOUT)
}

/// The most of a tool's output read (`nvidia-smi -L`, `scontrol show job -d`).
const MAX_OUTPUT: u64 = 256 * 1024;

/// A tool's standard output when it exits 0 within `timeout` (else it is killed):
/// `None` when it is missing, fails or hangs, so that a launch never waits on it long.
/// The output is read as it comes (a thread), so a long one cannot block the tool.
pub(crate) fn tool_output(
    program: &str,
    args: &[&str],
    timeout: std::time::Duration,
) -> Option<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout
            .take(MAX_OUTPUT)
            .read_to_string(&mut text)
            .ok()
            .map(|_| text)
    });
    let start = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() < timeout => {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // The tool has exited (or was killed): its end of the pipe is closed, the read ends.
    let text = reader.join().ok().flatten();
    status.filter(|s| s.success()).and(text)
}

/// How long [`nvidia_listing`] waits for the driver.
pub const DRIVER_LISTING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_the_enums_order() {
        for (i, row) in VENDORS.iter().enumerate() {
            assert_eq!(row.vendor as usize, i, "{}", row.name);
            assert_eq!(Vendor::from_pci(row.pci_id), Some(row.vendor));
            // The task's list is the first variable set, and one the runtime reads.
            assert_eq!(row.task_vars[0].1, None, "{}", row.name);
            assert!(row.allocation.contains(&row.task_vars[0].0), "{}", row.name);
        }
    }

    #[test]
    fn the_key_holds_every_allocation_variable() {
        assert_eq!(
            GPU_GRANT_VARS,
            [
                "CUDA_VISIBLE_DEVICES",
                "ROCR_VISIBLE_DEVICES",
                "HIP_VISIBLE_DEVICES",
                "GPU_DEVICE_ORDINAL",
                "ZE_AFFINITY_MASK",
                "SLURM_STEP_GPUS",
                "SLURM_JOB_GPUS",
                "SLURM_GPUS_ON_NODE",
                "NVIDIA_VISIBLE_DEVICES",
            ]
        );
    }
}
