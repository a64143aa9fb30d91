//! Fuzzes planning: a random synthetic topology, a random shape (slots, widths, patterns)
//! and a random local size. Planning must never panic, and every plan must keep the
//! invariants of SEMANTICS §3–5 and §10, checked here from the plan itself:
//!
//! - one task per local rank, every cpuset inside the node's allowed CPUs;
//! - without a width, tasks never share a PU;
//! - without slots, every task gets the same number of units (k = P div n);
//! - with slots, a task's cpuset is its slot's, and no slot straddles its parent.
#![no_main]

use arbitrary::Arbitrary;
use binder_plan::shape::Shape;
use binder_plan::cpuset::CpuSet;
use binder_plan::topology::Topology;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Input {
    packages: u8,
    numa: u8,
    cores: u8,
    pus: u8,
    tasks: u8,
    items: Vec<Item>,
    bind: u8,
    pattern: u8,
    reverse: bool,
}

#[derive(Debug, Arbitrary)]
struct Item {
    kind: u8,
    count: u8,
    depth: u8,
}

const KINDS: [&str; 8] = [
    "machine", "socket", "numa", "l3", "core", "pu", "slot", "group",
];
const BINDS: [&str; 9] = [
    "",
    "core",
    "pu",
    "none",
    "numa",
    "socket",
    "l3",
    "l2",
    "gpu-local",
];
const PATTERNS: [&str; 3] = ["packed", "scatter", "interleave"];

fuzz_target!(|input: Input| {
    let (p, n, c, t) = (
        input.packages % 3 + 1,
        input.numa % 3,
        input.cores % 6 + 1,
        input.pus % 4 + 1,
    );
    let desc = if n > 0 {
        format!("pack:{p} numa:{n} l3:1 core:{c} pu:{t}")
    } else {
        format!("pack:{p} l3:2 core:{c} pu:{t}")
    };
    // A tree from the flat item list: each item nests at most one level below the last.
    let mut yaml = format!(
        "options:\n  pattern: {}\n  reverse: {}\n",
        PATTERNS[input.pattern as usize % 3],
        input.reverse
    );
    let bind = BINDS[input.bind as usize % BINDS.len()];
    if !bind.is_empty() {
        yaml.push_str(&format!("  bind: {bind}\n"));
    }
    yaml.push_str("resources:\n");
    let mut depth = 0usize;
    for (i, item) in input.items.iter().take(6).enumerate() {
        let d = if i == 0 {
            0
        } else {
            (item.depth as usize % 3).min(depth + 1)
        };
        if d > depth {
            yaml.push_str(&format!("{}  with:\n", "    ".repeat(depth)));
        }
        depth = d;
        let count = match item.count % 5 {
            0 => "all".to_owned(),
            k => k.to_string(),
        };
        yaml.push_str(&format!(
            "{}  - type: {}\n{}    count: {count}\n",
            "    ".repeat(d),
            KINDS[item.kind as usize % KINDS.len()],
            "    ".repeat(d),
        ));
    }
    let Ok(shape) = Shape::from_yaml(&yaml, "f.yaml") else {
        return;
    };
    let topo = Topology::from_synthetic(&desc, false).expect("valid synthetic");
    let tasks = input.tasks as usize % 12 + 1;
    let Ok(plan) =
        binder_plan::plan(&binder_plan::PlanRequest::new(&shape, &topo, tasks).origin("f.yaml"))
    else {
        return;
    };
    assert_eq!(plan.tasks.len(), tasks);
    let allowed = topo.allowed();
    let mut union = CpuSet::new();
    let widened = plan.unit.width.is_some();
    for task in &plan.tasks {
        assert!(allowed.includes(&task.cpuset), "{desc}\n{yaml}");
        if !widened {
            assert!(
                !task.cpuset.intersects(&union),
                "tasks overlap: {desc}\n{yaml}n={tasks}"
            );
        }
        union |= &task.cpuset;
    }
    let unbound = plan.unit.unit == binder_plan::unit::Unit::None;
    if plan.slots == 0 && !unbound {
        let k = plan.tasks[0].units.len();
        assert!(
            k > 0 && plan.tasks.iter().all(|t| t.units.len() == k),
            "{desc}\n{yaml}"
        );
    }
});
