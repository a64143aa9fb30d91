//! What a scheduler says when asked, for the one fact a task's environment can lack: the
//! GPUs of a Slurm step that gave each task only some of them (`srun --gpus-per-task`,
//! `--gpu-bind`), run outside an `sbatch` job (which exports `SLURM_JOB_GPUS`). Slurm
//! then tells each task its own GPU and the step's count (`SLURM_GPUS_ON_NODE`), never
//! which GPUs the step has; `scontrol show job -d` says which GPUs the job has on each
//! node (`GRES=gpu:2(IDX:0-1)`), which are the step's when they are as many (a step that
//! made its own allocation). Asked once per job and node, by the task that makes the
//! job's plan, never on a node-cache hit or by a joining task.

use std::time::Duration;

/// The variables that name the job and this node to `scontrol`.
pub const SLURM_JOB_VARS: [&str; 2] = ["SLURM_JOB_ID", "SLURMD_NODENAME"];

/// How long `scontrol` may take (one RPC to slurmctld) before the answer is taken as none.
pub const SCONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// The GPUs (Slurm's indices, comma separated, as `SLURM_JOB_GPUS` writes them) job
/// `job` has on node `node`, as `scontrol show job -d` says; `None` where it cannot say.
pub fn slurm_job_gpus(job: &str, node: &str) -> Option<String> {
    // A job id is digits (an array task's `123_4`, a het job's `123+1`): nothing else
    // reaches the command line.
    if job.is_empty()
        || !job
            .chars()
            .all(|c| c.is_ascii_digit() || c == '_' || c == '+')
    {
        return None;
    }
    let text =
        crate::vendor::tool_output("scontrol", &["show", "job", "-d", job], SCONTROL_TIMEOUT)?;
    let gpus = job_gpus_on(&text, node)?;
    Some(
        gpus.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The GPU indices a `scontrol show job -d` text gives `node`: its per-node lines
/// (`Nodes=LIST CPU_IDs=… GRES=gpu:2(IDX:0-1)`, `gpu:a100:1(IDX:3),nic:1(IDX:0)`),
/// every `gpu` entry's indices of the first line whose host list holds `node`.
pub fn job_gpus_on(text: &str, node: &str) -> Option<Vec<u32>> {
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(nodes) = fields.next().and_then(|f| f.strip_prefix("Nodes=")) else {
            continue;
        };
        if !hostlist_has(nodes, node) {
            continue;
        }
        let gres = fields.find_map(|f| f.strip_prefix("GRES="))?;
        let mut gpus = Vec::new();
        for entry in split_outside(gres, ',', ('(', ')')) {
            if !entry.starts_with("gpu:") && !entry.starts_with("gpu(") {
                continue;
            }
            let idx = entry.split_once("(IDX:")?.1.split(')').next()?;
            let idx = crate::cpulist::parse_ranges(idx, u16::MAX as usize, 1024).ok()?;
            gpus.extend(idx.values.into_iter().filter_map(|i| u32::try_from(i).ok()));
        }
        gpus.sort_unstable();
        gpus.dedup();
        return Some(gpus);
    }
    None
}

/// `text` split at `sep` where it is not inside a `(…)` (or `[…]`) pair.
fn split_outside(text: &str, sep: char, (open, close): (char, char)) -> Vec<&str> {
    let (mut parts, mut depth, mut from) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth = depth.saturating_sub(1);
        } else if c == sep && depth == 0 {
            parts.push(&text[from..i]);
            from = i + 1;
        }
    }
    parts.push(&text[from..]);
    parts
}

/// Whether Slurm's host list `list` (`vm`, `node[1-3,5]`, `gpu[01-16]`, `a1,b[2-3]`)
/// holds `name`.
pub fn hostlist_has(list: &str, name: &str) -> bool {
    split_outside(list, ',', ('[', ']'))
        .into_iter()
        .any(|item| host_matches(item, name))
}

/// Whether one host list item (`prefix[ranges]rest`, any number of bracket groups)
/// names `name`; a range's lower bound written with leading zeros pads every number
/// of it to its width.
fn host_matches(item: &str, name: &str) -> bool {
    let Some((prefix, after)) = item.split_once('[') else {
        return item == name;
    };
    let Some((ranges, rest)) = after.split_once(']') else {
        return false;
    };
    let Some(tail) = name.strip_prefix(prefix) else {
        return false;
    };
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    // Where the rest of the item starts with a digit the number's end is ambiguous:
    // every split is tried.
    (1..=digits).any(|len| {
        let (number, left) = tail.split_at(len);
        let Ok(value) = number.parse::<u64>() else {
            return false;
        };
        ranges.split(',').any(|range| {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            let (Ok(l), Ok(h)) = (lo.parse::<u64>(), hi.parse::<u64>()) else {
                return false;
            };
            let width = if lo.len() > 1 && lo.starts_with('0') {
                lo.len()
            } else {
                0
            };
            let written = if width > 0 {
                number.len() == width
            } else {
                number.len() == 1 || !number.starts_with('0')
            };
            written && (l..=h).contains(&value)
        }) && host_matches(rest, left)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scontrol show job -d` of `srun -n2 --gpus-per-task=1` (Slurm 22.05, this
    /// project's test cluster), and of a two-node job with typed GPUs and another gres.
    const ONE: &str = "JobId=12 JobName=bash\n   NumNodes=1 NumCPUs=1 NumTasks=2\n   JOB_GRES=gpu:2\n     Nodes=vm CPU_IDs=0 Mem=0 GRES=gpu:2(IDX:0-1)\n   MinCPUsNode=1\n";
    const TWO: &str = "JobId=7\n     Nodes=gpu[01-02] CPU_IDs=0-3 Mem=0 GRES=gpu:a100:2(IDX:1,3),nic:1(IDX:0)\n     Nodes=gpu03 CPU_IDs=0-1 Mem=0 GRES=gpu:a100:1(IDX:2)\n";

    #[test]
    fn the_jobs_gpus_on_this_node() {
        assert_eq!(job_gpus_on(ONE, "vm"), Some(vec![0, 1]));
        assert_eq!(job_gpus_on(ONE, "vm2"), None);
        assert_eq!(job_gpus_on(TWO, "gpu02"), Some(vec![1, 3]));
        assert_eq!(job_gpus_on(TWO, "gpu03"), Some(vec![2]));
        assert_eq!(job_gpus_on(TWO, "gpu3"), None, "padded to two digits");
        // A node with no GPUs of the job: an empty list, not unknown.
        let none = "     Nodes=n1 CPU_IDs=0 Mem=0 GRES=\n";
        assert_eq!(job_gpus_on(none, "n1"), Some(vec![]));
    }

    #[test]
    fn host_lists() {
        for (list, name, has) in [
            ("vm", "vm", true),
            ("vm", "vm1", false),
            ("node[1-3,5]", "node5", true),
            ("node[1-3,5]", "node4", false),
            ("node[1-3,5]", "node01", false),
            ("a1,b[2-3]", "b3", true),
            ("a1,b[2-3]", "a1", true),
            ("rack[1-2]-n[01-04]", "rack2-n03", true),
            ("rack[1-2]-n[01-04]", "rack2-n3", false),
            ("n[9-11]", "n10", true),
            ("n[1-2]0", "n20", true),
            ("n[", "n1", false),
        ] {
            assert_eq!(hostlist_has(list, name), has, "{list} {name}");
        }
    }

    #[test]
    fn only_a_job_id_reaches_scontrol() {
        assert_eq!(slurm_job_gpus("1;rm", "vm"), None);
        assert_eq!(slurm_job_gpus("", "vm"), None);
    }
}
