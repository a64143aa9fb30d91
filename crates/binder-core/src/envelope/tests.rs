//! The envelope as each launcher says it, on fake process trees.

use super::*;
use crate::procfs::{Stat, Status};

/// A process tree: pid → (comm, ppid).
struct Tree(Vec<(u32, &'static str, u32)>);

impl Procs for Tree {
    fn me(&self) -> u32 {
        self.0[0].0
    }
    fn stat(&self, pid: u32) -> Option<Stat> {
        let &(_, comm, ppid) = self.0.iter().find(|p| p.0 == pid)?;
        Some(Stat {
            comm: comm.into(),
            state: 'S',
            ppid,
            pgrp: pid,
            start: 1,
            threads: 1,
        })
    }
    fn status(&self, _: u32) -> Option<Status> {
        None
    }
}

/// `flux` is never asked.
fn no_flux(args: &[&str]) -> Result<String, String> {
    panic!("flux {args:?} asked")
}

fn with(launcher: Option<Launcher>) -> Identity {
    Identity {
        launcher,
        ..Identity::given(0, 2)
    }
}

#[test]
fn slurm_masks_are_the_union_of_the_tasks() {
    let env = |t: &'static str, l: &'static str| {
        move |k: &str| match k {
            "SLURM_CPU_BIND_TYPE" => Some(t.to_owned()),
            "SLURM_CPU_BIND_LIST" => Some(l.to_owned()),
            _ => None,
        }
    };
    assert_eq!(slurm_masks(&env("mask_cpu:", "0x1,0x2")), Some(vec![0, 1]));
    assert_eq!(slurm_masks(&env("mask_cpu:", "0x30")), Some(vec![4, 5]));
    // 0x100000000: CPU 32, past a u32.
    assert_eq!(
        slurm_masks(&env("mask_cpu:", "0x100000000")),
        Some(vec![32])
    );
    assert_eq!(slurm_masks(&env("map_cpu:", "3,1")), Some(vec![1, 3]));
    assert_eq!(slurm_masks(&env("none", "")), None);
    assert_eq!(slurm_masks(&env("cores", "cores")), None);
    assert_eq!(slurm_masks(&env("mask_cpu:", "0xzz")), None);
    assert_eq!(slurm_masks(&env("mask_cpu:", "0x0")), None);
}

#[test]
fn the_daemon_of_the_launcher_says_it() {
    // binder (10) ← sh (9) ← flux-shell (5) ← flux-broker (1... not 1: 2).
    let tree = Tree(vec![
        (10, "binder", 9),
        (9, "sh", 5),
        (5, "flux-shell", 2),
        (2, "flux-broker-0", 1),
    ]);
    let affinity = |pid: Option<u32>| match pid {
        Some(5) => Some(vec![2, 3]),
        Some(_) => Some(vec![0, 1, 2, 3]),
        None => Some(vec![3]),
    };
    let e = Envelope::learn(
        &with(Some(Launcher::Flux)),
        &|_| None,
        &tree,
        &affinity,
        &no_flux,
    );
    assert_eq!(e.cpus, Some(vec![2, 3]));
    assert_eq!(
        e.source,
        Source::Daemon {
            name: "flux-shell".into(),
            pid: 5
        }
    );
    assert!(e.describe().contains("cpus 2-3"), "{}", e.describe());
    assert_eq!(e.key(), "\n#envelope:2-3");
    // Open MPI's ranks under this tree find no daemon of theirs, but their parent
    // lives (a launcher binder does not know may have bound them): the allowed set.
    let e = Envelope::learn(
        &with(Some(Launcher::OpenMpi)),
        &|_| None,
        &tree,
        &affinity,
        &no_flux,
    );
    assert_eq!(e, Envelope::allowed());
    assert_eq!(e.key(), "");
    // No launcher: this process's own affinity.
    let e = Envelope::learn(&with(None), &|_| None, &tree, &affinity, &no_flux);
    assert_eq!((e.cpus, e.source), (Some(vec![3]), Source::Inherited));
}

#[test]
fn cores_a_plugin_names_are_keyed_apart_from_cpus() {
    let cores = Envelope::given_cores(vec![0, 1], None, "Flux's R for this node");
    let cpus = Envelope::given(vec![0, 1], "x");
    assert_eq!(cores.key(), "\n#envelope-cores:0-1");
    assert_ne!(cores.key(), cpus.key());
    assert!(cores
        .describe()
        .contains("cores 0-1 (hwloc's logical indexes), from Flux's R"));
    // An instance on part of the node numbers its own cores: keyed with its CPUs.
    let inner = Envelope::given_cores(vec![0], Some(vec![1]), "Flux's R for this node");
    assert_eq!(inner.key(), "\n#envelope-cores:0@1");
    assert!(
        inner.describe().contains("instance on cpus 1"),
        "{}",
        inner.describe()
    );
}

#[test]
fn slurm_without_masks_is_the_cgroup() {
    let tree = Tree(vec![(10, "binder", 5), (5, "slurmstepd", 1)]);
    let e = Envelope::learn(
        &with(Some(Launcher::Slurm)),
        &|_| None,
        &tree,
        &|_| Some(vec![0]),
        &no_flux,
    );
    assert_eq!(e, Envelope::allowed());
}

#[test]
fn orphans_keep_what_they_inherited() {
    // `(binder … &)` under Flux and Hydra: the parent exited, init or a subreaper
    // (a Flux broker) adopted binder; the job's core it inherited is the allocation
    // (SEMANTICS §4.2), never the node's allowed set.
    let affinity = |pid: Option<u32>| pid.map_or(Some(vec![1]), |_| Some(vec![0, 1]));
    for (tree, launcher) in [
        (Tree(vec![(10, "binder", 1)]), Launcher::Flux),
        (
            Tree(vec![(10, "binder", 7), (7, "flux-broker-0", 1)]),
            Launcher::Flux,
        ),
        (
            Tree(vec![(10, "binder", 7), (7, "systemd", 1)]),
            Launcher::Hydra,
        ),
    ] {
        let e = Envelope::learn(&with(Some(launcher)), &|_| None, &tree, &affinity, &no_flux);
        assert_eq!(
            (e.cpus.clone(), e.source.clone()),
            (Some(vec![1]), Source::Orphan)
        );
        assert!(
            e.describe().contains("its parent exited"),
            "{}",
            e.describe()
        );
    }
}

#[test]
fn a_loop_in_the_tree_ends() {
    let tree = Tree(vec![(10, "binder", 9), (9, "sh", 8), (8, "sh", 9)]);
    let e = Envelope::learn(
        &with(Some(Launcher::Hydra)),
        &|_| None,
        &tree,
        &|_| Some(vec![0]),
        &no_flux,
    );
    assert_eq!(e, Envelope::allowed());
}

#[test]
fn a_flux_shell_bound_as_its_broker_asks_r() {
    // `flux run -o cpu-affinity=off` in an instance on CPUs 0-3: the shell (5) keeps its
    // broker's binding, so R says the job's core (logical 1 of the instance).
    let tree = Tree(vec![
        (10, "binder", 5),
        (5, "flux-shell", 2),
        (2, "flux-broker-3", 1),
    ]);
    let affinity = |pid: Option<u32>| match pid {
        None => Some(vec![0, 1, 2, 3]),
        Some(_) => Some(vec![0, 1, 2, 3]),
    };
    let asked = std::cell::RefCell::new(Vec::new());
    let ask = |args: &[&str]| {
        asked.borrow_mut().push(args.join(" "));
        Ok(r#"{"version": 1, "execution": {"R_lite": [{"rank": "3", "children": {"core": "1"}}, {"rank": "4", "children": {"core": "0"}}]}}"#.to_owned())
    };
    let env = |k: &str| match k {
        "FLUX_JOB_ID" => Some("fA1".to_owned()),
        "FLUX_JOB_NNODES" => Some("2".to_owned()),
        _ => None,
    };
    let e = Envelope::learn(&with(Some(Launcher::Flux)), &env, &tree, &affinity, &ask);
    assert_eq!(
        e.cores,
        Some(Cores {
            indexes: vec![1],
            instance: Some(vec![0, 1, 2, 3])
        })
    );
    assert!(
        e.describe().contains("cpu-affinity=off"),
        "{}",
        e.describe()
    );
    // The broker's rank came from its name: one question, for R.
    assert_eq!(*asked.borrow(), ["job info fA1 R"]);

    // R cannot be read: the shell's binding is all binder knows.
    let e = Envelope::learn(&with(Some(Launcher::Flux)), &env, &tree, &affinity, &|_| {
        Err("no flux".into())
    });
    assert_eq!(e.cpus, Some(vec![0, 1, 2, 3]));
}
