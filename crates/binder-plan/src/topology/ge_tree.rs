//! Between hwloc and topology strings: the tree of a loaded topology, and an hwloc XML
//! for a topology string (so `--ge-topology` machines go through the same pipeline as
//! XML exports and shapes work on them too).

use std::fmt::Write as _;

use crate::cpuset::CpuSet;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use crate::ge::codec::{Letter, Node, Tree};
use crate::topology::Topology;
use binder_core::cpulist::hwloc_mask;

/// The topology string tree of `topology`: packages S, NUMA nodes N where hwloc attaches
/// them, L3 X, L2 Y, cores C or E by CPU kind, PUs T. Groups, dies and L1 caches are left
/// out (OCS has no letter for them); a PU outside any core gets a core of its own.
pub(crate) fn tree_of(topology: &Topology) -> Tree {
    let hw = topology.hw();
    let performance = crate::topology::performance_pus(hw);
    let mut tree = Tree::default();
    build(hw.root_object(), None, performance.as_ref(), &mut tree);
    tree
}

fn push(tree: &mut Tree, letter: Letter, parent: Option<usize>, index: Option<usize>) -> usize {
    let id = tree.nodes.len();
    tree.nodes.push(Node {
        letter,
        used: false,
        parent,
        children: Vec::new(),
        os: index,
    });
    match parent {
        Some(p) => tree.nodes[p].children.push(id),
        None => tree.roots.push(id),
    }
    id
}

fn build(obj: &TopologyObject, parent: Option<usize>, perf: Option<&CpuSet>, tree: &mut Tree) {
    // Objects with no allowed PU (a cgroup's disallowed cores, their caches) are not
    // written: a unit must hold a core.
    if obj.cpuset().is_none_or(|s| s.is_empty()) {
        return;
    }
    let letter = match obj.object_type() {
        ObjectType::Package => Some(Letter::S),
        ObjectType::L3Cache => Some(Letter::X),
        ObjectType::L2Cache => Some(Letter::Y),
        ObjectType::Core => {
            let performance = perf.is_none_or(|p| p.includes(&super::cpus(obj)));
            Some(if performance { Letter::C } else { Letter::E })
        }
        ObjectType::PU => {
            let core = match parent.map(|p| tree.nodes[p].letter) {
                Some(l) if l.is_core() => parent,
                // A PU straight under a cache or package: give it a core.
                _ => Some(push(tree, Letter::C, parent, None)),
            };
            push(tree, Letter::T, core, obj.os_index());
            return;
        }
        _ => None,
    };
    let index = match letter {
        Some(Letter::C | Letter::E) => Some(obj.logical_index()),
        _ => None,
    };
    let mut here = letter.map_or(parent, |l| Some(push(tree, l, parent, index)));
    let has_numa = obj
        .memory_children()
        .any(|m| m.object_type() == ObjectType::NUMANode);
    if has_numa && obj.cpuset().is_some_and(|s| !s.is_empty()) {
        here = Some(push(tree, Letter::N, here, None));
    }
    for child in obj.normal_children() {
        build(child, here, perf, tree);
    }
}

