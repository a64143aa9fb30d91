//! binder is two executables: `binder` (binder-core alone, linked without libhwloc; its
//! own tests are in tests/front.rs) binds warm launches itself and hands everything else
//! to `binder-full` beside it.

use std::process::Command;

use crate::common::{binder, root};

/// A warm launch is bound by `binder` itself; a cold one, and everything that is not a
/// launch, goes through `binder-full`, with the same result as running it directly.
#[test]
fn warm_launches_stay_in_binder_and_the_rest_is_handed_over() {
    let dir = crate::common::scratch().join("exe");
    let _ = std::fs::remove_dir_all(&dir);
    let launch = || {
        let out = binder()
            .args(["shapes/cores-packed.yaml", "--", "true"])
            .env("BINDER_CACHE_DIR", &dir)
            .env("BINDER_LEDGER", "off")
            .env("BINDER_CACHE_TRACE", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    let cold = launch();
    assert!(cold.contains("hands the launch to binder-full"), "{cold}");
    assert!(cold.contains("cache store"), "{cold}");
    let warm = launch();
    assert!(warm.contains("cache hit"), "{warm}");
    assert!(!warm.contains("binder-full"), "{warm}");
    let _ = std::fs::remove_dir_all(&dir);
    // Not a launch: the same bytes and exit status as binder-full's own.
    for args in [
        &["--dry-run", "--local-size", "3", "shapes/cores-packed.yaml"][..],
        &["--version"],
        &["--dry-run", "no-such-shape.yaml"],
    ] {
        let through = binder().args(args).output().unwrap();
        let direct = Command::new(env!("CARGO_BIN_EXE_binder-full"))
            .args(args)
            .current_dir(root())
            .output()
            .unwrap();
        assert_eq!(through.status.code(), direct.status.code(), "{args:?}");
        assert_eq!(through.stdout, direct.stdout, "{args:?}");
        assert_eq!(through.stderr, direct.stderr, "{args:?}");
    }
}

/// The warm path parses no shape: a rank's `openmp` reaches it in the cached view, and a
/// rank with `membind: local` (which needs the topology) is handed over.
#[test]
fn rank_options_reach_the_warm_path_in_the_view() {
    let dir = crate::common::scratch().join("exe-opts");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let openmp = dir.join("openmp.yaml");
    std::fs::write(
        &openmp,
        "options:\n  openmp: true\nresources:\n  - type: core\n    count: all\n",
    )
    .unwrap();
    let launch = |shape: &std::path::Path| {
        let out = binder()
            .arg(shape)
            .args(["--", "sh", "-c", "env | grep ^OMP_ | sort"])
            .env("BINDER_CACHE_DIR", dir.join("cache"))
            .env("BINDER_LEDGER", "off")
            .env("BINDER_CACHE_TRACE", "1")
            .env_remove("OMP_PLACES")
            .env_remove("OMP_PROC_BIND")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (cold, trace) = launch(&openmp);
    assert!(trace.contains("hands the launch"), "{trace}");
    let (warm, trace) = launch(&openmp);
    assert!(!trace.contains("hands the launch"), "{trace}");
    assert!(
        warm.contains("OMP_PLACES=") && warm.contains("OMP_PROC_BIND="),
        "{warm}"
    );
    assert_eq!(warm, cold);
    let membind = root().join("shapes/hybrid-numa-openmp.yaml");
    for _ in 0..2 {
        let (env, trace) = launch(&membind);
        assert!(trace.contains("hands the launch"), "{trace}");
        assert!(env.contains("OMP_PLACES="), "{env}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
