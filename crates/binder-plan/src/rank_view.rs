//! A plan's rank as the launch, the node cache and the ledger see it
//! ([`binder_core::view::TaskView`]).

use binder_core::cpulist::hwloc_mask;
use binder_core::view::{GpuView, TaskView};

use crate::distribute::Plan;

/// The view of local rank `rank` of `plan`, made from `shape`, with the rank's launch
/// options.
pub fn launch_view(plan: &Plan, shape: &crate::shape::Shape, rank: usize) -> TaskView {
    TaskView {
        openmp: shape.options_for(rank).openmp,
        membind: shape.membind_for(rank),
        memory: shape.memory_for(rank),
        ..task_view(plan, rank)
    }
}

/// The view of local rank `rank` of `plan` (its launch options off).
pub(crate) fn task_view(plan: &Plan, rank: usize) -> TaskView {
    let task = &plan.tasks[rank];
    TaskView {
        unit: plan.unit_of(rank).unit.to_string(),
        cpus: task.cpuset.to_vec(),
        places: task.units.iter().map(|u| u.pus.clone()).collect(),
        gpus: task
            .gpus
            .iter()
            .map(|&g| {
                let gpu = &plan.gpus[g];
                GpuView {
                    number: gpu.number,
                    busid: gpu.claim_id(),
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
        nic_vars: binder_core::launch::env::NIC_VARS
            .iter()
            .filter_map(|var| {
                let names: Vec<String> = task
                    .nics
                    .iter()
                    .flat_map(|&i| plan.nics[i].names_for(var.form))
                    .collect();
                let prefix = match var.form {
                    binder_core::launch::env::NicForm::NcclHca => "=",
                    binder_core::launch::env::NicForm::Ucx => "",
                };
                (!names.is_empty())
                    .then(|| (var.name.to_owned(), format!("{prefix}{}", names.join(","))))
            })
            .collect(),
        binding: crate::report::task_binding(plan, rank),
        ge_env: plan
            .ge
            .as_ref()
            .map_or_else(Vec::new, |g| ge_env(g, &task.cpuset.to_vec())),
        apply: plan
            .ge
            .as_ref()
            .is_none_or(|g| g.instance != crate::ge::Instance::Env),
        openmp: false,
        membind: None,
        memory: Default::default(),
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
