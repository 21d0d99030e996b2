//! HTTP/3 against a real server: hypercorn with aioquic (PyPI, `scripts/install-h3-test-tools.sh`)
//! serving `tests/it/h3/app.py` on 127.0.0.1, over QUIC and, on the same port over TCP, with
//! `Alt-Svc: h3`. A UDP relay the test runs holds each datagram a known time, or drops them all,
//! so the handshake's phases and a blocked UDP path are measured against what the relay did.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sloburn::http::{ErrorClass, Outcome};

use crate::support::{free_port, install_h3_test_tools};
use crate::tls::{Pki, loopback_resolver, target};

/// hypercorn on 127.0.0.1:`port`, TCP and UDP, its certificate from `dir`'s [`Pki`].
pub(crate) struct Hypercorn {
    child: Child,
    pub(crate) port: u16,
}

impl Hypercorn {
    pub(crate) fn start(dir: &Path) -> Hypercorn {
        install_h3_test_tools();
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let child = Command::new("python3")
            .args(["-m", "hypercorn", "--log-level", "error"])
            .arg("--certfile")
            .arg(dir.join("server.pem"))
            .arg("--keyfile")
            .arg(dir.join("server.key"))
            .args(["--bind", &bind, "--quic-bind", &bind, "app:app"])
            .current_dir(crate::support::root().join("tests/it/h3"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs hypercorn");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "hypercorn did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Hypercorn { child, port }
    }
}

impl Drop for Hypercorn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The app's own count of the requests it served, asked over HTTP/1.1 (TCP).
async fn served(dir: &Path, port: u16) -> u64 {
    let t = target(
        dir,
        &format!(
            "targets:\n  t:\n    url: https://localhost:{port}/count\n    http: \"1.1\"\n    tls: {{ ca: ca.pem }}\n"
        ),
    );
    let out = crate::tls::send(&t, 1).await.remove(0);
    assert_eq!(out.status, Some(200), "{out:?}");
    std::str::from_utf8(&out.body).unwrap().parse().unwrap()
}

fn h3_target(dir: &Path, url: &str, extra: &str) -> sloburn::config::Target {
    target(
        dir,
        &format!(
            "targets:\n  t:\n    url: {url}\n    http: \"3\"\n    tls: {{ ca: ca.pem }}\n{extra}"
        ),
    )
}

async fn send_on(t: &sloburn::config::Target, path: &str, n: usize) -> Vec<Outcome> {
    let client = t.client(loopback_resolver());
    let mut conn = client.conn();
    let mut req = t.request();
    let base = req.uri.to_string();
    let base = base.trim_end_matches('/');
    req.uri = format!("{base}{path}").parse().unwrap();
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(conn.send(&req).await);
    }
    out
}

fn pki() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    Pki::new(dir.path(), &["localhost"]);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_go_over_http3_on_one_connection_with_status_and_phases() {
    let dir = pki();
    let server = Hypercorn::start(dir.path());
    let url = format!("https://localhost:{}", server.port);
    let t = h3_target(dir.path(), &url, "");
    let outs = send_on(&t, "/status/418", 3).await;
    for (i, o) in outs.iter().enumerate() {
        assert_eq!(o.error, None, "{o:?}");
        assert_eq!(o.status, Some(418));
        assert_eq!(o.version, http::Version::HTTP_3);
        assert_eq!(o.reused, i > 0);
        assert_eq!(&o.body[..], b"ok");
        assert!(o.quic.is_some_and(|q| q.rtt > Duration::ZERO), "{o:?}");
    }
    // The first request paid the handshake; the others reused it.
    assert!(outs[0].phases.connecting > Duration::ZERO);
    assert!(outs[0].phases.tls_handshaking > Duration::ZERO);
    assert_eq!(outs[1].phases.connecting, Duration::ZERO);
    assert_eq!(outs[0].local_port, outs[2].local_port);
    assert_eq!(served(dir.path(), server.port).await, 3);
}

/// A UDP relay on 127.0.0.1 in front of `upstream`: it holds each datagram `hold` each way (or
/// drops every one), and notes the shortest and longest hold it really made, so a test bounds
/// what sloburn measured by what the relay did.
struct Relay {
    addr: SocketAddr,
    min_hold_us: Arc<AtomicU64>,
    max_hold_us: Arc<AtomicU64>,
    forwarded: Arc<AtomicU64>,
    /// Microseconds since `epoch` (plus one; zero: none yet) of the first datagram from the
    /// client since [`Relay::arm`], and of the latest one sent back to it.
    first_up: Arc<AtomicU64>,
    last_down: Arc<AtomicU64>,
    epoch: Instant,
    stop: Arc<AtomicBool>,
}

impl Relay {
    async fn start(upstream: SocketAddr, hold: Option<Duration>) -> Relay {
        let front = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let back = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
        back.connect(upstream).await.unwrap();
        let relay = Relay {
            addr: front.local_addr().unwrap(),
            min_hold_us: Arc::new(AtomicU64::new(u64::MAX)),
            max_hold_us: Arc::new(AtomicU64::new(0)),
            forwarded: Arc::new(AtomicU64::new(0)),
            first_up: Arc::new(AtomicU64::new(0)),
            last_down: Arc::new(AtomicU64::new(0)),
            epoch: Instant::now(),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let client: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        for upward in [true, false] {
            let (front, back, client) = (front.clone(), back.clone(), client.clone());
            let (min, max, n, stop) = (
                relay.min_hold_us.clone(),
                relay.max_hold_us.clone(),
                relay.forwarded.clone(),
                relay.stop.clone(),
            );
            let (first_up, last_down, epoch) =
                (relay.first_up.clone(), relay.last_down.clone(), relay.epoch);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                // Bounded: the test's own lifetime, at most a minute.
                let until = tokio::time::Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::Relaxed) && tokio::time::Instant::now() < until {
                    let got = if upward {
                        tokio::time::timeout(Duration::from_millis(200), front.recv_from(&mut buf))
                            .await
                    } else {
                        tokio::time::timeout(Duration::from_millis(200), back.recv_from(&mut buf))
                            .await
                    };
                    let Ok(Ok((len, from))) = got else { continue };
                    if upward {
                        *client.lock().unwrap() = Some(from);
                        let now = epoch.elapsed().as_micros() as u64 + 1;
                        let _ =
                            first_up.compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire);
                    }
                    let Some(hold) = hold else { continue };
                    let data = buf[..len].to_vec();
                    let (front, back, client) = (front.clone(), back.clone(), client.clone());
                    let (min, max, n) = (min.clone(), max.clone(), n.clone());
                    let last_down = last_down.clone();
                    let at = Instant::now();
                    tokio::spawn(async move {
                        tokio::time::sleep(hold).await;
                        let held = at.elapsed().as_micros() as u64;
                        min.fetch_min(held, Ordering::Relaxed);
                        max.fetch_max(held, Ordering::Relaxed);
                        n.fetch_add(1, Ordering::Relaxed);
                        if upward {
                            let _ = back.send(&data).await;
                        } else {
                            let to = *client.lock().unwrap();
                            if let Some(to) = to {
                                let _ = front.send_to(&data, to).await;
                                let now = epoch.elapsed().as_micros() as u64 + 1;
                                last_down.fetch_max(now, Ordering::AcqRel);
                            }
                        }
                    });
                }
            });
        }
        relay
    }

    /// Starts a new observed exchange: forgets the first datagram up.
    fn arm(&self) {
        self.first_up.store(0, Ordering::Release);
    }

    /// From the exchange's first datagram reaching the relay to the latest one the relay sent
    /// back: the client's own interval for it holds no less (it sent before the first and
    /// received after the last); past it is only sloburn's own scheduling.
    fn observed(&self) -> Duration {
        let (up, down) = (
            self.first_up.load(Ordering::Acquire),
            self.last_down.load(Ordering::Acquire),
        );
        Duration::from_micros(down.saturating_sub(up))
    }

    fn holds(&self) -> (Duration, Duration) {
        (
            Duration::from_micros(self.min_hold_us.load(Ordering::Relaxed)),
            Duration::from_micros(self.max_hold_us.load(Ordering::Relaxed)),
        )
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// With each datagram held D each way, the handshake's first round trip (`connecting`) is at
/// least 2·D and a request's `waiting` at least 2·D plus the server's hold; neither exceeds what
/// the relay itself saw of that exchange (its first datagram in to its last one back) by more
/// than sloburn's own scheduling (`SLACK`), however slow the server was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phases_follow_the_udp_paths_delay() {
    const SLACK: Duration = Duration::from_millis(100);
    let dir = pki();
    let server = Hypercorn::start(dir.path());
    let upstream: SocketAddr = format!("127.0.0.1:{}", server.port).parse().unwrap();
    let d = Duration::from_millis(40);
    let relay = Relay::start(upstream, Some(d)).await;
    let extra = format!("    connect_to: 127.0.0.1:{}\n", relay.addr.port());
    let t = h3_target(
        dir.path(),
        &format!("https://localhost:{}", server.port),
        &extra,
    );
    let hold = Duration::from_millis(30);
    let client = t.client(loopback_resolver());
    let mut conn = client.conn();
    let mut req = t.request();
    req.uri = format!("https://localhost:{}/hold/30", server.port)
        .parse()
        .unwrap();
    for i in 0..3 {
        relay.arm();
        let o = conn.send(&req).await;
        let seen = relay.observed();
        let (min, max) = relay.holds();
        assert!(min >= d, "the relay held {min:?}");
        assert_eq!((o.error, o.status), (None, Some(200)), "{o:?}");
        let p = o.phases;
        eprintln!(
            "D = {d:?}, request {i}: connecting {:?} tls {:?} waiting {:?} (server hold {hold:?}); \
             relay held {min:?}..{max:?}, saw the exchange take {seen:?}",
            p.connecting, p.tls_handshaking, p.waiting
        );
        if i == 0 {
            assert!(p.connecting >= 2 * d, "{p:?}");
            assert!(
                p.connecting + p.tls_handshaking <= seen + SLACK,
                "{p:?} {seen:?}"
            );
        } else {
            assert_eq!(p.connecting, Duration::ZERO);
        }
        assert!(p.waiting >= 2 * d + hold, "{p:?}");
        assert!(p.waiting <= seen + SLACK, "{p:?}, the relay saw {seen:?}");
    }
}

