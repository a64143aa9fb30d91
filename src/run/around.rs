//! `binder-full`'s planning for the node ledger: a job's plan on an empty node (from the
//! node cache when it has it), or around what other jobs hold (SEMANTICS §13), and the
//! refusal that names them when too little is left.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use super::{cache_lookup, cache_store, node_cache, Job};
use crate::error::Error;
use binder_core::ledger::{LedgerError, LiveJob, Scan};
use binder_core::text::printable;
use binder_core::view::TaskView;
use binder_plan::shape::Shape;
use binder_plan::topology::{Source, Topology};
use binder_plan::{pack, report};

/// Units of the launching job's own running ranks, which a re-plan of its other ranks
/// must leave to them.
#[derive(Debug, Clone, Default)]
pub(super) struct Avoid {
    /// Their CPUs.
    pub cpus: Vec<usize>,
    /// Their GPUs (bus ids).
    pub gpus: Vec<String>,
}

impl Avoid {
    /// Whether there is nothing to avoid.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty() && self.gpus.is_empty()
    }
}

/// This host's topology, with hwloc's unused plugins blocked first (the CLI is
/// single-threaded, so it may set that in its own environment), and the job's GPU
/// allocation.
pub(super) fn load(job: &Job<'_>, shape: &Shape) -> Result<Topology, Error> {
    let io = shape.needs_io() || job.config.gpus_per_task.is_some();
    crate::hwenv::block_unused_plugins(io);
    let mut t = binder_plan::load_topology(shape, &Source::Host, job.config.gpus_per_task)?;
    crate::hwbind::this_system(&t)?;
    t.set_gpu_grant(job.gpus.clone());
    Ok(t)
}

/// Every rank's view of `plan`.
fn views(plan: &binder_plan::distribute::Plan, shape: &Shape) -> Vec<TaskView> {
    (0..plan.tasks.len())
        .map(|r| binder_plan::view::launch_view(plan, shape, r))
        .collect()
}

/// The plan when no other job holds anything: from the node cache when it has it.
pub(super) fn plain(
    job: &Job<'_>,
    shape: &Shape,
    topology: &mut Option<Topology>,
    err: &mut impl Write,
) -> Result<Vec<TaskView>, Error> {
    let (config, identity) = (job.config, job.identity);
    let membind = shape.membind_for(job.identity.rank);
    let cache = node_cache(config, membind, job.text, identity.size, err);
    if let Some((views, _)) = cache.as_ref().and_then(|pair| cache_lookup(pair, err)) {
        return Ok(views);
    }
    let t = load(job, shape)?;
    let plan = binder_plan::plan(shape, job.origin, &t, identity.size, config.gpus_per_task)?;
    let views = views(&plan, shape);
    if let Some(pair) = &cache {
        cache_store(pair, views.clone(), shape, err);
    }
    *topology = Some(t);
    Ok(views)
}

/// The CPUs held on `t`: every holder's (an exclusive job's widened to whole
/// containers), the same user's starting jobs' reserved ones, and `avoid`'s; with how
/// many tasks hold each.
fn loads(t: &Topology, scan: &Scan, avoid: &Avoid) -> BTreeMap<usize, usize> {
    let mut loads = BTreeMap::new();
    let held = scan
        .holders
        .iter()
        .map(|h| binder_plan::node::held_pus(t, h.claim.pack.into(), &h.cpus))
        .chain(
            scan.reserved
                .iter()
                .map(|r| binder_plan::node::held_pus(t, r.pack.into(), &r.cpus)),
        )
        .chain(std::iter::once(avoid.cpus.clone()));
    for cpus in held {
        for p in cpus {
            *loads.entry(p).or_insert(0) += 1;
        }
    }
    loads
}

/// The plan around what `scan` holds and `avoid`, with the shape's packing policy. A
/// plan that binds no CPU (`bind: none`) does not look at CPUs held; a sharing shape
/// goes to the least loaded units when too few are free; otherwise a refusal names the
/// jobs in the way.
pub(super) fn around(
    job: &Job<'_>,
    shape: &Shape,
    scan: &Scan,
    avoid: &Avoid,
    topology: &mut Option<Topology>,
    err: &mut impl Write,
) -> Result<Vec<TaskView>, Error> {
    let (config, identity) = (job.config, job.identity);
    let mut t = load(job, shape)?;
    let (size, gpus) = (identity.size, config.gpus_per_task);
    let mut held_gpus: BTreeSet<String> = scan.gpus().into_iter().collect();
    held_gpus.extend(avoid.gpus.iter().cloned());
    t.set_gpu_grant(job.gpus.clone().holding(held_gpus.into_iter().collect()));
    if let Ok(plan) = binder_plan::plan(shape, job.origin, &t, size, gpus) {
        if plan.tasks.iter().all(|task| task.units.is_empty()) {
            let views = views(&plan, shape);
            *topology = Some(t);
            return Ok(views);
        }
    }
    let loads = loads(&t, scan, avoid);
    let held: Vec<usize> = loads.keys().copied().collect();
    let plan = match pack::plan_around(shape, job.origin, &t, size, gpus, &held) {
        Ok(plan) => {
            if config.verbose {
                binder_core::text::emit(
                    err,
                    &format!(
                        "planned around cpus {} and {} GPU(s) held by {} other task(s), pack {}",
                        binder_core::cpulist::cpu_list(&held),
                        scan.gpus().len(),
                        scan.holders.len(),
                        shape.options.pack.unwrap_or_default()
                    ),
                );
            }
            plan
        }
        Err(refusal) => {
            // Would it fit on an empty node? Then the other jobs are why.
            t.set_gpu_grant(job.gpus.clone());
            let Ok(alone) = binder_plan::plan(shape, job.origin, &t, size, gpus) else {
                return Err(refusal.into());
            };
            if !shape.options.share {
                return Err(occupied(&refusal.into(), &alone, scan, &t, job.origin).into());
            }
            shared(job, shape, &t, &loads, err).unwrap_or(alone)
        }
    };
    let views = views(&plan, shape);
    *topology = Some(t);
    Ok(views)
}

