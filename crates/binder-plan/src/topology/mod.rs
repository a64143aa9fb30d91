//! Loads the node's hardware topology through hwloc: the host, an XML export or a
//! synthetic description. This is the only file that builds an hwloc topology.
//!
//! hwloc's default view is used on purpose: PUs outside the process's cgroup, offline PUs
//! and disallowed NUMA nodes are not in the tree, so every later stage sees only what a
//! task may run on (SEMANTICS §3). I/O discovery (PCI, OS devices) is off unless asked
//! for, because on a host it costs more than the rest of binder together.

mod ge_tree;
pub use ge_tree::to_xml;

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;

use crate::shape::ObjType;

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

/// A loaded topology and where it came from.
pub struct Topology {
    hw: hwlocality::Topology,
    source: Source,
    io: bool,
    /// The parsed string, for a [`Source::GeString`] (its lowercase threads are taken).
    ge: Option<crate::ge::Tree>,
    /// The GPUs the job may have (its allocation, less other jobs' GPUs).
    grant: crate::gpu::grant::Grant,
    /// For a topology with PUs taken out ([`Topology::without`]), which hwloc renumbers:
    /// each CPU-side object's logical index on the whole node, by its global persistent
    /// index (which restricting keeps), so that `core:7` names the same core in a plan, in
    /// `explain` and in a refusal whatever was taken out.
    whole_index: Option<std::sync::Arc<HashMap<u64, usize>>>,
}

/// The CPU-side object types a label may name.
const CPU_SIDE: [ObjectType; 10] = [
    ObjectType::Machine,
    ObjectType::Package,
    ObjectType::Die,
    ObjectType::Group,
    ObjectType::NUMANode,
    ObjectType::L3Cache,
    ObjectType::L2Cache,
    ObjectType::L1Cache,
    ObjectType::Core,
    ObjectType::PU,
];

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
        grant: crate::gpu::grant::Grant::default(),
        whole_index: None,
    })
}

/// The most PUs a synthetic description may ask for (1,048,576): hwloc would build every
/// object, so `pack:1000000 core:1000 pu:1000` must be refused before it is tried.
pub const MAX_SYNTHETIC_PUS: u64 = 1 << 20;

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

impl Topology {
    /// The node as a Grid Engine tree: threads taken by other jobs (a topology string's
    /// lowercase units) are marked.
    pub fn ge_tree(&self) -> crate::ge::Tree {
        match &self.ge {
            Some(tree) => {
                // The XML numbers cores in string order, so logical index = position.
                let mut tree = tree.clone();
                let mut core = 0;
                for node in &mut tree.nodes {
                    if node.letter.is_core() {
                        node.os = Some(core);
                        core += 1;
                    }
                }
                tree
            }
            None => ge_tree::tree_of(self),
        }
    }

    /// Whether this machine came from a Grid Engine topology string.
    pub fn is_ge_string(&self) -> bool {
        self.ge.is_some()
    }

    /// The same machine without the PUs `out` (OS numbers): taken by other jobs or
    /// reserved, as if outside the cgroup (SEMANTICS §3), so no later stage sees them.
    pub fn without(&self, out: &[usize]) -> Result<Topology, TopologyError> {
        use hwlocality::topology::editor::RestrictFlags;
        let mut keep = self.hw.allowed_cpuset().clone_target();
        for &pu in out {
            keep.unset(pu);
        }
        let whole_index = CPU_SIDE
            .iter()
            .flat_map(|&ty| self.hw.objects_with_type(ty))
            .map(|o| (o.global_persistent_index(), self.logical_index(o)))
            .collect();
        let mut hw = self.hw.clone();
        let source_desc = self.source.to_string();
        hw.edit(|editor| editor.restrict(&keep, RestrictFlags::empty()))
            .map_err(|e| TopologyError::Xml {
                source_desc,
                reason: format!("no PU left after taking out taken and reserved ones ({e})"),
            })?;
        Ok(Topology {
            hw,
            source: self.source.clone(),
            io: self.io,
            ge: self.ge.clone(),
            grant: self.grant.clone(),
            whole_index: Some(std::sync::Arc::new(whole_index)),
        })
    }

    /// `obj`'s logical index on the whole node, also when this topology has PUs taken out.
    pub fn logical_index(&self, obj: &TopologyObject) -> usize {
        self.whole_index
            .as_ref()
            .and_then(|m| m.get(&obj.global_persistent_index()).copied())
            .unwrap_or_else(|| obj.logical_index())
    }

    /// An object as hwloc-calc names it (`core:3`), by its logical index on the whole node.
    pub fn label(&self, obj: &TopologyObject) -> String {
        let name = match obj.object_type() {
            ObjectType::Machine => "machine",
            ObjectType::Package => "package",
            ObjectType::Die => "die",
            ObjectType::Group => "group",
            ObjectType::NUMANode => "numa",
            ObjectType::L3Cache => "l3cache",
            ObjectType::L2Cache => "l2cache",
            ObjectType::L1Cache => "l1cache",
            ObjectType::Core => "core",
            ObjectType::PU => "pu",
            _ => "object",
        };
        format!("{name}:{}", self.logical_index(obj))
    }

