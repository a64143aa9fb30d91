//! `binder convert --from ompi` against Open MPI 4.1's own mapper (#55), line family by
//! line family: the no-`--map-by` defaults, the hardware-thread spellings, a binding
//! below the mapping object, `PE`, `ppr` and oversubscription.
//!
//! `fixtures/ompi-mapper/convert-4.1.jsonl` holds what Open MPI 4.1.4's mapper gives each
//! rank for every line, fixture XML and `-np` (1, 2, 3, the mapping object's count and the
//! node's cores), recorded by `tools/convert-sweep.py` from `mpirun --do-not-launch` with
//! the XML as its topology and the node's cores as its slots (`--host HOST:CORES`, as a
//! real node of that shape has them; without it Open MPI counts this machine's cores as
//! the slots). Each row's line is converted with its `-np`, planned on its XML, and must
//! agree rank by rank, or both refuse, or binder refuses it in `convert` with a reason, or
//! be one of the differences [`known`] lists. Beside the table, a sample of rows is asked
//! of the installed `mpirun` again, so that the table stays Open MPI's answer.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use crate::common::{binder, require_tool, shared, topology};

/// Open MPI's answer on one row.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Theirs {
    Ranks(Vec<Vec<usize>>),
    /// mpirun refused the line (no map).
    Refused,
    /// mpirun refused for the node's slots (more processes than cores): the launcher's
    /// count, which binder takes from the launcher.
    NoSlots,
    /// Every rank left unbound.
    Unbound,
}

pub(crate) struct Row {
    pub(crate) family: String,
    pub(crate) line: String,
    pub(crate) xml: String,
    pub(crate) np: usize,
    pub(crate) ompi: Theirs,
}

fn list(text: &str) -> Option<Vec<usize>> {
    let mut pus = Vec::new();
    for item in text.split(',').filter(|s| !s.is_empty()) {
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        pus.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?);
    }
    pus.sort_unstable();
    Some(pus)
}

/// The rows of a recorded table (`ompi-mapper/NAME` under the fixtures).
pub(crate) fn rows_of(shared: &Path, name: &str) -> Vec<Row> {
    let text = std::fs::read_to_string(shared.join("ompi-mapper").join(name))
        .expect("the recorded Open MPI table");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("a JSON row");
            let ompi = match &v["ompi"] {
                serde_json::Value::Null => Theirs::Refused,
                serde_json::Value::String(s) if s == "no slots" => Theirs::NoSlots,
                serde_json::Value::String(s) if s == "unbound" => Theirs::Unbound,
                serde_json::Value::Array(ranks) => Theirs::Ranks(
                    ranks
                        .iter()
                        .map(|r| list(r.as_str().unwrap()).expect("a PU list"))
                        .collect(),
                ),
                other => panic!("row {l}: ompi {other}"),
            };
            Row {
                family: v["family"].as_str().unwrap().to_owned(),
                line: v["line"].as_str().unwrap().to_owned(),
                xml: v["xml"].as_str().unwrap().to_owned(),
                np: v["np"].as_u64().unwrap() as usize,
                ompi,
            }
        })
        .collect()
}

