//! The one front module every plugin calls (SEMANTICS §4.2-§4.3): what a plugin decides
//! about a task, decided once and alike for Slurm's SPANK plugin and Flux's shell plugin,
//! so that each plugin keeps only its FFI, how it learns the task's identity, and its
//! envelope.
//!
//! * [`Site`]: the plugin's site configuration (plugstack.conf's `default=`/`catalog=`,
//!   the Flux plugin's `conf = { default, catalog }`), one type and one catalog path.
//! * [`Ask::decide`]: whether the task is bound, left to the launcher, or refused: the
//!   user's request, the site's default, the off words ([`binder_core::launch::line::
//!   OFF_WORDS`], one list), a binding the user typed for the launcher itself, a task
//!   that runs binder's wrapper, and a container (a batch shell, the extern step, an
//!   interactive step, a Flux broker) that a default never binds.
//! * [`JobShape::read`]: the shape a request names (a path relative to the job's
//!   directory, or a catalog name) with the site file's reservation, read once.
//! * [`task_options`]: the launch options of a task a plugin binds, built in one place.

use std::io::Write;
use std::path::PathBuf;

use binder_core::launch::line::{is_off, CATALOG};

mod options;
mod task;
pub use options::request_from_json;
pub use task::{
    adopt_hwloc_env, cores_cpus, launch, resolve_shape, task_options, JobShape, Planning,
    TaskLaunch,
};

/// A plugin's site configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// A shape for every job that asks for none (and types no binding of its own).
    #[serde(default)]
    pub default: Option<String>,
    /// Where catalog names are looked up.
    #[serde(default = "catalog")]
    pub catalog: PathBuf,
}

fn catalog() -> PathBuf {
    PathBuf::from(CATALOG)
}

impl Default for Site {
    fn default() -> Site {
        Site {
            default: None,
            catalog: catalog(),
        }
    }
}

impl Site {
    /// From `KEY=VALUE` arguments (plugstack.conf's): `default=SHAPE`, `catalog=DIR`.
    /// `default=off` (or any of the off words) is no default; `Err` names an argument
    /// binder does not know, with the nearest one.
    pub fn from_args<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Site, String> {
        let mut site = Site::default();
        for arg in args {
            match arg.split_once('=') {
                Some(("default", shape)) if !shape.is_empty() => {
                    site.default = (!is_off(shape)).then(|| shape.to_owned());
                }
                Some(("catalog", dir)) if !dir.is_empty() => site.catalog = dir.into(),
                _ => {
                    let key = arg.split('=').next().unwrap_or(arg);
                    let near = binder_core::text::suggestion(key, &["default", "catalog"])
                        .map(|k| format!(" (did you mean {k}=?)"))
                        .unwrap_or_default();
                    return Err(format!(
                        "unknown plugstack.conf argument {:?}{near}; binder takes default=SHAPE and catalog=DIR",
                        binder_core::text::clip(arg, 60)
                    ));
                }
            }
        }
        Ok(site)
    }

    /// The site's default shape, unless it is one of the off words (`default = "off"`
    /// in a Flux `conf`, as `default=off` in plugstack.conf: no default).
    pub fn default_shape(&self) -> Option<&str> {
        self.default
            .as_deref()
            .filter(|d| !d.trim().is_empty() && !is_off(d))
    }
}

/// What the user or the site asked binder for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// The shape: a path (relative to the job's working directory) or a catalog name.
    pub shape: String,
    /// Each task's binding line on its stderr (`--binder-report`, `-o binder-report`).
    pub report: bool,
    /// What the envelope and the ledger decided (`--binder-verbose`, `-o binder-verbose`).
    pub verbose: bool,
    /// The shape is the site's default, not the user's: a refusal leaves the task to the
    /// launcher's own binding instead of failing it.
    pub site_default: bool,
    /// The CPUs the scheduler gave each task, where the plugin knows (`srun -c N`, `flux
    /// run -c N`): a site's default that would give a task fewer is declined.
    pub given: Option<Given>,
}

/// The CPUs a scheduler gave each task of a job, and where it says so (for the line
/// that declines a default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Given {
    /// How many CPUs (hardware threads).
    pub cpus: usize,
    /// Where the count comes from: `SLURM_CPUS_PER_TASK`, Flux's jobspec.
    pub from: &'static str,
}