/// An hwloc XML (v2) describing `tree`: OS PU numbers from the threads, one NUMA node per
/// N (one for the machine when there is none), and CPU kinds when there are E cores.
pub(crate) fn to_xml(tree: &Tree) -> String {
    let pus_of = |n: usize| -> Vec<usize> {
        tree.threads(n)
            .iter()
            .filter_map(|&t| tree.nodes[t].os)
            .collect()
    };
    let all: Vec<usize> = tree.roots.iter().flat_map(|&r| pus_of(r)).collect();
    // NUMA node numbers in string order, and each unit's nodeset: the N above it and
    // every N below it (node 0 for all when the string has no N).
    let mut numa_of = vec![None; tree.nodes.len()];
    let mut next = 0;
    for (n, node) in tree.nodes.iter().enumerate() {
        if node.letter == Letter::N {
            numa_of[n] = Some(next);
            next += 1;
        }
    }
    let nodeset = |n: usize| -> String {
        if next == 0 {
            return hwloc_mask(&[0]);
        }
        let mut set: Vec<usize> = Vec::new();
        let mut up = tree.nodes[n].parent;
        while let Some(p) = up {
            if let Some(i) = numa_of[p] {
                set.push(i);
                break;
            }
            up = tree.nodes[p].parent;
        }
        let mut stack = vec![n];
        while let Some(m) = stack.pop() {
            set.extend(numa_of[m]);
            stack.extend(tree.nodes[m].children.iter().copied());
        }
        set.sort_unstable();
        set.dedup();
        hwloc_mask(&set)
    };
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\">\n",
    );
    let machine_nodes = hwloc_mask(&(0..next.max(1)).collect::<Vec<_>>());
    let set = hwloc_mask(&all);
    let _ = writeln!(
        out,
        "<object type=\"Machine\" os_index=\"0\" cpuset=\"{set}\" complete_cpuset=\"{set}\" allowed_cpuset=\"{set}\" nodeset=\"{machine_nodes}\" complete_nodeset=\"{machine_nodes}\" allowed_nodeset=\"{machine_nodes}\">"
    );
    let mut core = 0;
    if next == 0 {
        let _ = writeln!(
            out,
            "<object type=\"NUMANode\" os_index=\"0\" cpuset=\"{set}\" complete_cpuset=\"{set}\" nodeset=\"0x00000001\" complete_nodeset=\"0x00000001\" local_memory=\"1073741824\"/>"
        );
    }
    fn write(
        tree: &Tree,
        n: usize,
        pus_of: &dyn Fn(usize) -> Vec<usize>,
        nodeset: &dyn Fn(usize) -> String,
        numa_of: &[Option<usize>],
        core: &mut usize,
        out: &mut String,
    ) {
        let node = &tree.nodes[n];
        let set = hwloc_mask(&pus_of(n));
        let ns = nodeset(n);
        let sets = format!(
            "cpuset=\"{set}\" complete_cpuset=\"{set}\" nodeset=\"{ns}\" complete_nodeset=\"{ns}\""
        );
        if let Some(numa) = numa_of[n] {
            // A group with the NUMA node as its memory child: hwloc merges the group
            // into an object with the same CPUs, and the node stays attached there.
            let own = hwloc_mask(&[numa]);
            let _ = writeln!(out, "<object type=\"Group\" {sets}>");
            let _ = writeln!(
                out,
                "<object type=\"NUMANode\" os_index=\"{numa}\" cpuset=\"{set}\" complete_cpuset=\"{set}\" nodeset=\"{own}\" complete_nodeset=\"{own}\" local_memory=\"1073741824\"/>"
            );
        } else {
            let tag = match node.letter {
                Letter::S => "type=\"Package\"".to_owned(),
                Letter::X => "type=\"L3Cache\" cache_size=\"16777216\" depth=\"3\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"0\"".to_owned(),
                Letter::Y => "type=\"L2Cache\" cache_size=\"1048576\" depth=\"2\" cache_linesize=\"64\" cache_associativity=\"0\" cache_type=\"0\"".to_owned(),
                Letter::C | Letter::E => {
                    *core += 1;
                    format!("type=\"Core\" os_index=\"{}\"", *core - 1)
                }
                Letter::T => format!("type=\"PU\" os_index=\"{}\"", node.os.unwrap_or(0)),
                Letter::N => unreachable!("handled above"),
            };
            let _ = writeln!(out, "<object {tag} {sets}>");
        }
        for &c in &node.children {
            write(tree, c, pus_of, nodeset, numa_of, core, out);
        }
        out.push_str("</object>\n");
    }
    for &r in &tree.roots {
        write(tree, r, &pus_of, &nodeset, &numa_of, &mut core, &mut out);
    }
    out.push_str("</object>\n");
    let kind = |letter: Letter| -> Vec<usize> {
        tree.nodes
            .iter()
            .enumerate()
            .filter(|(_, node)| node.letter == letter)
            .flat_map(|(n, _)| pus_of(n))
            .collect()
    };
    let (e, c) = (kind(Letter::E), kind(Letter::C));
    if !e.is_empty() && !c.is_empty() {
        let _ = writeln!(
            out,
            "<cpukind cpuset=\"{}\" forced_efficiency=\"0\"/>\n<cpukind cpuset=\"{}\" forced_efficiency=\"1\"/>",
            hwloc_mask(&e),
            hwloc_mask(&c)
        );
    }
    out.push_str("</topology>\n");
    out
}

#[cfg(test)]
mod tests {
    use crate::topology::Topology;

    /// A string's XML loads in hwloc and reads back as the same string (occupancy aside;
    /// single-socket strings put N before S, where hwloc attaches a machine-wide node).
    #[test]
    fn strings_survive_hwloc() {
        for s in [
            "NSXCCccSXCCCC",
            "NSXYCTtYCTTYeESXYCTTYCTTYEE",
            "SCCSCC",
            "SCTTCTTEEEE",
            "NSCCccSCCCCSCCCCSCcCC",
            "SXNYCTTYCTTSXNYCTTYCTT",
        ] {
            let topology = Topology::from_ge_string(s, false).unwrap();
            let back = super::tree_of(&topology).occupancy_string();
            // hwloc always has a NUMA node: without N the XML gets one for the machine.
            let want = if s.contains('N') {
                s.to_owned()
            } else {
                format!("N{s}")
            };
            assert_eq!(back, want.to_ascii_uppercase(), "{s}");
        }
    }
}
