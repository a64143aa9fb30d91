//! `binder explain SHAPE` (issue #13): why each task gets what it gets, in the order the
//! pipeline decides it — the rule that chose the unit, what each resource request matched
//! and what it passed over (and why), the pool, how it was dealt and what was left over.
//! A refusal is explained the same way, up to the request that failed.
//!
//! Written for people; its wording may change between versions (use `--format json` of
//! `--dry-run` in scripts).

use std::io::{self, Write};

use crate::distribute::Plan;
use crate::error::PlanError as Error;
use crate::report::{self, CpusetFormat, Format};
use crate::select::Step;
use crate::shape::{Pattern, Shape};
use crate::unit::{self, Rule, Unit};
use crate::PlanRequest;

/// Passed-over objects listed per request before "… and N more".
const SHOWN: usize = 6;

/// Explains `request`'s plan, showing the placement of `ranks` (every task when `None`),
/// as the dry-run does: the text, and the plan's refusal, if any, which the text explains
/// (the caller prints its `binder:` line).
pub fn explain(
    request: &PlanRequest<'_>,
    ranks: Option<&[usize]>,
    header: &str,
) -> (String, Result<(), Error>) {
    let mut steps = Vec::new();
    let result = crate::plan_traced(request, &mut steps);
    let (shape, local_size) = (request.shape, request.local_size);
    let mut out = Vec::new();
    // Writing into memory cannot fail.
    let _ = write(
        shape,
        header,
        (local_size, ranks),
        &steps,
        &result,
        &mut out,
    );
    (
        String::from_utf8_lossy(&out).into_owned(),
        result.map(|_| ()),
    )
}

fn write(
    shape: &Shape,
    header: &str,
    (n, ranks): (usize, Option<&[usize]>),
    steps: &[Step],
    result: &Result<Plan, Error>,
    out: &mut impl Write,
) -> io::Result<()> {
    writeln!(out, "# {header}: {n} task{}", if n == 1 { "" } else { "s" })?;
    let choice = unit::choose(shape);
    writeln!(out, "unit: {}", unit_reason(shape, choice))?;
    if choice.slurm_auto {
        writeln!(
            out,
            "  bind: slurm-auto widens each task's cpuset as Slurm's task/affinity does without --cpu-bind: to whole sockets when the tasks' CPUs are as many as the node's whole sockets, to whole cores when as many as its whole cores, kept when as many as its PUs, else to the whole allocation"
        )?;
    }
    if let Some(width) = choice.width {
        writeln!(
            out,
            "  bind: {} widens each task's cpuset to the whole {} objects its units touch",
            width.hwloc_name(),
            width.hwloc_name()
        )?;
    }
    if !shape.options.reserve.is_empty() {
        writeln!(
            out,
            "reserved: {} taken out before matching (site file, `options.reserve`, `--reserve`); objects keep the node's numbering",
            shape.options.reserve.join(", ")
        )?;
    }
    if let Some(ge) = &shape.options.ge {
        writeln!(
            out,
            "placement: the Grid Engine request \"{ge}\" places the tasks (SEMANTICS §12), not `resources`"
        )?;
    } else {
        writeln!(
            out,
            "resources, matched greedily, first fit in hwloc logical order:"
        )?;
        for step in steps {
            write_step(step, out)?;
        }
    }
    for (list, rule) in &shape.ranks {
        if rule.resources.is_empty() {
            writeln!(
                out,
                "ranks {list}: `bind: none`, so they keep the affinity they start with and take nothing"
            )?;
        }
    }
    match result {
        Ok(plan) => {
            // The shape's own ranks (not a `ranks:` rule's) share the pool.
            let own: Vec<&crate::distribute::Task> =
                plan.tasks.iter().filter(|t| t.rule.is_none()).collect();
            let units: usize = own.iter().map(|t| t.units.len()).sum::<usize>() + plan.unused.len();
            let n = own.len();
            if plan.ge.is_none() && plan.slots == 0 && plan.unit.unit != Unit::None {
                writeln!(
                    out,
                    "pool: {units} {} unit{}{}",
                    plan.unit.unit,
                    if units == 1 { "" } else { "s" },
                    if plan.reverse {
                        ", reversed (last first)"
                    } else {
                        ""
                    }
                )?;
                if plan.locality == crate::distribute::Locality::Any {
                    writeln!(out, "dealing: {}", dealing(plan.pattern, units, n))?;
                } else {
                    writeln!(
                        out,
                        "dealing: {}: each task gets its GPU(s) first, then the pool units {} them, shared {} among the tasks that share them; units no task may use stay unused",
                        plan.locality,
                        if plan.locality == crate::distribute::Locality::GpuLocal {
                            "near"
                        } else {
                            "on the nearest NUMA node without"
                        },
                        plan.pattern
                    )?;
                }
            } else if plan.slots > 0 {
                writeln!(
                    out,
                    "dealing: {} slot{} taken, one per task in {} order; a task never leaves its slot",
                    plan.slots,
                    if plan.slots == 1 { "" } else { "s" },
                    match plan.pattern {
                        Pattern::Scatter => "round-robin over the slots' parents",
                        Pattern::Balanced => "selection, each parent taking round robin's share of the tasks,",
                        Pattern::Packed | Pattern::Interleave => "selection",
                    }
                )?;
            }
            writeln!(out, "plan:")?;
            let mut text = Vec::new();
            report::render(
                plan,
                ranks,
                Format::Text,
                CpusetFormat::Hwloc,
                header,
                &mut text,
            )?;
            // The plan's own header line is this explanation's first line.
            for line in String::from_utf8_lossy(&text).lines().skip(1) {
                writeln!(out, "  {line}")?;
            }
            if plan.unused.is_empty() && plan.unused_slots.is_empty() {
                writeln!(out, "  remainder: none, every unit of the pool is used")?;
            }
        }
        Err(e) => {
            writeln!(out, "refused: {e}")?;
        }
    }
    Ok(())
}

