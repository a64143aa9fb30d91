//! The shape's data model: the structs serde reads a shape into, and the questions later
//! stages ask of a parsed shape.

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU32;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::resource::reverse_flag;
use super::{
    Bind, CoreKind, GpuIds, Membind, Memory, NumaBinding, ObjType, Pack, Pattern, Resource,
};

/// A placement request: binding options plus the tree of resources to draw CPUs from.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    /// Format version; only 1 exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<Version>,
    /// How the selected resources are turned into per-task bindings.
    #[serde(default, skip_serializing_if = "Options::is_default")]
    pub options: Options,
    /// The resources to select, matched greedily in hwloc logical order. At least one
    /// item; may be left out when `options.ge` places the tasks.
    #[serde(
        default,
        deserialize_with = "non_empty_resources",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<Resource>,
    /// Per-rank rules: local rank lists and what those ranks get instead of the plan
    /// (`0: {bind: none}`, `"1-2": {resources: [...]}`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(schema_with = "super::ranks::ranks_schema")]
    pub ranks: super::Ranks,
}

/// Options that apply to the whole shape.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Options {
    /// Binding unit (core, pu, process = pu, none) or GPU locality (gpu-local, gpu-remote).
    /// Without it the unit is the finest of core/pu named in `resources`, else core.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<Bind>,
    /// How the pool of units is dealt to the local tasks (default packed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    /// Reverse the pool before dealing it (default false).
    #[serde(
        default,
        deserialize_with = "reverse_flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub reverse: Option<bool>,
    /// GPUs given to each task: task r gets GPUs g·r … g·r+g−1 in PCI bus order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_task: Option<NonZeroU32>,
    /// Also export OMP_NUM_THREADS, OMP_PLACES and OMP_PROC_BIND for the task.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub openmp: bool,
    /// `local` binds memory to the NUMA nodes of the task's CPUs; `none` leaves it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membind: Option<Membind>,
    /// Which NUMA nodes `membind` uses: `near` (default), `hbm`, `dram`, `cxl`, `all`,
    /// or the nodes' kernel numbers (SEMANTICS §11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// Only cores of this kind (hwloc's CPU kinds; without kinds every core is a
    /// performance core): the default for `core` and `pu` items (SEMANTICS §12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<CoreKind>,
    /// Units no task gets: `first-core`, `first-core-per-socket`, or locations such as
    /// `core:0`, `package:1.core:0`, `pu:0-1` (logical indexes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reserve: Vec<String>,
    /// A Grid Engine request in qsub's words (`-bunit C -bamount 2 -btype host`, or
    /// `-binding linear:4`); it places the tasks instead of `resources`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ge: Option<String>,
    /// How CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES and ZE_AFFINITY_MASK name the
    /// task's GPUs: `index` (default) or `uuid` (`GPU-<uuid>`, SEMANTICS §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_ids: Option<GpuIds>,
    /// On a node other jobs use: `spread`, `fill` (default) or `exclusive` (SEMANTICS §13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<Pack>,
    /// When too few units are free, take units other jobs hold instead of refusing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share: bool,
    /// More tasks than units: deal the units again from the first, so that tasks share
    /// them (Open MPI's `--oversubscribe`, Slurm's `--overcommit`); without it, refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oversubscribe: bool,
    /// PyTorch's NUMA binding (`torchrun --numa-binding`): local rank r takes the job's
    /// GPU r and CPUs by that GPU's NUMA node: `node`, `socket`, `exclusive` or
    /// `core-complex` (SEMANTICS §9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_binding: Option<NumaBinding>,
}

impl Options {
    fn is_default(&self) -> bool {
        *self == Options::default()
    }
}

/// The shape format version. Only version 1 exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version;

fn non_empty_resources<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Resource>, D::Error> {
    struct NonEmpty;
    impl<'de> Visitor<'de> for NonEmpty {
        type Value = Vec<Resource>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of resource items")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element()? {
                items.push(item);
            }
            if items.is_empty() {
                return Err(de::Error::custom(
                    "`resources` is empty; list at least one item, for example `- type: core`",
                ));
            }
            Ok(items)
        }
    }
    d.deserialize_seq(NonEmpty)
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match i64::deserialize(d)? {
            1 => Ok(Version),
            v => Err(de::Error::custom(format!(
                "unsupported shape `version: {v}`; this binder reads version 1 (or leave `version` out)"
            ))),
        }
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(1)
    }
}

impl JsonSchema for Version {
    fn schema_name() -> Cow<'static, str> {
        "Version".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"description": "Shape format version; only 1 exists.", "const": 1})
    }
}

impl Shape {
    /// The pattern in force: the one set in `options` or on any item, else packed.
    pub fn pattern(&self) -> Pattern {
        self.options
            .pattern
            .or_else(|| first_in_tree(&self.resources, &|r| r.pattern))
            .unwrap_or_default()
    }

    /// Whether the pool is reversed before dealing.
    pub fn reverse(&self) -> bool {
        self.options
            .reverse
            .or_else(|| first_in_tree(&self.resources, &|r| r.reverse))
            .unwrap_or(false)
    }

    /// Every item of the tree, parents before children, in document order.
    pub fn items(&self) -> Vec<&Resource> {
        fn walk<'a>(items: &'a [Resource], out: &mut Vec<&'a Resource>) {
            for item in items {
                out.push(item);
                walk(&item.with, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.resources, &mut out);
        out
    }

    /// Whether planning this shape needs the node's GPUs (and so I/O discovery).
    pub fn needs_gpus(&self) -> bool {
        matches!(self.options.bind, Some(Bind::GpuLocal | Bind::GpuRemote))
            || self.options.gpus_per_task.is_some()
            || self.options.numa_binding.is_some()
            || self.items().iter().any(|r| r.kind == ObjType::Gpu)
    }

    /// Whether the shape names a NIC (so NICs are discovered and `BINDER_NICS` is set).
    pub fn needs_nics(&self) -> bool {
        self.items().iter().any(|r| r.kind == ObjType::Nic)
    }

    /// Whether planning needs I/O discovery (GPUs or NICs).
    pub fn needs_io(&self) -> bool {
        self.needs_gpus() || self.needs_nics()
    }

    /// Whether the tree has `slot` items (SEMANTICS §10).
    pub fn has_slots(&self) -> bool {
        self.items().iter().any(|r| r.kind == ObjType::Slot)
    }
}

fn first_in_tree<T>(items: &[Resource], get: &dyn Fn(&Resource) -> Option<T>) -> Option<T> {
    items
        .iter()
        .find_map(|r| get(r).or_else(|| first_in_tree(&r.with, get)))
}
