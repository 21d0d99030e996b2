//! From the YAML tree to validated types, section by section. Every function records its
//! problems in the [`Ctx`] and returns what it could build, so the checker reports all of them.

use super::walk::{self, Ctx, Fields, did_you_mean, join};
use super::yaml::{Node, Pos, Value};
use super::*;
use crate::checks::{CheckKind, HeaderExpect, JsonExpect, JsonPath};
use crate::load::presets::Preset;
use crate::load::spec::Stage;

pub fn config(ctx: &mut Ctx, root: &Node, base: &Path, env: &Env) -> Option<Config> {
    if root.is_null() {
        ctx.error(root.pos, "", "the config is empty; see config/example.yaml");
        return None;
    }
    let top = walk::fields(
        ctx,
        root,
        "",
        &["server", "storage", "targets", "profiles", "slos"],
    )?;
    let server = server(ctx, top.get("server"), base, env);
    let storage = storage(ctx, top.get("storage"), base);

    let mut targets = BTreeMap::new();
    if let Some(node) = top.get("targets") {
        for (name, _, node) in walk::named(ctx, node, "targets") {
            if let Some(t) = target(ctx, &name, node, base, env) {
                targets.insert(name, t);
            }
        }
    }
    let target_names: Vec<(String, bool)> = match top.get("targets") {
        Some(n) => named_keys(n),
        None => Vec::new(),
    };
    if target_names.is_empty() {
        ctx.error(
            top.get("targets").map_or(root.pos, |n| n.pos),
            "targets",
            "define at least one target",
        );
    }

    let mut slos = BTreeMap::new();
    if let Some(node) = top.get("slos") {
        for (name, _, node) in walk::named(ctx, node, "slos") {
            if let Some(s) = slo(ctx, &name, node, &target_names) {
                slos.insert(name, s);
            }
        }
    }

    let mut profiles = BTreeMap::new();
    if let Some(node) = top.get("profiles") {
        for (name, _, node) in walk::named(ctx, node, "profiles") {
            if let Some(p) = profile(ctx, &name, node, &target_names) {
                profiles.insert(name, p);
            }
        }
    }
    cross_check(ctx, &top, &profiles, &slos);
    Some(Config {
        server: server?,
        storage: storage?,
        targets,
        profiles,
        slos,
    })
}

/// Names under a section, with whether each is a well-formed mapping (for reference checks
/// that should not pile a second error on a broken entry).
fn named_keys(node: &Node) -> Vec<(String, bool)> {
    match &node.value {
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.name.clone(), matches!(v.value, Value::Map(_))))
            .collect(),
        _ => Vec::new(),
    }
}

fn reference(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    kind: &str,
    known: &[(String, bool)],
) -> Option<String> {
    let name = walk::string(ctx, node, path)?;
    if known.iter().any(|(k, _)| *k == name) {
        return Some(name);
    }
    let hint = did_you_mean(&name, known.iter().map(|(k, _)| k.as_str()))
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_else(|| {
            let all: Vec<&str> = known.iter().map(|(k, _)| k.as_str()).collect();
            if all.is_empty() {
                String::new()
            } else {
                format!(" (known: {})", all.join(", "))
            }
        });
    ctx.error(node.pos, path, format!("unknown {kind} `{name}`{hint}"));
    None
}

fn server(ctx: &mut Ctx, node: Option<&Node>, base: &Path, env: &Env) -> Option<Server> {
    let mut server = Server {
        listen: "0.0.0.0:9090".parse().ok()?,
        admin_token: None,
        protect_reads: false,
        grace_period: Duration::from_secs(30),
        max_in_flight: 20_000,
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
            "protect_reads",
            "grace_period",
            "max_in_flight",
        ],
    )?;
    if let Some(n) = f.get("listen") {
        let path = f.path_of("listen");
        if let Some(s) = walk::string(ctx, n, &path) {
            match s.parse::<SocketAddr>() {
                Ok(a) => server.listen = a,
                Err(_) => ctx.error(
                    n.pos,
                    &path,
                    format!("`{s}` is not an address like `0.0.0.0:9090` or `[::]:9090`"),
                ),
            }
        }
    }
    if let Some(n) = f.get("admin_token") {
        server.admin_token = secret(ctx, n, &f.path_of("admin_token"), base, env).map(Secret::new);
    }
    if let Some(n) = f.get("protect_reads") {
        server.protect_reads = walk::boolean(ctx, n, &f.path_of("protect_reads")).unwrap_or(false);
    }
    if let Some(n) = f.get("grace_period") {
        server.grace_period =
            walk::duration(ctx, n, &f.path_of("grace_period")).unwrap_or(server.grace_period);
    }
    if let Some(n) = f.get("max_in_flight") {
        let path = f.path_of("max_in_flight");
        match walk::unsigned(ctx, n, &path) {
            Some(v) if v >= 1 && v <= u32::MAX as u64 => server.max_in_flight = v as u32,
            Some(_) => ctx.error(n.pos, &path, "must be at least 1"),
            None => {}
        }
    }
    if server.protect_reads && server.admin_token.is_none() {
        ctx.error(
            node.pos,
            "server.protect_reads",
            "protect_reads needs an admin_token",
        );
    }
    Some(server)
}

fn storage(ctx: &mut Ctx, node: Option<&Node>, base: &Path) -> Option<Storage> {
    let mut storage = Storage {
        path: base.join("sloburn-data"),
        flush_interval: Duration::from_secs(5),
    };
    let Some(node) = node else {
        return Some(storage);
    };
    let f = walk::fields(ctx, node, "storage", &["path", "flush_interval"])?;
    if let Some(n) = f.get("path")
        && let Some(p) = walk::string(ctx, n, &f.path_of("path"))
    {
        storage.path = base.join(p);
    }
    if let Some(n) = f.get("flush_interval") {
        let path = f.path_of("flush_interval");
        if let Some(d) = walk::duration(ctx, n, &path) {
            if d.is_zero() || d > Duration::from_secs(10) {
                ctx.error(
                    n.pos,
                    &path,
                    "must be between 1ms and 10s (a crash loses at most this much SLO data)",
                );
            } else {
                storage.flush_interval = d;
            }
        }
    }
    Some(storage)
}

