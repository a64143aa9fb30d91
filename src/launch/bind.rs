//! Applies a task's binding to this process through hwloc, then reads it back.
//!
//! binder has one thread when it binds, so the single-thread flavour of hwloc's calls is
//! exact and the cheapest: `sched_setaffinity` and `set_mempolicy` on this thread, both of
//! which survive `execve` into the task. Binding goes through hwlocality, whose cpusets
//! grow past 1024 CPUs (a `cpu_set_t` does not).

use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;

use super::LaunchError;
use crate::report::{cpu_list, cpus_of};
use crate::topology::Topology;

/// The CPUs this process may run on now: what the launcher (or `taskset`) left it.
pub fn current(topology: &Topology) -> Option<CpuSet> {
    topology
        .hw()
        .cpu_binding(CpuBindingFlags::ASSUME_SINGLE_THREAD)
        .ok()
}

/// Binds this process to `set` and checks that the kernel applied exactly that.
pub fn bind_cpus(topology: &Topology, set: &CpuSet) -> Result<(), LaunchError> {
    let flags = CpuBindingFlags::ASSUME_SINGLE_THREAD | CpuBindingFlags::STRICT;
    topology
        .hw()
        .bind_cpu(set, flags)
        .map_err(|e| LaunchError::Bind {
            cpus: cpu_list(&cpus_of(set)),
            reason: e.to_string(),
        })?;
    let got = current(topology).unwrap_or_default();
    if got != *set {
        return Err(LaunchError::NotApplied {
            want: cpu_list(&cpus_of(set)),
            got: cpu_list(&cpus_of(&got)),
        });
    }
    Ok(())
}

/// Binds this thread (binder's only one) to the OS CPUs `cpus` with the kernel's
/// `sched_setaffinity`, with a mask as large as the highest CPU needs (no 1024-CPU
/// `cpu_set_t` limit), then reads it back. The warm path of the node cache uses this, so
/// a cache hit never loads a topology.
pub fn bind_cpus_raw(cpus: &[usize]) -> Result<(), LaunchError> {
    let words = cpus.iter().max().map_or(1, |m| m / 64 + 1);
    let mut mask = vec![0u64; words];
    for &c in cpus {
        mask[c / 64] |= 1 << (c % 64);
    }
    let bytes = words * 8;
    // SAFETY: the pointer and length describe `mask`, which outlives the call; the kernel
    // reads at most `bytes` bytes from it.
    let rc = unsafe { libc::sched_setaffinity(0, bytes, mask.as_ptr().cast()) };
    if rc != 0 {
        return Err(LaunchError::Bind {
            cpus: cpu_list(cpus),
            reason: std::io::Error::last_os_error().to_string(),
        });
    }
    let read = current_raw();
    if read != cpus {
        return Err(LaunchError::NotApplied {
            want: cpu_list(cpus),
            got: cpu_list(&read),
        });
    }
    Ok(())
}

/// This thread's affinity as the kernel has it (`sched_getaffinity`), OS numbers
/// ascending: the node ledger restores it when a launch hands over after binding.
pub fn current_raw() -> Vec<usize> {
    // Large enough for any kernel's mask (65,536 CPUs).
    let mut got = vec![0u64; 1024];
    // SAFETY: the pointer and length describe `got`, which outlives the call; the kernel
    // writes at most `got.len() * 8` bytes.
    let n = unsafe { libc::sched_getaffinity(0, got.len() * 8, got.as_mut_ptr().cast()) };
    let mut read = Vec::new();
    if n == 0 {
        for (w, &word) in got.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                read.push(w * 64 + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
    }
    read
}

/// Binds this process's memory to the NUMA nodes of `cpus` (strict `MPOL_BIND`, as
/// `numactl --membind` does); returns the NUMA nodes (OS numbers) bound to.
pub fn bind_memory_local(topology: &Topology, cpus: &CpuSet) -> Result<Vec<usize>, LaunchError> {
    let nodes = NodeSet::from_cpuset(topology.hw(), cpus);
    let list: Vec<usize> = nodes.iter_set().map(usize::from).collect();
    let flags = MemoryBindingFlags::ASSUME_SINGLE_THREAD | MemoryBindingFlags::STRICT;
    topology
        .hw()
        .bind_memory(&nodes, MemoryBindingPolicy::Bind, flags)
        .map_err(|e| LaunchError::Membind {
            nodes: cpu_list(&list),
            reason: e.to_string(),
        })?;
    Ok(list)
}
