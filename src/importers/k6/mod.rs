//! `sloburn import k6 SCRIPT` (JavaScript or TypeScript): a k6 script as a sloburn config,
//! read through a real parser (oxc). Converted:
//!
//! - `export const options`: the first scenario (or k6's shortcuts `vus`/`duration`,
//!   `stages`, `iterations`; with none, k6's default of 1 VU and 1 iteration) as the profile's
//!   executor, its `exec` function followed; `thresholds` sloburn evaluates (k6's syntax; a
//!   key written twice keeps its last value, as in JavaScript); `insecureSkipTLSVerify` and
//!   `tlsVersion` as the target's `tls`.
//! - the function's `http.get|post|put|patch|del|head|options|request|asyncRequest` calls, in
//!   the order k6 sends them: through the script's own functions, `group()` bodies, `try`
//!   blocks and loops whose bounds are written in the script; a re-assigned `res` is
//!   followed (its checks belong to its latest request); bodies and params held in names.
//! - `check(res, {…})` and `check(http.get(…), {…})`, each check under its k6 name: status,
//!   body, duration, JSON (`r.json('a') === 1`) and header predicates.
//! - values from responses (`res.json('a.b')`, `data[0].id`, `const { token } = res.json()`,
//!   `res.headers['X']`) as captures; `JSON.stringify` as JavaScript writes it (integers stay
//!   integers, keys in order); `__VU`, `__ITER`, `Date.now()` as `${vu}`, `${iter}`,
//!   `${timestamp_ms}`; `sleep(s)` as think time.
//!
//! Not converted, and listed with its line: custom metrics (`Counter`, `Trend`, `Rate`,
//! `Gauge`) with their `add` calls and thresholds, `console.*`, `setup`/`teardown`, other
//! scenarios, branches, values computed when k6 runs, options without an equivalent
//! (`maxRedirects` past 0, `auth: 'digest'`). Every `http.*` call of the text is either a
//! step or listed with its line, and the count of both is printed.

use std::collections::BTreeMap;

use oxc_allocator::Allocator;
use oxc_ast::ast::*;
use oxc_parser::Parser;
use oxc_span::{GetSpan, SourceType};

mod checks;
mod eval;
mod options;
mod request;
mod state;
mod values;
mod walk;
mod write;
use options::Options;
use state::{MAX_EXPR_DEPTH, Walker};
use values::V;

/// The deepest nesting of brackets, braces and parentheses read: oxc's parser recurses once
/// per level, so a deeper script is refused, with its line, before it is parsed.
pub const MAX_NESTING: usize = 256;
/// The most operator characters (`=?!~+-*/%<>&|^`) and prefix keywords (`new`, `typeof`,
/// `void`, `delete`, `await`, `yield`) a script holds: a chain of right-associative or prefix
/// operators (`a=a=…`, `a?b:a?b:…`, `new new …`) is a recursion of the parser as deep as it
/// is long, so their count bounds it. Counted everywhere, strings and comments too (a lexer
/// that skips them can be fooled): a hand-written script holds a few thousand.
pub const MAX_OPERATORS: usize = 50_000;
/// The stack the import runs on (its own thread): room for [`MAX_NESTING`] levels and
/// [`MAX_OPERATORS`] chained operators of the parser, and [`MAX_EXPR_DEPTH`] of the walk, in
/// a debug build too (50,000 chained `a=` took under 64 MiB there). Reserved, touched only
/// as deep as a script goes.
const STACK_BYTES: usize = 256 << 20;

/// Imports `text` on a thread of its own with a [`STACK_BYTES`] stack: the parser and the
/// walk recurse, each bounded in depth, and never on the caller's stack.
pub fn import(
    text: &str,
    file: &str,
    opts: &super::har::Options,
) -> Result<super::openapi::Imported, String> {
    bounds(text).map_err(|(line, why)| format!("{file}:{line}: {why}"))?;
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("import-k6".into())
            .stack_size(STACK_BYTES)
            .spawn_scoped(s, || import_here(text, file, opts))
            .map_err(|e| format!("{file}: the importer could not start its thread: {e}"))?
            .join()
            .map_err(|_| format!("{file}: the importer failed on this script"))?
    })
}

