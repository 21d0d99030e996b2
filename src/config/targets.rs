//! One entry of the `targets` section: URL, method, headers, body, timeouts and the histogram
//! buckets. The target's `checks` list is read in [`super::checks`]; its transport (`http`,
//! `http2`, `tls`, `connect_to`, `dns`) in [`super::tls`].

use super::checks::checks;
use super::secrets::expand;
use super::walk::{self, Ctx, Fields, join, opt_bool, opt_duration};
use super::yaml::{Node, Value};
use super::{DEFAULT_BUCKETS, Env, Target};
use crate::http::Protocol;
use std::path::Path;
use std::time::Duration;

const TARGET_FIELDS: &[&str] = &[
    "url",
    "method",
    "headers",
    "body",
    "body_file",
    "timeout",
    "keep_alive",
    "dns",
    "max_body",
    "insecure_skip_verify",
    "http",
    "http2",
    "tls",
    "connect_to",
    "checks",
    "buckets",
    "expect",
    "expiry_warning",
    "grpc",
];

pub fn target(ctx: &mut Ctx, name: &str, node: &Node, base: &Path, env: &Env) -> Option<Target> {
    let path = join("targets", name);
    let f = walk::fields(ctx, node, &path, TARGET_FIELDS)?;
    let url = match f.get("url") {
        Some(n) => url(ctx, n, &f.path_of("url"), base, env),
        None => {
            ctx.error(node.pos, &path, "missing `url`");
            None
        }
    };
    let (uri, display_url) = url.unzip();
    let protocol = uri
        .as_ref()
        .and_then(|u| u.scheme_str())
        .and_then(Protocol::of_scheme)
        .unwrap_or_default();
    let grpc = protocol == Protocol::Grpc;
    protocol_fields(ctx, &f, protocol, uri.as_ref());
    let method = method(ctx, &f, protocol);
    let headers = headers(ctx, &f, base, env);
    let body = body(ctx, &f, base);
    let timeout = opt_duration(ctx, &f, "timeout", Duration::from_secs(10), true);
    let keep_alive = opt_bool(ctx, &f, "keep_alive", true);
    let mut transport = super::tls::transport(ctx, &f, base);
    if transport.http == crate::http::HttpVersion::Http3
        && let Some(n) = f.get("http")
    {
        quic_only(ctx, n.pos, &f.path_of("http"), uri.as_ref());
    }
    let max_body = match f.get("max_body") {
        Some(n) => walk::size(ctx, n, &f.path_of("max_body")).unwrap_or(1 << 20),
        None => 1 << 20,
    };
    let grpc_spec = if grpc {
        // gRPC is HTTP/2 only: h2c in the clear, only `h2` offered in TLS's ALPN.
        transport.http = crate::http::HttpVersion::Http2;
        super::grpc::grpc(
            ctx,
            f.get("grpc"),
            &f.path_of("grpc"),
            base,
            env,
            (timeout, max_body.min(usize::MAX as u64) as usize),
        )
    } else {
        None
    };
    let mut checks = f
        .get("checks")
        .map(|n| checks(ctx, n, &f.path_of("checks")))
        .unwrap_or_default();
    let probe = probe(ctx, &f, protocol, &mut checks);
    let buckets = f
        .get("buckets")
        .map(|n| buckets(ctx, n, &f.path_of("buckets")))
        .unwrap_or_else(|| DEFAULT_BUCKETS.to_vec());
    ndots_warning(ctx, &f, uri.as_ref(), display_url.as_deref(), env);
    Some(Target {
        name: name.to_string(),
        uri: uri?,
        display_url: display_url?,
        method: method?,
        headers,
        body,
        timeout,
        keep_alive,
        dns_ttl: transport.dns_ttl,
        max_body,
        insecure_skip_verify: transport.insecure,
        http: transport.http,
        h2_max_connections: transport.h2_max_connections,
        tls: transport.tls,
        connect_to: transport.connect_to,
        dns_select: transport.dns_select,
        checks,
        buckets,
        protocol,
        probe,
        grpc: grpc_spec,
    })
}

