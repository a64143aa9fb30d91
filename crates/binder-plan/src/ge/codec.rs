//! Grid Engine topology strings (SEMANTICS §12): parsing the product form (`NSXCCccSXCCCC`)
//! and OCS's parenthesised form (`(S(C(T)(T))(c(t)))`), building the same tree from an
//! hwloc topology, and writing it back in the product form.
//!
//! The tree is kept in pre-order, so a node's index + 1 is the id OCS gives it (its test
//! suite counts every thread, the hidden lone ones too). Only threads carry occupancy: a
//! core or container is used when all its threads are (OCS's `correct_topology_upper_lower`
//! rule: a parent is lowercase iff all its children are).

use std::fmt::Write as _;

use super::GeError;

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
    pub fn is_core(self) -> bool {
        matches!(self, Letter::C | Letter::E)
    }

    /// Whether a `self` may sit directly inside `parent` in the nested form, `coarser`
    /// being the nearest enclosing unit that is not an N: N anywhere above the cores
    /// (once per path); any other unit strictly finer than `coarser` (C and E are one
    /// rank), a thread only in a core.
    fn nests_in(self, parent: Letter, coarser: Option<Letter>, numa_above: bool) -> bool {
        match (self, parent, coarser) {
            (Letter::N, Letter::C | Letter::E | Letter::T, _) => false,
            (Letter::N, _, _) => !numa_above,
            (Letter::T, p, _) => p.is_core(),
            (_, _, None) => true,
            (child, _, Some(c)) => !child.closes(c),
        }
    }

    /// Which open letters a new `self` closes when it does not repeat one of them: a
    /// socket closes the caches and cores of the previous one, a core the previous core.
    /// N closes only cores and threads: it opens where hwloc attached the NUMA node (`NS`,
    /// `SN`, `SXN`), never inside a core.
    /// A thread closes nothing (it nests in its core; a repeated T is a repeated letter).
    fn closes(self, open: Letter) -> bool {
        let rank = |l: Letter| match l {
            Letter::T => 0,
            Letter::C | Letter::E => 1,
            Letter::Y => 2,
            Letter::X => 3,
            Letter::S | Letter::N => 4,
        };
        match (self, open) {
            // An N sits above the cores: it closes an open core and its thread.
            (Letter::N, o) => o.is_core() || o == Letter::T,
            (Letter::T, _) | (_, Letter::N) => false,
            _ => rank(open) <= rank(self),
        }
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
pub const MAX_TOPOLOGY_CHARS: usize = 256 << 10;

/// The most threads a topology string may describe: 16,384 PUs, the largest node binder
/// plans, which parses, loads and plans in well under a second and 256 MiB.
pub const MAX_TOPOLOGY_THREADS: usize = 16_384;

impl Tree {
    /// Parses either form. Lone cores (`C` with no `T`) get one thread of their own case;
    /// threads are numbered from 0, left to right.
    pub fn parse(text: &str) -> Result<Tree, GeError> {
        let text = text.trim();
        let bad = |why: String| GeError::Topology {
            text: binder_core::text::clip(text, binder_core::text::QUOTE_MAX),
            why,
        };
        if text.is_empty() || text.eq_ignore_ascii_case("NONE") {
            return Err(bad("it describes no CPUs".into()));
        }
        if text.len() > MAX_TOPOLOGY_CHARS {
            return Err(bad(format!("longer than {} KiB", MAX_TOPOLOGY_CHARS >> 10)));
        }
        let mut tree = Tree::default();
        if text.starts_with('(') {
            tree.parse_nested(text).map_err(bad)?;
        } else {
            tree.parse_product(text).map_err(bad)?;
        }
        tree.complete().map_err(bad)?;
        Ok(tree)
    }

    fn push(&mut self, letter: Letter, used: bool, parent: Option<usize>) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            letter,
            used,
            parent,
            children: Vec::new(),
            os: None,
        });
        match parent {
            Some(p) => self.nodes[p].children.push(id),
            None => self.roots.push(id),
        }
        id
    }

    fn parse_product(&mut self, text: &str) -> Result<(), String> {
        let mut open: Vec<usize> = Vec::new();
        for (i, c) in text.chars().enumerate() {
            let letter = Letter::from_char(c).ok_or_else(|| {
                format!(
                    "`{c}` at position {} is not a unit letter (N S X Y C E T, lowercase when taken)",
                    i + 1
                )
            })?;
            // A repeated letter closes back to its previous occurrence; otherwise finer
            // open units are closed.
            if let Some(at) = open.iter().rposition(|&n| self.nodes[n].letter == letter) {
                open.truncate(at);
            } else {
                while open
                    .last()
                    .is_some_and(|&n| letter.closes(self.nodes[n].letter))
                {
                    open.pop();
                }
            }
            let parent = open.last().copied();
            if letter == Letter::T && !parent.is_some_and(|p| self.nodes[p].letter.is_core()) {
                return Err(format!(
                    "the `{c}` at position {} follows no core; a thread comes after its C or E",
                    i + 1
                ));
            }
            let id = self.push(letter, c.is_ascii_lowercase(), parent);
            open.push(id);
        }
        Ok(())
    }

    fn parse_nested(&mut self, text: &str) -> Result<(), String> {
        let mut open: Vec<usize> = Vec::new();
        let mut chars = text.chars().enumerate().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '(' => {
                    let (j, l) = chars.next().ok_or_else(|| "it ends after `(`".to_owned())?;
                    let letter = Letter::from_char(l).ok_or_else(|| {
                        format!("`{l}` at position {} is not a unit letter", j + 1)
                    })?;
                    let parent = open.last().copied();
                    if letter == Letter::T
                        && !parent.is_some_and(|p| self.nodes[p].letter.is_core())
                    {
                        return Err(format!(
                            "the thread at position {} is not inside a core",
                            j + 1
                        ));
                    }
                    // Each unit nests in a coarser one (`(S(S(C)))` is no machine), and a
                    // path has at most one N: so the depth is at most six.
                    let numa_above = open.iter().any(|&o| self.nodes[o].letter == Letter::N);
                    // An N is transparent: below it, a unit must be finer than the unit
                    // above the N (`(S(N(S(C))))` is a socket in a socket).
                    let coarser = open
                        .iter()
                        .rev()
                        .map(|&o| self.nodes[o].letter)
                        .find(|&l| l != Letter::N);
                    if let Some(p) = parent.map(|p| self.nodes[p].letter) {
                        if !letter.nests_in(p, coarser, numa_above) {
                            return Err(format!(
                                "the {} at position {} is inside a {}; a unit nests only in a coarser one (N S X Y C/E T)",
                                letter.char(),
                                j + 1,
                                p.char()
                            ));
                        }
                    }
                    let id = self.push(letter, l.is_ascii_lowercase(), parent);
                    open.push(id);
                }
                ')' => {
                    open.pop()
                        .ok_or_else(|| format!("the `)` at position {} closes nothing", i + 1))?;
                }
                _ => {
                    return Err(format!(
                        "`{c}` at position {} is not `(`, `)` or a unit letter after `(`",
                        i + 1
                    ))
                }
            }
        }
        if !open.is_empty() {
            return Err(format!("{} `(` left open", open.len()));
        }
        Ok(())
    }

    /// Gives lone cores their thread, numbers threads, and checks every unit holds a core.
    /// Linear in the string and without recursion, so neither a long string nor a deep
    /// one costs more than its length.
    fn complete(&mut self) -> Result<(), String> {
        // Rebuild in pre-order with the hidden threads in place: an explicit stack of
        // (old node, new parent), children pushed in reverse so they come out in order.
        let old = std::mem::take(self);
        let mut stack: Vec<(usize, Option<usize>)> =
            old.roots.iter().rev().map(|&r| (r, None)).collect();
        while let Some((n, parent)) = stack.pop() {
            let node = &old.nodes[n];
            let id = self.push(node.letter, node.used, parent);
            if node.letter.is_core() && node.children.is_empty() {
                self.push(Letter::T, node.used, Some(id));
            }
            stack.extend(node.children.iter().rev().map(|&c| (c, Some(id))));
        }
        // Pre-order: every node comes before its descendants, so one backward pass
        // tells which hold a thread.
        let mut holds = vec![false; self.nodes.len()];
        for n in (0..self.nodes.len()).rev() {
            if self.nodes[n].letter == Letter::T {
                holds[n] = true;
            }
            if let (true, Some(p)) = (holds[n], self.nodes[n].parent) {
                holds[p] = true;
            }
        }
        let threads = self.nodes.iter().filter(|n| n.letter == Letter::T).count();
        if threads > MAX_TOPOLOGY_THREADS {
            return Err(format!(
                "it describes {threads} threads; binder plans nodes of at most {MAX_TOPOLOGY_THREADS}"
            ));
        }
        let mut pu = 0;
        for (n, (node, holds)) in self.nodes.iter_mut().zip(holds).enumerate() {
            if node.letter == Letter::T {
                node.os = Some(pu);
                pu += 1;
            } else if !holds {
                return Err(format!(
                    "its {} at position {} holds no core",
                    node.letter.char(),
                    n + 1
                ));
            }
        }
        Ok(())
    }

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
    pub fn used_pus(&self) -> Vec<usize> {
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

    /// The node's string: taken threads lowercase.
    pub fn occupancy_string(&self) -> String {
        self.render(&|n| self.nodes[n].used)
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
mod tests {
    use super::*;

    fn round(s: &str) -> String {
        Tree::parse(s).unwrap().occupancy_string()
    }

    #[test]
    fn product_strings_round_trip() {
        for s in [
            "NSXCCccSXCCCC",
            "NSXYCTtYCTTYeESXYCTTYCTTYEE",
            "SNXYCTTYCTTNXYCTTYCTT",
            "SCCSCC",
            "SCTTCTTEEEE",
            "NSCCccSCCCCSCCCCSCcCC",
        ] {
            assert_eq!(round(s), s);
        }
    }

    #[test]
    fn ids_follow_ocs_numbering() {
        // test_sgeobj_TopologyString.cc: in NSXYCTtYCTTYeE... the free power threads are
        // ids 6, 10, 11 (1-based, hidden threads counted).
        let t = Tree::parse("NSXYCTtYCTTYeESXYCTTYCTTYEE").unwrap();
        assert_eq!(t.nodes[5].letter, Letter::T);
        assert!(!t.nodes[5].used && t.nodes[6].used);
        assert_eq!(t.nodes[16].letter, Letter::S);
        assert_eq!(t.nodes[14].letter, Letter::E);
        assert_eq!(t.nodes[15].letter, Letter::T);
    }

    #[test]
    fn nested_form_normalizes_containers() {
        // ut-case-normalize-B: leaves keep their case, parents follow their children.
        let t = Tree::parse("(n(s(X(c(t))(C(t)(T)))))(n(s(x(c(t)))))").unwrap();
        assert_eq!(t.occupancy_string(), "NSXcCtTnsxc");
        assert_eq!(round("(S(C(T)(T))(C(T)(t)))"), "SCTTCTt");
    }

    #[test]
    fn numa_nests_where_it_is_written() {
        let t = Tree::parse("SNXCNXC").unwrap();
        assert_eq!(t.roots.len(), 1);
        let s = &t.nodes[0];
        assert_eq!(s.children.len(), 2, "{t:?}");
        let t = Tree::parse("NSCSC").unwrap();
        assert_eq!(t.roots.len(), 1);
        assert_eq!(t.nodes[0].children.len(), 2);
    }

    #[test]
    fn bad_strings_say_why() {
        for (s, why) in [
            ("SCQ", "`Q` at position 3"),
            ("TCC", "follows no core"),
            ("SCCS", "holds no core"),
            ("(S(C)", "left open"),
            ("NONE", "no CPUs"),
        ] {
            let e = Tree::parse(s).unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
