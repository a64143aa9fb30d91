//! The one option parser for a request given as JSON values (a Flux shell's `-o binder=…`,
//! `-o binder.shape=… -o binder.report`, `-o binder-report`): a shape or an off word, the
//! object form whose every key is binder's, and switches that take the one list of on and
//! off words; anything else is one line, never an option that silently does nothing
//! (SEMANTICS §4.3).

use super::{Ask, Decision, Kind, Request, Site};

/// A shell option's value as a switch (`-o binder-report`, `=1`, `=true`, `=off`, …):
/// the one list of on and off words every front takes; any other value is one line.
fn flag(name: &str, value: &serde_json::Value) -> Result<bool, String> {
    let text = match value {
        serde_json::Value::Bool(b) => b.to_string(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    binder_core::launch::line::switch(name, Some(&text))
}

/// Whether a shell option's JSON is an off word that is no string: `false`, or the
/// number 0 (`-o binder=0`, `-o binder=false`).
fn json_off(value: &serde_json::Value) -> bool {
    value.as_bool() == Some(false) || value.as_u64() == Some(0)
}

/// The request from the shell options: `binder` is `SHAPE`, an off word, or an object
/// `{shape, report, verbose}` (`-o binder.shape=… -o binder.report`); `report` and
/// `verbose` are `-o binder-report` and `-o binder-verbose`; `affinity_typed`: the job
/// set `cpu-affinity` or `gpu-affinity` itself, which a site default yields to;
/// `binds_too`: such an option that binds tasks itself (`("-o cpu-affinity",
/// "per-task")`), which an explicit request is refused beside, as Slurm's `--cpu-bind`
/// is ([`Ask::binds_too`]); `kind`:
/// what the job runs (a Flux broker is a container a default never binds). The decision
/// is [`Ask::decide`]'s; beside it, the line a job that asked for a report or verbose
/// lines but is left to Flux gets ([`Ask::why_left`]).
pub fn request_from_json(
    binder: Option<&serde_json::Value>,
    report: Option<&serde_json::Value>,
    verbose: Option<&serde_json::Value>,
    site: &Site,
    affinity_typed: bool,
    binds_too: Option<(&str, &str)>,
    kind: Kind<'_>,
) -> Result<(Option<Request>, Option<String>), String> {
    let mut report = report.map_or(Ok(false), |v| flag("-o binder-report", v))?;
    let mut verbose = verbose.map_or(Ok(false), |v| flag("-o binder-verbose", v))?;
    // `-o binder=0` and `-o binder=false` reach the shell as a JSON number and boolean,
    // not the text of the off words they are (#63): read as `off`.
    let off = serde_json::Value::String("off".to_owned());
    let binder = binder.map(|v| if json_off(v) { &off } else { v });
    let shape = match binder {
        None => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => {
            return Err("-o binder= names no shape; give -o binder=SHAPE (a file or a catalog name), or -o binder=off".into())
        }
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => {
            // Every key is binder's to read: a misspelt one is said, not ignored.
            let known = ["shape", "report", "verbose"];
            for (key, value) in o {
                if !known.contains(&key.as_str()) {
                    let near = binder_core::text::suggestion(key, &known)
                        .map(|k| format!(" (did you mean binder.{k}?)"))
                        .unwrap_or_default();
                    return Err(format!(
                        "-o binder.{} is not an option of binder's{near}; it takes binder.shape=SHAPE, binder.report and binder.verbose",
                        binder_core::text::printable(key, 40)
                    ));
                }
                match key.as_str() {
                    "shape" if json_off(value) => {}
                    "shape" if !value.is_string() => {
                        return Err(format!(
                            "-o binder.shape={} is not a shape; give a file or a catalog name",
                            binder_core::text::printable(&value.to_string(), 60)
                        ))
                    }
                    "report" => report |= flag("-o binder.report", value)?,
                    "verbose" => verbose |= flag("-o binder.verbose", value)?,
                    _ => {}
                }
            }
            let shape = o.get("shape").and_then(|s| {
                if json_off(s) {
                    Some("off".to_owned())
                } else {
                    s.as_str().map(str::to_owned)
                }
            });
            // `-o binder={}` (or flags alone) with no default to apply them to would do
            // nothing: said, never silently unbound.
            if shape.is_none() && site.default_shape().is_none() && !report && !verbose {
                return Err(format!(
                    "-o binder={} names no shape, and this site has no default; give -o binder=SHAPE (or binder.shape=SHAPE), a file or a catalog name",
                    binder_core::text::printable(&serde_json::Value::Object(o.clone()).to_string(), 60)
                ));
            }
            shape
        }
        Some(other) => {
            return Err(format!(
                "-o binder={} is not a shape; give -o binder=SHAPE (a file or a catalog name)",
                binder_core::text::printable(&other.to_string(), 60)
            ))
        }
    };
    let ask = Ask {
        option: "-o binder",
        asked: shape.as_deref(),
        default: site.default_shape(),
        launcher_binds: affinity_typed,
        binds_too,
        kind,
        report,
        verbose,
    };
    match ask.decide() {
        Decision::Bind(request) => Ok((Some(request), None)),
        Decision::Stay => Ok((None, ask.why_left())),
        Decision::Refuse(line) => Err(line),
    }
}
