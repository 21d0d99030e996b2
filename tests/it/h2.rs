//! HTTP/2 against a real server, Debian's `nghttpd` (`scripts/install-test-tools.sh`): h2c with
//! prior knowledge, ALPN over TLS, and many users' streams sharing a few connections. nghttpd's
//! verbose log (`-v`, every frame, each line tagged with its connection's `[id=N]`) proves the
//! protocol and counts the connections.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::Version;

use crate::support::{free_port, sloburn, which};
use crate::tls::{Pki, gated_server, loopback_resolver, send, target};

struct Nghttpd {
    child: Child,
    log: PathBuf,
    port: u16,
    _www: tempfile::TempDir,
}

impl Nghttpd {
    /// nghttpd on 127.0.0.1 serving `index.html`; TLS with `key`/`cert` (ALPN h2), else h2c.
    fn start(tls: Option<(&Path, &Path)>) -> Nghttpd {
        let www = tempfile::tempdir().unwrap();
        std::fs::write(www.path().join("index.html"), "hello h2\n").unwrap();
        let log = www.path().join("nghttpd.log");
        let port = free_port();
        let mut cmd = Command::new(which("nghttpd"));
        cmd.arg("-v")
            .args(["-a", "127.0.0.1", "-d"])
            .arg(www.path());
        match tls {
            Some((key, cert)) => cmd.arg(port.to_string()).arg(key).arg(cert),
            None => cmd.arg("--no-tls").arg(port.to_string()),
        };
        let child = cmd
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "nghttpd did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Nghttpd {
            child,
            log,
            port,
            _www: www,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The connections that carried a request (the readiness probe carried none).
    fn request_connections(&self) -> BTreeSet<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("recv HEADERS frame"))
            .filter_map(|l| l.split(']').next().map(str::to_string))
            .collect()
    }

    fn requests(&self) -> usize {
        self.log().matches("recv HEADERS frame").count()
    }
}

impl Drop for Nghttpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every outcome a 200 with nghttpd's page, over HTTP/2.
fn assert_served_over_h2(outs: &[sloburn::http::Outcome]) {
    for o in outs {
        assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
        assert_eq!(o.version, Version::HTTP_2);
        assert_eq!(&o.body[..], b"hello h2\n");
    }
}

/// Waits for nghttpd's log to catch up (it writes after answering).
fn settle(server: &Nghttpd, requests: usize) {
    crate::support::eventually(Duration::from_secs(5), || {
        (server.requests() >= requests).then_some(())
    });
}

#[tokio::test]
async fn h2c_prior_knowledge_against_nghttpd() {
    let server = Nghttpd::start(None);
    let dir = tempfile::tempdir().unwrap();
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: http://127.0.0.1:{}/index.html\n    http: \"2\"\n",
            server.port
        ),
    );
    let outs = send(&t, 3).await;
    assert_served_over_h2(&outs);
    assert!(!outs[0].reused && outs[1].reused && outs[2].reused);
    assert!(outs[0].phases.connecting > Duration::ZERO);
    assert_eq!(outs[1].phases.connecting, Duration::ZERO);
    assert!(outs[1].phases.waiting > Duration::ZERO);
    settle(&server, 3);
    let log = server.log();
    assert!(log.contains("recv SETTINGS frame"), "{log}");
    assert!(
        log.contains(&format!(":authority: 127.0.0.1:{}", server.port)),
        "{log}"
    );
    assert_eq!(server.requests(), 3, "{log}");
    assert_eq!(server.request_connections().len(), 1, "{log}");

    // Without `http: "2"`, http:// is HTTP/1.1, which nghttpd --no-tls does not speak.
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: http://127.0.0.1:{}/index.html\n",
            server.port
        ),
    );
    let o = &send(&t, 1).await[0];
    assert_ne!(o.status, Some(200), "{o:?}");
}

