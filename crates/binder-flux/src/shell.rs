//! One job shell's binding in plain Rust terms (no FFI here, so it is tested like any
//! library code). The shell knows for free what the `binder` wrapper must ask for: this
//! node's task count, the job's cores and GPUs here (R, the shell's rank info) and each
//! task's rank. So:
//!
//! * `shell.init` ([`Shell::prepare`]): the envelope from R's cores on this node, then the
//!   node's plan for the shell's tasks (from the node cache, or planned with hwloc), kept
//!   for the tasks;
//! * `task.init` ([`Shell::task_env`], in the shell): the task's variables, set on its
//!   command (a task's environment is fixed when it is forked);
//! * `task.exec` ([`Shell::bind`], in the task's process before exec): the one launch flow
//!   (`binder_core::launch::flow`) with this task's PID: the ledger's join or claim, the
//!   binding. A view the ledger moved after the variables were set is refused rather than
//!   run with variables that lie.

use std::collections::BTreeMap;
use std::io::Write;

use binder_core::envelope::Envelope;
use binder_core::identity::{Env, Identity, Launcher};
use binder_core::launch::ledgered::Planned;
use binder_host::around::Refusal;
use binder_host::front::{Given, JobShape, Kind, Planning, TaskLaunch};

/// The catalog a name without `/` or `.yaml` is looked up in, unless the plugin's
/// configuration names another (the one path every front uses).
pub const CATALOG: &str = binder_core::launch::line::CATALOG;

/// The plugin's configuration (`plugin.load { file = …, conf = { default = "…",
/// catalog = "…" } }`) and what the job asked for: the front module's types.
pub use binder_host::front::{Request, Site};

/// The plugin's configuration from its JSON (`None` or `{}`: no default, the usual
/// catalog); `Err` is the one line that names what is wrong.
pub fn site(json: Option<&str>) -> Result<Site, String> {
    match json.map(str::trim).filter(|j| !j.is_empty()) {
        None => Ok(Site::default()),
        Some(json) => serde_json::from_str(json).map_err(|e| {
            format!("binder's plugin configuration: {e}; it takes default=SHAPE and catalog=DIR")
        }),
    }
}

