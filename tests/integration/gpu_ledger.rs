//! GPUs through real launches (SEMANTICS §9's last bullet, §13): on a shared GPU node's
//! XML loaded as this system (`HWLOC_XMLFILE`, `HWLOC_THISSYSTEM=1`) with `bind: none`,
//! concurrent jobs never get one GPU, and a job's inherited allocation (an index or a
//! UUID list) is what its tasks choose from, written back in its own words.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::{binder, shared, topology};

/// The SPR node with 4 H100s (PCI order: cuda0..cuda3 at 4e, 5f, cb, db).
const NODE: &str = "spr8480-2s-112c-smt2-snc4-4h100.xml";

const SHAPE: &str = "options:\n  bind: none\n  gpus-per-task: 1\nresources:\n  - type: machine\n";

/// A scratch directory with the shape, and a ledger and a cache of its own.
fn scratch(name: &str) -> PathBuf {
    let dir = crate::common::scratch().join(format!("gpu-ledger-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gpu.yaml"), SHAPE).unwrap();
    dir
}

/// `binder gpu.yaml -- sh -c 'echo CUDA_VISIBLE_DEVICES; sleep HOLD'` on `xml`, with
/// `env`: a job of its own (its own session), or with `args` naming a rank, a rank of the
/// job of this test's process group (this test's ledger holds no other).
fn job(dir: &Path, xml: &Path, env: &[(&str, &str)], args: &[&str], hold: &str) -> Child {
    let base = binder();
    let mut setsid = if args.is_empty() {
        let mut setsid = Command::new("setsid");
        setsid.arg(base.get_program());
        setsid
    } else {
        Command::new(base.get_program())
    };
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => setsid.env(k, v),
            None => setsid.env_remove(k),
        };
    }
    setsid
        .current_dir(crate::common::root())
        .env("HWLOC_XMLFILE", xml)
        .env("HWLOC_THISSYSTEM", "1")
        .env("BINDER_LEDGER_DIR", dir.join("ledger"))
        .env("BINDER_CACHE_DIR", dir.join("cache"))
        .env_remove("CUDA_VISIBLE_DEVICES")
        .envs(env.iter().copied())
        .args(args)
        .arg(dir.join("gpu.yaml"))
        .args([
            "--",
            "sh",
            "-c",
            "echo \"$CUDA_VISIBLE_DEVICES\"; exec sleep \"$0\"",
            hold,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setsid.spawn().unwrap()
}

/// The first line a job printed (its CUDA_VISIBLE_DEVICES), after it ends.
fn first_line(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

/// What the two ranks of one two-rank job print, started at once.
fn two_ranks(dir: &Path, xml: &Path, env: &[(&str, &str)]) -> Vec<String> {
    let ranks: Vec<Child> = (0..2)
        .map(|r| {
            let rank = r.to_string();
            let args = ["--local-rank", &rank, "--local-size", "2"];
            job(dir, xml, env, &args, "1")
        })
        .collect();
    ranks.into_iter().map(first_line).collect()
}

#[test]
fn concurrent_jobs_never_get_one_gpu() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, NODE);
    let dir = scratch("two");
    // Four jobs started at once on four GPUs: each its own, whatever the order.
    let jobs: Vec<Child> = (0..4).map(|_| job(&dir, &xml, &[], &[], "2")).collect();
    let mut got: Vec<String> = jobs.into_iter().map(first_line).collect();
    got.sort();
    assert_eq!(got, ["0", "1", "2", "3"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fifth_job_is_refused_while_four_hold_every_gpu() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, NODE);
    let dir = scratch("five");
    let mut jobs: Vec<Child> = (0..4).map(|_| job(&dir, &xml, &[], &[], "60")).collect();
    // Each of the four is bound once it has printed its GPU.
    for j in &mut jobs {
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(j.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(!line.trim().is_empty());
    }
    let fifth = job(&dir, &xml, &[], &[], "0").wait_with_output().unwrap();
    assert_eq!(fifth.status.code(), Some(125));
    let err = String::from_utf8_lossy(&fifth.stderr);
    assert!(err.contains("GPUs"), "{err}");
    for mut j in jobs {
        j.kill().unwrap();
        j.wait().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_inherited_list_is_the_jobs_pool_in_its_own_words() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, NODE);
    let dir = scratch("inherited");
    let got = two_ranks(&dir, &xml, &[("CUDA_VISIBLE_DEVICES", "2,3")]);
    assert_eq!(got, ["2", "3"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_uuid_list_keeps_its_uuids() {
    let Some(shared) = shared() else { return };
    let dir = scratch("uuid");
    // The shared XML's UUIDs are zeroed: give each GPU its own (in document order, which
    // is PCI order here: cuda0..cuda3).
    let text = std::fs::read_to_string(topology(&shared, NODE)).unwrap();
    let mut n = 0;
    let text: String = text
        .split("GPU-00000000-0000-0000-0000-000000000000")
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_owned()
            } else {
                n += 1;
                format!("GPU-{n}{n}{n}{n}aaaa-0000-0000-0000-00000000000{n}{part}")
            }
        })
        .collect();
    assert_eq!(n, 4);
    let xml = dir.join("node.xml");
    std::fs::write(&xml, text).unwrap();
    // GPU 3 (4444…) and GPU 1 (2222…, a prefix, as CUDA takes it), in the user's order.
    let env = [(
        "CUDA_VISIBLE_DEVICES",
        "GPU-4444aaaa-0000-0000-0000-000000000004,GPU-2222",
    )];
    let got = two_ranks(&dir, &xml, &env);
    // Dealt in PCI order: GPU 1 to rank 0, GPU 3 to rank 1; each named as inherited.
    assert_eq!(
        got,
        ["GPU-2222", "GPU-4444aaaa-0000-0000-0000-000000000004"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_dry_run_applies_the_inherited_list_too() {
    let Some(shared) = shared() else { return };
    let xml = topology(&shared, NODE);
    let out = crate::common::run(
        binder()
            .env("CUDA_VISIBLE_DEVICES", "2,3")
            .args(["--dry-run", "--topology"])
            .arg(&xml)
            .args([
                "--local-size",
                "2",
                "--gpus-per-task",
                "1",
                "--format",
                "json",
                "--show-env",
            ])
            .arg("shapes/bind-none.yaml"),
        0,
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let gpus: Vec<&serde_json::Value> = lines.iter().map(|l| &l["gpus"]).collect();
    assert_eq!(gpus, [&serde_json::json!([2]), &serde_json::json!([3])]);
    let busids: Vec<&str> = lines
        .iter()
        .map(|l| l["gpu_busids"][0].as_str().unwrap())
        .collect();
    assert_eq!(busids, ["0000:cb:00.0", "0000:db:00.0"]);
    let env = lines[1]["env"].to_string();
    assert!(
        env.contains("\"CUDA_VISIBLE_DEVICES\":\"3\"") || env.contains("CUDA_VISIBLE_DEVICES=3"),
        "{env}"
    );
}

/// Partial steering (#45): bob's task (CPU 4) holds GPU 0; mallory bound a process onto
/// bob's CPU afterwards and claims GPUs 1-3. Every GPU is claimed, so the plan cannot
/// avoid them all; it still avoids bob's, whose claim holds its CPU, and hands out one
/// only mallory names (before: steering was dropped whole and GPU 0 handed out).
#[test]
fn steering_gives_up_a_squatters_claim_first() {
    use binder_core::envelope::Envelope;
    use binder_core::identity::{job::JobId, Identity};
    use binder_core::launch::job::JobSpec;
    use binder_core::launch::ledgered::{Avoid, Planner};
    use binder_core::launch::line::Requests;
    use binder_core::ledger::{Claim, Holder, Scan, FORMAT};
    use binder_core::view::Packing;
    use binder_host::around::{HostPlanner, Refusal};
    use binder_plan::gpu::Grant;
    use binder_plan::shape::Shape;
    use binder_plan::topology::Source;

    let Some(shared) = shared() else { return };
    let xml = topology(&shared, NODE);
    let shape = Shape::from_yaml(SHAPE, "s.yaml").unwrap();
    let none = |_: &str| None;
    let loader = Box::new(move |s: &Shape| {
        binder_host::for_shape(s, &Source::Xml(xml.clone()), None).map_err(Refusal::from)
    });
    let mut planner: HostPlanner<'_, Refusal> =
        HostPlanner::new(&shape, Grant::EVERY, &none, loader);
    let spec = JobSpec::new(
        "s.yaml",
        SHAPE,
        &Requests::default(),
        None,
        &none,
        Envelope::allowed(),
    );
    let identity = Identity::given(0, 1);
    let job = spec.task(&identity);
    let holder = |owner: u32, pid: u32, start: u64, gpus: &[&str]| Holder {
        owner,
        claim: Claim {
            format: FORMAT,
            job: JobId(format!("slurm:{pid}.0")),
            rank: 0,
            size: 1,
            pid,
            start,
            cpus: vec![4],
            gpus: gpus.iter().map(|g| g.to_string()).collect(),
            pack: Packing::Fill,
            unit: "core".into(),
            places: 1,
            pidns: 0,
        },
        cpus: vec![4],
        confirmed: true,
    };
    let (bob, mallory) = (
        "0000:4e:00.0",
        ["0000:5f:00.0", "0000:cb:00.0", "0000:db:00.0"],
    );
    let mut scan = Scan::new(1000);
    scan.holders = vec![
        holder(1001, 10, 100, &[bob]),
        holder(1002, 20, 200, &mallory),
    ];
    scan.steer_gpus = std::iter::once(bob)
        .chain(mallory)
        .map(String::from)
        .collect();
    let (views, _) = planner
        .around(&job, &scan, &Avoid::default(), &mut Vec::new())
        .unwrap_or_else(|Refusal(why)| panic!("{why}"));
    let gpus: Vec<&str> = views[0].gpus.iter().map(|g| g.busid.as_str()).collect();
    assert_eq!(gpus.len(), 1, "{gpus:?}");
    assert_ne!(
        gpus[0], bob,
        "bob's GPU handed out while mallory's claims sit on his CPU"
    );
    assert!(mallory.contains(&gpus[0]), "{gpus:?}");
}
