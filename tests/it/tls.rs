//! Per-target TLS and `connect_to` through a config file: a test CA made by rcgen, a rustls
//! server that may demand a client certificate and records each request's host and version,
//! and `sloburn check` on bad fields.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Response, Version};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sloburn::http::{ErrorClass, HostsFile, Outcome, Resolver, ResolverConfig};
use tokio::net::TcpListener;

use crate::support::{sloburn, test_env};

/// A CA, a server certificate for `names` and a client certificate, all signed by the CA, as
/// PEM files in `dir` (`ca.pem`, `server.pem`/`server.key`, `client.pem`/`client.key`).
pub struct Pki {
    pub ca: CertificateDer<'static>,
    pub server_chain: Vec<CertificateDer<'static>>,
    pub server_key: PrivateKeyDer<'static>,
}

impl Pki {
    pub fn new(dir: &Path, names: &[&str]) -> Pki {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sloburn test CA");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let leaf = |names: Vec<String>, file: &str| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(names)
                .unwrap()
                .signed_by(&key, &ca)
                .unwrap();
            std::fs::write(dir.join(format!("{file}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{file}.key")), key.serialize_pem()).unwrap();
            (cert.der().clone(), key.serialize_der())
        };
        let (server, server_key) = leaf(names.iter().map(|n| n.to_string()).collect(), "server");
        leaf(vec!["sloburn-client".into()], "client");
        std::fs::write(dir.join("ca.pem"), ca.as_ref().pem()).unwrap();
        Pki {
            ca: ca.as_ref().der().clone(),
            server_chain: vec![server],
            server_key: PrivateKeyDer::Pkcs8(server_key.into()),
        }
    }

    /// The server side: offers `alpn`; demands a certificate signed by the CA when `mtls`.
    pub fn server_config(&self, alpn: &[&[u8]], mtls: bool) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if mtls {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(self.ca.clone()).unwrap();
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let mut config = builder
            .with_single_cert(self.server_chain.clone(), self.server_key.clone_key())
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        config
    }
}

/// What the test server saw: connections accepted and, per request, the host it named (`Host`
/// or `:authority`) and the HTTP version.
#[derive(Default)]
pub struct Seen {
    pub accepted: AtomicUsize,
    pub handshakes_failed: AtomicUsize,
    pub requests: Mutex<Vec<(String, Version)>>,
}

/// A TLS server on 127.0.0.1 speaking HTTP/2 or HTTP/1.1 as ALPN decided; or plain HTTP/1.1
/// without `tls`.
pub async fn server(tls: Option<rustls::ServerConfig>) -> (SocketAddr, Arc<Seen>) {
    gated_server(tls, None).await
}

/// Like [`server`]; each request first waits (at most 10 s) until `gate`'s count of requests
/// is in flight at once, and is answered 503 when they never are.
pub async fn gated_server(
    tls: Option<rustls::ServerConfig>,
    gate: Option<Arc<tokio::sync::Barrier>>,
) -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, serve(listener, tls, gate))
}

/// Serves `listener` as [`gated_server`] describes.
fn serve(
    listener: TcpListener,
    tls: Option<rustls::ServerConfig>,
    gate: Option<Arc<tokio::sync::Barrier>>,
) -> Arc<Seen> {
    let seen = Arc::new(Seen::default());
    let acceptor = tls.map(|c| tokio_rustls::TlsAcceptor::from(Arc::new(c)));
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            s.accepted.fetch_add(1, Ordering::SeqCst);
            let (acceptor, seen, gate) = (acceptor.clone(), s.clone(), gate.clone());
            tokio::spawn(async move {
                let record = seen.clone();
                let svc = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    let host = req
                        .headers()
                        .get(http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string)
                        .or_else(|| req.uri().authority().map(|a| a.to_string()))
                        .unwrap_or_default();
                    record.requests.lock().unwrap().push((host, req.version()));
                    let gate = gate.clone();
                    async move {
                        let mut status = http::StatusCode::OK;
                        if let Some(g) = gate {
                            let wait =
                                tokio::time::timeout(std::time::Duration::from_secs(10), g.wait());
                            if wait.await.is_err() {
                                status = http::StatusCode::SERVICE_UNAVAILABLE;
                            }
                        }
                        let mut r = Response::new(Full::new(Bytes::from_static(b"ok")));
                        *r.status_mut() = status;
                        Ok::<_, Infallible>(r)
                    }
                });
                let Some(acceptor) = acceptor else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                    return;
                };
                let Ok(stream) = acceptor.accept(tcp).await else {
                    seen.handshakes_failed.fetch_add(1, Ordering::SeqCst);
                    return;
                };
                if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                }
            });
        }
    });
    seen
}

/// The target `t` of a config text whose files sit in `dir`.
pub fn target(dir: &Path, yaml: &str) -> sloburn::config::Target {
    let loaded = sloburn::config::from_str(yaml, "t.yaml", dir, &test_env())
        .unwrap_or_else(|e| panic!("{e}"));
    loaded.config.targets["t"].clone()
}

