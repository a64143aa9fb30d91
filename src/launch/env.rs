//! The environment binder adds for the task: what it was given (`BINDER_*`), OpenMP's
//! places, and the GPU runtimes' visible-device lists. Pure: the caller execs with it.

use crate::distribute::Plan;
use crate::gpu::Vendor;
use crate::report::{cpu_list, cpus_of, hwloc_mask};

use super::omp::{self, Verdict};
use crate::identity::Identity;

/// The `BINDER_*` variables binder may set; those it does not set for a task are removed
/// from the task's environment, so nothing stale from an outer binder gets through.
pub const OWN: [&str; 8] = [
    "BINDER_JOB",
    "BINDER_LOCAL_RANK",
    "BINDER_LOCAL_SIZE",
    "BINDER_UNIT",
    "BINDER_CPUS",
    "BINDER_CPUSET",
    "BINDER_GPUS",
    "BINDER_NICS",
];

/// What launching one task needs from the plan: small, serializable, and the same
/// whether it comes from a fresh plan or from the node cache ([`crate::cache`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskView {
    /// `core`, `pu` or `none`.
    pub unit: String,
    /// Its CPUs (OS numbers, ascending); empty for unit none.
    pub cpus: Vec<usize>,
    /// One OpenMP place per unit: the unit's PUs.
    pub places: Vec<Vec<usize>>,
    /// Its GPUs.
    pub gpus: Vec<GpuView>,
    /// Its nearest NICs' names.
    pub nics: Vec<String>,
    /// The `--report` text after `[launcher] `.
    pub binding: String,
    /// Grid Engine's variables (`GCS_BINDING`, `SGE_BINDING`, ...) when a request placed
    /// the task.
    #[serde(default)]
    pub ge_env: Vec<(String, String)>,
    /// False for `-binstance env`: the task is told its CPUs but not bound to them.
    #[serde(default = "yes")]
    pub apply: bool,
    /// The rank's `openmp` option (a per-rank rule may differ from the shape's), so a
    /// launch from the node cache or the ledger needs no shape parsed.
    #[serde(default)]
    pub openmp: bool,
    /// The rank's `membind: local`: memory binding needs the topology, so the `binder`
    /// executable hands such a launch over.
    #[serde(default)]
    pub membind: bool,
}

fn yes() -> bool {
    true
}

/// One GPU of a task, as launching it and recording it in the ledger need it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GpuView {
    /// binder's number (`gpu:N`, PCI order among the node's GPUs).
    pub number: usize,
    /// PCI bus id: how the ledger names it, whatever a runtime's numbering.
    pub busid: String,
    /// `nvidia`, `amd` or `intel`.
    pub vendor: String,
    /// How its runtime's variable lists it (SEMANTICS §9).
    pub export: String,
}

impl TaskView {
    /// The view of local rank `rank` of `plan`, made from `shape`, with the rank's launch
    /// options.
    pub fn for_launch(plan: &Plan, shape: &crate::shape::Shape, rank: usize) -> TaskView {
        TaskView {
            openmp: shape.options_for(rank).openmp,
            membind: shape.membind_for(rank),
            ..TaskView::of(plan, rank)
        }
    }

    /// The view of local rank `rank` of `plan` (its launch options off).
    pub fn of(plan: &Plan, rank: usize) -> TaskView {
        let task = &plan.tasks[rank];
        TaskView {
            unit: plan.unit_of(rank).unit.to_string(),
            cpus: cpus_of(&task.cpuset),
            places: task.units.iter().map(|u| u.pus.clone()).collect(),
            gpus: task
                .gpus
                .iter()
                .map(|&g| {
                    let gpu = &plan.gpus[g];
                    GpuView {
                        number: gpu.number,
                        busid: gpu.busid.clone(),
                        vendor: gpu.vendor.to_string(),
                        export: gpu.export.clone(),
                    }
                })
                .collect(),
            nics: task
                .nics
                .iter()
                .flat_map(|&i| plan.nics[i].names())
                .collect(),
            binding: crate::report::task_binding(plan, rank),
            ge_env: plan
                .ge
                .as_ref()
                .map_or_else(Vec::new, |g| ge_env(g, &cpus_of(&task.cpuset))),
            apply: plan
                .ge
                .as_ref()
                .is_none_or(|g| g.instance != crate::ge::Instance::Env),
            openmp: false,
            membind: false,
        }
    }

    /// Whether the task is bound (unit core or pu).
    pub fn is_bound(&self) -> bool {
        !self.places.is_empty()
    }
}

/// Grid Engine's variables (SEMANTICS §12): `GCS_BINDING` (the job's OS PU numbers, space
/// separated) and `GCS_BINDING_INSTANCE` always; OCS's `SGE_BINDING_INSTANCE`,
/// `SGE_BINDING_TOPOLOGY` and `SGE_BINDING_CPUSET` too; SGE 6.2u5's `SGE_BINDING` for
/// `-binstance env`: this task's own CPUs, the ones it is to bind itself to.
fn ge_env(summary: &crate::ge::Summary, mine: &[usize]) -> Vec<(String, String)> {
    let list: Vec<String> = summary.job_cpus.iter().map(ToString::to_string).collect();
    let list = list.join(" ");
    let instance = summary.instance.name().to_owned();
    let mut env = vec![
        ("GCS_BINDING".to_owned(), list.clone()),
        ("GCS_BINDING_INSTANCE".to_owned(), instance.clone()),
        ("SGE_BINDING_INSTANCE".to_owned(), instance),
        (
            "SGE_BINDING_TOPOLOGY".to_owned(),
            summary.job_topology.clone(),
        ),
        (
            "SGE_BINDING_CPUSET".to_owned(),
            hwloc_mask(&summary.job_cpus),
        ),
    ];
    if summary.instance == crate::ge::Instance::Env {
        let mine: Vec<String> = mine.iter().map(ToString::to_string).collect();
        env.push(("SGE_BINDING".to_owned(), mine.join(" ")));
    }
    env
}

