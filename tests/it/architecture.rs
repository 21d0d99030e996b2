//! The crate's layers, checked: a module imports only from layers below its own, so the
//! module graph has no circle. The order is written once, here, and ARCHITECTURE.md's
//! "Layers" table must say the same. Test code (`#[cfg(test)]` modules) may use anything.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules of `src/`, lowest layer first. A module may import from strictly lower
/// layers only (never from its own layer, so two neighbours cannot form a circle either).
const LAYERS: &[&[&str]] = &[
    &["clock"],
    &[
        "exit", "units", "timer", "limits", "memory", "signals", "names",
    ],
    &["http"],
    &[
        "checks",
        "thresholds",
        "schedule",
        "slo",
        "journey",
        "telemetry",
    ],
    &["load", "rules", "metrics", "store"],
    &["config"],
    &["budget", "target", "web", "importers"],
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
        "peers",
        "runs",
        "shardrun",
        "schedules",
        "reload",
        "restore",
        "hooks",
        "api",
        "server",
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
            .any(|b| b.contains("`run` (layer 7) imports `crate::daemon` (layer 7)"))
    );
    // Inside the daemon, the run wiring must not reach the HTTP face.
    let mut files = sources();
    files.push(("daemon/runs.rs".into(), "use super::api::app;".into()));
    let bad = violations(&files);
    assert!(
        bad.iter()
            .any(|b| b.contains("`daemon::runs` (step 2) uses `daemon::api`")),
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
