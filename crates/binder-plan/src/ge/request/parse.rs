//! Reading qsub's words into a [`Request`]: OCS 9.1's `-b*` switches and SGE 6.2u5's
//! `-binding`, each refusal naming the switch and what to write instead.

use super::super::GeError;
use super::{Amount, Instance, Kind, Mark, Packed, Request, Strategy, UnitSpec, MAX_AMOUNT};
use crate::ge::codec::Letter;

const SWITCHES: &[&str] = &[
    "-bunit",
    "-bamount",
    "-btype",
    "-bstrategy",
    "-bsort",
    "-bstart",
    "-bstop",
    "-bfilter",
    "-binstance",
    "-binding",
];

impl Request {
    /// Parses qsub switches, e.g. `-bunit C -bamount 2 -btype host` or
    /// `-binding env linear:4`.
    pub fn parse(text: &str) -> Result<Request, GeError> {
        let bad = |why: String| GeError::Request {
            text: binder_core::text::clip(text.trim(), binder_core::text::QUOTE_MAX),
            why,
        };
        let mut words = text.split_whitespace().peekable();
        let mut packed = Packed {
            unit: UnitSpec {
                level: Letter::C,
                kind: Kind::Performance,
            },
            amount: Amount::Exactly(1),
            host: false,
            sort: Vec::new(),
            start: None,
            stop: None,
            filter: None,
        };
        let mut seen: Vec<&str> = Vec::new();
        let mut instance = None;
        let mut sge: Option<Strategy> = None;
        while let Some(switch) = words.next() {
            if !SWITCHES.contains(&switch) {
                let mut hint = crate::shape::did_you_mean(switch, SWITCHES);
                if hint.is_empty() {
                    hint = "; use -bunit, -bamount, -btype, -bsort, -bstart, -bstop, -bfilter, -binstance, or -binding STRATEGY".into();
                }
                return Err(bad(format!(
                    "`{}` is not a binding switch{hint}",
                    binder_core::text::clip(switch, binder_core::text::QUOTE_MAX)
                )));
            }
            if seen.contains(&switch) {
                return Err(bad(format!("`{switch}` is given twice; keep one")));
            }
            seen.push(switch);
            let mut value = || {
                words
                    .next()
                    .ok_or_else(|| bad(format!("`{switch}` needs a value")))
            };
            match switch {
                "-bunit" => {
                    let v = value()?;
                    packed.unit = UnitSpec::parse(v).ok_or_else(|| {
                        bad(format!(
                            "`-bunit {}` is not a unit; use T, C, S, X, Y or N (CT, CS, … the same), or ET, E, ES, EX, EY, EN for efficiency cores",
                            binder_core::text::clip(v, 10)
                        ))
                    })?;
                }
                "-bamount" => {
                    let v = value()?;
                    packed.amount = if v.eq_ignore_ascii_case("all") {
                        Amount::All
                    } else {
                        Amount::Exactly(number(v, "-bamount").map_err(bad)?)
                    };
                }
                "-btype" => {
                    packed.host = match value()? {
                        "host" => true,
                        "slot" => false,
                        v => {
                            return Err(bad(format!(
                            "`-btype {}`: use `slot` (units per task) or `host` (units per node)",
                            binder_core::text::clip(v, 10)
                        )))
                        }
                    }
                }
                "-bstrategy" => {
                    let v = value()?;
                    if v != "packed" && v != "pack" {
                        return Err(bad(format!(
                            "`-bstrategy {}`: OCS 9.1 has only `packed`; for SGE's linear, striding or explicit use `-binding`",
                            binder_core::text::clip(v, 10)
                        )));
                    }
                }
                "-bsort" => {
                    let v = value()?;
                    packed.sort = marks(v, "-bsort", true).map_err(bad)?;
                    for m in &packed.sort {
                        if packed
                            .sort
                            .iter()
                            .any(|o| o.letter == m.letter && o.used != m.used)
                        {
                            return Err(bad(format!(
                                "`-bsort {v}` sorts {} both ways; keep the uppercase (free first) or the lowercase (used first) letter",
                                m.letter.char()
                            )));
                        }
                    }
                }
                "-bstart" | "-bstop" => {
                    let v = value()?;
                    let m = marks(v, switch, false).map_err(bad)?;
                    let [one] = m[..] else {
                        return Err(bad(format!(
                            "`{switch} {}` must be one letter",
                            binder_core::text::clip(v, 10)
                        )));
                    };
                    if switch == "-bstart" {
                        packed.start = Some(one);
                    } else {
                        packed.stop = Some(one);
                    }
                }
                "-bfilter" => packed.filter = Some(value()?.to_owned()),
                "-binstance" => {
                    let v = value()?;
                    instance = Some(Instance::parse(v).ok_or_else(|| {
                        bad(format!(
                            "`-binstance {}`: use set, env or pe",
                            binder_core::text::clip(v, 10)
                        ))
                    })?);
                }
                "-binding" => {
                    let mut v = value()?;
                    if let Some(i) = Instance::parse(v) {
                        instance = Some(i);
                        v = value()?;
                    }
                    sge = Some(strategy(v).map_err(bad)?);
                }
                _ => unreachable!("switch list checked above"),
            }
        }
        if seen.is_empty() {
            return Err(bad(
                "it has no switches; e.g. `-bunit C -bamount 2` or `-binding linear:2`".into(),
            ));
        }
        let strategy = match sge {
            Some(s) => {
                if let Some(other) = seen
                    .iter()
                    .find(|s| !["-binding", "-binstance"].contains(s))
                {
                    return Err(bad(format!(
                        "`-binding` (SGE 6.2u5) and `{other}` (OCS 9.1) are two languages; use one"
                    )));
                }
                s
            }
            None => Strategy::Packed(packed),
        };
        Ok(Request {
            strategy,
            instance: instance.unwrap_or_default(),
            text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        })
    }
}

