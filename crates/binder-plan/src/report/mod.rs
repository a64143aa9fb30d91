//! Renders a [`Plan`] for people (`text`) and programs (`json`); nothing else formats
//! output. Renderers write into any `io::Write`, so tests render into a `Vec<u8>`.
//!
//! CPU sets are always printed in OS (physical) numbering, as hwloc-calc prints them;
//! object indexes are logical unless labelled physical.

mod json;
pub mod map;
pub mod svg;
mod text;

use std::io::{self, Write};

use crate::distribute::Plan;
use crate::topology::Topology;

pub use json::TaskRecord;
pub use text::kinds_line;
pub(crate) use text::task_binding;

/// Output format of `--dry-run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// One aligned line per rank, plus a header and a line for unused units.
    #[default]
    Text,
    /// One JSON object per rank per line (SEMANTICS §7).
    Json,
    /// The pe_hostfile fourth column of a Grid Engine request.
    Pe,
    /// An Open MPI rankfile ([`rankfile`], which takes the topology).
    Rankfile,
    /// The node drawn in the terminal ([`map`], which takes the topology).
    Map,
    /// The node as SVG ([`svg`], which takes the topology).
    Svg,
}

/// How the text form prints a cpuset (hwloc's `--cpuset-output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpusetFormat {
    /// hwloc's bitmap string: `0x00000001,,0x0000000f`.
    #[default]
    Hwloc,
    /// A range list: `0-3,64`.
    List,
    /// taskset's single hex number: `0x1000000000000000f`.
    Taskset,
}

/// What a task would get besides its CPUs and devices, for `--dry-run` to show: the
/// environment binder would set and the memory binding ([`crate::preview`] computes it
/// with the same functions a launch uses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    /// The variables binder would set, in the order it sets them (`BINDER_JOB`, which
    /// names the job in the node ledger, is only known at launch).
    pub env: Vec<(String, String)>,
    /// The NUMA nodes (OS numbers) the memory policy would use, when `membind:` sets one.
    pub mems: Option<Vec<usize>>,
    /// That policy.
    pub mempolicy: Option<binder_core::view::MemPolicy>,
}

/// Dry-run extras: one [`Preview`] per task (or none), and whether the text form prints
/// the environment (`--show-env`; JSON always has it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    /// One per task, by local rank; empty when not computed.
    pub previews: &'a [Preview],
    /// Print each task's environment on a line of its own in the text form.
    pub show_env: bool,
}

/// Writes the lines of `ranks` (all of them when `None`) in `format`.
pub fn render(
    plan: &Plan,
    ranks: Option<&[usize]>,
    format: Format,
    cpuset_format: CpusetFormat,
    header: &str,
    out: &mut impl Write,
) -> io::Result<()> {
    render_with(
        plan,
        ranks,
        format,
        cpuset_format,
        header,
        Extras::default(),
        out,
    )
}

/// [`render`] with each task's environment and memory binding.
pub fn render_with(
    plan: &Plan,
    ranks: Option<&[usize]>,
    format: Format,
    cpuset_format: CpusetFormat,
    header: &str,
    extras: Extras<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    let all: Vec<usize> = (0..plan.tasks.len()).collect();
    let ranks = ranks.unwrap_or(&all);
    match format {
        Format::Text => text::render(plan, ranks, cpuset_format, header, extras, out),
        Format::Json => json::render(plan, ranks, extras.previews, out),
        Format::Pe => writeln!(out, "{}", plan.ge.as_ref().map_or("", |g| g.pe.as_str())),
        // These draw or number the machine, which needs the topology.
        Format::Rankfile | Format::Map | Format::Svg => Err(io::Error::other(
            "the rankfile, map and svg are written by report::rankfile and report::picture, which take the topology",
        )),
    }
}

