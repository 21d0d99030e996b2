//! The `telemetry` section (DESIGN.md "Telemetry"): `otlp` (endpoint, protocol, headers,
//! timeout), `traces` (`sample_ratio`, `propagate`, `tracestate`, the queue) and `resource`.

use super::Env;
use super::secrets::expand;
use super::walk::{self, Ctx, join};
use super::yaml::{Node, Value};
use crate::telemetry::{OtlpConfig, Protocol, TelemetryConfig, TracesConfig};
use std::path::Path;
use std::time::Duration;

/// `None` when the section is absent (no tracing) or has errors (recorded in `ctx`).
pub fn telemetry(
    ctx: &mut Ctx,
    node: Option<&Node>,
    base: &Path,
    env: &Env,
) -> Option<TelemetryConfig> {
    let node = node?;
    let f = walk::fields(ctx, node, "telemetry", &["otlp", "traces", "resource"])?;
    let errors = ctx.errors.len();
    let otlp = match f.get("otlp") {
        Some(n) => otlp(ctx, n, base, env),
        None => OtlpConfig::default(),
    };
    let traces = match f.get("traces") {
        Some(n) => traces(ctx, n),
        None => TracesConfig::default(),
    };
    let mut resource = Vec::new();
    if let Some(n) = f.get("resource") {
        let path = f.path_of("resource");
        match &n.value {
            Value::Map(entries) => {
                for (key, value) in entries {
                    let p = join(&path, &key.name);
                    if key.name.is_empty() {
                        ctx.error(key.pos, &p, "an attribute name cannot be empty");
                    } else if let Some(v) = walk::string(ctx, value, &p) {
                        resource.push((key.name.clone(), v));
                    }
                }
            }
            Value::Null => {}
            _ => ctx.error(
                n.pos,
                &path,
                format!("expected a mapping, found {}", n.kind()),
            ),
        }
    }
    (ctx.errors.len() == errors).then_some(TelemetryConfig {
        otlp,
        traces,
        resource,
    })
}

fn otlp(ctx: &mut Ctx, node: &Node, base: &Path, env: &Env) -> OtlpConfig {
    let mut out = OtlpConfig::default();
    let path = "telemetry.otlp";
    let Some(f) = walk::fields(ctx, node, path, &["endpoint", "headers", "timeout"]) else {
        return out;
    };
    if let Some(n) = f.get("endpoint")
        && let Some(e) = walk::string(ctx, n, &f.path_of("endpoint"))
    {
        let p = f.path_of("endpoint");
        let scheme = e.split_once("://").map(|(s, _)| s);
        match scheme {
            Some("http" | "https") => out.protocol = Some(Protocol::HttpProtobuf),
            Some("grpc") => out.protocol = Some(Protocol::Grpc),
            _ => ctx.error(
                n.pos,
                &p,
                "must start with http:// or https:// (OTLP/HTTP) or grpc:// (OTLP/gRPC)",
            ),
        }
        let probe = e.replacen("grpc://", "http://", 1);
        match probe.parse::<http::Uri>() {
            Ok(u) if u.host().is_some() => out.endpoint = Some(e),
            _ if scheme.is_none() => {}
            _ => ctx.error(n.pos, &p, "not a valid URL with a host"),
        }
    }
    if let Some(n) = f.get("headers") {
        let hpath = f.path_of("headers");
        match &n.value {
            Value::Map(entries) => {
                for (key, value) in entries {
                    let p = join(&hpath, &key.name);
                    if http::HeaderName::from_bytes(key.name.as_bytes()).is_err() {
                        ctx.error(key.pos, &p, "not a valid header name");
                        continue;
                    }
                    let Some(raw) = walk::string(ctx, value, &p) else {
                        continue;
                    };
                    let Some(text) = expand(ctx, &raw, value.pos, &p, base, env) else {
                        continue;
                    };
                    match http::HeaderValue::from_str(&text) {
                        Ok(mut v) => {
                            // Export headers are credentials as a rule.
                            v.set_sensitive(true);
                            out.headers.push((key.name.to_ascii_lowercase(), v));
                        }
                        Err(_) => ctx.error(value.pos, &p, "not a valid header value"),
                    }
                }
            }
            _ => ctx.error(
                n.pos,
                &hpath,
                format!("expected a mapping, found {}", n.kind()),
            ),
        }
    }
    if let Some(n) = f.get("timeout")
        && let Some(d) = walk::positive_duration(ctx, n, &f.path_of("timeout"))
    {
        out.timeout = Some(d);
    }
    out
}

fn traces(ctx: &mut Ctx, node: &Node) -> TracesConfig {
    let mut out = TracesConfig::default();
    let path = "telemetry.traces";
    let Some(f) = walk::fields(
        ctx,
        node,
        path,
        &[
            "sample_ratio",
            "propagate",
            "tracestate",
            "max_queue_size",
            "max_export_batch_size",
            "schedule_delay",
        ],
    ) else {
        return out;
    };
    if let Some(n) = f.get("sample_ratio")
        && let Some(r) = walk::number(ctx, n, &f.path_of("sample_ratio"))
    {
        if (0.0..=1.0).contains(&r) {
            out.sample_ratio = r;
        } else {
            ctx.error(n.pos, &f.path_of("sample_ratio"), "must be between 0 and 1");
        }
    }
    out.propagate = walk::opt_bool(ctx, &f, "propagate", true);
    if let Some(n) = f.get("tracestate")
        && let Some(s) = walk::string(ctx, n, &f.path_of("tracestate"))
    {
        match crate::telemetry::propagation::check_tracestate(&s) {
            Ok(()) => out.tracestate = Some(s),
            Err(e) => ctx.error(n.pos, &f.path_of("tracestate"), e),
        }
    }
    for (key, slot, max) in [
        ("max_queue_size", &mut out.max_queue_size, 1 << 20),
        (
            "max_export_batch_size",
            &mut out.max_export_batch_size,
            1 << 16,
        ),
    ] {
        if let Some(n) = f.get(key)
            && let Some(v) = walk::unsigned(ctx, n, &f.path_of(key))
        {
            if v == 0 || v > max {
                ctx.error(
                    n.pos,
                    &f.path_of(key),
                    format!("must be between 1 and {max}"),
                );
            } else {
                *slot = v as usize;
            }
        }
    }
    if let Some(n) = f.get("schedule_delay")
        && let Some(d) = walk::positive_duration(ctx, n, &f.path_of("schedule_delay"))
    {
        if d > Duration::from_secs(60) {
            ctx.error(n.pos, &f.path_of("schedule_delay"), "must be at most 60s");
        } else {
            out.schedule_delay = d;
        }
    }
    out
}
