//! The hand-kept FFI (`src/ffi.rs`) against Slurm's installed `<slurm/spank.h>` (and every
//! other Slurm's headers named in `BINDER_SPANK_HEADERS`, a `:` list of include
//! directories: CI adds Slurm 25.11's, `tools/slurm-headers.sh`), and the built plugin's
//! exported symbols: a drift fails here, not in a task.

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

/// The include directories to check: the installed Slurm's, then `BINDER_SPANK_HEADERS`'.
fn include_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("/usr/include")];
    if let Ok(more) = std::env::var("BINDER_SPANK_HEADERS") {
        dirs.extend(more.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    dirs
}

/// Compiles `source` against the headers in `dir` with `-Werror`, and runs it when
/// `run`; its output.
fn compile(dir: &std::path::Path, source: &str, run: bool) -> Option<String> {
    let header = dir.join("slurm/spank.h");
    let cc = Command::new("cc").arg("--version").output().is_ok();
    if !have("cc and libslurm-dev's spank.h", cc && header.is_file()) {
        return None;
    }
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let work = std::env::temp_dir().join(format!("binder-spank-h-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("h.c"), source).unwrap();
    // Only compiled when not run: the spank_* functions are slurmstepd's, not linked here.
    let built = Command::new("cc")
        .args(["-Werror", "-Wall", "-I"])
        .arg(dir)
        .args(if run { &[][..] } else { &["-c"][..] })
        .arg(work.join("h.c"))
        .arg("-o")
        .arg(work.join("h"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cc could not compile against {}: {}",
        header.display(),
        String::from_utf8_lossy(&built.stderr)
    );
    let out = run.then(|| Command::new(work.join("h")).output().unwrap());
    let _ = std::fs::remove_dir_all(&work);
    Some(out.map_or_else(String::new, |o| String::from_utf8(o.stdout).unwrap()))
}

/// The values a C compiler gives for the header's names in `dir`, in `names`' order.
fn c_values(dir: &std::path::Path, names: &[&str]) -> Option<Vec<u64>> {
    let prints: String = names
        .iter()
        .map(|n| format!("printf(\"%llu\\n\", (unsigned long long)({n}));\n"))
        .collect();
    let source = format!(
        "#include <stdio.h>\n#include <stddef.h>\n#include <slurm/spank.h>\n#include <slurm/slurm.h>\nint main(void) {{\n{prints}return 0;\n}}\n"
    );
    let out = compile(dir, &source, true)?;
    Some(out.lines().map(|l| l.parse().unwrap()).collect())
}

/// `ffi.rs`'s functions, as the header's pointer types (`spank_err_t` and
/// `spank_context_t` are C enums, passed as `int`, which `ffi.rs` declares).
const FUNCTIONS: [(&str, &str); 7] = [
    ("spank_context", "spank_context_t (*)(void)"),
    (
        "spank_option_register",
        "spank_err_t (*)(spank_t, struct spank_option *)",
    ),
    (
        "spank_option_getopt",
        "spank_err_t (*)(spank_t, struct spank_option *, char **)",
    ),
    (
        "spank_get_item",
        "spank_err_t (*)(spank_t, spank_item_t, ...)",
    ),
    (
        "spank_getenv",
        "spank_err_t (*)(spank_t, const char *, char *, int)",
    ),
    (
        "spank_setenv",
        "spank_err_t (*)(spank_t, const char *, const char *, int)",
    ),
    ("spank_unsetenv", "spank_err_t (*)(spank_t, const char *)"),
];

/// Each function `ffi.rs` declares has the signature it declares, in every Slurm checked;
/// and `ffi.rs` declares no function this list lacks.
#[test]
fn functions_match_spank_h() {
    let ffi = include_str!("../src/ffi.rs");
    let declared: Vec<&str> = ffi
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub fn "))
        .filter_map(|l| l.split('(').next())
        .collect();
    let checked: Vec<&str> = FUNCTIONS.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        declared, checked,
        "every function of src/ffi.rs is checked here"
    );
    let body: String = FUNCTIONS
        .iter()
        .map(|(name, ty)| {
            format!(
                "typedef {};\n",
                ty.replacen("(*)", &format!("(*t_{name})"), 1)
            ) + &format!("static t_{name} p_{name} __attribute__((unused)) = {name};\n")
        })
        .collect();
    let source = format!("#include <slurm/spank.h>\n{body}int main(void) {{ return 0; }}\n");
    for dir in include_dirs() {
        compile(&dir, &source, false);
    }
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
    for (i, dir) in include_dirs().iter().enumerate() {
        let Some(c) = c_values(dir, &names) else {
            return;
        };
        matches(&names, &c, i == 0, dir);
    }
}

/// Each value's C side against `ffi.rs`'s; the Slurm version only for the Slurm the
/// plugin was built against (`built`).
fn matches(names: &[&str], c: &[u64], built: bool, dir: &std::path::Path) {
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
    for ((name, c), ours) in names.iter().zip(c).zip(&ours) {
        if *name == "SLURM_VERSION_NUMBER" && !built {
            continue;
        }
        assert_eq!(
            c,
            ours,
            "{name}: {}/slurm/spank.h says {c}, src/ffi.rs {ours}",
            dir.display()
        );
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