/// Expands `${env:NAME}` and `${file:PATH}` references. Messages never include the value.
fn expand(
    ctx: &mut Ctx,
    text: &str,
    pos: Pos,
    path: &str,
    base: &Path,
    env: &Env,
) -> Option<String> {
    let mut out = String::new();
    let mut rest = text;
    let mut ok = true;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            ctx.error(pos, path, "`${` without a closing `}`");
            return None;
        };
        let reference = &after[..end];
        match reference.split_once(':') {
            Some(("env" | "file", _)) if !env.resolve_secrets => out.push_str("unresolved"),
            Some(("env", name)) => match env.var(name) {
                Some(v) => out.push_str(&v),
                None => {
                    ctx.error(
                        pos,
                        path,
                        format!("environment variable `{name}` is not set"),
                    );
                    ok = false;
                }
            },
            Some(("file", file)) => match std::fs::read_to_string(base.join(file)) {
                Ok(v) => out.push_str(v.trim_end_matches(['\n', '\r'])),
                Err(e) => {
                    ctx.error(pos, path, format!("cannot read `{file}`: {e}"));
                    ok = false;
                }
            },
            _ => {
                ctx.error(
                    pos,
                    path,
                    format!("unknown reference `${{{reference}}}`: use `${{env:NAME}}` or `${{file:PATH}}`"),
                );
                ok = false;
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    ok.then_some(out)
}

fn secret(ctx: &mut Ctx, node: &Node, path: &str, base: &Path, env: &Env) -> Option<String> {
    let text = walk::string(ctx, node, path)?;
    if !text.contains("${") {
        ctx.warn(
            node.pos,
            path,
            "a literal token in the config file; prefer `${env:NAME}` or `${file:PATH}`",
        );
    }
    let value = expand(ctx, &text, node.pos, path, base, env)?;
    if value.is_empty() {
        ctx.error(node.pos, path, "the token is empty");
        return None;
    }
    Some(value)
}

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
    "checks",
    "buckets",
];

fn target(ctx: &mut Ctx, name: &str, node: &Node, base: &Path, env: &Env) -> Option<Target> {
    let path = join("targets", name);
    let f = walk::fields(ctx, node, &path, TARGET_FIELDS)?;
    let uri = match f.get("url") {
        Some(n) => url(ctx, n, &f.path_of("url"), env),
        None => {
            ctx.error(node.pos, &path, "missing `url`");
            None
        }
    };
    let method = match f.get("method") {
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
    };
    let mut headers = http::HeaderMap::new();
    if let Some(n) = f.get("headers") {
        let hpath = f.path_of("headers");
        if let Value::Map(entries) = &n.value {
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
        } else {
            ctx.error(
                n.pos,
                &hpath,
                format!("expected a mapping, found {}", n.kind()),
            );
        }
    }
    let body = match (f.get("body"), f.get("body_file")) {
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
                .and_then(|file| match std::fs::read(base.join(&file)) {
                    Ok(b) => Some(bytes::Bytes::from(b)),
                    Err(e) => {
                        ctx.error(n.pos, &p, format!("cannot read `{file}`: {e}"));
                        None
                    }
                })
                .unwrap_or_default()
        }
        (None, None) => bytes::Bytes::new(),
    };
    let timeout = opt_duration(ctx, &f, "timeout", Duration::from_secs(10), true);
    let keep_alive = opt_bool(ctx, &f, "keep_alive", true);
    let insecure_skip_verify = opt_bool(ctx, &f, "insecure_skip_verify", false);
    let mut dns_ttl = Duration::from_secs(300);
    if let Some(n) = f.get("dns")
        && let Some(d) = walk::fields(ctx, n, &f.path_of("dns"), &["ttl"])
        && let Some(t) = d.get("ttl")
        && let Some(v) = walk::duration(ctx, t, &d.path_of("ttl"))
    {
        dns_ttl = v;
    }
    let max_body = match f.get("max_body") {
        Some(n) => walk::size(ctx, n, &f.path_of("max_body")).unwrap_or(1 << 20),
        None => 1 << 20,
    };
    let checks = f
        .get("checks")
        .map(|n| checks(ctx, n, &f.path_of("checks")))
        .unwrap_or_default();
    let buckets = f
        .get("buckets")
        .map(|n| buckets(ctx, n, &f.path_of("buckets")))
        .unwrap_or_else(|| DEFAULT_BUCKETS.to_vec());
    if let Some(uri) = &uri
        && let Some(host) = uri.host()
        && let Some(n) = f.get("url")
        && let Some(msg) = crate::http::ndots_warning(host, env.ndots)
    {
        ctx.warn(n.pos, &f.path_of("url"), msg);
    }
    Some(Target {
        name: name.to_string(),
        uri: uri?,
        method: method?,
        headers,
        body,
        timeout,
        keep_alive,
        dns_ttl,
        max_body,
        insecure_skip_verify,
        checks,
        buckets,
    })
}

fn is_sensitive_header(name: &http::HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "x-api-key"
    )
}

fn url(ctx: &mut Ctx, node: &Node, path: &str, env: &Env) -> Option<http::Uri> {
    let text = walk::string(ctx, node, path)?;
    let text = expand(ctx, &text, node.pos, path, Path::new("."), env)?;
    let uri: http::Uri = match text.parse() {
        Ok(u) => u,
        Err(e) => {
            ctx.error(node.pos, path, format!("`{text}` is not a URL: {e}"));
            return None;
        }
    };
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => {
            ctx.error(
                node.pos,
                path,
                format!("unsupported scheme `{other}`: use http:// or https://"),
            );
            return None;
        }
        None => {
            ctx.error(
                node.pos,
                path,
                format!("`{text}` has no scheme: write `http://{text}`"),
            );
            return None;
        }
    }
    if uri.host().is_none_or(|h| h.is_empty()) {
        ctx.error(node.pos, path, format!("`{text}` has no host"));
        return None;
    }
    Some(uri)
}