/// A sharing job's plan when too few units are free: around the units held by more than
/// k tasks, for the smallest k that fits, so tasks spread over the least loaded units
/// instead of all landing on the first.
fn shared(
    job: &Job<'_>,
    shape: &Shape,
    t: &Topology,
    loads: &BTreeMap<usize, usize>,
    err: &mut impl Write,
) -> Option<binder_plan::distribute::Plan> {
    let levels: BTreeSet<usize> = loads.values().copied().collect();
    for k in levels {
        let skip: Vec<usize> = loads
            .iter()
            .filter(|(_, &n)| n > k)
            .map(|(&p, _)| p)
            .collect();
        let planned = pack::plan_around(
            shape,
            job.origin,
            t,
            job.identity.size,
            job.config.gpus_per_task,
            &skip,
        );
        if let Ok(plan) = planned {
            if job.config.verbose {
                binder_core::text::emit(
                    err,
                    &format!("too few free units: shares units held by at most {k} other task(s) (share)"),
                );
            }
            return Some(plan);
        }
    }
    None
}

/// `cpus 0-3 and GPUs 0000:4e:00.0`, either part left out when empty.
fn holdings(cpus: &[usize], gpus: &[String]) -> String {
    let mut parts = Vec::new();
    if !cpus.is_empty() {
        parts.push(format!("cpus {}", binder_core::cpulist::cpu_list(cpus)));
    }
    if !gpus.is_empty() {
        parts.push(format!("GPUs {}", printable(&gpus.join(","), 60)));
    }
    if parts.is_empty() {
        "nothing".to_owned()
    } else {
        parts.join(" and ")
    }
}

/// The most jobs a refusal names.
const MAX_NAMED: usize = 4;

/// The refusal that names the jobs holding what the plan would have used.
fn occupied(
    refusal: &Error,
    alone: &binder_plan::distribute::Plan,
    scan: &Scan,
    topology: &Topology,
    origin: &str,
) -> LedgerError {
    // Every job holding an allowed PU or a GPU is in the way: the plan failed on what
    // they leave. Those holding what the plan would have used come first.
    let wanted: BTreeSet<usize> = alone
        .tasks
        .iter()
        .flat_map(|t| report::cpus_of(&t.cpuset))
        .collect();
    let allowed = topology.hw().allowed_cpuset();
    let jobs = scan.jobs();
    let mut in_way: Vec<(bool, &LiveJob<'_>, Vec<usize>)> = jobs
        .iter()
        .filter_map(|j| {
            let held = binder_plan::node::held_pus(topology, j.pack.into(), &j.cpus());
            let on_node = held.iter().any(|&p| allowed.is_set(p)) || !j.gpus().is_empty();
            on_node.then(|| (!held.iter().any(|p| wanted.contains(p)), j, held))
        })
        .collect();
    in_way.sort_by_key(|(later, _, _)| *later);
    let more = in_way.len().saturating_sub(MAX_NAMED);
    let named: Vec<String> = in_way
        .iter()
        .take(MAX_NAMED)
        .map(|(_, j, held)| {
            let pids: Vec<String> = j.pids().iter().map(ToString::to_string).collect();
            format!(
                "job {} of {} holds {} (pids {})",
                printable(&j.job.0, 60),
                printable(&binder_core::procfs::user_name(j.owner), 32),
                holdings(held, &j.gpus()),
                binder_core::text::clip(&pids.join(","), 60)
            )
        })
        .collect();
    // The planner's own words, without its advice (the advice here is to wait or share);
    // with every PU held there is nothing to plan on at all.
    let what = match refusal {
        Error::Topology(_) => "every allowed PU is held".to_owned(),
        other => {
            let text = other.to_string();
            text.split("; ").next().unwrap_or(&text).to_owned()
        }
    };
    let mut named = named;
    for r in &scan.reserved {
        named.push(format!(
            "your job {} keeps {} for its ranks not started yet",
            printable(&r.job.0, 60),
            holdings(&r.cpus, &r.gpus)
        ));
    }
    let one = named.len() == 1;
    let mut held = named.join("; ");
    if more > 0 {
        held.push_str(&format!(
            "; and {more} more job(s) (`binder node` lists them)"
        ));
    }
    LedgerError::Occupied {
        what: format!("too few free units on this node for {origin} ({what})"),
        held,
        them: if one { "it" } else { "them" },
        their: if one { "its" } else { "their" },
    }
}
