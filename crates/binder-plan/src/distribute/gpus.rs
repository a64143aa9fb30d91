//! GPUs under `gpu-local`/`gpu-remote` (SEMANTICS §9): enough of them for the tasks, each
//! task's GPUs, and the CPUs near them (or, for `gpu-remote`, the nearest NUMA node
//! without them).

use crate::cpuset::CpuSet;

use super::{devices, DistributeError, Request};
use crate::gpu::Gpu;
use crate::shape::ObjType;
use crate::topology::Topology;

pub(super) fn too_few_gpus(
    topology: &Topology,
    request: &Request,
    have: usize,
    n: usize,
    g: usize,
    origin: &str,
) -> DistributeError {
    let hint = if let Some(note) = &request.gpus_note {
        format!(" {note}")
    } else if have == 0 {
        "; binder finds GPUs as PCI devices, so the topology must include I/O (`lstopo --of xml` does by default)".to_owned()
    } else {
        "; lower `gpus-per-task` or run fewer tasks per node".to_owned()
    };
    DistributeError::TooFewGpus {
        origin: origin.to_owned(),
        tasks: n,
        per_task: g,
        need: n.saturating_mul(g),
        have,
        source_desc: topology.source().to_string(),
        hint,
    }
}

pub(super) fn check_gpu_count(
    topology: &Topology,
    request: &Request,
    have: usize,
    n: usize,
    g: usize,
    origin: &str,
) -> Result<(), DistributeError> {
    match n.checked_mul(g) {
        Some(need) if need <= have => Ok(()),
        _ => Err(too_few_gpus(topology, request, have, n, g, origin)),
    }
}

/// Each task's GPUs under `gpu-local`/`gpu-remote`: `g` consecutive GPUs per task in bus
/// order; without `g`, the GPUs are shared out like CPUs (`G div n` each, or consecutive
/// tasks sharing one GPU when there are more tasks than GPUs).
pub(super) fn assign_gpus(
    topology: &Topology,
    gpus: &[Gpu],
    request: &Request,
    n: usize,
    origin: &str,
) -> Result<Vec<Vec<usize>>, DistributeError> {
    let have = gpus.len();
    match request.gpus_per_task {
        Some(g) => {
            check_gpu_count(topology, request, have, n, g, origin)?;
            Ok((0..n).map(|r| (g * r..g * r + g).collect()).collect())
        }
        None if have == 0 => Err(DistributeError::TooFewGpus {
            origin: origin.to_owned(),
            tasks: n,
            per_task: 1,
            need: n,
            have,
            source_desc: topology.source().to_string(),
            hint: match &request.gpus_note {
                Some(note) => format!(" {note}"),
                None => "; `gpu-local`/`gpu-remote` need GPUs in the topology".to_owned(),
            },
        }),
        None if n <= have => {
            let g = have / n;
            Ok((0..n).map(|r| (g * r..g * r + g).collect()).collect())
        }
        None => Ok((0..n).map(|r| vec![r * have / n]).collect()),
    }
}

/// The CPUs near a task's GPUs, and how to name them in messages.
pub(super) fn local_cpus(gpus: &[Gpu], mine: &[usize]) -> (Option<CpuSet>, String) {
    let mut set = CpuSet::new();
    let mut names = Vec::new();
    for &g in mine {
        set |= &gpus[g].locality;
        names.push(format!("gpu:{} ({})", gpus[g].number, gpus[g].attached_to));
    }
    (Some(set), format!(" near {}", names.join(", ")))
}

/// The CPUs of the nearest NUMA node that has none of the task's GPUs.
pub(super) fn remote_cpus(
    topology: &Topology,
    gpus: &[Gpu],
    mine: &[usize],
    origin: &str,
) -> Result<(Option<CpuSet>, String), DistributeError> {
    let (near, _) = local_cpus(gpus, mine);
    let first = mine.first().map_or(0, |&g| gpus[g].number);
    match devices::remote_numa(topology, &near.unwrap_or_default()) {
        Some(numa) => Ok((
            Some(crate::topology::cpus(numa)),
            format!(" of {} (remote from gpu:{first})", topology.label(numa)),
        )),
        None => Err(DistributeError::NoRemoteNuma {
            origin: origin.to_owned(),
            gpu: first,
            numa: topology.objects(ObjType::Numa).len(),
            source_desc: topology.source().to_string(),
        }),
    }
}
