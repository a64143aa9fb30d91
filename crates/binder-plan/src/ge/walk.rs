//! Where a Grid Engine request lands on a topology tree: OCS 9.1's packed walk (with
//! sort, start, stop) and SGE 6.2u5's linear, striding and explicit strategies.
//!
//! Pure functions of a [`Tree`] whose taken threads are marked: nothing here reads hwloc.
//! Binding is a hard requirement, as in OCS: a request that cannot be met is an error,
//! never a partial binding.

use std::cmp::Reverse;

use super::codec::{Letter, Tree};
use super::request::{Amount, Kind, Mark, Packed, Strategy, UnitSpec};
use super::GeError;

mod sge;
pub use sge::numbered_cores;
use sge::sge_cores;

/// What each task gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Per task, the granted threads (tree indices), in walk order; empty = unbound.
    pub tasks: Vec<Vec<usize>>,
    /// Per task, cores SGE bound (shown lowercase even when another job holds one of
    /// their threads); `None` for OCS's packed walk.
    pub cores: Option<Vec<Vec<usize>>>,
    /// Whether the unit is a thread (the pe column then lists socket,thread pairs).
    pub threads: bool,
}

/// Places `tasks` tasks. `tree` has the node's taken threads marked (other jobs,
/// reservations, the filter).
pub fn place(tree: &Tree, strategy: &Strategy, tasks: usize) -> Result<Placement, GeError> {
    match strategy {
        Strategy::Packed(p) => packed(tree, p, tasks),
        other => {
            let cores = sge_cores(tree, other)?;
            let threads: Vec<usize> = cores
                .iter()
                .flat_map(|&c| tree.threads(c))
                .filter(|&t| !tree.nodes[t].used)
                .collect();
            // SGE binds the job: every task of the node gets the same cores.
            Ok(Placement {
                tasks: vec![threads; tasks],
                cores: Some(vec![cores; tasks]),
                threads: false,
            })
        }
    }
}

fn refuse(why: String) -> GeError {
    GeError::Refused(why)
}

/// The unit actually used on this tree: OCS maps N and X to S, and Y to a core, on nodes
/// without that level.
pub(crate) fn effective_unit(tree: &Tree, unit: UnitSpec) -> UnitSpec {
    let level = match unit.level {
        Letter::N | Letter::X if !tree.has(unit.level) => Letter::S,
        Letter::Y if !tree.has(Letter::Y) => Letter::C,
        l => l,
    };
    UnitSpec { level, ..unit }
}

fn core_letter(kind: Kind) -> Letter {
    match kind {
        Kind::Performance => Letter::C,
        Kind::Efficiency => Letter::E,
    }
}

/// Whether `n` is a unit of `unit`: a thread of a core of the kind, a core of the kind,
/// or a container of the level holding at least one such core.
fn is_unit(tree: &Tree, n: usize, unit: UnitSpec) -> bool {
    let node = &tree.nodes[n];
    let core = core_letter(unit.kind);
    match unit.level {
        Letter::T => {
            node.letter == Letter::T && node.parent.is_some_and(|p| tree.nodes[p].letter == core)
        }
        Letter::C | Letter::E => node.letter == core,
        level => {
            node.letter == level && tree.cores(n).iter().any(|&c| tree.nodes[c].letter == core)
        }
    }
}

/// The threads a unit grants: its own, or those of its cores of the kind.
fn grant(tree: &Tree, n: usize, unit: UnitSpec) -> Vec<usize> {
    let core = core_letter(unit.kind);
    match unit.level {
        Letter::T => vec![n],
        _ => tree
            .cores(n)
            .into_iter()
            .filter(|&c| tree.nodes[c].letter == core)
            .flat_map(|c| tree.threads(c))
            .collect(),
    }
}

