//! How much one of this user's own claims is believed (SEMANTICS §13.1 item 2): only
//! what `/proc` confirms. Other users' claims are checked against the kernel's view
//! instead (`super::kernel`, §13.2).
//!
//! A claim file is a word; the process it names is the kernel's. A claim counts when its
//! PID is alive (not a zombie) with the start time the file's *name* records, runs as the
//! owner of the directory the file is in, and every thread of it may run only inside the
//! claim's CPUs (a task may narrow its own affinity, as OpenMP runtimes do, never widen
//! it). It then holds the CPUs its threads may really run on and its GPUs for as long as
//! it lives. A task bound to every CPU of the node (a one-task `count: all` job) holds
//! them all against the same user's other jobs: its claim is that user's own word.
//! Between users the kernel cannot tell such a task from an unbound process, so there it
//! holds nothing (see `super::kernel`).

use std::collections::BTreeSet;

use super::{Claim, Holder, FORMAT};
use crate::procfs::{Procs, Stat};

/// The process a claim names, `pid` started at `start`, while it still runs: its stat, or
/// why the claim counts for nothing (gone, or its pid reused by another process).
pub(super) fn live(procs: &dyn Procs, (pid, start): (u32, u64)) -> Result<Stat, String> {
    let stat = procs
        .stat(pid)
        .filter(|s| !s.ended())
        .ok_or_else(|| format!("pid {pid} is gone"))?;
    if stat.start != start {
        return Err(format!("pid {pid} is another process now"));
    }
    Ok(stat)
}

/// The most GPUs one claim may name (a node has far fewer; more is junk).
pub(crate) const MAX_GPUS: usize = 256;

/// The parts of a claim file's name `c.<pid>.<start>.<rank>.<job>`: PID, start, rank.
pub fn claim_name(name: &str) -> Option<(u32, u64, usize)> {
    let rest = name.strip_prefix("c.")?;
    let mut parts = rest.splitn(4, '.');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    let rank = parts.next()?.parse().ok()?;
    parts.next().filter(|j| !j.is_empty())?;
    Some((pid, start, rank))
}

/// A claim file's text, checked to be binder's format and to name the process (`pid`,
/// `start`) its file name names; `Err` says why it counts for nothing. Every claim read,
/// this user's or another's, goes through it.
pub(crate) fn parse_claim(text: &str, (pid, start): (u32, u64)) -> Result<Claim, String> {
    let claim: Claim = serde_json::from_str(text).map_err(|e| format!("corrupt: {e}"))?;
    if claim.format != FORMAT {
        return Err(format!("format {} (binder writes {FORMAT})", claim.format));
    }
    if claim.pid != pid || claim.start != start {
        return Err("its content names another process than its name".into());
    }
    if claim.gpus.len() > MAX_GPUS || claim.gpus.iter().any(|g| g.len() > 64) {
        return Err("names too many GPUs".into());
    }
    Ok(claim)
}

/// Whether a process with `pid` and `start` is alive (not a zombie).
pub(crate) fn alive(procs: &dyn Procs, pid: u32, start: u64) -> bool {
    procs
        .stat(pid)
        .is_some_and(|s| s.start == start && !s.ended())
}

/// A claim of a file named for (`pid`, `start`) in `owner`'s directory, checked against
/// the processes; `read` reads the file's content. `Err` says why it counts for nothing.
pub fn verify_claim(
    owner: u32,
    (pid, start): (u32, u64),
    read: impl FnOnce() -> Result<String, String>,
    confirmed: bool,
    procs: &dyn Procs,
) -> Result<Holder, String> {
    // The process first: a dead one's file is not even opened.
    live(procs, (pid, start))?;
    let claim = parse_claim(&read()?, (pid, start))?;
    let status = procs
        .status(pid)
        .ok_or_else(|| format!("pid {pid} cannot be read"))?;
    if status.uid != owner {
        return Err(format!(
            "pid {pid} belongs to uid {}, the file to uid {owner}",
            status.uid
        ));
    }
    let mut cpus = BTreeSet::new();
    if !claim.cpus.is_empty() {
        let mine = &claim.cpus;
        let threads = procs
            .threads(pid)
            .ok_or_else(|| format!("pid {pid} cannot be read"))?;
        for allowed in &threads {
            if allowed.is_empty() || !allowed.iter().all(|c| mine.binary_search(c).is_ok()) {
                return Err(format!(
                    "pid {pid} may run on cpus {}, not inside its claim's {}",
                    crate::cpulist::cpu_list(allowed),
                    crate::cpulist::cpu_list(&claim.cpus)
                ));
            }
            cpus.extend(allowed.iter().copied());
        }
    }
    Ok(Holder {
        owner,
        claim,
        cpus: cpus.into_iter().collect(),
        confirmed,
    })
}
