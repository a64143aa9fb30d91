//! Why a selection cannot be dealt to the tasks, each message saying what to change.

use crate::unit::Unit;

/// The selection cannot be dealt to the tasks.
#[derive(Debug, thiserror::Error)]
pub enum DistributeError {
    /// A task's memory policy has no NUMA node to apply to (`memory: hbm` without HBM).
    #[error("{origin}: rank {rank}: {why}")]
    NoMemory {
        /// The shape file.
        origin: String,
        /// The local rank.
        rank: usize,
        /// What was asked and what the node has.
        why: String,
    },
    /// Per-rank rules took every CPU before the other ranks were planned.
    #[error("{origin}: the `ranks:` rules ({rules}) take every cpu, leaving none for the other {rest} rank(s); give the rules fewer resources or add `bind: none` ranks")]
    RulesTakeAll {
        /// The shape.
        origin: String,
        /// The rules' keys.
        rules: String,
        /// How many ranks are left to plan.
        rest: usize,
    },
    /// Fewer units than tasks.
    #[error("{}", too_few(origin, *tasks, *units, *unit, scope, *finer))]
    TooFewUnits {
        /// The shape file.
        origin: String,
        /// Tasks that share the pool.
        tasks: usize,
        /// Units in the pool.
        units: usize,
        /// The unit.
        unit: Unit,
        /// Which part of the pool, for GPU localities (` near gpu:0 (package:0)`).
        scope: String,
        /// Whether a unit of the pool has more than one PU, so that a finer unit gives
        /// more of them (a node without SMT is never told to bind to PUs).
        finer: bool,
    },
    /// A `bind:` width that some chosen units lie outside of (SEMANTICS §11).
    #[error("{origin}: `bind: {width}` cannot widen {units}: {why}")]
    WidthMissing {
        /// The shape file.
        origin: String,
        /// The width asked for, as hwloc names it.
        width: String,
        /// How many units lie outside, and which (`16 unit(s), core:16-31`).
        units: String,
        /// Why (the node has none of that type, or these units lie outside them) and a
        /// width that covers them, or what else to do.
        why: String,
    },
    /// `interleave` with unit core.
    #[error(
        "{origin}: pattern `interleave` deals PUs of cores and needs unit pu, but the unit is {unit} ({rule}); {fix}",
        fix = if *.unit == Unit::None {
            "`bind: none` deals nothing, so drop `pattern: interleave` (or bind to `pu`)"
        } else {
            "add `bind: pu` to `options` or use `packed`/`scatter`"
        }
    )]
    InterleaveNeedsPu {
        /// The shape file.
        origin: String,
        /// The unit the shape has.
        unit: Unit,
        /// How the unit was chosen.
        rule: String,
    },
    /// PyTorch's NUMA binding cannot place a worker (`options.numa-binding`).
    #[error("{origin}: numa-binding: {why}")]
    NumaBinding {
        /// The shape file.
        origin: String,
        /// What is missing, and what to change.
        why: String,
    },
    /// More GPUs asked for than the node has.
    #[error("{origin}: {tasks} task(s) × {per_task} GPU(s) per task need {need} GPU(s), but {source_desc} has {have}{hint}")]
    TooFewGpus {
        /// The shape file.
        origin: String,
        /// Local tasks.
        tasks: usize,
        /// GPUs per task.
        per_task: usize,
        /// Total needed.
        need: usize,
        /// GPUs found.
        have: usize,
        /// The topology source.
        source_desc: String,
        /// What to do.
        hint: String,
    },
    /// More tasks than slots.
    #[error("{origin}: {tasks} tasks but the shape has only {slots} slot(s) on {source_desc} ({detail}); run at most {slots} task{s} per node, ask for more, smaller slots, or let tasks share them (`oversubscribe: true`)", s = if *.slots == 1 { "" } else { "s" })]
    TooFewSlots {
        /// The shape file.
        origin: String,
        /// Local tasks.
        tasks: usize,
        /// Slots taken.
        slots: usize,
        /// Where the slots are (`2 in package:0, 1 in package:1`).
        detail: String,
        /// The topology source.
        source_desc: String,
    },
    /// A slot whose `with` took devices but no CPUs.
    #[error("{origin}: slot {slot} (in {within}) has no CPUs, only devices; add a `core` or `pu` item inside the slot so its task has CPUs to run on")]
    SlotWithoutCpus {
        /// The shape file.
        origin: String,
        /// The slot, by position.
        slot: usize,
        /// Its parent.
        within: String,
    },
    /// `gpu-local` tasks whose GPUs' localities overlap cannot all get CPUs of their own.
    #[error("{origin}: `gpu-local` cannot give {tasks} task(s){scope} CPUs of their own: {units} {unit} are left there after tasks with narrower GPU localities took theirs; give each task GPUs near one another (lower `gpus-per-task`) or run fewer tasks")]
    OverlappingLocality {
        /// The shape file.
        origin: String,
        /// Tasks in the group.
        tasks: usize,
        /// Units left to them.
        units: usize,
        /// The unit.
        unit: Unit,
        /// The GPUs, for the message (` near gpu:2 (package:0), gpu:3 (package:1)`).
        scope: String,
    },
    /// `gpu-remote` on a node where no NUMA node is free of the task's GPUs.
    #[error("{origin}: `bind: gpu-remote` needs a NUMA node without gpu:{gpu}, but {source_desc} has {numa} NUMA node(s) with CPUs and all are near it; use `gpu-local` here")]
    NoRemoteNuma {
        /// The shape file.
        origin: String,
        /// The GPU.
        gpu: usize,
        /// NUMA nodes with CPUs.
        numa: usize,
        /// The topology source.
        source_desc: String,
    },
}

/// The message for [`DistributeError::TooFewUnits`]: counted words in the right number, and
/// only the fixes that apply (a finer unit only when the unit is core and a core has more
/// than one PU; fewer tasks only when there is more than one).
fn too_few(
    origin: &str,
    tasks: usize,
    units: usize,
    unit: Unit,
    scope: &str,
    finer: bool,
) -> String {
    let plural = |n: usize, word: &str| {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    // hwloc's own words: core, PU.
    let word = if unit == Unit::Pu { "PU" } else { "core" };
    let have = if units == 0 {
        format!("no {word} is left in the pool{scope}")
    } else {
        format!("only {} in the pool{scope}", plural(units, word))
    };
    let mut fixes = Vec::new();
    if tasks > 1 && units > 0 {
        fixes.push("run fewer tasks per node");
    }
    fixes.push("select more resources");
    if unit == Unit::Core && finer {
        fixes.push("bind to a finer unit (`bind: pu`)");
    }
    // `oversubscribe` deals a whole pool again; a GPU's locality is dealt apart.
    if tasks > 1 && units > 0 && scope.is_empty() {
        fixes.push("let tasks share units (`oversubscribe: true`)");
    }
    let fixes = match fixes.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{}, or {last}", rest.join(", ")),
        None => String::new(),
    };
    format!("{origin}: {} but {have}; {fixes}", plural(tasks, "task"))
}
