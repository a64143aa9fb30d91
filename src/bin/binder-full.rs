//! The `binder-full` executable: parse arguments, run, map errors to exit codes. Users
//! type `binder`, whose warm launch path (`src/bin/binder.rs`, binder-core alone) hands everything else here.
//!
//! A cold launch pays this start too, so `main` is entered from the C runtime
//! directly (`no_main`): std's own start would first read and `sscanf` /proc/self/maps (to
//! place a guard page under the main thread's stack) and install stack-overflow signal
//! handlers, about 10% of a warm launch. What binder needs of it is done here: SIGPIPE
//! ignored (so `--dry-run | head` is an EPIPE error, answered with exit 0, not a signal
//! death); `std::env::args_os` works without it on Linux; every path ends in
//! `process::exit`, which flushes stdout.
// The test harness brings its own `main`.
#![cfg_attr(not(test), no_main)]
#![cfg_attr(test, allow(dead_code))]

use clap::Parser;

use binder::{cli::Cli, config::Config, exit_code};
use binder_core::identity::ProcessEnv;

/// The C entry point (see the module doc).
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    // SAFETY: setting a signal's disposition to ignore has no preconditions; binder has
    // one thread. The task gets SIGPIPE's default back at exec (std's `exec` resets it).
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    // As in `binder` (a launch line it handed over has been through this already).
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Err(why) = binder_core::limits::prepare(&args) {
        binder_core::text::emit(&mut std::io::stderr(), &why);
        std::process::exit(exit_code::REFUSED);
    }
    run_main();
    std::process::exit(exit_code::SUCCESS)
}

fn run_main() {
    let args = binder::cli::help_word(std::env::args_os().collect());
    let parsed = match Cli::parse_launch_line(&args) {
        Some(cli) => Ok(cli),
        None => Cli::try_parse_from(&args),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: clap's own output, exit 0.
            let _ = e.print();
            std::process::exit(exit_code::SUCCESS);
        }
        Err(e) => {
            // clap's usage errors would exit 2, which a task could mean; binder's is 125,
            // on one line like every other refusal.
            binder_core::text::emit(&mut std::io::stderr(), &binder::cli::one_line(&e, &args));
            std::process::exit(exit_code::REFUSED);
        }
    };
    if let Some(binder::cli::Action::Convert(args)) = &cli.action {
        use std::io::Write as _;
        match binder::cli::converted(args) {
            Ok(text) => {
                let _ = std::io::stdout().write_all(text.as_bytes());
                std::process::exit(exit_code::SUCCESS);
            }
            Err(why) => {
                binder_core::text::emit(&mut std::io::stderr(), &why);
                std::process::exit(exit_code::REFUSED);
            }
        }
    }
    if let Some(binder::cli::Action::Generate { what }) = cli.action {
        use std::io::Write as _;
        let _ = std::io::stdout().write_all(&binder::cli::generated(what));
        std::process::exit(exit_code::SUCCESS);
    }
    let report_env = std::env::var("BINDER_REPORT").ok();
    let result = Config::from_cli(cli, report_env.as_deref()).and_then(|config| {
        binder::run(
            &config,
            &ProcessEnv,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr(),
        )
    });
    if let Err(err) = result {
        if err.is_broken_pipe() {
            std::process::exit(exit_code::SUCCESS);
        }
        binder_core::text::emit(&mut std::io::stderr(), &err.to_string());
        std::process::exit(err.exit_code());
    }
}
