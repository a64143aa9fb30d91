//! Placement that keeps its promises (SEMANTICS §10, §11), swept over every shared
//! topology and checked against hwloc's own tools:
//!
//! - slot shapes: no rank straddles two parent objects (`hwloc-calc --intersect`), a
//!   whole-parent slot is exactly its parent (`hwloc-calc TYPE:I`), cpusets are disjoint,
//!   and the ranks follow the parents in packed or round-robin order;
//! - GPU shapes: no two tasks share a PU, whatever the GPU localities;
//! - CPU shapes with `gpus-per-task`: no task gets a remote GPU while a local one is free.

use std::collections::BTreeMap;
use std::path::Path;

use binder_plan::distribute::Plan;
use binder_plan::shape::Shape;
use binder_plan::topology::{Source, Topology};

use crate::common::{
    all_topologies, hwloc_calc_lines, hwloc_objects, parse_hwloc_mask, require_tool, root, shared,
    topology as xml_path,
};

/// Slot shapes of the catalog: (file, parent type in hwloc-calc's words, whole parent
/// per slot, pattern is scatter).
const SLOT_SHAPES: [(&str, &str, bool, bool); 6] = [
    ("l3-per-task.yaml", "l3cache", true, false),
    ("numa-per-task.yaml", "numa", true, false),
    ("hybrid-numa-openmp.yaml", "numa", true, false),
    ("socket-per-task.yaml", "package", true, false),
    ("slots-per-numa.yaml", "numa", false, false),
    ("cores-per-socket-cyclic.yaml", "package", false, true),
];

fn cpus(plan: &Plan, rank: usize) -> Vec<usize> {
    plan.tasks[rank].cpuset.iter_set().collect()
}

fn mask(cpus: &[usize]) -> String {
    binder_core::cpulist::hwloc_mask(cpus)
}

