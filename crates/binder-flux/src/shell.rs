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
use binder_core::launch::flow::{self, Front};
use binder_core::launch::ledgered::{Avoid, Job, Planned, Planner};
use binder_core::launch::line::{JobKey, Requests};
use binder_core::launch::Options;
use binder_core::ledger::Scan;
use binder_core::view::TaskView;
use binder_host::around::{HostPlanner, Refusal};
use binder_host::front::{Ask, Decision, JobShape, Kind};
use binder_plan::gpu::Grant;
use binder_plan::shape::{GpuIds, Shape};
use binder_plan::topology::{Source, Topology};
use binder_plan::PlanError;

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

/// A shell option's value as a switch (`-o binder-report`, `=1`, `=true`, `=off`, …):
/// the one list of on and off words every front takes; any other value is one line.
fn flag(name: &str, value: &serde_json::Value) -> Result<bool, String> {
    let text = match value {
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    binder_core::launch::line::switch(name, Some(&text))
}

/// The request from the shell options: `binder` is `SHAPE`, an off word, or an object
/// `{shape, report, verbose}` (`-o binder.shape=… -o binder.report`); `report` and
/// `verbose` are `-o binder-report` and `-o binder-verbose`; `affinity_typed`: the job
/// set `cpu-affinity` or `gpu-affinity` itself, which a site default yields to; `kind`:
/// what the job runs (a Flux broker is a container a default never binds). The decision
/// is the front module's ([`binder_host::front::Ask::decide`]).
pub fn request_of(
    binder: Option<&serde_json::Value>,
    report: Option<&serde_json::Value>,
    verbose: Option<&serde_json::Value>,
    site: &Site,
    affinity_typed: bool,
    kind: Kind<'_>,
) -> Result<Option<Request>, String> {
    let mut report = report.map_or(Ok(false), |v| flag("-o binder-report", v))?;
    let mut verbose = verbose.map_or(Ok(false), |v| flag("-o binder-verbose", v))?;
    let shape = match binder {
        None => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => {
            return Err("-o binder= names no shape; give -o binder=SHAPE (a file or a catalog name), or -o binder=off".into())
        }
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => {
            // Every key is binder's to read: a misspelt one is said, not ignored.
            let known = ["shape", "report", "verbose"];
            for (key, value) in o {
                if !known.contains(&key.as_str()) {
                    let near = binder_core::text::suggestion(key, &known)
                        .map(|k| format!(" (did you mean binder.{k}?)"))
                        .unwrap_or_default();
                    return Err(format!(
                        "-o binder.{} is not an option of binder's{near}; it takes binder.shape=SHAPE, binder.report and binder.verbose",
                        binder_core::text::printable(key, 40)
                    ));
                }
                match key.as_str() {
                    "shape" if !value.is_string() => {
                        return Err(format!(
                            "-o binder.shape={} is not a shape; give a file or a catalog name",
                            binder_core::text::printable(&value.to_string(), 60)
                        ))
                    }
                    "report" => report |= flag("-o binder.report", value)?,
                    "verbose" => verbose |= flag("-o binder.verbose", value)?,
                    _ => {}
                }
            }
            let shape = o.get("shape").and_then(|s| s.as_str()).map(str::to_owned);
            // `-o binder={}` (or flags alone) with no default to apply them to would do
            // nothing: said, never silently unbound.
            if shape.is_none() && site.default_shape().is_none() {
                return Err(format!(
                    "-o binder={} names no shape, and this site has no default; give -o binder=SHAPE (or binder.shape=SHAPE), a file or a catalog name",
                    binder_core::text::printable(&serde_json::Value::Object(o.clone()).to_string(), 60)
                ));
            }
            shape
        }
        Some(other) => {
            return Err(format!(
                "-o binder={} is not a shape; give -o binder=SHAPE (a file or a catalog name)",
                binder_core::text::printable(&other.to_string(), 60)
            ))
        }
    };
    let ask = Ask {
        option: "-o binder",
        asked: shape.as_deref(),
        default: site.default_shape(),
        launcher_binds: affinity_typed,
        kind,
        report,
        verbose,
    };
    match ask.decide() {
        Decision::Bind(request) => Ok(Some(request)),
        Decision::Stay => Ok(None),
        Decision::Refuse(line) => Err(line),
    }
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
    /// The shape's path, for messages.
    pub origin: String,
    /// The shape, parsed.
    pub shape: Shape,
    /// The key the plan is found by (the cache's and the ledger's).
    pub text: JobKey,
    /// The job's allocation here.
    pub envelope: Envelope,
    /// The GPUs the job may have here.
    pub grant: Grant,
    /// Every local task's view and the job's packing policy.
    pub planned: Planned,
}

impl Shell {
    /// Reads the shape and plans the node's tasks inside R's cores. `get` is the job's
    /// environment, `cwd` the job's working directory.
    pub fn prepare(
        node: Node,
        request: Request,
        site: &Site,
        get: &dyn Fn(&str) -> Option<String>,
        cwd: Option<&str>,
        err: &mut impl Write,
    ) -> Result<Shell, Refusal> {
        let JobShape {
            origin,
            text,
            shape,
            site: site_file,
        } = JobShape::read(&request.shape, cwd, &site.catalog, get)?;
        // R's GPUs, in the numbering the shell's gpu-affinity would have exported them.
        let gpus = node
            .gpus
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let grant_env = |k: &str| match k {
            "CUDA_VISIBLE_DEVICES" if !gpus.is_empty() && get(k).is_none() => Some(gpus.clone()),
            _ => get(k),
        };
        let grant =
            Grant::from_env(&grant_env).by_uuid(shape.options.gpu_ids == Some(GpuIds::Uuid));
        // R names cores by the instance's logical index (its topology is restricted to
        // its broker's binding); the planner resolves them with the topology only when it
        // plans (a node cache hit loads no hwloc at all).
        let envelope = Envelope::given_cores(
            node.cores.clone(),
            node.instance.clone(),
            "Flux's R for this node",
        );
        let key = JobKey::new(
            &text,
            &Requests::default(),
            site_file.as_ref().map(|(_, t)| t.as_str()),
            &grant_env,
            &envelope,
        );
        let identity = node.identity(0, None);
        if request.verbose {
            binder_core::text::emit(err, &envelope.describe());
        }
        let mut job = Job::new(&origin, &key, &identity, &envelope);
        job.verbose = request.verbose;
        let loader = Box::new(|s: &Shape| load_host(s));
        let mut planner: HostPlanner<'_, Refusal> =
            HostPlanner::new(&shape, grant.clone(), get, loader);
        let planned = planner.plain(&job, err)?;
        drop(planner);
        Ok(Shell {
            node,
            request,
            origin,
            shape,
            text: key,
            envelope,
            grant,
            planned,
        })
    }

    /// Local task `local`'s view.
    fn view(&self, local: usize) -> Result<&TaskView, Refusal> {
        self.planned
            .0
            .get(local)
            .ok_or_else(|| Refusal(format!("the plan has no local task {local}")))
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
        let view = self.view(local)?;
        let identity = self.node.identity(local, rank);
        let mut options = self.options(view, None, get);
        // The report line is the bind's, in the task's own process.
        options.report = false;
        options.verbose = false;
        let mut vars = binder_core::launch::finish(view, &identity, &options, err)?;
        vars.push(("BINDER_JOB".into(), self.node.job_id()));
        Ok(vars)
    }

    fn options<'o>(
        &self,
        view: &TaskView,
        started_on: Option<&'o [usize]>,
        get: &'o dyn Fn(&str) -> Option<String>,
    ) -> Options<'o> {
        binder_host::front::task_options(view, &self.request, started_on, get)
    }

    /// Binds this process (task `local`, forked, about to exec) through the one launch
    /// flow: the node ledger, then the kernel (hwloc for `membind`).
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
        let mut job = Job::new(&self.origin, &self.text, &identity, &self.envelope);
        job.verbose = self.request.verbose;
        let loader = Box::new(|s: &Shape| load_host(s));
        let mut front = Task {
            shell: self,
            planner: HostPlanner::new(&self.shape, self.grant.clone(), get, loader),
            identity: &identity,
            get,
        };
        flow::launch(&job, &env, &mut front, err).map(|_| ())
    }
}

