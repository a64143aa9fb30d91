//! Properties of the planner over random synthetic topologies, shapes and local sizes
//! (proptest): every task of a node computes the same plan on its own, so the plan must
//! be a deterministic function of topology and shape that never overlaps two tasks.

use binder::shape::Shape;
use binder::topology::{self, Source};
use hwlocality::cpu::cpuset::CpuSet;
use proptest::prelude::*;

/// `pack:P [numa:N] core:C pu:T`, the levels every planner rule cares about.
fn topology_desc() -> impl Strategy<Value = String> {
    (1..=3usize, 1..=2usize, 1..=6usize, 1..=4usize).prop_map(|(p, n, c, t)| {
        if n > 1 {
            format!("pack:{p} numa:{n} core:{c} pu:{t}")
        } else {
            format!("pack:{p} core:{c} pu:{t}")
        }
    })
}

fn count() -> impl Strategy<Value = String> {
    prop_oneof![
        (1..=3u32).prop_map(|n| n.to_string()),
        Just("all".to_owned())
    ]
}

/// A shape with one or two levels, any binding, pattern and direction.
fn shape_yaml() -> impl Strategy<Value = String> {
    let outer = prop::sample::select(vec!["machine", "socket", "numa", "core", "pu"]);
    let inner = prop::option::of((prop::sample::select(vec!["core", "pu"]), count()));
    let bind = prop::sample::select(vec!["", "core", "pu"]);
    let pattern = prop::sample::select(vec!["packed", "scatter", "interleave"]);
    (outer, count(), inner, bind, pattern, any::<bool>()).prop_map(
        |(outer, n, inner, bind, pattern, reverse)| {
            let mut yaml = format!("options:\n  pattern: {pattern}\n  reverse: {reverse}\n");
            if !bind.is_empty() {
                yaml.push_str(&format!("  bind: {bind}\n"));
            }
            yaml.push_str(&format!("resources:\n  - type: {outer}\n    count: {n}\n"));
            if let Some((kind, m)) = inner {
                yaml.push_str(&format!(
                    "    with:\n      - type: {kind}\n        count: {m}\n"
                ));
            }
            yaml
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn plans_are_disjoint_equal_inside_the_pool_and_deterministic(
        desc in topology_desc(), yaml in shape_yaml(), n in 1..=9usize,
    ) {
        let shape = Shape::from_yaml(&yaml, "p.yaml").expect("generated shapes are valid");
        let topology = topology::load(&Source::Synthetic(desc.clone()), false).unwrap();
        let Ok(plan) = binder::plan(&shape, "p.yaml", &topology, n, None) else {
            // A refusal is fine (interleave with cores, too few units); a panic is not.
            return Ok(());
        };
        prop_assert_eq!(plan.tasks.len(), n);
        let unit = plan.unit.unit.obj_type().unwrap_or(binder::shape::ObjType::Core);
        let selection = binder::select::select(
            &topology, binder::select::Devices::default(), &shape.resources, unit, "p.yaml",
        ).unwrap();
        // The pool: every unit object that holds a selected CPU.
        let selected = selection.cpuset();
        let mut pool = CpuSet::new();
        for obj in topology.hw().objects_with_type(match plan.unit.unit {
            binder::unit::Unit::Pu => hwlocality::object::types::ObjectType::PU,
            _ => hwlocality::object::types::ObjectType::Core,
        }) {
            let set = obj.cpuset().unwrap();
            if set.intersects(&selected) {
                pool |= &*set;
            }
        }
        let mut union = CpuSet::new();
        let size = plan.tasks[0].cpuset.weight();
        for task in &plan.tasks {
            prop_assert!(!task.cpuset.is_empty(), "{desc} {yaml} n={n}: an empty task");
            prop_assert_eq!(task.cpuset.weight(), size, "{} {} n={}: unequal shares", desc, yaml, n);
            prop_assert!(!task.cpuset.intersects(&union), "{desc} {yaml} n={n}: tasks overlap");
            union |= &task.cpuset;
        }
        prop_assert!(pool.includes(&union), "{desc} {yaml} n={n}: outside the pool");
        let again = binder::plan(&shape, "p.yaml", &topology, n, None).unwrap();
        for (a, b) in plan.tasks.iter().zip(&again.tasks) {
            prop_assert_eq!(&a.cpuset, &b.cpuset);
        }
    }

    #[test]
    fn shapes_survive_serialize_then_parse(yaml in shape_yaml()) {
        let shape = Shape::from_yaml(&yaml, "p.yaml").unwrap();
        let text = serde_yaml::to_string(&shape).unwrap();
        prop_assert_eq!(Shape::from_yaml(&text, "again.yaml").unwrap(), shape);
    }
}
