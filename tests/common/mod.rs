//! Helpers shared by binder's test binaries: running the real executable, and finding
//! the real machine topologies in `fixtures/topologies`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether this machine has the 2 CPUs a test of two jobs side by side needs, by the one
/// rule of [`prerequisite`] (under `CI=true` a 1-CPU machine fails the test).
pub(crate) fn two_cpus() -> bool {
    prerequisite(
        std::thread::available_parallelism().map_or(1, usize::from) >= 2,
        "a second CPU (the test runs two jobs side by side)",
    )
}

/// The repository root.
pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The one rule for a missing prerequisite (a tool): under `CI=true` it
/// fails the test, because CI must never pass by skipping; elsewhere it fails too, saying
/// what to install, unless `BINDER_ALLOW_SKIP=1`, which turns it into a visible
/// `SKIPPED:` line (cargo hides the output of passing tests, so a quiet skip would be
/// invisible). Returns whether the test can go on.
pub(crate) fn prerequisite(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is missing under CI=true: CI must never pass by skipping");
    }
    if std::env::var("BINDER_ALLOW_SKIP").is_ok_and(|v| v == "1") {
        eprintln!("SKIPPED: {what} is missing");
        return false;
    }
    panic!(
        "{what} is missing; install it (`bash .ci/setup test`) or set BINDER_ALLOW_SKIP=1 to skip the tests that need it"
    );
}

/// The repository's fixtures (`fixtures/`: real hwloc XMLs with their MANIFEST and
/// licences, hwloc-calc's reference outputs, the Grid Engine cases, the oracle): part of
/// the clone, so a test never depends on anything beside it. `Option` for the callers'
/// sake; a clone without them is broken and says so.
pub(crate) fn shared() -> Option<PathBuf> {
    let dir = root().join("fixtures");
    prerequisite(
        dir.join("topologies").is_dir(),
        "fixtures/topologies (part of the clone)",
    )
    .then(|| dir.canonicalize().expect("fixtures dir"))
}

/// A topology XML of `fixtures/topologies` by file name.
pub(crate) fn topology(shared: &Path, name: &str) -> PathBuf {
    let path = shared.join("topologies").join(name);
    assert!(path.is_file(), "missing topology {}", path.display());
    path
}

/// The `binder` executable, built beside `binder-full` (both are this package's).
pub(crate) fn binder_exe() -> &'static str {
    env!("CARGO_BIN_EXE_binder")
}

/// The `binder` executable under test, run from the repository root with a clean
/// launcher environment (the test runner may itself run under one).
pub(crate) fn binder() -> Command {
    let mut cmd = Command::new(binder_exe());
    isolated(&mut cmd);
    cmd
}

/// `cmd` as binder's tests run anything that runs binder: from the repository root, no
/// launcher variables, no site file, a node ledger of its own.
pub(crate) fn isolated(cmd: &mut Command) -> &mut Command {
    hermetic(cmd)
        .env_remove("SLURM_CONF")
        // Tests run in parallel: each launch gets a node ledger of its own, so two tests'
        // tasks never see each other as jobs on the same node (the ledger's tests share
        // one on purpose).
        .env("BINDER_LEDGER_DIR", private_ledger())
}

/// `cmd` as binder's tests run a launcher that runs binder (`srun`, `sbatch`, a shell
/// scenario): [`isolated`] but for the node ledger, which the caller chooses (a test
/// cluster's nodes each have their own), and `SLURM_CONF`, which it leaves for the
/// caller to set to the test cluster's.
pub(crate) fn hermetic(cmd: &mut Command) -> &mut Command {
    cmd.current_dir(root());
    for (key, _) in std::env::vars() {
        if is_launcher_var(&key) && !key.starts_with("SLURM_CONF") {
            cmd.env_remove(key);
        }
    }
    // The machine's own site reservation (/etc/binder/site.yaml) must not change results.
    cmd.env("BINDER_SITE_FILE", "/nonexistent/binder-site.yaml")
        // The node cache: never the machine's default one.
        .env("BINDER_CACHE_DIR", scratch().join("cache"))
        // Other users' bound tasks on this machine (another session's, or the hostile
        // tests' users) must not move the CPUs a test expects: only users in sight count.
        .env("BINDER_KERNEL_VIEW", "in-sight")
}