/// The order the walk visits nodes in: pre-order, with the children of the levels named
/// by `-bsort` ordered by load (stable). Uppercase: most free threads first; lowercase:
/// most used first. Since OCS CS-1785, groups holding performance cores come before
/// groups of efficiency cores only.
pub fn visit_order(tree: &Tree, sort: &[Mark]) -> Vec<usize> {
    let free = |n: usize| {
        tree.threads(n)
            .iter()
            .filter(|&&t| !tree.nodes[t].used)
            .count()
    };
    let used = |n: usize| {
        tree.threads(n)
            .iter()
            .filter(|&&t| tree.nodes[t].used)
            .count()
    };
    let no_power = |n: usize| {
        !tree
            .cores(n)
            .iter()
            .any(|&c| tree.nodes[c].letter == Letter::C)
    };
    let sorted = |list: &[usize]| -> Vec<usize> {
        let mut out = list.to_vec();
        let slots: Vec<usize> = (0..list.len())
            .filter(|&i| sort.iter().any(|m| m.letter == tree.nodes[list[i]].letter))
            .collect();
        let mut chosen: Vec<usize> = slots.iter().map(|&i| list[i]).collect();
        chosen.sort_by_cached_key(|&n| {
            let lower = sort
                .iter()
                .any(|m| m.letter == tree.nodes[n].letter && m.used);
            (no_power(n), Reverse(if lower { used(n) } else { free(n) }))
        });
        for (&i, n) in slots.iter().zip(chosen) {
            out[i] = n;
        }
        out
    };
    let mut order = Vec::with_capacity(tree.nodes.len());
    let mut stack: Vec<usize> = sorted(&tree.roots).into_iter().rev().collect();
    while let Some(n) = stack.pop() {
        order.push(n);
        let children = if sort.is_empty() {
            tree.nodes[n].children.clone()
        } else {
            sorted(&tree.nodes[n].children)
        };
        stack.extend(children.into_iter().rev());
    }
    order
}

/// Whether `n` matches a start/stop letter: uppercase a completely free unit, lowercase
/// a partly or fully used one. For efficiency units a core letter means an E core.
fn matches(tree: &Tree, n: usize, mark: Mark, unit: UnitSpec) -> bool {
    let letter = match mark.letter {
        Letter::C if unit.kind == Kind::Efficiency => Letter::E,
        l => l,
    };
    tree.nodes[n].letter == letter && tree.touched(n) == mark.used
}

/// The stretch of `order` between `-bstart` and `-bstop`, judged on `tree`.
fn window_range(
    tree: &Tree,
    order: &[usize],
    p: &Packed,
    unit: UnitSpec,
) -> Result<(usize, usize), GeError> {
    let from = match p.start {
        Some(m) => order
            .iter()
            .position(|&n| matches(tree, n, m, unit))
            .ok_or_else(|| {
                refuse(format!(
                    "`-bstart {}` finds no {} unit here",
                    mark_char(m),
                    if m.used { "used" } else { "free" }
                ))
            })?,
        None => 0,
    };
    let to = p
        .stop
        .and_then(|m| {
            order[from + 1..]
                .iter()
                .position(|&n| matches(tree, n, m, unit))
                .map(|i| from + 1 + i)
        })
        .unwrap_or(order.len());
    Ok((from, to))
}

/// One packed walk: up to `amount` units free in `tree` within `span` of the visit order.
fn walk(
    tree: &Tree,
    span: &[usize],
    p: &Packed,
    unit: UnitSpec,
    amount: Option<usize>,
) -> Result<Vec<usize>, GeError> {
    let mut got = Vec::new();
    let mut units = 0;
    for &n in span {
        if amount.is_some_and(|a| units == a) {
            break;
        }
        if is_unit(tree, n, unit) && tree.free(n) {
            got.extend(grant(tree, n, unit));
            units += 1;
        }
    }
    match amount {
        Some(a) if units < a => Err(refuse(format!(
            "{units} of {a} free {} unit(s) found{}",
            unit.name(),
            window(p)
        ))),
        None if units == 0 => Err(refuse(format!(
            "no free {} unit found{}",
            unit.name(),
            window(p)
        ))),
        _ => Ok(got),
    }
}