    /// The GPUs a plan on this topology may give out ([`crate::gpu::discover`]).
    pub fn gpu_grant(&self) -> &crate::gpu::grant::Grant {
        &self.grant
    }

    /// Restricts the GPUs a plan may give out to `grant` (SEMANTICS §9: the job's
    /// allocation, less what other jobs hold).
    pub fn set_gpu_grant(&mut self, grant: crate::gpu::grant::Grant) {
        self.grant = grant;
    }

    /// The hwloc topology itself.
    pub fn hw(&self) -> &hwlocality::Topology {
        &self.hw
    }

    /// Whether it was loaded with I/O devices (so GPUs can be looked for).
    pub fn has_io(&self) -> bool {
        self.io
    }

    /// Where it was loaded from.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The objects of a CPU type that hold at least one allowed PU, in hwloc logical order.
    ///
    /// NUMA nodes without CPUs (GPU memory, CXL, MCDRAM-only) have empty cpusets and so
    /// never appear. Devices and slots are not CPU objects: none are returned for them.
    pub fn objects(&self, kind: ObjType) -> Vec<&TopologyObject> {
        let Some(ty) = hwloc_type(kind) else {
            return Vec::new();
        };
        self.hw
            .objects_with_type(ty)
            .filter(|obj| obj.cpuset().is_some_and(|set| !set.is_empty()))
            .collect()
    }

    /// The objects of a CPU type that lie inside `parent` (by cpuset) and hold an allowed PU,
    /// in logical order. Walks `parent`'s subtree (its normal ancestor's, for a NUMA node,
    /// whose CPUs hang off the tree as memory children), so a nested request costs the size
    /// of its parent, not of the node: `core: all` > `pu: all` stays linear.
    pub fn objects_inside<'t>(
        &'t self,
        kind: ObjType,
        parent: &'t TopologyObject,
    ) -> Vec<&'t TopologyObject> {
        let (Some(ty), Some(within)) = (hwloc_type(kind), parent.cpuset()) else {
            return Vec::new();
        };
        let inside = |obj: &TopologyObject| {
            obj.cpuset()
                .is_some_and(|s| !s.is_empty() && within.includes(&*s))
        };
        if ty == ObjectType::NUMANode {
            // NUMA nodes are few and not on the normal tree: filter them all.
            return self
                .objects(kind)
                .into_iter()
                .filter(|o| inside(o))
                .collect();
        }
        let mut root = parent;
        while !root.object_type().is_normal() {
            match root.parent() {
                Some(p) => root = p,
                None => break,
            }
        }
        // An ancestor with the same cpuset lies inside too (SEMANTICS §3): the core of a
        // one-thread PU, the L2 of a one-core L2. Such a chain is short.
        let mut up = root;
        while let Some(p) = up.parent() {
            if p.cpuset().is_none_or(|s| *s != *within) {
                break;
            }
            if p.object_type() == ty {
                return vec![p];
            }
            up = p;
        }
        let mut found = Vec::new();
        let mut stack = vec![root];
        while let Some(obj) = stack.pop() {
            if obj.object_type() == ty && inside(obj) {
                found.push(obj);
                if ty != ObjectType::Group {
                    continue;
                }
            }
            // Children pushed in reverse so they pop in logical order.
            let children: Vec<&TopologyObject> = obj.normal_children().collect();
            stack.extend(children.into_iter().rev());
        }
        found.sort_by_key(|o| o.logical_index());
        found
    }

    /// For each allowed PU (by OS index), the object of `kind` that holds it: one pass over
    /// the objects, so mapping a cpuset to its cores costs its size, not the node's.
    pub fn pu_owners(&self, kind: ObjType) -> HashMap<usize, &TopologyObject> {
        let mut owners = HashMap::new();
        for obj in self.objects(kind) {
            if let Some(set) = obj.cpuset() {
                for pu in set.iter_set() {
                    owners.insert(usize::from(pu), obj);
                }
            }
        }
        owners
    }

    /// The PUs inside `obj`, in logical order.
    pub fn pus_of<'t>(&'t self, obj: &'t TopologyObject) -> Vec<&'t TopologyObject> {
        let Some(set) = obj.cpuset() else {
            return Vec::new();
        };
        self.hw
            .objects_with_type(ObjectType::PU)
            .filter(|pu| pu.is_inside_cpuset(&*set))
            .collect()
    }
}

/// The hwloc object type behind a shape type; `None` for devices and slots.
pub(crate) fn hwloc_type(kind: ObjType) -> Option<ObjectType> {
    Some(match kind {
        ObjType::Machine => ObjectType::Machine,
        ObjType::Package => ObjectType::Package,
        ObjType::Die => ObjectType::Die,
        ObjType::Group => ObjectType::Group,
        ObjType::Numa => ObjectType::NUMANode,
        ObjType::L3 => ObjectType::L3Cache,
        ObjType::L2 => ObjectType::L2Cache,
        ObjType::L1 => ObjectType::L1Cache,
        ObjType::Core => ObjectType::Core,
        ObjType::Pu => ObjectType::PU,
        ObjType::Gpu | ObjType::Nic | ObjType::Slot => return None,
    })
}