/// Where binder and Open MPI 4.1 part on purpose or on Open MPI's account, and why; the
/// guide lists them ("binder and Open MPI's mapper").
fn known(row: &Row, theirs: &Theirs, ours: &Option<Vec<Vec<usize>>>) -> Option<&'static str> {
    let xml = row.xml.as_str();
    // Each by what hwloc says of the node (`Quirks`), so a new fixture of the same kind
    // is covered; only Open MPI's own failure is named by its XML.
    let quirks = quirks(xml);
    if quirks.numa_nodes_share_cpus {
        return Some("NUMA nodes with the same CPUs (KNL's DDR and MCDRAM): one container to binder, two mapping targets to Open MPI");
    }
    if quirks.cpus_taken_away && *theirs == Theirs::Refused && ours.is_some() {
        return Some("on a node with CPUs the cgroup or the kernel took away, Open MPI counts objects that have none and refuses");
    }
    if quirks.uneven_packages {
        return Some("packages of different sizes: Open MPI fills them by their free CPUs, binder deals round robin until each is full");
    }
    if xml.starts_with("power9-sierra") && *theirs == Theirs::Refused {
        return Some("Open MPI 4.1 fails on power9's XML (an internal error binding in place; one CPU counted in an L3)");
    }
    if ours.is_none() && row.line.contains("l3cache") && count(xml, "l3cache") == 0 {
        return Some("a node without L3 caches: Open MPI maps by core there, binder refuses naming the object");
    }
    if ours.is_none() && row.family == "ppr" {
        return Some("ppr:N over packages of fewer than N cores (power7): Open MPI stacks processes bound to a wider object, a shape gives each task a core of its own");
    }
    let (numas, packages) = (count(xml, "numa"), count(xml, "package"));
    if row.line == "--bind-to socket" && numas < packages {
        return Some("one NUMA node over several packages: Open MPI binds below its NUMA mapping, to the least used package, binder to the package of each rank's core");
    }
    if row.family == "ppr" && numas > packages {
        return Some("ppr over a package of several NUMA nodes, bound to NUMA: Open MPI spreads a package's processes over them, binder binds each to its core's");
    }
    None
}

/// What hwloc says of a fixture's node that a known difference turns on.
#[derive(Clone, Copy)]
pub(crate) struct Quirks {
    /// Two NUMA nodes with the same CPUs (hwloc-calc's masks of every `numa:i`).
    pub(crate) numa_nodes_share_cpus: bool,
    /// CPUs the kernel or a cgroup took away: the machine's cpuset is not its complete
    /// cpuset, or not its allowed one (hwloc-info).
    pub(crate) cpus_taken_away: bool,
    /// Packages of different core counts (hwloc-calc `-N core package:i`).
    pub(crate) uneven_packages: bool,
}

/// [`Quirks`] of the fixture XML `name` (asked once per XML).
pub(crate) fn quirks(name: &str) -> Quirks {
    static SEEN: std::sync::Mutex<BTreeMap<String, Quirks>> =
        std::sync::Mutex::new(BTreeMap::new());
    if let Some(q) = SEEN.lock().unwrap().get(name) {
        return *q;
    }
    let xml = topology(&shared().unwrap(), name);
    let each = |kind: &str| -> Vec<String> {
        (0..count(name, kind))
            .map(|i| format!("{kind}:{i}"))
            .collect()
    };
    let masks = crate::common::hwloc_calc_lines(&xml, &[], &each("numa"));
    let distinct: std::collections::BTreeSet<&String> = masks.iter().collect();
    let cores = crate::common::hwloc_calc_lines(&xml, &["-N", "core"], &each("package"));
    let machine = Command::new("hwloc-info")
        .arg("--input")
        .arg(&xml)
        .arg("machine:0")
        .output()
        .expect("hwloc-info runs");
    let machine = String::from_utf8_lossy(&machine.stdout);
    let set = |what: &str| {
        machine
            .lines()
            .find_map(|l| l.trim().strip_prefix(what))
            .map(str::to_owned)
    };
    let (cpuset, complete, allowed) = (
        set("cpuset = "),
        set("complete cpuset = "),
        set("allowed cpuset = "),
    );
    assert!(cpuset.is_some() && complete.is_some(), "{name}: {machine}");
    let q = Quirks {
        numa_nodes_share_cpus: distinct.len() < masks.len(),
        cpus_taken_away: cpuset != complete || (allowed.is_some() && allowed != cpuset),
        uneven_packages: cores.iter().any(|c| Some(c) != cores.first()),
    };
    SEEN.lock().unwrap().insert(name.to_owned(), q);
    q
}