/// The fields a probe or gRPC target may not carry, and what its URL must say; `grpc` only on
/// a gRPC target.
fn protocol_fields(ctx: &mut Ctx, f: &Fields, protocol: Protocol, uri: Option<&http::Uri>) {
    if protocol.is_probe() {
        probe_fields(ctx, f, protocol, uri);
    }
    if protocol == Protocol::Grpc {
        grpc_fields(ctx, f, uri);
    } else if let Some(n) = f.get("grpc") {
        ctx.error(
            n.pos,
            &f.path_of("grpc"),
            "`grpc` is for a grpc:// or grpcs:// target",
        );
    }
}

/// `http: "3"` is QUIC: an https:// URL only (QUIC has no plain form; gRPC, WebSocket and the
/// probes run over TCP).
fn quic_only(ctx: &mut Ctx, pos: super::Pos, path: &str, uri: Option<&http::Uri>) {
    let scheme = uri.and_then(|u| u.scheme_str()).unwrap_or("");
    if !scheme.eq_ignore_ascii_case("https") {
        ctx.error(
            pos,
            path,
            format!(
                "`3` (HTTP/3 over QUIC) needs an https:// URL, not {scheme}://: QUIC is always \
                 encrypted; write \"2\", \"1.1\" or auto for this target"
            ),
        );
    }
}

/// `method`: an HTTP method (GET by default). A WebSocket's upgrade is a GET; a probe's or a
/// gRPC call's method names its protocol.
fn method(ctx: &mut Ctx, f: &Fields, protocol: Protocol) -> Option<http::Method> {
    match f.get("method") {
        _ if protocol == Protocol::WebSocket => Some(http::Method::GET),
        _ if protocol.is_probe() || protocol == Protocol::Grpc => {
            http::Method::from_bytes(protocol.as_str().to_ascii_uppercase().as_bytes()).ok()
        }
        Some(n) => {
            let p = f.path_of("method");
            walk::string(ctx, n, &p).and_then(|m| {
                let upper = m.to_ascii_uppercase();
                http::Method::from_bytes(upper.as_bytes()).ok().or_else(|| {
                    ctx.error(n.pos, &p, format!("`{m}` is not an HTTP method"));
                    None
                })
            })
        }
        None => Some(http::Method::GET),
    }
}

/// `headers`: values with `${env:..}`/`${file:..}` expanded; those, and credentials, are
/// marked sensitive.
fn headers(ctx: &mut Ctx, f: &Fields, base: &Path, env: &Env) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    let Some(n) = f.get("headers") else {
        return headers;
    };
    let hpath = f.path_of("headers");
    let Value::Map(entries) = &n.value else {
        ctx.error(
            n.pos,
            &hpath,
            format!("expected a mapping, found {}", n.kind()),
        );
        return headers;
    };
    for (key, value) in entries {
        let p = join(&hpath, &key.name);
        let Ok(hname) = http::HeaderName::from_bytes(key.name.as_bytes()) else {
            ctx.error(key.pos, &p, "not a valid header name");
            continue;
        };
        let Some(raw) = walk::string(ctx, value, &p) else {
            continue;
        };
        let sensitive = raw.contains("${");
        let Some(text) = expand(ctx, &raw, value.pos, &p, base, env) else {
            continue;
        };
        match http::HeaderValue::from_str(&text) {
            Ok(mut v) => {
                v.set_sensitive(sensitive || is_sensitive_header(&hname));
                headers.append(hname, v);
            }
            // The value may be a secret: say what is wrong without echoing it.
            Err(_) => ctx.error(
                value.pos,
                &p,
                "the header value holds characters HTTP does not allow (a newline?)",
            ),
        }
    }
    headers
}

