//! The HAR importer's two look-ups, each linear in what it reads: which learnt values a
//! request holds ([`Index`]), and whether a value was sent before ([`Sent`]); and the values a
//! JSON response gives ([`leaves`]).

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use serde_json::Value as J;

use crate::config::quote;

/// Values to find in text, in Aho-Corasick automata of doubling sizes (the logarithmic
/// method): adding a batch builds one small automaton and merges equal-sized ones, so each
/// value is built into O(log n) automata in all, and a text is searched once per automaton
/// (O(log n) of them), never once per value.
#[derive(Default)]
pub(super) struct Index {
    levels: Vec<Level>,
    /// The newest patterns, fewer than [`BATCH`], searched one by one (an automaton costs
    /// more to build than a few searches).
    pending: Vec<(usize, String)>,
}

/// Patterns gathered before they are built into an automaton.
const BATCH: usize = 32;

struct Level {
    automaton: AhoCorasick,
    /// Per pattern: its value's id, and the pattern (kept to rebuild a merged level).
    patterns: Vec<(usize, String)>,
}

impl Level {
    fn build(patterns: Vec<(usize, String)>) -> Option<Level> {
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            // Built often (small levels) and searched on short texts: no DFA, no prefilter.
            .kind(Some(AhoCorasickKind::ContiguousNFA))
            .prefilter(false)
            .build(patterns.iter().map(|(_, p)| p))
            .ok()?;
        Some(Level {
            automaton,
            patterns,
        })
    }
}

impl Index {
    /// Adds `(id, pattern)`s (a value, and its percent-encoded form under the same id).
    pub(super) fn add(&mut self, patterns: Vec<(usize, String)>) {
        self.pending.extend(patterns);
        if self.pending.len() < BATCH {
            return;
        }
        let mut merged = std::mem::take(&mut self.pending);
        while let Some(last) = self.levels.last() {
            if last.patterns.len() > merged.len() {
                break;
            }
            let Some(last) = self.levels.pop() else { break };
            merged.extend(last.patterns);
        }
        if let Some(level) = Level::build(merged) {
            self.levels.push(level);
        }
    }

    /// Pushes the id of every value found in `text` (longest leftmost matches) onto `hits`.
    pub(super) fn find(&self, text: &str, hits: &mut Vec<usize>) {
        for (id, pattern) in &self.pending {
            if text.contains(pattern.as_str()) {
                hits.push(*id);
            }
        }
        for level in &self.levels {
            for m in level.automaton.find_iter(text) {
                hits.push(level.patterns[m.pattern().as_usize()].0);
            }
        }
    }
}

/// What requests sent, as a set of hashes of each whole text and of its tokens (split at
/// whitespace and URL, JSON and header punctuation): a value was sent before when it was a
/// whole text sent, or each of its tokens was sent.
#[derive(Default)]
pub(super) struct Sent {
    hasher: RandomState,
    seen: HashSet<u64>,
}

fn is_delimiter(c: char) -> bool {
    c.is_whitespace() || "/?&=#\"',;:{}[]()<>+%\\".contains(c)
}

impl Sent {
    pub(super) fn add(&mut self, text: &str) {
        self.seen.insert(self.hasher.hash_one(text));
        for token in text.split(is_delimiter).filter(|t| !t.is_empty()) {
            self.seen.insert(self.hasher.hash_one(token));
        }
    }

    pub(super) fn holds(&self, value: &str) -> bool {
        if self.seen.contains(&self.hasher.hash_one(value)) {
            return true;
        }
        let mut tokens = value
            .split(is_delimiter)
            .filter(|t| !t.is_empty())
            .peekable();
        tokens.peek().is_some() && tokens.all(|t| self.seen.contains(&self.hasher.hash_one(t)))
    }
}

/// Every string leaf of at least `min` characters with its JSONPath.
pub(super) fn leaves(v: &J, path: &str, min: usize, out: &mut Vec<(String, String)>) {
    match v {
        J::String(s) if s.chars().count() >= min => out.push((s.clone(), path.to_string())),
        J::Object(m) => {
            for (k, x) in m {
                let p = if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    format!("{path}.{k}")
                } else {
                    format!("{path}[{}]", quote(k).replace('"', "'"))
                };
                leaves(x, &p, min, out);
            }
        }
        J::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                leaves(x, &format!("{path}[{i}]"), min, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_found_whatever_batch_they_came_in() {
        let mut index = Index::default();
        for (id, v) in ["token-aaaaaaaa", "order-12345678", "cart-abcdefgh"]
            .iter()
            .enumerate()
        {
            index.add(vec![(id, v.to_string())]);
        }
        index.add(vec![
            (3, "session-zzzzzzzz".into()),
            (3, "session%2Dz".into()),
        ]);
        let mut hits = Vec::new();
        index.find(
            "/orders/order-12345678?s=session-zzzzzzzz&t=token-aaaaaaaa",
            &mut hits,
        );
        hits.sort_unstable();
        assert_eq!(hits, [0, 1, 3]);
        assert!(index.levels.len() <= 3, "{} levels", index.levels.len());
    }

    #[test]
    fn sent_holds_whole_texts_and_values_whose_tokens_were_all_sent() {
        let mut sent = Sent::default();
        sent.add(r#"{"user":"alice@example.com","pass":"hunter22"}"#);
        sent.add("/search?q=blue shoes");
        assert!(sent.holds("alice@example.com"));
        assert!(sent.holds("blue shoes"));
        assert!(!sent.holds("fresh-token-1234"));
        assert!(!sent.holds("alice@example.com/other"));
    }
}
