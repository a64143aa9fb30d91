//! Matches the shape's `resources` tree against the topology (SEMANTICS §3, §10).
//!
//! Greedy first fit in hwloc logical order: a request takes the first `count` objects of
//! its type that lie inside its parent (by cpuset containment, which is what lets `numa`
//! hold `core` although NUMA nodes hang off the tree as memory children), that share no PU
//! with an object already taken, and that satisfy all of their own `with` requests.
//! A GPU or NIC is inside an object when its locality lies inside it; devices are taken
//! one by one, and a device request adds no CPUs of its own (it only says where to look):
//! an object whose `with` names only devices brings its own CPUs, as a leaf does.
//!
//! A `slot` item has no hardware object: under each parent it takes task shares, either
//! by matching its `with` inside the parent again and again (each slot disjoint from the
//! earlier ones), or, without `with`, by cutting the parent's free units into equal packed
//! parts. A slot's CPUs are widened to whole binding units before the next slot is taken,
//! so two slots never share a unit.

use std::collections::HashMap;

use crate::cpuset::CpuSet;
use hwlocality::object::TopologyObject;

use crate::gpu::Gpu;
use crate::nic::Nic;
use crate::shape::{CoreKind, Count, ObjType, Resource};
use crate::topology::Topology;

mod candidates;
mod failure;
mod slots;

use candidates::{Candidate, Taken};

pub use failure::{Failure, Named, SelectError};

/// What the resources tree matched.
#[derive(Debug)]
pub(crate) struct Selection<'t> {
    /// The leaves of the match: CPU objects whose CPUs make up the pool (slots' included).
    pub(crate) picks: Vec<&'t TopologyObject>,
    /// NICs named by `type: nic` requests, by index (GPUs a `type: gpu` request matches
    /// only steer CPU selection: tasks get GPUs by `gpus-per-task` or their slot).
    pub nics: Vec<usize>,
    /// The task shares, in selection order (parent by parent); empty without `slot` items.
    pub slots: Vec<Slot>,
    /// Each task's CPUs, when something other than the shape's resources chose them (a
    /// Grid Engine request): `distribute` then deals nothing.
    pub preset: Option<Vec<CpuSet>>,
}

/// One task's share, taken by a `slot` item (SEMANTICS §10).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Slot {
    /// Which parent it was taken in, numbered in selection order: slots with the same
    /// number share a parent (scatter deals round robin over these).
    pub parent: usize,
    /// The parent, as `type:index`, or `the node` for a top-level slot.
    pub within: String,
    /// Its CPUs, widened to whole binding units.
    pub cpus: CpuSet,
    /// GPUs taken inside it.
    pub gpus: Vec<usize>,
    /// NICs taken inside it.
    pub nics: Vec<usize>,
}

impl Selection<'_> {
    /// The union of the picks' CPUs.
    pub(crate) fn cpuset(&self) -> CpuSet {
        let mut set = CpuSet::new();
        for pick in &self.picks {
            crate::topology::add_cpus(pick, &mut set);
        }
        set
    }
}

/// What one request did, for `binder explain`: where it looked, what it matched and
/// why it passed over the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Where the request stands in the shape (`resources[0].with[1]`).
    pub path: String,
    /// What it asked for: `2 core`, `all numa`, `1 slot`.
    pub asked: String,
    /// Where it looked: `the node` or an object such as `package:1`.
    pub within: String,
    /// How many candidates of its type were there.
    pub total: usize,
    /// What it took, as labels (`core:0`).
    pub matched: Vec<String>,
    /// What it passed over and why (`core:0`, `taken by an earlier item`).
    pub skipped: Vec<(String, String)>,
}

/// What `kind: performance|efficiency` needs: the shape's default and the node's
/// performance PUs (`None`: one kind, every core a performance core).
#[derive(Debug, Clone, Default)]
pub(crate) struct Kinds {
    /// `options.kind`.
    pub default: Option<CoreKind>,
    /// PUs of hwloc's most performant CPU kind.
    pub performance: Option<CpuSet>,
}

impl Kinds {
    /// Whether an object with CPUs `set` is of `kind`.
    pub(crate) fn is(&self, kind: CoreKind, set: &CpuSet) -> bool {
        match (&self.performance, kind) {
            (None, CoreKind::Performance) => true,
            (None, CoreKind::Efficiency) => false,
            (Some(p), CoreKind::Performance) => p.includes(set),
            (Some(p), CoreKind::Efficiency) => !p.intersects(set),
            (_, CoreKind::Balanced) => true,
        }
    }
}

/// The node's devices a request can name.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Devices<'d> {
    /// GPUs (empty when the topology was loaded without I/O).
    pub gpus: &'d [Gpu],
    /// NICs (likewise).
    pub nics: &'d [Nic],
}

