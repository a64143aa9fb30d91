//! Which local task am I (SEMANTICS §6): `--local-rank/--local-size`, else the innermost
//! launcher's environment, else rank 0 of 1. Used by `--dry-run` and launch alike.
//!
//! Every number read here is checked against [`MAX_LOCAL_SIZE`] before anything is sized
//! from it, and Slurm's and Flux's compressed lists are read arithmetically, never
//! expanded: a forged `1(x4000000000)` costs nothing.
//!
//! Launchers nest (`srun` → `mpirun`, `flux start` inside Slurm), and an inner launcher's
//! tasks inherit the outer one's variables, so the MPI launchers are asked first, then
//! Flux, then Slurm. A variable that is present but malformed is an error, never a silent
//! default: a wrong rank would put two tasks on the same cores without anyone noticing.

mod flux;
pub mod job;
mod slurm;

use std::fmt;

pub use flux::tasks_on_node_of as flux_tasks_on_node_of;
pub use slurm::tasks_on_node as slurm_tasks_on_node;

/// The most tasks binder accepts on one node (65,536): more than any node has PUs, so
/// even an oversubscribed `bind: none` job fits, while a corrupt or hostile number is
/// refused before anything is allocated from it.
pub const MAX_LOCAL_SIZE: usize = 1 << 16;

/// The launchers binder reads task identity from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// Open MPI 4 and 5 (`mpirun`, `prterun`).
    OpenMpi,
    /// MPICH's Hydra (`mpiexec.hydra`) and Intel MPI.
    Hydra,
    /// MVAPICH2 (`mpirun_rsh`).
    Mvapich,
    /// HPE Cray PALS (`aprun`/`mpiexec` on Cray EX).
    Pals,
    /// IBM Spectrum LSF `jsrun`.
    Jsrun,
    /// Flux (`flux run`).
    Flux,
    /// Slurm (`srun`).
    Slurm,
}

impl Launcher {
    /// The option that turns off the launcher's own binding, for `--verbose` hints.
    pub fn unbind_hint(self) -> &'static str {
        match self {
            Launcher::OpenMpi => "mpirun --bind-to none",
            Launcher::Hydra => "mpiexec -bind-to none",
            Launcher::Mvapich => "MV2_ENABLE_AFFINITY=0",
            Launcher::Pals => "mpiexec --cpu-bind none",
            Launcher::Jsrun => "jsrun --bind=none",
            Launcher::Flux => "flux run -o cpu-affinity=off",
            Launcher::Slurm => "srun --cpu-bind=none",
        }
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::OpenMpi => "openmpi",
            Launcher::Hydra => "hydra",
            Launcher::Mvapich => "mvapich2",
            Launcher::Pals => "pals",
            Launcher::Jsrun => "jsrun",
            Launcher::Flux => "flux",
            Launcher::Slurm => "slurm",
        })
    }
}

/// Where binder reads its task identity from; tests fake it.
pub trait Env {
    /// An environment variable, if set.
    fn var(&self, name: &str) -> Option<String>;
    /// The RFC 34 task map of a Flux job (`flux job taskmap JOBID`), or why not.
    fn flux_taskmap(&self, jobid: &str) -> Result<String, String>;
}

