//! Each peer's spellings, read into a [`Want`]. Every option a peer takes that changes
//! placement is either converted or refused here with why; options that do not (`-np`,
//! `--report-bindings`, `verbose`) are skipped with a note.

use super::{ConvertError, Want};

/// `Err` with a sentence.
fn refuse<T>(why: impl Into<String>) -> Result<T, ConvertError> {
    Err(ConvertError(why.into()))
}

/// The words as (option, value) pairs: `--opt=value`, `--opt value` (for options in
/// `valued`), `-c2`/`-c 2` (short options in `valued`); a word that is no option is
/// `("", word)`.
fn pairs(words: &[String], valued: &[&str]) -> Result<Vec<(String, String)>, ConvertError> {
    let mut out = Vec::new();
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if !w.starts_with('-') || w == "-" {
            out.push((String::new(), w.clone()));
            continue;
        }
        if let Some((opt, value)) = w.split_once('=') {
            out.push((opt.to_owned(), value.to_owned()));
            continue;
        }
        // A short option with its value attached: `-c2`, `-N0`.
        if let (Some(short), Some(rest)) = (w.get(..2), w.get(2..)) {
            if !w.starts_with("--")
                && !rest.is_empty()
                && !valued.contains(&w.as_str())
                && valued.contains(&short)
            {
                out.push((short.to_owned(), rest.to_owned()));
                continue;
            }
        }
        if valued.contains(&w.as_str()) {
            let Some(value) = it.next() else {
                return refuse(format!("`{w}` needs a value"));
            };
            out.push((w.clone(), value.clone()));
        } else {
            out.push((w.clone(), String::new()));
        }
    }
    Ok(out)
}

/// A count of at least 1 (at most 65,536).
fn count(opt: &str, value: &str) -> Result<usize, ConvertError> {
    match value.trim().parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => refuse(format!("`{opt}={value}`: a count from 1 is needed")),
    }
}

/// An Open MPI or hwloc object name as a shape's container type.
fn container(name: &str) -> Option<&'static str> {
    Some(match name.to_ascii_lowercase().as_str() {
        "socket" | "package" => "socket",
        "numa" | "numanode" => "numa",
        "l3cache" | "l3" => "l3cache",
        "l2cache" | "l2" => "l2cache",
        "die" => "die",
        _ => return None,
    })
}

