//! The README's and the user guide's examples, run (issues #23, #46): every `$ …` line of
//! a ```` ```text ```` or ```` ```console ```` block is run from the repository root with
//! the binder under test first on `PATH`, and what it prints (stdout and stderr, in
//! order) must be the lines that follow it in the document, so pasted output cannot drift
//! from the tool. A `...` line
//! stands for any number of lines (an excerpt). Commands whose output depends on the host
//! are in [`HOST_DEPENDENT`], with the reason; any other command binder's README shows is
//! run, and a new kind of command (not `binder`, not `cat`) fails here until it is added
//! to one list or the other.
use crate::common;
use std::process::Command;

/// Commands (prefixes of the shown line, which may end in a comment) that are shown but
/// not compared, and why. Each must still be present in the
/// README (a stale entry fails), so the list cannot silently grow.
const HOST_DEPENDENT: &[(&str, &str)] = &[
    (
        "mpirun -np 1 binder one-core.yaml -- ./a &",
        "needs a 2-CPU node and a running job; tests/e2e/ledger.rs (two_jobs_then_a_third) runs this scenario under each launcher",
    ),
    (
        "binder one-core.yaml -- ./b &",
        "needs a 2-CPU node and a running job; tests/e2e/ledger.rs (two_jobs_then_a_third) runs it",
    ),
    (
        "mpirun -np 1 binder one-core.yaml -- ./c",
        "the refusal names live pids; tests/e2e/ledger.rs (two_jobs_then_a_third) checks it names both jobs",
    ),
];

/// The documents whose examples are run: the README and the user guide.
pub(crate) const DOCS: [&str; 2] = ["README.md", "docs/guide.md"];

/// One `$ command` of a document and the lines shown under it.
#[derive(Debug)]
struct Example {
    /// The document, as [`DOCS`] names it.
    file: &'static str,
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// The `$` lines of the text and console blocks of `readme` (the document `file`).
fn examples(file: &'static str, readme: &str) -> Vec<Example> {
    let mut out: Vec<Example> = Vec::new();
    // Inside a runnable block: whether its lines so far belong to a command (lines before
    // a block's first `$` are an excerpt and belong to none).
    let mut block: Option<bool> = None;
    let mut inside = false;
    for (n, line) in readme.lines().enumerate() {
        if let Some(info) = line.strip_prefix("```") {
            inside = !inside;
            block = (inside && matches!(info.trim(), "text" | "console")).then_some(false);
            continue;
        }
        let Some(owned) = block.as_mut() else {
            continue;
        };
        if let Some(command) = line.strip_prefix("$ ") {
            *owned = true;
            out.push(Example {
                file,
                line: n + 1,
                command: command.to_string(),
                expected: Vec::new(),
            });
        } else if *owned {
            out.last_mut()
                .expect("a command owns the line")
                .expected
                .push(line.trim_end().to_string());
        }
    }
    out
}

/// Whether `actual` is `expected`, where a `...` line of `expected` stands for any number
/// of lines.
fn matches(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(a, more)| a == first && matches(rest, more)),
    }
}

