//! Open MPI 4.1's `mpirun` mapping options, as its mapper places them.

use super::super::{ConvertError, Want};
use super::{container, count, pairs, refuse};

/// Open MPI 4.1's mapping and binding objects, narrowest first: a binding below the
/// mapping object is chosen inside it (Open MPI's "bind downward"), one above it widens
/// the task's binding. `die` sits between a NUMA node and a socket.
fn level(kind: &str) -> u8 {
    match kind {
        "pu" => 0,
        "core" => 1,
        "l2cache" => 2,
        "l3cache" => 3,
        "numa" => 4,
        "die" => 5,
        "socket" => 6,
        _ => 7,
    }
}

/// Open MPI 4.1 (`mpirun`): `--map-by OBJ[:PE=n][:SPAN][:OVERSUBSCRIBE]`, `--map-by
/// ppr:N:OBJ`, `--bind-to OBJ[:overload-allowed]`, `--rank-by OBJ`,
/// `--use-hwthread-cpus`, `--cpus-per-proc n`, `-np n`, placed as its mapper places them
/// (`rmaps_base_map_job.c`, `rmaps_rr_mappers.c`, `rmaps_base_binding.c`):
///
/// - no `--map-by`: by core (by hardware thread with `--use-hwthread-cpus`) for 2
///   processes or fewer, else by NUMA node (hwloc 2 always has one); `--cpus-per-proc`
///   alone maps by NUMA node;
/// - no `--bind-to`: to core (hardware thread) with `PE`, else to the object the user
///   mapped by, else to core for 2 processes or fewer and to the NUMA node above;
/// - a binding below the mapping object takes, inside the rank's object, the least used
///   object of the binding's type in hwloc's order: PUs one after another (a core's
///   siblings first), cores, or whole caches and NUMA nodes dealt again once each has one;
/// - `--use-hwthread-cpus` makes a node's PUs its slots, so a core takes a second rank
///   once every core has one.
pub(in crate::convert) fn ompi(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
    let valued = [
        "--map-by",
        "--bind-to",
        "--rank-by",
        "-np",
        "-n",
        "--np",
        "--cpus-per-proc",
        "--cpus-per-rank",
        // Open MPI 4.1's older spellings of ppr (one dash or two): read whole, not as
        // `-n persocket`.
        "-npersocket",
        "--npersocket",
        "-npernode",
        "--npernode",
    ];
    let mut map = None;
    let mut bind = None;
    let mut rank_by = None;
    let mut hwthreads = false;
    let mut pe = None;
    let mut np = None;
    let mut oversubscribe = false;
    for (opt, value) in pairs(words, &valued)? {
        match opt.as_str() {
            "--map-by" => map = Some(value),
            "--bind-to" => bind = Some(value),
            "--rank-by" => rank_by = Some(value),
            "--use-hwthread-cpus" => hwthreads = true,
            "--cpus-per-proc" | "--cpus-per-rank" => pe = Some(count(&opt, &value)?),
            "-np" | "-n" | "--np" => {
                np = Some(count(&opt, &value)?);
                notes.push(format!(
                    "`{opt} {value}` decides Open MPI's defaults only: binder takes the task count from the launcher"
                ));
            }
            // `-npersocket N` is `--map-by ppr:N:socket` (orterun's own rewrite).
            "-npersocket" | "--npersocket" => {
                map = Some(format!("ppr:{}:socket", count(&opt, &value)?));
            }
            // `-npernode N` / `--pernode` are `ppr:N:node`: N processes on each node, which
            // is the launcher's task count here; on the node Open MPI maps and binds them
            // as it does with no --map-by for that many processes.
            "-npernode" | "--npernode" | "-pernode" | "--pernode" => {
                let n = if opt.ends_with("npernode") {
                    count(&opt, &value)?
                } else {
                    1
                };
                np = Some(np.map_or(n, |np: usize| np.min(n)));
                notes.push(format!(
                    "`{opt}{}` is `--map-by ppr:{n}:node`: {n} process(es) on each node, which binder takes from the launcher; placed on the node as Open MPI places {n} without --map-by",
                    if value.is_empty() { String::new() } else { format!(" {value}") }
                ));
            }
            "--report-bindings" | "--display-map" => {}
            "--oversubscribe" => oversubscribe = true,
            "" => return refuse(format!("`{value}` is no option; give only mpirun's options (the program goes after binder's `--`)")),
            _ => return refuse(format!("`{opt}` is not an Open MPI mapping option binder converts (it reads --map-by, --bind-to, --rank-by, --use-hwthread-cpus, --cpus-per-proc, -np, -npersocket, -npernode, --pernode, --oversubscribe)")),
        }
    }
    let cpu = if hwthreads { "pu" } else { "core" };
    let few = np.is_some_and(|n| n <= 2);
    let user_mapped = map.is_some();
    let map = map.unwrap_or_else(|| {
        if pe.is_some() {
            "numa".into()
        } else if few {
            // By hardware thread where PUs are the slots or the binding, else by core.
            let hw_bind = bind
                .as_deref()
                .is_some_and(|b| b.to_ascii_lowercase().starts_with("hwthread"));
            if hwthreads || hw_bind { "hwthread" } else { "core" }.to_owned()
        } else {
            if np.is_none() {
                notes.push("no --map-by: Open MPI 4.1 maps by NUMA node above 2 processes and by core for 1 or 2 (give `-np 2` to convert that); converted as by NUMA node".into());
            }
            "numa".into()
        }
    });
    let mut parts = map.split(':');
    let object = parts.next().unwrap_or_default().to_ascii_lowercase();
    // The mapping object (`pu`, `core`, `machine` for by slot, or a container), and
    // ppr's count per object.
    let (mapped, per) = if object == "ppr" {
        let n = parts.next().unwrap_or_default();
        let obj = parts.next().unwrap_or_default();
        let Some(kind) = container(obj).or((obj == "core").then_some("core")) else {
            return refuse(format!("`--map-by ppr:{n}:{obj}`: binder converts ppr over socket, numa, l3cache, l2cache or core"));
        };
        let n = count("ppr", n)?;
        if kind == "core" && n != 1 {
            return refuse(format!("`ppr:{n}:core` puts {n} processes on one core: write a shape over `pu` (each task one PU of a core) instead"));
        }
        (kind, Some(n))
    } else {
        let kind = match object.as_str() {
            "core" => "core",
            "hwthread" => "pu",
            "slot" | "node" | "" => "machine",
            _ => match container(&object) {
                Some(kind) => kind,
                None => return refuse(format!("`--map-by {object}`: binder converts core, hwthread, slot, socket/package, numa, l3cache, l2cache and ppr:N:OBJ")),
            },
        };
        (kind, None)
    };
    for modifier in parts {
        let m = modifier.to_ascii_uppercase();
        if let Some(n) = m.strip_prefix("PE=") {
            pe = Some(count("PE", n)?);
        } else if m == "OVERSUBSCRIBE" {
            oversubscribe = true;
        } else if m == "SPAN" || m == "NOOVERSUBSCRIBE" || m == "FILL" {
            notes.push(format!(
                "`:{modifier}` left out: binder deals the node's units as the shape says"
            ));
        } else if object != "ppr" {
            return refuse(format!("`--map-by {map}`: the modifier `{modifier}` is not one binder converts (PE=n, SPAN, OVERSUBSCRIBE)"));
        }
    }
    let (bind, overload) = match &bind {
        Some(b) => {
            let mut words = b.split(':');
            let kind = words.next().unwrap_or_default().to_ascii_lowercase();
            let mut overload = false;
            for q in words {
                match q.to_ascii_lowercase().as_str() {
                    "overload-allowed" => overload = true,
                    "if-supported" | "ordered" | "report" => {}
                    other => return refuse(format!("`--bind-to {b}`: the qualifier `{other}` is not one binder converts (overload-allowed, if-supported)")),
                }
            }
            let kind = match kind.as_str() {
                "hwthread" => "pu",
                "core" => "core",
                "none" => "none",
                "board" => {
                    notes.push("`--bind-to board` binds to the whole node: converted as `bind: none` (the task keeps the job's CPUs)".into());
                    "none"
                }
                other => match container(other) {
                    Some(kind) => kind,
                    None => return refuse(format!("`--bind-to {other}`: binder converts none, hwthread, core, l2cache, l3cache, numa, socket/package")),
                },
            };
            (kind, overload)
        }
        None => {
            let kind = if pe.is_some() {
                cpu
            } else if user_mapped && !matches!(mapped, "machine") && per.is_none() {
                mapped
            } else if few {
                cpu
            } else {
                "numa"
            };
            notes.push(format!(
                "no --bind-to: converted as Open MPI 4.1 binds by default here, to {}",
                match kind {
                    "pu" => "hwthread",
                    other => other,
                }
            ));
            (kind, false)
        }
    };
    let pe = pe.unwrap_or(1);
    if pe > 1 && !matches!(bind, "core" | "pu") {
        return refuse(format!("`PE={pe}` binds each process to {pe} CPUs, which Open MPI refuses with `--bind-to {bind}` (it binds PE to cores or hardware threads): drop --bind-to, or bind to core"));
    }
    if mapped == "pu" && pe > 1 {
        return refuse(format!("`--map-by hwthread:PE={pe}` asks {pe} CPUs of one hardware thread, which Open MPI refuses: map by socket, numa or slot with PE={pe}"));
    }
    if mapped == "core" && pe > 1 && !hwthreads {
        return refuse(format!("`--map-by core:PE={pe}` asks {pe} CPUs of one core, which Open MPI refuses (a core is one CPU without --use-hwthread-cpus): map by socket, numa or slot with PE={pe} (`--map-by slot:PE={pe}` packs {pe} cores a process)"));
    }
    if mapped == "pu" && level(bind) > level("pu") {
        return refuse(format!("`--map-by hwthread --bind-to {bind}` binds each process to the {bind} of its hardware thread, so the processes on a {bind}'s threads share it; a shape binds each task to units of its own: map by {bind} (`--map-by {0} --bind-to {0}`), or bind to hwthread (`pu`)", match bind { "socket" => "socket", "core" => "core", other => other }));
    }
    let mut want = Want {
        oversubscribe: oversubscribe && (overload || bind == "none"),
        ..Want::default()
    };
    if oversubscribe && !want.oversubscribe {
        notes.push("`:OVERSUBSCRIBE` without `--bind-to ...:overload-allowed`: Open MPI refuses to bind two processes to one object, so the shape does not share units either".into());
    }
    match mapped {
        "machine" => {}
        "pu" | "core" if per.is_none() => {}
        kind => {
            want.over = Some(kind);
            want.per_container = per;
        }
    }
    if bind == "none" {
        // Every process keeps the job's CPUs, wherever it was mapped; ppr still caps how
        // many each object takes (Open MPI refuses more, #64), so its slots stay.
        if per.is_none() {
            want.over = None;
            want.per_container = None;
        }
        want.bind = Some("none");
        return finish_ompi(want, rank_by, &object, &map);
    }
    match (mapped, bind) {
        // By hardware thread: each rank the next PU, bound to it or a wider object.
        ("pu", _) => want.unit = "pu",
        // By core with PUs as slots: every core one rank (PE of its PUs) before any
        // takes a second.
        ("core", "pu") if hwthreads => {
            want.over = Some("core");
            want.unit = "pu";
            want.count = pe;
        }
        ("core", "core") if hwthreads && pe > 1 => {
            want.over = Some("core");
            want.unit = "pu";
            want.count = pe;
        }
        ("core", _) => {
            want.one_pu = bind == "pu";
            if level(bind) > level("core") {
                want.bind = Some(bind);
            }
            if hwthreads {
                want.oversubscribe = true;
            }
        }
        // Inside the mapping object (or the node, by slot): the least used object of
        // the binding's type.
        (_, "pu") => {
            want.unit = "pu";
            want.count = pe;
        }
        (_, "core") => {
            want.count = pe;
            if hwthreads && pe == 1 {
                want.oversubscribe = true;
            } else if hwthreads {
                want.unit = "pu";
            }
        }
        (_, b) if b == mapped || level(b) > level(mapped) => want.bind = Some(b),
        // ppr fixes how many processes each object takes, which a shape's unit of the
        // binding's type would cap at how many such objects it holds: bind each to the
        // object around its core (the same where the mapping object holds one).
        (_, b) if per.is_some() => {
            want.bind = Some(b);
            notes.push(format!("each process bound to the {b} of its core: where a {mapped} holds several {b}s Open MPI spreads its processes over them"));
        }
        (_, b) => {
            want.unit = b;
            want.oversubscribe = true;
            notes.push(format!("each process one {b} of its {}, the next when every {b} there has one (Open MPI binds to the least used); `oversubscribe: true` deals them again; on a node where one {b} holds a whole {0} the shape is refused: there Open MPI binds to the {b} around the {0}, which `bind: {b}` over cores says", match mapped { "machine" => "node", m => m }));
        }
    }
    finish_ompi(want, rank_by, &object, &map)
}

/// `--rank-by` other than the mapping object is refused: binder numbers ranks in the
/// order it deals them.
fn finish_ompi(
    mut want: Want,
    rank_by: Option<String>,
    object: &str,
    map: &str,
) -> Result<Want, ConvertError> {
    if let Some(by) = rank_by {
        let by = by
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let same = by == object || by == "slot" || container(&by) == want.over;
        if !same {
            return refuse(format!("`--rank-by {by}` with `--map-by {map}`: binder numbers ranks in the order it deals them out, so a shape cannot rank by another object than it maps by; drop --rank-by or map by {by}"));
        }
        // `ppr:N:OBJ --rank-by OBJ`: the N per object as mapped, ranked round robin over
        // the objects (0 on the first, 1 on the second, …), not object by object (#64).
        if by != "slot" && want.per_container.is_some() && container(&by) == want.over {
            want.rank_across = true;
        }
    }
    Ok(want)
}
