//! A target's transport fields: `http`, `http2`, `tls`, `connect_to` and `dns`. PEM files are
//! read (bounded, beside the config) and the TLS options built once here, so a bad file or a key
//! that does not fit its certificate is a `file:line:col` error of `sloburn check`.

use super::walk::{self, Ctx, Fields};
use super::yaml::Node;
use crate::http::tls::{ClientCert, TlsOptions, TlsVersion, client_config, parse_certs, parse_key};
use crate::http::{DnsSelect, HttpVersion};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// PEM files (a CA bundle, a certificate chain, a key) are read up to this size.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

const TLS_FIELDS: &[&str] = &[
    "ca",
    "cert",
    "key",
    "server_name",
    "min_version",
    "insecure",
];

/// The transport fields of one target, with their defaults.
pub struct Transport {
    pub http: HttpVersion,
    pub h2_max_connections: usize,
    pub tls: TlsOptions,
    pub insecure: bool,
    pub connect_to: Option<(String, u16)>,
    pub dns_ttl: Duration,
    pub dns_select: DnsSelect,
}

pub fn transport(ctx: &mut Ctx, f: &Fields, base: &Path) -> Transport {
    let http = f
        .get("http")
        .and_then(|n| {
            let p = f.path_of("http");
            let v = walk::string(ctx, n, &p)?;
            HttpVersion::parse(&v).or_else(|| {
                ctx.error(
                    n.pos,
                    &p,
                    format!("`{v}`: write \"1.1\", \"2\", \"3\" or auto"),
                );
                None
            })
        })
        .unwrap_or_default();
    let mut h2_max_connections = crate::http::h2::DEFAULT_MAX_CONNECTIONS;
    if let Some(n) = f.get("http2")
        && let Some(h) = walk::fields(ctx, n, &f.path_of("http2"), &["max_connections"])
        && let Some(m) = h.get("max_connections")
    {
        let p = h.path_of("max_connections");
        match walk::unsigned(ctx, m, &p) {
            Some(v @ 1..=1024) => h2_max_connections = v as usize,
            Some(_) => ctx.error(m.pos, &p, "must be between 1 and 1024"),
            None => {}
        }
    }
    let mut insecure = walk::opt_bool(ctx, f, "insecure_skip_verify", false);
    if insecure && let Some(n) = f.get("insecure_skip_verify") {
        ctx.warn(n.pos, &f.path_of("insecure_skip_verify"), NOT_VERIFIED);
    }
    let mut tls = TlsOptions::default();
    if let Some(n) = f.get("tls")
        && let Some(t) = walk::fields(ctx, n, &f.path_of("tls"), TLS_FIELDS)
    {
        (tls, insecure) = tls_fields(ctx, &t, base, insecure);
    }
    let connect_to = f
        .get("connect_to")
        .and_then(|n| connect_to(ctx, n, &f.path_of("connect_to")));
    let mut dns_ttl = Duration::from_secs(300);
    let mut dns_select = DnsSelect::First;
    if let Some(n) = f.get("dns")
        && let Some(d) = walk::fields(ctx, n, &f.path_of("dns"), &["ttl", "select"])
    {
        if let Some(t) = d.get("ttl")
            && let Some(v) = walk::duration(ctx, t, &d.path_of("ttl"))
        {
            dns_ttl = v;
        }
        if let Some(s) = d.get("select") {
            let p = d.path_of("select");
            if let Some(v) = walk::string(ctx, s, &p) {
                match DnsSelect::parse(&v) {
                    Some(sel) => dns_select = sel,
                    None => ctx.error(
                        s.pos,
                        &p,
                        format!("`{v}`: write first, random or round_robin"),
                    ),
                }
            }
        }
    }
    Transport {
        http,
        h2_max_connections,
        tls,
        insecure,
        connect_to,
        dns_ttl,
        dns_select,
    }
}

const NOT_VERIFIED: &str =
    "TLS certificates are not verified: anyone on the path can answer for this target";