/// The PUs of the performance cores: hwloc's most performant CPU kind (the last in its
/// efficiency order), together with every kind of the same maximum frequency, where hwloc
/// reports one. Linux splits one core type into several kinds when their capacities differ
/// a little (NVIDIA GB10: five kinds, ten Cortex-X925 at 3.9 GHz in three of them, ten
/// A725 at 2.8 GHz in two), and a user asking for performance cores means all ten X925.
/// `None` when the node has one kind, none, or kinds hwloc could not rank: then every
/// core counts as a performance core.
pub fn performance_pus(hw: &hwlocality::Topology) -> Option<hwlocality::cpu::cpuset::CpuSet> {
    let kinds: Vec<_> = hw.cpu_kinds().ok()?.collect();
    if kinds.len() < 2 || kinds.iter().any(|k| k.efficiency.is_none()) {
        return None;
    }
    let frequency = |k: &hwlocality::cpu::kind::CpuKind<'_>| {
        k.infos
            .iter()
            .find(|i| i.name().to_bytes() == b"FrequencyMaxMHz")
            .and_then(|i| i.value().to_str().ok()?.parse::<u64>().ok())
    };
    let top = kinds.last()?;
    let mut set = top.cpuset.clone();
    if let Some(f) = frequency(top) {
        for k in &kinds[..kinds.len() - 1] {
            if frequency(k) == Some(f) {
                set |= &k.cpuset;
            }
        }
    }
    if set == *hw.cpuset() {
        return None;
    }
    Some(set)
}

/// The OS numbers of a cpuset, ascending.
pub fn cpus_of(set: &hwlocality::cpu::cpuset::CpuSet) -> Vec<usize> {
    set.iter_set().map(usize::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(desc: &str) -> Topology {
        load(&Source::Synthetic(desc.into()), false).expect("valid synthetic topology")
    }

    #[test]
    fn synthetic_counts() {
        let t = synthetic("pack:2 numa:2 core:4 pu:2");
        assert_eq!(t.objects(ObjType::Package).len(), 2);
        assert_eq!(t.objects(ObjType::Numa).len(), 4);
        assert_eq!(t.objects(ObjType::Core).len(), 16);
        assert_eq!(t.objects(ObjType::Pu).len(), 32);
        assert_eq!(t.objects(ObjType::Machine).len(), 1);
        assert!(t.objects(ObjType::L3).is_empty());
        let core = t.objects(ObjType::Core)[3];
        assert_eq!(t.pus_of(core).len(), 2);
    }

    #[test]
    fn objects_inside_a_parent_by_tree_walk_and_by_filter_agree() {
        // The walk must find exactly what filtering every object by cpuset finds.
        let t = synthetic("pack:2 numa:2 l3:1 core:3 pu:2");
        for parent_kind in [
            ObjType::Machine,
            ObjType::Package,
            ObjType::Numa,
            ObjType::L3,
            ObjType::Core,
        ] {
            for parent in t.objects(parent_kind) {
                let within = parent.cpuset().unwrap();
                for kind in [
                    ObjType::Package,
                    ObjType::Numa,
                    ObjType::L3,
                    ObjType::Core,
                    ObjType::Pu,
                ] {
                    let walk: Vec<usize> = t
                        .objects_inside(kind, parent)
                        .iter()
                        .map(|o| o.logical_index())
                        .collect();
                    let filter: Vec<usize> = t
                        .objects(kind)
                        .iter()
                        .filter(|o| within.includes(&*o.cpuset().unwrap()))
                        .map(|o| o.logical_index())
                        .collect();
                    assert_eq!(walk, filter, "{kind:?} inside {parent_kind:?}");
                }
            }
        }
    }

    #[test]
    fn bad_synthetic_is_an_error() {
        let err = load(&Source::Synthetic("pack:two".into()), false)
            .err()
            .expect("rejected");
        assert!(
            err.to_string()
                .contains("invalid synthetic topology \"pack:two\""),
            "{err}"
        );
    }

    #[test]
    fn huge_synthetic_topologies_are_refused_before_hwloc_builds_them() {
        let err = load(
            &Source::Synthetic("pack:1000000 core:1000 pu:1000".into()),
            false,
        )
        .err()
        .expect("refused");
        assert!(err.to_string().contains("more than 1048576 PUs"), "{err}");
        assert!(load(&Source::Synthetic("pack:2 core:64 pu:2".into()), false).is_ok());
    }

    #[test]
    fn missing_xml_is_an_error() {
        let err = load(&Source::Xml("/nonexistent/topo.xml".into()), false)
            .err()
            .expect("rejected");
        assert_eq!(
            err.to_string(),
            "cannot load topology XML `/nonexistent/topo.xml`: no such file; export one with `lstopo --of xml FILE`"
        );
    }

    #[test]
    fn host_loads() {
        let t = load(&Source::Host, false).expect("host topology");
        assert!(!t.objects(ObjType::Pu).is_empty());
        assert_eq!(t.source().to_string(), "this host");
    }
}
