//! Each peer's spellings against the shape a person writes by hand for them (the
//! catalog's `cores-per-socket-cyclic.yaml` is Open MPI's `--map-by socket:PE=2`, and so
//! on); every converted shape must also parse.

use super::*;

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// The shape's body (without the first comment), checked to parse as a shape.
fn body(peer: Peer, line: &str) -> String {
    let got = convert(peer, &words(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
    crate::shape::Shape::from_yaml(&got.shape, "converted")
        .unwrap_or_else(|e| panic!("{line}: {e}\n{}", got.shape));
    got.shape.split_once('\n').unwrap().1.to_owned()
}

const SLOT_CORE: &str =
    "resources:\n  - type: slot\n    count: all\n    with:\n      - type: core\n        count: 1\n";

#[test]
fn open_mpi() {
    assert_eq!(body(Peer::Ompi, "--map-by core --bind-to core"), SLOT_CORE);
    assert_eq!(
        body(
            Peer::Ompi,
            "--map-by hwthread --bind-to hwthread --use-hwthread-cpus"
        ),
        SLOT_CORE.replace("type: core", "type: pu")
    );
    // Round robin over sockets, one core each (#46's awkward row).
    assert_eq!(
        body(Peer::Ompi, "--map-by socket --bind-to core"),
        "options:\n  pattern: scatter\nresources:\n  - type: socket\n    count: all\n    with:\n      - type: slot\n        count: all\n        with:\n          - type: core\n            count: 1\n"
    );
    // The catalog's cores-per-socket-cyclic, and bound to the whole socket.
    assert!(body(Peer::Ompi, "--map-by socket:PE=2").contains("type: core\n            count: 2\n"));
    assert!(body(Peer::Ompi, "--map-by socket --bind-to socket").contains("  bind: socket\n"));
    assert!(body(Peer::Ompi, "--map-by numa --bind-to numa").contains("  bind: numa\n"));
    // Two per socket, packed: no scatter.
    let ppr = body(Peer::Ompi, "--map-by ppr:2:socket --bind-to core");
    assert!(
        !ppr.contains("scatter") && ppr.contains("type: slot\n        count: 2\n"),
        "{ppr}"
    );
    // One PU of each core; whole cores over PUs.
    assert!(body(Peer::Ompi, "--map-by core --bind-to hwthread")
        .contains("type: pu\n            count: 1\n"));
    assert_eq!(
        body(Peer::Ompi, "--bind-to none"),
        "options:\n  bind: none\nresources:\n  - type: machine\n"
    );
    // Oversubscription, as a flag or a mapping modifier.
    // Open MPI shares a core only where the binding allows overload.
    for line in [
        "--oversubscribe --map-by core --bind-to core:overload-allowed",
        "--map-by core:OVERSUBSCRIBE --bind-to core:overload-allowed",
    ] {
        assert!(
            body(Peer::Ompi, line).starts_with("options:\n  oversubscribe: true\n"),
            "{line}"
        );
    }
    let got = convert(Peer::Ompi, &words("--map-by core:OVERSUBSCRIBE")).unwrap();
    assert!(!got.shape.contains("oversubscribe"), "{}", got.shape);
    assert!(
        got.notes.iter().any(|n| n.contains("overload-allowed")),
        "{got:?}"
    );
    let got = convert(Peer::Ompi, &words("-np 4 --map-by core")).unwrap();
    assert!(got.notes.iter().any(|n| n.contains("-np 4")), "{got:?}");
    for bad in [
        "--map-by core --rank-by socket",
        // Lines Open MPI 4.1 itself refuses, and two ranks a core (a shape cannot say).
        "--map-by core:PE=2",
        "--map-by hwthread:PE=2",
        "--map-by l3cache:PE=2 --bind-to l3cache",
        "--map-by socket:PE=2 --bind-to numa",
        "--map-by hwthread --bind-to core",
        "--use-hwthread-cpus --map-by hwthread --bind-to core",
        "-np 0",
        "--bind-to core:sometimes",
        "--map-by dist:span",
        "--bind-to board:x --map-by foo",
        "--mca x y",
        "./a.out",
        "--map-by",
    ] {
        assert!(convert(Peer::Ompi, &words(bad)).is_err(), "{bad}");
    }
}

/// Open MPI 4.1's defaults and hardware-thread spellings, as its mapper applies them
/// (`rmaps_base_map_job.c`: no mapping is by core for 2 processes or fewer, else by NUMA
/// node; `rmaps_base_binding.c`: a binding below the mapping object takes the least used
/// object inside it). Each expectation is the shape a person writes for that rule.
#[test]
fn open_mpi_41_defaults_and_hwthreads() {
    let scatter = |over: &str, unit: &str, count: usize| {
        format!("options:\n  pattern: scatter\nresources:\n  - type: {over}\n    count: all\n    with:\n      - type: slot\n        count: all\n        with:\n          - type: {unit}\n            count: {count}\n")
    };
    // No --map-by: by NUMA node above 2 processes, by core (PU) for 1 or 2.
    assert_eq!(
        body(Peer::Ompi, "-np 8 --bind-to core"),
        scatter("numa", "core", 1)
    );
    assert_eq!(
        body(Peer::Ompi, "--bind-to core"),
        scatter("numa", "core", 1)
    );
    assert_eq!(body(Peer::Ompi, "-np 2 --bind-to core"), SLOT_CORE);
    assert_eq!(
        body(Peer::Ompi, "-np 2 --bind-to hwthread"),
        SLOT_CORE.replace("type: core", "type: pu")
    );
    let got = convert(Peer::Ompi, &words("--bind-to core")).unwrap();
    assert!(got.notes.iter().any(|n| n.contains("-np 2")), "{got:?}");
    // No --bind-to either: bound to the NUMA node above 2 processes.
    assert!(body(Peer::Ompi, "-np 8").contains("  bind: numa\n"));
    assert!(!body(Peer::Ompi, "-np 2").contains("bind:"));
    // --cpus-per-proc alone is numa:PE=n, bound to cores.
    assert_eq!(
        body(Peer::Ompi, "-np 2 --cpus-per-rank 2"),
        scatter("numa", "core", 2)
    );
    // A socket's next PU (a core's siblings first), not one PU of each core.
    assert_eq!(
        body(Peer::Ompi, "--map-by socket --bind-to hwthread"),
        scatter("socket", "pu", 1)
    );
    assert_eq!(
        body(Peer::Ompi, "--map-by socket:PE=2 --bind-to hwthread"),
        scatter("socket", "pu", 2)
    );
    // PUs as slots: every core one rank before any takes a second.
    assert_eq!(
        body(
            Peer::Ompi,
            "--use-hwthread-cpus --map-by core --bind-to hwthread"
        ),
        scatter("core", "pu", 1)
    );
    // Below the mapping object: the next L3 of the NUMA node, dealt again once each has one.
    assert_eq!(
        body(Peer::Ompi, "--map-by numa --bind-to l3cache"),
        scatter("numa", "l3cache", 1).replace(
            "  pattern: scatter\n",
            "  pattern: scatter\n  oversubscribe: true\n"
        )
    );
    // Above it: the task's core, bound wider.
    assert!(body(Peer::Ompi, "--map-by l3cache --bind-to socket").contains("  bind: socket\n"));
}

#[test]
fn slurm() {
    // Slurm's default within a node (block:cyclic), -c 2 CPUs = 2 PUs, bound by
    // task/affinity's automatic rule (dist_tasks.c): `bind: slurm-auto`.
    assert_eq!(
        body(Peer::Slurm, "-c 2"),
        "options:\n  pattern: scatter\n  bind: slurm-auto\nresources:\n  - type: socket\n    count: all\n    with:\n      - type: slot\n        count: all\n        with:\n          - type: pu\n            count: 2\n"
    );
    // --hint=nomultithread: k cores, one PU each; block: packed.
    assert_eq!(
        body(Peer::Slurm, "--hint=nomultithread -c 2 -m block:block"),
        "resources:\n  - type: slot\n    count: all\n    with:\n      - type: core\n        count: 2\n        with:\n          - type: pu\n            count: 1\n"
    );
    assert!(body(Peer::Slurm, "--cpu-bind=cores -m *:block").contains("  bind: core\n"));
    // Hints bind explicitly (proc_args.c `verify_hint`): no automatic binding.
    assert!(body(Peer::Slurm, "--hint=compute_bound").contains("  bind: core\n"));
    assert!(!body(Peer::Slurm, "--hint=multithread").contains("bind:"));
    // `-m block` is the node level; within the node Slurm deals cyclic.
    let got = convert(Peer::Slurm, &words("-m block")).unwrap();
    assert!(got.shape.contains("pattern: scatter"), "{}", got.shape);
    assert!(
        got.notes.iter().all(|n| !n.contains("no --distribution")),
        "{got:?}"
    );
    assert!(body(Peer::Slurm, "--cpu-bind=sockets").contains("  bind: socket\n"));
    assert!(body(Peer::Slurm, "--overcommit -m *:block").contains("  oversubscribe: true\n"));
    assert!(body(Peer::Slurm, "-O -m *:block").contains("  oversubscribe: true\n"));
    assert!(body(Peer::Slurm, "--cpu-bind=verbose,ldoms").contains("  bind: numa\n"));
    let per_socket = body(Peer::Slurm, "--ntasks-per-socket=2 --cpu-bind=cores");
    assert!(
        !per_socket.contains("scatter") && per_socket.contains("count: 2"),
        "{per_socket}"
    );
    for bad in [
        "--cpu-bind=map_cpu:0,4,0",
        "--cpu-bind=mask_cpu:0x3,0x6",
        "--cpu-bind=map_cpu:0*2",
        "--cpu-bind=map_cpu:x",
        "--cpu-bind=mask_cpu:0x0",
        "--cpu-bind=map_cpu:",
        "-m block:fcyclic",
        "-m plane=2",
        "--exclusive",
        "-c 0",
    ] {
        let e = convert(Peer::Slurm, &words(bad)).unwrap_err();
        assert!(!e.0.is_empty(), "{bad}");
        if bad.contains("0,4,0") {
            assert!(e.0.contains("pu 0 to tasks 0 and 2"), "{e}");
        }
    }
}

/// Slurm's maps and masks name each task's CPUs (or NUMA nodes) by the kernel's numbers:
/// each becomes a rank rule with `os_index:` (task 0 gets the first entry; a mask's bits
/// from the lowest; `*N` repeats an entry, `0x` is hex), the rest of the node shared out
/// among later ranks (a pool of `count: all`: one unit alone refused the fourth rank past
/// a list).
#[test]
fn slurm_maps_and_masks_are_rank_rules() {
    let rule = |rank: usize, kind: &str, list: &str| {
        format!("  {rank}:\n    resources:\n      - type: {kind}\n        os_index: {list}\n")
    };
    assert_eq!(
        body(Peer::Slurm, "--cpu-bind=verbose,map_cpu:8,0x1,2"),
        "resources:\n  - type: pu\n    count: all\nranks:\n".to_owned()
            + &rule(0, "pu", "8")
            + &rule(1, "pu", "1")
            + &rule(2, "pu", "2")
    );
    assert!(convert(Peer::Slurm, &words("--cpu-bind=map_cpu:2*2")).is_err());
    assert_eq!(
        body(Peer::Slurm, "-c 4 --cpu-bind=mask_cpu:0xF0,3"),
        "resources:\n  - type: pu\n    count: all\nranks:\n".to_owned()
            + &rule(0, "pu", "4-7")
            + &rule(1, "pu", "0-1")
    );
    assert_eq!(
        body(Peer::Slurm, "--cpu-bind=map_ldom:1,0"),
        "resources:\n  - type: numa\n    count: all\nranks:\n".to_owned()
            + &rule(0, "numa", "1")
            + &rule(1, "numa", "0")
    );
    assert_eq!(
        body(Peer::Slurm, "--cpu-bind=mask_ldom:0x2*1,1"),
        "resources:\n  - type: numa\n    count: all\nranks:\n".to_owned()
            + &rule(0, "numa", "1")
            + &rule(1, "numa", "0")
    );
    // The mask is read from its lowest bit, past 64 bits.
    let wide = format!("--cpu-bind=mask_cpu:0x1{}", "0".repeat(20));
    assert!(body(Peer::Slurm, &wide).contains("os_index: 80\n"));
    // --overcommit beside a map is left out, so the shape still parses.
    assert!(!body(Peer::Slurm, "-O --cpu-bind=map_cpu:0,1").contains("oversubscribe"));
    let notes = convert(Peer::Slurm, &words("-c 2 --cpu-bind=map_cpu:0"))
        .unwrap()
        .notes;
    assert!(
        notes.iter().any(|n| n.contains("list's 1 share the rest")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("-c and --distribution left out")),
        "{notes:?}"
    );
}

#[test]
fn numactl_and_hwloc_bind() {
    // numactl numbers nodes and CPUs as the kernel does: `os_index`.
    assert_eq!(
        body(Peer::Numactl, "--cpunodebind=1 --membind=1"),
        "options:\n  membind: local\nresources:\n  - type: numa\n    os_index: 1\n"
    );
    // Memory on other nodes than the CPUs' is `memory:` (numbers or all).
    assert_eq!(
        body(Peer::Numactl, "--interleave=all"),
        "options:\n  membind: interleave\n  memory: all\n".to_owned() + SLOT_CORE
    );
    assert!(body(Peer::Numactl, "-N 0 -m 4").contains("  membind: local\n  memory: 4\n"));
    assert!(
        body(Peer::Numactl, "-N 0 --preferred=1").contains("  membind: preferred\n  memory: 1\n")
    );
    assert!(convert(Peer::Numactl, &words("-m +0")).is_err());
    assert!(convert(Peer::Numactl, &words("-i !1")).is_err());
    assert_eq!(
        body(Peer::Numactl, "-C 0-3"),
        "options:\n  bind: none\nresources:\n  - type: pu\n    os_index: 0-3\n"
            .replace("options:\n  bind: none\n", "")
    );
    // hwloc-bind's physical indexes, for the types whose OS numbers are unique.
    assert_eq!(
        body(Peer::HwlocBind, "-p pu:3,5"),
        "resources:\n  - type: pu\n    os_index: 3,5\n"
    );
    assert!(body(Peer::HwlocBind, "--pi numa:1").contains("os_index: 1\n"));
    assert!(convert(Peer::HwlocBind, &words("-p core:1"))
        .unwrap_err()
        .0
        .contains("physical index"));
    assert_eq!(
        body(Peer::HwlocBind, "core:4-7"),
        "resources:\n  - type: core\n    index: 4-7\n"
    );
    // As hwloc-bind reads them: locations after --membind bind memory, to NUMA nodes.
    assert_eq!(
        body(Peer::HwlocBind, "--cpubind socket:1 --membind socket:1"),
        "options:\n  membind: local\nresources:\n  - type: socket\n    index: 1\n"
    );
    assert_eq!(
        body(Peer::HwlocBind, "--membind numa:0 --cpubind core:1"),
        "options:\n  membind: local\n  memory: 0\nresources:\n  - type: core\n    index: 1\n"
    );
    assert!(body(Peer::HwlocBind, "--membind numa:1").contains("  bind: none\n"));
    assert!(convert(Peer::HwlocBind, &words("--membind socket:1"))
        .unwrap_err()
        .0
        .contains("numa:N"));
    // One level inside another: the socket's first two cores.
    assert_eq!(
        body(Peer::HwlocBind, "socket:1.core:0-1"),
        "resources:\n  - type: socket\n    index: 1\n    with:\n      - type: core\n        count: 2\n"
    );
    assert!(convert(Peer::HwlocBind, &words("socket:1.core:2-3"))
        .unwrap_err()
        .0
        .contains("--li"));
    // numactl -l falls back when the node is full: preferred, not a strict bind.
    assert_eq!(
        body(Peer::Numactl, "-l"),
        "options:\n  membind: preferred\n".to_owned() + SLOT_CORE
    );
    assert!(convert(Peer::HwlocBind, &words("core:0 pu:1")).is_err());
    assert!(convert(Peer::HwlocBind, &words("core:0;rm")).is_err());
    assert!(convert(Peer::HwlocBind, &words("")).is_err());
    // Not a char boundary after the dash: refused, no panic.
    assert!(convert(Peer::Slurm, &words("-é")).is_err());
    assert!(convert(Peer::Slurm, &words("-cé")).is_err());
}

#[test]
fn a_hostile_word_never_reaches_the_yaml() {
    let line = vec!["-n".to_owned(), "4\nresources: []".to_owned()];
    let got = convert(Peer::Slurm, &line).unwrap();
    assert_eq!(got.shape.lines().next().unwrap().matches('#').count(), 1);
    assert!(!got.shape.contains("\nresources: []"), "{}", got.shape);
    crate::shape::Shape::from_yaml(&got.shape, "t").unwrap();
}

/// The catalog's shapes for the peer spellings people ask for are what `convert` prints
/// for them: one truth for the guide's table and the catalog. (Open MPI's mapper checks
/// only lines that bind at the mapping level, see `tests/integration/openmpi.rs`; these
/// bind narrower, so the catalog snapshots were checked by hand: on skylake, rank 1 of
/// `socket-round-robin-core` is core L#18, the first of package 1.)
#[test]
fn the_catalogs_peer_shapes_are_the_conversions() {
    let catalog = |text: &str| text.splitn(3, '\n').nth(2).unwrap().to_owned();
    assert_eq!(
        body(Peer::Ompi, "--map-by socket --bind-to core"),
        catalog(include_str!(
            "../../../../shapes/socket-round-robin-core.yaml"
        ))
    );
    assert_eq!(
        body(Peer::Ompi, "--map-by core --bind-to hwthread"),
        catalog(include_str!("../../../../shapes/cores-nomultithread.yaml"))
    );
    assert_eq!(
        body(Peer::Slurm, "--hint=nomultithread -m block:block"),
        catalog(include_str!("../../../../shapes/cores-nomultithread.yaml"))
    );
    assert_eq!(
        body(Peer::Ompi, "--map-by slot:PE=2 --bind-to core"),
        catalog(include_str!("../../../../shapes/cores-2-per-task.yaml"))
    );
}

/// Whatever a peer's options combine to, a conversion either refuses with a reason or
/// prints a shape that parses (found by hand once: `--overcommit` beside a `map_cpu` made
/// a shape with `ranks:` and `oversubscribe`, which the shape refuses together).
mod combined {
    use super::*;
    use proptest::prelude::*;

    const OMPI: &[&str] = &[
        "--map-by",
        "core",
        "socket:PE=2",
        "numa",
        "ppr:2:socket",
        "hwthread",
        "l3cache:OVERSUBSCRIBE",
        "--bind-to",
        "core",
        "socket",
        "none",
        "hwthread",
        "--rank-by",
        "--oversubscribe",
        "--use-hwthread-cpus",
        "--cpus-per-proc",
        "2",
        "-np",
        "4",
    ];
    const SLURM: &[&str] = &[
        "-c",
        "2",
        "--hint=nomultithread",
        "-m",
        "block:block",
        "*:cyclic",
        "--cpu-bind=cores",
        "--cpu-bind=map_cpu:0,2",
        "--cpu-bind=mask_ldom:0x1,0x2",
        "--cpu-bind=none",
        "-O",
        "--ntasks-per-socket=2",
        "--ntasks-per-core=2",
        "--threads-per-core=1",
    ];
    const NUMACTL: &[&str] = &[
        "-N",
        "0",
        "1",
        "-m",
        "all",
        "0-1",
        "-i",
        "-l",
        "-p",
        "-C",
        "0-3",
        "--interleave=all",
    ];
    const HWLOC: &[&str] = &[
        "core:0-3",
        "socket:1",
        "numa:0",
        "pu:2",
        "--membind",
        "-p",
        "all",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn a_conversion_parses_or_refuses(peer in 0usize..4, picks in prop::collection::vec(0usize..32, 0..7)) {
            let (peer, vocab) = match peer {
                0 => (Peer::Ompi, OMPI),
                1 => (Peer::Slurm, SLURM),
                2 => (Peer::Numactl, NUMACTL),
                _ => (Peer::HwlocBind, HWLOC),
            };
            let words: Vec<String> = picks.iter().map(|&i| vocab[i % vocab.len()].to_owned()).collect();
            match convert(peer, &words) {
                Ok(got) => {
                    let parsed = crate::shape::Shape::from_yaml(&got.shape, "converted");
                    prop_assert!(parsed.is_ok(), "{words:?}: {:?}\n{}", parsed.err(), got.shape);
                }
                Err(e) => prop_assert!(!e.0.is_empty()),
            }
        }
    }
}