#[test]
fn slot_shapes_never_straddle_and_follow_their_parents() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "the slot sweep") {
        return;
    }
    let (mut cases, mut refused, mut straddles, mut overlaps) = (0, 0, 0, 0);
    for name in all_topologies(&shared) {
        let xml = xml_path(&shared, &name);
        let topo = binder_host::load(&Source::Xml(xml.clone()), false).expect("loads");
        for (file, kind, whole, scatter) in SLOT_SHAPES {
            let shape = binder_host::shape_file(&root().join("shapes").join(file)).unwrap();
            // All slots first: that run names every slot's parent.
            let slots = match binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topo, 1).origin(file),
            ) {
                Ok(plan) => plan.slots,
                Err(e) => {
                    // Legitimate refusals: the node has no such parent, or no parent holds
                    // one slot (POWER7's one-core packages and `core: 2`).
                    let text = e.to_string();
                    assert!(
                        text.contains(&format!("no allowed {kind}"))
                            || text.contains("qualifies: resources[0].with[0] asks for all slot"),
                        "{name} {file}: {text}"
                    );
                    refused += 1;
                    continue;
                }
            };
            let full = binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topo, slots).origin(file),
            )
            .expect("every slot");
            let parent_sets = hwloc_objects(&xml, kind);
            let lines: Vec<String> = (0..slots).map(|r| mask(&cpus(&full, r))).collect();
            let touched = hwloc_calc_lines(&xml, &["--intersect", kind], &lines);
            assert_eq!(touched.len(), slots, "{name} {file}");
            let mut owner = Vec::new();
            for (r, line) in touched.iter().enumerate() {
                let mine = cpus(&full, r);
                let inside: Vec<usize> = line
                    .split(',')
                    .filter_map(|x| x.parse().ok())
                    .filter(|i| {
                        let p = &parent_sets[i];
                        mine.iter().all(|c| p.contains(c))
                    })
                    .collect();
                if inside.is_empty() {
                    straddles += 1;
                    eprintln!("{name} {file}: rank {r} ({line}) straddles");
                    owner.push(usize::MAX);
                    continue;
                }
                owner.push(inside[0]);
                if whole {
                    assert_eq!(
                        &mine, &parent_sets[&inside[0]],
                        "{name} {file} rank {r}: not its whole {kind}"
                    );
                }
            }
            let mut seen = std::collections::BTreeSet::new();
            for r in 0..slots {
                for c in cpus(&full, r) {
                    if !seen.insert(c) {
                        overlaps += 1;
                    }
                }
            }
            // Order: packed = parents in order; scatter = round robin over them, derived
            // from how many slots hwloc-calc put in each parent.
            let mut counts: Vec<(usize, usize)> = Vec::new();
            for &p in &owner {
                match counts.iter_mut().find(|(q, _)| *q == p) {
                    Some((_, c)) => *c += 1,
                    None => counts.push((p, 1)),
                }
            }
            counts.sort_unstable();
            let mut expected = Vec::new();
            if scatter {
                let mut left = counts.clone();
                while expected.len() < slots {
                    for (p, c) in &mut left {
                        if *c > 0 {
                            *c -= 1;
                            expected.push(*p);
                        }
                    }
                }
            } else {
                for (p, c) in &counts {
                    expected.extend(std::iter::repeat_n(*p, *c));
                }
            }
            assert_eq!(owner, expected, "{name} {file}: slot order");
            // Smaller sizes take a prefix of the same order.
            for n in [1, 2, slots / 2]
                .into_iter()
                .filter(|&n| n >= 1 && n <= slots)
            {
                let plan = binder_plan::plan(
                    &binder_plan::PlanRequest::new(&shape, &topo, n).origin(file),
                )
                .unwrap();
                for r in 0..n {
                    assert_eq!(
                        cpus(&plan, r),
                        cpus(&full, r),
                        "{name} {file} n={n} rank {r}"
                    );
                }
                cases += 1;
            }
            cases += 1;
            // One more task than slots is refused, saying how many fit.
            let err = binder_plan::plan(
                &binder_plan::PlanRequest::new(&shape, &topo, slots + 1).origin(file),
            )
            .unwrap_err()
            .to_string();
            assert!(
                err.contains(&format!("only {slots} slot(s)")),
                "{name} {file}: {err}"
            );
        }
    }
    eprintln!("slot sweep: {cases} cases planned, {refused} refused (no such level), {straddles} straddles, {overlaps} overlaps");
    assert_eq!((straddles, overlaps), (0, 0));
    assert!(cases > 300, "the sweep planned only {cases} cases");
}

/// Every topology with GPUs, loaded with I/O.
fn gpu_topologies(shared: &Path) -> Vec<(String, Topology)> {
    all_topologies(shared)
        .into_iter()
        .filter_map(|name| {
            let t = binder_host::load(&Source::Xml(xml_path(shared, &name)), true).ok()?;
            (!binder_plan::gpu::discover(&t).is_empty()).then_some((name, t))
        })
        .collect()
}

#[test]
fn gpu_shapes_never_give_two_tasks_one_pu() {
    let Some(shared) = shared() else { return };
    let shapes = [
        "gpu-local.yaml",
        "gpu-local-shared.yaml",
        "gpu-remote.yaml",
        "gpu-slots.yaml",
    ];
    let (mut planned, mut overlaps) = (0, 0);
    let mut refused: BTreeMap<&str, usize> = BTreeMap::new();
    // Every refusal must be one of these (too few GPUs, cores, slots; no remote NUMA
    // node; overlapping localities that cannot be given disjointly).
    let kinds = [
        ("GPU(s) per task need", "too few GPUs"),
        ("in the pool", "too few units"),
        ("slot(s) on", "too few slots"),
        ("needs a NUMA node without", "no remote NUMA node"),
        ("CPUs of their own", "overlapping localities"),
        ("none of its", "no parent with a GPU"),
    ];
    for (name, topo) in gpu_topologies(&shared) {
        for file in shapes {
            let shape = binder_host::shape_file(&root().join("shapes").join(file)).unwrap();
            for n in 1..=8 {
                for g in 0..=3 {
                    let per_task = (g > 0).then_some(g);
                    let plan = match binder_plan::plan(
                        &binder_plan::PlanRequest::new(&shape, &topo, n)
                            .origin(file)
                            .gpus_per_task(per_task),
                    ) {
                        Ok(plan) => plan,
                        Err(e) => {
                            let text = e.to_string();
                            let kind = kinds.iter().find(|(k, _)| text.contains(k));
                            let (_, kind) = kind.unwrap_or_else(|| {
                                panic!("{name} {file} n={n} g={g}: unexpected refusal: {text}")
                            });
                            *refused.entry(kind).or_default() += 1;
                            continue;
                        }
                    };
                    planned += 1;
                    let mut seen = binder_plan::cpuset::CpuSet::new();
                    for task in &plan.tasks {
                        if task.cpuset.intersects(&seen) {
                            overlaps += 1;
                            eprintln!(
                                "{name} {file} n={n} g={g}: rank {} overlaps",
                                task.local_rank
                            );
                        }
                        seen |= &task.cpuset;
                    }
                }
            }
        }
    }
    eprintln!("gpu sweep: {planned} plans, refused {refused:?}, {overlaps} overlaps");
    assert_eq!(overlaps, 0);
    assert!(planned > 500, "only {planned} GPU plans");
}