/// A resolver that knows only `localhost` (as 127.0.0.1) and asks no nameserver: these tests
/// send nothing past loopback, not even a DNS query for a made-up name.
pub fn loopback_resolver() -> Arc<Resolver> {
    Arc::new(Resolver::new(
        ResolverConfig::default(),
        HostsFile::parse("127.0.0.1 localhost\n"),
    ))
}

/// Sends the target's request `n` times on one connection slot.
pub async fn send(t: &sloburn::config::Target, n: usize) -> Vec<Outcome> {
    let client = t.client(loopback_resolver());
    let mut conn = client.conn();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(conn.send(&t.request()).await);
    }
    out
}

#[tokio::test]
async fn mtls_succeeds_with_the_client_certificate_and_is_a_tls_error_without_it() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), &["localhost"]);
    let (addr, seen) = server(Some(pki.server_config(&[b"http/1.1"], true))).await;
    let port = addr.port();

    let with = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: https://localhost:{port}/\n    tls:\n      ca: ca.pem\n      cert: client.pem\n      key: client.key\n      min_version: \"1.2\"\n"
        ),
    );
    let outs = send(&with, 2).await;
    for o in &outs {
        assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
        assert_eq!(o.version, Version::HTTP_11);
    }
    assert!(outs[1].reused);
    assert_eq!(seen.requests.lock().unwrap().len(), 2);

    let without = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: https://localhost:{port}/\n    tls:\n      ca: ca.pem\n"
        ),
    );
    let o = &send(&without, 1).await[0];
    assert_eq!(o.error, Some(ErrorClass::Tls), "{o:?}");
    assert_eq!(o.status, None);
    assert_eq!(
        seen.requests.lock().unwrap().len(),
        2,
        "no request got through"
    );

    // The CA file replaces the webpki roots: without it the test CA is unknown.
    let unknown_ca = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: https://localhost:{port}/\n    tls:\n      cert: client.pem\n      key: client.key\n"
        ),
    );
    assert_eq!(send(&unknown_ca, 1).await[0].error, Some(ErrorClass::Tls));
}

#[tokio::test]
async fn connect_to_reaches_loopback_under_a_made_up_name_with_its_host_and_sni() {
    let dir = tempfile::tempdir().unwrap();
    // The certificate names only the made-up host: SNI and verification use the URL's name.
    let pki = Pki::new(dir.path(), &["shop.invalid"]);
    let (tls_addr, tls_seen) = server(Some(pki.server_config(&[b"h2", b"http/1.1"], false))).await;
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: https://shop.invalid/cart\n    connect_to: 127.0.0.1:{}\n    tls:\n      ca: ca.pem\n",
            tls_addr.port()
        ),
    );
    let outs = send(&t, 3).await;
    for o in &outs {
        assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
        assert_eq!(o.version, Version::HTTP_2, "auto took h2 from ALPN");
    }
    let seen = tls_seen.requests.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![("shop.invalid".to_string(), Version::HTTP_2); 3],
        "the authority is the URL's host"
    );
    assert_eq!(tls_seen.accepted.load(Ordering::SeqCst), 1);

    // Plain HTTP/1.1, a name for the host to dial (resolved by the same resolver).
    let (addr, seen) = server(None).await;
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: http://shop.invalid:8080/\n    connect_to: localhost:{}\n    http: \"1.1\"\n",
            addr.port()
        ),
    );
    let o = &send(&t, 1).await[0];
    assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
    assert_eq!(
        seen.requests.lock().unwrap().clone(),
        vec![("shop.invalid:8080".to_string(), Version::HTTP_11)]
    );

    // Without connect_to the made-up name does not resolve (no nameserver is asked).
    let t = target(
        dir.path(),
        "targets:\n  t:\n    url: http://shop.invalid/\n",
    );
    assert_eq!(send(&t, 1).await[0].error, Some(ErrorClass::Dns));
}

#[tokio::test]
async fn server_name_replaces_the_url_host_for_sni_and_verification() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), &["shop.internal"]);
    let (addr, seen) = server(Some(pki.server_config(&[b"http/1.1"], false))).await;
    let yaml = |extra: &str| {
        format!(
            "targets:\n  t:\n    url: https://127.0.0.1:{}/\n    tls:\n      ca: ca.pem\n{extra}",
            addr.port()
        )
    };
    let o = &send(&target(dir.path(), &yaml("")), 1).await[0];
    assert_eq!(
        o.error,
        Some(ErrorClass::Tls),
        "the IP is not in the certificate"
    );
    let o = &send(
        &target(dir.path(), &yaml("      server_name: shop.internal\n")),
        1,
    )
    .await[0];
    assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
    // The Host header stays the URL's.
    let host = seen.requests.lock().unwrap()[0].0.clone();
    assert_eq!(host, format!("127.0.0.1:{}", addr.port()));
    // insecure skips verification (and `insecure_skip_verify` still means the same).
    for extra in ["      insecure: true\n", ""] {
        let mut text = yaml(extra);
        if extra.is_empty() {
            text.push_str("    insecure_skip_verify: true\n");
        }
        let o = &send(&target(dir.path(), &text), 1).await[0];
        assert_eq!((o.error, o.status), (None, Some(200)), "{extra:?} {o:?}");
    }
}

