//! binder-host: what touches this machine, on top of the pure planning library
//! (`binder-plan`: values in, a `Plan` out). The host planner that plans around the node
//! ledger's other jobs and says why under `--verbose` ([`around`]), the node view behind
//! `binder node` ([`node`]), and binding this process through hwloc ([`hostbind`]).
//! `binder-full` and both plugins use it; the `binder` executable (binder-core) does not.

pub mod around;
pub mod hostbind;
pub mod node;
