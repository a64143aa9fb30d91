//! One task's binding inside slurmstepd, in Rust terms: no FFI here, so it is tested
//! like any library code. The flow is the `binder` executable's: the same planner
//! (`binder_plan::around::HostPlanner`), the same node ledger
//! (`binder_core::launch::ledgered`), the same environment (`binder_core::launch`);
//! only identity and environment come from SPANK instead of the process.

use std::io::Write;
use std::path::{Path, PathBuf};

use binder_core::identity::{Env, Identity, Launcher};
use binder_core::launch::ledgered::{self, Job, Planner, Stopped};
use binder_core::launch::line::{job_text, site_text, Requests};
use binder_core::launch::{prepare_cached, LaunchError, Options};
use binder_core::ledger::{store, Ledger, LedgerError};
use binder_core::view::TaskView;
use binder_plan::around::HostPlanner;
use binder_plan::gpu::Grant;
use binder_plan::shape::{self, GpuIds, Shape};
use binder_plan::topology::{Source, Topology};
use binder_plan::PlanError;

/// What the user (`srun --binder…`) or the site (plugstack.conf) asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `--binder=SHAPE`, or the site's `default=`: a path, or a catalog name.
    pub shape: String,
    /// `--binder-report`: the binding line on the task's stderr.
    pub report: bool,
    /// `--binder-verbose`: what the ledger decided, and the environment's notes.
    pub verbose: bool,
}

/// Which task this is, from SPANK items (never from the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Items {
    /// `S_TASK_ID`: the local task id.
    pub task: usize,
    /// `S_JOB_LOCAL_TASK_COUNT`.
    pub local_count: usize,
    /// `S_JOB_ID`.
    pub job: u32,
    /// `S_JOB_STEPID`.
    pub step: u32,
    /// `S_JOB_NODEID`.
    pub node: u32,
    /// `S_TASK_GLOBAL_ID`.
    pub global: Option<u32>,
}

impl Items {
    /// The task's identity, as binder's Slurm launcher reading would give it.
    pub fn identity(&self) -> Identity {
        Identity {
            rank: self.task,
            size: self.local_count,
            rank_known: true,
            launcher: Some(Launcher::Slurm),
            vars: vec![
                format!("S_TASK_ID={}", self.task),
                format!("S_JOB_LOCAL_TASK_COUNT={}", self.local_count),
                format!("S_JOB_NODEID={}", self.node),
            ],
            global_rank: self.global.map(|g| g as usize),
        }
    }
}

/// The job's environment as SPANK hands it over, with the job and step ids the node
/// ledger names the job by answered from SPANK items.
pub struct SpankEnv<'a> {
    /// The task's environment (`spank_getenv`).
    pub get: &'a dyn Fn(&str) -> Option<String>,
    /// The ids.
    pub items: Items,
}

impl Env for SpankEnv<'_> {
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "SLURM_JOB_ID" | "SLURM_JOBID" => Some(self.items.job.to_string()),
            "SLURM_STEP_ID" | "SLURM_STEPID" => Some(self.items.step.to_string()),
            _ => (self.get)(name),
        }
    }

    fn flux_taskmap(&self, _: &str) -> Result<String, String> {
        Err("not a Flux job".into())
    }
}

/// Why a task is not run.
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

/// The shape's file: `name` as given when it names a file (has a `/` or ends in `.yaml`),
/// relative to the job's working directory (`cwd`); else `catalog/name.yaml`.
pub fn shape_path(name: &str, cwd: Option<&str>, catalog: &Path) -> PathBuf {
    if name.contains('/') || name.ends_with(".yaml") || name.ends_with(".yml") {
        let path = PathBuf::from(name);
        match cwd {
            Some(dir) if path.is_relative() => Path::new(dir).join(path),
            _ => path,
        }
    } else {
        catalog.join(format!("{name}.yaml"))
    }
}

/// A refusal when Slurm binds the task too (`srun --cpu-bind=…` other than `none`):
/// two bindings of one task, one of which would silently lose.
pub fn slurm_binds_too(get: &dyn Fn(&str) -> Option<String>) -> Option<Refusal> {
    let kind = get("SLURM_CPU_BIND_TYPE")?;
    let kind = kind.trim().trim_end_matches(',');
    if kind.is_empty()
        || kind
            .split(',')
            .all(|k| k == "none" || k == "quiet" || k == "verbose")
    {
        return None;
    }
    Some(Refusal(format!(
        "srun --cpu-bind={} and --binder both bind this task; drop --cpu-bind (or pass --cpu-bind=none) to bind with binder, or drop --binder",
        binder_core::text::printable(kind, 40)
    )))
}

/// This host's topology for planning, refused when hwloc describes another machine.
fn load_host(shape: &Shape, gpus: Option<usize>) -> Result<Topology, Refusal> {
    let t = binder_plan::load_topology(shape, &Source::Host, gpus)?;
    if !t.hw().is_this_system() {
        return Err(LaunchError::NotThisSystem {
            vars: "HWLOC_XMLFILE or HWLOC_SYNTHETIC in slurmstepd's environment".into(),
        }
        .into());
    }
    Ok(t)
}

