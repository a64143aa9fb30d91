//! The node's hardware topology through hwloc (an XML export, a synthetic description, a
//! Grid Engine string, or this host as the host layer discovered it; `load.rs` builds it)
//! and the questions every stage asks of it.
//!
//! hwloc's default view is used on purpose: PUs outside the process's cgroup, offline PUs
//! and disallowed NUMA nodes are not in the tree, so every later stage sees only what a
//! task may run on (SEMANTICS §3). I/O discovery (PCI, OS devices) is off unless asked
//! for, because on a host it costs more than the rest of binder together.

mod ge_tree;
mod load;
#[cfg(feature = "hwloc")]
pub use load::host_builder;
pub use load::{check_synthetic, check_xml, Source, TopologyError};

use std::collections::HashMap;

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::cpuset::CpuSet;
use crate::shape::ObjType;

/// A loaded topology and where it came from.
pub struct Topology {
    hw: hwlocality::Topology,
    source: Source,
    io: bool,
    /// The parsed string, for a [`Source::GeString`] (its lowercase threads are taken).
    ge: Option<crate::ge::Tree>,
    /// For a topology with PUs taken out ([`Topology::without`]), which hwloc renumbers:
    /// each CPU-side object's logical index on the whole node, by its global persistent
    /// index (which restricting keeps), so that `core:7` names the same core in a plan, in
    /// `explain` and in a refusal whatever was taken out.
    whole_index: Option<std::sync::Arc<HashMap<u64, usize>>>,
    /// For a topology with I/O that was cut down (to the job's allocation, around other
    /// jobs), the whole node's as loaded: GPUs are found and numbered on it (SEMANTICS §9:
    /// a GPU's name is the node's, whatever the job's CPUs), where hwloc's restrict would
    /// have dropped those near no CPU left and numbered the rest from 0.
    whole: Option<std::sync::Arc<hwlocality::Topology>>,
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
    pub(crate) fn is_ge_string(&self) -> bool {
        self.ge.is_some()
    }

    /// The same machine without the PUs `out` (OS numbers): taken by other jobs or
    /// reserved, as if outside the cgroup (SEMANTICS §3), so no later stage sees them.
    pub fn without(&self, out: &[usize]) -> Result<Topology, TopologyError> {
        let mut keep = self.allowed();
        for &pu in out {
            keep.unset(pu);
        }
        self.restricted(
            keep,
            "every allowed PU is reserved (`reserve:`, the site file) or taken by other jobs; \
             reserve less, or run when the node has room",
        )
    }

    /// The PUs (OS numbers, ascending) of the cores with these logical indexes, as a
    /// launcher that counts cores names them (Flux's R: `resources.cores` is hwloc's
    /// logical core index); an index past the last core adds nothing. `instance`: the CPUs
    /// of the instance whose restricted topology numbers them (SEMANTICS §4.2), `None`:
    /// the node's numbering.
    pub fn cores_pus(&self, cores: &[usize], instance: Option<&[usize]>) -> Vec<usize> {
        let instance: Option<CpuSet> = instance.map(|c| c.iter().copied().collect());
        // An instance restricted to its CPUs (hwloc's restrict, as Flux's resource module
        // loads its topology) keeps the cores that have one of them, in the node's order,
        // and numbers them from 0.
        let all: Vec<CpuSet> = self
            .hw
            .objects_with_type(ObjectType::Core)
            .map(cpus)
            .filter(|set| instance.as_ref().is_none_or(|i| set.intersects(i)))
            .collect();
        let mut pus: Vec<usize> = cores
            .iter()
            .filter_map(|&i| all.get(i))
            .flat_map(|set| set.to_vec())
            .filter(|pu| instance.as_ref().is_none_or(|i| i.is_set(*pu)))
            .collect();
        pus.sort_unstable();
        pus.dedup();
        pus
    }