/// How many objects of `kind` an XML has, by hwloc-calc.
pub(crate) fn count(name: &str, kind: &str) -> usize {
    type Seen = BTreeMap<(String, String), usize>;
    static SEEN: std::sync::Mutex<Seen> = std::sync::Mutex::new(BTreeMap::new());
    let key = (name.to_owned(), kind.to_owned());
    if let Some(c) = SEEN.lock().unwrap().get(&key) {
        return *c;
    }
    let xml = topology(&shared().unwrap(), name);
    let c = crate::common::hwloc_calc_lines(&xml, &["-N", kind, "all"], &[])
        .first()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0);
    SEEN.lock().unwrap().insert(key, c);
    c
}

/// The verdicts tallied per family.
#[derive(Default)]
struct Tally {
    by_family: BTreeMap<String, BTreeMap<&'static str, usize>>,
    wrong: Vec<String>,
}

impl Tally {
    fn add(&mut self, family: &str, verdict: &'static str) {
        *self
            .by_family
            .entry(family.to_owned())
            .or_default()
            .entry(verdict)
            .or_default() += 1;
    }
}

/// The one check of a recorded row against binder, for every MPI's table: the row's line
/// converted once per line and count (`binder convert --from FROM -- COUNT_FLAG NP LINE`),
/// then planned on the row's XML. A refusal in `convert` is one `binder:` line, exit 125;
/// a placement agrees rank by rank (or both leave every rank unbound alike); anything else
/// is the MPI's own verdicts (`rest`, with the converted shape's notes), else a difference,
/// said in `Err`.
pub(crate) struct Converter {
    from: &'static str,
    count_flag: &'static str,
    dir: std::path::PathBuf,
    shapes: HashMap<(String, usize), Result<std::path::PathBuf, String>>,
    /// Each fixture's topology, loaded once: the rows are planned in this process (a
    /// `binder --dry-run` per row was 19,000 processes, a third of the suite's CPU time),
    /// and every [`CLI_EVERY`]th row through the executable as well, which must agree.
    topologies: HashMap<std::path::PathBuf, binder_plan::topology::Topology>,
    planned: usize,
}

/// How often a row's in-process plan is checked against `binder --dry-run`'s.
const CLI_EVERY: usize = 16;

/// What binder planned for each rank, `None` where it refused.
pub(crate) type Ours = Option<Vec<Vec<usize>>>;

impl Converter {
    /// Converting with `--from FROM`, shapes kept in a scratch directory `name`.
    pub(crate) fn new(from: &'static str, count_flag: &'static str, name: &str) -> Converter {
        let dir = crate::common::scratch().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        Converter {
            from,
            count_flag,
            dir,
            shapes: HashMap::new(),
            topologies: HashMap::new(),
            planned: 0,
        }
    }

    /// Each rank's PUs as binder plans the shape at `path` on `xml` for `np` tasks (as
    /// `binder --dry-run --local-size NP` does), `None` where it refuses; every
    /// [`CLI_EVERY`]th call asks the executable too.
    fn plan(&mut self, xml: &Path, path: &Path, np: usize) -> Ours {
        use binder_plan::topology::Source;
        let shape = binder_host::shape_file(path).expect("a converted shape parses");
        let topology = self.topologies.entry(xml.to_owned()).or_insert_with(|| {
            binder_host::load(&Source::Xml(xml.to_owned()), false).expect("the fixture loads")
        });
        assert!(
            !shape.needs_io(),
            "{}: a converted line needs no I/O",
            path.display()
        );
        let ours = binder_plan::plan(&binder_plan::PlanRequest::new(&shape, topology, np))
            .ok()
            .map(|plan| {
                plan.tasks
                    .iter()
                    .map(|t| t.cpuset.iter_set().collect())
                    .collect()
            });
        self.planned += 1;
        if self.planned % CLI_EVERY == 1 {
            assert_eq!(
                crate::common::dry_run_cpus(xml, path, np),
                ours,
                "{} on {} for {np}: binder --dry-run and the library",
                path.display(),
                xml.display()
            );
        }
        ours
    }

