use super::key::cpuset_lines;
use super::*;
use crate::view::FORMAT;

fn view(cpus: Vec<usize>) -> TaskView {
    TaskView {
        unit: "core".into(),
        places: vec![cpus.clone()],
        cpus,
        gpus: vec![crate::view::GpuView {
            number: 0,
            busid: "0000:01:00.0".into(),
            vendor: "nvidia".into(),
            export: "0".into(),
        }],
        nics: vec!["ib0".into()],
        nic_vars: vec![("UCX_NET_DEVICES".into(), "mlx5_0:1".into())],
        binding: "unit core: core:0 cpus 0-1 mask 0x00000003".into(),
        ge_env: vec![("GCS_BINDING".into(), "0 1".into())],
        apply: true,
        openmp: false,
        membind: None,
        memory: Default::default(),
    }
}

fn key(shape: &str) -> Key {
    Key {
        format: FORMAT,
        binder: "x".into(),
        hwloc: Some(Library {
            path: "/no/such/libhwloc.so.15".into(),
            stamp: String::new(),
        }),
        loader: vec![String::new(), String::new()],
        hwloc_env: Vec::new(),
        boot: "b".into(),
        online: "0-3".into(),
        cgroup: vec!["0::/".into()],
        mounts: "mnt:[1]".into(),
        cpuset_dirs: Some(Vec::new()),
        cpuset_files: Vec::new(),
        shape: shape.into(),
        local_size: 2,
        gpus_per_task: None,
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("binder-cache-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

#[test]
fn store_then_lookup_and_what_misses() {
    let dir = scratch("round");
    let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
    let cache = Cache::open(&get).unwrap();
    let views = vec![view(vec![0, 1]), view(vec![2, 3])];
    cache.store(&key("a"), views.clone(), Pack::Fill).unwrap();
    assert_eq!(cache.lookup(&key("a")).unwrap().0, views);
    // A changed shape is another key: a miss.
    assert!(cache.lookup(&key("b")).is_err());
    // A corrupt file is a miss, and a store repairs it.
    fs::write(cache.path(&key("a")), "{not json").unwrap();
    assert!(cache.lookup(&key("a")).unwrap_err().contains("corrupt"));
    cache.store(&key("a"), views.clone(), Pack::Fill).unwrap();
    assert_eq!(cache.lookup(&key("a")).unwrap().0, views);
    // An entry naming a CPU the node does not have (edited by hand, damaged) is a miss,
    // which the fresh plan's store replaces (#45).
    cache
        .store(
            &key("a"),
            vec![view(vec![0, 1]), view(vec![2, 77])],
            Pack::Fill,
        )
        .unwrap();
    assert!(cache
        .lookup(&key("a"))
        .unwrap_err()
        .contains("cpu 77, which is not online"));
    cache.store(&key("a"), views.clone(), Pack::Fill).unwrap();
    assert_eq!(cache.lookup(&key("a")).unwrap().0, views);
    // A file others may write is never trusted.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(cache.path(&key("a")), fs::Permissions::from_mode(0o666)).unwrap();
    assert!(cache
        .lookup(&key("a"))
        .unwrap_err()
        .contains("not a private file"));
    let _ = fs::remove_dir_all(&dir);
}

/// The `binder` executable keys without a library (it has not loaded libhwloc): it
/// stamps the one the file names, so a replaced library is a miss for it too.
#[test]
fn a_replaced_library_misses_for_both_executables() {
    let dir = scratch("library");
    let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
    let cache = Cache::open(&get).unwrap();
    let lib = dir.join("libhwloc.so.15");
    fs::write(&lib, "one").unwrap();
    // binder-full stamps the library it loaded, afresh on every launch.
    let full = || Key {
        hwloc: Some(Library::at(&lib.display().to_string())),
        ..key("a")
    };
    let front = Key {
        hwloc: None,
        ..key("a")
    };
    assert_eq!(full().digest(), front.digest(), "both name the same file");
    let views = vec![view(vec![0]), view(vec![1])];
    cache.store(&full(), views.clone(), Pack::Fill).unwrap();
    assert_eq!(cache.lookup(&full()).unwrap().0, views);
    assert_eq!(cache.lookup(&front).unwrap().0, views);
    // An upgrade replaces the file: another size (and time).
    fs::write(&lib, "two, longer").unwrap();
    assert!(cache.lookup(&full()).is_err());
    assert!(cache.lookup(&front).is_err());
    // The loader's variables could make binder-full load another libhwloc.
    let other_loader = Key {
        loader: vec!["/opt/hwloc/lib".into(), String::new()],
        ..front.clone()
    };
    cache.store(&full(), views.clone(), Pack::Fill).unwrap();
    assert_eq!(cache.lookup(&front).unwrap().0, views);
    assert!(cache.lookup(&other_loader).is_err());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_directory_open_to_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("open");
    fs::create_dir_all(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    let get = |k: &str| (k == "BINDER_CACHE_DIR").then(|| dir.display().to_string());
    assert!(Cache::open(&get).unwrap_err().contains("open to others"));
    let off = |k: &str| (k == "BINDER_CACHE").then(|| "off".to_owned());
    assert_eq!(Cache::open(&off).unwrap_err(), "BINDER_CACHE=off");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn cgroup_lines_name_their_effective_sets() {
    let mounts = "34 31 0:31 / /no/such/cpuset rw,relatime - cgroup cgroup rw,cpuset\n\
                      35 31 0:32 / /no/such/cpu rw - cgroup cgroup rw,cpu\n\
                      36 31 0:33 /job /no/such/v2 rw - cgroup2 cgroup2 rw\n";
    // Other controllers are not part of the key.
    assert_eq!(cpuset_lines("4:memory:/x\n"), Vec::<String>::new());
    let lines = cpuset_lines("4:memory:/x\n3:cpuset:/job\n0::/job/step\n");
    assert_eq!(lines, ["3:cpuset:/job", "0::/job/step"]);
    // Each line under its hierarchy's mount points; a v2 mount of a subtree (a
    // container's) is entered below its root.
    let dirs = cpuset_dirs(&lines, mounts);
    let named: Vec<(bool, &str)> = dirs.iter().map(|d| (d.v2, d.dir.as_str())).collect();
    assert_eq!(
        named,
        [(false, "/no/such/cpuset/job"), (true, "/no/such/v2/step")]
    );
    // A mounted v1 cpuset hierarchy whose files cannot be read: no key.
    let e = cpuset_files(&dirs[..1]).unwrap_err();
    assert!(
        e.contains("/no/such/cpuset/job/cpuset.effective_cpus"),
        "{e}"
    );
    // A v2 directory without the cpuset controller's files: no limit to key on.
    assert_eq!(cpuset_files(&dirs[1..]).unwrap(), Vec::<String>::new());
    // Not mounted where this process can see (a chroot): the lines alone.
    assert!(cpuset_dirs(&lines, "").is_empty());
    assert_eq!(key("a").digest(), key("a").digest());
    assert_ne!(key("a").digest(), key("b").digest());
    // The directories and files are not part of the name: a lookup learns them.
    let looked = Key {
        cpuset_dirs: None,
        ..key("a")
    };
    assert_eq!(looked.digest(), key("a").digest());
}
