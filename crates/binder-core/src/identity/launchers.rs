//! One row per launcher: every fact binder knows of one, in one place. Identity (which
//! variables name the launcher and carry the local rank and size), the job's id for the
//! node ledger, the job's envelope (the daemon whose binding is the allocation), the
//! `--verbose` hints and the manual's ENVIRONMENT rows ([`LOCAL_VARS`], [`JOB_VARS`]) are
//! all read from [`LAUNCHERS`].
//!
//! Adding a launcher is a variant of [`Launcher`] and one row here: rows are in the
//! enum's order (a test holds it), and the manual, the man page and the README's table
//! follow from the row.

use super::Launcher;

/// How a launcher says how many of its tasks run on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeFrom {
    /// The row's one size variable holds the number.
    Var,
    /// Flux: the job's size and node count, else its task map (`flux job taskmap`).
    Flux,
    /// Slurm: the node's index into the compressed per-node task counts.
    Slurm,
}

/// Everything binder knows of one launcher.
#[derive(Debug)]
pub struct LauncherRow {
    /// Which launcher.
    pub launcher: Launcher,
    /// Its name in messages, reports and job ids (`openmpi`).
    pub name: &'static str,
    /// The task's local rank; set, it names the launcher (with [`LauncherRow::requires`]).
    pub local_rank: &'static str,
    /// A variable that must be set too, where the rank's name is a common one
    /// (`LOCAL_RANK`, which scripts set by hand): the launcher's own mark.
    pub requires: Option<&'static str>,
    /// The variables the node's task count is read from, as `size_from` says.
    pub local_size: &'static [&'static str],
    /// How the task count is read.
    pub size_from: SizeFrom,
    /// The task's rank in the whole job (labels `--report`).
    pub global_rank: &'static str,
    /// The variables naming the job, first one set wins (the ledger's job id); none:
    /// the daemon process names it.
    pub job_id: &'static [&'static str],
    /// Command names of its per-node daemon, whose binding is the job's allocation on
    /// the node (SEMANTICS §4.1); found among binder's ancestors.
    pub daemons: &'static [&'static str],
    /// How to turn the launcher's own binding off, for `--verbose` hints; none for
    /// launchers whose binding is how they say what the job owns (binder binds inside it).
    pub unbind: Option<&'static str>,
}

