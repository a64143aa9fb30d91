//! A GPU as planning sees it, apart from how it is discovered (which needs the topology,
//! `super::discover`), so that the topology can hold a job's [`super::Grant`].

use crate::cpuset::CpuSet;

use super::Vendor;

/// One GPU (or GPU partition) of the node.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// Position in the list the planner deals from (the GPUs this job may have).
    pub index: usize,
    /// Position in PCI bus order among all the node's GPUs: binder's GPU number
    /// (`gpu:N`, `BINDER_GPUS`), the same whichever of them a job may have.
    pub number: usize,
    /// The number its runtime uses in CUDA_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES /
    /// ZE_AFFINITY_MASK: position in PCI bus order among this vendor's GPUs the process
    /// can open (the node's, or a container's), except for AMD GPUs whose ROCm index
    /// hwloc reports (`rsmiN`, `openclXdN`).
    pub vendor_index: usize,
    /// The same over every GPU of the node, before a container's cut
    /// (`NVIDIA_VISIBLE_DEVICES`, the device files present): the index Slurm's lists and
    /// the container variable name a GPU by.
    pub node_index: usize,
    /// PCI bus id, `domain:bus:device.function`.
    pub busid: String,
    /// Who made it.
    pub vendor: Vendor,
    /// Marketing name from the OS device or PCI database, else `vendor:device` in hex.
    pub model: String,
    /// The OS device naming this GPU (`cuda0`, `rsmi3`), when the topology has one.
    pub os_name: Option<String>,
    /// `GPU-<uuid>` from hwloc's `NVIDIAUUID` / `AMDUUID`, when the topology has it.
    pub uuid: Option<String>,
    /// How the task's runtime variable names it: the inherited entry it matched
    /// (SEMANTICS §9: never renumbered), else [`Gpu::vendor_index`].
    pub export: String,
    /// The CPUs near it: the cpuset of its first non-I/O ancestor.
    pub locality: CpuSet,
    /// Logical index of its first non-I/O ancestor, as `type:index` (`package:1`).
    pub attached_to: String,
}

impl Gpu {
    /// Whether it is an NVIDIA MIG instance (an inherited `MIG-…` entry), which shares
    /// its parent GPU's bus id and locality.
    pub fn is_mig(&self) -> bool {
        super::mig::is_mig(&self.export)
    }

    /// What tells it apart from every other GPU of the node, in claims and merges: the bus
    /// id, and for a MIG instance the bus id and its entry (`0000:4e:00.0/MIG-…`), so
    /// that jobs given different instances of one GPU do not take each other's.
    pub fn claim_id(&self) -> String {
        if self.is_mig() {
            format!("{}/{}", self.busid, self.export)
        } else {
            self.busid.clone()
        }
    }

    /// How the task's runtime will name it: `cuda:0`, `rocr:2`, `ze:0`, or with a UUID
    /// `cuda:GPU-…` (the runtime's variable entry, with the runtime).
    pub(crate) fn runtime_name(&self) -> String {
        format!("{}:{}", self.vendor.row().runtime, self.export)
    }
}
