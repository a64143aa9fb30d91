//! A picture of the node with the ranks on it (issue #13): `--format map` draws it in the
//! terminal, `--format svg` as an lstopo-like SVG ([`super::svg`]). Both come from one
//! [`Node`] tree: packages → NUMA nodes → L3 caches → cores → PUs, each PU labelled with
//! the local rank that got it.
//!
//! hwloc hangs NUMA nodes off the tree as memory children, and an L3 may hold several
//! NUMA nodes (or a NUMA node several L3s), so the tree is built by cpuset containment:
//! a level is nested under a parent only where its objects lie inside it; otherwise the
//! level is skipped there (a KNL has no L3; a sub-NUMA-clustered L3 spans two nodes).
//!
//! A PU that no task got says why: reserved (the site's or the shape's `reserve`), held by
//! another job (a topology string's lowercase units), or free. The plan's GPUs and NICs
//! hang under the deepest drawn box that holds their locality (their NUMA node or
//! package, as lstopo draws them), each with the ranks that got it.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::cpuset::CpuSet;

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
    /// For a PU: its OS number and who has it.
    pub pu: Option<(usize, Pu)>,
    /// The GPUs and NICs whose locality lies in this box and in none of its children.
    pub devices: Vec<Device>,
}

/// Who has a PU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pu {
    /// This local rank.
    Rank(usize),
    /// Reserved: never given to any task.
    Reserved,
    /// Held by another job.
    Occupied,
    /// No task.
    Free,
}

/// A GPU or NIC drawn under its box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// `GPU 0` (the node's number), `NIC ib0`.
    pub label: String,
    /// hwloc's model name, and the PCI bus id.
    pub model: String,
    /// The PCI bus id.
    pub busid: String,
    /// The local ranks that got it (GPUs: at most one job's ranks; NICs: nearest to).
    pub ranks: Vec<usize>,
}

impl Device {
    /// Who got it, as both pictures say it: `rank 0`, `ranks 0-3`, `no task`.
    pub fn holders(&self) -> String {
        match self.ranks.as_slice() {
            [] => "no task".to_owned(),
            [r] => format!("rank {r}"),
            ranks => format!("ranks {}", binder_core::text::index_ranges(ranks)),
        }
    }
}

/// The PUs no task may get: reserved, and held by other jobs (OS numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blocked {
    /// By `reserve` entries (the site file's and the shape's).
    pub reserved: Vec<usize>,
    /// By other jobs: a topology string's lowercase units.
    pub occupied: Vec<usize>,
}

/// What `reserve` (the shape's `options.reserve`, the site's added) and `topology` itself
/// (a topology string's lowercase units) keep from the tasks, as the planner computes it.
pub fn blocked(topology: &Topology, reserve: &[String]) -> Result<Blocked, crate::ge::GeError> {
    if reserve.is_empty() && !topology.is_ge_string() {
        return Ok(Blocked::default());
    }
    let mut tree = topology.ge_tree();
    let occupied = tree.used_pus();
    let reserved = crate::ge::reserve::apply(&mut tree, reserve)?
        .into_iter()
        .filter(|p| !occupied.contains(p))
        .collect();
    Ok(Blocked { reserved, occupied })
}

/// The levels drawn between the machine and its cores.
const LEVELS: [ObjType; 3] = [ObjType::Package, ObjType::Numa, ObjType::L3];

/// The node's tree with `plan`'s ranks on its PUs, `blocked`'s PUs marked, and the
/// plan's GPUs and NICs under their boxes.
pub fn tree(topology: &Topology, plan: &Plan, blocked: &Blocked) -> Node {
    let mut owner: HashMap<usize, Pu> = HashMap::new();
    for (rank, task) in plan.tasks.iter().enumerate() {
        for pu in task.cpuset.iter_set() {
            owner.entry(pu).or_insert(Pu::Rank(rank));
        }
    }
    for &p in &blocked.reserved {
        owner.entry(p).or_insert(Pu::Reserved);
    }
    for &p in &blocked.occupied {
        owner.entry(p).or_insert(Pu::Occupied);
    }
    let devices = devices(plan);
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
                    Some((label, o.cpuset().map(|s| crate::topology::from_hw(&s))?))
                })
                .fold(Vec::new(), merge_same_cpus)
        })
        .collect();
    let cores: Vec<(String, CpuSet)> = topology
        .objects(ObjType::Core)
        .iter()
        .filter_map(|o| {
            Some((
                format!("core L#{}", o.logical_index()),
                o.cpuset().map(|s| crate::topology::from_hw(&s))?,
            ))
        })
        .collect();
    let allowed = topology.allowed();
    let machine = allowed.clone();
    let within = Within {
        allowed: &allowed,
        owner: &owner,
        devices: &devices,
    };
    let levels: Vec<&Vec<(String, CpuSet)>> = levels.iter().collect();
    let children = nest(&machine, &levels, &cores, &within);
    Node {
        label: format!("machine ({} PUs)", allowed.weight()),
        // What lies in no drawn box (a GPU whose locality is the whole machine).
        devices: claim(&machine, &devices, &children, true),
        children,
        pu: None,
    }
}

