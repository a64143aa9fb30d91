//! Reserved units (OCS `binding_params filter=first_core`, SEMANTICS §12): CPUs no task of
//! any job gets, named once per shape (`options.reserve`) or per node by the site.
//!
//! An entry is `first-core` (the first core of the first socket, OCS's global filter),
//! `first-core-per-socket`, or an hwloc-calc style location by logical index:
//! `core:0`, `package:1.core:0`, `pu:0-1`, `numa:1`, `l3:0` (`socket`, `l2` too).

use super::codec::{Letter, Tree};
use super::GeError;

/// The largest object index a reserved location names: a node has fewer threads
/// (`codec::MAX_TOPOLOGY_THREADS`), so a larger one names nothing.
const MAX_INDEX: usize = super::codec::MAX_TOPOLOGY_THREADS;

/// The site file's contents.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Site {
    /// Entries reserved for every job on the node.
    #[serde(default)]
    pub reserve: Vec<String>,
}

/// The reservations of a site file: its path (for messages) and text, as the caller read
/// them (`binder_core::launch::line::site_text`: binder-plan reads no file). The file is
/// a YAML mapping `reserve: [ENTRY, ...]`, read by every binder on the node.
pub fn parse_site(path: &str, text: &str) -> Result<Vec<String>, GeError> {
    let site: Site = yaml_serde::from_str(text).map_err(|e| GeError::Reserve {
        what: path.to_owned(),
        why: format!("the site file is not `reserve: [ENTRY, ...]`: {e}"),
    })?;
    Ok(site.reserve)
}

/// Puts the site file's reservation (`site`: its path and bytes, from
/// `binder_core::launch::line::site_text`) before the shape's own: the site's comes first, the shape's adds to it
/// (SEMANTICS §12).
pub fn add_site(
    shape: &mut crate::shape::Shape,
    site: Option<&(String, String)>,
) -> Result<(), GeError> {
    if let Some((path, text)) = site {
        let site = parse_site(path, text)?;
        for entry in &site {
            check(entry).map_err(|why| GeError::Reserve {
                what: format!(
                    "{}` of the site file `{}",
                    binder_core::text::clip(entry, binder_core::text::QUOTE_MAX),
                    binder_core::text::printable(path, 120)
                ),
                why,
            })?;
        }
        shape.options.reserve.splice(0..0, site);
    }
    Ok(())
}

/// The letter of a location's type, spelt as in shapes (`package`/`socket`, `l3`, ...).
fn letter_of(word: &str) -> Result<Letter, String> {
    use crate::shape::ObjType;
    match ObjType::parse(word)? {
        ObjType::Package => Ok(Letter::S),
        ObjType::Numa => Ok(Letter::N),
        ObjType::L3 => Ok(Letter::X),
        ObjType::L2 => Ok(Letter::Y),
        ObjType::Core => Ok(Letter::C),
        ObjType::Pu => Ok(Letter::T),
        other => Err(format!(
            "a reservation names package, numa, l3, l2, core or pu, not {other}"
        )),
    }
}

fn same(node: Letter, want: Letter) -> bool {
    node == want || (want == Letter::C && node == Letter::E)
}