/// Plans, claims and binds this process (the task, before exec) as `request` asks; the
/// variables to set in the task's environment. `err` gets `--binder-report` and
/// `--binder-verbose` lines and warnings.
pub fn bind(
    request: &Request,
    path: &Path,
    items: Items,
    get: &dyn Fn(&str) -> Option<String>,
    err: &mut impl Write,
) -> Result<Vec<(String, String)>, Refusal> {
    if let Some(refusal) = slurm_binds_too(get) {
        return Err(refusal);
    }
    let identity = items.identity();
    let origin = path.display().to_string();
    let text = shape::read_text(path)?;
    let site = site_text(get).map_err(|(what, why)| Refusal(format!("{what}: {why}")))?;
    let mut shape = Shape::from_yaml(&text, &origin)?;
    binder_plan::ge::reserve::add_site(&mut shape, site.as_ref()).map_err(PlanError::from)?;
    let key = job_text(
        &text,
        &Requests::default(),
        site.as_ref().map(|(_, t)| t.as_str()),
        get,
    );
    let grant = Grant::from_env(get).by_uuid(shape.options.gpu_ids == Some(GpuIds::Uuid));
    let env = SpankEnv { get, items };
    let job = Job {
        origin: &origin,
        text: &key,
        identity: &identity,
        gpus_per_task: None,
        verbose: request.verbose,
    };
    let options = |view: &TaskView, started_on| Options {
        command: &[],
        openmp: view.openmp,
        membind: view.membind,
        report: request.report,
        verbose: request.verbose,
        scrub: &[],
        started_on,
        inherited: get,
    };
    let loader = Box::new(|s: &Shape| load_host(s, None));
    let mut planner = HostPlanner::new(&shape, grant, get, loader);
    let no_membind = |view: &TaskView| {
        if view.membind {
            return Err(Refusal(
                "`membind: local` needs binder's launch line (`srun binder SHAPE -- CMD`); the SPANK plugin binds CPUs and GPUs only".into(),
            ));
        }
        Ok(())
    };
    let ledger = Ledger::open(get);
    let why = match &ledger {
        Ok(ledger) => {
            let claimed = ledgered::claim(ledger, &job, &env, &mut planner, err);
            match claimed {
                Ok(claimed) => {
                    if let Err(refusal) = no_membind(&claimed.view) {
                        claimed.undo();
                        return Err(refusal);
                    }
                    let prepared = prepare_cached(
                        &claimed.view,
                        &identity,
                        &options(&claimed.view, claimed.started_on()),
                        err,
                    );
                    return match prepared {
                        Ok(mut vars) => {
                            vars.push(("BINDER_JOB".into(), claimed.job.to_string()));
                            Ok(vars)
                        }
                        Err(e) => {
                            claimed.undo();
                            Err(e.into())
                        }
                    };
                }
                Err(Stopped::Error(refusal)) => return Err(refusal),
                Err(Stopped::Uncoordinated(why)) => why,
            }
        }
        Err(why) => why.clone(),
    };
    // Without the ledger: off, or unusable (warned, or refused under require).
    let view = unledgered(&job, &mut planner, why, get, err)?;
    no_membind(&view)?;
    Ok(prepare_cached(
        &view,
        &identity,
        &options(&view, None),
        err,
    )?)
}

/// This rank's view without the node ledger (off, or unusable: said once per node,
/// refused under `BINDER_LEDGER=require`).
fn unledgered(
    job: &Job<'_>,
    planner: &mut HostPlanner<'_, Refusal>,
    why: String,
    get: &dyn Fn(&str) -> Option<String>,
    err: &mut impl Write,
) -> Result<TaskView, Refusal> {
    if !why.starts_with("BINDER_LEDGER=") {
        if store::required(get) {
            return Err(LedgerError::Required(why).into());
        }
        if job.identity.rank == 0 {
            binder_core::text::emit(
                err,
                &format!("warning: node ledger not used, so other jobs on this node may get the same cpus and GPUs: {}", binder_core::text::printable(&why, 200)),
            );
        }
    }
    let (views, _) = planner.plain(job, err)?;
    views
        .into_iter()
        .nth(job.identity.rank)
        .ok_or_else(|| Refusal(format!("the plan has no rank {}", job.identity.rank)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        let catalog = Path::new("/usr/share/binder/shapes");
        assert_eq!(
            shape_path("cores-packed", Some("/home/u"), catalog),
            catalog.join("cores-packed.yaml")
        );
        assert_eq!(
            shape_path("shapes/x.yaml", Some("/home/u"), catalog),
            PathBuf::from("/home/u/shapes/x.yaml")
        );
        assert_eq!(
            shape_path("/etc/s.yaml", Some("/home/u"), catalog),
            PathBuf::from("/etc/s.yaml")
        );
        assert_eq!(shape_path("x.yml", None, catalog), PathBuf::from("x.yml"));
    }

    #[test]
    fn cpu_bind_none_is_no_binding() {
        let with =
            |v: &'static str| move |k: &str| (k == "SLURM_CPU_BIND_TYPE").then(|| v.to_owned());
        assert!(slurm_binds_too(&|_| None).is_none());
        assert!(slurm_binds_too(&with("none")).is_none());
        assert!(slurm_binds_too(&with("quiet,none,")).is_none());
        let refusal = slurm_binds_too(&with("mask_cpu:")).expect("binds");
        assert!(refusal.0.contains("--cpu-bind=mask_cpu:"), "{refusal}");
        assert!(slurm_binds_too(&with("cores")).is_some());
    }

    #[test]
    fn ids_come_from_items_not_the_environment() {
        let items = Items {
            task: 1,
            local_count: 2,
            job: 7,
            step: 3,
            node: 0,
            global: Some(5),
        };
        let get = |k: &str| (k == "SLURM_JOB_ID").then(|| "999".to_owned());
        let env = SpankEnv { get: &get, items };
        assert_eq!(env.var("SLURM_JOB_ID").as_deref(), Some("7"));
        assert_eq!(env.var("SLURM_STEP_ID").as_deref(), Some("3"));
        let id = items.identity();
        assert_eq!((id.rank, id.size, id.global_rank), (1, 2, Some(5)));
    }
}