fn checks(ctx: &mut Ctx, node: &Node, path: &str) -> Vec<Check> {
    let mut out: Vec<Check> = Vec::new();
    for (i, item) in walk::seq(ctx, node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(f) = walk::fields(
            ctx,
            item,
            &p,
            &[
                "name",
                "status",
                "body_contains",
                "body_matches",
                "json",
                "header",
                "duration_under",
            ],
        ) else {
            continue;
        };
        let kinds: Vec<&str> = [
            "status",
            "body_contains",
            "body_matches",
            "json",
            "header",
            "duration_under",
        ]
        .into_iter()
        .filter(|k| f.has(k))
        .collect();
        if kinds.len() != 1 {
            ctx.error(
                item.pos,
                &p,
                "each check needs exactly one of status, body_contains, body_matches, json, header, duration_under",
            );
            continue;
        }
        let key = kinds[0];
        let Some(n) = f.get(key) else { continue };
        let kp = f.path_of(key);
        let built = match key {
            "status" => status(ctx, n, &kp).map(|r| (CheckKind::Status(r), "status".to_string())),
            "body_contains" => walk::string(ctx, n, &kp)
                .map(|s| (CheckKind::BodyContains(s), "body_contains".to_string())),
            "body_matches" => walk::string(ctx, n, &kp).and_then(|s| {
                regex(ctx, n, &kp, &s).map(|re| (CheckKind::BodyMatches(re), "body_matches".into()))
            }),
            "json" => json_check(ctx, n, &kp),
            "header" => header_check(ctx, n, &kp),
            _ => walk::duration(ctx, n, &kp).map(|d| {
                (
                    CheckKind::DurationUnder(d),
                    format!("duration_under_{}", units::format_duration(d)),
                )
            }),
        };
        let Some((kind, default_name)) = built else {
            continue;
        };
        let name = match f.get("name") {
            Some(n) => walk::string(ctx, n, &f.path_of("name")).unwrap_or(default_name),
            None => default_name,
        };
        if out.iter().any(|c| c.name == name) {
            ctx.error(
                item.pos,
                &p,
                format!(
                    "two checks are named `{name}`; give one a `name:` (names become metric labels)"
                ),
            );
            continue;
        }
        out.push(Check { name, kind });
    }
    out
}

fn regex(ctx: &mut Ctx, node: &Node, path: &str, src: &str) -> Option<regex::Regex> {
    match regex::Regex::new(src) {
        Ok(re) => Some(re),
        Err(e) => {
            let msg = e.to_string();
            let last = msg.lines().last().unwrap_or("invalid").trim();
            let last = last.strip_prefix("error: ").unwrap_or(last).to_string();
            ctx.error(node.pos, path, format!("bad regular expression: {last}"));
            None
        }
    }
}

