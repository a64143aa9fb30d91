//! The one error type of the command line: the warm launch's (`binder_core::Error`) and
//! the planner's (`binder_plan::PlanError`), each kept whole, and the CLI's own. The exit
//! code is mapped once, by binder-core's error, so both executables exit alike.

use binder_core::exit_code;
use binder_plan::PlanError;

/// Anything that stops binder.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad command line that clap could not catch.
    #[error("{0}")]
    Usage(String),
    /// Identity, binding and exec, the node ledger (binder-core).
    #[error(transparent)]
    Core(#[from] binder_core::Error),
    /// Shape, topology, selection, distribution, Grid Engine (binder-plan).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Writing the dry-run report.
    #[error("cannot write the report: {0}")]
    Output(#[source] std::io::Error),
}

/// `?` on a stage's own error: into the crate error that wraps it.
macro_rules! through {
    ($($stage:ty => $variant:ident),* $(,)?) => {$(
        impl From<$stage> for Error {
            fn from(e: $stage) -> Error {
                Error::$variant(e.into())
            }
        }
    )*};
}

through! {
    binder_core::identity::IdentityError => Core,
    binder_core::launch::LaunchError => Core,
    binder_core::ledger::LedgerError => Core,
    binder_plan::shape::ShapeError => Plan,
    binder_plan::topology::TopologyError => Plan,
    binder_plan::select::SelectError => Plan,
    binder_plan::distribute::DistributeError => Plan,
    binder_plan::ge::GeError => Plan,
}

impl Error {
    /// The exit status for this error (see [`binder_core::exit_code`]).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Core(e) => e.exit_code(),
            _ => exit_code::REFUSED,
        }
    }

    /// A closed stdout (`binder --dry-run … | head`) is not a failure.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Output(e) if e.kind() == std::io::ErrorKind::BrokenPipe)
    }
}
