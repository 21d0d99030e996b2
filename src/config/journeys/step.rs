//! One journey step, read in named parts: its name, HTTP method, URL (`path` on the target or an
//! absolute `url`), headers, body (`body` or `json`), checks, captures, think time and
//! `on_failure`; a gRPC step (`grpc:`, or a `grpc://` URL in a journey over another target)
//! reads its call in `grpc_step`.

use super::super::checks::checks;
use super::super::walk::{self, Ctx, Fields, join};
use super::super::yaml::{Node, Value};
use super::{
    Headers, Site, StepSpec, Target, base_for, capture, compile, display_for, header_map, json,
};
use crate::http::Protocol;
use crate::journey::{Capture, Escape, Scope, Template, Think};

const STEP_FIELDS: &[&str] = &[
    "name",
    "method",
    "path",
    "url",
    "headers",
    "body",
    "json",
    "checks",
    "capture",
    "think",
    "on_failure",
    "grpc",
];

/// Reads the step at `node`; `new` gets the capture names it sets for the first time.
pub(super) fn step(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    scope: &Scope<'_>,
    target: Option<&Target>,
    site: Site<'_>,
    new: &mut Vec<String>,
) -> Option<StepSpec> {
    let f = walk::fields(ctx, node, path, STEP_FIELDS)?;
    let name = name(ctx, &f)?;
    let path = &join(path.rsplit_once('[').map_or(path, |(a, _)| a), &name);
    let grpc = is_grpc(&f, target);
    let (method, url, headers, body, grpc) = if grpc {
        let url = url(ctx, &f, scope, target, site, true);
        let call = super::grpc_step::call(ctx, &f, scope, target, site)?;
        // The `method` label of a gRPC step, as of a gRPC target.
        let method = http::Method::from_bytes(b"GRPC").unwrap_or(http::Method::POST);
        (method, url, call.metadata, call.body, Some(call.spec))
    } else {
        let method = method(ctx, &f)?;
        let url = url(ctx, &f, scope, target, site, false);
        let mut headers = headers(ctx, &f, scope, target, site);
        let body = body(ctx, &f, scope, site, &mut headers)?;
        (method, url, headers, body, None)
    };
    let step_checks = f
        .get("checks")
        .map(|n| checks(ctx, n, &f.path_of("checks")))
        .unwrap_or_default();
    let captures = captures(ctx, &f, scope, new);
    let think = think(ctx, &f)?;
    let keep_going = on_failure(ctx, &f)?;
    let step = StepSpec {
        display_url: display_url(&f, target),
        name,
        method,
        url: url?,
        headers,
        body,
        checks: step_checks,
        captures,
        think,
        keep_going,
        grpc,
    };
    if step.url.is_static() {
        let text = step.url.static_text();
        if text.parse::<http::Uri>().is_err() {
            let pos = f.get("path").or(f.get("url")).map_or(node.pos, |n| n.pos);
            ctx.error(pos, path, "the step's URL does not parse");
            return None;
        }
    }
    Some(step)
}

/// Whether the step makes its own gRPC call: it has a `grpc:` block, or its `url` names
/// `grpc://`/`grpcs://` while the journey's target is not gRPC (over a gRPC target, a step
/// without `grpc:` sends the target's call).
fn is_grpc(f: &Fields<'_>, target: Option<&Target>) -> bool {
    let url_is_grpc = f
        .get("url")
        .and_then(Node::as_scalar)
        .and_then(|u| u.split_once("://"))
        .and_then(|(scheme, _)| Protocol::of_scheme(scheme))
        == Some(Protocol::Grpc);
    f.has("grpc") || (url_is_grpc && target.is_some_and(|t| t.protocol != Protocol::Grpc))
}

/// `name`: a metric label value.
fn name(ctx: &mut Ctx, f: &Fields<'_>) -> Option<String> {
    let Some(n) = f.get("name") else {
        ctx.error(f.node.pos, &f.path, "missing `name`");
        return None;
    };
    let p = f.path_of("name");
    let name = walk::string(ctx, n, &p)?;
    if !walk::is_label_safe(&name) {
        ctx.error(
            n.pos,
            &p,
            "a step name is a metric label value: letters, digits, `-`, `_`, `.`; at most 64",
        );
        return None;
    }
    Some(name)
}

