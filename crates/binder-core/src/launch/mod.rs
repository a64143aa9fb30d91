//! Runs the task for real from its [`TaskView`]: bind ([`affinity`]), the task's
//! environment ([`env`](mod@env)), then `execvp` — no fork, so the PID, signals and exit
//! status the launcher sees are the application's. Binding through hwloc (`--verbose`,
//! `membind`) is the `binder` crate's; this is the warm path's, without hwloc.
//!
//! Every check comes before the first side effect, and any failure returns an error
//! instead of running the command: a task is never started unbound because of binder.

pub mod affinity;
pub mod env;
pub mod flow;
pub mod job;
pub mod ledgered;
pub mod line;
pub mod omp;
pub mod warm;

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;

use crate::identity::Identity;
use crate::text::emit;
use crate::view::TaskView;

/// Why the task could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// hwloc was told to describe another machine (`HWLOC_XMLFILE`, `HWLOC_SYNTHETIC`, …),
    /// so binding to its CPUs would bind to numbers of that machine, not this one.
    #[error("hwloc describes another machine than this one ({vars}), and binding needs this host's; unset it for the launch, or plan for that machine with `--dry-run --topology FILE`")]
    NotThisSystem {
        /// The `HWLOC_*` variables set, clipped.
        vars: String,
    },
    /// hwloc refused the CPU binding.
    #[error("cannot bind to cpus {cpus}: {reason}; check `taskset -p $$` and the job's cgroup (`cat /sys/fs/cgroup/cpuset.cpus.effective`)")]
    Bind {
        /// The CPUs asked for.
        cpus: String,
        /// hwloc's reason.
        reason: String,
    },
    /// A `BINDER_*` setting has a value binder does not know (the line says which and
    /// what it takes).
    #[error("{0}")]
    Setting(String),
    /// The plan gives the task GPUs Slurm did not give it (`crate::vendor::strays`).
    #[error("{0}")]
    StrayGpus(String),
    /// The open-file limit is too low to read the ledger and the kernel's view, and the
    /// hard limit keeps it there: the launch could not verify where others run.
    #[error("a launch opens up to {need} files to see where other jobs run, but the open-file limit is {limit} (`ulimit -n`; its hard limit too): raise it (`ulimit -n 1024`), or run the task without binder")]
    FileLimit {
        /// The soft limit, raised as far as the hard one allows.
        limit: u64,
        /// What a launch needs.
        need: u64,
    },
    /// The kernel applied another set than asked for.
    #[error("asked the kernel for cpus {want} but the binding reads back as {got}; something else (a cgroup or a launcher) changes affinity")]
    NotApplied {
        /// The CPUs asked for.
        want: String,
        /// What `sched_getaffinity` says now.
        got: String,
    },
    /// hwloc refused the memory binding.
    #[error("cannot bind memory to NUMA node(s) {nodes}: {reason}; drop `membind:` or check the cgroup's cpuset.mems")]
    Membind {
        /// The NUMA nodes (OS numbers).
        nodes: String,
        /// hwloc's reason.
        reason: String,
    },
    /// The command is not on `PATH` (or the path does not exist).
    #[error("command `{program}` not found; check the spelling and PATH")]
    NotFound {
        /// The program as given.
        program: String,
    },
    /// The command is a script whose `#!` interpreter does not exist.
    #[error("command `{program}` exists but its interpreter (the `#!` line) was not found; check that line")]
    NoInterpreter {
        /// The program as given.
        program: String,
    },
    /// The command exists but cannot be executed.
    #[error("cannot execute `{program}`: {reason}")]
    NotExecutable {
        /// The program as given.
        program: String,
        /// Why `execvp` failed, and what to do.
        reason: String,
    },
}

/// What the launch needs besides the plan.
pub struct Options<'a> {
    /// The command and its arguments.
    pub command: &'a [OsString],
    /// Export OpenMP's variables.
    pub openmp: bool,
    /// The memory policy to apply on the NUMA nodes of the task's CPUs, if any.
    pub membind: Option<crate::view::MemPolicy>,
    /// Print the binding line on stderr before exec.
    pub report: bool,
    /// Variables binder set in its own environment (hwloc's plugin blocklist), removed
    /// from the task's.
    pub scrub: &'a [&'static str],
    /// Explain identity and inherited bindings on stderr.
    pub verbose: bool,
    /// The affinity binder started with, when the node ledger bound the process before
    /// (OS numbers); `None`: read it now.
    pub started_on: Option<&'a [usize]>,
    /// The environment the task inherits (its OpenMP variables are read, and kept or
    /// replaced): this process's ([`process_env`]) for the executables, the job's as
    /// Slurm hands it over for the SPANK plugin.
    pub inherited: &'a dyn Fn(&str) -> Option<String>,
}

