//! The hand-kept FFI (`src/ffi.rs`) against flux-core's installed headers
//! (`/opt/flux/include`, from `.ci/setup test`): each declaration is compiled as a
//! function pointer of the header's function with `-Werror`, so a changed signature fails
//! here, not in a job; and every function `ffi.rs` declares must be in the check.

use std::process::Command;

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

/// `ffi.rs`'s declarations, as C function pointers of the same types.
const CHECKS: [(&str, &str); 15] = [
    (
        "flux_plugin_set_name",
        "int (*)(flux_plugin_t *, const char *)",
    ),
    (
        "flux_plugin_add_handler",
        "int (*)(flux_plugin_t *, const char *, flux_plugin_f, void *)",
    ),
    ("flux_plugin_get_conf", "const char *(*)(flux_plugin_t *)"),
    (
        "flux_plugin_get_shell",
        "flux_shell_t *(*)(flux_plugin_t *)",
    ),
    (
        "flux_shell_getopt",
        "int (*)(flux_shell_t *, const char *, char **)",
    ),
    (
        "flux_shell_setopt",
        "int (*)(flux_shell_t *, const char *, const char *)",
    ),
    (
        "flux_shell_getenv",
        "const char *(*)(flux_shell_t *, const char *)",
    ),
    (
        "flux_shell_get_rank_info",
        "int (*)(flux_shell_t *, int, char **)",
    ),
    ("flux_shell_get_info", "int (*)(flux_shell_t *, char **)"),
    (
        "flux_shell_current_task",
        "flux_shell_task_t *(*)(flux_shell_t *)",
    ),
    (
        "flux_shell_task_get_info",
        "int (*)(flux_shell_task_t *, char **)",
    ),
    (
        "flux_shell_task_cmd",
        "flux_cmd_t *(*)(flux_shell_task_t *)",
    ),
    (
        "flux_cmd_setenvf",
        "int (*)(flux_cmd_t *, int, const char *, const char *, ...)",
    ),
    ("flux_cmd_unsetenv", "void (*)(flux_cmd_t *, const char *)"),
    ("flux_cmd_arg", "const char *(*)(const flux_cmd_t *, int)"),
];

#[test]
fn every_declaration_is_checked() {
    let ffi = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/ffi.rs")).unwrap();
    let declared: Vec<&str> = ffi
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub fn "))
        .filter_map(|l| l.split('(').next())
        .collect();
    let mut checked: Vec<&str> = CHECKS.iter().map(|(n, _)| *n).collect();
    let mut declared_sorted = declared.clone();
    declared_sorted.sort_unstable();
    checked.sort_unstable();
    assert_eq!(
        declared_sorted, checked,
        "ffi.rs and this test's CHECKS differ"
    );
}

#[test]
fn ffi_matches_the_installed_headers() {
    let include = std::path::Path::new("/opt/flux/include");
    let cc = Command::new("cc").arg("--version").output().is_ok();
    if !have(
        "cc and flux-core's headers in /opt/flux/include (bash .ci/setup test)",
        cc && include.join("flux/shell.h").is_file(),
    ) {
        return;
    }
    let dir = std::env::temp_dir().join(format!("binder-flux-h-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut source = String::from(
        "#define FLUX_SHELL_PLUGIN_NAME \"binder\"\n#include <flux/core.h>\n#include <flux/shell.h>\n",
    );
    for (i, (name, ty)) in CHECKS.iter().enumerate() {
        let declarator = ty.replacen("(*)", &format!("(*check{i})"), 1);
        source.push_str(&format!("{declarator} = {name};\n"));
    }
    // The handler type binder registers: flux_plugin_f.
    source.push_str("int (*handler)(flux_plugin_t *, const char *, flux_plugin_arg_t *, void *) = (flux_plugin_f) 0;\n");
    std::fs::write(dir.join("h.c"), &source).unwrap();
    let out = Command::new("cc")
        .args(["-Werror", "-Wall", "-c", "-o"])
        .arg(dir.join("h.o"))
        .arg("-I")
        .arg(include)
        .arg(dir.join("h.c"))
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "ffi.rs drifted from flux-core's headers:\n{}\n{source}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The built plugin exports `flux_plugin_init` and leaves Flux's symbols to the shell.
#[test]
fn the_plugin_exports_its_entry_point() {
    // Built beside this test's directory, in whatever profile the tests are built with.
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("libbinder_flux.so");
    let nm = Command::new("nm").arg("--version").output().is_ok();
    if !have(
        "nm and the built libbinder_flux.so (cargo build --profile ci, as .ci/run does)",
        nm && lib.is_file(),
    ) {
        return;
    }
    let out = Command::new("nm").args(["-D"]).arg(&lib).output().unwrap();
    let symbols = String::from_utf8_lossy(&out.stdout);
    assert!(
        symbols.lines().any(|l| l.ends_with(" T flux_plugin_init")),
        "{symbols}"
    );
}
