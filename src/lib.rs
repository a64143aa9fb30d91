//! binder: the command line and its driver over the two libraries: `binder-core` (a warm
//! launch: identity, task views, node cache and ledger, bind and exec) and `binder-plan`
//! (shape to plan on an hwloc topology).
//!
//! ```text
//! cli (clap) → config (validated, once) → run (site file, cache, ledger, output)
//!                                           ├─ binder_plan: shape → … → Plan → report
//!                                           └─ binder_core: view → bind → exec
//! ```
#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

// `libc` is the package's for `src/bin/binder-full.rs` (SIGPIPE), not the library's.
use libc as _;

pub mod cli;
pub mod config;
pub mod error;
pub mod host_launch;
pub mod hwenv;
pub mod manual;
mod run;
pub mod shape_man;

pub use binder_core::{exit_code, FRONT_EXE, FULL_EXE};
pub use error::Error;
pub use run::run;
