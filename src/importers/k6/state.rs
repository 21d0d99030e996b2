//! What the walk through a script holds: the steps made so far, the values and responses the
//! script's names hold, the functions it may call, the notes, and every `http.*` call site of
//! the text, so that each one is either converted or listed with its line.

use oxc_ast::ast::*;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use super::values::V;

/// The deepest expression evaluated (a chain of `+` is as deep as it is long): past it the
/// import stops with the line, never the stack.
pub(super) const MAX_EXPR_DEPTH: usize = 256;
/// The most steps an import makes (loops unrolled, functions followed): past it the rest of
/// the script is listed, not converted.
pub(super) const MAX_STEPS: usize = 10_000;
/// The most function calls followed, and how deep they nest: a script that calls itself, or
/// fans out, is listed past these.
pub(super) const MAX_FOLLOWS: usize = 2_000;
pub(super) const MAX_CALL_DEPTH: usize = 16;
/// The most turns of one loop unrolled (its bounds written in the script).
pub(super) const MAX_UNROLL: usize = 100;

/// The k6 `http` functions that send a request.
pub(super) const HTTP_CALLS: [&str; 10] = [
    "get",
    "post",
    "put",
    "patch",
    "del",
    "head",
    "options",
    "request",
    "batch",
    "asyncRequest",
];

#[derive(Debug, Default)]
pub(super) struct Step {
    /// k6's `name` tag (`tags: { name }`), when it is a step name.
    pub(super) name: Option<String>,
    pub(super) method: String,
    pub(super) url: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Option<String>,
    /// (k6's check name, the sloburn check's fields).
    pub(super) checks: Vec<(String, String)>,
    pub(super) think: Option<f64>,
}

/// What a followed function returned.
#[derive(Debug, Clone)]
pub(super) enum Ret {
    Value(V),
    Response(usize),
    /// A response's JSON at a path (`$.a`): captured where it is used.
    Json(usize, String),
}

/// A function the script defines: its parameters' names and its body.
#[derive(Clone, Copy)]
pub(super) struct Func<'a> {
    pub(super) params: &'a FormalParameters<'a>,
    pub(super) body: &'a [Statement<'a>],
    /// The body of an arrow function written as one expression.
    pub(super) expr: Option<&'a Expression<'a>>,
    pub(super) span: oxc_span::Span,
}

/// Target-wide options that have a sloburn field (`insecureSkipTLSVerify`, `tlsVersion`).
#[derive(Debug, Default)]
pub(super) struct TargetOpts {
    pub(super) insecure: bool,
    pub(super) tls_min: Option<String>,
}

pub(super) struct Walker<'a> {
    pub(super) src: &'a str,
    pub(super) consts: BTreeMap<String, V>,
    /// A response variable → its step.
    pub(super) responses: BTreeMap<String, usize>,
    /// A variable holding part of a response's JSON → (its step, the JSON path).
    pub(super) json_vars: BTreeMap<String, (usize, String)>,
    /// A custom metric's variable → (its name, its kind).
    pub(super) metrics: BTreeMap<String, (String, String)>,
    pub(super) functions: BTreeMap<String, Func<'a>>,
    pub(super) steps: Vec<Step>,
    pub(super) notes: RefCell<Vec<String>>,
    /// Every capture asked for: its name → (its step, its source's fields).
    pub(super) captures: RefCell<BTreeMap<String, (usize, String)>>,
    /// The parameters of the functions [`Walker::eval`] is inside (`const p = (x) => …`).
    pub(super) locals: RefCell<Vec<BTreeMap<String, V>>>,
    /// How many such calls were evaluated: at most [`MAX_FOLLOWS`].
    pub(super) pure_calls: Cell<usize>,
    /// The first part of the last expression evaluated that the importer could not compute.
    pub(super) unknown: Cell<Option<oxc_span::Span>>,
    pub(super) target: TargetOpts,
    /// Every `http.*` call of the text: its offset → (line, function).
    pub(super) sites: BTreeMap<u32, (usize, String)>,
    pub(super) converted: BTreeSet<u32>,
    /// A site not converted → why (the first reason found).
    pub(super) missed: RefCell<BTreeMap<u32, String>>,
    pub(super) follows: usize,
    /// [`MAX_STEPS`] were made: the walk stops.
    pub(super) full: bool,
    pub(super) call_depth: usize,
    /// What the function being followed returned, once it did.
    pub(super) returned: Option<Option<Ret>>,
    /// How deep [`Walker::eval`] is now; past [`MAX_EXPR_DEPTH`] it stops, noting where.
    pub(super) depth: Cell<usize>,
    pub(super) too_deep: Cell<Option<oxc_span::Span>>,
}