/// The case the bug was found with: 3 T4s per task on aws-g4dn put rank 1 on all cores.
#[test]
fn gpu_local_with_overlapping_localities_on_aws_g4dn_stays_disjoint() {
    let Some(shared) = shared() else { return };
    let xml = xml_path(&shared, "aws-g4dn-metal-2s-48c-smt2-8t4.xml");
    let topo = binder_host::load(&Source::Xml(xml.clone()), true).unwrap();
    let shape = binder_host::shape_file(&root().join("shapes/gpu-local.yaml")).unwrap();
    let plan = binder_plan::plan(
        &binder_plan::PlanRequest::new(&shape, &topo, 2)
            .origin("gpu-local.yaml")
            .gpus_per_task(Some(3)),
    )
    .unwrap();
    assert!(!plan.tasks[0].cpuset.intersects(&plan.tasks[1].cpuset));
    // Rank 0's GPUs 0-2 are all on package 0 (hwloc-calc pci=… answers package:0's
    // cpuset), so it gets that package; rank 1 is left package 1.
    let package = |i: usize| -> Vec<usize> {
        parse_hwloc_mask(&hwloc_calc_lines(&xml, &[], &[format!("package:{i}")])[0])
    };
    assert_eq!(cpus(&plan, 0), package(0));
    assert_eq!(cpus(&plan, 1), package(1));
}

#[test]
fn gpus_follow_cpus_whenever_a_local_gpu_is_free() {
    let Some(shared) = shared() else { return };
    let shapes = [
        "cores-packed.yaml",
        "cores-scatter.yaml",
        "numa-per-task.yaml",
        "socket-per-task.yaml",
        "l3-per-task.yaml",
        "cores-per-socket-cyclic.yaml",
    ];
    let (mut planned, mut handed, mut remote_while_local_free) = (0, 0, 0);
    for (name, topo) in gpu_topologies(&shared) {
        for file in shapes {
            let shape = binder_host::shape_file(&root().join("shapes").join(file)).unwrap();
            for n in 1..=8 {
                for g in 1..=3 {
                    let Ok(plan) = binder_plan::plan(
                        &binder_plan::PlanRequest::new(&shape, &topo, n)
                            .origin(file)
                            .gpus_per_task(Some(g)),
                    ) else {
                        continue;
                    };
                    planned += 1;
                    let local = |gpu: usize, cpus: &binder_plan::cpuset::CpuSet| {
                        plan.gpus[gpu].locality.intersects(cpus)
                    };
                    let mut taken = std::collections::BTreeSet::new();
                    for task in &plan.tasks {
                        assert_eq!(task.gpus.len(), g, "{name} {file}");
                        for &gpu in &task.gpus {
                            handed += 1;
                            let free_local = (0..plan.gpus.len()).any(|o| {
                                !taken.contains(&o)
                                    && !task.gpus.contains(&o)
                                    && local(o, &task.cpuset)
                            });
                            if !local(gpu, &task.cpuset) && free_local {
                                remote_while_local_free += 1;
                                eprintln!(
                                    "{name} {file} n={n} g={g}: rank {} got remote gpu:{gpu}",
                                    task.local_rank
                                );
                            }
                        }
                        taken.extend(task.gpus.iter().copied());
                    }
                }
            }
        }
    }
    eprintln!("gpus-follow-cpus sweep: {planned} plans, {handed} GPUs handed out, {remote_while_local_free} remote while a local one was free");
    assert_eq!(remote_while_local_free, 0);
    assert!(planned > 300, "only {planned} plans");
}

