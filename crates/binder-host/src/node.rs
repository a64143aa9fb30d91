//! `binder node`: the node as the ledger sees it (SEMANTICS §13). Its topology string with
//! held units lowercase, each job with its tasks and units, and the INFN packing paper's
//! two metrics per level (package, NUMA node, L3):
//!
//! - **packing index** of a job at a level = the fewest containers of that level that
//!   could hold its bound PUs / the containers it actually uses (1 = packed as tightly as
//!   possible); the level's index is Σ fewest / Σ used over the jobs;
//! - **fill factor** of a level = bound PUs / allowed PUs of the containers in use (1 =
//!   the containers jobs touch are full; an exclusive job's idle remainder lowers it). The
//!   node's fill factor is bound PUs / allowed PUs.
//!
//! Pure: it takes a [`Scan`] (already verified) and a topology, so a test can describe a
//! ledger without processes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use binder_core::cpulist::cpu_list;
use binder_core::ledger::{Ignored, Scan};
use binder_core::text::printable;
use binder_plan::shape::{ObjType, Pack};
use binder_plan::topology::Topology;

/// One level's packing metrics.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    /// `package`, `numa` or `l3`.
    pub level: &'static str,
    /// Containers of the level with allowed PUs.
    pub containers: usize,
    /// Containers holding a bound PU.
    pub in_use: usize,
    /// Σ over jobs of the fewest containers that could hold them.
    pub needed: usize,
    /// Σ over jobs of the containers they use.
    pub used: usize,
    /// `needed / used` (1 when no job is bound).
    pub packing_index: f64,
    /// Bound PUs / allowed PUs of the containers in use (0 when none is).
    pub fill_factor: f64,
}

/// One job's row.
#[derive(Debug, Clone, Serialize)]
pub struct JobRow {
    /// Job id.
    pub job: String,
    /// Owner's name (or uid).
    pub user: String,
    /// Owner's uid.
    pub uid: u32,
    /// Packing policy.
    pub pack: Pack,
    /// Local tasks in its plan.
    pub tasks: usize,
    /// Tasks running (verified).
    pub running: usize,
    /// Their PIDs.
    pub pids: Vec<u32>,
    /// The CPUs its tasks are bound to.
    pub cpus: String,
    /// The CPUs it keeps from other jobs (more than `cpus` for an exclusive job, or while
    /// ranks are still starting).
    pub held: String,
    /// Its binding units, e.g. `2 core`.
    pub units: String,
    /// The GPUs its tasks hold, as `gpu:N` (PCI bus id when the node has no such GPU).
    pub gpus: Vec<String>,
    /// Packing index per level.
    pub packing: BTreeMap<&'static str, f64>,
}

/// A file that counts for nothing.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The file name.
    pub file: String,
    /// Its owner's uid, when known.
    pub uid: Option<u32>,
    /// Why it is ignored.
    pub why: String,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    /// Host name.
    pub host: String,
    /// The ledger directory.
    pub ledger: String,
    /// Topology string, held units lowercase.
    pub topology: String,
    /// Allowed PUs.
    pub allowed: usize,
    /// PUs bound by some job.
    pub bound: usize,
    /// PUs held by some job (bound, starting, or an exclusive job's whole containers).
    pub held: usize,
    /// `bound / allowed`.
    pub fill_factor: f64,
    /// Jobs that count.
    pub jobs: Vec<JobRow>,
    /// Metrics per level.
    pub levels: Vec<Level>,
    /// Files ignored.
    pub ignored: Vec<Skipped>,
    /// Why the view may be partial (a flood of names, a limit reached), when it may.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial: Option<String>,
    /// Why `/proc` hides other users' tasks, when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<String>,
}

/// A job's name as the table shows it: as it is when it is a plain word, else quoted and
/// escaped, so that no name another user chose can pass for a column of the table (a
/// user, a count, another job's row).
fn job_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name.len() <= 60
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:@/+=,-".contains(c));
    if plain {
        name.to_owned()
    } else {
        let quoted = format!("{:?}", binder_core::text::clip(name, 60));
        printable(&quoted, 80)
    }
}

/// The PUs a job holds on `topology`: `cpus`, widened to whole containers for an
/// exclusive job.
pub fn held_pus(topology: &Topology, pack: Pack, cpus: &[usize]) -> Vec<usize> {
    if pack == Pack::Exclusive {
        binder_plan::pack::widen(&binder_plan::pack::containers(topology).1, cpus)
    } else {
        cpus.to_vec()
    }
}