/// `body` (text) or `body_file` (read relative to the config), not both; empty without either.
fn body(ctx: &mut Ctx, f: &Fields, base: &Path) -> bytes::Bytes {
    match (f.get("body"), f.get("body_file")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("body"),
                "set `body` or `body_file`, not both",
            );
            bytes::Bytes::new()
        }
        (Some(n), None) => walk::string(ctx, n, &f.path_of("body"))
            .map(bytes::Bytes::from)
            .unwrap_or_default(),
        (None, Some(n)) => {
            let p = f.path_of("body_file");
            walk::string(ctx, n, &p)
                .and_then(|file| {
                    match super::files::read_regular(
                        &base.join(&file),
                        "a `body_file`",
                        super::MAX_BODY_FILE_BYTES,
                    ) {
                        Ok(b) => Some(bytes::Bytes::from(b)),
                        Err(e) => {
                            ctx.error(n.pos, &p, format!("cannot read `{file}`: {e}"));
                            None
                        }
                    }
                })
                .unwrap_or_default()
        }
        (None, None) => bytes::Bytes::new(),
    }
}

/// A probe's options: `expect` (read until the text arrives, and checked as `body_contains`)
/// and `expiry_warning` (a TLS probe's certificate check); their checks go to `checks`.
fn probe(
    ctx: &mut Ctx,
    f: &Fields,
    protocol: Protocol,
    checks: &mut Vec<crate::checks::Check>,
) -> crate::http::probe::ProbeOptions {
    let mut probe = crate::http::probe::ProbeOptions::default();
    if let Some(n) = f.get("expect")
        && let Some(text) = walk::string(ctx, n, &f.path_of("expect"))
    {
        checks.push(crate::checks::Check {
            name: format!("expect {text:?}"),
            kind: crate::checks::CheckKind::BodyContains(text.clone()),
        });
        probe.expect = Some(bytes::Bytes::from(text));
    }
    if let Some(n) = f.get("expiry_warning") {
        probe.expiry_warning = walk::duration(ctx, n, &f.path_of("expiry_warning"))
            .unwrap_or(crate::http::probe::DEFAULT_EXPIRY_WARNING);
    }
    if protocol == Protocol::Tls && !probe.expiry_warning.is_zero() {
        checks.push(crate::checks::Check {
            name: format!(
                "certificate valid for {}",
                crate::units::format_duration(probe.expiry_warning)
            ),
            kind: crate::checks::CheckKind::CertificateValidFor(probe.expiry_warning),
        });
    }
    probe
}

/// Warns when the URL's host has fewer dots than the resolver's `ndots` (the search path is
/// tried first); a host that came from a reference is named as written.
fn ndots_warning(
    ctx: &mut Ctx,
    f: &Fields,
    uri: Option<&http::Uri>,
    shown: Option<&str>,
    env: &Env,
) {
    if let (Some(uri), Some(shown)) = (uri, shown)
        && let Some(host) = uri.host()
        && let Some(n) = f.get("url")
        && let Some(msg) = crate::http::ndots_warning(host, env.ndots)
    {
        let msg = if shown.contains("${") {
            msg.replace(host, written_host(shown))
        } else {
            msg
        };
        ctx.warn(n.pos, &f.path_of("url"), msg);
    }
}

/// What a gRPC target may not carry (HTTP's fields), and what its URL must say: a port, no
/// path.
fn grpc_fields(ctx: &mut Ctx, f: &walk::Fields, uri: Option<&http::Uri>) {
    for field in super::grpc::NOT_GRPC {
        if let Some(n) = f.get(field) {
            let instead = match *field {
                "headers" => " (metadata goes in `grpc.metadata`)",
                "method" => " (the gRPC method goes in `grpc.method`)",
                "body" | "body_file" => " (the request goes in `grpc.message`)",
                _ => "",
            };
            ctx.error(
                n.pos,
                &f.path_of(field),
                format!("a gRPC target has no `{field}`{instead}"),
            );
        }
    }
    let (Some(uri), Some(n)) = (uri, f.get("url")) else {
        return;
    };
    let p = f.path_of("url");
    if uri.port_u16().is_none() {
        ctx.error(
            n.pos,
            &p,
            "a gRPC target needs a port: grpc://HOST:PORT (grpcs:// over TLS)",
        );
    }
    if uri
        .path_and_query()
        .is_some_and(|pq| pq.as_str() != "/" && !pq.as_str().is_empty())
    {
        ctx.error(
            n.pos,
            &p,
            "a gRPC target's URL has no path: the method goes in `grpc.method`",
        );
    }
}