fn tls_fields(ctx: &mut Ctx, t: &Fields, base: &Path, alias: bool) -> (TlsOptions, bool) {
    let mut opts = TlsOptions::default();
    let insecure = walk::opt_bool(ctx, t, "insecure", false);
    if insecure && let Some(n) = t.get("insecure") {
        ctx.warn(n.pos, &t.path_of("insecure"), NOT_VERIFIED);
    }
    if let Some(n) = t.get("ca") {
        let p = t.path_of("ca");
        if let Some(pem) = read_pem(ctx, n, &p, base) {
            match parse_certs(&pem) {
                Ok(certs) => opts.ca = certs,
                Err(e) => ctx.error(n.pos, &p, e),
            }
        }
    }
    let cert = t.get("cert").and_then(|n| {
        let p = t.path_of("cert");
        let pem = read_pem(ctx, n, &p, base)?;
        parse_certs(&pem).map_err(|e| ctx.error(n.pos, &p, e)).ok()
    });
    let key = t.get("key").and_then(|n| {
        let p = t.path_of("key");
        let pem = read_pem(ctx, n, &p, base)?;
        parse_key(&pem).map_err(|e| ctx.error(n.pos, &p, e)).ok()
    });
    match (t.get("cert"), t.get("key")) {
        (Some(n), None) => ctx.error(n.pos, &t.path_of("cert"), "`cert` needs its `key`"),
        (None, Some(n)) => ctx.error(n.pos, &t.path_of("key"), "`key` needs its `cert`"),
        _ => {}
    }
    if let (Some(chain), Some(key)) = (cert, key) {
        opts.client_cert = Some(ClientCert {
            chain,
            key: Arc::new(key),
        });
    }
    if let Some(n) = t.get("server_name") {
        let p = t.path_of("server_name");
        if let Some(name) = walk::string(ctx, n, &p) {
            if rustls::pki_types::ServerName::try_from(name.as_str()).is_ok() {
                opts.server_name = Some(name);
            } else {
                ctx.error(
                    n.pos,
                    &p,
                    format!("`{name}` is not a DNS name or an IP address"),
                );
            }
        }
    }
    if let Some(n) = t.get("min_version") {
        let p = t.path_of("min_version");
        match walk::string(ctx, n, &p).as_deref() {
            Some("1.2") => opts.min_version = TlsVersion::Tls12,
            Some("1.3") => opts.min_version = TlsVersion::Tls13,
            Some(other) => ctx.error(n.pos, &p, format!("`{other}`: write \"1.2\" or \"1.3\"")),
            None => {}
        }
    }
    let insecure = insecure || alias;
    // What the client builds at start: a CA that is no trust anchor, a key of another
    // certificate.
    if let Err(e) = client_config(&opts, insecure, &[]) {
        let at = if opts.client_cert.is_some() && e.contains("key") {
            "key"
        } else {
            "ca"
        };
        let (pos, p) = match t.get(at) {
            Some(n) => (n.pos, t.path_of(at)),
            None => (t.node.pos, t.path.clone()),
        };
        ctx.error(pos, &p, e);
    }
    (opts, insecure)
}

fn read_pem(ctx: &mut Ctx, n: &Node, p: &str, base: &Path) -> Option<Vec<u8>> {
    let file = walk::string(ctx, n, p)?;
    match super::files::read_regular(&base.join(&file), "a PEM file", MAX_PEM_BYTES) {
        Ok(b) => Some(b),
        Err(e) => {
            ctx.error(n.pos, p, format!("cannot read `{file}`: {e}"));
            None
        }
    }
}

/// `HOST:PORT`, HOST a name or an IP (`[v6]` in brackets).
fn connect_to(ctx: &mut Ctx, n: &Node, p: &str) -> Option<(String, u16)> {
    let text = walk::string(ctx, n, p)?;
    match parse_connect_to(&text) {
        Some(v) => Some(v),
        None => {
            ctx.error(
                n.pos,
                p,
                format!("`{text}`: write HOST:PORT, e.g. 127.0.0.1:8443 or [::1]:8443"),
            );
            None
        }
    }
}

fn parse_connect_to(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let ok = if let Some(inner) = host.strip_prefix('[') {
        inner
            .strip_suffix(']')
            .is_some_and(|ip| ip.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        host.parse::<std::net::Ipv4Addr>().is_ok()
            || (!host.is_empty()
                && host.len() <= 253
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_')))
    };
    ok.then(|| (host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_to_takes_host_and_port() {
        assert_eq!(
            parse_connect_to("127.0.0.1:8443"),
            Some(("127.0.0.1".into(), 8443))
        );
        assert_eq!(parse_connect_to("[::1]:443"), Some(("[::1]".into(), 443)));
        assert_eq!(
            parse_connect_to("backend.svc:80"),
            Some(("backend.svc".into(), 80))
        );
        for bad in [
            "127.0.0.1",
            ":80",
            "h:0",
            "h:70000",
            "::1:80",
            "[x]:80",
            "a b:1",
        ] {
            assert_eq!(parse_connect_to(bad), None, "{bad}");
        }
    }
}
