//! Planning on a node other jobs use (SEMANTICS §13): the units they hold are skipped
//! like a topology string's lowercase units, and the packing policy (`options.pack`, the
//! INFN paper's policies) chooses which *containers* the job goes to.
//!
//! Containers are the node's packages, or its NUMA nodes when it has one package, or its
//! L3 caches when it has one NUMA node (the first of those levels with more than one
//! object); on a node with none of them the policy has nothing to choose.
//!
//! - `spread`: containers with the most free PUs first (OCS `-bsort S`);
//! - `fill` (default): containers with the fewest free PUs first, so free ones stay whole
//!   for bigger jobs (OCS `-bsort s`, like Slurm's best-fit of sockets);
//! - `exclusive`: only containers no other job holds a PU of; the job then holds the
//!   whole containers it touches (OCS `-bstart S -bstop S`).
//!
//! A YAML shape has no sort order of its own, so the policy works by *which containers the
//! planner may use*: binder first plans on every allowed container, then on the first 1,
//! 2, ... containers in the policy's order, and keeps the first of those plans that gives
//! the tasks as many PUs as the unrestricted one. A policy therefore never shrinks what a
//! shape asks for (`count: all` still takes every free unit); it only decides where.

use crate::distribute::Plan;
use crate::error::PlanError as Error;
use crate::ge::request::{Mark, Request, Strategy};
use crate::ge::Letter;
use crate::shape::{ObjType, Pack};
use crate::topology::Topology;

/// Each object of type `kind` as its allowed PUs (OS numbers), in logical order; objects
/// with none are left out.
pub fn allowed_pus(topology: &Topology, kind: ObjType) -> Vec<Vec<usize>> {
    let allowed = topology.hw().allowed_cpuset();
    topology
        .objects(kind)
        .iter()
        .filter_map(|o| {
            let pus: Vec<usize> = o
                .cpuset()?
                .iter_set()
                .map(usize::from)
                .filter(|&p| allowed.is_set(p))
                .collect();
            (!pus.is_empty()).then_some(pus)
        })
        .collect()
}

/// The container level of `topology` and each container's allowed PUs (OS numbers), in
/// logical order; empty when the node has one container.
pub fn containers(topology: &Topology) -> (Option<ObjType>, Vec<Vec<usize>>) {
    for level in [ObjType::Package, ObjType::Numa, ObjType::L3] {
        let sets = allowed_pus(topology, level);
        if sets.len() > 1 {
            return (Some(level), sets);
        }
    }
    (None, Vec::new())
}

/// The PUs an exclusive job holds: the whole containers its CPUs touch.
pub fn widen(containers: &[Vec<usize>], cpus: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = cpus.to_vec();
    for c in containers {
        if c.iter().any(|p| cpus.binary_search(p).is_ok()) {
            out.extend_from_slice(c);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Adds the policy's switches to a packed Grid Engine request that chose none itself.
pub(crate) fn into_request(request: &mut Request, pack: Pack) {
    let Strategy::Packed(p) = &mut request.strategy else {
        return;
    };
    if !p.sort.is_empty() || p.start.is_some() || p.stop.is_some() {
        return;
    }
    let socket = |used| Mark {
        letter: Letter::S,
        used,
    };
    match pack {
        Pack::Spread => p.sort = vec![socket(false)],
        Pack::Fill => p.sort = vec![socket(true)],
        Pack::Exclusive => {
            p.start = Some(socket(false));
            p.stop = Some(socket(false));
        }
    }
}

/// Plans `shape` on `topology` around the PUs other jobs hold (`held`), with the shape's
/// packing policy: `plan` plans with a list of PUs to skip (the planner's entry point,
/// handed in so that this policy sits below the planner: [`crate::planner::plan_around`]).
pub(crate) fn around(
    shape: &crate::shape::Shape,
    topology: &Topology,
    held: &[usize],
    plan: impl Fn(&[usize]) -> Result<Plan, Error>,
) -> Result<Plan, Error> {
    let allowed = topology.hw().allowed_cpuset();
    let held: Vec<usize> = held
        .iter()
        .copied()
        .filter(|&p| allowed.is_set(p))
        .collect();
    if held.is_empty() {
        return plan(&[]);
    }
    let pack = shape.options.pack.unwrap_or_default();
    let (_, all) = containers(topology);
    let free = |c: &Vec<usize>| c.iter().filter(|p| held.binary_search(p).is_err()).count();
    // The policy's candidates, in its order (stable: logical order breaks ties).
    let mut order: Vec<&Vec<usize>> = match pack {
        Pack::Exclusive => all.iter().filter(|c| free(c) == c.len()).collect(),
        _ => all.iter().filter(|c| free(c) > 0).collect(),
    };
    match pack {
        Pack::Spread => order.sort_by_key(|c| std::cmp::Reverse(free(c))),
        Pack::Fill => order.sort_by_key(|c| free(c)),
        Pack::Exclusive => {}
    }
    let outside = |keep: &[&Vec<usize>]| -> Vec<usize> {
        let mut skip = held.clone();
        for c in &all {
            if !keep.iter().any(|k| std::ptr::eq(*k, c)) {
                skip.extend_from_slice(c);
            }
        }
        skip.sort_unstable();
        skip.dedup();
        skip
    };
    if shape.options.ge.is_some() || all.is_empty() {
        // A Grid Engine request walks in its own (or the policy's) order.
        let skip = if pack == Pack::Exclusive && !all.is_empty() {
            outside(&order)
        } else {
            held.clone()
        };
        return plan(&skip);
    }
    let full = plan(&outside(&order))?;
    let size = |p: &Plan| p.tasks.iter().map(|t| t.cpuset.weight()).sum::<usize>();
    let want = size(&full);
    for k in 1..order.len() {
        if let Ok(p) = plan(&outside(&order[..k])) {
            if size(&p) == want {
                return Ok(p);
            }
        }
    }
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_holds_whole_containers() {
        let c = vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]];
        assert_eq!(widen(&c, &[1]), vec![0, 1, 2, 3]);
        assert_eq!(widen(&c, &[3, 4]), (0..8).collect::<Vec<_>>());
        assert_eq!(widen(&c, &[]), Vec::<usize>::new());
    }

    #[test]
    fn policies_become_ocs_switches() {
        let mut r = Request::parse("-bunit C -bamount 2").unwrap();
        into_request(&mut r, Pack::Exclusive);
        let Strategy::Packed(p) = &r.strategy else {
            panic!()
        };
        assert_eq!(
            p.start.map(|m| (m.letter, m.used)),
            Some((Letter::S, false))
        );
        assert_eq!(p.stop.map(|m| (m.letter, m.used)), Some((Letter::S, false)));
        // A request's own order wins.
        let mut r = Request::parse("-bunit C -bsort s").unwrap();
        into_request(&mut r, Pack::Spread);
        let Strategy::Packed(p) = &r.strategy else {
            panic!()
        };
        assert_eq!(p.sort.len(), 1);
        assert!(p.sort[0].used);
    }
}
