//! One task's binding inside slurmstepd, in Rust terms: no FFI here, so it is tested
//! like any library code. The flow is the `binder` executable's: the same planner
//! (`binder_host::around::HostPlanner`), the same node ledger
//! (`binder_core::launch::ledgered`), the same environment (`binder_core::launch`);
//! only identity and environment come from SPANK instead of the process.

use std::io::Write;
use std::path::Path;

pub use binder_core::launch::line::shape_path;

use binder_core::envelope::Envelope;
use binder_core::identity::{Env, Identity, Launcher};
use binder_host::around::Refusal;
use binder_host::front::{Given, Planning, TaskLaunch};

use binder_host::front::{Ask, JobShape, Kind};
pub use binder_host::front::{Decision, Request};

/// The words of `--binder` that opt a step out of the site's default: the one list every
/// front takes.
pub const OFF: [&str; 5] = binder_core::launch::line::OFF_WORDS;

/// What one step's task asks of the plugin (SEMANTICS §4.2-§4.3).
#[derive(Debug, Clone, Copy, Default)]
pub struct Step<'a> {
    /// `--binder` as given (`srun --binder=…`, or `sbatch`/`salloc --binder=…`, which
    /// Slurm hands on to the job's steps).
    pub asked: Option<&'a str>,
    /// plugstack.conf's `default=`.
    pub default: Option<&'a str>,
    /// The `--cpu-bind` the user typed (srun's `SLURM_CPU_BIND_TYPE`), `None` when none.
    pub typed: Option<&'a str>,
    /// `S_JOB_STEPID`.
    pub step: u32,
    /// The task's command (`S_JOB_ARGV[0]`).
    pub command: Option<&'a str>,
    /// Its first argument (`S_JOB_ARGV[1]`): `flux start` is a container.
    pub arg1: Option<&'a str>,
    /// `--binder-report`.
    pub report: bool,
    /// `--binder-verbose`.
    pub verbose: bool,
    /// The step runs on a pseudo-terminal (`srun --pty`, `SLURM_PTY_PORT`): an
    /// interactive shell, which is an allocation for the user's own work (SEMANTICS §4.3).
    pub pty: bool,
    /// The step is `srun --multi-prog`: `command` and `arg1` are this task's line of its
    /// file ([`crate::multiprog`]), `None` where that line could not be read.
    pub multi_prog: bool,
}

impl Step<'_> {
    /// What to do with this task ([`Ask::decide`], the one decision every front takes):
    /// - the batch script, the extern step and an allocation's interactive shell are not
    ///   tasks: nothing binds them, neither the site's default nor `sbatch --binder`
    ///   (which binds the job's steps);
    /// - a task that starts a Flux instance (`srun flux start`) is not bound by the
    ///   default either;
    /// - else as [`Ask::decide`] says: off words, the wrapper, a typed `--cpu-bind`.
    pub fn decide(&self) -> Decision {
        if self.step >= crate::ffi::SLURM_INTERACTIVE_STEP {
            return Decision::Stay;
        }
        self.with_ask(|ask| ask.decide())
    }

    /// Why binder leaves the task alone, when it asked for a report or verbose lines
    /// ([`binder_host::front::Ask::why_left`]).
    pub fn why_left(&self) -> Option<String> {
        // (The batch shell and the extern step inherit a job's options too: no line there.)
        if self.step >= crate::ffi::SLURM_INTERACTIVE_STEP {
            return None;
        }
        self.with_ask(|ask| ask.why_left())
    }

    /// `f` of this step's [`Ask`].
    fn with_ask<T>(&self, f: impl FnOnce(&Ask<'_>) -> T) -> T {
        let argv: Vec<&str> = self.command.into_iter().chain(self.arg1).collect();
        // `srun --pty bash` is an interactive step: a site default never binds it (an
        // explicit `--binder` still does).
        let kind = if self.pty {
            Kind::Container("an interactive step (srun --pty)")
        } else if self.multi_prog && self.command.is_none() {
            Kind::Container("an srun --multi-prog task whose line binder could not read")
        } else {
            Kind::of_command(&argv)
        };
        let binds = slurm_binds_too(self.typed);
        f(&Ask {
            option: "--binder",
            asked: self.asked,
            default: self.default,
            launcher_binds: self.typed.is_some_and(|t| !bind_words(t).is_empty()),
            binds_too: binds.as_deref().map(|words| ("srun --cpu-bind", words)),
            kind,
            report: self.report,
            verbose: self.verbose,
        })
    }
}

