use super::*;
use std::collections::HashMap;

struct Fake(HashMap<&'static str, &'static str>, Option<&'static str>);

impl Env for Fake {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| (*v).to_owned())
    }
    fn flux_taskmap(&self, _: &str) -> Result<String, String> {
        self.1
            .map(str::to_owned)
            .ok_or_else(|| "no flux here".into())
    }
}

fn env(vars: &[(&'static str, &'static str)]) -> Fake {
    Fake(vars.iter().copied().collect(), None)
}

fn who(vars: &[(&'static str, &'static str)]) -> Result<(Option<Launcher>, usize, usize), String> {
    identify(None, None, &env(vars))
        .map(|i| (i.launcher, i.rank, i.size))
        .map_err(|e| e.to_string())
}

#[test]
fn outside_any_launcher() {
    let id = identify(None, None, &env(&[])).unwrap();
    assert_eq!(
        (id.rank, id.size, id.rank_known, id.launcher),
        (0, 1, false, None)
    );
}

#[test]
fn each_mpi_launcher() {
    let cases = [
        (
            Launcher::OpenMpi,
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
        (Launcher::Hydra, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
        (
            Launcher::Mvapich,
            "MV2_COMM_WORLD_LOCAL_RANK",
            "MV2_COMM_WORLD_LOCAL_SIZE",
        ),
        (Launcher::Pals, "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"),
        (
            Launcher::Jsrun,
            "JSM_NAMESPACE_LOCAL_RANK",
            "JSM_NAMESPACE_LOCAL_SIZE",
        ),
    ];
    for (launcher, rank, size) in cases {
        assert_eq!(who(&[(rank, "2"), (size, "4")]), Ok((Some(launcher), 2, 4)));
        let e = who(&[(rank, "2")]).unwrap_err();
        assert!(
            e.contains(&format!("{rank} is set but {size} is not")),
            "{e}"
        );
        let e = who(&[(rank, "two"), (size, "4")]).unwrap_err();
        assert!(e.contains("\"two\" is not a whole number"), "{e}");
        let e = who(&[(rank, "4"), (size, "4")]).unwrap_err();
        assert!(e.contains("local rank 4 is not below local size 4"), "{e}");
    }
}

#[test]
fn innermost_launcher_wins() {
    let got = who(&[
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "1"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "8"),
    ]);
    assert_eq!(got, Ok((Some(Launcher::OpenMpi), 3, 8)));
    let got = who(&[
        ("SLURM_LOCALID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "1"),
        ("FLUX_TASK_LOCAL_ID", "1"),
        ("FLUX_JOB_NNODES", "1"),
        ("FLUX_JOB_SIZE", "2"),
    ]);
    assert_eq!(got, Ok((Some(Launcher::Flux), 1, 2)));
}

#[test]
fn flags_win_each_on_its_own() {
    let e = env(&[("MPI_LOCALRANKID", "1"), ("MPI_LOCALNRANKS", "4")]);
    let id = identify(Some(3), None, &e).unwrap();
    assert_eq!(
        (id.rank, id.size, id.launcher),
        (3, 4, Some(Launcher::Hydra))
    );
    let id = identify(None, Some(2), &e).unwrap();
    assert_eq!((id.rank, id.size), (1, 2));
    // Both flags: no launcher number is read, so a broken one does not matter; the
    // launcher is still named (its job id and its daemon's binding stay the job's).
    let broken = env(&[("MPI_LOCALRANKID", "x")]);
    let id = identify(Some(0), Some(1), &broken).unwrap();
    assert_eq!((id.launcher, id.vars.len()), (Some(Launcher::Hydra), 0));
    let flux = env(&[("FLUX_TASK_LOCAL_ID", "1"), ("FLUX_JOB_NNODES", "2")]);
    let id = identify(Some(1), Some(2), &flux).unwrap();
    assert_eq!(
        (id.launcher, id.rank, id.size),
        (Some(Launcher::Flux), 1, 2)
    );
    assert!(id
        .describe()
        .ends_with("from --local-rank/--local-size (under flux)"));
    let id = identify(Some(0), Some(1), &env(&[])).unwrap();
    assert_eq!(id.launcher, None);
    let e = identify(Some(2), None, &env(&[])).unwrap_err().to_string();
    assert_eq!(
            e,
            "task identity: local rank 2 is not below local size 1; give a --local-rank below --local-size"
        );
}

#[test]
fn slurm_compressed_forms() {
    let got = who(&[
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "3"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3),5"),
    ]);
    assert_eq!(got, Ok((Some(Launcher::Slurm), 1, 5)));
    let e = who(&[
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "4"),
        ("SLURM_STEP_TASKS_PER_NODE", "2(x3),5"),
    ])
    .unwrap_err();
    assert!(
        e.contains("SLURM_NODEID=4 but the list has 4 node(s)"),
        "{e}"
    );
    let e = who(&[("SLURM_LOCALID", "0")]).unwrap_err();
    assert!(e.contains("SLURM_STEP_TASKS_PER_NODE is not"), "{e}");
    let e = who(&[("SLURM_LOCALID", "0"), ("SLURM_STEP_TASKS_PER_NODE", "2(x")]).unwrap_err();
    assert!(e.contains("lacks its closing"), "{e}");
    // The job-level list stands in when the step's is missing (batch step).
    let got = who(&[("SLURM_LOCALID", "0"), ("SLURM_TASKS_PER_NODE", "3")]);
    assert_eq!(got, Ok((Some(Launcher::Slurm), 0, 3)));
}

