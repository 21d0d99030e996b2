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

use crate::rules::quote;

/// A value the script computes, as far as the importer follows it.
#[derive(Debug, Clone, PartialEq)]
enum V {
    /// Text; `${name}` in it are sloburn references (captures, `vu`, `iter`).
    Str(String),
    Num(f64),
    Bool(bool),
    Obj(Vec<(String, V)>),
    Arr(Vec<V>),
    Null,
}

impl V {
    fn text(&self) -> Option<String> {
        match self {
            V::Str(s) => Some(s.clone()),
            V::Num(n) => Some(num(*n)),
            V::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    fn json(&self) -> serde_json::Value {
        match self {
            V::Str(s) => serde_json::Value::String(s.clone()),
            V::Num(n) => serde_json::json!(n),
            V::Bool(b) => serde_json::Value::Bool(*b),
            V::Null => serde_json::Value::Null,
            V::Arr(a) => serde_json::Value::Array(a.iter().map(V::json).collect()),
            V::Obj(m) => {
                serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), v.json())).collect())
            }
        }
    }

    fn get(&self, key: &str) -> Option<&V> {
        match self {
            V::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

fn num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

#[derive(Debug, Default)]
struct Step {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
    checks: Vec<String>,
    captures: Vec<(String, String)>,
    think: Option<f64>,
}

struct Walker<'s> {
    src: &'s str,
    consts: BTreeMap<String, V>,
    /// A response variable → its step.
    responses: BTreeMap<String, usize>,
    steps: Vec<Step>,
    notes: Vec<String>,
}

impl Walker<'_> {
    fn line(&self, span: oxc_span::Span) -> usize {
        self.src[..(span.start as usize).min(self.src.len())]
            .matches('\n')
            .count()
            + 1
    }

    fn skip(&mut self, span: oxc_span::Span, why: &str) {
        let text = self
            .src
            .get(span.start as usize..span.end as usize)
            .unwrap_or_default();
        let first = text.lines().next().unwrap_or_default();
        let shown: String = first.chars().take(70).collect();
        self.notes.push(format!(
            "line {}: not converted ({why}): {shown}",
            self.line(span)
        ));
    }

    fn eval(&self, e: &Expression) -> Option<V> {
        Some(match e {
            Expression::StringLiteral(s) => V::Str(s.value.to_string().replace("${", "$${")),
            Expression::NumericLiteral(n) => V::Num(n.value),
            Expression::BooleanLiteral(b) => V::Bool(b.value),
            Expression::NullLiteral(_) => V::Null,
            Expression::ParenthesizedExpression(p) => return self.eval(&p.expression),
            // `__ENV.BASE_URL || 'http://…'`: the script's own default.
            Expression::LogicalExpression(l)
                if matches!(l.operator, LogicalOperator::Or | LogicalOperator::Coalesce)
                    && is_env(&l.left) =>
            {
                return self.eval(&l.right);
            }
            Expression::TemplateLiteral(t) => {
                let mut out = String::new();
                for (i, q) in t.quasis.iter().enumerate() {
                    let cooked = q.value.cooked.as_ref().map(|c| c.to_string())?;
                    out.push_str(&cooked.replace("${", "$${"));
                    if let Some(x) = t.expressions.get(i) {
                        out.push_str(&self.eval(x)?.text()?);
                    }
                }
                V::Str(out)
            }
            Expression::Identifier(id) => match id.name.as_str() {
                "__VU" => V::Str("${vu}".into()),
                "__ITER" => V::Str("${iter}".into()),
                name => self.consts.get(name)?.clone(),
            },
            Expression::BinaryExpression(b) if b.operator == BinaryOperator::Addition => {
                let (l, r) = (self.eval(&b.left)?, self.eval(&b.right)?);
                match (&l, &r) {
                    (V::Num(x), V::Num(y)) => V::Num(x + y),
                    _ => V::Str(format!("{}{}", l.text()?, r.text()?)),
                }
            }
            Expression::ObjectExpression(o) => {
                let mut m = Vec::new();
                for p in &o.properties {
                    let ObjectPropertyKind::ObjectProperty(p) = p else {
                        return None;
                    };
                    m.push((p.key.static_name()?.to_string(), self.eval(&p.value)?));
                }
                V::Obj(m)
            }
            Expression::ArrayExpression(a) => {
                let mut v = Vec::new();
                for el in &a.elements {
                    v.push(self.eval(el.as_expression()?)?);
                }
                V::Arr(v)
            }
            Expression::CallExpression(c) => {
                // JSON.stringify({...})
                let Expression::StaticMemberExpression(m) = &c.callee else {
                    return None;
                };
                let is_stringify = matches!(&m.object, Expression::Identifier(o) if o.name == "JSON")
                    && m.property.name == "stringify";
                if !is_stringify {
                    return None;
                }
                let arg = self.eval(c.arguments.first()?.as_expression()?)?;
                V::Str(arg.json().to_string())
            }
            _ => return None,
        })
    }

    /// `http.METHOD(...)`: the step it sends, or why not.
    fn request(&self, c: &CallExpression) -> Result<Option<Step>, String> {
        let Expression::StaticMemberExpression(m) = &c.callee else {
            return Ok(None);
        };
        if !matches!(&m.object, Expression::Identifier(o) if o.name == "http") {
            return Ok(None);
        }
        let args: Vec<Option<&Expression>> =
            c.arguments.iter().map(|a| a.as_expression()).collect();
        let arg = |i: usize| args.get(i).copied().flatten();
        let (method, url_at, body_at, params_at) = match m.property.name.as_str() {
            "get" => ("GET", 0, None, 1),
            "head" => ("HEAD", 0, None, 1),
            "del" => ("DELETE", 0, Some(1), 2),
            "options" => ("OPTIONS", 0, Some(1), 2),
            "post" => ("POST", 0, Some(1), 2),
            "put" => ("PUT", 0, Some(1), 2),
            "patch" => ("PATCH", 0, Some(1), 2),
            "request" => {
                let method = arg(0)
                    .and_then(|e| self.eval(e))
                    .and_then(|v| v.text())
                    .ok_or("the method is not a string")?;
                return self.finish(method.to_ascii_uppercase(), arg(1), arg(2), arg(3));
            }
            other => return Err(format!("http.{other} is not converted")),
        };
        self.finish(
            method.to_string(),
            arg(url_at),
            body_at.and_then(arg),
            arg(params_at),
        )
    }

    fn finish(
        &self,
        method: String,
        url: Option<&Expression>,
        body: Option<&Expression>,
        params: Option<&Expression>,
    ) -> Result<Option<Step>, String> {
        let url = url
            .and_then(|e| self.eval(e))
            .and_then(|v| v.text())
            .ok_or("the URL is not a string the importer can follow")?;
        let mut step = Step {
            method,
            url,
            ..Step::default()
        };
        if let Some(p) = params {
            let p = self.eval(p).ok_or("the params are not a literal object")?;
            if let Some(V::Obj(h)) = p.get("headers") {
                for (k, v) in h {
                    step.headers
                        .push((k.clone(), v.text().ok_or("a header is not text")?));
                }
            }
        }
        match body.map(|b| self.eval(b)) {
            None | Some(Some(V::Null)) => {}
            Some(Some(V::Obj(form))) => {
                // k6 sends an object body as a form.
                let mut pairs = Vec::new();
                for (k, v) in &form {
                    pairs.push(format!(
                        "{k}={}",
                        v.text().ok_or("a form value is not text")?
                    ));
                }
                step.body = Some(pairs.join("&"));
                if !step
                    .headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    step.headers.push((
                        "Content-Type".into(),
                        "application/x-www-form-urlencoded".into(),
                    ));
                }
            }
            Some(Some(v)) => step.body = Some(v.text().ok_or("the body is not text")?),
            Some(None) => return Err("the body is not a value the importer can follow".into()),
        }
        Ok(Some(step))
    }

    /// `r.status === 200` and friends, as a sloburn check.
    fn predicate(&self, e: &Expression) -> Option<String> {
        let e = match e {
            Expression::ParenthesizedExpression(p) => &p.expression,
            e => e,
        };
        match e {
            Expression::BinaryExpression(b) => {
                let field = member_path(&b.left)?;
                let value = self.eval(&b.right)?;
                match (field.as_str(), b.operator) {
                    ("status", BinaryOperator::StrictEquality | BinaryOperator::Equality) => {
                        Some(format!("status: {}", value.text()?))
                    }
                    ("timings.duration", BinaryOperator::LessThan) => {
                        Some(format!("duration_under: {}ms", value.text()?))
                    }
                    ("body", BinaryOperator::StrictEquality | BinaryOperator::Equality) => {
                        Some(format!(
                            "body_matches: {}",
                            quote(&format!("^{}$", regex::escape(&value.text()?)))
                        ))
                    }
                    _ => None,
                }
            }
            Expression::CallExpression(c) => {
                let Expression::StaticMemberExpression(m) = &c.callee else {
                    return None;
                };
                if m.property.name != "includes" || member_path(&m.object)? != "body" {
                    return None;
                }
                let needle = self.eval(c.arguments.first()?.as_expression()?)?.text()?;
                Some(format!("body_contains: {}", quote(&needle)))
            }
            _ => None,
        }
    }

    fn statements(&mut self, stmts: &[Statement]) {
        for s in stmts {
            match s {
                Statement::VariableDeclaration(d) => {
                    for decl in &d.declarations {
                        let Some(name) = decl.id.get_identifier_name().map(|n| n.to_string())
                        else {
                            self.skip(decl.span, "a destructuring");
                            continue;
                        };
                        let Some(init) = &decl.init else { continue };
                        self.binding(&name, init, decl.span);
                    }
                }
                Statement::ExpressionStatement(e) => self.expression(&e.expression, e.span),
                Statement::BlockStatement(b) => self.statements(&b.body),
                Statement::EmptyStatement(_) => {}
                other => self.skip(other.span(), "a statement the importer does not follow"),
            }
        }
    }

    fn binding(&mut self, name: &str, init: &Expression, span: oxc_span::Span) {
        if let Expression::CallExpression(c) = init {
            match self.request(c) {
                Ok(Some(step)) => {
                    self.steps.push(step);
                    self.responses
                        .insert(name.to_string(), self.steps.len() - 1);
                    return;
                }
                Err(why) => return self.skip(span, &why),
                Ok(None) => {}
            }
        }
        // `res.json('a.b')`, `res.json().a.b`, `res.json()['a']`, `res.headers['X']`.
        if let Some((var, source)) = capture_of(init)
            && let Some(&step) = self.responses.get(&var)
        {
            self.steps[step].captures.push((name.to_string(), source));
            self.consts
                .insert(name.to_string(), V::Str(format!("${{{name}}}")));
            return;
        }
        match self.eval(init) {
            Some(v) => {
                self.consts.insert(name.to_string(), v);
            }
            None => self.skip(span, "a value the importer cannot compute"),
        }
    }

    fn expression(&mut self, e: &Expression, span: oxc_span::Span) {
        let Expression::CallExpression(c) = e else {
            return self.skip(span, "not a call");
        };
        match self.request(c) {
            Ok(Some(step)) => return self.steps.push(step),
            Err(why) => return self.skip(span, &why),
            Ok(None) => {}
        }
        let callee = match &c.callee {
            Expression::Identifier(id) => id.name.to_string(),
            _ => return self.skip(span, "a call the importer does not follow"),
        };
        let arg = |i: usize| c.arguments.get(i).and_then(|a| a.as_expression());
        match callee.as_str() {
            "sleep" => match arg(0).and_then(|e| self.eval(e)) {
                Some(V::Num(s)) if !self.steps.is_empty() => {
                    let last = self.steps.len() - 1;
                    *self.steps[last].think.get_or_insert(0.0) += s;
                }
                _ => self.skip(span, "a sleep before any request or of no number"),
            },
            "check" => {
                let step = match arg(0) {
                    Some(Expression::Identifier(id)) => {
                        self.responses.get(id.name.as_str()).copied()
                    }
                    _ => None,
                };
                let (Some(step), Some(Expression::ObjectExpression(o))) = (step, arg(1)) else {
                    return self.skip(span, "a check on something other than a response");
                };
                for p in &o.properties {
                    let ObjectPropertyKind::ObjectProperty(p) = p else {
                        continue;
                    };
                    let name = p
                        .key
                        .static_name()
                        .map(|n| n.to_string())
                        .unwrap_or_default();
                    let body = match &p.value {
                        Expression::ArrowFunctionExpression(f) => arrow_expression(f),
                        _ => None,
                    };
                    match body.and_then(|b| self.predicate(b)) {
                        Some(c) => self.steps[step].checks.push(c),
                        None => self.skip(p.span, &format!("check `{name}`")),
                    }
                }
            }
            "group" => match arg(1) {
                Some(Expression::ArrowFunctionExpression(f)) => {
                    if let ArrowFunctionBody::FunctionBody(b) = &f.body {
                        self.statements(&b.statements);
                    }
                }
                Some(Expression::FunctionExpression(f)) => {
                    if let Some(b) = &f.body {
                        self.statements(&b.statements);
                    }
                }
                _ => self.skip(span, "a group without a function"),
            },
            _ => self.skip(span, "a call the importer does not follow"),
        }
    }
}

