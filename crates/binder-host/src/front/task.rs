//! A plugin task's launch, the same for every plugin: the job's shape read with the site
//! file's reservation ([`JobShape`]), the key its plan is found by and the GPUs it may have
//! ([`Planning`]), and the one launch flow with the host planner and hwloc's binding
//! ([`launch`], through [`TaskFront`]). A plugin brings only what it knows: the task's
//! identity, the job's envelope, its environment, and (Flux) a plan made beforehand for
//! every task of the node and the CPUs a task binder leaves unbound keeps.

use std::io::Write;
use std::path::{Path, PathBuf};

use binder_core::envelope::Envelope;
use binder_core::identity::{Env, Identity};
use binder_core::launch::flow::{self, Front};
use binder_core::launch::job::{Job, JobSpec};
use binder_core::launch::ledgered::{Avoid, Planned, Planner};
use binder_core::launch::line::{shape_path, site_text, Requests};
use binder_core::launch::Options;
use binder_core::ledger::Scan;
use binder_core::view::TaskView;
use binder_plan::gpu::Grant;
use binder_plan::shape::{GpuIds, Shape};
use binder_plan::topology::Topology;
use binder_plan::PlanError;

use super::Request;
use crate::around::{HostPlanner, Refusal};

/// A job's shape as a plugin reads it: the file a request names, its text (the key's),
/// the shape with the site file's reservation in front, and the site file.
#[derive(Debug, Clone)]
pub struct JobShape {
    /// The shape file's path, printable, for messages.
    pub origin: String,
    /// The shape file's bytes as text.
    pub text: String,
    /// The shape, with the site's reservation.
    pub shape: Shape,
    /// The site file's path and text, when there is one.
    pub site: Option<(String, String)>,
}

impl JobShape {
    /// Reads the shape `name` (relative to `cwd`, the job's working directory, or a
    /// catalog name in `catalog`) and the site file the job's environment `get` names.
    pub fn read(
        name: &str,
        cwd: Option<&str>,
        catalog: &Path,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<JobShape, Refusal> {
        let path = resolve_shape(name, &[cwd], catalog)?;
        JobShape::at(&path, get)
    }

    /// Reads the shape file at `path` and the site file.
    pub fn at(path: &Path, get: &dyn Fn(&str) -> Option<String>) -> Result<JobShape, Refusal> {
        let origin = binder_core::text::printable(&path.display().to_string(), 200);
        let text = crate::shape_text(path)?;
        let site = site_text(get).map_err(|(what, why)| Refusal(format!("{what}: {why}")))?;
        let mut shape = Shape::from_yaml(&text, &origin)?;
        binder_plan::ge::reserve::add_site(&mut shape, site.as_ref()).map_err(PlanError::from)?;
        Ok(JobShape {
            origin,
            text,
            shape,
            site,
        })
    }

    /// The site file's text, for the plan's key.
    pub fn site_text(&self) -> Option<&str> {
        self.site.as_ref().map(|(_, t)| t.as_str())
    }
}

/// The launch options of a task a plugin binds (the one place they are built): the
/// view's OpenMP and memory policy, the request's report and verbose flags, the affinity
/// the ledger bound it with, and the job's environment it inherits.
pub fn task_options<'o>(
    view: &TaskView,
    request: &Request,
    started_on: Option<&'o [usize]>,
    inherited: &'o dyn Fn(&str) -> Option<String>,
) -> Options<'o> {
    Options::for_view(view, request.report, request.verbose, started_on, inherited)
}

/// The CPUs (OS numbers) of `cores`, hwloc's logical core indexes in the numbering of an
/// instance that owns `instance` (or the node's), on this host: what a launcher that
/// names cores binds a task to (Flux's R and its `cpu-affinity`).
pub fn cores_cpus(cores: &[usize], instance: Option<&[usize]>) -> Result<Vec<usize>, Refusal> {
    let t = crate::load(&binder_plan::topology::Source::Host, false).map_err(PlanError::from)?;
    Ok(t.cores_pus(cores, instance))
}

/// hwloc's variables that change what it discovers (`HWLOC_XMLFILE` and the like), which a
/// plugin running in the launcher's process takes from the job's environment `get` into
/// its own, where hwloc reads them: the job's, not the launcher's, say what the task
/// would see under the wrapper. For a process that is one thread, about to become the
/// task (slurmstepd's forked task).
pub fn adopt_hwloc_env(get: &dyn Fn(&str) -> Option<String>) {
    for name in HWLOC_INPUTS {
        match get(name) {
            Some(value) => std::env::set_var(name, value),
            None => std::env::remove_var(name),
        }
    }
}

