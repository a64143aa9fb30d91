//! OpenMP's variables against the binding (issue #13): a user's own `OMP_PLACES` and
//! `OMP_PROC_BIND` are kept when they agree with the task's CPUs, replaced (and said under
//! `--verbose`) when they do not, and an `OMP_NUM_THREADS` larger than the places is
//! warned about. Pure: the inherited values come in as strings.
//!
//! What "agree" means, as OpenMP 5.2 §6 reads the variables:
//! - `OMP_PLACES` as an abstract name (`threads`, `cores`, `ll_caches`, `numa_domains`,
//!   `sockets`, with or without `(n)`) is resolved by the runtime inside the affinity mask
//!   binder sets, so it always agrees; an explicit list (`{0,1},{2:2}`, `{0:4}:2:4`)
//!   agrees when every CPU it names is one of the task's; anything else (a typo, `!`
//!   exclusions) is replaced, since the runtime would ignore it or stop.
//! - `OMP_PROC_BIND` agrees when it is a value OpenMP accepts (`true`, `false`, or a list
//!   of `primary`, `master`, `close`, `spread`): it says how threads use the places, which
//!   the process binding does not decide.

/// What became of one inherited variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Not set: binder sets its own.
    Unset,
    /// Set and consistent: kept, and binder sets nothing.
    Kept(String),
    /// Set but inconsistent: binder's value replaces it, for this reason.
    Replaced(String, String),
}

/// The places an `OMP_PLACES` value describes, as far as binder can count them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Places {
    /// An abstract name and its optional count.
    Abstract(String, Option<usize>),
    /// Explicit places, each a list of CPUs.
    Explicit(Vec<Vec<usize>>),
}

/// The most places or CPUs an explicit list may expand to: more is not a real node's.
const MAX_EXPANDED: usize = 1 << 20;

/// Reads an `OMP_PLACES` value; `None` when OpenMP would not accept it either (or binder
/// cannot read it: `!` exclusions).
fn parse_places(value: &str) -> Option<Places> {
    let v = value.trim();
    let lower = v.to_ascii_lowercase();
    for name in ["threads", "cores", "ll_caches", "numa_domains", "sockets"] {
        if let Some(rest) = lower.strip_prefix(name) {
            let rest = rest.trim();
            if rest.is_empty() {
                return Some(Places::Abstract(name.into(), None));
            }
            let n = rest.strip_prefix('(')?.strip_suffix(')')?.trim();
            let n: usize = n.parse().ok().filter(|&n| n > 0)?;
            return Some(Places::Abstract(name.into(), Some(n)));
        }
    }
    let mut places = Vec::new();
    let mut rest = v;
    while !rest.is_empty() {
        let body_end = rest.strip_prefix('{')?.find('}')? + 1;
        let place = parse_resources(&rest[1..body_end])?;
        rest = rest[body_end + 1..].trim_start();
        // `{...}:count[:stride]` repeats the place, shifted by stride (default 1).
        let (count, stride, after) = match rest.strip_prefix(':') {
            Some(tail) => {
                let end = tail.find(',').unwrap_or(tail.len());
                let (c, s) = interval(&tail[..end])?;
                (c, s, &tail[end..])
            }
            None => (1, 1, rest),
        };
        for k in 0..count {
            let shift = stride.checked_mul(k as i64)?;
            let shifted: Option<Vec<usize>> = place
                .iter()
                .map(|&c| usize::try_from(i64::try_from(c).ok()?.checked_add(shift)?).ok())
                .collect();
            places.push(shifted?);
            if places.len() > MAX_EXPANDED {
                return None;
            }
        }
        rest = after.trim_start();
        if let Some(tail) = rest.strip_prefix(',') {
            rest = tail.trim_start();
            if rest.is_empty() {
                return None;
            }
        }
    }
    (!places.is_empty()).then_some(Places::Explicit(places))
}

/// `count[:stride]` after a place or resource; stride may be negative.
fn interval(text: &str) -> Option<(usize, i64)> {
    let mut parts = text.split(':').map(str::trim);
    let count: usize = parts.next()?.parse().ok().filter(|&c| c > 0)?;
    let stride: i64 = match parts.next() {
        Some(s) => s.parse().ok()?,
        None => 1,
    };
    if parts.next().is_some() || count > MAX_EXPANDED {
        return None;
    }
    Some((count, stride))
}

/// The CPUs inside one `{...}`: `0,1`, `0:4` (4 CPUs from 0), `0:4:2` (stride 2).
fn parse_resources(body: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for item in body.split(',').map(str::trim) {
        let (start, tail) = match item.split_once(':') {
            Some((s, t)) => (s.trim(), Some(t)),
            None => (item, None),
        };
        let start: i64 = start.parse().ok().filter(|&s| s >= 0)?;
        let (count, stride) = tail.map_or(Some((1, 1)), interval)?;
        for k in 0..count {
            let cpu = start.checked_add(stride.checked_mul(k as i64)?)?;
            cpus.push(usize::try_from(cpu).ok()?);
        }
        if cpus.len() > MAX_EXPANDED {
            return None;
        }
    }
    Some(cpus)
}

