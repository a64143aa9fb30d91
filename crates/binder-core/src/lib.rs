//! binder-core: what a warm launch needs, and nothing that loads hwloc, parses YAML or
//! parses a command line. Which task this is ([`identity`], [`procfs`]), CPU lists
//! ([`cpulist`]), the persisted per-rank view ([`view`]) with the node cache ([`cache`])
//! and the node ledger ([`ledger`]) that store it, and binding and exec ([`launch`]).
//! `binder-plan` makes plans on top of it; the `binder` crate drives both.
#![cfg_attr(not(test), warn(unused_crate_dependencies))]
#![warn(missing_docs)]

pub mod cache;
pub mod cpulist;
pub mod driver;
pub mod envelope;
pub mod error;
mod exe;
pub mod exit_code;
pub mod identity;
pub mod input;
pub mod launch;
pub mod ledger;
pub mod limits;
pub mod procfs;
pub mod scheduler;
pub mod settings;
pub mod text;
pub mod vendor;
pub mod view;

pub use error::Error;
pub use exe::{FRONT_EXE, FULL_EXE};
