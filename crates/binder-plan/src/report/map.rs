//! A picture of the node with the ranks on it (issue #13): `--format map` draws it in the
//! terminal, `--format svg` as an lstopo-like SVG ([`super::svg`]). Both come from one
//! [`Node`] tree: packages → NUMA nodes → L3 caches → cores → PUs, each PU labelled with
//! the local rank that got it.
//!
//! hwloc hangs NUMA nodes off the tree as memory children, and an L3 may hold several
//! NUMA nodes (or a NUMA node several L3s), so the tree is built by cpuset containment:
//! a level is nested under a parent only where its objects lie inside it; otherwise the
//! level is skipped there (a KNL has no L3; a sub-NUMA-clustered L3 spans two nodes).

use std::collections::HashMap;
use std::io::{self, Write};

use hwlocality::cpu::cpuset::CpuSet;

use crate::distribute::Plan;
use crate::shape::ObjType;
use crate::topology::Topology;

/// One box of the picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `package L#0`, `numa L#1 (P#1)`, `l3 L#0`, `core L#3`, `pu P#7`.
    pub label: String,
    /// What is inside, in logical order; empty for a PU.
    pub children: Vec<Node>,
    /// For a PU: its OS number and the rank that got it (`None`: no task).
    pub pu: Option<(usize, Option<usize>)>,
}

/// The levels drawn between the machine and its cores.
const LEVELS: [ObjType; 3] = [ObjType::Package, ObjType::Numa, ObjType::L3];

/// The node's tree with `plan`'s ranks on its PUs.
pub fn tree(topology: &Topology, plan: &Plan) -> Node {
    let mut owner: HashMap<usize, usize> = HashMap::new();
    for (rank, task) in plan.tasks.iter().enumerate() {
        for pu in task.cpuset.iter_set() {
            owner.entry(usize::from(pu)).or_insert(rank);
        }
    }
    let levels: Vec<Vec<(String, CpuSet)>> = LEVELS
        .iter()
        .map(|&kind| {
            topology
                .objects(kind)
                .iter()
                .filter_map(|o| {
                    let os = o
                        .os_index()
                        .filter(|_| kind == ObjType::Numa)
                        .map_or_else(String::new, |p| format!(" (P#{p})"));
                    let label = format!("{} L#{}{os}", kind.hwloc_name(), o.logical_index());
                    Some((label, o.cpuset()?.clone_target()))
                })
                .collect()
        })
        .collect();
    let cores: Vec<(String, CpuSet)> = topology
        .objects(ObjType::Core)
        .iter()
        .filter_map(|o| {
            Some((
                format!("core L#{}", o.logical_index()),
                o.cpuset()?.clone_target(),
            ))
        })
        .collect();
    let allowed = topology.hw().allowed_cpuset().clone_target();
    let machine = allowed.clone();
    Node {
        label: format!("machine ({} PUs)", allowed.weight().unwrap_or(0)),
        children: nest(&machine, &levels, &cores, &allowed, &owner),
        pu: None,
    }
}

/// The children of a box whose cpuset is `within`: the first level with objects inside
/// it, else its cores.
fn nest(
    within: &CpuSet,
    levels: &[Vec<(String, CpuSet)>],
    cores: &[(String, CpuSet)],
    allowed: &CpuSet,
    owner: &HashMap<usize, usize>,
) -> Vec<Node> {
    for (i, level) in levels.iter().enumerate() {
        let inside: Vec<&(String, CpuSet)> = level
            .iter()
            .filter(|(_, set)| set.intersects(within) && within.includes(set))
            .collect();
        // A level that is the box itself again (one NUMA node per package) adds nothing
        // but a line; one that does not cover the box leaves part of it undrawn.
        let covers = {
            let mut union = CpuSet::new();
            for (_, set) in &inside {
                union |= set;
            }
            union == *within
        };
        let same = inside.len() == 1 && inside[0].1 == *within;
        if !inside.is_empty() && covers && !same {
            return inside
                .into_iter()
                .map(|(label, set)| Node {
                    label: label.clone(),
                    children: nest(set, &levels[i + 1..], cores, allowed, owner),
                    pu: None,
                })
                .collect();
        }
    }
    cores
        .iter()
        .filter(|(_, set)| set.intersects(within) && within.includes(set))
        .map(|(label, set)| Node {
            label: label.clone(),
            children: set
                .iter_set()
                .map(usize::from)
                .filter(|p| allowed.is_set(*p))
                .map(|p| Node {
                    label: format!("pu P#{p}"),
                    children: Vec::new(),
                    pu: Some((p, owner.get(&p).copied())),
                })
                .collect(),
            pu: None,
        })
        .collect()
}

/// ANSI colours for ranks, cycled (the six that read on dark and light terminals).
const COLOURS: [anstyle::AnsiColor; 6] = [
    anstyle::AnsiColor::Red,
    anstyle::AnsiColor::Green,
    anstyle::AnsiColor::Yellow,
    anstyle::AnsiColor::Blue,
    anstyle::AnsiColor::Magenta,
    anstyle::AnsiColor::Cyan,
];

