//! `sloburn import k6 SCRIPT`: a k6 script's straight-line subset as a sloburn config, read
//! through a real JavaScript parser (oxc). Converted:
//!
//! - `export const options`: the first scenario (or the top-level `vus`/`duration`, `stages`,
//!   `iterations`) as the profile's executor; `thresholds` as they are (sloburn reads k6's
//!   syntax).
//! - the default function's `http.get|post|put|patch|del|head|options|request` calls, in
//!   order; `const x = res.json('a.b')` (or `res.json().a.b`) as a capture; `check(res,
//!   {…})` with `r.status === N`, `r.body.includes('…')` and `r.timings.duration < N`
//!   predicates; `sleep(s)` as the step's think time; `group()` bodies inline.
//! - `const` strings at the top (a base URL), template literals, `JSON.stringify({…})`,
//!   `__VU` and `__ITER`.
//!
//! Anything else is listed with its line as not converted, never dropped in silence.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use oxc_allocator::Allocator;
use oxc_ast::ast::*;
use oxc_parser::Parser;
use oxc_span::{GetSpan, SourceType};

use crate::config::quote;

mod executor;
mod values;
mod walk;
use executor::*;
use values::*;
use walk::*;

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
    let parsed = Parser::new(&allocator, text, SourceType::mjs()).parse();
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
    let mut w = Walker {
        src: text,
        consts: BTreeMap::new(),
        responses: BTreeMap::new(),
        steps: Vec::new(),
        notes: Vec::new(),
        depth: Default::default(),
        too_deep: Default::default(),
    };
    let (options, body) = top_level(&mut w, &parsed.program.body, file)?;
    let body = body.ok_or_else(|| format!("{file}: no `export default function`"))?;
    w.statements(body);
    if let Some(span) = w.too_deep.get() {
        return Err(format!(
            "{file}:{}: an expression deeper than {MAX_EXPR_DEPTH} (a long chain of `+`?): more \
             than the importer follows",
            w.line(span)
        ));
    }
    if w.steps.is_empty() {
        return Err(format!(
            "{file}: the default function sends no http.* request the importer can follow{}",
            w.notes
                .iter()
                .map(|n| format!("\n  {n}"))
                .collect::<String>()
        ));
    }
    let options = options.unwrap_or(V::Obj(Vec::new()));
    let mut notes = w.notes;
    let exec = executor(&options, &mut notes).map_err(|e| format!("{file}: options: {e}"))?;
    let name = super::config_name(&opts.journey);
    let first: http::Uri = w.steps[0]
        .url
        .parse()
        .map_err(|e| format!("{file}: the first request's URL `{}`: {e}", w.steps[0].url))?;
    let origin = format!(
        "{}://{}/",
        first.scheme_str().unwrap_or("http"),
        first.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let mut out = format!(
        "# Imported by `sloburn import k6` from {file}.\ntargets:\n  {}:\n",
        quote(&name)
    );
    let steps = &w.steps;
    if steps.len() == 1 && steps[0].think.is_none() && !steps[0].url.contains("${") {
        write_single(&mut out, &name, &steps[0]);
    } else {
        write_journey(&mut out, &name, steps, &origin);
    }
    for line in exec {
        let _ = writeln!(out, "    {line}");
    }
    if let Some(V::Obj(ts)) = options.get("thresholds") {
        write_thresholds(&mut out, ts);
    }
    Ok(super::openapi::Imported { yaml: out, notes })
}