/// `200`, `[200, 204]`, `200-299` or `2xx`.
fn status(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Vec<(u16, u16)>> {
    let mut ranges = Vec::new();
    for item in walk::one_or_many(node) {
        let Some(text) = walk::string(ctx, item, path) else {
            continue;
        };
        let t = text.trim();
        let parsed = if let Some(class) = t.strip_suffix("xx") {
            class
                .parse::<u16>()
                .ok()
                .filter(|c| (1..=5).contains(c))
                .map(|c| (c * 100, c * 100 + 99))
        } else if let Some((a, b)) = t.split_once('-') {
            match (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
                (Ok(a), Ok(b)) if a <= b => Some((a, b)),
                _ => None,
            }
        } else {
            t.parse::<u16>().ok().map(|c| (c, c))
        };
        match parsed {
            Some((a, b)) if (100..=599).contains(&a) && (100..=599).contains(&b) => {
                ranges.push((a, b))
            }
            _ => ctx.error(
                item.pos,
                path,
                format!(
                    "`{t}` is not a status: use a code (200), a range (200-299) or a class (2xx)"
                ),
            ),
        }
    }
    (!ranges.is_empty()).then_some(ranges)
}

fn json_check(ctx: &mut Ctx, node: &Node, path: &str) -> Option<(CheckKind, String)> {
    let f = walk::fields(ctx, node, path, &["path", "equals"])?;
    let Some(pn) = f.get("path") else {
        ctx.error(node.pos, path, "missing `path` (like `$.status`)");
        return None;
    };
    let pp = f.path_of("path");
    let src = walk::string(ctx, pn, &pp)?;
    let jp = match JsonPath::parse(&src) {
        Ok(p) => p,
        Err(e) => {
            ctx.error(pn.pos, &pp, e);
            return None;
        }
    };
    let expect = match f.get("equals") {
        Some(n) => JsonExpect::Equals(yaml_to_json(n)),
        None => JsonExpect::Exists,
    };
    Some((CheckKind::Json { path: jp, expect }, format!("json_{src}")))
}

fn yaml_to_json(node: &Node) -> serde_json::Value {
    match &node.value {
        Value::Null => serde_json::Value::Null,
        Value::Scalar { text, quoted: true } => serde_json::Value::String(text.clone()),
        Value::Scalar {
            text,
            quoted: false,
        } => match text.as_str() {
            "true" => true.into(),
            "false" => false.into(),
            "null" | "~" => serde_json::Value::Null,
            t => t
                .parse::<i64>()
                .map(serde_json::Value::from)
                .or_else(|_| t.parse::<f64>().map(serde_json::Value::from))
                .unwrap_or_else(|_| serde_json::Value::String(t.to_string())),
        },
        Value::Seq(items) => items.iter().map(yaml_to_json).collect(),
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.name.clone(), yaml_to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

fn header_check(ctx: &mut Ctx, node: &Node, path: &str) -> Option<(CheckKind, String)> {
    let f = walk::fields(ctx, node, path, &["name", "equals", "matches"])?;
    let Some(nn) = f.get("name") else {
        ctx.error(node.pos, path, "missing `name` (the header to check)");
        return None;
    };
    let np = f.path_of("name");
    let raw = walk::string(ctx, nn, &np)?;
    let Ok(name) = http::HeaderName::from_bytes(raw.to_ascii_lowercase().as_bytes()) else {
        ctx.error(nn.pos, &np, format!("`{raw}` is not a valid header name"));
        return None;
    };
    let expect = match (f.get("equals"), f.get("matches")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("equals"),
                "set `equals` or `matches`, not both",
            );
            return None;
        }
        (Some(n), None) => HeaderExpect::Equals(walk::string(ctx, n, &f.path_of("equals"))?),
        (None, Some(n)) => {
            let p = f.path_of("matches");
            let src = walk::string(ctx, n, &p)?;
            HeaderExpect::Matches(regex(ctx, n, &p, &src)?)
        }
        (None, None) => HeaderExpect::Exists,
    };
    let label = format!("header_{}", name.as_str());
    Some((CheckKind::Header { name, expect }, label))
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

fn opt_bool(ctx: &mut Ctx, f: &Fields, key: &str, default: bool) -> bool {
    f.get(key)
        .and_then(|n| walk::boolean(ctx, n, &f.path_of(key)))
        .unwrap_or(default)
}

fn opt_duration(
    ctx: &mut Ctx,
    f: &Fields,
    key: &str,
    default: Duration,
    positive: bool,
) -> Duration {
    let Some(n) = f.get(key) else { return default };
    let p = f.path_of(key);
    match walk::duration(ctx, n, &p) {
        Some(d) if positive && d.is_zero() => {
            ctx.error(n.pos, &p, "must be longer than zero");
            default
        }
        Some(d) => d,
        None => default,
    }
}

const EXECUTORS: &[&str] = &[
    "constant-vus",
    "ramping-vus",
    "constant-arrival-rate",
    "ramping-arrival-rate",
    "shared-iterations",
    "per-vu-iterations",
];

const PROFILE_COMMON: &[&str] = &[
    "target",
    "executor",
    "preset",
    "peak_vus",
    "peak_rate",
    "schedule",
    "every",
    "timezone",
    "jitter",
    "overlap",
    "run_on_start",
    "thresholds",
    "abort_on_fail",
    "graceful_stop",
    "start_time",
    "guard",
    "description",
];

/// Fields each executor takes, beyond the common ones.
fn executor_fields(executor: &str) -> &'static [&'static str] {
    match executor {
        "constant-vus" => &["vus", "duration"],
        "ramping-vus" => &["start_vus", "stages", "graceful_ramp_down"],
        "constant-arrival-rate" => &["rate", "duration", "pre_allocated_vus", "max_vus"],
        "ramping-arrival-rate" => &["start_rate", "stages", "pre_allocated_vus", "max_vus"],
        "shared-iterations" | "per-vu-iterations" => &["vus", "iterations", "max_duration"],
        _ => &[],
    }
}

const ALL_EXECUTOR_FIELDS: &[&str] = &[
    "vus",
    "duration",
    "start_vus",
    "stages",
    "graceful_ramp_down",
    "rate",
    "start_rate",
    "pre_allocated_vus",
    "max_vus",
    "iterations",
    "max_duration",
];

fn profile(ctx: &mut Ctx, name: &str, node: &Node, targets: &[(String, bool)]) -> Option<Profile> {
    let path = join("profiles", name);
    let mut allowed: Vec<&str> = PROFILE_COMMON.to_vec();
    allowed.extend_from_slice(ALL_EXECUTOR_FIELDS);
    let f = walk::fields(ctx, node, &path, &allowed)?;

    let target = match f.get("target") {
        Some(n) => reference(ctx, n, &f.path_of("target"), "target", targets),
        None => {
            ctx.error(node.pos, &path, "missing `target`");
            None
        }
    };
    let preset = f.get("preset").and_then(|n| {
        let p = f.path_of("preset");
        walk::string(ctx, n, &p).and_then(|name| match name.parse::<Preset>() {
            Ok(preset) => Some(preset),
            Err(e) => {
                ctx.error(n.pos, &p, e);
                None
            }
        })
    });
    let executor = if f.has("preset") {
        preset.and_then(|preset| preset_executor(ctx, &f, preset))
    } else {
        for key in ["peak_vus", "peak_rate"] {
            if let Some(n) = f.get(key) {
                ctx.error(
                    n.pos,
                    &f.path_of(key),
                    format!("`{key}` goes with `preset`"),
                );
            }
        }
        executor_block(ctx, &f)
    };

    let schedule = match (f.get("schedule"), f.get("every")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("schedule"),
                "set `schedule` or `every`, not both",
            );
            None
        }
        (Some(n), None) => {
            let p = f.path_of("schedule");
            let tz = f
                .get("timezone")
                .and_then(|t| walk::string(ctx, t, &f.path_of("timezone")).map(|s| (t.pos, s)));
            walk::string(ctx, n, &p).and_then(|expr| {
                match Schedule::parse(&expr, tz.as_ref().map(|(_, s)| s.as_str())) {
                    Ok(s) => Some(s),
                    Err(e @ crate::schedule::ScheduleError::UnknownTimeZone { .. }) => {
                        let (pos, _) = tz.clone().unwrap_or((n.pos, String::new()));
                        ctx.error(pos, &f.path_of("timezone"), e.to_string());
                        None
                    }
                    Err(e) => {
                        ctx.error(n.pos, &p, e.to_string());
                        None
                    }
                }
            })
        }
        (None, Some(n)) => {
            let p = f.path_of("every");
            walk::duration(ctx, n, &p).and_then(|d| match Schedule::every(d) {
                Ok(s) => Some(s),
                Err(e) => {
                    ctx.error(n.pos, &p, e.to_string());
                    None
                }
            })
        }
        (None, None) => None,
    };
    if !f.has("schedule")
        && let Some(n) = f.get("timezone")
    {
        ctx.error(
            n.pos,
            &f.path_of("timezone"),
            "`timezone` needs a `schedule`",
        );
    }
    let jitter = opt_duration(ctx, &f, "jitter", Duration::ZERO, false);
    let overlap = match f.get("overlap") {
        Some(n) => {
            let p = f.path_of("overlap");
            match walk::string(ctx, n, &p).as_deref() {
                Some("skip") => Overlap::Skip,
                Some("queue") => Overlap::Queue,
                Some(other) => {
                    ctx.error(
                        n.pos,
                        &p,
                        format!("`{other}` is not an overlap policy: use `skip` or `queue`"),
                    );
                    Overlap::Skip
                }
                None => Overlap::Skip,
            }
        }
        None => Overlap::Skip,
    };
    let run_on_start = opt_bool(ctx, &f, "run_on_start", false);
    let abort_on_fail = opt_bool(ctx, &f, "abort_on_fail", false);
    // A breakpoint run ramps until a threshold fails, then stops: every threshold aborts.
    let breakpoint = preset == Some(Preset::Breakpoint);
    let thresholds = f
        .get("thresholds")
        .map(|n| {
            thresholds(
                ctx,
                n,
                &f.path_of("thresholds"),
                abort_on_fail || breakpoint,
            )
        })
        .unwrap_or_default();
    if breakpoint
        && thresholds.is_empty()
        && let Some(n) = f.get("preset")
    {
        ctx.warn(
            n.pos,
            &f.path_of("preset"),
            "a breakpoint run without thresholds ramps to its end; add one that marks the break (e.g. http_req_failed: [\"rate<0.01\"])",
        );
    }
    let graceful_stop = opt_duration(ctx, &f, "graceful_stop", Duration::from_secs(30), false);
    let start_time = opt_duration(ctx, &f, "start_time", Duration::ZERO, false);
    let guard = f
        .get("guard")
        .and_then(|n| guard(ctx, n, &f.path_of("guard")));
    Some(Profile {
        name: name.to_string(),
        target: target?,
        executor: executor?,
        schedule,
        jitter,
        overlap,
        run_on_start,
        thresholds,
        graceful_stop,
        start_time,
        guard,
    })
}

