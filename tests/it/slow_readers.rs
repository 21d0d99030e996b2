//! Issue 44 item 5, against a real daemon (a child process under an address-space cap) and
//! real hostile peers: 2,000 sockets ask for a 1.5 MB `/metrics` and never read their answers.
//! `/healthz` answers throughout, memory stays within a bound computed from what the test
//! measured before the crowd came, and the crowd's connections are closed by the write
//! deadline.

use crate::support::{BackgroundTarget, Daemon, IDLE, daemon_config, runtime, write_config};
use sloburn::target::TargetOptions;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// A line of `/proc/PID/status` (kB).
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The daemon's open descriptors.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// A request on a fresh connection, every step bounded by `limit`: the answer's status line
/// and head, or `None`.
fn ask(addr: SocketAddr, path: &str, limit: Duration) -> Option<(u16, String, usize)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, limit).ok()?;
    s.set_read_timeout(Some(limit)).ok()?;
    s.set_write_timeout(Some(limit)).ok()?;
    let started = Instant::now();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    while started.elapsed() < limit {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => return None,
        }
    }
    let text = String::from_utf8_lossy(&buf[..buf.len().min(512)]).to_string();
    let code = text.split(' ').nth(1)?.parse().ok()?;
    Some((code, text, buf.len()))
}

/// What the daemon answered a slow reader, from the bytes waiting in its socket.
fn answered(s: &tokio::net::TcpStream) -> &'static str {
    let mut head = [0u8; 12];
    match s.try_read(&mut head) {
        Ok(12) if &head == b"HTTP/1.1 200" => "200 (then cut)",
        Ok(12) if &head == b"HTTP/1.1 503" => "503",
        Ok(0) => "closed unanswered",
        Ok(_) => "other",
        Err(_) => "nothing yet",
    }
}

/// SLOs enough for a `/metrics` of about 1.5 MB.
const SLOS: usize = 1200;
/// The slow readers.
const CROWD: usize = 2000;
/// The daemon's address space (`RLIMIT_AS`): a daemon that grew without bound would abort
/// inside it instead of taking the machine.
const CAP: u64 = 1 << 30;

