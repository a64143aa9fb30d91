//! The `binder` executable on its own: what it links and what it says without
//! `binder-full` beside it. (Its launches are tested with `binder-full` by the
//! integration tests, which find it beside `binder-full`.)

use std::path::PathBuf;
use std::process::Command;

const FRONT: &str = env!("CARGO_BIN_EXE_binder");

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared libraries an executable names (`DT_NEEDED`), as `readelf -d` prints them;
/// `None` without readelf (a failure under `CI=true`, a printed skip elsewhere).
fn needed(exe: &str) -> Option<Vec<String>> {
    let Ok(out) = Command::new("readelf").args(["-d", exe]).output() else {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "readelf (binutils) is missing under CI=true"
        );
        eprintln!("SKIPPED: readelf (binutils) is missing");
        return None;
    };
    assert!(out.status.success(), "readelf -d {exe}");
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| Some(l.split('[').nth(1)?.trim_end_matches(']').to_owned()))
            .collect(),
    )
}

/// The point of the split: a warm launch does not load libhwloc (nor libudev, libm).
/// binder-core depends on no hwloc, so this holds by construction; the ELF says so. And
/// it loads nothing at all (#37): `build.rs` links it static-pie, so no dynamic loader
/// runs (no `PT_INTERP`, no `DT_NEEDED`), unless glibc's static archives are missing or
/// `BINDER_DYNAMIC_FRONT=1` asked for a dynamic one.
#[test]
fn binder_is_static_and_linked_without_libhwloc() {
    let Some(front) = needed(FRONT) else { return };
    for lib in ["libhwloc", "libudev", "libm."] {
        assert!(
            !front.iter().any(|l| l.starts_with(lib)),
            "binder needs {lib}: {front:?}"
        );
    }
    if std::env::var("BINDER_DYNAMIC_FRONT").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: BINDER_DYNAMIC_FRONT=1 links binder dynamically");
        return;
    }
    assert!(front.is_empty(), "binder is not static: it needs {front:?}");
    let headers = Command::new("readelf")
        .args(["-l", FRONT])
        .output()
        .unwrap();
    let headers = String::from_utf8_lossy(&headers.stdout);
    assert!(
        !headers.contains("INTERP"),
        "binder asks for a dynamic loader:\n{headers}"
    );
    // Position-independent, so ASLR still applies: static-pie, not plain static.
    let kind = Command::new("readelf")
        .args(["-h", FRONT])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&kind.stdout)
            .contains("DYN (Position-Independent Executable file)"),
        "binder is not static-pie"
    );
}

/// `binder` without `binder-full` beside it says so, on one line, and exits 125.
#[test]
fn binder_without_binder_full_says_what_to_install() {
    let dir = std::env::temp_dir().join(format!("binder-alone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let alone = dir.join("binder");
    std::fs::copy(FRONT, &alone).unwrap();
    // Another test thread that forks while the copy's file is open for writing holds it
    // until its child execs (ETXTBSY, "Text file busy"): try again a moment later.
    let mut tries = 0;
    let out = loop {
        match Command::new(&alone)
            .args(["--dry-run", "shapes/cores-packed.yaml"])
            .current_dir(root())
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("binder: cannot run ")
            && err.contains("binder-full installed beside it")
            && err.contains("`cargo install --path .` installs both"),
        "{err}"
    );
}