/// `__ENV.NAME`.
fn is_env(e: &Expression) -> bool {
    matches!(e, Expression::StaticMemberExpression(m)
        if matches!(&m.object, Expression::Identifier(o) if o.name == "__ENV"))
}

/// The expression an arrow function returns: its body, or its one `return`.
fn arrow_expression<'b, 'a>(f: &'b ArrowFunctionExpression<'a>) -> Option<&'b Expression<'a>> {
    match &f.body {
        ArrowFunctionBody::FunctionBody(b) => match b.statements.as_slice() {
            [Statement::ReturnStatement(r)] => r.argument.as_ref(),
            [Statement::ExpressionStatement(e)] => Some(&e.expression),
            _ => None,
        },
        other => other.as_expression(),
    }
}

/// `r.status` → `status`, `r.timings.duration` → `timings.duration` (the parameter dropped).
fn member_path(e: &Expression) -> Option<String> {
    match e {
        Expression::StaticMemberExpression(m) => match &m.object {
            Expression::Identifier(_) => Some(m.property.name.to_string()),
            inner => Some(format!("{}.{}", member_path(inner)?, m.property.name)),
        },
        _ => None,
    }
}

/// A capture's response variable and source (`json: "$.a.b"` or `header: "X"`).
fn capture_of(e: &Expression) -> Option<(String, String)> {
    // Outer member accesses after `res.json()`.
    let mut path: Vec<String> = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            Expression::StaticMemberExpression(m) => {
                path.push(m.property.name.to_string());
                cur = &m.object;
            }
            Expression::ComputedMemberExpression(m) => {
                match &m.expression {
                    Expression::StringLiteral(s) => path.push(s.value.to_string()),
                    Expression::NumericLiteral(n) => path.push(format!("[{}]", n.value as i64)),
                    _ => return None,
                }
                cur = &m.object;
            }
            _ => break,
        }
    }
    path.reverse();
    match cur {
        Expression::CallExpression(c) => {
            let Expression::StaticMemberExpression(m) = &c.callee else {
                return None;
            };
            let Expression::Identifier(var) = &m.object else {
                return None;
            };
            if m.property.name != "json" {
                return None;
            }
            // `res.json('a.b')`: k6's GJSON path, its plain dotted form.
            let mut parts: Vec<String> = match c.arguments.first().and_then(|a| a.as_expression()) {
                Some(Expression::StringLiteral(s)) => {
                    s.value.split('.').map(str::to_string).collect()
                }
                None => Vec::new(),
                _ => return None,
            };
            parts.extend(path);
            let mut json = String::from("$");
            for p in parts {
                if let Some(i) = p.strip_prefix('[') {
                    json.push('[');
                    json.push_str(i);
                } else if p.chars().all(|c| c.is_ascii_digit()) {
                    let _ = write!(json, "[{p}]");
                } else {
                    let _ = write!(json, ".{p}");
                }
            }
            Some((var.name.to_string(), format!("json: {}", quote(&json))))
        }
        Expression::Identifier(var) if path.len() == 2 && path[0] == "headers" => {
            Some((var.name.to_string(), format!("header: {}", quote(&path[1]))))
        }
        _ => None,
    }
}

