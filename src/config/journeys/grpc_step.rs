//! A journey step's own gRPC call (issue 32): `url: grpc://HOST:PORT` with a `grpc:` block
//! read as a target's is (`method`, the schema from `protos` or `reflection`, `authority`,
//! checked here with positions), except that `message`/`messages` and `metadata` are
//! templates, rendered per call like a step's `json` and `headers`. Without a block the step
//! calls the standard health check.

use super::super::grpc::{self, Parts};
use super::super::walk::{self, Ctx, Fields, join};
use super::super::yaml::{Node, Value};
use super::{Headers, Site, Target, compile, header_map, json};
use crate::http::grpc::GrpcSpec;
use crate::journey::{Escape, Scope, Template};
use std::time::Duration;

/// What a gRPC step sends besides its URL.
pub(super) struct StepCall {
    pub spec: GrpcSpec,
    /// `metadata`, templated: sent as the call's extra metadata.
    pub metadata: Headers,
    /// The message(s) as JSON when they hold templates; `None`: the call's own, prepared once.
    pub body: Option<Template>,
}

/// The step fields an HTTP request has and a gRPC call does not, and where each goes instead.
const NOT_GRPC: &[(&str, &str)] = &[
    ("method", "the gRPC method is `grpc.method`"),
    ("headers", "metadata goes in `grpc.metadata`"),
    ("body", "the message goes in `grpc.message`"),
    ("json", "the message goes in `grpc.message`"),
];

/// A target's default timeout and body bound, for a step whose journey has no valid target
/// (an error already; the step is still read for its own errors).
const FALLBACK_LIMITS: (Duration, usize) = (Duration::from_secs(10), 1 << 20);

/// Reads the gRPC call of the step `f`.
pub(super) fn call(
    ctx: &mut Ctx,
    f: &Fields<'_>,
    scope: &Scope<'_>,
    target: Option<&Target>,
    site: Site<'_>,
) -> Option<StepCall> {
    let mut wrong = false;
    for (key, instead) in NOT_GRPC {
        if let Some(n) = f.get(key) {
            let message = format!("a gRPC step has no `{key}`: {instead}");
            ctx.error(n.pos, &f.path_of(key), message);
            wrong = true;
        }
    }
    let limits = target.map_or(FALLBACK_LIMITS, |t| {
        (t.timeout, t.max_body.min(usize::MAX as u64) as usize)
    });
    let Some(node) = f.get("grpc") else {
        let spec = grpc::health_check(limits)?;
        return (!wrong).then_some(StepCall {
            spec,
            metadata: Vec::new(),
            body: None,
        });
    };
    let g = walk::fields(ctx, node, &f.path_of("grpc"), grpc::FIELDS)?;
    let method = grpc::method(ctx, &g)?;
    let authority = grpc::authority(ctx, &g)?;
    let mut metadata = Vec::new();
    if let Some(n) = g.get("metadata") {
        let p = g.path_of("metadata");
        // gRPC sets these itself: a step's would be dropped at every call.
        if let Value::Map(entries) = &n.value {
            for (key, _) in entries {
                if crate::http::grpc::is_reserved_metadata(&key.name) {
                    ctx.error(
                        key.pos,
                        &join(&p, &key.name),
                        format!(
                            "`{}` is set by gRPC itself: it cannot be metadata",
                            key.name
                        ),
                    );
                }
            }
        }
        header_map(ctx, n, &p, scope, site, &mut metadata);
    }
    let (raw, body) = messages(ctx, &g, scope, site)?;
    let schema = grpc::schema(ctx, &g, site.base)?;
    let parts = Parts {
        method,
        messages: raw,
        metadata: Vec::new(),
        authority,
    };
    let spec = grpc::target(ctx, &g, &schema, parts, limits, body.is_some())?;
    (!wrong).then_some(StepCall {
        spec,
        metadata,
        body,
    })
}

/// The messages as JSON values (templates rendered when there are none left, else kept as
/// text, for checking against the schema) and, when they hold templates, the template of
/// their JSON: an object for `message`, an array for `messages`.
fn messages(
    ctx: &mut Ctx,
    g: &Fields<'_>,
    scope: &Scope<'_>,
    site: Site<'_>,
) -> Option<(Vec<serde_json::Value>, Option<Template>)> {
    let (nodes, many, key): (Vec<&Node>, bool, &str) = match (g.get("message"), g.get("messages")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &g.path_of("message"),
                "set `message` or `messages`, not both",
            );
            return None;
        }
        (Some(n), None) => (vec![n], false, "message"),
        (None, Some(n)) => (
            walk::seq(ctx, n, &g.path_of("messages")).iter().collect(),
            true,
            "messages",
        ),
        (None, None) => return Some((vec![serde_json::json!({})], None)),
    };
    let mut raw = Vec::new();
    let mut tpl = Template::default();
    if many {
        tpl.push_literal("[");
    }
    for (i, n) in nodes.iter().enumerate() {
        let p = if many {
            format!("{}[{i}]", g.path_of(key))
        } else {
            g.path_of(key)
        };
        raw.push(grpc::message(ctx, n, &p)?);
        if i > 0 {
            tpl.push_literal(",");
        }
        match &n.value {
            Value::Null => tpl.push_literal("{}"),
            Value::Scalar { text, .. } => {
                tpl.append(compile(ctx, n, &p, text, scope, Escape::Json, site)?);
            }
            _ => json(ctx, n, &p, scope, site, &mut tpl)?,
        }
    }
    if many {
        tpl.push_literal("]");
    }
    if !tpl.is_static() {
        return Some((raw, Some(tpl)));
    }
    // `${env:..}` and `${file:..}` are resolved in the template: its text is the message.
    let text = tpl.static_text();
    let rendered = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(serde_json::Value::Array(items)) if many => items,
        Ok(one) if !many => vec![one],
        _ => raw,
    };
    Some((rendered, None))
}