#[test]
fn nic_near_shape_names_the_nearest_nic() {
    let Some(shared) = shared() else { return };
    let shape = binder_host::shape_file(&root().join("shapes/nic-near.yaml")).unwrap();
    let mut with_nics = 0;
    for name in all_topologies(&shared) {
        let topo = binder_host::load(&Source::Xml(xml_path(&shared, &name)), true).unwrap();
        let nics = binder_plan::nic::discover(&topo);
        let plan = match binder_plan::plan(
            &binder_plan::PlanRequest::new(&shape, &topo, 1).origin("nic-near.yaml"),
        ) {
            Ok(plan) => plan,
            Err(e) => {
                // No NIC, or none whose locality fits in one socket (attached to the machine).
                let text = e.to_string();
                assert!(text.contains("nic"), "{name}: {text}");
                assert!(
                    nics.iter().all(|n| n.attached_to.starts_with("machine")),
                    "{name}: {text}"
                );
                continue;
            }
        };
        with_nics += 1;
        let task = &plan.tasks[0];
        assert!(!task.nics.is_empty(), "{name}");
        for &i in &task.nics {
            // Its NIC is near its CPUs: the NIC's locality lies in the task's socket.
            assert!(
                task.cpuset.includes(&plan.nics[i].locality),
                "{name}: nic {i}"
            );
        }
    }
    assert!(with_nics >= 10, "only {with_nics} topologies with NICs");
}

/// Per-rank rules (`ranks:`): a rule's ranks are planned first, the others around them,
/// and logical indexes stay those of the whole node. Expected by hand on
/// `pack:2 core:4 pu:2` (core L#i = PUs 2i, 2i+1): rank 1's rule takes the first core of
/// package 0 as two PU units (0, 1); the 7 cores left are dealt packed to ranks 2-3, 3
/// each (cores 1-3, 4-6), the remainder core 7 unused; rank 0 is unbound.
#[test]
fn per_rank_rules_plan_around_each_other() {
    let topology =
        binder_host::load(&Source::Synthetic("pack:2 core:4 pu:2".into()), false).unwrap();
    let shape = Shape::from_yaml(
        "resources: [{type: core, count: all}]\nranks:\n  0: {bind: none}\n  1: {bind: pu, resources: [{type: package, with: [{type: core}]}]}\n",
        "t.yaml",
    )
    .unwrap();
    let plan =
        binder_plan::plan(&binder_plan::PlanRequest::new(&shape, &topology, 4).origin("t.yaml"))
            .unwrap();
    assert_eq!(cpus(&plan, 0), Vec::<usize>::new());
    assert_eq!(plan.tasks[0].rule.as_deref(), Some("0"));
    assert_eq!(cpus(&plan, 1), [0, 1]);
    assert_eq!(plan.unit_of(1).unit.to_string(), "pu");
    assert_eq!(cpus(&plan, 2), [2, 3, 4, 5, 6, 7]);
    assert_eq!(cpus(&plan, 3), [8, 9, 10, 11, 12, 13]);
    let logical: Vec<usize> = plan.tasks[3].units.iter().map(|u| u.logical).collect();
    assert_eq!(logical, [4, 5, 6]);
    assert_eq!(
        plan.unused.iter().map(|u| u.logical).collect::<Vec<_>>(),
        [7]
    );
    assert!(plan
        .tasks
        .iter()
        .enumerate()
        .all(|(r, t)| t.local_rank == r));
    // A rule that takes everything leaves the others nothing, and the refusal says so.
    let greedy = Shape::from_yaml(
        "resources: [{type: core}]\nranks: {0: {resources: [{type: core, count: all}]}}",
        "g.yaml",
    )
    .unwrap();
    let e =
        binder_plan::plan(&binder_plan::PlanRequest::new(&greedy, &topology, 2).origin("g.yaml"))
            .unwrap_err()
            .to_string();
    assert!(
        e.starts_with("g.yaml: the `ranks:` rules (0) take every cpu"),
        "{e}"
    );
}

