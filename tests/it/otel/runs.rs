//! The runner's hook, end to end: the real `sloburn run` with a `telemetry:` section traces its
//! load against `sloburn target`, exports to the real OTLP receiver, and the target sees the
//! `traceparent` of each traced request.

use super::Receiver;
use crate::support::{BackgroundTarget, all_output, get_blocking, sloburn, write_config};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::collections::BTreeSet;

const Q_SECRET: &str = "q-s3cr3t-Ab12";
const H_SECRET: &str = "h-s3cr3t-Cd34";

fn config(endpoint: &str, ratio: f64, addr: std::net::SocketAddr) -> String {
    format!(
        r#"telemetry:
  otlp: {{ endpoint: "{endpoint}", timeout: 2s }}
  traces: {{ sample_ratio: {ratio}, schedule_delay: 100ms, max_queue_size: 8192 }}
targets:
  api:
    url: "http://{addr}/api/${{env:Q_SECRET}}/orders?latency=1ms"
    headers: {{ Authorization: "Bearer ${{env:H_SECRET}}" }}
journeys:
  checkout:
    target: api
    steps:
      - {{ name: login, path: /login }}
      - {{ name: pay, path: "/pay?status=503", checks: [ {{ status: 200 }} ] }}
profiles:
  single: {{ target: api, executor: shared-iterations, vus: 2, iterations: 50 }}
  walk: {{ journey: checkout, executor: shared-iterations, vus: 2, iterations: 20 }}
  many: {{ target: api, executor: shared-iterations, vus: 8, iterations: 5000, max_duration: 60s }}
  steady: {{ target: api, executor: constant-arrival-rate, rate: 400/s, duration: 4s, pre_allocated_vus: 20, max_vus: 100 }}
"#
    )
}

fn run(dir: &std::path::Path, profile: &str, extra: &[&str]) -> std::process::Output {
    sloburn()
        .arg("run")
        .arg(dir.join("sloburn.yaml"))
        .args(["--profile", profile])
        .args(extra)
        .env("Q_SECRET", Q_SECRET)
        .env("H_SECRET", H_SECRET)
        .output()
        .unwrap()
}

fn traceparents(target: &BackgroundTarget) -> Vec<String> {
    let (_, body) = get_blocking(&format!("http://{}/stats", target.addr));
    let v: Value = serde_json::from_str(&body).unwrap();
    v["traceparents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_traced_run_sends_one_client_span_per_request_and_the_target_gets_its_traceparent() {
    let receiver = Receiver::start();
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    write_config(dir.path(), &config(&endpoint, 1.0, target.addr));
    let out = run(dir.path(), "single", &[]);
    assert!(out.status.success(), "{}", all_output(&out));
    assert!(
        all_output(&out).contains("telemetry: 101 spans exported, 0 dropped"),
        "{}",
        all_output(&out)
    );
    let all = receiver.spans(101);
    let raw = receiver.raw();
    assert!(
        !raw.contains(Q_SECRET) && !raw.contains(H_SECRET),
        "a secret reached a span"
    );
    let clients: Vec<&Value> = all.iter().filter(|s| s["kind"] == 3).collect();
    let iterations: Vec<&Value> = all.iter().filter(|s| s["name"] == "iteration").collect();
    let runs: Vec<&Value> = all.iter().filter(|s| s["name"] == "run single").collect();
    assert_eq!((clients.len(), iterations.len(), runs.len()), (50, 50, 1));
    let trace = runs[0]["trace_id"].as_str().unwrap();
    let run_id = runs[0]["span_id"].as_str().unwrap();
    assert_eq!(
        runs[0]["attributes"]["sloburn.executor"],
        "shared-iterations"
    );
    assert_eq!(runs[0]["attributes"]["sloburn.result"], "passed");
    let iteration_ids: BTreeSet<&str> = iterations
        .iter()
        .map(|i| {
            assert_eq!(i["parent_span_id"], run_id);
            i["span_id"].as_str().unwrap()
        })
        .collect();
    let mut client_ids = BTreeSet::new();
    for c in &clients {
        assert_eq!(c["trace_id"], trace);
        assert!(iteration_ids.contains(c["parent_span_id"].as_str().unwrap()));
        let a = &c["attributes"];
        assert_eq!(a["http.request.method"], "GET");
        assert_eq!(a["http.response.status_code"], 200);
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(a["server.port"], i64::from(target.addr.port()));
        assert_eq!(a["network.protocol.version"], "1.1");
        let url = a["url.full"].as_str().unwrap();
        // As written, the reference kept; the query's value redacted.
        assert!(
            url.starts_with(&format!(
                "http://{}/api/${{env:Q_SECRET}}/orders?latency=",
                target.addr
            )),
            "{url}"
        );
        client_ids.insert(c["span_id"].as_str().unwrap().to_string());
    }
    // What the target received: the same trace, each request's own client span as parent.
    let seen = traceparents(&target);
    assert_eq!(seen.len(), 50);
    for tp in &seen {
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!((parts[0], parts[1], parts[3]), ("00", trace, "01"), "{tp}");
        assert!(
            client_ids.remove(parts[2]),
            "{tp}: parent is no client span"
        );
    }
    assert!(client_ids.is_empty());
}

#[test]
fn journey_iterations_nest_their_steps_and_a_failed_check_is_an_error_status() {
    let receiver = Receiver::start();
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    write_config(dir.path(), &config(&endpoint, 1.0, target.addr));
    let out = run(dir.path(), "walk", &[]);
    assert!(out.status.success(), "{}", all_output(&out));
    let all = receiver.spans(1 + 20 + 40);
    let iterations: Vec<&Value> = all
        .iter()
        .filter(|s| s["name"] == "iteration checkout")
        .collect();
    assert_eq!(iterations.len(), 20);
    let ids: BTreeSet<&str> = iterations
        .iter()
        .map(|i| i["span_id"].as_str().unwrap())
        .collect();
    let clients: Vec<&Value> = all.iter().filter(|s| s["kind"] == 3).collect();
    assert_eq!(clients.len(), 40);
    for c in &clients {
        assert!(ids.contains(c["parent_span_id"].as_str().unwrap()));
        match c["attributes"]["sloburn.step"].as_str() {
            Some("login") => assert_ne!(c["status"]["code"], 2, "{c}"),
            Some("pay") => {
                assert_eq!(c["status"]["code"], 2, "error status: {c}");
                assert!(
                    c["status"]["message"].as_str().unwrap().contains("status"),
                    "{c}"
                );
                assert_eq!(c["attributes"]["http.response.status_code"], 503);
            }
            other => panic!("step {other:?}"),
        }
    }
}

#[test]
fn a_tenth_of_5000_requests_is_traced_within_two_points() {
    let receiver = Receiver::start();
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    write_config(dir.path(), &config(&endpoint, 0.1, target.addr));
    let out = run(dir.path(), "many", &[]);
    assert!(out.status.success(), "{}", all_output(&out));
    let text = all_output(&out);
    let exported: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("telemetry: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no telemetry line: {text}"));
    let received = target.stats().traceparents_received;
    assert!((400..=600).contains(&received), "{received} of 5000 traced");
    // Each traced iteration is two spans (iteration, request), plus the run's.
    assert_eq!(exported, 2 * received + 1, "{text}");
}

