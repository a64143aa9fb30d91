//! The task as a process: its exit status passes through, it keeps binder's PID and gets
//! its signals, bad input never runs it, and it inherits neither binder's hwloc trimming
//! nor its signal dispositions.

use super::*;

#[test]
fn exit_status_passes_through() {
    run(
        binder().args(["shapes/cores-packed.yaml", "--", "sh", "-c", "exit 7"]),
        7,
    );
    let out = run(
        binder().args(["shapes/cores-packed.yaml", "--", "no-such-command-xyz"]),
        NOT_FOUND,
    );
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("command `no-such-command-xyz` not found"));
    run(
        binder().args(["shapes/cores-packed.yaml", "--", "/etc/passwd"]),
        NOT_EXECUTABLE,
    );
    run(
        binder().args(["shapes/cores-packed.yaml", "--", "./shapes"]),
        NOT_EXECUTABLE,
    );
}

#[test]
fn the_pid_is_the_tasks_and_signals_reach_it() {
    let mut child = binder()
        .args(["shapes/cores-packed.yaml", "--", "sh", "-c"])
        .arg("trap 'echo got-term; exit 3' TERM; echo $$; while :; do sleep 0.05; done")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(
        line.trim(),
        child.id().to_string(),
        "binder execs, so the task keeps its PID"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    line.clear();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "got-term\n");
    assert_eq!(child.wait().unwrap().code(), Some(3));
}

#[test]
fn bad_input_never_runs_the_command() {
    let dir = crate::common::scratch().join("never");
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("ran");
    let touch = ["--", "touch", marker.to_str().unwrap()];
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        (vec!["tests/fixtures/shapes/typo-key.yaml"], vec![]),
        (vec!["tests/fixtures/shapes/too-many-cores.yaml"], vec![]),
        (vec!["no-such-shape.yaml"], vec![]),
        (
            vec!["--local-size", "4096", "shapes/cores-packed.yaml"],
            vec![],
        ),
        (
            vec!["shapes/cores-packed.yaml"],
            vec![
                ("OMPI_COMM_WORLD_LOCAL_RANK", "x"),
                ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ],
        ),
        (
            vec!["shapes/cores-packed.yaml"],
            vec![("PALS_LOCAL_RANKID", "0")],
        ),
    ];
    for (args, env) in cases {
        let mut cmd = binder();
        cmd.args(&args).args(touch).envs(env.iter().copied());
        run(&mut cmd, REFUSED);
        assert!(!marker.exists(), "{args:?} {env:?} ran the command");
    }
    run(
        binder().args(["shapes/cores-packed.yaml"]).args(touch),
        SUCCESS,
    );
    assert!(marker.exists(), "the control case runs it");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// binder trims hwloc's host discovery (plugins, x86 backend) through environment
/// variables; the task must not inherit them, and a user's own setting must survive.
/// Cold launches (which load hwloc) with the ledger on and off, with `--verbose` (which
/// binds through hwloc too), and warm: until nextest ran this test in a process of its
/// own, with a cold cache, the cold launch's task got the blocklist (the second ask for
/// it found it set and returned nothing to scrub).
#[test]
fn hwloc_plugin_blocklist_does_not_leak_into_the_task() {
    let probe = ["--", "sh", "-c", "env | grep ^HWLOC_ || echo none"];
    // (flags, environment)
    type Case = (
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
    );
    let cases: [Case; 4] = [
        (&[], &[("BINDER_CACHE", "off")]),
        (&[], &[("BINDER_CACHE", "off"), ("BINDER_LEDGER", "off")]),
        (&["--verbose"], &[("BINDER_CACHE", "off")]),
        (&[], &[]),
    ];
    for (flags, env) in cases {
        let out = run(
            binder()
                .args(flags)
                .arg("shapes/cores-packed.yaml")
                .args(probe)
                .envs(env.iter().copied()),
            SUCCESS,
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "none\n",
            "{flags:?} {env:?}"
        );
    }
    let out = run(
        binder()
            .args([
                "shapes/cores-packed.yaml",
                "--",
                "sh",
                "-c",
                "echo $HWLOC_PLUGINS_BLACKLIST",
            ])
            .env("HWLOC_PLUGINS_BLACKLIST", "hwloc_gl"),
        SUCCESS,
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "hwloc_gl\n");
}

