//! `--format svg`: the node as lstopo draws it (nested boxes, lstopo's colours for
//! packages, NUMA nodes, caches and cores), each PU filled with its rank's colour and
//! labelled with the rank (reserved and other jobs' PUs greyed, `r` and `x`), GPUs and
//! NICs as boxes at the foot of the package or NUMA node they hang off, coloured as the
//! rank that got them, a legend, and a title wrapped to the picture's width. Pure text;
//! `rsvg-convert` renders it in the tests.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::map::{Device, Node, Pu};

/// PU box size and the gaps around boxes, in SVG units (pixels).
const PU_W: u32 = 34;
const PU_H: u32 = 22;
const PAD: u32 = 4;
const LABEL_H: u32 = 16;
/// A GPU or NIC box: three lines (name and who got it, the PCI bus id, the model).
const DEV_W: u32 = 168;
const DEV_H: u32 = 46;
/// Characters of a model name that fit a device box at font size 10.
const DEV_CHARS: usize = 28;
/// A generous advance of a bold 13 px sans-serif character, for wrapping the title.
const TITLE_CHAR_W: u32 = 9;
/// Device boxes a row holds at least (more when the children are wider).
const DEV_PER_ROW: u32 = 4;
/// The width a box's children are laid out to fit before they wrap into more rows, so a
/// big node (a 2-socket Genoa: 24 L3s) is a page, not a 5,000-pixel strip.
const FIT_W: u32 = 1600;
/// A generous advance of a 12 px sans-serif character, for sizing legend entries.
const CHAR_W: u32 = 7;
/// Fills for PUs no task may get: reserved, another job's.
const RESERVED: &str = "#7f7f7f";
const OCCUPIED: &str = "#4d4d4d";

/// Rank colours (cycled): light enough for black text, far apart in hue.
const FILLS: [&str; 12] = [
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
    "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
];

/// The size of a drawn node: its label, its children's grid, and its devices in a row
/// below them.
fn size(node: &Node) -> (u32, u32) {
    if node.pu.is_some() {
        return (PU_W, PU_H);
    }
    let (cols, rows, cw, ch) = grid(node);
    let label = if node.is_core() { 0 } else { LABEL_H };
    let inner = cols * (cw + PAD) + PAD;
    let (dw, dh) = devices_size(&node.devices, inner);
    (inner.max(dw), label + rows * (ch + PAD) + PAD + dh)
}

/// How many device boxes a row holds under children `inner` wide.
fn devices_per_row(inner: u32) -> u32 {
    (inner / (DEV_W + PAD)).max(DEV_PER_ROW)
}

/// The rows of device boxes under a node's children (nothing without devices).
fn devices_size(devices: &[Device], inner: u32) -> (u32, u32) {
    if devices.is_empty() {
        return (0, 0);
    }
    let n = devices.len() as u32;
    let per_row = devices_per_row(inner).min(n);
    let rows = n.div_ceil(per_row);
    (per_row * (DEV_W + PAD) + PAD, rows * (DEV_H + PAD))
}

/// Columns, rows and the cell size of a node's children: a core's PUs in a row, eight
/// cores a row, other containers in a near-square grid.
fn grid(node: &Node) -> (u32, u32, u32, u32) {
    let n = node.children.len().max(1) as u32;
    let cols = if node.is_core() {
        n
    } else if node.children.iter().all(Node::is_core) {
        n.min(8)
    } else {
        (f64::from(n).sqrt().ceil() as u32).max(1)
    };
    let (cw, ch) = node
        .children
        .iter()
        .map(size)
        .fold((0, 0), |(w, h), (a, b)| (w.max(a), h.max(b)));
    // Containers wrap to fit FIT_W (a core's PUs never do).
    let cols = if node.is_core() {
        cols
    } else {
        cols.min((FIT_W / (cw + PAD)).max(1))
    };
    let rows = n.div_ceil(cols);
    (cols, rows, cw, ch)
}

