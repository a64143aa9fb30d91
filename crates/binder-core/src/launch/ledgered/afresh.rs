//! What a task does once its claim is written, before it runs (SEMANTICS §13.4-§13.5):
//! settle its claim against the other users' claims read again ([`Attempt::settle`]),
//! look at the whole node afresh where its inputs were in doubt
//! ([`Attempt::collides_afresh`]), tell a momentary binding from a rival by watching it
//! ([`Attempt::let_go`]), and notice a launch of its own user's that ran unclaimed
//! while this one held the lock ([`Attempt::ran_meanwhile`]).

use super::*;

impl Attempt<'_, '_> {
    /// Whether a task of this user's bound to some of `claim`'s CPUs started without the
    /// ledger while this launch held the lock (SEMANTICS §13.4: a stop fails closed). A
    /// launch stopped with the lock (SIGSTOP at any phase, `scontrol suspend`) makes the
    /// user's next launches fall back to the kernel's view at once, and those run
    /// unclaimed: where this one was not bound yet, on its CPUs. A launch whose process
    /// started more than [`STOPPED_AFTER`] ago, and finds that a launch of its user's
    /// fell back since it started (`Ledger::mark_fallback`), looks at its user's own
    /// bound tasks before it runs, and from then on plans around them too; a quick one
    /// costs nothing, a slow one a `statat`.
    pub(super) fn ran_meanwhile(&self, claim: &Claim, id: &JobId) -> bool {
        // Since this process started (a start time survives the hand-over to
        // `binder-full`, which then looks again), in clock ticks.
        let hz = ledger::clock_hz().max(1);
        let ran_ms = ledger::now_ticks().saturating_sub(self.me.1) * 1000 / hz;
        if self.own_kernel.get() || ran_ms < STOPPED_AFTER.as_millis() as u64 {
            return false;
        }
        // Only a launch that fell back since this one started ran unclaimed (one
        // `statat`; a tick's rounding and a second's margin on the side of looking).
        if !self
            .ledger
            .fell_back_since(Duration::from_millis(ran_ms + 1000))
        {
            return false;
        }
        self.own_kernel.set(true);
        let mut mine = Scan::new(self.ledger.uid());
        ledger::kernel::add_own(self.procs, self.ledger.uid(), id, &mut mine);
        self.not_mine(&mut mine.holders);
        mine.overlaps(&claim.cpus, &[])
    }

