//! One OCS case of each kind: a placement through the real binary, an OCS internal
//! (`op:`) or a sort through the library's codec, a format through `binder topology`.

use super::*;

fn refused(o: &Outcome) -> bool {
    matches!(o, Outcome::Refused(_))
}

pub(super) fn placement_case(id: &str, topo: &str, r: &Value, e: &Value) -> (bool, String) {
    let request = switches(r);
    let slots: usize = text(r, "slots").map_or(1, |s| s.parse().unwrap());
    let host = text(r, "type").as_deref() == Some("host");
    let mut notes = Vec::new();
    let mut ok = true;
    let mut checks = 0;
    let mut expect = |cond: bool, what: String| {
        checks += 1;
        if !cond {
            ok = false;
            notes.push(what);
        }
    };
    // A slot count OCS only partly bound: binder binds all or nothing.
    let bound = text(e, "slots_bound").map(|s| s.parse::<usize>().unwrap());
    let tasks = match bound {
        Some(b) if b < slots => {
            let all = dry_run(topo, &request, slots, &global_filter(r));
            expect(
                refused(&all),
                format!("{slots} tasks should be refused, OCS bound {b}"),
            );
            b
        }
        _ => slots,
    };
    if id == "man-filter-flat-string" {
        // Binder applies the product-form filter: 6 cores are left for 6 tasks.
        let six = dry_run(topo, &request, 6, &[]);
        expect(
            matches!(&six, Outcome::Ranks(r) if r.iter().all(|t| !cpus(t).contains(&0) && !cpus(t).contains(&4))),
            "filtered cores 0 and 4 are never given".into(),
        );
    }
    let outcome = if tasks == 0 {
        Outcome::Refused("nothing to bind".into())
    } else {
        dry_run(topo, &request, tasks, &global_filter(r))
    };
    // Refusals: a null job topology, FAIL, "no binding", ids [].
    let fails = text(e, "job_topology_gcs").is_some_and(|s| s.starts_with("FAIL"))
        || e.get("job_topology_gcs").is_some_and(Value::is_null)
        || text(e, "result").is_some_and(|s| s.starts_with("FAIL") || s == "no binding")
        || id == "ocs-form-hybrid-no-L2-T6"
        || tasks == 0;
    if fails {
        expect(refused(&outcome), format!("should be refused ({request})"));
        return (ok, notes.join("; "));
    }
    let Outcome::Ranks(ranks) = outcome else {
        return (
            false,
            format!(
                "refused: {request}: {:?}",
                match outcome {
                    Outcome::Refused(m) => m,
                    _ => String::new(),
                }
            ),
        );
    };
    let strings = ge_topologies(&ranks);
    let intended_slots = [
        "NSXYCTTYCTTSXycttYCTT",
        "NSXYCTTYCTTSXYCTTyctt",
        "NSXycttYCTTSXYCTTYCTT",
    ];
    if id == "slot-bsort-S-renumbering" {
        expect(strings == intended_slots, format!("{strings:?}"));
    }
    for key in [
        "job_topology_gcs",
        "job_topology",
        "intended",
        "intended_job_topology",
    ] {
        if let Some(want) = text(e, key) {
            expect(
                strings[0] == want,
                format!("{key} {} != {want}", strings[0]),
            );
        }
    }
    for key in ["sequence", "sequence_unsorted_positions"] {
        if let Some(seq) = text(e, key) {
            let picks = sequence(topo, &seq);
            if host || slots == 1 {
                let mut all: Vec<usize> = picks.concat();
                all.sort_unstable();
                expect(
                    cpus(&ranks[0]) == all,
                    format!("{key}: {:?} != {all:?}", cpus(&ranks[0])),
                );
            } else {
                for (rank, want) in ranks.iter().zip(&picks) {
                    expect(
                        cpus(rank) == *want,
                        format!(
                            "{key}: rank {} {:?} != {want:?}",
                            rank["local_rank"],
                            cpus(rank)
                        ),
                    );
                }
            }
        }
    }
    if let Some(Value::Sequence(ids)) = e.get("ids") {
        // OCS ids number every node from 1, hidden threads included: the unit at each id
        // grants the threads of its requested kind.
        let tree = Tree::parse(topo).unwrap();
        let efficiency = text(r, "unit").is_some_and(|u| u.starts_with('E'));
        let core = if efficiency { Letter::E } else { Letter::C };
        let mut want: Vec<usize> = ids
            .iter()
            .flat_map(|id| {
                let n = id.as_u64().unwrap() as usize - 1;
                let t = &tree;
                t.threads(n)
                    .into_iter()
                    .filter(move |&th| t.nodes[t.nodes[th].parent.unwrap()].letter == core)
                    .filter_map(move |th| t.nodes[th].os)
            })
            .collect();
        want.sort_unstable();
        expect(
            cpus(&ranks[0]) == want,
            format!("ids {:?} != {want:?}", cpus(&ranks[0])),
        );
    }
    for (key, value) in e.as_mapping().unwrap() {
        let key = key.as_str().unwrap();
        if let Some(n) = key.strip_prefix("amount_") {
            let more = request.replace(
                &format!("-bamount {}", text(r, "amount").unwrap()),
                &format!("-bamount {n}"),
            );
            expect(
                refused(&dry_run(topo, &more, 1, &[])),
                format!("{key}: {value:?}"),
            );
        }
    }
    if let Some(eff) = text(e, "effective_topology") {
        let out = run(
            binder().args(["topology", "--ge-topology", topo, "--reserve", "first-core"]),
            0,
        );
        let got = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        expect(got == eff, format!("effective topology {got} != {eff}"));
    }
    for key in ["pairs", "cores", "first"] {
        if let Some(want) = text(e, key) {
            let want = want.split_whitespace().next().unwrap().to_owned();
            let got = pe_column(topo, &request).unwrap_or_default();
            let same = if key == "first" {
                got.split(':').next() == Some(want.as_str())
            } else {
                got == want
            };
            expect(same, format!("{key}: pe {got} != {want}"));
        }
    }
    if checks == 0 {
        return (false, "no expectation of this case was checked".into());
    }
    (ok, notes.join("; "))
}