/// binder ignores SIGPIPE for itself (so `--dry-run | head` ends quietly) and starts from
/// the C runtime (`no_main`); the task must still get what a shell gives it: SIGPIPE not
/// ignored and nothing blocked. `--dry-run | head -c1` ends quietly.
#[test]
fn the_task_starts_with_default_signal_dispositions() {
    let got = task_output(
        &["shapes/cores-packed.yaml"],
        "grep -E '^Sig(Ign|Blk)' /proc/self/status",
    );
    // The same probe under taskset, which changes no signal state, is the reference:
    // whatever the harness ignores is inherited alike, and SIGPIPE must not differ.
    let reference = run(
        crate::common::isolated(&mut Command::new("taskset")).args([
            "-c",
            "0",
            "sh",
            "-c",
            "grep -E '^Sig(Ign|Blk)' /proc/self/status",
        ]),
        SUCCESS,
    );
    assert_eq!(got, String::from_utf8(reference.stdout).unwrap());
    assert!(got.contains("SigBlk:\t0000000000000000\n"), "{got}");
    let out = Command::new("sh")
        .args([
            "-c",
            &format!(
                "{} -n --local-size 64 --synthetic 'pack:64 core:64 pu:1' shapes/cores-packed.yaml | head -c1 >/dev/null; echo ${{PIPESTATUS:-}}$?",
                crate::common::binder_exe()
            ),
        ])
        .current_dir(crate::common::root())
        .env("BINDER_LEDGER_DIR", crate::common::private_ledger())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).is_empty(), "{out:?}");
}

/// `sh -c SCRIPT` with binder's path as `$1`, run as the tests run binder, in a node
/// ledger of its own (returned with the output).
fn shell(script: &str) -> (std::process::Output, std::path::PathBuf) {
    let ledger = crate::common::private_ledger();
    let mut cmd = Command::new("sh");
    crate::common::isolated(&mut cmd)
        .env("BINDER_LEDGER_DIR", &ledger)
        .args(["-c", script, "sh", crate::common::binder_exe()]);
    (cmd.output().unwrap(), ledger)
}

/// SEMANTICS §13.5, the lows: a stack limit too low for binder is a one-line refusal
/// when the hard limit is too (32 KiB: SIGSEGV, even `--version`, on 23e2c73), and a run
/// when only the soft one is, the task getting the user's limit back and none of
/// binder's variables. (At 8-16 KiB the program's own start may fail before any of
/// binder's code runs, depending on where the kernel puts the stack and how large the
/// environment is: `/bin/true` dies there too, now and then.)
#[test]
fn a_stack_limit_too_low_for_binder_is_a_refusal_or_a_run() {
    let (out, _) = shell("ulimit -s 32; exec \"$1\" --version");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(REFUSED), "{out:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("binder: ") && err.contains("ulimit -s"),
        "{err}"
    );
    let (out, _) = shell(
        "ulimit -S -s 32; exec \"$1\" shapes/cores-packed.yaml -- sh -c 'ulimit -S -s; echo ${BINDER_STACK_SOFT-unset}'",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "32\nunset\n");
}

/// SEMANTICS §13.5, the lows: under `ulimit -f 0` every write binder makes fails, and it
/// runs the task all the same (planned on the kernel's view, said in one warning): no
/// SIGXFSZ death (on 23e2c73, a dry-run and a launch both died of it), no empty claim
/// left in the ledger, and the task gets SIGXFSZ's default disposition, not binder's.
#[test]
fn a_file_size_limit_of_zero_is_a_run_never_a_signal() {
    let (out, _) = shell("ulimit -f 0; exec \"$1\" --dry-run shapes/cores-packed.yaml");
    assert!(out.status.success(), "{out:?}");
    let (out, ledger) = shell(
        "ulimit -f 0; exec \"$1\" shapes/cores-packed.yaml -- sh -c 'grep SigIgn /proc/self/status'",
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let ignored = stdout
        .trim()
        .strip_prefix("SigIgn:")
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(ignored & (1 << (libc::SIGXFSZ - 1)), 0, "{stdout}");
    let mut stack = vec![ledger];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.metadata().unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                assert!(
                    meta.len() > 0 || name == ".lock" || name.starts_with("ok."),
                    "an empty {name} left in the ledger"
                );
            }
        }
    }
}