    /// The row's verdict; `Err` names a difference no verdict explains.
    pub(crate) fn verdict(
        &mut self,
        row: &Row,
        xml: &Path,
        rest: impl FnOnce(&Theirs, &Ours, &str) -> Option<&'static str>,
    ) -> Result<&'static str, String> {
        let (from, count_flag, dir) = (self.from, self.count_flag, &self.dir);
        let shape = self
            .shapes
            .entry((row.line.clone(), row.np))
            .or_insert_with(|| {
                let out = binder()
                    .args(["convert", "--from", from, "--", count_flag])
                    .arg(row.np.to_string())
                    .args(row.line.split_whitespace())
                    .output()
                    .unwrap();
                if out.status.code() == Some(0) {
                    let path = dir.join(format!("{}.yaml", shape_file_name(&row.line, row.np)));
                    std::fs::write(&path, &out.stdout).unwrap();
                    Ok(path)
                } else {
                    assert_eq!(out.status.code(), Some(125), "{out:?}");
                    Err(String::from_utf8_lossy(&out.stderr).into_owned())
                }
            });
        let path = match shape {
            Err(why) => {
                // A refusal says why and what to write instead, in one line.
                assert_eq!(why.lines().count(), 1, "{why}");
                assert!(why.starts_with("binder: "), "{why}");
                return Ok(match row.ompi {
                    Theirs::Ranks(_) | Theirs::Unbound => "refused in convert (with a reason)",
                    _ => "both refuse",
                });
            }
            Ok(path) => path,
        };
        let path = path.clone();
        let ours = self.plan(xml, &path, row.np);
        match (&row.ompi, &ours) {
            (Theirs::Ranks(a), Some(b)) if a == b => Ok("agree"),
            // Every rank unbound: binder's `bind: none` keeps the job's CPUs, alike.
            (Theirs::Unbound, Some(b)) if b.iter().all(|r| r.len() == b[0].len()) => Ok("agree"),
            (theirs, ours) => rest(theirs, ours, &stdout_notes(&path)).ok_or_else(|| {
                format!(
                    "{} {} {} {}: {} {theirs:?}, binder {ours:?}",
                    row.xml, count_flag, row.np, row.line, from
                )
            }),
        }
    }
}

/// The installed mpirun's answer for one row (as the table was recorded)./// The installed mpirun's answer for one row (as the table was recorded).
fn ask_ompi(xml: &Path, line: &str, np: usize) -> Theirs {
    let hwthreads = line.contains("--use-hwthread-cpus");
    let slots: usize = crate::common::hwloc_calc_lines(
        xml,
        &["-N", if hwthreads { "pu" } else { "core" }, "all"],
        &[],
    )
    .first()
    .and_then(|l| l.trim().parse().ok())
    .unwrap_or(1);
    // Open MPI names this node by its host name without the domain.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host
        .trim()
        .split('.')
        .next()
        .unwrap_or("localhost")
        .to_owned();
    let mut last = Theirs::Refused;
    // mpirun beside other mpiruns now and then prints no map at all: ask up to 3 times.
    for _ in 0..3 {
        let (host_slots, np_text) = (format!("{host}:{slots}"), np.to_string());
        let args: Vec<&str> = ["--host", host_slots.as_str(), "-np", np_text.as_str()]
            .into_iter()
            .chain(line.split_whitespace())
            .collect();
        let text = crate::openmpi::mpirun_map(xml, &args);
        let mut got: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for l in text.lines() {
            let Some(at) = l.find("PROC [[") else {
                continue;
            };
            let rest = &l[at + "PROC [[".len()..];
            let Some(rank) = rest
                .split_once("],")
                .and_then(|(_, r)| r.split(']').next())
                .and_then(|r| r.parse::<usize>().ok())
            else {
                continue;
            };
            if let Some((_, bitmap)) = rest.split_once(" BITMAP ") {
                if let Some(pus) = list(bitmap.trim()) {
                    got.insert(rank, pus);
                }
            } else if let Some((_, to)) = rest.split_once(" TO ") {
                let pus = list(to.split('[').next().unwrap_or("").trim());
                if let Some(pus) = pus.filter(|p| !p.is_empty()) {
                    got.entry(rank).or_insert(pus);
                }
            }
        }
        if got.len() == np {
            return Theirs::Ranks(got.into_values().collect());
        }
        if text.contains("not enough slots") {
            return Theirs::NoSlots;
        }
        if text.contains("with policy NONE") && text.contains("JOB MAP") {
            return Theirs::Unbound;
        }
        last = Theirs::Refused;
        if !text.contains("JOB MAP") && text.contains("-----") {
            break;
        }
    }
    last
}

