//! Grid Engine topology strings (SEMANTICS §12): parsing the product form (`NSXCCccSXCCCC`)
//! and OCS's parenthesised form (`(S(C(T)(T))(c(t)))`), building the same tree from an
//! hwloc topology, and writing it back in the product form.
//!
//! The tree is kept in pre-order, so a node's index + 1 is the id OCS gives it (its test
//! suite counts every thread, the hidden lone ones too). Only threads carry occupancy: a
//! core or container is used when all its threads are (OCS's `correct_topology_upper_lower`
//! rule: a parent is lowercase iff all its children are).

use std::fmt::Write as _;

mod parse;

/// A unit letter: N NUMA node, S socket, X L3, Y L2, C performance core, E efficiency core,
/// T hardware thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Letter {
    /// NUMA node.
    N,
    /// Socket (package).
    S,
    /// L3 cache.
    X,
    /// L2 cache.
    Y,
    /// Performance core.
    C,
    /// Efficiency core.
    E,
    /// Hardware thread.
    T,
}

impl Letter {
    /// The letter for an ASCII character, either case.
    pub fn from_char(c: char) -> Option<Letter> {
        Some(match c.to_ascii_uppercase() {
            'N' => Letter::N,
            'S' => Letter::S,
            'X' => Letter::X,
            'Y' => Letter::Y,
            'C' => Letter::C,
            'E' => Letter::E,
            'T' => Letter::T,
            _ => return None,
        })
    }

    /// The uppercase character.
    pub fn char(self) -> char {
        match self {
            Letter::N => 'N',
            Letter::S => 'S',
            Letter::X => 'X',
            Letter::Y => 'Y',
            Letter::C => 'C',
            Letter::E => 'E',
            Letter::T => 'T',
        }
    }

    /// Whether this is a core (either kind).
    pub(crate) fn is_core(self) -> bool {
        matches!(self, Letter::C | Letter::E)
    }
}

/// One unit of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// What it is.
    pub letter: Letter,
    /// Threads only: taken (lowercase).
    pub used: bool,
    /// Its parent, by index.
    pub parent: Option<usize>,
    /// Its children, by index, in order.
    pub children: Vec<usize>,
    /// Threads: the OS PU number; cores: the hwloc logical index of the core, when the tree
    /// was built from hwloc.
    pub os: Option<usize>,
}

/// A topology as Grid Engine sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    /// Every node, in pre-order (depth first, parents before children).
    pub nodes: Vec<Node>,
    /// The top-level nodes.
    pub roots: Vec<usize>,
}

/// The longest topology string binder reads: 256 KiB holds the largest node it plans
/// ([`MAX_TOPOLOGY_THREADS`]) spelt out in the nested form (about 75 KiB) three times over.
pub(crate) const MAX_TOPOLOGY_CHARS: usize = 256 << 10;

/// The most threads a topology string may describe: 16,384 PUs, the largest node binder
/// plans, which parses, loads and plans in well under a second and 256 MiB.
pub(crate) const MAX_TOPOLOGY_THREADS: usize = 16_384;

impl Tree {
    /// The threads under `n` (or `n` itself), in order.
    pub fn threads(&self, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![n];
        while let Some(m) = stack.pop() {
            let node = &self.nodes[m];
            if node.letter == Letter::T {
                out.push(m);
            }
            stack.extend(node.children.iter().rev());
        }
        out
    }

    /// The cores under `n` (or `n` itself), in order.
    pub fn cores(&self, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![n];
        while let Some(m) = stack.pop() {
            let node = &self.nodes[m];
            if node.letter.is_core() {
                out.push(m);
            } else {
                stack.extend(node.children.iter().rev());
            }
        }
        out
    }

    /// Whether every thread under `n` is free.
    pub fn free(&self, n: usize) -> bool {
        self.threads(n).iter().all(|&t| !self.nodes[t].used)
    }

    /// Whether any thread under `n` is taken: OCS's lowercase start/stop letters.
    pub fn touched(&self, n: usize) -> bool {
        self.threads(n).iter().any(|&t| self.nodes[t].used)
    }

