//! Between users, the kernel decides (SEMANTICS §13.2).
//!
//! Another user's CPUs are where their live threads may run, as `/proc` shows them
//! ([`crate::procfs::Procs::others`]), never what a file says: a bound thread (one not
//! allowed on every CPU, see [`crate::procfs::Procs::everywhere`]) holds the CPUs it may
//! run on, whether binder bound it or not; an unbound one holds nothing. Other users'
//! claim files add only what the kernel cannot show (their GPUs, their job's name) and
//! are believed only for a process the kernel shows bound.
//!
//! This view costs about two system calls per process of another user (and one per
//! thread of a threaded one); it is taken once per launch and shared with the user's
//! launches of the next 250 ms ([`super::shared`]), so that every user's bound tasks
//! count, with a ledger entry or without (SEMANTICS §13.3).

use std::collections::{BTreeMap, BTreeSet};

use super::{Claim, Holder, Scan, FORMAT};
use crate::identity::job::JobId;
use crate::procfs::Procs;
use crate::view::Packing;

/// Command names of a task that may still be settling its claim (binder's own, and the
/// launcher processes a plugin binds in before exec): a rival that runs anything else
/// has started its program and will not move.
pub(crate) const SETTLING: [&str; 4] = ["binder", "binder-full", "slurmstepd", "flux-shell"];

/// Another user's process as the kernel shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its owner.
    pub uid: u32,
    /// The CPUs its bound threads may run on (ascending); empty when it is not bound.
    pub cpus: Vec<usize>,
}

/// Every other user's process (but root's), by PID: the whole node's
/// ([`KernelView::look`]), or only the processes asked about ([`KernelView::claimed`]).
#[derive(Debug, Clone, Default)]
pub struct KernelView {
    /// What each process holds.
    pub procs: BTreeMap<u32, Seen>,
    /// Why `/proc` hides other users' processes, when it does.
    pub hidden: Option<String>,
    /// Whether `procs` is every process of the node (else a process is looked up when a
    /// claim names it: [`KernelView::ask`]).
    pub whole: bool,
    /// Whether `procs` was taken a moment ago by another launch of this user
    /// ([`super::shared`]): a process a claim names is then looked up again, once.
    pub stale: bool,
    /// The processes looked up again since.
    asked: BTreeSet<u32>,
    /// The user who looks.
    me: u32,
    /// The CPUs an unbound thread may run on (`Procs::everywhere`), read when a thread
    /// is first judged (a view read from the shared file, with no claim to check, never
    /// needs it: two files and a system call saved on a warm launch).
    everywhere: Option<Option<Vec<usize>>>,
}

impl KernelView {
    /// The kernel's view now, as user `me` sees it; `None` when `/proc` cannot be listed.
    pub fn look(procs: &dyn Procs, me: u32) -> Option<KernelView> {
        let mut view = KernelView::claimed(procs, me);
        view.whole = true;
        for other in procs.others(me)? {
            let seen = view.seen(procs, other.uid, &other.threads);
            view.procs.insert(other.pid, seen);
        }
        Some(view)
    }

    /// [`KernelView::look`], skipping root's long-lived processes remembered
    /// (`crate::procfs::settled`: `before` the mark's record, `roots` the settled roots,
    /// read when the look lists `/proc`), with what it found for the next look.
    pub fn look_settled(
        procs: &dyn Procs,
        me: u32,
        before: &crate::procfs::settled::Settled,
        roots: &dyn Fn() -> crate::procfs::settled::Settled,
    ) -> Option<(KernelView, crate::procfs::settled::Settled)> {
        let mut view = KernelView::claimed(procs, me);
        view.whole = true;
        let (others, after) = procs.others_settled(me, before, roots)?;
        for other in others {
            let seen = view.seen(procs, other.uid, &other.threads);
            view.procs.insert(other.pid, seen);
        }
        Some((view, after))
    }