/// The real process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn flux_taskmap(&self, jobid: &str) -> Result<String, String> {
        let out = std::process::Command::new("flux")
            .args(["job", "taskmap", jobid])
            .output()
            .map_err(|e| format!("cannot run `flux job taskmap {jobid}`: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`flux job taskmap {jobid}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// This task's place among the tasks of its node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Local rank, from 0.
    pub rank: usize,
    /// Number of tasks on this node.
    pub size: usize,
    /// Whether the rank was given (flag or launcher) rather than defaulted to 0.
    pub rank_known: bool,
    /// The launcher whose variables were read, if any.
    pub launcher: Option<Launcher>,
    /// `NAME=value` of every variable read, for `--verbose`.
    pub vars: Vec<String>,
    /// The task's rank in the whole job, when the launcher exports it (for reports).
    pub global_rank: Option<usize>,
}

impl Identity {
    /// Local rank `rank` of `size`, given rather than read from a launcher (a dry-run's
    /// preview of each rank, a plugin that knows the rank, tests).
    pub fn given(rank: usize, size: usize) -> Identity {
        Identity {
            rank,
            size,
            rank_known: true,
            launcher: None,
            vars: Vec::new(),
            global_rank: None,
        }
    }

    /// How `--report` and `--verbose` name the task, like Open MPI's `--report-bindings`
    /// and Slurm's `--cpu-bind=verbose`: host, job-wide rank when known, local rank and
    /// launcher, e.g. `node17 rank 35 (local 3/8) [openmpi]`.
    pub fn label(&self) -> String {
        let launcher = self
            .launcher
            .map_or_else(|| "none".to_owned(), |l| l.to_string());
        let host = hostname();
        match self.global_rank {
            Some(g) => format!(
                "{host} rank {g} (local {}/{}) [{launcher}]",
                self.rank, self.size
            ),
            None => format!("{host} local rank {}/{} [{launcher}]", self.rank, self.size),
        }
    }

    /// The `--verbose` line: which task this is and where that came from.
    pub fn describe(&self) -> String {
        let from = match self.launcher {
            Some(l) => format!("{l} ({})", self.vars.join(" ")),
            None if self.rank_known => "--local-rank/--local-size".to_owned(),
            None => "no launcher and no --local-rank, so rank 0".to_owned(),
        };
        format!(
            "{}: local rank {}/{} from {from}",
            hostname(),
            self.rank,
            self.size
        )
    }
}

/// This node's host name (`uname`'s nodename, what `gethostname` returns), for report
/// lines; `?` when it is empty.
pub fn hostname() -> String {
    let name = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    if name.is_empty() {
        "?".to_owned()
    } else {
        name
    }
}

/// A launcher variable that binder cannot trust.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct IdentityError {
    /// The launcher whose variables are wrong; `None` when the flags are.
    pub launcher: Option<Launcher>,
    /// What is wrong.
    pub message: String,
}

impl IdentityError {
    fn render(&self) -> String {
        match self.launcher {
            None => format!("task identity: {}", self.message),
            Some(launcher) => format!(
                "{launcher} task identity: {}; pass --local-rank and --local-size to override",
                self.message
            ),
        }
    }
}

/// Each launcher's variable for the task's rank in the whole job.
fn global_rank_var(launcher: Launcher) -> &'static str {
    match launcher {
        Launcher::OpenMpi => "OMPI_COMM_WORLD_RANK",
        Launcher::Hydra => "PMI_RANK",
        Launcher::Mvapich => "MV2_COMM_WORLD_RANK",
        Launcher::Pals => "PALS_RANKID",
        Launcher::Jsrun => "JSM_NAMESPACE_RANK",
        Launcher::Flux => "FLUX_TASK_RANK",
        Launcher::Slurm => "SLURM_PROCID",
    }
}

