//! The `server` section: listen address, admin and hook tokens, read protection, shutdown grace, the
//! in-flight cap, and the limits of the daemon's own HTTP server (header timeout, connections).

use super::secrets::secret;
use super::walk::{self, Ctx};
use super::yaml::Node;
use super::{Env, NativeOptions, Secret, Server};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

pub fn server(ctx: &mut Ctx, node: Option<&Node>, base: &Path, env: &Env) -> Option<Server> {
    let mut server = Server {
        listen: "0.0.0.0:9090".parse().ok()?,
        admin_token: None,
        hook_token: None,
        protect_reads: false,
        public_evidence: false,
        grace_period: Duration::from_secs(30),
        max_in_flight: 20_000,
        header_timeout: Duration::from_secs(10),
        max_connections: 512,
        peers: Vec::new(),
        native_histograms: NativeOptions::default(),
        locations: super::locations::Locations::default(),
    };
    let Some(node) = node else {
        return Some(server);
    };
    let f = walk::fields(
        ctx,
        node,
        "server",
        &[
            "listen",
            "admin_token",
            "hook_token",
            "protect_reads",
            "public_evidence",
            "grace_period",
            "max_in_flight",
            "header_timeout",
            "max_connections",
            "peers",
            "native_histograms",
            "location",
            "locations",
            "resolver",
        ],
    )?;
    if let Some(n) = f.get("listen") {
        listen(ctx, n, &f.path_of("listen"), &mut server);
    }
    tokens(ctx, &f, base, env, &mut server);
    if let Some(n) = f.get("protect_reads") {
        server.protect_reads = walk::boolean(ctx, n, &f.path_of("protect_reads")).unwrap_or(false);
    }
    if let Some(n) = f.get("public_evidence") {
        server.public_evidence =
            walk::boolean(ctx, n, &f.path_of("public_evidence")).unwrap_or(false);
    }
    if let Some(n) = f.get("grace_period") {
        server.grace_period =
            walk::duration(ctx, n, &f.path_of("grace_period")).unwrap_or(server.grace_period);
    }
    limits(ctx, &f, &mut server);
    if let Some(n) = f.get("peers") {
        server.peers = peers(ctx, n, &f.path_of("peers"));
    }
    if let Some(n) = f.get("native_histograms") {
        server.native_histograms = native_histograms(ctx, n, &f.path_of("native_histograms"));
    }
    super::locations::read_server(ctx, &f, &mut server);
    if server.protect_reads && server.admin_token.is_none() {
        ctx.error(
            node.pos,
            "server.protect_reads",
            "protect_reads needs an admin_token",
        );
    }
    Some(server)
}

/// `listen`: the socket address the daemon serves on.
fn listen(ctx: &mut Ctx, n: &Node, path: &str, server: &mut Server) {
    if let Some(s) = walk::string(ctx, n, path) {
        match s.parse::<SocketAddr>() {
            Ok(a) => server.listen = a,
            Err(_) => ctx.error(
                n.pos,
                path,
                format!("`{s}` is not an address like `0.0.0.0:9090` or `[::]:9090`"),
            ),
        }
    }
}

/// `admin_token` and `hook_token`, which must differ.
fn tokens(ctx: &mut Ctx, f: &walk::Fields, base: &Path, env: &Env, server: &mut Server) {
    let admin = token(ctx, f, "admin_token", base, env);
    let hook = token(ctx, f, "hook_token", base, env);
    if let (Some(a), Some(h), Some(n)) = (&admin, &hook, f.get("hook_token"))
        && a.same_as(h)
    {
        ctx.error(
            n.pos,
            &f.path_of("hook_token"),
            "the hook token must differ from the admin token (it grants only the hook endpoint)",
        );
    }
    server.admin_token = admin.map(|t| t.secret);
    server.hook_token = hook.map(|t| t.secret);
}

/// The daemon's own server's limits: `max_in_flight`, `header_timeout`, `max_connections`.
fn limits(ctx: &mut Ctx, f: &walk::Fields, server: &mut Server) {
    if let Some(n) = f.get("max_in_flight") {
        let path = f.path_of("max_in_flight");
        match walk::unsigned(ctx, n, &path) {
            Some(v) if v >= 1 && v <= u32::MAX as u64 => server.max_in_flight = v as u32,
            Some(_) => ctx.error(n.pos, &path, "must be at least 1"),
            None => {}
        }
    }
    if let Some(n) = f.get("header_timeout") {
        let path = f.path_of("header_timeout");
        match walk::duration(ctx, n, &path) {
            Some(d) if d >= Duration::from_millis(100) => server.header_timeout = d,
            Some(_) => ctx.error(n.pos, &path, "must be at least 100ms"),
            None => {}
        }
    }
    if let Some(n) = f.get("max_connections") {
        let path = f.path_of("max_connections");
        match walk::unsigned(ctx, n, &path) {
            Some(v) if (1..=1_000_000).contains(&v) => server.max_connections = v as u32,
            Some(_) => ctx.error(n.pos, &path, "must be between 1 and 1000000"),
            None => {}
        }
    }
}

impl Server {
    /// The peers' base URLs for `shards` shards: an entry with `{i}` once per index `0..shards`
    /// (a StatefulSet's `sloburn-{i}.sloburn:9090`), any other as it is.
    pub fn peer_urls(&self, shards: u32) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.peers {
            if p.contains("{i}") {
                out.extend((0..shards).map(|i| p.replace("{i}", &i.to_string())));
            } else {
                out.push(p.clone());
            }
        }
        out
    }
}

/// At most this many `server.peers` entries (a `{i}` entry counts once; it expands to the
/// shard count when the daemon starts).
pub const MAX_PEERS: usize = 1024;

