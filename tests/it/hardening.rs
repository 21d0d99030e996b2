//! The daemon under hostile clients and rough signals: idle sockets that would use up its file
//! descriptors, a flood of wrong tokens, `/readyz` details under `protect_reads`, and a second
//! SIGTERM that must still flush the SLO state; and the server limits as config.

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, BackgroundTarget, Daemon, IDLE, daemon_config, eventually,
    period_events, raise_fd_limit, request, runtime, serve_in_process, test_env, write_config,
};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// `daemon_config` with extra lines at the top of its `server:` section.
fn with_server(config: String, lines: &str) -> String {
    config.replacen("server:\n", &format!("server:\n{lines}"), 1)
}

/// A target of its own and a daemon config (in a new directory) with the idle profile and an
/// availability SLO: a daemon that serves and never sends load by itself.
fn idle_daemon_config() -> (BackgroundTarget, tempfile::TempDir, String) {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let text = daemon_config(
        target.addr,
        &dir.path().join("data"),
        IDLE,
        AVAILABILITY_SLO,
    );
    (target, dir, text)
}

/// `GET path` over a fresh connection with `Connection: close`, every step bounded by
/// `limit`: the status line, or the error.
fn raw_get(addr: SocketAddr, path: &str, limit: Duration) -> Result<String, String> {
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_write_timeout(Some(limit)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("write: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().next().unwrap_or("").to_string())
}

#[test]
fn idle_connections_do_not_lock_out_metrics() {
    assert!(
        raise_fd_limit() >= 1024,
        "the test needs 400 sockets of its own"
    );
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let text = with_server(
        daemon_config(
            target.addr,
            &dir.path().join("data"),
            IDLE,
            AVAILABILITY_SLO,
        ),
        "  header_timeout: 2s\n",
    );
    let path = write_config(dir.path(), &text);
    let d = Daemon::start_with_fd_limit(&path, &["--no-watch"], 256);
    let addr: SocketAddr = d.base.trim_start_matches("http://").parse().unwrap();

    // 400 connections that never send a byte: more than the daemon has descriptors.
    let mut idle = Vec::new();
    let opening = Instant::now();
    for _ in 0..400 {
        if opening.elapsed() > Duration::from_secs(15) {
            break;
        }
        if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            idle.push(s);
        }
    }
    assert!(idle.len() >= 300, "only {} connections opened", idle.len());
    // Past the header timeout (2 s, counted from the last connection's accept) with a margin,
    // the idle ones are closed and `/metrics` answers quickly although the test still holds
    // every socket open. (Connecting takes a few seconds itself: some SYNs are retried.)
    std::thread::sleep(Duration::from_secs(4));
    let asked = Instant::now();
    let status = raw_get(addr, "/metrics", Duration::from_secs(2));
    assert_eq!(
        status.as_deref(),
        Ok("HTTP/1.1 200 OK"),
        "after {:?}; logs: {:?}",
        asked.elapsed(),
        d.logs
            .lock()
            .unwrap()
            .iter()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
    );
    assert!(asked.elapsed() < Duration::from_secs(2));
    // The daemon logs a full server at most once per period, never once per connection.
    let warnings = d
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("HTTP server:"))
        .count();
    assert!(warnings <= 4, "{warnings} warn lines for 400 connections");
    drop(idle);
}

