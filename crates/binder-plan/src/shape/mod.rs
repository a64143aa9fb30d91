//! The shape: what placement the user asked for, as written in YAML (SEMANTICS §1).
//!
//! This stage owns parsing and every check that can point at a line and column. It knows
//! nothing about the machine: whether a shape fits a node is decided by `select` and
//! `distribute`. Layout: `model` (the structs), `keywords` (enums and their spellings),
//! `count`, `rules` (whole-tree checks), `prescan` (the raw text's depth and characters), `validate` (message rewriting),
//! `schema`, `error`.

mod count;
mod error;
mod index;
mod keywords;
mod memory;
mod model;
mod per_rank;
mod prescan;
pub mod ranks;
mod resource;
mod rules;
mod schema;
mod validate;

pub use count::Count;
pub use error::{ShapeError, MAX_SHAPE_BYTES};
pub use index::IndexList;
pub use keywords::{Bind, CoreKind, GpuIds, Membind, NumaBinding, ObjType, Pack, Pattern};
pub use memory::Memory;
pub use model::{Options, Shape, Version};
pub use per_rank::Group;
pub use ranks::{RankList, RankRule, Ranks};
pub use resource::Resource;
pub use schema::{schema_json, SCHEMA_URL_COMMENT};
pub(crate) use validate::did_you_mean;

impl Shape {
    /// Parses shape text; `origin` names it in error messages.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Shape, ShapeError> {
        let shape = Shape::parse(text, origin)?;
        shape
            .check_tree()
            .and_then(|()| shape.check_ranks())
            .map_err(|message| ShapeError::Invalid {
                origin: origin.to_owned(),
                location: None,
                message,
            })?;
        Ok(shape)
    }

    fn parse(text: &str, origin: &str) -> Result<Shape, ShapeError> {
        if text.len() > MAX_SHAPE_BYTES {
            return Err(ShapeError::Invalid {
                origin: origin.to_owned(),
                location: None,
                message: format!(
                    "larger than {} KiB; a shape is a few lines of YAML",
                    MAX_SHAPE_BYTES / 1024
                ),
            });
        }
        prescan::prescan(text).map_err(|(location, message)| ShapeError::Invalid {
            origin: origin.to_owned(),
            location: Some(location),
            message,
        })?;
        let _scope = validate::ParseScope::begin();
        yaml_serde::from_str::<Shape>(text).map_err(|err| {
            let mut location = err.location().map(|l| (l.line(), l.column()));
            if err.to_string().contains("quoted scalar") {
                location = validate::unclosed_quote(text).or(location);
            }
            let full = err.to_string();
            let message = if full.contains("EOF while parsing") {
                "the shape is empty; it needs at least a `resources` list".to_owned()
            } else {
                // Type names for `- core: 2` (the README's prose shorthand): passed in,
                // so that `validate` does not import the keywords that import it.
                let types: Vec<&str> = <ObjType as validate::Keyword>::SPELLINGS
                    .iter()
                    .map(|(name, _)| *name)
                    .collect();
                validate::explain_serde_message(&full, &types)
            };
            ShapeError::Invalid {
                origin: origin.to_owned(),
                location,
                message,
            }
        })
    }
}

/// A shape file's bytes as text (the host layer reads the file: `binder_host::shape_text`);
/// `origin` names it. Bytes that are not UTF-8 are refused at their line and column.
pub fn text_of(bytes: Vec<u8>, origin: &str) -> Result<String, ShapeError> {
    String::from_utf8(bytes).map_err(|e| {
        let (line, col) = line_col(&e.as_bytes()[..e.utf8_error().valid_up_to()]);
        ShapeError::Invalid {
            origin: origin.to_owned(),
            location: Some((line, col)),
            message: "not UTF-8 text; save the shape as UTF-8".into(),
        }
    })
}

/// 1-based line and column just after `bytes`.
fn line_col(bytes: &[u8]) -> (usize, usize) {
    let line = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
    let col = bytes.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(yaml: &str) -> String {
        Shape::from_yaml(yaml, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn slot_rules() {
        let e = refusal("resources: [{type: slot, with: [{type: slot}]}]");
        assert!(
            e.contains("resources[0].with[0]: a `slot` inside a `slot`"),
            "{e}"
        );
        let e = refusal("resources: [{type: slot}, {type: socket, with: [{type: task}]}]");
        assert!(
            e.contains("resources[1].with[0]: slots at two levels (also at resources[0])"),
            "{e}"
        );
        let e = refusal("resources: [{type: gpu, with: [{type: slot}]}]");
        assert!(e.contains("a `slot` inside a `gpu`"), "{e}");
        let e =
            refusal("options: {bind: gpu-local}\nresources: [{type: numa, with: [{type: slot}]}]");
        assert!(e.contains("`bind: gpu-local` with `slot` items"), "{e}");
        let e = refusal(
            "options: {pattern: interleave}\nresources: [{type: slot, with: [{type: pu}]}]",
        );
        assert!(e.contains("`pattern: interleave` with `slot` items"), "{e}");
        // Slots at one level under different parents are fine.
        let ok =
            "resources: [{type: socket, with: [{type: slot}]}, {type: numa, with: [{type: slot}]}]";
        assert!(Shape::from_yaml(ok, "t.yaml").unwrap().has_slots());
    }

    #[test]
    fn widths_and_device_types_parse() {
        let s = Shape::from_yaml("options: {bind: socket}\nresources: [{type: nic}]", "t").unwrap();
        assert_eq!(s.options.bind, Some(Bind::Width(ObjType::Package)));
        assert!(s.needs_nics() && s.needs_io() && !s.needs_gpus());
        for (word, ty) in [
            ("l3", ObjType::L3),
            ("numanode", ObjType::Numa),
            ("die", ObjType::Die),
            ("l2cache", ObjType::L2),
        ] {
            let s = Shape::from_yaml(
                &format!("options: {{bind: {word}}}\nresources: [{{type: core}}]"),
                "t",
            )
            .unwrap();
            assert_eq!(s.options.bind, Some(Bind::Width(ty)), "{word}");
        }
    }
}
