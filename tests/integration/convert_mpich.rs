//! `binder convert --from mpich` against MPICH's own Hydra (#64): `-bind-to OBJ[:N]`,
//! `user:` lists and `-map-by OBJ` over every fixture.
//!
//! `fixtures/ompi-mapper/hydra-5.0.jsonl` holds what `mpiexec` 5.0.2 (the `mpich` wheel)
//! binds each process to for every line, XML and `-n` (1, 2, 3, the objects' count, the
//! cores and one more, where Hydra wraps), recorded by `tools/convert-sweep.py --mpi mpich`
//! from `HYDRA_TOPO_DEBUG=1` with the XML as `HWLOC_XMLFILE`. Each row must agree rank by
//! rank, be refused by both, be refused by binder with a reason, or be one of the
//! differences [`known`] names. A sample is asked of `mpiexec` again each run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{shared, topology};
use crate::convert_ompi::{count, quirks, rows_of, Converter, Row, Theirs};

/// Where binder and Hydra part, and why; the guide lists them.
fn known(
    row: &Row,
    theirs: &Theirs,
    ours: &Option<Vec<Vec<usize>>>,
    notes: &str,
) -> Option<&'static str> {
    let pus = count(&row.xml, "pu");
    if let (Theirs::Ranks(a), Some(b)) = (theirs, ours) {
        // Hydra's debug mask has one bit per PU the node counts: CPUs numbered past that
        // (a restricted or offline node's) are not shown.
        let shown: Vec<Vec<usize>> = b
            .iter()
            .map(|r| r.iter().copied().filter(|&c| c < pus).collect())
            .collect();
        if *a == shown {
            return Some("Hydra's mask shows CPUs numbered below the node's PU count only");
        }
        // Past a user: list Hydra binds nothing; binder gives the rest of the node.
        if notes.contains("Hydra leaves them unbound")
            && a.iter().zip(b).all(|(a, b)| a.is_empty() || a == b)
        {
            return Some("processes past a user: list: Hydra leaves them unbound, binder shares the rest of the node out among them (a note says so)");
        }
        if row.line.contains(":2") && row.np * 2 > count(&row.xml, "core") {
            return Some("`core:2` past the node's last core: Hydra wraps in the middle of a process (its last core and the first), binder wraps whole processes");
        }
        let q = quirks(&row.xml);
        if q.uneven_packages || q.cpus_taken_away || q.numa_nodes_share_cpus {
            return Some("objects of different sizes (s390's books, a cgroup-cut node, KNL's NUMA nodes): Hydra deals them round robin and wraps object by object, binder deals each object's cores");
        }
        if count(&row.xml, "core") != pus && row.xml.contains("hybrid") {
            return Some("a hybrid node (cores of one and of two threads): Hydra's round robin over objects of different widths");
        }
    }
    if row.xml.starts_with("power9") && row.line.contains("l3cache") {
        return Some("power9's L3 caches, each over a pair of cores: Hydra's round robin deals one of them twice");
    }
    if *theirs == Theirs::Refused && ours.is_some() {
        return Some("Hydra fails on this XML (power9's NUMA nodes, a node with disallowed CPUs)");
    }
    None
}

/// Hydra's `mpiexec` of the oracle venv (`BINDER_MPICH_MPIEXEC` overrides).
fn mpiexec() -> Option<PathBuf> {
    let path = std::env::var_os("BINDER_MPICH_MPIEXEC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/binder-oracles/mpich/bin/mpiexec"));
    crate::common::prerequisite(
        path.is_file(),
        "MPICH 5's mpiexec (bash .ci/setup test installs it in /opt/binder-oracles)",
    )
    .then_some(path)
}