/// Whether the user's `OMP_PLACES` is kept for a task bound to `cpus`.
pub fn places(value: Option<&str>, cpus: &[usize]) -> Verdict {
    let Some(value) = value else {
        return Verdict::Unset;
    };
    match parse_places(value) {
        None => Verdict::Replaced(
            value.to_owned(),
            "OpenMP would not read it (or it uses `!`, which binder cannot check)".into(),
        ),
        Some(Places::Abstract(..)) => Verdict::Kept(value.to_owned()),
        Some(Places::Explicit(list)) => {
            let outside: Vec<usize> = {
                let mut o: Vec<usize> = list
                    .iter()
                    .flatten()
                    .copied()
                    .filter(|c| cpus.binary_search(c).is_err())
                    .collect();
                o.sort_unstable();
                o.dedup();
                o
            };
            if outside.is_empty() {
                Verdict::Kept(value.to_owned())
            } else {
                Verdict::Replaced(
                    value.to_owned(),
                    format!(
                        "it names cpus {} outside the task's {}",
                        crate::cpulist::cpu_list(&outside),
                        crate::cpulist::cpu_list(cpus)
                    ),
                )
            }
        }
    }
}

/// Whether the user's `OMP_PROC_BIND` is kept.
pub(crate) fn proc_bind(value: Option<&str>) -> Verdict {
    let Some(value) = value else {
        return Verdict::Unset;
    };
    let lower = value.trim().to_ascii_lowercase();
    let ok = ["true", "false"].contains(&lower.as_str())
        || lower
            .split(',')
            .all(|p| ["primary", "master", "close", "spread"].contains(&p.trim()));
    if ok {
        Verdict::Kept(value.to_owned())
    } else {
        Verdict::Replaced(
            value.to_owned(),
            "it is none of true, false, primary, master, close, spread".into(),
        )
    }
}

/// How many places `OMP_PLACES=value` gives a task with `cpus` and binder's `units`
/// places, when binder can tell (`cores` is known only when the units are cores).
pub fn count(
    value: Option<&str>,
    cpus: &[usize],
    units: &[Vec<usize>],
    cores_known: bool,
) -> Option<usize> {
    let Some(value) = value else {
        return Some(units.len());
    };
    match parse_places(value)? {
        Places::Explicit(list) => Some(list.len()),
        Places::Abstract(name, n) => {
            let all = match name.as_str() {
                "threads" => cpus.len(),
                "cores" if cores_known => units.len(),
                _ => return None,
            };
            Some(n.map_or(all, |n| n.min(all)))
        }
    }
}

/// The first number of an `OMP_NUM_THREADS` list (`8` or `8,4`: the outer level).
pub fn threads(value: &str) -> Option<usize> {
    value.split(',').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expectations read off OpenMP 5.2 §6.5 (OMP_PLACES) and §6.4 (OMP_PROC_BIND).
    #[test]
    fn explicit_places_expand_as_the_spec_says() {
        // The spec's own examples: these three describe the same 4 places of 4 CPUs.
        let a = parse_places("{0,1,2,3},{4,5,6,7},{8,9,10,11},{12,13,14,15}");
        let b = parse_places("{0:4},{4:4},{8:4},{12:4}");
        let c = parse_places("{0:4}:4:4");
        assert_eq!(a, b);
        assert_eq!(b, c);
        let Some(Places::Explicit(list)) = a else {
            panic!()
        };
        assert_eq!(list.len(), 4);
        assert_eq!(list[3], vec![12, 13, 14, 15]);
        assert_eq!(
            parse_places("{0:2:2}"),
            Some(Places::Explicit(vec![vec![0, 2]]))
        );
        assert_eq!(
            parse_places(" cores(4) "),
            Some(Places::Abstract("cores".into(), Some(4)))
        );
        for bad in [
            "", "{", "{0,}", "{a}", "cores(0)", "{0},", "{!0}", "core", "{0:4}:0",
        ] {
            assert_eq!(parse_places(bad), None, "{bad}");
        }
        assert_eq!(parse_places("{0:1}:4000000000"), None);
    }

    #[test]
    fn kept_only_inside_the_cpus() {
        let cpus = [4, 5, 6, 7];
        assert_eq!(places(None, &cpus), Verdict::Unset);
        assert!(matches!(places(Some("cores"), &cpus), Verdict::Kept(_)));
        assert!(matches!(
            places(Some("{4,5},{6,7}"), &cpus),
            Verdict::Kept(_)
        ));
        let Verdict::Replaced(_, why) = places(Some("{0:4}"), &cpus) else {
            panic!()
        };
        assert_eq!(why, "it names cpus 0-3 outside the task's 4-7");
        assert!(matches!(
            places(Some("{4:x}"), &cpus),
            Verdict::Replaced(..)
        ));
        assert!(matches!(proc_bind(Some("SPREAD,close")), Verdict::Kept(_)));
        assert!(matches!(proc_bind(Some("false")), Verdict::Kept(_)));
        assert!(matches!(proc_bind(Some("tight")), Verdict::Replaced(..)));
    }

    #[test]
    fn counts() {
        let cores = vec![vec![0, 1], vec![2, 3]];
        let all = [0, 1, 2, 3];
        assert_eq!(count(None, &all, &cores, true), Some(2));
        assert_eq!(count(Some("threads"), &all, &cores, true), Some(4));
        assert_eq!(count(Some("threads(3)"), &all, &cores, true), Some(3));
        assert_eq!(count(Some("cores"), &all, &cores, true), Some(2));
        assert_eq!(count(Some("sockets"), &all, &cores, true), None);
        // Two PUs as units: they may be one core's two threads, so `cores` is unknown.
        let pus = vec![vec![0], vec![1]];
        assert_eq!(count(Some("cores"), &[0, 1], &pus, false), None);
        assert_eq!(count(Some("{0},{1},{0}"), &[0, 1], &pus, false), Some(3));
        assert_eq!(threads("8,4"), Some(8));
        assert_eq!(threads("x"), None);
    }
}
