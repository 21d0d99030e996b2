//! `http: auto` as a [`Transport`]: on `https://`, HTTP/2 when the server picks `h2` in ALPN,
//! else HTTP/1.1 on the very connection that was dialled; on `http://`, HTTP/1.1. Once a
//! server has picked HTTP/1.1 the client remembers it, and every user keeps its own
//! HTTP/1.1 connection from then on.

use http::Uri;

use super::client::{Client, RequestSpec};
use super::connect::is_tls;
use super::h2::{self, H2, Sent};
use super::http1::{self, Http1, Try};
use super::transport::Transport;
use super::{ErrorClass, Outcome};

/// A user's HTTP/1.1 connection and its place among the client's HTTP/2 connections.
pub(crate) struct Alpn {
    h1: Http1,
    h2: H2,
    /// Whether its last request went over HTTP/2 (then `is_open` asks the client's slots).
    h2_used: bool,
}

impl Transport for Alpn {
    fn new(client: &Client) -> Alpn {
        Alpn {
            h1: Http1::new(client),
            h2: H2::new(client),
            h2_used: false,
        }
    }

    fn carries(uri: &Uri) -> bool {
        is_tls(uri).is_some()
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        let start = crate::clock::tokio_instant();
        let deadline = start + client.options().timeout;
        let Some(endpoint) = self.h1.endpoint_of(&req.uri) else {
            return Outcome {
                error: Some(ErrorClass::Other),
                ..Outcome::default()
            };
        };
        let target = endpoint.target();
        let (mut out, mut how) = (Outcome::default(), Try::First);
        if !self.h1.holds() && target.tls && !client.speaks_h1_only() {
            match h2::send(client, self.h2.slot, req, &target, start, deadline).await {
                Sent::Done(out) => {
                    self.h2_used = true;
                    return out;
                }
                Sent::Http1(Some((dialed, opened))) => {
                    out = opened;
                    match http1::handshake(dialed, &target).await {
                        Ok(live) => {
                            self.h1.adopt(live);
                            how = Try::Fresh;
                        }
                        // As the HTTP/2 path's own failures: its outcome, its phases.
                        Err(class) => {
                            out.error = Some(class);
                            self.h2_used = true;
                            return out;
                        }
                    }
                }
                Sent::Http1(None) => {}
            }
        }
        self.h2_used = false;
        self.h1
            .send_from(client, req, &endpoint, (start, deadline), out, how)
            .await
    }

    fn is_open(&self, client: &Client) -> bool {
        self.h1.is_open(client) || (self.h2_used && self.h2.is_open(client))
    }

    fn close(&mut self) {
        self.h1.close();
    }
}