/// What a probe target may not carry (HTTP's fields), and what its URL must say: a port for
/// `tcp://` and `tls://`, a query in the path for `dns://`.
fn probe_fields(ctx: &mut Ctx, f: &Fields, protocol: Protocol, uri: Option<&http::Uri>) {
    let scheme = uri
        .and_then(|u| u.scheme_str())
        .unwrap_or(protocol.as_str())
        .to_ascii_lowercase();
    let mut not_here: Vec<&str> = vec!["method", "http", "http2", "keep_alive"];
    // A WebSocket message is read whole, up to `max_body`.
    if protocol != Protocol::WebSocket {
        not_here.push("max_body");
    }
    match protocol {
        Protocol::Dns => not_here.extend([
            "headers",
            "body",
            "body_file",
            "expect",
            "tls",
            "insecure_skip_verify",
            "connect_to",
        ]),
        Protocol::Tcp => not_here.extend(["headers", "tls", "insecure_skip_verify"]),
        Protocol::Tls => not_here.push("headers"),
        _ => {}
    }
    if protocol != Protocol::Tls {
        not_here.push("expiry_warning");
    }
    for field in not_here {
        if let Some(n) = f.get(field) {
            ctx.error(
                n.pos,
                &f.path_of(field),
                format!("a {scheme}:// probe has no `{field}`"),
            );
        }
    }
    let (Some(uri), Some(n)) = (uri, f.get("url")) else {
        return;
    };
    let p = f.path_of("url");
    match protocol {
        Protocol::Dns => {
            if let Err(e) = crate::http::probe::dns_query(uri) {
                ctx.error(n.pos, &p, e);
            }
        }
        // A WebSocket URL is an HTTP one: its port defaults, its path and query are sent.
        // gRPC has its own checks (`grpc_fields`) and never gets here.
        Protocol::WebSocket | Protocol::Http | Protocol::Grpc => {}
        Protocol::Tcp | Protocol::Tls => {
            if uri.port_u16().is_none() {
                ctx.error(
                    n.pos,
                    &p,
                    format!("a {scheme}:// probe needs a port: {scheme}://HOST:PORT"),
                );
            }
            if uri
                .path_and_query()
                .is_some_and(|pq| pq.as_str() != "/" && !pq.as_str().is_empty())
            {
                ctx.error(
                    n.pos,
                    &p,
                    format!("a {scheme}:// probe has no path or query"),
                );
            }
        }
    }
}

pub(super) fn is_sensitive_header(name: &http::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "x-api-key"
    )
}

/// The URL, expanded, and as written (its `${env:..}` and `${file:..}` references kept), for
/// every message and display: an expanded value may be a secret (`?api_key=${env:KEY}`).
pub(super) fn url(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    base: &Path,
    env: &Env,
) -> Option<(http::Uri, String)> {
    let written = walk::string(ctx, node, path)?;
    let text = expand(ctx, &written, node.pos, path, base, env)?;
    let uri: http::Uri = match text.parse() {
        Ok(u) => u,
        Err(e) => {
            ctx.error(node.pos, path, format!("`{written}` is not a URL: {e}"));
            return None;
        }
    };
    match uri.scheme_str() {
        Some(s) if crate::http::Protocol::of_scheme(s).is_some() => {}
        Some(other) => {
            let other = if written.contains("${") {
                written.split("://").next().unwrap_or_default()
            } else {
                other
            };
            ctx.error(
                node.pos,
                path,
                format!(
                    "unsupported scheme `{other}`: use http://, https://, ws://, wss://, grpc://, grpcs://, or a probe's tcp://, tls:// or dns://"
                ),
            );
            return None;
        }
        None => {
            ctx.error(
                node.pos,
                path,
                format!("`{written}` has no scheme: write `http://{written}`"),
            );
            return None;
        }
    }
    if uri.host().is_none_or(|h| h.is_empty()) {
        ctx.error(node.pos, path, format!("`{written}` has no host"));
        return None;
    }
    Some((uri, written))
}

