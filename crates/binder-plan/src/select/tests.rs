//! select's tests: expectations by hand on synthetic topologies.
use super::*;

/// [`select_traced`] without a trace.
fn select<'t>(
    topology: &'t Topology,
    devices: Devices<'_>,
    resources: &[Resource],
    unit: ObjType,
    kinds: &Kinds,
    origin: &str,
) -> Result<Selection<'t>, SelectError> {
    select_traced(topology, devices, resources, unit, kinds, origin, None)
}
use crate::shape::Shape;
use crate::topology::Topology;

fn labels(desc: &str, yaml: &str) -> Result<Vec<String>, String> {
    let topology = Topology::from_synthetic(desc, false).expect("topology");
    let shape = Shape::from_yaml(yaml, "t.yaml").expect("shape");
    select(
        &topology,
        Devices::default(),
        &shape.resources,
        crate::unit::choose(&shape)
            .unit
            .obj_type()
            .unwrap_or(ObjType::Core),
        &Kinds::default(),
        "t.yaml",
    )
    .map(|s| s.picks.iter().map(|o| topology.label(o)).collect())
    .map_err(|e| e.to_string())
}

/// The slots' CPUs (OS numbers, as range lists) and parent numbers.
fn slots(desc: &str, yaml: &str) -> Result<Vec<(String, usize)>, String> {
    let topology = Topology::from_synthetic(desc, false).expect("topology");
    let shape = Shape::from_yaml(yaml, "t.yaml").map_err(|e| e.to_string())?;
    let unit = crate::unit::choose(&shape)
        .unit
        .obj_type()
        .unwrap_or(ObjType::Core);
    select(
        &topology,
        Devices::default(),
        &shape.resources,
        unit,
        &Kinds::default(),
        "t.yaml",
    )
    .map(|s| {
        s.slots
            .iter()
            .map(|slot| {
                let cpus: Vec<usize> = slot.cpus.iter_set().collect();
                (binder_core::cpulist::cpu_list(&cpus), slot.parent)
            })
            .collect()
    })
    .map_err(|e| e.to_string())
}

fn owned(list: &[(&str, usize)]) -> Vec<(String, usize)> {
    list.iter().map(|(c, p)| ((*c).to_owned(), *p)).collect()
}

#[test]
fn a_slot_without_with_is_an_equal_packed_part() {
    // SEMANTICS §10: `count: 2` = two halves of each socket's 5 cores; core 4 and 9 idle.
    let got = slots(
        "pack:2 core:5 pu:1",
        "resources: [{type: socket, count: all, with: [{type: slot, count: 2}]}]",
    );
    assert_eq!(
        got.unwrap(),
        owned(&[("0-1", 0), ("2-3", 0), ("5-6", 1), ("7-8", 1)])
    );
    // `count: all` without `with`: one slot per unit; a top-level slot divides the node.
    let got = slots("core:3 pu:2", "resources: [{type: slot, count: all}]");
    assert_eq!(got.unwrap(), owned(&[("0-1", 0), ("2-3", 0), ("4-5", 0)]));
    let got = slots("core:7 pu:1", "resources: [{type: slot, count: 3}]");
    assert_eq!(got.unwrap(), owned(&[("0-1", 0), ("2-3", 0), ("4-5", 0)]));
}

#[test]
fn a_slot_with_with_repeats_while_it_fits() {
    // Two cores per slot: socket 0 (5 cores) holds two, socket 1 two more.
    let yaml = "resources: [{type: socket, count: all, with: [{type: slot, count: all, with: [{type: core, count: 2}]}]}]";
    assert_eq!(
        slots("pack:2 core:5 pu:1", yaml).unwrap(),
        owned(&[("0-1", 0), ("2-3", 0), ("5-6", 1), ("7-8", 1)])
    );
    // A socket already touched by an earlier item is skipped (parents are numbered
    // in the order slots are taken in them, so socket 1 is parent 0).
    let yaml = "resources: [{type: core}, {type: socket, count: all, with: [{type: slot, count: all, with: [{type: core, count: 2}]}]}]";
    assert_eq!(
        slots("pack:2 core:2 pu:1", yaml).unwrap(),
        owned(&[("2-3", 0)])
    );
    // A socket where not even one slot fits is skipped: socket 0 has 1 core.
    let yaml = "resources: [{type: socket, count: all, with: [{type: slot, count: all, with: [{type: core, count: 2}]}]}]";
    let got = slots("pack:2 core:2 pu:1", yaml).unwrap();
    assert_eq!(got, owned(&[("0-1", 0), ("2-3", 1)]));
    let got = slots("pack:2 core:1 pu:1", yaml).unwrap_err();
    assert!(
        got.contains("none of its 2 allowed package (2 free) qualifies"),
        "{got}"
    );
}

