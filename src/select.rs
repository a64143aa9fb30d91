//! Matches the shape's `resources` tree against the topology (SEMANTICS §3).
//!
//! Greedy first fit in hwloc logical order: a request takes the first `count` objects of
//! its type that lie inside its parent (by cpuset containment, which is what lets `numa`
//! hold `core` although NUMA nodes hang off the tree as memory children), that share no PU
//! with an object already taken, and that satisfy all of their own `with` requests.
//! A GPU is inside an object when its locality lies inside it; GPUs are taken one by one,
//! and a GPU request adds no CPUs of its own (it only says where to look).

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::object::TopologyObject;

use crate::gpu::{object_label, Gpu};
use crate::shape::{Count, ObjType, Resource};
use crate::topology::Topology;

/// What the resources tree matched: the deepest objects picked, in selection order.
#[derive(Debug)]
pub struct Selection<'t> {
    /// The leaves of the match: CPU objects whose CPUs make up the pool.
    pub picks: Vec<&'t TopologyObject>,
    /// GPUs named by `type: gpu` requests, by index.
    pub gpus: Vec<usize>,
}

impl Selection<'_> {
    /// The union of the picks' CPUs.
    pub fn cpuset(&self) -> CpuSet {
        let mut set = CpuSet::new();
        for pick in &self.picks {
            if let Some(cpus) = pick.cpuset() {
                set |= &*cpus;
            }
        }
        set
    }
}

/// The shape asks for more than this node has.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {failure}")]
pub struct SelectError {
    /// The shape file, for the message.
    pub origin: String,
    /// The outermost request that failed, with the reason inside.
    pub failure: Failure,
}

/// One request that could not be met, and why.
#[derive(Debug)]
pub struct Failure {
    /// Where the request stands in the shape (`resources[0].with[1]`).
    pub path: String,
    /// What it asked for.
    pub kind: ObjType,
    /// How many.
    pub count: Count,
    /// Where it looked: `the node` or an object such as `package:1`.
    pub within: String,
    /// Objects of the type in that scope (allowed ones).
    pub total: usize,
    /// Objects there that were not already taken.
    pub free: usize,
    /// Objects that qualified.
    pub qualified: usize,
    /// Why the first free object did not qualify, when a nested request failed.
    pub inner: Option<Box<Failure>>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.kind.hwloc_name();
        write!(
            f,
            "{} asks for {} {kind} in {}, ",
            self.path, self.count, self.within
        )?;
        if self.total == 0 {
            return write!(
                f,
                "which has no allowed {kind}; choose a type it has (see `lstopo`)"
            );
        }
        let have = format!("{} allowed {kind} ({} free)", self.total, self.free);
        match &self.inner {
            Some(inner) if self.qualified == 0 => write!(f, "but none of its {have} qualifies: {inner}"),
            Some(inner) => write!(f, "but only {} of its {have} qualify: {inner}", self.qualified),
            None if self.free == self.total => {
                write!(f, "which has {have}; lower `count` or use `count: all`")
            }
            None => write!(
                f,
                "which has {have}, the rest already taken by earlier items; lower `count` or use `count: all`"
            ),
        }
    }
}

/// Matches `resources` on `topology`; `gpus` are the node's GPUs (empty when not loaded).
pub fn select<'t>(
    topology: &'t Topology,
    gpus: &[Gpu],
    resources: &[Resource],
    origin: &str,
) -> Result<Selection<'t>, SelectError> {
    let mut selector = Selector {
        topology,
        gpus,
        cache: HashMap::new(),
    };
    let mut taken = Taken {
        cpus: CpuSet::new(),
        gpus: BTreeSet::new(),
    };
    let mut picks = Vec::new();
    for (i, item) in resources.iter().enumerate() {
        let found = selector
            .request(item, &format!("resources[{i}]"), None, &mut taken)
            .map_err(|failure| SelectError {
                origin: origin.to_owned(),
                failure,
            })?;
        picks.extend(found);
    }
    Ok(Selection {
        picks,
        gpus: taken.gpus.into_iter().collect(),
    })
}

