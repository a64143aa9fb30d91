//! Open MPI's `mpirun` mapping options, as its mapper places them: 4.1's (ORTE) and
//! 5.0's (PRRTE 3), which differ in defaults, ranking, spellings and refusals.

use super::super::{ConvertError, Want};
use super::{container, count, level, pairs, refuse};

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
///
/// Open MPI 5 (`v5`, PRRTE 3's `prte_rmaps_base_map_job` and `rmaps_rr_mappers.c`, checked
/// against `prterun` 5.0.11 on the fixtures) differs:
///
/// - no `--map-by`: by core whatever the count (by hardware thread with `:HWTCPUS` or
///   `--use-hwthread-cpus`, by slot with `PE`, by the `--bind-to` object above core);
/// - `--map-by package|numa|l3cache|l2cache` ranks FILL by default: each object takes round
///   robin's share, ranks fill one object before the next (`pattern: balanced`);
///   `--rank-by slot|node|span` keep round robin's order; no other `--rank-by`;
/// - a binding above the mapping object, and `--bind-to hwthread` where the slots are cores
///   (no `:HWTCPUS`, not mapped by hwthread), are refused;
/// - its own spellings: `:HWTCPUS`, `:CORECPUS`, `--bind-to core:overload`,
///   `--map-by pe-list=LIST:ordered` (rank r on core LIST[r]).
pub(in crate::convert) fn ompi(
    words: &[String],
    notes: &mut Vec<String>,
    v5: bool,
) -> Result<Want, ConvertError> {
    let version = if v5 { "Open MPI 5" } else { "Open MPI 4.1" };
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
    // Open MPI 5's `:HWTCPUS` (the node's PUs are its slots) stands in `--map-by`, which
    // `--use-hwthread-cpus` is its old name for; 4.1 never heard of it.
    let map_quals: Vec<String> = map
        .as_deref()
        .map(|m| m.split(':').skip(1).map(str::to_ascii_uppercase).collect())
        .unwrap_or_default();
    if map_quals.iter().any(|q| q == "HWTCPUS" || q == "CORECPUS") && !v5 {
        return refuse(format!("`--map-by {}`: `:HWTCPUS` and `:CORECPUS` are Open MPI 5's spellings (4.1's is --use-hwthread-cpus): convert with `--from ompi5`", map.unwrap_or_default()));
    }
    if map_quals.iter().any(|q| q == "HWTCPUS") {
        hwthreads = true;
    }
    if let Some(line) = rank_by.as_deref().filter(|_| v5) {
        let by = line
            .split(':')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !matches!(by.as_str(), "slot" | "node" | "fill" | "span") {
            return refuse(format!("`--rank-by {line}`: Open MPI 5 ranks by slot, node, fill or span only (it refuses `{by}`); drop --rank-by (FILL), or give `span` for round robin over the mapping objects"));
        }
    }
    let cpu = if hwthreads { "pu" } else { "core" };
    let few = np.is_some_and(|n| n <= 2);
    let user_mapped = map.is_some();
    let map = map.unwrap_or_else(|| {
        if v5 {
            // PRRTE 3: by slot with PE, by hwthread where PUs are the slots, by the
            // object asked to bind to where it lies above a core, else by core.
            let above = bind
                .as_deref()
                .map(|b| b.split(':').next().unwrap_or_default().to_ascii_lowercase())
                .and_then(|b| container(&b).map(|_| b));
            return if pe.is_some() {
                "slot".into()
            } else if hwthreads {
                "hwthread".into()
            } else if let Some(above) = above {
                above
            } else {
                "core".into()
            };
        }
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
    if let Some(list) = object.strip_prefix("pe-list=") {
        return pe_list(list, &map, &map_quals, bind.as_deref(), v5, np);
    }
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
        // Open MPI 5's `:SPAN` ranks round robin over the mapping objects (SPAN ranking)
        // unless --rank-by says otherwise.
        if v5 && m == "SPAN" {
            rank_by.get_or_insert_with(|| "span".to_owned());
            continue;
        }
        if let Some(n) = m.strip_prefix("PE=") {
            pe = Some(count("PE", n)?);
        } else if m == "OVERSUBSCRIBE" {
            oversubscribe = true;
        } else if v5 && matches!(m.as_str(), "HWTCPUS" | "CORECPUS") {
        } else if v5 && matches!(m.as_str(), "NOLOCAL" | "INHERIT" | "NOINHERIT") {
            notes.push(format!(
                "`:{modifier}` left out: it says where Open MPI launches or what child jobs inherit, not where a task binds on its node"
            ));
        } else if m == "SPAN" || m == "NOOVERSUBSCRIBE" || m == "FILL" {
            notes.push(format!(
                "`:{modifier}` left out: binder deals the node's units as the shape says"
            ));
        } else if object != "ppr" {
            return refuse(format!("`--map-by {map}`: the modifier `{modifier}` is not one binder converts (PE=n, SPAN, OVERSUBSCRIBE{})", if v5 { ", HWTCPUS, CORECPUS" } else { "; Open MPI 5's HWTCPUS and CORECPUS with `--from ompi5`" }));
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
                    // Open MPI 5 takes a qualifier's unambiguous start.
                    "overload" if v5 => overload = true,
                    "no-overload" if v5 => {}
                    "if-supported" | "ordered" | "report" => {}
                    "overload" | "no-overload" => return refuse(format!("`--bind-to {b}`: `{q}` is Open MPI 5's spelling (4.1's is `overload-allowed`): convert with `--from ompi5`")),
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
            let kind = if v5 {
                // PRRTE 3: PE binds cores (PUs with HWTCPUS); else the mapping object
                // (ppr's too), and by slot to the NUMA node above 2 processes.
                if pe.is_some() || mapped == "core" {
                    if pe.is_some() {
                        cpu
                    } else {
                        "core"
                    }
                } else if mapped == "machine" {
                    if few {
                        "core"
                    } else {
                        "numa"
                    }
                } else {
                    mapped
                }
            } else if pe.is_some() {
                cpu
            } else if user_mapped && !matches!(mapped, "machine") && per.is_none() {
                mapped
            } else if few {
                cpu
            } else {
                "numa"
            };
            notes.push(format!(
                "no --bind-to: converted as {version} binds by default here, to {}",
                match kind {
                    "pu" => "hwthread",
                    other => other,
                }
            ));
            (kind, false)
        }
    };
    // (Mapped by hardware thread and bound to its core: on a node of one thread per core
    // the two are one object, and Open MPI 5 binds; elsewhere it refuses.)
    let one_thread_only = v5 && mapped == "pu" && bind == "core";
    if one_thread_only {
        notes.push("`--map-by hwthread --bind-to core`: Open MPI 5 runs this only on nodes of one hardware thread per core (elsewhere it refuses a binding above the mapping object); converted as it places there".into());
    }
    if v5
        && bind != "none"
        && mapped != "machine"
        && level(bind) > level(mapped)
        && !one_thread_only
    {
        return refuse(format!("`--bind-to {bind}` above the mapping object ({mapped}): Open MPI 5 binds only to the object a process was mapped to or one inside it, and refuses this line; map by {bind} (`--map-by {bind}`)"));
    }
    if v5 && bind == "pu" && mapped != "pu" && !hwthreads {
        notes.push("`--bind-to hwthread` where the slots are cores: Open MPI 5 runs this only on nodes of one hardware thread per core (elsewhere it refuses: more CPUs than the allocation has; add `:HWTCPUS` to --map-by there); converted as it places there".into());
    }
    let pe = pe.unwrap_or(1);
    if pe > 1 && !matches!(bind, "core" | "pu") {
        return refuse(format!("`PE={pe}` binds each process to {pe} CPUs, which Open MPI refuses with `--bind-to {bind}` (it binds PE to cores or hardware threads): drop --bind-to, or bind to core"));
    }
    if mapped == "pu" && pe > 1 {
        return refuse(format!("`--map-by hwthread:PE={pe}` asks {pe} CPUs of one hardware thread, which Open MPI refuses: map by socket, numa or slot with PE={pe}"));
    }
    if mapped == "core" && pe > 1 && !hwthreads {
        return refuse(format!("`--map-by core:PE={pe}` asks {pe} CPUs of one core, which {version} refuses (a core is one CPU without --use-hwthread-cpus): map by socket, numa or slot with PE={pe} (`--map-by slot:PE={pe}` packs {pe} cores a process)"));
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
        // Open MPI 5 keeps a process's PE CPUs inside one package: by slot, package after
        // package, each slot of PE cores within one.
        "machine" if v5 && pe > 1 && bind != "none" => {
            want.over = Some("socket");
            want.packed_over = true;
        }
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
        return finish_ompi(want, rank_by, &object, &map, v5);
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
                if v5 {
                    notes.push("with PUs as slots Open MPI 5 puts a process on every hardware thread of a core before the next core (each bound to the whole core); binder gives each process a core of its own until every core has one, then the second round".into());
                }
            } else if hwthreads {
                want.unit = "pu";
            }
        }
        (_, b) if b == mapped || level(b) > level(mapped) => want.bind = Some(b),
        // Open MPI 5 takes each process's core in its object (its slots are cores) and
        // binds it to the object of the binding's type around that core.
        (_, b) if v5 => want.bind = Some(b),
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
    finish_ompi(want, rank_by, &object, &map, v5)
}