/// Every launcher, in [`Launcher`]'s order, which is the order they are asked: launchers
/// nest and inner ones inherit the outer ones' variables, so the ML launchers that run
/// inside an allocation's task (torchrun under `srun`) come first, then MPI launchers,
/// then Flux, then Slurm.
pub const LAUNCHERS: [LauncherRow; 9] = [
    // torchrun / torch elastic (torch.distributed.run; Accelerate's multi-GPU launch is
    // this too): one agent per node starts LOCAL_WORLD_SIZE workers, each in a session of
    // its own, with LOCAL_RANK, RANK, WORLD_SIZE and the rendezvous' TORCHELASTIC_RUN_ID,
    // which is `none` by default and so no job's own name: the agent (the `torchrun`
    // ancestor, else the workers' parent) names the job.
    LauncherRow {
        launcher: Launcher::Torchrun,
        name: "torchrun",
        local_rank: "LOCAL_RANK",
        requires: Some("TORCHELASTIC_RUN_ID"),
        local_size: &["LOCAL_WORLD_SIZE"],
        size_from: SizeFrom::Var,
        global_rank: "RANK",
        job_id: &[],
        daemons: &["torchrun"],
        unbind: None,
    },
    // DeepSpeed's launcher (deepspeed.launcher.launch, started by the `deepspeed` runner
    // on each node): LOCAL_RANK, LOCAL_SIZE, RANK, WORLD_SIZE and the node's CROSS_RANK
    // for every worker, its children; no job id, so its process names the job.
    LauncherRow {
        launcher: Launcher::Deepspeed,
        name: "deepspeed",
        local_rank: "LOCAL_RANK",
        requires: Some("CROSS_RANK"),
        local_size: &["LOCAL_SIZE"],
        size_from: SizeFrom::Var,
        global_rank: "RANK",
        job_id: &[],
        daemons: &["deepspeed"],
        unbind: Some("deepspeed without --bind_cores_to_rank"),
    },
    LauncherRow {
        launcher: Launcher::OpenMpi,
        name: "openmpi",
        local_rank: "OMPI_COMM_WORLD_LOCAL_RANK",
        requires: None,
        local_size: &["OMPI_COMM_WORLD_LOCAL_SIZE"],
        size_from: SizeFrom::Var,
        global_rank: "OMPI_COMM_WORLD_RANK",
        job_id: &[
            "PMIX_NAMESPACE",
            "OMPI_MCA_ess_base_jobid",
            "OMPI_MCA_orte_ess_jobid",
        ],
        daemons: &["orted", "prted", "mpirun", "orterun", "prterun", "mpiexec"],
        unbind: Some("mpirun --bind-to none"),
    },
    LauncherRow {
        launcher: Launcher::Hydra,
        name: "hydra",
        local_rank: "MPI_LOCALRANKID",
        requires: None,
        local_size: &["MPI_LOCALNRANKS"],
        size_from: SizeFrom::Var,
        global_rank: "PMI_RANK",
        job_id: &[],
        // MPICH's proxy, and Intel MPI's (the same Hydra, another name).
        daemons: &["hydra_pmi_proxy", "pmi_proxy"],
        unbind: Some("mpiexec -bind-to none"),
    },
    LauncherRow {
        launcher: Launcher::Mvapich,
        name: "mvapich2",
        local_rank: "MV2_COMM_WORLD_LOCAL_RANK",
        requires: None,
        local_size: &["MV2_COMM_WORLD_LOCAL_SIZE"],
        size_from: SizeFrom::Var,
        global_rank: "MV2_COMM_WORLD_RANK",
        job_id: &["MPIRUN_ID"],
        daemons: &["mpispawn", "mpirun_rsh"],
        unbind: Some("MV2_ENABLE_AFFINITY=0"),
    },
    LauncherRow {
        launcher: Launcher::Pals,
        name: "pals",
        local_rank: "PALS_LOCAL_RANKID",
        requires: None,
        local_size: &["PALS_LOCAL_SIZE"],
        size_from: SizeFrom::Var,
        global_rank: "PALS_RANKID",
        job_id: &["PALS_APID"],
        daemons: &["palsd"],
        unbind: Some("mpiexec --cpu-bind none"),
    },
    LauncherRow {
        launcher: Launcher::Jsrun,
        name: "jsrun",
        local_rank: "JSM_NAMESPACE_LOCAL_RANK",
        requires: None,
        local_size: &["JSM_NAMESPACE_LOCAL_SIZE"],
        size_from: SizeFrom::Var,
        global_rank: "JSM_NAMESPACE_RANK",
        job_id: &["PMIX_NAMESPACE"],
        daemons: &["jsmd", "jsm"],
        unbind: Some("jsrun --bind=none"),
    },
    LauncherRow {
        launcher: Launcher::Flux,
        name: "flux",
        local_rank: "FLUX_TASK_LOCAL_ID",
        requires: None,
        local_size: &["FLUX_JOB_SIZE", "FLUX_JOB_NNODES"],
        size_from: SizeFrom::Flux,
        global_rank: "FLUX_TASK_RANK",
        job_id: &["FLUX_JOB_ID"],
        daemons: &["flux-shell"],
        unbind: None,
    },
    LauncherRow {
        launcher: Launcher::Slurm,
        name: "slurm",
        local_rank: "SLURM_LOCALID",
        requires: None,
        local_size: &["SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE"],
        size_from: SizeFrom::Slurm,
        global_rank: "SLURM_PROCID",
        job_id: &["SLURM_JOB_ID", "SLURM_JOBID"],
        daemons: &["slurmstepd"],
        unbind: None,
    },
];

/// Variables that refine a job id where one launcher's id is not enough: Slurm's step,
/// the Flux job shell's rank (in its `FLUX_JOB_TMPDIR`), LSF's batch job around a launcher
/// that exports none (`identity::job`).
pub const JOB_EXTRA_VARS: [&str; 4] = [
    "SLURM_STEP_ID",
    "SLURM_STEPID",
    "FLUX_JOB_TMPDIR",
    "LSB_JOBID",
];

impl Launcher {
    /// Its row of [`LAUNCHERS`].
    pub const fn row(self) -> &'static LauncherRow {
        &LAUNCHERS[self as usize]
    }
}

/// How many rows have a mark ([`LauncherRow::requires`]).
const MARK_COUNT: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < LAUNCHERS.len() {
        if LAUNCHERS[i].requires.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The variables that mark a common rank variable as one launcher's (`TORCHELASTIC_RUN_ID`,
/// `CROSS_RANK`): the manual's ENVIRONMENT row is this list.
pub const MARK_VARS: [&str; MARK_COUNT] = {
    let mut out = [""; MARK_COUNT];
    let (mut i, mut k) = (0, 0);
    while i < LAUNCHERS.len() {
        if let Some(mark) = LAUNCHERS[i].requires {
            out[k] = mark;
            k += 1;
        }
        i += 1;
    }
    out
};

/// Whether a row before `row` reads `var` as its local rank (torchrun's and DeepSpeed's
/// `LOCAL_RANK`): [`LOCAL_VARS`] lists it once.
const fn earlier_rank(row: usize, var: &str) -> bool {
    let mut i = 0;
    while i < row {
        if same(LAUNCHERS[i].local_rank, var) {
            return true;
        }
        i += 1;
    }
    false
}

/// How many names [`LOCAL_VARS`] has (a rank variable two launchers share counts once).
const LOCAL_COUNT: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < LAUNCHERS.len() {
        if !earlier_rank(i, LAUNCHERS[i].local_rank) {
            n += 1;
        }
        n += LAUNCHERS[i].local_size.len();
        i += 1;
    }
    n
};

