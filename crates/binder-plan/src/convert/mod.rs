//! `binder convert`: a peer tool's launch line as a shape (#46). Open MPI's
//! `--map-by/--bind-to/--rank-by`, Slurm's `--cpu-bind/--distribution/-c/--hint/
//! --ntasks-per-*`, `numactl` and `hwloc-bind` spellings are read into one small
//! `Want` (what each task gets, how tasks are dealt, how wide they bind), and that is
//! written as a shape. What a shape cannot say is refused with why and what to do
//! instead; what converts only approximately is said in `notes`.
//!
//! Values in, text out: no file, no environment. The spellings each peer takes are
//! parsed in `peers`; the shape is written here, from one model, so that the four
//! peers' shapes read alike and the guide's table of spellings is what this prints.

mod peers;

use std::fmt;

/// The tool whose spelling is converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Open MPI 4.1's `mpirun` mapping options (ORTE).
    Ompi,
    /// Open MPI 5's `mpirun` mapping options (PRRTE 3).
    Ompi5,
    /// MPICH's Hydra (`mpiexec -bind-to … -map-by …`).
    Mpich,
    /// Intel MPI's `I_MPI_PIN_*` variables, as `NAME=VALUE` words.
    Impi,
    /// Slurm's `srun`/`sbatch` binding options.
    Slurm,
    /// `numactl`.
    Numactl,
    /// `hwloc-bind`.
    HwlocBind,
    /// torchrun (`torch.distributed.run`): `--numa-binding`.
    Torchrun,
}

/// A converted line: the shape's YAML and what the reader should know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// The shape, as a file's text (comments say where it came from).
    pub shape: String,
    /// What converts only approximately, or was left out, one sentence each.
    pub notes: Vec<String>,
}

/// Why a line cannot be converted: the option, and what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertError(pub String);

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConvertError {}

/// The most words a line may have (a launch line has tens).
const MAX_WORDS: usize = 256;

/// Converts `words` (the peer's options, without the program) to a shape.
pub fn convert(peer: Peer, words: &[String]) -> Result<Converted, ConvertError> {
    if words.len() > MAX_WORDS {
        return Err(ConvertError(format!(
            "more than {MAX_WORDS} words; give only the binding options"
        )));
    }
    if let Some(w) = words.iter().find(|w| w.len() > 4096) {
        return Err(ConvertError(format!(
            "a word of {} bytes; give only the binding options",
            w.len()
        )));
    }
    let mut notes = Vec::new();
    let want = match peer {
        Peer::Ompi => peers::ompi(words, &mut notes, false)?,
        Peer::Ompi5 => peers::ompi(words, &mut notes, true)?,
        Peer::Mpich => peers::mpich(words, &mut notes)?,
        Peer::Impi => peers::impi(words, &mut notes)?,
        Peer::Slurm => peers::slurm(words, &mut notes)?,
        Peer::Numactl => peers::numactl(words, &mut notes)?,
        Peer::HwlocBind => peers::hwloc_bind(words, &mut notes)?,
        Peer::Torchrun => peers::torchrun(words, &mut notes)?,
    };
    let line = words
        .iter()
        .map(|w| comment_safe(w))
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Converted {
        shape: want.render(peer, &line),
        notes,
    })
}