#[test]
fn wrong_tokens_are_counted_and_limited() {
    let (_target, dir, text) = idle_daemon_config();
    let path = write_config(dir.path(), &text);
    let d = Daemon::start(&path, &["--no-watch"]);
    let url = format!("{}/api/reload", d.base);
    let rt = runtime();
    let (mut wrong, mut limited) = (0u64, 0u64);
    let started = Instant::now();
    // Wrong tokens as fast as one client sends them, until the daemon pushes back.
    for _ in 0..500 {
        if started.elapsed() > Duration::from_secs(10) {
            break;
        }
        let (code, body) = rt.block_on(request("POST", &url, Some("guess")));
        match code {
            401 => wrong += 1,
            429 => {
                limited += 1;
                assert!(body.contains("too many wrong bearer tokens"), "{body}");
                if limited >= 20 {
                    break;
                }
            }
            other => panic!("{other}: {body}"),
        }
    }
    assert!(limited > 0, "{wrong} wrong tokens and never a 429");
    // At most 20 wrong tokens are checked per second.
    let seconds = started.elapsed().as_secs_f64().ceil() as u64 + 1;
    assert!(
        wrong <= 20 * seconds,
        "{wrong} tokens checked in {seconds} s"
    );

    // A second later the right token works again.
    std::thread::sleep(Duration::from_millis(1100));
    let (code, body) = rt.block_on(request("POST", &url, Some(ADMIN_TOKEN)));
    assert_eq!(code, 200, "{body}");

    // Every wrong token is in the log, in at most a line a second.
    let logged = eventually(Duration::from_secs(5), || {
        let lines: Vec<Value> = d
            .logs
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("wrong bearer token"))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let total: u64 = lines
            .iter()
            .filter_map(|v| v["fields"]["count"].as_u64().or(v["count"].as_u64()))
            .sum();
        (total == wrong).then_some(lines.len() as u64)
    })
    .unwrap_or_else(|| {
        panic!(
            "{wrong} wrong tokens not all logged: {:?}",
            d.logs.lock().unwrap()
        )
    });
    let seconds = started.elapsed().as_secs_f64().ceil() as u64 + 1;
    assert!(logged <= seconds, "{logged} log lines in {seconds} s");
}

#[test]
fn readyz_details_need_the_token_under_protect_reads() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // A corrupt store: not ready, and the reason names the store's path.
    std::fs::write(data.join("sloburn.db"), b"not a database\n".repeat(100)).unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let text = with_server(
        daemon_config(unused, &data, IDLE, AVAILABILITY_SLO),
        "  protect_reads: true\n",
    );
    runtime().block_on(async {
        let d = serve_in_process(&text, dir.path()).await;
        let base = format!("http://{}", d.addr);
        let secret = data.display().to_string();

        let (code, body) = request("GET", &format!("{base}/readyz"), None).await;
        assert_eq!((code, body.as_str()), (503, "not ready\n"));
        let (code, body) = request("GET", &format!("{base}/readyz"), Some("wrong")).await;
        assert_eq!((code, body.as_str()), (503, "not ready\n"));
        let (code, body) = request("GET", &format!("{base}/readyz"), Some(ADMIN_TOKEN)).await;
        assert_eq!(code, 503);
        assert!(body.contains("corrupt") && body.contains(&secret), "{body}");
        // `/metrics` and `/healthz` stay open.
        let (code, _) = request("GET", &format!("{base}/metrics"), None).await;
        assert_eq!(code, 200);
        let (code, body) = request("GET", &format!("{base}/healthz"), None).await;
        assert_eq!((code, body.as_str()), (200, "ok\n"));
        d.shutdown().await;
    });
}

#[test]
fn a_double_sigterm_flushes_before_exit() {
    // Slow answers keep requests in flight, so the first SIGTERM is still draining them when
    // the second one comes.
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(1500),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let steady = "  steady:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 100/s\n    duration: 1h\n    max_vus: 400\n";
    let config = |profile: &str| {
        daemon_config(target.addr, &data, profile, AVAILABILITY_SLO)
            .replace("flush_interval: 1s", "flush_interval: 10s")
    };
    let path = write_config(dir.path(), &config(steady));
    let mut d = Daemon::start(&path, &["--no-watch"]);
    let started = Instant::now();
    let seen = d.slo_events_at_least(200, Duration::from_secs(8));
    // Well before the first periodic flush (10 s): nothing is in the store yet.
    assert!(started.elapsed() < Duration::from_secs(9));
    d.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(100));
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(5)), Some(130));
    let logs = d.logs.lock().unwrap().join("\n");
    drop(d);

    let path = write_config(dir.path(), &config(IDLE));
    let d2 = Daemon::start(&path, &["--no-watch"]);
    let restored = period_events(&d2);
    assert!(
        restored >= seen,
        "restored {restored}, counted {seen} before the signals"
    );
    assert!(logs.contains("SLO state flushed"), "{logs}");
}

