//! Which local task am I (SEMANTICS §6): `--local-rank/--local-size`, else the innermost
//! launcher's environment, else rank 0 of 1.
//!
//! Launchers nest (`srun` → `mpirun`, `flux start` inside Slurm), and an inner launcher's
//! tasks inherit the outer one's variables, so the MPI launchers are asked first, then
//! Flux, then Slurm. A variable that is present but malformed is an error, never a silent
//! default: a wrong rank would put two tasks on the same cores without anyone noticing.

use std::fmt;

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
            None => format!(
                "task identity: {}; give a --local-rank below --local-size",
                self.message
            ),
            Some(launcher) => format!(
                "{launcher} task identity: {}; pass --local-rank and --local-size to override",
                self.message
            ),
        }
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
    let identity = Identity {
        rank: rank.unwrap_or(0),
        size,
        rank_known: rank.is_some(),
        launcher,
        vars,
    };
    if identity.rank >= identity.size {
        return Err(IdentityError {
            launcher,
            message: format!(
                "local rank {} is not below local size {}",
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
    vars.push(format!("{name}={value}"));
    value.trim().parse().map(Some).map_err(|_| IdentityError {
        launcher: Some(launcher),
        message: format!("{name}={value:?} is not a whole number"),
    })
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
        let size = flux_local_size(env, vars)?;
        return Ok(Some((Launcher::Flux, rank, size)));
    }
    if let Some(rank) = read(env, vars, Launcher::Slurm, "SLURM_LOCALID")? {
        let size = slurm_local_size(env, vars)?;
        return Ok(Some((Launcher::Slurm, rank, size)));
    }
    Ok(None)
}

/// Slurm's local size: entry SLURM_NODEID of the step's compressed tasks-per-node list
/// (the job's list stands in for a batch step, which has no step list).
fn slurm_local_size(env: &dyn Env, vars: &mut Vec<String>) -> Result<usize, IdentityError> {
    let slurm_error = |message: String| IdentityError {
        launcher: Some(Launcher::Slurm),
        message,
    };
    let node = read(env, vars, Launcher::Slurm, "SLURM_NODEID")?.unwrap_or(0);
    let (name, value) = ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]
        .into_iter()
        .find_map(|name| env.var(name).map(|v| (name, v)))
        .ok_or_else(|| {
            slurm_error("SLURM_LOCALID is set but SLURM_STEP_TASKS_PER_NODE is not".into())
        })?;
    vars.push(format!("{name}={value}"));
    let per_node = slurm_tasks_per_node(&value)
        .map_err(|why| slurm_error(format!("{name}={value:?}: {why}")))?;
    per_node.get(node).copied().ok_or_else(|| {
        slurm_error(format!(
            "SLURM_NODEID={node} but {name}={value:?} lists {} node(s)",
            per_node.len()
        ))
    })
}

/// Flux exports no local size. A one-node job's local size is its size; otherwise the job's
/// RFC 34 task map (`flux job taskmap`) says how many tasks share this task's node.
fn flux_local_size(env: &dyn Env, vars: &mut Vec<String>) -> Result<usize, IdentityError> {
    let flux_error = |message: String| IdentityError {
        launcher: Some(Launcher::Flux),
        message,
    };
    let nnodes = read(env, vars, Launcher::Flux, "FLUX_JOB_NNODES")?;
    let size = read(env, vars, Launcher::Flux, "FLUX_JOB_SIZE")?;
    if let (Some(1), Some(size)) = (nnodes, size) {
        return Ok(size);
    }
    let task = read(env, vars, Launcher::Flux, "FLUX_TASK_RANK")?
        .ok_or_else(|| flux_error("FLUX_TASK_LOCAL_ID is set but FLUX_TASK_RANK is not".into()))?;
    let jobid = env
        .var("FLUX_JOB_ID")
        .ok_or_else(|| flux_error("a multi-node job without FLUX_JOB_ID".into()))?;
    let map = env.flux_taskmap(&jobid).map_err(flux_error)?;
    flux_tasks_on_node_of(&map, task).map_err(|why| flux_error(format!("task map {map:?}: {why}")))
}

/// Expands Slurm's compressed tasks-per-node list: `2(x3),1` → `[2, 2, 2, 1]`.
pub fn slurm_tasks_per_node(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in text.trim().split(',') {
        let (count, repeat) = match part.split_once("(x") {
            Some((count, rest)) => {
                let repeat = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("`{part}` lacks its closing `)`"))?;
                (count, repeat)
            }
            None => (part, "1"),
        };
        let parse = |s: &str| -> Result<usize, String> {
            s.parse()
                .map_err(|_| format!("`{part}` is not `N` or `N(xM)`"))
        };
        let (count, repeat) = (parse(count)?, parse(repeat)?);
        if count == 0 || repeat == 0 {
            return Err(format!("`{part}` has a zero"));
        }
        out.extend(std::iter::repeat_n(count, repeat));
    }
    Ok(out)
}

/// How many tasks share the node of `task` in an RFC 34 task map
/// (`{"version":1,"map":[[nodeid, nnodes, ppn, repeat], ...]}`).
pub fn flux_tasks_on_node_of(map: &str, task: usize) -> Result<usize, String> {
    #[derive(serde::Deserialize)]
    struct TaskMap {
        version: u32,
        map: Vec<[usize; 4]>,
    }
    let parsed: TaskMap =
        serde_json::from_str(map.trim()).map_err(|e| format!("not an RFC 34 task map: {e}"))?;
    if parsed.version != 1 {
        return Err(format!("task map version {} is not 1", parsed.version));
    }
    let mut per_node: Vec<usize> = Vec::new();
    let mut node_of_task = None;
    let mut next_task = 0;
    for [start, nnodes, ppn, repeat] in parsed.map {
        for _ in 0..repeat {
            for node in start..start + nnodes {
                if per_node.len() <= node {
                    per_node.resize(node + 1, 0);
                }
                per_node[node] += ppn;
                if (next_task..next_task + ppn).contains(&task) {
                    node_of_task = Some(node);
                }
                next_task += ppn;
            }
        }
    }
    let node = node_of_task.ok_or_else(|| format!("it has no task {task}"))?;
    Ok(per_node[node])
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
        assert_eq!(slurm_tasks_per_node("2(x3),1"), Ok(vec![2, 2, 2, 1]));
        assert_eq!(slurm_tasks_per_node("4"), Ok(vec![4]));
        assert_eq!(slurm_tasks_per_node("1,3(x2)"), Ok(vec![1, 3, 3]));
        for bad in ["", "2(x3", "x", "2(xa)", "0", "2(x0)", "2,,1"] {
            assert!(slurm_tasks_per_node(bad).is_err(), "{bad:?} accepted");
        }
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
        assert!(e.contains("SLURM_NODEID=4 but"), "{e}");
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
