//! The node ledger against a hostile user (SEMANTICS §13.1), one test per attack found on
//! the previous ledger (issue 20), with three throwaway users: alice and bob run honest
//! jobs, mallory plants, forges, floods and races. Each scenario runs `hostile.sh` as root
//! in a private mount namespace with a fresh tmpfs on /dev/shm (binder's default ledger
//! root, set up by nobody), so the host's /dev/shm is never touched.
//!
//! Every test asserts what §13.1 promises: alice's launch exits 0 within 2 s, alice's and
//! bob's jobs never share a CPU, and none of mallory's bytes reach a terminal raw.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common;

const USERS: [&str; 3] = ["binder-alice", "binder-bob", "binder-mallory"];

/// Whether this process can make users and mount namespaces (root, with `unshare`).
fn can_run() -> bool {
    let root = rustix::process::geteuid().is_root();
    common::prerequisite(
        root && common::has("unshare")
            && common::has("setpriv")
            && common::has("useradd")
            && common::has("userdel"),
        "root with unshare, setpriv, useradd and userdel (the hostile-user tests, which make their users and remove them)",
    )
}

/// Runs one scenario; its stdout and stderr.
fn scenario(name: &str, env: &[(&str, &str)]) -> Option<(String, String)> {
    if !can_run() {
        return None;
    }
    let out = Command::new("unshare")
        // The script makes the namespace's mounts private itself: `--propagation private`
        // fails in a chroot, where / is no mount point.
        .args([
            "--mount",
            "--propagation",
            "unchanged",
            "--pid",
            "--fork",
            "bash",
        ])
        .arg(common::root().join("tests/hostile/hostile.sh"))
        .arg(common::binder_exe())
        .arg(name)
        .env("CLAIM_FORMAT", binder_core::view::FORMAT.to_string())
        .envs(env.iter().copied())
        .output()
        .expect("runs unshare");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{name}: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    Some((stdout, stderr))
}

/// `run USER TAG rc=N ms=N cpus=LIST` lines: (user, rc, ms, cpus).
fn runs(stdout: &str) -> Vec<(String, i32, u64, BTreeSet<usize>)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("run "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let num = |k: &str| {
                f.iter()
                    .find_map(|x| x.strip_prefix(k))
                    .unwrap_or("-1")
                    .to_owned()
            };
            let cpus = num("cpus=");
            (
                f[0].to_owned(),
                num("rc=").parse().unwrap(),
                num("ms=").parse().unwrap(),
                binder_core::procfs::parse_list(&cpus)
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            )
        })
        .collect()
}

/// Nothing of mallory's reached the honest users' terminals raw: no escape byte, no
/// line she made up.
fn clean(what: &str, text: &str) {
    assert!(
        !text.contains('\u{1b}'),
        "{what}: an escape byte got through:\n{text}"
    );
    assert!(!text.contains('\u{7}'), "{what}: a BEL byte got through");
    assert!(
        !text.lines().any(|l| l.starts_with("FAKE-LINE")),
        "{what}: a forged line got through:\n{text}"
    );
}

/// alice's (and bob's) launches ran, bound, fast, on different CPUs.
fn honest(name: &str, stdout: &str, stderr: &str) {
    clean(name, stdout);
    clean(name, stderr);
    let runs = runs(stdout);
    assert!(
        !runs.is_empty(),
        "{name}: no launch reported:\n{stdout}\n{stderr}"
    );
    for (user, rc, ms, cpus) in &runs {
        assert_eq!(
            *rc, 0,
            "{name}: {user}'s launch failed:\n{stdout}\n{stderr}"
        );
        assert!(
            *ms < 2000,
            "{name}: {user}'s launch took {ms} ms:\n{stderr}"
        );
        assert_eq!(
            cpus.len(),
            1,
            "{name}: {user} is not bound to one CPU:\n{stdout}"
        );
    }
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            assert!(
                a.3.is_disjoint(&b.3),
                "{name}: {} and {} share a CPU:\n{stdout}",
                a.0,
                b.0
            );
        }
    }
}

#[test]
fn forged_cpu_numbers_beyond_any_node_crash_nothing() {
    if let Some((out, err)) = scenario("huge-cpu", &[]) {
        honest("huge-cpu", &out, &err);
        users_are_gone();
    }
}