impl<'a> Options<'a> {
    /// The one constructor every front uses (#53): the view's OpenMP and memory policy,
    /// the report and verbose flags, the affinity the ledger bound the task with, the
    /// environment it inherits; no command (a plugin's task is exec'd by its launcher)
    /// and nothing to scrub, which the executables set with [`Options::running`].
    pub fn for_view(
        view: &TaskView,
        report: bool,
        verbose: bool,
        started_on: Option<&'a [usize]>,
        inherited: &'a dyn Fn(&str) -> Option<String>,
    ) -> Options<'a> {
        Options {
            command: &[],
            openmp: view.openmp,
            membind: view.membind,
            report,
            verbose,
            scrub: &[],
            started_on,
            inherited,
        }
    }

    /// The same, for an executable that execs `command` itself and keeps `scrub` (the
    /// variables it set for hwloc) from it.
    pub fn running(self, command: &'a [OsString], scrub: &'a [&'static str]) -> Options<'a> {
        Options {
            command,
            scrub,
            ..self
        }
    }
}

/// This process's environment, as [`Options::inherited`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// A launch without a topology: the kernel's `sched_setaffinity` binds (read back
/// with `sched_getaffinity`). Kept apart so that the `binder` executable's warm path, which
/// is linked without libhwloc, reaches no hwloc call (see `crate::warm`).
pub fn prepare_cached(
    view: &TaskView,
    identity: &Identity,
    options: &Options<'_>,
    stderr: &mut impl Write,
) -> Result<Vec<(String, String)>, LaunchError> {
    // The node ledger binds before it records the task (`started_on` says so).
    if view.is_bound() && view.apply && options.started_on.is_none() {
        affinity::bind_cpus_raw(&view.cpus)?;
    }
    finish(view, identity, options, stderr)
}

/// The last steps shared by both paths: the `--report` line and the task's environment.
pub fn finish(
    view: &TaskView,
    identity: &Identity,
    options: &Options<'_>,
    stderr: &mut impl Write,
) -> Result<Vec<(String, String)>, LaunchError> {
    // A task is never given a GPU Slurm did not give it (SEMANTICS §9): where the step's
    // GPUs were inferred around the task's own, the plan's must be its own.
    let planned: Vec<(&str, &str)> = view
        .gpus
        .iter()
        .map(|g| (g.vendor.as_str(), g.export.as_str()))
        .collect();
    if let Some(why) = crate::vendor::strays(&planned, options.inherited) {
        return Err(LaunchError::StrayGpus(why));
    }
    if options.report {
        emit(stderr, &format!("{} {}", identity.label(), view.binding));
    }
    let task_env = env::task_env(view, identity, options.openmp, options.inherited);
    if options.verbose {
        for note in &task_env.notes {
            emit(stderr, note);
        }
    }
    // Tasks of one job are alike: one warning per node, not one per task.
    if identity.rank == 0 {
        for warning in &task_env.warnings {
            emit(stderr, &format!("warning: {warning}"));
        }
    }
    Ok(task_env.vars)
}

/// Replaces this process with the command. std's `exec` is used rather than a raw
/// `execvp` because it also resets the signal mask and SIGPIPE (which Rust ignores), so
/// the application starts with default dispositions.
pub fn exec(command: &[OsString], env: &[(String, String)], scrub: &[&str]) -> LaunchError {
    let program = crate::text::clip(&command[0].to_string_lossy(), 160);
    let mut cmd = std::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .envs(env.iter().map(|(k, v)| (k, v)));
    // What binder did not set this time must not reach the task from an outer binder
    // (a `bind: none` task would otherwise read a stale BINDER_CPUS).
    for var in scrub {
        cmd.env_remove(var);
    }
    for stale in env::stale(env) {
        cmd.env_remove(stale);
    }
    // The user's stack limit and SIGXFSZ's default, as the task was given them.
    cmd.env_remove(crate::limits::SAVED);
    crate::limits::restore();
    let error = cmd.exec();
    match error.kind() {
        // ENOENT for a file that exists: its `#!` interpreter is missing.
        std::io::ErrorKind::NotFound if std::path::Path::new(&command[0]).is_file() => {
            LaunchError::NoInterpreter { program }
        }
        std::io::ErrorKind::NotFound => LaunchError::NotFound { program },
        _ if std::path::Path::new(&command[0]).is_dir() => LaunchError::NotExecutable {
            program,
            reason: "it is a directory".into(),
        },
        std::io::ErrorKind::PermissionDenied => LaunchError::NotExecutable {
            program,
            reason: "permission denied; make it executable (`chmod +x`) or run it through its interpreter".into(),
        },
        _ => LaunchError::NotExecutable {
            program,
            reason: error.to_string(),
        },
    }
}
