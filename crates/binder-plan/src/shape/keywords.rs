//! The keyword enums a shape names (object types, bindings, patterns, memory policies),
//! each with every spelling it accepts, for serde, the schema and did-you-mean hints.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};

use super::validate::{self, Keyword};

/// Object types a request can name (SEMANTICS §1 alias table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjType {
    /// The whole machine.
    Machine,
    /// A processor package (socket).
    Package,
    /// A die inside a package.
    Die,
    /// An hwloc Group (any depth).
    Group,
    /// A NUMA node that has CPUs.
    Numa,
    /// A level-3 cache.
    L3,
    /// A level-2 cache.
    L2,
    /// A level-1 data cache.
    L1,
    /// A core.
    Core,
    /// A processing unit (hardware thread).
    Pu,
    /// A GPU, found through its PCI device (SEMANTICS §9).
    Gpu,
    /// A network interface, found through its PCI device (SEMANTICS §11).
    Nic,
    /// One task's share (SEMANTICS §10): no hardware object, a part of its parent.
    Slot,
}

impl ObjType {
    /// The name hwloc-calc uses for this type in locations such as `core:3`.
    pub(crate) fn hwloc_name(self) -> &'static str {
        match self {
            ObjType::Machine => "machine",
            ObjType::Package => "package",
            ObjType::Die => "die",
            ObjType::Group => "group",
            ObjType::Numa => "numa",
            ObjType::L3 => "l3cache",
            ObjType::L2 => "l2cache",
            ObjType::L1 => "l1cache",
            ObjType::Core => "core",
            ObjType::Pu => "pu",
            ObjType::Gpu => "gpu",
            ObjType::Nic => "nic",
            ObjType::Slot => "slot",
        }
    }

    /// Parses a type name with the shape's spellings (`socket`, `l3`, `thread`, ...), or says
    /// what was expected, with the nearest spelling.
    pub fn parse(word: &str) -> Result<ObjType, String> {
        validate::keyword(word)
    }

    /// Whether this is a CPU-side hwloc object (not a device, not a slot).
    pub(crate) fn is_cpu_object(self) -> bool {
        !matches!(self, ObjType::Gpu | ObjType::Nic | ObjType::Slot)
    }
}

impl Keyword for ObjType {
    const WHAT: &'static str = "object type";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("machine", ObjType::Machine),
        ("node", ObjType::Machine),
        ("package", ObjType::Package),
        ("socket", ObjType::Package),
        ("die", ObjType::Die),
        ("group", ObjType::Group),
        ("numa", ObjType::Numa),
        ("numanode", ObjType::Numa),
        ("l3cache", ObjType::L3),
        ("l3", ObjType::L3),
        ("l2cache", ObjType::L2),
        ("l2", ObjType::L2),
        ("l1cache", ObjType::L1),
        ("l1", ObjType::L1),
        ("core", ObjType::Core),
        ("pu", ObjType::Pu),
        ("process", ObjType::Pu),
        ("thread", ObjType::Pu),
        ("hwthread", ObjType::Pu),
        ("gpu", ObjType::Gpu),
        ("nic", ObjType::Nic),
        ("slot", ObjType::Slot),
        ("task", ObjType::Slot),
    ];
}

/// What `options.bind` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// Bind each task to whole cores.
    Core,
    /// Bind each task to single PUs (hardware threads).
    Pu,
    /// Do not bind; the task keeps the affinity it started with.
    None,
    /// Restrict each task to the CPUs near its GPUs.
    GpuLocal,
    /// Put each task on the nearest NUMA node that has none of its GPUs.
    GpuRemote,
    /// Widen each task's cpuset to the whole objects of this type its units touch
    /// (Open MPI `--bind-to package|numa|l3cache|l2cache`, SEMANTICS §11).
    Width(ObjType),
    /// Slurm's automatic binding (`task/affinity` without `--cpu-bind`, `dist_tasks.c`):
    /// the tasks' CPUs as dealt, widened to whole sockets when the tasks' CPUs are as many
    /// as the node's whole sockets, to whole cores when as many as its whole cores, kept
    /// when as many as its PUs, else every task the whole allocation.
    SlurmAuto,
}

