//! Slurm as sites configure it (`TaskPlugin=task/affinity,task/cgroup`,
//! `ProctrackType=proctrack/cgroup`, with `ConstrainCores=yes` and `no`): Slurm binds every
//! task by itself (implicit auto binding), rewrites `--cpu-bind=none` to `mask_cpu` on a
//! step that does not own the node, and only a cgroup or that mask says what the step
//! owns. binder's SPANK plugin and the `binder` wrapper must bind inside the step's CPUs
//! (SEMANTICS §4.1), yield Slurm's implicit binding, and leave a typed `--cpu-bind` to
//! Slurm under a site's `default=` shape.

use std::collections::BTreeMap;
use std::process::{Command, Output, Stdio};

use super::{promised, Slurm, PROBE};
use crate::common::{self, root};

/// `srun ARGS` with this Slurm and a private ledger (`spank::srun`).
fn srun(slurm: &Slurm, ledger: &std::path::Path, args: &[&str]) -> Command {
    super::spank::srun(&slurm.conf, ledger, args)
}

/// `rank|affinity|BINDER_CPUS|BINDER_LOCAL_SIZE` by rank; the step must have succeeded.
fn probes(out: &Output, what: &str) -> BTreeMap<String, Vec<String>> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stdout}\n{stderr}");
    eprintln!("{what}:\n{stdout}{stderr}");
    stdout
        .lines()
        .filter(|l| l.matches('|').count() == 3)
        .map(|l| {
            let f: Vec<String> = l.split('|').map(str::to_owned).collect();
            (f[0].clone(), f)
        })
        .collect()
}

/// Each configuration a site runs: ConstrainCores yes and no.
#[test]
fn slurm_as_sites_run_it() {
    for constrain in ["yes", "no"] {
        let shapes = root().join("shapes");
        let config = [
            ("E2E_SLURM_TASK", "task/affinity,task/cgroup".to_owned()),
            ("E2E_SLURM_PROCTRACK", "proctrack/cgroup".to_owned()),
            ("E2E_SLURM_CONSTRAIN", constrain.to_owned()),
            ("E2E_SLURM_OVERSUBSCRIBE", "NO".to_owned()),
            ("E2E_SLURM_GPUS", "4".to_owned()),
            (
                "E2E_SPANK_ARGS",
                format!("default=cores-packed catalog={}", shapes.display()),
            ),
        ];
        let Some(slurm) = Slurm::start_with(&config) else {
            return;
        };
        site(&slurm, constrain);
        super::steps::batch_and_steps(&slurm, constrain);
        if constrain == "yes" {
            super::steps::gpus_per_task(&slurm);
        }
    }
}