/// Adds one box to a level's boxes, or names it in the box of the same CPUs: the NUMA
/// nodes of one set of cores (KNL's DDR and MCDRAM in flat mode, a socket's DRAM and
/// HBM or CXL memory) are one box, `numa L#0 (P#0) + L#1 (P#4)`, so their cores are
/// drawn once.
fn merge_same_cpus(
    mut boxes: Vec<(String, CpuSet)>,
    (label, set): (String, CpuSet),
) -> Vec<(String, CpuSet)> {
    match boxes.iter_mut().find(|(_, s)| *s == set) {
        Some((first, _)) => {
            let more = label
                .split_once(' ')
                .map_or(label.as_str(), |(_, rest)| rest);
            first.push_str(" + ");
            first.push_str(more);
        }
        None => boxes.push((label, set)),
    }
    boxes
}

/// What every box of the tree looks things up in.
struct Within<'a> {
    allowed: &'a CpuSet,
    owner: &'a HashMap<usize, Pu>,
    devices: &'a [(CpuSet, Device)],
}

/// The plan's GPUs and NICs with their localities and the ranks that got them.
fn devices(plan: &Plan) -> Vec<(CpuSet, Device)> {
    let ranks_of = |has: &dyn Fn(&crate::distribute::Task) -> bool| -> Vec<usize> {
        plan.tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| has(t))
            .map(|(r, _)| r)
            .collect()
    };
    let gpus = plan.gpus.iter().map(|g| {
        let device = Device {
            label: format!("GPU {}", g.number),
            model: g.model.clone(),
            busid: g.busid.clone(),
            ranks: ranks_of(&|t| t.gpus.contains(&g.index)),
        };
        (g.locality.clone(), device)
    });
    let nics = plan.nics.iter().map(|n| {
        let name = n
            .names()
            .first()
            .cloned()
            .unwrap_or_else(|| n.busid.clone());
        let device = Device {
            label: format!("NIC {name}"),
            model: n.model.clone(),
            busid: n.busid.clone(),
            ranks: ranks_of(&|t| t.nics.contains(&n.index)),
        };
        (n.locality.clone(), device)
    });
    gpus.chain(nics).collect()
}

/// The devices that hang under the box `set` and under none of its `children` (with
/// `root`, also those whose locality reaches outside every box: they belong to the
/// machine).
fn claim(set: &CpuSet, devices: &[(CpuSet, Device)], children: &[Node], root: bool) -> Vec<Device> {
    devices
        .iter()
        .filter(|(locality, _)| root || (locality.intersects(set) && set.includes(locality)))
        .filter(|(_, d)| !children.iter().any(|c| c.holds(d)))
        .map(|(_, d)| d.clone())
        .collect()
}

