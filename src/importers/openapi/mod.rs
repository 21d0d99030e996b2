//! `sloburn import openapi FILE`: an OpenAPI 3.0 or 3.1 document (JSON or YAML) as a sloburn
//! config. Each operation becomes a target (URL with its path and required query parameters
//! filled from the document's examples, a JSON body from the request body's example or schema,
//! a `status` check on its documented 2xx/3xx codes) and a profile; or, with `--journey`, the
//! chosen operations become the steps of one journey over one target.
//!
//! Values come from, in order: the parameter's or media type's `example`/`examples`, the
//! schema's `example`, `default`, first `enum` value, then one made from the type and format.
//! `$ref`s inside the document are followed (at most 32 deep); an operation that needs
//! something that cannot be made (an external `$ref` parameter or body, a binary upload, an
//! example past the expansion bounds of `values.rs`: 1 MiB an operation, 32 MiB a document)
//! is listed on stderr and left out, never dropped in silence; a `$ref` into another file
//! inside a schema is listed as a warning and its value left null.

use serde_json::Value as J;

mod security;
mod values;
mod write;
use security::{Place, Security};
use values::*;
pub(crate) use write::*;

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
    /// Import the operations that change state (every method but GET, HEAD and OPTIONS).
    pub include_unsafe: bool,
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
    /// Every header sent (`Content-Type` too), one of each name, as the document gave them.
    headers: Vec<(String, String)>,
    /// What the security requirement sends: `${env:NAME}` references, written as they are.
    auth: Vec<Place>,
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
    openapi_3(doc, file)?;
    let base = base_url(doc, opts.base_url.as_deref())?;
    let mut security = Security::default();
    let (ops, mut notes) = operations(&document, file, &mut security)?;
    let mut ops = safe_only(ops, opts, &mut notes)?;
    let title = doc
        .pointer("/info/title")
        .and_then(J::as_str)
        .unwrap_or("an OpenAPI document");
    // A comment: escaped, so no line break in the document's title starts a line of YAML.
    let (file, title) = (
        crate::importers::printable(file),
        crate::importers::printable(title),
    );
    let mut out = format!(
        "# Imported by `sloburn import openapi` from {file} ({title}).\n# Review the example values and the rates, then add schedules and SLOs.\n"
    );
    for line in security.lines() {
        out.push_str(&format!("# {}\n", crate::importers::printable(&line)));
        notes.push(line);
    }
    match &opts.journey {
        Some(journey) => {
            let chosen = chosen(&ops, &opts.operations, &file)?;
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

/// An OpenAPI 3.x document, or why not.
fn openapi_3(doc: &J, file: &str) -> Result<(), String> {
    match doc.get("openapi").and_then(J::as_str) {
        Some(v) if v.starts_with("3.") => Ok(()),
        Some(v) => Err(format!(
            "{file}: OpenAPI {v} is not supported: give a 3.x document"
        )),
        None if doc.get("swagger").is_some() => Err(format!(
            "{file}: a Swagger 2.0 document: convert it to OpenAPI 3 first (e.g. swagger2openapi)"
        )),
        None => Err(format!(
            "{file}: no `openapi` field: not an OpenAPI document"
        )),
    }
}

/// Every operation in document order, each with a unique name (a second of one name gets a
/// number), and the notes on what was left out.
fn operations(
    document: &crate::config::Document,
    file: &str,
    security: &mut Security,
) -> Result<(Vec<Op>, Vec<String>), String> {
    let doc = &document.value;
    let mut notes = Vec::new();
    let mut ops = Vec::new();
    let mut ex = Expansion::new();
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
            let made = operation(doc, path, method, op, shared, &mut left_out, &mut ex);
            match made.map(|mut made| {
                made.auth = security.places(doc, op, &mut left_out);
                one_of_each(&mut made, &mut left_out);
                made
            }) {
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
    let mut names = crate::importers::UniqueNames::default();
    for op in &mut ops {
        op.name = names.give(&op.name);
    }
    Ok((ops, notes))
}

/// Methods that do not change state (RFC 9110 §9.2.1, TRACE aside): what a load test may
/// send to a service without `--include-unsafe`.
const SAFE: [&str; 3] = ["GET", "HEAD", "OPTIONS"];

/// The operations that only read, unless `--include-unsafe`: the others listed in one note;
/// one named in `--operations` is an error saying so.
fn safe_only(ops: Vec<Op>, opts: &Options, notes: &mut Vec<String>) -> Result<Vec<Op>, String> {
    if opts.include_unsafe {
        return Ok(ops);
    }
    let named = |o: &Op| opts.operations.iter().any(|w| w == &o.id || w == &o.name);
    if let Some(o) = ops
        .iter()
        .find(|o| !SAFE.contains(&o.method.as_str()) && named(o))
    {
        return Err(format!(
            "--operations: `{}` is a {}, which changes state: add --include-unsafe to send it",
            o.id, o.method
        ));
    }
    let (safe, unsafe_): (Vec<Op>, Vec<Op>) = ops
        .into_iter()
        .partition(|o| SAFE.contains(&o.method.as_str()));
    if !unsafe_.is_empty() {
        let mut by_method = std::collections::BTreeMap::<&str, usize>::new();
        for o in &unsafe_ {
            *by_method.entry(o.method.as_str()).or_default() += 1;
        }
        let counts: Vec<String> = by_method.iter().map(|(m, n)| format!("{n} {m}")).collect();
        let mut ids: Vec<&str> = unsafe_.iter().take(8).map(|o| o.id.as_str()).collect();
        if unsafe_.len() > ids.len() {
            ids.push("…");
        }
        notes.push(format!(
            "left out {} operation(s) that change state ({}: {}): --include-unsafe imports them",
            unsafe_.len(),
            counts.join(", "),
            ids.join(", ")
        ));
    }
    Ok(safe)
}

/// Headers the request can send, one of each name (compared without case): the security
/// scheme's first, then `Content-Type` from the body, then the parameters'. A header
/// parameter named `Accept`, `Content-Type` or `Authorization` is ignored, as OpenAPI says;
/// one whose name or value cannot be sent is left out and noted.
fn one_of_each(op: &mut Op, left_out: &mut Vec<String>) {
    let mut seen: Vec<String> = op
        .auth
        .iter()
        .filter_map(|p| match p {
            Place::Header(k, _) => Some(k.to_ascii_lowercase()),
            Place::Query(..) => None,
        })
        .collect();
    let mut kept = Vec::new();
    if let Some((ctype, _)) = &op.body {
        kept.push(("Content-Type".to_string(), ctype.clone()));
        seen.push("content-type".into());
    }
    for (k, v) in std::mem::take(&mut op.headers) {
        let lower = k.to_ascii_lowercase();
        if matches!(lower.as_str(), "accept" | "content-type" | "authorization") {
            continue;
        }
        if http::HeaderName::from_bytes(k.as_bytes()).is_err()
            || http::HeaderValue::from_str(&v).is_err()
            || v.contains("${")
        {
            left_out.push(format!("header parameter `{k}`: its name or example value cannot be sent as a header: left out"));
        } else if seen.contains(&lower) {
            left_out.push(format!("header parameter `{k}` twice: the first kept"));
        } else {
            seen.push(lower);
            kept.push((k, v));
        }
    }
    op.headers = kept;
}

/// The journey's steps: `--operations` in their order (by id or name), or every operation.
fn chosen<'a>(ops: &'a [Op], wanted: &[String], file: &str) -> Result<Vec<&'a Op>, String> {
    if wanted.is_empty() {
        return Ok(ops.iter().collect());
    }
    let mut v = Vec::new();
    for want in wanted {
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
    Ok(v)
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
        (None, Some(o)) if on_this_machine(&o) => o,
        (None, Some(o)) => {
            return Err(format!(
                "the document's server is {o}, not this machine: a load test sent there would \
                 hit it. Give --base-url http://HOST[:PORT] (a test instance; --base-url {o} \
                 to load that server after all)"
            ));
        }
        (None, None) => {
            return Err(format!(
                "the server URL `{url}` is relative: give --base-url http://HOST[:PORT]"
            ));
        }
    };
    Ok(format!("{origin}{}", path.trim_end_matches('/')))
}

/// Whether `origin` (`scheme://host[:port]`) is this machine: `localhost`, `*.localhost`, a
/// loopback or unspecified address.
fn on_this_machine(origin: &str) -> bool {
    let Ok(uri) = origin.parse::<http::Uri>() else {
        return false;
    };
    let host = uri.host().unwrap_or_default().to_ascii_lowercase();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host.ends_with(".localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified())
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
            &mut Expansion::new(),
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
            &mut Expansion::new(),
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
        let e = base_url(&doc, None).unwrap_err();
        assert!(
            e.contains("server is https://x.example, not this machine") && e.contains("--base-url"),
            "{e}"
        );
        assert_eq!(
            base_url(&doc, Some("https://x.example")).unwrap(),
            "https://x.example/api"
        );
        for local in [
            "http://localhost:8080",
            "http://127.0.0.2",
            "http://[::1]:9",
            "http://api.localhost",
        ] {
            let doc = serde_json::json!({"servers": [{"url": format!("{local}/v1")}]});
            assert_eq!(base_url(&doc, None).unwrap(), format!("{local}/v1"));
        }
        assert_eq!(encode("a b/${x}"), "a%20b%2F%24%7Bx%7D");
    }
}