/// Open MPI (4.1 and 5.0): `--map-by OBJ[:PE=n][:SPAN][:OVERSUBSCRIBE]`, `--map-by
/// ppr:N:OBJ`, `--bind-to OBJ`, `--rank-by OBJ`, `--use-hwthread-cpus`,
/// `--cpus-per-proc n`.
pub(super) fn ompi(words: &[String], notes: &mut Vec<String>) -> Result<Want, ConvertError> {
    let valued = [
        "--map-by",
        "--bind-to",
        "--rank-by",
        "-np",
        "-n",
        "--np",
        "--cpus-per-proc",
        "--cpus-per-rank",
    ];
    let mut map = None;
    let mut bind = None;
    let mut rank_by = None;
    let mut hwthreads = false;
    let mut pe = None;
    let mut oversubscribe = false;
    for (opt, value) in pairs(words, &valued)? {
        match opt.as_str() {
            "--map-by" => map = Some(value),
            "--bind-to" => bind = Some(value),
            "--rank-by" => rank_by = Some(value),
            "--use-hwthread-cpus" => hwthreads = true,
            "--cpus-per-proc" | "--cpus-per-rank" => pe = Some(count(&opt, &value)?),
            "-np" | "-n" | "--np" => notes.push(format!(
                "`{opt} {value}` left out: binder takes the task count from the launcher"
            )),
            "--report-bindings" | "--display-map" => {}
            "--oversubscribe" => oversubscribe = true,
            "" => return refuse(format!("`{value}` is no option; give only mpirun's options (the program goes after binder's `--`)")),
            _ => return refuse(format!("`{opt}` is not an Open MPI mapping option binder converts (it reads --map-by, --bind-to, --rank-by, --use-hwthread-cpus, --cpus-per-proc, --oversubscribe)")),
        }
    }
    let mut want = Want {
        oversubscribe,
        ..Want::default()
    };
    let map = map.unwrap_or_else(|| {
        notes.push("no --map-by: Open MPI maps by core for 2 processes or fewer and by socket (4.1) or NUMA node (5.0) above; converted as --map-by core".into());
        "core".into()
    });
    let mut parts = map.split(':');
    let object = parts.next().unwrap_or_default().to_ascii_lowercase();
    let mut natural = "core";
    if object == "ppr" {
        let n = parts.next().unwrap_or_default();
        let obj = parts.next().unwrap_or_default();
        let Some(kind) = container(obj).or(match obj {
            "core" => Some("core"),
            _ => None,
        }) else {
            return refuse(format!("`--map-by ppr:{n}:{obj}`: binder converts ppr over socket, numa, l3cache, l2cache or core"));
        };
        let n = count("ppr", n)?;
        if kind == "core" {
            if n != 1 {
                return refuse(format!("`ppr:{n}:core` puts {n} processes on one core: write a shape over `pu` (each task one PU of a core) instead"));
            }
        } else {
            want.over = Some(kind);
            want.per_container = Some(n);
        }
    } else {
        match object.as_str() {
            "core" | "slot" | "node" | "" => {}
            "hwthread" => {
                want.unit = "pu";
                natural = "hwthread";
            }
            _ => {
                let Some(kind) = container(&object) else {
                    return refuse(format!("`--map-by {object}`: binder converts core, hwthread, slot, socket/package, numa, l3cache, l2cache and ppr:N:OBJ"));
                };
                want.over = Some(kind);
                natural = kind;
            }
        }
    }
    for modifier in parts {
        let m = modifier.to_ascii_uppercase();
        if let Some(n) = m.strip_prefix("PE=") {
            pe = Some(count("PE", n)?);
        } else if m == "OVERSUBSCRIBE" {
            want.oversubscribe = true;
        } else if m == "SPAN" || m == "NOOVERSUBSCRIBE" || m == "FILL" {
            notes.push(format!(
                "`:{modifier}` left out: binder deals the node's units as the shape says"
            ));
        } else if object != "ppr" {
            return refuse(format!("`--map-by {map}`: the modifier `{modifier}` is not one binder converts (PE=n, SPAN, OVERSUBSCRIBE)"));
        }
    }
    if hwthreads {
        want.unit = "pu";
        if natural == "core" {
            natural = "hwthread";
        }
    }
    if let Some(n) = pe {
        want.count = n;
        natural = if want.unit == "pu" {
            "hwthread"
        } else {
            "core"
        };
    }
    let bind = bind
        .map(|b| b.split(':').next().unwrap_or_default().to_ascii_lowercase())
        .unwrap_or_else(|| {
            notes.push(format!("no --bind-to: converted as Open MPI 4.1 binds by default here, to the mapping object ({natural})"));
            natural.to_owned()
        });
    match bind.as_str() {
        "none" => want.bind = Some("none"),
        "hwthread" if want.unit == "core" => want.one_pu = true,
        "hwthread" => {}
        "core" if want.unit == "pu" => want.bind = Some("core"),
        "core" => {}
        "board" => {
            want.bind = Some("none");
            notes.push("`--bind-to board` binds to the whole node: converted as `bind: none` (the task keeps the job's CPUs)".into());
        }
        other => match container(other) {
            Some(kind) => want.bind = Some(kind),
            None => return refuse(format!("`--bind-to {other}`: binder converts none, hwthread, core, l2cache, l3cache, numa, socket/package")),
        },
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
    }
    Ok(want)
}

