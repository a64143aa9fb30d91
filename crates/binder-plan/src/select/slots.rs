//! Slots: task shares taken under each parent, by matching the slot's `with` again and
//! again or by cutting the parent's free units into equal packed parts, each widened to
//! whole binding units (SEMANTICS §10).

use crate::cpuset::CpuSet;
use hwlocality::object::TopologyObject;

use super::{met, wanted, Candidate, Failure, Found, Selector, Slot, Step, Taken};
use crate::shape::{Count, ObjType, Resource};

impl<'t, 'd> Selector<'t, 'd> {
    /// Takes the task shares of one `slot` item inside `within`.
    pub(super) fn slots(
        &mut self,
        item: &Resource,
        path: &str,
        within: Option<&Candidate<'t, 'd>>,
        taken: &mut Taken,
    ) -> Result<Found<'t>, Failure> {
        let at = self.trace.as_ref().map(|t| t.len());
        let result = self.slots_inner(item, path, within, taken);
        if let (Some(trace), Some(at)) = (self.trace.as_mut(), at) {
            let matched = match &result {
                Ok(found) => found
                    .slots
                    .iter()
                    .map(|s| format!("cpus {}", s.cpus))
                    .collect(),
                Err(_) => Vec::new(),
            };
            let skipped = match &result {
                Err(why) => vec![("slot".to_owned(), why.to_string())],
                Ok(_) => Vec::new(),
            };
            trace.insert(
                at,
                Step {
                    path: path.to_owned(),
                    asked: format!("{} slot", item.count),
                    within: within
                        .map_or_else(|| "the node".to_owned(), |c| c.label(self.topology)),
                    total: 0,
                    matched,
                    skipped,
                },
            );
        }
        result
    }

    fn slots_inner(
        &mut self,
        item: &Resource,
        path: &str,
        within: Option<&Candidate<'t, 'd>>,
        taken: &mut Taken,
    ) -> Result<Found<'t>, Failure> {
        let parent = self.parents;
        self.parents += 1;
        let label = within.map_or_else(|| "the node".to_owned(), |c| c.label(self.topology));
        let scope = within.map(Candidate::cpuset);
        let mut failure = Failure {
            named: None,
            path: path.to_owned(),
            kind: ObjType::Slot,
            count: item.count,
            within: label.clone(),
            total: 0,
            free: 0,
            qualified: 0,
            inner: None,
            unit: None,
            core_kind: None,
        };
        let mut found = Found::default();
        if item.with.is_empty() {
            // Equal packed parts of the parent's free units (SEMANTICS §10).
            let unit = self.unit;
            // The units inside a CPU parent (its subtree); else, and for a parent smaller
            // than a unit (a PU under unit core), the units meeting the scope.
            let inside = match within {
                Some(Candidate::Cpu(obj, _)) => self.topology.objects_inside(unit, obj),
                _ => Vec::new(),
            };
            let units: Vec<&'t TopologyObject> = if inside.is_empty() {
                self.objects(unit)
                    .iter()
                    .copied()
                    .filter(|u| {
                        u.cpuset().is_some()
                            && scope
                                .as_ref()
                                .is_none_or(|w| crate::topology::touches(u, w))
                    })
                    .collect()
            } else {
                inside
            };
            let free: Vec<&'t TopologyObject> = units
                .iter()
                .copied()
                .filter(|u| !crate::topology::touches(u, &taken.cpus))
                .collect();
            let (slots, size) = match item.count {
                Count::Exactly(n) => (n.get() as usize, free.len() / n.get() as usize),
                Count::All => (free.len(), 1),
            };
            if size == 0 || slots == 0 {
                failure.total = units.len();
                failure.free = free.len();
                failure.unit = Some(unit);
                return Err(failure);
            }
            for part in free.chunks(size).take(slots) {
                let mut cpus = CpuSet::new();
                for u in part {
                    crate::topology::add_cpus(u, &mut cpus);
                }
                taken.cpus |= &cpus;
                found.leaves.extend(part.iter().copied());
                found.slots.push(Slot {
                    parent,
                    within: label.clone(),
                    cpus,
                    gpus: Vec::new(),
                    nics: Vec::new(),
                });
            }
            return Ok(found);
        }
        // Match the slot's `with` inside the parent, again and again. Every success takes
        // at least one object, so this ends; the bound is a second guard.
        let wanted = wanted(item.count);
        let bound =
            self.objects(ObjType::Pu).len() + self.devices.gpus.len() + self.devices.nics.len() + 1;
        while failure.qualified < wanted.min(bound) {
            let mut inner_taken = taken.clone();
            let inner = self.children(item, path, within, &mut inner_taken);
            match inner {
                Ok(inner) => {
                    let mut cpus = CpuSet::new();
                    for leaf in &inner.leaves {
                        crate::topology::add_cpus(leaf, &mut cpus);
                    }
                    let cpus = self.widen_to_units(&cpus);
                    let gpus = inner_taken.gpus.difference(&taken.gpus).copied().collect();
                    let nics = inner_taken.nics.difference(&taken.nics).copied().collect();
                    inner_taken.cpus |= &cpus;
                    *taken = inner_taken;
                    found.leaves.extend(inner.leaves);
                    found.slots.push(Slot {
                        parent,
                        within: label.clone(),
                        cpus,
                        gpus,
                        nics,
                    });
                    failure.qualified += 1;
                }
                Err(why) => {
                    failure.inner = Some(Box::new(why));
                    break;
                }
            }
        }
        met(item.count, wanted, found, failure)
    }

    /// The whole binding units (cores, or PUs) that hold any CPU of `set`.
    pub(super) fn widen_to_units(&mut self, set: &CpuSet) -> CpuSet {
        if self.unit != ObjType::Core {
            return set.clone();
        }
        let (topology, unit) = (self.topology, self.unit);
        let owners = self.owners.get_or_insert_with(|| topology.pu_owners(unit));
        let mut out = CpuSet::new();
        for pu in set.iter_set() {
            if out.is_set(pu) {
                continue;
            }
            match owners.get(&pu).filter(|u| u.cpuset().is_some()) {
                Some(unit) => crate::topology::add_cpus(unit, &mut out),
                None => out.set(pu),
            }
        }
        out
    }
}
