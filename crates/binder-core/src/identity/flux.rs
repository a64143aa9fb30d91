//! Flux's local size: Flux exports none, so a one-node job's is its size and otherwise
//! the job's RFC 34 task map says how many tasks share this task's node. The map is read
//! arithmetically, never expanded: its numbers come from outside.

use super::{read, Env, IdentityError, Launcher, MAX_LOCAL_SIZE};

/// Flux exports no local size. A one-node job's local size is its size; otherwise the job's
/// RFC 34 task map (`flux job taskmap`) says how many tasks share this task's node.
pub(super) fn local_size(env: &dyn Env, vars: &mut Vec<String>) -> Result<usize, IdentityError> {
    let flux_error = |message: String| IdentityError {
        launcher: Some(Launcher::Flux),
        message,
    };
    let nnodes = read(env, vars, Launcher::Flux, "FLUX_JOB_NNODES")?;
    let size = read(env, vars, Launcher::Flux, "FLUX_JOB_SIZE")?;
    if let (Some(1), Some(size)) = (nnodes, size) {
        return Ok(size);
    }
    let task = read(env, vars, Launcher::Flux, "FLUX_TASK_RANK")?
        .ok_or_else(|| flux_error("FLUX_TASK_LOCAL_ID is set but FLUX_TASK_RANK is not".into()))?;
    let jobid = env
        .var("FLUX_JOB_ID")
        .ok_or_else(|| flux_error("a multi-node job without FLUX_JOB_ID".into()))?;
    let map = env.flux_taskmap(&jobid).map_err(flux_error)?;
    tasks_on_node_of(&map, task)
        .map_err(|why| flux_error(format!("task map {:?}: {why}", super::clip(&map))))
}

/// How many tasks share the node of `task` in an RFC 34 task map: each block
/// `[nodeid, nnodes, ppn, repeat]` puts `ppn` tasks on each of nodes `nodeid ..
/// nodeid+nnodes`, `repeat` times over. `flux job taskmap` prints the bare array
/// (`[[0,2,2,1]]`, since flux-core 0.50 at least); the object form
/// `{"version":1,"map":[...]}` of RFC 34's examples is read too.
pub(crate) fn tasks_on_node_of(map: &str, task: usize) -> Result<usize, String> {
    #[derive(serde::Deserialize)]
    struct Versioned {
        version: u32,
        map: Vec<[u64; 4]>,
    }
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum TaskMap {
        Bare(Vec<[u64; 4]>),
        Versioned(Versioned),
    }
    if map.len() > 1 << 20 {
        return Err("longer than 1 MiB".into());
    }
    let parsed: TaskMap = serde_json::from_str(map.trim())
        .map_err(|_| "not an RFC 34 task map (`[[nodeid,nnodes,ppn,repeat],...]`)".to_owned())?;
    let parsed = match parsed {
        TaskMap::Bare(map) => Versioned { version: 1, map },
        TaskMap::Versioned(v) if v.version != 1 => {
            return Err(format!("task map version {} is not 1", v.version))
        }
        TaskMap::Versioned(v) => v,
    };
    if parsed.map.is_empty() {
        return Err("it is empty".into());
    }
    // Find the task's node: u128 cannot overflow on products of two u64.
    let task = task as u128;
    let mut first_task: u128 = 0;
    let mut node = None;
    for &[start, nnodes, ppn, repeat] in &parsed.map {
        let per_round = u128::from(nnodes) * u128::from(ppn);
        let block = per_round * u128::from(repeat);
        if per_round > 0 && task >= first_task && task - first_task < block {
            let within = (task - first_task) % per_round;
            node = Some(u128::from(start) + within / u128::from(ppn));
            break;
        }
        first_task = first_task.saturating_add(block);
    }
    let node = node.ok_or_else(|| format!("it has no task {task}"))?;
    let mut local: u128 = 0;
    for &[start, nnodes, ppn, repeat] in &parsed.map {
        let start = u128::from(start);
        if (start..start + u128::from(nnodes)).contains(&node) {
            local = local.saturating_add(u128::from(ppn) * u128::from(repeat));
        }
    }
    if local > MAX_LOCAL_SIZE as u128 {
        return Err(format!(
            "{local} tasks on one node is more than binder plans for ({MAX_LOCAL_SIZE})"
        ));
    }
    Ok(local as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_maps() {
        // 2 nodes × 3 tasks, then node 0 gets one more (cyclic remainder).
        let map = r#"{"version":1,"map":[[0,2,3,1],[0,1,1,1]]}"#;
        assert_eq!(tasks_on_node_of(map, 0), Ok(4));
        assert_eq!(tasks_on_node_of(map, 4), Ok(3));
        assert_eq!(tasks_on_node_of(map, 6), Ok(4));
        assert!(tasks_on_node_of(map, 7).unwrap_err().contains("no task 7"));
        assert!(tasks_on_node_of("[]", 0).is_err());
        assert!(tasks_on_node_of("{}", 0).is_err());
        // What `flux job taskmap` prints: the bare array. 2 nodes × 2 tasks, and a cyclic
        // map of 3 tasks on 2 nodes (`--taskmap=cyclic`: tasks 0, 2 on node 0).
        assert_eq!(tasks_on_node_of("[[0,2,2,1]]\n", 3), Ok(2));
        assert_eq!(tasks_on_node_of("[[0,2,1,1],[0,1,1,1]]", 2), Ok(2));
        assert_eq!(tasks_on_node_of("[[0,2,1,1],[0,1,1,1]]", 1), Ok(1));
        assert!(tasks_on_node_of(r#"{"version":2,"map":[]}"#, 0).is_err());
        // repeat: [[0,2,1,2]] = tasks 0..3 on nodes 0,1,0,1.
        let map = r#"{"version":1,"map":[[0,2,1,2]]}"#;
        assert_eq!(tasks_on_node_of(map, 3), Ok(2));
    }

    #[test]
    fn hostile_maps_are_bounded() {
        // These used to allocate 8 TB, spin forever, and overflow into local size 9.
        let e = tasks_on_node_of(r#"{"version":1,"map":[[1000000000000,1,1,1]]}"#, 0);
        assert_eq!(e, Ok(1));
        let e =
            tasks_on_node_of(r#"{"version":1,"map":[[0,1,1,1000000000000000]]}"#, 0).unwrap_err();
        assert!(e.contains("more than binder plans for"), "{e}");
        let e = tasks_on_node_of(
            r#"{"version":1,"map":[[0,1,18446744073709551615,1],[0,1,10,1]]}"#,
            0,
        )
        .unwrap_err();
        assert!(e.contains("more than binder plans for"), "{e}");
        let e = tasks_on_node_of(r#"{"version":1,"map":[[0,0,5,5],[0,1,0,3]]}"#, 0).unwrap_err();
        assert!(e.contains("no task 0"), "{e}");
    }
}
