//! Issue 44, items 2 and 3: hostile peers the test starts on 127.0.0.1, each against the real
//! binary under 1 GiB of address space, with the peak RSS and the time it took printed.
//! A WebSocket server that floods pings and never reads, one that sends frames that never
//! hold `expect`, and a DNS server that answers garbage. Every server loop is bounded (20 s,
//! a count), so a regression fails the test instead of hanging it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::time::Duration;

use crate::support::{Capped, all_output, run_capped, sloburn};

/// How long a hostile server goes on at most.
const SERVER_LIFE: Duration = Duration::from_secs(20);

/// Reads the upgrade request and answers 101; the stream, ready for frames.
fn upgrade(mut s: TcpStream) -> Option<TcpStream> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 << 10 {
        s.read_exact(&mut byte).ok()?;
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let key = text.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("sec-websocket-key")
            .then(|| value.trim().to_string())
    })?;
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n\r\n"
    );
    s.write_all(answer.as_bytes()).ok()?;
    Some(s)
}

/// A WebSocket server that upgrades every connection and then writes `chunk` over and over
/// (never reading), each connection for at most [`SERVER_LIFE`].
fn ws_server(chunk: Vec<u8>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(10_000) {
            let Ok(conn) = conn else { continue };
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let Some(mut s) = upgrade(conn) else { return };
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                let started = std::time::Instant::now();
                while started.elapsed() < SERVER_LIFE {
                    match s.write_all(&chunk) {
                        Ok(()) => {}
                        // The client stopped reading for now: try again.
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => return,
                    }
                }
            });
        }
    });
    addr
}

/// `sloburn run` of a config with one profile: 10 VUs for 2 s against `url`, whose sessions
/// (or probes) time out after `timeout`.
fn run_against(dir: &Path, target: &str, profile: &str) -> (Capped, String) {
    let cfg = dir.join("hostile.yaml");
    std::fs::write(
        &cfg,
        format!("targets:\n  hostile:\n{target}profiles:\n  p:\n    target: hostile\n{profile}"),
    )
    .unwrap();
    let mut cmd = sloburn();
    cmd.arg("run").arg(&cfg);
    let capped = run_capped(&mut cmd, 1 << 30);
    let all = all_output(&capped.out);
    (capped, all)
}

