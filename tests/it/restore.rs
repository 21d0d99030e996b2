//! `storage.restore`: a daemon without a store rebuilds its SLO windows from a real Prometheus
//! that scraped its predecessor; a Prometheus that is down delays readiness for the bounded
//! time only; `sloburn check` validates the fields.

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, BackgroundTarget, Daemon, IDLE, Server, daemon_config,
    eventually, free_port, get_blocking, metric_sum, promtool_check_metrics, request, sloburn,
    urlencode, write_config,
};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::path::Path;
use std::time::Duration;

/// 100 requests a second for 100 s, started through the API (so Prometheus has scraped the
/// SLO counters at 0 first).
const LOAD: &str = "  load:\n    target: api\n    executor: constant-arrival-rate\n    rate: 100/s\n    duration: 100s\n";

const SLO: &str = "slo=\"api-availability\"";

/// `daemon_config` plus `restore` under `storage` (indented YAML lines).
fn config(target: std::net::SocketAddr, data: &Path, profiles: &str, restore: &str) -> String {
    let text = daemon_config(target, data, profiles, AVAILABILITY_SLO);
    text.replacen(
        "  flush_interval: 1s\n",
        &format!("  flush_interval: 1s\n{restore}"),
        1,
    )
}

/// `sloburn serve` with `PROM_PORT` in its environment (the restore URL names it).
fn start(path: &Path, prom_port: u16) -> Daemon {
    let mut cmd = Daemon::command(path, &["--no-watch"]);
    cmd.env("PROM_PORT", prom_port.to_string());
    Daemon::spawn(cmd)
}

/// The restore section, Prometheus' port as an `${env:}` reference.
fn restore_yaml(timeout: &str) -> String {
    format!(
        "  restore:\n    prometheus: \"http://127.0.0.1:${{env:PROM_PORT}}\"\n    max_age: 1h\n    timeout: {timeout}\n"
    )
}

/// (good, bad) over the first SLO's period, from `/api/slos`.
fn period(d: &Daemon) -> (u64, u64) {
    let (_, body) = get_blocking(&format!("{}/api/slos", d.base));
    let v: Value = serde_json::from_str(&body).unwrap();
    let p = &v["slos"][0]["period"];
    (p["good"].as_u64().unwrap(), p["bad"].as_u64().unwrap())
}

/// The SLO's minutes in the store under `dir`: minute → (good, bad).
fn stored_minutes(dir: &Path) -> std::collections::BTreeMap<i64, (u64, u64)> {
    let store = sloburn::store::Store::open(dir).unwrap();
    let rows = store.load("api-availability", 0).unwrap();
    store.close().unwrap();
    rows.into_iter().map(|(m, g, b)| (m, (g, b))).collect()
}

