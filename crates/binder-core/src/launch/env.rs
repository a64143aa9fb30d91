//! The environment binder adds for the task: what it was given (`BINDER_*`), OpenMP's
//! places, and the GPU runtimes' visible-device lists. Pure: the caller execs with it.

use crate::cpulist::{cpu_list, hwloc_mask};
use crate::view::{TaskView, Vendor};

use super::omp::{self, Verdict};
use crate::identity::Identity;

/// The `BINDER_*` variables binder may set; those it does not set for a task are removed
/// from the task's environment, so nothing stale from an outer binder gets through.
pub(crate) const OWN: [&str; 8] = [
    "BINDER_JOB",
    "BINDER_LOCAL_RANK",
    "BINDER_LOCAL_SIZE",
    "BINDER_UNIT",
    "BINDER_CPUS",
    "BINDER_CPUSET",
    "BINDER_GPUS",
    "BINDER_NICS",
];

/// binder's own variables that `set` (what binder sets for this task) does not set: an
/// outer binder's (the shell that ran the launcher) must not reach this task, whose
/// binding they do not describe. Every front removes these.
pub fn stale(set: &[(String, String)]) -> impl Iterator<Item = &'static str> + '_ {
    OWN.into_iter()
        .filter(move |own| !set.iter().any(|(k, _)| k == own))
}

/// Ends this process (a task a plugin forked, before exec) with binder's one `binder:`
/// line and exit status 125, as a refused launch: the command never runs.
pub fn refuse_task(why: &str) -> ! {
    crate::text::emit(&mut std::io::stderr(), why);
    // SAFETY: `_exit` ends this process (the task's, forked by slurmstepd or the job
    // shell) at once, without running the launcher's `atexit` handlers in it, as a
    // failed exec would.
    unsafe { libc::_exit(crate::exit_code::REFUSED) }
}

/// How a communication library names the NICs it may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NicForm {
    /// UCX's `UCX_NET_DEVICES`: each RDMA device with its port (`mlx5_0:1`), and the
    /// network interface of a NIC without one (`eth0`, for UCX's TCP transport).
    Ucx,
    /// NCCL's `NCCL_IB_HCA`: the RDMA devices with their port, `=` in front for an exact
    /// match (`=mlx5_0:1`, or `mlx5_0` would also take `mlx5_0x`); unset without RDMA
    /// devices.
    NcclHca,
}

/// A variable a communication library reads for its NICs (one row each): binder sets it to
/// the task's NICs when the shape names a `nic`, and keeps a value the user set.
#[derive(Debug, Clone, Copy)]
pub struct NicVar {
    /// The variable.
    pub name: &'static str,
    /// How its value names NICs.
    pub form: NicForm,
}

/// Every NIC variable binder sets beside `BINDER_NICS`.
pub const NIC_VARS: [NicVar; 2] = [
    NicVar {
        name: "UCX_NET_DEVICES",
        form: NicForm::Ucx,
    },
    NicVar {
        name: "NCCL_IB_HCA",
        form: NicForm::NcclHca,
    },
];

/// The names of [`NIC_VARS`], for the manual's table.
pub const NIC_VAR_NAMES: [&str; NIC_VARS.len()] = {
    let mut out = [""; NIC_VARS.len()];
    let mut i = 0;
    while i < NIC_VARS.len() {
        out[i] = NIC_VARS[i].name;
        i += 1;
    }
    out
};

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
        // Each vendor's variables, as its row of `vendor::VENDORS` says.
        for row in &crate::vendor::VENDORS {
            let mine = of(row.vendor);
            if mine.is_empty() {
                continue;
            }
            for (name, value) in row.task_vars {
                let value = value.map_or_else(|| list(&mine), str::to_owned);
                env.push(((*name).to_owned(), value));
            }
        }
    }
    if !task.nics.is_empty() {
        env.push(("BINDER_NICS".into(), task.nics.join(",")));
    }
    for (name, value) in &task.nic_vars {
        // A value the user set names the NICs they chose: kept, and said under -v.
        if get(name).is_some() {
            out.notes
                .push(format!("{name} is kept as set (binder would set {value})"));
        } else {
            out.vars.push((name.clone(), value.clone()));
        }
    }
    out.vars.extend(task.ge_env.iter().cloned());
    out
}