#[test]
fn server_limits_out_of_range_are_config_errors_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let text = with_server(
        daemon_config(unused, &dir.path().join("data"), IDLE, AVAILABILITY_SLO),
        "  header_timeout: 1ms\n  max_connections: 0\n",
    );
    let err = match sloburn::config::from_str(&text, "t.yaml", dir.path(), &test_env()) {
        Ok(_) => panic!("accepted header_timeout 1ms and max_connections 0"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("t.yaml:2:19") && err.contains("at least 100ms"),
        "{err}"
    );
    assert!(
        err.contains("t.yaml:3:20") && err.contains("between 1 and"),
        "{err}"
    );
}

/// Out of descriptors, a lookup that needs a nameserver failed as `dns`: a local limit charged
/// to the name. The resolver runs in a child of this test binary (this test's twin below) whose
/// descriptors are used up; nothing else in this process is touched.
#[test]
fn dns_lookup_out_of_descriptors_is_local_fd_exhausted() {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "hardening::dns_lookup_out_of_descriptors_child",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ])
    .env(FD_CHILD, "1");
    crate::support::with_nofile(&mut cmd, 64, 64);
    let out = cmd.output().unwrap();
    let all = crate::support::all_output(&out);
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("dns child: done") && all.contains("1 passed"),
        "{all}"
    );
}

/// Set by the test above for the child half of it.
const FD_CHILD: &str = "SLOBURN_TEST_FD_CHILD";

#[test]
#[ignore = "the child half of dns_lookup_out_of_descriptors_is_local_fd_exhausted"]
fn dns_lookup_out_of_descriptors_child() {
    use sloburn::http::{
        Client, ClientOptions, DnsError, ErrorClass, HostsFile, RequestSpec, Resolver,
        ResolverConfig,
    };
    if std::env::var_os(FD_CHILD).is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // A nameserver on loopback that never answers: with descriptors to spare a lookup
        // times out, which is `dns`.
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let resolver = std::sync::Arc::new(Resolver::new(
            ResolverConfig {
                nameservers: vec![silent.local_addr().unwrap()],
                search: vec![],
                ndots: 1,
                timeout: Duration::from_millis(200),
                attempts: 1,
            },
            HostsFile::default(),
        ));
        let client = Client::new(ClientOptions::default(), resolver.clone());
        let req = RequestSpec {
            method: http::Method::GET,
            uri: "http://api.test:9/".parse().unwrap(),
            headers: http::HeaderMap::new(),
            body: bytes::Bytes::new(),
        };
        let before = client.conn().send(&req).await;
        assert_eq!(before.error, Some(ErrorClass::Dns), "{before:?}");

        let mut held = Vec::new();
        let full = loop {
            match std::fs::File::open("/dev/null") {
                Ok(f) if held.len() < 10_000 => held.push(f),
                Ok(_) => panic!("the fd limit of 64 did not hold"),
                Err(e) => break e,
            }
        };
        assert_eq!(full.raw_os_error(), Some(libc::EMFILE), "{full}");
        let err = resolver.lookup("api.test").await.unwrap_err();
        assert!(matches!(err, DnsError::LocalFdExhausted), "{err}");
        let after = client.conn().send(&req).await;
        assert_eq!(after.error, Some(ErrorClass::LocalFdExhausted), "{after:?}");
        drop(held);
    });
    println!("dns child: done");
}

