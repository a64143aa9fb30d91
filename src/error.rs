//! The one error type of the command line: it wraps each stage's error and maps every kind of
//! failure to its exit code in one place.

use binder_core::exit_code;
use binder_core::identity::IdentityError;
use binder_core::launch::LaunchError;
use binder_plan::distribute::DistributeError;
use binder_plan::select::SelectError;
use binder_plan::shape::ShapeError;
use binder_plan::topology::TopologyError;
use binder_plan::PlanError;

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
    Ge(#[from] binder_plan::ge::GeError),
    /// The node ledger: its lock, or other jobs holding the units.
    #[error(transparent)]
    Ledger(#[from] binder_core::ledger::LedgerError),
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

/// A planning error keeps its stage's variant, so its message and exit code stay as the
/// stage gave them.
impl From<PlanError> for Error {
    fn from(e: PlanError) -> Error {
        match e {
            PlanError::Usage(why) => Error::Usage(why),
            PlanError::Shape(e) => Error::Shape(e),
            PlanError::Topology(e) => Error::Topology(e),
            PlanError::Select(e) => Error::Select(e),
            PlanError::Distribute(e) => Error::Distribute(e),
            PlanError::Ge(e) => Error::Ge(e),
        }
    }
}

impl Error {
    /// The exit status for this error (see [`binder_core::exit_code`]).
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
