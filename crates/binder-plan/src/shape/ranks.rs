//! Per-rank rules (`ranks:`, issue #13): some local ranks get their own binding or their
//! own resources, the others keep the shape's plan.
//!
//! ```yaml
//! resources:
//!   - type: core
//!     count: all
//! ranks:
//!   0: {bind: none}                 # a master keeps the affinity it started with
//!   "1-2":                          # two helpers on NUMA node 0's first cores
//!     resources: [{type: numa, with: [{type: core, count: 2}]}]
//! ```
//!
//! Keys are local rank lists (`0`, `"1-3"`, `"0,4-7"`); a rule names the options it
//! changes (`bind`, `pattern`, `reverse`, `openmp`, `membind`, `gpus-per-task`) and
//! either its own `resources` or `bind: none`. What it does not name it inherits from the
//! shape, except `gpus-per-task`: GPUs are dealt by one plan only, so a rule and the rest
//! of the shape never get the same GPU. How they are planned is in [`crate::plan`].

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::num::NonZeroU32;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::{Bind, Membind, Memory, Pattern, Resource};

/// The most ranks a rank list may name: a node never runs more tasks than PUs.
pub(crate) const MAX_RANK: usize = 1 << 20;

/// A list of local ranks, as written: `0`, `"1-3"`, `"0,4-7"` (ascending, no repeats).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RankList(pub Vec<usize>);

impl RankList {
    /// Reads `0`, `1-3`, `0,4-7`.
    pub fn parse(text: &str) -> Result<RankList, String> {
        let bad = |why: &str| {
            format!(
                "rank list `{}`: {why}; write local ranks as `0`, `\"1-3\"` or `\"0,4-7\"`",
                binder_core::text::clip(text, 40)
            )
        };
        use binder_core::cpulist::RangeError;
        let read =
            binder_core::cpulist::parse_ranges(text, MAX_RANK - 1, MAX_RANK + 1).map_err(|e| {
                match e {
                    RangeError::NotANumber(part) | RangeError::TooLarge(part) => {
                        bad(&format!("`{part}` is not a rank below {MAX_RANK}"))
                    }
                    RangeError::Backwards(part) => bad(&format!("{part} runs backwards")),
                    RangeError::TooMany => bad("too many ranks"),
                }
            })?;
        if read.repeated {
            return Err(bad("a rank is named twice"));
        }
        if read.values.is_empty() {
            return Err(bad("no rank"));
        }
        let ranks = read.values;
        Ok(RankList(ranks))
    }
}

impl fmt::Display for RankList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&binder_core::cpulist::cpu_list(&self.0))
    }
}

impl<'de> Deserialize<'de> for RankList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ranks;
        impl Visitor<'_> for Ranks {
            type Value = RankList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a local rank list such as 0, \"1-3\" or \"0,4-7\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RankList, E> {
                RankList::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RankList, E> {
                RankList::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RankList, E> {
                RankList::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(Ranks)
    }
}

impl Serialize for RankList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// One rule: what the ranks it names get instead of the shape's plan.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RankRule {
    /// Their binding unit; `none` leaves them with the affinity they started with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<Bind>,
    /// How their units are dealt among them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Pattern>,
    /// Reverse their pool first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    /// Export OpenMP's variables for them (default: the shape's `options.openmp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openmp: Option<bool>,
    /// Their memory binding (default: the shape's `options.membind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub membind: Option<Membind>,
    /// The NUMA nodes their memory binding uses (default: the shape's `options.memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// GPUs for each of them (not inherited: only one plan deals GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_task: Option<NonZeroU32>,
    /// Their own resources, planned before the rest of the shape, which plans around
    /// them. Required unless `bind: none`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
}

/// The `ranks:` mapping.
pub type Ranks = BTreeMap<RankList, RankRule>;

/// The JSON Schema of `ranks:`: keys are rank lists.
pub(super) fn ranks_schema(generator: &mut SchemaGenerator) -> Schema {
    let rule = generator.subschema_for::<RankRule>();
    json_schema!({
        "description": "Per-rank rules: local rank lists (`0`, `\"1-3\"`, `\"0,4-7\"`) and what those ranks get instead of the shape's plan: `bind: none`, or their own `resources` (and options). The other ranks are planned around them.",
        "type": "object",
        "propertyNames": {"pattern": "^\\s*[0-9]+(\\s*-\\s*[0-9]+)?(\\s*,\\s*[0-9]+(\\s*-\\s*[0-9]+)?)*\\s*$"},
        "additionalProperties": rule
    })
}

impl JsonSchema for RankList {
    fn schema_name() -> Cow<'static, str> {
        "RankList".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Shape;

    #[test]
    fn rank_lists() {
        assert_eq!(RankList::parse("0").unwrap().0, [0]);
        assert_eq!(RankList::parse("0, 4-6").unwrap().0, [0, 4, 5, 6]);
        assert_eq!(RankList::parse("4-6,0").unwrap().to_string(), "0,4-6");
        for bad in ["", "a", "3-1", "0,0", "-1", "1-", "99999999999999999999"] {
            assert!(RankList::parse(bad).is_err(), "{bad}");
        }
    }

    fn shape(text: &str) -> Result<Shape, String> {
        Shape::from_yaml(text, "s.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn rules_group_ranks_and_leave_the_rest() {
        let s = shape(
            "resources: [{type: core, count: all}]\nranks:\n  0: {bind: none}\n  \"2-3\": {resources: [{type: pu}]}\n",
        )
        .unwrap();
        let (groups, rest) = s.rank_groups(6);
        assert_eq!(groups.len(), 2);
        assert_eq!(
            (groups[0].ranks.clone(), groups[0].shape.is_none()),
            (vec![0], true)
        );
        assert_eq!(groups[1].ranks, [2, 3]);
        assert_eq!(rest, [1, 4, 5]);
        // Beyond the local size a rule names nobody.
        let (groups, rest) = s.rank_groups(1);
        assert_eq!((groups.len(), rest.len()), (1, 0));
    }

    #[test]
    fn bad_rules_are_refused() {
        let e =
            shape("resources: [{type: core}]\nranks: {\"0-1\": {bind: none}, \"1\": {bind: none}}")
                .unwrap_err();
        assert!(e.contains("both name rank 1"), "{e}");
        let e = shape("resources: [{type: core}]\nranks: {0: {bind: pu}}").unwrap_err();
        assert!(
            e.contains("needs its own `resources` or `bind: none`"),
            "{e}"
        );
        let e = shape("resources: [{type: core}]\nranks: {x: {bind: none}}").unwrap_err();
        assert!(e.contains("rank list `x`"), "{e}");
        let e =
            shape("resources: [{type: core}]\nranks: {0: {bind: none, colour: red}}").unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let e = shape("options: {ge: '-binding linear:1'}\nranks: {0: {bind: none}}").unwrap_err();
        assert!(e.contains("Grid Engine"), "{e}");
        let e = shape("options: {gpus-per-task: 1}\nresources: [{type: core}]\nranks: {0: {gpus-per-task: 1, resources: [{type: core}]}}").unwrap_err();
        assert!(e.contains("both use GPUs"), "{e}");
    }
}
