//! One resource request of a shape (`resources:` items, nested under `with:`), apart from
//! the shape itself so that per-rank rules (`ranks`) and the shape (`model`) both hold
//! requests without holding each other.

use schemars::JsonSchema;
use serde::{de, Deserialize, Deserializer, Serialize};

use super::index::IndexList;
use super::validate;
use super::{CoreKind, Count, ObjType, Pattern};

/// One request: `count` objects of `type`, each satisfying its nested `with` requests.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Resource {
    /// Object type, case-insensitive; aliases such as `socket` (package) and `process` (pu).
    #[serde(rename = "type")]
    pub kind: ObjType,
    /// `core`/`pu` items only: only cores of this kind (overrides `options.kind`).
    #[serde(rename = "kind", default, skip_serializing_if = "Option::is_none")]
    pub core_kind: Option<CoreKind>,
    /// How many objects: a whole number from 1, or `all` (every object that qualifies,
    /// at least one). Default 1, or with `index` every object it names.
    #[serde(default, skip_serializing_if = "Count::is_one")]
    pub count: Count,
    /// Only these objects, by logical index on the whole node (`4-7`, `0,2,5`): the
    /// numbers `lstopo`, `hwloc-calc core:4` and binder's labels use. CPU types only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<IndexList>,
    /// Only these objects, by the number the kernel gives them (`taskset`, `numactl`,
    /// Slurm's `map_cpu`, lstopo's `P#`): `pu`, `numa` and `package` items only, whose OS
    /// numbers name one object each on the node. Instead of `index`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_index: Option<IndexList>,
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

/// A resource item as written, before `count`'s default is known (it depends on `index`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "struct Resource")]
struct Written {
    #[serde(rename = "type")]
    kind: ObjType,
    #[serde(rename = "kind", default)]
    core_kind: Option<CoreKind>,
    #[serde(default, deserialize_with = "given")]
    count: Option<Count>,
    #[serde(default)]
    index: Option<IndexList>,
    #[serde(default)]
    os_index: Option<IndexList>,
    #[serde(default)]
    with: Vec<Resource>,
    #[serde(default)]
    pattern: Option<Pattern>,
    #[serde(default, deserialize_with = "reverse_flag")]
    reverse: Option<bool>,
}

impl<'de> Deserialize<'de> for Resource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Written::deserialize(d)?;
        if w.index.is_some() && w.os_index.is_some() {
            return Err(de::Error::custom(
                "both `index` and `os_index`; name objects by hwloc's logical index or by the kernel's number, not both",
            ));
        }
        if w.index.is_some() && !w.kind.is_cpu_object() {
            return Err(de::Error::custom(format!(
                "`index` names CPU objects by logical index; a `{}` item cannot have one",
                w.kind.hwloc_name()
            )));
        }
        if w.os_index.is_some() && !matches!(w.kind, ObjType::Pu | ObjType::Numa | ObjType::Package)
        {
            return Err(de::Error::custom(format!(
                "`os_index` on a `{}` item; the kernel's numbers name one object each only for `pu`, `numa` and `package` (a core's repeats in every package): name the core's PUs, or use `index`",
                w.kind.hwloc_name()
            )));
        }
        let key = if w.os_index.is_some() {
            "os_index"
        } else {
            "index"
        };
        let named = w.index.as_ref().or(w.os_index.as_ref());
        if let (Some(list), Some(Count::Exactly(n))) = (named, w.count) {
            let named = list.indexes().len();
            if n.get() as usize > named {
                return Err(de::Error::custom(format!(
                    "`count: {n}` but `{key}: {list}` names {named} object(s); ask for at most {named}, or name more"
                )));
            }
        }
        let count = match (w.count, named) {
            (Some(count), _) => count,
            (None, Some(index)) => Count::Exactly(
                u32::try_from(index.indexes().len())
                    .ok()
                    .and_then(std::num::NonZeroU32::new)
                    .unwrap_or(std::num::NonZeroU32::MIN),
            ),
            (None, None) => Count::default(),
        };
        Ok(Resource {
            kind: w.kind,
            core_kind: w.core_kind,
            count,
            index: w.index,
            os_index: w.os_index,
            with: w.with,
            pattern: w.pattern,
            reverse: w.reverse,
        })
    }
}

/// `count:` when written (`count: null` is refused as a count, not taken as unset).
fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Count>, D::Error> {
    Count::deserialize(d).map(Some)
}

/// `reverse:` read as a flag (see `options.reverse`).
pub(super) fn reverse_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let value = bool::deserialize(d)?;
    validate::agree_reverse(value).map_err(de::Error::custom)?;
    Ok(Some(value))
}
