//! What a request can match: the node's objects of a type inside a scope (a parent's
//! subtree walked once and kept, or a filter of the node's objects), its GPUs and NICs,
//! and what earlier requests took.

use std::collections::BTreeSet;

use crate::cpuset::CpuSet;
use hwlocality::object::TopologyObject;

use super::{Devices, Selector};
use crate::gpu::Gpu;
use crate::nic::Nic;
use crate::shape::ObjType;
use crate::topology::Topology;

/// What earlier requests took: CPUs, and GPUs and NICs by index.
#[derive(Clone, Default)]
pub(super) struct Taken {
    pub(super) cpus: CpuSet,
    pub(super) gpus: BTreeSet<usize>,
    pub(super) nics: BTreeSet<usize>,
}

/// Something a request can match: a CPU-side object (with the OS number of its first PU,
/// for a quick "already taken" test) or a device.
#[derive(Clone, Copy)]
pub(super) enum Candidate<'t, 'd> {
    Cpu(&'t TopologyObject, usize),
    Gpu(&'d Gpu),
    Nic(&'d Nic),
}

impl Candidate<'_, '_> {
    pub(super) fn cpuset(&self) -> CpuSet {
        match self {
            Candidate::Cpu(obj, _) => crate::topology::cpus(obj),
            Candidate::Gpu(gpu) => gpu.locality.clone(),
            Candidate::Nic(nic) => nic.locality.clone(),
        }
    }

    pub(super) fn label(&self, topology: &Topology) -> String {
        match self {
            Candidate::Cpu(obj, _) => topology.label(obj),
            Candidate::Gpu(gpu) => format!("gpu:{}", gpu.number),
            Candidate::Nic(nic) => format!("nic:{}", nic.index),
        }
    }

    pub(super) fn is_taken(&self, taken: &Taken) -> bool {
        match self {
            // Taken objects are usually taken whole: their first PU answers in O(1).
            Candidate::Cpu(obj, first) => {
                taken.cpus.is_set(*first) || crate::topology::touches(obj, &taken.cpus)
            }
            Candidate::Gpu(gpu) => taken.gpus.contains(&gpu.index),
            Candidate::Nic(nic) => taken.nics.contains(&nic.index),
        }
    }

    pub(super) fn take(&self, taken: &mut Taken) {
        match self {
            Candidate::Cpu(obj, _) => {
                crate::topology::add_cpus(obj, &mut taken.cpus);
            }
            Candidate::Gpu(gpu) => {
                taken.gpus.insert(gpu.index);
            }
            Candidate::Nic(nic) => {
                taken.nics.insert(nic.index);
            }
        }
    }
}

impl<'t, 'd> Selector<'t, 'd> {
    pub(super) fn objects(&mut self, kind: ObjType) -> &[&'t TopologyObject] {
        let topology = self.topology;
        self.cache
            .entry(kind)
            .or_insert_with(|| topology.objects(kind))
    }

    /// The objects of `kind` inside `scope`: `parent` is the CPU object the scope comes
    /// from, when it does (a device's locality has no subtree to walk).
    pub(super) fn candidates(
        &mut self,
        kind: ObjType,
        within: Option<&CpuSet>,
        parent: Option<&'t TopologyObject>,
    ) -> Vec<Candidate<'t, 'd>> {
        let inside = |set: &CpuSet| within.is_none_or(|w| w.includes(set));
        let Devices { gpus, nics } = self.devices;
        match kind {
            ObjType::Gpu => gpus
                .iter()
                .filter(|g| inside(&g.locality))
                .map(Candidate::Gpu)
                .collect(),
            ObjType::Nic => nics
                .iter()
                .filter(|n| inside(&n.locality))
                .map(Candidate::Nic)
                .collect(),
            _ => {
                // Inside a CPU object: its subtree, walked once and kept (slots ask the
                // same parent again and again); elsewhere a filter of the node's objects.
                let key = (kind, parent.map_or(0, |p| std::ptr::from_ref(p) as usize));
                // A device's locality (a scope without a parent object) is not cached.
                let cacheable = within.is_none() || parent.is_some();
                if let Some(list) = self.inside.get(&key).filter(|_| cacheable) {
                    return list.clone();
                }
                let objects = match parent {
                    Some(obj) => self.topology.objects_inside(kind, obj),
                    None => self
                        .objects(kind)
                        .iter()
                        .copied()
                        .filter(|obj| obj.cpuset().is_some() && inside(&crate::topology::cpus(obj)))
                        .collect(),
                };
                let list: Vec<Candidate<'t, 'd>> = objects
                    .into_iter()
                    .map(|obj| {
                        let first = obj
                            .cpuset()
                            .and_then(|s| s.first_set())
                            .map_or(0, usize::from);
                        Candidate::Cpu(obj, first)
                    })
                    .collect();
                if cacheable {
                    self.inside.insert(key, list.clone());
                }
                list
            }
        }
    }
}