/// Whether `text` stays inside [`MAX_NESTING`] and [`MAX_OPERATORS`]; else the line where it
/// went past, and which. Every byte counts (see [`MAX_OPERATORS`]).
fn bounds(text: &str) -> Result<(), (usize, String)> {
    const KEYWORDS: [&[u8]; 6] = [b"new", b"typeof", b"void", b"delete", b"await", b"yield"];
    let bytes = text.as_bytes();
    let (mut depth, mut operators, mut line) = (0usize, 0usize, 1usize);
    let mut word_start = None;
    for (i, &b) in bytes.iter().enumerate() {
        let in_word = b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        match (in_word, word_start) {
            (true, None) => word_start = Some(i),
            (false, Some(start)) => {
                word_start = None;
                operators += usize::from(KEYWORDS.contains(&&bytes[start..i]));
            }
            _ => {}
        }
        match b {
            b'\n' => line += 1,
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'=' | b'?' | b'!' | b'~' | b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'&'
            | b'|' | b'^' => operators += 1,
            _ => {}
        }
        if depth > MAX_NESTING {
            return Err((
                line,
                format!(
                    "nested more than {MAX_NESTING} deep (brackets, braces, parentheses): more \
                     than the importer reads"
                ),
            ));
        }
        if operators > MAX_OPERATORS {
            return Err((
                line,
                format!(
                    "more than {MAX_OPERATORS} operators (a long chain?): more than the \
                     importer reads"
                ),
            ));
        }
    }
    Ok(())
}

fn import_here(
    text: &str,
    file: &str,
    opts: &super::har::Options,
) -> Result<super::openapi::Imported, String> {
    let allocator = Allocator::default();
    // TypeScript by its name (k6 runs `.ts` scripts, its types stripped); else a module.
    let source_type = if file.ends_with(".ts") || file.ends_with(".mts") {
        SourceType::ts()
    } else {
        SourceType::mjs()
    };
    let parsed = Parser::new(&allocator, text, source_type).parse();
    if let Some(d) = parsed.diagnostics.first() {
        let at = d
            .labels
            .as_ref()
            .first()
            .map(|l| {
                text[..(l.offset() as usize).min(text.len())]
                    .matches('\n')
                    .count()
                    + 1
            })
            .unwrap_or(1);
        return Err(format!(
            "{file}:{at}: not JavaScript the importer can read: {d}"
        ));
    }
    let mut w = Walker::new(text);
    let top = top_level(&mut w, &parsed.program.body)?;
    let options = top.options.unwrap_or(Options {
        v: V::Obj(Vec::new()),
        lines: BTreeMap::new(),
    });
    let (exec, exec_fn) =
        options::executor(&mut w, &options).map_err(|e| format!("{file}: options: {e}"))?;
    let body = match &exec_fn {
        Some(f) => w.functions.get(f).map(|f| f.body).ok_or_else(|| {
            format!("{file}: the scenario's exec `{f}` is no function of the script")
        })?,
        None => top
            .default
            .ok_or_else(|| format!("{file}: no `export default function`"))?,
    };
    w.statements(body);
    for (span, why) in &top.once {
        w.miss_within(*span, why);
    }
    if let Some(span) = w.too_deep.get() {
        return Err(format!(
            "{file}:{}: an expression deeper than {MAX_EXPR_DEPTH} (a long chain of `+`?): more \
             than the importer follows",
            w.line(span)
        ));
    }
    let thresholds = options::thresholds(&w, &options);
    let mut notes = dedup(w.notes.take());
    notes.extend(w.list_calls());
    if w.steps.is_empty() {
        return Err(format!(
            "{file}: the script sends no http.* request the importer can follow{}",
            notes.iter().map(|n| format!("\n  {n}")).collect::<String>()
        ));
    }
    let mut captures = vec![Vec::new(); w.steps.len()];
    for (name, (step, src)) in w.captures.take() {
        captures[step].push((name, src));
    }
    let name = super::config_name(&opts.journey);
    let yaml = write::yaml(&write::Parts {
        file,
        name: &name,
        steps: &w.steps,
        captures: &captures,
        target: &w.target,
        executor: &exec,
        thresholds: &thresholds,
    })?;
    Ok(super::openapi::Imported { yaml, notes })
}

/// Each note once, in the order first written (a function followed twice notes twice).
fn dedup(notes: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    notes
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .collect()
}

/// What the script's top level holds.
struct Top<'a> {
    options: Option<Options>,
    default: Option<&'a [Statement<'a>]>,
    /// Functions k6 runs once (`setup`, `teardown`): their requests are listed.
    once: Vec<(oxc_span::Span, String)>,
}