/// The script's top level: constants (into `w`), `export const options` and the default
/// function's body; everything else is noted as not followed.
fn top_level<'a>(
    w: &mut Walker,
    program: &'a [Statement<'a>],
    file: &str,
) -> Result<(Option<V>, Option<&'a [Statement<'a>]>), String> {
    let mut options = None;
    let mut body: Option<&[Statement]> = None;
    for s in program {
        match s {
            Statement::ImportDeclaration(_) => {}
            Statement::VariableDeclaration(d) => {
                for decl in &d.declarations {
                    let (Some(name), Some(init)) = (decl.id.get_identifier_name(), &decl.init)
                    else {
                        continue;
                    };
                    match w.eval(init) {
                        Some(v) => {
                            w.consts.insert(name.to_string(), v);
                        }
                        None => w.skip(decl.span, "a value the importer cannot compute"),
                    }
                }
            }
            Statement::ExportDeclaration(e) => match &e.declaration {
                Declaration::VariableDeclaration(d) => {
                    for decl in &d.declarations {
                        let name = decl.id.get_identifier_name().map(|n| n.to_string());
                        match (name.as_deref(), &decl.init) {
                            (Some("options"), Some(init)) => {
                                options = Some(w.eval(init).ok_or_else(|| {
                                    format!(
                                        "{file}:{}: `options` is not a literal object",
                                        w.line(decl.span)
                                    )
                                })?);
                            }
                            _ => w.skip(decl.span, "an export the importer does not use"),
                        }
                    }
                }
                Declaration::FunctionDeclaration(f) => {
                    w.skip(f.span, "a named function (only the default one runs)")
                }
                other => w.skip(other.span(), "an export the importer does not use"),
            },
            Statement::ExportDefaultDeclaration(e) => match &e.declaration {
                ExportDefaultDeclarationKind::FunctionDeclaration(f) => {
                    body = f.body.as_ref().map(|b| b.statements.as_slice());
                }
                ExportDefaultDeclarationKind::ArrowFunctionExpression(f) => {
                    if let ArrowFunctionBody::FunctionBody(b) = &f.body {
                        body = Some(b.statements.as_slice());
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
    Ok((options, body))
}

/// One request, no think time, no template: the target is the request, the profile runs it.
fn write_single(out: &mut String, name: &str, s: &Step) {
    let _ = writeln!(out, "    url: {}", quote(&s.url.replace("$${", "${")));
    let _ = writeln!(out, "    method: {}", s.method);
    write_parts(out, "    ", s, false);
    let _ = writeln!(
        out,
        "profiles:\n  {}:\n    target: {}",
        quote(name),
        quote(name)
    );
}

/// Several requests: the target is the first request's `origin`, a journey holds the steps.
fn write_journey(out: &mut String, name: &str, steps: &[Step], origin: &str) {
    let _ = writeln!(out, "    url: {}", quote(origin));
    let _ = writeln!(
        out,
        "journeys:\n  {}:\n    target: {}\n    steps:",
        quote(name),
        quote(name)
    );
    for (i, s) in steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "      - name: {}",
            quote(&format!("{}-{}", s.method.to_ascii_lowercase(), i + 1))
        );
        let _ = writeln!(out, "        method: {}", s.method);
        let _ = writeln!(out, "        url: {}", quote(&s.url));
        write_parts(out, "        ", s, true);
        if !s.captures.is_empty() {
            let _ = writeln!(out, "        capture:");
            for (n, src) in &s.captures {
                let _ = writeln!(out, "          {n}: {{ {src} }}");
            }
        }
        if let Some(t) = s.think {
            let _ = writeln!(out, "        think: {}ms", (t * 1000.0).round() as u64);
        }
    }
    let _ = writeln!(
        out,
        "profiles:\n  {}:\n    journey: {}",
        quote(name),
        quote(name)
    );
}

/// k6's `thresholds`, as they are (sloburn reads k6's syntax).
fn write_thresholds(out: &mut String, ts: &[(String, V)]) {
    out.push_str("    thresholds:\n");
    for (metric, v) in ts {
        let list: Vec<String> = match v {
            V::Arr(items) => items
                .iter()
                .filter_map(|i| i.text().or_else(|| i.get("threshold").and_then(V::text)))
                .map(|t| quote(&t))
                .collect(),
            other => other.text().map(|t| vec![quote(&t)]).unwrap_or_default(),
        };
        let _ = writeln!(out, "      {}: [{}]", quote(metric), list.join(", "));
    }
}

/// Headers, body and checks; a target's (not templated) values keep `${` as it is.
fn write_parts(out: &mut String, pad: &str, s: &Step, templated: bool) {
    let t = |v: &str| {
        if templated {
            v.to_string()
        } else {
            v.replace("$${", "${")
        }
    };
    if !s.headers.is_empty() {
        let _ = writeln!(out, "{pad}headers:");
        for (k, v) in &s.headers {
            let _ = writeln!(out, "{pad}  {}: {}", quote(k), quote(&t(v)));
        }
    }
    if let Some(b) = &s.body {
        let _ = writeln!(out, "{pad}body: {}", quote(&t(b)));
    }
    if !s.checks.is_empty() {
        let _ = writeln!(out, "{pad}checks:");
        for c in &s.checks {
            let _ = writeln!(out, "{pad}  - {{ {c} }}");
        }
    }
}
