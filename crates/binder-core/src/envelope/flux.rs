//! Flux's allocation when the job shell does not show it (SEMANTICS §4.2).
//!
//! With `cpu-affinity` on (Flux's default) the job shell binds itself to the job's cores
//! on this node, so its binding is the envelope. With `-o cpu-affinity=off` it keeps its
//! broker's binding, the whole instance: binder would widen the job to every core of the
//! instance and land on other jobs' cores. A shell bound exactly as its broker is either
//! that, or a job that owns the whole instance; only R tells them apart, so there (and
//! only there: one `flux job info`, about 12 ms) binder reads R's cores on this node,
//! hwloc logical indexes in the instance's own numbering.

use crate::procfs::Procs;

/// Runs `flux ARGS` and returns what it printed, or why not.
pub(crate) type Ask<'a> = &'a dyn Fn(&[&str]) -> Result<String, String>;

/// `flux ARGS` through the `flux` on `PATH` (the job's, as Flux sets it).
pub(crate) fn ask_flux(args: &[&str]) -> Result<String, String> {
    let out = std::process::Command::new("flux")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `flux {}`: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`flux {}` failed: {}",
            args.join(" "),
            crate::text::printable(String::from_utf8_lossy(&out.stderr).trim(), 200)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The longest R read (a job's R on thousands of nodes is a few hundred KiB).
const MAX_R: usize = 4 << 20;

/// The broker rank a `flux-broker-N` command name says, when the kernel did not truncate
/// it (a command name holds 15 bytes: `flux-broker-` and at most three digits, which
/// may be the first three of a longer rank).
pub(super) fn broker_rank(comm: &str) -> Option<u32> {
    let digits = comm.strip_prefix("flux-broker-")?;
    if digits.is_empty() || comm.len() >= 15 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The nearest ancestor of `from` (excluded) that is a Flux broker: its PID and comm.
pub(super) fn broker_of(procs: &dyn Procs, from: u32) -> Option<(u32, String)> {
    let mut pid = procs.stat(from)?.ppid;
    for _ in 0..super::MAX_DEPTH {
        if pid <= 1 {
            return None;
        }
        let stat = procs.stat(pid)?;
        if stat.comm.starts_with("flux-broker") {
            return Some((pid, stat.comm));
        }
        pid = stat.ppid;
    }
    None
}

/// R's cores on broker `rank` (`None`: the job's only rank), as R (RFC 20) writes them.
pub(super) fn r_cores(r: &str, rank: Option<u32>) -> Result<Vec<usize>, String> {
    #[derive(serde::Deserialize)]
    struct Children {
        #[serde(default)]
        core: String,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        rank: String,
        children: Children,
    }
    #[derive(serde::Deserialize)]
    struct Execution {
        #[serde(rename = "R_lite")]
        r_lite: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct R {
        version: u32,
        execution: Execution,
    }
    if r.len() > MAX_R {
        return Err("R is longer than 4 MiB".into());
    }
    let r: R = serde_json::from_str(r.trim()).map_err(|e| format!("R is not RFC 20: {e}"))?;
    if r.version != 1 {
        return Err(format!("R version {} is not 1", r.version));
    }
    let set = |text: &str| {
        crate::procfs::parse_list_max(text.trim(), crate::identity::MAX_LOCAL_SIZE).ok_or_else(
            || {
                format!(
                    "R's idset {:?} is not one",
                    crate::text::printable(text, 80)
                )
            },
        )
    };
    let mut found: Option<Vec<usize>> = None;
    let mut ranks = 0usize;
    for entry in &r.execution.r_lite {
        let here = set(&entry.rank)?;
        ranks += here.len();
        if rank.is_none_or(|r| here.contains(&(r as usize))) {
            found
                .get_or_insert_with(Vec::new)
                .extend(set(&entry.children.core)?);
        }
    }
    if rank.is_none() && ranks != 1 {
        return Err(format!(
            "R names {ranks} ranks and this node's is not known"
        ));
    }
    let mut cores = found.ok_or("R names no cores on this node")?;
    cores.sort_unstable();
    cores.dedup();
    Ok(cores)
}

/// The job's cores on this node from R, for a task whose shell (`shell`, bound to
/// `cpus`) is bound exactly as its broker: R's cores here (in the numbering of the
/// instance on `cpus`), or `None` when the shell's binding stands (it is not its
/// broker's, or R cannot be read: then the binding is all binder knows).
pub(super) fn unbound_shell(
    env: &dyn Fn(&str) -> Option<String>,
    procs: &dyn Procs,
    affinity: &dyn Fn(Option<u32>) -> Option<Vec<usize>>,
    shell: u32,
    cpus: &[usize],
    ask: Ask<'_>,
) -> Option<Vec<usize>> {
    let (broker, comm) = broker_of(procs, shell)?;
    if affinity(Some(broker)).as_deref() != Some(cpus) {
        return None;
    }
    let jobid = env("FLUX_JOB_ID")?;
    let rank = if env("FLUX_JOB_NNODES").as_deref() == Some("1") {
        None
    } else {
        match broker_rank(&comm) {
            Some(rank) => Some(rank),
            None => Some(ask(&["getattr", "rank"]).ok()?.trim().parse().ok()?),
        }
    };
    let r = ask(&["job", "info", &jobid, "R"]).ok()?;
    r_cores(&r, rank).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brokers_rank_from_its_name() {
        assert_eq!(broker_rank("flux-broker-0"), Some(0));
        assert_eq!(broker_rank("flux-broker-12"), Some(12));
        // 15 bytes: maybe the first three digits of a longer rank.
        assert_eq!(broker_rank("flux-broker-123"), None);
        assert_eq!(broker_rank("flux-broker"), None);
        assert_eq!(broker_rank("flux-broker-x"), None);
    }

    #[test]
    fn r_names_each_brokers_cores() {
        // What `flux job info ID R` printed for `flux run -n1 -o cpu-affinity=off` and a
        // 2-node job (flux-core 0.88).
        let one = r#"{"version": 1, "execution": {"R_lite": [{"rank": "0", "children": {"core": "1"}}], "starttime": 1.0, "expiration": 0.0, "nslots": 1, "nodelist": ["vm"]}}"#;
        assert_eq!(r_cores(one, None), Ok(vec![1]));
        assert_eq!(r_cores(one, Some(0)), Ok(vec![1]));
        let two = r#"{"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0"}}, {"rank": "2", "children": {"core": "2-3,5"}}]}}"#;
        assert_eq!(r_cores(two, Some(1)), Ok(vec![0]));
        assert_eq!(r_cores(two, Some(2)), Ok(vec![2, 3, 5]));
        assert!(r_cores(two, Some(7)).unwrap_err().contains("no cores"));
        assert!(r_cores(two, None).unwrap_err().contains("3 ranks"));
        assert!(r_cores("[]", None).is_err());
        assert!(r_cores(&one.replace("\"1\"}}", "\"0-99999999\"}}"), None).is_err());
        assert!(r_cores(&one.replace("\"version\": 1", "\"version\": 2"), None).is_err());
    }
}