#[test]
fn flux_task_map() {
    // 2 nodes × 3 tasks, then node 0 gets one more (cyclic remainder).
    let map = r#"{"version":1,"map":[[0,2,3,1],[0,1,1,1]]}"#;
    assert_eq!(flux::tasks_on_node_of(map, 0), Ok(4));
    assert_eq!(flux::tasks_on_node_of(map, 4), Ok(3));
    assert_eq!(flux::tasks_on_node_of(map, 6), Ok(4));
    assert!(flux::tasks_on_node_of(map, 7)
        .unwrap_err()
        .contains("no task 7"));
    assert!(flux::tasks_on_node_of("[]", 0).is_err());
    assert!(flux::tasks_on_node_of(r#"{"version":2,"map":[]}"#, 0).is_err());
    let fake = Fake(
        [
            ("FLUX_TASK_LOCAL_ID", "0"),
            ("FLUX_TASK_RANK", "4"),
            ("FLUX_JOB_NNODES", "2"),
            ("FLUX_JOB_SIZE", "7"),
            ("FLUX_JOB_ID", "f123"),
        ]
        .into_iter()
        .collect(),
        Some(map),
    );
    let id = identify(None, None, &fake).unwrap();
    assert_eq!(
        (id.launcher, id.rank, id.size),
        (Some(Launcher::Flux), 0, 3)
    );
    let no_flux = Fake(fake.0.clone(), None);
    let e = identify(None, None, &no_flux).unwrap_err().to_string();
    assert!(e.starts_with("flux task identity: no flux here"), "{e}");
}

#[test]
fn sizes_are_capped_before_anything_is_allocated() {
    let e = identify(None, Some(usize::MAX), &env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "local size 18446744073709551615 is more than binder plans for one node (65536)"
        ),
        "{e}"
    );
    let e = who(&[
        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "18446744073709551615"),
    ])
    .unwrap_err();
    assert!(e.starts_with("openmpi task identity: local size"), "{e}");
    let e = who(&[
        ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "0"),
    ])
    .unwrap_err();
    assert!(
        e.contains("local rank 0 is not below local size 0") || e.contains("local size 0"),
        "{e}"
    );
    let e = who(&[
        ("SLURM_LOCALID", "0"),
        ("SLURM_STEP_TASKS_PER_NODE", "1(x4000000000)"),
        ("SLURM_NODEID", "5"),
    ]);
    assert_eq!(e, Ok((Some(Launcher::Slurm), 0, 1)));
    let long = "9".repeat(10_000);
    let leaked: &'static str = Box::leak(long.into_boxed_str());
    let e = who(&[("MPI_LOCALRANKID", leaked), ("MPI_LOCALNRANKS", "2")]).unwrap_err();
    assert!(e.len() < 200, "{} characters", e.len());
}

#[test]
fn global_ranks_label_reports() {
    let id = identify(
        None,
        None,
        &env(&[
            ("SLURM_LOCALID", "1"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x4)"),
            ("SLURM_NODEID", "3"),
            ("SLURM_PROCID", "7"),
        ]),
    )
    .unwrap();
    assert_eq!((id.rank, id.global_rank), (1, Some(7)));
    let id = identify(
        None,
        None,
        &env(&[
            ("PMI_RANK", "x"),
            ("MPI_LOCALRANKID", "0"),
            ("MPI_LOCALNRANKS", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(id.global_rank, None);
}

#[test]
fn verbose_lists_what_was_read() {
    let id = identify(
        None,
        None,
        &env(&[("MPI_LOCALRANKID", "0"), ("MPI_LOCALNRANKS", "2")]),
    )
    .unwrap();
    assert_eq!(id.vars, ["MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2"]);
}

/// Two Flux brokers on one host (`flux start --test-size=2`) run one job's shells side by
/// side: each shell's tasks are a job of their own in the ledger, told apart by the shell
/// rank in FLUX_JOB_TMPDIR; a TMPDIR of another job or another form adds nothing.
#[test]
fn flux_shells_on_one_host_are_two_jobs() {
    let procs = crate::procfs::Real;
    let id = Identity {
        launcher: Some(Launcher::Flux),
        ..Identity::given(0, 1)
    };
    let job = |tmp: &'static str| {
        let e = env(&[("FLUX_JOB_ID", "f2Ab"), ("FLUX_JOB_TMPDIR", tmp)]);
        job::job_of(&id, &e, &procs).0
    };
    assert_eq!(job("/tmp/flux-x/jobtmp-0-f2Ab"), "flux:f2Ab.0");
    assert_eq!(job("/run/flux/jobtmp-1-f2Ab/"), "flux:f2Ab.1");
    assert_eq!(job("/tmp/jobtmp-1-other"), "flux:f2Ab");
    assert_eq!(job("/tmp/mine"), "flux:f2Ab");
}

/// The documented list is what identity reads: Flux's and Slurm's own readers read their
/// rows' size variables (or the global rank, for the task map) and nothing else.
#[test]
fn local_vars_are_the_launchers_variables() {
    for (source, launcher) in [
        (include_str!("flux.rs"), Launcher::Flux),
        (include_str!("slurm.rs"), Launcher::Slurm),
    ] {
        let row = launcher.row();
        let marker = format!("Launcher::{launcher:?}, \"");
        let read: Vec<&str> = source
            .split(marker.as_str())
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap())
            .collect();
        assert!(!read.is_empty(), "{launcher}");
        for name in read {
            assert!(
                row.local_size.contains(&name) || name == row.global_rank,
                "{name} is read by {launcher}'s identity but not in its row"
            );
            assert!(LOCAL_VARS.contains(&name) || name == row.global_rank);
        }
    }
}
