//! `run --shard i/N --collect URL`'s collector: with a token, a join or a share that lacks it
//! (or brings a wrong one) is refused 401 and the run's verdict comes from the rightful shards
//! alone; without one it warns, once, that it is unauthenticated. It serves on the daemon's
//! server, so sockets that never send a byte, heads that never end and stalled bodies cannot
//! lock the shards out, even past its descriptors. One share per shard, only figures its plan
//! can make; a share stopped by SIGTERM makes the run inconclusive (75), named with what it
//! never ran; a start 10 years ahead is refused (issues 43 and 44).

use crate::support::{BackgroundTarget, eventually, free_port, sloburn, with_nofile};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "collect-4f1d0c7e9b";

/// One `sloburn run` process of a collected run, its output in files.
struct Shard {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Shard {
    /// `sloburn run` of shard `i`/3 against `target`, collected on 127.0.0.1:`port`.
    fn command(dir: &Path, i: u32, port: u16, target: SocketAddr) -> Command {
        Shard::command_at(dir, i, port, target, 30, "2s")
    }

    /// The same at `rate` a second for `duration`.
    fn command_at(
        dir: &Path,
        i: u32,
        port: u16,
        target: SocketAddr,
        rate: u32,
        duration: &str,
    ) -> Command {
        let mut cmd = sloburn();
        cmd.env_remove("SLOBURN_COLLECT_TOKEN").args([
            "run".to_string(),
            "--url".into(),
            format!("http://{target}/"),
            "--rate".into(),
            format!("{rate}/s"),
            "--duration".into(),
            duration.into(),
            "--max-vus".into(),
            "10".into(),
            "--shard".into(),
            format!("{i}/3"),
            "--collect".into(),
            format!("http://127.0.0.1:{port}"),
            "--collect-listen".into(),
            format!("127.0.0.1:{port}"),
            "--collect-timeout".into(),
            "5s".into(),
            "--summary-export".into(),
            dir.join(format!("summary-{i}.json")).display().to_string(),
            "--quiet".into(),
        ]);
        cmd
    }