/// Variables of the launchers that export both numbers, innermost first.
const PLAIN: [(Launcher, &str, &str); 5] = [
    (
        Launcher::OpenMpi,
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    (Launcher::Hydra, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    (
        Launcher::Mvapich,
        "MV2_COMM_WORLD_LOCAL_RANK",
        "MV2_COMM_WORLD_LOCAL_SIZE",
    ),
    (Launcher::Pals, "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"),
    (
        Launcher::Jsrun,
        "JSM_NAMESPACE_LOCAL_RANK",
        "JSM_NAMESPACE_LOCAL_SIZE",
    ),
];

/// Works out this task's identity. The flags win over the launcher, each on its own.
pub fn identify(
    flag_rank: Option<usize>,
    flag_size: Option<usize>,
    env: &dyn Env,
) -> Result<Identity, IdentityError> {
    let mut vars = Vec::new();
    let found = if flag_rank.is_some() && flag_size.is_some() {
        None
    } else {
        from_launcher(env, &mut vars)?
    };
    let launcher = found.map(|(l, _, _)| l);
    let rank = flag_rank.or(found.map(|(_, r, _)| r));
    let size = flag_size.or(found.map(|(_, _, s)| s)).unwrap_or(1);
    if size > MAX_LOCAL_SIZE {
        return Err(IdentityError {
            launcher: if flag_size.is_some() { None } else { launcher },
            message: format!("local size {size} is more than binder plans for one node ({MAX_LOCAL_SIZE}); run fewer tasks per node"),
        });
    }
    if size == 0 {
        return Err(IdentityError {
            launcher,
            message: "local size 0: a node runs at least one task".into(),
        });
    }
    // The job-wide rank only labels reports: a malformed one is left out, not an error.
    let global_rank = launcher
        .and_then(|l| env.var(global_rank_var(l)))
        .and_then(|v| v.trim().parse().ok());
    let identity = Identity {
        rank: rank.unwrap_or(0),
        size,
        rank_known: rank.is_some(),
        launcher,
        vars,
        global_rank,
    };
    if identity.rank >= identity.size {
        let fix = if launcher.is_none() || flag_rank.is_some() {
            "; give a --local-rank below --local-size"
        } else {
            ""
        };
        return Err(IdentityError {
            launcher: if flag_rank.is_some() { None } else { launcher },
            message: format!(
                "local rank {} is not below local size {}{fix}",
                identity.rank, identity.size
            ),
        });
    }
    Ok(identity)
}

type Found = Option<(Launcher, usize, usize)>;

/// Reads a numeric launcher variable, recording it for `--verbose`.
fn read(
    env: &dyn Env,
    vars: &mut Vec<String>,
    launcher: Launcher,
    name: &str,
) -> Result<Option<usize>, IdentityError> {
    let Some(value) = env.var(name) else {
        return Ok(None);
    };
    let shown = clip(&value);
    vars.push(format!("{name}={shown}"));
    value.trim().parse().map(Some).map_err(|_| IdentityError {
        launcher: Some(launcher),
        message: format!("{name}={shown:?} is not a whole number"),
    })
}

/// A launcher value cut to [`crate::text::QUOTE_MAX`] characters, so a forged one cannot
/// flood the message.
pub(crate) fn clip(value: &str) -> String {
    crate::text::clip(value, crate::text::QUOTE_MAX)
}

fn from_launcher(env: &dyn Env, vars: &mut Vec<String>) -> Result<Found, IdentityError> {
    for (launcher, rank_var, size_var) in PLAIN {
        if let Some(rank) = read(env, vars, launcher, rank_var)? {
            let size = read(env, vars, launcher, size_var)?.ok_or_else(|| IdentityError {
                launcher: Some(launcher),
                message: format!("{rank_var} is set but {size_var} is not"),
            })?;
            return Ok(Some((launcher, rank, size)));
        }
    }
    if let Some(rank) = read(env, vars, Launcher::Flux, "FLUX_TASK_LOCAL_ID")? {
        let size = flux::local_size(env, vars)?;
        return Ok(Some((Launcher::Flux, rank, size)));
    }
    if let Some(rank) = read(env, vars, Launcher::Slurm, "SLURM_LOCALID")? {
        let size = slurm::local_size(env, vars)?;
        return Ok(Some((Launcher::Slurm, rank, size)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Fake(HashMap<&'static str, &'static str>, Option<&'static str>);

    impl Env for Fake {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).map(|v| (*v).to_owned())
        }
        fn flux_taskmap(&self, _: &str) -> Result<String, String> {
            self.1
                .map(str::to_owned)
                .ok_or_else(|| "no flux here".into())
        }
    }

    fn env(vars: &[(&'static str, &'static str)]) -> Fake {
        Fake(vars.iter().copied().collect(), None)
    }

    fn who(
        vars: &[(&'static str, &'static str)],
    ) -> Result<(Option<Launcher>, usize, usize), String> {
        identify(None, None, &env(vars))
            .map(|i| (i.launcher, i.rank, i.size))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn outside_any_launcher() {
        let id = identify(None, None, &env(&[])).unwrap();
        assert_eq!(
            (id.rank, id.size, id.rank_known, id.launcher),
            (0, 1, false, None)
        );
    }

    #[test]
    fn each_mpi_launcher() {
        let cases = [
            (
                Launcher::OpenMpi,
                "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
            ),
            (Launcher::Hydra, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
            (
                Launcher::Mvapich,
                "MV2_COMM_WORLD_LOCAL_RANK",
                "MV2_COMM_WORLD_LOCAL_SIZE",
            ),
            (Launcher::Pals, "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"),
            (
                Launcher::Jsrun,
                "JSM_NAMESPACE_LOCAL_RANK",
                "JSM_NAMESPACE_LOCAL_SIZE",
            ),
        ];
        for (launcher, rank, size) in cases {
            assert_eq!(who(&[(rank, "2"), (size, "4")]), Ok((Some(launcher), 2, 4)));
            let e = who(&[(rank, "2")]).unwrap_err();
            assert!(
                e.contains(&format!("{rank} is set but {size} is not")),
                "{e}"
            );
            let e = who(&[(rank, "two"), (size, "4")]).unwrap_err();
            assert!(e.contains("\"two\" is not a whole number"), "{e}");
            let e = who(&[(rank, "4"), (size, "4")]).unwrap_err();
            assert!(e.contains("local rank 4 is not below local size 4"), "{e}");
        }
    }

    #[test]
    fn innermost_launcher_wins() {
        let got = who(&[
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "1"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
        ]);
        assert_eq!(got, Ok((Some(Launcher::OpenMpi), 3, 8)));
        let got = who(&[
            ("SLURM_LOCALID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "1"),
            ("FLUX_TASK_LOCAL_ID", "1"),
            ("FLUX_JOB_NNODES", "1"),
            ("FLUX_JOB_SIZE", "2"),
        ]);
        assert_eq!(got, Ok((Some(Launcher::Flux), 1, 2)));
    }

    #[test]
    fn flags_win_each_on_its_own() {
        let e = env(&[("MPI_LOCALRANKID", "1"), ("MPI_LOCALNRANKS", "4")]);
        let id = identify(Some(3), None, &e).unwrap();
        assert_eq!(
            (id.rank, id.size, id.launcher),
            (3, 4, Some(Launcher::Hydra))
        );
        let id = identify(None, Some(2), &e).unwrap();
        assert_eq!((id.rank, id.size), (1, 2));
        // Both flags: the environment is not even read, so a broken one does not matter.
        let broken = env(&[("MPI_LOCALRANKID", "x")]);
        let id = identify(Some(0), Some(1), &broken).unwrap();
        assert_eq!((id.launcher, id.vars.len()), (None, 0));
        let e = identify(Some(2), None, &env(&[])).unwrap_err().to_string();
        assert_eq!(
            e,
            "task identity: local rank 2 is not below local size 1; give a --local-rank below --local-size"
        );
    }

    #[test]
    fn slurm_compressed_forms() {
        let got = who(&[
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "3"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),5"),
        ]);
        assert_eq!(got, Ok((Some(Launcher::Slurm), 1, 5)));
        let e = who(&[
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "4"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),5"),
        ])
        .unwrap_err();
        assert!(
            e.contains("SLURM_NODEID=4 but the list has 4 node(s)"),
            "{e}"
        );
        let e = who(&[("SLURM_LOCALID", "0")]).unwrap_err();
        assert!(e.contains("SLURM_STEP_TASKS_PER_NODE is not"), "{e}");
        let e = who(&[("SLURM_LOCALID", "0"), ("SLURM_STEP_TASKS_PER_NODE", "2(x")]).unwrap_err();
        assert!(e.contains("lacks its closing"), "{e}");
        // The job-level list stands in when the step's is missing (batch step).
        let got = who(&[("SLURM_LOCALID", "0"), ("SLURM_TASKS_PER_NODE", "3")]);
        assert_eq!(got, Ok((Some(Launcher::Slurm), 0, 3)));
    }

    #[test]
    fn flux_task_map() {
        // 2 nodes × 3 tasks, then node 0 gets one more (cyclic remainder).
        let map = r#"{"version":1,"map":[[0,2,3,1],[0,1,1,1]]}"#;
        assert_eq!(flux_tasks_on_node_of(map, 0), Ok(4));
        assert_eq!(flux_tasks_on_node_of(map, 4), Ok(3));
        assert_eq!(flux_tasks_on_node_of(map, 6), Ok(4));
        assert!(flux_tasks_on_node_of(map, 7)
            .unwrap_err()
            .contains("no task 7"));
        assert!(flux_tasks_on_node_of("[]", 0).is_err());
        assert!(flux_tasks_on_node_of(r#"{"version":2,"map":[]}"#, 0).is_err());
        let fake = Fake(
            [
                ("FLUX_TASK_LOCAL_ID", "0"),
                ("FLUX_TASK_RANK", "4"),
                ("FLUX_JOB_NNODES", "2"),
                ("FLUX_JOB_SIZE", "7"),
                ("FLUX_JOB_ID", "f123"),
            ]
            .into_iter()
            .collect(),
            Some(map),
        );
        let id = identify(None, None, &fake).unwrap();
        assert_eq!(
            (id.launcher, id.rank, id.size),
            (Some(Launcher::Flux), 0, 3)
        );
        let no_flux = Fake(fake.0.clone(), None);
        let e = identify(None, None, &no_flux).unwrap_err().to_string();
        assert!(e.starts_with("flux task identity: no flux here"), "{e}");
    }

    #[test]
    fn sizes_are_capped_before_anything_is_allocated() {
        let e = identify(None, Some(usize::MAX), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "local size 18446744073709551615 is more than binder plans for one node (65536)"
            ),
            "{e}"
        );
        let e = who(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "18446744073709551615"),
        ])
        .unwrap_err();
        assert!(e.starts_with("openmpi task identity: local size"), "{e}");
        let e = who(&[
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "0"),
        ])
        .unwrap_err();
        assert!(
            e.contains("local rank 0 is not below local size 0") || e.contains("local size 0"),
            "{e}"
        );
        let e = who(&[
            ("SLURM_LOCALID", "0"),
            ("SLURM_STEP_TASKS_PER_NODE", "1(x4000000000)"),
            ("SLURM_NODEID", "5"),
        ]);
        assert_eq!(e, Ok((Some(Launcher::Slurm), 0, 1)));
        let long = "9".repeat(10_000);
        let leaked: &'static str = Box::leak(long.into_boxed_str());
        let e = who(&[("MPI_LOCALRANKID", leaked), ("MPI_LOCALNRANKS", "2")]).unwrap_err();
        assert!(e.len() < 200, "{} characters", e.len());
    }

    #[test]
    fn global_ranks_label_reports() {
        let id = identify(
            None,
            None,
            &env(&[
                ("SLURM_LOCALID", "1"),
                ("SLURM_STEP_TASKS_PER_NODE", "2(x4)"),
                ("SLURM_NODEID", "3"),
                ("SLURM_PROCID", "7"),
            ]),
        )
        .unwrap();
        assert_eq!((id.rank, id.global_rank), (1, Some(7)));
        let id = identify(
            None,
            None,
            &env(&[
                ("PMI_RANK", "x"),
                ("MPI_LOCALRANKID", "0"),
                ("MPI_LOCALNRANKS", "1"),
            ]),
        )
        .unwrap();
        assert_eq!(id.global_rank, None);
    }

    #[test]
    fn verbose_lists_what_was_read() {
        let id = identify(
            None,
            None,
            &env(&[("MPI_LOCALRANKID", "0"), ("MPI_LOCALNRANKS", "2")]),
        )
        .unwrap();
        assert_eq!(id.vars, ["MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2"]);
    }
}