/// Builds the report; `user` names a uid.
pub fn build(
    topology: &Topology,
    scan: &Scan,
    ledger: &str,
    host: &str,
    user: &dyn Fn(u32) -> String,
) -> Node {
    let allowed: BTreeSet<usize> = topology.allowed().iter_set().collect();
    let mut bound = BTreeSet::new();
    let mut held = BTreeSet::new();
    let levels: Vec<(&'static str, Vec<Vec<usize>>)> = [
        ("package", ObjType::Package),
        ("numa", ObjType::Numa),
        ("l3", ObjType::L3),
    ]
    .into_iter()
    .map(|(name, kind)| (name, binder_plan::pack::allowed_pus(topology, kind)))
    .filter(|(_, sets)| !sets.is_empty())
    .collect();
    let mut sums: BTreeMap<&'static str, (usize, usize)> = BTreeMap::new();
    let mut jobs = Vec::new();
    let numbers: Vec<(String, usize)> = if topology.has_io() {
        binder_plan::gpu::discover(topology)
            .into_iter()
            .map(|g| (g.busid, g.number))
            .collect()
    } else {
        Vec::new()
    };
    for job in scan.jobs() {
        let cpus: Vec<usize> = job
            .cpus()
            .into_iter()
            .filter(|p| allowed.contains(p))
            .collect();
        bound.extend(cpus.iter().copied());
        let holds = held_pus(topology, job.pack.into(), &cpus);
        held.extend(holds.iter().copied().filter(|p| allowed.contains(p)));
        let mut packing = BTreeMap::new();
        if !cpus.is_empty() {
            for (name, sets) in &levels {
                let used = sets
                    .iter()
                    .filter(|s| s.iter().any(|p| cpus.binary_search(p).is_ok()))
                    .count();
                let needed = fewest(sets, cpus.len());
                let sum = sums.entry(name).or_default();
                sum.0 += needed;
                sum.1 += used;
                packing.insert(*name, ratio(needed, used));
            }
        }
        let places: usize = job.tasks.iter().map(|t| t.claim.places).sum();
        let unit = job.tasks.first().map_or("none", |t| t.claim.unit.as_str());
        let tasks = job.tasks.iter().map(|t| t.claim.size).max().unwrap_or(0);
        let gpus = job
            .gpus()
            .iter()
            .map(|b| {
                // A MIG instance's claim is `busid/MIG-…`: its parent's number and the entry.
                let (bus, mig) = b.split_once('/').unwrap_or((b, ""));
                match numbers.iter().find(|(busid, _)| busid == bus) {
                    Some((_, n)) if mig.is_empty() => format!("gpu:{n}"),
                    Some((_, n)) => format!("gpu:{n}/{}", printable(mig, 48)),
                    None => printable(b, 16),
                }
            })
            .collect();
        jobs.push(JobRow {
            job: job_name(&job.job.0),
            user: printable(&user(job.owner), 32),
            uid: job.owner,
            pack: job.pack.into(),
            tasks,
            running: job.tasks.len(),
            pids: job.pids(),
            cpus: cpu_list(&cpus),
            held: cpu_list(&holds),
            units: if places == 0 {
                "unbound".into()
            } else {
                format!("{places} {}", printable(unit, 8))
            },
            gpus,
            packing,
        });
    }
    let level_rows = levels
        .iter()
        .map(|(name, sets)| {
            let in_use: Vec<&Vec<usize>> = sets
                .iter()
                .filter(|s| s.iter().any(|p| bound.contains(p)))
                .collect();
            let capacity: usize = in_use.iter().map(|s| s.len()).sum();
            let (needed, used) = sums.get(name).copied().unwrap_or_default();
            Level {
                level: name,
                containers: sets.len(),
                in_use: in_use.len(),
                needed,
                used,
                packing_index: ratio(needed, used),
                fill_factor: if capacity == 0 {
                    0.0
                } else {
                    round(bound.len() as f64 / capacity as f64)
                },
            }
        })
        .collect();
    let mut tree = topology.ge_tree();
    binder_plan::ge::reserve::take(&mut tree, &held.iter().copied().collect::<Vec<_>>());
    Node {
        host: host.to_owned(),
        ledger: ledger.to_owned(),
        topology: tree.occupancy_string(),
        allowed: allowed.len(),
        bound: bound.len(),
        held: held.len(),
        fill_factor: if allowed.is_empty() {
            0.0
        } else {
            round(bound.len() as f64 / allowed.len() as f64)
        },
        jobs,
        levels: level_rows,
        ignored: scan.ignored.iter().map(skipped).collect(),
        partial: scan.incomplete.as_deref().map(|w| printable(w, 160)),
        hidden: scan.hidden.as_deref().map(|w| printable(w, 160)),
    }
}