/// The scenario's users were removed when it ended: checked under the scenarios' own
/// lock (`/tmp/binder-hostile.lock`), so no other scenario has made them again meanwhile.
fn users_are_gone() {
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/binder-hostile.lock")
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    for user in USERS {
        let known = Command::new("id")
            .arg(user)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(!known, "{user} outlived its scenario");
    }
}

#[test]
fn a_forged_claim_holds_only_where_its_process_really_runs() {
    if let Some((out, err)) = scenario("bound-inside", &[]) {
        honest("bound-inside", &out, &err);
        // mallory's `taskset -c 0 sleep` holds CPU 0 (her own process really runs
        // there); her claim of 0-1 does not give her CPU 1, and the unbound sleep beside
        // a claim of everything holds nothing.
        assert_eq!(runs(&out)[0].3, BTreeSet::from([1]), "{out}");
    }
}

#[test]
fn names_taken_first_by_another_user_stop_nobody() {
    // With a home (the secret name) and without one (the bounded search).
    for env in [&[][..], &[("NOHOME", "1")][..]] {
        if let Some((out, err)) = scenario("squat", env) {
            honest("squat", &out, &err);
            assert!(!out.contains("mallory locked"), "{out}");
            assert!(!out.contains("mallory wrote"), "{out}");
        }
    }
}

#[test]
fn a_flood_of_junk_names_hides_no_real_job() {
    if let Some((out, err)) = scenario("flood", &[]) {
        honest("flood", &out, &err);
    }
}

#[test]
fn huge_and_many_forged_claims_cost_a_bounded_moment() {
    if let Some((out, err)) = scenario("big", &[]) {
        honest("big", &out, &err);
    }
}

