//! `${...}` templates in a step's URL, headers and body: parsed once at config load into
//! literal and variable pieces, so sending a request only pastes strings.
//!
//! Variables: `${vu}`, `${iter}`, `${uuid}`, `${random_int(a,b)}`, `${timestamp_ms}`,
//! `${data.COLUMN}` and captured names. `${env:..}` and `${file:..}` are config-time secrets:
//! the caller resolves them while compiling, and they become (sensitive) literals. `$${` is a
//! literal `${`.

use super::data::Row;
use std::collections::HashMap;
use std::fmt::Write as _;

/// A value known only when the request is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Var {
    /// The VU's number, from 1.
    Vu,
    /// The iteration's number in the run, from 0.
    Iter,
    /// A random UUID (version 4).
    Uuid,
    /// A random integer in `a..=b`.
    RandomInt(i64, i64),
    /// Milliseconds since the Unix epoch when the step is sent.
    TimestampMs,
    /// A column of the journey's data row.
    Data(usize),
    /// A value captured by an earlier step (its slot in the journey).
    Capture(usize),
}

/// How an inserted value is written: as is, as the inside of a JSON string, or
/// percent-encoded for a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    Raw,
    Json,
    Url,
}

#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Lit(String),
    Var(Var, Escape),
}

/// A compiled template.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Template {
    pieces: Vec<Piece>,
    /// Whether a config-time secret was pasted in (the result must be kept out of logs).
    pub sensitive: bool,
}

/// Up to how many captures an unknown variable's did-you-mean looks through.
const HINTED_CAPTURES: usize = 200;

/// What a template may name while it is compiled. Names are hashed: a journey of thousands
/// of captures compiles each variable with one lookup.
pub struct Scope<'a> {
    /// Captures set by earlier steps: name to slot.
    pub captures: &'a HashMap<String, usize>,
    /// Every capture with the last step that sets it: one not in `captures` and set at or
    /// after `step` (the step being compiled) is named before it is set.
    pub later: &'a HashMap<String, usize>,
    pub step: usize,
    /// The data file's columns, when the journey has one.
    pub columns: Option<&'a [String]>,
    /// The journey names a data file that did not load: its error says so, and `${data.…}`
    /// is not reported again as a journey without one.
    pub data_failed: bool,
}

/// Why a template does not compile; the message names the variable.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError(pub String);

/// Resolves `${env:..}` and `${file:..}` while compiling: `Ok(value)` or a message.
pub type Secrets<'a> = &'a mut dyn FnMut(&str, &str) -> Result<String, String>;

impl Template {
    /// A template of literal text only.
    pub fn literal(text: &str) -> Template {
        Template {
            pieces: vec![Piece::Lit(text.to_string())],
            sensitive: false,
        }
    }