/// `--rank-by` other than the mapping object is refused: binder numbers ranks in the
/// order it deals them.
fn finish_ompi(
    mut want: Want,
    rank_by: Option<String>,
    object: &str,
    map: &str,
    v5: bool,
) -> Result<Want, ConvertError> {
    if v5 {
        // PRRTE 3 ranks a by-object mapping FILL unless told (slot, node and span keep
        // the mapper's round robin); ppr ranks by slot, object by object.
        let by = rank_by
            .as_deref()
            .map(|b| b.split(':').next().unwrap_or_default().to_ascii_lowercase());
        let fill = by.as_deref().is_none_or(|b| b == "fill");
        // FILL also when an object takes a second process: it takes the next rank, not
        // the rank one round later (`--map-by core:oversubscribe`: ranks 0 and 1 on core 0).
        if ((want.over.is_some() && !want.packed_over) || want.oversubscribe)
            && want.per_container.is_none()
        {
            want.balanced = fill;
        } else if want.per_container.is_some() && by.as_deref() == Some("span") {
            want.rank_across = true;
        }
        return Ok(want);
    }
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

/// Open MPI 5's `--map-by pe-list=LIST:ordered`: rank r on core LIST[r] (the node's
/// logical core numbers; PUs with `:HWTCPUS`). Without `:ordered` every process may run on
/// any of the list's cores, which 5.0.11 does not parse for a list (`0,2`): refused.
fn pe_list(
    list: &str,
    map: &str,
    quals: &[String],
    bind: Option<&str>,
    v5: bool,
    np: Option<usize>,
) -> Result<Want, ConvertError> {
    if !v5 {
        return refuse(format!(
            "`--map-by {map}`: pe-list is Open MPI 5's spelling: convert with `--from ompi5`"
        ));
    }
    let ranges = binder_core::cpulist::parse_ranges(list, 65_535, super::super::MAX_WORDS)
        .map_err(|_| {
            ConvertError(format!(
                "`--map-by {map}`: `{list}` is not a list of core numbers (`0,2-3`)"
            ))
        })?;
    let listed = ranges.values.len();
    if np.is_some_and(|np| np > listed) {
        return refuse(format!("`--map-by {map}` lists {listed} CPU(s) for {} processes, which Open MPI 5 refuses (not enough CPUs in the PE-LIST): list one for each", np.unwrap_or(0)));
    }
    if !quals.iter().any(|q| q == "ORDERED") {
        return refuse(format!("`--map-by {map}` without `:ordered` lets every process run anywhere on the list, which Open MPI 5.0 does not read for a list of several; add `:ordered` (rank r on the r-th listed core) or give the cores as a shape (`type: core` with `index: {list}`)"));
    }
    if bind.is_some_and(|b| !b.to_ascii_lowercase().starts_with("core")) {
        return refuse(format!(
            "`--map-by {map}` binds each process to its listed CPU: drop --bind-to"
        ));
    }
    let unit = if quals.iter().any(|q| q == "HWTCPUS") {
        "pu"
    } else {
        "core"
    };
    if ranges.repeated {
        return refuse(format!("`--map-by {map}` names a core twice; a shape's rank rules give each rank CPUs of its own"));
    }
    Ok(Want {
        unit,
        per_rank_logical: true,
        per_rank: ranges
            .values
            .into_iter()
            .map(|i| (unit, i.to_string()))
            .collect(),
        ..Want::default()
    })
}