/// The executor of a profile written with `executor:` and its own fields.
fn executor_block(ctx: &mut Ctx, f: &Fields) -> Option<Executor> {
    let executor_name = match f.get("executor") {
        Some(n) => {
            let p = f.path_of("executor");
            walk::string(ctx, n, &p).and_then(|e| {
                if EXECUTORS.contains(&e.as_str()) {
                    Some(e)
                } else {
                    let hint = did_you_mean(&e, EXECUTORS.iter().copied())
                        .map(|s| format!("did you mean `{s}`?"))
                        .unwrap_or_else(|| format!("one of: {}", EXECUTORS.join(", ")));
                    ctx.error(n.pos, &p, format!("unknown executor `{e}` ({hint})"));
                    None
                }
            })
        }
        // Like k6's CLI: a rate means an open model, otherwise closed-loop VUs.
        None if f.has("rate") => Some("constant-arrival-rate".into()),
        None if f.has("iterations") => Some("shared-iterations".into()),
        None => Some("constant-vus".into()),
    };
    if let Some(e) = &executor_name {
        let own = executor_fields(e);
        for field in ALL_EXECUTOR_FIELDS {
            if !own.contains(field)
                && let Some(n) = f.get(field)
            {
                ctx.error(
                    n.pos,
                    &f.path_of(field),
                    format!(
                        "`{field}` does not apply to executor `{e}` (it takes {})",
                        own.join(", ")
                    ),
                );
            }
        }
    }
    executor_name.and_then(|e| executor(ctx, f, &e))
}

/// A load-test type built from stages: `preset`, `peak_vus` or `peak_rate`, optional
/// `duration` (the whole shape, scaled) and `max_vus` (with `peak_rate`).
fn preset_executor(ctx: &mut Ctx, f: &Fields, preset: Preset) -> Option<Executor> {
    if let Some(n) = f.get("executor") {
        ctx.error(
            n.pos,
            &f.path_of("executor"),
            "set `executor` or `preset`, not both",
        );
        return None;
    }
    for field in ALL_EXECUTOR_FIELDS {
        if !matches!(*field, "duration" | "max_vus")
            && let Some(n) = f.get(field)
        {
            ctx.error(
                n.pos,
                &f.path_of(field),
                format!("`{field}` does not apply to a preset (it takes peak_vus or peak_rate, duration, max_vus)"),
            );
        }
    }
    let scale = match f.get("duration") {
        Some(n) => Some(positive_duration(ctx, n, &f.path_of("duration"))?),
        None => None,
    };
    let (peak, arrival) = match (f.get("peak_vus"), f.get("peak_rate")) {
        (Some(n), None) => (count_u32(ctx, n, &f.path_of("peak_vus"))? as f64, false),
        (None, Some(n)) => {
            let r = walk::rate(ctx, n, &f.path_of("peak_rate"))?;
            if r <= 0.0 {
                ctx.error(
                    n.pos,
                    &f.path_of("peak_rate"),
                    "the rate must be above zero",
                );
                return None;
            }
            (r, true)
        }
        _ => {
            ctx.error(
                f.node.pos,
                &f.path,
                "a preset needs exactly one of `peak_vus` (closed model) or `peak_rate` (open model)",
            );
            return None;
        }
    };
    let mut executor = preset.executor(peak, arrival, scale);
    if let Some(n) = f.get("max_vus") {
        let p = f.path_of("max_vus");
        if !arrival {
            ctx.error(n.pos, &p, "`max_vus` goes with `peak_rate`");
        } else if let (
            Some(v),
            Executor::RampingArrivalRate {
                max_vus,
                pre_allocated_vus,
                ..
            },
        ) = (count_u32(ctx, n, &p), &mut executor)
        {
            *max_vus = v;
            *pre_allocated_vus = (*pre_allocated_vus).min(v);
        }
    }
    Some(executor)
}

fn required<T>(
    ctx: &mut Ctx,
    f: &Fields,
    key: &str,
    read: impl FnOnce(&mut Ctx, &Node, &str) -> Option<T>,
) -> Option<T> {
    match f.get(key) {
        Some(n) => read(ctx, n, &f.path_of(key)),
        None => {
            ctx.error(f.node.pos, &f.path, format!("missing `{key}`"));
            None
        }
    }
}