/// The `--format map` or `svg` picture of the node with `plan`'s ranks, `blocked`'s PUs
/// marked ([`map::blocked`]); `colour` adds ANSI colours to the map (for a terminal).
pub fn picture(
    topology: &Topology,
    plan: &Plan,
    blocked: &map::Blocked,
    format: Format,
    header: &str,
    colour: bool,
    out: &mut impl Write,
) -> io::Result<()> {
    let root = map::tree(topology, plan, blocked);
    // Unbound ranks have no PU to be drawn on: both pictures name them.
    let unbound: Vec<usize> = (0..plan.tasks.len())
        .filter(|&r| plan.tasks[r].cpuset.is_empty())
        .collect();
    let unbound = (!unbound.is_empty()).then(|| {
        format!(
            "not bound (not drawn): rank {}",
            binder_core::text::index_ranges(&unbound)
        )
    });
    if format == Format::Svg {
        let title = match &unbound {
            Some(line) => format!("{header}; {line}"),
            None => header.to_owned(),
        };
        svg::render(&root, plan.tasks.len(), &title, out)
    } else {
        writeln!(out, "# {header}")?;
        map::render_text(&root, plan.tasks.len(), colour, out)?;
        if let Some(line) = unbound {
            writeln!(out, "{line}")?;
        }
        Ok(())
    }
}

/// An Open MPI rankfile for the node's tasks on `host`: `rank R=HOST slot=S:C,...`, socket and core
/// numbers logical, cores counted within their socket (Open MPI's default reading).
///
/// A rankfile names whole cores, so a task bound to some hardware threads of a core (`bind:
/// pu` on a node with several threads per core) cannot be written exactly: two such tasks
/// would get the same line and Open MPI would bind both to the whole core. That plan is
/// refused with the task and core named ([`RankfileError`]), and nothing is written.
pub fn rankfile(
    topology: &Topology,
    plan: &Plan,
    host: &str,
    out: &mut impl Write,
) -> Result<(), RankfileError> {
    let tree = topology.ge_tree();
    let cores = crate::ge::walk::numbered_cores(&tree);
    let mut text = String::new();
    for task in &plan.tasks {
        let mut mine = Vec::new();
        for &(core, socket, index) in &cores {
            let pus: Vec<usize> = tree
                .threads(core)
                .iter()
                .filter_map(|&t| tree.nodes[t].os)
                .collect();
            let held = pus.iter().filter(|&&p| task.cpuset.is_set(p)).count();
            if held == 0 {
                continue;
            }
            if held < pus.len() {
                return Err(RankfileError::PartCore {
                    rank: task.local_rank,
                    socket,
                    core: index,
                    held,
                    threads: pus.len(),
                });
            }
            mine.push(format!("{socket}:{index}"));
        }
        text.push_str(&format!("rank {}={host}", task.local_rank));
        if !mine.is_empty() {
            text.push_str(&format!(" slot={}", mine.join(",")));
        }
        text.push('\n');
    }
    out.write_all(text.as_bytes())
        .map_err(RankfileError::Output)
}

/// Why no rankfile was written.
#[derive(Debug)]
pub enum RankfileError {
    /// A task holds part of a core, which a rankfile cannot say.
    PartCore {
        /// The task's local rank.
        rank: usize,
        /// The core's socket (logical).
        socket: usize,
        /// The core, counted within its socket.
        core: usize,
        /// How many of its hardware threads the task holds.
        held: usize,
        /// How many it has.
        threads: usize,
    },
    /// Writing failed.
    Output(io::Error),
}

impl std::fmt::Display for RankfileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RankfileError::PartCore {
                rank,
                socket,
                core,
                held,
                threads,
            } => write!(
                f,
                "--format rankfile names whole cores, but task {rank} holds {held} of the \
                 {threads} hardware threads of core {socket}:{core}, so Open MPI would bind \
                 it to the whole core; use `bind: core` for a rankfile, or --format json \
                 (each task's exact cpus) with `mpirun --bind-to none binder …`"
            ),
            RankfileError::Output(e) => write!(f, "cannot write the report: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use binder_core::cpulist::cpu_list;

    #[test]
    fn lists() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 48, 49, 50, 51, 60]), "0-3,48-51,60");
    }
}
