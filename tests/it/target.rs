//! `sloburn target` over real loopback HTTP: each test starts its own server on 127.0.0.1:0 and
//! talks to it with a bare hyper client (or raw TCP), never through the crate's own client.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use sloburn::target::{Distribution, StatsSnapshot, Target, TargetOptions, spawn};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

/// Every network step is bounded so that a broken server fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(10);

/// A target that shuts down when the test ends.
struct Running {
    target: Target,
    shutdown: CancellationToken,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start(opts: TargetOptions) -> Running {
    let shutdown = CancellationToken::new();
    let target = spawn(opts, shutdown.clone()).await.unwrap();
    assert!(target.addr.ip().is_loopback());
    Running { target, shutdown }
}

async fn start_default() -> Running {
    start(TargetOptions::default()).await
}

struct Client {
    sender: http1::SendRequest<Empty<Bytes>>,
}

struct Reply {
    status: u16,
    content_type: String,
    content_length: Option<u64>,
    body: Bytes,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        let stream = timeout(BOUND, TcpStream::connect(addr))
            .await
            .unwrap()
            .unwrap();
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        Client { sender }
    }

    async fn get(&mut self, path: &str) -> Reply {
        let req = Request::get(path)
            .header("host", "target.test")
            .body(Empty::new())
            .unwrap();
        timeout(BOUND, async {
            let resp = self.sender.send_request(req).await.unwrap();
            let status = resp.status().as_u16();
            let header = |name| {
                resp.headers()
                    .get(name)
                    .map(|v: &http::HeaderValue| v.to_str().unwrap().to_owned())
            };
            let content_type = header(http::header::CONTENT_TYPE).unwrap_or_default();
            let content_length = header(http::header::CONTENT_LENGTH).map(|v| v.parse().unwrap());
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            Reply {
                status,
                content_type,
                content_length,
                body,
            }
        })
        .await
        .expect("request timed out")
    }

    async fn stats(&mut self) -> StatsSnapshot {
        let reply = self.get("/stats").await;
        assert_eq!(reply.status, 200);
        serde_json::from_slice(&reply.body).unwrap()
    }
}

async fn timed_get(client: &mut Client, path: &str) -> (Reply, Duration) {
    let start = Instant::now();
    let reply = client.get(path).await;
    (reply, start.elapsed())
}

#[tokio::test]
async fn default_response_is_json_status_up() {
    let t = start_default().await;
    let mut c = Client::connect(t.target.addr).await;
    let reply = c.get("/anything/at/all").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "application/json");
    assert_eq!(&reply.body[..], br#"{"status":"up"}"#);
    assert_eq!(reply.content_length, Some(15));
}

