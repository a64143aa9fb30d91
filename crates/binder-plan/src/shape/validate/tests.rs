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
    let m = explain_serde_message(
        "unknown field `patern`, expected one of `type`, `pattern`",
        &[],
    );
    assert_eq!(
        m,
        "unknown key `patern`; did you mean `pattern`?; expected one of `type`, `pattern`"
    );
    assert_eq!(
        explain_serde_message("something else", &[]),
        "something else"
    );
    let m = explain_serde_message("options: unknown field `patern`, expected `pattern`", &[]);
    assert!(
        m.starts_with("options: unknown key `patern`; did you mean `pattern`?"),
        "{m}"
    );
    let m = explain_serde_message(
        "did not find expected '-' indicator at line 4 column 4, while parsing",
        &[],
    );
    assert!(
        m.starts_with("did not find expected '-' indicator, while parsing; check the indentation"),
        "{m}"
    );
    assert!(
        explain_serde_message("missing field `resources`", &[]).contains("`resources` is missing")
    );
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
