//! `--format svg`: the node as lstopo draws it (nested boxes, lstopo's colours for
//! packages, NUMA nodes, caches and cores), each PU filled with its rank's colour and
//! labelled with the rank. Pure text; `rsvg-convert` renders it in the tests.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::map::Node;

/// PU box size and the gaps around boxes, in SVG units (pixels).
const PU_W: u32 = 34;
const PU_H: u32 = 22;
const PAD: u32 = 4;
const LABEL_H: u32 = 16;

/// Rank colours (cycled): light enough for black text, far apart in hue.
const FILLS: [&str; 12] = [
    "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5",
    "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f",
];

/// The size of a drawn node.
fn size(node: &Node) -> (u32, u32) {
    if node.pu.is_some() {
        return (PU_W, PU_H);
    }
    let (cols, rows, cw, ch) = grid(node);
    let label = if node.is_core() { 0 } else { LABEL_H };
    (cols * (cw + PAD) + PAD, label + rows * (ch + PAD) + PAD)
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
    let rows = n.div_ceil(cols);
    let (cw, ch) = node
        .children
        .iter()
        .map(size)
        .fold((0, 0), |(w, h), (a, b)| (w.max(a), h.max(b)));
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

fn draw(node: &Node, x: u32, y: u32, out: &mut String) {
    let (w, h) = size(node);
    if let Some((os, rank)) = node.pu {
        let (colour, text) = match rank {
            Some(r) => (FILLS[r % FILLS.len()], r.to_string()),
            None => ("#ffffff", "·".to_owned()),
        };
        let title = match rank {
            Some(r) => format!("PU P#{os}: rank {r}"),
            None => format!("PU P#{os}: no task"),
        };
        let _ = write!(
            out,
            r#"<g><title>{title}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" fill="{colour}" stroke="black"/><text x="{}" y="{}" text-anchor="middle" font-size="12">{text}</text></g>"#,
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
    let (cols, _, cw, ch) = grid(node);
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
}

/// Writes the SVG of `root` with a title line naming the plan.
pub fn render(root: &Node, title: &str, out: &mut impl Write) -> io::Result<()> {
    let (w, h) = size(root);
    let mut body = String::new();
    draw(root, 0, LABEL_H + 4, &mut body);
    write!(
        out,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{}" viewBox="0 0 {w} {}" font-family="sans-serif">
<text x="0" y="14" font-size="13" font-weight="bold">{}</text>
{body}</svg>
"#,
        h + LABEL_H + 4,
        h + LABEL_H + 4,
        esc(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pu(os: usize, rank: Option<usize>) -> Node {
        Node {
            label: format!("pu P#{os}"),
            children: Vec::new(),
            pu: Some((os, rank)),
        }
    }

    // By hand: a core of two PUs is 2·34 + 3·4 = 80 wide and 22 + 2·4 = 30 high; a
    // package of two such cores adds a label row: 2·80 + 3·4 = 172 by 16 + 30 + 8 = 54.
    #[test]
    fn sizes_by_hand() {
        let core = |a, b| Node {
            label: "core L#0".into(),
            children: vec![pu(a, Some(0)), pu(b, None)],
            pu: None,
        };
        assert_eq!(size(&core(0, 1)), (80, 30));
        let package = Node {
            label: "package L#0".into(),
            children: vec![core(0, 1), core(2, 3)],
            pu: None,
        };
        assert_eq!(size(&package), (172, 54));
        let mut out = Vec::new();
        render(&package, "a <b>", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("a &lt;b&gt;"));
        assert_eq!(svg.matches("<title>PU P#").count(), 4);
        assert!(svg.contains("<title>PU P#1: no task</title>"));
    }
}
