//! This thread's CPU affinity through the kernel (`sched_setaffinity`/`sched_getaffinity`),
//! without hwloc: the warm launch path binds from a task view's OS CPU numbers.

use super::LaunchError;
use crate::cpulist::cpu_list;

/// Binds this thread (binder's only one) to the OS CPUs `cpus` with the kernel's
/// `sched_setaffinity`, with a mask as large as the highest CPU needs (no 1024-CPU
/// `cpu_set_t` limit), then reads it back. The warm path of the node cache uses this, so
/// a cache hit never loads a topology.
pub fn bind_cpus_raw(cpus: &[usize]) -> Result<(), LaunchError> {
    if cpus.is_empty() {
        // An empty mask is the kernel's EINVAL; say what it means instead.
        return Err(LaunchError::Bind {
            cpus: "(none)".into(),
            reason:
                "the plan gave this task no CPU (a bug, or an allocation with no CPU on this node)"
                    .into(),
        });
    }
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
        let error = std::io::Error::last_os_error();
        return Err(LaunchError::Bind {
            cpus: cpu_list(cpus),
            reason: reason(&error),
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

/// Why the kernel refused a binding, in words: EINVAL (the bare errno the kernel gives)
/// means that none of the CPUs is one this process may run on.
fn reason(error: &std::io::Error) -> String {
    match error.raw_os_error() {
        Some(libc::EINVAL) => format!(
            "the kernel refused them (EINVAL): none of them is a CPU this process may run on (online and in its cgroup's cpuset; it runs on cpus {} now), so the plan lies outside the task's allocation",
            cpu_list(&current_raw())
        ),
        _ => error.to_string(),
    }
}

/// This thread's affinity as the kernel has it (`sched_getaffinity`), OS numbers
/// ascending: the node ledger restores it when a launch hands over after binding.
pub(crate) fn current_raw() -> Vec<usize> {
    crate::procfs::affinity(None).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_binding_is_a_line_not_an_errno() {
        let e = bind_cpus_raw(&[]).unwrap_err().to_string();
        assert!(e.contains("cpus (none)") && e.contains("no CPU"), "{e}");
        // A CPU no machine has online: the kernel's EINVAL, in words.
        let e = bind_cpus_raw(&[4000]).unwrap_err().to_string();
        assert!(
            e.contains("cpus 4000") && e.contains("EINVAL") && e.contains("none of them"),
            "{e}"
        );
        assert!(!e.contains("Invalid argument"), "{e}");
    }
}