    /// Parses `text`. Every unknown name, capture used before it is set and malformed
    /// reference is an error; all of them are returned.
    pub fn compile(
        text: &str,
        scope: &Scope<'_>,
        escape: Escape,
        secrets: Secrets<'_>,
    ) -> Result<Template, Vec<TemplateError>> {
        let mut t = Template::default();
        let mut errors = Vec::new();
        let mut lit = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            if rest[..start].ends_with('$') {
                // `$${` is a literal `${`.
                lit.push_str(&rest[..start - 1]);
                lit.push_str("${");
                rest = &rest[start + 2..];
                continue;
            }
            lit.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                errors.push(TemplateError("`${` without a closing `}`".into()));
                break;
            };
            let name = after[..end].trim();
            rest = &after[end + 1..];
            if let Some((kind @ ("env" | "file"), arg)) = name.split_once(':') {
                match secrets(kind, arg) {
                    Ok(v) => {
                        lit.push_str(&v);
                        t.sensitive = true;
                    }
                    Err(e) => errors.push(TemplateError(e)),
                }
                continue;
            }
            match parse_var(name, scope) {
                Ok(var) => {
                    if !lit.is_empty() {
                        t.pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                    }
                    t.pieces.push(Piece::Var(var, escape));
                }
                Err(e) => errors.push(e),
            }
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            t.pieces.push(Piece::Lit(lit));
        }
        if errors.is_empty() {
            Ok(t)
        } else {
            Err(errors)
        }
    }

    /// Appends literal text.
    pub fn push_literal(&mut self, text: &str) {
        match self.pieces.last_mut() {
            Some(Piece::Lit(s)) => s.push_str(text),
            _ => self.pieces.push(Piece::Lit(text.to_string())),
        }
    }

    /// Appends another template.
    pub fn append(&mut self, other: Template) {
        self.sensitive |= other.sensitive;
        for p in other.pieces {
            match p {
                Piece::Lit(s) => self.push_literal(&s),
                var => self.pieces.push(var),
            }
        }
    }

    /// This template as a JSON string: literal text escaped, quotes around (its variables
    /// should have been compiled with [`Escape::Json`]).
    pub fn into_json_string(self) -> Template {
        let mut out = Template {
            pieces: Vec::new(),
            sensitive: self.sensitive,
        };
        out.push_literal("\"");
        for p in self.pieces {
            match p {
                Piece::Lit(s) => {
                    let quoted = serde_json::to_string(&s).unwrap_or_default();
                    out.push_literal(quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or(""));
                }
                var => out.pieces.push(var),
            }
        }
        out.push_literal("\"");
        out
    }

    /// Whether the template has no variables (it renders the same every time).
    pub fn is_static(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Lit(_)))
    }

    /// The text of a static template (variables render empty).
    pub fn static_text(&self) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            if let Piece::Lit(s) = p {
                out.push_str(s);
            }
        }
        out
    }

    /// Whether the template uses a capture slot.
    pub fn uses_capture(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Var(Var::Capture(_), _)))
    }

    /// Whether the template pastes in a captured value or a data-file column: values that may
    /// be credentials, so a header made from them is marked sensitive.
    pub fn carries_values(&self) -> bool {
        self.pieces
            .iter()
            .any(|p| matches!(p, Piece::Var(Var::Capture(_) | Var::Data(_), _)))
    }

    /// Appends the rendered text to `out`.
    pub fn render(&self, values: &Values<'_>, out: &mut String) {
        for p in &self.pieces {
            match p {
                Piece::Lit(s) => out.push_str(s),
                Piece::Var(v, esc) => write_var(*v, *esc, values, out),
            }
        }
    }
}

/// The per-iteration values a template reads.
pub struct Values<'a> {
    pub vu: u64,
    pub iter: u64,
    pub now_ms: u64,
    /// The data row.
    pub row: Option<Row<'a>>,
    /// Captured values by slot; `None` when not (yet) captured.
    pub captures: &'a [Option<String>],
}