/// Runs one README command line as a user would from the repository root: `sh`, the
/// binder under test first on `PATH`, isolated as every test's binder is
/// ([`common::isolated`]). Returns the exit code and the output lines.
fn run(command: &str) -> (Option<i32>, Vec<String>) {
    let bin = std::path::Path::new(common::binder_exe()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    common::isolated(&mut cmd)
        .arg("-c")
        .arg(format!("exec 2>&1; {command}"))
        .env("PATH", path)
        .env("NO_COLOR", "1");
    let out = cmd.output().expect("sh runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let lines = text.lines().map(|l| l.trim_end().to_string()).collect();
    (out.status.code(), lines)
}

#[test]
fn every_readme_example_prints_what_the_readme_shows() {
    if common::shared().is_none() {
        return;
    }
    let examples: Vec<Example> = DOCS
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(common::root().join(file)).unwrap();
            examples(file, &text)
        })
        .collect();
    assert!(
        examples.iter().any(|e| e.file == "README.md"),
        "the README shows no example"
    );
    assert!(
        examples.len() >= 25,
        "found only {} examples",
        examples.len()
    );
    for (command, _) in HOST_DEPENDENT {
        assert!(
            examples.iter().any(|e| e.command.starts_with(command)),
            "HOST_DEPENDENT lists `{command}`, which no document shows any more"
        );
    }
    let mut failures = Vec::new();
    for example in &examples {
        if HOST_DEPENDENT
            .iter()
            .any(|(c, _)| example.command.starts_with(c))
        {
            continue;
        }
        // Leading `NAME=value` words set the environment, as in the shell.
        let program = example
            .command
            .split_whitespace()
            .find(|w| !w.contains('='))
            .unwrap_or_default();
        assert!(
            matches!(program, "binder" | "cat"),
            "{}:{}: `{}` is neither run here nor listed in HOST_DEPENDENT",
            example.file,
            example.line,
            example.command
        );
        let (code, actual) = run(&example.command);
        // A shown refusal ends with binder's one line and exit 125; anything else is 0.
        let refused = example
            .expected
            .last()
            .is_some_and(|l| l.starts_with("binder: ") && !l.starts_with("binder: warning"));
        let want = if refused { 125 } else { 0 };
        if code != Some(want) || !matches(&example.expected, &actual) {
            failures.push(format!(
                "{}:{}: $ {}\nexit {code:?} (want {want})\n--- the document shows\n{}\n--- binder prints\n{}\n",
                example.file,
                example.line,
                example.command,
                example.expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_elision_matches_any_run_of_lines_and_nothing_else() {
    let l = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(matches(&l(&["a", "...", "d"]), &l(&["a", "b", "c", "d"])));
    assert!(matches(&l(&["a", "...", "d"]), &l(&["a", "d"])));
    assert!(matches(&l(&["a", "..."]), &l(&["a", "b"])));
    assert!(!matches(&l(&["a", "...", "d"]), &l(&["a", "b", "c"])));
    assert!(!matches(&l(&["a", "b"]), &l(&["a", "b", "c"])));
    assert!(!matches(&l(&["a", "c"]), &l(&["a", "b"])));
}

#[test]
fn examples_are_read_from_text_and_console_blocks_only() {
    let readme = "```text\n$ binder a\nout 1\n$ cat b\nout 2\n```\nprose\n```yaml\n$ not run\n```\n    $ indented\n```console\nexcerpt\n$ binder c\n```\n";
    let found = examples("README.md", readme);
    let got: Vec<_> = found
        .iter()
        .map(|e| (e.command.as_str(), e.expected.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("binder a", vec!["out 1".to_string()]),
            ("cat b", vec!["out 2".to_string()]),
            ("binder c", vec![]),
        ]
    );
}

/// The Troubleshooting section's commands for the pool (issue #23: they must work on
/// Debian 12 under cgroup v1 and v2): hwloc's view of the allowed PUs and the cgroup's own
/// file, found through `/proc/self/cgroup` for either version, name the same CPUs on this
/// host, as binder's `count: all` plan does.
#[test]
fn the_troubleshooting_pool_commands_work_and_agree() {
    if !common::require_tool("hwloc-calc", "hwloc (hwloc-calc)") {
        return;
    }
    let guide = std::fs::read_to_string(common::root().join("docs/guide.md")).unwrap();
    let section = &guide[guide.find("## Troubleshooting").unwrap()..];
    let shown: Vec<&str> = section
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("$ "))
        .take(2)
        .collect();
    assert_eq!(shown.len(), 2, "the two pool commands in Troubleshooting");
    assert!(shown[0].starts_with("hwloc-calc"), "{}", shown[0]);
    assert!(shown[1].contains("/proc/self/cgroup"), "{}", shown[1]);
    // A chroot or container without /sys/fs/cgroup mounted has no cgroup file to read:
    // there only hwloc's line can be checked (said, not silently).
    let cgroup = std::path::Path::new("/sys/fs/cgroup");
    let mounted = cgroup.join("cgroup.controllers").exists() || cgroup.join("cpuset").is_dir();
    if !mounted {
        eprintln!(
            "note: no cgroup filesystem is mounted here; only `{}` is checked",
            shown[0]
        );
    }
    let shown = if mounted { &shown[..] } else { &shown[..1] };
    let sets: Vec<Vec<usize>> = shown
        .iter()
        .map(|command| {
            let (code, lines) = run(command);
            assert_eq!(code, Some(0), "$ {command}\n{}", lines.join("\n"));
            assert_eq!(lines.len(), 1, "$ {command}\n{}", lines.join("\n"));
            binder_core::procfs::parse_list(&lines[0])
                .unwrap_or_else(|| panic!("$ {command}: `{}` is not a CPU list", lines[0]))
        })
        .collect();
    if let Some(cgroup) = sets.get(1) {
        assert_eq!(&sets[0], cgroup, "hwloc and the cgroup disagree: {shown:?}");
    }
    let out = common::run(
        common::binder().args([
            "--dry-run",
            "--format",
            "json",
            "--local-size",
            "1",
            "shapes/cores-packed.yaml",
        ]),
        0,
    );
    let rank: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpus: Vec<usize> = serde_json::from_value(rank["cpus"].clone()).unwrap();
    assert_eq!(
        cpus, sets[0],
        "binder's pool (cores-packed, one task) is not the allowed set"
    );
}
