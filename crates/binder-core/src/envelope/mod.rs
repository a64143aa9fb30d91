//! The job's allocation on this node, the *envelope* (SEMANTICS §4.1): the CPUs the
//! launcher gave the job here, which binder's pool is drawn from and never leaves. The
//! planner intersects it with hwloc's allowed set (the cgroup), so this module only says
//! what the launcher says, without hwloc.
//!
//! Where each launcher says it, in the order they are asked (the daemons are each launcher's row of `identity::LAUNCHERS`):
//!
//! | launcher | the job's CPUs on this node |
//! |---|---|
//! | Slurm with task/affinity | the union of the step's task masks (`SLURM_CPU_BIND_LIST`, `mask_cpu`/`map_cpu`), which slurmd computes from the step's CPUs whether the binding is implicit, explicit or a rewritten `--cpu-bind=none` |
//! | Slurm otherwise | the allowed set (the step's cgroup with `ConstrainCores=yes`) |
//! | Flux | the job shell's binding: with `cpu-affinity` on (the default) or `per-task` the shell binds *itself* to the job's cores on this node (R), whatever it gives each task; a shell bound as its broker (`cpu-affinity=off`, or a job owning the instance) is asked R's cores here (`flux job info`, [`flux`]) |
//! | Open MPI, Hydra, MVAPICH2, PALS, jsrun | the launcher daemon's binding (`orted`/`prted`/`mpirun`, `hydra_pmi_proxy`, …): the daemon runs in the job's allocation and binds only the ranks it forks |
//! | none | this process's own affinity (`taskset -c 2,3 binder …`) |
//!
//! A launcher's daemon is found among this process's ancestors by its command name, so a
//! wrapper script between it and binder changes nothing; when none is found the
//! allowed set stands. Reading another process's affinity is `sched_getaffinity(pid)`,
//! one system call: the warm path stays cheap.

use crate::cpulist::cpu_list;
use crate::identity::{Identity, Launcher};
use crate::procfs::Procs;

pub mod flux;

/// Where the envelope came from, for `--verbose` and the docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// hwloc's allowed set alone: the launcher says nothing narrower (or the cgroup is
    /// how it says it).
    Allowed,
    /// A launcher daemon's binding: its command name and PID.
    Daemon {
        /// `comm` of the daemon.
        name: String,
        /// Its PID.
        pid: u32,
    },
    /// Slurm task/affinity's masks of the step's tasks on this node.
    SlurmMasks,
    /// This process's own affinity (no launcher).
    Inherited,
    /// This process's own affinity: the launcher's daemon is not among its ancestors.
    Orphan,
    /// Given by a plugin that knows the allocation (Flux's R, the SPANK step's cores).
    Given(String),
}

/// The job's CPUs on this node, as the launcher says them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The CPUs (OS numbers, ascending); `None`: the allowed set (or `cores`).
    pub cpus: Option<Vec<usize>>,
    /// Or the cores, by hwloc's logical index, as a launcher that counts cores names them
    /// (Flux's R): the planner resolves them with the topology it loads anyway, so a
    /// launch from the node cache needs no hwloc for them.
    pub cores: Option<Cores>,
    /// Where they came from.
    pub source: Source,
}

/// Cores a launcher names by logical index in its own numbering (SEMANTICS §4.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cores {
    /// The indexes.
    pub indexes: Vec<usize>,
    /// The CPUs (OS numbers) of the instance whose topology numbers them, when it does
    /// not own the whole node: a Flux instance started on part of the node (`flux alloc`,
    /// `flux batch`, `taskset -c 1 flux start`) restricts its topology to its broker's
    /// binding, so its core 0 is the first node core with a CPU in that set. `None`: the
    /// node's own numbering.
    pub instance: Option<Vec<usize>>,
}

/// How far up the process tree a daemon is looked for.
const MAX_DEPTH: usize = 16;

impl Envelope {
    /// The allowed set alone.
    pub fn allowed() -> Envelope {
        Envelope {
            cpus: None,
            cores: None,
            source: Source::Allowed,
        }
    }

    /// `cpus`, which `source` says.
    fn of(cpus: Vec<usize>, source: Source) -> Envelope {
        Envelope {
            cpus: Some(cpus),
            cores: None,
            source,
        }
    }

