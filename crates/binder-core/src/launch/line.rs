//! A plain launch line read without clap, and the text a job's plan is keyed by.
//!
//! The `binder` executable answers `binder SHAPE [--local-rank N] [--local-size N]
//! [--report] -- CMD` itself ([`LaunchLine::parse`]); any other line (another flag, a
//! subcommand, `--help`) is `None` and goes to `binder-full`, whose clap parser gives the
//! same line the same meaning (a test in the `binder` crate compares the two).
//!
//! [`JobKey`] is what the node cache and the node ledger key a plan by. Both
//! executables compute it here, from the unparsed shape bytes, so that a job whose ranks
//! start in either one agrees on its key, and the warm path parses no YAML.

use std::ffi::OsString;
use std::path::PathBuf;

/// The subcommands, which are never a shape file's name on the warm path.
pub const SUBCOMMANDS: [&str; 5] = ["schema", "topology", "node", "explain", "generate"];

pub use crate::vendor::GPU_GRANT_VARS;

/// A plain launch line: the only one the warm path answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchLine {
    /// The shape file.
    pub shape: PathBuf,
    /// `--local-rank`.
    pub local_rank: Option<usize>,
    /// `--local-size`.
    pub local_size: Option<usize>,
    /// `--report`.
    pub report: bool,
    /// The command after `--`, never empty.
    pub command: Vec<OsString>,
}

impl LaunchLine {
    /// The plain launch line `args` (with `args[0]` the program) is, or `None` for
    /// anything else: a repeated or unknown flag, a subcommand, a missing shape or
    /// command, a value that is not a number, a word that is not UTF-8.
    pub fn parse(args: &[OsString]) -> Option<LaunchLine> {
        let dashes = args.iter().position(|a| a == "--")?;
        let command = &args[dashes + 1..];
        if command.is_empty() {
            return None;
        }
        let (mut shape, mut local_rank, mut local_size, mut report) = (None, None, None, false);
        let mut words = args.get(1..dashes)?.iter();
        while let Some(word) = words.next() {
            let text = word.to_str()?;
            let (flag, inline) = match text.split_once('=') {
                Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
                _ => (text, None),
            };
            match flag {
                "--local-rank" | "--local-size" => {
                    let value = match inline {
                        Some(value) => value,
                        None => words.next()?.to_str()?,
                    };
                    let n = value.parse::<usize>().ok()?;
                    let slot = if flag == "--local-rank" {
                        &mut local_rank
                    } else {
                        &mut local_size
                    };
                    if slot.replace(n).is_some() {
                        return None;
                    }
                }
                "--report" if inline.is_none() && !report => report = true,
                _ if text.is_empty() || text.starts_with('-') => return None,
                _ if shape.is_some() => return None,
                _ => shape = Some(text),
            }
        }
        let name = shape?;
        if SUBCOMMANDS.contains(&name) {
            return None;
        }
        Some(LaunchLine {
            shape: PathBuf::from(name),
            local_rank,
            local_size,
            report,
            command: command.to_vec(),
        })
    }
}

pub use crate::settings::{is_off, switch, OFF_WORDS, ON_WORDS};

/// `BINDER_REPORT`'s value as on or off; `Err` says what is wrong with it.
pub fn report_word(value: Option<&str>) -> Result<bool, String> {
    switch("BINDER_REPORT", value)
}

/// The command line's requests that change a plan, as text (none on a plain launch
/// line: [`Requests::default`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    /// `--ge`.
    pub ge: Option<String>,
    /// `--reserve` entries.
    pub reserve: Vec<String>,
    /// `--pack`, by name.
    pub pack: Option<String>,
    /// `--share`.
    pub share: bool,
    /// `--gpu-ids`, by name.
    pub gpu_ids: Option<String>,
    /// `--gpus-per-task`.
    pub gpus_per_task: Option<usize>,
}

/// Whether a shape's or site file's text can ask for GPUs: it names one (`gpu-local`,
/// `gpus-per-task`, `type: gpu`, `gpu-ids`, in any case) or PyTorch's binding
/// (`numa-binding`). Only then do the GPU variables a task inherits key its job's plan:
/// under Flux's `gpu-affinity=per-task` (or any launcher that gives each task its own
/// devices) the ranks of a CPU-only job inherit different ones and are still one job
/// with one plan. A comment that names a GPU only keys the plan more finely.
fn may_use_gpus(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    text.contains("gpu") || text.contains("numa-binding")
}

