//! `count:`: a whole number from 1 or `all`, with messages that say what to write.

use std::borrow::Cow;
use std::fmt;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::num::NonZeroU32;

use super::validate;

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
    pub(super) fn is_one(&self) -> bool {
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
                } else if let Some((first, key)) = indented_key(s) {
                    // `count: all` with the next key indented further than `count`: YAML
                    // folds that line into the value (`all with:` read as `all with`).
                    Err(E::custom(format!(
                        "`count: {}` is not a count: the `{key}` after `{first}` is indented further than `count`, so YAML reads it as part of the value; indent `{key}:` as `count:` is",
                        validate::clip(s, binder_core::text::QUOTE_MAX)
                    )))
                } else {
                    Err(E::custom(format!(
                        "`count: {}` is not a count{}; use a count of 1 or more, or `all`",
                        validate::clip(s, binder_core::text::QUOTE_MAX),
                        validate::did_you_mean(s, &["all"])
                    )))
                }
            }
        }
        d.deserialize_any(CountVisitor)
    }
}

/// A value that is a count followed by more words (`all with`, `4 with`): the first word
/// and the second, which is a key indented too far.
fn indented_key(s: &str) -> Option<(&str, &str)> {
    let mut words = s.split_whitespace();
    let (first, key) = (words.next()?, words.next()?);
    let counts = first.eq_ignore_ascii_case("all") || first.parse::<u32>().is_ok();
    let key = key.trim_end_matches(':');
    (counts && !key.is_empty() && key.chars().all(|c| c.is_ascii_alphabetic() || c == '-'))
        .then_some((first, key))
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
