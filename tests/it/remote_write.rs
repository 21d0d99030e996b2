//! Issue 33, part 3: `sloburn run --out prometheus-rw=URL` pushes the run's figures to a real
//! Prometheus started with `--web.enable-remote-write-receiver`; a receiver that is down or
//! stalls never slows the run, and the samples it cost are counted and printed. `--out
//! opentelemetry` exports the same figures over OTLP/HTTP to the telemetry tests' receiver.

use crate::support::*;
use sloburn::target::TargetOptions;
use std::time::Duration;

const RATE: u64 = 100;
const SECONDS: u64 = 3;
/// The default classic buckets (`config::DEFAULT_BUCKETS`) around the target's latencies.
const BUCKETS: [f64; 6] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05];

/// A target whose latencies spread over several classic buckets.
fn spread_target() -> BackgroundTarget {
    BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(2),
        jitter: Duration::from_millis(6),
        distribution: sloburn::target::Distribution::Exponential,
        ..TargetOptions::default()
    })
}

/// Runs `RATE/s` for `SECONDS` against `target` with `--out OUT`: (the
/// summary-export JSON, stderr, exit code).
fn run(target: std::net::SocketAddr, out: &str, testid: &str) -> (serde_json::Value, String, i32) {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let output = sloburn()
        .args(["run", "--url", &format!("http://{target}/api"), "--quiet"])
        .args(["--rate", &format!("{RATE}/s"), "--vus", "20"])
        .args(["--duration", &format!("{SECONDS}s"), "--testid", testid])
        .args(["--out", out])
        .arg("--summary-export")
        .arg(&export)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let json = std::fs::read_to_string(&export)
        .unwrap_or_else(|e| panic!("no summary export ({e}): {}", all_output(&output)));
    (
        serde_json::from_str(&json).unwrap(),
        stderr,
        output.status.code().unwrap_or(-1),
    )
}

/// `NAME: N samples sent, M dropped` from stderr: (N, M).
fn pushed(stderr: &str, name: &str) -> (u64, u64) {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} line: {stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), 5, "{line}");
    assert_eq!(
        (words[1], words[2], words[4]),
        ("samples", "sent,", "dropped"),
        "{line}"
    );
    (words[0].parse().unwrap(), words[3].parse().unwrap())
}

/// The classic bucket `(lower, upper]` holding `v`.
fn bucket_of(v: f64) -> (f64, f64) {
    let mut lower = 0.0;
    for &b in &BUCKETS {
        if v <= b {
            return (lower, b);
        }
        lower = b;
    }
    (lower, f64::INFINITY)
}

#[test]
fn issue_33_a_real_prometheus_receives_the_runs_request_count_and_p95() {
    let target = spread_target();
    let prom = Server::prometheus_with_config(
        "global:\n  scrape_interval: 1m\n",
        &[
            "--web.enable-remote-write-receiver",
            "--enable-feature=native-histograms",
        ],
    );
    let url = format!(
        "prometheus-rw={}/api/v1/write?interval=1s&native=true",
        prom.base
    );
    let (summary, stderr, code) = run(target.addr, &url, "rw-up");
    assert_eq!(code, 0, "{stderr}");
    let reqs = summary["metrics"]["http_reqs"]["count"].as_u64().unwrap();
    assert!(reqs > 0, "{summary}");
    let (sent, dropped) = pushed(&stderr, "prometheus-rw");
    assert_eq!(dropped, 0, "{stderr}");
    // A push every second and one at the end, each with every series.
    assert!(sent > 0, "{stderr}");

    let sel = "{testid=\"rw-up\",profile=\"adhoc\"}";
    let count = eventually(Duration::from_secs(30), || {
        let v = prom.scalar(&format!("sum(sloburn_http_reqs_total{sel})"));
        (v == reqs as f64).then_some(v)
    });
    assert_eq!(
        count,
        Some(reqs as f64),
        "{}",
        prom.scalar(&format!("sum(sloburn_http_reqs_total{sel})"))
    );
    assert_eq!(
        prom.scalar(&format!(
            "sum(sloburn_http_req_duration_seconds_count{sel})"
        )),
        reqs as f64
    );
    assert_eq!(
        prom.scalar(&format!(
            "histogram_count(sum(sloburn_http_req_duration_seconds{sel}))"
        )),
        reqs as f64
    );
    // The summary's p95 (ms) and Prometheus' from the pushed buckets: the classic estimate
    // falls in the bucket that holds the exact one, the native one within a schema-3 bucket
    // (a factor 2^(1/8)) and the 0.78 % of the run's own histogram.
    let p95 = summary["metrics"]["http_req_duration"]["p(95)"]
        .as_f64()
        .unwrap()
        / 1e3;
    let classic = prom.scalar(&format!(
        "histogram_quantile(0.95, sum by (le) (sloburn_http_req_duration_seconds_bucket{sel}))"
    ));
    let (lower, upper) = bucket_of(p95);
    assert!(
        classic >= lower && classic <= upper,
        "classic p95 {classic} outside ({lower}, {upper}] of the summary's {p95}"
    );
    let native = prom.scalar(&format!(
        "histogram_quantile(0.95, sum(sloburn_http_req_duration_seconds{sel}))"
    ));
    let factor = 2f64.powf(1.0 / 8.0) * 1.01;
    assert!(
        native <= p95 * factor && native >= p95 / factor,
        "native p95 {native} vs the summary's {p95}"
    );
}

