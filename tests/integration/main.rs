//! binder's behaviour seen from outside: the command line, dry-run output, errors and
//! exit codes, running a task, the planner's properties and the hwloc-calc oracle.
#[path = "../common/mod.rs"]
mod common;

mod bad;
mod cache;
mod cli;
mod convert_impi;
mod convert_mpich;
mod convert_ompi;
mod convert_ompi5;
mod convert_rules;
mod edges;
mod executables;
mod explain;
mod ge;
mod gpu_ledger;
mod gpu_node;
mod gpus;
mod launch;
mod ledger;
mod openmpi;
mod oracle;
mod picture;
mod placement;
mod preview;
mod properties;
mod readme;
mod torch_model;
mod torchrun;