    /// CPUs a plugin knows the job owns (`what` says how it knows).
    pub fn given(cpus: Vec<usize>, what: &str) -> Envelope {
        Envelope::of(cpus, Source::Given(what.to_owned()))
    }

    /// Cores (hwloc logical indexes, in the numbering of an instance that owns
    /// `instance`, or the node's) a plugin knows the job owns.
    pub fn given_cores(cores: Vec<usize>, instance: Option<Vec<usize>>, what: &str) -> Envelope {
        Envelope {
            cpus: None,
            cores: Some(Cores {
                indexes: cores,
                instance,
            }),
            source: Source::Given(what.to_owned()),
        }
    }

    /// Learns the envelope of `identity`'s job from its launcher; `affinity` reads a
    /// process's affinity (`None`: this process's), as [`crate::procfs::affinity`];
    /// `ask` runs `flux` (Flux's R, where the job shell's binding does not say: [`flux`]).
    pub fn learn(
        identity: &Identity,
        env: &dyn Fn(&str) -> Option<String>,
        procs: &dyn Procs,
        affinity: &dyn Fn(Option<u32>) -> Option<Vec<usize>>,
        ask: flux::Ask<'_>,
    ) -> Envelope {
        let Some(launcher) = identity.launcher else {
            return match affinity(None) {
                Some(cpus) if !cpus.is_empty() => Envelope::of(cpus, Source::Inherited),
                _ => Envelope::allowed(),
            };
        };
        if launcher == Launcher::Slurm {
            if let Some(cpus) = slurm_masks(env) {
                return Envelope::of(cpus, Source::SlurmMasks);
            }
            // The step's cgroup (ConstrainCores=yes) is the allowed set already.
            return Envelope::allowed();
        }
        match daemon(procs, launcher.row().daemons) {
            Some((name, pid)) => match affinity(Some(pid)) {
                // `-o cpu-affinity=off`: the shell kept its broker's binding (module flux).
                Some(cpus) if launcher == Launcher::Flux && !cpus.is_empty() => {
                    match flux::unbound_shell(env, procs, affinity, pid, &cpus, ask) {
                        Some(cores) => Envelope::given_cores(
                            cores,
                            Some(cpus),
                            "Flux's R for this node (the job shell is not bound to the job's cores: `-o cpu-affinity=off`)",
                        ),
                        None => Envelope::of(cpus, Source::Daemon { name, pid }),
                    }
                }
                Some(cpus) if !cpus.is_empty() => Envelope::of(cpus, Source::Daemon { name, pid }),
                _ => Envelope::allowed(),
            },
            // The launcher's daemon is not among this task's ancestors because its parent
            // exited (`(binder … &)`: an orphan, adopted by init or a subreaper). What it
            // inherited is still the allocation; the node's allowed set never is
            // (SEMANTICS §4.2: orphans never widen). A task whose parent is alive but no
            // known daemon (a launcher binder does not know) keeps the allowed set: its
            // launcher may have bound it narrower than the job.
            None if !launcher.row().daemons.is_empty() && orphan(procs) => match affinity(None) {
                Some(cpus) if !cpus.is_empty() => Envelope::of(cpus, Source::Orphan),
                _ => Envelope::allowed(),
            },
            None => Envelope::allowed(),
        }
    }

    /// [`Envelope::learn`] for this process, from `/proc` and the kernel.
    pub fn here(identity: &Identity, env: &dyn Fn(&str) -> Option<String>) -> Envelope {
        Envelope::learn(
            identity,
            env,
            &crate::procfs::Real,
            &crate::procfs::affinity,
            &flux::ask_flux,
        )
    }

    /// The part of the plan's key that the envelope decides: tasks of one job see one
    /// envelope, and a plan made in another never matches.
    pub fn key(&self) -> String {
        match (&self.cpus, &self.cores) {
            (Some(cpus), _) => format!("\n#envelope:{}", cpu_list(cpus)),
            (None, Some(cores)) => match &cores.instance {
                Some(within) => format!(
                    "\n#envelope-cores:{}@{}",
                    cpu_list(&cores.indexes),
                    cpu_list(within)
                ),
                None => format!("\n#envelope-cores:{}", cpu_list(&cores.indexes)),
            },
            (None, None) => String::new(),
        }
    }

