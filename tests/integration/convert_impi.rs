//! `binder convert --from impi` (#64): Intel MPI's `I_MPI_PIN_*` variables, checked
//! against the placements Intel MPI's Developer Reference draws for them ("I_MPI_PIN_ORDER":
//! a node of two sockets of four cores, four ranks in domains of two CPUs; "I_MPI_PIN_DOMAIN"
//! core, socket and auto; "I_MPI_PIN_PROCESSOR_LIST"), on the synthetic node
//! `pack:2 core:4 pu:1` (core c of socket s is CPU 4s + c).

use crate::common::binder;

/// Each rank's CPUs as binder plans `convert --from impi -- VARS` for `np` ranks.
fn plan(vars: &str, np: usize) -> Result<Vec<String>, String> {
    let out = binder()
        .args(["convert", "--from", "impi", "--"])
        .args(vars.split_whitespace())
        .output()
        .unwrap();
    if out.status.code() != Some(0) {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let path = crate::common::scratch().join(format!(
        "impi-{}.yaml",
        vars.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    ));
    std::fs::write(&path, &out.stdout).unwrap();
    let dry = binder()
        .args([
            "--dry-run",
            "--format",
            "json",
            "--synthetic",
            "pack:2 core:4 pu:1",
        ])
        .args(["--local-size", &np.to_string()])
        .arg(&path)
        .output()
        .unwrap();
    assert!(dry.status.success(), "{vars}: {dry:?}");
    Ok(String::from_utf8_lossy(&dry.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let cpus: Vec<String> = v["cpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.to_string())
                .collect();
            cpus.join(",")
        })
        .collect())
}

#[test]
fn intel_mpi_s_documented_placements() {
    // I_MPI_PIN_ORDER's figures: domains of 2 CPUs, 4 ranks.
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=2 I_MPI_PIN_ORDER=compact", 4).unwrap(),
        ["0,1", "2,3", "4,5", "6,7"]
    );
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=2 I_MPI_PIN_ORDER=scatter", 4).unwrap(),
        ["0,1", "4,5", "2,3", "6,7"]
    );
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=2 I_MPI_PIN_ORDER=bunch", 4).unwrap(),
        ["0,1", "2,3", "4,5", "6,7"]
    );
    // One core each; one socket each; the node's CPUs shared out (auto).
    assert_eq!(plan("I_MPI_PIN_DOMAIN=core", 3).unwrap(), ["0", "1", "2"]);
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=socket", 2).unwrap(),
        ["0,1,2,3", "4,5,6,7"]
    );
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=auto", 2).unwrap(),
        ["0,1,2,3", "4,5,6,7"]
    );
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=omp OMP_NUM_THREADS=4", 2).unwrap(),
        ["0,1,2,3", "4,5,6,7"]
    );
    // The processor list and masks, by the kernel's numbers.
    assert_eq!(
        plan("I_MPI_PIN_PROCESSOR_LIST=0,3,5", 3).unwrap(),
        ["0", "3", "5"]
    );
    assert_eq!(
        plan("I_MPI_PIN_DOMAIN=[0x3,0xC0]", 2).unwrap(),
        ["0,1", "6,7"]
    );
    // Off; and what a shape cannot say, refused in one line naming the way round.
    // (`bind: none`: the dry-run binds no task, each keeps what it started with.)
    assert_eq!(plan("I_MPI_PIN=off", 2).unwrap(), ["", ""]);
    for (vars, says) in [
        ("I_MPI_PIN_DOMAIN=omp", "OMP_NUM_THREADS"),
        ("I_MPI_PIN_DOMAIN=2:scatter", "compact"),
        ("I_MPI_PIN_PROCESSOR_LIST=allcores", "I_MPI_PIN_DOMAIN"),
        ("I_MPI_PIN_ORDER=zigzag", "range, scatter"),
        ("I_MPI_FABRICS=shm", "not an Intel MPI pinning variable"),
    ] {
        let err = plan(vars, 2).unwrap_err();
        assert_eq!(err.lines().count(), 1, "{vars}: {err}");
        assert!(
            err.starts_with("binder: ") && err.contains(says),
            "{vars}: {err}"
        );
    }
}