/// The text the node cache and the ledger key a plan by: the shape file's bytes (none for
/// `--ge` alone), every request of the command line that changes the plan, the GPU
/// variables the job inherits and the site file's bytes.
fn job_text(
    shape: &str,
    requests: &Requests,
    site: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> String {
    // A task given some of the step's GPUs keys the plan by the step's, as its
    // siblings do (`vendor::task_split`).
    let split = crate::vendor::task_split(env);
    let gpu_words = may_use_gpus(shape)
        || site.is_some_and(may_use_gpus)
        || requests.gpu_ids.is_some()
        || requests.gpus_per_task.is_some();
    let gpus: String = GPU_GRANT_VARS
        .iter()
        .filter(|_| gpu_words)
        .filter(|&&n| {
            split.is_none()
                || n == crate::vendor::SCHEDULER_GPU_COUNT
                || n == crate::vendor::SCHEDULER_GPU_VARS[1]
        })
        .filter_map(|n| env(n).map(|v| format!("{n}={v};")))
        .collect();
    let Requests {
        ge,
        reserve,
        pack,
        share,
        gpu_ids,
        gpus_per_task,
    } = requests;
    format!(
        "{shape}\n#ge:{ge:?}\n#reserve:{reserve:?}\n#pack:{pack:?}\n#share:{share}\n#gpu-ids:{gpu_ids:?}\n#gpus-per-task:{gpus_per_task:?}\n#gpus-env:{gpus}\n#site:{}",
        site.unwrap_or("")
    )
}

/// Whether a task's command is binder's own wrapper (`binder`, `binder-full`, by any
/// path): a plugin leaves such a task to it (SEMANTICS §4.2: the user's line wins over a
/// site default; with an explicit plugin request, the two are one refusal).
pub fn is_wrapper(command: &str) -> bool {
    let name = command.rsplit('/').next().unwrap_or(command);
    name == "binder" || name == "binder-full"
}

/// The key a job's plan is found by in the node cache and the ledger: `job_text` and
/// the envelope's part, composed in one place so that no front can leave the envelope out
/// (which would split one job's plan between the executables and the plugins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobKey(String);

impl JobKey {
    /// The key of a job that runs `shape` (its bytes) with `requests`, the site file's
    /// bytes, the GPU variables `env` gives, inside `envelope`: made only by
    /// [`super::job::JobSpec::new`], the one job assembly.
    pub(super) fn new(
        shape: &str,
        requests: &Requests,
        site: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        envelope: &crate::envelope::Envelope,
    ) -> JobKey {
        JobKey(job_text(shape, requests, site, env) + &envelope.key())
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The site file's path (`BINDER_SITE_FILE`, else `/etc/binder/site.yaml`) and bytes,
/// unparsed; `None` when there is none. `Err` says why it cannot be read.
pub fn site_text(
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(String, String)>, (String, String)> {
    let path = env("BINDER_SITE_FILE").unwrap_or_else(|| SITE_FILE.to_owned());
    if !std::path::Path::new(&path).exists() {
        return Ok(None);
    }
    // Size checked before reading; a FIFO or device (`/dev/zero`) is refused unread.
    let bytes = crate::input::read_bounded(std::path::Path::new(&path), MAX_SITE_BYTES)
        .map_err(|why| (path.clone(), format!("cannot read the site file: {why}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| (path.clone(), "the site file is not UTF-8 text".to_owned()))?;
    Ok(Some((path, text)))
}

/// Where the site's reservation lives (SEMANTICS §12): one file, read by every binder on
/// the node.
pub const SITE_FILE: &str = "/etc/binder/site.yaml";

/// The largest site file read.
const MAX_SITE_BYTES: usize = 64 * 1024;

/// The installed catalog the plugins default to (`catalog=` and `conf.catalog` change it).
pub const CATALOG: &str = "/usr/share/binder/shapes";

/// Where a catalog name on the command line is looked for, in order: the repository's
/// `shapes/` when binder runs from a clone, the catalog installed beside the executable
/// (`BIN/../share/binder/shapes`, so `/usr/local/bin/binder` finds
/// `/usr/local/share/binder/shapes`), and [`CATALOG`].
pub fn catalog_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("shapes")];
    if let Some(prefix) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(std::path::Path::to_path_buf))
    {
        dirs.push(prefix.join("share/binder/shapes"));
    }
    dirs.push(PathBuf::from(CATALOG));
    dirs
}

/// The shape names the catalog directories `dirs` hold (their `NAME.yaml` files), sorted
/// and once each: what a misspelt name is matched against, on the command line and in
/// both plugins.
pub fn catalog_names(dirs: &[PathBuf]) -> Vec<String> {
    let mut names: Vec<String> = dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            file.strip_suffix(".yaml").map(str::to_owned)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// A shape named on the command line (`binder cores-packed -- ./app`, as the plugins
/// take it): the file itself when it exists or has a `/`, else `NAME.yaml` (or the
/// `NAME.yaml` given as is) of the first of [`catalog_dirs`] that has it, else the name as
/// given (reading it then says no such file).
pub fn resolve_shape(arg: &std::path::Path) -> PathBuf {
    let name = arg.to_string_lossy();
    if name.contains('/') || name.is_empty() || arg.exists() {
        return arg.to_path_buf();
    }
    // `cores-packed.yaml`, not in the working directory: the catalog's file of that name.
    let file = if name.ends_with(".yaml") || name.ends_with(".yml") {
        name.into_owned()
    } else {
        format!("{name}.yaml")
    };
    catalog_dirs()
        .into_iter()
        .map(|dir| dir.join(&file))
        .find(|p| p.is_file())
        .unwrap_or_else(|| arg.to_path_buf())
}

/// The shape's file, for the plugins (`--binder=`, `-o binder=`): `name` as given when it names a file (has a `/` or ends in `.yaml`),
/// relative to the job's working directory (`cwd`); else `catalog/name.yaml`.
pub fn shape_path(name: &str, cwd: Option<&str>, catalog: &std::path::Path) -> PathBuf {
    if name.contains('/') || name.ends_with(".yaml") || name.ends_with(".yml") {
        let path = PathBuf::from(name);
        let path = match cwd {
            Some(dir) if path.is_relative() => std::path::Path::new(dir).join(path),
            _ => path,
        };
        // A bare `cores-packed.yaml` that the job's directory does not hold: the
        // catalog's file of that name.
        if !name.contains('/') && !path.is_file() && catalog.join(name).is_file() {
            return catalog.join(name);
        }
        path
    } else {
        catalog.join(format!("{name}.yaml"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_plain_line_is_read() {
        let line = LaunchLine::parse(&os(&[
            "binder",
            "--local-rank=1",
            "s.yaml",
            "--local-size",
            "4",
            "--report",
            "--",
            "a",
            "--",
            "b",
        ]))
        .expect("plain");
        assert_eq!(line.shape, PathBuf::from("s.yaml"));
        assert_eq!(
            (line.local_rank, line.local_size, line.report),
            (Some(1), Some(4), true)
        );
        assert_eq!(line.command, os(&["a", "--", "b"]));
    }

    #[test]
    fn anything_else_is_none() {
        for line in [
            &["binder", "-n", "s.yaml", "--", "a"][..],
            &["binder", "s.yaml", "--report=1", "--", "a"],
            &["binder", "--local-rank", "x", "s.yaml", "--", "a"],
            &["binder", "node", "--", "a"],
            &["binder", "s.yaml", "--"],
            &["binder", "s.yaml"],
        ] {
            assert_eq!(LaunchLine::parse(&os(line)), None, "{line:?}");
        }
    }

    #[test]
    fn report_words() {
        assert_eq!(report_word(None), Ok(false));
        assert_eq!(report_word(Some(" Yes ")), Ok(true));
        assert_eq!(report_word(Some("")), Ok(false));
        assert!(report_word(Some("maybe"))
            .unwrap_err()
            .contains("\"maybe\""));
    }

    #[test]
    fn one_list_of_off_words_for_every_switch() {
        for off in ["off", "OFF", " none ", "0", "no", "false", ""] {
            assert_eq!(switch("X", Some(off)), Ok(false), "{off:?}");
        }
        for on in ["on", "1", "Yes", "true"] {
            assert_eq!(switch("X", Some(on)), Ok(true), "{on:?}");
        }
        let e = switch("-o binder-report", Some("of")).unwrap_err();
        assert!(e.starts_with("-o binder-report=\"of\""), "{e}");
        assert!(e.contains("off") && e.contains("true"), "{e}");
        for shape_off in ["off", "none", "0", "No", "false"] {
            assert!(is_off(shape_off), "{shape_off}");
        }
        assert!(!is_off("cores-packed") && !is_off(""));
    }

    #[test]
    fn the_key_changes_with_every_input() {
        let none = |_: &str| None;
        let gpu_env = |k: &str| (k == "SLURM_JOB_GPUS").then(|| "0".to_owned());
        let base = job_text("s", &Requests::default(), None, &none);
        let with_gpus = job_text("bind: gpu-local", &Requests::default(), None, &gpu_env);
        // A CPU-only shape's plan is the same whatever GPUs a task inherits (Flux's
        // gpu-affinity=per-task gives each rank its own); a GPU shape's is not.
        assert_eq!(base, job_text("s", &Requests::default(), None, &gpu_env));
        assert_ne!(
            job_text("bind: gpu-local", &Requests::default(), None, &none),
            with_gpus
        );
        let per_task = Requests {
            gpus_per_task: Some(1),
            ..Requests::default()
        };
        assert_ne!(
            job_text("s", &per_task, None, &none),
            job_text("s", &per_task, None, &gpu_env)
        );
        let shared = Requests {
            share: true,
            ..Requests::default()
        };
        for other in [
            job_text("t", &Requests::default(), None, &none),
            job_text("s", &shared, None, &none),
            job_text("s", &Requests::default(), Some("reserve: []"), &none),
            job_text("s", &per_task, None, &none),
        ] {
            assert_ne!(base, other);
        }
    }
}
