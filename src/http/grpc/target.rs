//! gRPC as a [`Transport`]: a target's call as a user's [`Conn`](crate::http::Conn) sends
//! it. The call config prepared (or, with reflection, prepared at the first call and kept), a
//! user's gRPC connection made at its first call, and each request's headers and body (from a
//! journey: templated) as the call's extra metadata and messages.

use std::sync::Arc;
use std::time::Duration;

use prost_reflect::DescriptorPool;

use super::call::{Call, CallError};
use super::conn::GrpcClient;
use super::schema::{SchemaError, find_method};
use crate::http::client::{Client, RequestSpec};
use crate::http::transport::Transport;
use crate::http::{ErrorClass, Outcome, Protocol};

/// Where a target's message types come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Compiled from `.proto` files, or the bundled health service: known before any run.
    Pool(DescriptorPool),
    /// Asked of the server at the first call.
    Reflection,
}

/// What a `grpc:` section says, checked by config.
#[derive(Debug)]
pub struct GrpcTarget {
    pub method: String,
    pub messages: Vec<serde_json::Value>,
    pub metadata: Vec<(String, String)>,
    /// `:authority` in place of the URL's host and port.
    pub authority: Option<String>,
    pub timeout: Duration,
    pub max_body: usize,
    /// The call, once prepared (at config time from a pool, or at the first call).
    call: tokio::sync::OnceCell<Call>,
    /// When reflection last failed, and how: for [`RETRY_AFTER`] every call fails the same way
    /// at once, so a server without reflection is not asked again by every call of a load.
    failed: std::sync::Mutex<Option<(tokio::time::Instant, ErrorClass)>>,
}

/// How long a failed reflection answers for the calls after it.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

impl GrpcTarget {
    /// A target; with a pool the call is prepared now, so a wrong method or message is the
    /// config's error, reported before any run.
    pub fn new(
        source: &Source,
        method: String,
        messages: Vec<serde_json::Value>,
        metadata: Vec<(String, String)>,
        authority: Option<String>,
        timeout: Duration,
        max_body: usize,
    ) -> Result<GrpcTarget, PrepareError> {
        let target = GrpcTarget {
            method,
            messages,
            metadata,
            authority,
            timeout,
            max_body,
            call: tokio::sync::OnceCell::new(),
            failed: std::sync::Mutex::new(None),
        };
        if let Source::Pool(pool) = source {
            let call = target.prepare(pool)?;
            let _ = target.call.set(call);
        }
        Ok(target)
    }

    fn prepare(&self, pool: &DescriptorPool) -> Result<Call, PrepareError> {
        let method = find_method(pool, &self.method)?;
        Ok(
            Call::new(method, &self.messages, &self.metadata, self.timeout)?
                .with_max_body(self.max_body),
        )
    }
}

/// Why a target's call could not be prepared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Call(#[from] CallError),
}

/// A target's gRPC settings in `ClientOptions`: shared, equal only to itself.
#[derive(Debug, Clone)]
pub struct GrpcSpec(pub Arc<GrpcTarget>);

