//! `sloburn run --out prometheus-rw=URL` (issue 33, part 3): a one-shot run's figures reach a
//! real Prometheus through remote write, and a receiver that is down or never answers costs
//! the run nothing but the samples, which it counts and prints.

use crate::support::{Proc, Server, free_port, sloburn};
use std::time::Duration;

const CONFIG: &str = "global:\n  scrape_interval: 1h\n";

/// Runs `--rate 50/s` for 3 s against a target answering in 50–250 ms; returns the summary
/// export and stderr.
fn run_with(rw: &str, extra: &[&str]) -> (serde_json::Value, String, Option<i32>) {
    let (_target, base) = Proc::target(&["--latency", "150ms", "--jitter", "100ms"]);
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let out = sloburn()
        .args(["run", "--url", &format!("{base}/"), "--rate", "50/s"])
        .args(["--duration", "3s", "--quiet", "--out"])
        .arg(format!("prometheus-rw={rw}"))
        .args(extra)
        .arg("--summary-export")
        .arg(&export)
        .output()
        .unwrap();
    let json = serde_json::from_str(&std::fs::read_to_string(&export).unwrap_or_default())
        .unwrap_or(serde_json::Value::Null);
    (
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn a_runs_count_and_p95_are_queryable_in_prometheus_after_it_ends() {
    let prom = Server::prometheus_with_config(CONFIG, &["--web.enable-remote-write-receiver"]);
    let url = format!("{}/api/v1/write", prom.base);
    let (json, stderr, code) = run_with(&url, &["--push-interval", "1s"]);
    assert_eq!(code, Some(0), "{stderr}");
    let m = &json["metrics"];
    let count = m["http_reqs"]["count"].as_f64().unwrap();
    assert_eq!(count, 150.0, "{stderr}");
    let p95_ms = m["http_req_duration"]["p(95)"].as_f64().unwrap();
    assert!(stderr.contains(" 0 dropped"), "{stderr}");

    let sel = r#"profile="adhoc""#;
    let total = prom.query(&format!("sum(sloburn_http_reqs_total{{{sel}}})"));
    assert_eq!(total.len(), 1, "no pushed series: {stderr}");
    assert_eq!(total[0].1, count, "the last push holds the whole run");
    let p95 = prom.query(&format!(
        "histogram_quantile(0.95, sum by (le) (sloburn_http_req_duration_seconds_bucket{{{sel}}}))"
    ));
    assert_eq!(p95.len(), 1);
    let prom_ms = p95[0].1 * 1000.0;
    // Within the classic buckets' precision: both in the same bucket of the target's bounds.
    let bounds = [
        0.0, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
    ];
    let bucket = |v: f64| bounds.iter().rposition(|b| v > *b);
    assert_eq!(
        bucket(prom_ms),
        bucket(p95_ms),
        "Prometheus p95 {prom_ms:.1} ms, sloburn's {p95_ms:.1} ms"
    );
    let iterations = prom.query(&format!("sloburn_iterations_total{{{sel}}}"));
    assert_eq!(iterations[0].1, count);
    // Pushed more than once: a sample at every interval, not only the last.
    let range = prom.query(&format!(
        "count_over_time(sloburn_iterations_total{{{sel}}}[5m])"
    ));
    assert!(range[0].1 >= 2.0, "{range:?}");
}

#[test]
fn a_receiver_that_is_down_or_silent_costs_the_run_nothing_but_the_samples() {
    // Down: nothing listens on the port.
    let closed = format!("http://127.0.0.1:{}/api/v1/write", free_port());
    let (json, stderr, code) = run_with(&closed, &["--push-interval", "500ms"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(json["metrics"]["http_reqs"]["count"].as_f64(), Some(150.0));
    let dropped = stderr
        .lines()
        .find(|l| l.starts_with("prometheus-rw:"))
        .unwrap_or_else(|| panic!("no prometheus-rw line: {stderr}"));
    assert!(dropped.contains("0 samples pushed"), "{dropped}");
    assert!(!dropped.contains(" 0 dropped"), "{dropped}");
    assert!(dropped.contains("failed"), "{dropped}");

    // Silent: it accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/api/v1/write", silent.local_addr().unwrap());
    let started = std::time::Instant::now();
    let (json, stderr, code) = run_with(&url, &["--push-interval", "500ms"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        json["metrics"]["http_reqs"]["count"].as_f64(),
        Some(150.0),
        "every arrival was sent while the pushes hung: {stderr}"
    );
    assert!(!stderr.contains(" 0 dropped"), "{stderr}");
    // The run waits for its final push at most its timeout.
    assert!(started.elapsed() < Duration::from_secs(60));
    drop(silent);
}

#[test]
fn a_bad_receiver_url_or_interval_is_a_usage_error() {
    for (out, extra, needle) in [
        ("prometheus-rw=ftp://x/y", None, "give an http(s) URL"),
        ("prometheus-rw=", None, "is no URL"),
        (
            "prometheus-rw=http://127.0.0.1:9/api/v1/write",
            Some("10ms"),
            "--push-interval `10ms`",
        ),
    ] {
        let mut cmd = sloburn();
        cmd.args(["run", "--url", "http://127.0.0.1:9/", "--rate", "1/s"])
            .args(["--duration", "1s", "--quiet", "--out", out]);
        if let Some(i) = extra {
            cmd.args(["--push-interval", i]);
        }
        let o = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{out}: {err}");
        assert!(err.contains(needle), "{out}: {err}");
    }
}
