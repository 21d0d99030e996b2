//! The crate's shape, checked: a module imports only from layers below its own, so the
//! module graph has no circle. The order is written once, here, and ARCHITECTURE.md's
//! "Layers" table must say the same. Inside a folder no two files (or sub-folders) import each
//! other, a file holds at most 500 code lines, and a function spans at most 100 lines unless
//! ARCHITECTURE.md's `## Long functions` names it (at most 10). Test code (`#[cfg(test)]`
//! modules) may do anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, lowest layer first. A module may import from strictly lower
/// layers only (never from its own layer, so two neighbours cannot form a circle either).
const LAYERS: &[&[&str]] = &[
    &["clock"],
    &[
        "exit", "units", "timer", "limits", "memory", "signals", "names", "hist", "zone", "starve",
    ],
    &["http", "server"],
    &[
        "checks",
        "thresholds",
        "schedule",
        "slo",
        "journey",
        "telemetry",
    ],
    &["config"],
    &["load", "rules", "metrics", "store"],
    &["budget", "target", "web", "importers", "compare"],
    &["output", "capacity"],
    &["run", "daemon"],
    &["demo"],
    &["cli"],
];

/// Folders whose files form layers of their own, lowest first; checked through `super::` and
/// `crate::<folder>::` imports between its files.
const INNER: &[(&str, &[&str])] = &[(
    "daemon",
    &[
        "state",
        "discovery",
        "peers",
        "locations",
        "runs",
        "shardrun",
        "schedules",
        "reload",
        "restore",
        "hooks",
        "api",
        "lifecycle",
    ],
)];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file that counts: before its first `#[cfg(test)]`, without comment lines.
fn code(text: &str) -> String {
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or("");
    before_tests
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every first path segment after `prefix` (`crate::` or `super::`), including each item of a
/// `prefix{a, b::c}` group.
fn segments_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let boundary_ok = rest[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        rest = &rest[i + prefix.len()..];
        if !boundary_ok {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Items at the group's top level: split on commas outside nested braces.
            let (mut depth, mut item, mut end) = (0usize, String::new(), group.len());
            let mut items = Vec::new();
            for (j, c) in group.char_indices() {
                match c {
                    '{' => {
                        depth += 1;
                        item.push(c)
                    }
                    '}' if depth == 0 => {
                        end = j;
                        break;
                    }
                    '}' => {
                        depth -= 1;
                        item.push(c)
                    }
                    ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                    _ => item.push(c),
                }
            }
            items.push(item);
            for it in items {
                let name = ident(it.trim());
                if !name.is_empty() && name != "self" {
                    out.insert(name);
                }
            }
            rest = &group[end..];
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

fn ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&module))
}

/// The violations in a set of files, given as (path relative to `src/`, text).
fn violations(files: &[(String, String)]) -> Vec<String> {
    let mut bad = Vec::new();
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|(rel, _)| top_module(rel))
        .collect();
    for t in &tops {
        if layer_of(LAYERS, t).is_none() {
            bad.push(format!(
                "module `{t}` is in no layer: add it to LAYERS and to ARCHITECTURE.md"
            ));
        }
    }
    for l in LAYERS.iter().flat_map(|l| l.iter()) {
        if !tops.contains(*l) {
            bad.push(format!("LAYERS names `{l}`, which is not a module of src/"));
        }
    }
    for (rel, text) in files {
        let Some(top) = top_module(rel) else {
            continue;
        };
        let Some(mine) = layer_of(LAYERS, &top) else {
            continue;
        };
        let code = code(text);
        for used in segments_after(&code, "crate::") {
            if used == top {
                continue;
            }
            match layer_of(LAYERS, &used) {
                Some(theirs) if theirs < mine => {}
                Some(theirs) => bad.push(format!(
                    "src/{rel}: `{top}` (layer {mine}) imports `crate::{used}` (layer {theirs}); \
                     imports must go to a lower layer"
                )),
                None => {}
            }
        }
        for (folder, inner) in INNER {
            if top != *folder {
                continue;
            }
            let Some(me) = inner_module(rel, folder) else {
                continue;
            };
            let Some(mine) = inner.iter().position(|m| *m == me) else {
                if me != "mod" {
                    bad.push(format!("src/{rel}: not in the `{folder}` order of INNER"));
                }
                continue;
            };
            let mut used = segments_after(&code, "super::");
            used.extend(segments_after(&code, &format!("crate::{folder}::")));
            for u in used {
                match inner.iter().position(|m| *m == u) {
                    Some(theirs) if theirs < mine => {}
                    Some(theirs) if theirs == mine => {}
                    Some(theirs) => bad.push(format!(
                        "src/{rel}: `{folder}::{me}` (step {mine}) uses `{folder}::{u}` (step {theirs}); \
                         inside `{folder}` uses must go to an earlier step"
                    )),
                    None => {}
                }
            }
        }
    }
    bad
}