/// SEMANTICS §13.5: a task's children inherit its binding and are that task, not jobs of
/// their own: `binder node` shows bob's job with its one task, and his `taskset` process
/// (no task's child) as a `pid:` job (on 23e2c73 each child was a `pid:` job too).
#[test]
fn binder_node_counts_a_tasks_children_as_the_task() {
    let Some((out, err)) = scenario("node-children", &[]) else {
        return;
    };
    assert!(out.contains("node-rc 0"), "{out}\n{err}");
    let jobs: Vec<(&str, &str)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("job "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let unclaimed = jobs.iter().filter(|(j, _)| j.starts_with("pid:")).count();
    let claimed: Vec<_> = jobs
        .iter()
        .filter(|(j, _)| !j.starts_with("pid:"))
        .collect();
    assert_eq!(claimed.len(), 1, "{out}\n{err}");
    assert_eq!(claimed[0].1, "1", "{out}\n{err}");
    assert_eq!(unclaimed, 1, "{out}\n{err}");
}

#[test]
fn binder_node_prints_none_of_another_users_bytes_raw() {
    if let Some((out, err)) = scenario("node-output", &[]) {
        clean("binder node", &out);
        clean("binder node", &err);
        assert!(out.contains("node-rc 0"), "{out}\n{err}");
        let bytes: usize = out
            .lines()
            .find_map(|l| l.strip_prefix("node-bytes "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap();
        assert!(bytes < 16 << 10, "binder node printed {bytes} bytes");
        // The forged job is shown (its process really runs on CPU 0), escaped and cut.
        assert!(err.contains("\\u{1b}[2J"), "{err}");
    }
}

#[test]
fn two_users_starting_at_once_never_share_a_cpu() {
    if let Some((out, err)) = scenario("race", &[]) {
        clean("race", &out);
        clean("race", &err);
        let rounds: Vec<&str> = out.lines().filter(|l| l.starts_with("round ")).collect();
        assert!(rounds.len() >= 20, "{out}");
        let mut both = 0;
        for line in &rounds {
            let cpus = |who: &str| {
                let v = line
                    .split(' ')
                    .find_map(|w| w.strip_prefix(who))
                    .unwrap_or("");
                binder_core::procfs::parse_list(v).unwrap_or_default()
            };
            let (a, b) = (cpus("alice="), cpus("bob="));
            assert!(
                !a.is_empty() && !b.is_empty(),
                "one of them did not run: {line}\n{err}"
            );
            assert!(a.iter().all(|c| !b.contains(c)), "collision: {line}");
            both += 1;
        }
        assert_eq!(both, rounds.len());
    }
}

#[test]
fn short_jobs_with_late_ranks_never_collide() {
    if let Some((out, err)) = scenario("short-jobs", &[]) {
        clean("short-jobs", &err);
        // (job, cpus, t0, t1) of every task that ran.
        let tasks: Vec<(u32, Vec<usize>, u128, u128)> = out
            .lines()
            .filter_map(|l| l.strip_prefix("task "))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (
                    f[0].parse().unwrap(),
                    binder_core::procfs::parse_list(f[2]).unwrap(),
                    f[3].parse().unwrap(),
                    f[4].parse().unwrap(),
                )
            })
            .collect();
        let jobs: BTreeSet<u32> = tasks.iter().map(|t| t.0).collect();
        assert!(
            jobs.len() >= 16,
            "too few jobs ran ({}):\n{err}",
            jobs.len()
        );
        let mut collisions = Vec::new();
        for (i, a) in tasks.iter().enumerate() {
            for b in &tasks[i + 1..] {
                let overlap = a.2 < b.3 && b.2 < a.3;
                let shared = a.1.iter().any(|c| b.1.contains(c));
                if a.0 != b.0 && overlap && shared {
                    collisions.push(format!("jobs {} and {} on {:?}", a.0, b.0, a.1));
                }
            }
        }
        assert!(
            collisions.is_empty(),
            "{} collisions: {:?}",
            collisions.len(),
            collisions
        );
        eprintln!(
            "short jobs: {} tasks of {} jobs ran, 0 collisions",
            tasks.len(),
            jobs.len()
        );
    }
}

/// The second pass (SEMANTICS §13.2): across users the kernel decides. Each attack
/// below once put alice on bob's live CPU, refused her, or cost seconds; now alice and
/// bob stay disjoint, run, and their launches take about a second at most.
fn fast_and_disjoint(name: &str, env: &[(&str, &str)], limit_ms: u64) -> Option<(String, String)> {
    let (out, err) = scenario(name, env)?;
    honest(name, &out, &err);
    for (user, _, ms, _) in runs(&out) {
        assert!(
            ms < limit_ms,
            "{name}: {user}'s launch took {ms} ms (at most {limit_ms}):\n{err}"
        );
    }
    Some((out, err))
}

#[test]
fn a_threaded_process_and_twenty_thousand_claims_do_not_hide_bob() {
    fast_and_disjoint("threads", &[], 1500);
}

#[test]
fn a_flood_of_names_in_the_ledger_root_does_not_hide_bob() {
    // 300,000 names here (about 1.1 M in the measurement: `FLOOD=1100000`).
    let flood = std::env::var("BINDER_HOSTILE_FLOOD").unwrap_or_else(|_| "300000".into());
    if let Some((out, err)) = fast_and_disjoint("root-flood", &[("FLOOD", &flood)], 1500) {
        // Said once per launch at most, not twice (a launch handed over to
        // binder-full says it there only).
        assert!(
            err.matches("read in part").count() <= runs(&out).len(),
            "{err}"
        );
    }
}

/// SEMANTICS §13.4: a co-tenant who holds the ledger root's link count still (a spare
/// directory removed whenever another appears) does not hide bob's new directory from
/// alice's next launch, made within 250 ms of her last listing: her cached read of the
/// root is keyed by its ctime too, which nobody can set back.
#[test]
fn a_link_count_keeper_does_not_hide_a_new_user() {
    let Some((out, err)) = two_cpu_scenario("keeper") else {
        return;
    };
    let trials = 4;
    for t in 1..=trials {
        let bob = cpus_of(&out, &err, "bob", &format!("bob{t}"));
        let alice = cpus_of(&out, &err, "alice", &format!("next{t}"));
        assert!(
            alice.is_disjoint(&bob),
            "round {t}: alice's next job on bob's CPU {bob:?}:\n{out}\n{err}"
        );
    }
}

/// SEMANTICS §13.5, a lifted squat: mallory's directory under bob's canonical name sends
/// bob's first job to his secret directory, and she removes it the moment his task runs.
/// alice's next launch, within 250 ms of the listing and kernel look her last one shared,
/// finds the root changed since that listing: whatever it read, the CPU it binds to is
/// checked against the kernel afresh, and bob's task there sends it elsewhere. 0 of 12
/// rounds on bob's CPU (12 of 12 on 23e2c73).
#[test]
fn a_lifted_squat_hides_no_new_users_job() {
    let Some((out, err)) = two_cpu_scenario("lifted") else {
        return;
    };
    let mut collided = Vec::new();
    for t in 1..=12 {
        let bob = cpus_of(&out, &err, "bob", &format!("bob{t}"));
        let alice = cpus_of(&out, &err, "alice", &format!("next{t}"));
        if !alice.is_disjoint(&bob) {
            collided.push(t);
        }
    }
    assert!(
        collided.is_empty(),
        "alice's next job on bob's CPU in rounds {collided:?}:\n{out}\n{err}"
    );
}

/// SEMANTICS §13.5, a momentary binding steers whatever its thread count: mallory's
/// process of 65 threads (one more than the watch took before), all bound to every CPU
/// bob's job does not hold 9 ms in 10. alice's 20 launches all run, none on bob's CPU
/// (18 of 20 refused on 23e2c73; 64 threads: none).
#[test]
fn a_momentary_binding_of_many_threads_refuses_nobody() {
    let Some((out, err)) = two_cpu_scenario("squat65") else {
        return;
    };
    let bob = cpus_of(&out, &err, "bob", "bob");
    for t in 1..=20 {
        let alice = cpus_of(&out, &err, "alice", &format!("t{t}"));
        assert!(
            alice.is_disjoint(&bob),
            "launch {t}: alice on bob's CPU {bob:?}:\n{out}\n{err}"
        );
    }
}

/// SEMANTICS §13.4, churn: beside 100,000 names in the ledger root and a directory
/// mallory makes and removes there every 5 ms, alice's launches take at most twice her
/// launches in a quiet root of their own, in turns with them, at the median (with 20 ms
/// of slack for a busy CI machine; each listed the whole root again before: 129-155 ms
/// against 10-14 ms), none lands on bob's CPU, and bob's directory made again in the
/// churn is still read: alice's next job avoids it.
#[test]
fn a_root_that_churns_neither_slows_nor_hides_a_launch() {
    let Some((out, err)) = two_cpu_scenario("churn") else {
        return;
    };
    let bob = cpus_of(&out, &err, "bob", "bob");
    let mut times: std::collections::BTreeMap<&str, Vec<u64>> = Default::default();
    for line in out.lines() {
        if let ["time", phase, ms, cpus] = line.split(' ').collect::<Vec<_>>()[..] {
            let cpus = binder_core::procfs::parse_list(cpus)
                .unwrap_or_else(|| panic!("a launch refused: {line}\n{out}\n{err}"));
            assert!(
                bob.iter().all(|c| !cpus.contains(c)),
                "alice on bob's CPU: {line}\n{out}\n{err}"
            );
            times.entry(phase).or_default().push(ms.parse().unwrap());
        }
    }
    let median = |phase: &str| {
        let mut v = times.get(phase).cloned().unwrap_or_default();
        assert!(v.len() >= 5, "too few {phase} launches:\n{out}\n{err}");
        v.sort_unstable();
        v[v.len() / 2]
    };
    let (quiet, churn) = (median("quiet"), median("churn"));
    eprintln!("churn: quiet median {quiet} ms, churned median {churn} ms: {times:?}");
    assert!(
        churn <= 2 * quiet + 20,
        "launches beside a churning root: median {churn} ms, unattacked {quiet} ms"
    );
    let bob2 = cpus_of(&out, &err, "bob", "bob2");
    let after = cpus_of(&out, &err, "alice", "after");
    assert!(
        after.is_disjoint(&bob2),
        "alice's job on bob's CPU {bob2:?} in his new directory:\n{out}\n{err}"
    );
}

/// SEMANTICS §13.4: a refusal is decided on a fresh look at the kernel. mallory's
/// process, bound to every CPU bob's job does not hold while alice's first launch looks
/// (refused, rightly), lets go; alice's next launch, within the 250 ms her first one's
/// look is shared for, runs on the CPU now free instead of being refused on that look.
#[test]
fn a_binding_that_has_ended_refuses_nobody() {
    let Some((out, err)) = two_cpu_scenario("ended") else {
        return;
    };
    let bob = cpus_of(&out, &err, "bob", "bob");
    for t in 1..=4 {
        // Every CPU was held.
        refused(&out, &err, "alice", &format!("held{t}"));
        let free = cpus_of(&out, &err, "alice", &format!("free{t}"));
        assert!(
            free.is_disjoint(&bob),
            "round {t}: alice on bob's CPU {bob:?}:\n{out}\n{err}"
        );
    }
}

/// SEMANTICS §13.5, a look that lists no `/proc` misses no process (#62): 300 ms after
/// alice's last look, her launch reads only the processes that look found and the PIDs
/// handed out since (where `pid_max` leaves time for no wrap: 419 ms at 4,194,304); a
/// threaded process mallory started since, bound to one CPU, and an old one of hers
/// that bound itself since, each send alice's task to the other CPU.
#[test]
fn a_look_without_a_listing_misses_no_process() {
    let Some((out, err)) = two_cpu_scenario("unlisted") else {
        return;
    };
    let pid_max: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("pid_max "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    eprintln!(
        "pid_max {pid_max}: looks within {} ms of the last read only what changed",
        pid_max.saturating_sub(300) / 10_000
    );
    for t in 1..=6 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("mallory {t} ")))
            .unwrap_or_else(|| panic!("no round {t}:\n{out}\n{err}"));
        let cpu: usize = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("cpu="))
            .and_then(|c| c.parse().ok())
            .unwrap();
        let alice = cpus_of(&out, &err, "alice", &format!("after{t}"));
        assert!(
            !alice.contains(&cpu),
            "round {t}: alice on mallory's CPU {cpu} ({line}):\n{out}\n{err}"
        );
    }
}