/// Once Prometheus has scraped `d`'s SLO counters at 0, runs `profile` through the API and
/// waits for it to end and for Prometheus to hold the final counts; returns them (good, bad).
fn load_and_wait(d: &Daemon, prom: &Server, profile: &str) -> (f64, f64) {
    let good_q = format!("sum(sloburn_slo_events_total{{{SLO},result=\"good\"}})");
    let bad_q = format!("sum(sloburn_slo_events_total{{{SLO},result=\"bad\"}})");
    let zero = eventually(Duration::from_secs(30), || {
        (prom.scalar(&good_q) == 0.0 && prom.scalar(&bad_q) == 0.0).then_some(())
    });
    assert!(
        zero.is_some(),
        "prometheus never scraped {}:\n{}",
        d.base,
        prom.log_tail()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (code, body) = rt.block_on(request(
        "POST",
        &format!("{}/api/profiles/{profile}/run", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 202, "{body}");
    let counted = |m: &str, result: &str| {
        metric_sum(
            m,
            &format!("sloburn_slo_events_total{{{SLO},result=\"{result}\"}}"),
        )
    };
    let done = eventually(Duration::from_secs(150), || {
        let m = d.metrics();
        let runs = metric_sum(&m, &format!("sloburn_runs_total{{profile=\"{profile}\""));
        if runs < 1.0 {
            return None;
        }
        let (good, bad) = (counted(&m, "good"), counted(&m, "bad"));
        // Two scrapes after the end: Prometheus holds the final values.
        std::thread::sleep(Duration::from_secs(2));
        (prom.scalar(&good_q) == good && prom.scalar(&bad_q) == bad).then_some((good, bad))
    });
    let (good, bad) = done.unwrap_or_else(|| panic!("{profile} did not end, or was not scraped"));
    assert!(bad > 400.0 && good > 2.0 * bad, "{good} {bad}");
    (good, bad)
}

fn within_one_percent(ours: u64, theirs: f64) -> bool {
    (ours as f64 - theirs).abs() <= theirs * 0.01
}

#[test]
fn a_daemon_without_a_store_restores_its_period_from_prometheus() {
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: 0.2,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();

    // Daemon A, scraped every second; its load starts once Prometheus saw the counters at 0.
    let data_a = dir.path().join("a");
    let path = write_config(dir.path(), &config(target.addr, &data_a, LOAD, ""));
    let mut a = Daemon::start(&path, &["--no-watch"]);
    let prom = Server::prometheus(a.base.trim_start_matches("http://"), None, "1s", None);
    let events = format!("sloburn_slo_events_total{{{SLO}}}");
    let truth = load_and_wait(&a, &prom, "load");
    let (true_good, true_bad) = truth;
    assert!(
        true_bad > 1000.0 && true_good > 2.0 * true_bad,
        "{true_good} {true_bad}"
    );

    // The time of A's last sample, while its series is live.
    let last = prom.scalar(&format!("max(timestamp({events}))"));
    assert!(last.is_finite(), "no sample of A");

    // A goes, and its store with it (its minutes kept to compare B's with).
    a.signal(libc::SIGTERM);
    assert_eq!(a.wait(Duration::from_secs(15)), Some(0));
    let minutes_a = stored_minutes(&data_a);
    std::fs::remove_dir_all(&data_a).unwrap();

    // Prometheus' own increase over A's whole life (the restore's range covers it), ending at
    // its last sample: past it, increase would extrapolate into the time A was gone.
    let theirs = |result: &str| {
        let q =
            format!("sum(increase(sloburn_slo_events_total{{{SLO},result=\"{result}\"}}[10m]))");
        let v = prom.api(&format!(
            "/api/v1/query?query={}&time={last}",
            urlencode(&q)
        ));
        v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|s| s.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let (their_good, their_bad) = (theirs("good"), theirs("bad"));

    // Daemon B: no store, `restore` pointing at that Prometheus.
    let data_b = dir.path().join("b");
    let port = prom.base.rsplit(':').next().unwrap().parse().unwrap();
    let path = write_config(
        dir.path(),
        &config(target.addr, &data_b, IDLE, &restore_yaml("30s")),
    );
    let b = start(&path, port);
    let ready = eventually(Duration::from_secs(40), || {
        let (code, body) = get_blocking(&format!("{}/readyz", b.base));
        (code == 200).then_some(body)
    })
    .expect("B never became ready");
    let (good, bad) = period(&b);
    eprintln!(
        "A counted {true_good}/{true_bad}, prometheus' increase {their_good}/{their_bad}, \
         B restored {good}/{bad} (good/bad)"
    );
    assert!(
        within_one_percent(good, their_good) && within_one_percent(bad, their_bad),
        "B restored {good} good / {bad} bad; prometheus' increase {their_good} / {their_bad}"
    );
    assert!(
        within_one_percent(good, true_good) && within_one_percent(bad, true_bad),
        "B restored {good} good / {bad} bad; A counted {true_good} / {true_bad}"
    );

    // The coverage, on /readyz, /metrics and in the log; the URL only as written.
    let line = ready
        .lines()
        .find(|l| l.starts_with("restored from prometheus: api-availability "))
        .unwrap_or_else(|| panic!("{ready}"));
    let m = b.metrics();
    let restored = metric_sum(&m, &format!("sloburn_slo_restored_seconds{{{SLO}}}")) / 60.0;
    let gaps = metric_sum(&m, &format!("sloburn_slo_restore_gap_seconds{{{SLO}}}")) / 60.0;
    // A's 100 s span two or three minutes; the last may be B's current minute, not yet whole.
    assert!(restored >= 1.0, "{m}");
    assert_eq!(
        restored + gaps,
        59.0,
        "59 whole minutes in 1h besides the current one"
    );
    assert!(
        line.contains(&format!(
            "{restored} of 59 minutes, {good} good, {bad} bad, gaps: "
        )),
        "{line}"
    );
    assert_eq!(
        metric_sum(&m, "sloburn_slo_restore_state{state=\"done\"}"),
        1.0
    );
    assert_eq!(
        metric_sum(&m, "sloburn_slo_restore_state{state=\"restoring\"}"),
        0.0
    );
    let logs = b.logs.lock().unwrap().join("\n");
    assert!(
        logs.contains("SLO windows restored from prometheus"),
        "{logs}"
    );
    assert!(logs.contains("${env:PROM_PORT}"), "{logs}");
    assert!(
        !logs.contains(&prom.base),
        "the expanded URL was logged:\n{logs}"
    );

    // The restored minutes reach B's store: after a flush, C starts on it without Prometheus'
    // help (the store wins) and has the same counts.
    std::thread::sleep(Duration::from_secs(2));
    let mut b = b;
    b.signal(libc::SIGTERM);
    assert_eq!(b.wait(Duration::from_secs(15)), Some(0));
    // Minute by minute, B's store holds A's minutes: a shifted minute would move 6,000 events;
    // the edges of Prometheus' windows move at most a scrape interval's worth (100 at 100/s).
    let minutes_b = stored_minutes(&data_b);
    eprintln!("A's minutes {minutes_a:?}\nB's minutes {minutes_b:?}");
    let all: std::collections::BTreeSet<i64> =
        minutes_a.keys().chain(minutes_b.keys()).copied().collect();
    assert!(all.len() >= 2, "{minutes_a:?}");
    for m in all {
        let (ga, ba) = minutes_a.get(&m).copied().unwrap_or_default();
        let (gb, bb) = minutes_b.get(&m).copied().unwrap_or_default();
        let close =
            |x: u64, y: u64, slack: f64| (x as f64 - y as f64).abs() <= slack + 0.02 * x as f64;
        assert!(
            close(ga + ba, gb + bb, 200.0) && close(ba, bb, 50.0),
            "minute {m}: A {ga}/{ba}, B {gb}/{bb}\nA {minutes_a:?}\nB {minutes_b:?}"
        );
    }
    let c = start(&path, port);
    let ready = eventually(Duration::from_secs(40), || {
        let (code, body) = get_blocking(&format!("{}/readyz", c.base));
        (code == 200).then_some(body)
    })
    .expect("C never became ready");
    assert!(
        ready.contains("restored from prometheus: from the store: api-availability"),
        "{ready}"
    );
    assert_eq!(period(&c), (good, bad), "the store's counts, not doubled");
}

/// 100 requests a second for 25 s, started through the API.
const SHORT: &str = "  short:\n    target: api\n    executor: constant-arrival-rate\n    rate: 100/s\n    duration: 25s\n";

/// `sloburn serve` on a fixed port, so a restarted daemon is the same Prometheus series.
fn start_on(path: &Path, port: u16) -> Daemon {
    let mut cmd = sloburn();
    cmd.args(["serve", "--log-format", "json", "--no-watch", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(path)
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    Daemon::spawn(cmd)
}

/// A daemon restarted on the same address resets its counters in the same series: the
/// minute of the reset falls back to `increase`, and the restore counts both lives once.
#[test]
fn a_counter_reset_between_two_lives_is_counted_once() {
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: 0.2,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let prom = Server::prometheus(&format!("127.0.0.1:{port}"), None, "1s", None);
    let mut lives = Vec::new();
    for life in ["one", "two"] {
        let path = write_config(
            dir.path(),
            &config(target.addr, &dir.path().join(life), SHORT, ""),
        );
        let mut d = start_on(&path, port);
        lives.push(load_and_wait(&d, &prom, "short"));
        d.signal(libc::SIGTERM);
        assert_eq!(d.wait(Duration::from_secs(15)), Some(0));
    }
    let resets = prom.scalar(&format!(
        "sum(resets(sloburn_slo_events_total{{{SLO},result=\"good\"}}[10m]))"
    ));
    assert_eq!(resets, 1.0, "one series, reset once");
    let (true_good, true_bad) = (lives[0].0 + lives[1].0, lives[0].1 + lives[1].1);
    let path = write_config(
        dir.path(),
        &config(
            target.addr,
            &dir.path().join("b"),
            IDLE,
            &restore_yaml("30s"),
        ),
    );
    let prom_port = prom.base.rsplit(':').next().unwrap().parse().unwrap();
    let b = start(&path, prom_port);
    let ready = eventually(Duration::from_secs(40), || {
        let (code, body) = get_blocking(&format!("{}/readyz", b.base));
        (code == 200).then_some(body)
    });
    assert!(ready.is_some(), "B never became ready");
    let (good, bad) = period(&b);
    eprintln!("lives {lives:?}, B restored {good}/{bad}");
    // Counted once: twice would add a whole life (about 50 %), dropping one lose it. The minute
    // of the reset is Prometheus' increase, whose extrapolation moves a scrape interval or two
    // of events at 100/s (measured: up to 0.8 % of the bad ones), so 2 % and 20 events.
    let close = |ours: u64, theirs: f64| (ours as f64 - theirs).abs() <= 0.02 * theirs + 20.0;
    assert!(
        close(good, true_good) && close(bad, true_bad),
        "B restored {good} good / {bad} bad; the two lives counted {true_good} / {true_bad}"
    );
}

#[test]
fn prometheus_down_delays_readiness_for_the_timeout_only() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let closed = free_port();
    let path = write_config(
        dir.path(),
        &config(
            target.addr,
            &dir.path().join("data"),
            IDLE,
            &restore_yaml("5s"),
        ),
    );
    let d = start(&path, closed);
    let readyz = || get_blocking(&format!("{}/readyz", d.base));
    let healthz = || get_blocking(&format!("{}/healthz", d.base));
    let (code, body) = readyz();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("not ready: restoring from prometheus…"),
        "{body}"
    );
    assert_eq!(
        metric_sum(
            &d.metrics(),
            "sloburn_slo_restore_state{state=\"restoring\"}"
        ),
        1.0
    );
    // Healthy throughout; ready once the 5 s are over, saying what happened.
    let mut probes = 0;
    let ready = eventually(Duration::from_secs(30), || {
        assert_eq!(healthz().0, 200);
        probes += 1;
        let (code, body) = readyz();
        (code == 200).then_some(body)
    })
    .expect("never ready after the restore timed out");
    assert!(probes > 1, "the restore did not wait for prometheus");
    assert!(
        ready.contains("restore from prometheus incomplete, serving with what it has")
            && ready.contains("cannot reach prometheus: connect_refused")
            && ready.contains("api-availability 0 of 59 minutes"),
        "{ready}"
    );
    let m = d.metrics();
    assert_eq!(
        metric_sum(&m, "sloburn_slo_restore_state{state=\"incomplete\"}"),
        1.0
    );
    assert_eq!(
        metric_sum(&m, &format!("sloburn_slo_restored_seconds{{{SLO}}}")),
        0.0
    );
    assert_eq!(
        metric_sum(&m, &format!("sloburn_slo_restore_gap_seconds{{{SLO}}}")),
        0.0,
        "nothing came back, so no minute is known to be empty"
    );
    let (clean, out) = promtool_check_metrics(&m);
    assert!(clean, "promtool check metrics:\n{out}");
    assert_eq!(period(&d), (0, 0));
}

#[test]
fn check_rejects_bad_restore_fields_at_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "storage:\n  restore:\n    prometheus: \"prom:9090\"\n    max_age: 2y\n    timeout: 0s\ntargets:\n  a:\n    url: http://127.0.0.1:1/\n",
    )
    .unwrap();
    let out = sloburn().arg("check").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for want in [
        "bad.yaml:3:17: storage.restore.prometheus: `prom:9090` has no scheme",
        "bad.yaml:4:14: storage.restore.max_age:",
        "bad.yaml:5:14: storage.restore.timeout: must be between 1s and 10m",
    ] {
        assert!(stdout.contains(want), "{want}\n{stdout}");
    }
}