/// 2,000 sockets (a 4 KiB receive buffer each) ask for `/metrics` (about 1.5 MB: 1,200 SLOs)
/// and never read. Meanwhile `/healthz` answers nearly every probe (a loaded machine may lose
/// one in 20), a real scrape is answered whole or 503 with `Retry-After` (never left hanging),
/// the daemon's RSS rises by less than 64 MB plus 16 expositions over what it had after a
/// first scrape (the issue saw 35 → 684 MB), and the crowd's connections are all closed
/// within the wait for an encoding and the write deadline. Prints the peak RSS, the probes answered and the times.
#[test]
fn slow_readers_never_hold_the_server_nor_its_memory() {
    assert!(
        crate::support::raise_fd_limit() >= (CROWD as u64) * 2 + 1024,
        "the test needs {CROWD} sockets on each side"
    );
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let slos: String = (0..SLOS)
        .map(|i| format!("  avail-{i:03}:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 1d\n"))
        .collect();
    let text = daemon_config(target.addr, &dir.path().join("data"), IDLE, &slos);
    let mut cmd = Daemon::command(&write_config(dir.path(), &text), &["--no-watch"]);
    crate::support::limit_address_space(&mut cmd, CAP);
    let mut d = Daemon::spawn(cmd);
    let addr: SocketAddr = d.base.trim_start_matches("http://").parse().unwrap();
    let pid = d.child.id();
    let (code, _, size) = ask(addr, "/metrics", Duration::from_secs(30)).expect("a first scrape");
    assert_eq!(code, 200);
    assert!(size > 1_400_000, "/metrics is {size} B only");
    let (rss0, fds0) = (status_kb(pid, "VmRSS:"), fds(pid));
    let rt = runtime();
    let started = Instant::now();
    let crowd = rt.block_on(slow_readers(addr));
    let opened = started.elapsed();
    // Probes, the daemon's memory and a real scrape a second, for the deadline and 5 s more.
    let watch = sloburn::server::DAEMON_WRITE_TIMEOUT + Duration::from_secs(5);
    let (mut probes, mut healthy, mut peak) = (0u32, 0u32, status_kb(pid, "VmRSS:"));
    let mut scrapes = Vec::new();
    while started.elapsed() < watch && probes < 300 {
        probes += 1;
        healthy += u32::from(matches!(
            ask(addr, "/healthz", Duration::from_secs(2)),
            Some((200, _, _))
        ));
        peak = peak.max(status_kb(pid, "VmRSS:"));
        if probes % 10 == 0 {
            scrapes.push(ask(addr, "/metrics", Duration::from_secs(12)));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let watched = started.elapsed();
    let fds_watched = fds(pid);
    // The crowd's connections closed: answered 503 (and closed), given way, or at the write
    // deadline of an answer begun at most 5 s (the wait for an encoding) after its request.
    let fds_after = crate::support::eventually(Duration::from_secs(15), || {
        let n = fds(pid);
        (n <= fds0 + 16).then_some(n)
    })
    .unwrap_or_else(|| fds(pid));
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for s in &crowd {
        *seen.entry(answered(s)).or_default() += 1;
    }
    let scraped: Vec<String> = scrapes
        .iter()
        .map(|s| match s {
            Some((code, _, len)) => format!("{code} ({len} B)"),
            None => "no answer".into(),
        })
        .collect();
    let hwm = status_kb(pid, "VmHWM:");
    eprintln!(
        "slow readers: {} sockets opened in {opened:.1?}, /metrics {size} B; /healthz {healthy}/{probes} over {watched:.1?}; RSS {} MB after a scrape, peak {} MB (VmHWM {} MB, VmPeak {} MB); fds {fds0} before, {fds_watched} at the deadline and 5 s, {fds_after} once closed ({:.1?}); the crowd saw {seen:?}; scrapes meanwhile: {scraped:?}",
        crowd.len(),
        rss0 / 1024,
        peak / 1024,
        hwm / 1024,
        status_kb(pid, "VmPeak:") / 1024,
        started.elapsed(),
    );
    assert!(crowd.len() >= CROWD * 9 / 10, "{} sockets", crowd.len());
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon died: {:?}",
        d.logs
            .lock()
            .unwrap()
            .iter()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
    );
    assert!(
        healthy >= probes - probes / 20,
        "/healthz answered {healthy} of {probes} while slow readers held sockets"
    );
    let bound = rss0 + 64 * 1024 + 16 * size as u64 / 1024;
    assert!(
        hwm.max(peak) < bound,
        "RSS rose from {} MB to {} MB (bound {} MB)",
        rss0 / 1024,
        hwm.max(peak) / 1024,
        bound / 1024
    );
    for s in scrapes.iter().flatten() {
        let (code, head, len) = s;
        let whole = *code == 200 && *len > size / 2;
        let refused = *code == 503 && head.to_ascii_lowercase().contains("retry-after:");
        assert!(
            whole || refused,
            "a scrape meanwhile: {code}, {len} B: {head}"
        );
    }
    assert!(
        fds_after < fds0 + 64,
        "{fds_after} descriptors after the deadline ({fds0} before): the slow readers still hold slots"
    );
    // The crowd gone, a scrape is whole again.
    drop(crowd);
    let after = crate::support::eventually(Duration::from_secs(20), || {
        ask(addr, "/metrics", Duration::from_secs(12))
            .filter(|(code, _, len)| *code == 200 && *len > size / 2)
    });
    assert!(after.is_some(), "no whole scrape after the crowd left");
}

/// The crowd: [`CROWD`] connections with a 4 KiB receive buffer, each asking for `/metrics`
/// and reading nothing. Every connect is bounded by 2 s.
async fn slow_readers(addr: SocketAddr) -> Vec<tokio::net::TcpStream> {
    let mut held = Vec::new();
    for _ in 0..CROWD {
        let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
            break;
        };
        let _ = socket.set_recv_buffer_size(4096);
        let Ok(Ok(mut s)) =
            tokio::time::timeout(Duration::from_secs(2), socket.connect(addr)).await
        else {
            continue;
        };
        let _ = s
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
            .await;
        held.push(s);
    }
    held
}
