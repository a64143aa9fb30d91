//! `options.numa-binding`: PyTorch's NUMA binding (`torchrun --numa-binding`, the rules
//! of `torch/numa/binding.py`, transcribed; SEMANTICS §9, ML launchers), inside the job's
//! allocation and around other jobs (the topology here has only the PUs the job may use).
//!
//! Local rank `r` takes the job's GPU `r`: the `r`-th of the job's GPUs in their
//! runtime's order (CUDA's PCI order, ROCm's own), as `torch.cuda.device(r)` is. The GPU's NUMA node is the first NUMA node (logical
//! order) that holds CPUs near it: PyTorch reads the device's `numa_node`, and −1 (one
//! NUMA node, or none said) as node 0. Then:
//! - `node`: the node's CPUs;
//! - `socket`: the CPUs of the package holding the node (all its NUMA nodes);
//! - `exclusive`: the node's physical cores (ordered by their first PU) dealt evenly to
//!   the job's GPUs on that node in index order, the lowest indices one extra core; fewer
//!   cores than GPUs there is refused, as PyTorch refuses it;
//! - `core-complex`: the node's CPUs grouped by last-level cache, groups with the most
//!   CPUs first (then the lowest CPU), and the GPU's place among the node's GPUs modulo
//!   the number of groups picks one.

use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;

use super::{DistributeError, Plan, UnitObj};
use crate::cpuset::CpuSet;
use crate::shape::{NumaBinding, ObjType};
use crate::topology::{cpus, Topology};

/// Gives each task its GPU and CPUs by `mode`, within `pool` (the selection's CPUs).
pub(super) fn deal(
    topology: &Topology,
    pool: &CpuSet,
    mode: NumaBinding,
    plan: &mut Plan,
    origin: &str,
) -> Result<(), DistributeError> {
    let n = plan.tasks.len();
    let refuse = |why: String| DistributeError::NumaBinding {
        origin: origin.to_owned(),
        why,
    };
    if plan.gpus.len() < n {
        return Err(refuse(format!(
            "{n} task(s) but the job has {} GPU(s); PyTorch's NUMA binding gives local rank r GPU r, so run at most {} worker(s) per node",
            plan.gpus.len(),
            plan.gpus.len()
        )));
    }
    // The job's GPUs in the runtime's order: `order[r]` is worker r's.
    let mut order: Vec<usize> = (0..plan.gpus.len()).collect();
    order.sort_by_key(|&g| {
        let gpu = &plan.gpus[g];
        (gpu.vendor as usize, gpu.vendor_index, gpu.number)
    });
    let numas: Vec<CpuSet> = topology
        .objects(ObjType::Numa)
        .into_iter()
        .map(|o| &cpus(o) & pool)
        .collect();
    // Each GPU's NUMA node (index into `numas`).
    let node_of = |g: usize| {
        let near = &plan.gpus[g].locality;
        numas
            .iter()
            .position(|set| set.intersects(near))
            .or_else(|| numas.iter().position(|set| !set.is_empty()))
    };
    let cores: Vec<&TopologyObject> = topology.objects(ObjType::Core);
    let packages: Vec<&TopologyObject> = topology.objects(ObjType::Package);
    let llc = last_level_caches(topology);
    for r in 0..n {
        let gpu = order[r];
        let Some(node) = node_of(gpu) else {
            return Err(refuse(format!(
                "GPU {} has no NUMA node with cpus the job may use",
                plan.gpus[gpu].busid
            )));
        };
        let node_cpus = &numas[node];
        // The job's GPUs on this node, in index order, and this GPU's place among them.
        let on_node: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&g| node_of(g) == Some(node))
            .collect();
        let place = on_node.iter().position(|&g| g == gpu).unwrap_or(0);
        let set = match mode {
            NumaBinding::Node => node_cpus.clone(),
            NumaBinding::Socket => packages
                .iter()
                .map(|p| cpus(p))
                .find(|p| p.intersects(node_cpus))
                .map_or_else(|| node_cpus.clone(), |p| &p & pool),
            NumaBinding::Exclusive => {
                let mut mine: Vec<CpuSet> = cores
                    .iter()
                    .map(|c| &cpus(c) & node_cpus)
                    .filter(|c| !c.is_empty())
                    .collect();
                mine.sort_by_key(|c| c.first_set());
                let (each, extra) = (mine.len() / on_node.len(), mine.len() % on_node.len());
                if each == 0 {
                    return Err(refuse(format!(
                        "`exclusive`: numa node {node} has {} physical core(s) for the job's {} GPU(s) there; use `node` or `socket`, or fewer workers",
                        mine.len(),
                        on_node.len()
                    )));
                }
                let start = place * each + place.min(extra);
                let end = start + each + usize::from(place < extra);
                mine[start..end]
                    .iter()
                    .fold(CpuSet::new(), |acc, c| acc | c)
            }
            NumaBinding::CoreComplex => {
                let mut groups: Vec<CpuSet> = llc
                    .iter()
                    .map(|c| c & node_cpus)
                    .filter(|c| !c.is_empty())
                    .collect();
                if groups.is_empty() {
                    groups.push(node_cpus.clone());
                }
                groups.sort_by_key(|g| (std::cmp::Reverse(g.weight()), g.first_set()));
                groups[place % groups.len()].clone()
            }
        };
        if set.is_empty() {
            return Err(refuse(format!(
                "GPU {}'s NUMA node has no cpu the job may use",
                plan.gpus[gpu].busid
            )));
        }
        let task = &mut plan.tasks[r];
        task.gpus = vec![gpu];
        task.units = cores
            .iter()
            .filter(|c| cpus(c).intersects(&set))
            .map(|c| {
                let mut unit = UnitObj::of(topology, c);
                unit.pus.retain(|&p| set.is_set(p));
                unit
            })
            .collect();
        task.cpuset = set;
    }
    let used = plan
        .tasks
        .iter()
        .fold(CpuSet::new(), |acc, t| acc | &t.cpuset);
    plan.unused = cores
        .iter()
        .filter(|c| {
            let set = cpus(c);
            set.intersects(pool) && !set.intersects(&used)
        })
        .map(|c| UnitObj::of(topology, c))
        .collect();
    Ok(())
}

/// The CPUs of each last-level cache (the highest cache level hwloc shows, L3 where there
/// is one), as PyTorch groups CPUs by the highest-level unified or data cache.
fn last_level_caches(topology: &Topology) -> Vec<CpuSet> {
    for kind in [
        ObjectType::L3Cache,
        ObjectType::L2Cache,
        ObjectType::L1Cache,
    ] {
        let sets: Vec<CpuSet> = topology
            .hw()
            .objects_with_type(kind)
            .map(cpus)
            .filter(|s| !s.is_empty())
            .collect();
        if !sets.is_empty() {
            return sets;
        }
    }
    Vec::new()
}
