//! The scheduler's word (SEMANTICS §4.3): inside a scheduler's allocation (a Slurm job's
//! step, a Flux job), the CPUs the scheduler gave the job are the job's. Tasks of
//! scheduler jobs (any step of any Slurm job here, any Flux job) coordinate through the
//! ledger as ever; a bound process that is no task of a scheduler job (another user's
//! `taskset -c 0 sleep`, a pinned daemon, a launch outside any allocation) steers the
//! plan when the job fits without its CPUs, and otherwise is named once and planned
//! over: it never refuses a task the scheduler placed, nor moves it outside the
//! allocation.

use binder_core::ledger::Holder;

/// The one warning for holders planned over: which processes, on which CPUs.
pub(crate) fn planned_over(allocation: &str, outside: &[Holder], hidden: &[usize]) -> String {
    let what = if allocation.starts_with("flux:") {
        "Flux gave this job"
    } else {
        "Slurm gave this step"
    };
    let mut named: Vec<String> = outside
        .iter()
        .take(4)
        .map(|h| {
            format!(
                "pid {} of {} on cpus {}",
                h.claim.pid,
                binder_core::text::printable(&binder_core::procfs::user_name(h.owner), 32),
                binder_core::cpulist::cpu_list(&h.cpus)
            )
        })
        .collect();
    if outside.len() > 4 {
        named.push(format!("{} more", outside.len() - 4));
    }
    if !hidden.is_empty() {
        named.push(format!(
            "processes /proc hides on cpus {}",
            binder_core::cpulist::cpu_list(hidden)
        ));
    }
    format!(
        "warning: bound processes that are no task of a scheduler job run on CPUs {what} ({}); binder places this job's tasks on the scheduler's CPUs all the same (SEMANTICS §4.3)",
        named.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use binder_core::identity::job::JobId;
    use binder_core::ledger::{Claim, Scan, FORMAT};
    use binder_core::view::Packing;

    fn holder(job: &str, cpus: &[usize]) -> Holder {
        Holder {
            owner: 1001,
            claim: Claim {
                format: FORMAT,
                job: JobId(job.into()),
                rank: 0,
                size: 1,
                pid: 7,
                start: 1,
                cpus: cpus.to_vec(),
                gpus: Vec::new(),
                pack: Packing::Fill,
                unit: "pu".into(),
                places: cpus.len(),
                pidns: 0,
            },
            cpus: cpus.to_vec(),
            confirmed: true,
        }
    }

    #[test]
    fn inside_an_allocation_only_scheduler_jobs_are_held() {
        let mut scan = Scan::new(1000);
        scan.holders = vec![
            holder("pid:7", &[0]),
            holder("slurm:9.0", &[1]),
            holder("openmpi:x", &[2]),
        ];
        // Outside any allocation, everything counts.
        assert!(scan.scheduler_only().is_none());
        scan.allocation = Some("slurm:12.".into());
        let (only, outside) = scan.scheduler_only().expect("some left out");
        let jobs: Vec<&str> = only
            .holders
            .iter()
            .map(|h| h.claim.job.0.as_str())
            .collect();
        assert_eq!(jobs, ["slurm:9.0"]);
        assert_eq!(outside.len(), 2);
        let line = planned_over("slurm:12.", &outside, &[]);
        assert!(
            line.contains("pid 7")
                && line.contains("cpus 0")
                && line.contains("Slurm gave this step"),
            "{line}"
        );
        // A Flux job's: another Flux job is the scheduler's, a taskset is not.
        scan.allocation = Some("flux:".into());
        scan.holders = vec![holder("flux:ƒA.0", &[0])];
        assert!(scan.scheduler_only().is_none());
    }
}