fn number(v: &str, what: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n <= MAX_AMOUNT => Ok(n),
        Ok(_) => Err(format!("`{what} {v}` is more than any node has")),
        Err(_) => Err(format!(
            "`{what} {}` is not a whole number",
            binder_core::text::clip(v, 12)
        )),
    }
}

fn marks(v: &str, what: &str, allow_die: bool) -> Result<Vec<Mark>, String> {
    let mut out = Vec::new();
    for c in v.chars() {
        if allow_die && c.eq_ignore_ascii_case(&'a') {
            continue; // dies: OCS's GCS data mode; binder's strings have none
        }
        let letter = Letter::from_char(c).ok_or_else(|| {
            format!(
                "`{what} {}`: `{c}` is not a unit letter (N S X Y C E T; uppercase free, lowercase used)",
                binder_core::text::clip(v, 12)
            )
        })?;
        out.push(Mark {
            letter,
            used: c.is_ascii_lowercase(),
        });
    }
    if out.is_empty() && !allow_die {
        return Err(format!("`{what}` needs a letter"));
    }
    Ok(out)
}

fn pair(v: &str) -> Result<(usize, usize), String> {
    let (s, c) = v.split_once(',').ok_or_else(|| {
        format!(
            "`{}` is not SOCKET,CORE (e.g. 0,1)",
            binder_core::text::clip(v, 12)
        )
    })?;
    Ok((number(s, "socket")?, number(c, "core")?))
}

fn strategy(v: &str) -> Result<Strategy, String> {
    let mut parts = v.split(':');
    let name = parts.next().unwrap_or_default();
    let rest: Vec<&str> = parts.collect();
    let amount = |s: Option<&&str>| -> Result<usize, String> {
        let n = number(s.ok_or("a count of cores is missing")?, name)?;
        if n == 0 {
            return Err(format!("`{v}` binds no core; give at least 1"));
        }
        Ok(n)
    };
    match name {
        "linear" => {
            let start = match rest.get(1) {
                Some(p) => Some(pair(p)?),
                None => None,
            };
            if rest.len() > 2 {
                return Err(format!(
                    "`{v}`: linear takes `linear:N` or `linear:N:SOCKET,CORE`"
                ));
            }
            Ok(Strategy::Linear {
                amount: amount(rest.first())?,
                start,
            })
        }
        "striding" => {
            if rest.len() < 2 || rest.len() > 3 {
                return Err(format!(
                    "`{v}`: striding takes `striding:N:STEP` or `striding:N:STEP:SOCKET,CORE`"
                ));
            }
            let step = number(rest[1], "step")?;
            if step == 0 {
                return Err(format!("`{v}`: the step must be at least 1"));
            }
            Ok(Strategy::Striding {
                amount: amount(rest.first())?,
                step,
                start: rest.get(2).map(|p| pair(p)).transpose()?,
            })
        }
        "explicit" => {
            if rest.is_empty() {
                return Err(format!(
                    "`{v}`: explicit needs SOCKET,CORE pairs, e.g. explicit:0,0:0,1"
                ));
            }
            let pairs = rest
                .iter()
                .map(|p| pair(p))
                .collect::<Result<Vec<_>, _>>()?;
            for (i, p) in pairs.iter().enumerate() {
                if pairs[..i].contains(p) {
                    return Err(format!("`{v}` names core {},{} twice", p.0, p.1));
                }
            }
            Ok(Strategy::Explicit(pairs))
        }
        _ => Err(format!(
            "`-binding {}`: use linear:N[:S,C], striding:N:STEP[:S,C] or explicit:S,C[:S,C]…",
            binder_core::text::clip(v, 20)
        )),
    }
}