/// Every variable binder reads a task's local rank or the node's task count from, in the
/// order they are asked: each launcher's rank variable, then its size variables. The
/// manual's ENVIRONMENT table (and so the man page and the README) is this list.
pub const LOCAL_VARS: [&str; LOCAL_COUNT] = {
    let mut out = [""; LOCAL_COUNT];
    let (mut i, mut k) = (0, 0);
    while i < LAUNCHERS.len() {
        if !earlier_rank(i, LAUNCHERS[i].local_rank) {
            out[k] = LAUNCHERS[i].local_rank;
            k += 1;
        }
        let mut j = 0;
        while j < LAUNCHERS[i].local_size.len() {
            out[k] = LAUNCHERS[i].local_size[j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    out
};

/// How many names [`JOB_VARS`] has (a variable two launchers share counts once).
const JOB_COUNT: usize = {
    let mut n = JOB_EXTRA_VARS.len();
    let mut i = 0;
    while i < LAUNCHERS.len() {
        let mut j = 0;
        while j < LAUNCHERS[i].job_id.len() {
            if !earlier(i, LAUNCHERS[i].job_id[j]) {
                n += 1;
            }
            j += 1;
        }
        i += 1;
    }
    n
};

/// Whether a launcher before row `row` names `var` among its job-id variables.
const fn earlier(row: usize, var: &str) -> bool {
    let mut i = 0;
    while i < row {
        let mut j = 0;
        while j < LAUNCHERS[i].job_id.len() {
            if same(LAUNCHERS[i].job_id[j], var) {
                return true;
            }
            j += 1;
        }
        i += 1;
    }
    false
}

/// `a == b` in a constant.
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Every variable a job's id for the node ledger is read from: the launchers' job-id
/// variables, then [`JOB_EXTRA_VARS`]. The manual's ENVIRONMENT row is this list.
pub const JOB_VARS: [&str; JOB_COUNT] = {
    let mut out = [""; JOB_COUNT];
    let (mut i, mut k) = (0, 0);
    while i < LAUNCHERS.len() {
        let mut j = 0;
        while j < LAUNCHERS[i].job_id.len() {
            if !earlier(i, LAUNCHERS[i].job_id[j]) {
                out[k] = LAUNCHERS[i].job_id[j];
                k += 1;
            }
            j += 1;
        }
        i += 1;
    }
    let mut e = 0;
    while e < JOB_EXTRA_VARS.len() {
        out[k] = JOB_EXTRA_VARS[e];
        k += 1;
        e += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_the_enums_order() {
        for (i, row) in LAUNCHERS.iter().enumerate() {
            assert_eq!(row.launcher as usize, i, "{}", row.name);
            assert_eq!(row.launcher.row().name, row.name);
        }
    }

    #[test]
    fn a_plain_launcher_has_one_size_variable() {
        for row in &LAUNCHERS {
            if row.size_from == SizeFrom::Var {
                assert_eq!(row.local_size.len(), 1, "{}", row.name);
            }
            // Hydra's job is named by its proxy process: it needs a daemon.
            assert!(
                !row.job_id.is_empty() || !row.daemons.is_empty(),
                "{}",
                row.name
            );
        }
    }

    #[test]
    fn derived_lists() {
        assert_eq!(LOCAL_VARS[0], "LOCAL_RANK");
        assert!(LOCAL_VARS.contains(&"LOCAL_WORLD_SIZE") && LOCAL_VARS.contains(&"LOCAL_SIZE"));
        assert_eq!(LOCAL_VARS.len(), 19);
        assert_eq!(LOCAL_VARS.iter().filter(|v| **v == "LOCAL_RANK").count(), 1);
        assert!(LOCAL_VARS.contains(&"SLURM_STEP_TASKS_PER_NODE"));
        // PMIX_NAMESPACE is Open MPI's and jsrun's: listed once.
        assert_eq!(
            JOB_VARS.iter().filter(|v| **v == "PMIX_NAMESPACE").count(),
            1
        );
        assert!(JOB_VARS.contains(&"SLURM_JOBID") && JOB_VARS.contains(&"LSB_JOBID"));
    }
}
