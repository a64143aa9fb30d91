//! The OCS cases file, read and run: each case dispatched to its kind's check, tallied
//! against the 254 the file holds, with binder's documented divergences named.

use super::*;

/// What binder did for one case.
pub(super) enum Outcome {
    /// Refused (exit 125), with the message.
    Refused(String),
    /// One JSON record per rank.
    Ranks(Vec<Json>),
}

pub(super) fn dry_run(topology: &str, request: &str, tasks: usize, extra: &[&str]) -> Outcome {
    let out = binder()
        .args(["--dry-run", "--format", "json", "--ge-topology", topology])
        .args(["--ge", request, "--local-size", &tasks.to_string()])
        .args(extra)
        .output()
        .expect("binder runs");
    match out.status.code() {
        Some(0) => Outcome::Ranks(
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect(),
        ),
        Some(125) => {
            let err = String::from_utf8_lossy(&out.stderr).to_string();
            assert!(
                err.starts_with("binder: ") && err.lines().count() == 1,
                "one binder: line: {err}"
            );
            Outcome::Refused(err)
        }
        other => panic!(
            "binder exited {other:?} for {topology} / {request}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

pub(super) fn pe_column(topology: &str, request: &str) -> Result<String, String> {
    let out = binder()
        .args(["--dry-run", "--format", "pe", "--ge-topology", topology])
        .args(["--ge", request])
        .output()
        .expect("binder runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).to_string())
    }
}

pub(super) fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => None,
        other => Some(format!("{other:?}")),
    }
}

/// The `--ge` switches of a case's request.
pub(super) fn switches(r: &Value) -> String {
    let mut out = String::new();
    if let Some(strategy @ ("linear" | "striding" | "explicit")) = text(r, "strategy").as_deref() {
        let instance = text(r, "instance").map_or(String::new(), |i| format!("{i} "));
        let spec = match strategy {
            "linear" => format!(
                "linear:{}{}",
                text(r, "amount").unwrap(),
                text(r, "start").map_or(String::new(), |s| format!(":{s}"))
            ),
            "striding" => format!(
                "striding:{}:{}{}",
                text(r, "amount").unwrap(),
                text(r, "step").unwrap(),
                text(r, "start").map_or(String::new(), |s| format!(":{s}"))
            ),
            _ => format!("explicit:{}", text(r, "pairs").unwrap()),
        };
        return format!("-binding {instance}{spec}");
    }
    for (key, switch) in [
        ("unit", "-bunit"),
        ("type", "-btype"),
        ("sort", "-bsort"),
        ("start", "-bstart"),
        ("stop", "-bstop"),
        ("filter", "-bfilter"),
        ("instance", "-binstance"),
    ] {
        if let Some(v) = text(r, key) {
            let _ = write!(out, "{switch} {v} ");
        }
    }
    // The OCS unit test's 9999 means "every unit the walk finds": binder's `all`.
    let amount = text(r, "amount").unwrap_or_else(|| "1".into());
    let amount = if amount == "9999" {
        "all".into()
    } else {
        amount
    };
    let _ = write!(out, "-bamount {amount}");
    out
}

pub(super) fn ge_topologies(ranks: &[Json]) -> Vec<String> {
    ranks
        .iter()
        .map(|r| r["ge_topology"].as_str().unwrap().to_owned())
        .collect()
}

pub(super) fn cpus(rank: &Json) -> Vec<usize> {
    rank["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap() as usize)
        .collect()
}

/// Product-string position → tree node (lone threads are not written).
fn positions(tree: &Tree) -> Vec<usize> {
    (0..tree.nodes.len())
        .filter(|&n| {
            let node = &tree.nodes[n];
            !(node.letter == Letter::T
                && node
                    .parent
                    .is_some_and(|p| tree.nodes[p].children.len() == 1))
        })
        .collect()
}

fn pus_under(tree: &Tree, n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = tree
        .threads(n)
        .iter()
        .filter_map(|&t| tree.nodes[t].os)
        .collect();
    v.sort_unstable();
    v
}

/// Digits of a `sequence`: the units picked, in order, as PU lists.
pub(super) fn sequence(topology: &str, seq: &str) -> Vec<Vec<usize>> {
    let tree = Tree::parse(topology).unwrap();
    let pos = positions(&tree);
    assert_eq!(pos.len(), seq.chars().count(), "{topology} vs {seq}");
    let mut picks: Vec<(u32, Vec<usize>)> = seq
        .chars()
        .enumerate()
        .filter_map(|(i, c)| c.to_digit(10).map(|d| (d, pus_under(&tree, pos[i]))))
        .collect();
    picks.sort_by_key(|(d, _)| *d);
    picks.into_iter().map(|(_, p)| p).collect()
}

#[derive(Default)]
pub(super) struct Tally {
    passed: usize,
    diverged: BTreeMap<String, String>,
    skipped: BTreeMap<String, String>,
    failed: Vec<String>,
}

impl Tally {
    fn check(&mut self, id: &str, ok: bool, detail: String) {
        if ok {
            self.passed += 1;
        } else {
            self.failed.push(format!("{id}: {detail}"));
        }
    }
}

/// Cases where binder keeps SEMANTICS over OCS's code; each is still checked, against
/// binder's documented behaviour.
pub(super) const DIVERGENCES: &[(&str, &str)] = &[
    ("ocs-form-hybrid-no-L2-T6", "OCS hands out E-core threads for -bunit T on a string without L2; binder keeps the hard P/E requirement (4 P threads < 6: refused)"),
    ("man-filter-flat-string", "OCS rejects a product-form -bfilter; binder reads it as the man page says (8 tasks still refused: 6 cores left)"),
    ("slot-bsort-S-renumbering", "OCS's harness shows a renumbering bug; binder gives the intended S1C0, S1C1, then S0C0"),
    ("ge-striding-auto-needed-busy", "SoGE leaks core 0 from its failed first try; binder gives the intended SCcCc"),
    ("ge-explicit-other-core-busy", "SoGE miscounts positions; binder gives the intended SCcSCC"),
    ("ge-explicit-index-shift", "SoGE miscounts positions; binder gives the intended SCcCSCCC"),
    ("ut-sort-A", "the OCS unit test predates CS-1785; binder follows OCS HEAD (power groups first)"),
    ("ut-sort-C", "the OCS unit test predates CS-1785; binder follows OCS HEAD (power groups first)"),
    ("ut-pe-tuples-0-cores", "OCS HEAD changed the separators; binder keeps SGE 6.2u5's socket,core:socket,core (SEMANTICS §12)"),
    ("ut-pe-tuples-1-cores", "as above: SGE 6.2u5 separators"),
    ("ut-pe-tuples-1-threads", "as above: SGE 6.2u5 separators"),
    ("fmt-ocs-env", "OCS no longer sets SGE_BINDING; binder sets it for -binstance env (SEMANTICS §12) and OCS's SGE_BINDING_* too"),
];

#[test]
fn ocs_cases() {
    let Some(shared) = shared() else { return };
    let path = shared.join("cases/ocs-cases.yaml");
    let doc: Value = yaml_serde::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = doc["cases"].as_sequence().unwrap();
    assert_eq!(cases.len(), 254, "the case file changed");
    let mut tally = Tally::default();
    for case in cases {
        let id = text(case, "id").unwrap();
        let topo = text(case, "topology").unwrap();
        let r = &case["request"];
        let e = &case["expected"];
        if let Some((_, why)) = DIVERGENCES.iter().find(|(d, _)| *d == id) {
            tally.diverged.insert(id.clone(), (*why).to_owned());
        }
        if let Some(op) = text(r, "op") {
            let (ok, detail) = internal_op(&op, &topo, r, e);
            tally.check(&id, ok, detail);
            continue;
        }
        if id.starts_with("ut-sort") {
            let (ok, detail) = sort_case(&id, &topo, r, e);
            tally.check(&id, ok, detail);
            continue;
        }
        if id.starts_with("ut-pe-tuples") {
            let expected = text(e, "test_expected").unwrap_or_default();
            let got = if topo == "NONE" {
                String::new()
            } else {
                let tree = Tree::parse(&topo).unwrap();
                let used: Vec<usize> = (0..tree.nodes.len())
                    .filter(|&n| tree.nodes[n].letter == Letter::T && tree.nodes[n].used)
                    .collect();
                walk::pe_column(
                    &tree,
                    &used,
                    text(r, "collect").as_deref() == Some("threads"),
                )
            };
            tally.check(&id, got == expected, format!("pe {got:?} != {expected:?}"));
            continue;
        }
        if id == "ut-prevent-socket-twice" {
            let first = dry_run(&topo, "-bunit ES -bamount 1 -btype host", 1, &[]);
            let after = text(e, "after_ES").unwrap();
            let ok = matches!(&first, Outcome::Ranks(r) if ge_topologies(r)[0] == after)
                && matches!(
                    dry_run(&after, "-bunit S -bamount 1 -btype host", 1, &[]),
                    Outcome::Refused(_)
                );
            tally.check(&id, ok, "ES then S".into());
            continue;
        }
        if id.starts_with("fmt-") {
            let (ok, detail) = format_case(&id, e);
            tally.check(&id, ok, detail);
            continue;
        }
        let (ok, detail) = placement_case(&id, &topo, r, e);
        tally.check(&id, ok, detail);
    }
    eprintln!(
        "OCS cases: {} passed ({} of them binder's documented behaviour where OCS differs), {} skipped, {} failed",
        tally.passed,
        tally.diverged.len(),
        tally.skipped.len(),
        tally.failed.len()
    );
    for (id, why) in &tally.diverged {
        eprintln!("  differs on purpose: {id}: {why}");
    }
    for (id, why) in &tally.skipped {
        eprintln!("  skipped: {id}: {why}");
    }
    assert!(
        tally.failed.is_empty(),
        "failed:\n{}",
        tally.failed.join("\n")
    );
    assert_eq!(tally.passed + tally.skipped.len(), 254);
}
