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

/// The picture, with the XML named relative to the repository root (binder's working
/// directory here) so the header, and the SVG title wrapped from it, are the same on
/// every machine.
fn picture(xml: &str, shape: &str, size: &str, format: &str) -> String {
    let shared = shared().expect("checked by the caller");
    topology(&shared, xml);
    let out = run(
        binder()
            .args(["-n", "--format", format, "--local-size", size, "--topology"])
            .arg(format!("fixtures/topologies/{xml}"))
            .arg(shape),
        SUCCESS,
    );
    String::from_utf8(out.stdout).unwrap()
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
    let dir = crate::common::scratch().join("svg");
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

/// GPUs and NICs hang under the NUMA node hwloc puts them in (hwloc-calc's `-I numa
/// pci=BUSID`, the independent oracle), each with the rank that got it: on the SNC4
/// Sapphire Rapids the H100s sit in NUMA nodes 1, 3, 5 and 7, its six NICs in 0, 1, 3, 5.
#[test]
fn map_lists_devices_under_their_numa_node() {
    if shared().is_none() || !require_tool("hwloc-calc", "the device locality oracle") {
        return;
    }
    let xml = "spr8480-2s-112c-smt2-snc4-4h100.xml";
    let text = picture(xml, "shapes/gpu-slots.yaml", "4", "map");
    let path = topology(&shared().unwrap(), xml);
    let mut numa = None;
    let mut seen = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"numa") {
            numa = Some(words[1].trim_start_matches("L#").to_string());
        }
        if matches!(words.first(), Some(&"GPU") | Some(&"NIC")) {
            let busid = words[2];
            let out = std::process::Command::new("hwloc-calc")
                .arg("-i")
                .arg(&path)
                .args(["-I", "numa", &format!("pci={busid}")])
                .output()
                .unwrap();
            let want = String::from_utf8_lossy(&out.stdout).trim().to_string();
            assert_eq!(numa.as_deref(), Some(want.as_str()), "{line}\n{text}");
            seen += 1;
        }
    }
    assert_eq!(seen, 10, "4 GPUs and 6 NICs\n{text}");
    // Each task's GPU is the one in the NUMA node of its cores (gpu-slots), so each
    // GPU line names the rank drawn in the cores just above it.
    for (gpu, rank) in [("GPU 1 ", 0), ("GPU 0 ", 1), ("GPU 3 ", 2), ("GPU 2 ", 3)] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(gpu))
            .unwrap();
        assert!(line.ends_with(&format!(": rank {rank}")), "{line}");
    }
}

/// Reserved PUs (`r`) and another job's (`x`, a topology string's lowercase units) are
/// not drawn as free, and the legend line says what the marks mean. By hand: on
/// NSXCCccSXCCCC cores 2-3 are another job's; `-bunit C -bamount 1` gives ranks 0-1 cores
/// 0-1; with `--reserve first-core-per-socket` on "pack:2 core:4 pu:2" the first core of
/// each package is `r r`.
#[test]
fn map_marks_reserved_and_occupied() {
    let run_map = |args: &[&str]| {
        let out = run(binder().args(["-n", "--format", "map"]).args(args), SUCCESS);
        String::from_utf8(out.stdout).unwrap()
    };
    let ge = run_map(&[
        "--ge-topology",
        "NSXCCccSXCCCC",
        "--local-size",
        "2",
        "--ge",
        "-bunit C -bamount 1",
    ]);
    assert!(ge.contains("package L#0  [0][1][x][x]\n"), "{ge}");
    assert!(ge.contains("package L#1  [.][.][.][.]\n"), "{ge}");
    assert!(
        ge.contains("x = another job's") && !ge.contains("r = reserved"),
        "{ge}"
    );
    let reserved = run_map(&[
        "--synthetic",
        "pack:2 core:4 pu:2",
        "--reserve",
        "first-core-per-socket",
        "--local-size",
        "1",
        "shapes/cores-packed.yaml",
    ]);
    assert!(
        reserved.contains("package L#0  [r r][0 0][0 0][0 0]\n"),
        "{reserved}"
    );
    assert!(
        reserved.contains("package L#1  [r r][0 0][0 0][0 0]\n"),
        "{reserved}"
    );
    assert!(reserved.contains("r = reserved"), "{reserved}");
}

