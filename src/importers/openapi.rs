//! `sloburn import openapi FILE`: an OpenAPI 3.0 or 3.1 document (JSON or YAML) as a sloburn
//! config. Each operation becomes a target (URL with its path and required query parameters
//! filled from the document's examples, a JSON body from the request body's example or schema,
//! a `status` check on its documented 2xx/3xx codes) and a profile; or, with `--journey`, the
//! chosen operations become the steps of one journey over one target.
//!
//! Values come from, in order: the parameter's or media type's `example`/`examples`, the
//! schema's `example`, `default`, first `enum` value, then one made from the type and format.
//! `$ref`s inside the document are followed (at most 32 deep); an operation that needs
//! something that cannot be made (an external `$ref`, a binary upload) is listed on stderr
//! and left out, never dropped in silence.

use std::fmt::Write as _;

use serde_json::{Map, Value as J};

use crate::rules::quote;

/// What `sloburn import openapi` was asked for.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Scheme, host and port the requests go to; the server URL's path is kept.
    pub base_url: Option<String>,
    /// Each profile's (or the journey profile's) arrival rate, e.g. `1/s`.
    pub rate: String,
    /// One journey of this name over `operations` (all, in document order, when empty).
    pub journey: Option<String>,
    pub operations: Vec<String>,
}

/// The config, and what was not converted (each a line for stderr).
#[derive(Debug)]
pub struct Imported {
    pub yaml: String,
    pub notes: Vec<String>,
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];
const MAX_REF_HOPS: usize = 32;
const MAX_DEPTH: usize = 8;

/// One operation, made concrete.
#[derive(Debug)]
struct Op {
    name: String,
    id: String,
    method: String,
    /// The path after the server's, parameters filled, query appended.
    path: String,
    headers: Vec<(String, String)>,
    body: Option<(String, String)>,
    statuses: Vec<u16>,
    summary: String,
}

pub fn import(text: &str, file: &str, opts: &Options) -> Result<Imported, String> {
    let document = crate::config::Document::parse(text).map_err(|e| {
        format!(
            "{file}:{}:{}: not JSON or YAML: {}",
            e.line, e.col, e.message
        )
    })?;
    let doc = &document.value;
    match doc.get("openapi").and_then(J::as_str) {
        Some(v) if v.starts_with("3.") => {}
        Some(v) => {
            return Err(format!(
                "{file}: OpenAPI {v} is not supported: give a 3.x document"
            ));
        }
        None if doc.get("swagger").is_some() => {
            return Err(format!(
                "{file}: a Swagger 2.0 document: convert it to OpenAPI 3 first (e.g. swagger2openapi)"
            ));
        }
        None => {
            return Err(format!(
                "{file}: no `openapi` field: not an OpenAPI document"
            ));
        }
    }
    let base = base_url(doc, opts.base_url.as_deref())?;
    let mut notes = Vec::new();
    let mut ops = Vec::new();
    let paths = doc
        .get("paths")
        .and_then(J::as_object)
        .ok_or_else(|| format!("{file}: no `paths`"))?;
    // In document order (the JSON value's map is sorted).
    let order: Vec<&str> = document.keys("/paths").iter().map(String::as_str).collect();
    for path in order {
        let Some(item) = paths.get(path) else {
            continue;
        };
        let item = resolve(doc, item);
        let shared = item.get("parameters").and_then(J::as_array);
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let mut left_out = Vec::new();
            match operation(doc, path, method, op, shared, &mut left_out) {
                Ok(op) => {
                    notes.extend(left_out.into_iter().map(|why| {
                        format!("{} {path} ({}): {why}", method.to_ascii_uppercase(), op.id)
                    }));
                    ops.push(op)
                }
                Err(why) => notes.push(format!(
                    "not converted: {} {path}: {why}",
                    method.to_ascii_uppercase()
                )),
            }
        }
    }
    // Names are unique: a second operation of the same name gets a number.
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for op in &mut ops {
        let n = seen.entry(op.name.clone()).or_default();
        *n += 1;
        if *n > 1 {
            op.name = format!("{}-{n}", op.name);
        }
    }
    let title = doc
        .pointer("/info/title")
        .and_then(J::as_str)
        .unwrap_or("an OpenAPI document");
    let mut out = format!(
        "# Imported by `sloburn import openapi` from {file} ({title}).\n# Review the example values and the rates, then add schedules and SLOs.\n"
    );
    match &opts.journey {
        Some(journey) => {
            let chosen: Vec<&Op> = if opts.operations.is_empty() {
                ops.iter().collect()
            } else {
                let mut v = Vec::new();
                for want in &opts.operations {
                    match ops.iter().find(|o| &o.id == want || &o.name == want) {
                        Some(o) => v.push(o),
                        None => {
                            return Err(format!(
                                "--operations: no operation `{want}` in {file} (there are {})",
                                ops.iter()
                                    .map(|o| o.id.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ));
                        }
                    }
                }
                v
            };
            if chosen.is_empty() {
                return Err(format!("{file}: no operation to put in a journey"));
            }
            write_journey(&mut out, journey, &base, &chosen, &opts.rate);
        }
        None => {
            if !opts.operations.is_empty() {
                ops.retain(|o| opts.operations.iter().any(|w| w == &o.id || w == &o.name));
            }
            if ops.is_empty() {
                return Err(format!("{file}: no operation to import"));
            }
            write_profiles(&mut out, &base, &ops, &opts.rate);
        }
    }
    Ok(Imported { yaml: out, notes })
}

