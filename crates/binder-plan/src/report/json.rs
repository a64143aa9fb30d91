//! The JSON form of `--dry-run`.
//!
//! # Format
//!
//! One object per rank per line (JSON Lines), SEMANTICS §7, for example:
//!
//! ```json
//! {"local_rank":0,"local_size":2,"unit":"core","rule":"implicit","pattern":"packed","reverse":false,"locality":"any","cpus":[0,1,2,3],"cpulist":"0-3","cpuset":"0x0000000f","objects":["core:0","core:1"],"objects_physical":["core:0","core:1"],"gpus":[],"gpu_busids":[],"gpu_ids":[],"gpu_local":[],"bind_width":null,"slot":null,"spans":{"package":1,"numa":1,"l3":1},"nics":[],"ge_topology":"NSXccCC","env":{"BINDER_CPUS":"0-3","BINDER_CPUSET":"0x0000000f","BINDER_LOCAL_RANK":"0","BINDER_LOCAL_SIZE":"2","BINDER_UNIT":"core"},"membind":null,"mempolicy":null,"rank_rule":null}
//! ```
//!
//! `cpus` are OS PU numbers, `cpuset` is hwloc's bitmap string, `objects` are the unit
//! objects by logical index and `objects_physical` the same by OS index, `gpu_local` says
//! per GPU whether it is near the task's CPUs, `spans` counts the packages, NUMA nodes
//! and L3 caches the cpuset touches (SEMANTICS §10), `ge_topology` is the node's Grid
//! Engine string with the rank's units lowercase (SEMANTICS §12), `env` the variables binder
//! would set (what a launch sets, less `BINDER_JOB`; keys sorted) and `membind` the NUMA nodes memory
//! would be bound to. Fields are only ever added;
//! changing one needs a CHANGELOG entry.

use std::io::{self, Write};

use serde::Serialize;

use super::Preview;
use crate::distribute::Plan;
use binder_core::cpulist::{cpu_list, hwloc_mask};

/// One rank's line. A view of the plan kept separate so internal renames cannot change
/// the output format.
#[derive(Debug, Serialize)]
pub struct TaskRecord {
    /// Local rank.
    pub local_rank: usize,
    /// Number of local tasks.
    pub local_size: usize,
    /// `core`, `pu` or `none`.
    pub unit: String,
    /// `explicit`, `implicit` or `default`.
    pub rule: String,
    /// `packed`, `scatter` or `interleave`.
    pub pattern: String,
    /// Whether the pool was reversed.
    pub reverse: bool,
    /// `any`, `gpu-local` or `gpu-remote`.
    pub locality: String,
    /// OS PU numbers, ascending.
    pub cpus: Vec<usize>,
    /// The same as a range list.
    pub cpulist: String,
    /// hwloc bitmap string.
    pub cpuset: String,
    /// Unit objects, logical indexes.
    pub objects: Vec<String>,
    /// Unit objects, OS indexes.
    pub objects_physical: Vec<String>,
    /// GPU indexes (PCI bus order).
    pub gpus: Vec<usize>,
    /// The GPUs' PCI bus ids.
    pub gpu_busids: Vec<String>,
    /// The GPUs as the task's runtime variable names them (`CUDA_VISIBLE_DEVICES`,
    /// `ROCR_VISIBLE_DEVICES`, `ZE_AFFINITY_MASK` entries: ROCm's own index for AMD,
    /// `GPU-<uuid>` with `gpu-ids: uuid`).
    pub gpu_ids: Vec<String>,
    /// For each GPU, whether its locality shares a PU with the task's cpuset (false for
    /// an unbound task).
    pub gpu_local: Vec<bool>,
    /// `bind: package|numa|…` width, or null.
    pub bind_width: Option<String>,
    /// The slot the task got (position in selection order), or null without slots.
    pub slot: Option<usize>,
    /// How many packages, NUMA nodes (with CPUs) and L3 caches the cpuset touches.
    pub spans: SpansRecord,
    /// The nearest NICs' names (OS devices, else bus ids), when the shape names a NIC.
    pub nics: Vec<String>,
    /// The node's Grid Engine topology string with this rank's units lowercase and all
    /// else uppercase (SEMANTICS §12).
    pub ge_topology: String,
    /// The variables binder would set for the task (`BINDER_JOB` only exists at launch).
    pub env: serde_json::Map<String, serde_json::Value>,
    /// The NUMA nodes (OS numbers) its memory policy would use (`membind:`), or null.
    pub membind: Option<Vec<usize>>,
    /// That policy (`local`, `interleave`, `preferred`), or null.
    pub mempolicy: Option<binder_core::view::MemPolicy>,
    /// The `ranks:` rule that placed this rank (its key, `"0"` or `"1-2"`), or null.
    pub rank_rule: Option<String>,
}

/// `spans` of one rank.
#[derive(Debug, Serialize)]
pub struct SpansRecord {
    /// Packages touched.
    pub package: usize,
    /// NUMA nodes touched.
    pub numa: usize,
    /// L3 caches touched.
    pub l3: usize,
}

impl TaskRecord {
    /// The record of `rank` in `plan`.
    pub fn new(plan: &Plan, rank: usize) -> TaskRecord {
        let task = &plan.tasks[rank];
        let cpus = task.cpuset.to_vec();
        let choice = plan.unit_of(rank);
        let unit = choice.unit.to_string();
        TaskRecord {
            local_rank: rank,
            local_size: plan.tasks.len(),
            unit: unit.clone(),
            rule: choice.rule.to_string(),
            pattern: plan.pattern.to_string(),
            reverse: plan.reverse,
            locality: plan.locality.to_string(),
            cpulist: cpu_list(&cpus),
            cpuset: hwloc_mask(&cpus),
            cpus,
            objects: task
                .units
                .iter()
                .map(|u| format!("{unit}:{}", u.logical))
                .collect(),
            objects_physical: task
                .units
                .iter()
                .map(|u| {
                    u.os.map_or_else(|| format!("{unit}:?"), |os| format!("{unit}:{os}"))
                })
                .collect(),
            gpus: task.gpus.iter().map(|&g| plan.gpus[g].number).collect(),
            gpu_busids: task
                .gpus
                .iter()
                .map(|&g| plan.gpus[g].busid.clone())
                .collect(),
            gpu_ids: task
                .gpus
                .iter()
                .map(|&g| plan.gpus[g].export.clone())
                .collect(),
            gpu_local: task
                .gpus
                .iter()
                .map(|&g| plan.gpus[g].locality.intersects(&task.cpuset))
                .collect(),
            bind_width: choice.width.map(|w| w.hwloc_name().to_owned()),
            slot: task.slot,
            spans: SpansRecord {
                package: task.spans.package,
                numa: task.spans.numa,
                l3: task.spans.l3,
            },
            nics: task
                .nics
                .iter()
                .flat_map(|&i| plan.nics[i].names())
                .collect(),
            ge_topology: task.ge_topology.clone(),
            env: serde_json::Map::new(),
            membind: None,
            mempolicy: None,
            rank_rule: task.rule.clone(),
        }
    }
}

pub(super) fn render(
    plan: &Plan,
    ranks: &[usize],
    previews: &[Preview],
    out: &mut impl Write,
) -> io::Result<()> {
    for &rank in ranks {
        let mut record = TaskRecord::new(plan, rank);
        if let Some(p) = previews.get(rank) {
            record.env = p
                .env
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect();
            record.membind.clone_from(&p.mems);
            record.mempolicy = p.mempolicy;
        }
        serde_json::to_writer(&mut *out, &record)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}
