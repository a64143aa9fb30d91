//! The names of binder's two executables, which find each other by them: the warm front
//! hands over to the full one beside it, and the node cache's key stamps both.

/// The executable users type: a launch line's warm path, linked without libhwloc.
pub const FRONT_EXE: &str = "binder";
/// The executable `binder` hands everything else to, installed beside it.
pub const FULL_EXE: &str = "binder-full";
