//! Intel MPI's pinning variables (`I_MPI_PIN`, `I_MPI_PIN_DOMAIN`, `I_MPI_PIN_ORDER`,
//! `I_MPI_PIN_PROCESSOR_LIST`), given as `NAME=VALUE` words, as Intel MPI's reference
//! documents them ("Process Pinning", "Interoperability with OpenMP API").

use super::super::{ConvertError, Want};
use super::{count, refuse};

/// Intel MPI (`I_MPI_PIN_*=…` words, `OMP_NUM_THREADS=k` for the `omp` domain):
///
/// - `I_MPI_PIN=off` (`no`, `0`, `disable`): no pinning (`bind: none`);
/// - `I_MPI_PIN_PROCESSOR_LIST=0,2,4-5` (the kernel's CPU numbers): rank r on the r-th
///   CPU, as a `ranks:` rule each;
/// - `I_MPI_PIN_DOMAIN=core|socket|numa|cache1|cache2|cache3|cache|node`: each rank one
///   domain of that type; `N` or `N:compact`: N consecutive logical CPUs (PUs); `omp`: as
///   many as `OMP_NUM_THREADS`; `auto`: the node's CPUs over the ranks; `[m0,m1]`: each
///   rank its hex mask;
/// - `I_MPI_PIN_ORDER=compact|range` (the default: domain after domain), `scatter` (round
///   robin over the packages), `spread` and `bunch` (each package its share, ranks close
///   together: `pattern: balanced`).
pub(in crate::convert) fn impi(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let mut vars = std::collections::BTreeMap::new();
    for w in words {
        let Some((name, value)) = w.split_once('=') else {
            return refuse(format!("`{w}`: give Intel MPI's variables as NAME=VALUE (I_MPI_PIN_DOMAIN=core, I_MPI_PIN_ORDER=scatter, I_MPI_PIN_PROCESSOR_LIST=0,2)"));
        };
        let known = [
            "I_MPI_PIN",
            "I_MPI_PIN_DOMAIN",
            "I_MPI_PIN_ORDER",
            "I_MPI_PIN_PROCESSOR_LIST",
            "I_MPI_PIN_PROCS",
            "I_MPI_PIN_CELL",
            "OMP_NUM_THREADS",
        ];
        if !known.contains(&name) {
            return refuse(format!(
                "`{name}` is not an Intel MPI pinning variable binder converts (it reads {})",
                known.join(", ")
            ));
        }
        vars.insert(name, value.trim().to_owned());
    }
    let var = |name: &str| vars.get(name).map(String::as_str);
    if var("I_MPI_PIN").is_some_and(|v| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "off" | "no" | "0" | "disable" | "false"
        )
    }) {
        return Ok(Want {
            bind: Some("none"),
            ..Want::default()
        });
    }
    if let Some(cell) = var("I_MPI_PIN_CELL") {
        notes.push(format!("`I_MPI_PIN_CELL={cell}` left out: the unit comes from the domain (`unit: core` for core domains, `pu` for CPU counts)"));
    }
    let domain = var("I_MPI_PIN_DOMAIN");
    let list = var("I_MPI_PIN_PROCESSOR_LIST").or(var("I_MPI_PIN_PROCS"));
    if let (Some(list), None) = (list, domain) {
        return processor_list(list, notes);
    }
    if list.is_some() {
        notes.push("`I_MPI_PIN_PROCESSOR_LIST` left out: Intel MPI ignores it when I_MPI_PIN_DOMAIN is set".into());
    }
    let mut want = Want::default();
    match var("I_MPI_PIN_ORDER").map(str::to_ascii_lowercase).as_deref() {
        None | Some("compact" | "range") => {}
        Some("scatter") => want.over = Some("socket"),
        Some("spread" | "bunch") => {
            want.over = Some("socket");
            want.balanced = true;
        }
        Some(other) => return refuse(format!("`I_MPI_PIN_ORDER={other}`: Intel MPI orders by range, scatter, compact, spread or bunch")),
    }
    let Some(domain) = domain else {
        // Intel MPI's default: `auto:compact` for MPI+OpenMP, one core each otherwise;
        // without I_MPI_PIN_DOMAIN it pins each rank to one CPU of the node's list.
        notes.push("no I_MPI_PIN_DOMAIN: Intel MPI pins each rank to one core (its default processor list), as converted".into());
        return Ok(want);
    };
    let d = domain.to_ascii_lowercase();
    let (size, layout) = d.split_once(':').unwrap_or((d.as_str(), "compact"));
    match size {
        "core" => {}
        "socket" | "sock" => container(&mut want, "socket"),
        "numa" => container(&mut want, "numa"),
        "cache3" | "cache" => container(&mut want, "l3cache"),
        "cache2" => container(&mut want, "l2cache"),
        "cache1" => {
            notes.push("`cache1`: one L1 per core, converted as one core per rank".into());
        }
        "node" => {
            want.bind = Some("none");
            notes.push("`I_MPI_PIN_DOMAIN=node`: each rank may run on the whole node, so the shape binds nothing".into());
            return Ok(want);
        }
        "auto" => {
            // The node's CPUs divided among the ranks, consecutive.
            want.unit = "pu";
            want.fixed = Some(("pu", "all".to_owned()));
            want.over = None;
        }
        "omp" => {
            let Some(n) = var("OMP_NUM_THREADS") else {
                return refuse("`I_MPI_PIN_DOMAIN=omp` sizes each domain by OMP_NUM_THREADS: give it too (OMP_NUM_THREADS=4), or a size (I_MPI_PIN_DOMAIN=4)");
            };
            want.unit = "pu";
            want.count = count("OMP_NUM_THREADS", n)?;
        }
        masks if masks.starts_with('[') && masks.ends_with(']') => {
            return mask_list(&masks[1..masks.len() - 1], notes);
        }
        n => {
            let Ok(n) = count("I_MPI_PIN_DOMAIN", n) else {
                return refuse(format!("`I_MPI_PIN_DOMAIN={domain}`: binder converts core, socket, numa, cache1-3, node, auto, omp, N[:compact] and [masks]"));
            };
            want.unit = "pu";
            want.count = n;
        }
    }
    match layout {
        "compact" => {}
        "platform" | "scatter" => {
            return refuse(format!("`I_MPI_PIN_DOMAIN={domain}`: a domain of CPUs far apart ({layout}) is not a shape's block of units; use `{size}:compact`, or a domain type (core, socket, numa)"));
        }
        other => return refuse(format!("`I_MPI_PIN_DOMAIN={domain}`: the layout `{other}` is not Intel MPI's (compact, scatter, platform)")),
    }
    Ok(want)
}