/// The script's top level: names and functions (into `w`), `export const options`, the
/// default function's body; everything else noted as not followed.
fn top_level<'a>(w: &mut Walker<'a>, program: &'a [Statement<'a>]) -> Result<Top<'a>, String> {
    let mut top = Top {
        options: None,
        default: None,
        once: Vec::new(),
    };
    for s in program {
        match s {
            Statement::ImportDeclaration(_)
            | Statement::TSTypeAliasDeclaration(_)
            | Statement::TSInterfaceDeclaration(_)
            | Statement::EmptyStatement(_) => {}
            Statement::VariableDeclaration(d) => w.declaration(d),
            Statement::FunctionDeclaration(f) => w.define_function(f),
            Statement::ExportDeclaration(e) => match &e.declaration {
                Declaration::VariableDeclaration(d) => {
                    let is_options = |decl: &VariableDeclarator| {
                        decl.id.get_identifier_name().as_deref() == Some("options")
                    };
                    for decl in &d.declarations {
                        if let (true, Some(init)) = (is_options(decl), &decl.init) {
                            top.options = Some(options_of(w, init));
                        }
                    }
                    if !d.declarations.iter().all(is_options) {
                        w.declaration(d);
                    }
                }
                Declaration::FunctionDeclaration(f) => {
                    w.define_function(f);
                    exported_function(w, f, &mut top);
                }
                Declaration::TSTypeAliasDeclaration(_) | Declaration::TSInterfaceDeclaration(_) => {
                }
                other => w.skip(other.span(), "an export the importer does not use"),
            },
            Statement::ExportDefaultDeclaration(e) => match &e.declaration {
                ExportDefaultDeclarationKind::FunctionDeclaration(f) => {
                    top.default = f.body.as_ref().map(|b| b.statements.as_slice());
                }
                ExportDefaultDeclarationKind::ArrowFunctionExpression(f) => {
                    if let ArrowFunctionBody::FunctionBody(b) = &f.body {
                        top.default = Some(b.statements.as_slice());
                    }
                }
                _ => w.skip(e.span, "a default export that is no function"),
            },
            other => w.skip(
                other.span(),
                "a top-level statement the importer does not follow",
            ),
        }
    }
    Ok(top)
}

/// `setup`, `teardown` and `handleSummary` are k6's own hooks: noted, their requests listed.
fn exported_function<'a>(w: &Walker<'a>, f: &'a Function<'a>, top: &mut Top<'a>) {
    let Some(id) = &f.id else { return };
    let why = match id.name.as_str() {
        "setup" => "in setup(), which k6 runs once before the load: sloburn has no setup",
        "teardown" => "in teardown(), which k6 runs once after the load: sloburn has none",
        "handleSummary" => {
            w.note(format!(
                "line {}: handleSummary() not converted: sloburn writes its own summary \
                 (`--summary-export`, `--out`)",
                w.line(f.span)
            ));
            return;
        }
        _ => return,
    };
    w.note(format!(
        "line {}: {}() not converted: what it returns is not known to the iterations",
        w.line(f.span),
        id.name
    ));
    top.once.push((f.span, why.to_string()));
}

/// `options`, key by key: a key whose value the importer cannot compute is listed, the rest
/// kept; each key's line is remembered (three levels deep) for the notes.
fn options_of(w: &Walker, init: &Expression) -> Options {
    let mut lines = BTreeMap::new();
    let Expression::ObjectExpression(o) = state::unwrap(init) else {
        let v = w.value(init).unwrap_or_else(|why| {
            w.note(format!(
                "line {}: options not converted: {why}",
                w.line(init.span())
            ));
            V::Obj(Vec::new())
        });
        return Options { v, lines };
    };
    key_lines(w, o, "", 0, &mut lines);
    let mut m: Vec<(String, V)> = Vec::new();
    for p in &o.properties {
        let ObjectPropertyKind::ObjectProperty(p) = p else {
            w.skip(p.span(), "a spread in options");
            continue;
        };
        let Some(key) = p.key.static_name().map(|k| k.to_string()) else {
            w.skip(p.span, "an options key the importer cannot compute");
            continue;
        };
        match w.value(&p.value) {
            Ok(v) => {
                m.retain(|(k, _)| *k != key);
                m.push((key, v));
            }
            Err(why) => w.note(format!(
                "line {}: options.{key} not converted: {why}",
                w.line(p.span)
            )),
        }
    }
    Options {
        v: V::Obj(m),
        lines,
    }
}

fn key_lines(
    w: &Walker,
    o: &ObjectExpression,
    prefix: &str,
    depth: usize,
    lines: &mut BTreeMap<String, usize>,
) {
    for p in &o.properties {
        let ObjectPropertyKind::ObjectProperty(p) = p else {
            continue;
        };
        let Some(key) = p.key.static_name() else {
            continue;
        };
        let path = format!("{prefix}{key}");
        lines.insert(path.clone(), w.line(p.span));
        if depth < 2
            && let Expression::ObjectExpression(inner) = state::unwrap(&p.value)
        {
            key_lines(w, inner, &format!("{path}."), depth + 1, lines);
        }
    }
}

#[cfg(test)]
mod tests;