/// Slurm (`srun`, `sbatch`, `salloc`): `--cpu-bind`, `--distribution`/`-m`,
/// `--cpus-per-task`/`-c`, `--hint`, `--ntasks-per-core`, `--ntasks-per-socket`,
/// `--threads-per-core`.
pub(super) fn slurm(words: &[String], notes: &mut Vec<String>) -> Result<Want, ConvertError> {
    let valued = [
        "--cpu-bind",
        "--cpu_bind",
        "--distribution",
        "-m",
        "--cpus-per-task",
        "-c",
        "--hint",
        "--ntasks-per-core",
        "--ntasks-per-socket",
        "--threads-per-core",
        "--ntasks",
        "-n",
        "--nodes",
        "-N",
        "--ntasks-per-node",
    ];
    let mut want = Want::default();
    let mut cpus = 1usize;
    let mut cpu_bind = None;
    let mut second = None;
    let mut nomultithread = false;
    for (opt, value) in pairs(words, &valued)? {
        match opt.as_str() {
            "--cpu-bind" | "--cpu_bind" => cpu_bind = Some(value),
            "--distribution" | "-m" => {
                let mut levels = value.split(':');
                let first = levels.next().unwrap_or_default();
                if first.starts_with("plane") || first == "arbitrary" {
                    return refuse(format!("`{opt}={value}`: `{first}` places tasks on nodes, which binder leaves to Slurm; give the second level (block, cyclic) alone as `*:LEVEL`"));
                }
                second = levels.next().map(str::to_owned);
            }
            "--cpus-per-task" | "-c" => cpus = count(&opt, &value)?,
            "--hint" => match value.as_str() {
                "nomultithread" => nomultithread = true,
                "multithread" | "compute_bound" | "memory_bound" => notes.push(format!(
                    "`--hint={value}` left out: its placement is Slurm's default here"
                )),
                _ => return refuse(format!("`--hint={value}`: Slurm's hints are nomultithread, multithread, compute_bound and memory_bound")),
            },
            "--threads-per-core" => nomultithread |= count(&opt, &value)? == 1,
            "--ntasks-per-core" => {
                let n = count(&opt, &value)?;
                if n > 1 {
                    want.unit = "pu";
                    notes.push(format!("`--ntasks-per-core={n}`: each task one PU, so {n} tasks share a core where it has {n} PUs"));
                }
            }
            "--ntasks-per-socket" => {
                want.over = Some("socket");
                want.per_container = Some(count(&opt, &value)?);
            }
            "--overcommit" | "-O" => want.oversubscribe = true,
            "--ntasks" | "-n" | "--nodes" | "-N" | "--ntasks-per-node" => notes.push(format!(
                "`{opt} {value}` left out: Slurm places tasks on nodes, binder on each node"
            )),
            "" => return refuse(format!("`{value}` is no option; give only Slurm's options")),
            _ => return refuse(format!("`{opt}` is not a Slurm binding option binder converts (it reads --cpu-bind, --distribution, -c, --hint, --ntasks-per-core, --ntasks-per-socket, --threads-per-core, --overcommit)")),
        }
    }
    // A map or mask list runs to the end of the value (its commas are the list's); it
    // names each task's CPUs, so the dealing options below do not apply.
    if let Some(bind) = &cpu_bind {
        if let Some(at) = ["map_", "mask_"].iter().filter_map(|k| bind.find(k)).min() {
            want.per_rank = slurm_map(&bind[at..])?;
            want.unit = if want.per_rank[0].0 == "numa" {
                "numa"
            } else {
                "pu"
            };
            notes.push(format!("ranks past the list's {} get the rest of the node, a {} each; Slurm gives them the list again from its start", want.per_rank.len(), want.unit));
            if cpus > 1 || second.is_some() {
                notes.push(
                    "-c and --distribution left out: a map or mask names each task's CPUs".into(),
                );
            }
            if want.oversubscribe {
                // Rank rules give each rank CPUs of its own (the shape refuses both).
                notes.push(
                    "--overcommit left out: a map or mask gives each listed task its own CPUs"
                        .into(),
                );
                want.oversubscribe = false;
            }
            want.over = None;
            want.per_container = None;
            return Ok(want);
        }
    }
    // -c counts Slurm CPUs, which are PUs on an SMT node.
    want.count = cpus;
    if nomultithread {
        want.one_pu = want.unit == "core";
    } else if want.unit == "core" {
        want.unit = "pu";
    }
    match second.as_deref() {
        None | Some("cyclic") | Some("*") if want.over.is_none() => {
            want.over = Some("socket");
            if second.is_none() {
                notes.push("no --distribution: Slurm's default within a node is block:cyclic, tasks round robin over sockets".into());
            }
        }
        // block, or cyclic with `--ntasks-per-socket` already dealing per socket.
        None | Some("cyclic") | Some("*") | Some("block") => {}
        Some("fcyclic") => return refuse("`fcyclic` gives each CPU of a task from the next socket in turn; a shape gives a task its units together: use `cyclic` (tasks round robin over sockets)"),
        Some(other) => return refuse(format!("`{other}`: binder converts the block, cyclic and fcyclic levels")),
    }
    let bind = cpu_bind.unwrap_or_else(|| {
        notes.push(
            "no --cpu-bind: task/affinity binds to the task's CPUs (threads); converted so".into(),
        );
        "threads".into()
    });
    for word in bind.split(',') {
        match word {
            "verbose" | "quiet" | "v" | "q" => {}
            "threads" | "thread" => {}
            "cores" | "core" => {
                if want.unit == "pu" {
                    want.bind = Some("core");
                }
            }
            "sockets" | "socket" => want.bind = Some("socket"),
            "ldoms" | "ldom" => want.bind = Some("numa"),
            "none" | "no" => want.bind = Some("none"),
            "rank" => return refuse("`--cpu-bind=rank` binds task N to CPU N in the OS's numbering, which is Slurm's own deprecated spelling of `map_cpu:0,1,2,...`: write the map, or `resources: [{type: pu, count: 1}]` for a PU per task in hwloc order"),
            other => return refuse(format!("`--cpu-bind={other}`: binder converts threads, cores, sockets, ldoms and none")),
        }
    }
    Ok(want)
}

