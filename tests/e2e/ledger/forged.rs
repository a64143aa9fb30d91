//! Hand-written claims in the ledger: a forged one (a dead pid, a pid of another start
//! time, a foreign file) counts for nothing, a true one counts.

use super::*;

/// A hand-written claim of `pid` on `cpu` (format 2).
fn entry(pid: u32, start: u64, cpu: usize) -> String {
    serde_json::json!({
        "format": binder_core::ledger::FORMAT, "job": "forged:1", "rank": 0, "size": 1, "pid": pid, "start": start,
        "cpus": cpu.to_string(), "gpus": [], "pack": "fill", "unit": "core", "places": 1
    })
    .to_string()
}

fn start_of(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn forged_entries_count_for_nothing_and_true_ones_count() {
    let dir = scratch("forged");
    let ledger = own_dir(&dir);
    std::fs::create_dir_all(&ledger).unwrap();
    let first = allowed()
        .split([',', '-'])
        .next()
        .unwrap()
        .parse::<usize>()
        .unwrap();
    // An unbound live process claiming one cpu: its affinity is wider than the claim.
    let mut loose = Command::new("sleep").arg("60").spawn().unwrap();
    let name = |pid: u32, start: u64, what: &str| format!("c.{pid}.{start}.0.{what}");
    let write = |name: String, text: String| std::fs::write(ledger.join(name), text).unwrap();
    let loose_start = start_of(loose.id());
    write(
        name(loose.id(), loose_start, "loose"),
        entry(loose.id(), loose_start, first),
    );
    // A dead PID.
    write(name(4_000_000, 1, "dead"), entry(4_000_000, 1, first));
    // Torn JSON, for a live process.
    write(
        name(loose.id(), loose_start, "torn"),
        entry(loose.id(), loose_start, first)[..40].to_owned(),
    );
    let node = node_json(&dir);
    let whys: Vec<&str> = node["ignored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["why"].as_str().unwrap())
        .collect();
    assert!(
        whys.iter().any(|w| w.contains("not inside its claim's")),
        "{whys:?}"
    );
    assert!(whys.iter().any(|w| w.contains("is gone")), "{whys:?}");
    assert!(whys.iter().any(|w| w.starts_with("corrupt")), "{whys:?}");
    assert_eq!(all_cores_get(&dir), allowed(), "a forged entry counted");
    // That launch removed this user's dead claim; the live forgeries stay ignored.
    assert!(!ledger.join(name(4_000_000, 1, "dead")).exists());
    // The same entry for a process really bound to that cpu counts.
    let mut bound = Command::new("taskset")
        .args(["-c", &first.to_string(), "sleep", "60"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let bound_start = start_of(bound.id());
    write(
        name(bound.id(), bound_start, "true"),
        entry(bound.id(), bound_start, first),
    );
    let got = all_cores_get(&dir);
    let cpus: BTreeSet<usize> = binder_core::procfs::parse_list(&got)
        .unwrap()
        .into_iter()
        .collect();
    assert!(
        !cpus.contains(&first),
        "{got} includes the bound cpu {first}"
    );
    for child in [&mut loose, &mut bound] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}
