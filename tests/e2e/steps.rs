//! One job, many fronts (SEMANTICS §4.2) under the SPANK plugin with a site's
//! `default=`, as sites run it: an `sbatch` script whose batch shell is never bound and
//! whose plugin, wrapper, plain and opted-out steps each get what they asked for;
//! `sbatch --binder`; `--binder=off`; bindings srun derives from `--hint` or
//! `--ntasks-per-core`, which are not a typed `--cpu-bind`; GPUs Slurm gives per task.

use std::collections::BTreeMap;
use std::process::Output;

use super::{promised, Slurm};
use crate::common;

/// Prints `tag|step|rank|affinity|BINDER_CPUS|CUDA_VISIBLE_DEVICES` from inside a task.
const TAGGED: &str = r#"printf '%s|%s|%s|%s|%s|%s\n' "$TAG" "$SLURM_STEP_ID" "$SLURM_PROCID" "$(grep Cpus_allowed_list /proc/self/status | cut -f2)" "$BINDER_CPUS" "$CUDA_VISIBLE_DEVICES""#;

/// `tag -> rank -> [step, affinity, BINDER_CPUS, CUDA_VISIBLE_DEVICES]`.
type Seen = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn seen(text: &str) -> Seen {
    let mut out = Seen::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('|').collect();
        if f.len() == 6 {
            out.entry(f[0].to_owned()).or_default().insert(
                f[2].to_owned(),
                f[1..].iter().map(|s| s.to_string()).collect(),
            );
        }
    }
    out
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `script` with `sbatch --wait ARGS` and returns its output file.
fn sbatch(slurm: &Slurm, ledger: &std::path::Path, args: &[&str], script: &str) -> String {
    let dir = common::scratch().join(format!("steps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("job.sh");
    std::fs::write(
        &file,
        script.replace("$PROBE", &dir.join("probe.sh").display().to_string()),
    )
    .unwrap();
    std::fs::write(dir.join("probe.sh"), format!("{TAGGED}\n")).unwrap();
    let out = dir.join("job.out");
    let _ = std::fs::remove_file(&out);
    let mut cmd = std::process::Command::new("sbatch");
    let status = common::hermetic(&mut cmd)
        .env("SLURM_CONF", &slurm.conf)
        .env("BINDER_LEDGER_DIR", ledger)
        // A stale variable from the shell that submits: never a task's.
        .env("BINDER_CPUS", "7")
        .args(["--wait", "-o"])
        .arg(&out)
        .args(args)
        .arg(&file)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    eprintln!(
        "sbatch {args:?}:\n{text}\n{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    text
}

/// The batch script: its own shell, then a plugin step, a wrapper step, a plain step and
/// an opted-out step, each tagged (`$PROBE`: the probe's file, written beside it).
fn script() -> String {
    let binder = common::binder_exe();
    format!(
        "#!/bin/sh\nexport TAG\nTAG=batch sh $PROBE\n\
         TAG=plugin srun -n2 --binder=cores-packed sh $PROBE\n\
         TAG=wrapper srun -n2 {binder} shapes/cores-packed.yaml -- sh $PROBE\n\
         TAG=plain srun -n2 sh $PROBE\n\
         TAG=off srun -n2 --binder=off sh $PROBE\n"
    )
}

/// Under `default=cores-packed` on a 2-CPU node: the batch shell, the steps.
pub(super) fn batch_and_steps(slurm: &Slurm, constrain: &str) {
    if !common::two_cpus() {
        return;
    }
    let ledger = common::private_ledger();
    let want = promised("shapes/cores-packed.yaml", 2);
    let out = sbatch(slurm, &ledger, &["-n2"], &script());
    let s = seen(&out);
    let what = format!("ConstrainCores={constrain}: sbatch -n2 under default=\n{out}");
    // The batch shell is not a task: the job's CPUs, and no stale BINDER_CPUS.
    let batch = &s["batch"]["0"];
    assert_eq!(batch[2], "0-1", "the batch shell was bound: {what}");
    assert_eq!(batch[3], "", "BINDER_CPUS reached the batch shell: {what}");
    // Plugin, wrapper and the default on a plain step bind each rank as the dry-run says.
    for tag in ["plugin", "wrapper", "plain"] {
        let ranks = s
            .get(tag)
            .unwrap_or_else(|| panic!("no {tag} step: {what}"));
        assert_eq!(ranks.len(), 2, "{tag}: {what}");
        for (rank, f) in ranks {
            let want = &want[&rank.parse::<usize>().unwrap()];
            assert_eq!(&f[2], want, "{tag} rank {rank} affinity: {what}");
            assert_eq!(&f[3], want, "{tag} rank {rank} BINDER_CPUS: {what}");
        }
    }
    // --binder=off: Slurm's binding, none of binder's variables.
    for (rank, f) in &s["off"] {
        assert_eq!(f[3], "", "off rank {rank}: {what}");
    }
    assert!(!out.contains("binder:"), "a refusal or warning: {what}");

    // sbatch --binder binds the job's steps (Slurm hands the option on), not the batch
    // shell; the wrapper beside it is one refusal naming both.
    let out = sbatch(slurm, &ledger, &["-n2", "--binder=cores-packed"], &script());
    let s = seen(&out);
    let what = format!("ConstrainCores={constrain}: sbatch --binder\n{out}");
    assert_eq!(
        s["batch"]["0"][2], "0-1",
        "the batch shell was bound: {what}"
    );
    for (rank, f) in &s["plain"] {
        assert_eq!(&f[3], &want[&rank.parse::<usize>().unwrap()], "{what}");
    }
    assert!(!s.contains_key("wrapper"), "the wrapper ran: {what}");
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("binder: ")).collect();
    assert!(
        !lines.is_empty()
            && lines
                .iter()
                .all(|l| l.contains("--binder=cores-packed") && l.contains("wrapper")),
        "{what}"
    );

    // Bindings srun derives from --hint / --ntasks-per-core are not a typed --cpu-bind.
    for derived in [
        "--hint=nomultithread",
        "--ntasks-per-core=1",
        "--threads-per-core=1",
    ] {
        let out = super::spank::srun(&slurm.conf, &ledger, &["-n1", derived])
            .env("TAG", "derived")
            .args(["--binder=cores-packed", "sh", "-c", TAGGED])
            .output()
            .unwrap();
        let all = text(&out);
        assert!(out.status.success(), "srun {derived} --binder: {all}");
        let f = &seen(&all)["derived"]["0"];
        assert!(!f[3].is_empty() && f[2] == f[3], "srun {derived}: {all}");
    }
}

/// GPUs Slurm gives each task (`--gpus-per-task`, `--gpu-bind`): the job's GPUs on this
/// node are the step's; binder plans within them and sets each task's devices. Four fake
/// GPUs in Slurm; the shared g4dn XML's T4s in hwloc (devices only: the XML is not this
/// host's CPUs), then a 4-GPU XML of this host.
pub(super) fn gpus_per_task(slurm: &Slurm) {
    let Some(shared) = common::shared() else {
        return;
    };
    let xml = common::topology(&shared, "aws-g4dn-metal-2s-48c-smt2-8t4.xml");
    let ledger = common::private_ledger();
    for gpus in [
        &["--gpus-per-task=1"][..],
        &["--gpus=2", "--gpu-bind=single:1"],
        &["--gpus=2", "--gpu-bind=map_gpu:1,0"],
    ] {
        let out = super::spank::srun(&slurm.conf, &ledger, &["-n2", "--overcommit"])
            .args(gpus)
            .env("HWLOC_XMLFILE", &xml)
            .env("HWLOC_THISSYSTEM", "1")
            .env("TAG", "gpu")
            .args(["--binder=gpu-devices-only", "sh", "-c", TAGGED])
            .output()
            .unwrap();
        let all = text(&out);
        assert!(out.status.success(), "srun {gpus:?}: {all}");
        let s = seen(&all);
        let devices: Vec<&str> = s["gpu"].values().map(|f| f[4].as_str()).collect();
        // One T4 each, in PCI order, as binder's plan of the step's two GPUs says.
        assert_eq!(devices, ["0", "1"], "srun {gpus:?}: {all}");
        eprintln!("srun {gpus:?} --binder=gpu-devices-only: {devices:?}");
    }

    // The wrapper, whose tasks inherit only their own GPU: inside a batch job
    // (SLURM_JOB_GPUS names the step's two) it plans with both, as the plugin does.
    let binder = common::binder_exe();
    let mut script = format!(
        "#!/bin/sh\nexport HWLOC_XMLFILE={} HWLOC_THISSYSTEM=1 TAG\n",
        xml.display()
    );
    let variants = [
        "--gpus-per-task=1",
        "--gpu-bind=single:1",
        "--gpu-bind=map_gpu:1,0",
    ];
    for (i, gpus) in variants.iter().enumerate() {
        script.push_str(&format!(
            "TAG=w{i} srun -n2 --overcommit {gpus} {binder} shapes/gpu-devices-only.yaml -- sh $PROBE\n"
        ));
    }
    let out = sbatch(
        slurm,
        &ledger,
        &["-n2", "--overcommit", "--gpus=2"],
        &script,
    );
    let s = seen(&out);
    for (i, gpus) in variants.iter().enumerate() {
        let devices: Vec<&str> = s
            .get(&format!("w{i}"))
            .map(|t| t.values().map(|f| f[4].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(devices, ["0", "1"], "wrapper, srun {gpus} in sbatch: {out}");
    }
    assert!(!out.contains("binder:"), "{out}");

    // A batch job with more GPUs than the step (`--gpus=4`, steps of 2 tasks given a GPU
    // each): a CPU-only shape runs (its plan does not depend on GPUs); a GPU shape takes
    // the step's GPUs to be the two consecutive job GPUs around each task's own, the
    // same window from both tasks, and runs (#61). A step Slurm dealt by `--gpu-bind`
    // (`map_gpu:1,0`), not in rank order: a task whose own GPU sits at no window's place
    // for its rank is refused, and one that joins the other's plan is refused too when
    // that plan gives it a GPU Slurm did not give it (a GPU outside the step); each in one
    // line naming the ways out that work inside this batch job, not
    // "run the step there".
    let mut script = format!(
        "#!/bin/sh\nexport HWLOC_XMLFILE={} HWLOC_THISSYSTEM=1 TAG\n",
        xml.display()
    );
    script.push_str(&format!(
        "TAG=cpu srun -n2 --overcommit --gpus-per-task=1 {binder} shapes/bind-none.yaml -- sh $PROBE\n\
         TAG=gpu srun -n2 --overcommit --gpus-per-task=1 {binder} shapes/gpu-devices-only.yaml -- sh $PROBE\n\
         TAG=map srun -n2 --overcommit --gpus=2 --gpu-bind=map_gpu:1,0 {binder} shapes/gpu-devices-only.yaml -- sh $PROBE\n"
    ));
    let out = sbatch(
        slurm,
        &ledger,
        &["-n2", "--overcommit", "--gpus=4"],
        &script,
    );
    let s = seen(&out);
    assert_eq!(s.get("cpu").map(BTreeMap::len), Some(2), "{out}");
    let devices: Vec<&str> = s
        .get("gpu")
        .map(|t| t.values().map(|f| f[4].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(
        devices,
        ["0", "1"],
        "--gpus-per-task=1 in sbatch --gpus=4: {out}"
    );
    let refusals: Vec<&str> = out.lines().filter(|l| l.starts_with("binder:")).collect();
    assert!(!refusals.is_empty(), "{out}");
    // A task of it that ran has its own GPU, never the other's.
    let map: Vec<&str> = s
        .get("map")
        .map(|t| t.values().map(|f| f[4].as_str()).collect())
        .unwrap_or_default();
    assert!(map.len() < 2 || map[0] != map[1], "{out}");
    for line in refusals {
        assert!(
            line.contains("srun --gpus=4") && line.contains("--binder=SHAPE"),
            "{line}"
        );
        assert!(!line.contains("run the step there"), "{line}");
    }

    // Outside one (`srun` making its own allocation), Slurm says how many GPUs the step
    // has here (2 of the node's 4) but not which: binder asks `scontrol show job -d`
    // once, and each task gets the GPU the plan gives its rank and, gpu-local, the
    // core beside it (a 4-GPU XML of this host: its real CPUs, every GPU local to all).
    let Some(host4) = common::host_xml_with_gpus(4) else {
        return;
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    for shape in ["gpu-local", "gpu-devices-only"] {
        // A CPU per task (no --overcommit): gpu-local gives each its own core.
        let n = if cpus >= 2 { "-n2" } else { "-n1" };
        let out = super::spank::srun(&slurm.conf, &ledger, &[n])
            .args([
                "--gpus-per-task=1",
                binder,
                &format!("shapes/{shape}.yaml"),
                "--",
            ])
            .args(["sh", "-c", TAGGED])
            .env("HWLOC_XMLFILE", &host4)
            .env("HWLOC_THISSYSTEM", "1")
            .env("TAG", shape)
            .output()
            .unwrap();
        let all = text(&out);
        assert!(
            out.status.success(),
            "srun --gpus-per-task=1 {shape}: {all}"
        );
        assert!(!all.contains("binder:"), "{all}");
        let s = seen(&all);
        let tasks: Vec<(&str, &str)> = s[shape]
            .values()
            .map(|f| (f[2].as_str(), f[4].as_str()))
            .collect();
        eprintln!("wrapper, srun -n2 --gpus-per-task=1 {shape}: {tasks:?}");
        // The job's GPUs are Slurm's 0 and 1: one each, in rank order.
        let devices: Vec<&str> = tasks.iter().map(|t| t.1).collect();
        assert_eq!(devices, ["0", "1"][..tasks.len()], "{shape}: {all}");
        assert_eq!(tasks.len(), cpus.min(2), "{all}");
        if shape == "gpu-local" && tasks.len() == 2 {
            // Every GPU is local to the whole machine: the step's CPUs split in two,
            // one part each, disjoint.
            let a = binder_core::procfs::parse_list(tasks[0].0).unwrap();
            let b = binder_core::procfs::parse_list(tasks[1].0).unwrap();
            assert!(
                !a.is_empty() && !b.is_empty() && a.iter().all(|c| !b.contains(c)),
                "{all}"
            );
            assert_eq!(a.len(), b.len(), "{all}");
        }
    }
    std::fs::remove_file(&host4).ok();
}

/// `srun --multi-prog` whose two contexts run different shapes through the wrapper, each a
/// command that ends at once (so one context's rank may be gone before the other starts):
/// refused every time (50 runs) with the one line naming the remedy, never both run on one CPU;
/// two contexts of one shape both run, each on its own CPU. Also run under a site
/// `default=`, which reads each task's own line of the file and stays out of the wrapper's.
pub(super) fn multi_prog_contexts(slurm: &Slurm) {
    let ledger = common::private_ledger();
    let dir = common::scratch().join(format!("multi-prog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("multi.conf");
    let binder = common::binder_exe();
    // Runs `srun -n2 --multi-prog` of the file whose contexts run `shapes` through the
    // wrapper, with `command`, `runs` times; each run's exit and output.
    let multi = |shapes: [&str; 2], command: &str, runs: usize| {
        std::fs::write(
            &conf,
            format!(
                "0 {binder} shapes/{}.yaml -- {command}\n1 {binder} shapes/{}.yaml -- {command}\n",
                shapes[0], shapes[1]
            ),
        )
        .unwrap();
        (0..runs)
            .map(|_| {
                let out = super::spank::srun(&slurm.conf, &ledger, &["-n2", "--multi-prog"])
                    .arg(&conf)
                    .output()
                    .unwrap();
                (out.status.success(), text(&out))
            })
            .collect::<Vec<_>>()
    };
    for (run, (ran, all)) in multi(["cores-packed", "cores-scatter"], "true", 50)
        .into_iter()
        .enumerate()
    {
        assert!(!ran, "run {run}: both contexts ran: {all}");
        assert!(
            all.lines().any(|l| l.starts_with("binder: local rank ")
                && l.contains("another shape")
                && l.contains("`ranks:` rule")),
            "run {run}: {all}"
        );
    }
    // Contexts of one shape: one plan, each rank on its own CPUs (under a default too, which
    // stays out of a context that runs the wrapper: 23e2c73 refused 11 of 12 such runs).
    let probe = "sh -c 'echo \"cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)\"'";
    for (run, (ran, all)) in multi(["cores-packed", "cores-packed"], probe, 10)
        .into_iter()
        .enumerate()
    {
        assert!(ran, "run {run}: {all}");
        let sets: Vec<Vec<usize>> = all
            .lines()
            .filter_map(|l| l.strip_prefix("cpus "))
            .map(|c| {
                binder_core::cpulist::parse_ranges(c, 1 << 16, 1 << 16)
                    .map_or_else(|_| Vec::new(), |r| r.values)
            })
            .collect();
        assert_eq!(sets.len(), 2, "run {run}: {all}");
        assert!(
            sets.iter().all(|s| !s.is_empty()) && !sets[0].iter().any(|c| sets[1].contains(c)),
            "run {run}: two contexts share a CPU: {all}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