/// `method`, GET when there is none.
fn method(ctx: &mut Ctx, f: &Fields<'_>) -> Option<http::Method> {
    let Some(n) = f.get("method") else {
        return Some(http::Method::GET);
    };
    let p = f.path_of("method");
    let m = walk::string(ctx, n, &p)?.to_ascii_uppercase();
    match http::Method::from_bytes(m.as_bytes()) {
        Ok(m) => Some(m),
        Err(_) => {
            ctx.error(n.pos, &p, format!("`{m}` is not an HTTP method"));
            None
        }
    }
}

/// The step's URL: `path` on the target's URL, an absolute `url`, or the target's URL. A gRPC
/// step's `url` names a `grpc://` or `grpcs://` server (the target's, when it is one).
fn url(
    ctx: &mut Ctx,
    f: &Fields<'_>,
    scope: &Scope<'_>,
    target: Option<&Target>,
    site: Site<'_>,
    grpc: bool,
) -> Option<Template> {
    match (f.get("path"), f.get("url")) {
        (Some(n), Some(_)) => {
            ctx.error(n.pos, &f.path_of("path"), "set `path` or `url`, not both");
            None
        }
        (Some(n), None) if grpc => {
            ctx.error(
                n.pos,
                &f.path_of("path"),
                "a gRPC step has no `path`: its `url` is grpc://HOST:PORT and its method `grpc.method`",
            );
            None
        }
        (Some(n), None) => {
            let p = f.path_of("path");
            let text = walk::string(ctx, n, &p)?;
            let tpl = compile(ctx, n, &p, &text, scope, Escape::Url, site);
            target.zip(tpl).map(|(t, tpl)| {
                let mut url = Template::literal(&base_for(&t.uri, text.starts_with('/')));
                url.sensitive = t.display_url.contains("${");
                url.append(tpl);
                url
            })
        }
        (None, Some(n)) => {
            let p = f.path_of("url");
            let text = walk::string(ctx, n, &p)?;
            let scheme = text.split_once("://").map(|(s, _)| s).unwrap_or_default();
            match Protocol::of_scheme(scheme) {
                None => {
                    ctx.error(
                        n.pos,
                        &p,
                        "a step's `url` is absolute: http://, https://, grpc://, grpcs://, ws://, wss://, tcp://, tls:// or dns://",
                    );
                    None
                }
                Some(Protocol::Grpc) if !grpc => {
                    // Over a gRPC target: the target's call, to another server.
                    compile(ctx, n, &p, &text, scope, Escape::Url, site)
                }
                Some(p_) if grpc && p_ != Protocol::Grpc => {
                    ctx.error(
                        n.pos,
                        &p,
                        "a step with `grpc` calls a grpc:// or grpcs:// URL",
                    );
                    None
                }
                Some(_) => compile(ctx, n, &p, &text, scope, Escape::Url, site),
            }
        }
        (None, None) if grpc && target.is_some_and(|t| t.protocol != Protocol::Grpc) => {
            ctx.error(
                f.node.pos,
                &f.path,
                "a gRPC step over an HTTP target needs `url: grpc://HOST:PORT` (or grpcs://)",
            );
            None
        }
        (None, None) => target.map(|t| Template::literal(&t.uri.to_string())),
    }
}

/// The target's headers, then the step's `headers` (a step's replaces the target's).
fn headers(
    ctx: &mut Ctx,
    f: &Fields<'_>,
    scope: &Scope<'_>,
    target: Option<&Target>,
    site: Site<'_>,
) -> Headers {
    let mut headers: Headers = Vec::new();
    if let Some(t) = target {
        for (k, v) in &t.headers {
            let mut tpl = Template::literal(&String::from_utf8_lossy(v.as_bytes()));
            tpl.sensitive = v.is_sensitive();
            headers.push((k.clone(), tpl));
        }
    }
    if let Some(n) = f.get("headers") {
        header_map(ctx, n, &f.path_of("headers"), scope, site, &mut headers);
    }
    headers
}