/// The run's requests with the receiver at `out`: full rate, nothing pushed, drops printed.
fn full_rate_with_drops(name: &str, out: &str, testid: &str) {
    let target = spread_target();
    let (summary, stderr, code) = run(target.addr, &format!("{name}={out}"), testid);
    assert_eq!(code, 0, "{stderr}");
    let reqs = summary["metrics"]["http_reqs"]["count"].as_u64().unwrap();
    assert_eq!(reqs, RATE * SECONDS, "{summary}");
    let dropped_iterations = summary["metrics"]["dropped_iterations"]["count"]
        .as_u64()
        .unwrap_or(0);
    assert_eq!(dropped_iterations, 0, "{summary}");
    let (sent, dropped) = pushed(&stderr, name);
    assert_eq!(sent, 0, "{stderr}");
    assert!(dropped > 0, "{stderr}");
}

#[test]
fn issue_33_a_receiver_that_is_down_costs_samples_not_requests() {
    // A port nothing listens on: every push is refused.
    let out = format!(
        "http://127.0.0.1:{}/api/v1/write?interval=200ms",
        free_port()
    );
    full_rate_with_drops("prometheus-rw", &out, "rw-down");
    let out = format!("http://127.0.0.1:{}?interval=200ms", free_port());
    full_rate_with_drops("opentelemetry", &out, "otlp-down");
}

#[test]
fn issue_33_the_summary_shows_a_push_url_without_its_password() {
    let target = spread_target();
    let port = free_port();
    let output = sloburn()
        .args(["run", "--url", &format!("http://{}/api", target.addr)])
        .args(["--iterations", "3", "--vus", "1"])
        .args([
            "--out",
            &format!("prometheus-rw=http://u:pw-s3cr3t@127.0.0.1:{port}/api/v1/write"),
        ])
        .output()
        .unwrap();
    let all = all_output(&output);
    assert_eq!(output.status.code(), Some(0), "{all}");
    assert!(
        all.contains(&format!(
            "prometheus-rw=http://127.0.0.1:{port}/api/v1/write"
        )),
        "{all}"
    );
    assert!(!all.contains("pw-s3cr3t"), "{all}");
}

#[test]
fn issue_33_a_receiver_that_never_answers_costs_samples_not_requests() {
    // A listener that never accepts: connections complete in its backlog, requests go
    // unanswered, and every push times out.
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = format!(
        "http://{}/api/v1/write?interval=200ms",
        stalled.local_addr().unwrap()
    );
    full_rate_with_drops("prometheus-rw", &out, "rw-stalled");
}

#[test]
fn issue_33_bad_prometheus_rw_options_are_usage_errors_that_say_why() {
    for (out, why) in [
        ("prometheus-rw=", "give an http:// or https:// URL"),
        ("prometheus-rw=ftp://x/", "give an http:// or https:// URL"),
        (
            "prometheus-rw=http://127.0.0.1:9/w?interval=1",
            "interval=`1`",
        ),
        (
            "prometheus-rw=http://127.0.0.1:9/w?interval=10ms",
            "from 100ms to 1h",
        ),
        (
            "prometheus-rw=http://127.0.0.1:9/w?native=yes",
            "native=`yes`: use true or false",
        ),
        (
            "prometheus-rw=http://127.0.0.1:9/w?every=1s",
            "unknown option `every`",
        ),
    ] {
        let output = sloburn()
            .args(["run", "--url", "http://127.0.0.1:9/", "--duration", "1s"])
            .args(["--out", out])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{out}: {stderr}");
        assert!(stderr.contains(why), "{out}: {stderr}");
    }
}