/// Matches `resources` on `topology`, recording each request's [`Step`] in `trace` when
/// given (`explain`). `unit` is the binding unit's type (core or pu): a slot's CPUs are
/// widened to it, and a slot without `with` counts it.
pub(crate) fn select_traced<'t>(
    topology: &'t Topology,
    devices: Devices<'_>,
    resources: &[Resource],
    unit: ObjType,
    kinds: &Kinds,
    origin: &str,
    trace: Option<&mut Vec<Step>>,
) -> Result<Selection<'t>, SelectError> {
    let mut selector = Selector {
        trace,
        kinds,
        topology,
        devices,
        unit,
        cache: HashMap::new(),
        inside: HashMap::new(),
        owners: None,
        parents: 0,
    };
    let mut taken = Taken::default();
    let mut picks = Vec::new();
    let mut slots = Vec::new();
    for (i, item) in resources.iter().enumerate() {
        let found = selector
            .request(item, &format!("resources[{i}]"), None, &mut taken)
            .map_err(|failure| SelectError {
                origin: origin.to_owned(),
                failure,
            })?;
        picks.extend(found.leaves);
        slots.extend(found.slots);
    }
    Ok(Selection {
        preset: None,
        picks,
        nics: taken.nics.into_iter().collect(),
        slots,
    })
}

struct Selector<'t, 'd> {
    /// Where requests record what they did (`explain` only).
    trace: Option<&'d mut Vec<Step>>,
    kinds: &'d Kinds,
    topology: &'t Topology,
    devices: Devices<'d>,
    unit: ObjType,
    cache: HashMap<ObjType, Vec<&'t TopologyObject>>,
    /// Candidate lists by (type, parent address; 0 for the node), so a parent's subtree
    /// is walked once however many slots are taken in it.
    inside: HashMap<(ObjType, usize), Vec<Candidate<'t, 'd>>>,
    /// The binding unit holding each PU, built on the first slot that needs it.
    owners: Option<HashMap<usize, &'t TopologyObject>>,
    /// Parents slots have been taken in so far.
    parents: usize,
}

/// What one request matched: CPU leaves, and task shares when it is (or holds) a slot.
#[derive(Default)]
struct Found<'t> {
    leaves: Vec<&'t TopologyObject>,
    slots: Vec<Slot>,
}

