//! Nodes with two CPU kinds (SEMANTICS §11): `kind: balanced`, and what the dry-run says
//! when a packed plan gives the kinds out unequally, checked against `hwloc-calc --cpukind`.

use super::*;

/// The number of CPU kinds `lstopo --cpukinds` lists for `xml`, and the PUs of the last
/// (most performant) one per `hwloc-calc --cpukind N`.
fn cpu_kinds(xml: &std::path::Path) -> (usize, Vec<usize>) {
    let out = std::process::Command::new("lstopo-no-graphics")
        .arg("--cpukinds")
        .arg("-i")
        .arg(xml)
        .output()
        .expect("lstopo runs");
    let kinds = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("CPU kind #"))
        .count();
    if kinds < 2 {
        return (kinds, Vec::new());
    }
    let last = (kinds - 1).to_string();
    let mask = hwloc_calc_lines(xml, &["--cpukind", &last, "all"], &[]);
    (kinds, parse_hwloc_mask(&mask[0]))
}

/// `options.kind: balanced` (SEMANTICS §11) on every shared node with two CPU kinds: each
/// task gets ⌊P/n⌋ performance cores and ⌊E/n⌋ others, where hwloc-calc's `--cpukind`
/// says which cores are which; the rest is left unused and listed.
#[test]
fn kind_balanced_gives_every_task_as_many_cores_of_each_kind() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "the CPU kinds")
        || !require_tool("lstopo-no-graphics", "the CPU kinds")
    {
        return;
    }
    let shape = Shape::from_yaml(
        "options:\n  kind: balanced\nresources:\n  - type: core\n    count: all\n",
        "balanced.yaml",
    )
    .unwrap();
    let mut nodes = 0;
    for name in all_topologies(&shared) {
        let xml = xml_path(&shared, &name);
        let (kinds, fast) = cpu_kinds(&xml);
        // GB10's five kinds are two core types split by capacity; binder groups them by
        // frequency, which hwloc-calc cannot say.
        if kinds != 2 {
            continue;
        }
        nodes += 1;
        let topo = binder_host::load(&Source::Xml(xml.clone()), false).expect("loads");
        let cores: Vec<Vec<usize>> = hwloc_objects(&xml, "core").into_values().collect();
        let is_fast = |pus: &[usize]| pus.iter().all(|p| fast.contains(p));
        let p = cores.iter().filter(|c| is_fast(c)).count();
        let e = cores.len() - p;
        for n in 2..=4 {
            let plan = binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topo, n).origin("balanced.yaml"),
            )
            .unwrap();
            for task in &plan.tasks {
                let got_p = task.units.iter().filter(|u| is_fast(&u.pus)).count();
                let got_e = task.units.len() - got_p;
                assert_eq!(
                    (got_p, got_e),
                    (p / n, e / n),
                    "{name} n={n} rank {}",
                    task.local_rank
                );
            }
            assert_eq!(plan.unused.len(), p % n + e % n, "{name} n={n}");
        }
    }
    assert!(nodes >= 2, "only {nodes} two-kind nodes");
}

/// Raptor Lake i7-1370P (6 two-thread P-cores core:0-5, 8 E-cores core:6-13): packed
/// `cores-packed.yaml` with 2 tasks gives rank 0 six P-cores and an E-core and rank 1
/// seven E-cores; the dry-run says so and points at `kind: balanced`, which gives each
/// three P-cores and four E-cores.
#[test]
fn unequal_kinds_are_reported_and_balanced_evens_them() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "raptorlake-i7-1370p-hybrid.xml");
    let out = run(
        binder()
            .args([
                "-n",
                "shapes/cores-packed.yaml",
                "--local-size",
                "2",
                "--topology",
            ])
            .arg(&xml),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kinds: tasks get unequal numbers of performance core units (rank 0: 6 P + 1 E, rank 1: 0 P + 7 E); `kind: balanced` in `options`"),
        "{text}"
    );
    let dir = tempfile_dir();
    let shape = dir.join("balanced.yaml");
    std::fs::write(
        &shape,
        "options:\n  kind: balanced\nresources:\n  - type: core\n    count: all\n",
    )
    .unwrap();
    let out = run(
        binder()
            .arg("-n")
            .arg(&shape)
            .args(["--local-size", "2", "--topology"])
            .arg(&xml),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("rank 0/2  core:0-2,6-9    cpus 0-5,12-15"),
        "{text}"
    );
    assert!(
        text.contains("rank 1/2  core:3-5,10-13  cpus 6-11,16-19"),
        "{text}"
    );
    assert!(
        text.contains("kinds: balanced, each task 3 performance + 4 efficiency core unit(s)"),
        "{text}"
    );
}

/// Lakefield (one P-core, core:4, and four E-cores): two packed tasks leave the P-core
/// unused; the dry-run says so.
#[test]
fn an_unused_performance_core_is_reported() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "lakefield-hybrid-1p4e.xml");
    let out = run(
        binder()
            .args([
                "-n",
                "shapes/cores-packed.yaml",
                "--local-size",
                "2",
                "--topology",
            ])
            .arg(&xml),
        0,
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unused: core:4 (1 core)"), "{text}");
    assert!(
        text.contains(
            "kinds: 1 performance core unit(s) left unused while tasks get efficiency ones"
        ),
        "{text}"
    );
}