fn optional<T>(
    ctx: &mut Ctx,
    f: &Fields,
    key: &str,
    default: T,
    read: impl FnOnce(&mut Ctx, &Node, &str) -> Option<T>,
) -> Option<T> {
    match f.get(key) {
        Some(n) => read(ctx, n, &f.path_of(key)),
        None => Some(default),
    }
}

fn positive_duration(ctx: &mut Ctx, n: &Node, p: &str) -> Option<Duration> {
    let d = walk::duration(ctx, n, p)?;
    if d.is_zero() {
        ctx.error(n.pos, p, "must be longer than zero");
        return None;
    }
    Some(d)
}

fn count_u32(ctx: &mut Ctx, n: &Node, p: &str) -> Option<u32> {
    let v = walk::unsigned(ctx, n, p)?;
    if v == 0 || v > 1_000_000 {
        ctx.error(n.pos, p, "must be between 1 and 1000000");
        return None;
    }
    Some(v as u32)
}

fn executor(ctx: &mut Ctx, f: &Fields, name: &str) -> Option<Executor> {
    match name {
        "constant-vus" => {
            let vus = optional(ctx, f, "vus", 1, count_u32);
            let duration = required(ctx, f, "duration", positive_duration);
            Some(Executor::ConstantVus {
                vus: vus?,
                duration: duration?,
            })
        }
        "ramping-vus" => {
            let start_vus = optional(ctx, f, "start_vus", 1, |c, n, p| {
                walk::unsigned(c, n, p).map(|v| v.min(1_000_000) as u32)
            });
            let stages = required(ctx, f, "stages", |c, n, p| stages(c, n, p, false));
            let graceful = optional(
                ctx,
                f,
                "graceful_ramp_down",
                Duration::from_secs(30),
                walk::duration,
            );
            Some(Executor::RampingVus {
                start_vus: start_vus?,
                stages: stages?,
                graceful_ramp_down: graceful?,
            })
        }
        "constant-arrival-rate" => {
            let rate = required(ctx, f, "rate", |c, n, p| {
                let r = walk::rate(c, n, p)?;
                if r <= 0.0 {
                    c.error(n.pos, p, "the rate must be above zero");
                    return None;
                }
                Some(r)
            });
            let duration = required(ctx, f, "duration", positive_duration);
            let (pre, max) = vu_pool(ctx, f, rate.unwrap_or(1.0));
            Some(Executor::ConstantArrivalRate {
                rate: rate?,
                duration: duration?,
                pre_allocated_vus: pre?,
                max_vus: max?,
            })
        }
        "ramping-arrival-rate" => {
            let start_rate = optional(ctx, f, "start_rate", 0.0, walk::rate);
            let stages = required(ctx, f, "stages", |c, n, p| stages(c, n, p, true));
            let peak = stages
                .as_ref()
                .map(|s| s.iter().map(|s| s.target).fold(0.0, f64::max))
                .unwrap_or(1.0);
            let (pre, max) = vu_pool(ctx, f, peak);
            Some(Executor::RampingArrivalRate {
                start_rate: start_rate?,
                stages: stages?,
                pre_allocated_vus: pre?,
                max_vus: max?,
            })
        }
        _ => {
            let vus = optional(ctx, f, "vus", 1, count_u32);
            let iterations = required(ctx, f, "iterations", |c, n, p| {
                let v = walk::unsigned(c, n, p)?;
                if v == 0 {
                    c.error(n.pos, p, "must be at least 1");
                    return None;
                }
                Some(v)
            });
            let max_duration = optional(
                ctx,
                f,
                "max_duration",
                Duration::from_secs(600),
                positive_duration,
            );
            if name == "shared-iterations" {
                Some(Executor::SharedIterations {
                    vus: vus?,
                    iterations: iterations?,
                    max_duration: max_duration?,
                })
            } else {
                Some(Executor::PerVuIterations {
                    vus: vus?,
                    iterations: iterations?,
                    max_duration: max_duration?,
                })
            }
        }
    }
}

/// `pre_allocated_vus` and `max_vus`, defaulting from the rate so a plain profile works.
fn vu_pool(ctx: &mut Ctx, f: &Fields, peak_rate: f64) -> (Option<u32>, Option<u32>) {
    let guess = (peak_rate / 10.0).ceil().clamp(1.0, 1000.0) as u32;
    let pre = optional(ctx, f, "pre_allocated_vus", guess, count_u32);
    let max = optional(
        ctx,
        f,
        "max_vus",
        pre.unwrap_or(guess).max(guess * 10).min(100_000),
        count_u32,
    );
    if let (Some(p), Some(m), Some(n)) = (pre, max, f.get("max_vus"))
        && m < p
    {
        ctx.error(
            n.pos,
            &f.path_of("max_vus"),
            format!("max_vus ({m}) is below pre_allocated_vus ({p})"),
        );
        return (pre, None);
    }
    (pre, max)
}

fn stages(ctx: &mut Ctx, node: &Node, path: &str, rates: bool) -> Option<Vec<Stage>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (i, item) in walk::seq(ctx, node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(f) = walk::fields(ctx, item, &p, &["duration", "target"]) else {
            ok = false;
            continue;
        };
        let duration = required(ctx, &f, "duration", walk::duration);
        let target = required(ctx, &f, "target", |c, n, p| {
            if rates {
                walk::rate(c, n, p)
            } else {
                walk::unsigned(c, n, p).map(|v| v as f64)
            }
        });
        match (duration, target) {
            (Some(duration), Some(target)) => out.push(Stage { duration, target }),
            _ => ok = false,
        }
    }
    if out.is_empty() && ok {
        ctx.error(node.pos, path, "give at least one stage");
        return None;
    }
    ok.then_some(out)
}

