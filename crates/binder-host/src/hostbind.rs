//! Binding this process with the hwloc topology: CPUs through hwloc with read-back, memory
//! (`membind`), and the `--verbose` note on an inherited binding. Every front that binds
//! with a topology uses it (`binder-full`, the SPANK plugin); the warm path's binding
//! without hwloc is `binder_core::launch`. Whether the topology is this host's is the
//! caller's to check (it reads the environment, which this library does not).
//!
//! binder has one thread when it binds, so the single-thread flavour of hwloc's calls is
//! exact and the cheapest: `sched_setaffinity` and `set_mempolicy` on this thread, both of
//! which survive `execve` into the task. Binding goes through hwlocality, whose cpusets
//! grow past 1024 CPUs (a `cpu_set_t` does not).

use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;

use std::io::Write;

use binder_core::cpulist::cpu_list;
use binder_core::identity::Identity;
use binder_core::launch::{finish, prepare_cached, LaunchError, Options};
use binder_core::view::{MemNodes, MemPolicy, TaskView};
use binder_plan::cpuset::CpuSet;
use binder_plan::topology::{cpuset_from_hwloc, cpuset_to_hwloc, Topology};

/// The CPUs this process may run on now: what the launcher (or `taskset`) left it.
pub fn current(topology: &Topology) -> Option<CpuSet> {
    topology
        .hw()
        .cpu_binding(CpuBindingFlags::ASSUME_SINGLE_THREAD)
        .ok()
        .map(|set| cpuset_from_hwloc(&set))
}

/// Binds this process to `set` and checks that the kernel applied exactly that.
pub fn bind_cpus(topology: &Topology, set: &CpuSet) -> Result<(), LaunchError> {
    let flags = CpuBindingFlags::ASSUME_SINGLE_THREAD | CpuBindingFlags::STRICT;
    topology
        .hw()
        .bind_cpu(&cpuset_to_hwloc(set), flags)
        .map_err(|e| LaunchError::Bind {
            cpus: set.to_string(),
            reason: e.to_string(),
        })?;
    let got = current(topology).unwrap_or_default();
    if got != *set {
        return Err(LaunchError::NotApplied {
            want: set.to_string(),
            got: got.to_string(),
        });
    }
    Ok(())
}

/// Applies `policy` to this process's memory on the NUMA nodes of `cpus`, through hwloc:
/// `local` is a strict bind (`MPOL_BIND`, as `numactl --membind`), `interleave` is
/// `MPOL_INTERLEAVE` (`numactl --interleave`), `preferred` a bind without `STRICT`, which
/// hwloc turns into `MPOL_PREFERRED` on Linux (`numactl --preferred`); `memory` picks the
/// nodes (`near`: those of `cpus`; `hbm`, `all`, numbers, ...). Returns the NUMA nodes
/// (OS numbers) used.
pub fn bind_memory(
    topology: &Topology,
    cpus: &CpuSet,
    policy: MemPolicy,
    memory: &MemNodes,
) -> Result<Vec<usize>, LaunchError> {
    let list =
        binder_plan::topology::memory_nodes(topology, cpus, policy, memory).map_err(|reason| {
            LaunchError::Membind {
                nodes: memory.name(),
                reason,
            }
        })?;
    let mut nodes = NodeSet::new();
    for &n in &list {
        nodes.set(n);
    }
    let (how, flags) = match policy {
        MemPolicy::Local => (MemoryBindingPolicy::Bind, MemoryBindingFlags::STRICT),
        MemPolicy::Interleave => (MemoryBindingPolicy::Interleave, MemoryBindingFlags::empty()),
        MemPolicy::Preferred => (MemoryBindingPolicy::Bind, MemoryBindingFlags::empty()),
    };
    let flags = flags | MemoryBindingFlags::ASSUME_SINGLE_THREAD;
    topology
        .hw()
        .bind_memory(&nodes, how, flags)
        .map_err(|e| LaunchError::Membind {
            nodes: cpu_list(&list),
            reason: e.to_string(),
        })?;
    Ok(list)
}

/// Binds this process as `view` says and returns the task's environment, without
/// exec'ing: the node ledger records the task between the two. With a topology the
/// binding goes through hwloc, `--verbose` explains inherited bindings and `membind`
/// works; without one (the cache's and the ledger's warm path) the kernel's
/// `sched_setaffinity` binds, and the caller never comes here with `--verbose` or
/// `membind`.
pub fn prepare(
    view: &TaskView,
    topology: Option<&Topology>,
    identity: &Identity,
    options: &Options<'_>,
    stderr: &mut impl Write,
) -> Result<Vec<(String, String)>, LaunchError> {
    let Some(topology) = topology else {
        return prepare_cached(view, identity, options, stderr);
    };
    let unbound = !view.is_bound();
    // Read before binding: only `--verbose` and `membind` with `bind: none` need it.
    let inherited = (options.verbose || (options.membind.is_some() && unbound))
        .then(|| match options.started_on {
            Some(cpus) => Some(cpus.iter().copied().collect()),
            None => current(topology),
        })
        .flatten();
    if options.verbose {
        let allowed = topology.allowed();
        if let Some(inherited) = inherited.as_ref().filter(|i| **i != allowed) {
            let what = match identity.launcher.and_then(|l| l.unbind_hint()) {
                _ if unbound => "`bind: none` keeps that binding".to_owned(),
                Some(hint) => format!("binder plans over the job's allocation and rebinds; turn the launcher's binding off with `{hint}`"),
                // Flux's and Slurm's own binding says what the job owns: binder binds
                // inside it (SEMANTICS §4.1), so there is nothing to turn off.
                None => "binder plans over the job's allocation and rebinds inside it".to_owned(),
            };
            binder_core::text::emit(
                stderr,
                &format!(
                    "warning: started bound to cpus {inherited} of the allocation {allowed}; {what}"
                ),
            );
        }
    }
    let cpuset: CpuSet = view.cpus.iter().copied().collect();
    if !unbound && view.apply && options.started_on.is_none() {
        bind_cpus(topology, &cpuset)?;
    }
    if let Some(policy) = options.membind {
        let fallback;
        let cpus = if unbound {
            fallback = inherited.unwrap_or_else(|| topology.allowed());
            &fallback
        } else {
            &cpuset
        };
        bind_memory(topology, cpus, policy, &view.memory)?;
    }
    finish(view, identity, options, stderr)
}
