//! This thread's CPU affinity through the kernel (`sched_setaffinity`/`sched_getaffinity`),
//! without hwloc: the warm launch path binds from a task view's OS CPU numbers.

use super::LaunchError;
use crate::cpulist::cpu_list;

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
pub(crate) fn current_raw() -> Vec<usize> {
    crate::procfs::affinity(None).unwrap_or_default()
}
