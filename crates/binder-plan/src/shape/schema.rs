//! The JSON Schema of the shape format, generated from the serde model by schemars.
//!
//! `schemas/shape.schema.json` is this output, committed so that editors
//! (yaml-language-server) can validate shapes; a test fails when the two drift apart.

use super::Shape;

/// The first line every catalog shape carries, pointing editors at the committed schema.
pub const SCHEMA_URL_COMMENT: &str = "# yaml-language-server: $schema=../schemas/shape.schema.json";

/// The schema as pretty-printed JSON with a trailing newline, as committed.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(Shape);
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema always serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(
        clippy::disallowed_methods,
        reason = "the test compares the committed schema file with the library's"
    )]
    fn committed_schema_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../schemas/shape.schema.json"
        );
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        if committed != schema_json() {
            panic!(
                "schemas/shape.schema.json is stale; regenerate it with \
                 `cargo run -- schema > schemas/shape.schema.json` and review the diff"
            );
        }
    }

    #[test]
    fn schema_lists_aliases_and_descriptions() {
        let text = schema_json();
        for word in [
            "\"socket\"",
            "\"process\"",
            "\"spread\"",
            "\"l3cache\"",
            "\"all\"",
            "gpus-per-task",
        ] {
            assert!(text.contains(word), "schema lacks {word}");
        }
        assert!(
            text.contains("matched greedily in hwloc logical order"),
            "doc comments become descriptions"
        );
    }
}