    /// Whether the tree has a unit with this letter.
    pub fn has(&self, letter: Letter) -> bool {
        self.nodes.iter().any(|n| n.letter == letter)
    }

    /// The OS PU numbers of the taken threads.
    pub(crate) fn used_pus(&self) -> Vec<usize> {
        self.nodes
            .iter()
            .filter(|n| n.letter == Letter::T && n.used)
            .filter_map(|n| n.os)
            .collect()
    }

    /// The product form with the threads for which `lower` holds written lowercase, and
    /// every core or container lowercase when all its threads are (OCS).
    pub fn render(&self, lower: &dyn Fn(usize) -> bool) -> String {
        self.render_in(None, lower, None)
    }

    /// [`Tree::render`] visiting the nodes in `order` (a `-bsort` order) when given. With
    /// `sge_cores`, SGE 6.2u5's marking: those cores lowercase (even when another job holds
    /// one of their threads), containers never.
    pub fn render_in(
        &self,
        order: Option<&[usize]>,
        lower: &dyn Fn(usize) -> bool,
        sge_cores: Option<&[usize]>,
    ) -> String {
        let mut out = String::with_capacity(self.nodes.len());
        // Post-order lowercase flags first, then one pre-order pass writes.
        let mut low = vec![false; self.nodes.len()];
        for n in (0..self.nodes.len()).rev() {
            let node = &self.nodes[n];
            low[n] = match sge_cores {
                _ if node.letter == Letter::T => lower(n),
                Some(cores) => node.letter.is_core() && cores.contains(&n),
                None => !node.children.is_empty() && node.children.iter().all(|&c| low[c]),
            };
        }
        let all: Vec<usize>;
        let order = match order {
            Some(o) => o,
            None => {
                all = (0..self.nodes.len()).collect();
                &all
            }
        };
        for &n in order {
            let node = &self.nodes[n];
            // A core's lone thread is not written.
            let lone = node.letter == Letter::T
                && node
                    .parent
                    .is_some_and(|p| self.nodes[p].children.len() == 1);
            if lone {
                continue;
            }
            let c = node.letter.char();
            let _ = out.write_char(if low[n] { c.to_ascii_lowercase() } else { c });
        }
        out
    }

    /// OCS's parenthesised form, `(S(C(T)(t)))`, every thread written: threads by their
    /// state, cores and containers lowercase when all their threads are taken.
    pub fn nested(&self) -> String {
        fn write(tree: &Tree, n: usize, out: &mut String) {
            let node = &tree.nodes[n];
            let c = node.letter.char();
            let low = if node.letter == Letter::T {
                node.used
            } else {
                tree.threads(n).iter().all(|&t| tree.nodes[t].used)
            };
            out.push('(');
            out.push(if low { c.to_ascii_lowercase() } else { c });
            for &child in &node.children {
                write(tree, child, out);
            }
            out.push(')');
        }
        let mut out = String::new();
        for &r in &self.roots {
            write(self, r, &mut out);
        }
        out
    }

    /// The node's string: taken threads lowercase. The flat form (`SCCNCC`) where it
    /// reads back as this tree; else the parenthesised one, which always does (the flat
    /// form cannot say that cores after a NUMA node inside a cache belong to the cache:
    /// found by the fuzzer).
    pub fn occupancy_string(&self) -> String {
        let flat = self.render(&|n| self.nodes[n].used);
        match Tree::parse(&flat) {
            Ok(back) if back.same_shape(self) => flat,
            _ => self.nested(),
        }
    }

    /// Whether `other` has the same units in the same places (case aside).
    pub fn same_shape(&self, other: &Tree) -> bool {
        self.roots.len() == other.roots.len()
            && self.nodes.len() == other.nodes.len()
            && self.nodes.iter().zip(&other.nodes).all(|(a, b)| {
                a.letter == b.letter && a.parent == b.parent && a.children == b.children
            })
    }
}

#[cfg(test)]
mod tests;