/// Which rule of SEMANTICS §2 chose the unit, in words.
fn unit_reason(shape: &Shape, choice: unit::UnitChoice) -> String {
    let u = choice.unit;
    match (choice.rule, shape.options.bind) {
        (Rule::Explicit, Some(bind)) if choice.width.is_none() => {
            format!("{u}, because `options.bind: {bind}` says so (rule 1, explicit)")
        }
        (Rule::Explicit, _) if shape.options.ge.is_some() => {
            format!("{u}, from the Grid Engine request's unit (rule 1, explicit)")
        }
        (Rule::Explicit, _) => format!(
            "{u}: the finest of core/pu in `resources`, else core; the binding is widened (rule 1, explicit width)"
        ),
        (Rule::Implicit, _) => format!(
            "{u}, because `{u}` is the finest of core/pu named in `resources` (rule 2, implicit)"
        ),
        (Rule::Default, _) => format!(
            "{u}, because neither `options.bind` nor a core/pu item says otherwise (rule 3, default)"
        ),
    }
}

/// How `pattern` deals `units` to `n` tasks (distribute::deal).
fn dealing(pattern: Pattern, units: usize, n: usize) -> String {
    let each = units / n.max(1);
    let left = units - each * n.max(1);
    let rest = if left == 0 {
        "nothing is left over".to_owned()
    } else {
        format!("the {left} left over (units mod tasks) go to no task")
    };
    match pattern {
        Pattern::Packed | Pattern::Balanced => format!(
            "packed: {units} units / {n} tasks = {each} consecutive units each; {rest}"
        ),
        Pattern::Scatter => format!(
            "scatter: round robin, task r gets units r, r+{n}, r+{}, …, {each} each; {rest}",
            2 * n
        ),
        Pattern::Interleave => format!(
            "interleave: PUs ordered first hardware threads of every core first, then {each} consecutive each; {rest}"
        ),
    }
}

fn write_step(step: &Step, out: &mut impl Write) -> io::Result<()> {
    let there = if step.total > 0 {
        format!(" ({} there)", step.total)
    } else {
        String::new()
    };
    let took = if step.matched.is_empty() {
        "took nothing".to_owned()
    } else {
        format!("took {}: {}", step.matched.len(), compress(&step.matched))
    };
    writeln!(
        out,
        "  {}: {} in {}{there}: {took}",
        step.path, step.asked, step.within
    )?;
    if !step.skipped.is_empty() {
        for (what, why) in step.skipped.iter().take(SHOWN) {
            writeln!(out, "    passed over {what}: {why}")?;
        }
        if step.skipped.len() > SHOWN {
            writeln!(out, "    … and {} more", step.skipped.len() - SHOWN)?;
        }
    }
    Ok(())
}

/// `core:0`, `core:1`, `core:3` → `core:0-1,3`; other labels as they are.
fn compress(labels: &[String]) -> String {
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    let mut plain = Vec::new();
    for label in labels {
        match label
            .split_once(':')
            .and_then(|(t, i)| Some((t, i.parse::<usize>().ok()?)))
        {
            Some((t, i)) => match groups.iter_mut().find(|(g, _)| g == t) {
                Some((_, list)) => list.push(i),
                None => groups.push((t.to_owned(), vec![i])),
            },
            None => plain.push(label.clone()),
        }
    }
    let mut parts: Vec<String> = groups
        .into_iter()
        .map(|(t, mut list)| {
            list.sort_unstable();
            format!("{t}:{}", binder_core::cpulist::cpu_list(&list))
        })
        .collect();
    parts.extend(plain);
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_compress() {
        let l: Vec<String> = ["core:0", "core:1", "core:3", "gpu:2", "cpus 0-3"]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(compress(&l), "core:0-1,3, gpu:2, cpus 0-3");
    }

    #[test]
    fn dealing_by_hand() {
        assert_eq!(
            dealing(Pattern::Packed, 7, 3),
            "packed: 7 units / 3 tasks = 2 consecutive units each; the 1 left over (units mod tasks) go to no task"
        );
    }
}
