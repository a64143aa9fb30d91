//! Slurm's local size: entry `SLURM_NODEID` of the step's compressed tasks-per-node list
//! (`2(x3),1`), read without expanding it.

use super::{clip, read, Env, IdentityError, Launcher, MAX_LOCAL_SIZE};

/// Slurm's local size: entry SLURM_NODEID of the step's compressed tasks-per-node list
/// (the job's list stands in for a batch step, which has no step list).
pub(super) fn local_size(env: &dyn Env, vars: &mut Vec<String>) -> Result<usize, IdentityError> {
    let slurm_error = |message: String| IdentityError {
        launcher: Some(Launcher::Slurm),
        message,
    };
    let node = read(env, vars, Launcher::Slurm, "SLURM_NODEID")?.unwrap_or(0);
    let (name, value) = ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"]
        .into_iter()
        .find_map(|name| env.var(name).map(|v| (name, v)))
        .ok_or_else(|| {
            slurm_error("SLURM_LOCALID is set but SLURM_STEP_TASKS_PER_NODE is not".into())
        })?;
    let shown = clip(&value);
    vars.push(format!("{name}={shown}"));
    tasks_on_node(&value, node).map_err(|why| slurm_error(format!("{name}={shown:?}: {why}")))
}

/// The entry for `node` of Slurm's compressed tasks-per-node list: `2(x3),1` lists
/// `[2, 2, 2, 1]`, so node 3 has 1 task. Counts above [`MAX_LOCAL_SIZE`] are refused.
pub(crate) fn tasks_on_node(text: &str, node: usize) -> Result<usize, String> {
    let mut first_node: u64 = 0;
    let mut found = None;
    for part in text.trim().split(',') {
        let (count, repeat) = match part.split_once("(x") {
            Some((count, rest)) => {
                let repeat = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("`{}` lacks its closing `)`", clip(part)))?;
                (count, repeat)
            }
            None => (part, "1"),
        };
        let parse = |s: &str| -> Result<u64, String> {
            s.parse()
                .map_err(|_| format!("`{}` is not `N` or `N(xM)`", clip(part)))
        };
        let (count, repeat) = (parse(count)?, parse(repeat)?);
        if count == 0 || repeat == 0 {
            return Err(format!("`{}` has a zero", clip(part)));
        }
        if count > MAX_LOCAL_SIZE as u64 {
            return Err(format!(
                "{count} tasks on a node is more than binder plans for ({MAX_LOCAL_SIZE})"
            ));
        }
        let next = first_node.saturating_add(repeat);
        if found.is_none() && (first_node..next).contains(&(node as u64)) {
            found = Some(count as usize);
        }
        first_node = next;
    }
    found.ok_or_else(|| format!("SLURM_NODEID={node} but the list has {first_node} node(s)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_forms() {
        let list = "2(x3),1";
        let nodes: Vec<usize> = (0..4).map(|n| tasks_on_node(list, n).unwrap()).collect();
        assert_eq!(nodes, [2, 2, 2, 1]);
        assert_eq!(tasks_on_node("4", 0), Ok(4));
        assert_eq!(tasks_on_node("1,3(x2)", 2), Ok(3));
        assert!(tasks_on_node(list, 4)
            .unwrap_err()
            .contains("has 4 node(s)"));
        for bad in ["", "2(x3", "x", "2(xa)", "0", "2(x0)", "2,,1", "-1"] {
            assert!(tasks_on_node(bad, 0).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn huge_lists_cost_nothing() {
        // Four billion nodes are never expanded (this used to allocate 32 GB).
        assert_eq!(tasks_on_node("1(x4000000000)", 3_999_999_999), Ok(1));
        assert_eq!(tasks_on_node("1(x18446744073709551615),2", 0), Ok(1));
        let e = tasks_on_node("100000(x2)", 0).unwrap_err();
        assert!(e.contains("more than binder plans for (65536)"), "{e}");
        let e = tasks_on_node("99999999999999999999999", 0).unwrap_err();
        assert!(e.contains("is not `N` or `N(xM)`"), "{e}");
    }
}
