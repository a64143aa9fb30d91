//! Text taken from places binder does not control (another user's ledger files, a job id
//! from the environment), made safe to print, and runs of numbers written compactly:
//! helpers every stage may use.

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
        if c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_bytes_are_escaped_and_long_text_cut() {
        assert_eq!(printable("job-1", 10), "job-1");
        assert_eq!(printable("\x1b[2J\nroot", 40), "\\u{1b}[2J\\u{a}root");
        assert_eq!(printable("\u{202e}abc", 40), "\\u{202e}abc");
        assert_eq!(printable(&"x".repeat(100), 5), "xxxxx…");
        // Escapes count once toward the limit, so the output stays bounded.
        assert!(printable(&"\x07".repeat(1000), 8).len() < 80);
    }
}