fn mark_char(m: Mark) -> char {
    let c = m.letter.char();
    if m.used {
        c.to_ascii_lowercase()
    } else {
        c
    }
}

fn window(p: &Packed) -> String {
    match (p.start, p.stop) {
        (None, None) => String::new(),
        (s, e) => format!(
            " between{}{}",
            s.map_or(String::new(), |m| format!(" -bstart {}", mark_char(m))),
            e.map_or(String::new(), |m| format!(" and -bstop {}", mark_char(m)))
        ),
    }
}

fn packed(tree: &Tree, p: &Packed, tasks: usize) -> Result<Placement, GeError> {
    let unit = effective_unit(tree, p.unit);
    if unit.level == Letter::S && !tree.has(Letter::S) {
        return Err(refuse(format!(
            "`-bunit {}` needs sockets, and this node's string has no S",
            p.unit.name()
        )));
    }
    let threads = unit.level == Letter::T;
    let amount = match p.amount {
        Amount::Exactly(0) => {
            return Ok(Placement {
                tasks: vec![Vec::new(); tasks],
                cores: None,
                threads,
            })
        }
        Amount::Exactly(n) => Some(n),
        Amount::All if !p.host && tasks > 1 => {
            return Err(refuse(
                "`-bamount all` with `-btype slot` would give everything to the first task; add `-btype host`".into(),
            ))
        }
        Amount::All => None,
    };
    // Sorted once per job (OCS: when the host is first looked at).
    let order = visit_order(tree, &p.sort);
    // The window too is found once per job, on the node as other jobs left it: the job's
    // own earlier slots do not close it (OCS looks again per slot, so after its first slot
    // takes a core `-bstart S` finds no free socket and the second slot goes unbound).
    let (from, to) = window_range(tree, &order, p, unit)?;
    let span = &order[from..to];
    if p.host {
        let got = walk(tree, span, p, unit, amount)?;
        return Ok(Placement {
            tasks: vec![got; tasks],
            cores: None,
            threads,
        });
    }
    let mut work = tree.clone();
    let mut out = Vec::with_capacity(tasks);
    for rank in 0..tasks {
        let got = walk(&work, span, p, unit, amount).map_err(|e| match e {
            GeError::Refused(why) if tasks > 1 => {
                refuse(format!("task {rank} of {tasks} (one slot each): {why}"))
            }
            e => e,
        })?;
        for &t in &got {
            work.nodes[t].used = true;
        }
        out.push(got);
    }
    Ok(Placement {
        tasks: out,
        cores: None,
        threads,
    })
}

/// The pe_hostfile fourth column: `socket,core` pairs joined by `:` (SGE 6.2u5's form),
/// for the cores holding a granted thread, or `socket,thread` pairs for thread units.
pub fn pe_column(tree: &Tree, granted: &[usize], threads: bool) -> String {
    let mut mine = vec![false; tree.nodes.len()];
    for &t in granted {
        mine[t] = true;
    }
    let mut pairs = Vec::new();
    let cores = numbered_cores(tree);
    let mut thread_in_socket = 0;
    let mut last_socket = usize::MAX;
    for &(core, socket, index) in &cores {
        if socket != last_socket {
            thread_in_socket = 0;
            last_socket = socket;
        }
        let ours: Vec<bool> = tree.threads(core).iter().map(|&t| mine[t]).collect();
        if threads {
            for m in &ours {
                if *m {
                    pairs.push(format!("{socket},{thread_in_socket}"));
                }
                thread_in_socket += 1;
            }
        } else if ours.iter().any(|&m| m) {
            pairs.push(format!("{socket},{index}"));
        }
    }
    pairs.join(":")
}
