//! The hand-kept FFI (`src/ffi.rs`) against Slurm's installed `<slurm/spank.h>`, and the
//! built plugin's exported symbols: a drift fails here, not in a task.

use std::path::PathBuf;
use std::process::Command;

use binder_spank::ffi;

/// The one rule for prerequisites: a failure under `CI=true`, a printed skip elsewhere.
fn have(what: &str, ok: bool) -> bool {
    if !ok {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "{what} is missing under CI=true"
        );
        eprintln!("SKIPPED: {what} is missing");
    }
    ok
}

/// The values a C compiler gives for the header's names, in `names`' order.
fn c_values(names: &[&str]) -> Option<Vec<u64>> {
    let header = std::path::Path::new("/usr/include/slurm/spank.h");
    let cc = Command::new("cc").arg("--version").output().is_ok();
    if !have("cc and libslurm-dev's spank.h", cc && header.is_file()) {
        return None;
    }
    let dir = std::env::temp_dir().join(format!("binder-spank-h-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prints: String = names
        .iter()
        .map(|n| format!("printf(\"%llu\\n\", (unsigned long long)({n}));\n"))
        .collect();
    let source = format!(
        "#include <stdio.h>\n#include <stddef.h>\n#include <slurm/spank.h>\n#include <slurm/slurm.h>\nint main(void) {{\n{prints}return 0;\n}}\n"
    );
    std::fs::write(dir.join("h.c"), source).unwrap();
    let built = Command::new("cc")
        .arg(dir.join("h.c"))
        .arg("-o")
        .arg(dir.join("h"))
        .status()
        .unwrap();
    assert!(built.success(), "cc could not compile against spank.h");
    let out = Command::new(dir.join("h")).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect(),
    )
}

#[test]
fn ffi_matches_spank_h() {
    let names = [
        "S_JOB_ID",
        "S_JOB_STEPID",
        "S_JOB_NODEID",
        "S_JOB_LOCAL_TASK_COUNT",
        "S_JOB_ARGV",
        "S_TASK_ID",
        "S_TASK_GLOBAL_ID",
        "SLURM_INTERACTIVE_STEP",
        "SLURM_BATCH_SCRIPT",
        "SLURM_EXTERN_CONT",
        "SLURM_PENDING_STEP",
        "S_CTX_LOCAL",
        "S_CTX_REMOTE",
        "ESPANK_SUCCESS",
        "sizeof(struct spank_option)",
        "offsetof(struct spank_option, has_arg)",
        "offsetof(struct spank_option, cb)",
        "SLURM_VERSION_NUMBER",
    ];
    let Some(c) = c_values(&names) else { return };
    let ours: Vec<u64> = vec![
        ffi::item::S_JOB_ID as u64,
        ffi::item::S_JOB_STEPID as u64,
        ffi::item::S_JOB_NODEID as u64,
        ffi::item::S_JOB_LOCAL_TASK_COUNT as u64,
        ffi::item::S_JOB_ARGV as u64,
        ffi::item::S_TASK_ID as u64,
        ffi::item::S_TASK_GLOBAL_ID as u64,
        u64::from(ffi::SLURM_INTERACTIVE_STEP),
        u64::from(ffi::SLURM_BATCH_SCRIPT),
        u64::from(ffi::SLURM_EXTERN_CONT),
        u64::from(ffi::SLURM_PENDING_STEP),
        ffi::S_CTX_LOCAL as u64,
        ffi::S_CTX_REMOTE as u64,
        ffi::ESPANK_SUCCESS as u64,
        size_of::<ffi::SpankOption>() as u64,
        std::mem::offset_of!(ffi::SpankOption, has_arg) as u64,
        std::mem::offset_of!(ffi::SpankOption, cb) as u64,
        u64::from(binder_spank::SLURM_VERSION_NUMBER),
    ];
    for ((name, c), ours) in names.iter().zip(&c).zip(&ours) {
        assert_eq!(c, ours, "{name}: spank.h says {c}, src/ffi.rs {ours}");
    }
}

/// The built plugin (beside this test's directory) exports what slurmstepd looks up.
#[test]
fn the_plugin_exports_the_spank_symbols() {
    let exe = std::env::current_exe().unwrap();
    let so: PathBuf = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libbinder_spank.so");
    assert!(so.is_file(), "{} not built", so.display());
    let Ok(out) = Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(&so)
        .output()
    else {
        have("readelf (binutils)", false);
        return;
    };
    let text = String::from_utf8(out.stdout).unwrap();
    for symbol in [
        "plugin_name",
        "plugin_type",
        "plugin_version",
        "spank_plugin_version",
        "slurm_spank_init",
        "slurm_spank_task_init",
    ] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().last() == Some(symbol) && !l.contains(" UND ")),
            "{symbol} is not exported by {}",
            so.display()
        );
    }
    // No hwloc-free promise here: the plugin plans, so it links libhwloc; it must not
    // link Slurm's library itself (slurmstepd provides the spank_* symbols).
    let needed = Command::new("readelf")
        .args(["-d"])
        .arg(&so)
        .output()
        .unwrap();
    let needed = String::from_utf8(needed.stdout).unwrap();
    assert!(!needed.contains("libslurm"), "{needed}");
}
