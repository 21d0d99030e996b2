//! A gRPC target's `grpc:` section (its URL is `grpc://host:port`, or `grpcs://` over TLS):
//! the method, the request message(s) in YAML or JSON, metadata, and where the schema comes
//! from (`protos` compiled now, `reflection: true` asked of the server at the first call, or
//! neither: the bundled health service). With a schema known now, a wrong method or message is
//! reported here with its position, before any run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::Env;
use super::checks::yaml_to_json;
use super::secrets::expand;
use super::walk::{self, Ctx, Fields, join};
use super::yaml::{Node, Value};
use crate::http::grpc::{GrpcSpec, GrpcTarget, HEALTH_CHECK, PrepareError, Source};

pub(super) const FIELDS: &[&str] = &[
    "method",
    "message",
    "messages",
    "metadata",
    "protos",
    "import_paths",
    "reflection",
    "authority",
];

/// The fields of a target an HTTP request has and a gRPC call does not.
pub const NOT_GRPC: &[&str] = &[
    "method",
    "headers",
    "body",
    "body_file",
    "http",
    "http2",
    "keep_alive",
    "expect",
    "expiry_warning",
];

/// Reads `node` (the `grpc:` section; `None` when the target has none: the health check).
pub fn grpc(
    ctx: &mut Ctx,
    node: Option<&Node>,
    path: &str,
    base: &Path,
    env: &Env,
    limits: (Duration, usize),
) -> Option<GrpcSpec> {
    let Some(node) = node else {
        return health_check(limits);
    };
    let f = walk::fields(ctx, node, path, FIELDS)?;
    let method = method(ctx, &f)?;
    let messages = match (f.get("message"), f.get("messages")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("message"),
                "set `message` or `messages`, not both",
            );
            return None;
        }
        (Some(n), None) => vec![message(ctx, n, &f.path_of("message"))?],
        (None, Some(n)) => {
            let p = f.path_of("messages");
            let items = walk::seq(ctx, n, &p);
            let mut out = Vec::new();
            for (i, item) in items.iter().enumerate() {
                out.push(message(ctx, item, &format!("{p}[{i}]"))?);
            }
            out
        }
        (None, None) => vec![serde_json::json!({})],
    };
    let mut metadata = Vec::new();
    if let Some(n) = f.get("metadata") {
        let p = f.path_of("metadata");
        if let Value::Map(entries) = &n.value {
            for (key, value) in entries {
                let kp = join(&p, &key.name);
                if crate::http::grpc::is_reserved_metadata(&key.name) {
                    ctx.error(
                        key.pos,
                        &kp,
                        format!(
                            "`{}` is set by gRPC itself: it cannot be metadata",
                            key.name
                        ),
                    );
                    continue;
                }
                let raw = walk::string(ctx, value, &kp)?;
                let text = expand(ctx, &raw, value.pos, &kp, base, env)?;
                metadata.push((key.name.clone(), text));
            }
        } else {
            ctx.error(n.pos, &p, format!("expected a mapping, found {}", n.kind()));
        }
    }
    let schema = schema(ctx, &f, base)?;
    let call = Parts {
        method,
        messages,
        metadata,
        authority: authority(ctx, &f)?,
    };
    target(ctx, &f, &schema, call, limits, false)
}

/// `method`, the health check's when there is none.
pub(super) fn method(ctx: &mut Ctx, f: &Fields<'_>) -> Option<String> {
    match f.get("method") {
        Some(n) => walk::string(ctx, n, &f.path_of("method")),
        None => Some(HEALTH_CHECK.to_string()),
    }
}

/// `authority`, when given.
pub(super) fn authority(ctx: &mut Ctx, f: &Fields<'_>) -> Option<Option<String>> {
    match f.get("authority") {
        Some(n) => Some(Some(walk::string(ctx, n, &f.path_of("authority"))?)),
        None => Some(None),
    }
}

/// Where the message types come from, and whether only the bundled health service is known.
pub(super) struct Schema {
    source: Source,
    health_only: bool,
}