fn thresholds(ctx: &mut Ctx, node: &Node, path: &str, abort_default: bool) -> Vec<ThresholdSpec> {
    let mut out = Vec::new();
    let Value::Map(entries) = &node.value else {
        ctx.error(
            node.pos,
            path,
            format!(
                "expected a mapping of metric → thresholds, found {}",
                node.kind()
            ),
        );
        return out;
    };
    for (key, value) in entries {
        let p = join(path, &key.name);
        // Metric-level problems (unknown name, tag filter) are reported once, at the key.
        if crate::thresholds::metric_kind(&key.name).is_none() {
            let message = match crate::thresholds::parse(&key.name, "") {
                Err(e) => e.to_string(),
                Ok(_) => format!("unknown metric `{}`", key.name),
            };
            ctx.error(key.pos, &p, message);
            continue;
        }
        for (i, item) in walk::one_or_many(value).into_iter().enumerate() {
            let ip = format!("{p}[{i}]");
            let (expr_node, abort, delay) = match &item.value {
                Value::Map(_) => {
                    let Some(f) = walk::fields(
                        ctx,
                        item,
                        &ip,
                        &["threshold", "abort_on_fail", "delay_abort_eval"],
                    ) else {
                        continue;
                    };
                    let Some(expr_node) = f.get("threshold") else {
                        ctx.error(item.pos, &ip, "missing `threshold`");
                        continue;
                    };
                    let abort = optional(ctx, &f, "abort_on_fail", abort_default, walk::boolean);
                    let delay =
                        optional(ctx, &f, "delay_abort_eval", Duration::ZERO, walk::duration);
                    let (Some(abort), Some(delay)) = (abort, delay) else {
                        continue;
                    };
                    (expr_node, abort, delay)
                }
                _ => (item, abort_default, Duration::ZERO),
            };
            let Some(expr) = walk::string(ctx, expr_node, &ip) else {
                continue;
            };
            match crate::thresholds::parse(&key.name, &expr) {
                Ok(threshold) => out.push(ThresholdSpec {
                    threshold,
                    abort_on_fail: abort,
                    delay_abort_eval: delay,
                }),
                Err(crate::thresholds::ThresholdError::Syntax { column, message }) => {
                    let quoted = matches!(expr_node.value, Value::Scalar { quoted: true, .. });
                    let pos = Pos {
                        line: expr_node.pos.line,
                        col: expr_node.pos.col + usize::from(quoted) + column - 1,
                    };
                    ctx.error(pos, &ip, format!("`{expr}`: {message}"));
                }
                Err(e) => ctx.error(expr_node.pos, &ip, e.to_string()),
            }
        }
    }
    out
}