/// Every datagram dropped: `connect_timeout`, its reason naming UDP, no answer counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn udp_dropped_is_connect_timeout_naming_udp() {
    let dir = pki();
    let upstream: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let relay = Relay::start(upstream, None).await;
    let extra = format!(
        "    connect_to: 127.0.0.1:{}\n    timeout: 1500ms\n",
        relay.addr.port()
    );
    let t = h3_target(dir.path(), "https://localhost", &extra);
    let out = send_on(&t, "/", 1).await.remove(0);
    assert_eq!(out.error, Some(ErrorClass::ConnectTimeout), "{out:?}");
    assert!(
        out.error_reason.is_some_and(|r| r.contains("UDP")),
        "{out:?}"
    );
    assert_eq!(out.status, None);
    assert!(
        out.phases.connecting >= Duration::from_millis(1400),
        "{out:?}"
    );
    assert_eq!(relay.forwarded.load(Ordering::Relaxed), 0);
}

fn write_config(dir: &Path, port: u16, profiles: &str) -> std::path::PathBuf {
    let path = dir.join("sloburn.yaml");
    std::fs::write(
        &path,
        format!(
            r#"targets:
  t:
    url: https://localhost:{port}/
    http: "3"
    tls: {{ ca: ca.pem }}
    connect_to: 127.0.0.1:{port}
    checks:
      - status: 200
      - body_contains: "ok"
journeys:
  shop:
    target: t
    steps:
      - name: login
        method: POST
        path: /login
        checks: [ {{ status: 200 }} ]
        capture: {{ token: {{ json: "$.token" }} }}
      - name: cart
        path: /cart
        headers: {{ Authorization: "Bearer ${{token}}" }}
        checks: [ {{ status: 200 }}, {{ body_contains: "cart" }} ]
profiles:
{profiles}"#
        ),
    )
    .unwrap();
    path
}

