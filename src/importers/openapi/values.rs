//! An operation's request: parameters and bodies from examples, defaults, enums, then types.
//!
//! Made under an [`Expansion`] bound: a schema whose `$ref`s fan out (each property the next
//! schema, many times over) would grow exponentially with its depth; each value made or
//! copied is weighed against [`MAX_EXAMPLE_BYTES`] per operation and [`MAX_TOTAL_BYTES`] per
//! document, and past either the operation is not converted, the `$ref` it was in named.

use serde_json::{Map, Value as J};

use super::*;

/// The most bytes (about: JSON text) of values made for one operation's request.
pub const MAX_EXAMPLE_BYTES: usize = 1 << 20;
/// The most bytes of values made for every operation of a document together.
pub const MAX_TOTAL_BYTES: usize = 32 << 20;

/// What is left to make, and what was met on the way.
#[derive(Debug)]
pub(super) struct Expansion {
    op_left: usize,
    total_left: usize,
    /// The `$ref` (or `the schema`) being made when a bound was reached.
    pub(super) past: Option<String>,
    /// `$ref`s into other files met in schemas (their values are left null).
    pub(super) external: Vec<String>,
    /// The innermost `$ref` followed, to name where a bound was reached.
    at: Vec<String>,
}

impl Expansion {
    pub(super) fn new() -> Expansion {
        Expansion {
            op_left: MAX_EXAMPLE_BYTES,
            total_left: MAX_TOTAL_BYTES,
            past: None,
            external: Vec::new(),
            at: Vec::new(),
        }
    }

    /// A fresh per-operation bound; the document's stays as spent.
    pub(super) fn next_operation(&mut self) {
        self.op_left = MAX_EXAMPLE_BYTES;
        self.past = None;
        self.external.clear();
        self.at.clear();
    }

    /// Charges `v`'s weight; false (and the place noted) when it does not fit.
    fn charge(&mut self, v: &J) -> bool {
        let left = self.op_left.min(self.total_left);
        self.spend(weigh(v, left).unwrap_or(usize::MAX))
    }

    /// Charges `n` bytes; false (and the place noted) when they do not fit.
    fn spend(&mut self, n: usize) -> bool {
        if self.past.is_some() {
            return false;
        }
        if n > self.op_left.min(self.total_left) {
            let at = self
                .at
                .last()
                .cloned()
                .unwrap_or_else(|| "the schema".into());
            self.past = Some(at);
            return false;
        }
        self.op_left -= n;
        self.total_left -= n;
        true
    }

    /// Why the operation cannot be made, when a bound was reached.
    pub(super) fn check(&self) -> Result<(), String> {
        match &self.past {
            None => Ok(()),
            Some(at) if self.total_left == 0 || self.total_left < self.op_left => Err(format!(
                "the values made for the document's operations grow past {} MiB (at `{at}`): \
                 give its schemas `example`s",
                MAX_TOTAL_BYTES >> 20
            )),
            Some(at) => Err(format!(
                "the example made from `{at}` grows past {} MiB (its `$ref`s fan out): give \
                 the schema an `example`",
                MAX_EXAMPLE_BYTES >> 20
            )),
        }
    }
}

/// About the JSON size of `v`, or `None` once it passes `limit` (never walking further).
fn weigh(v: &J, limit: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total += match v {
            J::String(s) => s.len() + 2,
            J::Array(items) => {
                stack.extend(items);
                2
            }
            J::Object(m) => {
                for (k, v) in m {
                    total += k.len() + 4;
                    stack.push(v);
                }
                2
            }
            _ => 8,
        };
        if total > limit {
            return None;
        }
    }
    Some(total)
}

pub(super) fn operation(
    doc: &J,
    path: &str,
    method: &str,
    op: &J,
    shared: Option<&Vec<J>>,
    left_out: &mut Vec<String>,
    ex: &mut Expansion,
) -> Result<Op, String> {
    ex.next_operation();
    let id = op
        .get("operationId")
        .and_then(J::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{method} {path}"));
    let params = parameters(doc, op, shared)?;
    let (filled, headers) = fill(doc, path, params, ex)?;
    let body = body(doc, op, left_out, ex)?;
    ex.check()?;
    for r in ex.external.drain(..) {
        left_out.push(format!(
            "`$ref: {r}` is in another file: its value is left null"
        ));
    }
    let mut statuses: Vec<u16> = op
        .get("responses")
        .and_then(J::as_object)
        .map(|r| {
            r.keys()
                .filter_map(|k| k.parse::<u16>().ok())
                .filter(|s| (200..400).contains(s))
                .collect()
        })
        .unwrap_or_default();
    statuses.sort_unstable();
    let summary = op
        .get("summary")
        .and_then(J::as_str)
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    Ok(Op {
        name: crate::importers::config_name(&id),
        id,
        method: method.to_ascii_uppercase(),
        path: filled,
        headers,
        auth: Vec::new(),
        body,
        statuses,
        summary,
    })
}

/// The path item's parameters (`shared`) and the operation's, `$ref`s followed; an
/// operation's parameter replaces the path item's of the same name and place.
fn parameters<'a>(doc: &'a J, op: &'a J, shared: Option<&'a Vec<J>>) -> Result<Vec<&'a J>, String> {
    let mut params: Vec<&J> = Vec::new();
    for p in shared.into_iter().flatten().chain(
        op.get("parameters")
            .and_then(J::as_array)
            .into_iter()
            .flatten(),
    ) {
        if let Some(r) = external_ref(p) {
            return Err(format!("parameter `$ref: {r}` is in another file"));
        }
        let p = resolve(doc, p);
        params.retain(|q| !(q.get("name") == p.get("name") && q.get("in") == p.get("in")));
        params.push(p);
    }
    Ok(params)
}

