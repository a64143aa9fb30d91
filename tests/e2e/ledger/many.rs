//! Many jobs at once: 8 jobs of 32 tasks started together share one plan each with
//! nothing lost or torn, and `--share` spreads jobs over the least loaded CPUs.

use super::*;

/// 8 jobs × 32 tasks started at once under Open MPI (`bind: none`: 256 tasks on 2 CPUs).
/// Every task of a job names the same job; the jobs are 8; each job's file lists its 32
/// ranks once each: no lost update, no torn file.
#[test]
fn eight_jobs_of_thirty_two_tasks_at_once() {
    if !common::require_tool("mpirun", "the ledger tests") {
        return;
    }
    let dir = scratch("many");
    // Open MPI itself has once hung here on a loaded 2-CPU CI machine (8 mpiruns of 32
    // oversubscribed ranks) after every binder had finished: a batch that runs past
    // WATCHDOG is killed and fails the test with `ps` of its processes, after asserting
    // that no binder was among them (that would be a binder bug). nextest retries this
    // test once (.config/nextest.toml) and reports it flaky when the retry passes, so a
    // launcher's hang costs a visible retry, not the whole CI run.
    let (outputs, started) = match eight_mpiruns(&dir) {
        Ok(done) => done,
        Err(ps) => {
            assert!(
                !ps.lines()
                    .any(|l| l.contains("binder") && !l.contains("mpirun")),
                "binder processes were still running:\n{ps}"
            );
            panic!("the batch ran past the watchdog (Open MPI hung); processes then:\n{ps}");
        }
    };
    let mut jobs = BTreeSet::new();
    for out in outputs {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<(&str, usize)> = text
            .lines()
            .map(|l| {
                let (job, rank) = l.split_once(' ').unwrap();
                (job, rank.parse().unwrap())
            })
            .collect();
        let ids: BTreeSet<&str> = lines.iter().map(|(j, _)| *j).collect();
        let ranks: BTreeSet<usize> = lines.iter().map(|(_, r)| *r).collect();
        assert_eq!(ids.len(), 1, "one mpirun, several jobs: {ids:?}");
        assert_eq!(ranks, (0..32).collect(), "{text}");
        jobs.insert(ids.into_iter().next().unwrap().to_owned());
    }
    let elapsed = started.elapsed();
    assert_eq!(jobs.len(), 8, "{jobs:?}");
    // One plan per job, of 32 ranks: every rank of a job joined its first task's plan (a
    // rank that planned again would have printed another job id above). Plans whose tasks
    // all ended are removed by later launches, so at most 8 are left.
    let mut files = 0;
    for e in std::fs::read_dir(own_dir(&dir)).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("job.") {
            continue;
        }
        files += 1;
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(jobs.contains(v["job"].as_str().unwrap()), "{path:?}");
        assert_eq!(v["tasks"].as_array().unwrap().len(), 32);
    }
    assert!((1..=8).contains(&files), "{files} plans");
    eprintln!("8 jobs x 32 tasks through the ledger: {elapsed:?}, failures 0");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--share` on a full node spreads jobs over the least loaded CPUs (it put 252 of 256
/// tasks on CPU 0 once): 8 sharing one-core jobs on the 2 CPUs, 4 on each.
#[test]
fn sharing_jobs_spread_over_the_node() {
    let host = allowed();
    let cpus = binder_core::procfs::parse_list(&host).unwrap();
    let dir = scratch("share");
    let mut jobs = Vec::new();
    let mut got: BTreeMap<usize, usize> = BTreeMap::new();
    for _ in 0..(4 * cpus.len()) {
        let mut child = binder()
            .env("BINDER_LEDGER_DIR", dir.join("ledger"))
            .args([
                "--share",
                dir.join("one.yaml").to_str().unwrap(),
                "--",
                "sh",
                "-c",
                "grep Cpus_allowed_list /proc/self/status | cut -f2; exec sleep 60",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // One at a time, each once it is bound: the next one sees it.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let cpu: usize = line.trim().parse().unwrap_or_else(|_| panic!("{line:?}"));
        *got.entry(cpu).or_default() += 1;
        jobs.push(child);
    }
    for mut job in jobs {
        job.kill().unwrap();
        job.wait().unwrap();
    }
    let counts: Vec<usize> = got.values().copied().collect();
    assert_eq!(got.len(), cpus.len(), "{got:?}");
    assert!(counts.iter().all(|&n| n == 4), "{got:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// How long 8 mpiruns of 32 tasks may take before the batch is taken for hung.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Starts the 8 mpiruns (each in its own process group) and waits for them: their outputs
/// and the start time, or, past [`WATCHDOG`], `ps` of what still runs, after killing it.
fn eight_mpiruns(dir: &Path) -> Result<(Vec<std::process::Output>, Instant), String> {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let children: Vec<_> = (0..8)
        .map(|_| {
            let mut cmd = Command::new("mpirun");
            common::hermetic(&mut cmd)
                .env("BINDER_LEDGER_DIR", dir.join("ledger"))
                .args([
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "--bind-to",
                    "none",
                    "-np",
                    "32",
                    common::binder_exe(),
                    "shapes/bind-none.yaml",
                    "--",
                    "sh",
                    "-c",
                    "echo $BINDER_JOB $BINDER_LOCAL_RANK",
                ])
                .process_group(0)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let groups: Vec<u32> = children.iter().map(std::process::Child::id).collect();
    let watchdog = std::thread::spawn(move || {
        let mut outputs = Vec::new();
        for child in children {
            outputs.push(child.wait_with_output().unwrap());
        }
        outputs
    });
    while !watchdog.is_finished() {
        if started.elapsed() > WATCHDOG {
            let ps = Command::new("ps")
                .args(["-eo", "pid,pgid,stat,wchan:24,etime,args"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let mine: Vec<&str> = ps
                .lines()
                .filter(|l| {
                    let pgid = l
                        .split_whitespace()
                        .nth(1)
                        .and_then(|g| g.parse::<u32>().ok());
                    pgid.is_some_and(|g| groups.contains(&g))
                })
                .collect();
            for g in &groups {
                let _ = Command::new("kill")
                    .args(["-KILL", &format!("-{g}")])
                    .status();
            }
            let _ = watchdog.join();
            return Err(mine.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((watchdog.join().unwrap(), started))
}
