//! The rules a shape must obey, applied while the YAML is being read.
//!
//! yaml_serde attaches a line and column only to errors raised while a value is being
//! deserialized, so every check that can name a position lives here and runs from the
//! `Deserialize` impls in `mod.rs`. Nothing in this file knows about topologies.

use std::cell::RefCell;
use std::fmt;

/// A word of the shape language with several accepted spellings (`socket` and `package`,
/// `spread` and `scatter`), matched case-insensitively.
pub(crate) trait Keyword: Copy + PartialEq + 'static {
    /// What the word names, for messages ("object type").
    const WHAT: &'static str;
    /// Every accepted spelling, lower case, with the value it means; the first spelling of a
    /// value is its canonical name.
    const SPELLINGS: &'static [(&'static str, Self)];

    /// The canonical (first listed) spelling.
    fn canonical(self) -> &'static str {
        Self::SPELLINGS
            .iter()
            .find(|(_, v)| *v == self)
            .map(|(name, _)| *name)
            .expect("every keyword value has a spelling")
    }
}

/// Parses `text` as a `K`, or explains what was expected with the nearest spelling.
pub(crate) fn keyword<K: Keyword>(text: &str) -> Result<K, String> {
    let lower = text.to_ascii_lowercase();
    if let Some((_, value)) = K::SPELLINGS.iter().find(|(name, _)| *name == lower) {
        return Ok(*value);
    }
    let names: Vec<&str> = K::SPELLINGS.iter().map(|(name, _)| *name).collect();
    // The suggestion may be any spelling; the list names each value once, canonically,
    // so the message stays short (aliases are in the schema and the README).
    let mut canonical: Vec<&str> = Vec::new();
    for (_, value) in K::SPELLINGS {
        let name = value.canonical();
        if !canonical.contains(&name) {
            canonical.push(name);
        }
    }
    Err(format!(
        "unknown {} `{}`{}; expected one of {}",
        K::WHAT,
        clip(text, 40),
        did_you_mean(&lower, &names),
        backticked(&canonical)
    ))
}

/// `; did you mean `x`?` when a candidate is close to `word`, else nothing.
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    suggestion(word, candidates)
        .map_or_else(String::new, |best| format!("; did you mean `{best}`?"))
}

/// The candidate closest to `word`, if it is close enough to be a typo of it.
pub(crate) fn suggestion<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    // A word much longer than every candidate is no typo of one; checking this first
    // keeps the quadratic distance off huge values (a 50 MB `type:`).
    let longest = candidates.iter().map(|c| c.len()).max().unwrap_or(0);
    if word.len() > 2 * longest + 2 {
        return None;
    }
    let word = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal-string-alignment distance: Levenshtein plus adjacent transpositions, so that
/// `l3cahce` is one edit from `l3cache`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// `text` cut to at most `max` characters (with `…`), so a huge value never makes a
/// huge message.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn backticked(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rewrites serde's and the YAML parser's messages into ones that say what to change:
/// a misspelt key (`patern`) gets a suggestion as a misspelt type does, and a position
/// the parser repeats inside its text is dropped (the caller prints it in front).
pub(crate) fn explain_serde_message(message: &str) -> String {
    let message = strip_positions(message);
    if let Some(field) = between(&message, "missing field `", "`") {
        return format!("`{field}` is missing; a shape needs at least `resources:` with one item, for example `- type: core`");
    }
    if message.contains("did not find expected")
        || message.contains("mapping values are not allowed")
    {
        return format!("{message}; check the indentation: items of a list start with `- ` and their keys line up under the first one");
    }
    let Some(at) = message.find("unknown field `") else {
        return message;
    };
    let (prefix, rest) = message.split_at(at);
    let rest = &rest["unknown field `".len()..];
    let Some((field, expected)) = rest.split_once("`, expected ") else {
        return message.clone();
    };
    let names: Vec<&str> = expected
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect();
    format!(
        "{prefix}unknown key `{field}`{}; expected {expected}",
        did_you_mean(field, &names)
    )
}

/// The text between the first `open` and the next `close`.
fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    Some(&text[start..start + len])
}

/// Removes every " at line L column C" the YAML parser writes into its messages.
fn strip_positions(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(" at line ") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + " at line ".len()..];
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let n = digits(tail);
        match tail[n..].strip_prefix(" column ") {
            Some(col) if n > 0 => rest = &col[digits(col)..],
            _ => {
                out.push_str(" at line ");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the value of a `count` may be: a whole number from 1, or `all`.
pub(crate) fn count_from_integer(n: i128) -> Result<u32, String> {
    match u32::try_from(n) {
        Ok(0) => Err("`count: 0` asks for nothing; use a count of 1 or more, or `all`".into()),
        Ok(n) => Ok(n),
        Err(_) if n < 0 => Err(format!(
            "`count: {n}` is negative; use a count of 1 or more, or `all`"
        )),
        Err(_) => Err(format!("`count: {n}` is too large")),
    }
}

/// The `pattern` and `reverse` settings seen so far in the document being parsed.
///
/// SEMANTICS §4 lets both stand in `options` and on any item, but all places must agree.
/// Checking while parsing lets the error point at the second, disagreeing value.
#[derive(Default)]
struct Agreement {
    pattern: Option<String>,
    reverse: Option<bool>,
}

thread_local! {
    static AGREEMENT: RefCell<Option<Agreement>> = const { RefCell::new(None) };
}

/// Scope of one document's parse; agreement checks only run inside one.
pub(crate) struct ParseScope(());

impl ParseScope {
    pub(crate) fn begin() -> Self {
        AGREEMENT.with(|a| *a.borrow_mut() = Some(Agreement::default()));
        ParseScope(())
    }
}

impl Drop for ParseScope {
    fn drop(&mut self) {
        AGREEMENT.with(|a| *a.borrow_mut() = None);
    }
}

/// Records a `pattern` value, or explains how it disagrees with an earlier one.
pub(crate) fn agree_pattern(canonical: &str) -> Result<(), String> {
    agree(canonical.to_owned(), |a| &mut a.pattern, "pattern")
}

/// Records a `reverse` value, or explains how it disagrees with an earlier one.
pub(crate) fn agree_reverse(value: bool) -> Result<(), String> {
    agree(value, |a| &mut a.reverse, "reverse")
}

fn agree<T: PartialEq + fmt::Display>(
    value: T,
    slot: impl FnOnce(&mut Agreement) -> &mut Option<T>,
    key: &str,
) -> Result<(), String> {
    AGREEMENT.with(|a| {
        let mut a = a.borrow_mut();
        let Some(a) = a.as_mut() else { return Ok(()) };
        let slot = slot(a);
        match slot {
            Some(first) if *first != value => Err(format!(
                "`{key}: {value}` disagrees with `{key}: {first}` given earlier in the shape; \
                 a shape has one {key}, so set it once (in `options`) or make every place agree"
            )),
            Some(_) => Ok(()),
            None => {
                *slot = Some(value);
                Ok(())
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposition_is_one_edit() {
        assert_eq!(edit_distance("l3cahce", "l3cache"), 1);
        assert_eq!(edit_distance("patern", "pattern"), 1);
        assert_eq!(edit_distance("core", "core"), 0);
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
            m.starts_with(
                "did not find expected '-' indicator, while parsing; check the indentation"
            ),
            "{m}"
        );
        assert!(
            explain_serde_message("missing field `resources`").contains("`resources` is missing")
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
}
