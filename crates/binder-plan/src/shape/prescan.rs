//! A scan of the raw shape text before the YAML parser sees it, for what that parser
//! reports badly or slowly: control characters (located exactly), tabs in indentation,
//! and nesting deeper than [`MAX_DEPTH`].
//!
//! The depth count reads the text as YAML's scanner does wherever a bracket could mean
//! something else: inside quoted scalars (with `\"` and `''` escapes, across lines), in
//! block scalars (`|`, `>`), in plain words (`a{b`) and plain scalars in block context
//! (`ge: t {{`), in comments. It must never refuse
//! what binder itself writes: the fuzzer serializes every shape it accepts and parses it
//! again, and found each of those readings once.

/// How deep a shape may nest (flow brackets, block indentation or `- - -` on one line).
/// The catalog's deepest shape nests 6 levels; the YAML parser would otherwise spend tens
/// of seconds on 100,000 levels before its own recursion limit refuses them.
pub(crate) const MAX_DEPTH: usize = 32;

/// A 1-based line and column with what is wrong there.
pub(crate) type Found = ((usize, usize), String);

/// Checks the raw text; see the module comment.
pub(crate) fn prescan(text: &str) -> Result<(), Found> {
    let mut scanner = Scanner::default();
    for (index, line) in lines(text).enumerate() {
        scanner.line(index + 1, line)?;
    }
    Ok(())
}

/// The text's lines as YAML breaks them: at `\r\n`, `\r` or `\n` (a lone `\r` is a line
/// break to the parser, so its line numbers and ours agree).
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        match text.find(['\r', '\n']) {
            Some(at) => {
                let skip = if text[at..].starts_with("\r\n") { 2 } else { 1 };
                rest = Some(&text[at + skip..]);
                Some(&text[..at])
            }
            None => {
                rest = None;
                Some(text)
            }
        }
    })
}

fn too_deep() -> String {
    format!("nested deeper than {MAX_DEPTH} levels; a shape needs a handful")
}

/// What carries from one line to the next.
#[derive(Default)]
struct Scanner {
    /// Open flow brackets.
    depth: usize,
    /// The quote of a scalar still open at the end of the last line.
    quote: Option<char>,
    /// The indentation of the line that opened a block scalar (`key: |`) while its
    /// content lines (blank or indented further) go on.
    block: Option<usize>,
}

impl Scanner {
    fn line(&mut self, number: usize, line: &str) -> Result<(), Found> {
        let at = |col: usize| (number, col + 1);
        if let Some((col, c)) = line
            .chars()
            .enumerate()
            .find(|(_, c)| (c.is_control() && *c != '\t') || matches!(c, '\u{2028}' | '\u{2029}'))
        {
            let what = if c.is_control() {
                "control character"
            } else {
                "line or paragraph separator"
            };
            return Err((
                at(col),
                format!("{what} U+{:04X}; a shape is plain text", u32::from(c)),
            ));
        }
        let indent = line.chars().take_while(|c| *c == ' ').count();
        if let Some(parent) = self.block {
            if indent > parent || line.trim_start_matches([' ', '\t']).is_empty() {
                return Ok(());
            }
            self.block = None;
        }
        if self.quote.is_none() {
            let lead: String = line
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect();
            if let Some(col) = lead.find('\t') {
                return Err((
                    at(col),
                    "a tab in the indentation; YAML indents with spaces only".into(),
                ));
            }
            let dashes = line
                .trim_start()
                .split("- ")
                .take_while(|p| p.is_empty())
                .count();
            if indent / 2 + dashes > 4 * MAX_DEPTH {
                return Err((at(indent), too_deep()));
            }
        }
        self.characters(number, line, indent)
    }

    /// Follows quotes, comments and flow brackets along one line.
    fn characters(&mut self, number: usize, line: &str, indent: usize) -> Result<(), Found> {
        // A line starts a node, as a space or a flow bracket before it does.
        let mut prev = ' ';
        let mut opened = false;
        let mut escaped = false;
        // Inside a plain scalar in block context (`key: t {{`): text to the end of the
        // line or to `: ` (the end of a key), brackets and quotes included.
        let mut plain = false;
        let mut chars = line.char_indices().enumerate().peekable();
        while let Some((col, (byte, c))) = chars.next() {
            let starts = opened || prev.is_whitespace() || ",:-?".contains(prev);
            opened = false;
            match (self.quote, c) {
                // A backslash escapes the next character in a double-quoted scalar (`\"`
                // does not end it: the serializer writes quotes in a string so).
                _ if escaped => escaped = false,
                (Some('"'), '\\') => escaped = true,
                // `''` is a quote inside a single-quoted scalar.
                (Some('\''), '\'') if chars.peek().is_some_and(|(_, (_, n))| *n == '\'') => {
                    chars.next();
                }
                (Some(q), c) if c == q => self.quote = None,
                (Some(_), _) => {}
                // A comment runs to the end of the line.
                (None, '#') if prev.is_whitespace() => return Ok(()),
                // `: ` ends a plain key; what follows starts a node.
                (None, ':') if plain => {
                    plain = !chars.peek().is_none_or(|(_, (_, n))| n.is_whitespace());
                }
                (None, _) if plain => {}
                // A plain scalar starts where a node starts with no indicator, in block
                // context (in a flow collection a bracket ends it, so brackets count).
                // `-`, `?` and `:` are indicators only before a space: `-{{` is plain.
                (None, c)
                    if starts
                        && self.depth == 0
                        && !c.is_whitespace()
                        && (!"-?:,[]{}#&*!|>'\"%@`".contains(c)
                            || ("-?:".contains(c)
                                && chars.peek().is_some_and(|(_, (_, n))| !n.is_whitespace()))) =>
                {
                    plain = true;
                }
                // A quote opens a scalar only where one starts (`it's` is a plain word).
                (None, '"' | '\'') if starts => self.quote = Some(c),
                // `|` or `>` with only indicators and a comment after it opens a block
                // scalar: the lines indented further are its text, not structure.
                (None, '|' | '>') if starts && self.depth == 0 => {
                    let rest = line[byte + 1..]
                        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '+' || c == '-')
                        .trim_start_matches([' ', '\t']);
                    if rest.is_empty() || rest.starts_with('#') {
                        self.block = Some(indent);
                        return Ok(());
                    }
                }
                // A bracket opens a flow collection only where a node starts (`a{b` is a
                // plain word), as the quotes above.
                (None, '[' | '{') if starts => {
                    opened = true;
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return Err(((number, col + 1), too_deep()));
                    }
                }
                (None, ']' | '}') => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "prescan/tests.rs"]
mod tests;
