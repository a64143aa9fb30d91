//! Under Flux (flux-core 0.88.0, built from `third_party/flux` by `.ci/setup test` into
//! `/opt/flux`): a throwaway instance per test (`flux start --test-size=N`, N brokers on
//! this host), the shell's `cpu-affinity` left on as sites run it. Each task reports the
//! affinity the kernel gave it; that must lie in the job's allocation (SEMANTICS §4.1)
//! and be what the dry-run promises.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::common::{self, root, run};
use binder::exit_code::SUCCESS;

/// `flux`, on PATH or where `.ci/setup test` installs it.
fn flux() -> Option<PathBuf> {
    let installed = PathBuf::from("/opt/flux/bin/flux");
    let found = if common::has("flux") {
        Some(PathBuf::from("flux"))
    } else {
        installed.is_file().then_some(installed)
    };
    common::prerequisite(
        found.is_some(),
        "`flux` (flux-core; `bash .ci/setup test` builds it into /opt/flux)",
    )
    .then_some(found)
    .flatten()
}

/// Prints `FLUX_TASK_RANK|BINDER_LOCAL_RANK|BINDER_LOCAL_SIZE|affinity|BINDER_CPUS`.
const PROBE: &str = r#"printf '%s|%s|%s|%s|%s\n' "$FLUX_TASK_RANK" "$BINDER_LOCAL_RANK" "$BINDER_LOCAL_SIZE" "$(grep Cpus_allowed_list /proc/self/status | cut -f2)" "$BINDER_CPUS""#;

/// One task's report.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Report {
    local: String,
    size: String,
    affinity: String,
    cpus: String,
}

/// Runs `script` (sh, with `$BINDER` and `$PROBE` set) in a fresh instance of `size`
/// brokers; every probe line, by the job-wide task rank (several jobs: in output order).
fn instance(size: usize, script: &str) -> Option<Vec<(String, Report)>> {
    let flux = flux()?;
    let mut cmd = Command::new(&flux);
    common::isolated(&mut cmd)
        .args(["start", &format!("--test-size={size}"), "sh", "-c", script])
        .env("BINDER", common::binder_exe())
        .env("PROBE", PROBE);
    if let Some(dir) = flux.parent().filter(|d| !d.as_os_str().is_empty()) {
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", dir.display()));
    }
    let out = run(&mut cmd, SUCCESS);
    let text = String::from_utf8(out.stdout).unwrap();
    let reports = text
        .lines()
        .filter(|l| l.matches('|').count() == 4)
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            let report = Report {
                local: f[1].into(),
                size: f[2].into(),
                affinity: f[3].into(),
                cpus: f[4].into(),
            };
            (f[0].to_owned(), report)
        })
        .collect();
    Some(reports)
}