fn guard(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Guard> {
    let f = walk::fields(ctx, node, path, &["slo", "max_burn_rate", "window"])?;
    let slo = required(ctx, &f, "slo", walk::string);
    let max_burn_rate = optional(ctx, &f, "max_burn_rate", 14.4, |c, n, p| {
        let v = walk::number(c, n, p)?;
        if v <= 0.0 {
            c.error(n.pos, p, "must be above zero");
            return None;
        }
        Some(v)
    });
    let window = optional(
        ctx,
        &f,
        "window",
        Duration::from_secs(300),
        positive_duration,
    );
    Some(Guard {
        slo: slo?,
        max_burn_rate: max_burn_rate?,
        window: window?,
    })
}

fn slo(ctx: &mut Ctx, name: &str, node: &Node, targets: &[(String, bool)]) -> Option<Slo> {
    let path = join("slos", name);
    let f = walk::fields(
        ctx,
        node,
        &path,
        &[
            "target",
            "profiles",
            "sli",
            "objective",
            "period",
            "description",
            "labels",
            "alerting",
        ],
    )?;
    let target = required(ctx, &f, "target", |c, n, p| {
        reference(c, n, p, "target", targets)
    });
    let objective = required(ctx, &f, "objective", |c, n, p| {
        let v = walk::number(c, n, p)?;
        if !(v > 0.0 && v < 100.0) {
            c.error(
                n.pos,
                p,
                format!("the objective is a percentage strictly between 0 and 100 (like 99.9), found {v}"),
            );
            return None;
        }
        Some(v)
    });
    let period = optional(
        ctx,
        &f,
        "period",
        Duration::from_secs(30 * 86400),
        |c, n, p| {
            let d = walk::duration(c, n, p)?;
            if d < Duration::from_secs(60) || d.as_secs() % 60 != 0 {
                c.error(
                    n.pos,
                    p,
                    "the period must be whole minutes, at least 1m (typically 28d or 30d)",
                );
                return None;
            }
            Some(d)
        },
    );
    let sli = required(ctx, &f, "sli", sli);
    let profiles = f
        .get("profiles")
        .map(|n| {
            walk::seq(ctx, n, &f.path_of("profiles"))
                .iter()
                .filter_map(|item| walk::string(ctx, item, &f.path_of("profiles")))
                .collect()
        })
        .unwrap_or_default();
    let description = f
        .get("description")
        .and_then(|n| walk::string(ctx, n, &f.path_of("description")))
        .unwrap_or_default();
    let mut labels = BTreeMap::new();
    if let Some(n) = f.get("labels") {
        let lp = f.path_of("labels");
        if let Value::Map(entries) = &n.value {
            for (k, v) in entries {
                let p = join(&lp, &k.name);
                let valid = k.name.chars().enumerate().all(|(i, c)| {
                    c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
                }) && !k.name.starts_with("__")
                    && !k.name.is_empty();
                if !valid {
                    ctx.error(k.pos, &p, "not a valid Prometheus label name");
                } else if matches!(
                    k.name.as_str(),
                    "slo" | "sloth_id" | "sloth_service" | "sloth_slo" | "severity"
                ) {
                    ctx.error(
                        k.pos,
                        &p,
                        format!("`{}` is set by sloburn; pick another label name", k.name),
                    );
                } else if let Some(v) = walk::string(ctx, v, &p) {
                    labels.insert(k.name.clone(), v);
                }
            }
        } else {
            ctx.error(
                n.pos,
                &lp,
                format!("expected a mapping, found {}", n.kind()),
            );
        }
    }
    let tiers = f
        .get("alerting")
        .and_then(|n| alerting(ctx, n, &f.path_of("alerting")));
    Some(Slo {
        name: name.to_string(),
        target: target?,
        profiles,
        objective: objective?,
        period: period?,
        sli: sli?,
        description,
        labels,
        tiers,
    })
}

fn sli(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Sli> {
    if let Some(s) = node.as_scalar() {
        return match s {
            "availability" => Some(Sli::Availability),
            other => {
                ctx.error(
                    node.pos,
                    path,
                    format!("unknown SLI `{other}`: use `availability` or `{{latency: {{under: 300ms}}}}`"),
                );
                None
            }
        };
    }
    let f = walk::fields(ctx, node, path, &["availability", "latency"])?;
    if let Some(n) = f.get("latency") {
        let lf = walk::fields(ctx, n, &f.path_of("latency"), &["under", "failures"])?;
        let under = required(ctx, &lf, "under", positive_duration);
        let exclude = optional(ctx, &lf, "failures", false, |c, n, p| {
            match walk::string(c, n, p).as_deref() {
                Some("exclude") => Some(true),
                Some("include") => Some(false),
                _ => {
                    c.error(
                        n.pos,
                        p,
                        "use `include` (failures are bad, the default) or `exclude`",
                    );
                    None
                }
            }
        });
        return Some(Sli::Latency {
            under: under?,
            exclude_failures: exclude?,
        });
    }
    if f.has("availability") {
        return Some(Sli::Availability);
    }
    ctx.error(
        node.pos,
        path,
        "expected `availability` or `latency: {under: ..}`",
    );
    None
}

fn alerting(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Vec<TierSpec>> {
    let f = walk::fields(ctx, node, path, &["tiers"])?;
    let tn = f.get("tiers")?;
    let tp = f.path_of("tiers");
    let mut out = Vec::new();
    for (i, item) in walk::seq(ctx, tn, &tp).iter().enumerate() {
        let p = format!("{tp}[{i}]");
        let Some(t) = walk::fields(
            ctx,
            item,
            &p,
            &["name", "severity", "long", "short", "factor"],
        ) else {
            continue;
        };
        let name = required(ctx, &t, "name", walk::string);
        let page = required(ctx, &t, "severity", |c, n, p| {
            match walk::string(c, n, p).as_deref() {
                Some("page") => Some(true),
                Some("ticket") => Some(false),
                _ => {
                    c.error(n.pos, p, "severity is `page` or `ticket`");
                    None
                }
            }
        });
        let long = required(ctx, &t, "long", positive_duration);
        let short = required(ctx, &t, "short", positive_duration);
        let factor = required(ctx, &t, "factor", |c, n, p| {
            let v = walk::number(c, n, p)?;
            if v <= 0.0 {
                c.error(n.pos, p, "must be above zero");
                return None;
            }
            Some(v)
        });
        if let (Some(l), Some(s), Some(n)) = (long, short, t.get("short"))
            && s >= l
        {
            ctx.error(
                n.pos,
                &t.path_of("short"),
                "the short window must be shorter than the long one",
            );
            continue;
        }
        if let (Some(name), Some(page), Some(long), Some(short), Some(factor)) =
            (name, page, long, short, factor)
        {
            out.push(TierSpec {
                name,
                page,
                long,
                short,
                factor,
            });
        }
    }
    Some(out)
}

/// Checks that need every section: guards name real SLOs watching the profile's target, and
/// SLO profile lists name real profiles on the SLO's target.
fn cross_check(
    ctx: &mut Ctx,
    top: &Fields,
    profiles: &BTreeMap<String, Profile>,
    slos: &BTreeMap<String, Slo>,
) {
    let profile_nodes = top.get("profiles").map(named_keys).unwrap_or_default();
    let slo_nodes = top.get("slos").map(named_keys).unwrap_or_default();
    for p in profiles.values() {
        let Some(g) = &p.guard else { continue };
        let gpos = node_at(top.get("profiles"), &[&p.name, "guard", "slo"]);
        match slos.get(&g.slo) {
            Some(s) if s.target != p.target => ctx.error(
                gpos,
                &format!("profiles.{}.guard.slo", p.name),
                format!(
                    "SLO `{}` watches target `{}`, but this profile sends to `{}`",
                    g.slo, s.target, p.target
                ),
            ),
            Some(_) => {}
            None if slo_nodes.iter().any(|(n, _)| *n == g.slo) => {}
            None => {
                let hint = did_you_mean(&g.slo, slo_nodes.iter().map(|(k, _)| k.as_str()))
                    .map(|s| format!(" (did you mean `{s}`?)"))
                    .unwrap_or_default();
                ctx.error(
                    gpos,
                    &format!("profiles.{}.guard.slo", p.name),
                    format!("unknown SLO `{}`{hint}", g.slo),
                );
            }
        }
    }
    for s in slos.values() {
        for (i, name) in s.profiles.iter().enumerate() {
            let pos = node_at(top.get("slos"), &[&s.name, "profiles"]);
            let path = format!("slos.{}.profiles[{i}]", s.name);
            match profiles.get(name) {
                Some(p) if p.target != s.target => ctx.error(
                    pos,
                    &path,
                    format!(
                        "profile `{name}` sends to `{}`, not to this SLO's target `{}`",
                        p.target, s.target
                    ),
                ),
                Some(_) => {}
                None if profile_nodes.iter().any(|(n, _)| n == name) => {}
                None => {
                    let hint = did_you_mean(name, profile_nodes.iter().map(|(k, _)| k.as_str()))
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default();
                    ctx.error(pos, &path, format!("unknown profile `{name}`{hint}"));
                }
            }
        }
    }
}

/// Position of a nested value, for errors found after the walk.
fn node_at(root: Option<&Node>, keys: &[&str]) -> Pos {
    let Some(mut node) = root else {
        return Pos::default();
    };
    for key in keys {
        let Value::Map(entries) = &node.value else {
            break;
        };
        match entries.iter().find(|(k, _)| k.name == *key) {
            Some((_, v)) => node = v,
            None => break,
        }
    }
    node.pos
}
