//! The checker's toolkit: typed reads from the position-keeping YAML tree that record every
//! problem (with its position and dotted path) instead of stopping at the first one. Besides the
//! scalar readers it owns the field helpers every section uses (`required`, `optional`,
//! `opt_duration`, `opt_bool`, `positive_duration`, `count_u32`), references by name with a
//! did-you-mean, and positions of nested values for checks made after the walk.

use super::Diagnostic;
use super::yaml::{Node, Pos, Value};
use crate::units;
use std::collections::HashSet;
use std::time::Duration;

/// The did-you-mean work one config may cost, in Levenshtein cells (comparing a word of `w`
/// characters with a candidate of `c` costs `w × c`). Hints go to the first errors that want
/// one; a config with thousands of unknown names among thousands of known ones (or thousands of
/// unknown time zones, each compared with 600) would otherwise cost their product. 20 million
/// cells take about 0.1 s in a release build.
pub const HINT_CELLS: usize = 20_000_000;

/// Collects errors and warnings while the tree is walked.
#[derive(Default)]
pub struct Ctx {
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
    /// Every value a `${env:}` or `${file:}` reference resolved to (`secrets::expand`), for
    /// the outputs that scrub them from what a target echoes (`Config::secrets`).
    pub secrets: Vec<String>,
    /// Levenshtein cells spent on did-you-mean hints, bounded by [`HINT_CELLS`].
    hint_cells: usize,
}

impl Ctx {
    /// The closest candidate within a small edit distance, while the config's hint budget
    /// lasts ([`HINT_CELLS`]); `None` once it is spent.
    pub fn did_you_mean<'a>(
        &mut self,
        word: &str,
        candidates: impl IntoIterator<Item = &'a str>,
    ) -> Option<&'a str> {
        closest(word, candidates, &mut self.hint_cells, HINT_CELLS)
    }

    /// ` (did you mean `x`?)`, or nothing.
    pub fn hint<'a>(
        &mut self,
        word: &str,
        candidates: impl IntoIterator<Item = &'a str>,
    ) -> String {
        self.did_you_mean(word, candidates)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default()
    }

    pub fn error(&mut self, pos: Pos, path: &str, message: impl Into<String>) {
        self.errors.push(Diagnostic {
            pos,
            path: path.to_string(),
            message: message.into(),
        });
    }

    pub fn warn(&mut self, pos: Pos, path: &str, message: impl Into<String>) {
        self.warnings.push(Diagnostic {
            pos,
            path: path.to_string(),
            message: message.into(),
        });
    }
}

/// Joins a parent path and a key the way messages show it (`targets.checkout.timeout`).
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// A mapping whose keys were checked against the allowed set.
pub struct Fields<'a> {
    pub node: &'a Node,
    pub path: String,
    entries: Vec<(&'a str, &'a Node)>,
}

impl<'a> Fields<'a> {
    pub fn get(&self, key: &str) -> Option<&'a Node> {
        self.entries
            .iter()
            .find(|(k, n)| *k == key && !n.is_null())
            .map(|(_, n)| *n)
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn path_of(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

/// Reads a mapping and reports keys outside `allowed`, with a did-you-mean.
pub fn fields<'a>(
    ctx: &mut Ctx,
    node: &'a Node,
    path: &str,
    allowed: &[&str],
) -> Option<Fields<'a>> {
    let Value::Map(entries) = &node.value else {
        if !node.is_null() {
            ctx.error(
                node.pos,
                path,
                format!("expected a mapping, found {}", node.kind()),
            );
        }
        return None;
    };
    let mut out = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        if allowed.contains(&key.name.as_str()) {
            out.push((key.name.as_str(), value));
        } else {
            let hint = ctx.hint(&key.name, allowed.iter().copied());
            ctx.error(
                key.pos,
                &join(path, &key.name),
                format!("unknown field `{}`{hint}", key.name),
            );
        }
    }
    Some(Fields {
        node,
        path: path.to_string(),
        entries: out,
    })
}

/// Entries of a mapping whose keys are user-chosen names (`targets`, `profiles`, `slos`).
pub fn named<'a>(ctx: &mut Ctx, node: &'a Node, path: &str) -> Vec<(String, Pos, &'a Node)> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .filter_map(|(k, v)| {
                if valid_name(&k.name) {
                    Some((k.name.clone(), k.pos, v))
                } else {
                    let n = k.name.chars().count();
                    let why = if n > 64 && is_label_safe(&k.name.chars().take(64).collect::<String>()) {
                        format!("a name is at most 64 characters; this one has {n}")
                    } else {
                        "names may use only letters, digits, `-`, `_` and `.` (they become metric label values)".to_string()
                    };
                    ctx.error(k.pos, &join(path, &k.name), why);
                    None
                }
            })
            .collect(),
        _ if node.is_null() => Vec::new(),
        _ => {
            ctx.error(
                node.pos,
                path,
                format!("expected a mapping of names, found {}", node.kind()),
            );
            Vec::new()
        }
    }
}