fn skipped(i: &Ignored) -> Skipped {
    Skipped {
        file: i.file.clone(),
        uid: i.owner,
        why: i.why.clone(),
    }
}

/// The fewest containers whose sizes add up to `pus` (largest first).
fn fewest(sets: &[Vec<usize>], pus: usize) -> usize {
    let mut sizes: Vec<usize> = sets.iter().map(Vec::len).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut left = pus;
    let mut n = 0;
    for s in sizes {
        if left == 0 {
            break;
        }
        left = left.saturating_sub(s);
        n += 1;
    }
    n
}

fn ratio(needed: usize, used: usize) -> f64 {
    if used == 0 {
        1.0
    } else {
        round(needed as f64 / used as f64)
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The report for people: a header, the topology string, a job table, a level table, and
/// the ignored files.
pub fn render_text(node: &Node) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "binder node {}: {} of {} allowed PUs bound by {} job(s), fill factor {:.2}; ledger {}",
        node.host,
        node.bound,
        node.allowed,
        node.jobs.len(),
        node.fill_factor,
        node.ledger
    );
    let _ = writeln!(
        out,
        "topology  {}  (lowercase: held by a job)",
        node.topology
    );
    if !node.jobs.is_empty() {
        let levels: Vec<&str> = node.levels.iter().map(|l| l.level).collect();
        let mut rows = vec![vec![
            "JOB".to_owned(),
            "USER".into(),
            "PACK".into(),
            "TASKS".into(),
            "PIDS".into(),
            "CPUS".into(),
            "HELD".into(),
            "UNITS".into(),
            "GPUS".into(),
            format!("PACKING INDEX {}", levels.join("/")),
        ]];
        for j in &node.jobs {
            let pids: Vec<String> = j.pids.iter().map(ToString::to_string).collect();
            let pi: Vec<String> = levels
                .iter()
                .map(|l| j.packing.get(l).map_or("-".into(), |v| format!("{v:.2}")))
                .collect();
            rows.push(vec![
                j.job.clone(),
                j.user.clone(),
                j.pack.to_string(),
                format!("{}/{}", j.running, j.tasks),
                pids.join(","),
                if j.cpus.is_empty() {
                    "-".into()
                } else {
                    j.cpus.clone()
                },
                if j.held.is_empty() {
                    "-".into()
                } else {
                    j.held.clone()
                },
                j.units.clone(),
                if j.gpus.is_empty() {
                    "-".into()
                } else {
                    j.gpus.join(",")
                },
                pi.join("/"),
            ]);
        }
        out.push('\n');
        table(&mut out, &rows);
    }
    if !node.levels.is_empty() {
        let mut rows = vec![vec![
            "LEVEL".to_owned(),
            "CONTAINERS".into(),
            "IN USE".into(),
            "PACKING INDEX".into(),
            "FILL FACTOR".into(),
        ]];
        for l in &node.levels {
            rows.push(vec![
                l.level.to_owned(),
                l.containers.to_string(),
                l.in_use.to_string(),
                format!("{:.2} ({}/{})", l.packing_index, l.needed, l.used),
                format!("{:.2}", l.fill_factor),
            ]);
        }
        out.push('\n');
        table(&mut out, &rows);
    }
    for i in &node.ignored {
        let uid = i.uid.map_or_else(String::new, |u| format!(" (uid {u})"));
        let _ = writeln!(out, "ignored {}{uid}: {}", i.file, i.why);
    }
    if let Some(why) = &node.partial {
        let _ = writeln!(
            out,
            "partial: {why}; other users' cpus are the kernel's view, but jobs and GPUs may be missing"
        );
    }
    if let Some(why) = &node.hidden {
        let _ = writeln!(out, "hidden: {why}; their jobs cannot be shown or checked");
    }
    out
}

fn table(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fewest_containers() {
        let sets = vec![vec![0, 1, 2, 3], vec![4, 5], vec![6, 7, 8, 9]];
        assert_eq!(fewest(&sets, 0), 0);
        assert_eq!(fewest(&sets, 4), 1);
        assert_eq!(fewest(&sets, 5), 2);
        assert_eq!(fewest(&sets, 9), 3);
        assert_eq!(fewest(&sets, 99), 3);
    }
}