/// SEMANTICS §13.4, a momentary binding steers and never refuses: mallory's process is
/// bound to every CPU bob's job does not hold half the time (5 ms on, 5 ms off); each of
/// alice's 12 launches runs (it refused 8 of 20 before), and none on bob's CPU.
#[test]
fn a_process_bound_half_the_time_refuses_nobody() {
    let Some((out, err)) = two_cpu_scenario("duty") else {
        return;
    };
    let bob = cpus_of(&out, &err, "bob", "bob");
    for t in 1..=12 {
        let alice = cpus_of(&out, &err, "alice", &format!("d{t}"));
        assert!(
            alice.is_disjoint(&bob),
            "launch {t}: alice on bob's CPU {bob:?}:\n{out}\n{err}"
        );
    }
}

/// SEMANTICS §13.4, limits fail closed: alice's launches under `ulimit -n 6`, `7` and
/// `32` (soft and hard) cannot read where bob's job runs: each refuses with the one line
/// that says so (it ran on bob's CPU before); with 64 she runs beside him.
#[test]
fn a_launch_that_cannot_open_enough_files_refuses() {
    let Some((out, err)) = two_cpu_scenario("nofile") else {
        return;
    };
    let bob = cpus_of(&out, &err, "bob", "bob");
    for n in [6, 7, 32] {
        refused(&out, &err, "alice", &format!("n{n}"));
        assert!(
            err.contains(&format!("open-file limit is {n} ")),
            "ulimit -n {n}:\n{err}"
        );
    }
    let alice = cpus_of(&out, &err, "alice", "n64");
    assert!(alice.is_disjoint(&bob), "{out}\n{err}");
}

