//! The walk through a script's syntax tree: `options`, the default function's `http.*` calls
//! as steps, `check`s, `res.json()` captures; everything else noted with its line.

use crate::config::quote;
use oxc_ast::ast::*;
use oxc_span::GetSpan;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::*;

#[derive(Debug, Default)]
pub(super) struct Step {
    pub(super) method: String,
    pub(super) url: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Option<String>,
    pub(super) checks: Vec<String>,
    pub(super) captures: Vec<(String, String)>,
    pub(super) think: Option<f64>,
}

pub(super) struct Walker<'s> {
    pub(super) src: &'s str,
    pub(super) consts: BTreeMap<String, V>,
    /// A response variable → its step.
    pub(super) responses: BTreeMap<String, usize>,
    pub(super) steps: Vec<Step>,
    pub(super) notes: Vec<String>,
    /// How deep [`Walker::eval`] is now; past [`MAX_EXPR_DEPTH`] it stops, noting where.
    pub(super) depth: std::cell::Cell<usize>,
    pub(super) too_deep: std::cell::Cell<Option<oxc_span::Span>>,
}

/// The deepest expression evaluated (a chain of `+` is as deep as it is long): past it the
/// import stops with the line, never the stack.
pub(super) const MAX_EXPR_DEPTH: usize = 256;

impl Walker<'_> {
    pub(super) fn line(&self, span: oxc_span::Span) -> usize {
        self.src[..(span.start as usize).min(self.src.len())]
            .matches('\n')
            .count()
            + 1
    }

    pub(super) fn skip(&mut self, span: oxc_span::Span, why: &str) {
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

    /// The value of `e`, when the importer can compute it, at most [`MAX_EXPR_DEPTH`] deep.
    pub(super) fn eval(&self, e: &Expression) -> Option<V> {
        let depth = self.depth.get();
        if depth >= MAX_EXPR_DEPTH {
            if self.too_deep.get().is_none() {
                self.too_deep.set(Some(e.span()));
            }
            return None;
        }
        self.depth.set(depth + 1);
        let v = self.eval_inner(e);
        self.depth.set(depth);
        v
    }

    fn eval_inner(&self, e: &Expression) -> Option<V> {
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
    pub(super) fn request(&self, c: &CallExpression) -> Result<Option<Step>, String> {
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

    pub(super) fn finish(
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
    pub(super) fn predicate(&self, e: &Expression) -> Option<String> {
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

    pub(super) fn statements(&mut self, stmts: &[Statement]) {
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

    pub(super) fn binding(&mut self, name: &str, init: &Expression, span: oxc_span::Span) {
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

    pub(super) fn expression(&mut self, e: &Expression, span: oxc_span::Span) {
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
pub(super) fn is_env(e: &Expression) -> bool {
    matches!(e, Expression::StaticMemberExpression(m)
        if matches!(&m.object, Expression::Identifier(o) if o.name == "__ENV"))
}

/// The expression an arrow function returns: its body, or its one `return`.
pub(super) fn arrow_expression<'b, 'a>(
    f: &'b ArrowFunctionExpression<'a>,
) -> Option<&'b Expression<'a>> {
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
/// A loop, not a recursion: a chain of any length costs no stack.
pub(super) fn member_path(e: &Expression) -> Option<String> {
    let mut names = Vec::new();
    let mut cur = e;
    loop {
        match cur {
            Expression::StaticMemberExpression(m) => {
                names.push(m.property.name.as_str());
                cur = &m.object;
            }
            Expression::Identifier(_) if !names.is_empty() => break,
            _ => return None,
        }
    }
    names.reverse();
    Some(names.join("."))
}

/// A capture's response variable and source (`json: "$.a.b"` or `header: "X"`).
pub(super) fn capture_of(e: &Expression) -> Option<(String, String)> {
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
