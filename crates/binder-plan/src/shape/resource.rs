//! One resource request of a shape (`resources:` items, nested under `with:`), apart from
//! the shape itself so that per-rank rules (`ranks`) and the shape (`model`) both hold
//! requests without holding each other.

use schemars::JsonSchema;
use serde::{de, Deserialize, Deserializer, Serialize};

use super::validate;
use super::{CoreKind, Count, ObjType, Pattern};

/// One request: `count` objects of `type`, each satisfying its nested `with` requests.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Object type, case-insensitive; aliases such as `socket` (package) and `process` (pu).
    #[serde(rename = "type")]
    pub kind: ObjType,
    /// `core`/`pu` items only: only cores of this kind (overrides `options.kind`).
    #[serde(rename = "kind", default, skip_serializing_if = "Option::is_none")]
    pub core_kind: Option<CoreKind>,
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

/// `reverse:` read as a flag (see `options.reverse`).
pub(super) fn reverse_flag<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let value = bool::deserialize(d)?;
    validate::agree_reverse(value).map_err(de::Error::custom)?;
    Ok(Some(value))
}
