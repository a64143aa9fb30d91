//! Turns the parsed command line into a validated [`Config`], once. No clap type goes
//! past this file, and every cross-flag rule (a command needs no `--dry-run`, a foreign
//! topology needs one) is checked here so the stages never see a contradictory request.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cli::{Action as CliAction, Cli, CofArg, FormatArg, GpuIdsArg, PackArg};
use crate::error::Error;
use binder_plan::report::{CpusetFormat, Format};
use binder_plan::topology::Source;

/// What binder was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Print the JSON Schema of the shape format.
    Schema,
    /// Print the node's topology string, these entries reserved (besides the site's).
    Topology(Vec<String>),
    /// Print the node ledger's view of this node (`binder node`); JSON when true.
    Node(bool),
    /// Print the placement instead of running anything.
    DryRun,
    /// Explain the placement (`binder explain`).
    Explain,
    /// Bind this task and exec the command (program first).
    Launch(Vec<OsString>),
}

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// What to do.
    pub action: Action,
    /// The shape file (absent only for [`Action::Schema`]).
    pub shape: Option<PathBuf>,
    /// A Grid Engine request (`--ge`), overriding the shape's `options.ge`.
    pub ge: Option<String>,
    /// `--reserve` entries, added to the shape's `options.reserve`.
    pub reserve: Vec<String>,
    /// Where the topology comes from.
    pub source: Source,
    /// `--local-rank`, which wins over the launcher's.
    pub local_rank: Option<usize>,
    /// `--local-size`, which wins over the launcher's.
    pub local_size: Option<usize>,
    /// `--gpus-per-task`, which wins over the shape's.
    pub gpus_per_task: Option<usize>,
    /// Dry-run output format.
    pub format: Format,
    /// How cpusets are printed in the text form.
    pub cpuset_format: CpusetFormat,
    /// `--show-env`: the dry-run text prints each rank's environment.
    pub show_env: bool,
    /// Print this task's binding on stderr before exec.
    pub report: bool,
    /// Explain identity and inherited bindings on stderr.
    pub verbose: bool,
    /// `--pack`, overriding the shape's `options.pack`.
    pub pack: Option<binder_plan::shape::Pack>,
    /// `--share`: take units other jobs hold rather than refuse.
    pub share: bool,
    /// `--gpu-ids`: how GPU variables name the task's GPUs.
    pub gpu_ids: Option<binder_plan::shape::GpuIds>,
}