/// Escapes text for SVG.
fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// lstopo's fill for a box by its label's type.
fn fill(label: &str) -> &'static str {
    match label.split(' ').next().unwrap_or("") {
        "package" => "#dedede",
        "numa" => "#efdfde",
        "l3cache" => "#ffffff",
        "core" => "#bebebe",
        _ => "#f5f5f5",
    }
}

/// A PU's fill, text colour, label and tooltip.
fn pu_look(os: usize, state: Pu) -> (&'static str, &'static str, String, String) {
    match state {
        Pu::Rank(r) => (
            FILLS[r % FILLS.len()],
            "black",
            r.to_string(),
            format!("PU P#{os}: rank {r}"),
        ),
        Pu::Reserved => (
            RESERVED,
            "white",
            "r".into(),
            format!("PU P#{os}: reserved"),
        ),
        Pu::Occupied => (
            OCCUPIED,
            "white",
            "x".into(),
            format!("PU P#{os}: another job's"),
        ),
        Pu::Free => (
            "#ffffff",
            "black",
            "·".into(),
            format!("PU P#{os}: no task"),
        ),
    }
}

/// A device's fill: its first rank's colour, else white.
fn device_fill(device: &Device) -> &'static str {
    device
        .ranks
        .first()
        .map_or("#ffffff", |&r| FILLS[r % FILLS.len()])
}

fn draw_device(device: &Device, x: u32, y: u32, out: &mut String) {
    let who = device.holders();
    let model: String = if device.model.chars().count() > DEV_CHARS {
        let cut: String = device.model.chars().take(DEV_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        device.model.clone()
    };
    let _ = writeln!(
        out,
        r#"<g><title>{} {} {}: {who}</title><rect x="{x}" y="{y}" width="{DEV_W}" height="{DEV_H}" rx="4" fill="{}" stroke="black"/><text x="{}" y="{}" font-size="11" font-weight="bold">{} ({who})</text><text x="{}" y="{}" font-size="10" font-family="monospace">{}</text><text x="{}" y="{}" font-size="10">{}</text></g>"#,
        esc(&device.label),
        esc(&device.busid),
        esc(&device.model),
        device_fill(device),
        x + PAD,
        y + 14,
        esc(&device.label),
        x + PAD,
        y + 27,
        esc(&device.busid),
        x + PAD,
        y + 40,
        esc(&model),
    );
}

fn draw(node: &Node, x: u32, y: u32, out: &mut String) {
    let (w, h) = size(node);
    if let Some((os, state)) = node.pu {
        let (colour, ink, text, title) = pu_look(os, state);
        let _ = write!(
            out,
            r#"<g><title>{title}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{colour}" stroke="black"/><text x="{}" y="{}" text-anchor="middle" font-size="12" fill="{ink}">{text}</text></g>"#,
            x + w / 2,
            y + h / 2 + 4
        );
        out.push('\n');
        return;
    }
    let _ = writeln!(
        out,
        r#"<g><title>{}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{}" stroke="black"/></g>"#,
        esc(&node.label),
        fill(&node.label)
    );
    let core = node.is_core();
    if !core {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" font-size="12">{}</text>"#,
            x + PAD,
            y + LABEL_H - 3,
            esc(&node.label)
        );
    }
    let (cols, rows, cw, ch) = grid(node);
    let top = y + if core { 0 } else { LABEL_H } + PAD;
    for (i, child) in node.children.iter().enumerate() {
        let (col, row) = (i as u32 % cols, i as u32 / cols);
        draw(
            child,
            x + PAD + col * (cw + PAD),
            top + row * (ch + PAD),
            out,
        );
    }
    let below = top + rows * (ch + PAD);
    let per_row = devices_per_row(cols * (cw + PAD) + PAD);
    for (i, device) in node.devices.iter().enumerate() {
        let (col, row) = (i as u32 % per_row, i as u32 / per_row);
        draw_device(
            device,
            x + PAD + col * (DEV_W + PAD),
            below + row * (DEV_H + PAD),
            out,
        );
    }
}

