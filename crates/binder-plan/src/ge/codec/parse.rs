//! Reading a topology string, either form, into a [`Tree`] (pre-order, lone cores given a
//! thread of their own case, every thread numbered).

use super::super::GeError;
use super::{Letter, Node, Tree, MAX_TOPOLOGY_CHARS, MAX_TOPOLOGY_THREADS};

impl Letter {
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
}