/// The task's environment and what binder has to say about it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskEnv {
    /// The variables to set, in a stable order.
    pub vars: Vec<(String, String)>,
    /// What became of the user's own OpenMP variables (printed under `--verbose`).
    pub notes: Vec<String>,
    /// Warnings (printed by local rank 0, and by `--dry-run`).
    pub warnings: Vec<String>,
}

/// The variables to set for local rank `identity.rank`, in a stable order. `get` reads the
/// inherited environment: a user's own `OMP_NUM_THREADS` is kept, and so are their
/// `OMP_PLACES` and `OMP_PROC_BIND` when they agree with the binding ([`super::omp`]).
pub fn task_env(
    task: &TaskView,
    identity: &Identity,
    openmp: bool,
    get: &dyn Fn(&str) -> Option<String>,
) -> TaskEnv {
    let mut out = TaskEnv::default();
    let env = &mut out.vars;
    env.push(("BINDER_LOCAL_RANK".to_owned(), identity.rank.to_string()));
    env.push(("BINDER_LOCAL_SIZE".to_owned(), identity.size.to_string()));
    env.push(("BINDER_UNIT".to_owned(), task.unit.clone()));
    if task.is_bound() {
        env.push(("BINDER_CPUS".into(), cpu_list(&task.cpus)));
        env.push(("BINDER_CPUSET".into(), hwloc_mask(&task.cpus)));
        let user_threads = get("OMP_NUM_THREADS");
        let mut kept_places = None;
        if openmp {
            if user_threads.is_none() {
                env.push(("OMP_NUM_THREADS".into(), task.places.len().to_string()));
            }
            let places: Vec<String> = task
                .places
                .iter()
                .map(|pus| {
                    let pus: Vec<String> = pus.iter().map(ToString::to_string).collect();
                    format!("{{{}}}", pus.join(","))
                })
                .collect();
            let ours = places.join(",");
            match omp::places(get("OMP_PLACES").as_deref(), &task.cpus) {
                Verdict::Unset => env.push(("OMP_PLACES".into(), ours)),
                Verdict::Kept(v) => {
                    out.notes.push(format!(
                        "OMP_PLACES={v} kept: it agrees with cpus {}",
                        cpu_list(&task.cpus)
                    ));
                    kept_places = Some(v);
                }
                Verdict::Replaced(v, why) => {
                    out.notes
                        .push(format!("OMP_PLACES={v} replaced by {ours}: {why}"));
                    env.push(("OMP_PLACES".into(), ours));
                }
            }
            match omp::proc_bind(get("OMP_PROC_BIND").as_deref()) {
                Verdict::Unset => env.push(("OMP_PROC_BIND".into(), "close".into())),
                Verdict::Kept(v) => out.notes.push(format!("OMP_PROC_BIND={v} kept")),
                Verdict::Replaced(v, why) => {
                    out.notes
                        .push(format!("OMP_PROC_BIND={v} replaced by close: {why}"));
                    env.push(("OMP_PROC_BIND".into(), "close".into()));
                }
            }
        }
        // More threads than places (or, without `openmp`, than CPUs) oversubscribes.
        if let Some(wanted) = user_threads.as_deref().and_then(omp::threads) {
            let (n, what) = if openmp {
                let n = omp::count(
                    kept_places.as_deref(),
                    &task.cpus,
                    &task.places,
                    task.unit == "core",
                );
                (n, "OpenMP places")
            } else {
                (Some(task.cpus.len()), "cpus")
            };
            if let Some(n) = n.filter(|&n| wanted > n) {
                out.warnings.push(format!(
                    "OMP_NUM_THREADS={wanted} is more than the {n} {what} of local rank {} (cpus {}), so threads will share them; lower it or give each task more units",
                    identity.rank,
                    cpu_list(&task.cpus)
                ));
            }
        }
    }
    if !task.gpus.is_empty() {
        let list = |names: &[String]| names.join(",");
        let all: Vec<String> = task.gpus.iter().map(|g| g.number.to_string()).collect();
        env.push(("BINDER_GPUS".into(), list(&all)));
        let of = |vendor: Vendor| -> Vec<String> {
            task.gpus
                .iter()
                .filter(|g| g.vendor == vendor.to_string())
                .map(|g| g.export.clone())
                .collect()
        };
        let nvidia = of(Vendor::Nvidia);
        if !nvidia.is_empty() {
            env.push(("CUDA_VISIBLE_DEVICES".into(), list(&nvidia)));
            env.push(("CUDA_DEVICE_ORDER".into(), "PCI_BUS_ID".into()));
        }
        let amd = of(Vendor::Amd);
        if !amd.is_empty() {
            env.push(("ROCR_VISIBLE_DEVICES".into(), list(&amd)));
        }
        let intel = of(Vendor::Intel);
        if !intel.is_empty() {
            env.push(("ZE_AFFINITY_MASK".into(), list(&intel)));
            // Level Zero's order is the driver's unless asked for PCI order, which is
            // the order ZE_AFFINITY_MASK's indices are written in (SEMANTICS §9).
            env.push(("ZE_ENABLE_PCI_ID_DEVICE_ORDER".into(), "1".into()));
        }
    }
    if !task.nics.is_empty() {
        env.push(("BINDER_NICS".into(), task.nics.join(",")));
    }
    env.extend(task.ge_env.iter().cloned());
    out
}