/// The OTLP receiver of the telemetry tests (`otel/receiver.py`), one JSON line per data point
/// in its file; killed on drop.
struct OtlpReceiver {
    child: std::process::Child,
    port: u16,
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl OtlpReceiver {
    fn start() -> OtlpReceiver {
        use std::io::BufRead;
        let root = env!("CARGO_MANIFEST_DIR");
        crate::support::install_otel_test_tools();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("points.jsonl");
        let mut child = std::process::Command::new("python3")
            .arg(format!("{root}/tests/it/otel/receiver.py"))
            .arg(&out)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        OtlpReceiver {
            child,
            port: line.trim().parse().expect("the receiver prints its port"),
            out,
            _dir: dir,
        }
    }

    /// The last data point of `metric` (cumulative, so the run's totals).
    fn last(&self, metric: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let points: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            points.iter().all(|p| p.get("error").is_none()),
            "the receiver could not decode a body: {text}"
        );
        points
            .into_iter()
            .filter(|p| p["metric"] == metric)
            .max_by_key(|p| p["time"].as_u64())
            .unwrap_or_else(|| panic!("no {metric} point: {text}"))
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn issue_33_otlp_exponential_histogram_counts_every_request() {
    let target = spread_target();
    let receiver = OtlpReceiver::start();
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let output = sloburn()
        .args([
            "run",
            "--url",
            &format!("http://{}/api", target.addr),
            "--quiet",
        ])
        .args(["--rate", &format!("{RATE}/s"), "--vus", "20"])
        .args(["--duration", &format!("{SECONDS}s"), "--testid", "otlp"])
        .args([
            "--out",
            &format!(
                "opentelemetry=http://127.0.0.1:{}?interval=1s",
                receiver.port
            ),
        ])
        .arg("--summary-export")
        .arg(&export)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{}", all_output(&output));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let reqs = summary["metrics"]["http_reqs"]["count"].as_u64().unwrap();
    assert!(reqs > 0);
    let line = stderr
        .lines()
        .find(|l| l.starts_with("opentelemetry: "))
        .unwrap_or_else(|| panic!("no opentelemetry line: {stderr}"));
    assert!(line.ends_with(" 0 dropped"), "{line}");

    let h = receiver.last("sloburn_http_req_duration_seconds");
    assert_eq!(h["kind"], "exponential_histogram", "{h}");
    assert_eq!(h["count"].as_u64(), Some(reqs), "{h}");
    let in_buckets: u64 = h["bucket_counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum::<u64>()
        + h["zero_count"].as_u64().unwrap();
    assert_eq!(in_buckets, reqs, "{h}");
    // The bucket where the cumulative count passes 95 % holds the summary's p95: OTLP's bucket
    // `offset + i` is (base^(offset+i), base^(offset+i+1)], base = 2^(2^-scale); the run's own
    // histogram adds 0.78 %.
    let p95 = summary["metrics"]["http_req_duration"]["p(95)"]
        .as_f64()
        .unwrap()
        / 1e3;
    let base = 2f64.powf(2f64.powi(-(h["scale"].as_i64().unwrap() as i32)));
    let offset = h["offset"].as_i64().unwrap();
    let rank = (0.95 * reqs as f64).ceil() as u64;
    let mut seen = h["zero_count"].as_u64().unwrap();
    let i = h["bucket_counts"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| {
            seen += c.as_u64().unwrap();
            seen >= rank
        })
        .unwrap() as i64;
    let (lower, upper) = (
        base.powi((offset + i) as i32),
        base.powi((offset + i + 1) as i32),
    );
    assert!(
        p95 > lower / 1.01 && p95 <= upper * 1.01,
        "p95 {p95} outside ({lower}, {upper}]: {h}"
    );
    assert_eq!(h["attributes"]["testid"], "otlp", "{h}");
    assert_eq!(h["attributes"]["profile"], "adhoc", "{h}");
    assert_eq!(h["attributes"]["step"], "request", "{h}");
    let r = receiver.last("sloburn_http_reqs_total");
    assert_eq!(r["kind"], "sum", "{r}");
    assert_eq!(
        (r["monotonic"].as_bool(), r["temporality"].as_u64()),
        (Some(true), Some(2))
    );
    assert_eq!(r["value"].as_u64(), Some(reqs), "{r}");
}

#[test]
fn issue_42_a_run_that_fails_after_its_outputs_started_leaves_no_push_running() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    // A receiver on its own thread that counts the pushes it is sent.
    let pushes = Arc::new(AtomicU64::new(0));
    let seen = pushes.clone();
    let receiver = serve_on_thread(axum::Router::new().fallback(move || {
        seen.fetch_add(1, Relaxed);
        async { axum::http::StatusCode::NO_CONTENT }
    }));
    let args = sloburn::run::RunArgs {
        url: Some("http://127.0.0.1:9/".into()),
        rate: Some("10/s".into()),
        duration: Some("1s".into()),
        out: vec![format!(
            "prometheus-rw=http://{}/api/v1/write?interval=100ms",
            receiver.addr
        )],
        quiet: true,
        ..Default::default()
    };
    runtime().block_on(async {
        let mut resolved = sloburn::run::resolve(&args, &mut std::io::sink())
            .unwrap()
            .unwrap();
        // A plan the runner refuses: the run fails once its outputs have started.
        resolved.spec.executor = sloburn::config::spec::Executor::ConstantArrivalRate {
            rate: f64::NAN,
            duration: Duration::from_secs(1),
            pre_allocated_vus: 1,
            max_vus: 1,
        };
        let err = match sloburn::run::execute(&args, resolved, false).await {
            Ok(_) => panic!("a NaN rate ran"),
            Err(e) => e,
        };
        assert!(err.to_string().contains("rate must be"), "{err:#}");
        // The runtime goes on, as a daemon's would: a pusher left behind pushes every 100 ms.
        let at_error = pushes.load(Relaxed);
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(
            pushes.load(Relaxed),
            at_error,
            "pushes went on after the run returned its error"
        );
    });
}
