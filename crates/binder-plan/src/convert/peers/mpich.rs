//! MPICH's Hydra (`mpiexec -bind-to … -map-by …`), as Hydra 5.0's own topology code
//! binds (checked against `mpiexec` of the `mpich` 5.0.2 wheel on the fixtures, which
//! prints each process's mask with `HYDRA_TOPO_DEBUG=1` and an XML as `HWLOC_XMLFILE`).

use super::super::{ConvertError, Want};
use super::{container, count, level, pairs, refuse};

/// Hydra's object names as a shape's types: the PU, the core, or a container.
fn object(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "hwthread" | "pu" => Some("pu"),
        "core" => Some("core"),
        other => container(other),
    }
}

/// Hydra (`mpiexec`, MPICH 4 and 5): `-bind-to OBJ[:N]` binds each process to N objects
/// of type OBJ, `-bind-to user:A,B+C` to the listed CPUs (the kernel's numbers; `+` joins
/// CPUs of one process), `-map-by OBJ` deals processes round robin over OBJ (the binding
/// object by default):
///
/// - no `-bind-to`: Hydra binds nothing (`-map-by` alone too): `bind: none`;
/// - mapped by the binding object: process r on objects r·N … (r+1)·N−1, wrapping round to
///   the first once all have one (Hydra oversubscribes where Open MPI refuses);
/// - mapped by a wider object: round robin over it, each process the next of its
///   binding objects there;
/// - mapped by a narrower one: each process the next core (PU), bound to the object of
///   the binding's type around it;
/// - a `user:` list shorter than the processes leaves the rest unbound.
pub(in crate::convert) fn mpich(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let valued = ["-bind-to", "--bind-to", "-map-by", "--map-by", "-n", "-np"];
    let (mut bind, mut map) = (None, None);
    for (opt, value) in pairs(words, &valued)? {
        match opt.as_str() {
            "-bind-to" | "--bind-to" | "-binding" => bind = Some(value),
            "-map-by" | "--map-by" => map = Some(value),
            "-n" | "-np" => {
                count(&opt, &value)?;
                notes.push(format!(
                    "`{opt} {value}`: binder takes the task count from the launcher"
                ));
            }
            "" => return refuse(format!("`{value}` is no option; give only mpiexec's binding options (the program goes after binder's `--`)")),
            _ => return refuse(format!("`{opt}` is not a Hydra binding option binder converts (it reads -bind-to, -map-by, -n)")),
        }
    }
    let Some(bind) = bind else {
        notes.push(
            "no -bind-to: Hydra binds nothing (`-map-by` alone places nothing either), so the shape leaves tasks where the launcher put them"
                .into(),
        );
        return Ok(Want {
            bind: Some("none"),
            ..Want::default()
        });
    };
    let (what, n) = match bind.split_once(':') {
        Some((what, n)) if !what.eq_ignore_ascii_case("user") => (what, count("-bind-to", n)?),
        _ => (bind.as_str(), 1),
    };
    if what.eq_ignore_ascii_case("none") {
        return Ok(Want {
            bind: Some("none"),
            ..Want::default()
        });
    }
    if let Some(list) = bind
        .strip_prefix("user:")
        .or_else(|| bind.strip_prefix("USER:"))
    {
        return user(list, map.as_deref(), notes);
    }
    let Some(bound) = object(what) else {
        return refuse(format!("`-bind-to {bind}`: binder converts hwthread, core, l2cache, l3cache, numa, socket (package), none and user:LIST"));
    };
    let mapped = match map.as_deref() {
        None => bound,
        Some(m) => object(m).ok_or_else(|| {
            ConvertError(format!(
                "`-map-by {m}`: binder converts hwthread, core, l2cache, l3cache, numa and socket (package)"
            ))
        })?,
    };
    // Hydra wraps round once every object has a process: a shape deals units again.
    let mut want = Want {
        oversubscribe: true,
        ..Want::default()
    };
    notes.push("Hydra deals the objects again from the first once each has a process (Open MPI refuses there): `oversubscribe: true`".into());
    match (level(mapped).cmp(&level(bound)), bound) {
        // By the binding object: the next N of them each.
        (std::cmp::Ordering::Equal, "pu" | "core") => {
            want.unit = bound;
            want.count = n;
        }
        (std::cmp::Ordering::Equal, kind) => {
            if n > 1 {
                return refuse(format!("`-bind-to {bind}` binds each process to {n} {kind}s at once; a shape binds a task to one container: bind to one ({what}), or to cores (`core:K`)"));
            }
            // One slot in each object, bound to all of it; dealt again object by
            // object once each has one (Hydra's wrap, whatever the objects' sizes).
            want.over = Some(kind);
            want.per_container = Some(1);
            want.bind = Some(kind);
        }
        // Round robin over a wider object, the next core (PU) of it each.
        (std::cmp::Ordering::Greater, "pu" | "core") => {
            want.over = Some(mapped);
            want.unit = bound;
            want.count = n;
        }
        (std::cmp::Ordering::Greater, kind) => {
            return refuse(format!("`-bind-to {bind} -map-by {}`: binder converts a mapping wider than the binding for cores and hardware threads; bind to core, or map by {kind}", map.unwrap_or_default()));
        }
        // Round robin over cores (PUs), each bound to the object around its own.
        (std::cmp::Ordering::Less, kind) => {
            if mapped == "pu" && kind == "core" {
                return refuse("`-bind-to core -map-by hwthread` binds the processes on one core's hardware threads to that whole core, so they share it; a shape binds each task to units of its own: bind to hwthread, or map by core");
            }
            if n > 1 {
                return refuse(format!("`-bind-to {bind}` with a narrower -map-by: binder converts one {kind} per process there"));
            }
            want.unit = mapped;
            want.bind = Some(kind);
        }
    }
    Ok(want)
}

/// `-bind-to user:LIST`: process r on the r-th entry's CPUs (the kernel's numbers, `+`
/// joining several), as a `ranks:` rule each; Hydra leaves processes past the list
/// unbound.
fn user(list: &str, map: Option<&str>, notes: &mut Vec<String>) -> Result<Want, ConvertError> {
    if map.is_some() {
        notes.push("`-map-by` left out: a user: list names each process's CPUs".into());
    }
    let mut per_rank = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for entry in list.split(',') {
        let mut cpus = Vec::new();
        for cpu in entry.split('+') {
            let Ok(n) = cpu.trim().parse::<usize>() else {
                return refuse(format!("`-bind-to user:{list}`: `{entry}` is not a CPU number (or several joined by `+`)"));
            };
            if n >= 65_536 || !seen.insert(n) {
                return refuse(format!("`-bind-to user:{list}` names CPU {n} twice (or past 65535); a shape's rank rules give each rank CPUs of its own"));
            }
            cpus.push(n);
        }
        if per_rank.len() >= super::super::MAX_WORDS {
            return refuse("`-bind-to user:` for more processes than binder converts");
        }
        per_rank.push(("pu", binder_core::cpulist::cpu_list(&cpus)));
    }
    notes.push(format!("processes past the list's {} share the rest of the node out among them; Hydra leaves them unbound", per_rank.len()));
    Ok(Want {
        unit: "pu",
        per_rank,
        ..Want::default()
    })
}
