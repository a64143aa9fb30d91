//! [`PlanError`]: every stage's error, wrapped once at the library's top.

use crate::distribute::DistributeError;
use crate::ge::GeError;
use crate::select::SelectError;
use crate::shape::ShapeError;
use crate::topology::TopologyError;

/// Why a plan could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A request the shape's own checks could not catch (`ranks:` with `--ge`).
    #[error("{0}")]
    Usage(String),
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
    /// A Grid Engine string, request or reservation.
    #[error(transparent)]
    Ge(#[from] GeError),
}
