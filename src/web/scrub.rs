//! Scrubbing what sloburn sent from what a target echoes: every value that came from a secret
//! (`${env:}`, `${file:}`, sensitive headers), a data file's column or a capture is replaced by
//! `[redacted]` wherever it shows in a response (body, headers), before anything keeps it.
//!
//! The matcher is `aho-corasick` (leftmost-longest, so a value that holds another is
//! replaced whole): one pass over the text whatever the number of values. Bounds:
//! - values shorter than [`MIN_LEN`] bytes are not searched for (a 1–3 byte value would
//!   match by chance and shred the text; it is still never shown where sloburn marks it);
//! - a run's fixed set (the config's secrets, then its data files' cells) holds at most
//!   [`MAX_VALUES`] values and [`MAX_BYTES`] bytes, secrets first; the cells past it are
//!   still scrubbed from their own iteration's answers ([`redact`] takes several sets);
//! - each value is searched as sent and in its URL-encoded form (a query value echoed back).

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::borrow::Cow;

/// What a scrubbed value is replaced by.
pub const REDACTED: &str = "[redacted]";
/// Shorter values are not searched for.
pub const MIN_LEN: usize = 4;
/// Values in a run's fixed set.
pub const MAX_VALUES: usize = 20_000;
/// Bytes of values in a run's fixed set.
pub const MAX_BYTES: usize = 2 << 20;

/// A set of values to scrub, compiled once.
#[derive(Clone, Default)]
pub struct Scrub {
    matcher: Option<AhoCorasick>,
    /// The longest pattern: a text cut at N bytes is scrubbed over N + this, then cut.
    longest: usize,
}

impl Scrub {
    /// The values (in priority order: those past the bounds are left out), each as sent and
    /// URL-encoded.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Scrub {
        let mut patterns: Vec<String> = Vec::new();
        let mut bytes = 0;
        let mut seen = std::collections::HashSet::new();
        for v in values {
            if v.len() < MIN_LEN || !seen.insert(v) {
                continue;
            }
            if patterns.len() + 2 > MAX_VALUES || bytes + 2 * v.len() > MAX_BYTES {
                break;
            }
            bytes += v.len();
            patterns.push(v.to_string());
            let encoded =
                percent_encoding::utf8_percent_encode(v, crate::journey::URL_VALUE).to_string();
            if encoded != v {
                bytes += encoded.len();
                patterns.push(encoded);
            }
        }
        let longest = patterns.iter().map(String::len).max().unwrap_or(0);
        let matcher = (!patterns.is_empty())
            .then(|| {
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&patterns)
                    .ok()
            })
            .flatten();
        Scrub { matcher, longest }
    }

    /// The longest value searched for, in bytes.
    pub fn longest(&self) -> usize {
        self.longest
    }

    /// `text` with every value replaced.
    pub fn apply<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match &self.matcher {
            Some(m) if m.is_match(text) => {
                let mut out = String::with_capacity(text.len());
                m.replace_all_with(text, &mut out, |_, _, dst| {
                    dst.push_str(REDACTED);
                    true
                });
                Cow::Owned(out)
            }
            _ => Cow::Borrowed(text),
        }
    }
}

/// `text` with the values of every set replaced, cut after its first `limit` bytes (at a
/// character boundary): what is kept comes from those bytes or is [`REDACTED`], so a value cut
/// at the limit never leaves its first part. Pass `limit` + the sets' longest value of the
/// text, so a value that starts before the limit is found whole.
pub fn redact(text: &str, limit: usize, sets: &[&Scrub]) -> String {
    let mut found: Vec<(usize, usize)> = sets
        .iter()
        .filter_map(|s| s.matcher.as_ref())
        .flat_map(|m| m.find_iter(text).map(|x| (x.start(), x.end())))
        .collect();
    found.sort_unstable();
    let mut out = String::with_capacity(text.len().min(limit) + 16);
    let mut at = 0;
    for (start, end) in found {
        if start >= limit {
            break;
        }
        if start < at {
            // Overlaps the one before: its marker covers both.
            at = at.max(end);
            continue;
        }
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = end;
    }
    if at < limit {
        let mut cut = limit.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut > at {
            out.push_str(&text[at..cut]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_replaced_whole_wherever_they_are() {
        let s = Scrub::new(["hunter22", "hunter2-long", "abc", "p@ss word"]);
        assert_eq!(
            s.apply("a hunter2-long b hunter22c"),
            "a [redacted] b [redacted]c"
        );
        // Short values are left alone; the URL-encoded form is found too.
        assert_eq!(s.apply("abc"), "abc");
        assert_eq!(s.apply("?q=p%40ss%20word&x"), "?q=[redacted]&x");
        assert!(matches!(s.apply("nothing here"), Cow::Borrowed(_)));
        assert_eq!(Scrub::default().apply("hunter22"), "hunter22");
    }

    #[test]
    fn redact_merges_sets_and_cuts_without_leaving_a_value_s_start() {
        let a = Scrub::new(["secret-one"]);
        let b = Scrub::new(["one-two", "tail-value"]);
        assert_eq!(
            redact("x secret-one-two y", usize::MAX, &[&a, &b]),
            "x [redacted] y"
        );
        // A value that starts before the limit is replaced whole; text past it is cut.
        let text = "0123456789tail-value and more";
        assert_eq!(redact(text, 12, &[&a, &b]), "0123456789[redacted]");
        assert_eq!(redact(text, 5, &[&a, &b]), "01234");
        assert_eq!(redact("héllo", 2, &[]), "h");
    }

    #[test]
    fn the_fixed_set_is_bounded() {
        let many: Vec<String> = (0..MAX_VALUES * 2)
            .map(|i| format!("value-{i:08}"))
            .collect();
        let s = Scrub::new(many.iter().map(String::as_str));
        assert_eq!(s.apply("value-00000001"), REDACTED);
        assert_eq!(s.apply("value-00039999"), "value-00039999");
    }
}