/// The count after `label` in the summary's error set (`  timeout: 17`).
fn error_count(all: &str, label: &str) -> u64 {
    all.lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("{label}: ")))
        .find_map(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

const TEN_VUS_2S: &str = "    executor: constant-vus\n    vus: 10\n    duration: 2s\n";

/// A ping flood from a server that never reads took the client to 1.7 GB at 5 s (the pongs
/// piled up in the write buffer) and held sessions past their timeout. Now the pongs wait in a
/// bounded buffer and every session ends at its 1 s timeout, each a counted `timeout`.
#[test]
fn a_ping_flood_is_bounded_and_the_session_ends_at_its_timeout() {
    let pings: Vec<u8> = [0x89u8, 0x00].repeat(32 << 10);
    let addr = ws_server(pings);
    let dir = tempfile::tempdir().unwrap();
    let target =
        format!("    url: ws://{addr}/\n    body: hello\n    expect: ready\n    timeout: 1s\n");
    let (capped, all) = run_against(dir.path(), &target, TEN_VUS_2S);
    eprintln!("ping flood: {}", capped.figure());
    let timeouts = error_count(&all, "timeout");
    assert!(timeouts >= 10, "every session ends as timeout:\n{all}");
    assert!(capped.peak_rss < 256 << 20, "{}\n{all}", capped.figure());
    // 2 s of load and sessions of at most 1 s: the run ends well before the flood does.
    assert!(capped.took < SERVER_LIFE / 2, "{}", capped.figure());
}

/// Frames that never hold `expect` kept sessions open past their timeout: `run` with 10 VUs
/// never ended, and `serve` called a run with 0 requests passed. Each session now ends at its
/// timeout as `timeout`, and the run ends with its requests counted.
#[test]
fn frames_that_never_match_expect_end_at_the_timeout() {
    // A text frame `nope`, over and over.
    let frames: Vec<u8> = [0x81u8, 0x04, b'n', b'o', b'p', b'e'].repeat(8 << 10);
    let addr = ws_server(frames);
    let dir = tempfile::tempdir().unwrap();
    let target =
        format!("    url: ws://{addr}/\n    body: hello\n    expect: ready\n    timeout: 1s\n");
    let (capped, all) = run_against(dir.path(), &target, TEN_VUS_2S);
    eprintln!("never-matching frames: {}", capped.figure());
    assert!(error_count(&all, "timeout") >= 10, "{all}");
    assert!(!all.contains("passed"), "{all}");
    assert!(capped.peak_rss < 256 << 20, "{}\n{all}", capped.figure());
    assert!(capped.took < SERVER_LIFE / 2, "{}", capped.figure());
}

/// A DNS server that answers every query with garbage: each probe failed as `timeout` after
/// its whole wait. It now fails at once as `body` (the answer broke): three probes of a 3 s
/// timeout take far less than one timeout.
#[test]
fn a_garbage_dns_answer_is_body_at_once_not_a_timeout() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = sock.local_addr().unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let mut buf = [0u8; 4096];
        while started.elapsed() < SERVER_LIFE {
            if let Ok((_, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(b"\x1b[31mnot dns", from);
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let target = format!("    url: dns://{addr}/shop.example?type=A\n    timeout: 3s\n");
    let profile = "    executor: shared-iterations\n    vus: 1\n    iterations: 3\n";
    let (capped, all) = run_against(dir.path(), &target, profile);
    eprintln!("garbage DNS answers: {}", capped.figure());
    assert_eq!(error_count(&all, "body"), 3, "{all}");
    assert_eq!(error_count(&all, "timeout"), 0, "{all}");
    assert!(capped.took < Duration::from_secs(3), "{}", capped.figure());
}

/// A run that measured nothing (every session still open when it ended) was called passed:
/// `serve` ended a 5 s run as passed with 0 requests. With no request finished it is now
/// inconclusive (exit 75), never passed.
#[test]
fn a_run_with_no_request_finished_is_inconclusive_never_passed() {
    let frames: Vec<u8> = [0x81u8, 0x04, b'n', b'o', b'p', b'e'].repeat(8 << 10);
    let addr = ws_server(frames);
    let dir = tempfile::tempdir().unwrap();
    let target =
        format!("    url: ws://{addr}/\n    body: hello\n    expect: ready\n    timeout: 15s\n");
    let profile =
        "    executor: constant-vus\n    vus: 2\n    duration: 1s\n    graceful_stop: 0s\n";
    let (capped, all) = run_against(dir.path(), &target, profile);
    eprintln!("no request finished: {}", capped.figure());
    assert_eq!(capped.out.status.code(), Some(75), "{all}");
    assert!(all.contains("no request finished"), "{all}");
    assert!(capped.took < SERVER_LIFE / 2, "{}", capped.figure());
}

/// `sloburn run --url TARGET` for 1 s at 50/s, pushing to `out` every 200 ms: its stderr.
fn run_pushing(target: SocketAddr, out: &str) -> (Capped, String) {
    let mut cmd = sloburn();
    cmd.args(["run", "--url", &format!("http://{target}/")])
        .args(["--rate", "50/s", "--duration", "1s", "--out", out]);
    let capped = run_capped(&mut cmd, 1 << 30);
    let stderr = String::from_utf8_lossy(&capped.out.stderr).into_owned();
    (capped, stderr)
}

/// The `NAME: dropped because …` line.
fn why_dropped<'a>(stderr: &'a str, name: &str) -> &'a str {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: dropped because ")))
        .unwrap_or_else(|| panic!("no reason for {name}'s drops: {stderr}"))
}

/// Item 15: remote write and OTLP printed `0 sent, N dropped` with no reason. A receiver that
/// refuses every push with 400 and a message (and an ESC in it), and one that is not there:
/// each drop line now names the status and the start of the answer, or the refused connection,
/// with the pushes and samples each reason cost.
#[test]
fn pushes_dropped_say_why() {
    let target = crate::support::serve_on_thread(axum::Router::new().fallback(|| async { "ok" }));
    let refusing = crate::support::serve_on_thread(axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::BAD_REQUEST,
            format!("out of order sample\u{1b}[31m{}", "x".repeat(100_000)),
        )
    }));
    for name in ["prometheus-rw", "opentelemetry"] {
        let out = format!(
            "{name}=http://{}/api/v1/write?interval=200ms",
            refusing.addr
        );
        let (capped, stderr) = run_pushing(target.addr, &out);
        eprintln!("{name} to a refusing receiver: {}", capped.figure());
        let why = why_dropped(&stderr, name);
        assert!(why.starts_with("HTTP 400: \"out of order sample"), "{why}");
        assert!(
            why.contains("pushes, ") && why.contains(" samples)"),
            "{why}"
        );
        assert!(why.len() < 400 && !why.contains('\u{1b}'), "{why}");

        let down = format!(
            "{name}=http://127.0.0.1:{}/?interval=200ms",
            crate::support::free_port()
        );
        let (_, stderr) = run_pushing(target.addr, &down);
        assert!(
            why_dropped(&stderr, name).starts_with("connection refused ("),
            "{stderr}"
        );
    }
}
