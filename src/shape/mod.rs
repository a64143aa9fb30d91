//! The shape: what placement the user asked for, as written in YAML (SEMANTICS §1).
//!
//! This stage owns parsing and every check that can point at a line and column. It knows
//! nothing about the machine: whether a shape fits a node is decided by `select` and
//! `distribute`.

mod schema;
mod validate;

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU32;
use std::path::Path;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

pub use schema::{schema_json, SCHEMA_URL_COMMENT};
use validate::Keyword;

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
    /// The resources to select, matched greedily in hwloc logical order. At least one item.
    #[serde(deserialize_with = "non_empty_resources")]
    #[schemars(length(min = 1))]
    pub resources: Vec<Resource>,
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
}

impl Options {
    fn is_default(&self) -> bool {
        *self == Options::default()
    }
}

/// One request: `count` objects of `type`, each satisfying its nested `with` requests.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Object type, case-insensitive; aliases such as `socket` (package) and `process` (pu).
    #[serde(rename = "type")]
    pub kind: ObjType,
    /// How many objects: a whole number from 1, or `all` (every object that qualifies,
    /// at least one). Default 1.
    #[serde(default, skip_serializing_if = "Count::is_one")]
    pub count: Count,
    /// Requests matched inside each object of this item (by cpuset containment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<Resource>,
    /// Same as `options.pattern`; every place that sets it must agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    /// Same as `options.reverse`; every place that sets it must agree.
    #[serde(
        default,
        deserialize_with = "reverse_flag",
        skip_serializing_if = "Option::is_none"
    )]
    pub reverse: Option<bool>,
}

/// The shape format version. Only version 1 exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version;

/// How many objects a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// Exactly this many (at least 1).
    Exactly(NonZeroU32),
    /// Every object that qualifies; at least one must.
    All,
}

impl Default for Count {
    fn default() -> Self {
        Count::Exactly(NonZeroU32::MIN)
    }
}

impl Count {
    fn is_one(&self) -> bool {
        *self == Count::default()
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::Exactly(n) => write!(f, "{n}"),
            Count::All => f.write_str("all"),
        }
    }
}

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
    pub fn hwloc_name(self) -> &'static str {
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

    /// Whether this is a CPU-side hwloc object (not a device, not a slot).
    pub fn is_cpu_object(self) -> bool {
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
}

impl Keyword for Pattern {
    const WHAT: &'static str = "pattern";
    const SPELLINGS: &'static [(&'static str, Self)] = &[
        ("packed", Pattern::Packed),
        ("scatter", Pattern::Scatter),
        ("spread", Pattern::Scatter),
        ("interleave", Pattern::Interleave),
    ];
}

/// Memory policy for the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membind {
    /// Bind memory to the NUMA nodes of the task's cpuset.
    Local,
    /// Leave memory policy as inherited.
    None,
}

impl Keyword for Membind {
    const WHAT: &'static str = "membind policy";
    const SPELLINGS: &'static [(&'static str, Self)] =
        &[("local", Membind::Local), ("none", Membind::None)];
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

fn reverse_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let value = bool::deserialize(d)?;
    validate::agree_reverse(value).map_err(de::Error::custom)?;
    Ok(Some(value))
}

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

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CountVisitor;
        impl Visitor<'_> for CountVisitor {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number from 1, or `all`")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Count, E> {
                self.visit_i128(i128::from(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Count, E> {
                self.visit_i128(i128::from(n))
            }
            fn visit_i128<E: de::Error>(self, n: i128) -> Result<Count, E> {
                let n = validate::count_from_integer(n).map_err(E::custom)?;
                Ok(Count::Exactly(
                    NonZeroU32::new(n).expect("checked non-zero"),
                ))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Count, E> {
                Err(E::custom(format!(
                    "`count: {n:?}` is not a whole number; use a count of 1 or more, or `all`"
                )))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Count, E> {
                if s.eq_ignore_ascii_case("all") {
                    Ok(Count::All)
                } else {
                    Err(E::custom(format!(
                        "`count: {}` is not a count{}; use a count of 1 or more, or `all`",
                        validate::clip(s, crate::error::QUOTE_MAX),
                        validate::did_you_mean(s, &["all"])
                    )))
                }
            }
        }
        d.deserialize_any(CountVisitor)
    }
}

impl Serialize for Count {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Count::Exactly(n) => s.serialize_u32(n.get()),
            Count::All => s.serialize_str("all"),
        }
    }
}

impl JsonSchema for Count {
    fn schema_name() -> Cow<'static, str> {
        "Count".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A whole number from 1, or `all`.",
            "oneOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "enum": ["all"]},
            ],
        })
    }
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

