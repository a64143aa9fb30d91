//! The node cache (`src/cache.rs`): a hit launches exactly what a cold run would, every
//! input of the key makes a miss when it changes, and nothing another user could write
//! is ever trusted.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use binder_core::cache::{Cache, Key};
use binder_core::view::TaskView;
use binder_plan::shape::Shape;
use binder_plan::topology::Source;

use crate::common::{
    all_topologies, binder, prerequisite, root, run, shared, topology as xml_path,
};

fn scratch(name: &str) -> PathBuf {
    let dir = crate::common::scratch().join(format!("cache-it-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Every shared topology, every CPU catalog shape and a few sizes: the views read back
/// from the cache are the ones computed cold.
#[test]
fn a_hit_gives_the_cold_plan_on_every_shared_topology() {
    let Some(shared) = shared() else { return };
    let dir = scratch("views");
    let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
    let cache = Cache::open(&get).unwrap();
    let shapes = [
        "cores-packed.yaml",
        "pus-interleave.yaml",
        "numa-per-task.yaml",
        "cores-per-socket-cyclic.yaml",
        "hybrid-numa-openmp.yaml",
    ];
    let mut checked = 0;
    for name in all_topologies(&shared) {
        let topo = binder_host::load(&Source::Xml(xml_path(&shared, &name)), false).unwrap();
        for file in shapes {
            let text = std::fs::read_to_string(root().join("shapes").join(file)).unwrap();
            let shape = Shape::from_yaml(&text, file).unwrap();
            for n in [1, 2, 3] {
                let Ok(plan) = binder_plan::plan(
                    &binder_plan::PlanRequest::new(&shape, &topo, n).origin(file),
                ) else {
                    continue;
                };
                let views: Vec<TaskView> = (0..n)
                    .map(|r| binder_plan::rank_view::launch_view(&plan, &shape, r))
                    .collect();
                let key = Key {
                    format: 1,
                    binder: "test".into(),
                    hwloc: None,
                    loader: Vec::new(),
                    hwloc_env: Vec::new(),
                    boot: name.clone(),
                    // Every CPU the XML has is online (a plan names no other).
                    online: binder_core::cpulist::cpu_list(
                        &topo.allowed().iter_set().collect::<Vec<usize>>(),
                    ),
                    cgroup: Vec::new(),
                    mounts: String::new(),
                    cpuset_dirs: Some(Vec::new()),
                    cpuset_files: Vec::new(),
                    shape: text.clone(),
                    local_size: n,
                    gpus_per_task: None,
                };
                let pack: binder_core::view::Packing =
                    shape.options.pack.unwrap_or_default().into();
                cache.store(&key, views.clone(), pack).unwrap();
                assert_eq!(
                    cache.lookup(&key).unwrap(),
                    (views, pack),
                    "{name} {file} n={n}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 300, "only {checked} plans");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `binder ARGS -- sh -c 'grep Cpus_allowed_list …; env | grep ^BINDER_'` with the
/// cache in `dir` and its trace on; returns (what the task printed, the trace lines).
fn launch(dir: &Path, prefix: &[&str], args: &[&str]) -> (String, String) {
    let bin = binder();
    let mut cmd = Command::new(
        prefix
            .first()
            .copied()
            .unwrap_or(crate::common::binder_exe()),
    );
    if !prefix.is_empty() {
        cmd.args(&prefix[1..]).arg(bin.get_program());
    }
    cmd.args(args)
        .args([
            "--",
            "sh",
            "-c",
            "grep Cpus_allowed_list /proc/self/status; env | grep ^BINDER_ | grep -v -e ^BINDER_LEDGER_DIR= -e ^BINDER_CACHE_DIR= | sort",
        ])
        .current_dir(root());
    // The same clean environment as every launch under test, its private ledger too,
    // but this test's own cache.
    for (k, v) in bin.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.env("BINDER_CACHE_DIR", dir)
        .env("BINDER_CACHE_TRACE", "1");
    let out: Output = run(&mut cmd, 0);
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn hits_misses_and_repairs_on_this_host() {
    let dir = scratch("host");
    let shape = [
        "--local-rank",
        "0",
        "--local-size",
        "1",
        "shapes/cores-packed.yaml",
    ];
    let (cold, trace) = launch(&dir, &[], &shape);
    assert!(
        trace.contains("cache miss") && trace.contains("cache store"),
        "{trace}"
    );
    let (warm, trace) = launch(&dir, &[], &shape);
    assert!(trace.contains("cache hit"), "{trace}");
    assert_eq!(warm, cold, "a hit launches what a cold run does");
    // Without a launcher a narrower inherited affinity is the job's allocation (SEMANTICS
    // §4.1): another entry, and the task stays inside it; the same again is a hit.
    if prerequisite(crate::common::has("taskset"), "taskset") && cold.contains("0-") {
        let (narrow, trace) = launch(&dir, &["taskset", "-c", "0"], &shape);
        assert!(trace.contains("cache miss"), "{trace}");
        assert!(narrow.contains("Cpus_allowed_list:\t0\n"), "{narrow}");
        let (again, trace) = launch(&dir, &["taskset", "-c", "0"], &shape);
        assert!(trace.contains("cache hit"), "{trace}");
        assert_eq!(again, narrow);
    }
    // Another shape (same file contents but one more rank) is another entry: a miss.
    let other = [
        "--local-rank",
        "0",
        "--local-size",
        "1",
        "shapes/pus-interleave.yaml",
    ];
    let (_, trace) = launch(&dir, &[], &other);
    assert!(trace.contains("cache miss"), "{trace}");
    // A corrupt file is a miss, then rewritten and a hit again.
    for entry in std::fs::read_dir(&dir).unwrap() {
        std::fs::write(entry.unwrap().path(), "{torn").unwrap();
    }
    let (again, trace) = launch(&dir, &[], &shape);
    assert!(
        trace.contains("corrupt") && trace.contains("cache store"),
        "{trace}"
    );
    assert_eq!(again, cold);
    let (_, trace) = launch(&dir, &[], &shape);
    assert!(trace.contains("cache hit"), "{trace}");
    // #54: an entry whose bound task has no CPU (`"cpus":[]`) is a miss, replaced by a
    // fresh plan, not a refusal at every later launch.
    let mut emptied_any = false;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let emptied = regex_free_cpus_emptied(&text);
        if emptied != text {
            std::fs::write(&path, emptied).unwrap();
            emptied_any = true;
        }
    }
    assert!(emptied_any, "no entry named its cpus");
    let (again, trace) = launch(&dir, &[], &shape);
    assert!(
        trace.contains("binds a task to no CPU") && trace.contains("cache store"),
        "{trace}"
    );
    assert_eq!(again, cold);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `text` with every `"cpus":[…]` array emptied.
fn regex_free_cpus_emptied(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\"cpus\":[") {
        let start = at + "\"cpus\":[".len();
        out.push_str(&rest[..start]);
        let end = rest[start..].find(']').map_or(rest.len(), |e| start + e);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A cache directory or file of another user is never read.
#[test]
fn another_users_cache_is_never_read() {
    let root_user = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    if !prerequisite(root_user, "root (to create files of another user)") {
        return;
    }
    let dir = scratch("foreign");
    let shape = ["shapes/cores-packed.yaml"];
    launch(&dir, &[], &shape);
    // A planted file of another user (uid 65534, `nobody`), in this user's directory.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
    }
    let (_, trace) = launch(&dir, &[], &shape);
    assert!(trace.contains("not a private file of this user"), "{trace}");
    // A directory of another user: the cache is off.
    let foreign = scratch("foreign-dir");
    std::fs::create_dir_all(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
    let (_, trace) = launch(&foreign, &[], &shape);
    assert!(
        trace.contains("cache off") && trace.contains("belongs to uid 65534"),
        "{trace}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&foreign);
}

/// The mount point of the cgroup v1 cpuset hierarchy this process sees, mounting one (as
/// root) when none is visible (a chroot); the flag says whether the test mounted it.
fn cpuset_mount() -> Option<(PathBuf, bool)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        if let Some(dash) = f.iter().position(|x| *x == "-") {
            if f.get(dash + 1) == Some(&"cgroup")
                && f.get(dash + 3)
                    .is_some_and(|o| o.split(',').any(|o| o == "cpuset"))
                && f.get(3) == Some(&"/")
            {
                return Some((PathBuf::from(f[4]), false));
            }
        }
    }
    let dir = crate::common::scratch().join("cpuset");
    std::fs::create_dir_all(&dir).ok()?;
    let ok = Command::new("mount")
        .args(["-t", "cgroup", "-o", "cpuset", "binder-test"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    ok.then_some((dir, true))
}

/// A cpuset cgroup with fewer CPUs changes the allowed set: a miss, and the plan follows
/// the cgroup. Needs root, 2 CPUs and a cgroup v1 cpuset hierarchy (mounted if need be).
#[test]
fn a_changed_allowed_cpuset_misses() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mount = if cpus >= 2 { cpuset_mount() } else { None };
    let cg = mount
        .as_ref()
        .map(|(m, _)| m.join(format!("binder-test-{}", std::process::id())));
    let usable = cg
        .as_ref()
        .is_some_and(|cg| std::fs::create_dir(cg).is_ok());
    if !prerequisite(usable, "root, 2 CPUs and a cgroup v1 cpuset hierarchy") {
        return;
    }
    let ((mount, mounted), cg) = (mount.unwrap(), cg.unwrap());
    let mems = std::fs::read_to_string(mount.join("cpuset.mems")).unwrap();
    std::fs::write(cg.join("cpuset.mems"), mems).unwrap();
    std::fs::write(cg.join("cpuset.cpus"), "1").unwrap();
    let dir = scratch("cgroup");
    let shape = ["shapes/cores-packed.yaml"];
    let (outside, _) = launch(&dir, &[], &shape);
    let (_, hit) = launch(&dir, &[], &shape);
    // The same launch from inside the cgroup (the shell moves itself in, then execs).
    let script = format!("echo $$ > {}/tasks && exec \"$@\"", cg.display());
    let (inside, trace) = launch(&dir, &["sh", "-c", &script, "sh"], &shape);
    let (_, inside_hit) = launch(&dir, &["sh", "-c", &script, "sh"], &shape);
    // The same cgroup with other CPUs: the entry's cgroup directory is read afresh.
    std::fs::write(cg.join("cpuset.cpus"), "0").unwrap();
    let (changed, changed_trace) = launch(&dir, &["sh", "-c", &script, "sh"], &shape);
    let _ = std::fs::remove_dir(&cg);
    if mounted {
        let _ = Command::new("umount").arg(&mount).status();
        let _ = std::fs::remove_dir(&mount);
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(hit.contains("cache hit"), "{hit}");
    assert!(trace.contains("cache miss"), "{trace}");
    assert!(inside.contains("Cpus_allowed_list:\t1\n"), "{inside}");
    assert_ne!(inside, outside);
    assert!(inside_hit.contains("cache hit"), "{inside_hit}");
    assert!(changed_trace.contains("cache miss"), "{changed_trace}");
    assert!(changed.contains("Cpus_allowed_list:\t0\n"), "{changed}");
}

/// `HWLOC_XMLFILE`/`HWLOC_SYNTHETIC` make hwloc describe another machine (issue #22): such
/// a launch is refused (125, the command never runs), every `HWLOC_*` variable is part of
/// the cache key, and a plain launch afterwards binds as it did before (before #22 one
/// launch under them poisoned the cache: later plain launches bound wrongly or refused).
#[test]
fn another_machines_topology_is_refused_and_never_cached() {
    let Some(shared) = shared() else { return };
    let dir = scratch("hwloc-env");
    let shape = [
        "--local-rank",
        "0",
        "--local-size",
        "1",
        "shapes/cores-packed.yaml",
    ];
    let (cold, _) = launch(&dir, &[], &shape);
    let marker = dir.join("ran");
    let xml = xml_path(&shared, "skylake-2s-36c-smt2.xml");
    for (var, value) in [
        ("HWLOC_XMLFILE", xml.display().to_string()),
        ("HWLOC_SYNTHETIC", "pack:4 core:8 pu:2".to_owned()),
    ] {
        let out = run(
            binder()
                .args(shape)
                .args(["--", "touch"])
                .arg(&marker)
                .env("BINDER_CACHE_DIR", &dir)
                .env(var, &value),
            125,
        );
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("binder: hwloc describes another machine than this one ("),
            "{err}"
        );
        assert!(err.contains(var), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(!marker.exists(), "the task ran under {var}");
    }
    let (after, trace) = launch(&dir, &[], &shape);
    assert_eq!(after, cold, "{trace}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The key holds every `HWLOC_*` variable: an entry stored without one does not answer a
/// launch with it (`HWLOC_HIDE_ERRORS` changes nothing hwloc finds, so the launch runs).
#[test]
fn hwloc_variables_are_part_of_the_key() {
    let dir = scratch("hwloc-key");
    let shape = [
        "--local-rank",
        "0",
        "--local-size",
        "1",
        "shapes/cores-packed.yaml",
    ];
    let (cold, _) = launch(&dir, &[], &shape);
    let (_, trace) = launch(&dir, &[], &shape);
    assert!(trace.contains("cache hit"), "{trace}");
    let out = run(
        binder()
            .args(shape)
            .args(["--", "grep", "Cpus_allowed_list", "/proc/self/status"])
            .env("BINDER_CACHE_DIR", &dir)
            .env("BINDER_CACHE_TRACE", "1")
            .env("HWLOC_HIDE_ERRORS", "1"),
        0,
    );
    let trace = String::from_utf8(out.stderr).unwrap();
    assert!(trace.contains("cache miss"), "{trace}");
    let allowed = String::from_utf8(out.stdout).unwrap();
    assert!(cold.starts_with(&allowed), "{cold} vs {allowed}");
    let _ = std::fs::remove_dir_all(&dir);
}