fn site(slurm: &Slurm, constrain: &str) {
    let ledger = common::private_ledger();
    let shape = "shapes/cores-packed.yaml";
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);

    // The whole node, no --cpu-bind: Slurm's implicit binding yields to --binder.
    let n = cpus.to_string();
    let out = srun(slurm, &ledger, &["-n", &n])
        .args([&format!("--binder={shape}"), "sh", "-c", PROBE])
        .output()
        .unwrap();
    let seen = probes(
        &out,
        &format!("ConstrainCores={constrain}: srun -n{n} --binder"),
    );
    let want = promised(shape, cpus);
    assert_eq!(seen.len(), cpus);
    for (rank, f) in &seen {
        let rank: usize = rank.parse().unwrap();
        assert_eq!(f[1], want[&rank], "rank {rank}: affinity vs dry-run");
        assert_eq!(f[2], want[&rank], "rank {rank}: BINDER_CPUS");
    }

    // A 1-CPU step on a partial node stays on its CPU, through the plugin and through the
    // wrapper (whose --cpu-bind=none Slurm rewrites to the step's mask).
    let plugin = srun(slurm, &ledger, &["-n1", "-c1"])
        .args([&format!("--binder={shape}"), "sh", "-c", PROBE])
        .output()
        .unwrap();
    let wrapper = srun(slurm, &ledger, &["-n1", "-c1", "--cpu-bind=none"])
        .args([common::binder_exe(), shape, "--", "sh", "-c", PROBE])
        .output()
        .unwrap();
    for (out, what) in [(plugin, "plugin"), (wrapper, "wrapper")] {
        let seen = probes(
            &out,
            &format!("ConstrainCores={constrain}: 1-CPU step, {what}"),
        );
        let f = &seen["0"];
        assert!(
            !f[1].contains(['-', ',']) && f[1] == f[2],
            "{what}: a 1-CPU step bound to one CPU: {f:?}"
        );
        assert_eq!(f[3], "1", "{what}");
    }

    // The site's default=cores-packed binds a plain srun (implicit binding yields) and
    // leaves a typed --cpu-bind=cores to Slurm, which never fails.
    let plain = srun(slurm, &ledger, &["-n1", "-c1", "sh", "-c", PROBE])
        .output()
        .unwrap();
    let seen = probes(
        &plain,
        &format!("ConstrainCores={constrain}: plain srun, site default"),
    );
    assert_eq!(seen["0"][1], seen["0"][2], "the site default bound it");
    let typed = srun(
        slurm,
        &ledger,
        &["-n1", "-c1", "--cpu-bind=cores", "sh", "-c", PROBE],
    )
    .output()
    .unwrap();
    let seen = probes(
        &typed,
        &format!("ConstrainCores={constrain}: srun --cpu-bind=cores"),
    );
    let f = seen.values().next().expect("one task");
    assert_eq!(f[2], "", "Slurm's binding, not binder's: {f:?}");
    // --binder with a typed --cpu-bind is the one conflict.
    let both = srun(slurm, &ledger, &["-n1", "--cpu-bind=cores"])
        .args([&format!("--binder={shape}"), "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&both.stderr);
    assert!(
        !both.status.success() && stderr.contains("both bind"),
        "{stderr}"
    );

    if cpus >= 2 {
        nested_steps(slurm, &ledger, constrain);
        outsider_never_refuses(slurm, &ledger, constrain);
    }

    // Two concurrent 1-CPU steps (two jobs): disjoint, each on its own CPU.
    if cpus >= 2 {
        let spawn = || {
            srun(slurm, &ledger, &["-n1", "-c1"])
                .args([
                    &format!("--binder={shape}"),
                    "sh",
                    "-c",
                    &format!("{PROBE}; sleep 2"),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let a = probes(&a.wait_with_output().unwrap(), "concurrent step a");
        let b = probes(&b.wait_with_output().unwrap(), "concurrent step b");
        assert_ne!(a["0"][1], b["0"][1], "two steps on one CPU");
    }
}

/// SEMANTICS §4.3, nested steps under a site default: the enclosing step's task (a shell
/// that starts steps of its own, the `srun --pty bash` pattern) is bound by the default,
/// and a step started inside it with `--overlap` has that step as its envelope: its
/// tasks run, bound by the plugin and by the wrapper, never refused for the enclosing
/// shell's claim (on 6eb4e5b both exited 125 naming the enclosing step's own bash). The
/// inner steps say `-c1`: Slurm 25.11's srun takes the enclosing step's `-c2` otherwise
/// (more CPUs than the step has), where 22.05's does not.
fn nested_steps(slurm: &Slurm, ledger: &std::path::Path, constrain: &str) {
    let binder = common::binder_exe();
    for (what, inner) in [
        (
            "plugin",
            "srun --overlap -n2 -c1 --cpu-bind=none --binder=cores-packed sh -c \"$PROBE\""
                .to_owned(),
        ),
        (
            "wrapper",
            format!("srun --overlap -n2 -c1 {binder} shapes/cores-packed.yaml -- sh -c \"$PROBE\""),
        ),
        // No --cpu-bind of its own: the inner srun inherits the enclosing task's
        // SLURM_CPU_BIND, which is not a binding the user typed (SEMANTICS §4.3).
        (
            "plugin, inherited SLURM_CPU_BIND",
            "srun --overlap -n2 -c1 --binder=cores-packed sh -c \"$PROBE\"".to_owned(),
        ),
    ] {
        let out = srun(slurm, ledger, &["-n1", "-c2", "bash", "-c", &inner])
            .env("PROBE", PROBE)
            .output()
            .unwrap();
        let seen = probes(
            &out,
            &format!("ConstrainCores={constrain}: nested step, {what}"),
        );
        assert_eq!(seen.len(), 2, "{what}: both inner tasks ran: {seen:?}");
        let cpus: Vec<&str> = seen.values().map(|f| f[1].as_str()).collect();
        for f in seen.values() {
            assert!(
                !f[1].contains(['-', ',']) && f[1] == f[2],
                "{what}: each inner task on one CPU of the step: {seen:?}"
            );
        }
        assert_ne!(
            cpus[0], cpus[1],
            "{what}: two inner tasks on one CPU: {seen:?}"
        );
    }
}

/// SEMANTICS §4.3, the scheduler's word: another user's idle `taskset -c 0 sleep` (no
/// task of any scheduler job) on a CPU Slurm gave the step is named once and planned over:
/// `srun -n{cpus} --binder` runs every task where the dry-run puts it, as the same step
/// runs without `--binder` (on 6eb4e5b it exited 125). The launch sees every user's bound
/// tasks here (the kernel view's default, not the suite's `in-sight`).
fn outsider_never_refuses(slurm: &Slurm, ledger: &std::path::Path, constrain: &str) {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    if !common::prerequisite(common::has("setpriv"), "setpriv (util-linux)") {
        return;
    }
    // `nobody`, bound to CPU 0 (reaped below, whatever happens).
    let mut outsider = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "taskset",
            "-c",
            "0",
            "sleep",
            "60",
        ])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let n = cpus.to_string();
    let out = srun(slurm, ledger, &["-n", &n])
        .env_remove("BINDER_KERNEL_VIEW")
        .args(["--binder=cores-packed", "sh", "-c", PROBE])
        .output()
        .unwrap();
    let _ = outsider.kill();
    let _ = outsider.wait();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let seen = probes(
        &out,
        &format!("ConstrainCores={constrain}: beside nobody's taskset"),
    );
    let want = promised("shapes/cores-packed.yaml", cpus);
    assert_eq!(seen.len(), cpus, "{stderr}");
    for (rank, f) in &seen {
        let rank: usize = rank.parse().unwrap();
        assert_eq!(
            f[1], want[&rank],
            "rank {rank}: the scheduler's CPUs: {stderr}"
        );
    }
    let named: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("no task of a scheduler job"))
        .collect();
    assert_eq!(named.len(), 1, "named once: {stderr}");
    assert!(named[0].contains("of nobody on cpus 0"), "{stderr}");
}

/// SEMANTICS §4.3 (#63): a site default never gives a task fewer CPUs than Slurm gave it,
/// and never binds an interactive step. With `default=` a one-core shape under
/// `task/affinity,task/cgroup`, `srun -n1 -c2 bash -c nproc` prints 2 (23e2c73: 1, and
/// `make -j2` ran both recipes on one CPU), as does `srun --pty` (a terminal from
/// `script`); a plain one-CPU task is still bound by the default; `--multi-prog` with two
/// shapes is refused as without a default.
#[test]
fn a_site_default_never_narrows_a_step_below_its_cpus() {
    if !common::two_cpus() {
        return;
    }
    let one_core = common::scratch().join("one-core-default.yaml");
    // One core for each task, as a site writes it.
    std::fs::write(
        &one_core,
        "resources:\n  - type: slot\n    count: all\n    with:\n      - type: core\n        count: 1\n",
    )
    .unwrap();
    let config = [
        ("E2E_SLURM_TASK", "task/affinity,task/cgroup".to_owned()),
        ("E2E_SLURM_PROCTRACK", "proctrack/cgroup".to_owned()),
        ("E2E_SLURM_CONSTRAIN", "yes".to_owned()),
        ("E2E_SLURM_OVERSUBSCRIBE", "NO".to_owned()),
        (
            "E2E_SPANK_ARGS",
            format!(
                "default={} catalog={}",
                one_core.display(),
                root().join("shapes").display()
            ),
        ),
    ];
    let Some(slurm) = Slurm::start_with(&config) else {
        return;
    };
    let ledger = common::private_ledger();
    let nproc = |out: Output, what: &str| -> String {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{what}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout.trim().to_owned()
    };
    let plain = srun(&slurm, &ledger, &["-n1", "-c2"])
        .args(["bash", "-c", "nproc"])
        .output()
        .unwrap();
    assert_eq!(nproc(plain, "srun -n1 -c2 bash -c nproc"), "2");
    // `srun --pty` on a terminal (`script` gives it one).
    let mut pty = Command::new("script");
    common::hermetic(&mut pty)
        .env("SLURM_CONF", &slurm.conf)
        .env("BINDER_LEDGER_DIR", &ledger)
        .args(["-qec", "srun -n1 -c2 --pty bash -c nproc", "/dev/null"])
        .stdin(Stdio::null());
    let out = nproc(pty.output().unwrap(), "srun --pty");
    // (`script` may put a NUL, its `^@` spelling or a carriage return around the pty's
    // output, on a line of its own: the digits of the whole output are nproc's.)
    let digits: String = out.chars().filter(char::is_ascii_digit).collect();
    assert_eq!(digits, "2", "{out:?}");
    // A one-CPU task: the default binds it (one CPU either way, and binder's variables).
    let one = srun(&slurm, &ledger, &["-n1", "-c1"])
        .args(["sh", "-c", "echo ${BINDER_CPUS:+bound}"])
        .output()
        .unwrap();
    assert_eq!(nproc(one, "srun -n1 -c1"), "bound");
    // MPMD contexts with two shapes under this default: refused every time, never both on
    // one CPU (#63: 13 of 120 runs shared CPU 0 at 23e2c73).
    super::steps::multi_prog_contexts(&slurm);
}
