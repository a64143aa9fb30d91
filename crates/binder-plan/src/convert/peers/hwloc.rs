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
            "--localalloc" | "-l" => want.membind = Some("local"),
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

/// `hwloc-bind [--membind] LOCATION... -- PROGRAM`: one location type with logical
/// indexes (`core:0-3`, `socket:1`, `numa:0`, `pu:0-7`, `l3:0`).
pub(in crate::convert) fn hwloc_bind(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let mut want = Want::default();
    let mut kind = None;
    let mut indexes = Vec::new();
    for (opt, value) in pairs(words, &[])? {
        match opt.as_str() {
            "--membind" => want.membind = Some("local"),
            "--cpubind" | "--single" | "--strict" | "-v" | "--verbose" => {}
            "--pid" | "--tid" | "--get" | "-e" | "--get-last-cpu-location" => {
                return refuse(format!("`{opt}` reads or changes another process; binder binds the task it starts"))
            }
            "--pi" | "--physical-input" | "--physical" | "-p" => want.fixed_os = true,
            "" => {
                let (k, index) = value.split_once(':').unwrap_or((value.as_str(), ""));
                let k = match k.to_ascii_lowercase().as_str() {
                    "core" => "core",
                    "pu" | "hwthread" => "pu",
                    other => match container(other) {
                        Some(c) => c,
                        None => return refuse(format!("`{value}`: binder converts locations core:, pu:, socket:/package:, numa:, l3:, l2:, die: with logical indexes")),
                    },
                };
                if kind.is_some_and(|was| was != k) {
                    return refuse(format!("`{value}`: one location type per shape item; give locations of one type (binder converts one)"));
                }
                kind = Some(k);
                let index = if index.is_empty() || index == "all" { "all" } else { index };
                check_list(&value, index)?;
                indexes.push(index.to_owned());
            }
            _ => return refuse(format!("`{opt}` is not an hwloc-bind option binder converts (it reads LOCATION..., --membind, --cpubind)")),
        }
    }
    let Some(kind) = kind else {
        return refuse(
            "no location: give one, as hwloc-bind takes it (core:0-3, socket:1, numa:0)",
        );
    };
    let index = if indexes.iter().any(|i| i == "all") {
        "all".to_owned()
    } else {
        indexes.join(",")
    };
    if want.fixed_os && index == "all" {
        want.fixed_os = false;
    } else if want.fixed_os && !matches!(kind, "pu" | "numa" | "socket") {
        return refuse(format!("`{kind}` locations by physical index: the kernel's numbers name one object each only for pu, numa and socket (a core's repeat in every socket); give those, or logical indexes without -p"));
    }
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
