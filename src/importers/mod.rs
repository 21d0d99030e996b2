//! `sloburn import KIND FILE`: configs from what teams already have, printed as sloburn YAML
//! that `sloburn check` accepts. Each importer reads its file, says on stderr what it could
//! not convert (never dropped silently), and writes the config on stdout.
//!
//! - `har.rs`: a browser recording → one journey, assets and other hosts left out, think
//!   times from the gaps, values a response gave and a later request sent captured.
//! - `openapi/`: an OpenAPI 3 document (JSON or YAML) → a target and profile per operation,
//!   or one journey over chosen operations.
//! - `k6/`: a k6 script's straight-line subset, through oxc's syntax tree.
//! - `verify.rs`: every importer's output through `check`'s validation before it is printed;
//!   what would fail is taken out as comments and listed.

/// The largest file an importer reads: a HAR holds every response body of a recording.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

pub mod har;
pub mod k6;
pub mod openapi;
pub mod verify;

/// The most characters of one importer message printed; the rest is cut, its size said.
pub const MAX_MESSAGE_CHARS: usize = 400;

/// An importer's message as it is safe to print on a terminal, whatever the input held:
/// control characters (ESC, CR, C1…) and the bidirectional overrides and isolates (U+202A–E,
/// U+2066–9, the marks) escaped as `\u{…}`, and a message longer than [`MAX_MESSAGE_CHARS`]
/// cut with the size of what was left out.
pub fn printable(message: &str) -> String {
    let mut out = String::new();
    for (shown, (at, c)) in message.char_indices().enumerate() {
        if shown >= MAX_MESSAGE_CHARS {
            out.push_str(&format!("… ({} more bytes)", message.len() - at));
            break;
        }
        if c.is_control() || is_bidi(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The characters that reorder the text around them (Trojan Source, CVE-2021-42574).
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// A config name (`[A-Za-z0-9._-]`, at most 64) made from free text: other characters become
/// `-`, runs of them one.
pub fn config_name(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.') {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    let mut out: String = out.chars().take(64).collect();
    if out.is_empty() {
        out.push_str("op");
    }
    out
}

/// The longest config name (`config::walk`'s bound).
pub const MAX_NAME: usize = 64;

/// Names made unique: the first of a name keeps it, the next get `-2`, `-3`…, the name cut so
/// that with its suffix it stays within [`MAX_NAME`]. Linear: each name tries on from the
/// last number its base was given.
#[derive(Debug, Default)]
pub struct UniqueNames {
    taken: std::collections::HashSet<String>,
    next: std::collections::HashMap<String, usize>,
}

impl UniqueNames {
    /// `name` (a [`config_name`]) or the first free `name-N`.
    pub fn give(&mut self, name: &str) -> String {
        let name: String = name.chars().take(MAX_NAME).collect();
        if self.taken.insert(name.clone()) {
            return name;
        }
        let n = self.next.entry(name.clone()).or_insert(1);
        loop {
            *n += 1;
            let suffix = format!("-{n}");
            let cut: String = name.chars().take(MAX_NAME - suffix.len()).collect();
            let candidate = format!("{}{suffix}", cut.trim_end_matches('-'));
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_scalars() {
        assert_eq!(config_name("find pet by id"), "find-pet-by-id");
        assert_eq!(config_name("GET /pet/{petId}"), "GET-pet-petId");
        assert_eq!(config_name("///"), "op");
    }

    #[test]
    fn unique_names_stay_within_the_limit_with_their_suffix() {
        let mut names = UniqueNames::default();
        let long = "a".repeat(80);
        let first = names.give(&config_name(&long));
        assert_eq!(first.len(), MAX_NAME);
        let second = names.give(&config_name(&long));
        assert_eq!(second.len(), MAX_NAME);
        assert!(second.ends_with("a-2"), "{second}");
        assert_eq!(names.give("x"), "x");
        assert_eq!(names.give("x-2"), "x-2");
        assert_eq!(names.give("x"), "x-3");
        let many: Vec<String> = (0..12).map(|_| names.give(&long)).collect();
        assert!(many.iter().all(|n| n.len() <= MAX_NAME), "{many:?}");
        assert!(many.last().unwrap().ends_with("-14"), "{many:?}");
    }

    #[test]
    fn messages_escape_controls_and_bidi_and_are_cut() {
        assert_eq!(
            printable("a\x1b[31mb\u{202e}c\td"),
            "a\\u{1b}[31mb\\u{202e}c\\u{9}d"
        );
        let long = "é".repeat(1000);
        let p = printable(&long);
        assert_eq!(p.chars().filter(|c| *c == 'é').count(), MAX_MESSAGE_CHARS);
        assert!(p.ends_with("… (1200 more bytes)"), "{p}");
        assert_eq!(printable("plain"), "plain");
    }
}