    /// After binding on a scan that could have missed another user's claim
    /// ([`Scan::doubtful`]: a listing cut short, a root changed since the listing reused,
    /// a directory that vanished), whether another user's process the kernel shows bound
    /// now, which the scan did not see there, holds some of `claim`'s CPUs, so that this task
    /// must move (SEMANTICS §13.5). Each of two such tasks binds before it looks, so the
    /// one that looks last sees the other. The earlier start keeps: a rival that started
    /// earlier (or whose start cannot be read) sends this task elsewhere at once; one
    /// that started later is given [`SETTLE`] to find this task and move, and sends it
    /// elsewhere if it still holds then (it looked before this task bound, or is no
    /// binder task). Costs one look at the whole node, and only where the scan is in
    /// doubt; inside a scheduler's allocation nothing outside it moves a task (§4.3).
    pub(super) fn collides_afresh(&self, claim: &Claim, planned: &Scan) -> bool {
        if claim.cpus.is_empty() || planned.doubtful().is_none() || planned.allocation.is_some() {
            return false;
        }
        let Some(view) = ledger::kernel::KernelView::look(self.procs, self.ledger.uid()) else {
            return false;
        };
        let ours = |cpus: &[usize]| cpus.iter().any(|c| claim.cpus.binary_search(c).is_ok());
        // A holder the plan already overlapped knowingly (what only steers) is no news;
        // one the scan saw elsewhere and that moved onto these CPUs since (a rival that
        // settled after this task planned) is.
        let known: BTreeSet<u32> = planned
            .holders
            .iter()
            .filter(|h| ours(&h.cpus))
            .map(|h| h.claim.pid)
            .collect();
        let momentary = self.momentary.borrow();
        let lineage = self.lineage.get_or_init(|| self.procs.lineage());
        let mut rivals: Vec<u32> = view
            .procs
            .iter()
            .filter(|(pid, seen)| {
                ours(&seen.cpus)
                    && !known.contains(pid)
                    && !momentary.contains(pid)
                    && !lineage.iter().any(|(p, _)| p == *pid)
            })
            .map(|(pid, _)| *pid)
            .collect();
        if rivals.is_empty() {
            return false;
        }
        let me = (self.me.1, self.me.0);
        let later = |p: &u32| self.procs.stat(*p).is_some_and(|s| (s.start, *p) > me);
        if !rivals.iter().all(later) {
            return true;
        }
        let everywhere = self.procs.everywhere();
        let until = Instant::now() + SETTLE;
        loop {
            rivals.retain(|&p| {
                self.procs
                    .threads(p)
                    .is_some_and(|t| ours(&ledger::kernel::bound_cpus(everywhere.as_deref(), &t)))
            });
            if rivals.is_empty() {
                return false;
            }
            if Instant::now() >= until {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Which of `pids` (bound processes of other users that no claim accounts for) let
    /// go of their CPUs, or end, within [`WATCH`]: looked at every [`WATCH_EVERY`], each
    /// thread's affinity as the kernel's view reads it, until every one was seen letting
    /// go once. One that holds throughout holds, as do those left when the watch has
    /// read [`WATCH_READS`] thread affinities (whatever their thread count: the cost is
    /// bounded, not the rule).
    pub(super) fn let_go(&self, pids: &[u32]) -> Vec<u32> {
        if pids.is_empty() {
            return Vec::new();
        }
        let everywhere = self.procs.everywhere();
        let mut watched = pids.to_vec();
        let mut gone = Vec::new();
        let until = Instant::now() + WATCH;
        let mut reads = 0usize;
        loop {
            watched.retain(|&p| {
                if reads >= WATCH_READS {
                    return true;
                }
                match self.procs.threads(p) {
                    Some(t) => {
                        reads += t.len();
                        if ledger::kernel::bound_cpus(everywhere.as_deref(), &t).is_empty() {
                            gone.push(p);
                            false
                        } else {
                            true
                        }
                    }
                    // Ended.
                    None => {
                        gone.push(p);
                        false
                    }
                }
            });
            if watched.is_empty() || reads >= WATCH_READS || Instant::now() >= until {
                self.momentary.borrow_mut().extend_from_slice(&gone);
                return gone;
            }
            std::thread::sleep(WATCH_EVERY);
        }
    }

    /// Reads the other users' claims again until this claim is clear (`Some`: whether
    /// any other claim was in sight) or another task goes first (`None`). A GPU that the
    /// plan took knowing another user claimed it (their claims steer, never refuse:
    /// SEMANTICS §13.2) is no reason to move; a claim that appeared since is.
    pub(super) fn settle(&self, claim: &Claim, planned: &Scan) -> Option<bool> {
        let until = Instant::now() + SETTLE;
        let me = (self.me.1, self.me.0);
        // A BTreeSet: a HashSet's random keys would cost a `getrandom` on every launch.
        let known: BTreeSet<(u32, u64)> = planned
            .holders
            .iter()
            .filter(|h| h.owner != planned.me)
            .map(|h| (h.claim.pid, h.claim.start))
            .collect();
        loop {
            let mut again = Scan::new(self.ledger.uid());
            self.ledger.scan_claims_of_others(self.procs, &mut again);
            self.not_mine(&mut again.holders);
            // Inside a scheduler's allocation, a claim that is no scheduler job's steered
            // the plan and never moves a placed task (SEMANTICS §4.3).
            again.allocation.clone_from(&planned.allocation);
            let kept: Vec<ledger::Holder> = std::mem::take(&mut again.holders)
                .into_iter()
                .filter(|h| again.in_the_way(h))
                .collect();
            again.holders = kept;
            for h in &mut again.holders {
                if known.contains(&(h.claim.pid, h.claim.start)) {
                    h.claim.gpus.clear();
                }
            }
            match ledger::verdict(&claim.cpus, &claim.gpus, me, &again.holders) {
                Verdict::Clear => return Some(!again.holders.is_empty()),
                Verdict::Yield => return None,
                Verdict::Wait if Instant::now() >= until => return None,
                Verdict::Wait => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }
}