/// The dry-run's CPU list per local rank of `shape` for `size` tasks on this host.
fn promised(shape: &str, size: usize) -> BTreeMap<String, String> {
    let out = run(
        common::binder().args([
            "-n",
            "--format",
            "json",
            "--local-size",
            &size.to_string(),
            shape,
        ]),
        SUCCESS,
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["local_rank"].to_string(),
                v["cpulist"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// One node, the whole node to the job: every task bound as the dry-run says.
#[test]
fn single_node_matches_the_dry_run() {
    let Some(got) = instance(
        1,
        r#"flux run -n2 -c1 "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE""#,
    ) else {
        return;
    };
    let want = promised("shapes/cores-packed.yaml", 2);
    assert_eq!(got.len(), 2, "{got:?}");
    for (_, r) in &got {
        assert_eq!(r.size, "2", "{got:?}");
        assert_eq!(r.affinity, want[&r.local], "kernel vs dry-run: {got:?}");
        assert_eq!(r.cpus, want[&r.local], "BINDER_CPUS vs dry-run: {got:?}");
    }
}

/// Two brokers on this host, 3 tasks over 2 "nodes" with a cyclic task map
/// (`[[0,2,1,1],[0,1,1,1]]`: tasks 0 and 2 on broker 0, task 1 on broker 1). The task
/// map is the bare RFC 34 array `flux job taskmap` prints; each broker's tasks are their
/// own job (`flux:ID.SHELL`) with the right local ranks. The brokers' R overlap on this
/// one host, so each shell's tasks use a ledger of their own here.
#[test]
fn two_brokers_cyclic_task_map() {
    // (Made first: a ledger root that does not exist is unusable, and a fail-open launch
    // would see the other shell's tasks as another job of this user's.)
    let script = r#"flux run -N2 -n3 -c1 --taskmap=cyclic sh -c 'd=$BINDER_LEDGER_DIR/${FLUX_JOB_TMPDIR##*/jobtmp-}; mkdir -p "$d"; BINDER_LEDGER_DIR=$d exec "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE"'"#;
    let Some(got) = instance(2, script) else {
        return;
    };
    let by: BTreeMap<String, Report> = got.into_iter().collect();
    assert_eq!(by.len(), 3, "{by:?}");
    let local = |t: &str| (by[t].local.as_str(), by[t].size.as_str());
    assert_eq!(local("0"), ("0", "2"), "{by:?}");
    assert_eq!(local("2"), ("1", "2"), "{by:?}");
    assert_eq!(local("1"), ("0", "1"), "{by:?}");
    // Broker 0's two tasks split its cores; each bound as it was told.
    assert_ne!(by["0"].affinity, by["2"].affinity, "{by:?}");
    for r in by.values() {
        assert_eq!(r.affinity, r.cpus, "{by:?}");
    }
}

/// Two concurrent 1-core jobs (R: one core each, no cgroups) are bound to their own core,
/// never to the whole node, so they never share one.
#[test]
fn two_one_core_jobs_get_different_cores() {
    let script = r#"ids=$(flux submit --cc=1-2 -n1 -c1 "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE; sleep 1")
for id in $ids; do flux job attach "$id"; done"#;
    let Some(got) = instance(1, script) else {
        return;
    };
    assert_eq!(got.len(), 2, "{got:?}");
    let (a, b) = (&got[0].1, &got[1].1);
    for r in [a, b] {
        assert!(
            !r.affinity.contains(['-', ',']) && r.affinity == r.cpus,
            "a 1-core job bound to one CPU: {got:?}"
        );
    }
    assert_ne!(a.affinity, b.affinity, "two jobs on one core: {got:?}");
}

/// Inside `flux alloc -n1 -c1` (a nested instance: no cgroup, the outer shell's binding
/// is all that says what it owns), an inner job stays on the allocation's core.
#[test]
fn inner_job_of_an_allocation_stays_on_its_core() {
    let script = r#"flux alloc -n1 -c1 sh -c 'flux run -n1 "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE"'"#;
    let Some(got) = instance(1, script) else {
        return;
    };
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0].1;
    assert!(!r.affinity.contains(['-', ',']), "one CPU: {got:?}");
    assert_eq!(r.affinity, r.cpus, "{got:?}");
}

/// `-o hwloc.xmlfile=1`: the shell hands each task an XML of this very host
/// (`HWLOC_XMLFILE`); binder takes it for this host and binds as without it.
#[test]
fn the_shells_own_xml_is_this_host() {
    let Some(got) = instance(
        1,
        r#"flux run -n2 -c1 -o hwloc.xmlfile=1 "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE""#,
    ) else {
        return;
    };
    let want = promised("shapes/cores-packed.yaml", 2);
    assert_eq!(got.len(), 2, "{got:?}");
    for (_, r) in &got {
        assert_eq!(r.affinity, want[&r.local], "{got:?}");
    }
}

/// The shell plugin (`crates/binder-flux`), loaded by a user initrc
/// (`-o userrc=FILE` with `plugin.load`), its catalog the repository's shapes. The
/// script's `$RC` names the file.
fn with_plugin(size: usize, script: &str) -> Option<Vec<(String, Report)>> {
    let plugin = std::path::Path::new(common::binder_exe()).with_file_name("libbinder_flux.so");
    assert!(
        plugin.is_file(),
        "{} is not built: `cargo build --release` builds it (.ci/run builds first)",
        plugin.display()
    );
    let rc = common::private_ledger().with_extension("rc.lua");
    std::fs::write(
        &rc,
        format!(
            "plugin.load {{ file = \"{}\", conf = {{ catalog = \"{}\" }} }}\n",
            plugin.display(),
            root().join("shapes").display()
        ),
    )
    .unwrap();
    let script = format!("RC={}\n{script}", rc.display());
    let got = instance(size, &script);
    let _ = std::fs::remove_file(&rc);
    got
}

/// A user initrc that loads the plugin as a site does, with `default` as the site's
/// default shape (the caller removes it).
fn site_default_rc(name: &str, default: &str) -> PathBuf {
    let rc = common::private_ledger().with_extension(format!("{name}.lua"));
    std::fs::write(
        &rc,
        format!(
            "plugin.load {{ file = \"{}\", conf = {{ catalog = \"{}\", default = \"{default}\" }} }}\n",
            std::path::Path::new(common::binder_exe())
                .with_file_name("libbinder_flux.so")
                .display(),
            root().join("shapes").display()
        ),
    )
    .unwrap();
    rc
}

/// `flux run -n2 -o binder=…`: each task bound as the dry-run says, by the plugin alone
/// (no `binder` in the command), with the report line.
#[test]
fn plugin_binds_as_the_dry_run_says() {
    let Some(got) = with_plugin(
        1,
        r#"flux run -n2 -c1 -o userrc=$RC -o binder=cores-packed -o binder-report sh -c "$PROBE""#,
    ) else {
        return;
    };
    let want = promised("shapes/cores-packed.yaml", 2);
    assert_eq!(got.len(), 2, "{got:?}");
    for (_, r) in &got {
        assert_eq!(r.size, "2", "{got:?}");
        assert_eq!(r.affinity, want[&r.local], "kernel vs dry-run: {got:?}");
        assert_eq!(r.cpus, want[&r.local], "BINDER_CPUS vs dry-run: {got:?}");
    }
}

/// Two brokers, `-N2 -n3`: each shell's tasks get their local ranks from the shell, with
/// no `flux job taskmap` (the tasks' PATH has no `flux`, which the wrapper would need).
/// The brokers' R overlap on this one host, so the ledger is off here.
#[test]
fn plugin_two_brokers_local_ranks_without_a_task_map() {
    let Some(got) = with_plugin(
        2,
        r#"flux run -N2 -n3 -c1 --env=PATH=/usr/bin:/bin --env=BINDER_LEDGER=off -o userrc=$RC -o binder=shapes/cores-packed.yaml sh -c "$PROBE""#,
    ) else {
        return;
    };
    let by: BTreeMap<String, Report> = got.into_iter().collect();
    assert_eq!(by.len(), 3, "{by:?}");
    // The default block map: tasks 0 and 1 on broker 0, task 2 on broker 1.
    let local = |t: &str| (by[t].local.as_str(), by[t].size.as_str());
    assert_eq!(local("0"), ("0", "2"), "{by:?}");
    assert_eq!(local("1"), ("1", "2"), "{by:?}");
    assert_eq!(local("2"), ("0", "1"), "{by:?}");
    for r in by.values() {
        assert_eq!(r.affinity, r.cpus, "{by:?}");
    }
}

/// Two concurrent 1-core jobs through the plugin stay on their own core; a job without
/// `-o binder` is untouched (the shell's cpu-affinity binds it, no BINDER_CPUS).
#[test]
fn plugin_one_core_jobs_and_jobs_without_it() {
    let script = r#"ids=$(flux submit --cc=1-2 -n1 -c1 -o userrc=$RC -o binder=cores-packed sh -c "$PROBE; sleep 1")
for id in $ids; do flux job attach "$id"; done
flux run -n1 -c1 -o userrc=$RC sh -c "$PROBE""#;
    let Some(got) = with_plugin(1, script) else {
        return;
    };
    assert_eq!(got.len(), 3, "{got:?}");
    let (a, b, plain) = (&got[0].1, &got[1].1, &got[2].1);
    for r in [a, b] {
        assert!(
            !r.affinity.contains(['-', ',']) && r.affinity == r.cpus,
            "{got:?}"
        );
    }
    assert_ne!(a.affinity, b.affinity, "two jobs on one core: {got:?}");
    assert!(
        !plain.affinity.contains(['-', ',']),
        "cpu-affinity kept: {got:?}"
    );
    assert_eq!(plain.cpus, "", "binder stayed out: {got:?}");
}

/// A bad shape: the task fails with binder's one line and 125; the command never runs.
#[test]
fn plugin_refusal_never_runs_the_command() {
    let marker = common::scratch().join("flux-ran");
    let script = format!(
        "flux run -n1 -o userrc=$RC -o binder=/nonexistent/shape.yaml touch {m} 2>&1; echo \"rc=$?|x|x|x|x\"",
        m = marker.display()
    );
    let Some(got) = with_plugin(1, &script) else {
        return;
    };
    assert!(!marker.exists(), "the command ran despite the refusal");
    assert_eq!(
        got.last().map(|(k, _)| k.as_str()),
        Some("rc=125"),
        "{got:?}"
    );
}

/// The shared XML with 8 T4 GPUs the GPU cases load as this host's.
fn t4_xml() -> Option<PathBuf> {
    common::shared().map(|s| common::topology(&s, "aws-g4dn-metal-2s-48c-smt2-8t4.xml"))
}

/// Each report's first three fields (`task|local|size`, or what an `echo` put there),
/// sorted.
fn first_fields(got: &[(String, Report)]) -> Vec<String> {
    let mut lines: Vec<String> = got
        .iter()
        .map(|(t, r)| format!("{t}|{}|{}", r.local, r.size))
        .collect();
    lines.sort();
    lines
}

/// A GPU shape on a shared XML (`HWLOC_XMLFILE`, `HWLOC_THISSYSTEM=1` for the whole
/// instance, so R has the XML's 8 T4s): `-g1` per task, the device variables from the
/// job's GPUs, one each.
#[test]
fn plugin_gpus_from_the_jobs_r() {
    let Some(xml) = t4_xml() else {
        return;
    };
    let script = format!(
        "export HWLOC_XMLFILE={} HWLOC_THISSYSTEM=1\nexec flux start --test-size=1 flux run -n2 -g1 -o userrc=$RC -o binder=shapes/gpu-devices-only.yaml sh -c 'echo \"$FLUX_TASK_RANK|$CUDA_VISIBLE_DEVICES|$BINDER_GPUS|x|x\"'",
        xml.display()
    );
    // The outer instance only runs the inner one, which sees the XML.
    let Some(got) = with_plugin(1, &script) else {
        return;
    };
    let lines = first_fields(&got);
    assert_eq!(lines, ["0|0|0", "1|1|1"], "{got:?}");
}

/// `-o gpu-affinity=per-task` (each task sees only its own GPU): the plugin plans with
/// R's GPUs and hands them out as without it; the wrapper, which cannot tell, refuses a
/// GPU shape with one line per task that names the option and the way out (the count is
/// printed), and runs a CPU-only shape's ranks as one job (#61).
#[test]
fn gpu_affinity_per_task_plugin_and_wrapper() {
    let Some(xml) = t4_xml() else {
        return;
    };
    let script = format!(
        "export HWLOC_XMLFILE={} HWLOC_THISSYSTEM=1 RC\nexec flux start --test-size=1 sh -c '\
         flux run -n2 -g1 -o gpu-affinity=per-task -o userrc=$RC -o binder=shapes/gpu-devices-only.yaml sh -c \"echo \\$FLUX_TASK_RANK\\|\\$CUDA_VISIBLE_DEVICES\\|\\$BINDER_GPUS\\|x\\|x\"\n\
         n=$(flux run -n2 -g1 -o gpu-affinity=per-task $BINDER shapes/gpu-devices-only.yaml -- true 2>&1 | grep -c \"^binder: .*keep gpu-affinity on\")\n\
         echo \"w|$n|x|x|x\"\n\
         for s in cores-packed bind-none; do \
           ok=$(flux run -n2 -g1 -o gpu-affinity=per-task $BINDER shapes/$s.yaml -- sh -c \"echo ran\" 2>&1 | grep -c \"^ran\"); \
           echo \"c-$s|$ok|x|x|x\"; done'",
        xml.display()
    );
    let Some(got) = with_plugin(1, &script) else {
        return;
    };
    let lines = first_fields(&got);
    // A CPU-only shape through the wrapper: both ranks run (23e2c73 refused rank 1 as
    // another shape: each rank's GPU variable keyed its plan).
    assert_eq!(
        lines,
        [
            "0|0|0",
            "1|1|1",
            "c-bind-none|2|x",
            "c-cores-packed|2|x",
            "w|2|x"
        ],
        "{got:?}"
    );
}

/// SEMANTICS §4.2: a Flux instance on part of the node numbers its cores from 0 (its
/// topology is restricted to its broker's binding); the plugin resolves R's cores through
/// it. An instance started on CPU 1 (`taskset -c 1 flux start`), and a `flux alloc` whose
/// core is 1 because another job holds core 0: every plugin job stays on CPU 1, as the
/// wrapper does.
#[test]
fn plugin_inside_an_instance_on_part_of_the_node() {
    if !common::two_cpus() {
        return;
    }
    let Some(flux) = flux() else { return };
    // The instance on CPU 1 alone.
    let Some(got) = with_plugin(
        1,
        &format!(
            "export RC\nexec taskset -c 1 {} start --test-size=1 sh -c 'flux run -n1 -o userrc=$RC -o binder=cores-packed sh -c \"$PROBE\"; flux run -n1 \"$BINDER\" shapes/cores-packed.yaml -- sh -c \"$PROBE\"'",
            flux.display()
        ),
    ) else {
        return;
    };
    assert_eq!(got.len(), 2, "{got:?}");
    for (_, r) in &got {
        assert_eq!(
            (r.affinity.as_str(), r.cpus.as_str()),
            ("1", "1"),
            "{got:?}"
        );
    }
    // flux alloc on core 1 (a job holds core 0): plugin jobs inside it, a shape that
    // leaves the task unbound (`bind: none` for rank 0 of master-worker: the job's core,
    // not the node), and a declined site default (the job's core, Flux's -1 for GPUs).
    let default_rc = site_default_rc("default", "gpu-devices-only");
    let script = format!(
        "export RC\nflux submit -n1 -c1 sleep 60 >/dev/null\n\
         flux alloc -n1 -c1 sh -c 'flux run -n1 -o userrc=$RC -o binder=cores-packed sh -c \"$PROBE\"; \
         flux run -n1 -o userrc=$RC -o binder=master-worker sh -c \"$PROBE\"; \
         flux run -n1 -o userrc={} sh -c \"echo \\$FLUX_TASK_RANK\\|cvd=\\$CUDA_VISIBLE_DEVICES\\|x\\|\\$(grep Cpus_allowed_list /proc/self/status | cut -f2)\\|x\"'\n\
         flux cancel --all",
        default_rc.display()
    );
    let got = with_plugin(1, &script);
    let _ = std::fs::remove_file(&default_rc);
    let Some(got) = got else { return };
    assert_eq!(got.len(), 3, "{got:?}");
    // The plugin's job: bound to CPU 1 by binder.
    assert_eq!(
        (got[0].1.affinity.as_str(), got[0].1.cpus.as_str()),
        ("1", "1"),
        "{got:?}"
    );
    // bind: none keeps the job's core.
    assert_eq!(
        got[1].1.affinity, "1",
        "bind: none ran outside the job: {got:?}"
    );
    // The declined default: the job's core, and what gpu-affinity exports without GPUs.
    assert_eq!(got[2].1.local, "cvd=-1", "{got:?}");
    assert_eq!(
        got[2].1.affinity, "1",
        "a declined default ran outside the job: {got:?}"
    );
}

/// SEMANTICS §4.2, orphans never widen: a wrapper whose parent exits before it starts
/// (`(binder … &)`) has no flux-shell among its ancestors; it keeps the job's core it
/// inherited, never the node (another job holds core 0 here).
#[test]
fn an_orphaned_wrapper_keeps_its_jobs_core() {
    if !common::two_cpus() {
        return;
    }
    let script = r#"flux submit -n1 -c1 sleep 60 >/dev/null
flux run -n1 -c1 sh -c '( "$BINDER" shapes/cores-packed.yaml -- sh -c "sleep 0.5; $PROBE" & ) ; exit 0'
sleep 1
flux cancel --all"#;
    let Some(got) = instance(1, script) else {
        return;
    };
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0].1;
    assert_eq!(
        (r.affinity.as_str(), r.cpus.as_str()),
        ("1", "1"),
        "{got:?}"
    );
}

/// SEMANTICS §4.2 with `-o cpu-affinity=off`: the job shell keeps its broker's binding
/// (the whole instance), so the wrapper reads the job's core from R and stays on it
/// (core 1: another job holds core 0), never widening to the instance. Also in a nested
/// instance on core 1 (`flux alloc -n1 -c1` beside a job on core 0), whose R numbers
/// that core 0.
#[test]
fn cpu_affinity_off_still_stays_on_the_jobs_core() {
    if !common::two_cpus() {
        return;
    }
    let script = r#"flux submit -n1 -c1 sleep 60 >/dev/null
flux run -n1 -c1 -o cpu-affinity=off "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE"
flux alloc -n1 -c1 sh -c 'flux run -n1 -o cpu-affinity=off "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE"'
flux cancel --all"#;
    let Some(got) = instance(1, script) else {
        return;
    };
    assert_eq!(got.len(), 2, "{got:?}");
    for (_, r) in &got {
        assert_eq!(
            (r.affinity.as_str(), r.cpus.as_str()),
            ("1", "1"),
            "{got:?}"
        );
    }
}

/// SEMANTICS §4.2 under a Flux site default: a job that runs the wrapper (`flux run
/// binder SHAPE -- …`, the README's line) is the wrapper's to bind, inside the job's
/// cores (core 1 here: another job holds core 0), never the instance; beside an explicit
/// `-o binder` the task is refused with one line naming both.
#[test]
fn plugin_default_leaves_the_wrapper_its_task() {
    if !common::two_cpus() {
        return;
    }
    let default_rc = site_default_rc("wrapper-default", "cores-packed");
    let script = format!(
        "flux submit -n1 -c1 sleep 60 >/dev/null\n\
         flux run -n1 -c1 -o userrc={rc} \"$BINDER\" shapes/cores-packed.yaml -- sh -c \"$PROBE\"\n\
         flux run -n1 -c1 -o userrc={rc} -o binder=cores-packed \"$BINDER\" shapes/cores-packed.yaml -- sh -c \"$PROBE\" 2>&1 | sed 's/^.*binder: /binder: /' | grep -c 'both bind this task' | sed 's/^/0|x|x|/; s/$/|x/'\n\
         flux cancel --all",
        rc = default_rc.display()
    );
    let got = instance(1, &script);
    let _ = std::fs::remove_file(&default_rc);
    let Some(got) = got else { return };
    assert_eq!(got.len(), 2, "{got:?}");
    // The wrapper bound it, on the job's core.
    assert_eq!(
        (got[0].1.affinity.as_str(), got[0].1.cpus.as_str()),
        ("1", "1"),
        "{got:?}"
    );
    // The explicit request beside the wrapper: the one refusal line.
    assert_eq!(got[1].1.affinity, "1", "one line naming both: {got:?}");
}

/// `-o hwloc.xmlfile=1 -o hwloc.restrict=1`: the shell hands the task an XML of this host
/// restricted to the job's cores; binder takes it for this host (it names it and holds
/// some of its online CPUs) and binds inside it, on core 1 here (another job holds 0).
#[test]
fn the_shells_restricted_xml_is_this_host_too() {
    if !common::two_cpus() {
        return;
    }
    let script = r#"flux submit -n1 -c1 sleep 60 >/dev/null
flux run -n1 -c1 -o hwloc.xmlfile=1 -o hwloc.restrict=1 "$BINDER" shapes/cores-packed.yaml -- sh -c "$PROBE"
flux cancel --all"#;
    let Some(got) = instance(1, script) else {
        return;
    };
    assert_eq!(got.len(), 1, "{got:?}");
    let r = &got[0].1;
    assert_eq!(
        (r.affinity.as_str(), r.cpus.as_str()),
        ("1", "1"),
        "{got:?}"
    );
}

/// A one-core shape in the test's scratch directory (the site default of the issue's
/// reports: one core per task), by its absolute path.
fn one_core_shape() -> PathBuf {
    let path = common::scratch().join("one-core.yaml");
    std::fs::write(&path, "resources:\n  - type: core\n    count: 1\n").unwrap();
    path
}

/// SEMANTICS §4.3, a default binds tasks, never containers: with a site default of one
/// core, `flux alloc -n2 -c1` keeps its broker on both of the job's cores (Flux's own
/// affinity), so 4 concurrent inner jobs (the default on for them too) all run, each on
/// one of the allocation's cores. On 6eb4e5b the broker was bound to CPU 0 alone and 2 of
/// 4 inner jobs exited 125.
#[test]
fn a_default_never_binds_the_broker_of_flux_alloc() {
    if !common::two_cpus() {
        return;
    }
    let rc = site_default_rc("alloc-default", &one_core_shape().display().to_string());
    let script = format!(
        "export RC={rc}\n\
         flux alloc -n2 -c1 -o userrc={rc} sh -c '\
           echo \"broker|x|x|$(grep Cpus_allowed_list /proc/$$/status | cut -f2)|$BINDER_JOB\"; \
           for i in 1 2 3 4; do flux run -n1 -c1 -o userrc=$RC sh -c \"$PROBE\" & done; wait'",
        rc = rc.display()
    );
    let got = instance(1, &script);
    let _ = std::fs::remove_file(&rc);
    let Some(got) = got else { return };
    let broker = got
        .iter()
        .find(|(t, _)| t == "broker")
        .expect("the alloc's shell");
    assert_eq!(
        broker.1.affinity, "0-1",
        "the broker keeps the job's two cores: {got:?}"
    );
    assert_eq!(
        broker.1.cpus, "",
        "no BINDER_JOB reaches the broker's shell: {got:?}"
    );
    let inner: Vec<_> = got.iter().filter(|(t, _)| t != "broker").collect();
    assert_eq!(inner.len(), 4, "every inner job ran: {got:?}");
    for (_, r) in inner {
        assert!(
            ["0", "1"].contains(&r.affinity.as_str()) && r.affinity == r.cpus,
            "one of the allocation's cores, bound by the default: {got:?}"
        );
    }
}

/// The same for `flux batch`: its broker keeps the job's cores and the script's jobs run
/// under the default.
#[test]
fn a_default_never_binds_the_broker_of_flux_batch() {
    if !common::two_cpus() {
        return;
    }
    let rc = site_default_rc("batch-default", &one_core_shape().display().to_string());
    let out = common::scratch().join("batch.out");
    let batch = common::scratch().join("batch.sh");
    std::fs::write(
        &batch,
        format!(
            "#!/bin/sh\necho \"broker|x|x|$(grep Cpus_allowed_list /proc/$$/status | cut -f2)|$BINDER_JOB\"\n\
             for i in 1 2; do flux run -n1 -c1 -o userrc={rc} sh -c \"$PROBE\" & done\nwait\n",
            rc = rc.display()
        ),
    )
    .unwrap();
    let script = format!(
        "id=$(flux batch -n2 -c1 -o userrc={rc} --output={out} {batch})\n\
         flux job attach $id >/dev/null 2>&1\n\
         cat {out}",
        rc = rc.display(),
        out = out.display(),
        batch = batch.display()
    );
    let got = instance(1, &script);
    let _ = std::fs::remove_file(&rc);
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&batch);
    let Some(got) = got else { return };
    let broker = got
        .iter()
        .find(|(t, _)| t == "broker")
        .expect("the batch script");
    assert_eq!(broker.1.affinity, "0-1", "{got:?}");
    assert_eq!(got.len(), 3, "both inner jobs ran: {got:?}");
}