/// A word as it may stand in the shape's first comment: no line break or other control
/// character (which would end the comment and put the rest of the word into the YAML).
fn comment_safe(word: &str) -> String {
    word.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// What each task of a converted line gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Want {
    /// The container tasks are dealt over, and how: round robin one at a time
    /// (`None` in `per_container`), or `n` per container before the next.
    pub over: Option<&'static str>,
    pub per_container: Option<usize>,
    /// Each task's units: `core` or `pu`, how many, and whether a core is used through
    /// one PU only (Slurm's `--hint=nomultithread`, Open MPI's `--bind-to hwthread`).
    pub unit: &'static str,
    pub count: usize,
    pub one_pu: bool,
    /// `options.bind` (`none`, a wider binding, `core` over PUs), when not the unit's.
    pub bind: Option<&'static str>,
    /// `options.membind`.
    pub membind: Option<&'static str>,
    /// `options.memory`: NUMA node numbers or `all`, when not the task's own nodes.
    pub memory: Option<String>,
    /// `options.oversubscribe` (Open MPI's `--oversubscribe`, Slurm's `--overcommit`).
    pub oversubscribe: bool,
    /// Every task's objects named outright (`hwloc-bind core:0-3`, `numactl -N 1`):
    /// the type and its logical index list.
    pub fixed: Option<(&'static str, String)>,
    /// Whether `fixed` names objects by the kernel's numbers (`os_index:`).
    pub fixed_os: bool,
    /// The object `fixed` lies in (`hwloc-bind socket:1.core:0-1`): its type and index
    /// list; `fixed` is then the child's type and a count.
    pub within: Option<(&'static str, String)>,
    /// Each task's own objects by the kernel's numbers, in rank order (Slurm's
    /// `map_cpu`/`mask_cpu`): the type and its list, written as `ranks:` rules.
    pub per_rank: Vec<(&'static str, String)>,
    /// `options.numa-binding` (torchrun's `--numa-binding`).
    pub numa_binding: Option<&'static str>,
    /// Ranks dealt round robin over the containers though each takes `per_container`
    /// (Open MPI's `--map-by ppr:N:OBJ --rank-by OBJ`): `pattern: scatter`.
    pub rank_across: bool,
    /// Each container takes round robin's share of the tasks, ranks filling one before
    /// the next (Open MPI 5's FILL ranking): `pattern: balanced`.
    pub balanced: bool,
    /// Tasks dealt container after container (`pattern: packed` over `over`'s slots), not
    /// round robin (Open MPI 5's `--map-by slot:PE=n`, kept inside a package).
    pub packed_over: bool,
    /// `per_rank` names objects by hwloc's logical numbers (`index:`), not the kernel's
    /// (Open MPI 5's `pe-list=`).
    pub per_rank_logical: bool,
}

impl Default for Want {
    fn default() -> Want {
        Want {
            over: None,
            per_container: None,
            unit: "core",
            count: 1,
            one_pu: false,
            bind: None,
            membind: None,
            memory: None,
            oversubscribe: false,
            fixed: None,
            fixed_os: false,
            within: None,
            per_rank: Vec::new(),
            numa_binding: None,
            rank_across: false,
            balanced: false,
            packed_over: false,
            per_rank_logical: false,
        }
    }
}

impl Want {
    /// The shape's text.
    fn render(&self, peer: Peer, line: &str) -> String {
        let tool = match peer {
            Peer::Ompi => "ompi",
            Peer::Ompi5 => "ompi5",
            Peer::Mpich => "mpich",
            Peer::Impi => "impi",
            Peer::Slurm => "slurm",
            Peer::Numactl => "numactl",
            Peer::HwlocBind => "hwloc-bind",
            Peer::Torchrun => "torchrun",
        };
        let mut out = format!("# binder convert --from {tool} -- {line}\n");
        let mut options = Vec::new();
        if self.balanced {
            options.push("  pattern: balanced".to_owned());
        } else if self.over.is_some()
            && !self.packed_over
            && (self.per_container.is_none() || self.rank_across)
        {
            options.push("  pattern: scatter".to_owned());
        }
        if let Some(bind) = self.bind {
            options.push(format!("  bind: {bind}"));
        }
        if let Some(membind) = self.membind {
            options.push(format!("  membind: {membind}"));
        }
        if let Some(memory) = &self.memory {
            options.push(format!("  memory: {memory}"));
        }
        if self.oversubscribe {
            options.push("  oversubscribe: true".to_owned());
        }
        if let Some(mode) = self.numa_binding {
            options.push(format!("  numa-binding: {mode}"));
        }
        if !options.is_empty() {
            out.push_str("options:\n");
            for o in options {
                out.push_str(&o);
                out.push('\n');
            }
        }
        out.push_str("resources:\n");
        if self.numa_binding.is_some() {
            out.push_str("  - type: core\n    count: all\n");
            return out;
        }
        if self.bind == Some("none") && self.fixed.is_none() && self.per_container.is_none() {
            out.push_str("  - type: machine\n");
            return out;
        }
        if !self.per_rank.is_empty() {
            out.push_str(&format!(
                "  - type: {}\n    count: all\nranks:\n",
                self.unit
            ));
            let pick = if self.per_rank_logical {
                "index"
            } else {
                "os_index"
            };
            for (rank, (kind, list)) in self.per_rank.iter().enumerate() {
                out.push_str(&format!(
                    "  {rank}:\n    resources:\n      - type: {kind}\n        {pick}: {list}\n"
                ));
            }
            return out;
        }
        if let (Some((parent, pi)), Some((kind, n))) = (&self.within, &self.fixed) {
            let pick = match (pi.as_str(), self.fixed_os) {
                ("" | "all", _) => "count",
                (_, true) => "os_index",
                (_, false) => "index",
            };
            let pi = if pi.is_empty() { "all" } else { pi };
            out.push_str(&format!(
                "  - type: {parent}\n    {pick}: {pi}\n    with:\n      - type: {kind}\n        count: {n}\n"
            ));
            return out;
        }
        if let Some((kind, index)) = &self.fixed {
            let pick = match (index.as_str(), self.fixed_os) {
                ("all", _) => "count",
                (_, true) => "os_index",
                (_, false) => "index",
            };
            out.push_str(&format!("  - type: {kind}\n    {pick}: {index}\n"));
            return out;
        }
        let mut depth = 1;
        let item = |out: &mut String, depth: usize, kind: &str, count: &str, more: bool| {
            let pad = "  ".repeat(depth);
            out.push_str(&format!("{pad}- type: {kind}\n{pad}  count: {count}\n"));
            if more {
                out.push_str(&format!("{pad}  with:\n"));
            }
        };
        if let Some(over) = self.over {
            item(&mut out, depth, over, "all", true);
            depth += 2;
        }
        let slots = self
            .per_container
            .map_or_else(|| "all".to_owned(), |n| n.to_string());
        item(&mut out, depth, "slot", &slots, true);
        depth += 2;
        item(
            &mut out,
            depth,
            self.unit,
            &self.count.to_string(),
            self.one_pu,
        );
        if self.one_pu {
            item(&mut out, depth + 2, "pu", "1", false);
        }
        out
    }
}

#[cfg(test)]
mod tests;