/// A name that can be a metric label value and a path segment.
pub fn is_label_safe(name: &str) -> bool {
    valid_name(name)
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

pub fn string(ctx: &mut Ctx, node: &Node, path: &str) -> Option<String> {
    match node.as_scalar() {
        Some(s) => Some(s.to_string()),
        None => {
            ctx.error(
                node.pos,
                path,
                format!("expected a string, found {}", node.kind()),
            );
            None
        }
    }
}

pub fn boolean(ctx: &mut Ctx, node: &Node, path: &str) -> Option<bool> {
    match node.as_scalar() {
        Some("true") | Some("True") | Some("TRUE") => Some(true),
        Some("false") | Some("False") | Some("FALSE") => Some(false),
        _ => {
            ctx.error(node.pos, path, "expected `true` or `false`");
            None
        }
    }
}

pub fn number(ctx: &mut Ctx, node: &Node, path: &str) -> Option<f64> {
    match node.as_scalar().map(|s| s.trim().parse::<f64>()) {
        Some(Ok(v)) if v.is_finite() => Some(v),
        _ => {
            ctx.error(
                node.pos,
                path,
                format!("expected a number, found {}", describe(node)),
            );
            None
        }
    }
}

pub fn unsigned(ctx: &mut Ctx, node: &Node, path: &str) -> Option<u64> {
    match node.as_scalar().map(|s| s.trim().parse::<u64>()) {
        Some(Ok(v)) => Some(v),
        _ => {
            ctx.error(
                node.pos,
                path,
                format!("expected a whole number, found {}", describe(node)),
            );
            None
        }
    }
}

pub fn duration(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Duration> {
    let text = string(ctx, node, path)?;
    match units::parse_duration(&text) {
        Ok(d) => Some(d),
        Err(e) => {
            ctx.error(node.pos, path, e);
            None
        }
    }
}

pub fn rate(ctx: &mut Ctx, node: &Node, path: &str) -> Option<f64> {
    let text = string(ctx, node, path)?;
    match units::parse_rate(&text) {
        Ok(r) => Some(r),
        Err(e) => {
            ctx.error(node.pos, path, e);
            None
        }
    }
}

pub fn size(ctx: &mut Ctx, node: &Node, path: &str) -> Option<u64> {
    let text = string(ctx, node, path)?;
    match units::parse_size(&text) {
        Ok(r) => Some(r),
        Err(e) => {
            ctx.error(node.pos, path, e);
            None
        }
    }
}

/// Either one item or a list of them (`status: 200` or `status: [200, 204]`).
pub fn one_or_many(node: &Node) -> Vec<&Node> {
    match &node.value {
        Value::Seq(items) => items.iter().collect(),
        _ => vec![node],
    }
}

pub fn seq<'a>(ctx: &mut Ctx, node: &'a Node, path: &str) -> &'a [Node] {
    match &node.value {
        Value::Seq(items) => items,
        _ => {
            ctx.error(
                node.pos,
                path,
                format!("expected a list, found {}", node.kind()),
            );
            &[]
        }
    }
}

fn describe(node: &Node) -> String {
    match node.as_scalar() {
        Some(s) => format!("`{s}`"),
        None => node.kind().to_string(),
    }
}

/// The closest candidate within a small edit distance, for "did you mean" hints (no budget:
/// for a fixed list of a few words).
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    closest(word, candidates, &mut 0, usize::MAX)
}

/// [`did_you_mean`] charging `spent` for the work, stopping at `budget`: a candidate costs its
/// length to measure, and `w × c` more to compare when its length is within reach. A long word
/// (a pasted blob) is never compared cell by cell.
fn closest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    spent: &mut usize,
    budget: usize,
) -> Option<&'a str> {
    let len = word.chars().count();
    let limit = (len / 3).max(1) + 1;
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if *spent >= budget {
            return None;
        }
        *spent = spent.saturating_add(c.len().max(1));
        let clen = c.chars().count();
        if clen.abs_diff(len) > limit {
            continue;
        }
        let cost = len.max(1) * clen.max(1);
        if spent.saturating_add(cost) > budget {
            *spent = budget;
            return None;
        }
        *spent += cost;
        let d = strsim::levenshtein(word, c);
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The names under a section (`targets`, `journeys`, `profiles`, `slos`) in document order,
/// hashed too: checking 10,000 references against 10,000 names costs 10,000 lookups.
#[derive(Default)]
pub struct Names {
    order: Vec<String>,
    set: HashSet<String>,
}

