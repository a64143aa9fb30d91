use super::*;
use crate::topology::Topology;

fn plan_of(desc: &str, shape: &str, n: usize) -> (Topology, Plan) {
    let topology = Topology::from_synthetic(desc, false).unwrap();
    let shape = crate::shape::Shape::from_yaml(shape, "t").unwrap();
    let plan = crate::plan(&crate::PlanRequest::new(&shape, &topology, n).origin("t")).unwrap();
    (topology, plan)
}

// By hand: pack:2 numa:1 l3:2 core:2 pu:2 has one NUMA node per package (skipped as
// it adds nothing), two L3s per package, two cores per L3; 3 tasks packed over the 8
// cores get 2 cores each (0-1, 2-3, 4-5), cores 6-7 stay free.
#[test]
fn text_map_by_hand() {
    let (t, p) = plan_of(
        "pack:2 numa:1 l3:2 core:2 pu:2",
        "resources: [{type: core, count: all}]",
        3,
    );
    let mut out = Vec::new();
    render_text(&tree(&t, &p, &Blocked::default()), 3, false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "machine (16 PUs): 3 tasks
package L#0
  l3cache L#0  [0 0][0 0]
  l3cache L#1  [1 1][1 1]
package L#1
  l3cache L#2  [2 2][2 2]
  l3cache L#3  [. .][. .]
each [ ] is a core (logical order), each number the local rank on one of its PUs; . = no task
"
    );
    // No level between machine and cores: the cores' line is not the machine again.
    let (t1, p1) = plan_of(
        "pack:1 core:2 pu:1",
        "resources: [{type: core, count: all}]",
        2,
    );
    let mut out = Vec::new();
    render_text(&tree(&t1, &p1, &Blocked::default()), 2, false, &mut out).unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .contains("\ncores  [0][1]\n"));
    let mut out = Vec::new();
    render_text(&tree(&t, &p, &Blocked::default()), 3, true, &mut out).unwrap();
    assert!(String::from_utf8(out)
        .unwrap()
        .contains("[\x1b[31m0\x1b[0m "));
}

/// KNL in SNC4 flat mode has 8 NUMA nodes: each quadrant's DDR node and its MCDRAM node
/// have the same cores. Each core is drawn once, under one box that names both nodes
/// (hwloc-calc and lstopo on the fixture: numa P#0 and P#4 hold cores L#0-17, P#1 and
/// P#5 cores L#18-35, P#2 and P#6 L#36-51, P#3 and P#7 L#52-67).
#[test]
fn memory_siblings_draw_their_cores_once() {
    // Compiled in, as the library takes an XML: a value, not a file it reads.
    let xml =
        include_str!("../../../../../fixtures/topologies/knl7250-snc4-flat-68c-smt4-8numa.xml");
    let path = "knl7250-snc4-flat-68c-smt4-8numa.xml";
    let t = Topology::from_xml(xml, path.into(), false).unwrap();
    let shape =
        crate::shape::Shape::from_yaml("resources: [{type: core, count: all}]", "t").unwrap();
    let p = crate::plan(&crate::PlanRequest::new(&shape, &t, 4).origin("t")).unwrap();
    let mut out = Vec::new();
    render_text(&tree(&t, &p, &Blocked::default()), 4, false, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let boxes: Vec<&str> = text.lines().filter(|l| l.starts_with("numa")).collect();
    assert_eq!(boxes.len(), 4, "{text}");
    for (i, pair) in [
        "(P#0) + L#1 (P#4)",
        "(P#1) + L#3 (P#5)",
        "(P#2) + L#5 (P#6)",
        "(P#3) + L#7 (P#7)",
    ]
    .iter()
    .enumerate()
    {
        assert!(boxes[i].contains(pair), "{text}");
    }
    // 68 cores of 4 PUs, each drawn once.
    let drawn: usize = text
        .lines()
        .filter(|l| !l.starts_with("each"))
        .map(|l| l.matches('[').count())
        .sum();
    assert_eq!(drawn, 68, "{text}");
}