/// The profile's executor lines from k6's `options`.
fn executor(opts: &V, notes: &mut Vec<String>) -> Result<Vec<String>, String> {
    let dur = |v: &V| {
        v.text().map(|t| {
            if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
                format!("{t}ms")
            } else {
                t
            }
        })
    };
    let int = |v: Option<&V>| {
        v.and_then(|v| match v {
            V::Num(n) => Some(*n as u64),
            _ => None,
        })
    };
    let mut out = Vec::new();
    let scenario = match opts.get("scenarios") {
        Some(V::Obj(s)) if !s.is_empty() => {
            if s.len() > 1 {
                notes.push(format!(
                    "options.scenarios: only the first ({}) is converted; {} more left out",
                    s[0].0,
                    s.len() - 1
                ));
            }
            Some(s[0].1.clone())
        }
        _ => None,
    };
    let src = scenario.as_ref().unwrap_or(opts);
    let executor = src.get("executor").and_then(V::text).unwrap_or_else(|| {
        if src.get("stages").is_some() {
            "ramping-vus".into()
        } else if src.get("iterations").is_some() {
            "shared-iterations".into()
        } else {
            "constant-vus".into()
        }
    });
    let unit = src
        .get("timeUnit")
        .and_then(&dur)
        .unwrap_or_else(|| "1s".into());
    let rate = |v: &V| v.text().map(|n| format!("{n}/{unit}"));
    out.push(format!("executor: {executor}"));
    let arrival = executor.ends_with("arrival-rate");
    for (k6, ours) in [
        ("vus", "vus"),
        ("startVUs", "start_vus"),
        ("iterations", "iterations"),
        ("preAllocatedVUs", "pre_allocated_vus"),
        ("maxVUs", "max_vus"),
    ] {
        if let Some(n) = int(src.get(k6)) {
            out.push(format!("{ours}: {n}"));
        }
    }
    for (k6, ours) in [
        ("duration", "duration"),
        ("maxDuration", "max_duration"),
        ("gracefulRampDown", "graceful_ramp_down"),
    ] {
        if let Some(d) = src.get(k6).and_then(&dur) {
            out.push(format!("{ours}: {d}"));
        }
    }
    if let Some(r) = src.get("rate").and_then(rate) {
        out.push(format!("rate: {r}"));
    }
    if let Some(r) = src.get("startRate").and_then(rate) {
        out.push(format!("start_rate: {r}"));
    }
    if let Some(V::Arr(stages)) = src.get("stages") {
        out.push("stages:".into());
        for s in stages {
            let d = s
                .get("duration")
                .and_then(&dur)
                .ok_or("a stage without a duration")?;
            let t = s.get("target").ok_or("a stage without a target")?;
            let t = if arrival { rate(t) } else { t.text() }.ok_or("a stage's target")?;
            out.push(format!("  - {{ duration: {d}, target: {t} }}"));
        }
    }
    Ok(out)
}