fn export(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A journey over HTTP/3: the login's token captured and carried to the cart, whose server
/// accepts only tokens it gave.
#[test]
fn a_journey_over_http3_carries_a_captured_token() {
    let dir = pki();
    let server = Hypercorn::start(dir.path());
    let config = write_config(
        dir.path(),
        server.port,
        "  shoppers:\n    journey: shop\n    executor: shared-iterations\n    vus: 2\n    iterations: 20\n",
    );
    let summary = dir.path().join("summary.json");
    let out = crate::support::sloburn()
        .arg("run")
        .arg(&config)
        .arg("--summary-export")
        .arg(&summary)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let m = &export(&summary)["metrics"];
    assert_eq!(m["http_reqs"]["count"].as_u64(), Some(40), "{m}");
    assert_eq!(m["checks"]["passes"].as_u64(), Some(60), "{m}");
    assert_eq!(m["checks"]["fails"].as_u64(), Some(0), "{m}");
    let rt = crate::support::runtime();
    assert_eq!(rt.block_on(served(dir.path(), server.port)), 40);
}

/// `http: "3"` on an http:// URL is a positioned config error; `--http 3` on one a usage error.
#[test]
fn http3_on_a_plain_url_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "targets:\n  t:\n    url: http://127.0.0.1:9/\n    http: \"3\"\n",
    )
    .unwrap();
    let out = crate::support::sloburn()
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains(&format!("{}:4:11:", path.display()))
            && text.contains("needs an https:// URL"),
        "{text}"
    );
    let out = crate::support::sloburn()
        .args([
            "run",
            "--url",
            "http://127.0.0.1:9/",
            "--http",
            "3",
            "--iterations",
            "1",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--http 3") && text.contains("https://"),
        "{text}"
    );
}
