use super::*;

fn round(s: &str) -> String {
    Tree::parse(s).unwrap().occupancy_string()
}

#[test]
fn product_strings_round_trip() {
    for s in [
        "NSXCCccSXCCCC",
        "NSXYCTtYCTTYeESXYCTTYCTTYEE",
        "SNXYCTTYCTTNXYCTTYCTT",
        "SCCSCC",
        "SCTTCTTEEEE",
        "NSCCccSCCCCSCCCCSCcCC",
    ] {
        assert_eq!(round(s), s);
    }
}

#[test]
fn ids_follow_ocs_numbering() {
    // test_sgeobj_TopologyString.cc: in NSXYCTtYCTTYeE... the free power threads are
    // ids 6, 10, 11 (1-based, hidden threads counted).
    let t = Tree::parse("NSXYCTtYCTTYeESXYCTTYCTTYEE").unwrap();
    assert_eq!(t.nodes[5].letter, Letter::T);
    assert!(!t.nodes[5].used && t.nodes[6].used);
    assert_eq!(t.nodes[16].letter, Letter::S);
    assert_eq!(t.nodes[14].letter, Letter::E);
    assert_eq!(t.nodes[15].letter, Letter::T);
}

#[test]
fn nested_form_normalizes_containers() {
    // ut-case-normalize-B: leaves keep their case, parents follow their children.
    let t = Tree::parse("(n(s(X(c(t))(C(t)(T)))))(n(s(x(c(t)))))").unwrap();
    assert_eq!(t.occupancy_string(), "NSXcCtTnsxc");
    assert_eq!(round("(S(C(T)(T))(C(T)(t)))"), "SCTTCTt");
}

#[test]
fn numa_nests_where_it_is_written() {
    let t = Tree::parse("SNXCNXC").unwrap();
    assert_eq!(t.roots.len(), 1);
    let s = &t.nodes[0];
    assert_eq!(s.children.len(), 2, "{t:?}");
    let t = Tree::parse("NSCSC").unwrap();
    assert_eq!(t.roots.len(), 1);
    assert_eq!(t.nodes[0].children.len(), 2);
}

#[test]
fn bad_strings_say_why() {
    for (s, why) in [
        ("SCQ", "`Q` at position 3"),
        ("TCC", "follows no core"),
        ("SCCS", "holds no core"),
        ("(S(C)", "left open"),
        ("NONE", "no CPUs"),
    ] {
        let e = Tree::parse(s).unwrap_err().to_string();
        assert!(e.contains(why), "{s}: {e}");
    }
}

/// A tree the flat form cannot say (cores after a NUMA node inside a cache, found by the
/// fuzzer) prints in the parenthesised form, which reads back as the same tree; one it
/// can say stays flat.
#[test]
fn printed_strings_read_back_as_the_same_tree() {
    let text =
        include_str!("../../../../../fuzz/corpus/ge/printed-flat-loses-cores-after-numa-in-cache");
    let tree = Tree::parse(text).unwrap();
    let printed = tree.occupancy_string();
    assert!(printed.starts_with('('), "{printed}");
    assert!(
        Tree::parse(&printed).unwrap().same_shape(&tree),
        "{printed}"
    );
    assert_eq!(round("(S(C)(c))"), "SCc");
}
