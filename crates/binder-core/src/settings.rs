//! binder's settings from the environment (`BINDER_*`), each read and validated in one
//! place and alike (#54): a value binder does not know is one line that names the
//! variable and the values it takes, never silently the default (`BINDER_LEDGER=of`
//! used to leave the ledger on). The launch flow checks them all first
//! ([`check`]), so every front refuses a misspelt setting the same way.

/// The words that turn a switch off, in every front alike (SEMANTICS §4.3: a value that
/// means "off" means off everywhere): `BINDER_REPORT=no`, `srun --binder=off`, `-o
/// binder=none`, `-o binder-report=false`, `BINDER_CACHE=0`. The empty string is off too
/// (`BINDER_REPORT=`), except where a shape is named (an empty shape is no shape).
pub const OFF_WORDS: [&str; 5] = ["off", "0", "no", "false", "none"];

/// The words that turn a switch on.
pub const ON_WORDS: [&str; 4] = ["on", "1", "yes", "true"];

/// Whether a shape request (`--binder=WORD`, `-o binder=WORD`) is one of [`OFF_WORDS`]:
/// it opts the job out of a site default instead of naming a shape.
pub fn is_off(word: &str) -> bool {
    OFF_WORDS.contains(&word.trim().to_ascii_lowercase().as_str())
}

/// A switch's value (`name` as the user wrote it, for the message) as on or off: unset,
/// empty or one of [`OFF_WORDS`] is off, one of [`ON_WORDS`] on, any other value is an
/// error that says both lists (a misspelt `of` is never silently the default).
pub fn switch(name: &str, value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(v) if v.is_empty() || OFF_WORDS.contains(&v.as_str()) => Ok(false),
        Some(v) if ON_WORDS.contains(&v.as_str()) => Ok(true),
        Some(v) => Err(format!(
            "{name}={:?} is neither on ({}) nor off ({}, empty)",
            crate::text::clip(&v, crate::text::QUOTE_MAX),
            ON_WORDS.join(", "),
            OFF_WORDS.join(", ")
        )),
    }
}

/// How the node ledger takes part (`BINDER_LEDGER`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LedgerMode {
    /// Used when it can be, else a warning and the launch goes on (unset, or an on word).
    On,
    /// Not used (an off word).
    Off,
    /// `require`: a launch it cannot coordinate is refused.
    Require,
}

/// `BINDER_LEDGER`: an on or off word, or `require`.
pub fn ledger_mode(env: &dyn Fn(&str) -> Option<String>) -> Result<LedgerMode, String> {
    let value = env("BINDER_LEDGER");
    if value
        .as_deref()
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("require"))
    {
        return Ok(LedgerMode::Require);
    }
    match value.as_deref() {
        None => Ok(LedgerMode::On),
        Some(v) => match switch("BINDER_LEDGER", Some(v)) {
            // Empty is the default here, not off: `BINDER_LEDGER=` changes nothing.
            Ok(false) if !v.trim().is_empty() => Ok(LedgerMode::Off),
            Ok(_) => Ok(LedgerMode::On),
            Err(why) => Err(format!("{why}, nor require")),
        },
    }
}

/// `BINDER_CACHE`: on unless an off word says otherwise.
pub fn cache_on(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    match env("BINDER_CACHE") {
        None => Ok(true),
        Some(v) if v.trim().is_empty() => Ok(true),
        Some(v) => switch("BINDER_CACHE", Some(&v)),
    }
}

/// `BINDER_CACHE_TRACE`: off unless an on word says otherwise.
pub fn cache_trace(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    switch("BINDER_CACHE_TRACE", env("BINDER_CACHE_TRACE").as_deref())
}

/// `BINDER_KERNEL_VIEW`: `in-sight` (only users with a ledger entry in sight), or `all`
/// (every user's bound tasks: the default).
pub fn kernel_view_in_sight(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    match env("BINDER_KERNEL_VIEW").as_deref().map(str::trim) {
        None | Some("" | "all") => Ok(false),
        Some("in-sight") => Ok(true),
        Some(other) => Err(format!(
            "BINDER_KERNEL_VIEW={:?} is neither all (the default) nor in-sight",
            crate::text::clip(other, crate::text::QUOTE_MAX)
        )),
    }
}

/// The most seconds `BINDER_LEDGER_WAIT` may ask for.
pub const MAX_LEDGER_WAIT: u64 = 3600;

/// `BINDER_LEDGER_WAIT`: whole seconds, at most [`MAX_LEDGER_WAIT`]; `None` when unset.
pub fn ledger_wait(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<u64>, String> {
    let Some(value) = env("BINDER_LEDGER_WAIT") else {
        return Ok(None);
    };
    match value.trim().parse::<u64>() {
        Ok(secs) if secs <= MAX_LEDGER_WAIT => Ok(Some(secs)),
        _ => Err(format!(
            "BINDER_LEDGER_WAIT={:?} is not a number of seconds from 0 to {MAX_LEDGER_WAIT}",
            crate::text::clip(&value, crate::text::QUOTE_MAX)
        )),
    }
}

/// Every setting a launch reads, checked alike: the first bad one's line.
pub fn check(env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    switch("BINDER_REPORT", env("BINDER_REPORT").as_deref())?;
    ledger_mode(env)?;
    cache_on(env)?;
    cache_trace(env)?;
    kernel_view_in_sight(env)?;
    ledger_wait(env)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn every_setting_is_validated_alike() {
        assert_eq!(check(&env(&[])), Ok(()));
        for (name, bad) in [
            ("BINDER_LEDGER", "of"),
            ("BINDER_CACHE", "nope"),
            ("BINDER_CACHE_TRACE", "2"),
            ("BINDER_KERNEL_VIEW", "insight"),
            ("BINDER_LEDGER_WAIT", "ten"),
            ("BINDER_LEDGER_WAIT", "99999"),
            ("BINDER_REPORT", "maybe"),
        ] {
            let e = check(&env(&[(name, bad)])).unwrap_err();
            assert!(e.starts_with(&format!("{name}=\"{bad}\"")), "{e}");
        }
        assert_eq!(
            ledger_mode(&env(&[("BINDER_LEDGER", "off")])),
            Ok(LedgerMode::Off)
        );
        assert_eq!(
            ledger_mode(&env(&[("BINDER_LEDGER", " Require ")])),
            Ok(LedgerMode::Require)
        );
        assert_eq!(
            ledger_mode(&env(&[("BINDER_LEDGER", "")])),
            Ok(LedgerMode::On)
        );
        assert_eq!(
            ledger_mode(&env(&[("BINDER_LEDGER", "on")])),
            Ok(LedgerMode::On)
        );
        assert!(ledger_mode(&env(&[("BINDER_LEDGER", "of")]))
            .unwrap_err()
            .ends_with("nor require"));
        assert_eq!(cache_on(&env(&[("BINDER_CACHE", "0")])), Ok(false));
        assert_eq!(cache_on(&env(&[])), Ok(true));
        assert_eq!(cache_trace(&env(&[("BINDER_CACHE_TRACE", "1")])), Ok(true));
        assert_eq!(
            kernel_view_in_sight(&env(&[("BINDER_KERNEL_VIEW", "in-sight")])),
            Ok(true)
        );
        assert_eq!(
            ledger_wait(&env(&[("BINDER_LEDGER_WAIT", "5")])),
            Ok(Some(5))
        );
    }
}
