//! binder's exit statuses, in one place.
//!
//! They follow env(1) and `timeout(1)`: binder wraps a task whose own exit codes must stay
//! unambiguous under `mpirun`, so binder uses only the three codes at the top of the range
//! and puts the finer reason in its message. No other file holds an exit-code number.

/// `--dry-run` printed its report, or `binder schema` printed the schema.
pub const SUCCESS: i32 = 0;

/// binder itself refused: a usage error, a bad shape, an unreadable topology, a malformed
/// launcher variable, an infeasible placement, or a binding that could not be applied.
/// The task was not started.
pub const REFUSED: i32 = 125;

/// The command exists but could not be executed (permissions, bad format).
pub const NOT_EXECUTABLE: i32 = 126;

/// The command was not found on `PATH`.
pub const NOT_FOUND: i32 = 127;