/// hwloc's input variables (see [`adopt_hwloc_env`]).
const HWLOC_INPUTS: [&str; 7] = [
    "HWLOC_XMLFILE",
    "HWLOC_SYNTHETIC",
    "HWLOC_THISSYSTEM",
    "HWLOC_FSROOT",
    "HWLOC_CPUID_PATH",
    "HWLOC_ALLOW",
    "HWLOC_COMPONENTS",
];

/// What planning a job needs besides its tasks: its shape, the job as every front
/// assembles it (the key its plan is found by, the envelope it stays in: [`JobSpec`]) and
/// the GPUs its allocation grants.
#[derive(Debug, Clone)]
pub struct Planning {
    /// The shape.
    pub shape: JobShape,
    /// The job: its key and its envelope.
    pub spec: JobSpec,
    /// The GPUs the job may have.
    pub grant: Grant,
}

impl Planning {
    /// For `shape` inside `envelope` (`request` says whether the job is verbose); `get`
    /// is the environment the GPU allocation is read from (the job's, or the step's
    /// where a launcher rewrote each task's).
    pub fn new(
        shape: JobShape,
        envelope: Envelope,
        request: &Request,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Planning {
        let spec = JobSpec::new(
            &shape.origin,
            &shape.text,
            &Requests::default(),
            shape.site_text(),
            get,
            envelope,
        )
        .verbose(request.verbose);
        let grant = Grant::from_env(get).by_uuid(shape.shape.options.gpu_ids == Some(GpuIds::Uuid));
        Planning { shape, spec, grant }
    }

    /// The host planner of a plugin's task: hwloc's topology of this host, loaded with
    /// the job's environment `get` (whose variables a refusal names as `whose`).
    fn planner<'p>(
        &'p self,
        get: &'p dyn Fn(&str) -> Option<String>,
        whose: &'static str,
    ) -> HostPlanner<'p, Refusal> {
        let loader = Box::new(move |s: &Shape| crate::plugin_host(s, whose));
        HostPlanner::new(&self.shape.shape, self.grant.clone(), get, loader)
    }

    /// The job's plan for every local task (`identity` is any of them), from the node
    /// cache or planned with hwloc, without the node ledger: what a plugin prepares once
    /// for every task of a node (Flux's `shell.init`).
    pub fn plan_node(
        &self,
        identity: &Identity,
        request: &Request,
        get: &dyn Fn(&str) -> Option<String>,
        whose: &'static str,
        err: &mut impl Write,
    ) -> Result<Planned, Refusal> {
        let planned = self
            .planner(get, whose)
            .plain(&self.spec.task(identity), err)?;
        for view in &planned.0 {
            never_fewer(request, view)?;
        }
        Ok(planned)
    }
}

/// One task's launch by a plugin, what [`launch`] takes.
pub struct TaskLaunch<'a> {
    /// The job's planning.
    pub planning: &'a Planning,
    /// The task.
    pub identity: &'a Identity,
    /// The request (report, verbose).
    pub request: &'a Request,
    /// The job's environment.
    pub get: &'a dyn Fn(&str) -> Option<String>,
    /// Whose environment hwloc's variables came from, for a refusal (`slurmstepd's`).
    pub whose: &'static str,
    /// A plan made beforehand for every local task (Flux's `shell.init`), whose
    /// variables are already set: a task the ledger moved off it is refused.
    pub planned: Option<&'a Planned>,
    /// The CPUs a task binder leaves unbound (`bind: none`) keeps, where the plugin turned
    /// the launcher's own binding off (Flux's job cores here).
    pub unbound: Option<&'a dyn Fn() -> Result<Vec<usize>, Refusal>>,
}

/// Plans, claims and binds this process (the task, before exec) through the one launch
/// flow: the node ledger, then the kernel (hwloc for `membind`). The task's variables.
pub fn launch(
    task: &TaskLaunch<'_>,
    env: &dyn Env,
    err: &mut impl Write,
) -> Result<Vec<(String, String)>, Refusal> {
    let planning = task.planning;
    let mut front = TaskFront {
        planner: planning.planner(task.get, task.whose),
        task,
    };
    flow::launch(&planning.spec.task(task.identity), env, &mut front, err)
}

/// A plugin task's front on the launch flow: the host planner (or the plan made
/// beforehand, with a real re-plan around other jobs), and the binding in the task's
/// process (the kernel for CPUs, hwloc for `membind`).
struct TaskFront<'a> {
    planner: HostPlanner<'a, Refusal>,
    task: &'a TaskLaunch<'a>,
}

