//! `sloburn run --url grpc://HOST:PORT` (or `grpcs://`): an ad-hoc gRPC target from flags.
//! `--grpc-method` (default: the standard health check), `--body` the message in JSON,
//! `-H` metadata, `--proto`/`--import-path` the schema (compiled now, so a wrong method or
//! message is a usage error before any call) or, without them, the server's reflection.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail};

use super::args::RunArgs;
use crate::config::{self, Target};
use crate::http::grpc::{GrpcSpec, GrpcTarget, HEALTH_CHECK, Source};

/// The ad-hoc target of a gRPC `--url`; `headers` (from -H) become its metadata.
pub(super) fn target(
    args: &RunArgs,
    url: &str,
    uri: http::Uri,
    headers: http::HeaderMap,
    timeout: Duration,
) -> anyhow::Result<Target> {
    if uri.path() != "/" || uri.query().is_some() {
        bail!("--url `{url}`: a gRPC URL has no path (the method is --grpc-method)");
    }
    let method = args
        .grpc_method
        .clone()
        .unwrap_or_else(|| HEALTH_CHECK.to_string());
    let source = match (&args.grpc_method, args.protos.is_empty()) {
        (_, false) => Source::Pool(
            crate::http::grpc::compile(&args.protos, &args.import_paths)
                .map_err(|e| anyhow!("--proto: {e}"))?,
        ),
        (Some(_), true) => Source::Reflection,
        (None, true) => Source::Pool(crate::http::grpc::health()),
    };
    let messages = match &args.body {
        None => vec![serde_json::json!({})],
        Some(text) => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Array(items)) => items,
            Ok(one @ serde_json::Value::Object(_)) => vec![one],
            _ => bail!("--body: a gRPC message is a JSON object (or an array of them)"),
        },
    };
    let mut metadata = Vec::new();
    for (name, value) in &headers {
        let value = value
            .to_str()
            .map_err(|_| anyhow!("-H `{name}`: gRPC metadata is ASCII text"))?;
        metadata.push((name.as_str().to_string(), value.to_string()));
    }
    let max_body = 1 << 20;
    let grpc = GrpcTarget::new(&source, method, messages, metadata, None, timeout, max_body)
        .map_err(|e| anyhow!("--grpc-method/--body: {e}"))?;
    Ok(Target {
        name: "adhoc".into(),
        uri,
        display_url: url.to_string(),
        method: http::Method::from_bytes(b"GRPC").unwrap_or(http::Method::POST),
        headers: http::HeaderMap::new(),
        body: bytes::Bytes::new(),
        timeout,
        keep_alive: !args.no_keep_alive,
        dns_ttl: Duration::from_secs(300),
        max_body: max_body as u64,
        insecure_skip_verify: args.insecure,
        // gRPC is HTTP/2 only: h2c in the clear, only `h2` offered in TLS's ALPN.
        http: crate::http::HttpVersion::Http2,
        h2_max_connections: crate::http::h2::DEFAULT_MAX_CONNECTIONS,
        tls: crate::http::TlsOptions::default(),
        connect_to: None,
        dns_select: crate::http::DnsSelect::First,
        checks: Vec::new(),
        buckets: config::DEFAULT_BUCKETS.to_vec(),
        protocol: crate::http::Protocol::Grpc,
        probe: crate::http::probe::ProbeOptions::default(),
        grpc: Some(GrpcSpec(Arc::new(grpc))),
    })
}