/// `text` broken at spaces into lines of at most `chars` characters (a longer word, such
/// as a path, is cut into pieces of `chars`).
fn wrap(text: &str, chars: usize) -> Vec<String> {
    let chars = chars.max(1);
    let mut lines: Vec<String> = Vec::new();
    let words = text.split(' ').flat_map(|word| {
        let letters: Vec<char> = word.chars().collect();
        letters
            .chunks(chars)
            .map(|c| c.iter().collect::<String>())
            .collect::<Vec<_>>()
    });
    for word in words {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= chars => {
                line.push(' ');
                line.push_str(&word);
            }
            _ => lines.push(word),
        }
    }
    lines
}

/// The legend's entries: a swatch's fill, its text colour and mark, and what it means.
fn legend_entries(tasks: usize, root: &Node) -> Vec<(&'static str, &'static str, String, String)> {
    let mut entries: Vec<_> = (0..tasks.min(FILLS.len()))
        .map(|r| (FILLS[r], "black", r.to_string(), format!("rank {r}")))
        .collect();
    if tasks > FILLS.len() {
        entries.push((
            "#ffffff",
            "black",
            "…".into(),
            format!("colours repeat every {} ranks", FILLS.len()),
        ));
    }
    if root.any_pu(Pu::Reserved) {
        entries.push((RESERVED, "white", "r".into(), "reserved".into()));
    }
    if root.any_pu(Pu::Occupied) {
        entries.push((OCCUPIED, "white", "x".into(), "another job's".into()));
    }
    entries.push(("#ffffff", "black", "·".into(), "no task".into()));
    entries
}