fn mpirun_is_4_1() -> bool {
    Command::new("mpirun")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("Open MPI) 4.1"))
        .unwrap_or(false)
}

/// Parts of the table, one test each (nextest runs them side by side).
const PARTS: usize = 4;

macro_rules! in_parts {
    ($($test:ident = $part:literal),*) => {
        $(
            #[test]
            fn $test() {
                converted_lines_place_as_open_mpi_41($part);
            }
        )*
    };
}

in_parts!(
    converted_lines_place_as_open_mpi_41_part_1 = 0,
    converted_lines_place_as_open_mpi_41_part_2 = 1,
    converted_lines_place_as_open_mpi_41_part_3 = 2,
    converted_lines_place_as_open_mpi_41_part_4 = 3
);

fn converted_lines_place_as_open_mpi_41(part: usize) {
    let Some(shared) = shared() else { return };
    let rows = rows_of(&shared, "convert-4.1.jsonl");
    assert!(rows.len() > 5_000, "only {} recorded rows", rows.len());
    let live = require_tool("mpirun", "checking the recorded Open MPI table")
        && require_tool("hwloc-calc", "checking the recorded Open MPI table")
        && (mpirun_is_4_1() || {
            eprintln!("skipped: the recorded table is Open MPI 4.1's; mpirun here is another");
            false
        });
    let mut converter = Converter::new("ompi", "-np", &format!("convert-ompi-41-{part}"));
    let mut tally = Tally::default();
    let mut asked = 0;
    for (i, row) in rows.iter().enumerate().skip(part).step_by(PARTS) {
        let xml = topology(&shared, &row.xml);
        // Every 50th row of the part is asked of mpirun again.
        if live && i % (50 * PARTS) == part {
            asked += 1;
            let now = ask_ompi(&xml, &row.line, row.np);
            if now != row.ompi {
                tally.wrong.push(format!(
                    "{} -np {} {}: the table says {:?}, mpirun now {now:?}",
                    row.xml, row.np, row.line, row.ompi
                ));
            }
        }
        let verdict = converter.verdict(row, &xml, |theirs, ours, notes| match (theirs, ours) {
            (Theirs::Refused | Theirs::NoSlots, None) => Some("both refuse"),
            (Theirs::NoSlots, Some(_)) => Some("Open MPI out of slots"),
            // Bound below an object that holds the mapping object on this node (an L3
            // over two NUMA nodes): the converted shape says so.
            (Theirs::Ranks(_), None) if row.family == "below" && notes.contains("refused") => {
                Some("refused in planning (a note says where)")
            }
            (theirs, ours) => known(row, theirs, ours),
        });
        let verdict = verdict.unwrap_or_else(|why| {
            tally.wrong.push(why);
            "differ"
        });
        tally.add(&row.family, verdict);
    }
    for (family, verdicts) in &tally.by_family {
        eprintln!("part {} {family}: {verdicts:?}", part + 1);
    }
    eprintln!("part {}: {asked} rows asked of mpirun again", part + 1);
    assert!(tally.wrong.is_empty(), "{}", tally.wrong.join("\n"));
    let agreed: usize = tally
        .by_family
        .values()
        .map(|v| v.get("agree").copied().unwrap_or(0))
        .sum();
    assert!(agreed > 4_000 / PARTS, "only {agreed} rows agreed");
}

