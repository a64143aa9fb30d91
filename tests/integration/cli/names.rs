//! Habits of MPI and Slurm users on the command line (#36): a catalog name instead of a
//! path, as the plugins take it, and a forgotten `--`.

use std::process::Command;

use crate::common::{binder, binder_exe, root, run};
use binder::exit_code::{REFUSED, SUCCESS};

/// What a launch of `args` exports as BINDER_CPUS, run from `dir` with `exe`.
fn cpus(exe: &std::path::Path, dir: &std::path::Path, shape: &str) -> String {
    let mut cmd = Command::new(exe);
    cmd.current_dir(dir)
        .args([
            "--local-rank",
            "0",
            "--local-size",
            "2",
            shape,
            "--",
            "sh",
            "-c",
        ])
        .arg("echo \"$BINDER_CPUS\"");
    for (k, v) in binder().get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    String::from_utf8(run(&mut cmd, SUCCESS).stdout).unwrap()
}

/// `binder cores-packed -- CMD` from a clone is `shapes/cores-packed.yaml`; from anywhere
/// else, the catalog installed beside the executable (`BIN/../share/binder/shapes`).
#[test]
fn catalog_names_resolve_in_the_clone_and_the_installed_catalog() {
    let exe = std::path::Path::new(binder_exe());
    let by_path = cpus(exe, root(), "shapes/cores-packed.yaml");
    assert_eq!(cpus(exe, root(), "cores-packed"), by_path);
    // An installed tree: bin/binder, bin/binder-full, share/binder/shapes/*.yaml.
    let prefix = crate::common::scratch().join("prefix");
    let (bin, shapes) = (prefix.join("bin"), prefix.join("share/binder/shapes"));
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&shapes).unwrap();
    for name in ["binder", "binder-full"] {
        std::fs::copy(exe.with_file_name(name), bin.join(name)).unwrap();
    }
    std::fs::copy(
        root().join("shapes/cores-packed.yaml"),
        shapes.join("cores-packed.yaml"),
    )
    .unwrap();
    let elsewhere = std::env::temp_dir();
    assert_eq!(
        cpus(&bin.join("binder"), &elsewhere, "cores-packed"),
        by_path
    );
    // The file name as the catalog lists it (`ls shapes/`) is the same shape (#46).
    assert_eq!(
        cpus(&bin.join("binder"), &elsewhere, "cores-packed.yaml"),
        by_path
    );
    assert_eq!(cpus(exe, root(), "cores-packed.yaml"), by_path);
    // `binder explain` takes catalog names too.
    let out = run(
        Command::new(bin.join("binder"))
            .current_dir(&elsewhere)
            .args(["explain", "--local-size", "2", "cores-packed"]),
        SUCCESS,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("# binder explain ")
            && text.contains("share/binder/shapes/cores-packed.yaml"),
        "{text}"
    );
    // A name in no catalog says where it looked.
    let out = run(
        Command::new(bin.join("binder"))
            .current_dir(&elsewhere)
            .args(["no-such-shape", "--", "true"]),
        REFUSED,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no catalog shape of that name")
            && err.contains("the catalog has cores-packed")
            && err.contains("looked in shapes, ")
            && err.contains("share/binder/shapes"),
        "{err}"
    );
    // `explain` says the same.
    let out = run(
        Command::new(bin.join("binder"))
            .current_dir(&elsewhere)
            .args(["explain", "no-such-shape"]),
        REFUSED,
    );
    let again = String::from_utf8(out.stderr).unwrap();
    assert_eq!(again, err);
    let _ = std::fs::remove_dir_all(&prefix);
}

/// `binder shape.yaml ./app`, the `--` forgotten: the one line says to add it.
#[test]
fn a_forgotten_double_dash_says_to_add_it() {
    let out = run(
        binder().args(["shapes/cores-packed.yaml", "./app", "arg"]),
        REFUSED,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        err.trim(),
        "binder: unexpected argument './app' found; put the command after `--`: `binder SHAPE -- ./app …`"
    );
}

/// #56, what a user types first: a misspelt catalog name gets the nearest name and the
/// catalog's names, never advice that holds only in a clone (`ls shapes/`).
#[test]
fn a_misspelt_catalog_name_gets_a_did_you_mean() {
    let out = run(binder().args(["--dry-run", "cores-pakced"]), REFUSED);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("did you mean `cores-packed`?"), "{err}");
    assert!(
        err.contains("gpu-local") && err.contains("looked in"),
        "{err}"
    );
    assert!(!err.contains("ls shapes/"), "{err}");
}