/// The children of a box whose cpuset is `within`: the coarsest level not drawn yet whose
/// objects inside it cover it (fewest objects first, then package, NUMA, L3), else its
/// cores. Coarsest first, not a fixed order, because containment differs by machine: a
/// Sapphire Rapids package holds 4 NUMA nodes, a POWER7 NUMA node holds 8 packages.
fn nest(
    within: &CpuSet,
    levels: &[&Vec<(String, CpuSet)>],
    cores: &[(String, CpuSet)],
    look: &Within<'_>,
) -> Vec<Node> {
    let mut best: Option<(usize, Vec<&(String, CpuSet)>)> = None;
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
        let coarser = best.as_ref().is_none_or(|(_, b)| inside.len() < b.len());
        if !inside.is_empty() && covers && !same && coarser {
            best = Some((i, inside));
        }
    }
    if let Some((i, inside)) = best {
        let rest: Vec<&Vec<(String, CpuSet)>> = levels
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, l)| *l)
            .collect();
        return inside
            .into_iter()
            .map(|(label, set)| {
                let children = nest(set, &rest, cores, look);
                Node {
                    label: label.clone(),
                    devices: claim(set, look.devices, &children, false),
                    children,
                    pu: None,
                }
            })
            .collect();
    }
    cores
        .iter()
        .filter(|(_, set)| set.intersects(within) && within.includes(set))
        .map(|(label, set)| Node {
            label: label.clone(),
            children: set
                .iter_set()
                .filter(|p| look.allowed.is_set(*p))
                .map(|p| Node {
                    label: format!("pu P#{p}"),
                    children: Vec::new(),
                    pu: Some((p, look.owner.get(&p).copied().unwrap_or(Pu::Free))),
                    devices: Vec::new(),
                })
                .collect(),
            pu: None,
            devices: Vec::new(),
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
/// (wrapped every 8 cores), each core as `[a b]` with its PUs' ranks (`.` no task, `r`
/// reserved, `x` another job's), and each GPU or NIC on a line under its box. `colour`
/// adds ANSI colours per rank (for a terminal).
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
    let look = Look { width, colour };
    if holds_cores(root) {
        // No level between the machine and its cores: its header line already names it.
        let cores = Node {
            label: "cores".into(),
            children: root.children.clone(),
            pu: None,
            devices: root.devices.clone(),
        };
        draw(&cores, 0, look, out)?;
    } else {
        draw_devices(&root.devices, 0, out)?;
        draw(root, 0, look, out)?;
    }
    let mut legend = vec!["each [ ] is a core (logical order), each number the local rank on one of its PUs; . = no task".to_owned()];
    if root.any_pu(Pu::Reserved) {
        legend.push("r = reserved".into());
    }
    if root.any_pu(Pu::Occupied) {
        legend.push("x = another job's".into());
    }
    writeln!(out, "{}", legend.join(", "))
}

/// How PUs are written: the rank's width, and whether in colour.
#[derive(Clone, Copy)]
struct Look {
    width: usize,
    colour: bool,
}

fn draw(node: &Node, depth: usize, look: Look, out: &mut impl Write) -> io::Result<()> {
    let indent = "  ".repeat(depth);
    if holds_cores(node) {
        // The innermost container's cores go on its own line (8 a line).
        let boxes: Vec<String> = node.children.iter().map(|c| core_box(c, look)).collect();
        let pad = " ".repeat(indent.len() + node.label.len() + 2);
        for (i, row) in boxes.chunks(8).enumerate() {
            let head = if i == 0 {
                format!("{indent}{}  ", node.label)
            } else {
                pad.clone()
            };
            writeln!(out, "{head}{}", row.join(""))?;
        }
        return draw_devices(&node.devices, depth + 1, out);
    }
    for child in &node.children {
        if holds_cores(child) {
            draw(child, depth, look, out)?;
        } else {
            writeln!(out, "{indent}{}", child.label)?;
            draw_devices(&child.devices, depth + 1, out)?;
            draw(child, depth + 1, look, out)?;
        }
    }
    Ok(())
}

/// One line per device: `GPU 1 0000:5f:00.0 NVIDIA H100 80GB HBM3: rank 0`.
fn draw_devices(devices: &[Device], depth: usize, out: &mut impl Write) -> io::Result<()> {
    for d in devices {
        let who = d.holders();
        writeln!(
            out,
            "{}{} {} {}: {who}",
            "  ".repeat(depth),
            d.label,
            d.busid,
            d.model
        )?;
    }
    Ok(())
}

/// Whether `node`'s children are cores (boxes of PUs).
fn holds_cores(node: &Node) -> bool {
    !node.children.is_empty() && node.children.iter().all(Node::is_core)
}

impl Node {
    /// Whether this is a core: its children are PUs.
    pub(crate) fn is_core(&self) -> bool {
        !self.children.is_empty() && self.children.iter().all(|c| c.pu.is_some())
    }

    /// Whether `device` hangs under this box or one inside it.
    pub fn holds(&self, device: &Device) -> bool {
        self.devices.iter().any(|d| d.busid == device.busid)
            || self.children.iter().any(|c| c.holds(device))
    }

    /// Whether some PU inside is `state`.
    pub(crate) fn any_pu(&self, state: Pu) -> bool {
        self.pu.is_some_and(|(_, s)| s == state) || self.children.iter().any(|c| c.any_pu(state))
    }
}

fn core_box(core: &Node, look: Look) -> String {
    let width = look.width;
    let pus: Vec<String> = core
        .children
        .iter()
        .map(|p| match p.pu.map(|(_, s)| s) {
            Some(Pu::Rank(rank)) if look.colour => {
                let style =
                    anstyle::Style::new().fg_color(Some(COLOURS[rank % COLOURS.len()].into()));
                format!("{style}{rank:>width$}{style:#}")
            }
            Some(Pu::Rank(rank)) => format!("{rank:>width$}"),
            Some(Pu::Reserved) => format!("{:>width$}", "r"),
            Some(Pu::Occupied) => format!("{:>width$}", "x"),
            _ => format!("{:>width$}", "."),
        })
        .collect();
    format!("[{}]", pus.join(" "))
}

#[cfg(test)]
mod tests;
