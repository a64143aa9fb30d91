//! The persisted per-rank view: what launching one task needs from a plan, stored by the
//! node cache and recorded by the node ledger, under one format version.

/// The version of everything binder persists about a plan (cache entries, ledger plans
/// and claims): bump it when [`TaskView`], a cache entry or a ledger file changes. A
/// reader ignores another version's files rather than misread them.
pub const FORMAT: u32 = 10;

/// What launching one task needs from the plan: small, serializable, and the same
/// whether it comes from a fresh plan or from the node cache ([`crate::cache`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskView {
    /// `core`, `pu` or `none`.
    pub unit: String,
    /// Its CPUs (OS numbers, ascending); empty for unit none.
    pub cpus: Vec<usize>,
    /// One OpenMP place per unit: the unit's PUs.
    pub places: Vec<Vec<usize>>,
    /// Its GPUs.
    pub gpus: Vec<GpuView>,
    /// Its nearest NICs' names.
    pub nics: Vec<String>,
    /// The communication libraries' NIC variables for those NICs, in
    /// `launch::env::NIC_VARS` order (`UCX_NET_DEVICES=mlx5_0:1`).
    #[serde(default)]
    pub nic_vars: Vec<(String, String)>,
    /// The `--report` text after `[launcher] `.
    pub binding: String,
    /// Grid Engine's variables (`GCS_BINDING`, `SGE_BINDING`, ...) when a request placed
    /// the task.
    #[serde(default)]
    pub ge_env: Vec<(String, String)>,
    /// False for `-binstance env`: the task is told its CPUs but not bound to them.
    #[serde(default = "yes")]
    pub apply: bool,
    /// The rank's `openmp` option (a per-rank rule may differ from the shape's), so a
    /// launch from the node cache or the ledger needs no shape parsed.
    #[serde(default)]
    pub openmp: bool,
    /// The rank's memory policy (`membind: local|interleave|preferred`): memory binding
    /// needs the topology, so the `binder` executable hands such a launch over.
    #[serde(default)]
    pub membind: Option<MemPolicy>,
    /// Which NUMA nodes `membind` uses (`memory:`; the task's own by default).
    #[serde(default, skip_serializing_if = "MemNodes::is_near")]
    pub memory: MemNodes,
}

/// Which NUMA nodes a task's memory policy uses (`memory:`, SEMANTICS §11), by hwloc's
/// node subtypes (hwloc names a node `DRAM`, `HBM`, `MCDRAM`, `CXL-DRAM`, ... where it
/// can tell).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemNodes {
    /// The nodes that hold the task's CPUs, whatever their kind (the default).
    #[default]
    Near,
    /// Of those, the high-bandwidth ones (subtype `HBM` or `MCDRAM`).
    Hbm,
    /// Of those, the ordinary ones (subtype `DRAM`, or none given).
    Dram,
    /// Of those, CXL-attached memory (subtype `CXL-DRAM`, `CXL-NVM`).
    Cxl,
    /// Every NUMA node of the node (`numactl --interleave=all`).
    All,
    /// These nodes, by the kernel's numbers (`numactl --membind=1`).
    Os(Vec<usize>),
}

impl MemNodes {
    /// Whether this is the default, the task's own nodes.
    pub fn is_near(&self) -> bool {
        *self == MemNodes::Near
    }

    /// The shape's word for it (`hbm`; a list as `1,3-4`).
    pub fn name(&self) -> String {
        match self {
            MemNodes::Near => "near".into(),
            MemNodes::Hbm => "hbm".into(),
            MemNodes::Dram => "dram".into(),
            MemNodes::Cxl => "cxl".into(),
            MemNodes::All => "all".into(),
            MemNodes::Os(list) => crate::cpulist::cpu_list(list),
        }
    }
}

/// A task's memory policy (SEMANTICS §11), applied through hwloc on the NUMA nodes of the
/// task's CPUs (of its inherited CPUs under `bind: none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemPolicy {
    /// Allocate only there (strict `MPOL_BIND`, `numactl --membind`).
    Local,
    /// Spread pages round robin over them (`MPOL_INTERLEAVE`, `numactl --interleave`).
    Interleave,
    /// Prefer the first of them and fall back to others when it is full
    /// (`MPOL_PREFERRED`, `numactl --preferred`).
    Preferred,
}

impl MemPolicy {
    /// The shape's word for it.
    pub fn name(self) -> &'static str {
        match self {
            MemPolicy::Local => "local",
            MemPolicy::Interleave => "interleave",
            MemPolicy::Preferred => "preferred",
        }
    }
}

fn yes() -> bool {
    true
}

/// One GPU of a task, as launching it and recording it in the ledger need it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuView {
    /// binder's number (`gpu:N`, PCI order among the node's GPUs).
    pub number: usize,
    /// PCI bus id: how the ledger names it, whatever a runtime's numbering.
    pub busid: String,
    /// `nvidia`, `amd` or `intel`.
    pub vendor: String,
    /// How its runtime's variable lists it (SEMANTICS §9).
    pub export: String,
}

impl TaskView {
    /// Whether the task is bound at all (unit `none` is not).
    pub fn is_bound(&self) -> bool {
        !self.places.is_empty()
    }
}

pub use crate::vendor::Vendor;

/// A job's packing policy as the cache and the ledger record it (the shape's `pack`,
/// SEMANTICS §13), written as the shape spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Packing {
    /// The freest containers first.
    Spread,
    /// Partly used containers first, keeping free ones whole. The default.
    #[default]
    Fill,
    /// Only whole free containers, kept from other jobs.
    Exclusive,
}
