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
    with: Vec<Resource>,
    #[serde(default)]
    pattern: Option<Pattern>,
    #[serde(default, deserialize_with = "reverse_flag")]
    reverse: Option<bool>,
}

impl<'de> Deserialize<'de> for Resource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Written::deserialize(d)?;
        if let Some(index) = &w.index {
            if matches!(w.kind, ObjType::Gpu | ObjType::Nic | ObjType::Slot) {
                return Err(de::Error::custom(format!(
                    "`index` names CPU objects by logical index; a `{}` item cannot have one",
                    w.kind.hwloc_name()
                )));
            }
            let named = index.indexes().len();
            if let Some(Count::Exactly(n)) = w.count {
                if n.get() as usize > named {
                    return Err(de::Error::custom(format!(
                        "`count: {n}` but `index: {index}` names {named} object(s); ask for at most {named}, or name more"
                    )));
                }
            }
        }
        let count = match (w.count, &w.index) {
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