    /// The same machine inside the job's allocation (SEMANTICS §4.1): only the allowed
    /// PUs among `cpus` (OS numbers, `None`: all), as if the cgroup were that narrow,
    /// keeping the node's numbering in labels; `self` when `cpus` covers the allowed set.
    pub fn within(self, cpus: Option<&[usize]>) -> Result<Topology, TopologyError> {
        let Some(cpus) = cpus else { return Ok(self) };
        let allowed = self.allowed();
        let keep: CpuSet = cpus
            .iter()
            .copied()
            .filter(|&pu| allowed.is_set(pu))
            .collect();
        if keep == allowed {
            return Ok(self);
        }
        let why = format!(
            "the job's allocation on this node (cpus {}) holds none of the allowed cpus {}",
            binder_core::cpulist::cpu_list(cpus),
            allowed
        );
        self.restricted(keep, &why)
    }

    /// This machine restricted to `keep` (hwloc's restrict), labels kept on the whole
    /// node's numbering; `why` explains an empty `keep`.
    fn restricted(&self, keep: CpuSet, why: &str) -> Result<Topology, TopologyError> {
        use hwlocality::topology::editor::RestrictFlags;
        let whole_index = CPU_SIDE
            .iter()
            .flat_map(|&ty| self.hw.objects_with_type(ty))
            .map(|o| (o.global_persistent_index(), self.logical_index(o)))
            .collect();
        let source_desc = self.source.to_string();
        if !keep.intersects(&self.allowed()) {
            return Err(TopologyError::NothingLeft {
                source_desc,
                why: why.to_owned(),
            });
        }
        let whole = self.io.then(|| {
            self.whole
                .clone()
                .unwrap_or_else(|| std::sync::Arc::new(self.hw.clone()))
        });
        let mut hw = self.hw.clone();
        hw.edit(|editor| editor.restrict(&to_hw(&keep), RestrictFlags::empty()))
            .map_err(|e| TopologyError::Xml {
                source_desc,
                reason: format!("{why} ({e})"),
            })?;
        Ok(Topology {
            hw,
            source: self.source.clone(),
            io: self.io,
            ge: self.ge.clone(),
            whole_index: Some(std::sync::Arc::new(whole_index)),
            whole,
        })
    }

    /// The whole node's hwloc topology, before any cut to the job's allocation or around
    /// other jobs: where GPUs are found and numbered (the node's numbering).
    pub(crate) fn whole_hw(&self) -> &hwlocality::Topology {
        self.whole.as_deref().unwrap_or(&self.hw)
    }

    /// `obj`'s logical index on the whole node, also when this topology has PUs taken out.
    pub(crate) fn logical_index(&self, obj: &TopologyObject) -> usize {
        self.whole_index
            .as_ref()
            .and_then(|m| m.get(&obj.global_persistent_index()).copied())
            .unwrap_or_else(|| obj.logical_index())
    }