fn global_filter(r: &Value) -> Vec<&'static str> {
    if text(r, "global_filter").as_deref() == Some("first_core") {
        vec!["--reserve", "first-core"]
    } else {
        Vec::new()
    }
}

pub(super) fn internal_op(op: &str, topo: &str, r: &Value, e: &Value) -> (bool, String) {
    let mut tree = Tree::parse(topo).unwrap();
    let want = text(e, "topology").unwrap_or_default();
    match op {
        "correct_topology_upper_lower" | "to_unused_internal_topology_string" => {
            if op == "to_unused_internal_topology_string" {
                for n in &mut tree.nodes {
                    n.used = false;
                }
            }
            let got = tree.nested();
            (got == want, format!("{got} != {want}"))
        }
        "mark_node_as_used" => {
            let id = text(r, "node_id").unwrap().parse::<usize>().unwrap();
            for t in tree.threads(id - 1) {
                tree.nodes[t].used = true;
            }
            let got = tree.nested();
            (got == want, format!("{got} != {want}"))
        }
        "mark_nodes_as_used(mask)" => {
            let mask = Tree::parse(&text(r, "mask").unwrap()).unwrap();
            assert!(mask.same_shape(&tree));
            for (n, m) in tree.nodes.iter_mut().zip(&mask.nodes) {
                n.used |= m.used;
            }
            let got = tree.nested();
            for n in &mut tree.nodes {
                n.used = false;
            }
            let unmarked = tree.nested();
            let want_un = text(e, "unmark_result").unwrap();
            (
                got == want && unmarked == want_un,
                format!("{got} / {unmarked}"),
            )
        }
        "find_first_unused_thread" => {
            let cores = walk::numbered_cores(&tree);
            let first = (0..tree.nodes.len())
                .find(|&n| tree.nodes[n].letter == Letter::T && !tree.nodes[n].used)
                .unwrap();
            let core = tree.nodes[first].parent.unwrap();
            let &(_, socket, index) = cores.iter().find(|c| c.0 == core).unwrap();
            let thread = tree.nodes[core]
                .children
                .iter()
                .position(|&c| c == first)
                .unwrap();
            let got = (first + 1, socket, index, thread);
            let want = (
                text(e, "id").unwrap().parse().unwrap(),
                text(e, "socket").unwrap().parse().unwrap(),
                text(e, "core").unwrap().parse().unwrap(),
                text(e, "thread").unwrap().parse().unwrap(),
            );
            (got == want, format!("{got:?} != {want:?}"))
        }
        other => (false, format!("unknown op {other}")),
    }
}

pub(super) fn sort_case(id: &str, topo: &str, r: &Value, e: &Value) -> (bool, String) {
    let marks: Vec<Mark> = text(r, "sort")
        .unwrap()
        .chars()
        .filter_map(|c| {
            Letter::from_char(c).map(|letter| Mark {
                letter,
                used: c.is_ascii_lowercase(),
            })
        })
        .collect();
    if id == "ut-sort-N-epyc-stable" {
        // 2 x (NSX(YCTT x8) x12): two NUMA sockets of 12 L3s of 8 dual-thread cores.
        let one = format!("NS{}", format!("X{}", "YCTT".repeat(8)).repeat(12));
        let tree = Tree::parse(&one.repeat(2)).unwrap();
        let order = walk::visit_order(&tree, &marks);
        let stable = order == (0..tree.nodes.len()).collect::<Vec<_>>();
        return (stable, "equal load must keep the order".into());
    }
    let tree = Tree::parse(topo).unwrap();
    let order = walk::visit_order(&tree, &marks);
    let got = tree.render_in(Some(&order), &|n| tree.nodes[n].used, None);
    // OCS HEAD's order (CS-1785); the old unit test's is in `test_expected`.
    let want = text(e, "head_actual").unwrap();
    (got == want, format!("{got} != {want}"))
}

pub(super) fn format_case(id: &str, e: &Value) -> (bool, String) {
    match id {
        "fmt-soge-pe_hostfile" => {
            let line = text(e, "pe_hostfile_line").unwrap();
            let want = line.rsplit(' ').next().unwrap().to_owned();
            let got = pe_column("SCCSCC", "-binding pe linear:2").unwrap_or_default();
            (got == want, format!("{got} != {want}"))
        }
        "fmt-soge-env" | "fmt-ocs-env" => {
            // Checked against a real child in `binstance_env_leaves_affinity_alone`; here
            // the dry-run's view of the same request.
            let out = run(
                binder().args([
                    "--dry-run",
                    "--ge-topology",
                    "SCTTCTT",
                    "--ge",
                    "-binstance env -bunit C -bamount 1",
                    "--format",
                    "json",
                ]),
                0,
            );
            let rank: Json = serde_json::from_slice(&out.stdout).unwrap();
            let ok = cpus(&rank) == [0, 1] && rank["ge_topology"] == "ScttCTT";
            (ok, format!("{rank}"))
        }
        _ => (false, "unknown format case".into()),
    }
}