#[test]
fn a_process_that_follows_alices_claims_never_sends_her_to_bob() {
    // alice's eight jobs run one after another (each may reuse the last one's CPU); every
    // one runs, fast, and none on bob's CPU.
    if let Some((out, err)) = scenario("chaser", &[]) {
        clean("chaser", &out);
        clean("chaser", &err);
        let runs = runs(&out);
        let bob = &runs.iter().find(|r| r.0 == "bob").expect("bob ran").3;
        let alice: Vec<_> = runs.iter().filter(|r| r.0 == "alice").collect();
        assert_eq!(alice.len(), 8, "{out}");
        for (_, rc, ms, cpus) in alice {
            assert_eq!(*rc, 0, "{out}\n{err}");
            assert!(*ms < 2000, "{out}");
            assert!(!cpus.is_empty() && cpus.is_disjoint(bob), "{out}");
        }
    }
}

#[test]
fn a_full_ledger_root_falls_back_to_the_kernels_view() {
    if let Some((_, err)) = fast_and_disjoint("full-shm", &[], 1500) {
        assert!(err.contains("node ledger not used"), "{err}");
    }
}

#[test]
fn a_read_only_ledger_root_falls_back_at_once() {
    if let Some((_, err)) = fast_and_disjoint("readonly-shm", &[], 1000) {
        assert!(err.contains("node ledger not used"), "{err}");
        assert!(!err.contains("more than 30 s"), "{err}");
    }
}

#[test]
fn a_stopped_launch_holding_alices_lock_costs_no_wait() {
    if let Some((_, err)) = fast_and_disjoint("stuck-lock", &[], 1500) {
        assert!(err.contains("which is stopped"), "{err}");
    }
}