/// What kind of process the launcher is about to start (SEMANTICS §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind<'a> {
    /// A task that runs the application.
    Task,
    /// A task that runs binder's wrapper (its command), which binds it itself.
    Wrapper(&'a str),
    /// A process that is itself an allocation for more work (a batch shell, the extern
    /// step, an interactive step, a Flux broker): what it is, for messages. A site
    /// default never binds it.
    Container(&'static str),
}

impl<'a> Kind<'a> {
    /// The kind of a task whose command line is `argv` (`argv[0]` first): the wrapper's
    /// by its name, a Flux broker (`flux broker …`, `flux start …`, `flux-broker`, as
    /// `flux alloc`, `flux batch` and `flux run flux start` run it), else a task.
    pub fn of_command(argv: &[&'a str]) -> Kind<'a> {
        let Some(&first) = argv.first() else {
            return Kind::Task;
        };
        if binder_core::launch::line::is_wrapper(first) {
            return Kind::Wrapper(first);
        }
        let name = first.rsplit('/').next().unwrap_or(first);
        let sub = argv.get(1).copied().unwrap_or("");
        if name == "flux-broker" || (name == "flux" && matches!(sub, "broker" | "start")) {
            return Kind::Container(
                "a Flux instance's broker (flux alloc, flux batch, flux start)",
            );
        }
        Kind::Task
    }
}

/// What a front does with one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Bind the task as the request says.
    Bind(Request),
    /// Leave the task to the launcher (and to a wrapper it runs): binder's own variables
    /// from an outer task are removed, nothing else changes.
    Stay,
    /// Refuse the task with this line.
    Refuse(String),
}

/// What one task asks of a plugin.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// How the user spells the request, for messages: `--binder`, `-o binder`.
    pub option: &'a str,
    /// The request as given (`srun --binder=…`, `-o binder=…`), `None` when none.
    pub asked: Option<&'a str>,
    /// The site's default shape.
    pub default: Option<&'a str>,
    /// The user typed a binding of the launcher's own (`srun --cpu-bind=cores`, `-o
    /// cpu-affinity=…`): a site default yields to it.
    pub launcher_binds: bool,
    /// The launcher binding the user typed that binds tasks itself, as `(option, value)`
    /// (`("srun --cpu-bind", "cores")`, `("-o cpu-affinity", "per-task")`); `None` where
    /// none was typed or it binds nothing (`none`, `off`). Beside an explicit request,
    /// two bindings of one task, one of which would silently lose: refused alike in every
    /// front (#63).
    pub binds_too: Option<(&'a str, &'a str)>,
    /// What the task is.
    pub kind: Kind<'a>,
    /// The report flag as given.
    pub report: bool,
    /// The verbose flag as given.
    pub verbose: bool,
}

impl Ask<'_> {
    /// What to do with this task (SEMANTICS §4.2-§4.3):
    /// - an off word (`--binder=off`, `-o binder=none`) opts out of the site's default;
    /// - a container is never bound by a default (nor by a request the batch system hands
    ///   on to a job's steps: the caller says which containers those are);
    /// - a task that runs the `binder` wrapper is the wrapper's: the default stays out, and
    ///   an explicit request beside the wrapper is one refusal naming both;
    /// - a request beside a binding of the launcher's the user typed is one refusal naming
    ///   both;
    /// - else the request, or the default when the user typed no binding of the launcher's.
    pub fn decide(&self) -> Decision {
        let bind = |shape: &str, site_default| {
            Decision::Bind(Request {
                shape: shape.to_owned(),
                report: self.report,
                verbose: self.verbose,
                site_default,
                given: None,
            })
        };
        match (self.asked, self.kind) {
            (Some(off), _) if is_off(off) => Decision::Stay,
            (Some(shape), Kind::Wrapper(command)) => Decision::Refuse(format!(
                "{}={} and the wrapper `{}` both bind this task; drop {} (the wrapper binds it), or run the command without the wrapper",
                self.option,
                binder_core::text::printable(shape, 80),
                binder_core::text::printable(command, 80),
                self.option,
            )),
            (Some(_), _) if self.binds_too.is_some() => {
                let (name, value) = self.binds_too.unwrap_or_default();
                Decision::Refuse(format!(
                    "{name}={} and {} both bind this task; drop {name} to bind with binder (inside the job's CPUs), or drop {}",
                    binder_core::text::printable(value, 40),
                    self.option,
                    self.option,
                ))
            }
            (Some(shape), _) => bind(shape, false),
            (None, Kind::Wrapper(_) | Kind::Container(_)) => Decision::Stay,
            (None, Kind::Task) if self.launcher_binds => Decision::Stay,
            (None, Kind::Task) => self
                .default
                .filter(|d| !is_off(d))
                .map_or(Decision::Stay, |d| bind(d, true)),
        }
    }
}