impl Keyword for Bind {
    const WHAT: &'static str = "binding";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("core", Bind::Core),
        ("pu", Bind::Pu),
        ("process", Bind::Pu),
        ("none", Bind::None),
        ("gpu-local", Bind::GpuLocal),
        ("gpu-remote", Bind::GpuRemote),
        ("slurm-auto", Bind::SlurmAuto),
        ("package", Bind::Width(ObjType::Package)),
        ("socket", Bind::Width(ObjType::Package)),
        ("die", Bind::Width(ObjType::Die)),
        ("numa", Bind::Width(ObjType::Numa)),
        ("numanode", Bind::Width(ObjType::Numa)),
        ("l3cache", Bind::Width(ObjType::L3)),
        ("l3", Bind::Width(ObjType::L3)),
        ("l2cache", Bind::Width(ObjType::L2)),
        ("l2", Bind::Width(ObjType::L2)),
    ];
}

/// How the pool of units is dealt to the local tasks (SEMANTICS §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pattern {
    /// Consecutive blocks of the pool.
    #[default]
    Packed,
    /// Round robin over the pool.
    Scatter,
    /// PUs ordered by their rank inside their core, then packed (unit pu only).
    Interleave,
    /// Slots: each parent takes the share of the tasks round robin would give it (the
    /// counts differ by one at most), and ranks fill one parent before the next: Open
    /// MPI 5's `--map-by package` (FILL ranking). Without slots, as `packed`.
    Balanced,
}

impl Keyword for Pattern {
    const WHAT: &'static str = "pattern";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("packed", Pattern::Packed),
        ("scatter", Pattern::Scatter),
        ("spread", Pattern::Scatter),
        ("interleave", Pattern::Interleave),
        ("balanced", Pattern::Balanced),
        ("fill", Pattern::Balanced),
    ];
}

/// Memory policy for the task, on the NUMA nodes of its CPUs (through hwloc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membind {
    /// Allocate only on the NUMA nodes of the task's cpuset (`numactl --membind`).
    Local,
    /// Interleave pages over them (`numactl --interleave`).
    Interleave,
    /// Prefer the first of them, falling back to others (`numactl --preferred`).
    Preferred,
    /// Leave memory policy as inherited.
    None,
}

impl Keyword for Membind {
    const WHAT: &'static str = "membind policy";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("local", Membind::Local),
        ("interleave", Membind::Interleave),
        ("preferred", Membind::Preferred),
        ("none", Membind::None),
    ];
}

impl Membind {
    /// The policy a launch applies, `None` for `none`.
    pub fn policy(self) -> Option<binder_core::view::MemPolicy> {
        use binder_core::view::MemPolicy;
        match self {
            Membind::Local => Some(MemPolicy::Local),
            Membind::Interleave => Some(MemPolicy::Interleave),
            Membind::Preferred => Some(MemPolicy::Preferred),
            Membind::None => None,
        }
    }
}

/// Which cores (SEMANTICS §12): hwloc's most performant CPU kind, or the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreKind {
    /// Performance cores (Intel P-cores, Arm big cores; every core on a uniform node).
    Performance,
    /// Efficiency cores (Intel E-cores, Arm LITTLE cores).
    Efficiency,
    /// `options.kind` only: every core, each kind dealt separately so that every task gets
    /// as many units of each kind as the others (SEMANTICS §11).
    Balanced,
}

impl Keyword for CoreKind {
    const WHAT: &'static str = "core kind";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("performance", CoreKind::Performance),
        ("p", CoreKind::Performance),
        ("efficiency", CoreKind::Efficiency),
        ("e", CoreKind::Efficiency),
        ("balanced", CoreKind::Balanced),
    ];
}

/// How a job takes units on a node other jobs use (SEMANTICS §13; the INFN packing
/// paper's policies). Containers are the node's packages (else NUMA nodes, else L3s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pack {
    /// Prefer the freest containers (OCS `-bsort S`; INFN "none").
    Spread,
    /// Prefer containers other jobs already use, keeping free ones whole (OCS `-bsort s`;
    /// INFN "relaxed"). The default.
    #[default]
    Fill,
    /// Only whole free containers, and keep other jobs out of them (OCS `-bstart S -bstop
    /// S`; INFN "exclusive").
    Exclusive,
}

impl From<Pack> for binder_core::view::Packing {
    fn from(pack: Pack) -> Self {
        match pack {
            Pack::Spread => Self::Spread,
            Pack::Fill => Self::Fill,
            Pack::Exclusive => Self::Exclusive,
        }
    }
}

impl From<binder_core::view::Packing> for Pack {
    fn from(pack: binder_core::view::Packing) -> Self {
        use binder_core::view::Packing;
        match pack {
            Packing::Spread => Pack::Spread,
            Packing::Fill => Pack::Fill,
            Packing::Exclusive => Pack::Exclusive,
        }
    }
}

