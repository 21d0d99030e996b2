//! The transport seam: what every protocol sloburn speaks implements, as tower's `Service` or a
//! linkerd2-proxy stack layer does. A transport is a user's own state (its connection, or none
//! for a probe) and one method that takes a prepared request and returns the whole response
//! with its phases (`connecting`, `tls_handshaking`, `sending`, `waiting`, `receiving`) and,
//! on a transport failure, its [`ErrorClass`](super::ErrorClass): never an error.
//!
//! HTTP/1.1 (`http1.rs`), HTTP/2 (`h2.rs`), `http: auto` (`alpn.rs`), gRPC (`grpc/target.rs`),
//! WebSocket and the probes (`probe/`) implement it; `registry.rs` picks one from a target's
//! scheme and `http:` when a user's slot is made. The registry dispatches over a closed enum
//! (no boxed future per request), so the trait's future stays a plain `impl Future`.

use std::future::Future;

use http::Uri;

use super::Outcome;
use super::client::{Client, RequestSpec};

/// One way of sending a request, as one virtual user holds it.
pub trait Transport: Send + Sized {
    /// A user's state before its first request: nothing connected yet.
    fn new(client: &Client) -> Self;

    /// Whether a request to `uri` is this transport's when it is the target's: HTTP carries
    /// `http://` and `https://` URLs (a journey step's `ws://` goes to the registry's pick for
    /// its own scheme); gRPC and the probes carry every request of their target.
    fn carries(uri: &Uri) -> bool {
        let _ = uri;
        true
    }

    /// Sends one request and reads the whole response, by the client's timeout. Never fails: a
    /// transport failure is `Outcome::error`, and what was measured before it is kept.
    fn send(&mut self, client: &Client, req: &RequestSpec) -> impl Future<Output = Outcome> + Send;

    /// Whether a connection is open and usable: the next request then connects nothing.
    fn is_open(&self, client: &Client) -> bool {
        let _ = client;
        false
    }

    /// Drops the user's open connection, if any: the next request connects afresh.
    fn close(&mut self) {}
}