struct Selector<'t, 'g> {
    topology: &'t Topology,
    gpus: &'g [Gpu],
    cache: HashMap<ObjType, Vec<&'t TopologyObject>>,
}

#[derive(Clone)]
struct Taken {
    cpus: CpuSet,
    gpus: BTreeSet<usize>,
}

/// Something a request can match: a CPU-side object or a GPU.
#[derive(Clone, Copy)]
enum Candidate<'t, 'g> {
    Cpu(&'t TopologyObject),
    Gpu(&'g Gpu),
}

impl Candidate<'_, '_> {
    fn cpuset(&self) -> CpuSet {
        match self {
            Candidate::Cpu(obj) => obj.cpuset().map(|s| s.clone_target()).unwrap_or_default(),
            Candidate::Gpu(gpu) => gpu.locality.clone(),
        }
    }

    fn label(&self) -> String {
        match self {
            Candidate::Cpu(obj) => object_label(obj),
            Candidate::Gpu(gpu) => format!("gpu:{}", gpu.index),
        }
    }

    fn is_taken(&self, taken: &Taken) -> bool {
        match self {
            Candidate::Cpu(obj) => obj.cpuset().is_some_and(|s| s.intersects(&taken.cpus)),
            Candidate::Gpu(gpu) => taken.gpus.contains(&gpu.index),
        }
    }
}

impl<'t, 'g> Selector<'t, 'g> {
    fn candidates(&mut self, kind: ObjType, within: Option<&CpuSet>) -> Vec<Candidate<'t, 'g>> {
        let inside = |set: &CpuSet| within.is_none_or(|w| w.includes(set));
        if kind == ObjType::Gpu {
            return self
                .gpus
                .iter()
                .filter(|g| inside(&g.locality))
                .map(Candidate::Gpu)
                .collect();
        }
        let topology = self.topology;
        let all = self
            .cache
            .entry(kind)
            .or_insert_with(|| topology.objects(kind));
        all.iter()
            .filter(|obj| obj.cpuset().is_some_and(|s| inside(&s)))
            .map(|obj| Candidate::Cpu(obj))
            .collect()
    }

    /// Greedy first fit of one request inside `within` (the whole node when `None`).
    fn request(
        &mut self,
        item: &Resource,
        path: &str,
        within: Option<&Candidate<'t, 'g>>,
        taken: &mut Taken,
    ) -> Result<Vec<&'t TopologyObject>, Failure> {
        let scope = within.map(Candidate::cpuset);
        let candidates = self.candidates(item.kind, scope.as_ref());
        let wanted = match item.count {
            Count::Exactly(n) => n.get() as usize,
            Count::All => usize::MAX,
        };
        let mut failure = Failure {
            path: path.to_owned(),
            kind: item.kind,
            count: item.count,
            within: within.map_or_else(|| "the node".to_owned(), Candidate::label),
            total: candidates.len(),
            free: 0,
            qualified: 0,
            inner: None,
        };
        let mut leaves = Vec::new();
        for candidate in &candidates {
            if failure.qualified == wanted {
                break;
            }
            if candidate.is_taken(taken) {
                continue;
            }
            failure.free += 1;
            let mut inner_taken = taken.clone();
            let mut inner_leaves = Vec::new();
            let mut ok = true;
            for (i, child) in item.with.iter().enumerate() {
                let child_path = format!("{path}.with[{i}]");
                match self.request(child, &child_path, Some(candidate), &mut inner_taken) {
                    Ok(found) => inner_leaves.extend(found),
                    Err(why) => {
                        failure.inner.get_or_insert_with(|| Box::new(why));
                        ok = false;
                        break;
                    }
                }
            }
            if !ok {
                continue;
            }
            match candidate {
                Candidate::Cpu(obj) => {
                    if item.with.is_empty() {
                        leaves.push(*obj);
                    }
                    if let Some(set) = obj.cpuset() {
                        taken.cpus |= &*set;
                    }
                }
                Candidate::Gpu(gpu) => {
                    taken.gpus.insert(gpu.index);
                }
            }
            taken.gpus.extend(inner_taken.gpus);
            leaves.extend(inner_leaves);
            failure.qualified += 1;
        }
        let met = match item.count {
            Count::Exactly(_) => failure.qualified == wanted,
            Count::All => failure.qualified > 0,
        };
        if met {
            Ok(leaves)
        } else {
            Err(failure)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Shape;
    use crate::topology::{load, Source};

    fn labels(desc: &str, yaml: &str) -> Result<Vec<String>, String> {
        let topology = load(&Source::Synthetic(desc.into()), false).expect("topology");
        let shape = Shape::from_yaml(yaml, "t.yaml").expect("shape");
        select(&topology, &[], &shape.resources, "t.yaml")
            .map(|s| s.picks.iter().map(|o| object_label(o)).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn greedy_first_fit_in_logical_order() {
        let got = labels("pack:2 core:4 pu:2", "resources: [{type: core, count: 3}]").unwrap();
        assert_eq!(got, ["core:0", "core:1", "core:2"]);
    }

    #[test]
    fn siblings_never_share_a_pu() {
        // SEMANTICS §3: two cores, then two PUs of the third core.
        let got = labels(
            "pack:1 core:4 pu:2",
            "resources: [{type: core, count: 2}, {type: pu, count: 2}]",
        )
        .unwrap();
        assert_eq!(got, ["core:0", "core:1", "pu:4", "pu:5"]);
        let got = labels(
            "pack:2 core:2 pu:1",
            "resources: [{type: socket}, {type: socket}]",
        )
        .unwrap();
        assert_eq!(got, ["package:0", "package:1"]);
    }

    #[test]
    fn nested_requests_match_inside_their_parent() {
        let yaml = "resources: [{type: numa, count: all, with: [{type: core, count: 2}]}]";
        let got = labels("pack:2 numa:2 core:4 pu:2", yaml).unwrap();
        assert_eq!(
            got,
            ["core:0", "core:1", "core:4", "core:5", "core:8", "core:9", "core:12", "core:13"]
        );
    }

    #[test]
    fn a_parent_that_cannot_hold_its_children_is_skipped() {
        // Package 0 has 2 cores, so `with: core: 3` can only be met by none: error names both levels.
        let yaml = "resources: [{type: socket, with: [{type: core, count: 3}]}]";
        let err = labels("pack:2 core:2 pu:1", yaml).unwrap_err();
        assert_eq!(
            err,
            "t.yaml: resources[0] asks for 1 package in the node, but none of its 2 allowed package (2 free) \
             qualifies: resources[0].with[0] asks for 3 core in package:0, which has 2 allowed core (2 free); \
             lower `count` or use `count: all`"
        );
    }

    #[test]
    fn not_enough_objects() {
        let err = labels("pack:1 core:4 pu:1", "resources: [{type: core, count: 5}]").unwrap_err();
        assert!(
            err.contains("asks for 5 core in the node, which has 4 allowed core (4 free)"),
            "{err}"
        );
        let err = labels(
            "pack:1 core:4 pu:1",
            "resources: [{type: core, count: 3}, {type: core, count: 2}]",
        )
        .unwrap_err();
        assert!(err.contains("resources[1] asks for 2 core"), "{err}");
        assert!(err.contains("already taken by earlier items"), "{err}");
    }

    #[test]
    fn count_all_needs_at_least_one() {
        let err = labels(
            "pack:1 core:4 pu:1",
            "resources: [{type: l3cache, count: all}]",
        )
        .unwrap_err();
        assert!(
            err.contains("which has no allowed l3cache; choose a type it has"),
            "{err}"
        );
        let got = labels(
            "pack:1 l3:2 core:2 pu:1",
            "resources: [{type: l3, count: all}]",
        )
        .unwrap();
        assert_eq!(got, ["l3cache:0", "l3cache:1"]);
    }

    #[test]
    fn taken_objects_are_reported_as_such() {
        let yaml =
            "resources: [{type: core}, {type: socket, count: 2, with: [{type: core, count: 2}]}]";
        let err = labels("pack:2 core:2 pu:1", yaml).unwrap_err();
        assert!(
            err.contains("resources[1] asks for 2 package in the node, which has 2 allowed package (1 free), the rest already taken"),
            "{err}"
        );
    }
}
