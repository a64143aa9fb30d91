//! The bad-input catalog (`tests/bad/*.case`): every case is run as
//! `binder --dry-run ARGS` and as `binder ARGS -- touch MARKER` (or the case's command),
//! under a 2 GiB address-space limit and a 10 s deadline, and must end the same way:
//! the declared exit code, nothing on stdout, exactly one `binder:` line on stderr of at
//! most [`MAX_CHARS`] characters, and no marker file (the task never ran). The rendered
//! outputs are snapshot per case.
//!
//! # Case format
//!
//! ```text
//! # what the case is about (one line)
//! exit: 125               expected exit status in every mode that runs
//! modes: both             both | launch | dry-run | as-is (ARGS exactly)
//! args: {SHAPE} --local-size 2     words; "double quotes" group; {SHAPE} is the
//!                         shape below, {GOOD} shapes/bind-none.yaml, {DIR} a scratch dir
//! env: NAME=value         any number of these ({DIR} as in args)
//! command: ./missing      instead of `touch MARKER` in launch mode
//! escapes: yes            expand \t \0 \xHH \\ and {{repeat N:text}} in the shape
//! script: #!/bin/missing  {DIR}/script, executable, with this `#!` line
//! plain: text             {DIR}/plain, not executable
//! fifo: yes               {DIR}/fifo, a named pipe nobody writes to
//! ---
//! the shape file, verbatim
//! ```

use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{binder, root};

/// The longest refusal line allowed, prefix included.
const MAX_CHARS: usize = 320;

struct Case {
    exit: i32,
    modes: Vec<&'static str>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    command: Option<String>,
    shape: Option<Vec<u8>>,
    /// `{DIR}/script` made executable with this first line.
    script: Option<String>,
    /// `{DIR}/plain`, written without the execute bit.
    plain: Option<String>,
    /// Make `{DIR}/fifo`.
    fifo: bool,
}

fn parse_case(text: &str) -> Case {
    let (head, shape) = match text.split_once("\n---\n") {
        Some((h, s)) => (h, Some(s)),
        None => (text.strip_suffix("\n---").unwrap_or(text), None),
    };
    let mut case = Case {
        exit: 125,
        modes: vec!["dry-run", "launch"],
        args: vec!["{SHAPE}".into()],
        env: Vec::new(),
        command: None,
        shape: None,
        script: None,
        plain: None,
        fifo: false,
    };
    let mut escapes = false;
    for line in head
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (key, value) = line.split_once(':').expect("`key: value` header");
        let value = value.trim();
        match key {
            "exit" => case.exit = value.parse().expect("exit code"),
            "modes" => {
                case.modes = match value {
                    "both" => vec!["dry-run", "launch"],
                    "launch" => vec!["launch"],
                    "dry-run" => vec!["dry-run"],
                    "as-is" => vec!["as-is"],
                    other => panic!("modes: {other}"),
                }
            }
            "args" => case.args = words(value),
            "env" => {
                let (k, v) = value.split_once('=').expect("env: NAME=value");
                case.env.push((
                    k.to_owned(),
                    expand(v).into_iter().map(char::from).collect(),
                ));
            }
            "command" => case.command = Some(value.to_owned()),
            "escapes" => escapes = value == "yes",
            "script" => case.script = Some(value.to_owned()),
            "plain" => case.plain = Some(value.to_owned()),
            "fifo" => case.fifo = value == "yes",
            other => panic!("unknown header `{other}`"),
        }
    }
    case.shape = shape.map(|s| {
        if escapes {
            expand(s)
        } else {
            s.as_bytes().to_vec()
        }
    });
    case
}

