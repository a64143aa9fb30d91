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
