//! Text taken from places binder does not control (another user's ledger files, a job id
//! from the environment), made safe to print, and runs of numbers written compactly:
//! helpers every stage may use, and the one-line `binder:` message.

use std::io::Write;

/// `text` with every control character (escape codes, newlines, tabs, DEL, C1) written as
/// `\u{..}` and cut to at most `max` characters with `…`, so another user's bytes can
/// neither move the cursor, change colours nor fake a line on someone's terminal.
pub fn printable(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in text.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        if hidden(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// A character a terminal acts on or hides rather than shows: control characters (ESC,
/// BEL, C1) and the zero-width and bidirectional marks.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Contiguous runs of ascending numbers as `a-b,c` (`core:0-3,8`): plans, reports and
/// refusals name runs of objects the same way.
pub fn index_ranges(sorted: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

/// How many characters of a value taken from input a message quotes.
pub const QUOTE_MAX: usize = 40;

/// `text` cut to at most `max` characters, with `…` where it was cut: every message that
/// quotes input uses it, so a huge value never makes a huge message.
pub fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The candidate closest to `word`, if it is close enough to be a typo of it: within a
/// third of the candidate's length in optimal-string-alignment edits (`strsim`), where a
/// swap of two neighbours is one edit (`l3cahce` is one edit from `l3cache`).
pub fn suggestion<'c>(word: &str, candidates: &[&'c str]) -> Option<&'c str> {
    // A word much longer than every candidate is no typo of one; checking this first
    // keeps the quadratic distance off huge values (a 50 MB `type:`).
    let longest = candidates.iter().map(|c| c.len()).max().unwrap_or(0);
    if word.len() > 2 * longest + 2 {
        return None;
    }
    let word = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (strsim::osa_distance(&word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The longest message line binder writes; a longer one is cut (with `…`). Values from
/// input are clipped where they are quoted, so this only guards against the unforeseen.
pub const MAX_LINE: usize = 1000;

/// Writes one `binder: TEXT` line to `err` with a single `write`, so lines of 256 ranks
/// sharing one stderr never interleave mid-line. Newlines inside `text` become `; `.
/// A failing stderr (`2>/dev/full`) is ignored: there is nowhere left to say it.
pub fn emit(err: &mut impl Write, text: &str) {
    let _ = err.write_all(diag_line(text).as_bytes());
}

/// The line [`emit`] writes: `binder: ` + one line of `text` + `\n`.
pub fn diag_line(text: &str) -> String {
    let text = text.strip_prefix("binder: ").unwrap_or(text);
    let one: String = text
        .trim_end()
        .split('\n')
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    // Whatever a message quotes (a user's own `--ge` or `convert` arguments too, #54),
    // the line never carries a byte the terminal acts on.
    let one: String = one
        .chars()
        .map(|c| {
            if hidden(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    format!("binder: {}\n", clip(&one, MAX_LINE))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn a_line_never_carries_a_control_byte() {
        assert_eq!(
            diag_line("--ge `linear:\x1b[31mX\x07`: bad\n"),
            "binder: --ge `linear:\\u{1b}[31mX\\u{7}`: bad\n"
        );
        assert_eq!(diag_line("a\tb\u{202e}c"), "binder: a\\u{9}b\\u{202e}c\n");
        assert_eq!(diag_line("two\nlines"), "binder: two; lines\n");
    }

    #[test]
    fn control_bytes_are_escaped_and_long_text_cut() {
        assert_eq!(printable("job-1", 10), "job-1");
        assert_eq!(printable("\x1b[2J\nroot", 40), "\\u{1b}[2J\\u{a}root");
        assert_eq!(printable("\u{202e}abc", 40), "\\u{202e}abc");
        assert_eq!(printable(&"x".repeat(100), 5), "xxxxx…");
        // Escapes count once toward the limit, so the output stays bounded.
        assert!(printable(&"\x07".repeat(1000), 8).len() < 80);
    }

    #[test]
    fn transposition_is_one_edit() {
        assert_eq!(suggestion("l3cahce", &["l3cache", "core"]), Some("l3cache"));
        assert_eq!(suggestion("patern", &["pattern"]), Some("pattern"));
        assert_eq!(suggestion("zzzz", &["core"]), None);
    }

    #[test]
    fn diagnostics_are_one_line() {
        assert_eq!(diag_line("a\nb\n"), "binder: a; b\n");
        assert_eq!(diag_line("binder: x"), "binder: x\n");
        let long = "y".repeat(5000);
        assert_eq!(
            diag_line(&long).chars().count(),
            "binder: ".len() + MAX_LINE + 2
        );
        // A full stderr is not an error (no panic, nothing returned).
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        emit(&mut Full, "x");
    }
}
