//! Planning for the node ledger with this host's hwloc topology ([`HostPlanner`]): a
//! job's plan on an empty node (from the node cache when it has it), or around what other
//! jobs hold (SEMANTICS §13), and the refusal that names them when too little is left.
//! `binder-full` and the SPANK plugin both plan through it, for
//! `binder_core::launch::ledgered`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use binder_core::cache::launch as cache;
use binder_core::launch::job::Job;
use binder_core::launch::ledgered::{Avoid, Planned, Planner};
use binder_core::launch::LaunchError;
use binder_core::ledger::{LedgerError, LiveJob, Scan};
use binder_core::text::printable;
use binder_core::view::TaskView;
use binder_plan::error::PlanError;
use binder_plan::gpu::Grant;
use binder_plan::report;
use binder_plan::shape::Shape;
use binder_plan::topology::Topology;
use binder_plan::PlanRequest;

/// Why a plugin's task is not run: the one `binder:` line, whatever stage refused it. The
/// SPANK and Flux plugins write it on the task's stderr and end the task with 125; this
/// is the error type of their fronts on the launch flow.
#[derive(Debug)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! refusal_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Refusal {
            fn from(e: $t) -> Refusal {
                Refusal(e.to_string())
            }
        }
    )*};
}
refusal_from!(
    PlanError,
    LedgerError,
    LaunchError,
    binder_plan::shape::ShapeError
);

/// Loads this host's topology for a launch (the caller's: it may trim hwloc's plugins
/// and must refuse a topology that is not this system's, `HWLOC_XMLFILE` and the like).
pub type Loader<'a, E> = Box<dyn FnMut(&Shape) -> Result<Topology, E> + 'a>;

/// The ledger's planner with the hwloc topology: the parsed shape, the node cache, else
/// this host's topology, loaded once and kept for the binding ([`HostPlanner::topology`]).
pub struct HostPlanner<'a, E> {
    shape: &'a Shape,
    grant: Grant,
    env: &'a dyn Fn(&str) -> Option<String>,
    load: Loader<'a, E>,
    /// The topology, once planning loaded it.
    pub topology: Option<Topology>,
}

impl<'a, E> HostPlanner<'a, E> {
    /// A planner for `shape`, with the GPUs the job's allocation grants; `env` is the
    /// node cache's environment (`BINDER_CACHE*`).
    pub fn new(
        shape: &'a Shape,
        grant: Grant,
        env: &'a dyn Fn(&str) -> Option<String>,
        load: Loader<'a, E>,
    ) -> Self {
        HostPlanner {
            shape,
            grant,
            env,
            load,
            topology: None,
        }
    }
}

impl<E: From<PlanError>> HostPlanner<'_, E> {
    /// The topology inside the job's allocation (SEMANTICS §4.1), with its GPUs.
    /// A `MIG-<uuid>` entry's parent GPU is asked of `nvidia-smi -L` here, when a plan is
    /// computed (at most once: the grant keeps the answer), so a node-cache hit never runs
    /// it (the cache key holds the entries); so is `scontrol` for a split step's GPUs.
    fn load(&mut self, job: &Job<'_>) -> Result<Topology, E> {
        if self.grant.wants_mig_listing() {
            let grant = std::mem::replace(&mut self.grant, Grant::EVERY);
            self.grant = grant.place_mig(binder_core::vendor::nvidia_listing);
        }
        // GPUs named by UUID, or a container's: what the drivers say, read here (when a
        // plan is computed, never on a node-cache hit).
        if self.grant.wants_driver() {
            let grant = std::mem::replace(&mut self.grant, Grant::EVERY);
            self.grant = grant.place_driver(binder_core::driver::read);
        }
        // A task Slurm gave only some of the step's GPUs, with no variable naming the
        // step's: the job's, from `scontrol`, once, by the task that plans.
        if self.grant.wants_job_gpus().is_some() {
            let grant = std::mem::replace(&mut self.grant, Grant::EVERY);
            self.grant = grant.place_split(binder_core::scheduler::slurm_job_gpus);
        }
        let t = (self.load)(self.shape)?;
        let cores = job
            .envelope
            .cores
            .as_ref()
            .map(|c| t.cores_pus(&c.indexes, c.instance.as_deref()));
        Ok(t.within(job.envelope.cpus.as_deref().or(cores.as_deref()))
            .map_err(PlanError::from)?)
    }
}

impl<E> Planner for HostPlanner<'_, E>
where
    E: From<PlanError> + From<LedgerError> + From<LaunchError>,
{
    type Error = E;

    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, E> {
        let pack = self.shape.options.pack.unwrap_or_default();
        let views = self.plain_views(job, err)?;
        Ok((views, pack.into()))
    }

    fn around(
        &mut self,
        job: &Job<'_>,
        scan: &Scan,
        avoid: &Avoid,
        err: &mut impl Write,
    ) -> Result<Planned, E> {
        let pack = self.shape.options.pack.unwrap_or_default();
        let t = self.load(job)?;
        let views = around::<E>(job, self.shape, &self.grant, scan, avoid, &t, err)?;
        self.topology = Some(t);
        Ok((views, pack.into()))
    }

    fn shares(&self) -> bool {
        self.shape.options.share
    }
}