/// `server.peers`: a list of `host:port` or `http://host:port` (a path is kept as the API's
/// base), each a base URL afterwards; `{i}` may stand for a shard index.
fn peers(ctx: &mut Ctx, node: &Node, path: &str) -> Vec<String> {
    let items = walk::seq(ctx, node, path);
    if items.len() > MAX_PEERS {
        ctx.error(
            node.pos,
            path,
            format!(
                "{} peers: at most {MAX_PEERS} (use `{{i}}` for a StatefulSet's pods)",
                items.len()
            ),
        );
        return Vec::new();
    }
    let mut out = Vec::new();
    for (k, n) in items.iter().enumerate() {
        let p = format!("{path}[{k}]");
        let Some(s) = walk::string(ctx, n, &p) else {
            continue;
        };
        let s = s.trim();
        let url = if s.contains("://") {
            s.to_string()
        } else {
            format!("http://{s}")
        };
        // Checked with `{i}` as 0: the expanded URLs differ only in that number.
        match url.replace("{i}", "0").parse::<http::Uri>() {
            Ok(u) if u.scheme_str() == Some("http") && u.authority().is_some() && u.query().is_none() => {
                out.push(url.trim_end_matches('/').to_string());
            }
            Ok(u) if u.scheme_str() != Some("http") => ctx.error(
                n.pos,
                &p,
                format!("`{s}`: peers are reached over plain http (`host:port` or `http://host:port`)"),
            ),
            _ => ctx.error(
                n.pos,
                &p,
                format!("`{s}` is not a peer address like `sloburn-{{i}}.sloburn:9090` or `http://10.0.0.7:9090`"),
            ),
        }
    }
    out
}

/// `native_histograms: {schema, classic_buckets}`: how the protobuf exposition writes
/// histograms. The schema is a whole number from -4 to 5 (the resolution native buckets are
/// counted at).
fn native_histograms(ctx: &mut Ctx, node: &Node, path: &str) -> NativeOptions {
    let mut opts = NativeOptions::default();
    let Some(f) = walk::fields(ctx, node, path, &["schema", "classic_buckets"]) else {
        return opts;
    };
    if let Some(n) = f.get("schema") {
        let path = f.path_of("schema");
        match walk::number(ctx, n, &path) {
            Some(v)
                if v.fract() == 0.0
                    && (f64::from(crate::hist::MIN_SCHEMA)
                        ..=f64::from(NativeOptions::MAX_SCHEMA))
                        .contains(&v) =>
            {
                opts.schema = v as i32;
            }
            Some(_) => ctx.error(
                n.pos,
                &path,
                format!(
                    "must be a whole number from {} to {} (each native bucket is 2^(2^-schema) \
                     times as wide as the last)",
                    crate::hist::MIN_SCHEMA,
                    NativeOptions::MAX_SCHEMA
                ),
            ),
            None => {}
        }
    }
    opts.classic_buckets = walk::opt_bool(ctx, &f, "classic_buckets", true);
    opts
}

/// A token as read: its value when it was resolved, and the text as written.
struct Token {
    secret: Secret,
    written: String,
    /// Whether `secret` holds the value: when this command reads the server's secrets
    /// (`check` and `serve` do; `rules`, `openslo export` and `run` do not). A literal's value
    /// is its text, so comparing the texts judges literals right either way.
    resolved: bool,
}

impl Token {
    /// Whether both tokens are surely the same secret: equal values where both are resolved,
    /// else the same text as written (`${env:A}` twice). Two different references are not
    /// judged without their values, so a command that does not read secrets never refuses a
    /// config that `check` accepts; `check` and `serve` still refuse two references that
    /// resolve to the same value.
    fn same_as(&self, other: &Token) -> bool {
        if self.resolved && other.resolved {
            self.secret.expose() == other.secret.expose()
        } else {
            self.written == other.written
        }
    }
}

/// A bearer token (`admin_token`, `hook_token`): a string or a `${env:..}`/`${file:..}` secret.
fn token(ctx: &mut Ctx, f: &walk::Fields, key: &str, base: &Path, env: &Env) -> Option<Token> {
    let n = f.get(key)?;
    let path = f.path_of(key);
    let written = n.as_scalar().map(str::to_string);
    let reads = env.resolve_server_secrets && env.resolve_secrets;
    let secret = if env.resolve_server_secrets {
        secret(ctx, n, &path, base, env).map(Secret::new)
    } else {
        // `sloburn run` never serves the API: its tokens are not read, only their shape checked.
        walk::string(ctx, n, &path).map(|_| Secret::new("unresolved".into()))
    }?;
    let written = written?;
    Some(Token {
        resolved: reads,
        secret,
        written,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Server;

    #[test]
    fn a_peer_with_i_names_every_shard_and_others_stay_as_written() {
        let mut s = Server {
            listen: "127.0.0.1:9090".parse().unwrap(),
            admin_token: None,
            hook_token: None,
            protect_reads: false,
            public_evidence: false,
            grace_period: std::time::Duration::ZERO,
            max_in_flight: 1,
            header_timeout: std::time::Duration::ZERO,
            max_connections: 1,
            peers: vec![
                "http://sloburn-{i}.sloburn:9090".into(),
                "http://10.0.0.7:9090".into(),
            ],
            native_histograms: super::super::NativeOptions::default(),
            locations: super::super::locations::Locations::default(),
        };
        assert_eq!(
            s.peer_urls(3),
            [
                "http://sloburn-0.sloburn:9090",
                "http://sloburn-1.sloburn:9090",
                "http://sloburn-2.sloburn:9090",
                "http://10.0.0.7:9090",
            ]
        );
        s.peers.clear();
        assert!(s.peer_urls(3).is_empty());
    }
}