    /// A view that holds only the processes other users' claims name, each looked up
    /// when asked ([`KernelView::ask`]): what a task settling its claim reads again and
    /// again, at a cost of the claims in sight rather than of every thread on the node
    /// (another user's thousands of idle threads cost it nothing).
    pub fn claimed(procs: &dyn Procs, me: u32) -> KernelView {
        KernelView {
            hidden: procs.hidden(),
            ..KernelView::empty(me)
        }
    }

    /// A view of nothing yet, for user `me`, that has not asked whether `/proc` hides
    /// anything (the shared file says so: `super::shared`).
    pub(crate) fn empty(me: u32) -> KernelView {
        KernelView {
            procs: BTreeMap::new(),
            hidden: None,
            whole: false,
            stale: false,
            asked: BTreeSet::new(),
            me,
            everywhere: None,
        }
    }

    /// Looks `pid` up when the view does not hold the whole node as it is now (once per
    /// process): a claim is checked against its process as it runs, even where the rest
    /// of the node comes from a view another launch took a moment ago.
    pub fn ask(&mut self, procs: &dyn Procs, pid: u32) {
        if self.stale {
            if !self.asked.insert(pid) {
                return;
            }
            self.procs.remove(&pid);
        } else if self.whole || self.procs.contains_key(&pid) {
            return;
        }
        let Some(status) = procs.status(pid) else {
            return;
        };
        if status.uid == self.me || status.uid == 0 {
            return;
        }
        let Some(threads) = procs.threads(pid) else {
            return;
        };
        let seen = self.seen(procs, status.uid, &threads);
        self.procs.insert(pid, seen);
    }

    /// What a process of `uid` whose threads may run on `threads` holds.
    fn seen(&mut self, procs: &dyn Procs, uid: u32, threads: &[Vec<usize>]) -> Seen {
        let everywhere = self.everywhere.get_or_insert_with(|| procs.everywhere());
        Seen {
            uid,
            cpus: bound_cpus(everywhere.as_deref(), threads),
        }
    }

    /// Whether any other user's process is bound.
    pub fn any_bound(&self) -> bool {
        self.procs.values().any(|s| !s.cpus.is_empty())
    }
}

/// The CPUs a process whose threads may run on `threads` holds: those of its bound
/// threads (a thread allowed on all of `everywhere` is bound by nobody), ascending.
pub(crate) fn bound_cpus(everywhere: Option<&[usize]>, threads: &[Vec<usize>]) -> Vec<usize> {
    let unbound = |allowed: &Vec<usize>| {
        everywhere.is_some_and(|e| e.iter().all(|c| allowed.binary_search(c).is_ok()))
    };
    let cpus: BTreeSet<usize> = threads
        .iter()
        .filter(|t| !t.is_empty() && !unbound(t))
        .flatten()
        .copied()
        .collect();
    cpus.into_iter().collect()
}

/// The kernel's view for `scan`'s user, or `None` with `scan` saying why it is missing.
pub fn look(procs: &dyn Procs, scan: &mut Scan) -> Option<KernelView> {
    let view = KernelView::look(procs, scan.me);
    if view.is_none() {
        scan.incomplete = Some("/proc cannot be listed".into());
    }
    view
}

/// What the kernel shows about another user's claim of `pid` (started at `start`) in a
/// directory of `owner`'s: its CPUs and whether it has started its program; `Err` says
/// why the claim counts for nothing.
pub fn check(
    view: &KernelView,
    procs: &dyn Procs,
    owner: u32,
    (pid, start): (u32, u64),
) -> Result<(Vec<usize>, bool), String> {
    let seen = view
        .procs
        .get(&pid)
        .ok_or_else(|| format!("pid {pid} is gone, or not another user's"))?;
    if seen.uid != owner {
        return Err(format!(
            "pid {pid} belongs to uid {}, the file to uid {owner}",
            seen.uid
        ));
    }
    let stat = super::verify::live(procs, (pid, start))?;
    Ok((seen.cpus.clone(), !SETTLING.contains(&stat.comm.as_str())))
}