/// The notes a converted shape ends with.
pub(crate) fn stdout_notes(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("# note:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A file name for one converted line.
pub(crate) fn shape_file_name(line: &str, np: usize) -> String {
    let mut name: String = line
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    name.push_str(&format!("_np{np}"));
    name
}

/// Each rank's PUs as binder plans `binder convert --from ompi -- -np NP LINE` on `xml`,
/// or `None` where it refuses.
fn converted_plan(xml: &Path, line: &str, np: usize) -> Option<Vec<Vec<usize>>> {
    let out = binder()
        .args(["convert", "--from", "ompi", "--", "-np", &np.to_string()])
        .args(line.split_whitespace())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{line}: {out:?}");
    let path = crate::common::scratch().join(format!("{}.yaml", shape_file_name(line, np)));
    std::fs::write(&path, &out.stdout).unwrap();
    crate::common::dry_run_cpus(xml, &path, np)
}

/// Open MPI 4.1's older ppr spellings (#64): `-npersocket N` (which binder read as `-n
/// persocket`) and `-npernode N` / `--pernode` convert, and `ppr:N:OBJ --rank-by OBJ`
/// ranks round robin over the objects; each places as the installed `mpirun` (4.1)
/// places it, asked live on two-socket fixtures.
#[test]
fn the_older_ppr_spellings_place_as_open_mpi_41() {
    let Some(shared) = shared() else {
        return;
    };
    if !require_tool("mpirun", "Open MPI's mapper") || !mpirun_is_4_1() {
        return;
    }
    let mut asked = 0;
    for name in [
        "skylake-2s-36c-smt2.xml",
        "epyc7451-naples-2s-48c-smt2-8numa.xml",
    ] {
        let xml = topology(&shared, name);
        let numas: usize = crate::common::hwloc_calc_lines(&xml, &["-N", "numa", "all"], &[])
            .first()
            .and_then(|l| l.trim().parse().ok())
            .unwrap_or(1);
        for (line, np) in [
            ("-npersocket 2 --bind-to core", 4),
            ("-npernode 2", 2),
            ("--pernode", 1),
            // Ranked round robin over the NUMA nodes, two on each (#64: 0,1 on the first).
            (
                "--map-by ppr:2:numa --rank-by numa --bind-to core",
                2 * numas,
            ),
            ("--map-by ppr:2:numa --rank-by numa", 2 * numas),
        ] {
            let ours = converted_plan(&xml, line, np);
            match ask_ompi(&xml, line, np) {
                Theirs::Ranks(theirs) => assert_eq!(Some(theirs), ours, "{name} -np {np} {line}"),
                other => panic!("{name} -np {np} {line}: Open MPI {other:?}"),
            }
            asked += 1;
        }
        // `ppr:2:numa --bind-to none`: unbound, and no more than 2 on each NUMA node; one
        // more is refused by both (#64: binder placed it).
        let line = "--map-by ppr:2:numa --bind-to none";
        for (np, fits) in [(2 * numas, true), (2 * numas + 1, false)] {
            let ours = converted_plan(&xml, line, np);
            let theirs = ask_ompi(&xml, line, np);
            if fits {
                assert!(
                    matches!(theirs, Theirs::Unbound),
                    "{name} -np {np}: {theirs:?}"
                );
                assert!(ours.is_some(), "{name} -np {np}: binder refused");
            } else {
                assert!(
                    matches!(theirs, Theirs::Refused | Theirs::NoSlots),
                    "{name} -np {np}: Open MPI {theirs:?}"
                );
                assert_eq!(ours, None, "{name} -np {np}: binder placed past the cap");
            }
            asked += 1;
        }
    }
    assert_eq!(asked, 14);
}
