//! `numactl` and `hwloc-bind` locations.

use super::super::{ConvertError, Want};
use super::{container, pairs, refuse};

/// `numactl`: `--cpunodebind`/`-N`, `--membind`/`-m`, `--interleave`/`-i`,
/// `--localalloc`/`-l`, `--preferred`/`-p`, `--physcpubind`/`-C`.
pub(in crate::convert) fn numactl(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let valued = [
        "--cpunodebind",
        "-N",
        "--membind",
        "-m",
        "--interleave",
        "-i",
        "--preferred",
        "-p",
        "--physcpubind",
        "-C",
    ];
    let mut want = Want {
        bind: Some("none"),
        ..Want::default()
    };
    let mut nodes: Option<String> = None;
    for (opt, value) in pairs(words, &valued)? {
        match opt.as_str() {
            "--cpunodebind" | "-N" => {
                check_list(&opt, &value)?;
                want.fixed = Some(("numa", value.clone()));
                want.fixed_os = value != "all";
                want.bind = None;
                notes.push("binder deals the named nodes' cores out among the tasks on the node; numactl gives each process all of them".into());
            }
            "--membind" | "-m" => {
                want.membind = Some("local");
                nodes = Some(node_list(&opt, &value)?);
            }
            "--interleave" | "-i" => {
                want.membind = Some("interleave");
                nodes = Some(node_list(&opt, &value)?);
            }
            "--localalloc" | "-l" => {
                // MPOL_LOCAL: the node the task runs on, falling back when it is full,
                // which is `preferred` on the task's own nodes (not a strict bind).
                want.membind = Some("preferred");
                notes.push("`-l` allocates on the node the task runs on and falls back to others when it is full: converted as `membind: preferred` on the task's own nodes (`local` would be a strict bind)".into());
            }
            "--preferred" | "-p" => {
                want.membind = Some("preferred");
                nodes = Some(node_list(&opt, &value)?);
            }
            "--physcpubind" | "-C" => {
                check_list(&opt, &value)?;
                want.fixed = Some(("pu", value.clone()));
                want.fixed_os = value != "all";
                want.bind = None;
                notes.push("binder deals the named CPUs out among the tasks on the node; numactl gives each process all of them".into());
            }
            "" => {
                return refuse(format!(
                    "`{value}` is no option; give only numactl's options"
                ))
            }
            _ => {
                return refuse(format!(
                "`{opt}` is not a numactl option binder converts (it reads -N, -m, -i, -l, -p, -C)"
            ))
            }
        }
    }
    // Memory on the nodes the CPUs come from is the default (`near`); other nodes, or
    // all, are `memory:`.
    want.memory = nodes.filter(
        |list| !matches!(&want.fixed, Some(("numa", cpus)) if cpus == list && want.fixed_os),
    );
    if want.fixed.is_none() && want.membind.is_some() {
        want.bind = None;
        want.unit = "core";
        notes.push(
            "no --cpunodebind: each task gets one core (binder binds CPUs as well as memory)"
                .into(),
        );
    }
    Ok(want)
}

/// hwloc's location type as a shape's type.
fn location_type(word: &str, value: &str) -> Result<&'static str, ConvertError> {
    Ok(match word.to_ascii_lowercase().as_str() {
        "core" => "core",
        "pu" | "hwthread" => "pu",
        other => match container(other) {
            Some(c) => c,
            None => return refuse(format!("`{value}`: binder converts locations core:, pu:, socket:/package:, numa:, l3:, l2:, die: with logical indexes, and one level inside another (socket:1.core:0-1)")),
        },
    })
}

