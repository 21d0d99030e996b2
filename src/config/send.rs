//! What a validated [`Target`] sends: the request it repeats and the client that sends it.
//! `sloburn run` and the daemon both build their requests here, so they send the same bytes.

use super::Target;
use crate::http::{Client, ClientOptions, RequestSpec, Resolver};
use std::sync::Arc;

impl Target {
    /// The request this target repeats.
    pub fn request(&self) -> RequestSpec {
        RequestSpec {
            method: self.method.clone(),
            uri: self.uri.clone(),
            headers: self.headers.clone(),
            body: self.body.clone(),
        }
    }

    /// How this target's connections behave: timeout, keep-alive, DNS cache, body cap, TLS.
    pub fn client_options(&self) -> ClientOptions {
        ClientOptions {
            timeout: self.timeout,
            keep_alive: self.keep_alive,
            dns_ttl: self.dns_ttl,
            max_body: self.max_body.min(usize::MAX as u64) as usize,
            insecure_skip_verify: self.insecure_skip_verify,
            http: self.http,
            h2_max_connections: self.h2_max_connections,
            tls: self.tls.clone(),
            connect_to: self.connect_to.clone(),
            dns_select: self.dns_select,
            protocol: self.protocol,
            probe: self.probe.clone(),
            grpc: self.grpc.clone(),
        }
    }

    /// A client for this target that resolves names with `resolver`.
    pub fn client(&self, resolver: Arc<Resolver>) -> Client {
        Client::new(self.client_options(), resolver)
    }
}
