//! Slurm's `srun`/`sbatch` binding options.

use super::super::{ConvertError, Want};
use super::{count, pairs, refuse};

/// Slurm (`srun`, `sbatch`, `salloc`): `--cpu-bind`, `--distribution`/`-m`,
/// `--cpus-per-task`/`-c`, `--hint`, `--ntasks-per-core`, `--ntasks-per-socket`,
/// `--threads-per-core`.
pub(in crate::convert) fn slurm(
    words: &[String],
    notes: &mut Vec<String>,
) -> Result<Want, ConvertError> {
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
    let mut first_given = false;
    let mut nomultithread = false;
    // `--hint`'s binding (proc_args.c `verify_hint`): threads, or cores.
    let mut hint_bind = None;
    for (opt, value) in pairs(words, &valued)? {
        match opt.as_str() {
            "--cpu-bind" | "--cpu_bind" => cpu_bind = Some(value),
            "--distribution" | "-m" => {
                let mut levels = value.split(':');
                let first = levels.next().unwrap_or_default();
                if first.starts_with("plane") || first == "arbitrary" {
                    return refuse(format!("`{opt}={value}`: `{first}` places tasks on nodes, which binder leaves to Slurm; give the second level (block, cyclic) alone as `*:LEVEL`"));
                }
                first_given = true;
                second = levels.next().map(str::to_owned);
            }
            "--cpus-per-task" | "-c" => cpus = count(&opt, &value)?,
            "--hint" => match value.as_str() {
                "nomultithread" => {
                    nomultithread = true;
                    hint_bind = Some("threads");
                }
                "multithread" => hint_bind = Some("threads"),
                "compute_bound" | "memory_bound" => {
                    hint_bind = Some("cores");
                    notes.push(format!("`--hint={value}` binds to cores (converted so); which sockets and cores Slurm allocates is the allocation's"));
                }
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
            notes.push(format!("ranks past the list's {} share the rest of the node out among them ({}s); Slurm gives them the list again from its start", want.per_rank.len(), want.unit));
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
            if second.is_none() && first_given {
                notes.push("`-m` with one level places tasks on nodes; within a node Slurm deals them cyclic over sockets (block with SelectTypeParameters=CR_Core_Default_Dist_Block: write `*:block` for that)".into());
            } else if second.is_none() {
                notes.push("no --distribution: Slurm's default within a node is block:cyclic, tasks round robin over sockets".into());
            }
        }
        // block, or cyclic with `--ntasks-per-socket` already dealing per socket.
        None | Some("cyclic") | Some("*") | Some("block") => {}
        Some("fcyclic") => return refuse("`fcyclic` gives each CPU of a task from the next socket in turn; a shape gives a task its units together: use `cyclic` (tasks round robin over sockets)"),
        Some(other) => return refuse(format!("`{other}`: binder converts the block, cyclic and fcyclic levels")),
    }
    let Some(bind) = cpu_bind.or(hint_bind.map(str::to_owned)) else {
        // task/affinity's automatic binding (dist_tasks.c `lllp_distribution`).
        want.bind = Some("slurm-auto");
        notes.push("no --cpu-bind: Slurm's task/affinity binds each task to whole sockets when tasks x -c equals the allocation's whole sockets, to whole cores when it equals its whole cores, to the task's CPUs when it equals its CPUs, else to the whole allocation (`bind: slurm-auto` does the same on the node's allocation; TaskPluginParam=autobind is a site's other default)".into());
        return Ok(want);
    };
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

/// Slurm's `map_cpu:`, `mask_cpu:`, `map_ldom:` and `mask_ldom:` lists: each task's
/// objects by the kernel's numbers (a map: one number per task, decimal or `0x` hex; a
/// mask: hex bits per task), with `*N` repeating an entry. Returns (`pu` or `numa`, each
/// task's list). An object given to two tasks is refused: a shape's rank rules give each
/// rank CPUs of its own (`oversubscribe: true` does not apply to `ranks:`).
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
            if task >= super::super::MAX_WORDS {
                return refuse(format!(
                    "`{how}` for more than {} tasks; binder converts up to that many",
                    super::super::MAX_WORDS
                ));
            }
            for &o in &objects {
                if let Some(first) = owner.insert(o, task) {
                    return refuse(format!("`{how}` gives {kind} {o} to tasks {first} and {task}; a shape's rank rules give each rank CPUs of its own (`oversubscribe: true` does not apply to them): name other CPUs, or bind with `--cpu-bind=none` and no binder"));
                }
            }
            out.push((kind, binder_core::cpulist::cpu_list(&objects)));
        }
    }
    Ok(out)
}
