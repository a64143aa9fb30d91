//! binder-host: what touches this machine, on top of the pure planning library
//! (`binder-plan`: values in, a `Plan` out). The host planner that plans around the node
//! ledger's other jobs and says why under `--verbose` ([`around`]), the node view behind
//! `binder node` ([`node`]), binding this process through hwloc ([`hostbind`]), and
//! reading a topology from this host or an XML file ([`load()`]) and a shape file
//! ([`shape_text`]).
//! The one front module every plugin calls ([`front`]: the site's default, the request,
//! containers, the job's shape, the task's options). Every front, the `binder`
//! executable's warm path included, assembles its job with binder-core's
//! `launch::job::JobSpec`; the plugins reach it through [`front::Planning`].
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod allocation;
pub mod around;
pub mod front;
pub mod hostbind;
mod load;
pub mod node;
mod steer;

pub use load::{for_shape, load, plugin_host, shape_file, shape_text, MAX_XML_BYTES};
