//! Building an hwloc topology from a value: an XML export's text, a synthetic description
//! or a Grid Engine topology string. This is the only file that builds one; this host's
//! topology and XML files are read by the host layer (`binder_host::load`), which hands
//! them in (`Topology::from_xml`, `Topology::from_hwloc`).

use std::fmt;
use std::path::PathBuf;

use hwlocality::topology::builder::{TopologyBuilder, TypeFilter};

use super::{ge_tree, Topology};

/// Where the topology comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The machine binder runs on.
    Host,
    /// An hwloc XML export (`lstopo --of xml`).
    Xml(PathBuf),
    /// An hwloc synthetic description such as `"pack:2 numa:2 core:8 pu:2"`.
    Synthetic(String),
    /// A Grid Engine topology string such as `NSXCCccSXCCCC` (SEMANTICS §12): lowercase
    /// units are taken by other jobs.
    GeString(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Host => f.write_str("this host"),
            Source::Xml(path) => write!(f, "XML `{}`", path.display()),
            Source::Synthetic(desc) => write!(f, "synthetic \"{desc}\""),
            Source::GeString(text) => write!(
                f,
                "topology string {}",
                binder_core::text::clip(text, binder_core::text::QUOTE_MAX)
            ),
        }
    }
}

/// Why a topology could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The XML file is missing or hwloc rejected it.
    #[error(
        "cannot load topology {source_desc}: {reason}; export one with `lstopo --of xml FILE`"
    )]
    Xml {
        /// The source, for the message.
        source_desc: String,
        /// hwloc's reason.
        reason: String,
    },
    /// hwloc rejected the synthetic description.
    #[error("invalid synthetic topology \"{desc}\": {reason}; write levels like \"pack:2 numa:2 core:8 pu:2\"")]
    Synthetic {
        /// The description as given.
        desc: String,
        /// hwloc's reason.
        reason: String,
    },
    /// A topology string that cannot be read.
    #[error(transparent)]
    GeString(#[from] crate::ge::GeError),
    /// Nothing is left of the node once the job's allocation, reservations or other jobs'
    /// units are taken out: a statement about the node, not about its XML.
    #[error("{source_desc}: {why}")]
    NothingLeft {
        /// The source, for the message.
        source_desc: String,
        /// What took every PU, and what to change.
        why: String,
    },
    /// hwloc could not discover the host.
    #[error("cannot discover this host's topology with hwloc: {0}")]
    Host(String),
}

impl Topology {
    /// The topology in an hwloc XML export's `text` (`lstopo --of xml`); `path` names it
    /// in messages. Reading the file is the host layer's (`binder_host::load`): this
    /// library takes values.
    pub fn from_xml(text: &str, path: PathBuf, io: bool) -> Result<Topology, TopologyError> {
        let source = Source::Xml(path);
        let xml_error = |reason: String| TopologyError::Xml {
            source_desc: source.to_string(),
            reason,
        };
        check_xml(text).map_err(xml_error)?;
        // hwloc says "the topology data string"; the user gave a file.
        let builder = builder(io)?
            .from_xml(text)
            .map_err(|_| xml_error("hwloc rejected its content as invalid".into()))?;
        let hw = builder.build().map_err(|e| xml_error(e.to_string()))?;
        Ok(Topology::of(hw, source, io, None))
    }

    /// The topology hwloc's synthetic description `desc` describes, such as
    /// `"pack:2 numa:2 core:8 pu:2"` (at most 1,048,576 PUs: hwloc would build every object).
    pub fn from_synthetic(desc: &str, io: bool) -> Result<Topology, TopologyError> {
        let invalid = |reason: String| TopologyError::Synthetic {
            desc: desc.to_owned(),
            reason,
        };
        synthetic_size(desc)?;
        let hw = builder(io)?
            .from_synthetic(desc)
            .map_err(|e| invalid(e.to_string()))?
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Topology::of(
            hw,
            Source::Synthetic(desc.to_owned()),
            io,
            None,
        ))
    }

    /// The machine a Grid Engine topology string such as `NSXCCccSXCCCC` describes
    /// (SEMANTICS §12); its lowercase units are taken by other jobs.
    pub fn from_ge_string(text: &str, io: bool) -> Result<Topology, TopologyError> {
        let source = Source::GeString(text.to_owned());
        let tree = crate::ge::Tree::parse(text)?;
        let xml_error = |reason: String| TopologyError::Xml {
            source_desc: source.to_string(),
            reason,
        };
        let hw = builder(io)?
            .from_xml(&ge_tree::to_xml(&tree))
            .map_err(|e| xml_error(e.to_string()))?
            .build()
            .map_err(|e| xml_error(e.to_string()))?;
        Ok(Topology::of(hw, source, io, Some(tree)))
    }

    /// A topology hwloc built for the host layer (this host, discovered with
    /// [`host_builder`]'s settings), as binder's.
    #[cfg(feature = "hwloc")]
    pub fn from_hwloc(hw: hwlocality::Topology, source: Source, io: bool) -> Topology {
        Topology::of(hw, source, io, None)
    }

    fn of(
        hw: hwlocality::Topology,
        source: Source,
        io: bool,
        ge: Option<crate::ge::Tree>,
    ) -> Topology {
        Topology {
            hw,
            source,
            io,
            ge,
            whole_index: None,
            whole: None,
        }
    }
}

