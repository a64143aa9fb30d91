//! `--format map` and `--format svg` (issue #13) on three shared topologies: socket-
//! interleaved numbering (skylake), 8 NUMA nodes of 2 L3s (naples) and a cgroup-cut node
//! with CPU-less NUMA nodes (opteron). Snapshots reviewed by hand against `lstopo` on the
//! same XMLs; the SVG must render (`rsvg-convert`, as a browser would).

use binder::exit_code::SUCCESS;

use crate::common::{binder, require_tool, run, shared, topology};

const CASES: [(&str, &str, &str); 3] = [
    ("skylake-2s-36c-smt2.xml", "shapes/cores-scatter.yaml", "4"),
    (
        "epyc7451-naples-2s-48c-smt2-8numa.xml",
        "shapes/master-worker.yaml",
        "5",
    ),
    (
        "opteron-4s-8numa-cgroup-disallowed.xml",
        "shapes/cores-packed.yaml",
        "4",
    ),
];

fn picture(xml: &str, shape: &str, size: &str, format: &str) -> String {
    let shared = shared().expect("checked by the caller");
    let out = run(
        binder()
            .args(["-n", "--format", format, "--local-size", size, "--topology"])
            .arg(topology(&shared, xml))
            .arg(shape),
        SUCCESS,
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .replace(&*shared.to_string_lossy(), "../shared")
}

#[test]
fn maps() {
    if shared().is_none() {
        return;
    }
    for (xml, shape, size) in CASES {
        let text = picture(xml, shape, size, "map");
        // Not a terminal: no colour codes.
        assert!(!text.contains('\x1b'), "{text}");
        insta::assert_snapshot!(format!("map-{xml}"), text);
    }
}

#[test]
fn svgs_render() {
    if shared().is_none() || !require_tool("rsvg-convert", "the SVG rendering test") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("binder-svg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (xml, shape, size) in CASES {
        let svg = picture(xml, shape, size, "svg");
        insta::assert_snapshot!(format!("svg-{xml}"), svg);
        let (input, png) = (
            dir.join(format!("{xml}.svg")),
            dir.join(format!("{xml}.png")),
        );
        std::fs::write(&input, &svg).unwrap();
        let out = std::process::Command::new("rsvg-convert")
            .arg("-o")
            .arg(&png)
            .arg(&input)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "rsvg-convert refused {xml}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG", "{xml}");
        // PNG's IHDR: width and height, big-endian, at bytes 16..24; the picture is
        // at least a PU box in each direction.
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert!(w >= 34 && h >= 22, "{xml}: {w}x{h}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Colour only at a terminal: under a pseudo-terminal (`script`, util-linux) the map has
/// ANSI colours per rank (rank 0 red, rank 1 green), and `NO_COLOR` turns them off.
#[test]
fn map_is_coloured_only_on_a_terminal() {
    if !require_tool("script", "the terminal colour test") {
        return;
    }
    let line = format!(
        "{} -n --format map --local-size 2 --synthetic 'pack:1 core:2 pu:1' shapes/cores-packed.yaml",
        crate::common::binder_exe()
    );
    let tty = |no_color: bool| {
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qec", &line, "/dev/null"])
            .current_dir(crate::common::root())
            .env("BINDER_LEDGER_DIR", crate::common::private_ledger());
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    };
    let coloured = tty(false);
    assert!(
        coloured.contains("[\x1b[31m0\x1b[0m][\x1b[32m1\x1b[0m]"),
        "{coloured:?}"
    );
    assert!(!tty(true).contains('\x1b'));
}