/// Draws the tree: one line per container, the cores of the innermost one on a line
/// (wrapped every 8 cores), each core as `[a b]` with its PUs' ranks (`.` for no task).
/// `colour` adds ANSI colours per rank (for a terminal).
pub fn render_text(
    root: &Node,
    tasks: usize,
    colour: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let width = tasks.saturating_sub(1).to_string().len();
    writeln!(
        out,
        "{}: {tasks} task{}",
        root.label,
        if tasks == 1 { "" } else { "s" }
    )?;
    if holds_cores(root) {
        // No level between the machine and its cores: its header line already names it.
        let cores = Node {
            label: "cores".into(),
            children: root.children.clone(),
            pu: None,
        };
        draw(&cores, 0, width, colour, out)?;
    } else {
        draw(root, 0, width, colour, out)?;
    }
    writeln!(
        out,
        "each [ ] is a core (logical order), each number the local rank on one of its PUs; . = no task"
    )
}

fn draw(
    node: &Node,
    depth: usize,
    width: usize,
    colour: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let indent = "  ".repeat(depth);
    if holds_cores(node) {
        // The innermost container's cores go on its own line (8 a line).
        let boxes: Vec<String> = node
            .children
            .iter()
            .map(|c| core_box(c, width, colour))
            .collect();
        let pad = " ".repeat(indent.len() + node.label.len() + 2);
        for (i, row) in boxes.chunks(8).enumerate() {
            let head = if i == 0 {
                format!("{indent}{}  ", node.label)
            } else {
                pad.clone()
            };
            writeln!(out, "{head}{}", row.join(""))?;
        }
        return Ok(());
    }
    for child in &node.children {
        if holds_cores(child) {
            draw(child, depth, width, colour, out)?;
        } else {
            writeln!(out, "{indent}{}", child.label)?;
            draw(child, depth + 1, width, colour, out)?;
        }
    }
    Ok(())
}

/// Whether `node`'s children are cores (boxes of PUs).
fn holds_cores(node: &Node) -> bool {
    !node.children.is_empty() && node.children.iter().all(Node::is_core)
}

impl Node {
    /// Whether this is a core: its children are PUs.
    pub fn is_core(&self) -> bool {
        !self.children.is_empty() && self.children.iter().all(|c| c.pu.is_some())
    }
}

fn core_box(core: &Node, width: usize, colour: bool) -> String {
    let pus: Vec<String> = core
        .children
        .iter()
        .map(|p| match p.pu {
            Some((_, Some(rank))) if colour => {
                let style =
                    anstyle::Style::new().fg_color(Some(COLOURS[rank % COLOURS.len()].into()));
                format!("{style}{rank:>width$}{style:#}")
            }
            Some((_, Some(rank))) => format!("{rank:>width$}"),
            _ => format!("{:>width$}", "."),
        })
        .collect();
    format!("[{}]", pus.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{load, Source};

    fn plan_of(desc: &str, shape: &str, n: usize) -> (Topology, Plan) {
        let topology = load(&Source::Synthetic(desc.into()), false).unwrap();
        let shape = crate::shape::Shape::from_yaml(shape, "t").unwrap();
        let plan = crate::plan(&shape, "t", &topology, n, None).unwrap();
        (topology, plan)
    }

    // By hand: pack:2 numa:1 l3:2 core:2 pu:2 has one NUMA node per package (skipped as
    // it adds nothing), two L3s per package, two cores per L3; 3 tasks packed over the 8
    // cores get 2 cores each (0-1, 2-3, 4-5), cores 6-7 stay free.
    #[test]
    fn text_map_by_hand() {
        let (t, p) = plan_of(
            "pack:2 numa:1 l3:2 core:2 pu:2",
            "resources: [{type: core, count: all}]",
            3,
        );
        let mut out = Vec::new();
        render_text(&tree(&t, &p), 3, false, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "machine (16 PUs): 3 tasks
package L#0
  l3cache L#0  [0 0][0 0]
  l3cache L#1  [1 1][1 1]
package L#1
  l3cache L#2  [2 2][2 2]
  l3cache L#3  [. .][. .]
each [ ] is a core (logical order), each number the local rank on one of its PUs; . = no task
"
        );
        // No level between machine and cores: the cores' line is not the machine again.
        let (t1, p1) = plan_of(
            "pack:1 core:2 pu:1",
            "resources: [{type: core, count: all}]",
            2,
        );
        let mut out = Vec::new();
        render_text(&tree(&t1, &p1), 2, false, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("\ncores  [0][1]\n"));
        let mut out = Vec::new();
        render_text(&tree(&t, &p), 3, true, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("[\x1b[31m0\x1b[0m "));
    }
}
