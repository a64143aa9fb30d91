//! Limits a shell may set too low for binder itself (SEMANTICS §13.5, the lows): a
//! launch under them is a run or a one-line refusal, never a signal death, and the task
//! starts with the limits and dispositions the user gave.
//!
//! - `ulimit -f` (RLIMIT_FSIZE): a write past it raises SIGXFSZ, whose default ends the
//!   process mid-write (a 0-byte file left in the ledger). binder ignores SIGXFSZ, so the
//!   write fails with EFBIG instead and the ledger or cache that needed it falls back as
//!   for any failed write; the task gets the default disposition back.
//! - `ulimit -s` (RLIMIT_STACK): below [`MIN_STACK`] binder's own start overflowed its
//!   stack (8-32 KiB ended in SIGSEGV, even `--version`). binder raises its own soft
//!   limit to [`MIN_STACK`] when the hard limit allows and starts itself again (the
//!   main thread's stack is sized at exec), keeping the user's value in [`SAVED`] to give
//!   back to the task; where the hard limit is lower, it refuses in one line.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The stack binder raises its soft limit to when it is lower (and the hard limit
/// allows): its start, argument parsing and a topology load need a few dozen KiB (64 KiB
/// ran; 32 KiB did not), with a wide margin for hwloc's XML reader.
pub const MIN_STACK: u64 = 1 << 20;
/// Below this hard limit binder cannot start at all: refused in one line.
pub const LEAST_STACK: u64 = 128 << 10;

/// Where a binder that raised its stack limit keeps the user's soft limit for the task
/// (`unlimited`, or bytes); never passed on to the task.
pub const SAVED: &str = "BINDER_STACK_SOFT";

/// Readies binder for the limits it was started under, first thing in `main` (see the
/// module doc): `Err` is the one-line refusal when it cannot run.
pub fn prepare(args: &[OsString]) -> Result<(), String> {
    // SAFETY: setting a signal's disposition to ignore has no preconditions; this runs
    // first in `main`, with one thread. [`restore`] sets the default back before exec.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let limit = getrlimit(Resource::Stack);
    let Some(soft) = limit.current.filter(|&s| s < MIN_STACK) else {
        return Ok(());
    };
    if std::env::var_os(SAVED).is_some() {
        // Already started again once: never a loop.
        return Ok(());
    }
    let room = limit.maximum.map_or(MIN_STACK, |hard| hard.min(MIN_STACK));
    if room < LEAST_STACK {
        return Err(format!(
            "the stack size limit (`ulimit -s`) is {} KiB, and its hard limit too, below the {} KiB binder needs to start: raise it (`ulimit -s {}`)",
            soft / 1024,
            LEAST_STACK / 1024,
            MIN_STACK / 1024
        ));
    }
    if room <= soft {
        return Ok(());
    }
    let raised = Rlimit {
        current: Some(room),
        maximum: limit.maximum,
    };
    if setrlimit(Resource::Stack, raised).is_err() {
        return Err(format!(
            "the stack size limit (`ulimit -s`) is {} KiB, below the {} KiB binder needs, and could not be raised: raise it (`ulimit -s {}`)",
            soft / 1024,
            MIN_STACK / 1024,
            MIN_STACK / 1024
        ));
    }
    let mut again = std::process::Command::new("/proc/self/exe");
    if let Some(arg0) = args.first() {
        again.arg0(arg0);
    }
    let error = again
        .args(args.iter().skip(1))
        .env(SAVED, soft.to_string())
        .exec();
    let _ = setrlimit(Resource::Stack, limit);
    Err(format!(
        "the stack size limit (`ulimit -s`) is {} KiB, below the {} KiB binder needs, and binder could not start itself again with more ({error}): raise it (`ulimit -s {}`)",
        soft / 1024,
        MIN_STACK / 1024,
        MIN_STACK / 1024
    ))
}

/// Gives back, right before the task's exec, what [`prepare`] changed: SIGXFSZ's default,
/// and the user's stack limit when binder raised it. (`SAVED` itself is removed from the
/// task's environment by the exec.)
pub fn restore() {
    // SAFETY: setting a signal's disposition to its default has no preconditions; binder
    // has one thread here, about to exec.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
    }
    let Some(soft) = std::env::var(SAVED)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return;
    };
    let limit = getrlimit(Resource::Stack);
    let _ = setrlimit(
        Resource::Stack,
        Rlimit {
            current: Some(soft),
            maximum: limit.maximum,
        },
    );
}