/// The largest shape file binder reads (64 KiB): the catalog's are under 1 KiB, and a cap
/// keeps `/dev/zero` or a runaway generator from costing time and memory.
pub const MAX_SHAPE_BYTES: usize = 64 * 1024;

/// A shape file that cannot be read or does not follow the format.
#[derive(Debug, thiserror::Error)]
pub enum ShapeError {
    /// The file could not be read.
    #[error("cannot read shape file `{path}`: {reason}")]
    Read {
        /// The path as given.
        path: String,
        /// Why reading failed, and what to do.
        reason: String,
    },
    /// The text is not a valid shape.
    #[error("{origin}:{} {message}", location.map_or_else(String::new, |(l, c)| format!("{l}:{c}:")))]
    Invalid {
        /// The file name (or `<string>`).
        origin: String,
        /// Line and column (1-based), when the YAML parser knows them.
        location: Option<(usize, usize)>,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl Shape {
    /// Reads and parses a shape file (see [`read_text`]).
    pub fn from_file(path: &Path) -> Result<Shape, ShapeError> {
        let text = read_text(path)?;
        Shape::from_yaml(&text, &path.display().to_string())
    }

    /// Parses shape text; `origin` names it in error messages.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Shape, ShapeError> {
        let shape = Shape::parse(text, origin)?;
        shape.check_tree().map_err(|message| ShapeError::Invalid {
            origin: origin.to_owned(),
            location: None,
            message,
        })?;
        Ok(shape)
    }

    /// Rules that need the whole tree (SEMANTICS §10): slots stand at one level, never
    /// inside another slot or a device, and do not mix with GPU localities or interleave.
    fn check_tree(&self) -> Result<(), String> {
        fn walk(
            items: &[Resource],
            path: &str,
            depth: usize,
            parent: Option<ObjType>,
            slot_depth: &mut Option<(usize, String)>,
        ) -> Result<(), String> {
            for (i, item) in items.iter().enumerate() {
                let here = format!("{path}[{i}]");
                if item.kind == ObjType::Slot {
                    match parent {
                        Some(ObjType::Slot) => return Err(format!(
                            "{here}: a `slot` inside a `slot`; a slot is one task's share, so put hardware (`core`, `pu`, ...) inside it, not another slot"
                        )),
                        Some(p) if !p.is_cpu_object() => return Err(format!(
                            "{here}: a `slot` inside a `{p}`; slots divide CPU objects (`socket`, `numa`, `l3`, ...) or the whole node, so move it up a level"
                        )),
                        _ => {}
                    }
                    match slot_depth {
                        Some((d, first)) if *d != depth => return Err(format!(
                            "{here}: slots at two levels (also at {first}); every task gets one slot, so put all `slot` items at one level of the tree"
                        )),
                        Some(_) => {}
                        None => *slot_depth = Some((depth, here.clone())),
                    }
                }
                walk(
                    &item.with,
                    &format!("{here}.with"),
                    depth + 1,
                    Some(item.kind),
                    slot_depth,
                )?;
            }
            Ok(())
        }
        let mut slot_depth = None;
        walk(&self.resources, "resources", 0, None, &mut slot_depth)?;
        if slot_depth.is_some() {
            if let Some(bind @ (Bind::GpuLocal | Bind::GpuRemote)) = self.options.bind {
                return Err(format!(
                    "`bind: {bind}` with `slot` items: a slot already says where each task runs; put a `type: gpu` item inside the slot's parent (for example `numa` with `gpu` and `slot`) instead"
                ));
            }
            if self.pattern() == Pattern::Interleave {
                return Err("`pattern: interleave` with `slot` items: slots are dealt whole, so use `packed` (slot after slot) or `scatter` (round robin over the slots' parents)".to_owned());
            }
        }
        Ok(())
    }

    fn parse(text: &str, origin: &str) -> Result<Shape, ShapeError> {
        if text.len() > MAX_SHAPE_BYTES {
            return Err(ShapeError::Invalid {
                origin: origin.to_owned(),
                location: None,
                message: format!(
                    "larger than {} KiB; a shape is a few lines of YAML",
                    MAX_SHAPE_BYTES / 1024
                ),
            });
        }
        validate::prescan(text).map_err(|(location, message)| ShapeError::Invalid {
            origin: origin.to_owned(),
            location: Some(location),
            message,
        })?;
        let _scope = validate::ParseScope::begin();
        serde_yaml::from_str::<Shape>(text).map_err(|err| {
            let mut location = err.location().map(|l| (l.line(), l.column()));
            if err.to_string().contains("quoted scalar") {
                location = validate::unclosed_quote(text).or(location);
            }
            let full = err.to_string();
            let message = if full.contains("EOF while parsing") {
                "the shape is empty; it needs at least a `resources` list".to_owned()
            } else {
                validate::explain_serde_message(&full)
            };
            ShapeError::Invalid {
                origin: origin.to_owned(),
                location,
                message,
            }
        })
    }

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

/// Reads a shape file's text. Only a regular file (or a pipe such as `<(...)`) of at most
/// [`MAX_SHAPE_BYTES`] is read: `/dev/zero` or a directory is refused at once.
pub fn read_text(path: &Path) -> Result<String, ShapeError> {
    use std::io::Read as _;
    let shown = path.display().to_string();
    let read_error = |reason: String| ShapeError::Read {
        path: shown.clone(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| read_error(io_reason(&e)))?;
    if meta.is_dir() {
        return Err(read_error(
            "it is a directory; give the YAML file inside it".into(),
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| read_error(io_reason(&e)))?;
    // Sized from the metadata (capped): one `read` instead of a doubling series.
    let mut bytes = Vec::with_capacity((meta.len() as usize).min(MAX_SHAPE_BYTES) + 1);
    file.take(MAX_SHAPE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(io_reason(&e)))?;
    if bytes.len() > MAX_SHAPE_BYTES {
        return Err(read_error(format!(
            "it is larger than {} KiB; a shape is a few lines of YAML",
            MAX_SHAPE_BYTES / 1024
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        let (line, col) = line_col(&e.as_bytes()[..e.utf8_error().valid_up_to()]);
        ShapeError::Invalid {
            origin: shown.clone(),
            location: Some((line, col)),
            message: "not UTF-8 text; save the shape as UTF-8".into(),
        }
    })?;
    Ok(text)
}

/// An I/O error as a short reason with what to check.
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file; check the path".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied; check the file's mode".into(),
        _ => e.to_string(),
    }
}

/// 1-based line and column just after `bytes`.
fn line_col(bytes: &[u8]) -> (usize, usize) {
    let line = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = bytes.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, col)
}

fn first_in_tree<T>(items: &[Resource], get: &dyn Fn(&Resource) -> Option<T>) -> Option<T> {
    items
        .iter()
        .find_map(|r| get(r).or_else(|| first_in_tree(&r.with, get)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(yaml: &str) -> String {
        Shape::from_yaml(yaml, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn slot_rules() {
        let e = refusal("resources: [{type: slot, with: [{type: slot}]}]");
        assert!(
            e.contains("resources[0].with[0]: a `slot` inside a `slot`"),
            "{e}"
        );
        let e = refusal("resources: [{type: slot}, {type: socket, with: [{type: task}]}]");
        assert!(
            e.contains("resources[1].with[0]: slots at two levels (also at resources[0])"),
            "{e}"
        );
        let e = refusal("resources: [{type: gpu, with: [{type: slot}]}]");
        assert!(e.contains("a `slot` inside a `gpu`"), "{e}");
        let e =
            refusal("options: {bind: gpu-local}\nresources: [{type: numa, with: [{type: slot}]}]");
        assert!(e.contains("`bind: gpu-local` with `slot` items"), "{e}");
        let e = refusal(
            "options: {pattern: interleave}\nresources: [{type: slot, with: [{type: pu}]}]",
        );
        assert!(e.contains("`pattern: interleave` with `slot` items"), "{e}");
        // Slots at one level under different parents are fine.
        let ok =
            "resources: [{type: socket, with: [{type: slot}]}, {type: numa, with: [{type: slot}]}]";
        assert!(Shape::from_yaml(ok, "t.yaml").unwrap().has_slots());
    }

    #[test]
    fn widths_and_device_types_parse() {
        let s = Shape::from_yaml("options: {bind: socket}\nresources: [{type: nic}]", "t").unwrap();
        assert_eq!(s.options.bind, Some(Bind::Width(ObjType::Package)));
        assert!(s.needs_nics() && s.needs_io() && !s.needs_gpus());
        for (word, ty) in [
            ("l3", ObjType::L3),
            ("numanode", ObjType::Numa),
            ("die", ObjType::Die),
            ("l2cache", ObjType::L2),
        ] {
            let s = Shape::from_yaml(
                &format!("options: {{bind: {word}}}\nresources: [{{type: core}}]"),
                "t",
            )
            .unwrap();
            assert_eq!(s.options.bind, Some(Bind::Width(ty)), "{word}");
        }
    }
}
