//! `binder explain` (issue #13) on five catalog shapes and three refusals, snapshotted.
//! Each snapshot was reviewed against hand reasoning: the rule named is SEMANTICS §2's,
//! the matched objects are hwloc's logical order on that topology (`lstopo -i`), the
//! dealing arithmetic is units / tasks, and a refusal stops at the request that failed.

use binder::exit_code::{REFUSED, SUCCESS};

use crate::common::{binder, run, shared, topology};

/// Runs `binder explain ARGS` and returns stdout, then stderr, with the fixtures' path shortened.
fn explain(args: &[&str], code: i32) -> String {
    let Some(shared) = shared() else {
        return String::new();
    };
    let args: Vec<String> = args
        .iter()
        .map(|a| match a.strip_prefix("xml:") {
            Some(name) => topology(&shared, name).display().to_string(),
            None => (*a).to_owned(),
        })
        .collect();
    let out = run(binder().arg("explain").args(&args), code);
    let text = format!(
        "$ binder explain {}\n{}{}",
        args.join(" "),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap()
    );
    text.replace(&*shared.to_string_lossy(), "fixtures")
}

#[test]
fn explains_catalog_shapes() {
    if shared().is_none() {
        return;
    }
    let cases: [(&str, &[&str]); 5] = [
        (
            "numa-cores-2",
            &[
                "--local-size",
                "4",
                "--synthetic",
                "pack:2 numa:2 l3:1 core:4 pu:2",
                "shapes/numa-cores-2.yaml",
            ],
        ),
        (
            "slots-per-numa",
            &[
                "--local-size",
                "3",
                "--topology",
                "xml:epyc7451-naples-2s-48c-smt2-8numa.xml",
                "shapes/slots-per-numa.yaml",
            ],
        ),
        (
            "socket-core-pu",
            &[
                "--local-size",
                "2",
                "--topology",
                "xml:skylake-2s-36c-smt2.xml",
                "shapes/socket-core-pu.yaml",
            ],
        ),
        (
            "gpu-local",
            &[
                "--local-size",
                "4",
                "--topology",
                "xml:aws-g4dn-metal-2s-48c-smt2-8t4.xml",
                "shapes/gpu-local.yaml",
            ],
        ),
        (
            "master-worker",
            &[
                "--local-size",
                "3",
                "--synthetic",
                "pack:2 core:4 pu:2",
                "shapes/master-worker.yaml",
            ],
        ),
    ];
    for (name, args) in cases {
        insta::assert_snapshot!(format!("explain-{name}"), explain(args, SUCCESS));
    }
}

#[test]
fn explains_refusals() {
    if shared().is_none() {
        return;
    }
    let cases: [(&str, &[&str]); 3] = [
        (
            "too-many-cores",
            &[
                "--synthetic",
                "pack:2 core:2 pu:2",
                "tests/fixtures/shapes/too-many-cores.yaml",
            ],
        ),
        (
            "earlier-items-take-all",
            &[
                "--synthetic",
                "pack:2 core:2 pu:2",
                "tests/fixtures/shapes/earlier-items-take-all.yaml",
            ],
        ),
        (
            "interleave-core",
            &[
                "--local-size",
                "2",
                "--synthetic",
                "pack:1 core:2 pu:2",
                "tests/fixtures/shapes/interleave-core.yaml",
            ],
        ),
    ];
    for (name, args) in cases {
        let text = explain(args, REFUSED);
        // The explanation ends with the refusal, and the one `binder:` line follows.
        assert!(text.contains("\nrefused: "), "{text}");
        assert_eq!(text.matches("\nbinder: ").count(), 1, "{text}");
        insta::assert_snapshot!(format!("explain-refused-{name}"), text);
    }
}

/// Explain takes the dry-run's placement flags (`--reserve`, `--pack`, `--share`,
/// `--local-rank`) and names objects as the plan does: with core:0 reserved on an 8-core
/// node, the request takes core:1-7 (hwloc renumbers the restricted topology 0-6; before
/// #22 explain printed those), and rank 1's line is the dry-run's.
#[test]
fn explain_takes_the_dry_runs_flags_and_numbering() {
    let args = [
        "shapes/cores-packed.yaml",
        "--synthetic",
        "pack:1 core:8 pu:1",
        "--local-size",
        "2",
        "--reserve",
        "core:0",
        "--local-rank",
        "1",
    ];
    let out = run(
        binder()
            .arg("explain")
            .args(args)
            .args(["--pack", "spread", "--share"]),
        SUCCESS,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("reserved: core:0 taken out before matching"),
        "{text}"
    );
    assert!(text.contains("took 7: core:1-7"), "{text}");
    let dry = run(binder().arg("-n").args(args), SUCCESS);
    let dry = String::from_utf8(dry.stdout).unwrap();
    let rank1 = dry
        .lines()
        .find(|l| l.starts_with("rank 1/2"))
        .expect("rank 1");
    assert_eq!(rank1, "rank 1/2  core:4-6  cpus 4-6  0x00000070");
    assert!(text.contains(&format!("  {rank1}\n")), "{text}");
    assert!(!text.contains("rank 0/2"), "only rank 1 is shown: {text}");
}

/// A `ranks:` rule takes core:0-1 first; the other ranks' request is matched on what is
/// left, and explain names those cores by the node's numbering (core:2-7), as the plan.
#[test]
fn explain_after_rank_rules_uses_the_nodes_numbering() {
    let dir = crate::common::private_ledger();
    std::fs::create_dir_all(&dir).unwrap();
    let shape = dir.join("master.yaml");
    std::fs::write(
        &shape,
        "resources:\n  - type: core\n    count: all\nranks:\n  \"0\":\n    resources:\n      - type: core\n        count: 2\n",
    )
    .unwrap();
    let out = run(
        binder().arg("explain").arg(&shape).args([
            "--synthetic",
            "pack:1 core:8 pu:1",
            "--local-size",
            "3",
        ]),
        SUCCESS,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("took 2: core:0-1"), "{text}");
    assert!(text.contains("took 6: core:2-7"), "{text}");
}

/// `index:` (issue 36) in `explain`: the request names the objects it was limited to, and
/// by hand on `pack:2 core:4`, cores 4-7 are package 1's, so it takes exactly those.
#[test]
fn explain_names_the_indexes_a_request_was_limited_to() {
    let text = explain(
        &[
            "--synthetic",
            "pack:2 core:4 pu:2",
            "--local-size",
            "2",
            "shapes/cores-by-index.yaml",
        ],
        SUCCESS,
    );
    assert!(
        text.contains("resources[0]: 4 core of core:4-7 in the node (4 there): took 4: core:4-7"),
        "{text}"
    );
}