/// The host of a URL as written, before its references are expanded (`${env:HOST}` stays).
fn written_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    }
}

fn buckets(ctx: &mut Ctx, node: &Node, path: &str) -> Vec<f64> {
    let mut out = Vec::new();
    for (i, item) in walk::seq(ctx, node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        if let Some(d) = walk::duration(ctx, item, &p) {
            let secs = d.as_secs_f64();
            if out.last().is_some_and(|last| *last >= secs) {
                ctx.error(item.pos, &p, "bucket bounds must be in ascending order");
            } else if secs <= 0.0 {
                ctx.error(item.pos, &p, "bucket bounds must be above zero");
            } else {
                out.push(secs);
            }
        }
    }
    if out.is_empty() {
        ctx.error(
            node.pos,
            path,
            "give at least one bucket bound, e.g. [10ms, 100ms, 1s]",
        );
        return DEFAULT_BUCKETS.to_vec();
    }
    if out.len() > 50 {
        ctx.error(node.pos, path, "at most 50 buckets (each is a time series)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn the_host_as_written_keeps_its_reference() {
        assert_eq!(written_host("http://${env:HOST}:8080/x?k=1"), "${env:HOST}");
        assert_eq!(written_host("https://u:${env:PW}@api.shop/x"), "api.shop");
        assert_eq!(written_host("http://[::1]:9/"), "[::1]");
        assert_eq!(written_host("api.shop"), "api.shop");
    }

    fn entry<'a>(node: &'a Node, key: &str) -> &'a Node {
        match &node.value {
            Value::Map(entries) => &entries.iter().find(|(k, _)| k.name == key).unwrap().1,
            _ => panic!("not a mapping"),
        }
    }

    #[test]
    fn messages_and_debug_show_the_url_as_written() {
        let env = Env::from_map(BTreeMap::from([("H".into(), "hidden-host".into())]), 5);
        let text = "targets:\n  api:\n    url: \"http://${env:H}/?k=1\"\n";
        let root = super::super::yaml::parse(text).unwrap();
        let node = entry(entry(&root, "targets"), "api");
        let mut ctx = Ctx::default();
        let t = target(&mut ctx, "api", node, Path::new("."), &env).unwrap();
        assert_eq!(t.uri.host(), Some("hidden-host"));
        assert_eq!(t.display_url, "http://${env:H}/?k=1");
        let warning = &ctx.warnings[0].message;
        assert!(warning.contains("`${env:H}`"), "{warning}");
        assert!(!warning.contains("hidden-host"), "{warning}");
        assert!(!format!("{t:?}").contains("hidden-host"), "{t:?}");
    }

    #[test]
    fn a_file_reference_in_a_url_is_read_beside_the_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("key.txt"), "k3y\n").unwrap();
        let env = Env::from_map(BTreeMap::new(), 1);
        let text = "targets:\n  api:\n    url: \"http://127.0.0.1/?k=${file:key.txt}\"\n";
        let root = super::super::yaml::parse(text).unwrap();
        let mut ctx = Ctx::default();
        let node = entry(entry(&root, "targets"), "api");
        let t = target(&mut ctx, "api", node, dir.path(), &env).unwrap();
        assert_eq!(t.uri.query(), Some("k=k3y"));
        assert_eq!(t.display_url, "http://127.0.0.1/?k=${file:key.txt}");
    }
}