/// The job's command (`jobspec.tasks[0].command`) from the shell's info JSON
/// (`flux_shell_get_info`), empty when it says none.
pub fn command_of(info: &str) -> Vec<String> {
    let info: serde_json::Value = serde_json::from_str(info).unwrap_or_default();
    info.pointer("/jobspec/tasks/0/command")
        .and_then(serde_json::Value::as_array)
        .map(|argv| {
            argv.iter()
                .take(2)
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The cores each task slot of the job asks for (`flux run -c N`: the jobspec's `core`
/// count inside its `slot`, RFC 25), from the shell's info JSON; `None` where it says
/// none or a range.
pub fn cores_per_slot(info: &str) -> Option<usize> {
    fn slot_cores(resources: &serde_json::Value) -> Option<u64> {
        resources.as_array()?.iter().find_map(|r| {
            let with = r.get("with")?;
            if r.get("type")?.as_str()? != "slot" {
                return slot_cores(with);
            }
            with.as_array()?.iter().find_map(|c| {
                (c.get("type")?.as_str()? == "core").then(|| c.get("count")?.as_u64())?
            })
        })
    }
    let info: serde_json::Value = serde_json::from_str(info).ok()?;
    usize::try_from(slot_cores(info.pointer("/jobspec/resources")?)?).ok()
}

/// What Flux gave each task of the job on `node`, in CPUs: `cores` per slot, at the
/// hardware threads per core of the job's cores here (a one-core default on an SMT node
/// gives a task of `-c 2` half its CPUs). `None` for one core, which any binding keeps.
pub fn given(node: &Node, cores: Option<usize>) -> Option<Given> {
    let cores = cores.filter(|&c| c > 1)?;
    let per_core = match job_cpus(node) {
        Ok(cpus) if !node.cores.is_empty() => (cpus.len() / node.cores.len()).max(1),
        _ => 1,
    };
    Some(Given {
        cpus: cores * per_core,
        from: "flux run -c, the jobspec's cores per slot",
    })
}

/// An RFC 22 idset (`0-3,5`), at most [`binder_core::identity::MAX_LOCAL_SIZE`] members.
pub fn idset(text: &str) -> Option<Vec<usize>> {
    let text = text.trim();
    if text.is_empty() {
        return Some(Vec::new());
    }
    binder_core::procfs::parse_list_max(text, binder_core::identity::MAX_LOCAL_SIZE)
}

/// What the shell says of itself and this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The job id as Flux prints it (F58), from the job's environment.
    pub jobid: String,
    /// This shell's rank (the node's index in the job).
    pub shell_rank: u32,
    /// How many of the job's tasks run here.
    pub ntasks: usize,
    /// R's cores here: hwloc's logical core indexes.
    pub cores: Vec<usize>,
    /// R's GPUs here: their indexes among the node's GPUs.
    pub gpus: Vec<usize>,
    /// The CPUs of the Flux instance this job runs in (the shell's affinity, which is its
    /// broker's: `flux alloc`, `flux batch` and `taskset -c 1 flux start` bind it), whose
    /// restricted topology numbers R's cores (SEMANTICS §4.2); `None` when unknown.
    pub instance: Option<Vec<usize>>,
}

impl Node {
    /// From the shell's rank info (`flux_shell_get_rank_info(shell, -1)`).
    pub fn from_rank_info(jobid: String, json: &str) -> Result<Node, String> {
        #[derive(serde::Deserialize)]
        struct Resources {
            #[serde(default)]
            cores: String,
            #[serde(default)]
            gpus: Option<String>,
        }
        #[derive(serde::Deserialize)]
        struct RankInfo {
            id: u32,
            ntasks: usize,
            resources: Resources,
        }
        let info: RankInfo =
            serde_json::from_str(json).map_err(|e| format!("the shell's rank info: {e}"))?;
        let set = |what: &str, text: &str| {
            idset(text).ok_or_else(|| format!("R's {what} here ({text:?}) are not an idset"))
        };
        Ok(Node {
            jobid,
            shell_rank: info.id,
            ntasks: info.ntasks,
            cores: set("cores", &info.resources.cores)?,
            gpus: set("gpus", info.resources.gpus.as_deref().unwrap_or(""))?,
            instance: None,
        })
    }

    /// Local task `local` of this node (its job-wide `rank`).
    pub fn identity(&self, local: usize, rank: Option<usize>) -> Identity {
        Identity {
            rank: local,
            size: self.ntasks,
            rank_known: true,
            launcher: Some(Launcher::Flux),
            vars: vec![
                format!("shell rank {}", self.shell_rank),
                format!("task localid {local} of {}", self.ntasks),
            ],
            global_rank: rank,
        }
    }

    /// The ledger's name for this shell's tasks: `flux:ID.SHELL`, as the wrapper names
    /// them (`binder_core::identity::job`).
    pub fn job_id(&self) -> String {
        format!("flux:{}.{}", self.jobid, self.shell_rank)
    }
}

/// The job's environment (`flux_shell_getenv`), with the variables that name the job
/// answered from the shell: the ledger keys the job by them, as under the wrapper.
pub struct FluxEnv<'a> {
    /// The job's environment.
    pub get: &'a dyn Fn(&str) -> Option<String>,
    /// This node.
    pub node: &'a Node,
}

impl Env for FluxEnv<'_> {
    fn var(&self, name: &str) -> Option<String> {
        match name {
            "FLUX_JOB_ID" => Some(self.node.jobid.clone()),
            "FLUX_JOB_TMPDIR" => Some(format!(
                "/jobtmp-{}-{}",
                self.node.shell_rank, self.node.jobid
            )),
            _ => (self.get)(name),
        }
    }

    fn flux_taskmap(&self, _: &str) -> Result<String, String> {
        Err("the shell plugin knows its tasks".into())
    }
}

/// The shell's plan for its tasks, made once in `shell.init`.
pub struct Shell {
    /// This node.
    pub node: Node,
    /// The request.
    pub request: Request,
    /// The shape, the job (its key and its allocation here) and the GPUs it may have.
    pub planning: Planning,
    /// Every local task's view and the job's packing policy.
    pub planned: Planned,
}

impl Shell {
    /// Plans the node's tasks of `shape` (read once, in `flux_plugin_init`) inside R's
    /// cores. `get` is the job's environment.
    pub fn prepare(
        node: Node,
        request: Request,
        shape: JobShape,
        get: &dyn Fn(&str) -> Option<String>,
        err: &mut impl Write,
    ) -> Result<Shell, Refusal> {
        // R's GPUs, in the numbering the shell's gpu-affinity would have exported them.
        let gpus = job_gpus(&node);
        let grant_env = |k: &str| match k {
            "CUDA_VISIBLE_DEVICES" if !node.gpus.is_empty() && get(k).is_none() => {
                Some(gpus.clone())
            }
            _ => get(k),
        };
        // R names cores by the instance's logical index (its topology is restricted to
        // its broker's binding); the planner resolves them with the topology only when it
        // plans (a node cache hit loads no hwloc at all).
        let envelope = Envelope::given_cores(
            node.cores.clone(),
            node.instance.clone(),
            "Flux's R for this node",
        );
        let planning = Planning::new(shape, envelope, &request, &grant_env);
        if request.verbose {
            binder_core::text::emit(err, &planning.spec.envelope().describe());
        }
        let planned = planning.plan_node(&node.identity(0, None), &request, get, WHOSE, err)?;
        Ok(Shell {
            node,
            request,
            planning,
            planned,
        })
    }

    /// The variables of local task `local` (job-wide `rank`), to set on its command in
    /// `task.init`: binder's, OpenMP's and the GPUs', and `BINDER_JOB`.
    pub fn task_env(
        &self,
        local: usize,
        rank: Option<usize>,
        get: &dyn Fn(&str) -> Option<String>,
        err: &mut impl Write,
    ) -> Result<Vec<(String, String)>, Refusal> {
        let view = self
            .planned
            .0
            .get(local)
            .ok_or_else(|| Refusal(format!("the plan has no local task {local}")))?;
        let identity = self.node.identity(local, rank);
        // The report line is the bind's, in the task's own process.
        let quiet = Request {
            report: false,
            verbose: false,
            ..self.request.clone()
        };
        let options = binder_host::front::task_options(view, &quiet, None, get);
        let mut vars = binder_core::launch::finish(view, &identity, &options, err)?;
        vars.push(("BINDER_JOB".into(), self.node.job_id()));
        Ok(vars)
    }

    /// Binds this process (task `local`, forked, about to exec) through the one launch
    /// flow with the shell's plan: the node ledger, then the kernel (hwloc for
    /// `membind`); a task binder leaves unbound keeps the job's cores here, as Flux's
    /// cpu-affinity (which the plugin turned off) would have bound it.
    pub fn bind(
        &self,
        local: usize,
        rank: Option<usize>,
        get: &dyn Fn(&str) -> Option<String>,
        err: &mut impl Write,
    ) -> Result<(), Refusal> {
        let identity = self.node.identity(local, rank);
        let env = FluxEnv {
            get,
            node: &self.node,
        };
        let unbound = || job_cpus(&self.node);
        let task = TaskLaunch {
            planning: &self.planning,
            identity: &identity,
            request: &self.request,
            get,
            whose: WHOSE,
            planned: Some(&self.planned),
            unbound: Some(&unbound),
        };
        binder_host::front::launch(&task, &env, err).map(|_| ())
    }
}

/// Whose environment hwloc's variables come from, for a refusal.
const WHOSE: &str = "the job shell's";

/// The job's CPUs on this node (OS numbers): R's cores, resolved through the instance's
/// numbering (SEMANTICS §4.2) on this host's topology. What Flux's own `cpu-affinity`
/// binds a task to, and so what a task binder leaves unbound keeps (`bind: none`, a
/// declined site default).
pub fn job_cpus(node: &Node) -> Result<Vec<usize>, Refusal> {
    binder_host::front::cores_cpus(&node.cores, node.instance.as_deref())
}

/// What Flux's `gpu-affinity` would have exported: R's GPUs here, or `-1` for none.
pub fn job_gpus(node: &Node) -> String {
    if node.gpus.is_empty() {
        return "-1".into();
    }
    let ids: Vec<String> = node.gpus.iter().map(ToString::to_string).collect();
    ids.join(",")
}

/// The shell options binder reads, by name.
pub const OPTIONS: [&str; 5] = [
    "binder",
    "binder-report",
    "binder-verbose",
    "cpu-affinity",
    "gpu-affinity",
];

/// Reads [`OPTIONS`] through `getopt` (an option's JSON, `None` when unset) into a
/// request for a job that runs `command` (its first two words), with the line a job that
/// asked for a report but is left to Flux gets.
pub fn noted_request_from(
    getopt: &dyn Fn(&str) -> Option<String>,
    site: &Site,
    command: &[&str],
) -> Result<(Option<Request>, Option<String>), String> {
    let opts: BTreeMap<&str, serde_json::Value> = OPTIONS
        .iter()
        .filter_map(|&name| {
            let json = getopt(name)?;
            Some((
                name,
                serde_json::from_str(&json).unwrap_or(serde_json::Value::Null),
            ))
        })
        .collect();
    let typed = opts.contains_key("cpu-affinity") || opts.contains_key("gpu-affinity");
    let binds = binds_too(&opts);
    binder_host::front::request_from_json(
        opts.get("binder"),
        opts.get("binder-report"),
        opts.get("binder-verbose"),
        site,
        typed,
        binds.as_ref().map(|(name, value)| (*name, value.as_str())),
        Kind::of_command(command),
    )
}

/// The shell's own CPU binding the job set that binds each task apart
/// (`cpu-affinity=per-task` or `=map:…`), beside which an explicit `-o binder=SHAPE` is
/// refused as Slurm refuses `--binder` beside a typed `--cpu-bind` (#63). `on` (Flux's
/// own default: every task on the job's cores, the envelope binder binds inside) and
/// `off` bind no task apart, and stay. `gpu-affinity=per-task` is how Flux deals GPUs
/// out per task, as Slurm's `--gpus-per-task`: the plugin plans with it (SEMANTICS §9).
fn binds_too(opts: &BTreeMap<&str, serde_json::Value>) -> Option<(&'static str, String)> {
    let value = opts.get("cpu-affinity")?.as_str()?.trim();
    (value == "per-task" || value.starts_with("map:"))
        .then(|| ("-o cpu-affinity", value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::site as parse_site;
    use super::*;

    /// The request alone, as most cases check it.
    fn request_from(
        getopt: &dyn Fn(&str) -> Option<String>,
        site: &Site,
        command: &[&str],
    ) -> Result<Option<Request>, String> {
        noted_request_from(getopt, site, command).map(|(r, _)| r)
    }

    const APP: [&str; 1] = ["./app"];

    /// The jobspecs `flux run -n2 -c2` and `flux run -N1 -n2 --exclusive` (RFC 25, as
    /// flux-core 0.88's `flux run --dry-run` writes them) and a range count.
    #[test]
    fn cores_per_slot_from_the_jobspec() {
        let slot = |cores: &str| {
            format!(
                r#"{{"jobspec":{{"resources":[{{"type":"slot","count":2,"label":"task","with":[{{"type":"core","count":{cores}}}]}}],"tasks":[]}}}}"#
            )
        };
        assert_eq!(cores_per_slot(&slot("2")), Some(2));
        assert_eq!(cores_per_slot(&slot("1")), Some(1));
        assert_eq!(cores_per_slot(&slot(r#"{"min":2}"#)), None);
        let node = r#"{"jobspec":{"resources":[{"type":"node","count":1,"exclusive":true,"with":[{"type":"slot","count":2,"label":"task","with":[{"type":"core","count":3},{"type":"gpu","count":1}]}]}]}}"#;
        assert_eq!(cores_per_slot(node), Some(3));
        assert_eq!(cores_per_slot(r#"{"jobspec":{}}"#), None);
        assert_eq!(cores_per_slot("not json"), None);
    }

    #[test]
    fn requests_from_options() {
        let site = parse_site(Some(r#"{"default":"cores-packed"}"#)).unwrap();
        let none = parse_site(None).unwrap();
        let opts = |pairs: &[(&'static str, &'static str)]| {
            let pairs = pairs.to_vec();
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let r = request_from(&opts(&[("binder", "\"x.yaml\"")]), &none, &APP)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.shape.as_str(), r.report, r.site_default),
            ("x.yaml", false, false)
        );
        let r = request_from(
            &opts(&[
                ("binder", r#"{"shape":"y","report":1}"#),
                ("binder-verbose", "1"),
            ]),
            &none,
            &APP,
        )
        .unwrap()
        .unwrap();
        assert_eq!((r.shape.as_str(), r.report, r.verbose), ("y", true, true));
        // Inert without a shape; a site default only where the job set no affinity.
        assert_eq!(request_from(&opts(&[]), &none, &APP).unwrap(), None);
        let r = request_from(&opts(&[]), &site, &APP).unwrap().unwrap();
        assert!(r.site_default && r.shape == "cores-packed");
        assert_eq!(
            request_from(&opts(&[("cpu-affinity", "\"per-task\"")]), &site, &APP).unwrap(),
            None
        );
        // An explicit shape beside the shell's per-task binding is refused, as Slurm
        // refuses `--binder` beside `--cpu-bind=cores` (#63); Flux's `on` and `off` bind
        // no task apart.
        for (key, value) in [
            ("cpu-affinity", "\"per-task\""),
            ("cpu-affinity", "\"map:0;1\""),
        ] {
            let pairs = [("binder", "\"x.yaml\""), (key, value)];
            let got = |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            };
            let line = request_from(&got, &none, &APP).unwrap_err();
            assert!(
                line.starts_with(&format!("-o {key}=")) && line.contains("and -o binder both bind"),
                "{line}"
            );
        }
        for (key, value) in [
            ("cpu-affinity", "\"on\""),
            ("cpu-affinity", "\"off\""),
            ("gpu-affinity", "\"per-task\""),
        ] {
            let pairs = [("binder", "\"x.yaml\""), (key, value)];
            let got = |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            };
            assert!(
                request_from(&got, &none, &APP).unwrap().is_some(),
                "{value}"
            );
        }
        assert_eq!(
            request_from(&opts(&[("binder", "\"off\"")]), &site, &APP).unwrap(),
            None
        );
        assert!(request_from(&opts(&[("binder", "3")]), &none, &APP).is_err());
        // `-o binder=0` / `-o binder=false` arrive as JSON 0 and false (#63): off words,
        // as their quoted forms are, under a site default too.
        for off in ["0", "false", r#"{"shape":false}"#, r#"{"shape":0}"#] {
            for site in [&site, &none] {
                assert_eq!(
                    request_from(&opts(&[("binder", off)]), site, &APP).unwrap(),
                    None,
                    "-o binder={off}"
                );
            }
        }
        assert!(parse_site(Some(r#"{"defualt":"x"}"#)).is_err());
        // -o binder-report=0 (and false, off) reports nothing.
        for off in ["0", "false", "\"off\"", "\"0\""] {
            let pairs = [("binder", "\"x.yaml\""), ("binder-report", off)];
            let r = request_from(&opts(&pairs), &none, &APP).unwrap().unwrap();
            assert!(!r.report, "binder-report={off}");
        }
        let r = request_from(
            &opts(&[("binder", "\"x.yaml\""), ("binder-report", "1")]),
            &none,
            &APP,
        )
        .unwrap()
        .unwrap();
        assert!(r.report);
        // A misspelt or mistyped key of the object form is one line, not ignored.
        let e = request_from(
            &opts(&[("binder", r#"{"shape":"x.yaml","reprot":1}"#)]),
            &none,
            &APP,
        )
        .unwrap_err();
        assert!(
            e.contains("binder.reprot") && e.contains("binder.report?"),
            "{e}"
        );
        let e = request_from(&opts(&[("binder", r#"{"shape":5}"#)]), &none, &APP).unwrap_err();
        assert!(e.contains("binder.shape=5"), "{e}");
        // `-o binder={}` with no default does nothing: one line, not an unbound job.
        // A report asked alone, with no shape and no default: left to Flux, said why.
        let (r, note) =
            noted_request_from(&opts(&[("binder", r#"{"report":1}"#)]), &none, &APP).unwrap();
        assert_eq!(r, None);
        assert!(note.is_some_and(|n| n.contains("no -o binder=SHAPE")));
        let (_, note) = noted_request_from(&opts(&[("binder-report", "1")]), &none, &APP).unwrap();
        assert!(note.is_some());
        let e = request_from(&opts(&[("binder", "{}")]), &none, &APP).unwrap_err();
        assert!(e.contains("-o binder={} names no shape"), "{e}");
        // With a default, it is the default.
        let r = request_from(&opts(&[("binder", r#"{"report":1}"#)]), &site, &APP)
            .unwrap()
            .unwrap();
        assert!(r.site_default && r.report, "{r:?}");
        // A misspelt switch is one line, never silently off.
        let e = request_from(
            &opts(&[("binder", "\"x.yaml\""), ("binder-report", "\"of\"")]),
            &none,
            &APP,
        )
        .unwrap_err();
        assert!(e.contains("-o binder-report=\"of\" is neither on"), "{e}");
        // The same off words as every front: `-o binder=false` opts out.
        assert_eq!(
            request_from(&opts(&[("binder", "\"false\"")]), &site, &APP).unwrap(),
            None
        );
    }

    #[test]
    fn a_default_never_binds_a_broker() {
        let site = parse_site(Some(r#"{"default":"one-core"}"#)).unwrap();
        let none = |_: &str| None;
        for argv in [&["flux", "broker", "sh"][..], &["flux", "start"]] {
            assert_eq!(request_from(&none, &site, argv).unwrap(), None, "{argv:?}");
        }
        // The user's own request still binds it.
        let asked = |n: &str| (n == "binder").then(|| "\"x.yaml\"".to_owned());
        assert!(request_from(&asked, &site, &["flux", "broker"])
            .unwrap()
            .is_some());
        // The job's command from the shell's info.
        let info =
            r#"{"jobid":1,"jobspec":{"tasks":[{"command":["flux","broker","--setattr=a","sh"]}]}}"#;
        assert_eq!(command_of(info), ["flux", "broker"]);
        assert!(command_of("{}").is_empty());
        // The wrapper under a default is the wrapper's; beside -o binder, one line.
        let wrapper = ["/usr/bin/binder", "s.yaml"];
        assert_eq!(request_from(&none, &site, &wrapper).unwrap(), None);
        let e = request_from(&asked, &site, &wrapper).unwrap_err();
        assert!(
            e.contains("both bind this task") && e.contains("drop -o binder"),
            "{e}"
        );
    }

    #[test]
    fn rank_info_and_names() {
        let json = r#"{"id":1,"name":"vm","broker_rank":1,"ntasks":2,"taskids":"1,3","resources":{"ncores":2,"cores":"0-1","gpus":"0"}}"#;
        let node = Node::from_rank_info("f2Ab".into(), json).unwrap();
        assert_eq!((node.shell_rank, node.ntasks), (1, 2));
        assert_eq!(
            (node.cores.clone(), node.gpus.clone()),
            (vec![0, 1], vec![0])
        );
        assert_eq!(node.job_id(), "flux:f2Ab.1");
        let id = node.identity(1, Some(3));
        assert_eq!((id.rank, id.size, id.global_rank), (1, 2, Some(3)));
        // The job the ledger sees is the wrapper's for the same shell.
        let get = |_: &str| None;
        let env = FluxEnv {
            get: &get,
            node: &node,
        };
        let procs = binder_core::procfs::Real;
        let job = binder_core::identity::job::job_of(&id, &env, &procs);
        assert_eq!(job.0, node.job_id());
        let no_gpus = r#"{"id":0,"name":"vm","broker_rank":0,"ntasks":1,"taskids":"0","resources":{"ncores":1,"cores":"3"}}"#;
        assert!(Node::from_rank_info("f".into(), no_gpus)
            .unwrap()
            .gpus
            .is_empty());
        assert!(Node::from_rank_info("f".into(), "{}").is_err());
    }
}