/// The step's environment as slurmstepd has it before forking the tasks
/// (`slurm_spank_user_init`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepEnv {
    /// The `--cpu-bind` the user typed (`SLURM_CPU_BIND_TYPE` as srun handed it over),
    /// `None` when none was typed or srun derived it from `--hint`, `--ntasks-per-core`
    /// or `--threads-per-core` (SEMANTICS §4.2: a derived binding is not a typed one).
    pub typed: Option<String>,
    /// The step's GPU variables (`binder_core::vendor::GPU_GRANT_VARS`), `None` where
    /// unset: Slurm rewrites them per task under `--gpus-per-task` and `--gpu-bind`, so
    /// a task's own are one task's devices, not the job's GPUs on this node.
    pub gpus: Vec<(&'static str, Option<String>)>,
}

/// The variable srun's side of the plugin sets when the step's `--cpu-bind` is the
/// enclosing step's, inherited (see [`inherited_cpu_bind`]); never reaches a task.
pub const INHERITED_CPU_BIND: &str = "BINDER_SLURM_CPU_BIND_INHERITED";

/// Whether srun's `--cpu-bind` is only the `SLURM_CPU_BIND` it inherited from the step it
/// runs in (SEMANTICS §4.3, nested steps): srun reads that variable as its `--cpu-bind`,
/// and Slurm's task plugin sets it in every task (`quiet,mask_cpu:0x3` for an implicit
/// binding), so an `srun` inside `srun --pty bash` would otherwise carry the enclosing
/// task's binding as one the user typed. `in_step`: srun runs inside a step
/// (`SLURM_STEP_ID` set); `argv`: srun's own arguments, where a typed `--cpu-bind`
/// (or an abbreviation `getopt_long` takes, `--cpu-b…`) shows.
pub fn inherited_cpu_bind(in_step: bool, cpu_bind: Option<&str>, argv: &[String]) -> bool {
    in_step
        && cpu_bind.is_some_and(|b| !b.trim().is_empty())
        && !argv
            .iter()
            .skip(1)
            .any(|a| a.starts_with("--cpu-b") || a.starts_with("--cpu_b"))
}

impl StepEnv {
    /// Reads the step's environment.
    pub fn read(get: &dyn Fn(&str) -> Option<String>) -> StepEnv {
        // The enclosing step's binding, inherited by srun, is not one the user typed.
        let kind = get("SLURM_CPU_BIND_TYPE").filter(|_| get(INHERITED_CPU_BIND).is_none());
        // srun exports SLURM_THREADS_PER_CORE for --hint=nomultithread|compute_bound|
        // memory_bound and --threads-per-core, SLURM_NTASKS_PER_CORE for
        // --ntasks-per-core and --hint=multithread, and then sets the binding to
        // `threads` or `cores` itself; a `--cpu-bind` the user typed beside them wins
        // in srun, which then exports neither.
        let derived = kind.as_deref().is_some_and(|k| {
            let words = bind_words(k);
            !words.is_empty() && words.iter().all(|w| *w == "threads" || *w == "cores")
        }) && ["SLURM_THREADS_PER_CORE", "SLURM_NTASKS_PER_CORE"]
            .iter()
            .any(|v| get(v).is_some());
        StepEnv {
            typed: kind.filter(|_| !derived),
            gpus: binder_core::vendor::GPU_GRANT_VARS
                .iter()
                .map(|&name| (name, get(name)))
                .collect(),
        }
    }

    /// The step's value of a GPU variable (`Some(None)`: unset for the step), `None` for
    /// any other name or when the step's were not read.
    pub fn gpu_var(&self, name: &str) -> Option<Option<String>> {
        self.gpus
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }
}

/// The binding words of a `SLURM_CPU_BIND_TYPE` (`quiet,cores` → `["cores"]`), without
/// the verbosity ones.
fn bind_words(kind: &str) -> Vec<&str> {
    kind.trim()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty() && *k != "quiet" && *k != "verbose")
        .collect()
}

/// Which task this is, from SPANK items (never from the environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Items {
    /// `S_TASK_ID`: the local task id.
    pub task: usize,
    /// `S_JOB_LOCAL_TASK_COUNT`.
    pub local_count: usize,
    /// `S_JOB_ID`.
    pub job: u32,
    /// `S_JOB_STEPID`.
    pub step: u32,
    /// `S_JOB_NODEID`.
    pub node: u32,
    /// `S_TASK_GLOBAL_ID`.
    pub global: Option<u32>,
}

