//! The ledger's trust rules on processes described by hand.

use super::*;
use crate::procfs::{Stat, Status};
use std::collections::HashMap;

/// Processes: pid → (uid, start, affinity).
struct Fake(HashMap<u32, (u32, u64, Vec<usize>)>);

impl Procs for Fake {
    fn me(&self) -> u32 {
        1
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        self.0.get(&pid).map(|(_, start, _)| Stat {
            comm: "app".into(),
            state: if pid == 66 { 'Z' } else { 'S' },
            ppid: 1,
            pgrp: pid,
            start: *start,
        })
    }
    fn status(&self, pid: u32) -> Option<Status> {
        self.0.get(&pid).map(|(uid, _, cpus)| Status {
            uid: *uid,
            cpus: cpus.clone(),
        })
    }
}

fn view(cpus: &[usize]) -> TaskView {
    TaskView {
        unit: "core".into(),
        cpus: cpus.to_vec(),
        places: cpus.iter().map(|&c| vec![c]).collect(),
        gpus: Vec::new(),
        nics: Vec::new(),
        binding: String::new(),
        ge_env: Vec::new(),
        apply: true,
        openmp: false,
        membind: false,
    }
}

fn entry(tasks: &[&[usize]], members: &[(usize, u32, u64)]) -> Entry {
    Entry {
        format: FORMAT,
        job: JobId("test:1".into()),
        key: "k".into(),
        pack: Pack::Fill,
        tasks: tasks.iter().map(|c| view(c)).collect(),
        members: members
            .iter()
            .map(|&(rank, pid, start)| Member { rank, pid, start })
            .collect(),
    }
}

const HZ: u64 = 100;
/// An hour after boot, in ticks.
const NOW: u64 = 3600 * HZ;

fn one(e: Entry, owner: u32, procs: &Fake) -> Result<Vec<usize>, String> {
    let scan = verify(vec![("f".into(), Some(owner), Ok(e))], procs, NOW, HZ);
    match (scan.live.first(), scan.ignored.first()) {
        (Some(l), _) => Ok(l.cpus.clone()),
        (_, Some(i)) => Err(i.why.clone()),
        _ => unreachable!(),
    }
}

#[test]
fn a_bound_live_task_holds_its_cpus() {
    let procs = Fake([(10, (1000, 50, vec![0, 1]))].into());
    assert_eq!(
        one(entry(&[&[0, 1]], &[(0, 10, 50)]), 1000, &procs),
        Ok(vec![0, 1])
    );
    // A task may narrow its affinity (OpenMP binds its main thread to a place).
    let procs = Fake([(10, (1000, 50, vec![1]))].into());
    assert_eq!(
        one(entry(&[&[0, 1]], &[(0, 10, 50)]), 1000, &procs),
        Ok(vec![0, 1])
    );
}

#[test]
fn forged_or_stale_entries_count_for_nothing() {
    // Dead.
    let none = Fake(HashMap::new());
    let e = one(entry(&[&[0]], &[(0, 10, 50)]), 1000, &none).unwrap_err();
    assert!(e.contains("pid 10 is gone"), "{e}");
    // A zombie: ended, not yet reaped by its launcher.
    let procs = Fake([(66, (1000, 50, vec![0]))].into());
    let e = one(entry(&[&[0]], &[(0, 66, 50)]), 1000, &procs).unwrap_err();
    assert!(e.contains("pid 66 is gone"), "{e}");
    // Alive but another process (PID reused).
    let procs = Fake([(10, (1000, 99, vec![0]))].into());
    let e = one(entry(&[&[0]], &[(0, 10, 50)]), 1000, &procs).unwrap_err();
    assert!(e.contains("another process"), "{e}");
    // Alive but not bound as recorded (the affinity is wider).
    let procs = Fake([(10, (1000, 50, vec![0, 1]))].into());
    let e = one(entry(&[&[0]], &[(0, 10, 50)]), 1000, &procs).unwrap_err();
    assert!(e.contains("not inside its rank's 0"), "{e}");
    // Another user's process named in my file.
    let procs = Fake([(10, (0, 50, vec![0]))].into());
    let e = one(entry(&[&[0]], &[(0, 10, 50)]), 1000, &procs).unwrap_err();
    assert!(e.contains("belongs to uid 0"), "{e}");
    // Another format, and a rank outside the plan.
    let mut old = entry(&[&[0]], &[(0, 10, 50)]);
    old.format = 0;
    let procs = Fake([(10, (1000, 50, vec![0]))].into());
    assert!(one(old, 1000, &procs).unwrap_err().contains("format 0"));
    let e = one(entry(&[&[0]], &[(3, 10, 50)]), 1000, &procs).unwrap_err();
    assert!(e.contains("rank 3 is not in its plan"), "{e}");
}

#[test]
fn ranks_not_started_hold_only_during_the_grace_period() {
    // Rank 0 started 10 s ago: rank 1 (not started) still holds its cpus.
    let recent = NOW - 10 * HZ;
    let procs = Fake([(10, (1000, recent, vec![0]))].into());
    assert_eq!(
        one(entry(&[&[0], &[1]], &[(0, 10, recent)]), 1000, &procs),
        Ok(vec![0, 1])
    );
    // Started 2 minutes ago: only what runs counts.
    let old = NOW - 120 * HZ;
    let procs = Fake([(10, (1000, old, vec![0]))].into());
    assert_eq!(
        one(entry(&[&[0], &[1]], &[(0, 10, old)]), 1000, &procs),
        Ok(vec![0])
    );
    // A rank that started and ended frees its cpus at once.
    let procs = Fake([(10, (1000, recent, vec![0]))].into());
    assert_eq!(
        one(
            entry(&[&[0], &[1]], &[(0, 10, recent), (1, 11, recent)]),
            1000,
            &procs
        ),
        Ok(vec![0])
    );
}

#[test]
fn unreadable_files_are_listed_not_believed() {
    let scan = verify(
        vec![("f".into(), Some(1000), Err("corrupt: EOF".into()))],
        &Fake(HashMap::new()),
        NOW,
        HZ,
    );
    assert!(scan.live.is_empty());
    assert_eq!(scan.ignored[0].why, "corrupt: EOF");
}