impl Config {
    /// Validates `cli`; `report_env` is the value of `BINDER_REPORT`, if set.
    pub fn from_cli(cli: Cli, report_env: Option<&str>) -> Result<Config, Error> {
        if let Some(CliAction::Node(n)) = &cli.action {
            let json = n.format == Some(crate::cli::NodeFormatArg::Json);
            return Ok(Config::bare(Action::Node(json), Source::Host));
        }
        if let Some(CliAction::Topology(t)) = &cli.action {
            let source = match (&t.topology, &t.synthetic, &t.ge_topology) {
                (Some(f), _, _) => Source::Xml(f.clone()),
                (_, Some(d), _) => Source::Synthetic(d.clone()),
                (_, _, Some(g)) => Source::GeString(g.clone()),
                _ => Source::Host,
            };
            return Ok(Config::bare(Action::Topology(t.reserve.clone()), source));
        }
        if let Some(CliAction::Explain(e)) = cli.action {
            let source = source_of(e.ge_topology, e.topology, e.synthetic, e.input);
            if e.local_size == Some(0) {
                return Err(Error::Usage("--local-size must be at least 1".into()));
            }
            if e.gpus_per_task
                .is_some_and(|g| g == 0 || g > MAX_GPUS_PER_TASK)
            {
                return Err(Error::Usage(format!(
                    "--gpus-per-task must be 1 to {MAX_GPUS_PER_TASK}"
                )));
            }
            let mut config = Config::bare(Action::Explain, source);
            // A catalog name, as a launch line takes it (`binder explain cores-packed`).
            config.shape = e.shape.map(|s| shape_arg(&s)).transpose()?;
            config.ge = e.ge;
            config.local_size = e.local_size;
            config.local_rank = e.local_rank;
            config.gpus_per_task = e.gpus_per_task;
            config.reserve = e.reserve;
            config.pack = e.pack.map(pack_of);
            config.share = e.share;
            return Ok(config);
        }
        let source = source_of(
            cli.ge_topology.clone(),
            cli.topology.clone(),
            cli.synthetic.clone(),
            cli.input.clone(),
        );
        let action = match (cli.action, cli.dry_run, cli.command.is_empty()) {
            (Some(CliAction::Schema), _, _) => Action::Schema,
            (Some(CliAction::Topology(_) | CliAction::Node(_) | CliAction::Explain(_)), _, _) => {
                unreachable!("answered above")
            }
            // main answers `generate` before a Config is built; here it prints the schema's
            // sibling, so treat it as a usage slip.
            (Some(CliAction::Generate { .. } | CliAction::Convert(_)), _, _) => {
                return Err(Error::Usage("`generate` is answered by the binder executable".into()))
            }
            (None, true, true) => Action::DryRun,
            // Adding --dry-run to an existing launch line previews it: the command is
            // shown nothing and never run.
            (None, true, false) => Action::DryRun,
            (None, false, true) => {
                return Err(Error::Usage(
                    "no COMMAND to run; put it after `--` (`binder SHAPE -- ./app`), or add --dry-run to see the placement".into(),
                ))
            }
            (None, false, false) => Action::Launch(cli.command),
        };
        if matches!(action, Action::Launch(_)) && source != Source::Host {
            return Err(Error::Usage(format!(
                "--topology/--synthetic/--input describe another machine ({source}), but binding needs this host's; use them with --dry-run"
            )));
        }
        let dry_run = action == Action::DryRun;
        if !dry_run && (cli.format.is_some() || cli.cpuset_output_format.is_some() || cli.show_env)
        {
            return Err(Error::Usage(
                "--format, --cpuset-output-format and --show-env shape the --dry-run output; add --dry-run or drop them".into(),
            ));
        }
        if cli.format == Some(FormatArg::Json) && cli.cpuset_output_format.is_some() {
            return Err(Error::Usage(
                "--cpuset-output-format is for the text form; JSON always has `cpus`, `cpulist` and `cpuset`".into(),
            ));
        }
        let report = binder_core::launch::line::report_word(report_env).map_err(Error::Usage)?;
        if cli.local_size == Some(0) {
            return Err(Error::Usage("--local-size must be at least 1".into()));
        }
        if cli.gpus_per_task.is_some_and(|g| g > MAX_GPUS_PER_TASK) {
            return Err(Error::Usage(format!(
                "--gpus-per-task above {MAX_GPUS_PER_TASK} is more GPUs than any node has"
            )));
        }
        if cli.gpus_per_task == Some(0) {
            return Err(Error::Usage(
                "--gpus-per-task must be at least 1; leave it out for no GPUs".into(),
            ));
        }
        if cli.shape.is_none() && cli.ge.is_none() && action != Action::Schema {
            return Err(Error::Usage(
                "a SHAPE file is required (or a Grid Engine request with --ge)".into(),
            ));
        }
        if matches!(cli.format, Some(FormatArg::Pe)) && cli.ge.is_none() && cli.shape.is_none() {
            return Err(Error::Usage(
                "--format pe needs a Grid Engine request".into(),
            ));
        }
        // A catalog name (`binder cores-packed -- ./app`) as the plugins take it.
        let shape = cli.shape.map(|s| shape_arg(&s)).transpose()?;
        Ok(Config {
            action,
            shape,
            ge: cli.ge,
            reserve: cli.reserve,
            source,
            local_rank: cli.local_rank,
            local_size: cli.local_size,
            gpus_per_task: cli.gpus_per_task,
            format: match cli.format {
                None | Some(FormatArg::Text) => Format::Text,
                Some(FormatArg::Json) => Format::Json,
                Some(FormatArg::Pe) => Format::Pe,
                Some(FormatArg::Rankfile) => Format::Rankfile,
                Some(FormatArg::Map) => Format::Map,
                Some(FormatArg::Svg) => Format::Svg,
            },
            cpuset_format: match cli.cpuset_output_format {
                None | Some(CofArg::Hwloc) => CpusetFormat::Hwloc,
                Some(CofArg::List) => CpusetFormat::List,
                Some(CofArg::Taskset) => CpusetFormat::Taskset,
            },
            show_env: cli.show_env,
            report: cli.report || report,
            verbose: cli.verbose,
            pack: cli.pack.map(pack_of),
            share: cli.share,
            gpu_ids: cli.gpu_ids.map(|g| match g {
                GpuIdsArg::Index => binder_plan::shape::GpuIds::Index,
                GpuIdsArg::Uuid => binder_plan::shape::GpuIds::Uuid,
            }),
        })
    }