#[test]
fn check_rejects_bad_transport_fields_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    Pki::new(dir.path(), &["localhost"]);
    std::fs::write(dir.path().join("junk.pem"), "not pem at all\n").unwrap();
    // The server's key does not go with the client certificate.
    let config = "targets:
  t:
    url: https://localhost/
    http: \"4\"
    http2: { max_connections: 0 }
    connect_to: nowhere
    dns: { select: closest }
    tls:
      ca: missing.pem
      cert: client.pem
      key: server.key
      min_version: \"1.1\"
      server_name: \"not a name\"
  u:
    url: https://localhost/
    tls: { ca: junk.pem, cert: client.pem, insecure: true }
";
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, config).unwrap();
    let out = sloburn().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let f = path.display().to_string();
    for want in [
        format!("{f}:4:11: targets.t.http: `4`: write \"1.1\", \"2\", \"3\" or auto"),
        format!("{f}:5:31: targets.t.http2.max_connections: must be between 1 and 1024"),
        format!("{f}:6:17: targets.t.connect_to: `nowhere`: write HOST:PORT"),
        format!("{f}:7:20: targets.t.dns.select: `closest`"),
        format!("{f}:9:11: targets.t.tls.ca: cannot read `missing.pem`"),
        format!("{f}:11:12: targets.t.tls.key: the key does not go with the certificate"),
        format!("{f}:12:20: targets.t.tls.min_version: `1.1`"),
        format!("{f}:13:20: targets.t.tls.server_name: `not a name`"),
        format!("{f}:16:16: targets.u.tls.ca: holds no `BEGIN CERTIFICATE` block"),
        format!("{f}:16:32: targets.u.tls.cert: `cert` needs its `key`"),
        format!("warning: {f}:16:54: targets.u.tls.insecure: TLS certificates are not verified"),
    ] {
        assert!(text.contains(&want), "missing {want:?} in:\n{text}");
    }
    assert!(!text.contains("PRIVATE KEY"), "{text}");
}

#[tokio::test]
async fn dns_select_round_robin_spreads_new_connections_over_the_addresses() {
    // One port on both loopbacks, and a name for both.
    let (v4, v6, port) = loop {
        let v4 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = v4.local_addr().unwrap().port();
        if let Ok(v6) = TcpListener::bind(("::1", port)).await {
            break (v4, v6, port);
        }
    };
    let (seen4, seen6) = (serve(v4, None, None), serve(v6, None, None));
    let resolver = Arc::new(Resolver::new(
        ResolverConfig::default(),
        HostsFile::parse("127.0.0.1 both.test\n::1 both.test\n"),
    ));
    let dir = tempfile::tempdir().unwrap();
    let counts = |select: &'static str| {
        let t = target(
            dir.path(),
            &format!(
                "targets:\n  t:\n    url: http://both.test:{port}/\n    keep_alive: false\n    dns: {{ select: {select} }}\n"
            ),
        );
        let client = t.client(resolver.clone());
        let (seen4, seen6) = (seen4.clone(), seen6.clone());
        async move {
            let before = (
                seen4.accepted.load(Ordering::SeqCst),
                seen6.accepted.load(Ordering::SeqCst),
            );
            let mut conn = client.conn();
            for _ in 0..6 {
                let o = conn.send(&t.request()).await;
                assert_eq!((o.error, o.status), (None, Some(200)), "{select}: {o:?}");
                assert!(!o.reused);
            }
            (
                seen4.accepted.load(Ordering::SeqCst) - before.0,
                seen6.accepted.load(Ordering::SeqCst) - before.1,
            )
        }
    };
    assert_eq!(
        counts("first").await,
        (6, 0),
        "in the order of the hosts file"
    );
    assert_eq!(counts("round_robin").await, (3, 3));
    let (a, b) = counts("random").await;
    assert_eq!(a + b, 6);
}

#[tokio::test]
async fn min_version_1_3_refuses_a_server_that_speaks_only_tls_1_2() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), &["localhost"]);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut only12 = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key())
        .unwrap();
    only12.alpn_protocols = vec![b"http/1.1".to_vec()];
    let (addr, seen) = server(Some(only12)).await;
    let yaml = |v: &str| {
        format!(
            "targets:\n  t:\n    url: https://localhost:{}/\n    tls: {{ ca: ca.pem, min_version: \"{v}\" }}\n",
            addr.port()
        )
    };
    let o = &send(&target(dir.path(), &yaml("1.2")), 1).await[0];
    assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
    let o = &send(&target(dir.path(), &yaml("1.3")), 1).await[0];
    assert_eq!(o.error, Some(ErrorClass::Tls), "{o:?}");
    // The server counts its failed handshake once its accept returns, maybe after our error.
    let started = std::time::Instant::now();
    while seen.handshakes_failed.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed().as_secs() < 5,
            "the server saw no failed handshake"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(seen.handshakes_failed.load(Ordering::SeqCst), 1);
    assert_eq!(seen.requests.lock().unwrap().len(), 1);
}
