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
    /// The job's GPUs as its allocation names them (an unknown or ambiguous UUID,
    /// `gpu-ids: uuid` with no UUID to give).
    #[error("{0}")]
    Gpus(String),
    /// A Grid Engine string, request or reservation.
    #[error(transparent)]
    Ge(#[from] GeError),
}