/// The server URL (its variables at their defaults) with `--base-url`'s scheme, host and port.
fn base_url(doc: &J, given: Option<&str>) -> Result<String, String> {
    let server = doc.pointer("/servers/0");
    let mut url = server
        .and_then(|s| s.get("url"))
        .and_then(J::as_str)
        .unwrap_or("/")
        .to_string();
    if let Some(vars) = server
        .and_then(|s| s.get("variables"))
        .and_then(J::as_object)
    {
        for (name, v) in vars {
            let default = v.get("default").and_then(J::as_str).unwrap_or_default();
            url = url.replace(&format!("{{{name}}}"), default);
        }
    }
    let (scheme_host, path) = match url.split_once("://") {
        Some((scheme, rest)) => {
            let slash = rest.find('/').unwrap_or(rest.len());
            (
                Some(format!("{scheme}://{}", &rest[..slash])),
                rest[slash..].to_string(),
            )
        }
        None => (None, url.clone()),
    };
    let origin = match (given, scheme_host) {
        (Some(g), _) => {
            let g = g.trim_end_matches('/');
            let parsed: http::Uri = g
                .parse()
                .map_err(|e| format!("--base-url `{g}` is not a URL: {e}"))?;
            if !matches!(parsed.scheme_str(), Some("http" | "https")) || parsed.host().is_none() {
                return Err(format!(
                    "--base-url `{g}`: give http://HOST[:PORT] or https://…"
                ));
            }
            g.to_string()
        }
        (None, Some(o)) => o,
        (None, None) => {
            return Err(format!(
                "the server URL `{url}` is relative: give --base-url http://HOST[:PORT]"
            ));
        }
    };
    Ok(format!("{origin}{}", path.trim_end_matches('/')))
}

/// Follows `$ref`s inside the document (`#/…`); an unresolvable one stays as it is.
fn resolve<'a>(doc: &'a J, mut v: &'a J) -> &'a J {
    for _ in 0..MAX_REF_HOPS {
        match v.get("$ref").and_then(J::as_str) {
            Some(r) if r.starts_with('#') => match doc.pointer(&r[1..]) {
                Some(next) => v = next,
                None => return v,
            },
            _ => return v,
        }
    }
    v
}

fn external_ref(v: &J) -> Option<&str> {
    v.get("$ref")
        .and_then(J::as_str)
        .filter(|r| !r.starts_with('#'))
}

fn operation(
    doc: &J,
    path: &str,
    method: &str,
    op: &J,
    shared: Option<&Vec<J>>,
    left_out: &mut Vec<String>,
) -> Result<Op, String> {
    let id = op
        .get("operationId")
        .and_then(J::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{method} {path}"));
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
        // An operation's parameter replaces the path item's of the same name and place.
        params.retain(|q| !(q.get("name") == p.get("name") && q.get("in") == p.get("in")));
        params.push(p);
    }
    let mut filled = path.to_string();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    for p in params {
        let name = p.get("name").and_then(J::as_str).unwrap_or_default();
        let place = p.get("in").and_then(J::as_str).unwrap_or_default();
        let required = p.get("required").and_then(J::as_bool).unwrap_or(false);
        let explicit = p.get("example").is_some() || p.get("examples").is_some();
        let value = param_value(doc, p);
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
    let body = match op.get("requestBody") {
        None => None,
        Some(rb) => {
            if let Some(r) = external_ref(rb) {
                return Err(format!("request body `$ref: {r}` is in another file"));
            }
            let rb = resolve(doc, rb);
            let required = rb.get("required").and_then(J::as_bool).unwrap_or(false);
            match request_body(doc, rb) {
                Ok(b) => Some(b),
                Err(why) if required => return Err(why),
                Err(why) => {
                    left_out.push(format!("{why}: sent without a body"));
                    None
                }
            }
        }
    };
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
        name: super::config_name(&id),
        id,
        method: method.to_ascii_uppercase(),
        path: filled,
        headers,
        body,
        statuses,
        summary,
    })
}