/// `os_index:` names what the kernel numbers so (hwloc-calc's `--pi`, lstopo's `P#`) on
/// every shared topology: a task asking for `pu`, `numa` or `package` P#N gets exactly
/// hwloc-calc's CPUs of that object, and an object without allowed CPUs (an offline
/// node, memory without cores) is refused as not there.
#[test]
fn os_index_names_the_kernels_numbers_as_hwloc_calc_does() {
    let Some(shared) = shared() else { return };
    if !require_tool("hwloc-calc", "the os_index sweep") {
        return;
    }
    let (mut checked, mut absent) = (0, 0);
    for name in all_topologies(&shared) {
        let xml = xml_path(&shared, &name);
        let topo = binder_host::load(&Source::Xml(xml.clone()), false).expect("loads");
        for kind in ["pu", "numa", "package"] {
            let numbers: Vec<usize> = hwloc_calc_lines(&xml, &["--po", "-I", kind, "all"], &[])
                .first()
                .map(|l| l.split(',').filter_map(|x| x.parse().ok()).collect())
                .unwrap_or_default();
            // Numbers up to one past the last that hwloc-calc does not list (no object, or
            // one without allowed CPUs) must be refused.
            let last = numbers.iter().max().map_or(0, |m| m + 1);
            for n in (0..=last).filter(|n| !numbers.contains(n)) {
                let text = format!("resources:\n  - type: {kind}\n    os_index: {n}\n");
                let shape = Shape::from_yaml(&text, "os.yaml").unwrap();
                let e = binder_plan::plan(&binder_plan::PlanRequest::new(&shape, &topo, 1))
                    .map(|_| ())
                    .expect_err(&format!("{name} {kind} P#{n} is not listed by hwloc-calc"));
                assert!(
                    e.to_string()
                        .contains(&format!("{kind} P#{n} is not there")),
                    "{e}"
                );
                absent += 1;
            }
            // Every NUMA node and package; the first, last and a few PUs between.
            let picked: Vec<usize> = if kind == "pu" {
                let step = (numbers.len() / 6).max(1);
                let mut p: Vec<usize> = numbers.iter().copied().step_by(step).collect();
                p.extend(numbers.last());
                p
            } else {
                numbers
            };
            let lines: Vec<String> = picked.iter().map(|n| format!("{kind}:{n}")).collect();
            let masks = hwloc_calc_lines(&xml, &["--pi"], &lines);
            for (n, m) in picked.iter().zip(masks) {
                let want = parse_hwloc_mask(&m);
                let text = format!("resources:\n  - type: {kind}\n    os_index: {n}\n");
                let shape = Shape::from_yaml(&text, "os.yaml").unwrap();
                let got = binder_plan::plan(&binder_plan::PlanRequest::new(&shape, &topo, 1));
                match got {
                    Ok(plan) => {
                        assert_eq!(cpus(&plan, 0), want, "{name} {kind} P#{n}");
                        checked += 1;
                    }
                    Err(e) => {
                        assert!(want.is_empty(), "{name} {kind} P#{n}: {e}");
                        assert!(
                            e.to_string()
                                .contains(&format!("{kind} P#{n} is not there")),
                            "{name}: {e}"
                        );
                        absent += 1;
                    }
                }
            }
        }
    }
    // Hand count: 35 topologies, each with at least one of every kind; xeon-2s-offline's
    // node 0 has no online CPU.
    assert!(checked > 35 * 3, "{checked} checked, {absent} absent");
    assert!(
        absent >= 1,
        "the offline node of xeon-2s-offline-cpu0-node0 is refused"
    );
}