impl Items {
    /// The task's identity, as binder's Slurm launcher reading would give it.
    pub fn identity(&self) -> Identity {
        Identity {
            rank: self.task,
            size: self.local_count,
            rank_known: true,
            launcher: Some(Launcher::Slurm),
            vars: vec![
                format!("S_TASK_ID={}", self.task),
                format!("S_JOB_LOCAL_TASK_COUNT={}", self.local_count),
                format!("S_JOB_NODEID={}", self.node),
            ],
            global_rank: self.global.map(|g| g as usize),
        }
    }
}

/// The job's environment as SPANK hands it over, with the job and step ids the node
/// ledger names the job by answered from SPANK items.
pub struct SpankEnv<'a> {
    /// The task's environment (`spank_getenv`).
    pub get: &'a dyn Fn(&str) -> Option<String>,
    /// The ids.
    pub items: Items,
}

impl Env for SpankEnv<'_> {
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "SLURM_JOB_ID" | "SLURM_JOBID" => Some(self.items.job.to_string()),
            "SLURM_STEP_ID" | "SLURM_STEPID" => Some(self.items.step.to_string()),
            _ => (self.get)(name),
        }
    }
}

/// The binding the user asked Slurm for beside binder's (`srun --cpu-bind=…` other than
/// `none`, as srun handed it over: `typed`), its words joined: two bindings of one task,
/// one of which would silently lose, which [`Ask::decide`] refuses as every front does.
/// Slurm's implicit binding (task/affinity binding each task by itself, or rewriting
/// `none` to `mask_cpu` on a step that does not own the node) is not the user's: binder's
/// replaces it, inside the step's CPUs (SEMANTICS §4.1).
pub fn slurm_binds_too(typed: Option<&str>) -> Option<String> {
    let words = bind_words(typed?);
    if words.is_empty() || words.iter().all(|k| *k == "none") {
        return None;
    }
    Some(words.join(","))
}

/// Plans, claims and binds this process (the task, before exec) as `request` asks, through
/// the front module's one plugin launch; the variables to set in the task's environment.
/// `err` gets `--binder-report` and `--binder-verbose` lines and warnings.
pub fn bind(
    request: &Request,
    path: &Path,
    items: Items,
    get: &dyn Fn(&str) -> Option<String>,
    err: &mut impl Write,
) -> Result<Vec<(String, String)>, Refusal> {
    let identity = items.identity();
    let envelope = Envelope::here(&identity, get);
    let request = Request {
        given: cpus_per_task(get),
        ..request.clone()
    };
    let planning = Planning::new(JobShape::at(path, get)?, envelope, &request, get);
    if request.verbose {
        binder_core::text::emit(err, &planning.spec.envelope().describe());
    }
    let task = TaskLaunch {
        planning: &planning,
        identity: &identity,
        request: &request,
        get,
        whose: "slurmstepd's",
        planned: None,
        unbound: None,
    };
    binder_host::front::launch(&task, &SpankEnv { get, items }, err)
}

