//! `index:` on a resource item: the objects it may take, by logical index on the whole node
//! (what `lstopo`, `hwloc-calc core:4` and binder's own labels such as `core:7` number),
//! as `hwloc-bind core:4-7` or Slurm's `map_cpu` name CPUs.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The most indexes one item may list, and the largest index: no node has more objects
/// of one type, and the bound keeps `index: 0-4000000000` from costing memory.
pub(crate) const MAX_INDEXES: usize = 1 << 16;

/// Logical indexes, ascending, each once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexList(Vec<usize>);

impl IndexList {
    /// The indexes, ascending.
    pub fn indexes(&self) -> &[usize] {
        &self.0
    }

    /// Parses `4-7,9` (also a single number): ranges and numbers, comma separated, read by
    /// binder's one range-list reader.
    pub(crate) fn parse(text: &str) -> Result<IndexList, String> {
        use binder_core::cpulist::RangeError;
        match binder_core::cpulist::parse_ranges(text, MAX_INDEXES - 1, MAX_INDEXES + 1) {
            Ok(r) => Self::from_vec(r.values),
            Err(RangeError::NotANumber(part)) => Err(format!(
                "`{part}` is not an index; write whole numbers from 0 as `4`, `4-7` or `0,2,5`"
            )),
            Err(RangeError::Backwards(part)) => Err(format!(
                "`{part}` runs backwards; write the lower index first"
            )),
            Err(RangeError::TooLarge(n)) => Err(format!("index `{n}` is larger than any node has")),
            Err(RangeError::TooMany) => Err(format!("more than {MAX_INDEXES} indexes")),
        }
    }

    fn from_vec(mut v: Vec<usize>) -> Result<IndexList, String> {
        if v.is_empty() {
            return Err("an empty `index`; name at least one object".into());
        }
        v.sort_unstable();
        v.dedup();
        Ok(IndexList(v))
    }
}

impl fmt::Display for IndexList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&binder_core::cpulist::cpu_list(&self.0))
    }
}

impl<'de> Deserialize<'de> for IndexList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IndexList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("logical indexes: `4`, `4-7`, `0,2,5` or a list of them")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<IndexList, E> {
                IndexList::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<IndexList, E> {
                IndexList::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<IndexList, E> {
                IndexList::parse(s).map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IndexList, A::Error> {
                let mut out = Vec::new();
                while let Some(part) = seq.next_element::<IndexList>()? {
                    out.extend(part.0);
                    if out.len() > MAX_INDEXES {
                        return Err(de::Error::custom(format!(
                            "more than {MAX_INDEXES} indexes"
                        )));
                    }
                }
                IndexList::from_vec(out).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for IndexList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl JsonSchema for IndexList {
    fn schema_name() -> Cow<'static, str> {
        "IndexList".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Logical indexes on the whole node (as lstopo and hwloc-calc number objects): `4`, `\"4-7\"`, `\"0,2,5\"` or a list of them.",
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^\\s*[0-9]+(\\s*-\\s*[0-9]+)?(\\s*,\\s*[0-9]+(\\s*-\\s*[0-9]+)?)*\\s*$"},
                {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}, "minItems": 1}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_numbers_and_lists() {
        assert_eq!(IndexList::parse("4-7").unwrap().indexes(), [4, 5, 6, 7]);
        assert_eq!(IndexList::parse("5, 0,2").unwrap().indexes(), [0, 2, 5]);
        assert_eq!(IndexList::parse("3,3").unwrap().indexes(), [3]);
        assert!(IndexList::parse("7-4").unwrap_err().contains("backwards"));
        assert!(IndexList::parse("a").unwrap_err().contains("not an index"));
        assert!(IndexList::parse("-1").is_err());
        assert!(IndexList::parse("0-4000000000")
            .unwrap_err()
            .contains("larger"));
        assert_eq!(IndexList::parse("0-7").unwrap().to_string(), "0-7");
    }
}
