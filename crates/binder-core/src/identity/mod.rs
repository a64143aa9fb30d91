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
pub mod launchers;
mod slurm;

use std::fmt;

pub(crate) use launchers::SizeFrom;
pub use launchers::{LauncherRow, JOB_VARS, LAUNCHERS, LOCAL_VARS, MARK_VARS};

/// The most tasks binder accepts on one node (65,536): more than any node has PUs, so
/// even an oversubscribed `bind: none` job fits, while a corrupt or hostile number is
/// refused before anything is allocated from it.
pub const MAX_LOCAL_SIZE: usize = 1 << 16;

/// The launchers binder reads task identity from; each one's facts are its row of
/// [`LAUNCHERS`], in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// torchrun / torch elastic (`torchrun`, `python -m torch.distributed.run`).
    Torchrun,
    /// DeepSpeed's launcher (`deepspeed`).
    Deepspeed,
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
    /// The option that turns off the launcher's own binding, for `--verbose` hints;
    /// `None` for Flux and Slurm, whose binding is how they say what the job owns on the
    /// node (SEMANTICS §4.1): binder binds inside it, so it stays on.
    pub fn unbind_hint(self) -> Option<&'static str> {
        self.row().unbind
    }
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.row().name)
    }
}

/// Where binder reads its task identity from; tests fake it.
pub trait Env {
    /// An environment variable, if set.
    fn var(&self, name: &str) -> Option<String>;
    /// The RFC 34 task map of a Flux job (`flux job taskmap JOBID`), or why not. Only a
    /// launch under `flux run` on several nodes asks; an environment with no Flux to ask
    /// keeps this default.
    fn flux_taskmap(&self, _jobid: &str) -> Result<String, String> {
        Err("no Flux to ask for the job's task map here".into())
    }
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
        // One format for every front (#63: the wrapper's and the plugins' differed): the
        // job-wide rank where the launcher says it, else the node's (a job of one node).
        let global = self.global_rank.unwrap_or(self.rank);
        format!(
            "{host} rank {global} (local {}/{}) [{launcher}]",
            self.rank, self.size
        )
    }

    /// The `--verbose` line: which task this is and where that came from.
    pub fn describe(&self) -> String {
        let from = match self.launcher {
            Some(l) if self.vars.is_empty() => format!("--local-rank/--local-size (under {l})"),
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

/// Works out this task's identity. The flags win over the launcher, each on its own.
pub fn identify(
    flag_rank: Option<usize>,
    flag_size: Option<usize>,
    env: &dyn Env,
) -> Result<Identity, IdentityError> {
    let mut vars = Vec::new();
    let both = flag_rank.is_some() && flag_size.is_some();
    let found = if both {
        None
    } else {
        from_launcher(env, &mut vars)?
    };
    // With both flags no launcher number is read (a wrapper that sets ranks wins, and a
    // broken variable cannot stop it), but the launcher is still named: its job id keeps
    // the tasks one job in the ledger (Flux gives each task its own process group), and
    // its daemon says the job's allocation (SEMANTICS §4.1).
    let launcher = if both {
        present(env)
    } else {
        found.map(|(l, _, _)| l)
    };
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
        .and_then(|l| env.var(l.row().global_rank))
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

/// The innermost launcher whose local-rank variable is set, whatever its value.
fn present(env: &dyn Env) -> Option<Launcher> {
    LAUNCHERS
        .iter()
        .find(|row| env.var(row.local_rank).is_some() && marked(env, row))
        .map(|row| row.launcher)
}

/// Whether the launcher's own mark is set, where its row needs one.
fn marked(env: &dyn Env, row: &LauncherRow) -> bool {
    row.requires.is_none_or(|m| env.var(m).is_some())
}

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
    for row in LAUNCHERS.iter().filter(|row| marked(env, row)) {
        let launcher = row.launcher;
        let Some(rank) = read(env, vars, launcher, row.local_rank)? else {
            continue;
        };
        let size = match row.size_from {
            SizeFrom::Var => {
                let size_var = row.local_size[0];
                read(env, vars, launcher, size_var)?.ok_or_else(|| IdentityError {
                    launcher: Some(launcher),
                    message: format!("{} is set but {size_var} is not", row.local_rank),
                })?
            }
            SizeFrom::Flux => flux::local_size(env, vars)?,
            SizeFrom::Slurm => slurm::local_size(env, vars)?,
        };
        return Ok(Some((launcher, rank, size)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