/// Local errors are never SLO events, so `/readyz` is where they show beside `/metrics`:
/// counts by class since start, as a detail (behind the token under `protect_reads`). And a
/// refused token is counted on `/metrics`; a probe without one is not.
#[test]
fn readyz_shows_local_errors_and_refused_tokens_are_counted() {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(200),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    // 120 VUs, a new connection per request, at 64 descriptors: most cannot get a socket.
    let burst = "  burst:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-vus\n    vus: 120\n    duration: 2s\n";
    let text = with_server(
        daemon_config(
            target.addr,
            &dir.path().join("data"),
            burst,
            AVAILABILITY_SLO,
        ),
        "  protect_reads: true\n",
    )
    .replace("    checks:", "    keep_alive: false\n    checks:");
    let path = write_config(dir.path(), &text);
    let d = Daemon::start_with_fd_limit(&path, &["--no-watch"], 64);
    let metric = |name: &str| crate::support::metric_sum(&d.metrics(), name);
    eventually(Duration::from_secs(20), || {
        (metric("sloburn_runs_total{profile=\"burst\"") >= 1.0).then_some(())
    })
    .expect("the burst run never finished");

    let base = &d.base;
    let rt = runtime();
    let (code, body) = rt.block_on(request("GET", &format!("{base}/readyz"), None));
    assert_eq!((code, body.as_str()), (200, "ready\n"));
    let (code, body) = rt.block_on(request("GET", &format!("{base}/readyz"), Some(ADMIN_TOKEN)));
    assert_eq!(code, 200, "{body}");
    let line = body
        .lines()
        .find_map(|l| l.strip_prefix("local errors since start: "))
        .unwrap_or_else(|| panic!("{body}"));
    let fd: f64 = line
        .split(", ")
        .find_map(|c| c.strip_prefix("local_fd_exhausted "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{body}"));
    assert!(fd > 0.0, "{body}");
    assert_eq!(
        fd,
        metric(
            "sloburn_local_errors_total{target=\"api\",profile=\"burst\",class=\"local_fd_exhausted\""
        ),
        "{body}"
    );
    // The runtime's tasks are exposed (the soak reads them): at least the server and the tick.
    assert!(metric("sloburn_runtime_alive_tasks") >= 2.0);
    // Not one of them is an SLO event.
    assert_eq!(
        metric("sloburn_slo_events_total{slo=\"api-availability\",result=\"bad\""),
        0.0
    );

    for token in [None, Some("guess"), Some("guess-again")] {
        let (code, _) = rt.block_on(request("GET", &format!("{base}/api/runs"), token));
        assert_eq!(code, 401);
    }
    let refused = |reason: &str| {
        metric(&format!(
            "sloburn_admin_auth_failures_total{{reason=\"{reason}\""
        ))
    };
    assert_eq!((refused("missing"), refused("wrong")), (1.0, 2.0));
}

/// `vus: 1000000` passed `check` and `run` sent nothing useful: `run` refuses, as `check`
/// does, VUs that cannot all hold a connection under the open-file limit, before a request is
/// sent. Flags exit 2, a config's profile 78 with `check`'s line.
#[test]
fn run_refuses_vus_beyond_the_fd_limit() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let url = format!("http://{}/", target.addr);
    let limited = |cmd: &mut std::process::Command| {
        crate::support::with_nofile(cmd, 100, 100);
        cmd.output().unwrap()
    };

    let out = limited(crate::support::sloburn().args([
        "run",
        "--url",
        &url,
        "--vus",
        "60",
        "--duration",
        "2s",
    ]));
    let all = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(2), "{all}");
    assert!(
        all.contains("up to 60 VUs need 60 connections")
            && all.contains("open-file limit is 100")
            && all.contains("--ignore-fd-limit"),
        "{all}"
    );

    let dir = tempfile::tempdir().unwrap();
    let burst =
        "  burst:\n    target: api\n    executor: constant-vus\n    vus: 60\n    duration: 2s\n";
    let path = write_config(
        dir.path(),
        &daemon_config(
            target.addr,
            &dir.path().join("data"),
            burst,
            AVAILABILITY_SLO,
        ),
    );
    let out = limited(
        crate::support::sloburn()
            .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
            .arg("run")
            .arg(&path),
    );
    let all = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{all}");
    let line = format!("{}: profiles.burst: up to 60 VUs", path.display());
    assert!(all.contains(&line), "{all}");
    let out = limited(
        crate::support::sloburn()
            .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
            .arg("check")
            .arg(&path),
    );
    let all = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{all}");
    assert!(all.contains(&line), "{all}");
    assert_eq!(target.stats().requests, 0, "a refused run sent requests");
    // 36 VUs fit 100 descriptors with 64 kept for sloburn: that run goes ahead.
    let out = limited(crate::support::sloburn().args([
        "run",
        "--url",
        &url,
        "--vus",
        "36",
        "--duration",
        "1s",
        "--quiet",
    ]));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::all_output(&out)
    );
    assert!(target.stats().requests > 0);
}