/// SEMANTICS §4.3, binding CPUs never unbinds GPUs: a CPU-only shape (the guide's
/// `cores-packed`) with `-g2` leaves `CUDA_VISIBLE_DEVICES` as Flux's gpu-affinity sets
/// it (`0,1`), as an explicit request and as a site default; on 6eb4e5b it was unset.
#[test]
fn a_cpu_only_shape_keeps_flux_gpu_binding() {
    let Some(xml) = t4_xml() else {
        return;
    };
    let default_rc = site_default_rc("gpu-default", "cores-packed");
    let script = format!(
        "export HWLOC_XMLFILE={} HWLOC_THISSYSTEM=1 RC\nexec flux start --test-size=1 sh -c '\
         flux run -n1 -c1 -g2 -o userrc=$RC -o binder=cores-packed sh -c \"echo asked\\|\\$CUDA_VISIBLE_DEVICES\\|\\$BINDER_CPUS\\|x\\|x\"; \
         flux run -n1 -c1 -g2 -o userrc={} sh -c \"echo default\\|\\$CUDA_VISIBLE_DEVICES\\|\\$BINDER_CPUS\\|x\\|x\"'",
        xml.display(),
        default_rc.display()
    );
    let got = with_plugin(1, &script);
    let _ = std::fs::remove_file(&default_rc);
    let Some(got) = got else { return };
    assert_eq!(got.len(), 2, "{got:?}");
    for (what, r) in &got {
        assert_eq!(r.local, "0,1", "{what}: Flux's GPUs kept: {got:?}");
        assert!(!r.size.is_empty(), "{what}: binder bound the CPUs: {got:?}");
    }
}

