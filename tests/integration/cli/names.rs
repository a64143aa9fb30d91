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
        err.contains("no catalog shape of that name in shapes, ")
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