impl Ask<'_> {
    /// Why binder leaves this task to the launcher, for a task that asked for a report
    /// or verbose lines (SEMANTICS §4.3: an option works alone or says why): one line
    /// for the task's stderr; `None` when binder binds it, refuses it, or the task runs
    /// binder's wrapper (which reports for itself).
    pub fn why_left(&self) -> Option<String> {
        if !(self.report || self.verbose) || self.decide() != Decision::Stay {
            return None;
        }
        let option = self.option;
        let why = match (self.asked, self.kind) {
            (Some(off), _) => format!(
                "{option}={} turns binder off for it",
                binder_core::text::printable(off, 40)
            ),
            (None, Kind::Wrapper(_)) => return None,
            (None, Kind::Container(what)) => {
                format!("it is {what}, which a site default never binds; give {option}=SHAPE to bind it")
            }
            (None, Kind::Task) if self.launcher_binds => {
                "the launcher's own binding was asked for, and a site default yields to it"
                    .to_owned()
            }
            (None, Kind::Task) => {
                format!("no {option}=SHAPE was given and this site has no default shape; give {option}=SHAPE")
            }
        };
        Some(format!(
            "nothing to report: binder does not bind this task ({why})"
        ))
    }
}

/// binder's variables to remove from a task binder leaves to the launcher (SEMANTICS §4.2:
/// an outer binder's describe no task of this job): every one, but `BINDER_JOB` for a
/// task that runs the wrapper, which reads it as the job it runs inside (a nested step's
/// enclosing step, SEMANTICS §4.3) and sets its own at exec.
pub fn left_alone(kind: Kind<'_>) -> impl Iterator<Item = &'static str> {
    let wrapper = matches!(kind, Kind::Wrapper(_));
    binder_core::launch::env::stale(&[]).filter(move |v| !(wrapper && *v == "BINDER_JOB"))
}

/// Writes a warning that a site default was declined (`why`) and what stands instead.
pub fn declined(err: &mut impl Write, why: &str, stands: &str) {
    binder_core::text::emit(
        err,
        &format!("warning: the site's default shape is not used for this job ({why}); {stands}"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask<'a>(asked: Option<&'a str>, kind: Kind<'a>, launcher_binds: bool) -> Decision {
        Ask {
            option: "--binder",
            asked,
            default: Some("cores-packed"),
            launcher_binds,
            binds_too: None,
            kind,
            report: true,
            verbose: false,
        }
        .decide()
    }

    fn bound(d: Decision) -> Option<(String, bool, bool)> {
        match d {
            Decision::Bind(r) => Some((r.shape, r.site_default, r.report)),
            _ => None,
        }
    }

    #[test]
    fn a_report_alone_says_why_nothing_is_bound() {
        let alone = |asked, default, kind, launcher_binds| {
            Ask {
                option: "--binder",
                asked,
                default,
                launcher_binds,
                binds_too: None,
                kind,
                report: true,
                verbose: false,
            }
            .why_left()
        };
        let why = alone(None, None, Kind::Task, false).unwrap();
        assert!(
            why.contains("no --binder=SHAPE") && why.contains("no default"),
            "{why}"
        );
        let why = alone(Some("off"), Some("cores-packed"), Kind::Task, false).unwrap();
        assert!(why.contains("--binder=off"), "{why}");
        let why = alone(
            None,
            Some("x"),
            Kind::Container("an interactive step (srun --pty)"),
            false,
        )
        .unwrap();
        assert!(why.contains("interactive step"), "{why}");
        let why = alone(None, Some("x"), Kind::Task, true).unwrap();
        assert!(why.contains("launcher's own binding"), "{why}");
        // Bound, or the wrapper's: nothing to say here.
        assert_eq!(alone(None, Some("x"), Kind::Task, false), None);
        assert_eq!(alone(None, None, Kind::Wrapper("binder"), false), None);
        // Not asked for a report: nothing said.
        let quiet = Ask {
            option: "--binder",
            asked: None,
            default: None,
            launcher_binds: false,
            binds_too: None,
            kind: Kind::Task,
            report: false,
            verbose: false,
        };
        assert_eq!(quiet.why_left(), None);
    }

    #[test]
    fn a_default_binds_tasks_never_containers() {
        let broker = Kind::of_command(&["flux", "broker", "--setattr=x", "sh"]);
        assert!(matches!(broker, Kind::Container(_)), "{broker:?}");
        for argv in [
            &["/usr/bin/flux", "start", "sh"][..],
            &["/opt/flux/libexec/flux/cmd/flux-broker"],
        ] {
            assert!(
                matches!(Kind::of_command(argv), Kind::Container(_)),
                "{argv:?}"
            );
        }
        for argv in [&["flux", "run", "x"][..], &["./app"], &["fluxbroker"], &[]] {
            assert_eq!(Kind::of_command(argv), Kind::Task, "{argv:?}");
        }
        assert_eq!(ask(None, broker, false), Decision::Stay);
        // The user's own request still binds it.
        assert_eq!(
            bound(ask(Some("x.yaml"), broker, false)),
            Some(("x.yaml".into(), false, true))
        );
        assert_eq!(
            bound(ask(None, Kind::Task, false)),
            Some(("cores-packed".into(), true, true))
        );
    }

    #[test]
    fn off_words_and_typed_bindings() {
        for off in ["off", "none", "0", "false", "no", "OFF"] {
            assert_eq!(ask(Some(off), Kind::Task, false), Decision::Stay, "{off}");
        }
        assert_eq!(ask(None, Kind::Task, true), Decision::Stay);
        // A typed launcher binding does not outrank the user's own request.
        assert!(bound(ask(Some("x.yaml"), Kind::Task, true)).is_some());
        // A default spelt off is no default.
        let off_default = Ask {
            option: "-o binder",
            asked: None,
            default: Some("off"),
            launcher_binds: false,
            binds_too: None,
            kind: Kind::Task,
            report: false,
            verbose: false,
        };
        assert_eq!(off_default.decide(), Decision::Stay);
    }

    #[test]
    fn the_wrapper_binds_its_own_task() {
        let w = Kind::of_command(&["/usr/local/bin/binder", "s.yaml", "--", "a"]);
        assert_eq!(w, Kind::Wrapper("/usr/local/bin/binder"));
        assert_eq!(ask(None, w, false), Decision::Stay);
        match ask(Some("one.yaml"), w, false) {
            Decision::Refuse(line) => {
                assert!(line.contains("--binder=one.yaml"), "{line}");
                assert!(line.contains("/usr/local/bin/binder"), "{line}");
                assert!(line.contains("drop --binder"), "{line}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_wrapper_keeps_the_enclosing_job_name() {
        let task: Vec<&str> = left_alone(Kind::Task).collect();
        assert!(task.contains(&"BINDER_JOB") && task.contains(&"BINDER_CPUS"));
        let wrapper: Vec<&str> = left_alone(Kind::Wrapper("binder")).collect();
        assert!(!wrapper.contains(&"BINDER_JOB") && wrapper.contains(&"BINDER_CPUS"));
    }

    #[test]
    fn site_arguments() {
        let site = Site::from_args(["default=cores-packed", "catalog=/x"]).unwrap();
        assert_eq!(site.default_shape(), Some("cores-packed"));
        assert_eq!(site.catalog, PathBuf::from("/x"));
        assert_eq!(
            Site::from_args(["default=off"]).unwrap().default_shape(),
            None
        );
        assert_eq!(Site::from_args([]).unwrap(), Site::default());
        let e = Site::from_args(["defualt=x"]).unwrap_err();
        assert!(e.contains("did you mean default=?"), "{e}");
        let json: Site = serde_json::from_str(r#"{"default":"none"}"#).unwrap();
        assert_eq!(json.default_shape(), None);
        assert_eq!(json.catalog, PathBuf::from(CATALOG));
    }

    #[test]
    fn one_shape_rule_for_every_plugin() {
        let root = std::env::temp_dir().join(format!("binder-front-{}", std::process::id()));
        let (catalog, cwd, pwd) = (root.join("cat"), root.join("cwd"), root.join("pwd"));
        for d in [&catalog, &cwd, &pwd] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(catalog.join("cores-packed.yaml"), "x").unwrap();
        std::fs::write(pwd.join("mine.yaml"), "x").unwrap();
        let (c, p) = (cwd.to_str(), pwd.to_str());
        // A catalog name; a file in the job's PWD when the task's directory lacks it.
        assert_eq!(
            resolve_shape("cores-packed", &[c, p], &catalog).unwrap(),
            catalog.join("cores-packed.yaml")
        );
        assert_eq!(
            resolve_shape("mine.yaml", &[c, p], &catalog).unwrap(),
            pwd.join("mine.yaml")
        );
        // A misspelt name: the nearest catalog name (#63: "check the path" alone before).
        let e = resolve_shape("cores-pakced", &[c, p], &catalog)
            .unwrap_err()
            .0;
        assert!(e.contains("did you mean `cores-packed`?"), "{e}");
        // An empty one (`--binder=`): said, not read as `.yaml`.
        let e = resolve_shape("", &[c, p], &catalog).unwrap_err().0;
        assert!(e.contains("names no shape"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
