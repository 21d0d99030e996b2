//! The walk through a function's statements: requests as steps in the order k6 sends them,
//! names bound (a re-assigned response is followed: its checks are the new request's),
//! `check`, `sleep`, `group`, the script's own functions followed, loops with written bounds
//! unrolled; everything else noted with its line.

use oxc_ast::ast::*;
use oxc_span::GetSpan;

use super::eval::Source;
use super::state::{Func, MAX_CALL_DEPTH, MAX_FOLLOWS, MAX_UNROLL, Ret, Walker, unwrap};
use super::values::V;

/// What a name holds after `name = init`.
enum Bound<'a> {
    Response(usize),
    Json(usize, String),
    Value(V),
    Metric(String, String),
    Func(Func<'a>),
    Nothing,
}

/// The custom metric kinds of `k6/metrics`.
const METRIC_KINDS: [&str; 4] = ["Counter", "Trend", "Rate", "Gauge"];

impl<'a> Walker<'a> {
    pub(super) fn statements(&mut self, stmts: &'a [Statement<'a>]) {
        for s in stmts {
            if self.returned.is_some() || self.full {
                return;
            }
            self.statement(s);
        }
    }

    fn statement(&mut self, s: &'a Statement<'a>) {
        match s {
            Statement::VariableDeclaration(d) => self.declaration(d),
            Statement::ExpressionStatement(e) => self.expression(&e.expression, e.span),
            Statement::BlockStatement(b) => self.statements(&b.body),
            Statement::EmptyStatement(_)
            | Statement::TSTypeAliasDeclaration(_)
            | Statement::TSInterfaceDeclaration(_) => {}
            Statement::FunctionDeclaration(f) => self.define_function(f),
            Statement::ReturnStatement(r) => {
                let ret = r.argument.as_ref().and_then(|e| self.ret(e, r.span));
                self.returned = Some(ret);
            }
            Statement::ForStatement(f) => self.for_loop(f),
            Statement::ForOfStatement(f) => self.for_of(f),
            Statement::TryStatement(t) => {
                self.statements(&t.block.body);
                if let Some(h) = &t.handler {
                    self.skip(
                        h.span,
                        "a `catch` block: it runs only when the `try` throws",
                    );
                }
                if let Some(f) = &t.finalizer {
                    self.statements(&f.body);
                }
            }
            other => self.skip(
                other.span(),
                "a statement the importer does not follow (its branches or turns are not known \
                 before k6 runs)",
            ),
        }
    }

    pub(super) fn define_function(&mut self, f: &'a Function<'a>) {
        if let (Some(id), Some(body)) = (&f.id, &f.body) {
            self.functions.insert(
                id.name.to_string(),
                Func {
                    params: &f.params,
                    body: &body.statements,
                    expr: None,
                    span: f.span,
                },
            );
        }
    }

    pub(super) fn declaration(&mut self, d: &'a VariableDeclaration<'a>) {
        for decl in &d.declarations {
            match (&decl.id, &decl.init) {
                (BindingPattern::BindingIdentifier(id), Some(init)) => {
                    self.binding(&id.name, init, decl.span)
                }
                (BindingPattern::BindingIdentifier(id), None) => self.forget(&id.name),
                (BindingPattern::ObjectPattern(p), Some(init)) => {
                    self.destructure(p, init, decl.span)
                }
                _ => self.skip(decl.span, "a destructuring the importer does not follow"),
            }
        }
    }

    /// `const { token, user } = res.json()` (or of an object the script wrote).
    fn destructure(&mut self, p: &ObjectPattern, init: &Expression, span: oxc_span::Span) {
        let from = match self.source_of(init) {
            Some(Source::Json(step, path)) => Ok((step, path)),
            _ => Err(self.value(init)),
        };
        for prop in &p.properties {
            let (Some(key), Some(name)) = (
                prop.key.static_name(),
                prop.value.get_identifier_name().map(|n| n.to_string()),
            ) else {
                self.skip(prop.span, "a destructuring the importer does not follow");
                continue;
            };
            self.forget(&name);
            match &from {
                Ok((step, path)) => {
                    self.json_vars
                        .insert(name, (*step, format!("{path}.{key}")));
                }
                Err(Ok(v)) => match v.get(&key) {
                    Some(v) => {
                        self.consts.insert(name, v.clone());
                    }
                    None => self.skip(prop.span, "a field the object does not hold"),
                },
                Err(Err(why)) => self.skip(span, why),
            }
        }
    }

    /// `name = init`: a request's response, part of a response, a function's result, a
    /// custom metric, or a value.
    pub(super) fn binding(&mut self, name: &str, init: &'a Expression<'a>, span: oxc_span::Span) {
        // `x = x + 1`, `f(token)` into a parameter `token`: the value is read before `name`
        // stops holding what it held.
        let bound = self.bound(name, init, span);
        self.forget(name);
        match bound {
            Bound::Response(i) => {
                self.responses.insert(name.to_string(), i);
            }
            Bound::Json(step, path) => {
                self.json_vars.insert(name.to_string(), (step, path));
            }
            Bound::Value(v) => {
                self.consts.insert(name.to_string(), v);
            }
            Bound::Metric(metric, kind) => {
                self.metrics.insert(name.to_string(), (metric, kind));
            }
            Bound::Func(f) => {
                self.functions.insert(name.to_string(), f);
            }
            Bound::Nothing => {}
        }
    }

    fn bound(&mut self, name: &str, init: &'a Expression<'a>, span: oxc_span::Span) -> Bound<'a> {
        let init = unwrap(init);
        match init {
            Expression::CallExpression(c) => {
                match self.request(c) {
                    Ok(Some(step)) => {
                        return match self.push_step(step, c.span) {
                            Some(i) => Bound::Response(i),
                            None => Bound::Nothing,
                        };
                    }
                    Err(why) => {
                        self.skip(c.span, &why);
                        return Bound::Nothing;
                    }
                    Ok(None) => {}
                }
                if let Expression::Identifier(f) = &c.callee {
                    if f.name == "check" {
                        self.check(c, span);
                        return Bound::Nothing;
                    }
                    if self.functions.contains_key(f.name.as_str()) {
                        return match self.follow(c, span) {
                            Some(Ret::Response(i)) => Bound::Response(i),
                            Some(Ret::Json(step, path)) => Bound::Json(step, path),
                            Some(Ret::Value(v)) => Bound::Value(v),
                            None => Bound::Nothing,
                        };
                    }
                }
            }
            Expression::NewExpression(n) => {
                if let Expression::Identifier(k) = &n.callee
                    && METRIC_KINDS.contains(&k.name.as_str())
                {
                    let metric = n
                        .arguments
                        .first()
                        .and_then(|a| a.as_expression())
                        .and_then(|e| self.eval(e))
                        .and_then(|v| v.text())
                        .unwrap_or_else(|| name.to_string());
                    self.note(format!(
                        "line {}: custom metric `{metric}` ({}) not converted: sloburn has no \
                         custom metrics; its `add` calls and thresholds are listed",
                        self.line(span),
                        k.name
                    ));
                    return Bound::Metric(metric, k.name.to_string());
                }
            }
            Expression::ArrowFunctionExpression(f) => {
                let expr = match &f.body {
                    ArrowFunctionBody::FunctionBody(_) => None,
                    other => other.as_expression(),
                };
                let body = match &f.body {
                    ArrowFunctionBody::FunctionBody(b) => b.statements.as_slice(),
                    _ => &[],
                };
                return Bound::Func(Func {
                    params: &f.params,
                    body,
                    expr,
                    span: f.span,
                });
            }
            Expression::FunctionExpression(f) => {
                return match &f.body {
                    Some(b) => Bound::Func(Func {
                        params: &f.params,
                        body: &b.statements,
                        expr: None,
                        span: f.span,
                    }),
                    None => Bound::Nothing,
                };
            }
            _ => {}
        }
        match self.source_of(init) {
            Some(Source::Json(step, path)) => return Bound::Json(step, path),
            Some(src) => return Bound::Value(self.capture(src, Some(name))),
            None => {}
        }
        match self.value(init) {
            Ok(v) => Bound::Value(v),
            Err(why) => {
                self.skip(span, &why);
                Bound::Nothing
            }
        }
    }

    /// What `return e` gives back.
    fn ret(&mut self, e: &'a Expression<'a>, span: oxc_span::Span) -> Option<Ret> {
        let e = unwrap(e);
        if let Expression::Identifier(id) = e
            && let Some(&i) = self.responses.get(id.name.as_str())
        {
            return Some(Ret::Response(i));
        }
        if let Expression::CallExpression(c) = e {
            match self.request(c) {
                Ok(Some(step)) => return self.push_step(step, c.span).map(Ret::Response),
                Err(why) => {
                    self.skip(c.span, &why);
                    return None;
                }
                Ok(None) => {}
            }
            if let Expression::Identifier(f) = &c.callee
                && self.functions.contains_key(f.name.as_str())
            {
                return self.follow(c, span);
            }
        }
        match self.source_of(e) {
            Some(Source::Json(step, path)) => Some(Ret::Json(step, path)),
            Some(src) => Some(Ret::Value(self.capture(src, None))),
            None => match self.value(e) {
                Ok(v) => Some(Ret::Value(v)),
                Err(why) => {
                    self.skip(span, &why);
                    None
                }
            },
        }
    }

    /// Follows a call of one of the script's functions: its parameters bound to the
    /// arguments' values, its body walked; what it returns.
    pub(super) fn follow(
        &mut self,
        c: &'a CallExpression<'a>,
        span: oxc_span::Span,
    ) -> Option<Ret> {
        let Expression::Identifier(id) = &c.callee else {
            return None;
        };
        let f = *self.functions.get(id.name.as_str())?;
        if self.call_depth >= MAX_CALL_DEPTH || self.follows >= MAX_FOLLOWS {
            self.skip(
                span,
                &format!(
                    "calls nested past {MAX_CALL_DEPTH} or more than {MAX_FOLLOWS} calls followed"
                ),
            );
            return None;
        }
        self.follows += 1;
        let saved = (
            self.consts.clone(),
            self.responses.clone(),
            self.json_vars.clone(),
        );
        for (i, p) in f.params.items.iter().enumerate() {
            let Some(name) = p.pattern.get_identifier_name().map(|n| n.to_string()) else {
                continue;
            };
            let arg = c
                .arguments
                .get(i)
                .and_then(|a| a.as_expression())
                .or(p.initializer.as_deref());
            match arg {
                Some(a) => self.binding(&name, a, span),
                None => self.forget(&name),
            }
        }
        self.call_depth += 1;
        let outer = self.returned.take();
        let ret = match f.expr {
            Some(e) => self.ret(e, span),
            None => {
                self.statements(f.body);
                self.returned.take().flatten()
            }
        };
        self.returned = outer;
        self.call_depth -= 1;
        (self.consts, self.responses, self.json_vars) = saved;
        ret
    }

    pub(super) fn expression(&mut self, e: &'a Expression<'a>, span: oxc_span::Span) {
        match unwrap(e) {
            Expression::CallExpression(c) => self.call(c, span),
            Expression::AssignmentExpression(a) => match (&a.left, a.operator) {
                (AssignmentTarget::AssignmentTargetIdentifier(id), AssignmentOperator::Assign) => {
                    self.binding(&id.name, &a.right, span)
                }
                _ => self.skip(span, "an assignment the importer does not follow"),
            },
            // `check(res, {...}) || errors.add(1)`: the right side runs on a condition.
            Expression::LogicalExpression(l) => {
                self.expression(&l.left, span);
                self.skip(l.right.span(), "it runs only on the left side's outcome");
            }
            Expression::SequenceExpression(s) => {
                for e in &s.expressions {
                    self.expression(e, e.span());
                }
            }
            _ => self.skip(span, "an expression the importer does not follow"),
        }
    }

    fn call(&mut self, c: &'a CallExpression<'a>, span: oxc_span::Span) {
        match self.request(c) {
            Ok(Some(step)) => {
                self.push_step(step, c.span);
                return;
            }
            Err(why) => return self.skip(c.span, &why),
            Ok(None) => {}
        }
        let arg = |i: usize| c.arguments.get(i).and_then(|a| a.as_expression());
        match &c.callee {
            Expression::Identifier(id) => match id.name.as_str() {
                "sleep" => match arg(0).and_then(|e| self.eval(e)) {
                    Some(V::Num(s)) if !self.steps.is_empty() => {
                        let last = self.steps.len() - 1;
                        *self.steps[last].think.get_or_insert(0.0) += s;
                    }
                    Some(V::Num(_)) => self.skip(span, "a sleep before any request"),
                    _ => self.skip(span, "a sleep of no number written in the script"),
                },
                "check" => self.check(c, span),
                "group" => match arg(1).map(unwrap) {
                    Some(Expression::ArrowFunctionExpression(f)) => match &f.body {
                        ArrowFunctionBody::FunctionBody(b) => self.statements(&b.statements),
                        other => {
                            if let Some(e) = other.as_expression() {
                                self.expression(e, span)
                            }
                        }
                    },
                    Some(Expression::FunctionExpression(f)) => {
                        if let Some(b) = &f.body {
                            self.statements(&b.statements);
                        }
                    }
                    _ => self.skip(span, "a group without a function"),
                },
                name if self.functions.contains_key(name) => {
                    self.follow(c, span);
                }
                _ => self.skip(span, "a call the importer does not follow"),
            },
            Expression::StaticMemberExpression(m) => match unwrap(&m.object) {
                Expression::Identifier(o) if o.name == "console" => self.note(format!(
                    "line {}: `console.{}` ignored: sloburn prints nothing a script logs",
                    self.line(span),
                    m.property.name
                )),
                Expression::Identifier(o) if self.metrics.contains_key(o.name.as_str()) => {
                    let (metric, kind) = &self.metrics[o.name.as_str()];
                    self.note(format!(
                        "line {}: `{}.{}` not converted: `{metric}` is a custom {kind}",
                        self.line(span),
                        o.name,
                        m.property.name
                    ));
                }
                _ => self.skip(span, "a call the importer does not follow"),
            },
            _ => self.skip(span, "a call the importer does not follow"),
        }
    }

    /// `for (let i = A; i < B; i++)` with A and B written in the script: the body once per
    /// turn, at most [`MAX_UNROLL`] turns.
    fn for_loop(&mut self, f: &'a ForStatement<'a>) {
        let bounds = (|| {
            let Some(ForStatementInit::VariableDeclaration(d)) = &f.init else {
                return None;
            };
            let [decl] = d.declarations.as_slice() else {
                return None;
            };
            let name = decl.id.get_identifier_name()?.to_string();
            let V::Num(start) = self.eval(decl.init.as_ref()?)? else {
                return None;
            };
            let Expression::BinaryExpression(t) = unwrap(f.test.as_ref()?) else {
                return None;
            };
            let left_is_i =
                matches!(unwrap(&t.left), Expression::Identifier(i) if i.name.as_str() == name);
            let V::Num(end) = self.eval(&t.right)? else {
                return None;
            };
            let end = match t.operator {
                BinaryOperator::LessThan => end,
                BinaryOperator::LessEqualThan => end + 1.0,
                _ => return None,
            };
            let step_is_one = match unwrap(f.update.as_ref()?) {
                Expression::UpdateExpression(u) => u.operator == UpdateOperator::Increment,
                Expression::AssignmentExpression(a) => {
                    a.operator == AssignmentOperator::Addition
                        && matches!(self.eval(&a.right), Some(V::Num(n)) if n == 1.0)
                }
                _ => false,
            };
            (left_is_i && step_is_one && start.fract() == 0.0).then_some((name, start, end))
        })();
        match bounds {
            Some((name, start, end)) if end - start <= MAX_UNROLL as f64 => {
                let mut i = start;
                while i < end && self.returned.is_none() && !self.full {
                    self.consts.insert(name.clone(), V::Num(i));
                    self.statement(&f.body);
                    i += 1.0;
                }
                self.forget(&name);
            }
            _ => self.skip(
                f.span,
                &format!(
                    "a loop whose turns are not written in the script (or more than {MAX_UNROLL})"
                ),
            ),
        }
    }

    /// `for (const x of [..])` over an array written in the script.
    fn for_of(&mut self, f: &'a ForOfStatement<'a>) {
        let name = match &f.left {
            ForStatementLeft::VariableDeclaration(d) => match d.declarations.as_slice() {
                [decl] => decl.id.get_identifier_name().map(|n| n.to_string()),
                _ => None,
            },
            _ => None,
        };
        match (name, self.eval(&f.right)) {
            (Some(name), Some(V::Arr(items))) if items.len() <= MAX_UNROLL => {
                for item in items {
                    if self.returned.is_some() || self.full {
                        break;
                    }
                    self.consts.insert(name.clone(), item);
                    self.statement(&f.body);
                }
                self.forget(&name);
            }
            _ => self.skip(
                f.span,
                &format!(
                    "a loop over what is not an array written in the script (or more than \
                     {MAX_UNROLL})"
                ),
            ),
        }
    }
}
