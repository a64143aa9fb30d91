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
    // A near name is the fix; without one, list each value once, canonically, so the
    // message stays short (aliases are in the schema and the README).
    if let Some(near) = suggestion(&lower, &names) {
        return Err(format!(
            "unknown {} `{}`; did you mean `{near}`?",
            K::WHAT,
            clip(text, binder_core::text::QUOTE_MAX)
        ));
    }
    let mut canonical: Vec<&str> = Vec::new();
    for (_, value) in K::SPELLINGS {
        let name = value.canonical();
        if !canonical.contains(&name) {
            canonical.push(name);
        }
    }
    Err(format!(
        "unknown {} `{}`; expected one of {}",
        K::WHAT,
        clip(text, binder_core::text::QUOTE_MAX),
        backticked(&canonical)
    ))
}

/// `; did you mean `x`?` when a candidate is close to `word`, else nothing.
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    suggestion(word, candidates)
        .map_or_else(String::new, |best| format!("; did you mean `{best}`?"))
}

pub(crate) use binder_core::text::suggestion;

pub(crate) use binder_core::text::clip;

fn backticked(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rewrites serde's and the YAML parser's messages into ones that say what to change:
/// a misspelt key (`patern`) gets a suggestion as a misspelt type does, and a position
/// the parser repeats inside its text is dropped (the caller prints it in front); an
/// unknown key that is one of `type_names` is the `- core: 2` shorthand.
pub(crate) fn explain_serde_message(message: &str, type_names: &[&str]) -> String {
    let message = strip_positions(message)
        .replace("invalid type: unit value", "invalid type: null")
        .replace("invalid type: map,", "invalid type: mapping,");
    let message = match between(&message, "invalid type: integer `", "` as u128") {
        Some(n) => format!("`{n}` is too large; no node has that many objects, use `all`"),
        None => message,
    };
    let rewritten = rewrite_known(&message);
    let message = rewritten.unwrap_or(message);
    if message.chars().count() > 300 {
        return clip(&message, 300);
    }
    if let Some(field) = between(&message, "missing field `", "`") {
        if field == "type" {
            return "an item without `type`; every item names one, for example `- type: core`"
                .into();
        }
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
    let field_shown = clip(field, binder_core::text::QUOTE_MAX);
    // `- core: 2` is the README's shorthand in prose, not the format: say how to write it.
    let is_type = type_names
        .iter()
        .any(|name| name.eq_ignore_ascii_case(field));
    if is_type && names.contains(&"type") {
        return format!(
            "{prefix}unknown key `{field_shown}`: an item is written `- type: {}` with `count: N`, not `- {}: N`",
            field.to_ascii_lowercase(),
            field.to_ascii_lowercase()
        );
    }
    format!(
        "{prefix}unknown key `{field_shown}`{}; expected {expected}",
        did_you_mean(field, &names)
    )
}

/// Where a quote that is never closed opens, 1-based: a `"` or `'` that starts a scalar
/// (after a space, `:`, `[`, `{`, `,` or `-`) with no partner after it. The YAML parser
/// only notices at the end of the file.
pub(crate) fn unclosed_quote(text: &str) -> Option<(usize, usize)> {
    let (mut line, mut col) = (1, 0);
    let mut open: Option<(char, (usize, usize))> = None;
    let mut prev = '\n';
    let mut comment = false;
    for c in text.chars() {
        col += 1;
        match open {
            Some((q, _)) if c == q => open = None,
            Some(_) => {}
            None if comment => {}
            None if c == '#' && prev.is_whitespace() => comment = true,
            None if matches!(c, '"' | '\'') && (prev.is_whitespace() || ":[{,-".contains(prev)) => {
                open = Some((c, (line, col)));
            }
            None => {}
        }
        if c == '\n' {
            (line, col, comment) = (line + 1, 0, false);
        }
        prev = c;
    }
    open.map(|(_, at)| at)
}

/// Messages of serde and the YAML scanner that name Rust types or say nothing a user can
/// act on, rewritten to say what to change.
fn rewrite_known(message: &str) -> Option<String> {
    let (prefix, rest) = match message.find(": invalid type") {
        Some(at) => (&message[..at + 2], &message[at + 2..]),
        None => ("", message),
    };
    let fix = |what: &str| Some(format!("{prefix}{what}"));
    // YAML 1.2 (what binder reads) has only `true` and `false`: YAML 1.1's `yes`/`no`/
    // `on`/`off` are words there, which the user meant as a boolean.
    if rest.contains("expected a boolean") {
        let word = between(rest, "string \"", "\"").map(str::to_ascii_lowercase);
        let hint = match word.as_deref() {
            Some(w @ ("yes" | "y" | "on")) => {
                format!("; `{w}` is a word in YAML 1.2, not a boolean: write `true`")
            }
            Some(w @ ("no" | "n" | "off")) => {
                format!("; `{w}` is a word in YAML 1.2, not a boolean: write `false`")
            }
            _ => String::new(),
        };
        return fix(&format!(
            "`reverse` and `openmp` take `true` or `false`{hint}"
        ));
    }
    let table: [(&str, &str); 15] = [
        ("unknown anchor", "an alias (`*name`) refers to an anchor (`&name`) that is not defined before it"),
        ("expected field identifier", "keys are plain words such as `resources` or `type`"),
        ("incompatible YAML document", "only YAML 1.x is read; drop the `%YAML` line"),
        ("expected struct Shape", "the shape must be a mapping with `resources:` (and optional `version:` and `options:`)"),
        ("expected struct Options", "`options` must be a mapping of keys such as `bind: core`"),
        ("expected struct Resource", "each `resources` item must be a mapping such as `- type: core` with optional `count:` and `with:`"),
        ("expected a nonzero u32", "`gpus-per-task` must be a whole number from 1 (leave it out for no GPUs)"),
        ("expected i64", "`version` must be 1 (or leave it out)"),
        ("expected a sequence", "`resources` and `with` must be lists of items, each starting with `- `"),
        ("expected a boolean", "`reverse` and `openmp` take `true` or `false`"),
        ("expected a string", "this value must be a word such as `core` or `packed`"),
        ("more than one document", "the file holds more than one YAML document (`---`); a shape is one document"),
        ("duplicate field", "a key appears twice in one mapping; keep one (YAML keys are unique)"),
        ("repetition limit exceeded", "too many aliases (`*name`) are expanded; write the shape out without anchors"),
        ("recursion limit exceeded", "nested deeper than the YAML parser allows (128 levels); a shape needs a handful"),
    ];
    for (needle, text) in table {
        if rest.contains(needle) || (prefix.is_empty() && message.contains(needle)) {
            return fix(text);
        }
    }
    if message.contains("found character that cannot start any token") {
        return Some(format!("{message}; YAML has no tabs and reserves `@` and backquote at the start of a value: quote the value or use spaces"));
    }
    if message.contains("while scanning a quoted scalar") {
        return Some("a quote is never closed; close it on the line where it opens".into());
    }
    if message.contains("invalid leading UTF-8 octet")
        || message.contains("invalid trailing UTF-8 octet")
    {
        return Some("not UTF-8 text; save the shape as UTF-8".into());
    }
    None
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
        Err(_) => Err(format!(
            "`count: {n}` is too large; no node has that many objects, use `all`"
        )),
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
mod tests;