#[test]
fn a_ledger_dir_made_by_another_user_falls_back_to_the_kernels_view() {
    if let Some((_, err)) = fast_and_disjoint("ledger-dir", &[], 1000) {
        assert!(err.contains("neither root nor you"), "{err}");
    }
}

#[test]
fn hidden_proc_is_said_and_steered_around() {
    if let Some((_, err)) = fast_and_disjoint("hidepid", &[], 1000) {
        assert!(err.contains("hidepid"), "{err}");
    }
}

/// A two-CPU scenario whose runs tagged `bob` and `alice` both ran, on different CPUs.
fn alice_beside_bob(name: &str) -> Option<(String, String)> {
    let (out, err) = two_cpu_scenario(name)?;
    let bob = cpus_of(&out, &err, "bob", "bob");
    let alice = cpus_of(&out, &err, "alice", "alice");
    assert!(
        alice.is_disjoint(&bob),
        "{name}: alice on bob's CPU:\n{out}\n{err}"
    );
    Some((out, err))
}

/// SEMANTICS §13.3: where `/proc` hides other users' processes, a file of mallory's
/// (for a PID that does not exist, or for an unbound process of hers) never steers alice
/// onto bob's CPU: the kernel still says where a PID runs.
#[test]
fn hidden_proc_forged_claims_do_not_send_alice_to_bob() {
    let Some((_, err)) = alice_beside_bob("hidepid-forged") else {
        return;
    };
    // Said once by each of the two launches.
    let said = err
        .lines()
        .filter(|l| l.contains("mounted with hidepid"))
        .count();
    assert_eq!(said, 2, "said once per launch:\n{err}");
}

/// SEMANTICS §13.3: in a PID namespace of its own (a container), alice cannot see bob's
/// task outside; she is told so once and goes around what his entry says.
#[test]
fn a_pid_namespace_is_said_once_and_steered_around() {
    let Some((_, err)) = alice_beside_bob("pidns") else {
        return;
    };
    // By alice's launch alone (bob's runs where everyone does), once.
    let said = err.lines().filter(|l| l.contains("PID namespace")).count();
    assert_eq!(said, 1, "said once:\n{err}");
}

/// A launch in a time namespace (its `/proc` shifts every start time by the namespace's
/// boot-clock offset) and one outside, or in another, still find each other's claims:
/// none is deleted as a reused PID's, and no two of alice's jobs share a CPU.
#[test]
fn a_time_namespace_hides_no_job() {
    let Some((out, err)) = two_cpu_scenario("timens") else {
        return;
    };
    let first = cpus_of(&out, &err, "alice", "first");
    for next in ["second", "third"] {
        let cpus = cpus_of(&out, &err, "alice", next);
        assert!(
            first.is_disjoint(&cpus),
            "{next} on first's CPU:\n{out}\n{err}"
        );
    }
    assert!(
        out.contains("claims 2"),
        "first's and third's claims stay:\n{out}\n{err}"
    );
}

/// SEMANTICS §13.3: a user without a home to keep a ledger key in, whose directory
/// name mallory took and whose prefix she flooded with 400,000 directories, still finds
/// her own earlier job (from the kernel's view, when the flood hides her directory): her
/// second job never lands on her first job's CPU, and costs at most twice a launch on a
/// quiet node (§13.4).
#[test]
fn a_name_flood_never_splits_a_homeless_users_own_jobs() {
    if !common::two_cpus() {
        return;
    }
    // 400,000: on the 2-CPU machine it was measured on, the bounded search for her
    // directory and the scan both gave up (at 100,000 the scan still found it in time).
    let Some((out, err)) = scenario("homeless-flood", &[("FLOOD", "400000")]) else {
        return;
    };
    let first = cpus_of(&out, &err, "alice", "first");
    let second = cpus_of(&out, &err, "alice", "second");
    assert!(
        first.is_disjoint(&second),
        "second on first's CPU:\n{out}\n{err}"
    );
    for (_, _, ms, _) in runs(&out) {
        assert!(ms < 3000, "a launch took {ms} ms:\n{out}\n{err}");
    }
    // The second launch reads the directories the first one found (#54: it listed the
    // flood again, 285 ms against bob's 15 ms on the quiet node; 20 ms of slack for a
    // busy CI machine).
    let ms = |tag: &str| {
        runs(run_of(
            &out,
            &err,
            if tag == "quiet" { "bob" } else { "alice" },
            tag,
        ))[0]
            .2
    };
    let (quiet, second) = (ms("quiet"), ms("second"));
    assert!(
        second <= 2 * quiet + 20,
        "alice's second launch in the flood took {second} ms, bob's on a quiet node {quiet} ms:\n{out}\n{err}"
    );
}