/// A claim read from another user's file, as far as the kernel confirms it: it holds the
/// CPUs the kernel shows, and its GPUs only while its process is bound.
pub(crate) fn believe(owner: u32, mut claim: Claim, cpus: Vec<usize>, confirmed: bool) -> Holder {
    if cpus.is_empty() {
        claim.gpus.clear();
    }
    Holder {
        owner,
        claim,
        cpus,
        confirmed,
    }
}

/// Adds to `scan` the user's own bound tasks of other jobs, as the kernel shows them,
/// for a launch that cannot use the ledger or uses a fallback directory (SEMANTICS
/// §13.3: a user's own jobs are always found): every process of `me` bound to less
/// than every CPU, but this task and its ancestors (its envelope), the processes the
/// ledger already holds, a launch still settling (`SETTLING`: maybe a rank of this very
/// job) and this job's tasks (`BINDER_JOB=job` in their environment, which binder
/// sets at exec). Root's bound processes are the system's (per-CPU kernel threads,
/// pinned daemons): for root only binder's tasks of other jobs count.
pub(crate) fn add_own(procs: &dyn Procs, me: u32, job: &JobId, scan: &mut Scan) {
    let Some(mine) = procs.mine(me) else {
        return;
    };
    let everywhere = procs.everywhere();
    let lineage: BTreeSet<u32> = procs.lineage().iter().map(|(pid, _)| *pid).collect();
    // Those the ledger already has (their claims say more: job, GPUs).
    let claimed: BTreeSet<u32> = scan.holders.iter().map(|h| h.claim.pid).collect();
    let tasks = claimed_tasks(&scan.holders);
    for process in mine {
        let cpus = bound_cpus(everywhere.as_deref(), &process.threads);
        if cpus.is_empty() || lineage.contains(&process.pid) || claimed.contains(&process.pid) {
            continue;
        }
        let Some(stat) = procs.stat(process.pid).filter(|s| !s.ended()) else {
            continue;
        };
        if inside_a_task(procs, &tasks, me, stat.ppid, &cpus) {
            continue;
        }
        if SETTLING.contains(&stat.comm.as_str()) {
            continue;
        }
        match procs.environ_var(process.pid, "BINDER_JOB") {
            Some(theirs) if theirs == job.0 => continue,
            None if me == 0 => continue,
            _ => {}
        }
        scan.holders
            .push(unclaimed(me, process.pid, stat.start, cpus, true));
    }
}

/// How many ancestors of an unclaimed bound process are looked at for a claimed task.
const MAX_ANCESTORS: usize = 8;

/// Whether the bound process `pid` (whose parent is `ppid`), of `owner`, holding `cpus`,
/// runs inside a claimed task of the same owner that holds them all: a task's children
/// (its shell, its MPI ranks' helpers) inherit its binding and are that task, not jobs of
/// their own (`binder node` counted them as `pid:N`, SEMANTICS §13.5).
fn inside_a_task(
    procs: &dyn Procs,
    claimed: &BTreeMap<u32, (u32, Vec<usize>)>,
    owner: u32,
    mut ppid: u32,
    cpus: &[usize],
) -> bool {
    for _ in 0..MAX_ANCESTORS {
        if ppid <= 1 {
            return false;
        }
        if let Some((by, held)) = claimed.get(&ppid) {
            return *by == owner && cpus.iter().all(|c| held.binary_search(c).is_ok());
        }
        match procs.stat(ppid) {
            Some(stat) => ppid = stat.ppid,
            None => return false,
        }
    }
    false
}

/// The claimed tasks among `holders` (not `pid:` ones): PID, owner and CPUs held.
fn claimed_tasks(holders: &[Holder]) -> BTreeMap<u32, (u32, Vec<usize>)> {
    holders
        .iter()
        .filter(|h| !h.claim.job.is_unclaimed() && !h.cpus.is_empty())
        .map(|h| (h.claim.pid, (h.owner, h.cpus.clone())))
        .collect()
}

