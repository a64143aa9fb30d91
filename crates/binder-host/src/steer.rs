//! Which of other users' GPU claims a plan steers clear of (SEMANTICS §13.2, #45).
//!
//! Another user's GPU claim cannot be checked against the kernel (GPUs are not in
//! `/proc`), so it only steers: the plan avoids the GPUs it names when the job fits
//! without them, and never refuses for them. Steering is partial: when the job cannot
//! avoid every claimed GPU, it still avoids those of *firm* claims (a process that holds
//! its CPUs: no earlier-started task of another job is bound onto them) and gives up
//! first on claims that sit on another task's CPUs, such as a process bound onto a CPU
//! someone else claimed first to name every GPU of the node. So a verified live task's
//! GPU is never the one handed out while a GPU only a squatter names is idle.

use std::collections::BTreeSet;

use binder_core::ledger::{Holder, Scan};

/// The GPUs (bus ids) to steer clear of, most to least: every GPU other users' claims
/// name, then only those of firm claims, then none. Consecutive equal sets are given once.
pub(crate) fn levels(scan: &Scan) -> Vec<Vec<String>> {
    let mut out = vec![scan.steer_gpus.clone()];
    let firm = firm_gpus(scan);
    if firm != scan.steer_gpus {
        out.push(firm);
    }
    out
}

/// The GPUs named by other users' firm claims (sorted): a claim is firm unless a task of
/// another job that started earlier is bound onto one of its CPUs.
pub(crate) fn firm_gpus(scan: &Scan) -> Vec<String> {
    let others: Vec<&Holder> = scan.holders.iter().filter(|h| h.owner != scan.me).collect();
    let sits_on_another = |h: &Holder| {
        scan.holders.iter().any(|g| {
            g.claim.job != h.claim.job
                && g.priority() < h.priority()
                && g.cpus.iter().any(|c| h.cpus.contains(c))
        })
    };
    let firm: BTreeSet<String> = others
        .iter()
        .filter(|h| !sits_on_another(h))
        .flat_map(|h| h.claim.gpus.iter().cloned())
        .filter(|g| scan.steer_gpus.contains(g))
        .collect();
    firm.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use binder_core::identity::job::JobId;
    use binder_core::ledger::{Claim, FORMAT};
    use binder_core::view::Packing;

    fn holder(owner: u32, pid: u32, start: u64, cpus: &[usize], gpus: &[&str]) -> Holder {
        Holder {
            owner,
            claim: Claim {
                format: FORMAT,
                job: JobId(format!("job-{pid}")),
                rank: 0,
                size: 1,
                pid,
                start,
                cpus: cpus.to_vec(),
                gpus: gpus.iter().map(|g| g.to_string()).collect(),
                pack: Packing::Fill,
                unit: "core".into(),
                places: cpus.len(),
                pidns: 0,
            },
            cpus: cpus.to_vec(),
            confirmed: true,
        }
    }

    #[test]
    fn a_claim_bound_onto_anothers_cpu_steers_last() {
        // bob's task on CPU 4 holds GPU a; mallory bound a sleep onto CPU 4 later and
        // claims b, c, d.
        let mut scan = Scan::new(1000);
        scan.holders = vec![
            holder(1001, 10, 100, &[4], &["a"]),
            holder(1002, 20, 200, &[4], &["b", "c", "d"]),
        ];
        scan.steer_gpus = ["a", "b", "c", "d"].map(String::from).to_vec();
        assert_eq!(firm_gpus(&scan), ["a"]);
        let steps = levels(&scan);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[1], ["a"]);
        // On CPUs of her own, her claim is as firm as bob's.
        scan.holders[1] = holder(1002, 20, 200, &[5], &["b", "c", "d"]);
        assert_eq!(firm_gpus(&scan), ["a", "b", "c", "d"]);
        assert_eq!(levels(&scan).len(), 1);
    }
}