/// `body` (text) or `json` (a YAML value sent as JSON, with `Content-Type` unless a header
/// sets one). `None` inside: no body.
fn body(
    ctx: &mut Ctx,
    f: &Fields<'_>,
    scope: &Scope<'_>,
    site: Site<'_>,
    headers: &mut Headers,
) -> Option<Option<Template>> {
    match (f.get("body"), f.get("json")) {
        (Some(n), Some(_)) => {
            ctx.error(n.pos, &f.path_of("body"), "set `body` or `json`, not both");
            Some(None)
        }
        (Some(n), None) => {
            let p = f.path_of("body");
            let text = walk::string(ctx, n, &p)?;
            Some(Some(compile(ctx, n, &p, &text, scope, Escape::Raw, site)?))
        }
        (None, Some(n)) => {
            let mut t = Template::default();
            json(ctx, n, &f.path_of("json"), scope, site, &mut t)?;
            if !headers
                .iter()
                .any(|(k, _)| *k == http::header::CONTENT_TYPE)
            {
                headers.push((
                    http::header::CONTENT_TYPE,
                    Template::literal("application/json"),
                ));
            }
            Some(Some(t))
        }
        (None, None) => Some(None),
    }
}

/// `capture`: each name's source and slot.
fn captures(
    ctx: &mut Ctx,
    f: &Fields<'_>,
    scope: &Scope<'_>,
    new: &mut Vec<String>,
) -> Vec<Capture> {
    let mut captures = Vec::new();
    let Some(n) = f.get("capture") else {
        return captures;
    };
    let cp = f.path_of("capture");
    let Value::Map(entries) = &n.value else {
        ctx.error(
            n.pos,
            &cp,
            format!("expected a mapping, found {}", n.kind()),
        );
        return captures;
    };
    for (key, value) in entries {
        let p = join(&cp, &key.name);
        if let Some(source) = capture(ctx, value, &p) {
            // A name set again keeps its slot; a new one takes the next free one (the journey
            // adds it to `captures` after this step).
            let slot = match scope.captures.get(&key.name) {
                Some(slot) => *slot,
                None => {
                    new.push(key.name.clone());
                    scope.captures.len() + new.len() - 1
                }
            };
            captures.push(Capture {
                name: key.name.clone(),
                slot,
                source,
            });
        }
    }
    captures
}

/// `think`: the pause after the step.
fn think(ctx: &mut Ctx, f: &Fields<'_>) -> Option<Option<Think>> {
    let Some(n) = f.get("think") else {
        return Some(None);
    };
    let p = f.path_of("think");
    let text = walk::string(ctx, n, &p)?;
    match Think::parse(&text) {
        Ok(t) => Some(Some(t)),
        Err(e) => {
            ctx.error(n.pos, &p, e);
            None
        }
    }
}

/// `on_failure`: whether a failed step lets the iteration go on.
fn on_failure(ctx: &mut Ctx, f: &Fields<'_>) -> Option<bool> {
    let Some(n) = f.get("on_failure") else {
        return Some(false);
    };
    let p = f.path_of("on_failure");
    match walk::string(ctx, n, &p)?.as_str() {
        "stop" => Some(false),
        "continue" => Some(true),
        other => {
            ctx.error(
                n.pos,
                &p,
                format!("unknown `{other}`: use stop or continue"),
            );
            None
        }
    }
}

/// The step's URL as written, for spans.
fn display_url(f: &Fields<'_>, target: Option<&Target>) -> String {
    let written = f
        .get("path")
        .or(f.get("url"))
        .and_then(|n| n.as_scalar())
        .unwrap_or("");
    match (f.has("url"), target) {
        (true, _) => written.to_string(),
        (false, Some(t)) => display_for(&t.display_url, written),
        (false, None) => String::new(),
    }
}