/// Whitespace-separated words; "double quotes" keep spaces.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// `\t`, `\0`, `\n`, `\xHH`, `\\` and `{{repeat N:text}}`.
fn expand(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix("{{repeat ") {
            let (spec, after) = tail.split_once("}}").expect("closed repeat");
            let (n, piece) = spec.split_once(':').expect("repeat N:text");
            let piece = expand(piece);
            for _ in 0..n.parse::<usize>().expect("repeat count") {
                out.extend_from_slice(&piece);
            }
            rest = after;
        } else if let Some(tail) = rest.strip_prefix('\\') {
            let (byte, len) = match tail.as_bytes().first() {
                Some(b't') => (b'\t', 1),
                Some(b'0') => (0, 1),
                Some(b'n') => (b'\n', 1),
                Some(b'r') => (b'\r', 1),
                Some(b'\\') => (b'\\', 1),
                Some(b'x') => (u8::from_str_radix(&tail[1..3], 16).expect("\\xHH"), 3),
                _ => panic!("bad escape in {text:?}"),
            };
            out.push(byte);
            rest = &tail[len..];
        } else {
            let c = rest.chars().next().unwrap();
            let mut buf = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs binder with `args` under an address-space limit, killing it after 10 s.
fn run_limited(args: &[String], env: &[(String, String)]) -> Outcome {
    let bin = binder();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("ulimit -v 2097152 && exec \"$0\" \"$@\"")
        .arg(bin.get_program())
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in bin.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("sh runs");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("binder {args:?} ran past 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code: status.code(),
        stdout: String::from_utf8_lossy(&reader.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&err_reader.join().unwrap()).into_owned(),
        elapsed: start.elapsed(),
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = crate::common::scratch().join(format!("bad-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn bad_inputs_are_refused_on_one_line_and_never_run_the_task() {
    let mut count = 0;
    let mut failures: Vec<String> = Vec::new();
    insta::glob!("../bad", "*.case", |path| {
        count += 1;
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let case = parse_case(&std::fs::read_to_string(path).unwrap());
        let dir = scratch(&name);
        let shape_path = dir.join(format!("{name}.yaml"));
        if let Some(bytes) = &case.shape {
            std::fs::write(&shape_path, bytes).unwrap();
        }
        let marker = dir.join("MARKER");
        if let Some(first) = &case.script {
            use std::os::unix::fs::PermissionsExt as _;
            let script = dir.join("script");
            std::fs::write(&script, format!("{first}\ntouch '{}'\n", marker.display())).unwrap();
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        if let Some(text) = &case.plain {
            std::fs::write(dir.join("plain"), text).unwrap();
        }
        if case.fifo {
            let made = Command::new("mkfifo")
                .arg(dir.join("fifo"))
                .status()
                .is_ok_and(|s| s.success());
            assert!(made, "mkfifo");
        }
        let fill = |w: &String| {
            w.replace("{SHAPE}", &shape_path.to_string_lossy())
                .replace("{GOOD}", "shapes/bind-none.yaml")
                .replace("{DIR}", &dir.to_string_lossy())
        };
        let args: Vec<String> = case.args.iter().map(fill).collect();
        let mut text = String::new();
        for mode in &case.modes {
            let full: Vec<String> = match *mode {
                "as-is" => args.clone(),
                "dry-run" => std::iter::once("--dry-run".to_owned())
                    .chain(args.iter().cloned())
                    .collect(),
                _ => {
                    let command = case.command.as_ref().map_or_else(
                        || vec!["touch".to_owned(), marker.to_string_lossy().into_owned()],
                        |c| vec![fill(c)],
                    );
                    args.iter()
                        .cloned()
                        .chain(std::iter::once("--".to_owned()))
                        .chain(command)
                        .collect()
                }
            };
            let env: Vec<(String, String)> =
                case.env.iter().map(|(k, v)| (k.clone(), fill(v))).collect();
            let out = run_limited(&full, &env);
            let shown = |s: &str| {
                s.replace(&*dir.to_string_lossy(), "{DIR}")
                    .replace(&*root().to_string_lossy(), ".")
            };
            let what = format!("{name} ({mode}): binder {}", shown(&full.join(" ")));
            let chars = out.stderr.trim_end().chars().count();
            let checks = [
                (
                    out.code == Some(case.exit),
                    format!("exit {:?}, expected {}", out.code, case.exit),
                ),
                (out.stdout.is_empty(), format!("stdout {:?}", out.stdout)),
                (
                    out.stderr.starts_with("binder: ") && out.stderr.ends_with('\n'),
                    "not a `binder:` line".to_owned(),
                ),
                (
                    out.stderr.lines().count() == 1,
                    "more than one line".to_owned(),
                ),
                (chars <= MAX_CHARS, format!("{chars} characters")),
                (!marker.exists(), "the task ran".to_owned()),
                (
                    out.elapsed < Duration::from_secs(5),
                    format!("took {:?}", out.elapsed),
                ),
            ];
            for (ok, why) in checks {
                if !ok {
                    failures.push(format!("{what}: {why}\n    {}", out.stderr.trim_end()));
                }
            }
            text.push_str(&format!(
                "$ binder {}\nexit {}\n{}\n",
                shown(&full.join(" ")).replace(&*marker.to_string_lossy(), "MARKER"),
                case.exit,
                shown(out.stderr.trim_end())
            ));
        }
        let _ = std::fs::remove_dir_all(&dir);
        insta::assert_snapshot!(text);
    });
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(count >= 150, "only {count} bad-input cases");
}
