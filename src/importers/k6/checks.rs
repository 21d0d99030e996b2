//! `check(res, {...})` (or `check(http.get(…), {...})`) as the step's checks, each under its
//! k6 name: status, body, duration, JSON and header predicates.

use oxc_ast::ast::*;
use oxc_span::GetSpan;

use super::eval::Source;
use super::state::{Walker, member_path, unwrap};
use super::values::V;
use crate::config::quote;

impl Walker<'_> {
    /// A `check(…)` call: the response it reads (made here when it is an inline request) gets
    /// each predicate the importer understands; the others are listed with their line.
    pub(super) fn check(&mut self, c: &CallExpression, span: oxc_span::Span) {
        let arg = |i: usize| {
            c.arguments
                .get(i)
                .and_then(|a| a.as_expression())
                .map(unwrap)
        };
        let step = match arg(0) {
            Some(Expression::Identifier(id)) => self.responses.get(id.name.as_str()).copied(),
            Some(Expression::CallExpression(inner)) => match self.request(inner) {
                Ok(Some(step)) => self.push_step(step, inner.span),
                Ok(None) => None,
                Err(why) => {
                    self.skip(inner.span, &why);
                    None
                }
            },
            _ => None,
        };
        let (Some(step), Some(Expression::ObjectExpression(o))) = (step, arg(1)) else {
            return self.skip(span, "a check on something other than a response");
        };
        for p in &o.properties {
            let ObjectPropertyKind::ObjectProperty(p) = p else {
                self.skip(p.span(), "a spread in a check");
                continue;
            };
            let name = match p.key.static_name() {
                Some(n) => n.to_string(),
                None => p
                    .key
                    .as_expression()
                    .and_then(|k| self.eval(k))
                    .and_then(|v| v.text())
                    .unwrap_or_default(),
            };
            let (param, body) = match unwrap(&p.value) {
                Expression::ArrowFunctionExpression(f) => {
                    (first_param(&f.params), super::state::arrow_expression(f))
                }
                Expression::FunctionExpression(f) => (
                    first_param(&f.params),
                    f.body.as_ref().and_then(|b| match b.statements.as_slice() {
                        [Statement::ReturnStatement(r)] => r.argument.as_ref(),
                        _ => None,
                    }),
                ),
                _ => (None, None),
            };
            // The predicate's parameter reads this step's response.
            let before = param
                .as_ref()
                .map(|n| (n.clone(), self.responses.insert(n.clone(), step)));
            let fields = body.and_then(|b| self.predicate(b));
            if let Some((n, old)) = before {
                match old {
                    Some(s) => self.responses.insert(n, s),
                    None => self.responses.remove(&n),
                };
            }
            match fields {
                Some(f) => {
                    let checks = &mut self.steps[step].checks;
                    let mut unique = name.clone();
                    let mut n = 1;
                    while checks.iter().any(|(have, _)| *have == unique) {
                        n += 1;
                        unique = format!("{name} ({n})");
                    }
                    checks.push((unique, f));
                }
                None => self.skip(p.span, &format!("check `{name}`")),
            }
        }
    }

    /// `r.status === 200` and friends, as a sloburn check's fields.
    fn predicate(&self, e: &Expression) -> Option<String> {
        match unwrap(e) {
            Expression::BinaryExpression(b) => self.comparison(b),
            Expression::LogicalExpression(l) if l.operator == LogicalOperator::And => {
                // `r.status >= 200 && r.status < 300`.
                let (lo, hi) = (status_bound(&l.left)?, status_bound(&l.right)?);
                match (lo, hi) {
                    ((Some(a), None), (None, Some(b))) | ((None, Some(b)), (Some(a), None)) => {
                        Some(format!("status: {a}-{b}"))
                    }
                    _ => None,
                }
            }
            Expression::UnaryExpression(u) if u.operator == UnaryOperator::LogicalNot => {
                // `!!r.json('id')`.
                match unwrap(&u.argument) {
                    Expression::UnaryExpression(i) if i.operator == UnaryOperator::LogicalNot => {
                        self.exists(&i.argument)
                    }
                    _ => None,
                }
            }
            Expression::CallExpression(c) => self.call_predicate(c),
            other => self.exists(other),
        }
    }

    fn comparison(&self, b: &BinaryExpression) -> Option<String> {
        use BinaryOperator as B;
        let eq = matches!(b.operator, B::StrictEquality | B::Equality);
        let ne = matches!(b.operator, B::StrictInequality | B::Inequality);
        let undefined = |e: &Expression| {
            matches!(unwrap(e), Expression::Identifier(i) if i.name == "undefined")
                || matches!(unwrap(e), Expression::NullLiteral(_))
        };
        if ne && undefined(&b.right) {
            return self.exists(&b.left);
        }
        // `r.body.indexOf('x') !== -1`.
        if let Expression::CallExpression(c) = unwrap(&b.left)
            && let Expression::StaticMemberExpression(m) = &c.callee
            && m.property.name == "indexOf"
            && member_path(&m.object).as_deref() == Some("body")
            && (ne || matches!(b.operator, B::GreaterThan))
            && matches!(self.eval(&b.right), Some(V::Num(n)) if n == -1.0)
        {
            let needle = self.eval(c.arguments.first()?.as_expression()?)?.text()?;
            return Some(format!("body_contains: {}", quote(&needle)));
        }
        if let Some(src) = self.source_of(&b.left) {
            let value = self.eval(&b.right)?;
            return match (src, eq) {
                (Source::Json(_, path), true) => Some(format!(
                    "json: {{ path: {}, equals: {} }}",
                    quote(&path),
                    value.json()
                )),
                (Source::Header(_, h), true) => Some(format!(
                    "header: {{ name: {}, equals: {} }}",
                    quote(&h),
                    quote(&value.text()?)
                )),
                _ => None,
            };
        }
        let field = member_path(&b.left)?;
        let value = self.eval(&b.right)?;
        match (field.as_str(), b.operator) {
            ("status", _) if eq => Some(format!("status: {}", value.text()?)),
            ("timings.duration", B::LessThan | B::LessEqualThan) => {
                Some(format!("duration_under: {}ms", value.text()?))
            }
            ("body", _) if eq => Some(format!(
                "body_matches: {}",
                quote(&format!("^{}$", regex::escape(&value.text()?)))
            )),
            _ => None,
        }
    }

    /// `r.body.includes('…')`, `[200, 201].includes(r.status)`,
    /// `r.headers['Content-Type'].includes('json')`.
    fn call_predicate(&self, c: &CallExpression) -> Option<String> {
        let Expression::StaticMemberExpression(m) = &c.callee else {
            return None;
        };
        if m.property.name != "includes" {
            return None;
        }
        let arg = unwrap(c.arguments.first()?.as_expression()?);
        if member_path(arg).as_deref() == Some("status")
            && let Some(V::Arr(codes)) = self.eval(&m.object)
        {
            let codes: Option<Vec<String>> = codes.iter().map(V::text).collect();
            return Some(format!("status: [{}]", codes?.join(", ")));
        }
        let needle = self.eval(arg)?.text()?;
        if let Some(Source::Header(_, h)) = self.source_of(&m.object) {
            return Some(format!(
                "header: {{ name: {}, matches: {} }}",
                quote(&h),
                quote(&regex::escape(&needle))
            ));
        }
        (member_path(&m.object)? == "body").then(|| format!("body_contains: {}", quote(&needle)))
    }

    /// A response value that must be there: a JSON path or a header.
    fn exists(&self, e: &Expression) -> Option<String> {
        match self.source_of(e)? {
            Source::Json(_, path) => Some(format!("json: {{ path: {} }}", quote(&path))),
            Source::Header(_, h) => Some(format!("header: {{ name: {} }}", quote(&h))),
        }
    }
}

/// `r.status >= 200` → (Some(200), None); `r.status < 300` → (None, Some(299)).
fn status_bound(e: &Expression) -> Option<(Option<i64>, Option<i64>)> {
    use BinaryOperator as B;
    let Expression::BinaryExpression(b) = unwrap(e) else {
        return None;
    };
    if member_path(&b.left)? != "status" {
        return None;
    }
    let Expression::NumericLiteral(n) = unwrap(&b.right) else {
        return None;
    };
    let n = n.value as i64;
    match b.operator {
        B::GreaterEqualThan => Some((Some(n), None)),
        B::GreaterThan => Some((Some(n + 1), None)),
        B::LessThan => Some((None, Some(n - 1))),
        B::LessEqualThan => Some((None, Some(n))),
        _ => None,
    }
}

fn first_param(p: &FormalParameters) -> Option<String> {
    p.items
        .first()
        .and_then(|i| i.pattern.get_identifier_name())
        .map(|n| n.to_string())
}