/// `daemon/runs.rs` → `daemon`, `cli.rs` → `cli`; `None` for the crate roots.
fn top_module(rel: &str) -> Option<String> {
    let first = rel.split('/').next()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// `daemon/runs.rs` → `runs` for folder `daemon`.
fn inner_module(rel: &str, folder: &str) -> Option<String> {
    let rest = rel.strip_prefix(folder)?.strip_prefix('/')?;
    let first = rest.split('/').next()?;
    Some(first.strip_suffix(".rs").unwrap_or(first).to_string())
}

fn sources() -> Vec<(String, String)> {
    let src = root().join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    paths
        .iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

#[test]
fn every_import_goes_to_a_lower_layer() {
    let bad = violations(&sources());
    assert!(
        bad.is_empty(),
        "the layers of ARCHITECTURE.md are broken:\n  {}",
        bad.join("\n  ")
    );
}

#[test]
fn architecture_md_lists_the_same_layers() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = text
        .split("## Layers")
        .nth(1)
        .expect("ARCHITECTURE.md has a `## Layers` section");
    let rows: Vec<Vec<String>> = section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            // | N | `a`, `b` | what |
            let n = cells.get(1)?;
            n.parse::<usize>().ok()?;
            Some(
                cells
                    .get(2)?
                    .split(',')
                    .map(|m| m.trim().trim_matches('`').to_string())
                    .filter(|m| !m.is_empty())
                    .collect(),
            )
        })
        .collect();
    let want: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|l| l.iter().map(|m| m.to_string()).collect())
        .collect();
    assert_eq!(
        rows, want,
        "ARCHITECTURE.md's Layers table and LAYERS differ"
    );
}

#[test]
fn the_checker_catches_an_upward_import_and_an_unplaced_module() {
    let mut files = sources();
    assert!(violations(&files).is_empty());
    // A pure core reaching up into the daemon.
    files.push((
        "checks.rs".into(),
        "use crate::http::Outcome;\nuse crate::{http::Phase, daemon::Shared};\n".into(),
    ));
    let bad = violations(&files);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("imports `crate::daemon`"), "{bad:?}");
    // Same layer is refused too: run and daemon must not use each other.
    let mut files = sources();
    files.push((
        "run.rs".into(),
        "fn f() { crate::daemon::start_run(); }".into(),
    ));
    let bad = violations(&files);
    assert!(
        bad.iter()
            .any(|b| b.contains("`run` (layer 8) imports `crate::daemon` (layer 8)"))
    );
    // Inside the daemon, the run wiring must not reach the HTTP face.
    let mut files = sources();
    files.push(("daemon/runs.rs".into(), "use super::api::app;".into()));
    let bad = violations(&files);
    assert!(
        bad.iter()
            .any(|b| b.contains("`daemon::runs` (step 4) uses `daemon::api`")),
        "{bad:?}"
    );
    // A new module must be placed.
    let mut files = sources();
    files.push(("newthing.rs".into(), String::new()));
    assert!(
        violations(&files)
            .iter()
            .any(|b| b.contains("`newthing` is in no layer"))
    );
    // Comments and tests do not count.
    let mut files = sources();
    files.push((
        "timer.rs".into(),
        "// see crate::daemon\n#[cfg(test)]\nmod tests { use crate::cli; }".into(),
    ));
    assert!(violations(&files).is_empty());
}

/// The most code lines a file under `src/` may hold (ARCHITECTURE.md: a file holds one job).
const MAX_CODE_LINES: usize = 500;

/// Files still over `MAX_CODE_LINES`, each being split by its owner (issue 35). Only these:
/// take a file off the list when its split lands, and add none.
const OVER_SIZE_ALLOWED: &[&str] = &[];

/// What each byte of a Rust source is, as far as counting lines and braces needs.
#[derive(Clone, Copy, PartialEq)]
enum Lex {
    Code,
    Comment,
    /// Inside a string or char literal: its braces and slashes are not code.
    Literal,
}