impl<E: From<PlanError>> HostPlanner<'_, E> {
    /// The plan when no other job holds anything: from the node cache when it has it
    /// (never for `--verbose` or `membind`, which need the topology itself).
    fn plain_views(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Vec<TaskView>, E> {
        let (identity, shape) = (job.identity, self.shape);
        let cache = (!job.verbose && shape.membind_for(identity.rank).is_none())
            .then(|| cache::open(self.env, job.text(), identity.size, job.gpus_per_task, err))
            .flatten();
        if let Some((views, _)) = cache
            .as_ref()
            .and_then(|pair| cache::lookup(pair, self.env, err))
        {
            return Ok(views);
        }
        let t = self.load(job)?;
        let plan = binder_plan::plan(&request(job, shape, &t).grant(&self.grant))?;
        if job.verbose {
            if let Some(line) = report::kinds_line(&plan) {
                binder_core::text::emit(err, &line);
            }
        }
        let views = views(&plan, shape);
        if let Some(pair) = &cache {
            let pack = shape.options.pack.unwrap_or_default().into();
            cache::store(pair, views.clone(), pack, self.env, err);
        }
        self.topology = Some(t);
        Ok(views)
    }
}

/// Every rank's view of `plan`.
pub fn views(plan: &binder_plan::distribute::Plan, shape: &Shape) -> Vec<TaskView> {
    (0..plan.tasks.len())
        .map(|r| binder_plan::rank_view::launch_view(plan, shape, r))
        .collect()
}

/// The CPUs held on `t`: every holder's (an exclusive job's widened to whole
/// containers), the same user's starting jobs' reserved ones, `avoid`'s and `steer`'s;
/// with how many tasks hold each.
fn loads(t: &Topology, scan: &Scan, avoid: &Avoid, steer: &[usize]) -> BTreeMap<usize, usize> {
    let mut loads = BTreeMap::new();
    let held = scan
        .holders
        .iter()
        .map(|h| crate::node::held_pus(t, h.claim.pack.into(), &h.cpus))
        .chain(
            scan.reserved
                .iter()
                .map(|r| crate::node::held_pus(t, r.pack.into(), &r.cpus)),
        )
        .chain([avoid.cpus.clone(), steer.to_vec(), scan.held_cpus.clone()]);
    for cpus in held {
        for p in cpus {
            *loads.entry(p).or_insert(0) += 1;
        }
    }
    loads
}

/// The plan around what `scan` holds and `avoid`. What only steers (other users' GPU
/// claims, their entries where `/proc` hides them: SEMANTICS §13.2) is avoided when the
/// job fits without it, as much of it as the job fits without (firm claims' GPUs last:
/// `crate::steer`), and never the reason for a refusal.
fn around<E: From<PlanError> + From<LedgerError>>(
    job: &Job<'_>,
    shape: &Shape,
    grant: &Grant,
    scan: &Scan,
    avoid: &Avoid,
    t: &Topology,
    err: &mut impl Write,
) -> Result<Vec<TaskView>, E> {
    if !scan.steer_cpus.is_empty() || !scan.steer_gpus.is_empty() {
        // Every claimed GPU, then only firm claims' (`crate::steer`): partial steering.
        for gpus in crate::steer::levels(scan) {
            let steered = grant.clone().steering(gpus);
            let mut quiet = Vec::new();
            let held = (scan, avoid, scan.steer_cpus.as_slice());
            if let Ok(views) = around_once::<E>(job, shape, &steered, held, t, &mut quiet) {
                let _ = err.write_all(&quiet);
                return Ok(views);
            }
        }
    }
    around_once(job, shape, grant, (scan, avoid, &[]), t, err)
}

