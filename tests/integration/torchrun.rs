//! torchrun / torch elastic workers as ranks of one job (#61, SEMANTICS §9's ML
//! launchers): an agent starts LOCAL_WORLD_SIZE workers, each in a session of its own,
//! with LOCAL_RANK, LOCAL_WORLD_SIZE, RANK, WORLD_SIZE and TORCHELASTIC_RUN_ID (`none`,
//! torchrun's default, shared by every job that does not name its rendezvous). 23e2c73
//! read none of it: every worker planned as rank 0 of 1.

use std::process::Command;

use crate::common;

/// What each worker of an agent printed (`CUDA_VISIBLE_DEVICES cpus`), by local rank:
/// a `sh` agent on this host's 2-package XML (tests/integration/gpu_node.rs) starts `n`
/// workers with `setsid`, each `binder SHAPE -- PROBE`, and waits for them.
fn agent(n: usize, shape: &str, agent_env: &[(&str, &str)]) -> Vec<String> {
    let base = common::binder();
    let exe = base.get_program().to_string_lossy().into_owned();
    let mut script = String::new();
    for k in 0..n {
        script.push_str(&format!(
            "LOCAL_RANK={k} RANK={k} setsid {exe} {shape} -- sh -c 'sleep 0.3; echo \"$LOCAL_RANK $CUDA_VISIBLE_DEVICES $(sed -n \"s/^Cpus_allowed_list:[[:space:]]*//p\" /proc/self/status)\"' > \"$OUT/{k}\" 2>&1 &\n"
        ));
    }
    script.push_str("wait\n");
    let out = common::scratch().join(format!("torchrun-{n}-{}", agent_env.len()));
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    let mut cmd = Command::new("sh");
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let status = cmd
        .args(["-c", &script])
        .current_dir(common::root())
        .env("OUT", &out)
        .env("HWLOC_XMLFILE", super::gpu_node::node_xml())
        .env("HWLOC_THISSYSTEM", "1")
        .env("BINDER_LEDGER_DIR", common::private_ledger())
        .env("BINDER_CACHE", "off")
        .env("LOCAL_WORLD_SIZE", n.to_string())
        .env("WORLD_SIZE", n.to_string())
        .env("TORCHELASTIC_RUN_ID", "none")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .envs(agent_env.iter().copied())
        .status()
        .unwrap();
    assert!(status.success());
    (0..n)
        .map(|k| {
            let text = std::fs::read_to_string(out.join(k.to_string())).unwrap();
            assert!(
                text.starts_with(&format!("{k} ")),
                "worker {k} did not run: {text}"
            );
            text.trim().to_owned()
        })
        .collect()
}

#[test]
fn two_workers_take_their_own_gpu_and_cpus() {
    if !common::two_cpus() {
        return;
    }
    // The agent was given GPUs 0 and 2 (one per package): worker 0 takes GPU 0 next to
    // cpu 0, worker 1 GPU 2 next to cpu 1.
    let got = agent(2, "gpu-local", &[("CUDA_VISIBLE_DEVICES", "0,2")]);
    assert_eq!(got, ["0 0 0", "1 2 1"]);
}

#[test]
fn four_workers_get_four_distinct_gpus() {
    if !common::two_cpus() {
        return;
    }
    // Four workers on four GPUs, one each (this host has 2 cpus, so `bind: none`; the
    // dry-run below checks cpus on a 4-GPU node).
    let shape = common::scratch().join("torch-gpus.yaml");
    std::fs::write(
        &shape,
        "options:\n  bind: none\n  gpus-per-task: 1\nresources:\n  - type: machine\n",
    )
    .unwrap();
    let got = agent(4, shape.to_str().unwrap(), &[]);
    let gpus: Vec<&str> = got
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap_or(""))
        .collect();
    assert_eq!(gpus, ["0", "1", "2", "3"], "{got:?}");
}

#[test]
fn each_worker_plans_its_own_rank_on_a_four_gpu_node() {
    let Some(shared) = common::shared() else {
        return;
    };
    if !common::require_tool("hwloc-calc", "hwloc-calc (the expected cores)") {
        return;
    }
    // spr8480 with 4 H100s, one per SNC domain of 14 cores: worker k gets GPU k (CUDA's k)
    // and the cores hwloc-calc says are near it (`os=cudaK --intersect core`).
    let xml = common::topology(&shared, "spr8480-2s-112c-smt2-snc4-4h100.xml");
    let mut seen: Vec<Vec<usize>> = Vec::new();
    for k in 0..4 {
        let out = common::binder()
            .args(["--dry-run", "--format", "json", "--topology"])
            .arg(&xml)
            .arg("gpu-local")
            .env("LOCAL_RANK", k.to_string())
            .env("LOCAL_WORLD_SIZE", "4")
            .env("RANK", (4 + k).to_string())
            .env("TORCHELASTIC_RUN_ID", "none")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rank = text
            .lines()
            .find(|l| l.starts_with("{\"local_rank\""))
            .expect("a rank line");
        let value: serde_json::Value = serde_json::from_str(rank).unwrap();
        assert_eq!(value["local_rank"], k);
        assert_eq!(value["local_size"], 4);
        let cpus: Vec<usize> = value["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap() as usize)
            .collect();
        let near = Command::new("hwloc-calc")
            .arg("--input")
            .arg(&xml)
            .args([&format!("os=cuda{k}"), "--intersect", "core"])
            .output()
            .unwrap();
        let near: Vec<String> = String::from_utf8_lossy(&near.stdout)
            .trim()
            .split(',')
            .map(|c| format!("core:{c}"))
            .collect();
        let objects: Vec<&str> = value["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o.as_str().unwrap())
            .collect();
        assert_eq!(objects, near, "worker {k}");
        assert_eq!(value["gpus"], serde_json::json!([k]), "worker {k}");
        assert_eq!(
            value["gpu_ids"],
            serde_json::json!([k.to_string()]),
            "worker {k}"
        );
        for other in &seen {
            assert!(cpus.iter().all(|c| !other.contains(c)), "shared cpus");
        }
        seen.push(cpus);
    }
}

#[test]
fn local_rank_alone_is_no_launcher() {
    // A script's own LOCAL_RANK (no TORCHELASTIC_RUN_ID): not torchrun's, so no identity
    // is read from it.
    let out = common::binder()
        .args(["--dry-run", "--verbose", "cores-packed"])
        .env("LOCAL_RANK", "3")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("torchrun"), "{err}");
}