    /// The `--verbose` line: which CPUs, from where.
    pub fn describe(&self) -> String {
        let cpus = match (&self.cpus, &self.cores) {
            (Some(c), _) => format!("cpus {}", cpu_list(c)),
            (None, Some(c)) => match &c.instance {
                Some(within) => format!(
                    "cores {} (logical indexes of the instance on cpus {})",
                    cpu_list(&c.indexes),
                    cpu_list(within)
                ),
                None => format!("cores {} (hwloc's logical indexes)", cpu_list(&c.indexes)),
            },
            (None, None) => "the allowed set".to_owned(),
        };
        let from = match &self.source {
            Source::Allowed => {
                "hwloc's allowed set (the cgroup); the launcher says nothing narrower".to_owned()
            }
            Source::Daemon { name, pid } => {
                format!(
                    "the binding of the launcher's daemon {} (pid {pid})",
                    crate::text::printable(name, 16)
                )
            }
            Source::SlurmMasks => {
                "Slurm's masks of the step's tasks (SLURM_CPU_BIND_LIST)".to_owned()
            }
            Source::Inherited => "the affinity binder started with (no launcher)".to_owned(),
            Source::Orphan => "the affinity binder started with (its parent exited, so the launcher's daemon is not among its ancestors)".to_owned(),
            Source::Given(what) => what.clone(),
        };
        format!("job's allocation here: {cpus}, from {from}; binder binds inside it")
    }
}

/// What adopts an orphaned process: init, and the subreapers HPC nodes run (systemd's
/// user managers, a Flux broker, container inits).
const ADOPTERS: [&str; 6] = [
    "systemd",
    "init",
    "flux-broker",
    "tini",
    "dumb-init",
    "catatonit",
];

/// Whether this process was orphaned: its parent is PID 1 or one of [`ADOPTERS`].
fn orphan(procs: &dyn Procs) -> bool {
    let Some(ppid) = procs.stat(procs.me()).map(|s| s.ppid) else {
        return false;
    };
    ppid == 1
        || procs.stat(ppid).is_some_and(|p| {
            ADOPTERS.contains(&p.comm.as_str()) || p.comm.starts_with("flux-broker")
        })
}

/// The nearest ancestor whose command is one of `names`: its name and PID.
fn daemon(procs: &dyn Procs, names: &[&str]) -> Option<(String, u32)> {
    if names.is_empty() {
        return None;
    }
    let mut pid = procs.stat(procs.me())?.ppid;
    for _ in 0..MAX_DEPTH {
        if pid <= 1 {
            return None;
        }
        let stat = procs.stat(pid)?;
        if names.contains(&stat.comm.as_str()) {
            return Some((stat.comm, pid));
        }
        pid = stat.ppid;
    }
    None
}

/// The union of Slurm's per-task CPU masks on this node, when task/affinity (or the user)
/// bound the step with `mask_cpu` or `map_cpu` (`SLURM_CPU_BIND_TYPE`,
/// `SLURM_CPU_BIND_LIST`: `0x1,0x2` or `0,1`).
pub(crate) fn slurm_masks(env: &dyn Fn(&str) -> Option<String>) -> Option<Vec<usize>> {
    let kind = env("SLURM_CPU_BIND_TYPE")?;
    let list = env("SLURM_CPU_BIND_LIST")?;
    if list.len() > 1 << 16 {
        return None;
    }
    let mut cpus = std::collections::BTreeSet::new();
    if kind.contains("mask_cpu") {
        for mask in list.split(',') {
            cpus.extend(crate::cpulist::parse_hex_mask(mask, 4096)?);
        }
    } else if kind.contains("map_cpu") {
        for cpu in list.split(',') {
            let cpu: usize = cpu.trim().parse().ok()?;
            if cpu >= crate::identity::MAX_LOCAL_SIZE {
                return None;
            }
            cpus.insert(cpu);
        }
    } else {
        return None;
    }
    (!cpus.is_empty()).then(|| cpus.into_iter().collect())
}

#[cfg(test)]
mod tests;
