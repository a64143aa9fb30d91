//! A launch with the hwloc topology, for the CLI: refuses a topology that is not this
//! host's (reading hwloc's variables from the environment, which the planning library
//! does not), then binds through `binder_host::hostbind` and execs.

use std::io::Write;

use binder_core::identity::Identity;
use binder_core::launch::{exec, LaunchError, Options};
use binder_core::view::TaskView;
use binder_plan::topology::Topology;

pub use binder_host::hostbind::{bind_cpus, bind_memory, current};

/// Binds this process as `view` (this rank's of a plan made on `topology`) says and execs
/// the command. Returns only on failure; `stderr` gets `--report` and `--verbose` lines.
pub fn run(
    topology: &Topology,
    view: &TaskView,
    identity: &Identity,
    options: &Options<'_>,
    stderr: &mut impl Write,
) -> LaunchError {
    match prepare(view, Some(topology), identity, options, stderr) {
        Ok(env) => exec(options.command, &env, options.scrub),
        Err(e) => e,
    }
}

/// Refuses a topology that is not this host's (hwloc's `is_this_system`): under
/// `HWLOC_XMLFILE` or `HWLOC_SYNTHETIC` hwloc describes another machine, and binding to
/// its CPU numbers would bind this task somewhere else, or nowhere (SEMANTICS §8).
pub fn this_system(topology: &Topology) -> Result<(), LaunchError> {
    if topology.is_this_system() {
        return Ok(());
    }
    let vars: Vec<String> = std::env::vars_os()
        .filter(|(k, _)| k.as_encoded_bytes().starts_with(b"HWLOC_"))
        .filter(|(k, _)| !crate::hwenv::PLUGIN_BLOCKLIST_VARS.iter().any(|b| k == b))
        .map(|(k, v)| {
            let var = format!("{}={}", k.to_string_lossy(), v.to_string_lossy());
            binder_core::text::printable(&var, 120)
        })
        .collect();
    Err(LaunchError::NotThisSystem {
        vars: if vars.is_empty() {
            "not this system".to_owned()
        } else {
            vars.join(" ")
        },
    })
}

/// Binds this process as `view` says and returns the task's environment, without
/// exec'ing (`binder_host::hostbind::prepare`), after refusing a topology that is not
/// this host's when anything is to be bound (a library caller may still run unbound
/// tasks on another machine's topology).
pub fn prepare(
    view: &TaskView,
    topology: Option<&Topology>,
    identity: &Identity,
    options: &Options<'_>,
    stderr: &mut impl Write,
) -> Result<Vec<(String, String)>, LaunchError> {
    if let Some(t) = topology {
        if view.is_bound() || options.membind.is_some() {
            this_system(t)?;
        }
    }
    binder_host::hostbind::prepare(view, topology, identity, options, stderr)
}
