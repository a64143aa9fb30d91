use super::*;

fn synthetic(desc: &str) -> Topology {
    Topology::from_synthetic(desc, false).expect("valid synthetic topology")
}

#[test]
fn synthetic_counts() {
    let t = synthetic("pack:2 numa:2 core:4 pu:2");
    assert_eq!(t.objects(ObjType::Package).len(), 2);
    assert_eq!(t.objects(ObjType::Numa).len(), 4);
    assert_eq!(t.objects(ObjType::Core).len(), 16);
    assert_eq!(t.objects(ObjType::Pu).len(), 32);
    assert_eq!(t.objects(ObjType::Machine).len(), 1);
    assert!(t.objects(ObjType::L3).is_empty());
}

#[test]
fn objects_inside_a_parent_by_tree_walk_and_by_filter_agree() {
    // The walk must find exactly what filtering every object by cpuset finds.
    let t = synthetic("pack:2 numa:2 l3:1 core:3 pu:2");
    for parent_kind in [
        ObjType::Machine,
        ObjType::Package,
        ObjType::Numa,
        ObjType::L3,
        ObjType::Core,
    ] {
        for parent in t.objects(parent_kind) {
            let within = parent.cpuset().unwrap();
            for kind in [
                ObjType::Package,
                ObjType::Numa,
                ObjType::L3,
                ObjType::Core,
                ObjType::Pu,
            ] {
                let walk: Vec<usize> = t
                    .objects_inside(kind, parent)
                    .iter()
                    .map(|o| o.logical_index())
                    .collect();
                let filter: Vec<usize> = t
                    .objects(kind)
                    .iter()
                    .filter(|o| within.includes(&*o.cpuset().unwrap()))
                    .map(|o| o.logical_index())
                    .collect();
                assert_eq!(walk, filter, "{kind:?} inside {parent_kind:?}");
            }
        }
    }
}

#[test]
fn bad_synthetic_is_an_error() {
    let err = Topology::from_synthetic("pack:two", false)
        .err()
        .expect("rejected");
    assert!(
        err.to_string()
            .contains("invalid synthetic topology \"pack:two\""),
        "{err}"
    );
}

#[test]
fn huge_synthetic_topologies_are_refused_before_hwloc_builds_them() {
    let err = Topology::from_synthetic("pack:1000000 core:1000 pu:1000", false)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("more than 1048576 PUs"), "{err}");
    assert!(Topology::from_synthetic("pack:2 core:64 pu:2", false).is_ok());
}