#[test]
fn a_whole_node_task_holds_the_node_against_its_users_other_jobs() {
    if let Some((out, err)) = scenario("count-all", &[]) {
        let line = out
            .lines()
            .find(|l| l.starts_with("count-all "))
            .unwrap_or_default();
        assert!(line.contains("rc=125"), "{out}\n{err}");
        assert!(err.contains("too few free units"), "{err}");
    }
}

/// #45's load test (SEMANTICS §13.3): 64 concurrent 1-core launches by alice and bob,
/// unattacked and then beside mallory's 8,000 idle unbound threads. No two jobs ever run
/// on one CPU at once, and launches under the attack take at most twice as long at the
/// median (with 50 ms of slack for a busy CI machine). `LOAD=256` for the size.
#[test]
fn idle_threads_of_another_user_neither_slow_nor_bend_a_loaded_node() {
    loaded_node("threads", Some(50));
}

/// SEMANTICS §13.5, a flood cut short under load: alice's and bob's 64 concurrent
/// launches (BINDER_HOSTILE_LOAD), each its own 1-core job, beside 100,000 names in the
/// ledger root, bob's canonical directory name squatted (his claims are in his secret
/// directory, which a listing cut short by the flood does not reach) and a name made and
/// removed in the root every 10-20 ms: no two jobs ever run on one CPU at once (on
/// 23e2c73, with 256 launches of 4 users: 6-10 colliding pairs a run). The medians are
/// printed, not asserted: a refused launch in doubt watches the squatted user's tasks,
/// whose claims it cannot read, for 20 ms, and under CI's load the attacked median went
/// from 16 to 305 ms against 10-32 ms unattacked; speed targets live in benches/.
#[test]
fn a_flood_of_names_under_load_never_puts_two_jobs_on_one_cpu() {
    loaded_node("flood", None);
}

/// The load scenario under `attack` (`threads`: 8,000 idle threads of mallory's;
/// `flood`: a flood of names, a squatted name, a poked root): no collision, and, with a
/// `slack`, the attacked median within twice the quiet one and `slack` ms.
fn loaded_node(attack: &str, slack: Option<u128>) {
    let load = std::env::var("BINDER_HOSTILE_LOAD").unwrap_or_else(|_| "64".into());
    let Some((out, err)) = scenario("thread-load", &[("LOAD", &load), ("ATTACK", attack)]) else {
        return;
    };
    clean("thread-load", &err);
    // (phase, job, cpus, t0, t1) of each task that ran; launch ns per phase.
    let mut ran: Vec<(String, u32, Vec<usize>, u128, u128)> = Vec::new();
    let mut launch: std::collections::BTreeMap<String, Vec<u128>> = Default::default();
    for line in out.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        match f[..] {
            ["load", wave, job, cpus, tl, t0, t1] => {
                let phase = wave.trim_end_matches('2');
                let (tl, t0, t1): (u128, u128, u128) = (
                    tl.parse().unwrap(),
                    t0.parse().unwrap(),
                    t1.parse().unwrap(),
                );
                let cpus = binder_core::procfs::parse_list(cpus).unwrap();
                ran.push((phase.into(), job.parse().unwrap(), cpus, t0, t1));
                launch.entry(phase.into()).or_default().push(t0 - tl);
            }
            ["refused", wave, _, tl, end] => {
                let phase = wave.trim_end_matches('2');
                let (tl, end): (u128, u128) = (tl.parse().unwrap(), end.parse().unwrap());
                launch.entry(phase.into()).or_default().push(end - tl);
            }
            _ => {}
        }
    }
    let threads = out
        .lines()
        .find(|l| l.starts_with("threads ") || l.starts_with("names "))
        .unwrap_or("");
    let mut collisions = Vec::new();
    for (i, a) in ran.iter().enumerate() {
        for b in &ran[i + 1..] {
            let overlap = a.3 < b.4 && b.3 < a.4;
            if a.1 != b.1 && overlap && a.2.iter().any(|c| b.2.contains(c)) {
                collisions.push(format!("{} jobs {} and {} on {:?}", a.0, a.1, b.1, a.2));
            }
        }
    }
    let median = |phase: &str| {
        let mut v = launch.get(phase).cloned().unwrap_or_default();
        v.sort_unstable();
        assert!(!v.is_empty(), "no {phase} launch:\n{out}\n{err}");
        (v[v.len() / 2] / 1_000_000, v[v.len() - 1] / 1_000_000)
    };
    let (quiet, quiet_max) = median("quiet");
    let (attacked, attacked_max) = median("attacked");
    let n = |phase: &str| ran.iter().filter(|t| t.0 == phase).count();
    eprintln!(
        "{load} launches, {threads}: quiet median {quiet} ms (max {quiet_max}), attacked median {attacked} ms (max {attacked_max}); tasks ran {} / {}; {} colliding pairs",
        n("quiet"),
        n("attacked"),
        collisions.len()
    );
    assert!(collisions.is_empty(), "{collisions:?}\n{err}");
    assert!(n("quiet") >= 2 && n("attacked") >= 2, "{out}\n{err}");
    if let Some(slack) = slack {
        assert!(
            attacked <= 2 * quiet + slack,
            "launches under the {attack} attack: median {attacked} ms, unattacked {quiet} ms"
        );
    }
}