/// hwloc's topology builder as binder loads every topology: `io` turns on PCI and
/// OS-device discovery (for GPUs and NICs).
///
/// The whole CPU side is always kept: dropping cache levels would be cheaper, but it can
/// change logical indexes (and the object GPUs hang from), and with them the plan. No
/// environment variable is read or written here, so threads may load topologies at the
/// same time.
pub(crate) fn builder(io: bool) -> Result<TopologyBuilder, TopologyError> {
    let builder = hwlocality::Topology::builder();
    if !io {
        return Ok(builder);
    }
    builder
        .with_io_type_filter(TypeFilter::KeepAll)
        .map_err(|e| TopologyError::Host(e.to_string()))
}

/// hwloc's topology builder as binder loads every topology (`io`: PCI and OS devices), for
/// the host layer, which discovers this host with it.
#[cfg(feature = "hwloc")]
pub fn host_builder(io: bool) -> Result<TopologyBuilder, TopologyError> {
    builder(io)
}

/// Refuses what libhwloc 2.9 crashes on rather than rejects: an `<object>` with a
/// `cpuset` but no `complete_cpuset`, or a `nodeset` but no `complete_nodeset`, is a
/// segmentation fault in its XML import (a 1 KB file another user may point
/// `HWLOC_XMLFILE` at), which would end the task's launch without a word. Every export
/// of hwloc 1.x and 2.x writes both sets, so no real export is refused.
pub fn check_xml(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(at) = rest.find("<object") {
        rest = &rest[at + "<object".len()..];
        let end = rest.find('>').unwrap_or(rest.len());
        let tag = &rest[..end];
        let has = |attr: &str| {
            tag.match_indices(attr)
                .any(|(i, _)| i > 0 && tag.as_bytes()[i - 1].is_ascii_whitespace())
        };
        for (set, complete) in [
            ("cpuset=", "complete_cpuset="),
            ("nodeset=", "complete_nodeset="),
        ] {
            if has(set) && !has(complete) {
                return Err(format!(
                    "an <object> has a {} but no {} (hwloc 2.9 would crash on it)",
                    set.trim_end_matches('='),
                    complete.trim_end_matches('=')
                ));
            }
        }
        rest = &rest[end..];
    }
    Ok(())
}

/// Bounds what hwloc reads from its own environment when it discovers "this host"
/// (`HWLOC_SYNTHETIC`, checked as `--synthetic` is); the caller reads `HWLOC_XMLFILE`'s
/// file as `--topology` is read and hands its text to [`check_xml`].
pub fn check_synthetic(desc: &str) -> Result<(), TopologyError> {
    synthetic_size(desc)
}

/// The most PUs a synthetic description may ask for (1,048,576): hwloc would build every
/// object, so `pack:1000000 core:1000 pu:1000` must be refused before it is tried.
pub(crate) const MAX_SYNTHETIC_PUS: u64 = 1 << 20;

/// Checks the product of the level counts of a synthetic description (`type:count`
/// tokens; attributes in parentheses are skipped) against [`MAX_SYNTHETIC_PUS`].
fn synthetic_size(desc: &str) -> Result<(), TopologyError> {
    let mut pus: u64 = 1;
    for token in desc.split_whitespace() {
        let Some((_, count)) = token.split_once(':') else {
            continue;
        };
        let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
        if digits.is_empty() {
            continue; // not a count: hwloc itself says what is wrong
        }
        let n = digits.parse::<u64>().unwrap_or(u64::MAX);
        pus = pus.saturating_mul(n.max(1));
    }
    if pus > MAX_SYNTHETIC_PUS {
        return Err(TopologyError::Synthetic {
            desc: binder_core::text::clip(desc, binder_core::text::QUOTE_MAX),
            reason: format!("it describes more than {MAX_SYNTHETIC_PUS} PUs"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_xml;

    #[test]
    fn objects_without_their_complete_sets_are_refused() {
        let ok = r#"<topology><object type="Machine" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1"><object type="PU" os_index="0" cpuset="0x1" complete_cpuset="0x1"/></object></topology>"#;
        assert_eq!(check_xml(ok), Ok(()));
        let no_complete = ok.replace(r#" complete_cpuset="0x1""#, "");
        assert!(check_xml(&no_complete)
            .unwrap_err()
            .contains("complete_cpuset"));
        let no_nodes = ok.replace(r#" complete_nodeset="0x1""#, "");
        assert!(check_xml(&no_nodes)
            .unwrap_err()
            .contains("complete_nodeset"));
        // Names that merely end in "cpuset=" are other attributes.
        assert_eq!(
            check_xml(r#"<object type="PU" allowed_cpuset="0x1"/>"#),
            Ok(())
        );
        assert_eq!(check_xml("not xml at all"), Ok(()));
    }
}