#[test]
fn sloburn_run_with_http_2_speaks_h2c() {
    let server = Nghttpd::start(None);
    let url = format!("http://127.0.0.1:{}/index.html", server.port);
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("samples.json");
    let out = sloburn()
        .args(["run", "--url", &url, "--http", "2", "--iterations", "5"])
        .arg("--out")
        .arg(format!("json={}", samples.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // k6's `proto` tag on every request sample.
    let lines = std::fs::read_to_string(&samples).unwrap();
    let reqs: Vec<&str> = lines
        .lines()
        .filter(|l| l.contains("\"Point\"") && l.contains("\"http_reqs\""))
        .collect();
    assert_eq!(reqs.len(), 5, "{lines}");
    assert!(
        reqs.iter().all(|l| l.contains("\"proto\":\"HTTP/2.0\"")),
        "{reqs:?}"
    );
    settle(&server, 5);
    assert_eq!(server.requests(), 5, "{}", server.log());
    assert_eq!(server.log().matches(":status: 200").count(), 5);
    assert_eq!(server.request_connections().len(), 1);
    let bad = sloburn()
        .args(["run", "--url", &url, "--http", "3", "--iterations", "1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

#[tokio::test]
async fn alpn_over_tls_picks_h2_from_nghttpd() {
    let dir = tempfile::tempdir().unwrap();
    Pki::new(dir.path(), &["localhost"]);
    let server = Nghttpd::start(Some((
        &dir.path().join("server.key"),
        &dir.path().join("server.pem"),
    )));
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: https://localhost:{}/index.html\n    tls: {{ ca: ca.pem }}\n",
            server.port
        ),
    );
    let outs = send(&t, 2).await;
    assert_served_over_h2(&outs);
    assert!(outs[0].phases.tls_handshaking > Duration::ZERO);
    assert_eq!(outs[1].phases.tls_handshaking, Duration::ZERO);
    settle(&server, 2);
    let log = server.log();
    assert!(log.contains(":scheme: https"), "{log}");
    assert_eq!(server.request_connections().len(), 1, "{log}");
}

/// 100 users on one client, 3 requests each, over `max_connections: 2`.
async fn hundred_users(t: &sloburn::config::Target) -> Vec<sloburn::http::Outcome> {
    let client = t.client(loopback_resolver());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let (client, req) = (client.clone(), t.request());
        tasks.spawn(async move {
            let mut conn = client.conn();
            let mut outs = Vec::new();
            for _ in 0..3 {
                outs.push(conn.send(&req).await);
            }
            outs
        });
    }
    tasks.join_all().await.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_users_share_the_configured_h2_connections() {
    let server = Nghttpd::start(None);
    let dir = tempfile::tempdir().unwrap();
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: http://127.0.0.1:{}/index.html\n    http: \"2\"\n    http2: {{ max_connections: 2 }}\n",
            server.port
        ),
    );
    let outs = hundred_users(&t).await;
    assert_eq!(outs.len(), 300);
    for o in &outs {
        assert_eq!(
            (o.error, o.status, o.version),
            (None, Some(200), Version::HTTP_2),
            "{o:?}"
        );
    }
    // Each connection was opened by one request; every other request reused one.
    assert_eq!(outs.iter().filter(|o| !o.reused).count(), 2);
    settle(&server, 300);
    assert_eq!(server.requests(), 300);
    assert_eq!(server.request_connections().len(), 2, "{}", server.log());
}

/// The same with every stream held open until all 100 are in flight: they are concurrent, on
/// at most two connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_streams_fit_in_two_connections() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path(), &["localhost"]);
    let gate = Arc::new(tokio::sync::Barrier::new(100));
    let (addr, seen) = gated_server(
        Some(pki.server_config(&[b"h2", b"http/1.1"], false)),
        Some(gate),
    )
    .await;
    let t = target(
        dir.path(),
        &format!(
            "targets:\n  t:\n    url: https://localhost:{}/\n    tls: {{ ca: ca.pem }}\n    http2: {{ max_connections: 2 }}\n",
            addr.port()
        ),
    );
    let outs = hundred_users(&t).await;
    assert_eq!(outs.len(), 300);
    for o in &outs {
        assert_eq!(
            (o.error, o.status, o.version),
            (None, Some(200), Version::HTTP_2),
            "{o:?}"
        );
    }
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 2);
    assert_eq!(seen.requests.lock().unwrap().len(), 300);
}

/// What the h2 test server does with each connection's streams.
#[derive(Clone, Copy)]
enum Misbehave {
    /// RST_STREAM(INTERNAL_ERROR) on every stream.
    ResetStreams,
    /// Answers the first stream, then GOAWAY (a graceful shutdown) and closes.
    GoAwayAfterOne,
}

/// An h2c server on 127.0.0.1 built on the `h2` crate; counts the connections it accepts.
async fn misbehaving(mode: Misbehave) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(tcp).await else {
                    return;
                };
                while let Some(Ok((_req, mut respond))) = conn.accept().await {
                    match mode {
                        Misbehave::ResetStreams => respond.send_reset(h2::Reason::INTERNAL_ERROR),
                        Misbehave::GoAwayAfterOne => {
                            let _ = respond.send_response(http::Response::new(()), true);
                            conn.graceful_shutdown();
                        }
                    }
                }
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn a_reset_stream_is_class_reset_and_a_closed_connection_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, accepted) = misbehaving(Misbehave::ResetStreams).await;
    let t = target(
        dir.path(),
        &format!("targets:\n  t:\n    url: http://{addr}/\n    http: \"2\"\n"),
    );
    let outs = send(&t, 2).await;
    for o in &outs {
        assert_eq!(o.error, Some(sloburn::http::ErrorClass::Reset), "{o:?}");
        assert_eq!((o.status, o.version), (None, Version::HTTP_2));
    }
    assert!(outs[1].reused, "a reset stream leaves the connection open");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);

    let (addr, accepted) = misbehaving(Misbehave::GoAwayAfterOne).await;
    let t = target(
        dir.path(),
        &format!("targets:\n  t:\n    url: http://{addr}/\n    http: \"2\"\n"),
    );
    let client = t.client(loopback_resolver());
    let mut conn = client.conn();
    let first = conn.send(&t.request()).await;
    assert_eq!((first.error, first.status), (None, Some(200)), "{first:?}");
    let started = Instant::now();
    while conn.is_open() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "GOAWAY never closed it"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = conn.send(&t.request()).await;
    assert_eq!(
        (second.error, second.status),
        (None, Some(200)),
        "{second:?}"
    );
    assert!(!second.reused, "served by a new connection");
    assert!(second.phases.connecting > Duration::ZERO);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}