impl PartialEq for GrpcSpec {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for GrpcSpec {}

/// The user's gRPC connection, made at its first call, with the URI it was made for (a
/// journey's steps may call more than one server: a call to another one opens its own). Boxed
/// when made, so a user slot of another transport stays small.
type Slot = Option<Box<(http::Uri, super::GrpcConn)>>;

/// gRPC as a transport: the user's gRPC connection. A target's requests call its `grpc:`
/// method; a journey step's own call ([`Grpc::call`]) goes over the same connection.
pub(crate) struct Grpc(Slot);

impl Transport for Grpc {
    fn new(_: &Client) -> Grpc {
        Grpc(None)
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        send(client, &mut self.0, req).await
    }
}

impl Grpc {
    /// One call of `spec`, a journey step's own gRPC call, to `req.uri`.
    pub(crate) async fn call(
        &mut self,
        client: &Client,
        spec: &GrpcSpec,
        req: &RequestSpec,
    ) -> Outcome {
        send_with(client, spec, &mut self.0, req).await
    }
}

/// One call of `req`'s target: `req.uri` is `grpc://host:port` (`grpcs://` for TLS), its
/// headers extra metadata, a non-empty body the request message as JSON (an array of them for
/// a client-streaming method).
async fn send(client: &Client, slot: &mut Slot, req: &RequestSpec) -> Outcome {
    match client.options().grpc.clone() {
        Some(spec) => send_with(client, &spec, slot, req).await,
        None => Outcome {
            error: Some(ErrorClass::Other),
            protocol: Protocol::Grpc,
            ..Outcome::default()
        },
    }
}

/// One call of `spec` (a journey step's own gRPC call, or the target's) to `req.uri`.
async fn send_with(
    client: &Client,
    spec: &GrpcSpec,
    slot: &mut Slot,
    req: &RequestSpec,
) -> Outcome {
    let mut out = send_inner(client, spec, slot, req).await;
    out.protocol = Protocol::Grpc;
    out
}

async fn send_inner(
    client: &Client,
    spec: &GrpcSpec,
    slot: &mut Slot,
    req: &RequestSpec,
) -> Outcome {
    let failed = |class| Outcome {
        error: Some(class),
        ..Outcome::default()
    };
    let target = &spec.0;
    if slot.as_ref().is_none_or(|made| made.0 != req.uri) {
        let tls = req.uri.scheme_str() == Some("grpcs");
        let Some(address) = req.uri.authority() else {
            return failed(ErrorClass::Template);
        };
        match GrpcClient::new(
            client.clone(),
            address.as_str(),
            tls,
            target.authority.as_deref(),
        ) {
            Ok(c) => *slot = Some(Box::new((req.uri.clone(), c.conn()))),
            Err(_) => return failed(ErrorClass::Template),
        }
    }
    let Some(conn) = slot.as_mut().map(|made| &mut made.1) else {
        return failed(ErrorClass::Other);
    };
    let call = match target.call.get() {
        Some(call) => call,
        None => {
            let recent = |failed: &Option<(tokio::time::Instant, ErrorClass)>| {
                failed.filter(|(at, _)| crate::clock::elapsed(*at) < RETRY_AFTER)
            };
            if let Some((_, class)) = target.failed.lock().ok().and_then(|f| recent(&f)) {
                return failed(class);
            }
            let made = target
                .call
                .get_or_try_init(|| async {
                    let pool = super::reflect(conn, target.timeout).await?;
                    target.prepare(&pool)
                })
                .await;
            match made {
                Ok(call) => call,
                Err(e) => {
                    tracing::warn!(method = %target.method, "gRPC server reflection failed: {e}");
                    // A server that could not be reached is the server's failure, like any
                    // call's.
                    let class = match &e {
                        PrepareError::Schema(SchemaError::Reflection(m)) => {
                            reachable_class(m).unwrap_or(ErrorClass::Other)
                        }
                        // Past a bound on the answers: the server sent too much.
                        PrepareError::Schema(SchemaError::ReflectionTooLarge(_)) => {
                            ErrorClass::BodyTooLarge
                        }
                        _ => ErrorClass::Other,
                    };
                    if let Ok(mut f) = target.failed.lock() {
                        *f = Some((crate::clock::tokio_instant(), class));
                    }
                    return failed(class);
                }
            }
        }
    };
    if req.body.is_empty() && req.headers.is_empty() {
        return conn.call(call).await;
    }
    match per_request(call, req) {
        Ok(call) => conn.call(&call).await,
        Err(_) => failed(ErrorClass::Template),
    }
}

/// The class a reflection failure named, when it was the connection's.
fn reachable_class(message: &str) -> Option<ErrorClass> {
    ErrorClass::ALL
        .into_iter()
        .find(|c| message.contains(&format!("({})", c.as_str())))
}

/// The call with `req`'s headers added to its metadata and its body, when there is one, as the
/// messages.
fn per_request(call: &Call, req: &RequestSpec) -> Result<Call, CallError> {
    let mut call = call.clone();
    if !req.body.is_empty() {
        let json: serde_json::Value =
            serde_json::from_slice(&req.body).map_err(|e| CallError::Message {
                index: 0,
                message: call.method().input().full_name().to_string(),
                reason: e.to_string(),
            })?;
        let messages = match json {
            serde_json::Value::Array(items) if call.method().is_client_streaming() => items,
            one => vec![one],
        };
        call = call.with_messages(&messages)?;
    }
    call.add_metadata(&req.headers);
    Ok(call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::grpc::schema::{HEALTH_CHECK, health};
    use http::HeaderMap;
    use serde_json::json;

    fn target(messages: Vec<serde_json::Value>) -> Result<GrpcTarget, PrepareError> {
        GrpcTarget::new(
            &Source::Pool(health()),
            HEALTH_CHECK.into(),
            messages,
            vec![],
            None,
            Duration::from_secs(1),
            1 << 20,
        )
    }

    #[test]
    fn a_pool_target_is_prepared_at_once_and_its_errors_are_the_configs() {
        assert!(target(vec![json!({})]).unwrap().call.initialized());
        let err = target(vec![json!({"nope": 1})]).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn a_request_body_replaces_the_messages_and_headers_add_metadata() {
        let t = target(vec![json!({})]).unwrap();
        let call = t.call.get().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-token", "abc".parse().unwrap());
        let req = RequestSpec {
            method: http::Method::POST,
            uri: "grpc://127.0.0.1:1".parse().unwrap(),
            headers,
            body: br#"{"service":"x"}"#.as_slice().into(),
        };
        let made = per_request(call, &req).unwrap();
        assert_eq!(made.metadata()["x-token"], "abc");
        let req = RequestSpec {
            body: b"{not json".as_slice().into(),
            ..req
        };
        assert!(per_request(call, &req).is_err());
    }

    #[tokio::test]
    async fn a_recent_reflection_failure_answers_without_asking_again() {
        let target = GrpcTarget::new(
            &Source::Reflection,
            "a.B/C".into(),
            vec![json!({})],
            vec![],
            None,
            Duration::from_secs(1),
            1 << 20,
        )
        .unwrap();
        *target.failed.lock().unwrap() = Some((crate::clock::tokio_instant(), ErrorClass::Reset));
        let client = Client::new(
            crate::http::ClientOptions {
                protocol: Protocol::Grpc,
                http: crate::http::HttpVersion::Http2,
                grpc: Some(GrpcSpec(Arc::new(target))),
                ..Default::default()
            },
            Arc::new(crate::http::Resolver::system()),
        );
        let req = RequestSpec {
            method: http::Method::POST,
            // Port 1 on loopback: asking would be `connect_refused`.
            uri: "grpc://127.0.0.1:1".parse().unwrap(),
            headers: HeaderMap::new(),
            body: bytes::Bytes::new(),
        };
        let mut slot = None;
        let out = send(&client, &mut slot, &req).await;
        assert_eq!(
            (out.error, out.protocol),
            (Some(ErrorClass::Reset), Protocol::Grpc)
        );
    }

    #[test]
    fn a_reflection_failure_keeps_the_connections_class() {
        assert_eq!(
            reachable_class("the server could not be reached (connect_refused)"),
            Some(ErrorClass::ConnectRefused)
        );
        assert_eq!(reachable_class("the server answered Internal"), None);
    }
}