#[test]
fn a_dead_collector_costs_the_load_nothing_and_its_spans_are_counted_as_dropped() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let rate = |profile_cfg: String| {
        write_config(dir.path(), &profile_cfg);
        let export = dir.path().join("summary.json");
        let out = run(
            dir.path(),
            "steady",
            &["--summary-export", export.to_str().unwrap()],
        );
        assert!(out.status.success(), "{}", all_output(&out));
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
        (
            v["metrics"]["http_reqs"]["count"].as_f64().unwrap(),
            all_output(&out),
        )
    };
    let with_tracing = config(&endpoint, 1.0, target.addr);
    let without: String = with_tracing
        .lines()
        .filter(|l| {
            !l.starts_with("telemetry:") && !l.starts_with("  otlp:") && !l.starts_with("  traces:")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let (off, _) = rate(without);
    let (down, text) = rate(with_tracing);
    assert!(
        (down / off - 1.0).abs() <= 0.02,
        "{down} requests with the collector down vs {off}"
    );
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("telemetry: 0 spans exported, "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no telemetry line: {text}"));
    assert!(
        dropped as f64 >= down,
        "{dropped} dropped for {down} traced requests"
    );
}

/// A daemon with `telemetry:` traces its scheduled runs: its OpenMetrics buckets carry the
/// trace ids of requests whose spans reached the receiver; the classic format carries none.
#[test]
fn a_serving_daemon_puts_exported_trace_ids_on_its_openmetrics_buckets() {
    use crate::support::{Daemon, daemon_config, eventually, get_blocking_with};
    let receiver = Receiver::start();
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let profiles = "  canary:\n    target: api\n    every: 1h\n    run_on_start: true\n    \
                    executor: shared-iterations\n    vus: 1\n    iterations: 30\n";
    let slos = "  api-availability:\n    target: api\n    sli: availability\n    objective: 99\n";
    let config = format!(
        "telemetry:\n  otlp: {{ endpoint: \"http://127.0.0.1:{}\", timeout: 2s }}\n  traces: {{ sample_ratio: 1.0, schedule_delay: 100ms }}\n{}",
        receiver.port,
        daemon_config(target.addr, &dir.path().join("data"), profiles, slos)
    );
    let path = write_config(dir.path(), &config);
    let d = Daemon::start(&path, &["--no-watch"]);
    let mut accept = http::HeaderMap::new();
    accept.insert(
        "accept",
        http::HeaderValue::from_static("application/openmetrics-text; version=1.0.0"),
    );
    let url = format!("{}/metrics", d.base);
    let text = eventually(std::time::Duration::from_secs(20), || {
        let (_, _, m) = get_blocking_with(&url, accept.clone());
        m.lines()
            .any(|l| {
                l.starts_with("sloburn_http_req_duration_seconds_bucket")
                    && l.contains(" # {trace_id=\"")
            })
            .then_some(m)
    })
    .expect("no exemplar on the OpenMetrics buckets");
    let ids: BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.split("trace_id=\"").nth(1))
        .filter_map(|r| r.split('"').next())
        .map(str::to_string)
        .collect();
    let exported: BTreeSet<String> = receiver
        .spans(31)
        .iter()
        .filter(|s| s["kind"] == 3)
        .map(|s| s["trace_id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !ids.is_empty() && ids.is_subset(&exported),
        "{ids:?} vs {exported:?}"
    );
    let (_, _, classic) = get_blocking_with(&url, http::HeaderMap::new());
    assert!(!classic.contains("trace_id"));
}