impl<'t, 'd> Selector<'t, 'd> {
    /// Greedy first fit of one request inside `within` (the whole node when `None`).
    fn request(
        &mut self,
        item: &Resource,
        path: &str,
        within: Option<&Candidate<'t, 'd>>,
        taken: &mut Taken,
    ) -> Result<Found<'t>, Failure> {
        if item.kind == ObjType::Slot {
            return self.slots(item, path, within, taken);
        }
        let scope = within.map(Candidate::cpuset);
        let parent = match within {
            Some(Candidate::Cpu(obj, _)) => Some(*obj),
            _ => None,
        };
        let mut candidates = self.candidates(item.kind, scope.as_ref(), parent);
        let core_kind = match item.kind {
            ObjType::Core | ObjType::Pu => item.core_kind.or(self.kinds.default),
            _ => None,
        };
        if let Some(k) = core_kind {
            candidates.retain(|c| match c {
                Candidate::Cpu(obj, _) => {
                    obj.cpuset().is_some() && self.kinds.is(k, &crate::topology::cpus(obj))
                }
                _ => true,
            });
        }
        // `index:` keeps the objects it names, by their logical index on the whole node
        // (`os_index:` by the kernel's number); those it names that are not here (outside
        // the scope or the job's allocation, taken out, past the node's last) are said if
        // the request fails.
        let mut named = None;
        let list = item.index.as_ref().map(|l| (l, false));
        if let Some((index, os)) = list.or(item.os_index.as_ref().map(|l| (l, true))) {
            let wanted = index.indexes();
            let mut found = Vec::new();
            // What an `os_index:` request could have named here, for the refusal (#64: a
            // NUMA node the node lacks, from Slurm's `mask_ldom`, was blamed on reserved or
            // taken units). Kernel numbers only: they are what users mistake.
            let mut present: Vec<usize> = candidates
                .iter()
                .filter_map(|c| match c {
                    Candidate::Cpu(obj, _) if os => obj.os_index(),
                    _ => None,
                })
                .collect();
            present.sort_unstable();
            present.dedup();
            candidates.retain(|c| match c {
                Candidate::Cpu(obj, _) => {
                    let i = if os {
                        obj.os_index()
                    } else {
                        Some(self.topology.logical_index(obj))
                    };
                    let keep = i.is_some_and(|i| wanted.binary_search(&i).is_ok());
                    if let Some(i) = i.filter(|_| keep) {
                        found.push(i);
                    }
                    keep
                }
                _ => false,
            });
            found.sort_unstable();
            let missing: Vec<usize> = wanted
                .iter()
                .copied()
                .filter(|i| found.binary_search(i).is_err())
                .collect();
            named = Some(Box::new(Named {
                asked: index.to_string(),
                missing: binder_core::cpulist::cpu_list(&missing),
                present: binder_core::cpulist::cpu_list(&present),
                os,
            }));
        }
        let wanted = wanted(item.count);
        let mut failure = Failure {
            named,
            path: path.to_owned(),
            kind: item.kind,
            count: item.count,
            within: within.map_or_else(|| "the node".to_owned(), |c| c.label(self.topology)),
            total: candidates.len(),
            free: 0,
            qualified: 0,
            inner: None,
            unit: None,
            core_kind,
        };
        let mut found = Found::default();
        let mut step = self.trace.is_some().then(|| Step {
            path: path.to_owned(),
            asked: match (&item.index, &item.os_index) {
                (Some(index), _) => format!(
                    "{} {kind} of {kind}:{index}",
                    item.count,
                    kind = item.kind.hwloc_name()
                ),
                (None, Some(os)) => format!(
                    "{} {kind} of {kind} P#{os}",
                    item.count,
                    kind = item.kind.hwloc_name()
                ),
                (None, None) => format!("{} {}", item.count, item.kind.hwloc_name()),
            },
            within: failure.within.clone(),
            total: candidates.len(),
            matched: Vec::new(),
            skipped: Vec::new(),
        });
        // The step goes in the trace before its children's, so the trace reads top down.
        let at = self.trace.as_ref().map(|t| t.len());
        for candidate in &candidates {
            if failure.qualified == wanted {
                break;
            }
            if candidate.is_taken(taken) {
                if let Some(step) = step.as_mut() {
                    step.skipped.push((
                        candidate.label(self.topology),
                        "taken by an earlier request".into(),
                    ));
                }
                continue;
            }
            failure.free += 1;
            let mut inner_taken = taken.clone();
            let inner = self.children(item, path, Some(candidate), &mut inner_taken);
            if let Some(step) = step.as_mut() {
                match &inner {
                    Ok(_) => step.matched.push(candidate.label(self.topology)),
                    Err(why) => step.skipped.push((
                        candidate.label(self.topology),
                        format!("its `with` failed: {why}"),
                    )),
                }
            }
            match inner {
                Ok(inner) => {
                    // A CPU object is a leaf unless its `with` took CPUs of its own: an
                    // object that only names devices (`socket` with `nic`) is the pool.
                    let holds_cpus = !inner.leaves.is_empty() || !inner.slots.is_empty();
                    if let (Candidate::Cpu(obj, _), false) = (candidate, holds_cpus) {
                        found.leaves.push(*obj);
                    }
                    candidate.take(&mut inner_taken);
                    *taken = inner_taken;
                    found.leaves.extend(inner.leaves);
                    found.slots.extend(inner.slots);
                    failure.qualified += 1;
                }
                Err(why) => {
                    failure.inner.get_or_insert_with(|| Box::new(why));
                }
            }
        }
        if let (Some(trace), Some(step), Some(at)) = (self.trace.as_mut(), step, at) {
            trace.insert(at, step);
        }
        met(item.count, wanted, found, failure)
    }

    /// Matches every `with` request of `item` inside `within` (the node when `None`), in
    /// order.
    fn children(
        &mut self,
        item: &Resource,
        path: &str,
        within: Option<&Candidate<'t, 'd>>,
        taken: &mut Taken,
    ) -> Result<Found<'t>, Failure> {
        let mut found = Found::default();
        for (i, child) in item.with.iter().enumerate() {
            let inner = self.request(child, &format!("{path}.with[{i}]"), within, taken)?;
            found.leaves.extend(inner.leaves);
            found.slots.extend(inner.slots);
        }
        Ok(found)
    }
}

/// A request's outcome: met when it took exactly `count` objects (`all`: at least one).
fn met<T>(count: Count, wanted: usize, found: T, failure: Failure) -> Result<T, Failure> {
    let ok = match count {
        Count::Exactly(_) => failure.qualified == wanted,
        Count::All => failure.qualified > 0,
    };
    if ok {
        Ok(found)
    } else {
        Err(failure)
    }
}

fn wanted(count: Count) -> usize {
    match count {
        Count::Exactly(n) => n.get() as usize,
        Count::All => usize::MAX,
    }
}

#[cfg(test)]
mod tests;
