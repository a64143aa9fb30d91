//! `binder-shape(5)`: the shape format's man page, rendered from the shape's JSON Schema
//! (`binder_plan::shape::schema`, the same one `binder schema` prints and editors read),
//! so every key and value the parser takes is documented with the words its doc comment
//! gives, and none can be added without reaching the page (issue #46; as `sge_binding(5)`
//! documents Grid Engine's binding language). Committed as `docs/man/binder-shape.5`; a
//! test checks it is current.

use roff::{bold, roman, Roff};

use crate::manual::inlines;
use serde_json::Value;

/// The sections for each object of the format, in the order a reader meets them: the
/// top-level keys, then each kind of object they hold.
const OBJECTS: [(&str, &str); 3] = [
    ("OPTIONS", "Options"),
    ("RESOURCE ITEMS", "Resource"),
    ("RANK RULES", "RankRule"),
];

/// A minimal shape, the page's SYNOPSIS.
const SYNOPSIS: &str = "# yaml-language-server: $schema=../schemas/shape.schema.json
options:
  bind: core
resources:
  - type: core
    count: all";

/// Examples: catalog shapes, as shipped.
const EXAMPLES: [(&str, &str); 3] = [
    (
        "One task per NUMA node with OpenMP inside, memory bound there:",
        include_str!("../shapes/hybrid-numa-openmp.yaml"),
    ),
    (
        "One GPU per task and the cores next to it:",
        include_str!("../shapes/gpu-local.yaml"),
    ),
    (
        "Local rank 0 keeps the affinity it started with, the other ranks share every core:",
        include_str!("../shapes/master-worker.yaml"),
    ),
];

/// The man page, roff.
pub fn shape_man() -> Vec<u8> {
    let schema: Value =
        serde_json::from_str(&binder_plan::shape::schema_json()).unwrap_or_default();
    let defs = &schema["$defs"];
    let mut roff = Roff::new();
    roff.control("TH", ["BINDER-SHAPE", "5"]);
    roff.control("SH", ["NAME"]);
    roff.text([roman(
        "binder-shape - the YAML placement request binder reads",
    )]);
    roff.control("SH", ["SYNOPSIS"]);
    verbatim(&mut roff, SYNOPSIS);
    roff.control("SH", ["DESCRIPTION"]);
    roff.text(inlines(&clean(
        schema["description"].as_str().unwrap_or(""),
    )));
    roff.control("PP", []);
    roff.text(inlines(
        "A shape is a YAML mapping with the keys below. An unknown key, a misspelt value or a count of 0 is refused with one `binder:` line naming the file, line and column and what to write instead; `binder schema` prints the JSON Schema this page is made from, which editors use to complete and check shapes. `binder --dry-run SHAPE` shows what every task would get, `binder explain SHAPE` why.",
    ));
    roff.control("SH", ["KEYS"]);
    properties(&mut roff, &schema, defs);
    for (title, name) in OBJECTS {
        roff.control("SH", [title]);
        let def = &defs[name];
        roff.text(inlines(&clean(def["description"].as_str().unwrap_or(""))));
        properties(&mut roff, def, defs);
    }
    roff.control("SH", ["VALUES"]);
    let Some(all) = defs.as_object() else {
        return crate::manual::plain_sections(&roff.render()).into_bytes();
    };
    for (name, def) in all {
        let Some(values) = def["enum"].as_array() else {
            continue;
        };
        roff.control("TP", []);
        roff.text([bold(name.as_str())]);
        let values: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        let mut text = clean(def["description"].as_str().unwrap_or(""));
        text.push_str(&format!(" One of: `{}`.", values.join("`, `")));
        roff.text(inlines(&text));
    }
    roff.control("SH", ["EXAMPLES"]);
    for (what, yaml) in EXAMPLES {
        roff.control("PP", []);
        roff.text(inlines(what));
        verbatim(&mut roff, yaml);
    }
    roff.control("PP", []);
    roff.text(inlines(
        "The catalog (`PREFIX/share/binder/shapes`, each file with a line on when to use it) holds these and more; a bare name such as `cores-packed` finds it.",
    ));
    roff.control("SH", ["SEE ALSO"]);
    roff.text([
        bold("binder"),
        roman("(1), "),
        bold("hwloc-calc"),
        roman("(1), "),
        bold("lstopo"),
        roman("(1); the user guide's shape reference (/usr/share/doc/binder/guide.md from the packages, PREFIX/share/doc/binder/guide.md from make install, docs/guide.md in the source)"),
    ]);
    crate::manual::plain_sections(&roff.render()).into_bytes()
}

/// Each property of `object` as a tagged paragraph: its key, what it takes, its words.
fn properties(roff: &mut Roff, object: &Value, defs: &Value) {
    let Some(props) = object["properties"].as_object() else {
        return;
    };
    for (key, prop) in props {
        roff.control("TP", []);
        roff.text([
            bold(key.as_str()),
            roman(format!(" ({})", takes(prop, defs))),
        ]);
        roff.text(inlines(&clean(prop["description"].as_str().unwrap_or(""))));
    }
}

/// What a property takes, in a few words: a value list's name, a type, `all` or a number.
fn takes(prop: &Value, defs: &Value) -> String {
    if let Some(target) = prop["$ref"].as_str() {
        return named(target, defs);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = prop[key].as_array() {
            let words: Vec<String> = options
                .iter()
                .filter(|o| o["type"] != "null")
                .map(|o| takes(o, defs))
                .collect();
            return words.join(" or ");
        }
    }
    if let Some(c) = prop.get("const") {
        return format!("the value {c}");
    }
    if let Some(values) = prop["enum"].as_array() {
        let values: Vec<&str> = values.iter().filter_map(Value::as_str).collect();
        return values.join(" or ");
    }
    let kind = match &prop["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        _ => "a value".to_owned(),
    };
    match (kind.as_str(), prop["minimum"].as_u64()) {
        ("integer", Some(min)) => format!("a whole number from {min}"),
        ("array", _) => format!("a list of {}", takes(&prop["items"], defs)),
        ("object", _) => "a mapping".to_owned(),
        _ => kind,
    }
}

/// A `$ref`'s name, as VALUES and the object sections head it.
fn named(target: &str, defs: &Value) -> String {
    let name = target.rsplit('/').next().unwrap_or(target);
    let def = &defs[name];
    if def["enum"].is_array() {
        return format!("{name}, see VALUES");
    }
    if def["properties"].is_object() {
        return format!("a mapping: {name}");
    }
    takes(def, defs)
}

/// A doc comment as page text: one paragraph, rustdoc's link brackets dropped, and the
/// few typographic characters the docs use spelt in ASCII (groff has no glyph for them
/// under a C locale, and `man --warnings` says so).
fn clean(text: &str) -> String {
    const ASCII: [(char, &str); 6] = [
        ('\u{2026}', "..."),
        ('\u{2212}', "-"),
        ('\u{00b7}', "*"),
        ('\u{2265}', ">="),
        ('\u{00d7}', "x"),
        ('\u{2192}', "->"),
    ];
    let mut text = text.replace("[`", "`").replace("`]", "`");
    for (from, to) in ASCII {
        text = text.replace(from, to);
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Lines kept as written (no filling), indented.
fn verbatim(roff: &mut Roff, text: &str) {
    roff.control("RS", ["4"]).control("nf", []);
    for line in text.lines() {
        roff.text([roman(line)]);
    }
    roff.control("fi", []).control("RE", []);
}