/// A parameter's value: its `example`, the first of its `examples`, else its schema's.
fn param_value(doc: &J, p: &J) -> J {
    if let Some(e) = p.get("example") {
        return e.clone();
    }
    if let Some(e) = first_example(doc, p) {
        return e;
    }
    let schema = p.get("schema").map_or(&J::Null, |s| resolve(doc, s));
    example(doc, schema, 0)
}

fn first_example(doc: &J, v: &J) -> Option<J> {
    let examples = v.get("examples")?.as_object()?;
    let (_, e) = examples.iter().next()?;
    resolve(doc, e).get("value").cloned()
}

/// The body to send and its content type: JSON when the operation takes it, else a form.
fn request_body(doc: &J, rb: &J) -> Result<(String, String), String> {
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
        Some(e) => e.clone(),
        None => match first_example(doc, media) {
            Some(e) => e,
            None => {
                let schema = media.get("schema").map_or(&J::Null, |s| resolve(doc, s));
                example(doc, schema, 0)
            }
        },
    };
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
/// and format (objects with every property, arrays of one item).
fn example(doc: &J, schema: &J, depth: usize) -> J {
    let schema = resolve(doc, schema);
    for key in ["example", "default", "const"] {
        if let Some(v) = schema.get(key) {
            return coerce(schema, v.clone());
        }
    }
    if let Some(v) = schema
        .get("examples")
        .and_then(J::as_array)
        .and_then(|a| a.first())
    {
        return coerce(schema, v.clone());
    }
    if let Some(v) = schema
        .get("enum")
        .and_then(J::as_array)
        .and_then(|a| a.first())
    {
        return v.clone();
    }
    if depth >= MAX_DEPTH {
        return J::Null;
    }
    if let Some(all) = schema.get("allOf").and_then(J::as_array) {
        let mut merged = Map::new();
        for part in all {
            if let J::Object(m) = example(doc, part, depth + 1) {
                merged.extend(m);
            }
        }
        return J::Object(merged);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(J::as_array)
            .and_then(|a| a.first())
        {
            return example(doc, first, depth + 1);
        }
    }
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
                    let r = resolve(doc, v);
                    if r.get("readOnly").and_then(J::as_bool) == Some(true) {
                        continue;
                    }
                    m.insert(k.clone(), example(doc, r, depth + 1));
                }
            }
            J::Object(m)
        }
        "array" => {
            let item = schema.get("items").map_or(&J::Null, |i| resolve(doc, i));
            J::Array(vec![example(doc, item, depth + 1)])
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
fn coerce(schema: &J, v: J) -> J {
    match (schema.get("type").and_then(J::as_str), &v) {
        (Some("string"), J::Number(n)) => J::String(n.to_string()),
        (Some("string"), J::Bool(b)) => J::String(b.to_string()),
        _ => v,
    }
}

fn text_of(v: &J) -> String {
    match v {
        J::String(s) => s.clone(),
        J::Null => String::new(),
        J::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// [`encode`], for other importers.
pub(super) fn encode_component(s: &str) -> String {
    encode(s)
}

/// Percent-encodes what may not stand in a URL path or query value as it is, and `$` so no
/// value reads as a `${…}` template.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b',' | b':' | b'@')
        {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A `${` in a written value would be a template: write it as `$${` (the literal dollar).
fn literal(s: &str) -> String {
    s.replace("${", "$${")
}

fn write_checks(out: &mut String, pad: &str, statuses: &[u16]) {
    if statuses.is_empty() {
        return;
    }
    let list: Vec<String> = statuses.iter().map(u16::to_string).collect();
    let _ = writeln!(out, "{pad}checks:\n{pad}  - status: [{}]", list.join(", "));
}

/// `templated`: the values are journey templates, where `${` must be written `$${`.
fn write_headers(out: &mut String, pad: &str, op: &Op, templated: bool) {
    let mut headers: Vec<(String, String)> = op.headers.clone();
    if let Some((ctype, _)) = &op.body {
        headers.push(("Content-Type".into(), ctype.clone()));
    }
    if headers.is_empty() {
        return;
    }
    let _ = writeln!(out, "{pad}headers:");
    for (k, v) in headers {
        let v = if templated { literal(&v) } else { v };
        let _ = writeln!(out, "{pad}  {}: {}", quote(&k), quote(&v));
    }
}

fn write_profiles(out: &mut String, base: &str, ops: &[Op], rate: &str) {
    out.push_str("targets:\n");
    for op in ops {
        let _ = writeln!(out, "  {}:", quote(&op.name));
        if !op.summary.is_empty() {
            let _ = writeln!(out, "    # {}", op.summary);
        }
        let _ = writeln!(out, "    url: {}", quote(&format!("{base}{}", op.path)));
        let _ = writeln!(out, "    method: {}", op.method);
        write_headers(out, "    ", op, false);
        if let Some((_, body)) = &op.body {
            let _ = writeln!(out, "    body: {}", quote(body));
        }
        write_checks(out, "    ", &op.statuses);
    }
    out.push_str("profiles:\n");
    for op in ops {
        let _ = writeln!(
            out,
            "  {}:\n    target: {}\n    executor: constant-arrival-rate\n    rate: {rate}\n    duration: 1m",
            quote(&op.name),
            quote(&op.name)
        );
    }
}

fn write_journey(out: &mut String, name: &str, base: &str, ops: &[&Op], rate: &str) {
    let name = super::config_name(name);
    let _ = writeln!(
        out,
        "targets:\n  api:\n    url: {}\njourneys:\n  {}:\n    target: api\n    steps:",
        quote(&format!("{base}/")),
        quote(&name)
    );
    for op in ops {
        let _ = writeln!(out, "      - name: {}", quote(&op.name));
        let _ = writeln!(out, "        method: {}", op.method);
        // Relative to the target's URL, so the server's path stays in front.
        let _ = writeln!(
            out,
            "        path: {}",
            quote(&literal(op.path.trim_start_matches('/')))
        );
        write_headers(out, "        ", op, true);
        if let Some((_, body)) = &op.body {
            let _ = writeln!(out, "        body: {}", quote(&literal(body)));
        }
        write_checks(out, "        ", &op.statuses);
    }
    let _ = writeln!(
        out,
        "profiles:\n  {}:\n    journey: {}\n    executor: constant-arrival-rate\n    rate: {rate}\n    duration: 1m",
        quote(&name),
        quote(&name)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_give_values_of_their_type() {
        let doc = serde_json::json!({
            "components": {"schemas": {
                "Pet": {"required": ["name"], "properties": {
                    "id": {"type": "integer", "readOnly": true},
                    "name": {"type": "string", "example": "doggie"},
                    "tags": {"type": "array", "items": {"$ref": "#/components/schemas/Tag"}},
                    "born": {"type": "string", "format": "date"},
                    "status": {"type": "string", "enum": ["available", "sold"]},
                    "code": {"type": "string", "example": 12345}
                }},
                "Tag": {"type": "object", "properties": {"name": {"type": "string"}}},
                "Loop": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Loop"}}}
            }}
        });
        let pet = example(
            &doc,
            &serde_json::json!({"$ref": "#/components/schemas/Pet"}),
            0,
        );
        assert_eq!(
            pet,
            serde_json::json!({
                "name": "doggie", "tags": [{"name": "example"}], "born": "2026-01-01",
                "status": "available", "code": "12345"
            })
        );
        // A schema that holds itself ends at the depth bound.
        let l = example(
            &doc,
            &serde_json::json!({"$ref": "#/components/schemas/Loop"}),
            0,
        );
        assert!(l.to_string().len() < 200, "{l}");
    }

    #[test]
    fn the_base_keeps_the_servers_path() {
        let doc = serde_json::json!({"servers": [{"url": "/v3"}]});
        assert_eq!(
            base_url(&doc, Some("http://127.0.0.1:9/")).unwrap(),
            "http://127.0.0.1:9/v3"
        );
        assert!(base_url(&doc, None).unwrap_err().contains("--base-url"));
        let doc = serde_json::json!({"servers": [{"url": "https://{host}/api", "variables": {"host": {"default": "x.example"}}}]});
        assert_eq!(base_url(&doc, None).unwrap(), "https://x.example/api");
        assert_eq!(encode("a b/${x}"), "a%20b%2F%24%7Bx%7D");
    }
}
