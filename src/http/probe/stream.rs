//! `tcp://` and `tls://` probes: the client's own dialling (DNS, connect, TLS, each phase
//! timed), then an optional exchange: send the body, read until `expect` arrives (or the
//! first answer when only a body is sent).

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, timeout_at};

use crate::http::client::{Client, RequestSpec};
use crate::http::connect::Target;
use crate::http::tls::Stream;
use crate::http::transport::Transport;
use crate::http::{ErrorClass, Outcome, Protocol, classify_io};

/// `tcp://`: connect, then the optional exchange.
pub(crate) struct Tcp;

/// `tls://`: connect and handshake (the chain reported), then the optional exchange.
pub(crate) struct Tls;

impl Transport for Tcp {
    fn new(_: &Client) -> Tcp {
        Tcp
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        Outcome {
            protocol: Protocol::Tcp,
            ..probe(client, req, false).await
        }
    }
}

impl Transport for Tls {
    fn new(_: &Client) -> Tls {
        Tls
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        Outcome {
            protocol: Protocol::Tls,
            ..probe(client, req, true).await
        }
    }
}

async fn probe(client: &Client, req: &RequestSpec, tls: bool) -> Outcome {
    let opts = client.options();
    let start = crate::clock::tokio_instant();
    let deadline = start + opts.timeout;
    let mut out = Outcome::default();
    let Some(authority) = req.uri.authority() else {
        out.error = Some(ErrorClass::Other);
        return out;
    };
    let Some(port) = authority.port_u16() else {
        out.error = Some(ErrorClass::Other);
        return out;
    };
    let target = Target {
        tls,
        host: authority.host(),
        port,
        authority: authority.as_str(),
    };
    let mut dialed = match client.dial(&target, deadline, &mut out.phases).await {
        Ok(d) => d,
        Err(e) => {
            out.error = Some(out.dial_failed(e));
            return out;
        }
    };
    out.local_port = Some(dialed.local_port);
    if let Stream::Tls(t) = &dialed.stream {
        let (_, session) = t.get_ref();
        let chain = session.peer_certificates().unwrap_or_default();
        let (body, not_after) = certificate_report(chain, session);
        out.cert_not_after = not_after;
        let now = crate::clock::since_epoch().as_secs() as i64;
        out.cert_seconds_left = not_after.map(|t| t.saturating_sub(now));
        out.body = body;
    }
    let expect = opts.probe.expect.as_deref();
    if req.body.is_empty() && expect.is_none() {
        out.status = Some(0);
        return out;
    }
    let sent_at = crate::clock::tokio_instant();
    if !req.body.is_empty() {
        match timeout_at(deadline, dialed.stream.write_all(&req.body)).await {
            Ok(Ok(())) => out.bytes_sent = req.body.len() as u64,
            Ok(Err(e)) => {
                out.error = Some(classify_io(&e, false));
                return out;
            }
            Err(_) => {
                out.error = Some(ErrorClass::Timeout);
                return out;
            }
        }
        let _ = timeout_at(deadline, dialed.stream.flush()).await;
    }
    let sent = crate::clock::tokio_instant();
    out.phases.sending = sent - sent_at;
    let mut got = BytesMut::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut first: Option<Instant> = None;
    let result = loop {
        let n = match timeout_at(deadline, dialed.stream.read(&mut chunk)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => break Err(classify_io(&e, false)),
            Err(_) => break Err(ErrorClass::Timeout),
        };
        if n == 0 {
            break Ok(());
        }
        first.get_or_insert_with(crate::clock::tokio_instant);
        let room = opts.max_body.saturating_sub(got.len());
        got.extend_from_slice(&chunk[..n.min(room)]);
        if n > room {
            out.body_discarded = (n - room) as u64;
            break Err(ErrorClass::BodyTooLarge);
        }
        match expect {
            Some(e) if memchr::memmem::find(&got, e).is_some() => break Ok(()),
            Some(_) => {}
            None => break Ok(()),
        }
    };
    let end = crate::clock::tokio_instant();
    let first = first.unwrap_or(end);
    out.phases.waiting = first - sent;
    out.phases.receiving = end - first;
    out.bytes_received = got.len() as u64;
    // A TLS probe's body is its certificate report; what the server said replaces it only
    // when something was asked of the server.
    out.body = got.freeze();
    match result {
        Ok(()) => out.status = Some(0),
        Err(class) => out.error = Some(class),
    }
    out
}

/// The chain's earliest expiry (Unix seconds) and a JSON report for `json` checks: the leaf's
/// subject and issuer, the earliest `not_after` in the chain and the seconds until it, the
/// protocol version and ALPN.
fn certificate_report(
    chain: &[rustls::pki_types::CertificateDer<'_>],
    session: &rustls::ClientConnection,
) -> (Bytes, Option<i64>) {
    use x509_parser::prelude::{FromDer, X509Certificate};
    let mut earliest: Option<i64> = None;
    let mut subject = String::new();
    let mut issuer = String::new();
    for (i, der) in chain.iter().enumerate() {
        let Ok((_, cert)) = X509Certificate::from_der(der.as_ref()) else {
            continue;
        };
        let t = cert.validity().not_after.timestamp();
        earliest = Some(earliest.map_or(t, |e| e.min(t)));
        if i == 0 {
            subject = cert.subject().to_string();
            issuer = cert.issuer().to_string();
        }
    }
    let now = crate::clock::system_time()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let report = serde_json::json!({
        "subject": subject,
        "issuer": issuer,
        "chain_length": chain.len(),
        "not_after": earliest,
        "expires_in_seconds": earliest.map(|t| t - now),
        "expires_in_days": earliest.map(|t| ((t - now) as f64 / 86_400.0 * 100.0).floor() / 100.0),
        "version": session.protocol_version().map(|v| format!("{v:?}")),
        "alpn": session.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()),
    });
    (Bytes::from(report.to_string()), earliest)
}