impl<'a> Walker<'a> {
    pub(super) fn new(src: &'a str) -> Walker<'a> {
        Walker {
            src,
            consts: BTreeMap::new(),
            responses: BTreeMap::new(),
            json_vars: BTreeMap::new(),
            metrics: BTreeMap::new(),
            functions: BTreeMap::new(),
            steps: Vec::new(),
            notes: RefCell::new(Vec::new()),
            captures: RefCell::new(BTreeMap::new()),
            unknown: Cell::new(None),
            locals: RefCell::new(Vec::new()),
            pure_calls: Cell::new(0),
            target: TargetOpts::default(),
            sites: http_sites(src),
            converted: BTreeSet::new(),
            missed: RefCell::new(BTreeMap::new()),
            follows: 0,
            full: false,
            call_depth: 0,
            returned: None,
            depth: Cell::new(0),
            too_deep: Cell::new(None),
        }
    }

    pub(super) fn line(&self, span: oxc_span::Span) -> usize {
        self.line_at(span.start)
    }

    pub(super) fn line_at(&self, offset: u32) -> usize {
        self.src[..(offset as usize).min(self.src.len())]
            .matches('\n')
            .count()
            + 1
    }

    pub(super) fn note(&self, text: String) {
        self.notes.borrow_mut().push(text);
    }

    /// `span` is not converted, for `why`: each `http.*` call in it is listed (at the end, with
    /// its line); a span without one is noted here with its first line.
    pub(super) fn skip(&self, span: oxc_span::Span, why: &str) {
        if self.miss_within(span, why) {
            return;
        }
        let text = self
            .src
            .get(span.start as usize..span.end as usize)
            .unwrap_or_default();
        let first = text.lines().next().unwrap_or_default();
        let shown: String = first.chars().take(70).collect();
        self.note(format!(
            "line {}: not converted ({why}): {shown}",
            self.line(span)
        ));
    }

    /// Marks the `http.*` calls inside `span` that were not converted as missed for `why`;
    /// whether there was one.
    pub(super) fn miss_within(&self, span: oxc_span::Span, why: &str) -> bool {
        let mut missed = self.missed.borrow_mut();
        let mut any = false;
        for (&at, _) in self.sites.range(span.start..span.end) {
            if !self.converted.contains(&at) {
                missed.entry(at).or_insert_with(|| why.to_string());
                any = true;
            }
        }
        any
    }

    /// Adds a converted request's step (the call at `span`); `None` past [`MAX_STEPS`].
    pub(super) fn push_step(&mut self, step: Step, span: oxc_span::Span) -> Option<usize> {
        if self.steps.len() >= MAX_STEPS {
            // The walk stops here (see `Walker::statements`): the rest is listed once.
            if !self.full {
                self.full = true;
                self.note(format!(
                    "line {}: the import stops past {MAX_STEPS} steps; what follows is not                      converted",
                    self.line(span)
                ));
            }
            return None;
        }
        self.converted.insert(span.start);
        self.steps.push(step);
        Some(self.steps.len() - 1)
    }

    /// `name` no longer holds what it held.
    pub(super) fn forget(&mut self, name: &str) {
        self.consts.remove(name);
        self.responses.remove(name);
        self.json_vars.remove(name);
        self.metrics.remove(name);
    }

    /// The `http.*` calls not converted, each with its line and why, and the tally.
    pub(super) fn list_calls(&self) -> Vec<String> {
        let missed = self.missed.borrow();
        let mut out = Vec::new();
        for (at, (line, f)) in &self.sites {
            if !self.converted.contains(at) {
                let why = missed
                    .get(at)
                    .map(String::as_str)
                    .unwrap_or("in code no k6 scenario here runs");
                out.push(format!("line {line}: http.{f} not converted: {why}"));
            }
        }
        let total = self.sites.len();
        let done = self
            .sites
            .keys()
            .filter(|a| self.converted.contains(a))
            .count();
        if total > 0 {
            out.push(format!(
                "http.* calls: {done} of {total} converted{}",
                if done < total {
                    "; each other one is listed above with its line"
                } else {
                    ""
                }
            ));
        }
        out
    }
}

/// Every `http.METHOD(` of the text outside comments and strings (a template literal's
/// `${…}` is code): its offset → (line, METHOD). One pass, linear.
pub(super) fn http_sites(src: &str) -> BTreeMap<u32, (usize, String)> {
    let b = src.as_bytes();
    let mut out = BTreeMap::new();
    // Each open template literal's brace depth when its `${` opened.
    let mut templates: Vec<usize> = Vec::new();
    let (mut i, mut line, mut braces, mut in_template) = (0usize, 1usize, 0usize, false);
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$';
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
        }
        if in_template {
            match c {
                b'\\' => i += 1,
                b'`' => in_template = false,
                b'$' if b.get(i + 1) == Some(&b'{') => {
                    templates.push(braces);
                    braces += 1;
                    in_template = false;
                    i += 1;
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        match c {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    line += usize::from(b[i] == b'\n');
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'\'' | b'"' => {
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'`' => in_template = true,
            b'{' => braces += 1,
            b'}' => {
                braces = braces.saturating_sub(1);
                if templates.last() == Some(&braces) {
                    templates.pop();
                    in_template = true;
                }
            }
            b'h' if b[i..].starts_with(b"http")
                && (i == 0 || !(ident(b[i - 1]) || b[i - 1] == b'.')) =>
            {
                if let Some(f) = call_after(&b[i + 4..]) {
                    out.insert(i as u32, (line, f));
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// After `http`: `.METHOD(` (spaces allowed), METHOD one of [`HTTP_CALLS`].
fn call_after(rest: &[u8]) -> Option<String> {
    let skip = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_whitespace()).count();
    let mut at = skip(rest);
    if rest.get(at) != Some(&b'.') {
        return None;
    }
    at += 1;
    at += skip(&rest[at..]);
    let name: String = rest[at..]
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric())
        .map(|&c| c as char)
        .collect();
    at += name.len();
    at += skip(&rest[at..]);
    (rest.get(at) == Some(&b'(') && HTTP_CALLS.contains(&name.as_str())).then_some(name)
}

/// `e` without TypeScript's wrappers (`as T`, `!`, `satisfies T`, `<T>e`), `await` and
/// parentheses.
pub(super) fn unwrap<'b, 'a>(mut e: &'b Expression<'a>) -> &'b Expression<'a> {
    loop {
        e = match e {
            Expression::ParenthesizedExpression(p) => &p.expression,
            Expression::TSAsExpression(t) => &t.expression,
            Expression::TSSatisfiesExpression(t) => &t.expression,
            Expression::TSNonNullExpression(t) => &t.expression,
            Expression::TSTypeAssertion(t) => &t.expression,
            Expression::AwaitExpression(a) => &a.argument,
            _ => return e,
        }
    }
}

/// `__ENV.NAME`.
pub(super) fn is_env(e: &Expression) -> bool {
    matches!(unwrap(e), Expression::StaticMemberExpression(m)
        if matches!(&m.object, Expression::Identifier(o) if o.name == "__ENV"))
}

/// `http.NAME` as a callee: NAME.
pub(super) fn http_callee<'b>(c: &'b CallExpression) -> Option<&'b str> {
    match &c.callee {
        Expression::StaticMemberExpression(m) if matches!(&m.object, Expression::Identifier(o) if o.name == "http") => {
            Some(m.property.name.as_str())
        }
        _ => None,
    }
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
    let mut cur = unwrap(e);
    loop {
        match cur {
            Expression::StaticMemberExpression(m) => {
                names.push(m.property.name.to_string());
                cur = unwrap(&m.object);
            }
            Expression::ComputedMemberExpression(m) => {
                let Expression::StringLiteral(s) = unwrap(&m.expression) else {
                    return None;
                };
                names.push(s.value.to_string());
                cur = unwrap(&m.object);
            }
            Expression::Identifier(_) if !names.is_empty() => break,
            _ => return None,
        }
    }
    names.reverse();
    Some(names.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_sites_skip_comments_and_strings_and_read_template_code() {
        let src = "import http from 'k6/http';\n// http.get('x')\nconst s = 'http.get(';\n\
                   http.get('a');\nx = `${http.post('b')}` + `http.del(`;\n/* http.put() */ \
                   http . patch ('c'); http.url`x`; myhttp.get(1)\n";
        let sites: Vec<_> = http_sites(src).into_values().collect();
        assert_eq!(
            sites,
            vec![
                (4, "get".to_string()),
                (5, "post".to_string()),
                (6, "patch".to_string())
            ]
        );
    }
}