/// The threads (tree indices) one entry names. An entry may be a comma list, as
/// `--cpu-bind`-style habits write it: `core:0,core:2`, `core:0,2,4-5` (a bare index or
/// range repeats the previous location's last type: `package:1.core:0,2` is
/// `package:1.core:0` and `package:1.core:2`).
pub(crate) fn resolve(tree: &Tree, entry: &str) -> Result<Vec<usize>, GeError> {
    if !entry.contains(',') {
        return resolve_one(tree, entry);
    }
    let mut out = Vec::new();
    for piece in pieces(entry) {
        for t in resolve_one(tree, &piece)? {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// An entry's locations, a comma list written out (`package:1.core:0,2` is
/// `package:1.core:0` and `package:1.core:2`).
fn pieces(entry: &str) -> Vec<String> {
    let mut pieces: Vec<String> = Vec::new();
    for piece in entry.split(',').map(str::trim) {
        let index = !piece.is_empty() && piece.chars().all(|c| c.is_ascii_digit() || c == '-');
        let prefix = pieces
            .last()
            .and_then(|last| last.rfind(':').map(|at| last[..=at].to_owned()));
        match prefix {
            Some(prefix) if index => pieces.push(format!("{prefix}{piece}")),
            _ => pieces.push(piece.to_owned()),
        }
    }
    pieces
}

/// Whether an entry is written as [`resolve`] reads one, without a node to resolve it on:
/// the site file's entries are checked where the file is known, so that a typo there is
/// one line that names the file (#56), not an entry of unknown origin at every launch.
fn check(entry: &str) -> Result<(), String> {
    for piece in pieces(entry) {
        if matches!(
            piece.trim(),
            "first-core" | "first_core" | "first-core-per-socket"
        ) {
            continue;
        }
        for part in piece.trim().split('.') {
            let (ty, range) = part.split_once(':').ok_or_else(|| {
                "write `first-core`, `first-core-per-socket` or a location like `core:0`, `package:1.core:0`, `pu:0-1`".to_owned()
            })?;
            letter_of(ty)?;
            binder_core::cpulist::parse_ranges(range, MAX_INDEX, MAX_INDEX + 1)
                .ok()
                .filter(|r| !r.values.is_empty())
                .ok_or_else(|| {
                    format!(
                        "`{}` is not an index, a range A-B or a list of them",
                        binder_core::text::clip(range, 16)
                    )
                })?;
        }
    }
    Ok(())
}

/// [`resolve`] for one location.
fn resolve_one(tree: &Tree, entry: &str) -> Result<Vec<usize>, GeError> {
    let bad = |why: String| GeError::Reserve {
        what: binder_core::text::clip(entry, binder_core::text::QUOTE_MAX),
        why,
    };
    let first_core = |scope: Vec<usize>| -> Vec<usize> {
        scope
            .into_iter()
            .filter_map(|s| tree.cores(s).first().copied())
            .flat_map(|c| tree.threads(c))
            .collect()
    };
    let sockets: Vec<usize> = (0..tree.nodes.len())
        .filter(|&n| tree.nodes[n].letter == Letter::S)
        .collect();
    let whole = || -> Vec<usize> { tree.roots.clone() };
    match entry.trim() {
        "first-core" | "first_core" => {
            let scope = sockets.first().copied().unwrap_or(tree.roots[0]);
            return Ok(first_core(vec![scope]));
        }
        "first-core-per-socket" => {
            return Ok(first_core(if sockets.is_empty() {
                vec![tree.roots[0]]
            } else {
                sockets
            }));
        }
        _ => {}
    }
    let mut scope: Vec<usize> = whole();
    let mut top = true;
    for part in entry.trim().split('.') {
        let (ty, range) = part.split_once(':').ok_or_else(|| {
            bad("write `first-core`, `first-core-per-socket` or a location like `core:0`, `package:1.core:0`, `pu:0-1`".into())
        })?;
        let letter = letter_of(ty).map_err(bad)?;
        // The one range-list reader (`cpulist::parse_ranges`): an index, a range A-B, or
        // a list of them (`core:0,2`), each object once.
        let picked = binder_core::cpulist::parse_ranges(range, MAX_INDEX, MAX_INDEX + 1)
            .ok()
            .filter(|r| !r.values.is_empty())
            .ok_or_else(|| {
                bad(format!(
                    "`{}` is not an index, a range A-B or a list of them",
                    binder_core::text::clip(range, 16)
                ))
            })?
            .values;
        // At the top, indexes count over the whole node; after a `.`, inside each object.
        let groups: Vec<Vec<usize>> = if top {
            vec![scope.iter().flat_map(|&s| subtree(tree, s)).collect()]
        } else {
            scope.iter().map(|&s| subtree(tree, s)).collect()
        };
        top = false;
        let mut next = Vec::new();
        for group in groups {
            let inside: Vec<usize> = group
                .into_iter()
                .filter(|&n| same(tree.nodes[n].letter, letter))
                .collect();
            next.extend(
                inside
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| picked.binary_search(i).is_ok())
                    .map(|(_, n)| n),
            );
        }
        if next.is_empty() {
            return Err(bad(format!("there is no {part} on this node")));
        }
        scope = next;
    }
    Ok(scope.into_iter().flat_map(|n| tree.threads(n)).collect())
}

/// `n` and everything under it, in order.
fn subtree(tree: &Tree, n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut stack = vec![n];
    while let Some(m) = stack.pop() {
        out.push(m);
        stack.extend(tree.nodes[m].children.iter().rev());
    }
    out
}

/// Marks every entry's threads taken; returns their OS PU numbers.
pub fn apply(tree: &mut Tree, entries: &[String]) -> Result<Vec<usize>, GeError> {
    let mut pus = Vec::new();
    for entry in entries {
        for t in resolve(tree, entry)? {
            tree.nodes[t].used = true;
            pus.extend(tree.nodes[t].os);
        }
    }
    pus.sort_unstable();
    pus.dedup();
    Ok(pus)
}

/// Marks the threads of the OS PUs `pus` taken (units other jobs hold).
pub fn take(tree: &mut Tree, pus: &[usize]) {
    if pus.is_empty() {
        return;
    }
    let pus: std::collections::HashSet<usize> = pus.iter().copied().collect();
    for node in &mut tree.nodes {
        if node.letter == Letter::T && node.os.is_some_and(|o| pus.contains(&o)) {
            node.used = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_in_the_site_file_names_the_file() {
        let mut shape =
            crate::shape::Shape::from_yaml("resources:\n  - type: core\n", "s.yaml").unwrap();
        let site = |text: &str| Some(("/etc/binder/site.yaml".to_owned(), text.to_owned()));
        let e = add_site(&mut shape, site("reserve: [\"cor:0\"]\n").as_ref())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`cor:0` of the site file `/etc/binder/site.yaml`") && e.contains("`core`"),
            "{e}"
        );
        for bad in ["core", "core:x", "package:0.core:"] {
            let text = format!("reserve: [\"{bad}\"]\n");
            assert!(add_site(&mut shape, site(&text).as_ref()).is_err(), "{bad}");
        }
        // Every form `resolve` takes passes.
        let good =
            "reserve: [\"first-core\", \"core:0,2-3\", \"package:1.core:0,2\", \"pu:0-1\"]\n";
        add_site(&mut shape, site(good).as_ref()).unwrap();
        assert_eq!(shape.options.reserve.len(), 4);
    }

    fn reserved(topo: &str, entries: &[&str]) -> String {
        let mut t = Tree::parse(topo).unwrap();
        apply(
            &mut t,
            &entries.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        t.occupancy_string()
    }

    #[test]
    fn entries() {
        // man-global-filter-first_core: the first core of the first socket.
        assert_eq!(reserved("SCCCCSCCCC", &["first-core"]), "ScCCCSCCCC");
        assert_eq!(
            reserved("SCCCCSCCCC", &["first-core-per-socket"]),
            "ScCCCScCCC"
        );
        assert_eq!(
            reserved("SCTTCTTSCTTCTT", &["package:1.core:1"]),
            "SCTTCTTSCTTctt"
        );
        assert_eq!(reserved("SCTTCTTSCTTCTT", &["pu:0-1"]), "ScttCTTSCTTCTT");
        // Comma lists (#46): locations, and bare indexes after one (a socket whose every
        // core is reserved is written in lowercase too).
        assert_eq!(reserved("SCCCCSCCCC", &["core:0,core:5"]), "ScCCCSCcCC");
        assert_eq!(reserved("SCCCCSCCCC", &["core:0,2-3"]), "ScCccSCCCC");
        assert_eq!(
            reserved("SCTTCTTSCTTCTT", &["package:1.core:0,1"]),
            "SCTTCTTscttctt"
        );
        assert_eq!(reserved("SCCCCSCCCC", &["first-core,core:7"]), "ScCCCSCCCc");
        assert_eq!(reserved("SCTTCTTSCTTCTT", &["core:3"]), "SCTTCTTSCTTctt");
        assert_eq!(reserved("NSXCCNSXCC", &["numa:1"]), "NSXCCnsxcc");
    }

    #[test]
    fn bad_entries() {
        let t = Tree::parse("SCCSCC").unwrap();
        for (e, why) in [
            ("core:9", "no core:9"),
            ("cpu:1", "unknown object type `cpu`"),
            ("group:0", "not group"),
            ("core", "write `first-core`"),
            ("core:2-1", "not an index"),
            ("core:0,,1", "write `first-core`"),
            ("3,core:0", "write `first-core`"),
            ("core:0,core:9", "no core:9"),
        ] {
            let m = resolve(&t, e).unwrap_err().to_string();
            assert!(m.contains(why), "{e}: {m}");
        }
    }
}
