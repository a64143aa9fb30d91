//! Which *job* a task belongs to on this node, so that all tasks of one job share one plan
//! in the node ledger (SEMANTICS §13) and two jobs never do.
//!
//! What each launcher really exports (read from their sources and checked under the ones
//! Debian ships, Open MPI 4.1 and MPICH 4.0's Hydra):
//!
//! | launcher | job on this node |
//! |---|---|
//! | Slurm | `SLURM_JOB_ID` + `SLURM_STEP_ID` (two `srun` steps are two jobs) |
//! | Flux | `FLUX_JOB_ID` |
//! | Open MPI 4/5, PRRTE, jsrun | `PMIX_NAMESPACE`, else `OMPI_MCA_ess_base_jobid` / `OMPI_MCA_orte_ess_jobid` |
//! | PALS | `PALS_APID` |
//! | MVAPICH2 `mpirun_rsh` | `MPIRUN_ID` |
//! | Hydra (MPICH, Intel MPI) | exports no job id: the nearest `hydra_pmi_proxy` ancestor (one per job per node) |
//! | jsrun without PMIx | `LSB_JOBID` and the launching daemon (the parent process) |
//! | none | the process group (a script's `binder … &` lines, ranks given by flags) |
//!
//! A process-derived id carries the process's start time, so a reused PID never makes a
//! new job look like a dead one.

use super::{Env, Identity, Launcher};
use crate::procfs::Procs;

/// A job's identity on this node: printable, and a file-name-safe key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobId(pub String);