/// `protos` + `import_paths` compiled now, `reflection: true`, or the health service.
pub(super) fn schema(ctx: &mut Ctx, f: &Fields<'_>, base: &Path) -> Option<Schema> {
    let reflection = walk::opt_bool(ctx, f, "reflection", false);
    let strings = |ctx: &mut Ctx, key: &str| -> Vec<PathBuf> {
        let Some(n) = f.get(key) else {
            return Vec::new();
        };
        let p = f.path_of(key);
        walk::one_or_many(n)
            .into_iter()
            .filter_map(|item| walk::string(ctx, item, &p))
            .map(|s| base.join(s))
            .collect()
    };
    let protos = strings(ctx, "protos");
    let includes = strings(ctx, "import_paths");
    let source = match (reflection, protos.is_empty()) {
        (true, false) => {
            let n = f.get("protos")?;
            ctx.error(
                n.pos,
                &f.path_of("protos"),
                "give `protos` or `reflection: true`, not both",
            );
            return None;
        }
        (true, true) => Source::Reflection,
        (false, false) => match crate::http::grpc::compile(&protos, &includes) {
            Ok(pool) => Source::Pool(pool),
            Err(e) => {
                let n = f.get("protos")?;
                ctx.error(n.pos, &f.path_of("protos"), e.to_string());
                return None;
            }
        },
        (false, true) => Source::Pool(crate::http::grpc::health()),
    };
    let health_only = matches!(source, Source::Pool(_)) && protos.is_empty();
    Some(Schema {
        source,
        health_only,
    })
}

/// What one call sends.
pub(super) struct Parts {
    pub method: String,
    pub messages: Vec<serde_json::Value>,
    pub metadata: Vec<(String, String)>,
    pub authority: Option<String>,
}

/// The target of `parts`: with a schema known now, a wrong method, message or metadata is an
/// error at the field that holds it. `templated`: the messages hold `${...}` templates, sent
/// rendered by each call; a message the schema refuses with its templates as text (a number
/// field's `${n}`) is then checked by each call instead.
pub(super) fn target(
    ctx: &mut Ctx,
    f: &Fields<'_>,
    schema: &Schema,
    parts: Parts,
    (timeout, max_body): (Duration, usize),
    templated: bool,
) -> Option<GrpcSpec> {
    let Parts {
        method,
        messages,
        metadata,
        authority,
    } = parts;
    let make = |messages| {
        GrpcTarget::new(
            &schema.source,
            method.clone(),
            messages,
            metadata.clone(),
            authority.clone(),
            timeout,
            max_body,
        )
    };
    let made = match make(messages) {
        Err(PrepareError::Call(_)) if templated => make(vec![serde_json::json!({})]),
        made => made,
    };
    match made {
        Ok(t) => Some(GrpcSpec(Arc::new(t))),
        Err(e) => {
            report(ctx, f, schema.health_only, &e);
            None
        }
    }
}

/// Each mistake at the field that holds it: the method, the message, the metadata.
pub(super) fn report(ctx: &mut Ctx, f: &Fields<'_>, health_only: bool, e: &PrepareError) {
    use crate::http::grpc::CallError;
    let key = match e {
        PrepareError::Schema(_) => "method",
        PrepareError::Call(CallError::Message { .. } | CallError::OneMessage { .. }) => {
            if f.has("messages") {
                "messages"
            } else {
                "message"
            }
        }
        PrepareError::Call(_) => "metadata",
    };
    let hint = match e {
        PrepareError::Schema(_) if health_only => {
            " (without `protos` or `reflection: true` only the health service is known)"
        }
        _ => "",
    };
    let (pos, p) = match (f.get(key), e) {
        (Some(n), PrepareError::Call(CallError::Message { index, .. })) if key == "messages" => {
            let items = walk::seq(ctx, n, &f.path_of(key));
            let at = items.get(*index).map_or(n.pos, |item| item.pos);
            (at, format!("{}[{index}]", f.path_of(key)))
        }
        (Some(n), _) => (n.pos, f.path_of(key)),
        (None, _) => (f.node.pos, f.path.clone()),
    };
    ctx.error(pos, &p, format!("{e}{hint}"));
}

/// The health check of a `grpc://` target without a `grpc:` section.
pub(super) fn health_check((timeout, max_body): (Duration, usize)) -> Option<GrpcSpec> {
    GrpcTarget::new(
        &Source::Pool(crate::http::grpc::health()),
        HEALTH_CHECK.to_string(),
        vec![serde_json::json!({})],
        Vec::new(),
        None,
        timeout,
        max_body,
    )
    .ok()
    .map(|t| GrpcSpec(Arc::new(t)))
}

/// A message in YAML (a mapping) or JSON (a string holding an object).
pub(super) fn message(ctx: &mut Ctx, node: &Node, path: &str) -> Option<serde_json::Value> {
    match &node.value {
        Value::Map(_) | Value::Null => Some(if node.is_null() {
            serde_json::json!({})
        } else {
            yaml_to_json(node)
        }),
        Value::Scalar { text, .. } => match serde_json::from_str::<serde_json::Value>(text) {
            Ok(v @ serde_json::Value::Object(_)) => Some(v),
            _ => {
                ctx.error(
                    node.pos,
                    path,
                    "expected a mapping, or a JSON object in a string",
                );
                None
            }
        },
        Value::Seq(_) => {
            ctx.error(
                node.pos,
                path,
                "expected a mapping (several messages go in `messages`)",
            );
            None
        }
    }
}