/// A scenario that needs two CPUs (alice's job must have somewhere else to go), run;
/// `None` where it cannot.
fn two_cpu_scenario(name: &str) -> Option<(String, String)> {
    if !common::two_cpus() {
        return None;
    }
    let (out, err) = scenario(name, &[])?;
    clean(name, &err);
    Some((out, err))
}

/// The CPUs of `user`'s launch tagged `tag`, which must have run.
fn cpus_of(out: &str, err: &str, user: &str, tag: &str) -> BTreeSet<usize> {
    let line = run_of(out, err, user, tag);
    let (_, rc, _, cpus) = runs(line).pop().unwrap();
    assert_eq!(rc, 0, "{line}\n{err}");
    assert!(!cpus.is_empty(), "{line}\n{err}");
    cpus
}

/// The `run` line of `user`'s launch tagged `tag`.
fn run_of<'o>(out: &'o str, err: &str, user: &str, tag: &str) -> &'o str {
    out.lines()
        .find(|l| l.starts_with(&format!("run {user} {tag} ")))
        .unwrap_or_else(|| panic!("no run of {user} tagged {tag}:\n{out}\n{err}"))
}

/// Asserts that `user`'s launch tagged `tag` was refused (exit 125).
fn refused(out: &str, err: &str, user: &str, tag: &str) {
    let line = run_of(out, err, user, tag);
    assert!(
        line.contains("rc=125"),
        "{tag} was not refused: {line}\n{err}"
    );
}

/// SEMANTICS §13.3, everyone's bound tasks count: bob's task bound where alice's ledger
/// root holds nothing of his (`taskset`, `BINDER_LEDGER=off`, another
/// `BINDER_LEDGER_DIR`) still keeps alice's job off his CPU.
#[test]
fn a_task_bound_outside_the_ledger_still_holds_its_cpu() {
    let Some((out, err)) = two_cpu_scenario("unseen") else {
        return;
    };
    for kind in ["taskset", "off", "dir"] {
        let bob = cpus_of(&out, &err, "bob", &format!("bob-{kind}"));
        let alice = cpus_of(&out, &err, "alice", &format!("alice-{kind}"));
        assert!(
            alice.is_disjoint(&bob),
            "{kind}: alice on bob's CPU {bob:?}:\n{out}\n{err}"
        );
    }
}

/// SEMANTICS §13.3, a user's own jobs are always found: where alice's ledger cannot be
/// used (a read-only root; a stopped launch of hers holding her lock), her next job
/// still goes around her job that runs (the kernel's view of her own bound tasks).
#[test]
fn a_fallback_launch_still_avoids_the_users_own_jobs() {
    let Some((out, err)) = two_cpu_scenario("own-fallback") else {
        return;
    };
    assert_eq!(runs(&out).len(), 4, "{out}\n{err}");
    for (first, next) in [("first", "second"), ("third", "fourth")] {
        let (a, b) = (
            cpus_of(&out, &err, "alice", first),
            cpus_of(&out, &err, "alice", next),
        );
        assert!(
            a.is_disjoint(&b),
            "alice's {next} job on her {first} job's CPU:\n{out}\n{err}"
        );
    }
    assert!(err.contains("node ledger not used"), "{err}");
}