    /// A subcommand's configuration: nothing but the action and the machine.
    fn bare(action: Action, source: Source) -> Config {
        Config {
            action,
            shape: None,
            ge: None,
            reserve: Vec::new(),
            source,
            local_rank: None,
            local_size: None,
            gpus_per_task: None,
            format: Format::Text,
            cpuset_format: CpusetFormat::Hwloc,
            show_env: false,
            report: false,
            verbose: false,
            pack: None,
            share: false,
            gpu_ids: None,
        }
    }
}

/// The shape's packing policy for a `--pack` value.
fn pack_of(pack: PackArg) -> binder_plan::shape::Pack {
    match pack {
        PackArg::Spread => binder_plan::shape::Pack::Spread,
        PackArg::Fill => binder_plan::shape::Pack::Fill,
        PackArg::Exclusive => binder_plan::shape::Pack::Exclusive,
    }
}

/// Where the topology comes from, by the top level's and `explain`'s flags. hwloc's `-i`
/// takes either; an existing file wins, as in hwloc-calc, and so does anything spelt like
/// a path (a typo must say "no such file", not "invalid synthetic topology").
fn source_of(
    ge_topology: Option<String>,
    topology: Option<PathBuf>,
    synthetic: Option<String>,
    input: Option<String>,
) -> Source {
    match (ge_topology, topology, synthetic, input) {
        (Some(g), _, _, _) => Source::GeString(g),
        (_, Some(f), _, _) => Source::Xml(f),
        (_, _, Some(d), _) => Source::Synthetic(d),
        (_, _, _, Some(i)) if looks_like_path(&i) => Source::Xml(i.into()),
        (_, _, _, Some(i)) => Source::Synthetic(i),
        _ => Source::Host,
    }
}

/// The most GPUs a task may ask for on the command line: more than any node has, small
/// enough that `tasks × GPUs` never overflows.
pub const MAX_GPUS_PER_TASK: usize = 4096;

/// Whether hwloc's `-i` value names a file rather than a synthetic description: it exists,
/// or it has a `/` or an `.xml` ending (synthetic descriptions have neither).
fn looks_like_path(value: &str) -> bool {
    Path::new(value).exists() || value.contains('/') || value.to_ascii_lowercase().ends_with(".xml")
}

/// A shape argument: a path, or a catalog name (`cores-packed`) as the plugins take it,
/// resolved in the catalog directories; a bare name found in none of them is refused with
/// where binder looked (the same for a launch, `--dry-run` and `explain`).
fn shape_arg(arg: &Path) -> Result<PathBuf, Error> {
    let shape = binder_core::launch::line::resolve_shape(arg);
    if let Some(name) = shape.to_str().filter(|n| {
        !n.contains('/') && !n.ends_with(".yaml") && !n.ends_with(".yml") && !n.is_empty()
    }) {
        if !Path::new(name).exists() {
            return Err(Error::Usage(no_such_shape(name)));
        }
    }
    Ok(shape)
}

