use super::*;

#[test]
fn transposition_is_one_edit() {
    assert_eq!(suggestion("l3cahce", &["l3cache"]), Some("l3cache"));
}

#[test]
fn suggests_only_near_names() {
    assert_eq!(suggestion("patern", &["type", "pattern"]), Some("pattern"));
    assert_eq!(suggestion("colour", &["type", "pattern"]), None);
}

#[test]
fn rewrites_unknown_field() {
    let m = explain_serde_message("unknown field `patern`, expected one of `type`, `pattern`");
    assert_eq!(
        m,
        "unknown key `patern`; did you mean `pattern`?; expected one of `type`, `pattern`"
    );
    assert_eq!(explain_serde_message("something else"), "something else");
    let m = explain_serde_message("options: unknown field `patern`, expected `pattern`");
    assert!(
        m.starts_with("options: unknown key `patern`; did you mean `pattern`?"),
        "{m}"
    );
    let m = explain_serde_message(
        "did not find expected '-' indicator at line 4 column 4, while parsing",
    );
    assert!(
        m.starts_with("did not find expected '-' indicator, while parsing; check the indentation"),
        "{m}"
    );
    assert!(explain_serde_message("missing field `resources`").contains("`resources` is missing"));
}

#[test]
fn counts() {
    assert_eq!(count_from_integer(3), Ok(3));
    assert!(count_from_integer(0).unwrap_err().contains("count: 0"));
    assert!(count_from_integer(-2).unwrap_err().contains("negative"));
    assert!(count_from_integer(1 << 40)
        .unwrap_err()
        .contains("too large"));
}

#[test]
fn agreement_only_inside_a_scope() {
    assert!(agree_pattern("packed").is_ok());
    assert!(agree_pattern("scatter").is_ok());
    let scope = ParseScope::begin();
    assert!(agree_pattern("packed").is_ok());
    assert!(agree_pattern("packed").is_ok());
    assert!(agree_pattern("scatter")
        .unwrap_err()
        .contains("disagrees with `pattern: packed`"));
    assert!(agree_reverse(true).is_ok());
    assert!(agree_reverse(false).is_err());
    drop(scope);
    assert!(agree_pattern("scatter").is_ok());
}

/// The depth prescan reads quotes and brackets as YAML does (found by the fuzzer: a `ge`
/// string whose serialized form escapes a `"` and holds 33 `{` failed to parse again).
#[test]
fn prescan_counts_only_flow_brackets() {
    let braces = "{".repeat(40);
    // Inside a double-quoted scalar, past an escaped quote: not nesting.
    assert!(prescan(&format!(
        "options: {{ge: \"a\\\"{braces}\"}}\nresources: [{{type: core}}]"
    ))
    .is_ok());
    // In a plain word (`a{`, `it's {`), not nesting either.
    assert!(prescan(&format!("options:\n  ge: a{braces}\n")).is_ok());
    assert!(prescan(&format!("options:\n  ge: it's a{braces}\n")).is_ok());
    // Real flow nesting still refused, with or without spaces.
    assert!(prescan(&"[".repeat(40)).is_err());
    assert!(prescan(&"[ ".repeat(40)).is_err());
    assert!(prescan(&format!("resources: {}", "{a: ".repeat(40))).is_err());
    // The fuzzer's input, serialized and parsed again.
    let text = include_str!("../../../../../fuzz/corpus/shape/serialized-escaped-quote-in-ge");
    if let Ok(shape) = crate::shape::Shape::from_yaml(text, "f.yaml") {
        let again = yaml_serde::to_string(&shape).unwrap();
        assert_eq!(
            crate::shape::Shape::from_yaml(&again, "again.yaml").unwrap(),
            shape
        );
    }
}