/// What Hydra binds now for one row (the recorder's reading).
fn ask(mpiexec: &Path, xml: &Path, line: &str, np: usize) -> Theirs {
    let out = Command::new(mpiexec)
        .env("HWLOC_XMLFILE", xml)
        .env("HYDRA_TOPO_DEBUG", "1")
        .args(["-n", &np.to_string()])
        .args(line.split_whitespace())
        .arg("true")
        .output()
        .expect("mpiexec runs");
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr.clone()].concat()).into_owned();
    let mut got: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for l in text.lines() {
        let Some(rest) = l.trim().strip_prefix("process ") else {
            continue;
        };
        let Some((rank, mask)) = rest.split_once(" binding: ") else {
            continue;
        };
        let cpus = mask
            .trim()
            .chars()
            .enumerate()
            .filter_map(|(i, c)| (c == '1').then_some(i))
            .collect();
        got.insert(rank.parse().unwrap(), cpus);
    }
    if got.is_empty() {
        return if out.status.success() {
            Theirs::Unbound
        } else {
            Theirs::Refused
        };
    }
    Theirs::Ranks(
        (0..np)
            .map(|r| got.remove(&r).unwrap_or_default())
            .collect(),
    )
}

/// The table in parts (every fourth row from the part's first), so that no one test
/// holds up the run's end.
const PARTS: usize = 4;

#[test]
fn converted_lines_bind_as_hydra_part_1() {
    converted_lines_bind_as_hydra(0);
}

#[test]
fn converted_lines_bind_as_hydra_part_2() {
    converted_lines_bind_as_hydra(1);
}

#[test]
fn converted_lines_bind_as_hydra_part_3() {
    converted_lines_bind_as_hydra(2);
}

#[test]
fn converted_lines_bind_as_hydra_part_4() {
    converted_lines_bind_as_hydra(3);
}

fn converted_lines_bind_as_hydra(part: usize) {
    let Some(shared) = shared() else { return };
    let rows = rows_of(&shared, "hydra-5.0.jsonl");
    assert!(rows.len() > 3_500, "only {} recorded rows", rows.len());
    let live = mpiexec();
    let mut converter = Converter::new("mpich", "-n", &format!("convert-mpich-{part}"));
    let mut tally: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut wrong, mut asked) = (Vec::new(), 0);
    for (i, row) in rows.iter().enumerate().skip(part).step_by(PARTS) {
        let xml = topology(&shared, &row.xml);
        // (Where Hydra's mask hid CPUs, on a node whose CPU numbers run past its PU count,
        // its answer past the node's PUs changes from run to run: not asked again.)
        let steady = !matches!(&row.ompi, Theirs::Ranks(r) if r.iter().any(Vec::is_empty));
        if let Some(mpiexec) = live
            .as_deref()
            .filter(|_| i % (40 * PARTS) == part && steady)
        {
            asked += 1;
            let mut now = ask(mpiexec, &xml, &row.line, row.np);
            if now == Theirs::Refused && row.ompi != Theirs::Refused {
                now = ask(mpiexec, &xml, &row.line, row.np);
            }
            // mpiexec that fails to start its processes here (a fresh Debian 12 chroot
            // refused every `-n 3` twice) says nothing of Hydra's placement: reported, not
            // counted; an answer that places differently fails.
            // Hydra's answer on a node whose CPU numbers run past its PU count (a mask
            // hiding CPUs) changes from run to run there: not counted either.
            let hidden = matches!(&now, Theirs::Ranks(r) if r.iter().any(Vec::is_empty));
            if (now == Theirs::Refused && row.ompi != Theirs::Refused) || hidden {
                eprintln!(
                    "not asked again: mpiexec failed here for {} -n {} {}",
                    row.xml, row.np, row.line
                );
            } else if now != row.ompi {
                wrong.push(format!(
                    "{} -n {} {}: the table says {:?}, mpiexec now {now:?}",
                    row.xml, row.np, row.line, row.ompi
                ));
            }
        }
        let verdict = converter
            .verdict(row, &xml, |theirs, ours, notes| match (theirs, ours) {
                (Theirs::Refused, None) => Some("both refuse"),
                // A user: list past the node's CPUs, a rank rule per process.
                (_, None) => Some("refused in planning (more processes than CPUs for rank rules)"),
                (theirs, ours) => known(row, theirs, ours, notes),
            })
            .unwrap_or_else(|why| {
                wrong.push(why);
                "differ"
            });
        *tally.entry(verdict).or_default() += 1;
    }
    eprintln!("hydra part {}: {tally:?}", part + 1);
    eprintln!("part {}: {asked} rows asked of mpiexec again", part + 1);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(
        tally.get("agree").copied().unwrap_or(0) > 3_000 / PARTS,
        "{tally:?}"
    );
}