impl Names {
    pub fn of(node: &Node) -> Names {
        let order: Vec<String> = match &node.value {
            Value::Map(entries) => entries.iter().map(|(k, _)| k.name.clone()).collect(),
            _ => Vec::new(),
        };
        let set = order.iter().cloned().collect();
        Names { order, set }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// ` (did you mean `x`?)`, else ` (known: a, b)` naming at most [`KNOWN_SHOWN`] of them.
    pub fn hint(&self, ctx: &mut Ctx, word: &str) -> String {
        if let Some(s) = ctx.did_you_mean(word, self.iter()) {
            return format!(" (did you mean `{s}`?)");
        }
        if self.order.is_empty() {
            return String::new();
        }
        let shown: Vec<&str> = self.iter().take(KNOWN_SHOWN).collect();
        let more = self.order.len() - shown.len();
        if more == 0 {
            format!(" (known: {})", shown.join(", "))
        } else {
            format!(" (known: {} and {more} more)", shown.join(", "))
        }
    }
}

/// How many known names an unknown-reference error lists: each error is one line, however
/// many names the section holds.
pub const KNOWN_SHOWN: usize = 10;

pub fn reference(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    kind: &str,
    known: &Names,
) -> Option<String> {
    let name = string(ctx, node, path)?;
    if known.contains(&name) {
        return Some(name);
    }
    let hint = known.hint(ctx, &name);
    ctx.error(node.pos, path, format!("unknown {kind} `{name}`{hint}"));
    None
}

pub fn opt_bool(ctx: &mut Ctx, f: &Fields, key: &str, default: bool) -> bool {
    f.get(key)
        .and_then(|n| boolean(ctx, n, &f.path_of(key)))
        .unwrap_or(default)
}

pub fn opt_duration(
    ctx: &mut Ctx,
    f: &Fields,
    key: &str,
    default: Duration,
    positive: bool,
) -> Duration {
    let Some(n) = f.get(key) else { return default };
    let p = f.path_of(key);
    match duration(ctx, n, &p) {
        Some(d) if positive && d.is_zero() => {
            ctx.error(n.pos, &p, "must be longer than zero");
            default
        }
        Some(d) => d,
        None => default,
    }
}

pub fn required<T>(
    ctx: &mut Ctx,
    f: &Fields,
    key: &str,
    read: impl FnOnce(&mut Ctx, &Node, &str) -> Option<T>,
) -> Option<T> {
    match f.get(key) {
        Some(n) => read(ctx, n, &f.path_of(key)),
        None => {
            ctx.error(f.node.pos, &f.path, format!("missing `{key}`"));
            None
        }
    }
}

pub fn optional<T>(
    ctx: &mut Ctx,
    f: &Fields,
    key: &str,
    default: T,
    read: impl FnOnce(&mut Ctx, &Node, &str) -> Option<T>,
) -> Option<T> {
    match f.get(key) {
        Some(n) => read(ctx, n, &f.path_of(key)),
        None => Some(default),
    }
}

pub fn positive_duration(ctx: &mut Ctx, n: &Node, p: &str) -> Option<Duration> {
    let d = duration(ctx, n, p)?;
    if d.is_zero() {
        ctx.error(n.pos, p, "must be longer than zero");
        return None;
    }
    Some(d)
}

pub fn count_u32(ctx: &mut Ctx, n: &Node, p: &str) -> Option<u32> {
    let v = unsigned(ctx, n, p)?;
    if v == 0 || v > 1_000_000 {
        ctx.error(n.pos, p, "must be between 1 and 1000000");
        return None;
    }
    Some(v as u32)
}

/// Position of a nested value, for errors found after the walk.
pub fn node_at(root: Option<&Node>, keys: &[&str]) -> Pos {
    let Some(mut node) = root else {
        return Pos::default();
    };
    for key in keys {
        let Value::Map(entries) = &node.value else {
            break;
        };
        match entries.iter().find(|(k, _)| k.name == *key) {
            Some((_, v)) => node = v,
            None => break,
        }
    }
    node.pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn did_you_mean_finds_near_misses_only() {
        let fields = ["timeout", "method", "headers", "keep_alive"];
        assert_eq!(did_you_mean("timout", fields), Some("timeout"));
        assert_eq!(did_you_mean("keepalive", fields), Some("keep_alive"));
        assert_eq!(did_you_mean("header", fields), Some("headers"));
        assert_eq!(did_you_mean("zzz", fields), None);
    }
}
