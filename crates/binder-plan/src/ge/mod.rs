//! Grid Engine's binding language (SEMANTICS §12): topology strings, OCS 9.1 `-b*`
//! requests and SGE 6.2u5 `-binding` strategies, and reserved units.
//!
//! * [`codec`]: topology strings in and out ([`Tree`]).
//! * `hwloc`: a `Tree` from an hwloc topology, an hwloc XML from a `Tree`.
//! * [`request`]: the switches, parsed ([`Request`]).
//! * [`walk`]: where a request lands ([`walk::place`]).
//! * [`reserve`]: units no task may get (`options.reserve`, the site default).
//!
//! The stage is pure: it turns a tree with taken threads marked into per-task threads.
//! `lib.rs` turns those into a [`crate::distribute::Plan`], so reports, launching, GPUs
//! and NICs work the same as for a YAML shape.

pub mod codec;
pub mod request;
pub mod reserve;
pub mod walk;

pub use codec::{Letter, Tree};
pub use request::{Instance, Request, Strategy};
pub use walk::Placement;

/// Why a Grid Engine request or string was refused.
#[derive(Debug, thiserror::Error)]
pub enum GeError {
    /// A topology string that cannot be read.
    #[error("topology string \"{text}\": {why}")]
    Topology {
        /// The string, clipped.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// A request that cannot be read.
    #[error("Grid Engine request \"{text}\": {why}")]
    Request {
        /// The request, clipped.
        text: String,
        /// What is wrong and what to write.
        why: String,
    },
    /// A `-bfilter` for another machine.
    #[error("`-bfilter {filter}` describes another machine than this node's {node}; copy the node's string from `binder topology` and lowercase the units to mask")]
    Filter {
        /// The filter, clipped.
        filter: String,
        /// The node's string, clipped.
        node: String,
    },
    /// A reservation that names nothing on this node.
    #[error("reserve `{what}`: {why}")]
    Reserve {
        /// The entry.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// The request cannot be met on this node (binding is a hard requirement).
    #[error("the Grid Engine request cannot be met on this node: {0}; ask for fewer or other units, or look at `binder topology` for what is free")]
    Refused(String),
}

/// What a Grid Engine request gave the node, for reports and the task's variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The request, as given.
    pub request: String,
    /// Who binds.
    pub instance: Instance,
    /// The node's string with every task's units lowercase (`SGE_BINDING_TOPOLOGY`).
    pub job_topology: String,
    /// Every task's CPUs together (`GCS_BINDING`, `SGE_BINDING`).
    pub job_cpus: Vec<usize>,
    /// The pe_hostfile fourth column.
    pub pe: String,
}

/// Places `tasks` tasks for `request` on `tree` (taken threads marked), after masking the
/// request's `-bfilter`. Returns the placement and the tree the walk saw.
pub fn place(tree: &Tree, request: &Request, tasks: usize) -> Result<(Placement, Tree), GeError> {
    let mut seen = tree.clone();
    if let Strategy::Packed(p) = &request.strategy {
        if let Some(filter) = &p.filter {
            let mask = Tree::parse(filter)?;
            if !mask.same_shape(tree) {
                return Err(GeError::Filter {
                    filter: binder_core::text::clip(filter, binder_core::text::QUOTE_MAX),
                    node: binder_core::text::clip(
                        &tree.occupancy_string(),
                        binder_core::text::QUOTE_MAX,
                    ),
                });
            }
            for (n, m) in seen.nodes.iter_mut().zip(&mask.nodes) {
                n.used |= m.used;
            }
        }
    }
    let placement = walk::place(&seen, &request.strategy, tasks)?;
    Ok((placement, seen))
}

/// The OS PU numbers of granted threads, ascending.
pub fn pus(tree: &Tree, threads: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = threads.iter().filter_map(|&t| tree.nodes[t].os).collect();
    out.sort_unstable();
    // Once each: with `-btype host` every task lists the same threads, and
    // `GCS_BINDING` names the job's CPUs, not one copy per task.
    out.dedup();
    out
}

/// A task's (or the job's) string: its threads lowercase, all else upper; with
/// `sge_cores` (an SGE 6.2u5 strategy) those cores lowercase and containers never.
pub(crate) fn job_string(tree: &Tree, threads: &[usize], sge_cores: Option<&[usize]>) -> String {
    let mut mine = vec![false; tree.nodes.len()];
    for &t in threads {
        mine[t] = true;
    }
    tree.render_in(None, &|n| mine[n], sge_cores)
}
