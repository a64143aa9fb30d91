//! Helpers shared by binder's test binaries: running the real executable, and finding
//! the real machine topologies in `../shared/topologies`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared`, or `None` (with a loud message) when it is missing outside CI. Under
/// `CI=true` a missing `../shared` fails the test: CI must never pass by skipping.
pub fn shared() -> Option<PathBuf> {
    let dir = root().join("../shared");
    if dir.join("topologies").is_dir() {
        return Some(dir.canonicalize().expect("shared dir"));
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("../shared/topologies is missing under CI=true: the real-topology tests cannot run");
    }
    eprintln!("SKIPPED: ../shared/topologies not found; real-topology tests did not run");
    None
}

/// A topology XML of `../shared/topologies` by file name.
pub fn topology(shared: &Path, name: &str) -> PathBuf {
    let path = shared.join("topologies").join(name);
    assert!(path.is_file(), "missing topology {}", path.display());
    path
}

/// The `binder` executable under test, run from the repository root with a clean
/// launcher environment (the test runner may itself run under one).
pub fn binder() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_binder"));
    cmd.current_dir(root());
    for (key, _) in std::env::vars() {
        if is_launcher_var(&key) {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Variables that would change binder's idea of which task it is.
pub fn is_launcher_var(key: &str) -> bool {
    [
        "OMPI_",
        "MPI_LOCAL",
        "MV2_",
        "PALS_",
        "JSM_",
        "FLUX_",
        "SLURM_",
        "BINDER_",
        "PMI_",
    ]
    .iter()
    .any(|p| key.starts_with(p))
}

/// Runs `cmd` and returns its output, panicking with everything needed to debug when the
/// exit code is not `code`.
pub fn run(cmd: &mut Command, code: i32) -> Output {
    let out = cmd.output().expect("binder runs");
    if out.status.code() != Some(code) {
        panic!(
            "expected exit {code}, got {:?}\ncommand: {cmd:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Whether a program is on PATH.
pub fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A python3 that can `import yaml`: Debian's, when another python3 comes first on PATH.
pub fn python_with_yaml() -> Option<String> {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|py| {
            Command::new(py)
                .args(["-c", "import yaml"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}
