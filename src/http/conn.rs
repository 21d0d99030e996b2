//! A virtual user's connection slot: the state of the transport the registry picked for its
//! target (once, when the slot is made), and of any other a journey's steps name (a `ws://`
//! step over an HTTP target, a step's own gRPC call), each made at its first request.

use super::client::{Client, RequestSpec};
use super::grpc::GrpcSpec;
use super::registry::{self, Kind, Slot};
use super::{ErrorClass, Outcome};

/// A virtual user's connection slot. Not shared, so sending never waits on another user (the
/// HTTP/2 slots a client's users share excepted).
pub struct Conn {
    client: Client,
    /// The target's transport; `None` only for a protocol no transport serves.
    main: Option<Slot>,
    /// Transports the user's requests named besides, at most one of each kind.
    others: Vec<Slot>,
}

impl Client {
    /// A connection slot for one virtual user, holding the transport the target's scheme and
    /// `http:` pick.
    pub fn conn(&self) -> Conn {
        let opts = self.options();
        Conn {
            client: self.clone(),
            main: registry::pick(opts.protocol.scheme(), opts.http).map(|k| k.open(self)),
            others: Vec::new(),
        }
    }
}

fn failed() -> Outcome {
    Outcome {
        error: Some(ErrorClass::Other),
        ..Outcome::default()
    }
}

impl Conn {
    /// Sends one request and reads the whole response. Never fails: a transport failure is
    /// `Outcome::error`, and whatever was measured before it is kept.
    pub async fn send(&mut self, req: &RequestSpec) -> Outcome {
        let outcome = self.exchange(req).await;
        if let Some(tap) = &self.client.inner.tap {
            tap.exchange(req, &outcome);
        }
        outcome
    }

    async fn exchange(&mut self, req: &RequestSpec) -> Outcome {
        let Conn {
            client,
            main,
            others,
        } = self;
        if let Some(slot) = main.as_mut().filter(|s| s.carries(&req.uri)) {
            return slot.send(client, req).await;
        }
        // A journey step's own URL names another transport (`ws://…` over an HTTP target).
        let kind = req
            .uri
            .scheme_str()
            .and_then(|s| registry::pick(s, client.options().http));
        match kind {
            Some(kind) => other(client, others, kind).send(client, req).await,
            None => failed(),
        }
    }

    /// Sends one call of `spec`, a journey step's own gRPC call, to `req.uri` (`grpc://` or
    /// `grpcs://`) over this user's gRPC connection, whatever the target's protocol: the
    /// target's client dials it (its resolver, timeout and TLS options).
    pub async fn send_grpc(&mut self, spec: &GrpcSpec, req: &RequestSpec) -> Outcome {
        let Conn {
            client,
            main,
            others,
        } = self;
        let slot = match main {
            Some(slot) if slot.kind() == Kind::Grpc => slot,
            _ => other(client, others, Kind::Grpc),
        };
        match slot.grpc() {
            Some(grpc) => grpc.call(client, spec, req).await,
            None => failed(),
        }
    }

    /// Whether the target's connection is open and usable: the next request then connects
    /// nothing.
    pub fn is_open(&self) -> bool {
        self.main.as_ref().is_some_and(|s| s.is_open(&self.client))
    }

    /// Drops the target's open connection, if any; the next request connects afresh.
    pub fn close(&mut self) {
        if let Some(slot) = self.main.as_mut() {
            slot.close();
        }
    }
}

/// The user's state of `kind` besides its target's, made at its first request.
fn other<'a>(client: &Client, others: &'a mut Vec<Slot>, kind: Kind) -> &'a mut Slot {
    let at = match others.iter().position(|s| s.kind() == kind) {
        Some(at) => at,
        None => {
            others.push(kind.open(client));
            others.len() - 1
        }
    };
    &mut others[at]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{ClientOptions, Resolver};
    use bytes::Bytes;
    use http::{Method, Uri};
    use std::sync::Arc;

    /// The load runner spawns one task per virtual user, each owning a `Conn`.
    #[test]
    fn conn_and_its_send_future_are_send() {
        fn is_send<T: Send>(_: &T) {}
        let client = Client::new(
            ClientOptions::default(),
            Arc::new(Resolver::new(
                crate::http::ResolverConfig::default(),
                crate::http::HostsFile::default(),
            )),
        );
        let mut conn = client.conn();
        is_send(&conn);
        let req = RequestSpec {
            method: Method::GET,
            uri: Uri::from_static("http://127.0.0.1:9/"),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        };
        is_send(&conn.send(&req));
    }
}