/// Each rank one whole container domain (a slot per container, bound to all of it),
/// container after container (I_MPI_PIN_ORDER orders cores and CPU counts only here).
fn container(want: &mut Want, kind: &'static str) {
    want.bind = Some(kind);
    want.over = Some(kind);
    want.per_container = Some(1);
    want.balanced = false;
}

/// `I_MPI_PIN_PROCESSOR_LIST`: rank r on the r-th CPU (the kernel's numbers).
fn processor_list(list: &str, notes: &mut Vec<String>) -> Result<Want, ConvertError> {
    let cpus = binder_core::cpulist::parse_ranges(list, 65_535, super::super::MAX_WORDS)
        .map_err(|_| {
            ConvertError(format!("`I_MPI_PIN_PROCESSOR_LIST={list}`: binder converts a list of CPU numbers (`0,2,4-7`); Intel MPI's allcores, allsocks and grain/shift forms are not a shape's rank rules: use I_MPI_PIN_DOMAIN"))
        })?;
    if cpus.repeated {
        return refuse(format!("`I_MPI_PIN_PROCESSOR_LIST={list}` names a CPU twice; a shape's rank rules give each rank CPUs of its own"));
    }
    notes.push(format!("ranks past the list's {} share the rest of the node out among them; Intel MPI gives them the list again from its start", cpus.values.len()));
    Ok(Want {
        unit: "pu",
        per_rank: cpus.values.iter().map(|c| ("pu", c.to_string())).collect(),
        ..Want::default()
    })
}

/// `I_MPI_PIN_DOMAIN=[m0,m1,…]`: rank r on mask r's CPUs (hex, bit i is CPU i).
fn mask_list(masks: &str, notes: &mut Vec<String>) -> Result<Want, ConvertError> {
    let mut per_rank = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for m in masks.split(',') {
        let Some(cpus) =
            binder_core::cpulist::parse_hex_mask(m.trim(), 16_384).filter(|c| !c.is_empty())
        else {
            return refuse(format!(
                "`I_MPI_PIN_DOMAIN=[{masks}]`: `{m}` is not a hex mask of at least one CPU"
            ));
        };
        if cpus.iter().any(|c| !seen.insert(*c)) {
            return refuse(format!("`I_MPI_PIN_DOMAIN=[{masks}]` gives a CPU to two ranks; a shape's rank rules give each rank CPUs of its own"));
        }
        if per_rank.len() >= super::super::MAX_WORDS {
            return refuse("`I_MPI_PIN_DOMAIN=[…]` for more ranks than binder converts");
        }
        per_rank.push(("pu", binder_core::cpulist::cpu_list(&cpus)));
    }
    notes.push(format!("ranks past the {} masks share the rest of the node out among them; Intel MPI gives them the masks again from the first", per_rank.len()));
    Ok(Want {
        unit: "pu",
        per_rank,
        ..Want::default()
    })
}