pub fn import(
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
    };
    let mut options = None;
    let mut body: Option<&[Statement]> = None;
    for s in &parsed.program.body {
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
    let body = body.ok_or_else(|| format!("{file}: no `export default function`"))?;
    w.statements(body);
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
    let single = w.steps.len() == 1 && w.steps[0].think.is_none() && !w.steps[0].url.contains("${");
    let mut out = format!(
        "# Imported by `sloburn import k6` from {file}.\ntargets:\n  {}:\n",
        quote(&name)
    );
    if single {
        let s = &w.steps[0];
        let _ = writeln!(out, "    url: {}", quote(&s.url.replace("$${", "${")));
        let _ = writeln!(out, "    method: {}", s.method);
        write_parts(&mut out, "    ", s, false);
        let _ = writeln!(
            out,
            "profiles:\n  {}:\n    target: {}",
            quote(&name),
            quote(&name)
        );
    } else {
        let _ = writeln!(out, "    url: {}", quote(&origin));
        let _ = writeln!(
            out,
            "journeys:\n  {}:\n    target: {}\n    steps:",
            quote(&name),
            quote(&name)
        );
        for (i, s) in w.steps.iter().enumerate() {
            let _ = writeln!(
                out,
                "      - name: {}",
                quote(&format!("{}-{}", s.method.to_ascii_lowercase(), i + 1))
            );
            let _ = writeln!(out, "        method: {}", s.method);
            let _ = writeln!(out, "        url: {}", quote(&s.url));
            write_parts(&mut out, "        ", s, true);
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
            quote(&name),
            quote(&name)
        );
    }
    for line in exec {
        let _ = writeln!(out, "    {line}");
    }
    if let Some(V::Obj(ts)) = options.get("thresholds") {
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
    Ok(super::openapi::Imported { yaml: out, notes })
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