/// The job's CPUs on this node (OS numbers): R's cores, resolved through the instance's
/// numbering (SEMANTICS §4.2) on this host's topology. What Flux's own `cpu-affinity`
/// binds a task to, and so what a task binder leaves unbound keeps (`bind: none`, a
/// declined site default).
pub fn job_cpus(node: &Node) -> Result<Vec<usize>, Refusal> {
    let t = binder_host::load(&Source::Host, false).map_err(PlanError::from)?;
    Ok(t.cores_pus(&node.cores, node.instance.as_deref()))
}

/// What Flux's `gpu-affinity` would have exported: R's GPUs here, or `-1` for none.
pub fn job_gpus(node: &Node) -> String {
    if node.gpus.is_empty() {
        return "-1".into();
    }
    let ids: Vec<String> = node.gpus.iter().map(ToString::to_string).collect();
    ids.join(",")
}

/// This host's topology, refused when hwloc describes another machine.
fn load_host(shape: &Shape) -> Result<Topology, Refusal> {
    binder_host::plugin_host(shape, "the job shell's")
}

/// One task's front on the launch flow: the shell's plan, a real re-plan around other
/// jobs, and the binding in the task's process.
struct Task<'a> {
    shell: &'a Shell,
    planner: HostPlanner<'a, Refusal>,
    identity: &'a Identity,
    get: &'a dyn Fn(&str) -> Option<String>,
}