/// `hwloc-bind [--cpubind] LOCATION... [--membind LOCATION...] -- PROGRAM`: locations
/// of one type with logical indexes (`core:0-3`, `socket:1`, `numa:0`, `pu:0-7`, `l3:0`)
/// or one level inside another (`socket:1.core:0-1`: the socket's first two cores); as
/// hwloc-bind reads them, locations after `--membind` bind memory (to NUMA nodes), those
/// before it or after `--cpubind` bind CPUs.
pub(in crate::convert) fn hwloc_bind(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let mut want = Want::default();
    let mut kind = None;
    let mut indexes = Vec::new();
    let mut within: Option<(&'static str, String)> = None;
    let mut memory_mode = false;
    let mut memory: Vec<String> = Vec::new();
    let mut cpu_words: Vec<String> = Vec::new();
    for (opt, value) in pairs(words, &[])? {
        match opt.as_str() {
            "--membind" => memory_mode = true,
            "--cpubind" => memory_mode = false,
            "--single" | "--strict" | "-v" | "--verbose" => {}
            "--pid" | "--tid" | "--get" | "-e" | "--get-last-cpu-location" => {
                return refuse(format!("`{opt}` reads or changes another process; binder binds the task it starts"))
            }
            "--pi" | "--physical-input" | "--physical" | "-p" => want.fixed_os = true,
            "" if memory_mode => memory.push(value),
            "" => {
                cpu_words.push(value.clone());
                let levels: Vec<&str> = value.split('.').collect();
                if levels.len() > 2 {
                    return refuse(format!("`{value}`: binder converts one level inside another (socket:1.core:0-1), not {}", levels.len()));
                }
                if levels.len() == 2 {
                    if kind.is_some() {
                        return refuse(format!("`{value}`: a location inside another stands alone; give it as the only CPU location"));
                    }
                    let (pk, pi) = levels[0].split_once(':').unwrap_or((levels[0], ""));
                    let (ck, ci) = levels[1].split_once(':').unwrap_or((levels[1], ""));
                    let parent = location_type(pk, &value)?;
                    let child = location_type(ck, &value)?;
                    check_list(&value, pi)?;
                    // The child's indexes count inside the parent; a shape's `index:` is
                    // the node's, so only the parent's first N (`0-3`) convert, as a count.
                    let n = match ci {
                        "" | "all" => "all".to_owned(),
                        "0" => "1".to_owned(),
                        range => match range.strip_prefix("0-").and_then(|e| e.parse::<usize>().ok()) {
                            Some(last) if last < 65_536 => (last + 1).to_string(),
                            _ => return refuse(format!("`{value}`: binder converts the first cores of an object (`{pk}:{pi}.{ck}:0-1`), as a count; a shape's `index:` counts on the whole node, so give the node's logical indexes instead (`hwloc-calc {value} --li -I {ck}`)")),
                        },
                    };
                    within = Some((parent, pi.to_owned()));
                    kind = Some(child);
                    indexes.push(n);
                    continue;
                }
                if within.is_some() {
                    return refuse(format!("`{value}`: a location inside another stands alone; give it as the only CPU location"));
                }
                let (k, index) = value.split_once(':').unwrap_or((value.as_str(), ""));
                let k = location_type(k, &value)?;
                if kind.is_some_and(|was| was != k) {
                    return refuse(format!("`{value}`: CPU locations of one type per shape item; give locations of one type (binder converts one)"));
                }
                kind = Some(k);
                let index = if index.is_empty() || index == "all" { "all" } else { index };
                check_list(&value, index)?;
                indexes.push(index.to_owned());
            }
            _ => return refuse(format!("`{opt}` is not an hwloc-bind option binder converts (it reads LOCATION..., --membind, --cpubind)")),
        }
    }
    if !memory.is_empty() {
        want.membind = Some("local");
        // Memory where the CPUs are is the default (`near`); other NUMA nodes are
        // `memory:`, by the kernel's numbers.
        if memory != cpu_words {
            let mut nodes = Vec::new();
            for m in &memory {
                let Some(list) = m
                    .split_once(':')
                    .filter(|(k, _)| matches!(k.to_ascii_lowercase().as_str(), "numa" | "numanode"))
                    .map(|(_, l)| l)
                else {
                    return refuse(format!("`--membind {m}`: binder converts memory locations of NUMA nodes (`numa:0`), or the CPU location itself (`--cpubind {m} --membind {m}`); give the nodes of {m} as `numa:N` (`hwloc-calc {m} -I numa`)"));
                };
                check_list(m, list)?;
                nodes.push(list.to_owned());
            }
            want.memory = Some(if nodes.iter().any(|n| n == "all" || n.is_empty()) {
                "all".to_owned()
            } else {
                nodes.join(",")
            });
            if !want.fixed_os && want.memory.as_deref() != Some("all") {
                notes.push("`numa:N` is hwloc's logical index and `memory:` takes the kernel's numbers, the same on most nodes (check with `hwloc-calc numa:N --po -I numa`, or give -p)".into());
            }
        }
    }
    let Some(kind) = kind else {
        if memory.is_empty() {
            return refuse(
                "no location: give one, as hwloc-bind takes it (core:0-3, socket:1, numa:0)",
            );
        }
        // Memory only: every task keeps its CPUs.
        want.bind = Some("none");
        return Ok(want);
    };
    let index = if indexes.iter().any(|i| i == "all") {
        "all".to_owned()
    } else {
        indexes.join(",")
    };
    // The objects named by number: the outer ones of a location inside another.
    let (named, list) = match &within {
        Some((parent, pi)) => (*parent, pi.as_str()),
        None => (kind, index.as_str()),
    };
    if want.fixed_os && matches!(list, "all" | "") {
        want.fixed_os = false;
    } else if want.fixed_os && !matches!(named, "pu" | "numa" | "socket") {
        return refuse(format!("`{named}` locations by physical index: the kernel's numbers name one object each only for pu, numa and socket (a core's repeat in every socket); give those, or logical indexes without -p"));
    }
    want.within = within;
    want.fixed = Some((kind, index));
    notes.push("binder deals the location's units out among the tasks on the node; hwloc-bind gives each process all of them".into());
    Ok(want)
}

/// A numactl node list (`1`, `0-1,4`, `all`) as `memory:` takes it; numactl's relative
/// (`+0`), inverted (`!1`) and device (`netdev:`) forms are refused.
fn node_list(opt: &str, value: &str) -> Result<String, ConvertError> {
    if value == "all" {
        return Ok(value.to_owned());
    }
    check_list(opt, value).map_err(|_| {
        ConvertError(format!("`{opt}={value}`: binder converts node numbers (`1`, `0-1,4`) and `all`; numactl's relative, inverted and device forms name nodes a shape cannot"))
    })?;
    Ok(value.to_owned())
}

/// A logical index list (`0-3,8`, `all`) as a shape's `index:` takes it.
fn check_list(what: &str, list: &str) -> Result<(), ConvertError> {
    // Read as the shape will read it, so what is printed parses.
    let ok = list == "all"
        || (list.len() <= 512
            && !list.contains(' ')
            && crate::shape::IndexList::parse(list).is_ok());
    if ok {
        Ok(())
    } else {
        refuse(format!(
            "`{what}`: `{list}` is not an index list (like 0-3,8)"
        ))
    }
}