    fn start(dir: &Path, i: u32, mut cmd: Command) -> Shard {
        let out = dir.join(format!("out-{i}"));
        let err = dir.join(format!("err-{i}"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Shard { child, out, err }
    }

    /// The exit code, within 60 s (killed past it).
    fn code(&mut self) -> i32 {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("still running after 60 s: {}", self.stderr());
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST path` with `body` and the `Authorization` header `auth` on a connection of its own:
/// the status code, or why there is none.
fn post(port: u16, path: &str, auth: Option<&str>, body: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: c\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {answer:?}"))
}

/// The merged summary-export of shard 0.
fn requests_of_the_whole_run(dir: &Path) -> u64 {
    let export: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary-0.json")).unwrap())
            .unwrap();
    export["metrics"]["http_reqs"]["count"].as_u64().unwrap()
}

#[test]
fn a_join_or_a_share_without_the_collect_token_is_refused_and_the_rightful_shards_give_the_verdict()
{
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The three ways to give the token: a reference on the command line, the environment
    // variable, the value itself.
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    cmd.env("COLLECT_TEST_TOKEN", TOKEN)
        .args(["--collect-token", "${env:COLLECT_TEST_TOKEN}"]);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let join = r#"{"shard":1,"count":3,"profile":"url"}"#;
    let first = eventually(Duration::from_secs(20), || {
        post(port, "/v1/join", None, join).ok()
    })
    .unwrap_or_else(|| panic!("the collector did not listen: {}", collector.stderr()));
    assert_eq!(first, 401, "a join without a token");
    let wrong = format!("Bearer {TOKEN}x");
    let spaced = format!("Bearer  {TOKEN}");
    for auth in [Some(wrong.as_str()), Some(spaced.as_str()), Some(TOKEN)] {
        assert_eq!(post(port, "/v1/join", auth, join), Ok(401), "{auth:?}");
    }
    for auth in [None, Some(wrong.as_str())] {
        assert_eq!(
            post(port, "/v1/shares/1", auth, "{}"),
            Ok(401),
            "a share with {auth:?}"
        );
    }
    let mut cmd = Shard::command(dir.path(), 1, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut one = Shard::start(dir.path(), 1, cmd);
    let mut cmd = Shard::command(dir.path(), 2, port, target.addr);
    cmd.args(["--collect-token", TOKEN]);
    let mut two = Shard::start(dir.path(), 2, cmd);
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(
        codes,
        [0, 0, 0],
        "{}\n{}\n{}",
        collector.stderr(),
        one.stderr(),
        two.stderr()
    );
    assert!(
        collector.stdout().contains("every one of 3 shards"),
        "{}",
        collector.stdout()
    );
    assert_eq!(requests_of_the_whole_run(dir.path()), 60);
    let err = collector.stderr();
    assert!(err.contains("refused 6 calls"), "{err}");
    assert!(!err.contains("unauthenticated"), "{err}");
    // The token is never printed.
    for s in [&collector, &one, &two] {
        assert!(!s.stdout().contains(TOKEN) && !s.stderr().contains(TOKEN));
    }
}

#[test]
fn a_shard_with_a_wrong_collect_token_is_refused_and_named_by_the_collector() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let mut cmd = Shard::command(dir.path(), 1, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut one = Shard::start(dir.path(), 1, cmd);
    let mut cmd = Shard::command(dir.path(), 2, port, target.addr);
    cmd.args(["--collect-token", "not-the-token"]);
    let mut two = Shard::start(dir.path(), 2, cmd);
    assert_eq!(two.code(), 1, "{}", two.stderr());
    assert!(
        two.stderr().contains("wrong bearer token"),
        "{}",
        two.stderr()
    );
    assert_eq!(
        [collector.code(), one.code()],
        [75, 0],
        "{}",
        collector.stderr()
    );
    let err = collector.stderr();
    assert!(err.contains("[2]") && err.contains("shard 2"), "{err}");
}

#[test]
fn idle_sockets_past_its_descriptors_do_not_lock_the_shards_out_of_the_collector() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // 128 descriptors: 10 VUs, the reserve, and a server that keeps to a quarter.
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    with_nofile(&mut cmd, 128, 128);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let listening = eventually(Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).ok()
    });
    assert!(listening.is_some(), "{}", collector.stderr());
    // 150 sockets that never send a byte: more than the collector has descriptors.
    let idle: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(idle.len() >= 140, "only {} connections opened", idle.len());
    let mut one = Shard::start(
        dir.path(),
        1,
        Shard::command(dir.path(), 1, port, target.addr),
    );
    let mut two = Shard::start(
        dir.path(),
        2,
        Shard::command(dir.path(), 2, port, target.addr),
    );
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(codes, [0, 0, 0], "{}", collector.stderr());
    assert_eq!(requests_of_the_whole_run(dir.path()), 60);
    // Without a token: one warning, on the collector only.
    let err = collector.stderr();
    assert_eq!(err.matches("unauthenticated").count(), 1, "{err}");
    assert!(!one.stderr().contains("unauthenticated"));
    drop(idle);
}

/// The summary-export of shard 0.
fn export_of(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary-0.json")).unwrap()).unwrap()
}

/// Issue 43, item 4: a share stopped by SIGTERM (a pod evicted) hands in what it measured, and
/// the whole run is inconclusive (75), naming the shard and the part of its plan it never ran;
/// the record says it was interrupted.
#[test]
fn a_share_stopped_by_sigterm_mid_run_makes_the_whole_run_inconclusive_naming_what_it_missed() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // 60/s for 6 s: 360 arrivals, 120 a shard.
    let start = |i| {
        let mut cmd = Shard::command_at(dir.path(), i, port, target.addr, 60, "6s");
        cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
        Shard::start(dir.path(), i, cmd)
    };
    let mut collector = start(0);
    let mut one = start(1);
    let mut two = start(2);
    // A second of load (60 requests) reached the target: the run is under way on every shard.
    let going = eventually(Duration::from_secs(30), || {
        (target.stats().requests >= 60).then_some(())
    });
    assert!(going.is_some(), "{}", collector.stderr());
    unsafe { libc::kill(two.child.id() as i32, libc::SIGTERM) };
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(
        codes,
        [75, 0, 105],
        "{}\n{}\n{}",
        collector.stderr(),
        one.stderr(),
        two.stderr()
    );
    let err = collector.stderr();
    assert!(err.contains("[2]"), "{err}");
    assert!(
        err.contains("shard 2: interrupted by SIGTERM: it stopped at"),
        "{err}"
    );
    assert!(
        !err.contains("shard 1:") && !err.contains("every one of"),
        "{err}"
    );
    // How much of shard 2's plan never ran, and the merged figures agree with it: what every
    // shard started (or dropped) plus what shard 2 never started is the whole plan.
    let missing: u64 = err
        .split(" of its 120 planned iterations")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no shortfall in {err}"));
    let export = export_of(dir.path());
    let metric = |name: &str| export["metrics"][name]["count"].as_u64().unwrap_or(0);
    let (iterations, dropped) = (metric("iterations"), metric("dropped_iterations"));
    eprintln!(
        "shard 2 never ran {missing} of 120; merged: {iterations} iterations, {dropped} dropped"
    );
    assert!(missing > 0 && missing < 120, "{missing}");
    assert_eq!(iterations + dropped + missing, 360, "{export:#}");
    assert_eq!(
        export["state"]["interrupted"], true,
        "{:#}",
        export["state"]
    );
    assert_eq!(export["state"]["signal"], "SIGTERM");
    assert!(collector.stdout().contains("interrupted by SIGTERM"));
}

/// The collector's peak resident memory (`VmHWM`) so far, in MiB.
fn peak_mib(shard: &Shard) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", shard.child.id())).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// A share's figures for shard 1 of the run shard 0 collects on `port`, from the version 1
/// fixture: `requests` requests of which `failed` failed, in as many iterations.
fn fake_share(requests: u64, failed: u64) -> String {
    let mut record: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::root().join("tests/it/golden/record-v1.json"))
            .unwrap(),
    )
    .unwrap();
    record["requests"] = requests.into();
    record["failed"] = failed.into();
    record["no_response"] = 0.into();
    record["iterations"] = requests.into();
    record["dropped"] = 0.into();
    serde_json::json!({ "stopped": null, "signal": null, "record": record }).to_string()
}

/// Issue 44, item 7: 1,000,000 failed requests handed in for shard 1 by someone else are
/// refused without the token, with a wrong one, and with the right one (no share of 20
/// arrivals holds them); the verdict comes from the real shards alone.
#[test]
fn a_fake_shards_million_failed_requests_are_refused_and_the_verdict_stands() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let start = |i| {
        let mut cmd = Shard::command(dir.path(), i, port, target.addr);
        cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
        // Under a memory cap: what it is sent must not take it past 1 GiB.
        crate::support::limit_address_space(&mut cmd, 1 << 30);
        Shard::start(dir.path(), i, cmd)
    };
    let mut collector = start(0);
    let mut one = start(1);
    let mut two = start(2);
    let forged = fake_share(1_000_000, 1_000_000);
    let began = Instant::now();
    let right = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}-not");
    // Once shard 1 has joined, the right token gets as far as the figures.
    let answer = eventually(Duration::from_secs(20), || {
        match post(port, "/v1/shares/1", Some(&right), &forged) {
            Ok(409) | Err(_) => None,
            other => Some(other),
        }
    });
    assert_eq!(answer, Some(Ok(422)), "{}", collector.stderr());
    for auth in [None, Some(wrong.as_str())] {
        assert_eq!(
            post(port, "/v1/shares/1", auth, &forged),
            Ok(401),
            "{auth:?}"
        );
    }
    // Out of range: no shard 3 of 3, and shard 0 hands in nothing.
    for shard in [3u32, 0, 4_000_000_000] {
        let path = format!("/v1/shares/{shard}");
        assert_eq!(post(port, &path, Some(&right), &forged), Ok(409), "{path}");
    }
    let peak = peak_mib(&collector);
    eprintln!(
        "forged shares refused in {:?}; the collector's peak RSS {peak} MiB",
        began.elapsed()
    );
    assert!(peak < 256, "{peak} MiB");
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(codes, [0, 0, 0], "{}", collector.stderr());
    let export = export_of(dir.path());
    assert_eq!(export["metrics"]["http_reqs"]["count"], 60, "{export:#}");
    assert_eq!(
        export["metrics"]["http_req_failed"]["passes"], 0,
        "{export:#}"
    );
    assert!(
        collector.stderr().contains("refused 2 calls"),
        "{}",
        collector.stderr()
    );
}

/// Issue 44, item 7: one share per shard. A second share with other figures is refused (409)
/// and the run is inconclusive, naming the shard; the same bytes again (a retry whose answer
/// was lost) are taken once.
#[test]
fn a_second_share_for_a_shard_is_refused_and_makes_the_run_inconclusive() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    cmd.args(["--collect-token", TOKEN]);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    // This test is shard 1: it joins, then shard 2 comes and the run starts.
    let auth = format!("Bearer {TOKEN}");
    let join = r#"{"shard":1,"count":3,"profile":"adhoc"}"#;
    let first = eventually(Duration::from_secs(20), || {
        post(port, "/v1/join", Some(&auth), join).ok()
    });
    assert_eq!(first, Some(202), "{}", collector.stderr());
    let mut cmd = Shard::command(dir.path(), 2, port, target.addr);
    cmd.args(["--collect-token", TOKEN]);
    let mut two = Shard::start(dir.path(), 2, cmd);
    let started = eventually(Duration::from_secs(20), || {
        (post(port, "/v1/join", Some(&auth), join) == Ok(200)).then_some(())
    });
    assert!(started.is_some(), "{}", collector.stderr());
    let share = fake_share(20, 0);
    assert_eq!(post(port, "/v1/shares/1", Some(&auth), &share), Ok(200));
    assert_eq!(
        post(port, "/v1/shares/1", Some(&auth), &share),
        Ok(200),
        "a retry"
    );
    let other = fake_share(19, 0);
    assert_eq!(
        post(port, "/v1/shares/1", Some(&auth), &other),
        Ok(409),
        "a second share"
    );
    assert_eq!(
        [collector.code(), two.code()],
        [75, 0],
        "{}",
        collector.stderr()
    );
    let err = collector.stderr();
    assert!(
        err.contains("[1]") && err.contains("shard 1: a second share with other figures"),
        "{err}"
    );
}

/// Issue 44, item 8: sockets that never send a byte, heads that never end and bodies that stall
/// (without the token: refused from the head, before any body is read) do not keep the real
/// shards from joining and handing in.
#[test]
fn idle_half_sent_and_stalled_sockets_do_not_keep_the_real_shards_out() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let listening = eventually(Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).ok()
    });
    assert!(listening.is_some(), "{}", collector.stderr());
    let open = |n: usize, send: &str| -> Vec<TcpStream> {
        (0..n)
            .filter_map(|_| {
                let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
                s.write_all(send.as_bytes()).ok()?;
                Some(s)
            })
            .collect()
    };
    let idle = open(100, "");
    let half = open(100, "POST /v1/join HTTP/1.1\r\nHost: c\r\nContent-Le");
    let stalled = open(
        100,
        "POST /v1/shares/1 HTTP/1.1\r\nHost: c\r\nContent-Length: 100000\r\n\r\n{\"stopped\":",
    );
    assert_eq!((idle.len(), half.len(), stalled.len()), (100, 100, 100));
    let start = |i| {
        let mut cmd = Shard::command(dir.path(), i, port, target.addr);
        cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
        Shard::start(dir.path(), i, cmd)
    };
    let mut one = start(1);
    let mut two = start(2);
    // The shards join while the 300 sockets are open: the collector's memory stays small.
    let joined = eventually(Duration::from_secs(20), || {
        (target.stats().requests > 0).then_some(peak_mib(&collector))
    });
    eprintln!("collector's peak RSS with 300 hostile sockets open: {joined:?} MiB");
    assert!(joined.is_some_and(|mib| mib < 256), "{joined:?}");
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(codes, [0, 0, 0], "{}\n{}", collector.stderr(), one.stderr());
    assert_eq!(requests_of_the_whole_run(dir.path()), 60);
    // Every stalled body was answered 401 from its head, not left waiting on its body.
    let answered = stalled
        .into_iter()
        .filter(|s| {
            let mut s = s.try_clone().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut head = [0u8; 12];
            s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 401")
        })
        .count();
    assert_eq!(answered, 100);
    drop((idle, half));
}

/// A collector that answers every join with a start `start_at_ms` (unix ms) away; its port.
fn fake_collector(start_at_ms: u64) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        // A shard calls a few times at most; the thread ends with the test binary.
        for conn in listener.incoming().take(50) {
            let Ok(mut s) = conn else { continue };
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let body = format!("{{\"start_at_ms\":{start_at_ms}}}");
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// Issue 44, item 9: a start 10 years ahead is refused at once with an error, never waited
/// for; and shard 0 without a token will not listen for a URL other shards reach from afar.
#[test]
fn a_start_ten_years_ahead_is_refused_and_an_open_collector_needs_a_token() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let ten_years = 10 * 365 * 24 * 3600 * 1000;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let port = fake_collector(now_ms + ten_years);
    let mut one = Shard::start(
        dir.path(),
        1,
        Shard::command(dir.path(), 1, port, target.addr),
    );
    let started = Instant::now();
    assert_eq!(one.code(), 1, "{}", one.stderr());
    let took = started.elapsed();
    let err = one.stderr();
    assert!(
        err.contains("set the run's start 3153") && err.contains(" s ahead, more than 10 s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert_eq!(target.stats().requests, 0);

    // Shard 0, no token, a URL other pods reach: refused before it listens (exit 2).
    let mut cmd = sloburn();
    cmd.env_remove("SLOBURN_COLLECT_TOKEN").args([
        "run".to_string(),
        "--url".into(),
        format!("http://{}/", target.addr),
        "--rate".into(),
        "30/s".into(),
        "--duration".into(),
        "2s".into(),
        "--shard".into(),
        "0/3".into(),
        "--collect".into(),
        "http://sloburn-job-0.sloburn-job:9091".into(),
        "--quiet".into(),
    ]);
    let mut zero = Shard::start(dir.path(), 0, cmd);
    assert_eq!(zero.code(), 2, "{}", zero.stderr());
    assert!(
        zero.stderr().contains("without a token"),
        "{}",
        zero.stderr()
    );
}
