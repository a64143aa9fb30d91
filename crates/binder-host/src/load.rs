//! Reading what the planning library takes as values: a topology from where it is (this
//! host through hwloc's discovery, or an XML file; a synthetic description or a Grid Engine
//! string the library builds itself) and a shape file.

use binder_core::launch::LaunchError;
use std::path::{Path, PathBuf};

use binder_plan::shape::{Shape, ShapeError, MAX_SHAPE_BYTES};
use binder_plan::topology::{Source, Topology, TopologyError};
use binder_plan::PlanError;

/// The largest XML export read (64 MiB): a node with thousands of PCI functions exports a
/// few MiB; a bigger file is not a topology, and is never read into memory whole.
pub const MAX_XML_BYTES: usize = 64 << 20;

/// Loads the topology of `source`; `io` turns on PCI and OS-device discovery (GPUs, NICs).
///
/// On the host, hwloc's x86 CPUID backend is excluded: on Linux it only adds CPU model
/// and kind info on top of sysfs, and to read it hwloc migrates the thread onto every PU
/// in turn, which costs ~0.1 ms per PU on every task of every job. hwloc's own input
/// variables are bounded first (`HWLOC_XMLFILE`, `HWLOC_SYNTHETIC`); no variable is written here, so
/// threads may load topologies at the same time.
pub fn load(source: &Source, io: bool) -> Result<Topology, TopologyError> {
    match source {
        Source::Host => {
            hwloc_env_inputs()?;
            let hw = binder_plan::topology::host_builder(io)?
                .without_component("x86")
                .map_err(|e| TopologyError::Host(e.to_string()))?
                .build()
                .map_err(|e| TopologyError::Host(e.to_string()))?;
            Ok(Topology::from_hwloc(hw, Source::Host, io))
        }
        Source::Xml(path) => {
            let text = xml_text(source, path)?;
            Topology::from_xml(&text, path.clone(), io)
        }
        Source::Synthetic(desc) => Topology::from_synthetic(desc, io),
        Source::GeString(text) => Topology::from_ge_string(text, io),
    }
}

/// hwloc reads `HWLOC_XMLFILE` and `HWLOC_SYNTHETIC` itself when it discovers "this
/// host", and reads them without bounds: `/dev/zero` grows without end, a FIFO blocks, a
/// description of 10^12 PUs builds them all, an XML without its complete sets crashes it
/// (SEMANTICS §13.3). They are held to what `--topology` and `--synthetic` are held to
/// before hwloc sees them (the variables are read, never written: threads may still load
/// topologies at the same time).
fn hwloc_env_inputs() -> Result<(), TopologyError> {
    if let Some(path) = std::env::var_os("HWLOC_XMLFILE").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        let shown = binder_core::text::printable(&path.display().to_string(), 120);
        let source = Source::Xml(PathBuf::from(format!("HWLOC_XMLFILE={shown}")));
        let text = xml_text(&source, &path)?;
        binder_plan::topology::check_xml(&text).map_err(|reason| TopologyError::Xml {
            source_desc: source.to_string(),
            reason,
        })?;
    }
    if let Some(desc) = std::env::var_os("HWLOC_SYNTHETIC").filter(|d| !d.is_empty()) {
        let desc = desc.to_string_lossy();
        binder_plan::topology::check_synthetic(&desc).map_err(|e| match e {
            TopologyError::Synthetic { desc, reason } => TopologyError::Synthetic {
                desc: format!("HWLOC_SYNTHETIC={desc}"),
                reason,
            },
            other => other,
        })?;
    }
    Ok(())
}

/// Loads the topology `shape` needs from `source`: with I/O discovery only when GPUs or
/// NICs are involved, because on a host that costs more than the rest of binder together.
pub fn for_shape(
    shape: &Shape,
    source: &Source,
    gpus_per_task: Option<usize>,
) -> Result<Topology, PlanError> {
    let io = shape.needs_io() || gpus_per_task.is_some();
    Ok(load(source, io)?)
}

/// This host's topology as `shape` needs it, for a plugin inside a launcher's process
/// (`whose` environment the hwloc variables came from, for the refusal): refused when
/// `HWLOC_XMLFILE` or `HWLOC_SYNTHETIC` describe another machine, whose CPU numbers would
/// bind the task somewhere else.
pub fn plugin_host<E: From<PlanError> + From<LaunchError>>(
    shape: &Shape,
    whose: &str,
) -> Result<Topology, E> {
    let t = for_shape(shape, &Source::Host, None)?;
    if !t.is_this_system() {
        return Err(LaunchError::NotThisSystem {
            vars: format!("HWLOC_XMLFILE or HWLOC_SYNTHETIC in {whose} environment"),
        }
        .into());
    }
    Ok(t)
}

/// The text of the XML export at `path`: a regular file (hwloc would block on a FIFO and
/// read a device forever; what was opened is checked, not the path) of at most
/// [`MAX_XML_BYTES`], in UTF-8.
fn xml_text(source: &Source, path: &Path) -> Result<String, TopologyError> {
    let xml_error = |reason: String| TopologyError::Xml {
        source_desc: source.to_string(),
        reason,
    };
    let bytes = binder_core::input::read_bounded(path, MAX_XML_BYTES).map_err(|why| {
        xml_error(if why.starts_with("it is a directory") {
            "it is a directory; give the XML file inside it".into()
        } else if why.starts_with("no such file") {
            "no such file".into()
        } else {
            why
        })
    })?;
    String::from_utf8(bytes).map_err(|e| {
        xml_error(format!(
            "it is not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// The text of the shape file at `path`: a regular file (a FIFO or a device is never
/// read: a FIFO without a writer blocks forever; what was opened is checked, not the path,
/// which may be swapped between a look and the open) of at most [`MAX_SHAPE_BYTES`], in
/// UTF-8. The path is shown escaped in refusals: a name may hold control bytes (ESC, BEL)
/// that must not reach a terminal raw.
pub fn shape_text(path: &Path) -> Result<String, ShapeError> {
    let shown = binder_core::text::printable(&path.display().to_string(), 200);
    let bytes = binder_core::input::read_bounded(path, MAX_SHAPE_BYTES).map_err(|why| {
        let reason = if why.starts_with("it is a directory") {
            "it is a directory; give the YAML file inside it".into()
        } else if why.starts_with("it is larger") {
            format!(
                "it is larger than {} KiB; a shape is a few lines of YAML",
                MAX_SHAPE_BYTES / 1024
            )
        } else {
            why
        };
        ShapeError::Read {
            path: shown.clone(),
            reason,
        }
    })?;
    binder_plan::shape::text_of(bytes, &shown)
}

/// The shape in the file at `path` ([`shape_text`]), parsed; the path names it in refusals.
pub fn shape_file(path: &Path) -> Result<Shape, ShapeError> {
    Shape::from_yaml(&shape_text(path)?, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_xml_is_reported() {
        let err = load(&Source::Xml("/nonexistent/topo.xml".into()), false)
            .err()
            .expect("a missing file fails");
        assert_eq!(
            err.to_string(),
            "cannot load topology XML `/nonexistent/topo.xml`: no such file; export one with `lstopo --of xml FILE`"
        );
    }

    #[test]
    fn host_topology_loads() {
        let t = load(&Source::Host, false).expect("host topology");
        assert!(t.is_this_system());
        assert_eq!(t.source().to_string(), "this host");
        assert!(!t.allowed().is_empty());
    }
}