#[tokio::test]
async fn latency_delays_the_response() {
    let t = start(TargetOptions {
        latency: Duration::from_millis(20),
        ..TargetOptions::default()
    })
    .await;
    let mut c = Client::connect(t.target.addr).await;
    let (reply, took) = timed_get(&mut c, "/").await;
    assert_eq!(reply.status, 200);
    assert!(took >= Duration::from_millis(20), "{took:?}");
    // 20 ms and a loopback round trip (under 1 ms idle): 50× that is no figure, only "not stuck".
    assert!(took < Duration::from_secs(1), "{took:?}");

    // The query override replaces the server default for that request only. The default here
    // is an hour, so an answer within `BOUND` proves `latency=0` replaced it, whatever the
    // machine's load; `get` fails the test when it does not come.
    let (_, took) = timed_get(&mut c, "/?latency=60ms").await;
    assert!(took >= Duration::from_millis(60), "{took:?}");
    let t = start(TargetOptions {
        latency: Duration::from_secs(3_600),
        ..TargetOptions::default()
    })
    .await;
    let mut c = Client::connect(t.target.addr).await;
    let (reply, _) = timed_get(&mut c, "/?latency=0").await;
    assert_eq!(reply.status, 200);
    let (reply, _) = timed_get(&mut c, "/?latency=60ms").await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn exponential_jitter_never_goes_below_the_latency() {
    let t = start_default().await;
    let mut c = Client::connect(t.target.addr).await;
    for _ in 0..20 {
        let (reply, took) =
            timed_get(&mut c, "/?latency=10ms&jitter=5ms&distribution=exponential").await;
        assert_eq!(reply.status, 200);
        assert!(took >= Duration::from_millis(10), "{took:?}");
    }
}

#[tokio::test]
async fn error_ratio_injects_errors_and_stats_count_them_exactly() {
    let t = start(TargetOptions {
        error_ratio: 0.3,
        ..TargetOptions::default()
    })
    .await;
    let mut c = Client::connect(t.target.addr).await;
    let mut errors = 0u64;
    for _ in 0..1000 {
        let reply = c.get("/").await;
        match reply.status {
            500 => {
                errors += 1;
                assert_eq!(&reply.body[..], br#"{"status":"error"}"#);
            }
            200 => assert_eq!(&reply.body[..], br#"{"status":"up"}"#),
            other => panic!("unexpected status {other}"),
        }
    }
    assert!((200..=400).contains(&errors), "{errors} errors out of 1000");
    let stats = c.stats().await;
    assert_eq!(stats.errors_injected, errors);
    assert_eq!(stats.requests, 1000);
    assert_eq!(stats.connections, 1);
    assert_eq!(stats.in_flight, 0);

    // error_status and error_ratio can be overridden per request.
    let reply = c.get("/?error_ratio=1&error_status=502").await;
    assert_eq!(reply.status, 502);
    let reply = c.get("/?error_ratio=0").await;
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn status_override_forces_the_status() {
    let t = start_default().await;
    let mut c = Client::connect(t.target.addr).await;
    let reply = c.get("/?status=503").await;
    assert_eq!(reply.status, 503);
    assert_eq!(&reply.body[..], br#"{"status":"error"}"#);
    let reply = c.get("/?status=201").await;
    assert_eq!(reply.status, 201);
    assert_eq!(&reply.body[..], br#"{"status":"up"}"#);
    let reply = c.get("/?status=204&body_size=100").await;
    assert_eq!(reply.status, 204);
    assert!(reply.body.is_empty());
    // The connection survived all of that.
    assert_eq!(c.stats().await.connections, 1);
}

/// Sends one raw request and reads until the server closes; returns what came back.
async fn raw_exchange(addr: SocketAddr, path: &str) -> (Vec<u8>, std::io::Result<usize>) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: target.test\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let result = timeout(BOUND, stream.read_to_end(&mut got))
        .await
        .expect("server neither answered nor closed");
    (got, result)
}

#[tokio::test]
async fn reset_closes_the_connection_without_a_response() {
    let t = start_default().await;
    let (got, result) = raw_exchange(t.target.addr, "/?reset=1").await;
    assert!(
        got.is_empty(),
        "got a response: {:?}",
        String::from_utf8_lossy(&got)
    );
    match result {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
        Ok(n) => assert_eq!(n, 0),
    }
    let mut c = Client::connect(t.target.addr).await;
    let stats = c.stats().await;
    assert_eq!(stats.resets, 1);
    assert_eq!(stats.requests, 0);
    assert_eq!(stats.in_flight, 0);
}

#[tokio::test]
async fn server_wide_reset_ratio_sends_an_rst() {
    let t = start(TargetOptions {
        reset_ratio: 1.0,
        ..TargetOptions::default()
    })
    .await;
    let (got, result) = raw_exchange(t.target.addr, "/").await;
    assert!(got.is_empty());
    // SO_LINGER 0 makes the close an RST, which a reader sees as ECONNRESET.
    assert_eq!(
        result.unwrap_err().kind(),
        std::io::ErrorKind::ConnectionReset
    );
    // The per-request override turns it off again.
    let mut c = Client::connect(t.target.addr).await;
    assert_eq!(c.get("/?reset=0").await.status, 200);
}

#[tokio::test]
async fn body_size_gives_exactly_that_many_bytes() {
    let t = start(TargetOptions {
        body_size: Some(512),
        ..TargetOptions::default()
    })
    .await;
    let mut c = Client::connect(t.target.addr).await;
    let reply = c.get("/").await;
    assert_eq!(reply.body.len(), 512);
    let json: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(json["status"], "up");

    let reply = c.get("/?body_size=1MiB").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body.len(), 1 << 20);
    assert_eq!(reply.content_length, Some(1 << 20));
    let json: serde_json::Value = serde_json::from_slice(&reply.body).unwrap();
    assert_eq!(json["status"], "up");
    assert_eq!(c.stats().await.requests, 2);
}

#[tokio::test]
async fn bytes_per_sec_trickles_the_body() {
    let t = start_default().await;
    let mut c = Client::connect(t.target.addr).await;
    let (reply, took) = timed_get(&mut c, "/?body_size=10000&bytes_per_sec=20000").await;
    assert_eq!(reply.body.len(), 10_000);
    // 10000 bytes at 20000 B/s is 500 ms by construction.
    assert!(took >= Duration::from_millis(400), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn stalls_freeze_requests_periodically() {
    let t = start(TargetOptions {
        stall_every: Some(Duration::from_secs(1)),
        stall_for: Some(Duration::from_millis(500)),
        ..TargetOptions::default()
    })
    .await;
    let mut c = Client::connect(t.target.addr).await;
    let begin = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut count = 0;
    while begin.elapsed() < Duration::from_secs(2) && count < 100_000 {
        let (reply, took) = timed_get(&mut c, "/").await;
        assert_eq!(reply.status, 200);
        slowest = slowest.max(took);
        count += 1;
    }
    assert!(slowest >= Duration::from_millis(300), "slowest {slowest:?}");
    // Outside stalls requests are fast, so there were many of them.
    assert!(count > 10, "only {count} requests in 2 s");
}

#[tokio::test]
async fn bad_overrides_get_400_with_a_message() {
    let t = start_default().await;
    let mut c = Client::connect(t.target.addr).await;
    for (path, needle) in [
        ("/?latency=fast", "duration"),
        ("/?status=99", "status"),
        ("/?error_ratio=1.5", "between 0 and 1"),
        ("/?body_size=lots", "size"),
        ("/?reset", "needs a value"),
        ("/?bogus=1", "unknown override"),
    ] {
        let reply = c.get(path).await;
        assert_eq!(reply.status, 400, "{path}");
        assert!(reply.content_type.starts_with("text/plain"), "{path}");
        let text = String::from_utf8(reply.body.to_vec()).unwrap();
        assert!(text.contains(needle), "{path}: {text}");
    }
    let stats = c.stats().await;
    assert_eq!(stats.requests, 0, "400s are not counted as target requests");
}

#[tokio::test]
async fn stats_track_connections_and_in_flight() {
    let t = start_default().await;
    let addr = t.target.addr;
    let slow = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        c.get("/?latency=800ms").await.status
    });
    let mut observer = Client::connect(addr).await;
    let mut seen = StatsSnapshot::default();
    let begin = Instant::now();
    while begin.elapsed() < BOUND {
        seen = observer.stats().await;
        if seen.in_flight == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.in_flight, 1, "{seen:?}");
    assert_eq!(seen.requests, 0);
    assert_eq!(slow.await.unwrap(), 200);
    let after = observer.stats().await;
    assert_eq!(after.in_flight, 0);
    assert_eq!(after.requests, 1);
    assert_eq!(after.connections, 2);
    assert_eq!(t.target.stats(), after);
}

#[tokio::test]
async fn shutdown_stops_accepting_and_lets_in_flight_requests_finish() {
    let t = start_default().await;
    let addr = t.target.addr;
    let mut c = Client::connect(addr).await;
    let pending = tokio::spawn(async move { c.get("/?latency=300ms").await.status });
    let begin = Instant::now();
    while t.target.stats().in_flight == 0 && begin.elapsed() < BOUND {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    t.shutdown.cancel();
    assert_eq!(pending.await.unwrap(), 200);
    timeout(BOUND, t.target.wait())
        .await
        .expect("drain timed out");
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    opts: TargetOptions,
}

#[tokio::test]
async fn flags_parse_and_bad_combinations_are_refused_before_binding() {
    let cli = Cli::try_parse_from([
        "target",
        "--listen",
        "127.0.0.1:0",
        "--latency",
        "1.5s",
        "--jitter",
        "5ms",
        "--distribution",
        "lognormal",
        "--error-ratio",
        "0.25",
        "--error-status",
        "503",
        "--body-size",
        "4KiB",
        "--bytes-per-sec",
        "1MiB",
        "--workers",
        "1",
    ])
    .unwrap();
    let o = cli.opts;
    assert_eq!(o.latency, Duration::from_millis(1500));
    assert_eq!(o.distribution, Distribution::Lognormal);
    assert_eq!(o.error_status, 503);
    assert_eq!(o.body_size, Some(4096));
    assert_eq!(o.bytes_per_sec, Some(1 << 20));
    assert_eq!(o.workers, Some(1));

    let defaults = Cli::try_parse_from(["target"]).unwrap().opts;
    assert_eq!(defaults.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!(defaults.error_ratio, 0.0);
    assert_eq!(defaults.error_status, 500);
    assert!(defaults.validate().is_ok());

    for bad in [
        &["target", "--latency", "20"][..],
        &["target", "--error-ratio", "2"],
        &["target", "--stall-every", "1s"],
        &["target", "--body-size", "1XB"],
        &["target", "--workers", "0"],
    ] {
        assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
    }

    let err = spawn(
        TargetOptions {
            stall_every: Some(Duration::from_millis(500)),
            stall_for: Some(Duration::from_secs(1)),
            ..TargetOptions::default()
        },
        CancellationToken::new(),
    )
    .await
    .err()
    .expect("a stall longer than its period must be refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

#[tokio::test]
async fn a_stall_also_holds_requests_already_in_progress() {
    let before_start = Instant::now();
    let t = start(TargetOptions {
        stall_every: Some(Duration::from_secs(1)),
        stall_for: Some(Duration::from_millis(500)),
        ..TargetOptions::default()
    })
    .await;
    let mut c = Client::connect(t.target.addr).await;
    // Arrive just after the first stall, with a latency that ends inside the second one
    // ([1.0 s, 1.5 s) since start): the request must be held until about 1.5 s.
    tokio::time::sleep_until(before_start + Duration::from_millis(550)).await;
    let (reply, took) = timed_get(&mut c, "/?latency=600ms").await;
    assert_eq!(reply.status, 200);
    assert!(took >= Duration::from_millis(750), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn target_refuses_absurd_latency_and_body_size() {
    let t = start_default().await;
    let mut c = Client::connect(t.target.addr).await;
    for (path, needle) in [
        ("/?latency=9999h", "`9999h` is over the limit of 1h"),
        (
            "/?latency=99999999999h",
            "`99999999999h` is over the limit of 1h",
        ),
        ("/?jitter=1h0.001s", "`1h0.001s` is over the limit of 1h"),
        ("/?body_size=1000GiB", "`1000GiB` is over the limit of 1GiB"),
        ("/?bytes_per_sec=2GiB", "`2GiB` is over the limit of 1GiB"),
    ] {
        let reply = c.get(path).await;
        assert_eq!(reply.status, 400, "{path}");
        let text = String::from_utf8(reply.body.to_vec()).unwrap();
        assert_eq!(text.trim_end(), needle, "{path}");
    }
    // Below the limits an override is served as before.
    let reply = c.get("/?body_size=1KiB").await;
    assert_eq!((reply.status, reply.body.len()), (200, 1024));
    let stats = c.stats().await;
    assert_eq!(
        stats.requests, 1,
        "refused overrides are not target requests"
    );

    for over in [
        &["target", "--latency", "9999h"][..],
        &["target", "--jitter", "61m"],
        &["target", "--stall-every", "2h", "--stall-for", "1s"],
        &["target", "--body-size", "1000GiB"],
        &["target", "--bytes-per-sec", "2GiB"],
    ] {
        let err = Cli::try_parse_from(over).err().expect("over the limit");
        assert!(
            err.to_string().contains("over the limit of 1"),
            "{over:?}: {err}"
        );
    }
    assert!(Cli::try_parse_from(["target", "--latency", "1h", "--body-size", "1GiB"]).is_ok());
}
