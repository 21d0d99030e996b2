//! Issue 44, items 4 to 6, against a real daemon (a child process) and real hostile peers: a
//! wrong-token flood from one loopback source beside right tokens from another, slow readers
//! that never read their answers, and a target that echoes back everything sloburn sends.

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, BackgroundTarget, Daemon, IDLE, daemon_config, runtime,
    write_config,
};
use sloburn::target::TargetOptions;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request from `source` (a loopback address) on a connection of its own: the status, or
/// 0 when the connection failed. Every step is bounded by 5 s.
async fn call_from(
    source: IpAddr,
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> u16 {
    let limit = Duration::from_secs(5);
    let attempt = async {
        let socket = tokio::net::TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::new(source, 0)).ok()?;
        let mut s = socket.connect(addr).await.ok()?;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf);
        text.split(' ').nth(1)?.parse::<u16>().ok()
    };
    tokio::time::timeout(limit, attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

fn daemon_addr(d: &Daemon) -> SocketAddr {
    d.base.trim_start_matches("http://").parse().unwrap()
}

/// Item 6: ~250 wrong tokens a second from 127.0.0.2 (twice the issue's flood), and meanwhile
/// every right call from 127.0.0.1 (an admin write, the Flagger hook) is served. The flood is
/// limited on its own source (it sees 429s).
#[test]
fn a_wrong_token_flood_from_one_source_never_locks_out_a_right_token_from_another() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let text = daemon_config(
        target.addr,
        &dir.path().join("data"),
        IDLE,
        AVAILABILITY_SLO,
    );
    let d = Daemon::start(&write_config(dir.path(), &text), &["--no-watch"]);
    let addr = daemon_addr(&d);
    let flooder: IpAddr = "127.0.0.2".parse().unwrap();
    let caller: IpAddr = "127.0.0.1".parse().unwrap();
    let hook = r#"{"name":"podinfo","namespace":"test","phase":"Progressing","checksum":"c1","metadata":{"slo":"api-availability","max_burn_rate":"14.4","window":"5m"}}"#;
    let rt = runtime();
    let (flood, right) = rt.block_on(async {
        let started = Instant::now();
        let flood = tokio::spawn(async move {
            let (mut n, mut limited) = (0u64, 0u64);
            let mut tick = tokio::time::interval(Duration::from_millis(4));
            while started.elapsed() < Duration::from_secs(4) && n < 2000 {
                tick.tick().await;
                let code = call_from(flooder, addr, "POST", "/api/reload", Some("guess"), "").await;
                n += 1;
                limited += u64::from(code == 429);
            }
            (n, limited, started.elapsed())
        });
        // Right calls from the other source while the flood runs.
        let mut right = Vec::new();
        tokio::time::sleep(Duration::from_millis(300)).await;
        while started.elapsed() < Duration::from_secs(3) && right.len() < 60 {
            let calls = [
                ("POST", "/api/profiles/idle/pause", ""),
                ("POST", "/api/profiles/idle/resume", ""),
                ("POST", "/api/hooks/flagger", hook),
            ];
            for (method, path, body) in calls {
                let code = call_from(caller, addr, method, path, Some(ADMIN_TOKEN), body).await;
                right.push((path, code));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (flood.await.unwrap(), right)
    });
    let (sent, limited, took) = flood;
    let rate = sent as f64 / took.as_secs_f64();
    eprintln!(
        "flood: {sent} wrong tokens in {took:?} ({rate:.0}/s), {limited} answered 429; right calls: {}",
        right.len()
    );
    assert!(rate >= 125.0, "the flood ran at {rate:.0}/s only");
    assert!(limited > 0, "the flooding source was never limited");
    assert!(right.len() >= 15, "{} right calls", right.len());
    let refused: Vec<_> = right.iter().filter(|(_, c)| *c != 200).collect();
    assert!(
        refused.is_empty(),
        "{} of {} right calls refused: {refused:?}",
        refused.len(),
        right.len()
    );
}
