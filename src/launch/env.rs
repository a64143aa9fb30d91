//! The environment binder adds for the task: what it was given (`BINDER_*`), OpenMP's
//! places, and the GPU runtimes' visible-device lists. Pure: the caller execs with it.

use crate::distribute::Plan;
use crate::gpu::Vendor;
use crate::report::{cpu_list, cpus_of, hwloc_mask};

use crate::identity::Identity;

/// The `BINDER_*` variables binder may set; those it does not set for a task are removed
/// from the task's environment, so nothing stale from an outer binder gets through.
pub const OWN: [&str; 7] = [
    "BINDER_LOCAL_RANK",
    "BINDER_LOCAL_SIZE",
    "BINDER_UNIT",
    "BINDER_CPUS",
    "BINDER_CPUSET",
    "BINDER_GPUS",
    "BINDER_NICS",
];

/// The variables to set for local rank `identity.rank`, in a stable order. `get` reads the
/// inherited environment, so that a user's own `OMP_NUM_THREADS` is kept.
pub fn task_env(
    plan: &Plan,
    identity: &Identity,
    openmp: bool,
    get: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let task = &plan.tasks[identity.rank];
    let mut env = vec![
        ("BINDER_LOCAL_RANK".to_owned(), identity.rank.to_string()),
        ("BINDER_LOCAL_SIZE".to_owned(), identity.size.to_string()),
        ("BINDER_UNIT".to_owned(), plan.unit.unit.to_string()),
    ];
    if !task.units.is_empty() {
        let cpus = cpus_of(&task.cpuset);
        env.push(("BINDER_CPUS".into(), cpu_list(&cpus)));
        env.push(("BINDER_CPUSET".into(), hwloc_mask(&cpus)));
        if openmp {
            if get("OMP_NUM_THREADS").is_none() {
                env.push(("OMP_NUM_THREADS".into(), task.units.len().to_string()));
            }
            let places: Vec<String> = task
                .units
                .iter()
                .map(|u| {
                    let pus: Vec<String> = u.pus.iter().map(ToString::to_string).collect();
                    format!("{{{}}}", pus.join(","))
                })
                .collect();
            env.push(("OMP_PLACES".into(), places.join(",")));
            env.push(("OMP_PROC_BIND".into(), "close".into()));
        }
    }
    if !task.gpus.is_empty() {
        let list = |indices: &[usize]| {
            indices
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        env.push(("BINDER_GPUS".into(), list(&task.gpus)));
        let of = |vendor: Vendor| -> Vec<usize> {
            task.gpus
                .iter()
                .map(|&g| &plan.gpus[g])
                .filter(|gpu| gpu.vendor == vendor)
                .map(|gpu| gpu.vendor_index)
                .collect()
        };
        let nvidia = of(Vendor::Nvidia);
        if !nvidia.is_empty() {
            env.push(("CUDA_VISIBLE_DEVICES".into(), list(&nvidia)));
            env.push(("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()));
        }
        let amd = of(Vendor::Amd);
        if !amd.is_empty() {
            env.push(("ROCR_VISIBLE_DEVICES".into(), list(&amd)));
        }
        let intel = of(Vendor::Intel);
        if !intel.is_empty() {
            env.push(("ZE_AFFINITY_MASK".into(), list(&intel)));
        }
    }
    if !task.nics.is_empty() {
        let names: Vec<String> = task
            .nics
            .iter()
            .flat_map(|&i| plan.nics[i].names())
            .collect();
        env.push(("BINDER_NICS".into(), names.join(",")));
    }
    env
}