/// The path with its parameters filled and its query appended (required or exemplified
/// parameters), and the required headers.
fn fill(
    doc: &J,
    path: &str,
    params: Vec<&J>,
    ex: &mut Expansion,
) -> Result<(String, Vec<(String, String)>), String> {
    let mut filled = path.to_string();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    for p in params {
        let name = p.get("name").and_then(J::as_str).unwrap_or_default();
        let place = p.get("in").and_then(J::as_str).unwrap_or_default();
        let required = p.get("required").and_then(J::as_bool).unwrap_or(false);
        let explicit = p.get("example").is_some() || p.get("examples").is_some();
        let value = param_value(doc, p, ex);
        match place {
            "path" => filled = filled.replace(&format!("{{{name}}}"), &encode(&text_of(&value))),
            "query" if required || explicit => match &value {
                J::Array(items) => {
                    for i in items {
                        query.push(format!("{}={}", encode(name), encode(&text_of(i))));
                    }
                }
                v => query.push(format!("{}={}", encode(name), encode(&text_of(v)))),
            },
            "header" if required => headers.push((name.to_string(), text_of(&value))),
            "cookie" if required => {
                return Err(format!("required cookie parameter `{name}`"));
            }
            _ => {}
        }
    }
    if filled.contains('{') {
        return Err(format!("path parameters of `{path}` are not declared"));
    }
    if !query.is_empty() {
        filled = format!("{filled}?{}", query.join("&"));
    }
    Ok((filled, headers))
}

/// The request body: a required one that cannot be made leaves the operation out, an
/// optional one is left out of the request (noted in `left_out`).
fn body(
    doc: &J,
    op: &J,
    left_out: &mut Vec<String>,
    ex: &mut Expansion,
) -> Result<Option<(String, String)>, String> {
    let Some(rb) = op.get("requestBody") else {
        return Ok(None);
    };
    if let Some(r) = external_ref(rb) {
        return Err(format!("request body `$ref: {r}` is in another file"));
    }
    let rb = resolve(doc, rb);
    let required = rb.get("required").and_then(J::as_bool).unwrap_or(false);
    match request_body(doc, rb, ex) {
        Ok(b) => Ok(Some(b)),
        Err(why) if required => Err(why),
        Err(why) => {
            left_out.push(format!("{why}: sent without a body"));
            Ok(None)
        }
    }
}

/// A parameter's value: its `example`, the first of its `examples`, else its schema's.
pub(super) fn param_value(doc: &J, p: &J, ex: &mut Expansion) -> J {
    if let Some(e) = p.get("example") {
        return copied(e, ex);
    }
    if let Some(e) = first_example(doc, p) {
        return copied(&e, ex);
    }
    let schema = p.get("schema").unwrap_or(&J::Null);
    example(doc, schema, 0, ex)
}

/// `v` copied when it fits what is left, else null (the bound noted).
fn copied(v: &J, ex: &mut Expansion) -> J {
    if ex.charge(v) { v.clone() } else { J::Null }
}

pub(super) fn first_example(doc: &J, v: &J) -> Option<J> {
    let examples = v.get("examples")?.as_object()?;
    let (_, e) = examples.iter().next()?;
    resolve(doc, e).get("value").cloned()
}

/// The body to send and its content type: JSON when the operation takes it, else a form.
pub(super) fn request_body(
    doc: &J,
    rb: &J,
    ex: &mut Expansion,
) -> Result<(String, String), String> {
    let content = rb
        .get("content")
        .and_then(J::as_object)
        .ok_or("a request body without `content`")?;
    let pick = content
        .iter()
        .find(|(t, _)| t.starts_with("application/json") || t.ends_with("+json"))
        .or_else(|| {
            content
                .iter()
                .find(|(t, _)| *t == "application/x-www-form-urlencoded")
        });
    let Some((ctype, media)) = pick else {
        let types: Vec<&str> = content.keys().map(String::as_str).collect();
        return Err(format!("a request body only in {}", types.join(", ")));
    };
    let value = match media.get("example") {
        Some(e) => copied(e, ex),
        None => match first_example(doc, media) {
            Some(e) => copied(&e, ex),
            None => example(doc, media.get("schema").unwrap_or(&J::Null), 0, ex),
        },
    };
    ex.check()?;
    let text = if ctype.starts_with("application/x-www-form-urlencoded") {
        match &value {
            J::Object(m) => m
                .iter()
                .filter(|(_, v)| !v.is_object() && !v.is_array())
                .map(|(k, v)| format!("{}={}", encode(k), encode(&text_of(v))))
                .collect::<Vec<_>>()
                .join("&"),
            v => text_of(v),
        }
    } else {
        value.to_string()
    };
    Ok((ctype.clone(), text))
}

