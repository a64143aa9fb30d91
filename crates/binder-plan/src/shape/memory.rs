//! `memory:`: which NUMA nodes the memory policy (`membind`) uses, as a word (`near`,
//! `hbm`, `dram`, `cxl`, `all`) or the nodes' kernel numbers (`1`, `"4-7"`), as numactl
//! takes them. Which node is HBM, DRAM or CXL is hwloc's subtype of it; resolving the
//! word against a node is the topology's (`topology::memory_nodes`).

use std::borrow::Cow;
use std::fmt;

use binder_core::view::MemNodes;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::index::IndexList;
use super::validate::did_you_mean;

/// The words `memory:` takes, with what they name.
const WORDS: [(&str, MemNodes); 5] = [
    ("near", MemNodes::Near),
    ("hbm", MemNodes::Hbm),
    ("dram", MemNodes::Dram),
    ("cxl", MemNodes::Cxl),
    ("all", MemNodes::All),
];

/// A shape's `memory:` value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Memory(pub MemNodes);

impl Memory {
    fn parse(text: &str) -> Result<Memory, String> {
        let word = text.trim().to_ascii_lowercase();
        if let Some((_, nodes)) = WORDS.iter().find(|(w, _)| *w == word) {
            return Ok(Memory(nodes.clone()));
        }
        if word.starts_with(|c: char| c.is_ascii_digit()) {
            let list = IndexList::parse(&word)?;
            return Ok(Memory(MemNodes::Os(list.indexes().to_vec())));
        }
        let names: Vec<&str> = WORDS.iter().map(|(w, _)| *w).collect();
        Err(format!(
            "unknown memory `{}`{}; expected one of `near`, `hbm`, `dram`, `cxl`, `all`, or NUMA node numbers such as `1` or `4-7`",
            binder_core::text::clip(text, binder_core::text::QUOTE_MAX),
            did_you_mean(&word, &names)
        ))
    }
}

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Memory;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("near, hbm, dram, cxl, all, or NUMA node numbers")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Memory, E> {
                Memory::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Memory, E> {
                Memory::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Memory, E> {
                Memory::parse(s).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Memory {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.name())
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.name())
    }
}

impl JsonSchema for Memory {
    fn schema_name() -> Cow<'static, str> {
        "Memory".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "Which NUMA nodes `membind` uses: near (those holding the task's CPUs; default), hbm (of those, hwloc's HBM or MCDRAM nodes), dram (of those, DRAM or unnamed), cxl (of those, CXL memory), all (every node), or NUMA node numbers as the kernel gives them (`1`, `\"4-7\"`).",
            "anyOf": [
                {"type": "string", "enum": ["near", "hbm", "dram", "cxl", "all"]},
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^\\s*[0-9]+(\\s*-\\s*[0-9]+)?(\\s*,\\s*[0-9]+(\\s*-\\s*[0-9]+)?)*\\s*$"}
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_numbers() {
        assert_eq!(Memory::parse("HBM").unwrap().0, MemNodes::Hbm);
        assert_eq!(
            Memory::parse("4-5,1").unwrap().0,
            MemNodes::Os(vec![1, 4, 5])
        );
        let e = Memory::parse("hmb").unwrap_err();
        assert!(e.contains("did you mean `hbm`"), "{e}");
        assert!(Memory::parse("5-4").unwrap_err().contains("backwards"));
        // Written back as read.
        for text in ["near", "hbm", "dram", "cxl", "all", "1,4-5"] {
            assert_eq!(Memory::parse(text).unwrap().to_string(), text);
        }
    }
}