/// The CPUs Slurm gave each task (`srun -c N`: `SLURM_CPUS_PER_TASK`), which a site's
/// default never narrows.
fn cpus_per_task(get: &dyn Fn(&str) -> Option<String>) -> Option<Given> {
    let cpus = get("SLURM_CPUS_PER_TASK")?.trim().parse().ok()?;
    (cpus > 1).then_some(Given {
        cpus,
        from: "SLURM_CPUS_PER_TASK",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// `srun -c 2` gives each task two CPUs, which a default never narrows; `-c 1` (or
    /// none, or a value Slurm never writes) gives nothing to keep.
    #[test]
    fn slurms_cpus_per_task() {
        let env =
            |v: &'static str| move |k: &str| (k == "SLURM_CPUS_PER_TASK").then(|| v.to_owned());
        assert_eq!(cpus_per_task(&env("2")).map(|g| g.cpus), Some(2));
        assert_eq!(cpus_per_task(&env("1")), None);
        assert_eq!(cpus_per_task(&env("two")), None);
        assert_eq!(cpus_per_task(&|_| None), None);
    }

    #[test]
    fn names_and_paths() {
        let catalog = Path::new("/usr/share/binder/shapes");
        assert_eq!(
            shape_path("cores-packed", Some("/home/u"), catalog),
            catalog.join("cores-packed.yaml")
        );
        assert_eq!(
            shape_path("shapes/x.yaml", Some("/home/u"), catalog),
            PathBuf::from("/home/u/shapes/x.yaml")
        );
        assert_eq!(
            shape_path("/etc/s.yaml", Some("/home/u"), catalog),
            PathBuf::from("/etc/s.yaml")
        );
        assert_eq!(shape_path("x.yml", None, catalog), PathBuf::from("x.yml"));
    }

    #[test]
    fn only_a_typed_cpu_bind_conflicts() {
        assert!(slurm_binds_too(None).is_none());
        assert!(slurm_binds_too(Some("none")).is_none());
        assert!(slurm_binds_too(Some("quiet,none,")).is_none());
        assert!(slurm_binds_too(Some("verbose")).is_none());
        assert_eq!(
            slurm_binds_too(Some("quiet,mask_cpu:")).as_deref(),
            Some("mask_cpu:")
        );
        let Decision::Refuse(line) = decide(Some("x.yaml"), Some("quiet,mask_cpu:"), 0, "./app")
        else {
            panic!("--binder beside --cpu-bind=mask_cpu: is refused");
        };
        assert!(
            line.starts_with("srun --cpu-bind=mask_cpu: and --binder both bind"),
            "{line}"
        );
        assert!(slurm_binds_too(Some("cores")).is_some());
    }

    fn decide(asked: Option<&str>, typed: Option<&str>, step: u32, command: &str) -> Decision {
        Step {
            asked,
            default: Some("cores-packed"),
            typed,
            step,
            command: Some(command),
            ..Step::default()
        }
        .decide()
    }

    fn bound(d: Decision) -> Option<(String, bool)> {
        match d {
            Decision::Bind(r) => Some((r.shape, r.site_default)),
            _ => None,
        }
    }

    #[test]
    fn a_site_default_yields_to_a_typed_binding() {
        // --binder wins whatever the site says; beside a typed binding it is refused.
        let asked = decide(Some("x.yaml"), None, 0, "./app");
        assert_eq!(bound(asked), Some(("x.yaml".into(), false)));
        let both = decide(Some("x.yaml"), Some("cores"), 0, "./app");
        assert!(matches!(both, Decision::Refuse(_)), "{both:?}");
        let none = decide(Some("x.yaml"), Some("none"), 0, "./app");
        assert_eq!(bound(none), Some(("x.yaml".into(), false)));
        // The default only where the user typed no binding of their own.
        let plain = |typed| bound(decide(None, typed, 0, "./app"));
        assert_eq!(plain(None), Some(("cores-packed".into(), true)));
        assert_eq!(plain(Some("quiet")), Some(("cores-packed".into(), true)));
        assert_eq!(plain(Some("cores")), None);
        assert_eq!(plain(Some("none")), None);
        let nothing = Step {
            step: 0,
            ..Step::default()
        };
        assert_eq!(nothing.decide(), Decision::Stay);
    }

    #[test]
    fn derived_bindings_are_not_typed() {
        let read = |vars: &[(&str, &str)]| {
            let get = |k: &str| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            };
            StepEnv::read(&get).typed
        };
        // What srun exports for --hint=nomultithread, --ntasks-per-core=1,
        // --threads-per-core=1 and --hint=multithread (seen on Slurm 22.05).
        for derived in [
            [
                ("SLURM_CPU_BIND_TYPE", "threads"),
                ("SLURM_THREADS_PER_CORE", "1"),
            ],
            [
                ("SLURM_CPU_BIND_TYPE", "cores"),
                ("SLURM_NTASKS_PER_CORE", "1"),
            ],
            [
                ("SLURM_CPU_BIND_TYPE", "cores"),
                ("SLURM_THREADS_PER_CORE", "1"),
            ],
            [
                ("SLURM_CPU_BIND_TYPE", "threads"),
                ("SLURM_NTASKS_PER_CORE", "65535"),
            ],
        ] {
            assert_eq!(read(&derived), None, "{derived:?}");
        }
        // Typed: srun exports no hint variable beside it, or the words are not a hint's.
        assert_eq!(
            read(&[("SLURM_CPU_BIND_TYPE", "cores")]).as_deref(),
            Some("cores")
        );
        assert_eq!(
            read(&[
                ("SLURM_CPU_BIND_TYPE", "map_cpu:"),
                ("SLURM_THREADS_PER_CORE", "1")
            ])
            .as_deref(),
            Some("map_cpu:")
        );
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn an_inherited_cpu_bind_is_not_typed() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let plain = argv(&["srun", "--overlap", "-n2", "--binder=x", "app"]);
        // srun inside a step, SLURM_CPU_BIND inherited from its task: not typed.
        assert!(inherited_cpu_bind(true, Some("quiet,mask_cpu:0x3"), &plain));
        // Typed (or abbreviated), outside a step, or nothing inherited: as srun says.
        for typed in ["--cpu-bind=none", "--cpu_bind=cores", "--cpu-b=none"] {
            let mut a = plain.clone();
            a.insert(1, typed.to_owned());
            assert!(
                !inherited_cpu_bind(true, Some("quiet,mask_cpu:0x3"), &a),
                "{typed}"
            );
        }
        assert!(!inherited_cpu_bind(
            false,
            Some("quiet,mask_cpu:0x3"),
            &plain
        ));
        assert!(!inherited_cpu_bind(true, None, &plain));
        // The step's environment then reads as untyped.
        let get = |k: &str| match k {
            "SLURM_CPU_BIND_TYPE" => Some("mask_cpu:".to_owned()),
            INHERITED_CPU_BIND => Some("1".to_owned()),
            _ => None,
        };
        assert_eq!(StepEnv::read(&get).typed, None);
    }

    #[test]
    fn the_step_gpus_answer_for_every_task() {
        let get = |k: &str| match k {
            "SLURM_STEP_GPUS" | "CUDA_VISIBLE_DEVICES" => Some("0,1".to_owned()),
            _ => None,
        };
        let step = StepEnv::read(&get);
        assert_eq!(
            step.gpu_var("CUDA_VISIBLE_DEVICES"),
            Some(Some("0,1".into()))
        );
        assert_eq!(step.gpu_var("ROCR_VISIBLE_DEVICES"), Some(None));
        assert_eq!(step.gpu_var("PATH"), None);
        assert_eq!(StepEnv::default().gpu_var("CUDA_VISIBLE_DEVICES"), None);
    }

    #[test]
    fn batch_extern_and_interactive_steps_are_not_tasks() {
        use crate::ffi::*;
        for step in [
            SLURM_BATCH_SCRIPT,
            SLURM_EXTERN_CONT,
            SLURM_INTERACTIVE_STEP,
            SLURM_PENDING_STEP,
        ] {
            // Neither the site's default nor `sbatch --binder` binds them.
            assert_eq!(decide(None, None, step, "/bin/bash"), Decision::Stay);
            assert_eq!(decide(Some("x"), None, step, "/bin/bash"), Decision::Stay);
        }
        // A job's steps are.
        assert!(bound(decide(Some("x"), None, 0, "./app")).is_some());
        assert!(bound(decide(None, None, 12, "./app")).is_some());
    }

    #[test]
    fn off_opts_out_of_the_default() {
        for off in OFF {
            assert_eq!(decide(Some(off), None, 0, "./app"), Decision::Stay);
        }
    }

    #[test]
    fn the_wrapper_binds_its_own_task() {
        // The site's default stays out of the README's wrapper line.
        for wrapper in [
            "binder",
            "/usr/local/bin/binder",
            "target/release/binder-full",
        ] {
            assert_eq!(decide(None, None, 0, wrapper), Decision::Stay);
            // Two explicit requests: one line naming both.
            match decide(Some("one.yaml"), None, 0, wrapper) {
                Decision::Refuse(line) => {
                    assert!(line.contains("--binder=one.yaml"), "{line}");
                    assert!(line.contains(wrapper), "{line}");
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(bound(decide(None, None, 0, "/opt/binderx")).is_some());
    }

    #[test]
    fn a_multi_prog_task_is_its_own_line() {
        // Each context of `srun --multi-prog` as its line says (#63); a line the plugin
        // could not read is a container the default stays out of.
        let text = "0 binder a.yaml -- ./ocean\n1-3 ./atmos\n";
        let of = |rank| {
            let argv = crate::multiprog::command(text, rank);
            let argv = argv.unwrap_or_default();
            Step {
                default: Some("cores-packed"),
                command: argv.first().map(String::as_str),
                arg1: argv.get(1).map(String::as_str),
                multi_prog: true,
                ..Step::default()
            }
            .decide()
        };
        assert_eq!(of(0), Decision::Stay, "the wrapper's context");
        assert_eq!(bound(of(2)), Some(("cores-packed".into(), true)));
        assert_eq!(of(4), Decision::Stay, "no line for rank 4");
    }

    #[test]
    fn ids_come_from_items_not_the_environment() {
        let items = Items {
            task: 1,
            local_count: 2,
            job: 7,
            step: 3,
            node: 0,
            global: Some(5),
        };
        let get = |k: &str| (k == "SLURM_JOB_ID").then(|| "999".to_owned());
        let env = SpankEnv { get: &get, items };
        assert_eq!(env.var("SLURM_JOB_ID").as_deref(), Some("7"));
        assert_eq!(env.var("SLURM_STEP_ID").as_deref(), Some("3"));
        let id = items.identity();
        assert_eq!((id.rank, id.size, id.global_rank), (1, 2, Some(5)));
    }
}