impl Keyword for Pack {
    const WHAT: &'static str = "packing policy";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("spread", Pack::Spread),
        ("fill", Pack::Fill),
        ("exclusive", Pack::Exclusive),
    ];
}

/// How a task's GPU variables name its GPUs (SEMANTICS §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GpuIds {
    /// The runtime's index (CUDA and Level Zero: PCI order; ROCm: its own). The default.
    #[default]
    Index,
    /// `GPU-<uuid>` from hwloc's NVIDIAUUID / AMDUUID, where the topology has it.
    Uuid,
}

impl Keyword for GpuIds {
    const WHAT: &'static str = "GPU id form";
    const SPELLINGS: &'static [(&'static str, Self)] =
        &[("index", GpuIds::Index), ("uuid", GpuIds::Uuid)];
}

/// PyTorch's NUMA binding modes (`torchrun --numa-binding`, `torch/numa/binding.py`):
/// local rank `r` takes the job's GPU `r` and CPUs by the GPU's NUMA node (SEMANTICS §9,
/// ML launchers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumaBinding {
    /// Every allowed CPU of the GPU's NUMA node.
    Node,
    /// Every allowed CPU of the package holding that node.
    Socket,
    /// That node's physical cores dealt evenly to the node's GPUs in index order, the
    /// lowest indices one extra.
    Exclusive,
    /// One last-level-cache group of that node, most CPUs first, by the GPU's place
    /// among the node's GPUs modulo their count.
    CoreComplex,
}

impl Keyword for NumaBinding {
    const WHAT: &'static str = "NUMA binding mode";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("node", NumaBinding::Node),
        ("socket", NumaBinding::Socket),
        ("exclusive", NumaBinding::Exclusive),
        ("core-complex", NumaBinding::CoreComplex),
    ];
}

/// Serde, schema and display support shared by the keyword enums.
macro_rules! keyword_impls {
    ($($ty:ident: $desc:literal),* $(,)?) => {$(
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                validate::keyword::<Self>(&text).map_err(de::Error::custom)
            }
        }
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.canonical())
            }
        }
        impl JsonSchema for $ty {
            fn schema_name() -> Cow<'static, str> {
                stringify!($ty).into()
            }
            fn json_schema(_: &mut SchemaGenerator) -> Schema {
                let names: Vec<&str> = <$ty as Keyword>::SPELLINGS.iter().map(|(n, _)| *n).collect();
                json_schema!({
                    "description": $desc,
                    "type": "string",
                    "enum": names,
                })
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.canonical())
            }
        }
    )*};
}

keyword_impls!(
    ObjType: "Object type (case-insensitive). Aliases: node = machine, socket = package, numanode = numa, l3/l2/l1 = l3cache/l2cache/l1cache, process/thread/hwthread = pu, task = slot (one task's share).",
    Bind: "Binding unit (core, pu = process, none), binding width (package = socket, die, numa, l3cache, l2cache: the whole objects the task's units touch) or GPU locality (gpu-local, gpu-remote).",
    Membind: "Memory binding policy.",
    CoreKind: "Core kind: performance (p) or efficiency (e), from hwloc's CPU kinds; in `options` also balanced (every task gets as many cores of each kind).",
    GpuIds: "How GPU variables name a task's GPUs: index (each runtime's own numbering; default) or uuid (GPU-<uuid> from hwloc's NVIDIAUUID/AMDUUID where the topology has it).",
    NumaBinding: "PyTorch's NUMA binding (torchrun --numa-binding): local rank r takes the job's GPU r and the CPUs of its NUMA node (node), package (socket), an even share of the node's cores among the node's GPUs (exclusive) or one of the node's L3 groups (core-complex).",
    Pack: "Packing policy on a shared node: spread (freest containers first), fill (partly used containers first; default), exclusive (whole free containers only, kept from other jobs).",
);

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let pattern = validate::keyword::<Self>(&text).map_err(de::Error::custom)?;
        validate::agree_pattern(pattern.canonical()).map_err(de::Error::custom)?;
        Ok(pattern)
    }
}

impl Serialize for Pattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.canonical())
    }
}

impl JsonSchema for Pattern {
    fn schema_name() -> Cow<'static, str> {
        "Pattern".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = Self::SPELLINGS.iter().map(|(n, _)| *n).collect();
        json_schema!({
            "description": "How the pool is dealt to tasks: packed (blocks), scatter = spread (round robin), interleave (every core's first PU first; unit pu only).",
            "type": "string",
            "enum": names,
        })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.canonical())
    }
}
