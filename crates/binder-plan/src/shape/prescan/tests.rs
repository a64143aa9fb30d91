use super::*;
use crate::shape::Shape;

/// Every shape the parser accepts is written and read again unchanged (the fuzzer's
/// property, here for its committed finds).
fn round_trips(text: &str) {
    if let Ok(shape) = Shape::from_yaml(text, "f.yaml") {
        let again = yaml_serde::to_string(&shape).unwrap();
        assert_eq!(
            Shape::from_yaml(&again, "again.yaml").unwrap(),
            shape,
            "{again}"
        );
    }
}

/// The depth prescan reads quotes and brackets as YAML does (found by the fuzzer: a `ge`
/// string whose serialized form escapes a `"` and holds 33 `{` failed to parse again).
#[test]
fn counts_only_flow_brackets() {
    let braces = "{".repeat(40);
    // Inside a double-quoted scalar, past an escaped quote: not nesting.
    assert!(prescan(&format!(
        "options: {{ge: \"a\\\"{braces}\"}}\nresources: [{{type: core}}]"
    ))
    .is_ok());
    // Inside a single-quoted scalar, past a `''`: not nesting.
    assert!(prescan(&format!("options: {{ge: 'it''s {braces}'}}\n")).is_ok());
    // A quoted scalar that goes on over lines (the serializer folds long ones).
    assert!(prescan(&format!(
        "options:\n  ge: 'a\n    {braces}'\nresources: []\n"
    ))
    .is_ok());
    // In a plain word (`a{`, `it's {`), not nesting either.
    assert!(prescan(&format!("options:\n  ge: a{braces}\n")).is_ok());
    assert!(prescan(&format!("options:\n  ge: it's a{braces}\n")).is_ok());
    // In a comment.
    assert!(prescan(&format!("resources: # {braces}\n  - type: core\n")).is_ok());
    // Real flow nesting still refused, with or without spaces, after a comment line.
    assert!(prescan(&"[".repeat(40)).is_err());
    assert!(prescan(&"[ ".repeat(40)).is_err());
    assert!(prescan(&format!("# a\nresources: {}", "{a: ".repeat(40))).is_err());
    round_trips(include_str!(
        "../../../../../fuzz/corpus/shape/serialized-escaped-quote-in-ge"
    ));
}

/// The lines of a block scalar (`|`, `>`, with indicators) are text; the first line back
/// at the opening line's indentation is structure again (found by the fuzzer: a `ge`
/// string with line breaks is written as a `|2+` block holding 40 `{`).
#[test]
fn block_scalars_are_text() {
    let braces = "{".repeat(40);
    for indicator in ["|", ">", "|2+", ">-", "|  # text follows"] {
        let text = format!("options:\n  ge: {indicator}\n    {braces}\n\n    {braces}\n");
        assert!(prescan(&text).is_ok(), "{text}");
        // Back at the key's indentation, a bracket nests again.
        let text = format!("{text}  x: {braces}\n");
        // `  x: ` is 5 columns; the 33rd `{` is column 38.
        assert_eq!(prescan(&text).unwrap_err().0, (6, 38), "{text}");
    }
    // Deep indentation inside a block is text too.
    assert!(prescan(&format!("a: |\n{}x\n", " ".repeat(600))).is_ok());
    assert!(prescan(&format!("a:\n{}x\n", " ".repeat(600))).is_err());
    // `|` inside a flow collection or a word opens no block.
    assert!(prescan(&format!("a: [|\n  {braces}]\n")).is_err());
    assert!(prescan(&format!("a: b|\n  {braces}\n")).is_err());
    round_trips(include_str!(
        "../../../../../fuzz/corpus/shape/serialized-multiline-single-quoted-ge"
    ));
}

/// Line numbers count `\r`, `\r\n` and `\n` as the YAML parser does; a separator the
/// parser also breaks at (U+2028) is refused where it stands.
#[test]
fn lines_break_as_yaml_does() {
    assert_eq!(
        lines("a\r\nb\rc\nd").collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );
    assert_eq!(prescan("a: 1\r\nb: \u{1}").unwrap_err().0, (2, 4));
    assert_eq!(prescan("a: 1\rb: \u{2028}").unwrap_err().0, (2, 4));
    assert_eq!(prescan("a: 1\r\n\tb: 2").unwrap_err().0, (2, 1));
}