/// Writes the SVG of `root` for `tasks` ranks: the title naming the plan (wrapped to the
/// picture's width), the tree, and the legend below it.
pub fn render(root: &Node, tasks: usize, title: &str, out: &mut impl Write) -> io::Result<()> {
    let (tree_w, tree_h) = size(root);
    let entries = legend_entries(tasks, root);
    // Legend: swatches of PU size with their meaning, several to a row, each entry as
    // wide as the longest meaning, so none runs into the next.
    let longest = entries
        .iter()
        .map(|(_, _, _, meaning)| meaning.chars().count() as u32)
        .max()
        .unwrap_or(0);
    let entry_w = PU_W + 6 + longest * CHAR_W + 12;
    // At least 450 px, so a small node's title stays readable.
    let w = tree_w.max(entry_w * 3).max(450);
    let per_row = (w / entry_w).max(1) as usize;
    let legend_rows = entries.len().div_ceil(per_row) as u32;
    let lines = wrap(title, (w / TITLE_CHAR_W).max(30) as usize);
    let title_h = lines.len() as u32 * 16 + 4;
    let h = title_h + tree_h + PAD + legend_rows * (PU_H + PAD) + PAD;
    let mut body = String::new();
    for (i, line) in lines.iter().enumerate() {
        let _ = writeln!(
            body,
            r#"<text x="0" y="{}" font-size="13" font-weight="bold">{}</text>"#,
            14 + i as u32 * 16,
            esc(line)
        );
    }
    draw(root, 0, title_h, &mut body);
    let top = title_h + tree_h + PAD;
    for (i, (fill, ink, mark, meaning)) in entries.iter().enumerate() {
        let x = (i % per_row) as u32 * entry_w;
        let y = top + (i / per_row) as u32 * (PU_H + PAD);
        let _ = writeln!(
            body,
            r#"<g><rect x="{x}" y="{y}" width="{PU_W}" height="{PU_H}" fill="{fill}" stroke="black"/><text x="{}" y="{}" text-anchor="middle" font-size="12" fill="{ink}">{}</text><text x="{}" y="{}" font-size="12">{}</text></g>"#,
            x + PU_W / 2,
            y + PU_H / 2 + 4,
            esc(mark),
            x + PU_W + 6,
            y + PU_H / 2 + 4,
            esc(meaning)
        );
    }
    write!(
        out,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif">
<rect x="0" y="0" width="{w}" height="{h}" fill="white"/>
{body}</svg>
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pu(os: usize, state: Pu) -> Node {
        Node {
            label: format!("pu P#{os}"),
            children: Vec::new(),
            pu: Some((os, state)),
            devices: Vec::new(),
        }
    }

    fn core(a: usize, b: usize, state: Pu) -> Node {
        Node {
            label: "core L#0".into(),
            children: vec![pu(a, Pu::Rank(0)), pu(b, state)],
            pu: None,
            devices: Vec::new(),
        }
    }

    fn gpu(number: usize, ranks: Vec<usize>) -> Device {
        Device {
            label: format!("GPU {number}"),
            model: "NVIDIA H100 80GB HBM3 with a much longer name".into(),
            busid: format!("0000:{number:02x}:00.0"),
            ranks,
        }
    }

    // By hand: a core of two PUs is 2·34 + 3·4 = 80 wide and 22 + 2·4 = 30 high; a
    // package of two such cores adds a label row: 2·80 + 3·4 = 172 by 16 + 30 + 8 = 54.
    // With one GPU under it, the row of devices is 168 + 2·4 = 176 wide (wider than the
    // cores) and 46 + 4 high (three lines: name, bus id, model): 176 by 54 + 50 = 104.
    #[test]
    fn sizes_by_hand() {
        assert_eq!(size(&core(0, 1, Pu::Free)), (80, 30));
        let mut package = Node {
            label: "package L#0".into(),
            children: vec![core(0, 1, Pu::Free), core(2, 3, Pu::Free)],
            pu: None,
            devices: Vec::new(),
        };
        assert_eq!(size(&package), (172, 54));
        package.devices.push(gpu(1, vec![0]));
        assert_eq!(size(&package), (176, 104));
    }

    #[test]
    fn pus_devices_legend_and_title() {
        let package = Node {
            label: "package L#0".into(),
            children: vec![core(0, 1, Pu::Reserved), core(2, 3, Pu::Occupied)],
            pu: None,
            devices: vec![gpu(1, vec![0]), gpu(2, Vec::new())],
        };
        let title = "binder --dry-run a <b> on XML `a-very-long-path/of/a/topology/file.xml`: 2 tasks, unit core (implicit), pattern packed";
        let mut out = Vec::new();
        render(&package, 1, title, &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("a &lt;b&gt;"));
        assert_eq!(svg.matches("<title>PU P#").count(), 4);
        assert!(svg.contains("<title>PU P#1: reserved</title>"));
        assert!(
            svg.contains("<title>PU P#3: another job&apos;s</title>")
                || svg.contains("<title>PU P#3: another job's</title>")
        );
        // The GPU rank 0 got has rank 0's fill; the other is white and says so.
        assert!(svg.contains(&format!(
            "fill=\"{}\" stroke=\"black\"/><text x=\"{}\" y=\"",
            FILLS[0],
            4 + PAD
        )));
        assert!(svg.contains("GPU 1 (rank 0)") && svg.contains("GPU 2 (no task)"));
        // The model is cut to the box, whole in the tooltip.
        assert!(
            svg.contains("NVIDIA H100 80GB HBM3 with …")
                && svg.contains("HBM3 with a much longer name: rank 0</title>")
        );
        // The legend names rank 0, reserved, another job's and no task.
        for entry in [">rank 0<", ">reserved<", ">another job's<", ">no task<"] {
            assert!(svg.contains(entry), "legend lacks {entry}");
        }
        // The title is wrapped: the picture is 450 wide (the legend's minimum), 50 chars a
        // line, so the 118-character title takes three lines.
        let lines: Vec<&str> = svg
            .lines()
            .filter(|l| l.contains(r#"font-size="13" font-weight="bold""#))
            .collect();
        assert_eq!(lines.len(), 3, "{svg}");
    }

    #[test]
    fn wrap_by_hand() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("aaaaaaa b", 3), vec!["aaa", "aaa", "a b"]);
    }
}
