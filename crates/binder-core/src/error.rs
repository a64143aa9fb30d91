//! The warm launch's one error, with its exit code. The `binder` crate's error wraps it,
//! so a refusal reads and exits alike from either executable.

use crate::exit_code;
use crate::identity::IdentityError;
use crate::launch::LaunchError;
use crate::ledger::LedgerError;

/// What stops a launch before any planning.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Which task this is: the launcher's variables or the flags.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// Binding or starting the task.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The node ledger: its lock, or other jobs holding the units.
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

impl Error {
    /// The exit status for this error (see [`exit_code`]).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Launch(LaunchError::NotFound { .. } | LaunchError::NoInterpreter { .. }) => {
                exit_code::NOT_FOUND
            }
            Error::Launch(LaunchError::NotExecutable { .. }) => exit_code::NOT_EXECUTABLE,
            _ => exit_code::REFUSED,
        }
    }
}
