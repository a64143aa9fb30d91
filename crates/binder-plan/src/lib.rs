//! binder-plan: binder's planning library, from a YAML shape (or a Grid Engine request)
//! and a node's hwloc topology to every local task's CPUs, GPUs and NICs.
//!
//! A one-way pipeline, one module per stage, each with its own error type, wrapped by
//! [`PlanError`]:
//!
//! ```text
//! shape → topology → unit → select → distribute → Plan → report / explain / view
//!                 ↘ ge (Grid Engine strings and requests) ↗
//! ```
//!
//! No stage reads the environment, prints, or touches the process: inputs come in as
//! values (the GPUs a job may have arrive as a [`gpu::Grant`]). Binding and exec are
//! `binder-core`'s; the command line and the driver are the `binder` crate's.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

pub mod convert;
pub mod cpuset;
pub mod distribute;
pub mod error;
pub mod explain;
pub mod ge;
pub mod gpu;
pub mod nic;
pub mod pack;
pub mod planner;
pub mod rank_view;
pub mod report;
pub mod select;
pub mod shape;
pub mod topology;
pub mod unit;

pub use error::PlanError;
pub use planner::{fill_ge_topology, plan, plan_around, plan_traced, preview, PlanRequest};
