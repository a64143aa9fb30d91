//! Grid Engine binding requests in qsub's own words: OCS/GCS 9.1's `-b*` switches and
//! SGE 6.2u5's `-binding` strategies (SEMANTICS §12).

use super::codec::Letter;

mod parse;

/// Which cores a unit counts: OCS's C (power) or E (efficiency) families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Performance ("power") cores: C, T, S, X, Y, N and their C-prefixed spellings.
    Performance,
    /// Efficiency cores: E, ET, ES, EX, EY, EN.
    Efficiency,
}

/// A `-bunit`: the level bound (T thread, C core, or a container) and the core kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnitSpec {
    /// T, C (a core of `kind`), S, N, X or Y.
    pub level: Letter,
    /// Which cores count.
    pub kind: Kind,
}

impl UnitSpec {
    /// Parses `C`, `CT`, `ES`, … (either case).
    pub fn parse(word: &str) -> Option<UnitSpec> {
        let up = word.to_ascii_uppercase();
        let (kind, rest) = match up.as_bytes() {
            [b'E'] => (Kind::Efficiency, "C"),
            [b'E', ..] => (Kind::Efficiency, &up[1..]),
            [b'C'] => (Kind::Performance, "C"),
            [b'C', ..] => (Kind::Performance, &up[1..]),
            _ => (Kind::Performance, up.as_str()),
        };
        let level = match rest {
            "C" => Letter::C,
            "T" => Letter::T,
            "S" => Letter::S,
            "N" => Letter::N,
            "X" => Letter::X,
            "Y" => Letter::Y,
            _ => return None,
        };
        Some(UnitSpec { level, kind })
    }

    /// The OCS spelling (`C`, `T`, `ES`, …).
    pub fn name(self) -> String {
        match (self.kind, self.level) {
            (Kind::Performance, l) => l.char().to_string(),
            (Kind::Efficiency, Letter::C) => "E".into(),
            (Kind::Efficiency, l) => format!("E{}", l.char()),
        }
    }
}

/// How many units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// This many (0 disables binding, as in OCS).
    Exactly(usize),
    /// Every unit the walk finds, at least one (binder's addition).
    All,
}

/// A letter of `-bsort`, `-bstart` or `-bstop`: uppercase means a completely free unit,
/// lowercase a partly or fully used one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The level.
    pub letter: Letter,
    /// Lowercase in the request.
    pub used: bool,
}

/// OCS's packed walk and its modifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// `-bunit` (default C).
    pub unit: UnitSpec,
    /// `-bamount` (default 1).
    pub amount: Amount,
    /// `-btype host`: one walk for the node, every task bound to all of it.
    pub host: bool,
    /// `-bsort` letters (die letters A are accepted and ignored).
    pub sort: Vec<Mark>,
    /// `-bstart`.
    pub start: Option<Mark>,
    /// `-bstop`.
    pub stop: Option<Mark>,
    /// `-bfilter`: a topology string whose lowercase units are masked.
    pub filter: Option<String>,
}

/// The binding strategy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    /// OCS 9.1 packed (with sort, start, stop, filter).
    Packed(Packed),
    /// SGE `linear:N[:S,C]`.
    Linear {
        /// Cores.
        amount: usize,
        /// The first core, when given.
        start: Option<(usize, usize)>,
    },
    /// SGE `striding:N:STEP[:S,C]`.
    Striding {
        /// Cores.
        amount: usize,
        /// Distance between them, in cores.
        step: usize,
        /// The first core, when given.
        start: Option<(usize, usize)>,
    },
    /// SGE `explicit:S,C[:S,C]...`.
    Explicit(Vec<(usize, usize)>),
}

/// Who applies the binding (`-binstance`, or the word before an SGE strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Instance {
    /// binder binds the task.
    #[default]
    Set,
    /// Nothing is bound; `SGE_BINDING` tells the task its CPUs.
    Env,
    /// The pe_hostfile column (`--format pe`); the task is bound as with `set`.
    Pe,
}

impl Instance {
    /// The word.
    pub fn name(self) -> &'static str {
        match self {
            Instance::Set => "set",
            Instance::Env => "env",
            Instance::Pe => "pe",
        }
    }
    fn parse(word: &str) -> Option<Instance> {
        match word {
            "set" => Some(Instance::Set),
            "env" => Some(Instance::Env),
            "pe" => Some(Instance::Pe),
            _ => None,
        }
    }
}

/// A whole request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// What to bind.
    pub strategy: Strategy,
    /// Who binds it.
    pub instance: Instance,
    /// The request as given, for reports.
    pub text: String,
}

/// The largest amount a request may name; no node has more units.
pub(crate) const MAX_AMOUNT: usize = 1 << 20;

#[cfg(test)]
mod tests;
