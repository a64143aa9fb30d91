//! The one error type of the library: it wraps each stage's error and maps every kind of
//! failure to its exit code in one place.

use crate::distribute::DistributeError;
use crate::exit_code;
use crate::identity::IdentityError;
use crate::launch::LaunchError;
use crate::select::SelectError;
use crate::shape::ShapeError;
use crate::topology::TopologyError;

/// How many characters of a value taken from input a message quotes.
pub const QUOTE_MAX: usize = 40;

/// `text` cut to at most `max` characters, with `…` where it was cut: every message that
/// quotes input uses it, so a huge value never makes a huge message.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Anything that stops binder.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad command line that clap could not catch.
    #[error("{0}")]
    Usage(String),
    /// Which task this is: the launcher's variables or the flags.
    #[error(transparent)]
    Identity(#[from] IdentityError),
    /// The shape file.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// The topology.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// Matching resources.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// Dealing units to tasks.
    #[error(transparent)]
    Distribute(#[from] DistributeError),
    /// Identifying, binding or starting the task.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    /// A Grid Engine string, request or reservation.
    Ge(#[from] crate::ge::GeError),
    /// The node ledger: its lock, or other jobs holding the units.
    #[error(transparent)]
    Ledger(#[from] crate::ledger::LedgerError),
    /// Writing the dry-run report.
    #[error("cannot write the report: {0}")]
    Output(#[source] std::io::Error),
    /// The warm launch path ([`crate::warm`]) cannot go on without hwloc (a node cache
    /// miss, other jobs to plan around, `--verbose`, `membind`, any refusal to explain):
    /// the `binder` executable hands the launch to `binder-full`, having changed nothing.
    /// Never shown to a user.
    #[error("the warm launch path hands over to binder-full")]
    HandOver,
}

impl Error {
    /// The exit status for this error (see [`crate::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Launch(LaunchError::NotFound { .. } | LaunchError::NoInterpreter { .. }) => {
                exit_code::NOT_FOUND
            }
            Error::Launch(LaunchError::NotExecutable { .. }) => exit_code::NOT_EXECUTABLE,
            _ => exit_code::REFUSED,
        }
    }

    /// A closed stdout (`binder --dry-run … | head`) is not a failure.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