/// This test binary's own scratch directory (its ledgers and caches), removed when the
/// binary exits: a test run leaves nothing on the machine, and never touches the
/// machine's default node cache or ledger in /dev/shm.
pub(crate) fn scratch() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    extern "C" fn remove() {
        if let Some(dir) = DIR.get() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    DIR.get_or_init(|| {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("binder-tests-{}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&dir)
            .expect("scratch dir");
        // SAFETY: `remove` is a plain function that touches only `DIR`, safe to run at
        // exit; registering it once (inside get_or_init) is all atexit needs.
        unsafe { libc::atexit(remove) };
        dir
    })
}

/// A fresh, not yet created, node ledger directory for one test (in [`scratch`]).
pub(crate) fn private_ledger() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    scratch().join(format!("ledger-{}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// Variables that would change binder's idea of which task it is.
pub(crate) fn is_launcher_var(key: &str) -> bool {
    [
        "OMPI_",
        "MPI_LOCAL",
        "MV2_",
        "PALS_",
        "JSM_",
        "FLUX_",
        "SLURM_",
        "BINDER_",
        "PMI_",
    ]
    .iter()
    .any(|p| key.starts_with(p))
        // The suite's own setting (`.ci/run`): launches count only the users in sight of
        // their private ledgers, whatever else runs on the machine. It is kept.
        && key != "BINDER_KERNEL_VIEW"
}

/// Runs `cmd` and returns its output, panicking with everything needed to debug when the
/// exit code is not `code`.
pub(crate) fn run(cmd: &mut Command, code: i32) -> Output {
    let out = cmd.output().expect("binder runs");
    if out.status.code() != Some(code) {
        panic!(
            "expected exit {code}, got {:?}\ncommand: {cmd:?}\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// Whether a program is on PATH.
pub(crate) fn has(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A python3 that can `import yaml`: Debian's, when another python3 comes first on PATH.
pub(crate) fn python_with_yaml() -> Option<String> {
    ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|py| {
            Command::new(py)
                .args(["-c", "import yaml"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

/// Runs `hwloc-calc --input XML ARGS` once with `lines` on its standard input (hwloc-calc
/// answers each location it reads there with one line), so a sweep costs one process per
/// topology instead of one per rank.
pub(crate) fn hwloc_calc_lines(xml: &Path, args: &[&str], lines: &[String]) -> Vec<String> {
    use std::io::Write as _;
    let mut child = Command::new("hwloc-calc")
        .arg("--input")
        .arg(xml)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("hwloc-calc runs");
    let mut stdin = child.stdin.take().expect("stdin");
    // No lines: close stdin at once (hwloc-calc then answers its arguments and may exit
    // before reading, so nothing is written to it).
    let input = if lines.is_empty() {
        String::new()
    } else {
        lines.join("\n") + "\n"
    };
    let writer = std::thread::spawn(move || {
        if !input.is_empty() {
            stdin.write_all(input.as_bytes()).expect("stdin written");
        }
    });
    let out = child.wait_with_output().expect("hwloc-calc output");
    writer.join().expect("writer");
    assert!(
        out.status.success(),
        "hwloc-calc {args:?} failed on {}",
        xml.display()
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .filter(|l| !l.starts_with("Waiting for locations"))
        .map(str::to_owned)
        .collect()
}

/// The OS CPU numbers of an hwloc bitmap string as hwloc-calc prints it
/// (`0x00000003,,0x0000000f`: 32-bit words, most significant first, empty = zero).
pub(crate) fn parse_hwloc_mask(mask: &str) -> Vec<usize> {
    let words: Vec<&str> = mask.trim().split(',').collect();
    let mut cpus = Vec::new();
    for (i, word) in words.iter().rev().enumerate() {
        let hex = word.trim_start_matches("0x");
        if hex.is_empty() {
            continue;
        }
        let value = u64::from_str_radix(hex, 16).expect("hex word");
        for bit in 0..32 {
            if value >> bit & 1 == 1 {
                cpus.push(i * 32 + bit);
            }
        }
    }
    cpus.sort_unstable();
    cpus
}

/// Every topology XML of `fixtures/topologies`, by file name, sorted.
pub(crate) fn all_topologies(shared: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(shared.join("topologies"))
        .expect("topologies dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".xml"))
        .collect();
    names.sort();
    names
}

/// Whether `program` is on PATH, by the rule of [`prerequisite`]; `what` says which test
/// needs it.
pub(crate) fn require_tool(program: &str, what: &str) -> bool {
    prerequisite(has(program), &format!("`{program}` (for {what})"))
}

/// The objects of `kind` (hwloc-calc's type name; logical index → OS CPUs) per hwloc-calc.
pub(crate) fn hwloc_objects(xml: &Path, kind: &str) -> BTreeMap<usize, Vec<usize>> {
    let count = hwloc_calc_lines(xml, &["-N", kind, "all"], &[])
        .first()
        .and_then(|l| l.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let indexes = hwloc_calc_lines(xml, &["-I", kind, "all"], &[]);
    let indexes: Vec<usize> = indexes
        .first()
        .map(|l| l.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or_default();
    assert_eq!(indexes.len(), count, "{} {kind}", xml.display());
    let lines: Vec<String> = indexes.iter().map(|i| format!("{kind}:{i}")).collect();
    let masks = hwloc_calc_lines(xml, &[], &lines);
    indexes
        .into_iter()
        .zip(masks)
        .map(|(i, m)| (i, parse_hwloc_mask(&m)))
        .collect()
}

/// An XML of this host (`lstopo --of xml`) with `n` fake NVIDIA GPUs (PCI devices with a
/// CUDA OS device each, bus 0000:18.. in order, local to the whole machine), written in
/// the scratch directory: loaded with `HWLOC_THISSYSTEM=1`, binder binds this host's real
/// CPUs and plans its GPUs. `None` (the skip printed) without lstopo.
pub(crate) fn host_xml_with_gpus(n: usize) -> Option<PathBuf> {
    if !require_tool("lstopo-no-graphics", "a host XML with fake GPUs") {
        return None;
    }
    let out = Command::new("lstopo-no-graphics")
        .args(["--of", "xml", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "lstopo --of xml failed");
    let xml = String::from_utf8(out.stdout).unwrap();
    let gpus: String = (0..n)
        .map(|i| {
            format!(
                "<object type=\"PCIDev\" gp_index=\"{}\" pci_busid=\"0000:{:02x}:00.0\" pci_type=\"0302 [10de:1eb8] [10de:12a2] a1\" pci_link_speed=\"15.753846\">\n\
                 <info name=\"PCIVendor\" value=\"NVIDIA Corporation\"/>\n\
                 <info name=\"PCIDevice\" value=\"TU104GL [Tesla T4]\"/>\n\
                 <object type=\"OSDev\" gp_index=\"{}\" name=\"cuda{i}\" subtype=\"CUDA\" osdev_type=\"5\">\n\
                 <info name=\"Backend\" value=\"CUDA\"/>\n\
                 <info name=\"GPUVendor\" value=\"NVIDIA Corporation\"/>\n\
                 <info name=\"GPUModel\" value=\"Tesla T4\"/>\n\
                 </object>\n</object>\n",
                90_000 + 2 * i,
                0x18 + i,
                90_001 + 2 * i
            )
        })
        .collect();
    // The Machine object closes last: the GPUs become its I/O children.
    let at = xml
        .rfind("</object>")
        .expect("an XML with a Machine object");
    let path = scratch().join(format!("host-{n}gpus-{}.xml", std::process::id()));
    std::fs::write(&path, format!("{}{gpus}{}", &xml[..at], &xml[at..])).unwrap();
    Some(path)
}

/// Each rank's PUs (ascending) as `binder --dry-run --format json` plans `shape` on
/// `xml` for `np` tasks, or `None` where binder refuses (exit 125, asserted).
pub(crate) fn dry_run_cpus(xml: &Path, shape: &Path, np: usize) -> Option<Vec<Vec<usize>>> {
    let out = binder()
        .args([
            "--dry-run",
            "--format",
            "json",
            "--local-size",
            &np.to_string(),
        ])
        .arg(shape)
        .arg("--topology")
        .arg(xml)
        .output()
        .unwrap();
    if out.status.code() != Some(0) {
        assert_eq!(out.status.code(), Some(125), "{out:?}");
        return None;
    }
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let mut pus: Vec<usize> = v["cpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c.as_u64().unwrap() as usize)
                    .collect();
                pus.sort_unstable();
                pus
            })
            .collect(),
    )
}