impl Planner for Task<'_> {
    type Error = Refusal;

    /// The shell's plan, made once for all its tasks.
    fn plain(&mut self, _: &Job<'_>, _: &mut impl Write) -> Result<Planned, Refusal> {
        Ok(self.shell.planned.clone())
    }

    fn around(
        &mut self,
        job: &Job<'_>,
        scan: &Scan,
        avoid: &Avoid,
        err: &mut impl Write,
    ) -> Result<Planned, Refusal> {
        self.planner.around(job, scan, avoid, err)
    }

    fn shares(&self) -> bool {
        self.shell.shape.options.share
    }
}

impl<'a> Front for Task<'a> {
    /// The shell's own plan, with a real re-plan around other jobs: this type itself.
    type Planner = Self;

    fn planner(&mut self) -> &mut Self {
        self
    }

    fn bind(
        &mut self,
        view: &TaskView,
        started_on: Option<&[usize]>,
        err: &mut impl Write,
    ) -> Result<Vec<(String, String)>, Refusal> {
        let planned = self.shell.view(self.identity.rank)?;
        if view.cpus != planned.cpus || view.gpus != planned.gpus {
            return Err(Refusal(format!(
                "another job took this task's units (cpus {}) between the job shell's plan and the task's start, and its variables are already set; run the job again",
                binder_core::cpulist::cpu_list(&planned.cpus)
            )));
        }
        let options = self.shell.options(view, started_on, self.get);
        let topology = if view.membind.is_some() {
            Some(load_host(&self.shell.shape)?)
        } else {
            None
        };
        // `bind: none`: the job's cores, as Flux's cpu-affinity (which the plugin turned
        // off) would have bound it, never the whole node.
        if !view.is_bound() {
            let cpus = job_cpus(&self.shell.node)?;
            if !cpus.is_empty() {
                binder_core::launch::affinity::bind_cpus_raw(&cpus)?;
            }
        }
        Ok(binder_host::hostbind::prepare(
            view,
            topology.as_ref(),
            self.identity,
            &options,
            err,
        )?)
    }
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
/// request for a job that runs `command` (its first two words).
pub fn request_from(
    getopt: &dyn Fn(&str) -> Option<String>,
    site: &Site,
    command: &[&str],
) -> Result<Option<Request>, String> {
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
    request_of(
        opts.get("binder"),
        opts.get("binder-report"),
        opts.get("binder-verbose"),
        site,
        typed,
        Kind::of_command(command),
    )
}

#[cfg(test)]
mod tests {
    use super::site as parse_site;
    use super::*;

    const APP: [&str; 1] = ["./app"];

    #[test]
    fn requests_from_options() {
        let site = parse_site(Some(r#"{"default":"cores-packed"}"#)).unwrap();
        let none = parse_site(None).unwrap();
        let opts = |pairs: &'static [(&'static str, &'static str)]| {
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
        assert_eq!(
            request_from(&opts(&[("binder", "\"off\"")]), &site, &APP).unwrap(),
            None
        );
        assert!(request_from(&opts(&[("binder", "3")]), &none, &APP).is_err());
        assert!(parse_site(Some(r#"{"defualt":"x"}"#)).is_err());
        // -o binder-report=0 (and false, off) reports nothing.
        for off in ["0", "false", "\"off\"", "\"0\""] {
            let pairs: &'static [(&'static str, &'static str)] = match off {
                "0" => &[("binder", "\"x.yaml\""), ("binder-report", "0")],
                "false" => &[("binder", "\"x.yaml\""), ("binder-report", "false")],
                "\"off\"" => &[("binder", "\"x.yaml\""), ("binder-report", "\"off\"")],
                _ => &[("binder", "\"x.yaml\""), ("binder-report", "\"0\"")],
            };
            let r = request_from(&opts(pairs), &none, &APP).unwrap().unwrap();
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
