use super::*;
use clap::CommandFactory;

#[test]
fn verify_cli() {
    Cli::command().debug_assert();
}

#[test]
fn command_after_double_dash() {
    let cli = Cli::try_parse_from(["binder", "s.yaml", "--", "./app", "-x"]).unwrap();
    assert_eq!(cli.shape.unwrap().to_str(), Some("s.yaml"));
    assert_eq!(cli.command, ["./app", "-x"]);
}

#[test]
fn schema_subcommand_needs_no_shape() {
    let cli = Cli::try_parse_from(["binder", "schema"]).unwrap();
    assert!(matches!(cli.action, Some(Action::Schema)));
}

#[test]
fn errors_are_one_line_without_clap_tips() {
    let e = Cli::try_parse_from(["binder", "-n", "--local-size", "-1", "s.yaml"]).unwrap_err();
    let line = one_line(&e, &[]);
    assert!(!line.contains('\n') && !line.contains("'-- -1'"), "{line}");
    assert!(line.contains("not negative"), "{line}");
    let e = Cli::try_parse_from(["binder", "-n", "--local-size", "x", "s.yaml"]).unwrap_err();
    let line = one_line(&e, &[]);
    assert!(
        line.starts_with("invalid value 'x' for '--local-size <NUM>'"),
        "{line}"
    );
    assert!(line.ends_with("see `binder --help`"), "{line}");
}

#[test]
fn habits_get_the_right_advice() {
    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    // `--dryrun`: the option meant.
    let args = os(&["binder", "--dryrun", "s.yaml"]);
    let line = one_line(&Cli::try_parse_from(&args).unwrap_err(), &args);
    assert!(line.contains("did you mean `--dry-run`?"), "{line}");
    // `-n 4 SHAPE` (an MPI habit): not "put the command after --".
    let args = os(&["binder", "-n", "4", "shapes/cores-packed.yaml"]);
    let line = one_line(&Cli::try_parse_from(&args).unwrap_err(), &args);
    assert!(
        line.contains("--local-size 4") && line.contains("-n is --dry-run"),
        "{line}"
    );
    assert!(!line.contains("put the command after"), "{line}");
    // A number after the command is the command's.
    let args = os(&["binder", "s.yaml", "--", "app", "-n", "4", "x"]);
    assert!(task_count_habit(&args).is_none());
}

/// The launch-line fast path gives what clap gives, and leaves everything else to it.
#[test]
fn launch_line_fast_path_agrees_with_clap() {
    let os = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
    for line in [
        &["binder", "s.yaml", "--", "./app"][..],
        &["binder", "shapes/x.yaml", "--", "sh", "-c", "echo -- -n"],
        &["binder", "s.yaml", "--", "--weird-app"],
        &["binder", "s", "--", "a", "--", "b"],
        &[
            "binder",
            "--local-rank",
            "3",
            "--local-size",
            "8",
            "s.yaml",
            "--",
            "a",
        ],
        &[
            "binder",
            "s.yaml",
            "--local-size=8",
            "--local-rank=0",
            "--",
            "a",
        ],
        &[
            "binder",
            "--report",
            "s.yaml",
            "--local-rank",
            "+2",
            "--",
            "a",
        ],
        &["binder", "s.yaml", "--report", "--", "a"],
    ] {
        let fast = Cli::parse_launch_line(&os(line)).expect("fast path");
        let slow = Cli::try_parse_from(line).unwrap();
        assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{line:?}");
    }
    for line in [
        &["binder", "-n", "s.yaml", "--", "a"][..],
        &["binder", "s.yaml", "--report", "--report", "--", "a"],
        &["binder", "s.yaml", "--report=1", "--", "a"],
        &[
            "binder",
            "--local-rank",
            "1",
            "--local-rank",
            "2",
            "s.yaml",
            "--",
            "a",
        ],
        &["binder", "--local-rank", "-1", "s.yaml", "--", "a"],
        &["binder", "--local-rank", "x", "s.yaml", "--", "a"],
        &["binder", "--local-rank", "s.yaml", "--", "a"],
        &["binder", "--local-size", "--", "a"],
        &["binder", "--local-rank", "1", "--", "a"],
        &["binder", "a.yaml", "b.yaml", "--", "a"],
        &["binder", "--gpus-per-task", "1", "s.yaml", "--", "a"],
        &["binder", "--local-rank", "1", "schema", "--", "a"],
        &["binder", "", "--", "a"],
        &["binder", "s.yaml"],
        &["binder", "s.yaml", "--"],
        &["binder", "schema", "--", "a"],
        &["binder", "explain", "--", "a"],
        &["binder", "--", "a"],
        &["binder", "-", "--", "a"],
    ] {
        assert!(Cli::parse_launch_line(&os(line)).is_none(), "{line:?}");
    }
}

#[test]
fn shape_is_required() {
    assert!(Cli::try_parse_from(["binder", "--dry-run"]).is_err());
}