/// Classifies every byte: line and (nested) block comments, string, byte-string, raw-string
/// and char literals; a `'` followed by an identifier and no closing quote is a lifetime.
fn lex(text: &str) -> Vec<Lex> {
    let b = text.as_bytes();
    let mut out = vec![Lex::Code; b.len()];
    let mut i = 0;
    let mark = |out: &mut Vec<Lex>, from: usize, to: usize, k: Lex| {
        for x in &mut out[from..to.min(b.len())] {
            *x = k;
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            mark(&mut out, i, end, Lex::Comment);
            i = end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < b.len() {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            mark(&mut out, i, j, Lex::Comment);
            i = j;
        } else if let Some(hashes) = raw_string_start(b, i) {
            // r"..", r#".."#, br".." : no escapes; ends at a quote and as many hashes.
            let open = b[i..]
                .iter()
                .position(|&c| c == b'"')
                .map_or(b.len(), |n| i + n);
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let end = b[open + 1..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(b.len(), |n| open + 1 + n + close.len());
            mark(&mut out, i, end, Lex::Literal);
            i = end;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            mark(&mut out, i, j + 1, Lex::Literal);
            i = j + 1;
        } else if b[i] == b'\'' {
            // 'x', '\n', '\u{7b}' are chars; 'a (no closing quote right after) a lifetime.
            let end = if rest.get(1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|n| i + 2 + n + 1)
            } else {
                let ch = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
            };
            match end {
                Some(end) => {
                    mark(&mut out, i, end, Lex::Literal);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `Some(number of #)` when a raw (byte) string literal starts at `i`.
fn raw_string_start(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let mut j = i;
    if b.get(j) == Some(&b'b') {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    (b.get(j + hashes) == Some(&b'"')).then_some(hashes)
}

/// Byte ranges of the `mod NAME { .. }` blocks gated by `#[cfg(test)]` (other attributes may
/// sit between the two), from the attribute to the block's closing brace, found by matching
/// braces in code only (not in comments or literals).
fn test_modules(text: &str, kinds: &[Lex]) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let is_code = |i: usize| kinds[i] == Lex::Code;
    let skip_space = |mut i: usize| {
        while i < b.len() && (b[i].is_ascii_whitespace() || !is_code(i)) {
            i += 1;
        }
        i
    };
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(n) = text[from..].find("#[cfg(test)]") {
        let start = from + n;
        from = start + 1;
        if !is_code(start) {
            continue;
        }
        let mut i = skip_space(start + "#[cfg(test)]".len());
        // Further attributes: `#[...]` with nested brackets.
        while b.get(i) == Some(&b'#') {
            let mut depth = 0usize;
            while i < b.len() {
                match b[i] {
                    b'[' if is_code(i) => depth += 1,
                    b']' if is_code(i) => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            i = skip_space(i);
        }
        for vis in ["pub(crate)", "pub(super)", "pub"] {
            if text[i..].starts_with(vis) {
                i = skip_space(i + vis.len());
                break;
            }
        }
        if !text[i..].starts_with("mod ") {
            continue; // a gated fn, impl or use: ordinary code as far as size goes
        }
        let Some(open) = (i..b.len()).find(|&j| is_code(j) && (b[j] == b'{' || b[j] == b';'))
        else {
            continue;
        };
        if b[open] == b';' {
            continue; // `mod tests;`: its own file
        }
        let mut depth = 0usize;
        let mut end = b.len();
        for (j, c) in b.iter().enumerate().skip(open) {
            if !is_code(j) {
                continue;
            }
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        ranges.push((start, end));
        from = end;
    }
    ranges
}

/// A file's code lines: lines that hold something other than whitespace and comments, outside
/// the `#[cfg(test)]`-gated `mod` blocks (a line a test module shares with code still counts).
fn code_lines(text: &str) -> usize {
    let kinds = lex(text);
    let tests = test_modules(text, &kinds);
    let in_tests = |i: usize| tests.iter().any(|&(s, e)| s <= i && i < e);
    let mut count = 0;
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        let counts = line.bytes().enumerate().any(|(k, c)| {
            let i = line_start + k;
            !c.is_ascii_whitespace() && kinds[i] != Lex::Comment && !in_tests(i)
        });
        count += usize::from(counts);
        line_start += line.len();
    }
    count
}

/// Every file under `src/` over `limit` code lines but those `allowed`, with its count.
fn oversized(files: &[(String, String)], limit: usize, allowed: &[&str]) -> Vec<String> {
    files
        .iter()
        .map(|(rel, text)| (rel, code_lines(text)))
        .filter(|(rel, n)| *n > limit && !allowed.contains(&rel.as_str()))
        .map(|(rel, n)| format!("src/{rel}: {n} code lines"))
        .collect()
}

#[test]
fn no_src_file_is_over_500_code_lines() {
    let files = sources();
    let bad = oversized(&files, MAX_CODE_LINES, OVER_SIZE_ALLOWED);
    assert!(
        bad.is_empty(),
        "over {MAX_CODE_LINES} code lines (outside #[cfg(test)] modules); split each into files \
         with one job:\n  {}",
        bad.join("\n  ")
    );
    // The allow-list holds only files that still need it.
    let stale: Vec<_> = OVER_SIZE_ALLOWED
        .iter()
        .filter(|rel| {
            files
                .iter()
                .find(|(r, _)| r == *rel)
                .is_none_or(|(_, text)| code_lines(text) <= MAX_CODE_LINES)
        })
        .collect();
    assert!(
        stale.is_empty(),
        "take these off OVER_SIZE_ALLOWED: {stale:?}"
    );
}

#[test]
fn code_lines_skip_blanks_comments_and_test_modules_only() {
    let text = r#"//! header
use std::fmt; // trailing comment: a code line

/* a block
   comment */
fn f() -> &'static str { "{ not a brace" }
const C: char = '{';
#[cfg(test)]
fn gated_fn_counts() {}
#[cfg(test)]
#[allow(dead_code)]
mod tests {
    fn g() { let _ = "}"; let _ = '}'; let _ = r"}}"; }
    mod inner { fn h() {} }
}
fn after_tests() {}
"#;
    // use, fn f, const C, #[cfg(test)] + gated fn (2 lines), fn after_tests.
    assert_eq!(code_lines(text), 6);
    let files = vec![
        ("big.rs".to_string(), "fn x() {}\n".repeat(3)),
        ("ok.rs".to_string(), "fn x() {}\n".repeat(2)),
    ];
    assert_eq!(oversized(&files, 2, &[]), vec!["src/big.rs: 3 code lines"]);
    assert!(oversized(&files, 2, &["big.rs"]).is_empty());
}

// ---------------------------------------------------------------------------------------------
// No circle between the files of one folder.
//
// Per folder of `src/`, the nodes are its files and its sub-folders (a sub-folder is one node:
// any file inside it), and an edge `a → b` says a file of `a` names something of `b`. A `mod.rs`
// is the folder's face, not a node: a path to an item it defines is no edge, and a path to an
// item it brings in from a child (`pub use x::Item`, `use x::Item`) is an edge to that child.
// Paths counted: `super::x`, `crate::folder::x`, `self::x` and a bare `x::` naming a child (in a
// `mod.rs`). A glob `use super::*` is no edge by itself (it imports the face); after one, a bare
// `x::` naming a sibling counts as an import of `x`, and so does the name of an item the parent's
// `mod.rs` brings in from a sibling, used anywhere in the file. Comments, literals and
// `#[cfg(test)]` modules do not count. The folder `src/` itself is held by `LAYERS`.
// ---------------------------------------------------------------------------------------------

/// Circles still being broken (issue 42): (folder under `src/`, the circle's files and
/// sub-folders, as stems). A circle found must lie within one entry (a circle that shrinks
/// still passes); an entry that no longer holds a circle is stale and fails: take it off when
/// yours is broken, and add none. The comment names the helper breaking it.
const CIRCLES_ALLOWED: &[(&str, &[&str])] = &[];

/// A source with comments, literals and `#[cfg(test)]` modules blanked to spaces; newlines
/// stay, so offsets and line numbers are the file's.
fn blank(text: &str) -> String {
    let kinds = lex(text);
    let mut b = text.as_bytes().to_vec();
    for (c, k) in b.iter_mut().zip(&kinds) {
        if *k != Lex::Code && *c != b'\n' {
            *c = b' ';
        }
    }
    for (s, e) in test_modules(text, &kinds) {
        for c in &mut b[s..e] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// `load/stats.rs` → `[load, stats]`, `load/summary/mod.rs` → `[load, summary]`, the crate
/// roots → `[]`.
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .strip_suffix(".rs")
        .unwrap_or(rel)
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") || matches!(rel, "lib.rs" | "main.rs") {
        parts.pop();
    }
    parts
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn skip_space(s: &[u8], mut i: usize) -> usize {
    while s.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

fn word_at(s: &[u8], i: usize) -> Option<(String, usize)> {
    let end = i + s[i.min(s.len())..]
        .iter()
        .take_while(|&&c| is_ident(c))
        .count();
    (end > i).then(|| (String::from_utf8_lossy(&s[i..end]).into_owned(), end))
}

/// A path as written: its segments (a glob ends in `*`) and the `as` name it is given.
struct Spelled {
    segs: Vec<String>,
    alias: Option<String>,
}

/// Reads the path or use tree at `i` (`a::{b, c::{d as e}, *}` spells a::b, a::c::d as e,
/// a::*) into `out`; returns where it ends.
fn path_tree(s: &[u8], mut i: usize, mut segs: Vec<String>, out: &mut Vec<Spelled>) -> usize {
    loop {
        i = skip_space(s, i);
        match s.get(i) {
            Some(b'{') => {
                i += 1;
                loop {
                    while s
                        .get(i)
                        .is_some_and(|c| c.is_ascii_whitespace() || *c == b',')
                    {
                        i += 1;
                    }
                    match s.get(i) {
                        None => return i,
                        Some(b'}') => return i + 1,
                        _ => {}
                    }
                    let before = i;
                    i = path_tree(s, i, segs.clone(), out);
                    if i == before {
                        i += 1;
                    }
                }
            }
            Some(b'*') => {
                segs.push("*".into());
                out.push(Spelled { segs, alias: None });
                return i + 1;
            }
            Some(_) => {
                let Some((w, end)) = word_at(s, i) else {
                    return i;
                };
                segs.push(w);
                let j = skip_space(s, end);
                if s[j..].starts_with(b"::") && !s[j..].starts_with(b"::<") {
                    i = j + 2;
                    continue;
                }
                let mut alias = None;
                let mut end = end;
                if s[j..].starts_with(b"as")
                    && !s.get(j + 2).copied().is_some_and(is_ident)
                    && let Some((a, e)) = word_at(s, skip_space(s, j + 2))
                {
                    alias = Some(a);
                    end = e;
                }
                out.push(Spelled { segs, alias });
                return end;
            }
            None => return i,
        }
    }
}

/// Every path of (blanked) code with at least one `::`: use trees and inline paths alike.
fn paths_in(code: &str) -> Vec<Spelled> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        if !is_ident(s[i]) || (i > 0 && is_ident(s[i - 1])) || s[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let (_, end) = word_at(s, i).expect("an identifier starts here");
        let j = skip_space(s, end);
        let after_colons = s[..i]
            .iter()
            .rposition(|c| !c.is_ascii_whitespace())
            .is_some_and(|p| s[p] == b':');
        if !after_colons && s[j..].starts_with(b"::") && !s[j..].starts_with(b"::<") {
            i = path_tree(s, i, Vec::new(), &mut out).max(end);
        } else {
            i = end;
        }
    }
    out
}

/// The crate's modules, and for each folder module what its `mod.rs` brings in by name from
/// its children (name → child).
struct ModuleTree {
    modules: BTreeSet<Vec<String>>,
    faces: BTreeMap<Vec<String>, BTreeMap<String, String>>,
}

impl ModuleTree {
    fn new(files: &[(String, String, String)]) -> ModuleTree {
        let modules: BTreeSet<Vec<String>> =
            files.iter().map(|(rel, _, _)| module_path(rel)).collect();
        let mut faces = BTreeMap::new();
        for (rel, _, code) in files {
            if !(rel.ends_with("/mod.rs") || rel == "lib.rs") {
                continue;
            }
            let me = module_path(rel);
            let mut names = BTreeMap::new();
            for p in paths_in(code) {
                let segs: Vec<&String> = p.segs.iter().skip_while(|s| *s == "self").collect();
                if segs.len() < 2 || segs.last().is_some_and(|s| *s == "*") {
                    continue;
                }
                let mut child = me.clone();
                child.push(segs[0].clone());
                if modules.contains(&child) {
                    let name = p
                        .alias
                        .clone()
                        .unwrap_or_else(|| segs[segs.len() - 1].clone());
                    names.insert(name, segs[0].clone());
                }
            }
            faces.insert(me, names);
        }
        ModuleTree { modules, faces }
    }

    /// The module a path names, from module `me` (`glob`: `me` has `use super::*`), through
    /// one re-export of a folder's face; `None` for a path outside the crate.
    fn resolve(&self, me: &[String], glob: bool, segs: &[String]) -> Option<Vec<String>> {
        let segs: Vec<String> = segs.iter().filter(|s| *s != "*").cloned().collect();
        let first = segs.first()?;
        let mut t: Vec<String> = match first.as_str() {
            "crate" => segs[1..].to_vec(),
            "super" | "self" => {
                let mut cur = me.to_vec();
                let mut k = 0;
                while k < segs.len() && matches!(segs[k].as_str(), "super" | "self") {
                    if segs[k] == "super" {
                        cur.pop()?;
                    }
                    k += 1;
                }
                cur.extend(segs[k..].iter().cloned());
                cur
            }
            _ => {
                let child: Vec<String> = me.iter().chain([first]).cloned().collect();
                let sibling: Vec<String> = me[..me.len().saturating_sub(1)]
                    .iter()
                    .chain([first])
                    .cloned()
                    .collect();
                if segs.len() > 1 && self.modules.contains(&child) {
                    me.iter().chain(&segs).cloned().collect()
                } else if glob
                    && !me.is_empty()
                    && segs.len() > 1
                    && self.modules.contains(&sibling)
                {
                    me[..me.len() - 1].iter().chain(&segs).cloned().collect()
                } else {
                    return None;
                }
            }
        };
        if t.last().is_some_and(|s| s == "self") {
            t.pop();
        }
        let mut n = t.len();
        while n > 0 && !self.modules.contains(&t[..n]) {
            n -= 1;
        }
        let mut target = t[..n].to_vec();
        if let Some(child) = t.get(n).and_then(|next| self.faces.get(&target)?.get(next)) {
            target.push(child.clone());
        }
        Some(target)
    }
}

/// Per folder (as `a/b`), its edges `from → to` between nodes, each with a path that makes it.
type FolderGraphs = BTreeMap<String, BTreeMap<(String, String), String>>;

fn folder_graphs(files: &[(String, String)]) -> FolderGraphs {
    let files: Vec<(String, String, String)> = files
        .iter()
        .map(|(rel, text)| (rel.clone(), text.clone(), blank(text)))
        .collect();
    let tree = ModuleTree::new(&files);
    let mut graphs = FolderGraphs::new();
    let mut add = |me: &[String], target: &[String], why: String| {
        let p = me.iter().zip(target).take_while(|(a, b)| a == b).count();
        if let (Some(a), Some(b)) = (me.get(p), target.get(p))
            && p > 0
            && a != b
        {
            graphs
                .entry(me[..p].join("/"))
                .or_default()
                .entry((a.clone(), b.clone()))
                .or_insert(why);
        }
    };
    for (rel, _, code) in &files {
        let me = module_path(rel);
        let glob = paths_in(code).iter().any(|p| p.segs == ["super", "*"]);
        for p in paths_in(code) {
            if let Some(target) = tree.resolve(&me, glob, &p.segs) {
                let shown = p
                    .segs
                    .strip_suffix(&["self".to_string()])
                    .unwrap_or(&p.segs);
                add(&me, &target, format!("`{}`", shown.join("::")));
            }
        }
        let Some(parent) = me.len().checked_sub(1).map(|n| &me[..n]) else {
            continue;
        };
        let face = tree.faces.get(parent).filter(|_| glob);
        for (name, child) in face.into_iter().flatten() {
            let used = code.match_indices(name.as_str()).any(|(i, _)| {
                let b = code.as_bytes();
                (i == 0 || !is_ident(b[i - 1]))
                    && !b.get(i + name.len()).copied().is_some_and(is_ident)
            });
            if used {
                let target: Vec<String> = parent.iter().chain([child]).cloned().collect();
                add(&me, &target, format!("`{name}` through `use super::*`"));
            }
        }
    }
    graphs
}

/// A circle: its folder (as `a/b`), its nodes (stems) and the edges between them.
struct Circle {
    folder: String,
    nodes: Vec<String>,
    edges: Vec<String>,
}

/// The strongly connected components of more than one node, per folder (Tarjan).
fn circles(files: &[(String, String)]) -> Vec<Circle> {
    let mut out = Vec::new();
    for (folder, edges) in folder_graphs(files) {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            next.entry(a).or_default().push(b);
            next.entry(b).or_default();
        }
        for comp in strongly_connected(&next) {
            if comp.len() < 2 {
                continue;
            }
            let inside = |n: &str| comp.contains(&n);
            let shown: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| inside(a) && inside(b))
                .map(|((a, b), why)| format!("{a} → {b} ({why})"))
                .collect();
            out.push(Circle {
                folder: folder.clone(),
                nodes: comp.iter().map(|s| s.to_string()).collect(),
                edges: shown,
            });
        }
    }
    out
}

fn strongly_connected<'a>(next: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Tarjan<'a, 'g> {
        next: &'g BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    impl<'a> Tarjan<'a, '_> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for &w in &self.next[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.stack.contains(&w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    comp.push(w);
                    if w == v {
                        break;
                    }
                }
                comp.sort();
                self.out.push(comp);
            }
        }
    }
    let mut t = Tarjan {
        next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for &v in next.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// The circles not within an entry of `allowed`, and the entries holding no circle.
fn circle_violations(found: &[Circle], allowed: &[(&str, &[&str])]) -> Vec<String> {
    let within = |c: &Circle, (folder, nodes): &(&str, &[&str])| {
        c.folder == *folder && c.nodes.iter().all(|n| nodes.contains(&n.as_str()))
    };
    let mut bad: Vec<String> = found
        .iter()
        .filter(|c| !allowed.iter().any(|a| within(c, a)))
        .map(|c| {
            format!(
                "src/{}/: a circle between {}:\n      {}",
                c.folder,
                c.nodes.join(", "),
                c.edges.join("\n      ")
            )
        })
        .collect();
    for a in allowed {
        if !found.iter().any(|c| within(c, a)) {
            bad.push(format!(
                "CIRCLES_ALLOWED holds ({:?}, {:?}), which is no longer a circle: take it off",
                a.0, a.1
            ));
        }
    }
    bad
}

#[test]
fn no_circle_between_files_of_a_folder() {
    let bad = circle_violations(&circles(&sources()), CIRCLES_ALLOWED);
    assert!(
        bad.is_empty(),
        "files of one folder import each other (one concept in two places: move it):\n  {}",
        bad.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// No function over 100 lines, unless ARCHITECTURE.md names it (at most 10) with why.
// ---------------------------------------------------------------------------------------------

/// The most lines a function may span, from the line of its `fn` to its closing brace.
const MAX_FN_LINES: usize = 100;

/// The most functions `## Long functions` of ARCHITECTURE.md may name.
const MAX_NAMED_LONG: usize = 10;

/// Functions still over `MAX_FN_LINES`, each being split by the helper in its comment (issue
/// 42). Take yours off when it is split (a stale entry fails), and add none.
const LONG_FUNCTIONS_ALLOWED: &[&str] = &[];

/// A function over the limit: `module::path::name`, where it starts, how many lines it spans.
struct LongFn {
    name: String,
    file: String,
    line: usize,
    lines: usize,
}

/// Every `fn` with a body spanning over `limit` lines, outside `#[cfg(test)]` modules; braces
/// in comments and literals do not count.
fn long_functions(files: &[(String, String)], limit: usize) -> Vec<LongFn> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let code = blank(text);
        let s = code.as_bytes();
        let line_of = |i: usize| s[..i].iter().filter(|&&c| c == b'\n').count() + 1;
        let mut from = 0;
        while let Some(n) = code[from..].find("fn") {
            let at = from + n;
            from = at + 2;
            if (at > 0 && is_ident(s[at - 1]))
                || s.get(at + 2).is_some_and(|c| !c.is_ascii_whitespace())
            {
                continue; // part of a word, or `fn(..)`, a pointer type
            }
            let Some((name, mut i)) = word_at(s, skip_space(s, at + 2)) else {
                continue;
            };
            // The body opens at the first `{` outside the signature's brackets; a `;` first
            // means no body (a trait's declaration).
            let mut depth = 0i32;
            while i < s.len() {
                match s[i] {
                    b'(' | b'[' => depth += 1,
                    b')' | b']' => depth -= 1,
                    b'{' | b';' if depth == 0 => break,
                    _ => {}
                }
                i += 1;
            }
            if s.get(i) != Some(&b'{') {
                continue;
            }
            let mut depth = 0usize;
            let mut end = s.len();
            for (j, &c) in s.iter().enumerate().skip(i) {
                match c {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = j;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let (first, last) = (line_of(at), line_of(end));
            if last - first + 1 > limit {
                let mut path = module_path(rel);
                path.push(name);
                out.push(LongFn {
                    name: path.join("::"),
                    file: rel.clone(),
                    line: first,
                    lines: last - first + 1,
                });
            }
        }
    }
    out
}

/// The functions ARCHITECTURE.md's `## Long functions` names: the first `code` span of each
/// `- ` item; `None` without the section.
fn named_long_functions(md: &str) -> Option<Vec<String>> {
    let section = md.split("\n## Long functions").nth(1)?;
    Some(
        section
            .lines()
            .take_while(|l| !l.starts_with("## "))
            .filter_map(|l| l.strip_prefix("- "))
            .filter_map(|l| l.split('`').nth(1))
            .map(String::from)
            .collect(),
    )
}

fn long_function_violations(found: &[LongFn], md: &str, allowed: &[&str]) -> Vec<String> {
    let Some(named) = named_long_functions(md) else {
        return vec!["ARCHITECTURE.md has no `## Long functions` section".into()];
    };
    let mut bad = Vec::new();
    if named.len() > MAX_NAMED_LONG {
        bad.push(format!(
            "ARCHITECTURE.md names {} long functions; at most {MAX_NAMED_LONG} may stay long: \
             split the others into named steps",
            named.len()
        ));
    }
    for f in found {
        if !named.contains(&f.name) && !allowed.contains(&f.name.as_str()) {
            bad.push(format!(
                "src/{}:{}: `{}` spans {} lines (over {MAX_FN_LINES}): split it into named steps, \
                 or name it in ARCHITECTURE.md's `## Long functions` with why a long match reads \
                 better there",
                f.file, f.line, f.name, f.lines
            ));
        }
    }
    let long = |name: &str| found.iter().any(|f| f.name == name);
    for n in &named {
        if !long(n) {
            bad.push(format!(
                "ARCHITECTURE.md's `## Long functions` names `{n}`, which is no function over \
                 {MAX_FN_LINES} lines: take it off"
            ));
        }
    }
    for a in allowed {
        if !long(a) {
            bad.push(format!(
                "`{a}` is no longer over {MAX_FN_LINES} lines: take it off LONG_FUNCTIONS_ALLOWED"
            ));
        } else if named.iter().any(|n| n == a) {
            bad.push(format!(
                "`{a}` is named in ARCHITECTURE.md: take it off LONG_FUNCTIONS_ALLOWED"
            ));
        }
    }
    bad
}

#[test]
fn no_function_over_100_lines_that_architecture_md_does_not_name() {
    let md = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let found = long_functions(&sources(), MAX_FN_LINES);
    let bad = long_function_violations(&found, &md, LONG_FUNCTIONS_ALLOWED);
    assert!(
        bad.is_empty(),
        "functions should read on one screen:\n  {}",
        bad.join("\n  ")
    );
}

/// A function `name` spanning `lines` lines, with braces in a string and a comment that must
/// not count.
fn function_of(name: &str, lines: usize) -> String {
    let mut f = format!("pub fn {name}(x: [u8; 2]) -> usize {{\n    let s = \"}}\"; // }}\n");
    for _ in 0..lines - 3 {
        f.push_str("    let _ = x;\n");
    }
    f.push_str("}\n");
    f
}

#[test]
fn the_checker_catches_circles_and_unnamed_long_functions() {
    // Two files of a folder naming each other, through `super::` and `crate::`.
    let two = vec![
        ("a/mod.rs".to_string(), "mod x;\nmod y;\n".to_string()),
        ("a/x.rs".into(), "use super::y::Y;\npub struct X;\n".into()),
        ("a/y.rs".into(), "pub struct Y(crate::a::x::X);\n".into()),
    ];
    let bad = circle_violations(&circles(&two), &[]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("src/a/: a circle between x, y"),
        "{bad:?}"
    );
    assert!(bad[0].contains("x → y (`super::y::Y`)"), "{bad:?}");
    // Allowed while it is being broken; the entry fails once the circle is gone.
    assert!(circle_violations(&circles(&two), &[("a", &["x", "y"])]).is_empty());
    let broken = &two[..2];
    let bad = circle_violations(&circles(broken), &[("a", &["x", "y"])]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].contains("no longer a circle"), "{bad:?}");

    // Three files, through a re-export of the face, a glob and a sub-folder; tests and
    // comments do not count.
    let three = vec![
        (
            "b/mod.rs".to_string(),
            "mod p;\nmod q;\nmod r;\npub use q::Q;\n".to_string(),
        ),
        (
            "b/p.rs".into(),
            "use super::Q; // super::r::R is said, not used\n".into(),
        ),
        (
            "b/q.rs".into(),
            "use super::*;\npub struct Q;\nfn f() { r::go() }\n".into(),
        ),
        (
            "b/r/mod.rs".into(),
            "pub fn go() { crate::b::p::run() }\n".into(),
        ),
        (
            "b/s.rs".into(),
            "#[cfg(test)]\nmod tests { use super::super::p::run; }\n".into(),
        ),
    ];
    let bad = circle_violations(&circles(&three), &[]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].starts_with("src/b/: a circle between p, q, r"),
        "{bad:?}"
    );
    // A shrunk circle stays allowed by its entry; a bigger one is not.
    assert!(circle_violations(&circles(&three), &[("b", &["p", "q", "r", "s"])]).is_empty());
    assert_eq!(
        circle_violations(&circles(&three), &[("b", &["p", "q"])]).len(),
        2
    );

    // A 101-line function fails until ARCHITECTURE.md names it; 100 lines pass.
    let long = vec![(
        "rules/long.rs".to_string(),
        format!("{}{}", function_of("big", 101), function_of("fits", 100)),
    )];
    let found = long_functions(&long, MAX_FN_LINES);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].name.as_str(), found[0].lines),
        ("rules::long::big", 101)
    );
    let md = |names: &[&str]| {
        let items: String = names
            .iter()
            .map(|n| format!("- `{n}` — a long match\n"))
            .collect();
        format!("# A\n\n## Long functions\n\n{items}\n## Next\n- `rules::long::other`\n")
    };
    let bad = long_function_violations(&found, &md(&[]), &[]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(bad[0].starts_with("src/rules/long.rs:1: `rules::long::big` spans 101 lines"));
    assert!(long_function_violations(&found, &md(&["rules::long::big"]), &[]).is_empty());
    assert!(long_function_violations(&found, &md(&[]), &["rules::long::big"]).is_empty());
    assert_eq!(
        long_function_violations(&found, "# no section\n", &[]),
        ["ARCHITECTURE.md has no `## Long functions` section"]
    );
    // A name that is not long, or an allowance no longer needed, is stale.
    let bad = long_function_violations(&[], &md(&["rules::long::big"]), &["rules::long::fits"]);
    assert_eq!(bad.len(), 2, "{bad:?}");

    // An eleventh named function is over the cap.
    let eleven: Vec<(String, String)> = (0..11)
        .map(|k| (format!("f{k}.rs"), function_of("go", 101)))
        .collect();
    let found = long_functions(&eleven, MAX_FN_LINES);
    let names: Vec<String> = found.iter().map(|f| f.name.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let bad = long_function_violations(&found, &md(&names), &[]);
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert!(
        bad[0].contains("names 11 long functions; at most 10"),
        "{bad:?}"
    );
    assert!(long_function_violations(&found[..10], &md(&names[..10]), &[]).is_empty());
}

/// A merge left undone once reached README on main: no tracked text file may hold a conflict
/// marker line.
#[test]
fn no_tracked_file_holds_a_merge_conflict_marker() {
    let out = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    let mut found = Vec::new();
    for rel in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let rel = String::from_utf8_lossy(rel).into_owned();
        let Ok(text) = std::fs::read_to_string(root().join(&rel)) else {
            continue; // binary, or removed in the work tree
        };
        for (i, line) in text.lines().enumerate() {
            let marker = ["<<<<<<< ", ">>>>>>> "].iter().any(|m| line.starts_with(m))
                || line == "=======" && text.contains("\n<<<<<<< ");
            if marker {
                found.push(format!("{rel}:{}: {line}", i + 1));
            }
        }
    }
    assert!(found.is_empty(), "conflict markers:\n{}", found.join("\n"));
}
