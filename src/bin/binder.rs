//! The `binder` executable: a launch line's warm path, and `binder-full` for the rest.
//!
//! Every task of every job pays this executable's start, and the dynamic loader's work for
//! libhwloc and what it pulls in (libudev, libm) was a fifth of a whole `taskset -c 0 true`.
//! So this executable uses binder-core alone, which depends on no hwloc, YAML or clap: it
//! is linked without libhwloc (`.ci/layers` fails on any other crate named here, and
//! `tests/front.rs` reads the ELF). A
//! plain launch line (`binder SHAPE -- CMD`, [`LaunchLine`]) binds from the node cache
//! or from the plan the job's first task recorded in the node ledger, and execs the task
//! ([`binder_core::launch::warm`]). Everything else —
//! other commands and flags, a cache miss, other jobs to plan around — is handed, with the
//! same arguments and environment and nothing changed, to `binder-full`, which is
//! installed beside this executable.
//!
//! `main` is entered from the C runtime (`no_main`), as in `binder-full`: std's start
//! would read /proc/self/maps first. SIGPIPE keeps its default: this executable writes
//! only one stderr line, and the task and `binder-full` get their dispositions as given.
// The test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code, unused_imports))]

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use binder_core::exit_code;
use binder_core::identity::ProcessEnv;
use binder_core::launch::line::{report_word, LaunchLine};
use binder_core::launch::warm::{warm, Stop};
use binder_core::FULL_EXE as FULL;

/// The C entry point (see the module doc).
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    let args: Vec<OsString> = std::env::args_os().collect();
    // A stack or file-size limit too low for binder: started again with room, or
    // refused in one line, never a signal death (SEMANTICS §13.5).
    if let Err(why) = binder_core::limits::prepare(&args) {
        binder_core::text::emit(&mut std::io::stderr(), &why);
        std::process::exit(exit_code::REFUSED);
    }
    if let Some(line) = LaunchLine::parse(&args).filter(|l| l.local_size != Some(0)) {
        // A bad BINDER_REPORT word is binder-full's to refuse.
        if let Ok(report) = report_word(std::env::var("BINDER_REPORT").ok().as_deref()) {
            match warm(
                &line,
                line.report || report,
                &ProcessEnv,
                &mut std::io::stderr(),
            ) {
                Stop::HandOver => {
                    if std::env::var_os("BINDER_CACHE_TRACE").is_some_and(|v| v == "1") {
                        binder_core::text::emit(
                            &mut std::io::stderr(),
                            "hands the launch to binder-full",
                        );
                    }
                }
                Stop::Refused(err) => {
                    binder_core::text::emit(&mut std::io::stderr(), &err.to_string());
                    std::process::exit(err.exit_code());
                }
            }
        }
    }
    hand_over(&args)
}

/// Whether `full` (and its directory) may be run for this executable: owned by root or
/// by whoever owns this executable, and writable by nobody else, so that another user
/// cannot put their code where `binder` runs it (SEMANTICS §13.1 item 1).
fn trusted(full: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = std::env::current_exe()
        .and_then(std::fs::metadata)
        .map_or(0, |m| m.uid());
    let check = |path: &std::path::Path| -> Result<(), String> {
        let meta =
            std::fs::metadata(path).map_err(|e| format!("cannot run {}: {e}", path.display()))?;
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "will not run {}: it belongs to uid {}, neither root nor the owner of binder",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o002 != 0
            && !(meta.is_dir() && meta.mode() & 0o1000 != 0 && meta.uid() == 0)
        {
            return Err(format!(
                "will not run {}: anyone may write it (mode {:o})",
                path.display(),
                meta.mode() & 0o7777
            ));
        }
        Ok(())
    };
    check(full)?;
    full.parent().map_or(Ok(()), check)
}

/// Replaces this process with `binder-full` and the same arguments; returns only to exit
/// 125 when it cannot.
fn hand_over(args: &[OsString]) -> ! {
    let full = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(FULL)));
    let why = match &full {
        Some(full) if trusted(full).is_err() => trusted(full).unwrap_err(),
        Some(full) => {
            let mut command = std::process::Command::new(full);
            if let Some(arg0) = args.first() {
                command.arg0(arg0);
            }
            let error = command.args(args.iter().skip(1)).exec();
            format!("cannot run {}: {error}", full.display())
        }
        None => "cannot find the directory of this executable (/proc/self/exe)".to_owned(),
    };
    binder_core::text::emit(
        &mut std::io::stderr(),
        &format!("{why}; binder needs {FULL} installed beside it (`cargo build --release` builds both into target/release, `cargo install --path .` installs both)"),
    );
    std::process::exit(exit_code::REFUSED)
}