/// A plain scalar in block context is text to its line's end (`ge: t\ ${{ …`): its
/// brackets open nothing (found by the fuzzer: a `ge` string whose single-quoted form
/// spanned lines was written back plain, with 137 `{`, and refused as nested too deep).
#[test]
fn a_plain_scalar_holds_brackets_as_text() {
    round_trips(include_str!(
        "../../../../../fuzz/corpus/shape/crash-ge-folded-single-quoted.yaml"
    ));
    assert!(prescan(&format!("options:\n  ge: t {}\n", "{".repeat(40))).is_ok());
    assert!(prescan(&format!("a: x{}\n", " {".repeat(40))).is_ok());
    // After `key: `, a flow collection still nests.
    assert!(prescan(&format!("a: {}\n", "{".repeat(40))).is_err());
    assert!(prescan(&format!("options: {}\n", "[".repeat(33))).is_err());
    // Inside a flow collection a plain scalar ends at a bracket: they still count.
    assert!(prescan(&format!("a: [x {}\n", "[".repeat(40))).is_err());
}

/// `-`, `?` and `:` before a non-space start a plain scalar (`ge: -{{ …`), as YAML reads
/// them; before a space they are indicators (found by the fuzzer: a `ge` string starting
/// `-{{{{{` was written back plain and refused as nested too deep).
#[test]
fn a_plain_scalar_may_start_with_a_dash() {
    round_trips(include_str!(
        "../../../../../fuzz/corpus/shape/crash-ge-plain-dash-brace.yaml"
    ));
    let braces = "{".repeat(40);
    for lead in ["-", "?", ":"] {
        let text = format!("options:\n  ge: {lead}{braces}\n");
        assert!(prescan(&text).is_ok(), "{text}");
        let text = format!("a:\n  - {lead}x {braces}\n");
        assert!(prescan(&text).is_ok(), "{text}");
    }
    // `- ` is a sequence entry, and a flow collection after it nests.
    assert!(prescan(&format!("a:\n  - {braces}\n")).is_err());
    assert!(prescan(&format!("a: - {braces}\n")).is_err());
}

/// A `ge` request of 65,000 bytes across 1,919 lines was taken, and written back escaped
/// past the reader's 64 KiB (found by the fuzzer): `options.ge` is bounded to 4 KiB.
#[test]
fn a_long_ge_request_is_refused() {
    let text = include_str!("../../../../../fuzz/corpus/shape/crash-ge-multiline-2.yaml");
    let e = Shape::from_yaml(text, "f.yaml").unwrap_err().to_string();
    assert!(e.contains("longer than 4096 bytes"), "{e}");
    round_trips(&format!("options: {{ge: '{}'}}\n", "\\".repeat(4096)));
}

/// The property the fuzzer checks, aimed where it found each break: whatever string a
/// shape's `ge` or `reserve` holds, the prescan takes the text binder writes for it
/// (yaml_serde chooses plain, quoted or block style; the prescan must read each as text).
mod written_text {
    use super::*;
    use proptest::prelude::*;

    /// Strings dense in what YAML reads specially (every indicator, spaces, breaks), with
    /// runs of brackets deeper than [`MAX_DEPTH`] that a misreading would count.
    fn yamlish() -> impl Strategy<Value = String> {
        let deep = ["{", "[", "}", "]", " {", "{ "].map(|b| b.repeat(MAX_DEPTH + 2));
        let pieces: Vec<String> = "-?:,[]{}#&*!|>'\"%@`\\ \n\tx0\u{85}\u{feff}é"
            .chars()
            .map(String::from)
            .chain(["- ", ": ", " #", "? ", "''", "\\\"", "\r\n"].map(String::from))
            .collect();
        proptest::collection::vec(
            prop_oneof![
                1 => proptest::sample::select(deep.to_vec()),
                6 => proptest::sample::select(pieces),
            ],
            0..16,
        )
        .prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        #[test]
        fn the_prescan_takes_what_binder_writes(ge in yamlish(), reserve in yamlish()) {
            let mut shape = Shape::from_yaml("resources: [{type: core}]\n", "f.yaml").unwrap();
            shape.options.ge = Some(ge);
            shape.options.reserve = vec![reserve];
            let text = yaml_serde::to_string(&shape).unwrap();
            prop_assert!(prescan(&text).is_ok(), "{:?}\n{}", prescan(&text), text);
        }
    }
}