/// SEMANTICS §4.3, a default never gives a task fewer CPUs than the scheduler gave it
/// (#63): under a one-core site default, `flux run -n1 -c2` keeps both of its cores (the
/// default is declined in one line, Flux's binding stands) while `-c1` is bound by the
/// default; an explicit `-o binder=` may still narrow a task. On b33dcf3 the `-c2` task
/// ran on one CPU.
#[test]
fn a_default_never_narrows_a_tasks_cores() {
    if !common::two_cpus() {
        return;
    }
    let rc = site_default_rc("narrow-default", &one_core_shape().display().to_string());
    let probe = r#"echo "$0|x|x|$(grep Cpus_allowed_list /proc/self/status | cut -f2)|${BINDER_CPUS:-unbound}""#;
    let script = format!(
        "RC={rc}\n\
         flux run -n1 -c2 -o userrc=$RC sh -c '{probe}' c2\n\
         flux run -n1 -c2 -o userrc=$RC sh -c true 2>&1 | grep -c 'fewer than the 2 the scheduler gave it' | sed 's/^/said|x|x|/; s/$/|x/'\n\
         flux run -n1 -c1 -o userrc=$RC sh -c '{probe}' c1\n\
         flux run -n1 -c2 -o userrc=$RC -o binder={one} sh -c '{probe}' asked\n",
        rc = rc.display(),
        one = one_core_shape().display(),
    );
    let got = instance(1, &script);
    let _ = std::fs::remove_file(&rc);
    let Some(got) = got else { return };
    let by = |what: &str| {
        got.iter()
            .find(|(t, _)| t == what)
            .map(|(_, r)| (r.affinity.clone(), r.cpus.clone()))
            .unwrap_or_else(|| panic!("no {what} line: {got:?}"))
    };
    assert_eq!(by("c2"), ("0-1".into(), "unbound".into()), "{got:?}");
    assert_eq!(by("said").0, "1", "one declining line: {got:?}");
    let (c1, c1_cpus) = by("c1");
    assert!(
        c1 == c1_cpus && ["0", "1"].contains(&c1.as_str()),
        "{got:?}"
    );
    let (asked, asked_cpus) = by("asked");
    assert!(
        asked == asked_cpus && ["0", "1"].contains(&asked.as_str()),
        "{got:?}"
    );
}