/// The alias bomb written over the live config killed `serve` (exit 134) on hot reload. Under
/// an address space of 512 MB (a bound on expansion, not a timeout) the daemon rejects it,
/// from the file watch and from `POST /api/reload`, counts the failures and keeps serving.
#[test]
fn alias_bomb_over_the_live_config_is_rejected_and_the_daemon_keeps_running() {
    let (_target, dir, text) = idle_daemon_config();
    let path = write_config(dir.path(), &text);
    let mut cmd = Daemon::command(&path, &[]);
    crate::support::limit_address_space(&mut cmd, 512 << 20);
    let mut d = Daemon::spawn(cmd);
    let failures = |d: &Daemon| {
        crate::support::metric_sum(
            &d.metrics(),
            "sloburn_config_reloads_total{result=\"failure\"",
        )
    };
    assert_eq!(failures(&d), 0.0);

    let bomb =
        std::fs::read_to_string(crate::support::root().join("tests/it/fuzz/alias_bomb.yaml"))
            .unwrap();
    assert!(bomb.len() < 600);
    write_config(dir.path(), &bomb);
    // The watch polls every 2 s.
    eventually(Duration::from_secs(10), || {
        (failures(&d) >= 1.0).then_some(())
    })
    .expect("the watch never rejected the bomb");
    let rt = runtime();
    let (code, body) = rt.block_on(request(
        "POST",
        &format!("{}/api/reload", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 422, "{body}");
    assert!(
        body.contains("sloburn.yaml:4:45") && body.contains("aliases"),
        "{body}"
    );
    assert!(failures(&d) >= 2.0);
    assert_eq!(d.child.try_wait().unwrap(), None, "the daemon died");
    // Still serving under the old config, and a good config is taken again.
    let (code, _) = crate::support::get_blocking(&format!("{}/metrics", d.base));
    assert_eq!(code, 200);
    write_config(dir.path(), &text.replace("vus: 1\n", "vus: 2\n"));
    let (code, body) = rt.block_on(request(
        "POST",
        &format!("{}/api/reload", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 200, "{body}");
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(10)), Some(0));
}

/// Sockets that hold the daemon's server: `n` connections that each send `opening` (nothing,
/// or half a request head) and are opened again whenever the daemon closes them, from a thread
/// of their own, until `stop` (or 120 s).
fn hold_sockets(
    addr: SocketAddr,
    n: usize,
    opening: &'static [u8],
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<(usize, u64)> {
    use std::sync::atomic::Ordering::Relaxed;
    let open = move || -> Option<TcpStream> {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
        s.write_all(opening).ok()?;
        s.set_nonblocking(true).ok()?;
        Some(s)
    };
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut held: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
        let mut reopened = 0;
        let mut buf = [0u8; 512];
        while !stop.load(Relaxed) && started.elapsed() < Duration::from_secs(120) {
            for slot in held.iter_mut() {
                let alive = match slot {
                    Some(s) => match s.read(&mut buf) {
                        Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                        // Closed, or answered (a timeout's 408): open another.
                        Ok(_) => false,
                    },
                    None => false,
                };
                if !alive {
                    *slot = open();
                    reopened += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (held.iter().filter(|s| s.is_some()).count(), reopened)
    })
}

/// `GET path` over a fresh connection with `Connection: close`, every step bounded by 2 s: the
/// status line, or where it failed, with the time each step took.
fn timed_get(addr: SocketAddr, path: &str) -> (Result<String, String>, String) {
    let limit = Duration::from_secs(2);
    let t0 = Instant::now();
    let mut s = match TcpStream::connect_timeout(&addr, limit) {
        Ok(s) => s,
        Err(e) => return (Err(format!("connect: {e}")), format!("{:?}", t0.elapsed())),
    };
    let connected = t0.elapsed();
    s.set_read_timeout(Some(limit)).unwrap();
    s.set_nodelay(true).unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    if let Err(e) = s.write_all(head.as_bytes()) {
        return (Err(format!("write: {e}")), format!("{connected:?}"));
    }
    let mut first = [0u8; 1];
    let answered = match s.read_exact(&mut first) {
        Ok(()) => t0.elapsed(),
        Err(e) => return (Err(format!("read: {e}")), format!("{connected:?}")),
    };
    let mut rest = Vec::new();
    let read = s.read_to_end(&mut rest).map_err(|e| format!("read: {e}"));
    let steps = format!(
        "connected {connected:?}, first byte {answered:?}, end {:?}",
        t0.elapsed()
    );
    let text = String::from_utf8_lossy(&first).into_owned() + &String::from_utf8_lossy(&rest);
    (
        read.map(|_| text.lines().next().unwrap_or("").to_string()),
        steps,
    )
}

/// `/metrics` and `/healthz` 50 times each over fresh connections: the slowest answer, and
/// every failure (a status other than 200, or no answer within `limit`).
fn probe_50(addr: SocketAddr, limit: Duration) -> (Duration, Vec<String>) {
    let mut slowest = Duration::ZERO;
    let mut failures = Vec::new();
    for i in 0..50 {
        for path in ["/metrics", "/healthz"] {
            let asked = Instant::now();
            let (status, steps) = timed_get(addr, path);
            let took = asked.elapsed();
            slowest = slowest.max(took);
            if status.as_deref() != Ok("HTTP/1.1 200 OK") || took > limit {
                failures.push(format!("#{i} {path}: {status:?} ({steps})"));
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (slowest, failures)
}

/// How long an answer may take beside the held sockets: ten times the slowest of 100 asked of
/// the same daemon on this machine just before, with none held (a few ms idle), and at least
/// 500 ms (one loaded-machine stall of the probing thread, beside 2,600 sockets it reads every
/// 100 ms); at most the 2 s each step of `timed_get` waits. A daemon shut out by the sockets
/// does not answer at all (issue 30: 20 of 20 failed), so the bound only needs to be finite.
fn limit_beside_sockets(addr: SocketAddr) -> Duration {
    let (slowest, failures) = probe_50(addr, Duration::from_secs(2));
    assert!(failures.is_empty(), "with no socket held: {failures:#?}");
    let limit = (slowest * 10).clamp(Duration::from_millis(500), Duration::from_secs(2));
    eprintln!("no socket held: slowest answer {slowest:?}; the bound beside them {limit:?}");
    limit
}

/// Issue 30, item 4: 512 sockets that never sent a byte kept `/metrics` failing 20 of 20
/// times, and 2,000 shut out `/healthz` too. Silent sockets now wait apart from the server's
/// slots, and half-sent heads give way to a connection that sends a whole request: with 2,000
/// silent sockets held open (and reopened when closed), then 600 half-sent heads beside them,
/// both answer 50 of 50, each within ten times the slowest answer with no socket held (at least
/// 500 ms; 100 ms held idle, but not beside a build on 2 cores).
#[test]
fn thousands_of_idle_sockets_never_shut_out_the_scrape_or_the_probes() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let _heavy = crate::load::heavy();
    assert!(raise_fd_limit() >= 8192, "the test holds 2,600 sockets");
    let (_target, dir, text) = idle_daemon_config();
    let path = write_config(dir.path(), &text);
    let d = Daemon::start(&path, &["--no-watch"]);
    let addr: SocketAddr = d.base.trim_start_matches("http://").parse().unwrap();
    let limit = limit_beside_sockets(addr);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let silent = hold_sockets(addr, 2_000, b"", stop.clone());
    // Let the 2,000 connect (each is accepted before the next is opened).
    std::thread::sleep(Duration::from_secs(2));
    let (slowest, failures) = probe_50(addr, limit);
    eprintln!("2,000 silent sockets: slowest answer {slowest:?}");
    assert!(
        failures.is_empty(),
        "with 2,000 silent sockets: {failures:#?}"
    );
    // Half-sent heads fill every slot (512): each whole request closes the one waiting longest.
    let half = hold_sockets(
        addr,
        600,
        b"GET /metrics HTTP/1.1\r\nHost: t\r\n",
        stop.clone(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let (slowest, failures) = probe_50(addr, limit);
    eprintln!("and 600 half-sent heads: slowest answer {slowest:?}");
    assert!(
        failures.is_empty(),
        "with half-sent heads too: {failures:#?}"
    );
    stop.store(true, Relaxed);
    let (held, reopened) = silent.join().unwrap();
    eprintln!("silent sockets: {held} held at the end, {reopened} reopened");
    assert!(
        held >= 1_900,
        "the 2,000 silent sockets were held open: {held}"
    );
    let (held, reopened) = half.join().unwrap();
    eprintln!("half-sent heads: {held} held at the end, {reopened} reopened");
    assert!(
        reopened > 0,
        "600 half-sent heads over 512 slots: some gave way"
    );
}