impl Planner for TaskFront<'_> {
    type Error = Refusal;

    fn plain(&mut self, job: &Job<'_>, err: &mut impl Write) -> Result<Planned, Refusal> {
        match self.task.planned {
            Some(planned) => Ok(planned.clone()),
            None => self.planner.plain(job, err),
        }
    }

    fn around(
        &mut self,
        job: &Job<'_>,
        scan: &Scan,
        avoid: &Avoid,
        err: &mut impl Write,
    ) -> Result<Planned, Refusal> {
        self.planner.around(job, scan, avoid, err)
    }

    fn shares(&self) -> bool {
        self.task.planning.shape.shape.options.share
    }
}

impl Front for TaskFront<'_> {
    type Planner = Self;

    fn planner(&mut self) -> &mut Self {
        self
    }

    fn bind(
        &mut self,
        view: &TaskView,
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<Vec<(String, String)>, Refusal> {
        let task = self.task;
        if let Some((views, _)) = task.planned {
            let rank = task.identity.rank;
            let planned = views
                .get(rank)
                .ok_or_else(|| Refusal(format!("the plan has no local task {rank}")))?;
            if view.cpus != planned.cpus || view.gpus != planned.gpus {
                return Err(Refusal(format!(
                    "another job took this task's units (cpus {}) between the plan of the job's tasks and the task's start, and its variables are already set; run the job again",
                    binder_core::cpulist::cpu_list(&planned.cpus)
                )));
            }
        }
        never_fewer(task.request, view)?;
        // hwloc's topology only for `membind` (the kernel binds CPUs without it).
        let topology: Option<Topology> = match view.membind {
            None => None,
            Some(_) => match self.planner.topology.take() {
                Some(t) => Some(t),
                None => Some(crate::plugin_host::<Refusal>(
                    &task.planning.shape.shape,
                    task.whose,
                )?),
            },
        };
        // `bind: none` keeps what the launcher would have bound it to, never the node.
        if let (false, Some(unbound)) = (view.is_bound(), task.unbound) {
            let cpus = unbound()?;
            if !cpus.is_empty() {
                binder_core::launch::affinity::bind_cpus_raw(&cpus)?;
            }
        }
        let options = task_options(view, task.request, started_on, task.get);
        Ok(crate::hostbind::prepare(
            view,
            topology.as_ref(),
            task.identity,
            &options,
            err,
        )?)
    }
}

/// A plugin's shape argument as a file, by the one rule every plugin follows (#63): a
/// path (relative to the first of `dirs` that holds it, else to the first given: the
/// task's current directory, then the job's `PWD`), or a catalog name in `catalog`. An
/// empty name, and a bare name that is neither a file there nor a catalog shape, are
/// refused in one line, the latter with the nearest catalog name.
pub fn resolve_shape(
    name: &str,
    dirs: &[Option<&str>],
    catalog: &Path,
) -> Result<PathBuf, Refusal> {
    if name.trim().is_empty() {
        return Err(Refusal(
            "the binder option names no shape; give SHAPE (a file or a catalog name), or an off word (off, none, 0, no, false)".to_owned(),
        ));
    }
    let given: Vec<&str> = dirs.iter().flatten().copied().collect();
    let cwd = given
        .iter()
        .copied()
        .find(|d| Path::new(d).join(name).is_file())
        .or_else(|| given.first().copied());
    let path = shape_path(name, cwd, catalog);
    if path.exists() || name.contains('/') {
        return Ok(path);
    }
    let stem = name.trim_end_matches(".yaml").trim_end_matches(".yml");
    let names = binder_core::launch::line::catalog_names(&[catalog.to_path_buf()]);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let near = binder_core::text::suggestion(stem, &candidates)
        .map(|n| format!("did you mean `{n}`? "))
        .unwrap_or_default();
    Err(Refusal(format!(
        "no shape file `{}` in the job's directory and no catalog shape of that name in {}; {near}give a path to a shape file or a catalog name",
        binder_core::text::printable(name, 60),
        catalog.display()
    )))
}

/// A site's default never gives a task fewer CPUs than the scheduler gave it (SEMANTICS
/// §4.3: `srun -c 2 bash` under `default=one-core` ran `make -j2` on one CPU, and so did
/// `flux run -c 2`): it is declined, and the scheduler's binding stands. An explicit
/// request may narrow a task; the plugin says what the scheduler gave ([`Request::given`]).
fn never_fewer(request: &Request, view: &TaskView) -> Result<(), Refusal> {
    match request.given {
        Some(given) if request.site_default && view.is_bound() && view.cpus.len() < given.cpus => {
            Err(Refusal(format!(
                "it gives this task {} cpu(s), fewer than the {} the scheduler gave it ({})",
                view.cpus.len(),
                given.cpus,
                given.from
            )))
        }
        _ => Ok(()),
    }
}