/// SEMANTICS §4.3, an option that exists does something: `-o binder={}` names no shape
/// (and there is no default), so the task is refused with one line and 125, never run
/// unbound; a misspelt switch value likewise. `-o binder.report` alone runs the task and
/// says in one line why nothing is bound, as `srun --binder-report` does (#63: refused).
#[test]
fn an_empty_binder_option_is_one_line() {
    // (And `-o binder=SHAPE -o cpu-affinity=per-task` is refused in one line, as Slurm
    // refuses `--binder` beside `--cpu-bind=cores` (#63: Flux bound it silently).)
    let script = r#"flux run -n1 -o userrc=$RC -o binder={} true 2>&1 | sed 's/^.*binder: /binder: /' | grep -c '^binder: -o binder={} names no shape' | sed 's/^/empty|/; s/$/|x|x|x/'
flux run -n1 -o userrc=$RC -o binder=cores-packed -o binder-report=of true 2>&1 | sed 's/^.*binder: /binder: /' | grep -c '^binder: -o binder-report="of" is neither on' | sed 's/^/switch|/; s/$/|x|x|x/'
flux run -n1 -o userrc=$RC -o binder={} true >/dev/null 2>&1; echo "rc|$?|x|x|x"
flux run -n1 -o userrc=$RC -o binder.report true 2>&1 | grep -c 'binder: nothing to report.*no -o binder=SHAPE' | sed 's/^/alone|/; s/$/|x|x|x/'
flux run -n1 -o userrc=$RC -o binder.report true >/dev/null 2>&1; echo "alonerc|$?|x|x|x"
flux run -n1 -o userrc=$RC -o binder=cores-packed -o cpu-affinity=per-task true 2>&1 | sed 's/^.*binder: /binder: /' | grep -c '^binder: -o cpu-affinity=per-task and -o binder both bind' | sed 's/^/pertask|/; s/$/|x|x|x/'
flux run -n1 -o userrc=$RC -o binder=cores-packed -o cpu-affinity=per-task true >/dev/null 2>&1; echo "pertaskrc|$?|x|x|x""#;
    let Some(got) = with_plugin(1, script) else {
        return;
    };
    let lines = first_fields(&got);
    assert_eq!(
        lines,
        [
            "alonerc|0|x",
            "alone|1|x",
            "empty|1|x",
            "pertaskrc|125|x",
            "pertask|1|x",
            "rc|125|x",
            "switch|1|x"
        ],
        "{got:?}"
    );
}

/// `-o binder=0` and `-o binder=false` (documented off words, which Flux hands the shell
/// as a JSON number and boolean) leave the task unbound by binder under a site default,
/// as `-o binder=off` does (#63: both were refused as "not a shape").
#[test]
fn off_words_in_any_json_form_turn_a_site_default_off() {
    let default_rc = site_default_rc("off-words", "cores-packed");
    let script = format!(
        "RC={}\nfor off in 0 false off; do flux run -n1 -o userrc=$RC -o binder=$off sh -c 'echo \"$0|${{BINDER_CPUS:-unbound}}|x|x|x\"' $off; done\n\
         flux run -n1 -o userrc=$RC sh -c 'echo \"default|${{BINDER_CPUS:+bound}}|x|x|x\"'",
        default_rc.display()
    );
    let got = instance(1, &script);
    let _ = std::fs::remove_file(&default_rc);
    let Some(got) = got else { return };
    let lines = first_fields(&got);
    assert_eq!(
        lines,
        [
            "0|unbound|x",
            "default|bound|x",
            "false|unbound|x",
            "off|unbound|x"
        ],
        "{got:?}"
    );
}