fn parse_var(name: &str, scope: &Scope<'_>) -> Result<Var, TemplateError> {
    match name {
        "vu" => return Ok(Var::Vu),
        "iter" => return Ok(Var::Iter),
        "uuid" => return Ok(Var::Uuid),
        "timestamp_ms" => return Ok(Var::TimestampMs),
        _ => {}
    }
    if let Some(args) = name
        .strip_prefix("random_int(")
        .and_then(|a| a.strip_suffix(')'))
    {
        let parsed: Option<(i64, i64)> = args
            .split_once(',')
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
        return match parsed {
            Some((a, b)) if a <= b => Ok(Var::RandomInt(a, b)),
            Some((a, b)) => Err(TemplateError(format!(
                "`${{random_int({a},{b})}}`: the first bound must not exceed the second"
            ))),
            None => Err(TemplateError(format!(
                "`${{{name}}}`: write `${{random_int(A,B)}}` with two integers"
            ))),
        };
    }
    if let Some(col) = name.strip_prefix("data.") {
        let Some(columns) = scope.columns else {
            if scope.data_failed {
                // The config is refused for the file; this value is never rendered.
                return Ok(Var::Data(0));
            }
            return Err(TemplateError(format!(
                "`${{{name}}}`: the journey has no `data` file"
            )));
        };
        return match columns.iter().position(|c| c == col) {
            Some(i) => Ok(Var::Data(i)),
            None => Err(TemplateError(format!(
                "`${{{name}}}`: the data file has no column `{col}` (columns: {})",
                some_columns(columns)
            ))),
        };
    }
    if let Some(slot) = scope.captures.get(name) {
        return Ok(Var::Capture(*slot));
    }
    if scope.later.get(name).is_some_and(|at| *at >= scope.step) {
        return Err(TemplateError(format!(
            "`${{{name}}}` is used before it is captured: it is set by this or a later step"
        )));
    }
    // Past `HINTED_CAPTURES` only the built-ins are suggested: each unknown name would
    // otherwise be compared with every capture.
    let captures = (scope.captures.len() <= HINTED_CAPTURES)
        .then_some(scope.captures.keys().map(String::as_str))
        .into_iter()
        .flatten();
    let known: Vec<&str> = captures
        .chain(["vu", "iter", "uuid", "timestamp_ms"])
        .collect();
    let hint = known
        .iter()
        .map(|k| (strsim::levenshtein(k, name), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| format!(" (did you mean `${{{k}}}`?)"))
        .unwrap_or_default();
    Err(TemplateError(format!(
        "unknown variable `${{{name}}}`{hint}: use a captured name, `${{data.COLUMN}}`, \
         `${{vu}}`, `${{iter}}`, `${{uuid}}`, `${{random_int(a,b)}}` or `${{timestamp_ms}}`"
    )))
}

/// The first columns by name, the rest counted: a file may have thousands.
fn some_columns(columns: &[String]) -> String {
    const SHOWN: usize = 20;
    let mut list = columns[..columns.len().min(SHOWN)].join(", ");
    if columns.len() > SHOWN {
        let _ = write!(list, " and {} more", columns.len() - SHOWN);
    }
    list
}

fn write_var(v: Var, esc: Escape, values: &Values<'_>, out: &mut String) {
    match v {
        // Numbers and UUIDs need no escaping in any context.
        Var::Vu => {
            let _ = write!(out, "{}", values.vu);
        }
        Var::Iter => {
            let _ = write!(out, "{}", values.iter);
        }
        Var::TimestampMs => {
            let _ = write!(out, "{}", values.now_ms);
        }
        Var::RandomInt(a, b) => {
            let _ = write!(out, "{}", rand::random_range(a..=b));
        }
        Var::Uuid => {
            let id = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
            let _ = write!(out, "{}", id.hyphenated());
        }
        Var::Data(col) => {
            if let Some(s) = values.row.and_then(|r| r.get(col)) {
                escaped(s, esc, out);
            }
        }
        Var::Capture(slot) => {
            if let Some(Some(s)) = values.captures.get(slot) {
                escaped(s, esc, out);
            }
        }
    }
}

fn escaped(s: &str, esc: Escape, out: &mut String) {
    match esc {
        Escape::Raw => out.push_str(s),
        Escape::Json => {
            // serde_json writes a quoted string; keep its inside.
            let quoted = serde_json::to_string(s).unwrap_or_default();
            out.push_str(quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or(""));
        }
        Escape::Url => {
            let _ = write!(
                out,
                "{}",
                percent_encoding::utf8_percent_encode(s, URL_VALUE)
            );
        }
    }
}

/// Bytes a value pasted into a URL keeps as they are: RFC 3986's unreserved characters (the
/// restore's query parameters are encoded with it too).
pub const URL_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// k6's `name` tag of a templated URL as written: each value known only when the request is
/// sent (`${item}`, `${vu}`, `${data.id}`, …) becomes `${}`, as k6 names a URL built with
/// `http.url` (`http://shop/items/${}`), so a filter written for k6 matches. `${env:..}` and
/// `${file:..}` are constants of the config and stay as written (never their value); `$${` is
/// the literal `${`.
pub fn k6_name(written: &str) -> String {
    let mut out = String::with_capacity(written.len());
    let mut rest = written;
    while let Some(start) = rest.find("${") {
        if rest[..start].ends_with('$') {
            out.push_str(&rest[..start - 1]);
            out.push_str("${");
            rest = &rest[start + 2..];
            continue;
        }
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = after[..end].trim();
        if matches!(name.split_once(':'), Some(("env" | "file", _))) {
            out.push_str(&rest[start..start + 2 + end + 1]);
        } else {
            out.push_str("${}");
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// k6 names `http.url`\`http://shop/items/${id}\`` `http://shop/items/${}`: a filter
    /// ported from k6 (`{name:http://shop/items/${}}`) counted 0 against `…/${item}`.
    #[test]
    fn the_k6_name_of_a_templated_url_has_empty_expressions() {
        let cases = [
            ("http://shop/items/${item}", "http://shop/items/${}"),
            (
                "http://shop/u/${data.user}/o/${ random_int(1,5) }?x",
                "http://shop/u/${}/o/${}?x",
            ),
            ("http://${env:HOST}/a/${vu}", "http://${env:HOST}/a/${}"),
            ("http://shop/price/$${item}", "http://shop/price/${item}"),
            ("http://shop/plain", "http://shop/plain"),
            ("http://shop/${open", "http://shop/${open"),
        ];
        for (written, name) in cases {
            assert_eq!(k6_name(written), name, "{written}");
        }
    }

    fn no_secrets(_: &str, _: &str) -> Result<String, String> {
        Err("no secrets here".into())
    }

    fn compile(text: &str, scope: &Scope<'_>, esc: Escape) -> Result<Template, Vec<TemplateError>> {
        Template::compile(text, scope, esc, &mut no_secrets)
    }

    fn render(t: &Template, captures: &[Option<String>], row: Option<Row<'_>>) -> String {
        let mut out = String::new();
        t.render(
            &Values {
                vu: 3,
                iter: 41,
                now_ms: 1_700_000_000_123,
                row,
                captures,
            },
            &mut out,
        );
        out
    }

    #[test]
    fn builtins_captures_and_data_render() {
        let captures = HashMap::from([("token".to_string(), 0)]);
        let columns = ["user".to_string(), "password".to_string()];
        let scope = Scope {
            captures: &captures,
            later: &HashMap::new(),
            step: 0,
            columns: Some(&columns),
            data_failed: false,
        };
        let t = compile(
            "/u/${data.user}/${vu}-${iter}?t=${token}&at=${timestamp_ms}",
            &scope,
            Escape::Url,
        )
        .unwrap();
        assert!(!t.is_static() && t.uses_capture());
        let data = crate::journey::DataSet::parse(
            b"user,password\n\"a b/c\",x\nu,\"q\"\"uote\\\"\n",
            false,
        )
        .unwrap();
        assert_eq!(
            render(&t, &[Some("tok&1".into())], data.row(0)),
            "/u/a%20b%2Fc/3-41?t=tok%261&at=1700000000123"
        );
        let j = compile("{\"p\":\"${data.password}\"}", &scope, Escape::Json).unwrap();
        assert_eq!(render(&j, &[None], data.row(1)), r#"{"p":"q\"uote\\"}"#);
    }

    #[test]
    fn random_builtins_stay_in_range_and_are_well_formed() {
        let scope = Scope {
            captures: &HashMap::new(),
            later: &HashMap::new(),
            step: 0,
            columns: None,
            data_failed: false,
        };
        let t = compile("${random_int(5, 7)}", &scope, Escape::Raw).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..300 {
            seen.insert(render(&t, &[], None).parse::<i64>().unwrap());
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [5, 6, 7]);
        let u = compile("${uuid}", &scope, Escape::Raw).unwrap();
        let (a, b) = (render(&u, &[], None), render(&u, &[], None));
        assert_ne!(a, b);
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
    }

    #[test]
    fn unknown_names_and_early_captures_are_errors() {
        let captures = HashMap::from([("token".to_string(), 0)]);
        let later = HashMap::from([("cart_id".to_string(), 0)]);
        let scope = Scope {
            captures: &captures,
            later: &later,
            step: 0,
            columns: None,
            data_failed: false,
        };
        let errs = compile(
            "${tokn} ${cart_id} ${data.x} ${random_int(9,1)} ${x",
            &scope,
            Escape::Raw,
        )
        .unwrap_err();
        let text: Vec<&str> = errs.iter().map(|e| e.0.as_str()).collect();
        assert!(text[0].contains("unknown variable `${tokn}`") && text[0].contains("`${token}`"));
        assert!(text[1].contains("before it is captured"), "{text:?}");
        assert!(text[2].contains("no `data` file"), "{text:?}");
        assert!(text[3].contains("must not exceed"), "{text:?}");
        assert!(text[4].contains("without a closing"), "{text:?}");
    }

    #[test]
    fn json_strings_escape_literals_and_values() {
        let captures = HashMap::from([("t".to_string(), 0)]);
        let scope = Scope {
            captures: &captures,
            later: &HashMap::new(),
            step: 0,
            columns: None,
            data_failed: false,
        };
        let mut t = Template::literal("{\"a\":");
        t.append(
            compile("say \"hi\" ${t}", &scope, Escape::Json)
                .unwrap()
                .into_json_string(),
        );
        t.push_literal("}");
        let out = render(&t, &[Some("x\ny".into())], None);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a"], "say \"hi\" x\ny");
    }

    #[test]
    fn secrets_become_sensitive_literals_and_dollar_escapes() {
        let scope = Scope {
            captures: &HashMap::new(),
            later: &HashMap::new(),
            step: 0,
            columns: None,
            data_failed: false,
        };
        let mut env = |kind: &str, arg: &str| match (kind, arg) {
            ("env", "TOKEN") => Ok("s3cret".to_string()),
            _ => Err(format!("`{arg}` is not set")),
        };
        let t =
            Template::compile("Bearer ${env:TOKEN} $${vu}", &scope, Escape::Raw, &mut env).unwrap();
        assert!(t.sensitive && t.is_static());
        assert_eq!(t.static_text(), "Bearer s3cret ${vu}");
    }
}