    /// An object as hwloc-calc names it (`core:3`), by its logical index on the whole node.
    pub(crate) fn label(&self, obj: &TopologyObject) -> String {
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

    /// The hwloc topology itself: for this crate's stages, and for the host layer
    /// (`binder-host` binds through it) with the `hwloc` feature. Without the feature no
    /// hwlocality type is in this library's public surface.
    #[cfg(feature = "hwloc")]
    pub fn hw(&self) -> &hwlocality::Topology {
        &self.hw
    }

    /// The hwloc topology itself, for this crate's stages.
    #[cfg(not(feature = "hwloc"))]
    pub(crate) fn hw(&self) -> &hwlocality::Topology {
        &self.hw
    }

    /// The PUs a task may run on (hwloc's allowed cpuset: the process's cgroup, minus
    /// what [`Topology::without`] and [`Topology::within`] took out).
    pub fn allowed(&self) -> CpuSet {
        from_hw(&self.hw.allowed_cpuset())
    }

    /// Every PU of the machine, allowed or not (hwloc's complete cpuset).
    pub fn complete(&self) -> CpuSet {
        from_hw(&self.hw.complete_cpuset())
    }

    /// Whether the topology is this host's (hwloc's `is_this_system`): binding from one
    /// that is not would bind to another machine's numbers.
    pub fn is_this_system(&self) -> bool {
        self.hw.is_this_system()
    }

    /// The machine's host name as hwloc recorded it (`HostName`), if it did.
    pub fn host_name(&self) -> Option<String> {
        self.hw
            .root_object()
            .info("HostName")
            .map(|h| h.to_string_lossy().into_owned())
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
    pub(crate) fn objects(&self, kind: ObjType) -> Vec<&TopologyObject> {
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
    pub(crate) fn objects_inside<'t>(
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
    pub(crate) fn pu_owners(&self, kind: ObjType) -> HashMap<usize, &TopologyObject> {
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
pub(crate) fn performance_pus(hw: &hwlocality::Topology) -> Option<CpuSet> {
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
    Some(from_hw(&set))
}

/// The NUMA nodes (OS numbers, ascending) `policy` uses for a task on `cpus`, of those
/// `memory` names (SEMANTICS §11): `near` are the nodes holding the CPUs (hwloc's nodeset
/// of the cpuset: on KNL in flat mode a cluster's DDR and MCDRAM), `hbm`, `dram` and
/// `cxl` the near ones of that kind by hwloc's subtype, `all` every node, a list those
/// nodes. `preferred` keeps the first (Linux prefers one node). An empty answer is an
/// error that says what the node has near the CPUs.
pub fn memory_nodes(
    topology: &Topology,
    cpus: &CpuSet,
    policy: binder_core::view::MemPolicy,
    memory: &binder_core::view::MemNodes,
) -> Result<Vec<usize>, String> {
    use binder_core::view::MemNodes;
    let near = hwlocality::memory::nodeset::NodeSet::from_cpuset(topology.hw(), &to_hw(cpus));
    let nodes: Vec<(usize, MemKind, &str)> = topology
        .hw
        .objects_with_type(ObjectType::NUMANode)
        .filter_map(|n| {
            let subtype = n.subtype().and_then(|s| s.to_str().ok()).unwrap_or("");
            Some((n.os_index()?, MemKind::of(subtype), subtype))
        })
        .collect();
    let is_near = |os: usize| near.is_set(os);
    let of_kind = |kind: MemKind| -> Vec<usize> {
        nodes
            .iter()
            .filter(|(os, k, _)| is_near(*os) && *k == kind)
            .map(|n| n.0)
            .collect()
    };
    let mut list: Vec<usize> = match memory {
        MemNodes::Near => nodes
            .iter()
            .map(|n| n.0)
            .filter(|os| is_near(*os))
            .collect(),
        MemNodes::Hbm => of_kind(MemKind::Hbm),
        MemNodes::Dram => of_kind(MemKind::Dram),
        MemNodes::Cxl => of_kind(MemKind::Cxl),
        MemNodes::All => nodes.iter().map(|n| n.0).collect(),
        MemNodes::Os(list) => {
            let missing: Vec<usize> = list
                .iter()
                .copied()
                .filter(|os| !nodes.iter().any(|n| n.0 == *os))
                .collect();
            if !missing.is_empty() {
                let mut have: Vec<usize> = nodes.iter().map(|n| n.0).collect();
                have.sort_unstable();
                return Err(format!(
                    "`memory: {}` names NUMA node(s) {} that the node does not have or the job may not use (it has {})",
                    memory.name(),
                    binder_core::cpulist::cpu_list(&missing),
                    binder_core::cpulist::cpu_list(&have)
                ));
            }
            list.clone()
        }
    };
    list.sort_unstable();
    list.dedup();
    if list.is_empty() {
        let described: Vec<String> = nodes
            .iter()
            .filter(|(os, _, _)| is_near(*os))
            .map(|(os, _, subtype)| match *subtype {
                "" => format!("{os} (no kind named)"),
                kind => format!("{os} ({kind})"),
            })
            .collect();
        let mut allowed: Vec<usize> = nodes.iter().map(|n| n.0).collect();
        allowed.sort_unstable();
        // `near` itself failed where the task's CPUs lie in no node the job may use (a
        // NUMA node taken away by the cgroup): only numbers help then.
        let instead = if described.is_empty() {
            format!(
                "give the numbers of nodes the job may use ({}), or drop `membind`",
                binder_core::cpulist::cpu_list(&allowed)
            )
        } else if memory.name() == "near" {
            "give the nodes' numbers".to_owned()
        } else {
            "use `memory: near`, or give the nodes' numbers".to_owned()
        };
        return Err(format!(
            "`memory: {}` finds no such NUMA node near cpus {}: near them hwloc has node {}; {instead}",
            memory.name(),
            cpus,
            if described.is_empty() { "none the job may use".to_owned() } else { described.join(", ") }
        ));
    }
    if policy == binder_core::view::MemPolicy::Preferred {
        list.truncate(1);
    }
    Ok(list)
}

/// A NUMA node's kind by hwloc's subtype (hwloc 2.10's memory tiers name `DRAM`, `HBM`,
/// `SPM`, `NVM`, `GPUMemory`, `CXL-DRAM`, `CXL-NVM`; 2.9 names KNL's `MCDRAM` and
/// POWER's `GPUMemory`): a node with no subtype is ordinary memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemKind {
    Dram,
    Hbm,
    Cxl,
    Other,
}

impl MemKind {
    fn of(subtype: &str) -> MemKind {
        match subtype.to_ascii_uppercase().as_str() {
            "" | "DRAM" => MemKind::Dram,
            "HBM" | "MCDRAM" => MemKind::Hbm,
            s if s.starts_with("CXL") => MemKind::Cxl,
            _ => MemKind::Other,
        }
    }
}

/// An object's CPUs in binder's set (empty for an object without CPUs: I/O, Misc).
pub(crate) fn cpus(obj: &TopologyObject) -> CpuSet {
    obj.cpuset().map(|s| from_hw(&s)).unwrap_or_default()
}

/// Whether `obj` holds a CPU of `set`, without building its set (the selection asks this
/// of every candidate at every step).
pub(crate) fn touches(obj: &TopologyObject, set: &CpuSet) -> bool {
    obj.cpuset()
        .is_some_and(|s| s.iter_set().any(|pu| set.is_set(usize::from(pu))))
}

/// Adds `obj`'s CPUs to `set`.
pub(crate) fn add_cpus(obj: &TopologyObject, set: &mut CpuSet) {
    if let Some(s) = obj.cpuset() {
        for pu in s.iter_set() {
            set.set(usize::from(pu));
        }
    }
}

/// hwloc's cpuset as binder's (hwloc's sets of a loaded topology are finite).
pub(crate) fn from_hw(set: &hwlocality::cpu::cpuset::CpuSet) -> CpuSet {
    set.iter_set().map(usize::from).collect()
}

/// binder's set as hwloc's, for the calls that take one (restrict, NUMA nodes of CPUs).
pub(crate) fn to_hw(set: &CpuSet) -> hwlocality::cpu::cpuset::CpuSet {
    let mut out = hwlocality::cpu::cpuset::CpuSet::new();
    for cpu in set.iter_set() {
        out.set(cpu);
    }
    out
}

/// binder's set as hwloc's, for the host layer's binding calls.
#[cfg(feature = "hwloc")]
pub fn cpuset_to_hwloc(set: &CpuSet) -> hwlocality::cpu::cpuset::CpuSet {
    to_hw(set)
}

/// hwloc's set as binder's, for what the host layer reads back from hwloc.
#[cfg(feature = "hwloc")]
pub fn cpuset_from_hwloc(set: &hwlocality::cpu::cpuset::CpuSet) -> CpuSet {
    from_hw(set)
}

#[cfg(test)]
mod tests;