/// A holder for a bound process no claim accounts for, as a task of a job named after it.
fn unclaimed(owner: u32, pid: u32, start: u64, cpus: Vec<usize>, confirmed: bool) -> Holder {
    Holder {
        owner,
        claim: Claim {
            format: FORMAT,
            job: JobId::unclaimed(pid),
            rank: 0,
            size: 1,
            pid,
            start,
            cpus: cpus.clone(),
            gpus: Vec::new(),
            pack: Packing::Fill,
            unit: "pu".into(),
            places: cpus.len(),
            pidns: 0,
        },
        cpus,
        confirmed,
    }
}

/// Adds to `scan` every bound process of another user that no claim read accounts for,
/// as a task of a job named after it, and notes what `view` says about hidden processes.
pub(crate) fn add_unclaimed(view: &KernelView, procs: &dyn Procs, scan: &mut Scan) {
    scan.kernel = true;
    if scan.hidden.is_none() {
        scan.hidden.clone_from(&view.hidden);
    }
    let known: BTreeSet<u32> = scan.holders.iter().map(|h| h.claim.pid).collect();
    let claimed = claimed_tasks(&scan.holders);
    for (&pid, seen) in &view.procs {
        if seen.cpus.is_empty() || known.contains(&pid) {
            continue;
        }
        let Some(stat) = procs.stat(pid).filter(|s| !s.ended()) else {
            continue;
        };
        if inside_a_task(procs, &claimed, seen.uid, stat.ppid, &seen.cpus) {
            continue;
        }
        let confirmed = !SETTLING.contains(&stat.comm.as_str());
        if view.stale {
            scan.stale.push(pid);
        }
        scan.holders.push(unclaimed(
            seen.uid,
            pid,
            stat.start,
            seen.cpus.clone(),
            confirmed,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::{Stat, Status};

    /// Processes: (pid, uid, comm, threads).
    struct Fake(Vec<(u32, u32, &'static str, Vec<Vec<usize>>)>);

    impl Procs for Fake {
        fn me(&self) -> u32 {
            1
        }
        fn stat(&self, pid: u32) -> Option<Stat> {
            let p = self.0.iter().find(|p| p.0 == pid)?;
            Some(Stat {
                comm: p.2.into(),
                state: 'S',
                ppid: 1,
                pgrp: pid,
                start: u64::from(pid) * 10,
                threads: 1,
            })
        }
        fn status(&self, pid: u32) -> Option<Status> {
            let p = self.0.iter().find(|p| p.0 == pid)?;
            Some(Status {
                uid: p.1,
                cpus: p.3[0].clone(),
            })
        }
        fn threads(&self, pid: u32) -> Option<Vec<Vec<usize>>> {
            Some(self.0.iter().find(|p| p.0 == pid)?.3.clone())
        }
        fn pids(&self) -> Option<std::collections::HashSet<u32>> {
            Some(self.0.iter().map(|p| p.0).collect())
        }
        fn online(&self) -> Option<Vec<usize>> {
            Some(vec![0, 1, 2, 3])
        }
        fn mine(&self, me: u32) -> Option<Vec<crate::procfs::Other>> {
            Some(
                self.0
                    .iter()
                    .filter(|p| p.1 == me)
                    .map(|p| crate::procfs::Other {
                        pid: p.0,
                        uid: p.1,
                        threads: p.3.clone(),
                    })
                    .collect(),
            )
        }
        fn environ_var(&self, pid: u32, name: &str) -> Option<String> {
            // Each `app` of alice's carries its job's name; pid 41 is this job's.
            let p = self.0.iter().find(|p| p.0 == pid)?;
            (name == "BINDER_JOB" && p.2 == "app").then(|| format!("job-{}", pid / 41))
        }
    }

    #[test]
    fn a_fallback_finds_the_users_own_tasks_of_other_jobs() {
        let mut procs = node();
        procs.0.extend([
            // alice: this job's other rank, a bound shell of hers, an unbound one.
            (41, 1000, "app", vec![vec![3]]),
            (42, 1000, "bash", vec![vec![1]]),
            (43, 1000, "bash", vec![vec![0, 1, 2, 3]]),
            // root: a per-CPU kernel thread, and a binder task of root's (job-0).
            (2, 0, "ksoftirqd/0", vec![vec![0]]),
            (3, 0, "app", vec![vec![1]]),
        ]);
        let held = |me: u32| {
            let mut scan = Scan::new(me);
            add_own(&procs, me, &JobId("job-1".into()), &mut scan);
            let mut held: Vec<(u32, Vec<usize>)> = scan
                .holders
                .iter()
                .map(|h| (h.claim.pid, h.cpus.clone()))
                .collect();
            held.sort();
            held
        };
        // alice's task of another job (40, job-0) and her bound shell; not her job's
        // own rank (41), not an unbound process.
        assert_eq!(held(1000), [(40, vec![2]), (42, vec![1])]);
        // Root's only counts where binder launched it: not the kernel thread, not irqd.
        assert_eq!(held(0), [(3, vec![1])]);
    }

    fn node() -> Fake {
        Fake(vec![
            // bob's task on CPU 1; his shell, unbound.
            (10, 1001, "app", vec![vec![1]]),
            (11, 1001, "bash", vec![vec![0, 1, 2, 3]]),
            // mallory: one thread of many bound to 3, the rest anywhere.
            (20, 1002, "sleep", vec![vec![0, 1, 2, 3], vec![3]]),
            // root's pinned daemon and alice's own task: not looked at.
            (30, 0, "irqd", vec![vec![2]]),
            (40, 1000, "app", vec![vec![2]]),
            // bob's task still in binder.
            (50, 1001, "binder", vec![vec![0]]),
        ])
    }

    #[test]
    fn bound_threads_hold_unbound_ones_do_not() {
        let view = KernelView::look(&node(), 1000).unwrap();
        let held: Vec<(u32, Vec<usize>)> = view
            .procs
            .iter()
            .map(|(p, s)| (*p, s.cpus.clone()))
            .collect();
        assert_eq!(
            held,
            vec![(10, vec![1]), (11, vec![]), (20, vec![3]), (50, vec![0])]
        );
        assert!(view.any_bound());
    }

    #[test]
    fn a_claim_counts_as_the_kernel_shows_it() {
        let procs = node();
        let view = KernelView::look(&procs, 1000).unwrap();
        assert_eq!(check(&view, &procs, 1001, (10, 100)), Ok((vec![1], true)));
        assert_eq!(check(&view, &procs, 1001, (50, 500)), Ok((vec![0], false)));
        // Another user's PID, a reused PID, root's, one's own: nothing.
        assert!(check(&view, &procs, 1002, (10, 100)).is_err());
        assert!(check(&view, &procs, 1001, (10, 99)).is_err());
        assert!(check(&view, &procs, 0, (30, 300)).is_err());
        assert!(check(&view, &procs, 1000, (40, 400)).is_err());
    }

    #[test]
    fn an_unbound_process_holds_no_gpu() {
        let claim = Claim {
            format: FORMAT,
            job: JobId("j".into()),
            rank: 0,
            size: 1,
            pid: 11,
            start: 110,
            cpus: vec![0, 1, 2, 3],
            gpus: vec!["0000:01:00.0".into()],
            pack: Packing::Fill,
            unit: "core".into(),
            places: 4,
            pidns: 0,
        };
        assert!(believe(1001, claim.clone(), vec![], true)
            .claim
            .gpus
            .is_empty());
        assert_eq!(believe(1001, claim, vec![1], true).claim.gpus.len(), 1);
    }

    #[test]
    fn bound_processes_without_a_claim_are_holders() {
        let procs = node();
        let view = KernelView::look(&procs, 1000).unwrap();
        let mut scan = Scan::new(1000);
        add_unclaimed(&view, &procs, &mut scan);
        let held: Vec<(u32, Vec<usize>, bool)> = scan
            .holders
            .iter()
            .map(|h| (h.claim.pid, h.cpus.clone(), h.confirmed))
            .collect();
        assert_eq!(
            held,
            vec![
                (10, vec![1], true),
                (20, vec![3], true),
                (50, vec![0], false)
            ]
        );
        assert_eq!(scan.cpus(), vec![0, 1, 3]);
        assert!(scan.kernel);
    }
}