impl std::fmt::Display for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The longest job id kept (launchers' ids are far shorter; a forged one is cut).
const MAX_ID: usize = 96;

/// Whether a job id, or its file-name part (which keeps these markers), was named by
/// the launcher rather than made up by binder from a process ([`JobId::from_launcher`]).
pub(crate) fn named_by_launcher(id: &str) -> bool {
    !id.starts_with("pgid-") && !id.contains("ppid-")
}

/// The prefix of [`JobId::unclaimed`] ids.
const UNCLAIMED: &str = "pid:";

impl JobId {
    /// The job a bound process no claim accounts for is counted as (`pid:PID`, named
    /// after it: the kernel's view of another user's node, SEMANTICS §13.2).
    pub fn unclaimed(pid: u32) -> JobId {
        JobId(format!("{UNCLAIMED}{pid}"))
    }

    /// Whether this is such a job ([`JobId::unclaimed`]).
    pub fn is_unclaimed(&self) -> bool {
        self.0.starts_with(UNCLAIMED)
    }

    /// The id as a file name part: `[A-Za-z0-9._-]`, every other byte `_`.
    pub fn file_part(&self) -> String {
        self.0
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    /// Whether the launcher named this job (`slurm:…`, `flux:…`, `openmpi:…`, Hydra's
    /// proxy), rather than binder making it up from a process (`pgid-…`, `…:ppid-…`):
    /// only then are two shapes under one id one job's ranks (MPMD).
    pub fn from_launcher(&self) -> bool {
        named_by_launcher(&self.0)
    }

    /// The scheduler allocation this job runs in (SEMANTICS §4.3), as the prefix every
    /// ledger name of that allocation's jobs starts with: `slurm:812.` for every step of
    /// Slurm job 812, `flux:` for the jobs of a Flux instance (whose ids name no
    /// instance; the caller takes only this user's). `None` outside any scheduler.
    pub fn allocation(&self) -> Option<String> {
        if let Some(rest) = self.0.strip_prefix("slurm:") {
            let job = rest.split(['.', '+']).next().unwrap_or("");
            return (!job.is_empty()).then(|| format!("slurm:{job}."));
        }
        self.0.starts_with("flux:").then(|| "flux:".to_owned())
    }

    /// Whether this job is a scheduler's task of the kind `allocation` names (another
    /// job's [`JobId::allocation`]): any Slurm step for `slurm:…`, any Flux job for
    /// `flux:`. Inside a scheduler's allocation those coordinate; a process that is no
    /// such task steers and never refuses (SEMANTICS §4.3).
    pub fn of_scheduler(&self, allocation: &str) -> bool {
        ["slurm:", "flux:"]
            .into_iter()
            .any(|k| allocation.starts_with(k) && self.0.starts_with(k))
    }

    /// A distinct job with the same launcher id: a second `binder` of one process group
    /// (or of one Hydra proxy) that is not a rank of the first.
    pub fn instance(&self, pid: u32) -> JobId {
        JobId(format!("{}+{pid}", self.0))
    }
}

/// This task's job: from the launcher that gave its identity, else from its processes.
pub fn job_of(identity: &Identity, env: &dyn Env, procs: &dyn Procs) -> JobId {
    let var = |name: &str| {
        env.var(name)
            .map(|v| crate::text::clip(v.trim(), MAX_ID))
            .filter(|v| !v.is_empty())
    };
    // The launcher's job-id variables (its row of `LAUNCHERS`), refined where one id is
    // not enough (a Slurm step, a Flux job shell); a launcher that exports none (Hydra)
    // is named by its daemon process.
    let id = identity.launcher.and_then(|launcher| {
        let row = launcher.row();
        let Some(j) = row.job_id.iter().find_map(|name| var(name)) else {
            return row
                .job_id
                .is_empty()
                .then(|| row.daemons.iter().find_map(|d| ancestor(procs, d)))
                .flatten()
                .map(|p| format!("{launcher}:{p}"));
        };
        Some(match launcher {
            Launcher::Slurm => {
                let step = var("SLURM_STEP_ID")
                    .or_else(|| var("SLURM_STEPID"))
                    .unwrap_or_else(|| "batch".into());
                format!("{launcher}:{j}.{step}")
            }
            Launcher::Flux => match flux_shell_rank(env, &j) {
                Some(shell) => format!("{launcher}:{j}.{shell}"),
                None => format!("{launcher}:{j}"),
            },
            _ => format!("{launcher}:{j}"),
        })
    });
    if let Some(id) = id {
        return JobId(id);
    }
    // No id exported: the launcher's daemon (the parent) for a launcher, the process
    // group outside one.
    let me = procs.stat(procs.me());
    match identity.launcher {
        Some(launcher) => {
            let ppid = me.map_or(0, |s| s.ppid);
            let start = procs.stat(ppid).map_or(0, |s| s.start);
            let batch = var("LSB_JOBID").map_or_else(String::new, |j| format!("{j}:"));
            JobId(format!("{launcher}:{batch}ppid-{ppid}-{start}"))
        }
        None => {
            let pgrp = me.map_or(0, |s| s.pgrp);
            let start = procs.stat(pgrp).map_or(0, |s| s.start);
            JobId(format!("pgid-{pgrp}-{start}"))
        }
    }
}

/// The rank of the Flux job shell that started this task, from the shell's
/// `FLUX_JOB_TMPDIR` (`…/jobtmp-RANK-JOBID`). One shell runs per node, so on a real
/// cluster this only says which node; where several brokers share a host (`flux start
/// --test-size=N`, a site's partitioned nodes) it keeps each shell's tasks a job of their
/// own, planned around each other, instead of one job with two rank 0s.
fn flux_shell_rank(env: &dyn Env, jobid: &str) -> Option<u32> {
    let dir = env.var("FLUX_JOB_TMPDIR")?;
    let name = dir.trim_end_matches('/').rsplit('/').next()?;
    let rest = name.strip_prefix("jobtmp-")?;
    let (rank, id) = rest.split_once('-')?;
    (id == jobid).then(|| rank.parse().ok()).flatten()
}

/// `pid-start` of the nearest ancestor whose command is `comm` (at most 16 steps up).
fn ancestor(procs: &dyn Procs, comm: &str) -> Option<String> {
    let mut pid = procs.stat(procs.me())?.ppid;
    for _ in 0..16 {
        if pid <= 1 {
            return None;
        }
        let stat = procs.stat(pid)?;
        if stat.comm == comm {
            return Some(format!("{pid}-{}", stat.start));
        }
        pid = stat.ppid;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::{Stat, Status};
    use std::collections::HashMap;

    struct Vars(HashMap<&'static str, &'static str>);
    impl Env for Vars {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
    }

    /// 100 (binder) ← 90 (comm `sh`) ← 80 (`hydra_pmi_proxy`) ← 1; process group 70.
    struct Tree;
    impl Procs for Tree {
        fn me(&self) -> u32 {
            100
        }
        fn stat(&self, pid: u32) -> Option<Stat> {
            let (comm, ppid) = match pid {
                100 => ("binder", 90),
                90 => ("sh", 80),
                80 => ("hydra_pmi_proxy", 1),
                70 => ("bash", 1),
                _ => return None,
            };
            Some(Stat {
                comm: comm.into(),
                state: 'S',
                ppid,
                pgrp: 70,
                start: u64::from(pid) * 10,
                threads: 1,
            })
        }
        fn status(&self, _: u32) -> Option<Status> {
            None
        }
    }

    fn job(launcher: Option<Launcher>, vars: &[(&'static str, &'static str)]) -> String {
        let identity = Identity {
            launcher,
            ..Identity::given(0, 1)
        };
        job_of(&identity, &Vars(vars.iter().copied().collect()), &Tree).0
    }

    #[test]
    fn each_launcher() {
        assert_eq!(
            job(
                Some(Launcher::Slurm),
                &[("SLURM_JOB_ID", "812"), ("SLURM_STEP_ID", "3")]
            ),
            "slurm:812.3"
        );
        assert_eq!(
            job(Some(Launcher::Slurm), &[("SLURM_JOBID", "812")]),
            "slurm:812.batch"
        );
        assert_eq!(
            job(Some(Launcher::Flux), &[("FLUX_JOB_ID", "ƒABC")]),
            "flux:ƒABC"
        );
        // The scheduler allocation of each: every step of one Slurm job, a Flux instance.
        let alloc = |id: &str| JobId(id.into()).allocation();
        assert_eq!(alloc("slurm:812.3").as_deref(), Some("slurm:812."));
        assert_eq!(alloc("slurm:812.batch+77").as_deref(), Some("slurm:812."));
        assert_eq!(alloc("flux:ƒABC.0").as_deref(), Some("flux:"));
        assert_eq!(alloc("openmpi:x"), None);
        assert_eq!(alloc("pgid-12"), None);
        assert!(JobId("slurm:9.0".into()).of_scheduler("slurm:12."));
        assert!(!JobId("pid:9".into()).of_scheduler("slurm:12."));
        assert!(!JobId("flux:ƒA".into()).of_scheduler("slurm:12."));
        // Open MPI 4.1 as Debian ships it exports both; the PMIx namespace wins.
        assert_eq!(
            job(
                Some(Launcher::OpenMpi),
                &[
                    ("PMIX_NAMESPACE", "1307181057"),
                    ("OMPI_MCA_ess_base_jobid", "1307181057")
                ]
            ),
            "openmpi:1307181057"
        );
        assert_eq!(
            job(Some(Launcher::Pals), &[("PALS_APID", "7.0")]),
            "pals:7.0"
        );
        assert_eq!(
            job(Some(Launcher::Mvapich), &[("MPIRUN_ID", "4711")]),
            "mvapich2:4711"
        );
        // Hydra: the proxy above the wrapping shell.
        assert_eq!(job(Some(Launcher::Hydra), &[]), "hydra:80-800");
        // jsrun without PMIx: the batch job and the parent.
        assert_eq!(
            job(Some(Launcher::Jsrun), &[("LSB_JOBID", "55")]),
            "jsrun:55:ppid-90-900"
        );
        // No launcher: the process group.
        assert_eq!(job(None, &[]), "pgid-70-700");
    }

    #[test]
    fn file_parts_are_safe() {
        let id = JobId("openmpi:../../etc/x y".into());
        assert_eq!(id.file_part(), "openmpi_.._.._etc_x_y");
        assert_eq!(id.instance(9).0, "openmpi:../../etc/x y+9");
    }
}