/// #56: a bad option value keeps clap's possible values and its nearest one, on one line.
#[test]
fn a_bad_option_value_lists_the_possible_ones() {
    for (args, want) in [
        (
            &["--dry-run", "--format", "jsn", "shapes/cores-packed.yaml"][..],
            "[possible values: text, json",
        ),
        (
            &["convert", "--from", "mvapich", "--", "-np", "2"],
            "[possible values: ompi, ompi5, mpich, impi, slurm",
        ),
    ] {
        let out = run(binder().args(args), REFUSED);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = run(
        binder().args(["--dry-run", "--format", "jsn", "x.yaml"]),
        REFUSED,
    );
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("did you mean 'json'?"), "{err}");
}

/// #56: `binder help` and `binder help convert` are help, as with git and cargo, not a
/// shape named `help`; `--help` says what a shape argument may name.
#[test]
fn help_is_a_word_too() {
    let out = run(binder().arg("help"), SUCCESS);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Usage: binder"), "{text}");
    assert!(
        text.contains("catalog name") && text.contains("/usr/share/binder/shapes"),
        "{text}"
    );
    let out = run(binder().args(["help", "convert"]), SUCCESS);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Usage: binder convert"), "{text}");
}

/// #54: a user's own arguments quoted in a refusal (`--ge`, `binder convert`) never carry
/// a byte the terminal acts on (ESC, BEL): escaped, on one line.
#[test]
fn quoted_arguments_never_reach_the_terminal_raw() {
    for args in [
        &[
            "--dry-run",
            "--local-size",
            "1",
            "--ge",
            "-binding linear:\x1b[31mX\x07",
        ][..],
        &[
            "convert",
            "--from",
            "ompi",
            "--",
            "--map-by",
            "core\x1b]0;t\x07",
        ],
    ] {
        let out = run(binder().args(args), REFUSED);
        assert_eq!(
            out.stderr.iter().filter(|&&b| b == b'\n').count(),
            1,
            "{args:?}"
        );
        assert!(
            !out.stderr.iter().any(|&b| b == 0x1b || b == 0x07),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("\\u{1b}"),
            "{args:?}"
        );
    }
}

/// #54: the fail-open warning says what the fallback looked at: under
/// `BINDER_KERNEL_VIEW=in-sight` it does not look for the user's own other jobs, and says
/// so, instead of claiming to have planned around them.
#[test]
fn the_fail_open_warning_says_what_was_looked_at() {
    for (view, want) in [
        ("in-sight", "your own other jobs are not looked for"),
        ("all", "(yours and other users')"),
    ] {
        let out = run(
            binder()
                .env("BINDER_LEDGER_DIR", "relative/ledger")
                .env("BINDER_KERNEL_VIEW", view)
                .args([
                    "--local-rank",
                    "0",
                    "--local-size",
                    "1",
                    "shapes/bind-none.yaml",
                    "--",
                    "true",
                ]),
            SUCCESS,
        );
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.contains("node ledger not used") && err.contains(want),
            "{view}: {err}"
        );
    }
}

/// Bash completes catalog names for the shape argument (#65: it offered only files), in
/// the clone's `shapes/`, for a launch line and `binder explain`, never for a subcommand
/// that takes no shape or after `--`.
#[test]
fn bash_completes_catalog_names() {
    if !crate::common::prerequisite(crate::common::has("bash"), "bash") {
        return;
    }
    let complete = |words: &str| -> Vec<String> {
        let script = format!(
            ". completions/binder.bash; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             _binder_with_catalog binder \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\""
        );
        let out = Command::new("bash")
            .args(["-c", &script])
            .current_dir(root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let got = complete("binder cores-pa");
    assert!(got.contains(&"cores-packed".to_owned()), "{got:?}");
    let got = complete("binder --dry-run --local-size 2 gpu-numa");
    assert!(
        got.contains(&"gpu-numa-node".to_owned()) && got.contains(&"gpu-numa-exclusive".to_owned()),
        "{got:?}"
    );
    assert!(complete("binder explain cores-pa").contains(&"cores-packed".to_owned()));
    assert!(!complete("binder convert cores-pa").contains(&"cores-packed".to_owned()));
    assert!(!complete("binder cores-packed -- cores-pa").contains(&"cores-packed".to_owned()));
}