/// Issue 36's picture fixes, each against an independent source:
/// - a POWER7 NUMA node holds 8 packages (hwloc-calc lists them), and the map draws each
///   NUMA node with its packages inside (it drew packages only);
/// - every GPU and NIC box of the SVG shows its PCI bus id as text, as the README says;
/// - a 2-socket Genoa (24 L3s) wraps into a page instead of one 5,460-pixel strip;
/// - with 13 ranks, no legend entry's text reaches the next entry's swatch (12 px
///   sans-serif glyphs average about 0.55 em, 6.6 px).
#[test]
fn pictures_nest_numa_show_bus_ids_wrap_and_keep_the_legend_apart() {
    let Some(shared) = shared() else { return };
    let power7 = "power7-64pkg-256pu-smt4-8numa.xml";
    let map = picture(power7, "shapes/numa-per-task.yaml", "8", "map");
    if require_tool("hwloc-calc", "POWER7's NUMA nodes") {
        let xml = topology(&shared, power7);
        for numa in 0..8 {
            let packages = crate::common::hwloc_calc_lines(
                &xml,
                &["--intersect", "package", &format!("numa:{numa}")],
                &[],
            );
            let header = format!("\nnuma L#{numa} (");
            let at = map.find(&header).unwrap_or_else(|| panic!("{header}{map}"));
            let below: Vec<&str> = map[at + 1..].lines().skip(1).take(8).collect();
            let want: Vec<String> = packages[0]
                .split(',')
                .map(|p| format!("  package L#{p}  "))
                .collect();
            assert_eq!(want.len(), 8, "{packages:?}");
            for (line, want) in below.iter().zip(&want) {
                assert!(line.starts_with(want.as_str()), "{line} / {want}");
            }
        }
    }
    let svg = picture(
        "aws-g4dn-metal-2s-48c-smt2-8t4.xml",
        "shapes/gpu-local.yaml",
        "8",
        "svg",
    );
    for busid in ["0000:18:00.0", "0000:f5:00.0", "0000:c6:00.0"] {
        assert!(svg.contains(&format!(">{busid}</text>")), "{busid}");
    }
    let svg = picture(
        "epyc9654-genoa-2s-192c-smt2.xml",
        "shapes/l3-per-task.yaml",
        "13",
        "svg",
    );
    let width: u32 = svg
        .split("width=\"")
        .nth(1)
        .and_then(|w| w.split('"').next())
        .and_then(|w| w.parse().ok())
        .unwrap();
    assert!(width <= 1800, "{width} px wide");
    // Legend entries: `<rect x=X ...>…<text …>MEANING</text></g>` after the tree; those on
    // one row share a `y`.
    let mut entries: Vec<(u32, u32, usize)> = Vec::new();
    for line in svg
        .lines()
        .filter(|l| l.contains("font-size=\"12\">") && l.starts_with("<g><rect x="))
    {
        let num = |key: &str| -> u32 {
            line.split(key)
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap()
                .parse()
                .unwrap()
        };
        let meaning = line
            .rsplit("\">")
            .next()
            .unwrap()
            .trim_end_matches("</text></g>");
        entries.push((num(" y=\""), num("<rect x=\""), meaning.chars().count()));
    }
    assert!(entries.len() >= 14, "{} legend entries", entries.len());
    for pair in entries.windows(2) {
        let ((y0, x0, chars), (y1, x1, _)) = (pair[0], pair[1]);
        if y0 == y1 {
            let text_end = x0 + 34 + 6 + (chars as f64 * 6.6) as u32;
            assert!(
                text_end < x1,
                "legend entry at {x0} runs to {text_end}, next at {x1}"
            );
        }
    }
}