#[test]
fn slots_are_widened_to_whole_units() {
    // bind: core with one PU per slot: the second slot must not take core 0's sibling.
    let yaml = "options: {bind: core}\nresources: [{type: slot, count: all, with: [{type: pu}]}]";
    assert_eq!(
        slots("core:2 pu:2", yaml).unwrap(),
        owned(&[("0-1", 0), ("2-3", 0)])
    );
    // unit pu: every PU is a slot of its own.
    let yaml = "resources: [{type: slot, count: all, with: [{type: pu}]}]";
    assert_eq!(slots("core:1 pu:2", yaml).unwrap().len(), 2);
}

#[test]
fn slots_that_do_not_fit_say_so() {
    let err = slots(
        "pack:1 core:2 pu:1",
        "resources: [{type: socket, with: [{type: slot, count: 3}]}]",
    )
    .unwrap_err();
    assert!(
        err.contains(
            "resources[0].with[0] asks for 3 slot in package:0, which has 2 free core (2 allowed)"
        ),
        "{err}"
    );
    let err = slots(
        "pack:1 core:3 pu:1",
        "resources: [{type: slot, count: 2, with: [{type: core, count: 2}]}]",
    )
    .unwrap_err();
    assert!(
        err.contains(
            "asks for 2 slot in the node, but only 1 fit: resources[0].with[0] asks for 2 core"
        ),
        "{err}"
    );
}

#[test]
fn an_object_that_only_names_devices_brings_its_cpus() {
    // No GPUs on a synthetic node, so `with: gpu` fails; the leaf rule is what matters
    // with a device present, and is covered on real XMLs (nic-near) in the catalog.
    let err = labels(
        "pack:2 core:2 pu:1",
        "resources: [{type: socket, with: [{type: gpu}]}]",
    )
    .unwrap_err();
    assert!(
        err.contains("asks for 1 gpu in package:0, which has no allowed gpu"),
        "{err}"
    );
}

#[test]
fn greedy_first_fit_in_logical_order() {
    let got = labels("pack:2 core:4 pu:2", "resources: [{type: core, count: 3}]").unwrap();
    assert_eq!(got, ["core:0", "core:1", "core:2"]);
}

#[test]
fn siblings_never_share_a_pu() {
    // SEMANTICS §3: two cores, then two PUs of the third core.
    let got = labels(
        "pack:1 core:4 pu:2",
        "resources: [{type: core, count: 2}, {type: pu, count: 2}]",
    )
    .unwrap();
    assert_eq!(got, ["core:0", "core:1", "pu:4", "pu:5"]);
    let got = labels(
        "pack:2 core:2 pu:1",
        "resources: [{type: socket}, {type: socket}]",
    )
    .unwrap();
    assert_eq!(got, ["package:0", "package:1"]);
}

#[test]
fn nested_requests_match_inside_their_parent() {
    let yaml = "resources: [{type: numa, count: all, with: [{type: core, count: 2}]}]";
    let got = labels("pack:2 numa:2 core:4 pu:2", yaml).unwrap();
    assert_eq!(
        got,
        ["core:0", "core:1", "core:4", "core:5", "core:8", "core:9", "core:12", "core:13"]
    );
}

#[test]
fn a_parent_that_cannot_hold_its_children_is_skipped() {
    // Package 0 has 2 cores, so `with: core: 3` can only be met by none: error names both levels.
    let yaml = "resources: [{type: socket, with: [{type: core, count: 3}]}]";
    let err = labels("pack:2 core:2 pu:1", yaml).unwrap_err();
    assert_eq!(
        err,
        "t.yaml: resources[0] asks for 1 package in the node, but none of its 2 allowed package (2 free) \
         qualifies: resources[0].with[0] asks for 3 core in package:0, which has 2 allowed core (2 free); \
         lower `count` or use `count: all`"
    );
}

#[test]
fn not_enough_objects() {
    let err = labels("pack:1 core:4 pu:1", "resources: [{type: core, count: 5}]").unwrap_err();
    assert!(
        err.contains("asks for 5 core in the node, which has 4 allowed core (4 free)"),
        "{err}"
    );
    let err = labels(
        "pack:1 core:4 pu:1",
        "resources: [{type: core, count: 3}, {type: core, count: 2}]",
    )
    .unwrap_err();
    assert!(err.contains("resources[1] asks for 2 core"), "{err}");
    assert!(err.contains("already taken by earlier items"), "{err}");
}

#[test]
fn count_all_needs_at_least_one() {
    let err = labels(
        "pack:1 core:4 pu:1",
        "resources: [{type: l3cache, count: all}]",
    )
    .unwrap_err();
    assert!(
        err.contains("which has no allowed l3cache; choose a type it has"),
        "{err}"
    );
    let got = labels(
        "pack:1 l3:2 core:2 pu:1",
        "resources: [{type: l3, count: all}]",
    )
    .unwrap();
    assert_eq!(got, ["l3cache:0", "l3cache:1"]);
}

#[test]
fn taken_objects_are_reported_as_such() {
    let yaml =
        "resources: [{type: core}, {type: socket, count: 2, with: [{type: core, count: 2}]}]";
    let err = labels("pack:2 core:2 pu:1", yaml).unwrap_err();
    assert!(
        err.contains("resources[1] asks for 2 package in the node, which has 2 allowed package (1 free), the rest already taken"),
        "{err}"
    );
}
