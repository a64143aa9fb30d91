//! Building an hwloc topology from where it comes from: the host, an XML export, a
//! synthetic description or a Grid Engine topology string. This is the only file that
//! builds one.

use std::fmt;
use std::path::PathBuf;

use hwlocality::topology::builder::TypeFilter;

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

/// Loads the topology from `source`; `io` turns on PCI and OS-device discovery (for GPUs).
///
/// The whole CPU side is always kept: dropping cache levels would be cheaper, but it can
/// change logical indexes (and the object GPUs hang from), and with them the plan.
/// No environment variable is read or written here, so threads may load topologies at
/// the same time. On the host, hwloc's x86 CPUID backend is excluded: on Linux it only
/// adds CPU model and kind info on top of sysfs, and to read it hwloc migrates the thread
/// onto every PU in turn, which costs ~0.1 ms per PU on every task of every job.
pub fn load(source: &Source, io: bool) -> Result<Topology, TopologyError> {
    let mut builder = hwlocality::Topology::builder();
    if io {
        builder = builder
            .with_io_type_filter(TypeFilter::KeepAll)
            .map_err(|e| TopologyError::Host(e.to_string()))?;
    }
    let mut ge = None;
    let builder = match source {
        Source::GeString(text) => {
            let tree = crate::ge::Tree::parse(text)?;
            let xml = ge_tree::to_xml(&tree);
            ge = Some(tree);
            builder.from_xml(&xml).map_err(|e| TopologyError::Xml {
                source_desc: source.to_string(),
                reason: e.to_string(),
            })?
        }
        Source::Host => builder
            .without_component("x86")
            .map_err(|e| TopologyError::Host(e.to_string()))?,
        Source::Xml(path) => {
            let xml_error = |reason: String| TopologyError::Xml {
                source_desc: source.to_string(),
                reason,
            };
            if path.is_dir() {
                return Err(xml_error(
                    "it is a directory; give the XML file inside it".into(),
                ));
            }
            if !path.exists() {
                return Err(xml_error("no such file".into()));
            }
            // hwloc would block on a FIFO and read a device forever.
            binder_core::input::regular(path).map_err(xml_error)?;
            builder
                .from_xml_file(path)
                .map_err(|e| xml_error(e.to_string()))?
        }
        Source::Synthetic(desc) => {
            synthetic_size(desc)?;
            builder
                .from_synthetic(desc)
                .map_err(|e| TopologyError::Synthetic {
                    desc: desc.clone(),
                    reason: e.to_string(),
                })?
        }
    };
    let hw = builder.build().map_err(|e| match source {
        Source::Host => TopologyError::Host(e.to_string()),
        Source::Xml(_) | Source::GeString(_) => TopologyError::Xml {
            source_desc: source.to_string(),
            reason: e.to_string(),
        },
        Source::Synthetic(desc) => TopologyError::Synthetic {
            desc: desc.clone(),
            reason: e.to_string(),
        },
    })?;
    Ok(Topology {
        hw,
        source: source.clone(),
        io,
        ge,
        whole_index: None,
    })
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