/// A value for `schema`: its example, default or first enum value, else one made from its type
/// and format (objects with every property, arrays of one item), within `ex`'s bounds. The
/// `$ref` followed is kept on `ex` while its value is made, to name it past a bound.
pub(super) fn example(doc: &J, schema: &J, depth: usize, ex: &mut Expansion) -> J {
    let followed = schema.get("$ref").and_then(J::as_str);
    if let Some(r) = followed.filter(|r| !r.starts_with('#')) {
        if !ex.external.iter().any(|e| e == r) {
            ex.external.push(r.to_string());
        }
        return J::Null;
    }
    if let Some(r) = followed {
        ex.at.push(r.to_string());
    }
    let v = made(doc, resolve(doc, schema), depth, ex);
    if followed.is_some() {
        ex.at.pop();
    }
    v
}

fn made(doc: &J, schema: &J, depth: usize, ex: &mut Expansion) -> J {
    // Every value made is charged, a copied one at its weight.
    if !ex.spend(8) {
        return J::Null;
    }
    for key in ["example", "default", "const"] {
        if let Some(v) = schema.get(key) {
            return coerce(schema, copied(v, ex));
        }
    }
    if let Some(v) = schema
        .get("examples")
        .and_then(J::as_array)
        .and_then(|a| a.first())
    {
        return coerce(schema, copied(v, ex));
    }
    if let Some(v) = schema
        .get("enum")
        .and_then(J::as_array)
        .and_then(|a| a.first())
    {
        return copied(v, ex);
    }
    if depth >= MAX_DEPTH {
        return J::Null;
    }
    composed(doc, schema, depth, ex).unwrap_or_else(|| by_type(doc, schema, depth, ex))
}

/// The value of an `allOf` (merged) or a `oneOf`/`anyOf` (its first), if `schema` is one.
fn composed(doc: &J, schema: &J, depth: usize, ex: &mut Expansion) -> Option<J> {
    if let Some(all) = schema.get("allOf").and_then(J::as_array) {
        let mut merged = Map::new();
        for part in all {
            if let J::Object(m) = example(doc, part, depth + 1, ex) {
                merged.extend(m);
            }
        }
        return Some(J::Object(merged));
    }
    ["oneOf", "anyOf"].into_iter().find_map(|key| {
        let first = schema.get(key).and_then(J::as_array)?.first()?;
        Some(example(doc, first, depth + 1, ex))
    })
}

/// A value made from `schema`'s type and format.
fn by_type(doc: &J, schema: &J, depth: usize, ex: &mut Expansion) -> J {
    let ty = match schema.get("type") {
        Some(J::String(t)) => t.as_str(),
        // 3.1: `type: [string, "null"]`.
        Some(J::Array(ts)) => ts
            .iter()
            .filter_map(J::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "",
    };
    let format = schema.get("format").and_then(J::as_str).unwrap_or_default();
    match ty {
        "object" => {
            let mut m = Map::new();
            if let Some(props) = schema.get("properties").and_then(J::as_object) {
                for (k, v) in props {
                    if resolve(doc, v).get("readOnly").and_then(J::as_bool) == Some(true) {
                        continue;
                    }
                    if !ex.spend(k.len() + 4) {
                        break;
                    }
                    m.insert(k.clone(), example(doc, v, depth + 1, ex));
                }
            }
            J::Object(m)
        }
        "array" => {
            let item = schema.get("items").unwrap_or(&J::Null);
            J::Array(vec![example(doc, item, depth + 1, ex)])
        }
        "integer" => J::from(
            schema
                .get("minimum")
                .and_then(J::as_i64)
                .unwrap_or(1)
                .max(1),
        ),
        "number" => J::from(schema.get("minimum").and_then(J::as_f64).unwrap_or(1.0)),
        "boolean" => J::Bool(true),
        "string" => J::String(
            match format {
                "date-time" => "2026-01-01T00:00:00Z",
                "date" => "2026-01-01",
                "email" => "user@example.com",
                "uuid" => "00000000-0000-4000-8000-000000000000",
                "uri" | "url" => "https://example.com/",
                "ipv4" => "192.0.2.1",
                _ => "example",
            }
            .to_string(),
        ),
        _ => J::Null,
    }
}

/// A schema typed `string` keeps its example a string (`example: 12345` in YAML is a number).
pub(super) fn coerce(schema: &J, v: J) -> J {
    match (schema.get("type").and_then(J::as_str), &v) {
        (Some("string"), J::Number(n)) => J::String(n.to_string()),
        (Some("string"), J::Bool(b)) => J::String(b.to_string()),
        _ => v,
    }
}

pub(super) fn text_of(v: &J) -> String {
    match v {
        J::String(s) => s.clone(),
        J::Null => String::new(),
        J::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}