/// The refusal for a shape name found nowhere: the nearest catalog name, and the names the
/// catalogs hold (with the directories binder looked in), not advice that holds only in
/// a clone.
fn no_such_shape(name: &str) -> String {
    let dirs = binder_core::launch::line::catalog_dirs();
    let names = binder_core::launch::line::catalog_names(&dirs);
    let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
    let near = binder_core::text::suggestion(name, &candidates)
        .map(|n| format!("did you mean `{n}`? "))
        .unwrap_or_default();
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let listed = if names.is_empty() {
        "no catalog is installed there".to_owned()
    } else {
        format!("the catalog has {}", names.join(", "))
    };
    format!(
        "no shape file `{}`, and no catalog shape of that name; {near}give a path to a shape file, or a catalog name ({listed}; looked in {})",
        binder_core::text::printable(name, 60),
        looked.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn config(args: &[&str]) -> Result<Config, String> {
        let cli = Cli::try_parse_from(args).map_err(|e| e.to_string())?;
        Config::from_cli(cli, None).map_err(|e| e.to_string())
    }

    #[test]
    fn dry_run_and_launch() {
        assert_eq!(
            config(&["binder", "--dry-run", "s.yaml"]).unwrap().action,
            Action::DryRun
        );
        let c = config(&["binder", "s.yaml", "--", "./app", "-x"]).unwrap();
        assert_eq!(c.action, Action::Launch(vec!["./app".into(), "-x".into()]));
        assert_eq!(c.source, Source::Host);
    }

    #[test]
    fn contradictions_are_refused() {
        // --dry-run added to a launch line previews it and runs nothing.
        let c = config(&["binder", "--dry-run", "s.yaml", "--", "app"]).unwrap();
        assert_eq!(c.action, Action::DryRun);
        let e = config(&["binder", "s.yaml"]).unwrap_err();
        assert!(e.contains("no COMMAND to run"), "{e}");
        let e = config(&["binder", "--synthetic", "core:2", "s.yaml", "--", "app"]).unwrap_err();
        assert!(e.contains("binding needs this host's"), "{e}");
        let e = config(&["binder", "--dry-run", "--local-size", "0", "s.yaml"]).unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        let e = config(&["binder", "--dry-run", "--gpus-per-task", "0", "s.yaml"]).unwrap_err();
        assert!(e.contains("--gpus-per-task"), "{e}");
        let e = config(&["binder", "--format", "json", "s.yaml", "--", "app"]).unwrap_err();
        assert!(e.contains("add --dry-run or drop them"), "{e}");
        let e = config(&[
            "binder", "-n", "--format", "json", "--cof", "list", "s.yaml",
        ])
        .unwrap_err();
        assert!(e.contains("is for the text form"), "{e}");
    }

    #[test]
    fn input_is_a_file_or_a_description() {
        let c = config(&["binder", "-n", "-i", "pack:2 core:2", "s.yaml"]).unwrap();
        assert_eq!(c.source, Source::Synthetic("pack:2 core:2".into()));
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
        let c = config(&["binder", "-n", "-i", manifest, "s.yaml"]).unwrap();
        assert_eq!(c.source, Source::Xml(manifest.into()));
        let c = config(&["binder", "-n", "-i", "nodes/typo.xml", "s.yaml"]).unwrap();
        assert_eq!(c.source, Source::Xml("nodes/typo.xml".into()));
    }

    #[test]
    fn report_from_flag_or_environment() {
        let cli = Cli::try_parse_from(["binder", "s.yaml", "--", "app"]).unwrap();
        assert!(Config::from_cli(cli, Some("1")).unwrap().report);
        for off in ["0", "no", "false", "OFF", ""] {
            let cli = Cli::try_parse_from(["binder", "s.yaml", "--", "app"]).unwrap();
            assert!(!Config::from_cli(cli, Some(off)).unwrap().report, "{off}");
        }
        let cli = Cli::try_parse_from(["binder", "s.yaml", "--", "app"]).unwrap();
        let e = Config::from_cli(cli, Some("maybe"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("BINDER_REPORT=\"maybe\" is neither on"), "{e}");
        assert!(
            config(&["binder", "--report", "s.yaml", "--", "app"])
                .unwrap()
                .report
        );
    }
}
