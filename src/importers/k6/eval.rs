//! The values of expressions, as far as the importer can compute them before k6 runs:
//! literals, the script's own names, `__ENV.X || 'default'`, templates, `JSON.stringify`,
//! `__VU`/`__ITER`/`Date.now()` (sloburn's `${vu}`, `${iter}`, `${timestamp_ms}`), and values
//! from a response (`res.json('a')`, `data[0].id`, `res.headers['X']`) as captures.

use oxc_ast::ast::*;
use oxc_span::GetSpan;
use std::fmt::Write as _;

use super::state::{MAX_EXPR_DEPTH, Walker, is_env, unwrap};
use super::values::V;
use crate::config::quote;

/// Where a response value lives.
pub(super) enum Source {
    /// A step's JSON at a path (`$.a[0]`).
    Json(usize, String),
    Header(usize, String),
}

impl Walker<'_> {
    /// The value of `e`, or why not: the first part the importer cannot compute, named.
    pub(super) fn value(&self, e: &Expression) -> Result<V, String> {
        self.unknown.set(None);
        self.eval(e).ok_or_else(|| match self.unknown.get() {
            Some(span) => {
                let text = self
                    .src
                    .get(span.start as usize..span.end as usize)
                    .unwrap_or("");
                let shown: String = text.chars().take(60).collect();
                format!("`{shown}` is computed when k6 runs")
            }
            None => "a value the importer cannot compute".to_string(),
        })
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
        let v = self.eval_inner(unwrap(e));
        self.depth.set(depth);
        if v.is_none() && self.unknown.get().is_none() {
            self.unknown.set(Some(e.span()));
        }
        v
    }

    fn eval_inner(&self, e: &Expression) -> Option<V> {
        if let Some(src) = self.source_of(e) {
            return Some(self.capture(src, None));
        }
        Some(match e {
            Expression::StringLiteral(s) => V::Str(s.value.to_string().replace("${", "$${")),
            Expression::NumericLiteral(n) => V::Num(n.value),
            Expression::BooleanLiteral(b) => V::Bool(b.value),
            Expression::NullLiteral(_) => V::Null,
            // `__ENV.BASE_URL || 'http://…'`: the script's own default.
            Expression::LogicalExpression(l)
                if matches!(l.operator, LogicalOperator::Or | LogicalOperator::Coalesce)
                    && is_env(&l.left) =>
            {
                return self.eval(&l.right);
            }
            Expression::TemplateLiteral(t) => self.template(t)?,
            Expression::TaggedTemplateExpression(t)
                if matches!(&t.tag, Expression::StaticMemberExpression(m)
                    if m.property.name == "url"
                        && matches!(&m.object, Expression::Identifier(o) if o.name == "http")) =>
            {
                self.template(&t.quasi)?
            }
            Expression::Identifier(id) => match id.name.as_str() {
                "__VU" => V::Raw("${vu}".into()),
                "__ITER" => V::Raw("${iter}".into()),
                name if let Some(v) = self.locals.borrow().last().and_then(|l| l.get(name)) => {
                    v.clone()
                }
                name => match self.consts.get(name) {
                    Some(v) => v.clone(),
                    None => {
                        let &(step, ref path) = self.json_vars.get(name)?;
                        self.capture(Source::Json(step, path.clone()), Some(name))
                    }
                },
            },
            Expression::BinaryExpression(b) => self.binary(b)?,
            Expression::UnaryExpression(u) => match (u.operator, self.eval(&u.argument)?) {
                (UnaryOperator::UnaryNegation, V::Num(n)) => V::Num(-n),
                (UnaryOperator::UnaryPlus, V::Num(n)) => V::Num(n),
                _ => return None,
            },
            Expression::ObjectExpression(o) => self.object(o)?,
            Expression::ArrayExpression(a) => {
                let mut v = Vec::new();
                for el in &a.elements {
                    match el {
                        ArrayExpressionElement::SpreadElement(s) => match self.eval(&s.argument)? {
                            V::Arr(items) => v.extend(items),
                            _ => return None,
                        },
                        el => v.push(self.eval(el.as_expression()?)?),
                    }
                }
                V::Arr(v)
            }
            Expression::CallExpression(c) => self.builtin(c)?,
            // k6's TLS version names.
            Expression::StaticMemberExpression(m)
                if matches!(&m.object, Expression::Identifier(o) if o.name == "http")
                    && m.property.name.starts_with("TLS_") =>
            {
                V::Str(format!("tls{}", m.property.name[4..].replace('_', ".")))
            }
            Expression::StaticMemberExpression(m) => {
                self.eval(&m.object)?.get(&m.property.name)?.clone()
            }
            Expression::ComputedMemberExpression(m) => {
                let key = self.eval(&m.expression)?.text()?;
                self.eval(&m.object)?.get(&key)?.clone()
            }
            _ => return None,
        })
    }

    fn template(&self, t: &TemplateLiteral) -> Option<V> {
        let mut out = String::new();
        for (i, q) in t.quasis.iter().enumerate() {
            let cooked = q.value.cooked.as_ref().map(|c| c.to_string())?;
            out.push_str(&cooked.replace("${", "$${"));
            if let Some(x) = t.expressions.get(i) {
                out.push_str(&self.eval(x)?.text()?);
            }
        }
        Some(V::Str(out))
    }

    fn binary(&self, b: &BinaryExpression) -> Option<V> {
        let (l, r) = (self.eval(&b.left)?, self.eval(&b.right)?);
        Some(match (b.operator, &l, &r) {
            (BinaryOperator::Addition, V::Num(x), V::Num(y)) => V::Num(x + y),
            (BinaryOperator::Addition, _, _) => V::Str(format!("{}{}", l.text()?, r.text()?)),
            (BinaryOperator::Subtraction, V::Num(x), V::Num(y)) => V::Num(x - y),
            (BinaryOperator::Multiplication, V::Num(x), V::Num(y)) => V::Num(x * y),
            (BinaryOperator::Division, V::Num(x), V::Num(y)) => V::Num(x / y),
            (BinaryOperator::Remainder, V::Num(x), V::Num(y)) => V::Num(x % y),
            _ => return None,
        })
    }

    /// An object literal: spreads of known objects, shorthand names; a key written twice
    /// keeps its first place and its last value, as JavaScript does (noted).
    fn object(&self, o: &ObjectExpression) -> Option<V> {
        let mut m: Vec<(String, V)> = Vec::new();
        let put = |k: String, v: V, m: &mut Vec<(String, V)>| match m
            .iter_mut()
            .find(|(key, _)| *key == k)
        {
            Some(slot) => slot.1 = v,
            None => m.push((k, v)),
        };
        for p in &o.properties {
            match p {
                ObjectPropertyKind::ObjectProperty(p) => {
                    let key = match &p.key {
                        PropertyKey::StaticIdentifier(_) | PropertyKey::StringLiteral(_) => {
                            p.key.static_name()?.to_string()
                        }
                        PropertyKey::NumericLiteral(n) => super::values::num(n.value),
                        k => self.eval(k.as_expression()?)?.text()?,
                    };
                    if m.iter().any(|(k, _)| *k == key) {
                        self.note(format!(
                            "line {}: `{key}` is written twice in one object; JavaScript (and \
                             k6) keep the last value, and so does the import",
                            self.line(p.span)
                        ));
                    }
                    let v = self.eval(&p.value)?;
                    put(key, v, &mut m);
                }
                ObjectPropertyKind::SpreadProperty(s) => match self.eval(&s.argument)? {
                    V::Obj(entries) => {
                        for (k, v) in entries {
                            put(k, v, &mut m);
                        }
                    }
                    _ => return None,
                },
            }
        }
        Some(V::Obj(m))
    }

    /// `JSON.stringify(x)`, `Date.now()`, `String(x)`, `encodeURIComponent('…')`.
    fn builtin(&self, c: &CallExpression) -> Option<V> {
        let arg = |i: usize| c.arguments.get(i).and_then(|a| a.as_expression());
        match &c.callee {
            Expression::StaticMemberExpression(m) => {
                let object = match &m.object {
                    Expression::Identifier(o) => o.name.as_str(),
                    _ => "",
                };
                match (object, m.property.name.as_str()) {
                    ("JSON", "stringify") if c.arguments.len() == 1 => {
                        Some(V::Str(self.eval(arg(0)?)?.json()))
                    }
                    ("Date", "now") => {
                        self.note(format!(
                            "line {}: `Date.now()` becomes `${{timestamp_ms}}`, the time each \
                             request is sent",
                            self.line(c.span)
                        ));
                        Some(V::Raw("${timestamp_ms}".into()))
                    }
                    (_, "toString") if c.arguments.is_empty() => {
                        Some(V::Str(self.eval(&m.object)?.text()?))
                    }
                    _ => None,
                }
            }
            Expression::Identifier(f) => match f.name.as_str() {
                "String" => Some(V::Str(self.eval(arg(0)?)?.text()?)),
                "encodeURIComponent" => match self.eval(arg(0)?)? {
                    V::Str(s) if !s.contains("${") => Some(V::Str(encode_component(&s))),
                    V::Num(n) => Some(V::Str(super::values::num(n))),
                    _ => None,
                },
                name => self.pure_call(name, c),
            },
            _ => None,
        }
    }

    /// A call of the script's own function whose body is one returned expression
    /// (`const path = (p) => `${BASE}${p}``): that expression with the arguments' values.
    fn pure_call(&self, name: &str, c: &CallExpression) -> Option<V> {
        let f = self.functions.get(name)?;
        let body = match (f.expr, f.body) {
            (Some(e), _) => e,
            (None, [Statement::ReturnStatement(r)]) => r.argument.as_ref()?,
            _ => return None,
        };
        if self.pure_calls.get() >= super::state::MAX_FOLLOWS {
            return None;
        }
        self.pure_calls.set(self.pure_calls.get() + 1);
        let mut frame = std::collections::BTreeMap::new();
        for (i, p) in f.params.items.iter().enumerate() {
            let pname = p.pattern.get_identifier_name()?.to_string();
            let arg = c.arguments.get(i).and_then(|a| a.as_expression());
            let v = match (arg, &p.initializer) {
                (Some(a), _) => self.eval(a)?,
                (None, Some(d)) => self.eval(d)?,
                (None, None) => return None,
            };
            frame.insert(pname, v);
        }
        self.locals.borrow_mut().push(frame);
        let v = self.eval(body);
        self.locals.borrow_mut().pop();
        v
    }

    /// Where `e` reads a response: `res.json()…`, `res.json('a.b')…`, a name holding part of
    /// a response's JSON and what follows it, `res.headers['X']`.
    pub(super) fn source_of(&self, e: &Expression) -> Option<Source> {
        let mut path: Vec<String> = Vec::new();
        let mut cur = unwrap(e);
        loop {
            match cur {
                Expression::StaticMemberExpression(m) => {
                    path.push(m.property.name.to_string());
                    cur = unwrap(&m.object);
                }
                Expression::ComputedMemberExpression(m) => {
                    match unwrap(&m.expression) {
                        Expression::StringLiteral(s) => path.push(s.value.to_string()),
                        Expression::NumericLiteral(n) => path.push(format!("[{}]", n.value as i64)),
                        _ => return None,
                    }
                    cur = unwrap(&m.object);
                }
                _ => break,
            }
        }
        path.reverse();
        let (step, mut parts, mut json) = match cur {
            Expression::CallExpression(c) => {
                let Expression::StaticMemberExpression(m) = &c.callee else {
                    return None;
                };
                let Expression::Identifier(var) = unwrap(&m.object) else {
                    return None;
                };
                let step = *self.responses.get(var.name.as_str())?;
                if m.property.name != "json" {
                    return None;
                }
                // `res.json('a.b')`: k6's GJSON path, its plain dotted form.
                let parts: Vec<String> = match c.arguments.first().and_then(|a| a.as_expression()) {
                    Some(Expression::StringLiteral(s)) => {
                        s.value.split('.').map(str::to_string).collect()
                    }
                    None => Vec::new(),
                    _ => return None,
                };
                (step, parts, String::from("$"))
            }
            Expression::Identifier(var) if !path.is_empty() => {
                if let Some(&step) = self.responses.get(var.name.as_str()) {
                    return match path.as_slice() {
                        [h, name] if h == "headers" => Some(Source::Header(step, name.clone())),
                        _ => None,
                    };
                }
                let (step, base) = self.json_vars.get(var.name.as_str())?;
                (*step, Vec::new(), base.clone())
            }
            _ => return None,
        };
        parts.extend(path);
        for p in parts {
            if let Some(i) = p.strip_prefix('[') {
                json.push('[');
                json.push_str(i);
            } else if !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()) {
                let _ = write!(json, "[{p}]");
            } else if p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !p.is_empty() {
                let _ = write!(json, ".{p}");
            } else {
                let _ = write!(json, "['{}']", p.replace('\'', ""));
            }
        }
        Some(Source::Json(step, json))
    }

    /// A capture of `src` (named `hint`, or after its path), as the `${name}` a request sends.
    pub(super) fn capture(&self, src: Source, hint: Option<&str>) -> V {
        let (step, source, base) = match &src {
            Source::Json(step, path) => (*step, format!("json: {}", quote(path)), path.clone()),
            Source::Header(step, h) => (*step, format!("header: {}", quote(h)), h.clone()),
        };
        let mut name: String = hint
            .map(str::to_string)
            .unwrap_or_else(|| {
                base.chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect::<String>()
            })
            .trim_matches('_')
            .chars()
            .take(48)
            .collect();
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            name.insert_str(0, "v_");
        }
        let mut captures = self.captures.borrow_mut();
        let mut unique = name.clone();
        let mut n = 1;
        while let Some(have) = captures.get(&unique) {
            if *have == (step, source.clone()) {
                return V::Str(format!("${{{unique}}}"));
            }
            n += 1;
            unique = format!("{name}_{n}");
        }
        captures.insert(unique.clone(), (step, source));
        V::Str(format!("${{{unique}}}"))
    }
}

/// JavaScript's `encodeURIComponent`.
fn encode_component(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() || "-_.!~*'()".contains(c) {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}