/// [`around`] with one set of what is held: `scan`'s, `avoid`'s and `steer`'s CPUs.
/// A plan that binds no CPU (`bind: none`) does not look at CPUs held; a sharing shape
/// goes to the least loaded units when too few are free; otherwise a refusal names the
/// jobs in the way.
fn around_once<E: From<PlanError> + From<LedgerError>>(
    job: &Job<'_>,
    shape: &Shape,
    grant: &Grant,
    (scan, avoid, steer): (&Scan, &Avoid, &[usize]),
    t: &Topology,
    err: &mut impl Write,
) -> Result<Vec<TaskView>, E> {
    let mut held_gpus: BTreeSet<String> = scan.own_gpus().into_iter().collect();
    held_gpus.extend(avoid.gpus.iter().cloned());
    let held_gpus: Vec<String> = held_gpus.into_iter().collect();
    let holding = grant.clone().holding(held_gpus.clone());
    if let Ok(plan) = binder_plan::plan(&request(job, shape, t).grant(&holding)) {
        if plan.tasks.iter().all(|task| task.units.is_empty()) {
            return Ok(views(&plan, shape));
        }
    }
    let loads = loads(t, scan, avoid, steer);
    let held: Vec<usize> = loads.keys().copied().collect();
    let plan = match binder_plan::plan_around(&request(job, shape, t).grant(&holding).held(&held)) {
        Ok(plan) => {
            if job.verbose {
                binder_core::text::emit(
                    err,
                    &format!(
                        "planned around cpus {} and {} GPU(s) held by {} other task(s), pack {}",
                        binder_core::cpulist::cpu_list(&held),
                        held_gpus.len(),
                        scan.holders.len(),
                        shape.options.pack.unwrap_or_default()
                    ),
                );
            }
            plan
        }
        Err(refusal) => {
            // Would it fit on an empty node? Then the other jobs are why.
            let Ok(alone) = binder_plan::plan(&request(job, shape, t).grant(grant)) else {
                return Err(refusal.into());
            };
            // Inside a scheduler's allocation, what is no scheduler job's task steers
            // and never refuses (SEMANTICS §4.3): planned over, said once.
            if let Some((only, outside)) = scan.scheduler_only() {
                let held: Vec<usize> = self::loads(t, &only, avoid, steer).into_keys().collect();
                let over = if held.is_empty() {
                    Ok(alone.clone())
                } else {
                    binder_plan::plan_around(&request(job, shape, t).grant(&holding).held(&held))
                };
                if let Ok(plan) = over {
                    // Said by the task that makes the job's plan, whichever rank it is
                    // (the others join it): once a job.
                    let allocation = scan.allocation.as_deref().unwrap_or_default();
                    let line =
                        crate::allocation::planned_over(allocation, &outside, &scan.held_cpus);
                    binder_core::text::emit(err, &line);
                    return Ok(views(&plan, shape));
                }
            }
            if !shape.options.share {
                return Err(occupied(&refusal, &alone, scan, t, job.origin).into());
            }
            shared(
                &request(job, shape, t).grant(grant),
                &loads,
                job.verbose,
                err,
            )
            .unwrap_or(alone)
        }
    };
    Ok(views(&plan, shape))
}

/// A sharing job's plan when too few units are free: around the units held by more than
/// k tasks, for the smallest k that fits, so tasks spread over the least loaded units
/// instead of all landing on the first.
fn shared(
    request: &PlanRequest<'_>,
    loads: &BTreeMap<usize, usize>,
    verbose: bool,
    err: &mut impl Write,
) -> Option<binder_plan::distribute::Plan> {
    let levels: BTreeSet<usize> = loads.values().copied().collect();
    for k in levels {
        let skip: Vec<usize> = loads
            .iter()
            .filter(|(_, &n)| n > k)
            .map(|(&p, _)| p)
            .collect();
        if let Ok(plan) = binder_plan::plan_around(&request.held(&skip)) {
            if verbose {
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
    refusal: &PlanError,
    alone: &binder_plan::distribute::Plan,
    scan: &Scan,
    topology: &Topology,
    origin: &str,
) -> LedgerError {
    // Every job holding an allowed PU or a GPU is in the way: the plan failed on what
    // they leave. Those holding what the plan would have used come first.
    let wanted: BTreeSet<usize> = alone.tasks.iter().flat_map(|t| t.cpuset.to_vec()).collect();
    let allowed = topology.allowed();
    let jobs = scan.jobs();
    let mut in_way: Vec<(bool, &LiveJob<'_>, Vec<usize>)> = jobs
        .iter()
        .filter_map(|j| {
            let held = crate::node::held_pus(topology, j.pack.into(), &j.cpus());
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
        PlanError::Topology(_) => "every allowed PU is held".to_owned(),
        other => {
            let text = other.to_string();
            text.split("; ").next().unwrap_or(&text).to_owned()
        }
    };
    let mut named = named;
    for r in &scan.reserved {
        // A job binder named after its process group (`--local-rank` without a launcher):
        // this task, in another process group, is a job of its own, not one of those
        // ranks, whatever its `--local-rank` says. Say so, and how to make them one job.
        let other_group = if r.job.from_launcher() {
            String::new()
        } else {
            " (another process group: this task is a job of its own, not one of those ranks, since ranks given by `--local-rank` are one job only within one process group; start them from one shell, `binder --local-rank 0 … & binder --local-rank 1 … &`, or under a launcher)".to_owned()
        };
        named.push(format!(
            "your job {} keeps {} for its ranks not started yet{other_group}",
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

/// The plan request of `job` for `shape` on `t`, nothing held yet.
fn request<'a>(job: &'a Job<'_>, shape: &'a Shape, t: &'a Topology) -> PlanRequest<'a> {
    PlanRequest::new(shape, t, job.identity.size)
        .origin(job.origin)
        .gpus_per_task(job.gpus_per_task)
}