/// `numactl`: `--cpunodebind`/`-N`, `--membind`/`-m`, `--interleave`/`-i`,
/// `--localalloc`/`-l`, `--preferred`/`-p`, `--physcpubind`/`-C`.
pub(super) fn numactl(words: &[String], notes: &mut Vec<String>) -> Result<Want, ConvertError> {
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
pub(super) fn hwloc_bind(words: &[String], notes: &mut Vec<String>) -> Result<Want, ConvertError> {
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

/// Slurm's `map_cpu:`, `mask_cpu:`, `map_ldom:` and `mask_ldom:` lists: each task's
/// objects by the kernel's numbers (a map: one number per task, decimal or `0x` hex; a
/// mask: hex bits per task), with `*N` repeating an entry. Returns (`pu` or `numa`, each
/// task's list). An object given to two tasks is refused: shapes do not oversubscribe.
fn slurm_map(list: &str) -> Result<Vec<(&'static str, String)>, ConvertError> {
    let (how, entries) = list.split_once(':').unwrap_or((list, ""));
    let (kind, mask) = match how {
        "map_cpu" => ("pu", false),
        "mask_cpu" => ("pu", true),
        "map_ldom" => ("numa", false),
        "mask_ldom" => ("numa", true),
        _ => {
            return refuse(format!(
                "`{how}`: binder converts map_cpu, mask_cpu, map_ldom and mask_ldom"
            ))
        }
    };
    let mut out = Vec::new();
    let mut owner: std::collections::BTreeMap<usize, usize> = Default::default();
    for entry in entries.split(',') {
        let (value, times) = match entry.split_once('*') {
            Some((v, n)) => (v, count(&format!("{how}:…{entry}"), n)?),
            None => (entry, 1),
        };
        let objects = if mask {
            binder_core::cpulist::parse_hex_mask(value, 16_384)
        } else {
            let n = match value.strip_prefix("0x").or(value.strip_prefix("0X")) {
                Some(hex) => usize::from_str_radix(hex, 16).ok(),
                None => value.parse().ok(),
            };
            n.filter(|n| *n < 65_536).map(|n| vec![n])
        };
        let Some(objects) = objects.filter(|o| !o.is_empty()) else {
            return refuse(format!(
                "`{how}:…{entry}`: each entry is {} (`{how}:{}`)",
                if mask {
                    "a hex mask of at least one bit"
                } else {
                    "a number from 0"
                },
                if mask { "0x3,0xC" } else { "0,8" }
            ));
        };
        for _ in 0..times {
            let task = out.len();
            if task >= super::MAX_WORDS {
                return refuse(format!(
                    "`{how}` for more than {} tasks; binder converts up to that many",
                    super::MAX_WORDS
                ));
            }
            for &o in &objects {
                if let Some(first) = owner.insert(o, task) {
                    return refuse(format!("`{how}` gives {kind} {o} to tasks {first} and {task}; a shape gives each task CPUs of its own (it does not oversubscribe): name other CPUs, or bind with `--cpu-bind=none` and no binder"));
                }
            }
            out.push((kind, binder_core::cpulist::cpu_list(&objects)));
        }
    }
    Ok(out)
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
