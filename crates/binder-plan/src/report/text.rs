//! The text form of `--dry-run`: a header naming the topology, unit, rule and pattern,
//! then one aligned line per rank, then the units nobody got.

use std::io::{self, Write};

use super::{CpusetFormat, Extras};
use crate::distribute::{Locality, Plan, UnitObj};
use binder_core::cpulist::{cpu_list, hwloc_mask, index_ranges, taskset_mask};

pub(super) fn render(
    plan: &Plan,
    ranks: &[usize],
    cpuset_format: CpusetFormat,
    header: &str,
    extras: Extras<'_>,
    out: &mut impl Write,
) -> io::Result<()> {
    let unit = plan.unit.unit;
    let n = plan.tasks.len();
    let reverse = if plan.reverse { ", reversed" } else { "" };
    let locality = if plan.locality == Locality::Any {
        String::new()
    } else {
        format!(", {}", plan.locality)
    };
    let width = match plan.unit.width {
        Some(w) => format!(", width {}", w.hwloc_name()),
        None if plan.unit.slurm_auto => ", Slurm's auto binding".to_owned(),
        None => String::new(),
    };
    let slots = match plan.slots {
        0 => String::new(),
        1 => ", 1 slot".to_owned(),
        s => format!(", {s} slots"),
    };
    let ge = plan.ge.as_ref().map_or_else(String::new, |g| {
        format!(
            ", Grid Engine \"{}\" (instance {})",
            g.request,
            g.instance.name()
        )
    });
    writeln!(
        out,
        "# {header}: {n} task{}, unit {unit} ({}{width}), pattern {}{reverse}{locality}{slots}{ge}",
        if n == 1 { "" } else { "s" },
        plan.unit.rule,
        plan.pattern
    )?;
    let rows: Vec<[String; 4]> = ranks
        .iter()
        .map(|&r| {
            let task = &plan.tasks[r];
            let cpus = task.cpuset.to_vec();
            let mask = match cpuset_format {
                CpusetFormat::Hwloc => hwloc_mask(&cpus),
                CpusetFormat::List => cpu_list(&cpus),
                CpusetFormat::Taskset => taskset_mask(&cpus),
            };
            let (mut objects, cpus) = if task.units.is_empty() {
                ("unbound".to_owned(), "-".to_owned())
            } else {
                let unit = plan.unit_of(r).unit;
                (objects(&unit.to_string(), &task.units), cpu_list(&cpus))
            };
            if let Some(rule) = &task.rule {
                objects.push_str(&format!(" (ranks {rule})"));
            }
            [
                format!("rank {r}/{n}"),
                objects,
                format!("cpus {cpus}"),
                mask,
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..3)
        .map(|c| rows.iter().map(|row| row[c].len()).max().unwrap_or(0))
        .collect();
    for (row, &r) in rows.iter().zip(ranks) {
        let mut line = format!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        let gpus = &plan.tasks[r].gpus;
        if !gpus.is_empty() {
            let names: Vec<String> = gpus
                .iter()
                .map(|&g| {
                    let gpu = &plan.gpus[g];
                    let runtime = gpu.runtime_name();
                    match &gpu.os_name {
                        Some(os) => format!(
                            "gpu:{} {} {runtime} {os} {}",
                            gpu.number, gpu.busid, gpu.model
                        ),
                        None => {
                            format!("gpu:{} {} {runtime} {}", gpu.number, gpu.busid, gpu.model)
                        }
                    }
                })
                .collect();
            line.push_str(&format!("  {}", names.join("; ")));
        }
        let task = &plan.tasks[r];
        if !task.nics.is_empty() {
            let names: Vec<String> = task
                .nics
                .iter()
                .flat_map(|&i| plan.nics[i].names())
                .collect();
            line.push_str(&format!("  nic {}", names.join(",")));
        }
        let straddles: Vec<String> = plan
            .levels
            .iter()
            .filter(|&&level| task.spans.of(level) > 1)
            .map(|&level| format!("{} {}", task.spans.of(level), level.hwloc_name()))
            .collect();
        if !straddles.is_empty() {
            line.push_str(&format!("  ! spans {}", straddles.join(", ")));
        }
        let preview = extras.previews.get(r);
        if let Some(mems) = preview.and_then(|p| p.mems.as_ref()) {
            line.push_str(&format!("  mems {}", cpu_list(mems)));
            // `local` is the plain binding; the others say their policy.
            match preview.and_then(|p| p.mempolicy) {
                Some(binder_core::view::MemPolicy::Local) | None => {}
                Some(policy) => line.push_str(&format!(" {}", policy.name())),
            }
        }
        if plan.ge.is_some() {
            line.push_str(&format!("  ge {}", task.ge_topology));
        }
        writeln!(out, "{}", line.trim_end())?;
        if let Some(p) = preview.filter(|_| extras.show_env) {
            let vars: Vec<String> = p.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            writeln!(out, "    env {}", vars.join(" "))?;
        }
    }
    if !plan.unused_slots.is_empty() {
        let mut unused = plan.unused_slots.clone();
        unused.sort_by_key(|s| s.index);
        let mut parents: Vec<&str> = Vec::new();
        for slot in &unused {
            if !parents.contains(&slot.within.as_str()) {
                parents.push(&slot.within);
            }
        }
        let shown = parents
            .iter()
            .take(8)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let more = if parents.len() > 8 { ", …" } else { "" };
        writeln!(
            out,
            "unused slots: {} of {} (in {shown}{more})",
            plan.unused_slots.len(),
            plan.slots
        )?;
    }
    if !plan.unused.is_empty() {
        let mut logical: Vec<usize> = plan.unused.iter().map(|u| u.logical).collect();
        logical.sort_unstable();
        let noun = match (unit.to_string().as_str(), logical.len()) {
            ("pu", 1) => "PU".to_owned(),
            ("pu", _) => "PUs".to_owned(),
            (other, 1) => other.to_owned(),
            (other, _) => format!("{other}s"),
        };
        writeln!(
            out,
            "unused: {} ({} {noun})",
            objects(&unit.to_string(), &plan.unused),
            logical.len()
        )?;
    }
    if let (true, Some(mode)) = (plan.oversubscribed(), plan.numa_binding) {
        writeln!(
            out,
            "shared: the workers of one NUMA node or package share its cpus (`numa-binding: {mode}`, as PyTorch binds them)"
        )?;
    } else if plan.oversubscribed() {
        writeln!(
            out,
            "oversubscribed: {} tasks share their units (`oversubscribe: true`)",
            plan.tasks.len()
        )?;
    }
    if let Some(line) = kinds_line(plan) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// On a node with more than one kind of core (SEMANTICS §11): what `kind: balanced` gave
/// each task, or, without it, a warning when tasks got unequal numbers of performance
/// units. `None` when there is nothing to say.
pub fn kinds_line(plan: &Plan) -> Option<String> {
    let kinds = plan.kinds.as_ref()?;
    let unit = plan.unit.unit;
    let equal = |v: &[usize]| v.windows(2).all(|w| w[0] == w[1]);
    let even = equal(&kinds.performance) && equal(&kinds.efficiency);
    let each = |r: usize| {
        format!(
            "rank {r}: {} P + {} E",
            kinds.performance[r], kinds.efficiency[r]
        )
    };
    let listed = || {
        let n = kinds.performance.len();
        let mut ranks: Vec<String> = (0..n.min(8)).map(each).collect();
        if n > 8 {
            ranks.push("…".to_owned());
        }
        ranks.join(", ")
    };
    match (kinds.balanced, kinds.performance.first()) {
        (_, None) => None,
        (true, Some(&p)) if even => Some(format!(
            "kinds: balanced, each task {p} performance + {} efficiency {unit} unit(s)",
            kinds.efficiency[0]
        )),
        (true, Some(_)) => Some(format!("kinds: balanced ({})", listed())),
        (false, Some(_)) if !equal(&kinds.performance) => Some(format!(
            "kinds: tasks get unequal numbers of performance {unit} units ({}); `kind: balanced` in `options` gives each task as many of each kind",
            listed()
        )),
        (false, Some(_)) if kinds.unused_performance > 0 && kinds.efficiency.iter().any(|&e| e > 0) => Some(format!(
            "kinds: {} performance {unit} unit(s) left unused while tasks get efficiency ones ({}); `kind: balanced` in `options` deals each kind on its own",
            kinds.unused_performance,
            listed()
        )),
        (false, Some(_)) => None,
    }
}

/// `core:0-3,8` for a set of unit objects (logical indexes, sorted).
fn objects(unit: &str, units: &[UnitObj]) -> String {
    let mut logical: Vec<usize> = units.iter().map(|u| u.logical).collect();
    logical.sort_unstable();
    format!("{unit}:{}", index_ranges(&logical))
}

/// What `--report` says of one task's binding: `unit core: core:0-1 cpus 0-3 mask 0xf`.
pub(crate) fn task_binding(plan: &Plan, rank: usize) -> String {
    let task = &plan.tasks[rank];
    let unit = plan.unit_of(rank).unit;
    let mut line = if task.units.is_empty() {
        format!("unit {unit}: not bound")
    } else {
        let cpus = task.cpuset.to_vec();
        format!(
            "unit {unit}: {} cpus {} mask {}",
            objects(&unit.to_string(), &task.units),
            cpu_list(&cpus),
            hwloc_mask(&cpus)
        )
    };
    if !task.gpus.is_empty() {
        let busids: Vec<String> = task
            .gpus
            .iter()
            .map(|&g| {
                let gpu = &plan.gpus[g];
                format!("gpu:{} {} {}", gpu.number, gpu.busid, gpu.runtime_name())
            })
            .collect();
        line.push_str(&format!(" {}", busids.join(", ")));
    }
    if plan.ge.is_some() {
        line.push_str(&format!(" ge {}", task.ge_topology));
    }
    line
}
