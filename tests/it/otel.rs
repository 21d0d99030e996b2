//! OpenTelemetry (issue 14), through the library's `telemetry` API as the runner will call it:
//! real requests with `sloburn::http::Client` to an in-process `sloburn target` on 127.0.0.1,
//! spans exported over OTLP/HTTP to a real receiver (`otel/receiver.py`: PyPI's
//! `opentelemetry-proto` decodes every body; installed by scripts/install-otel-test-tools.sh).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue, Method};
use serde_json::Value;
use sloburn::http::{Client, ClientOptions, HostsFile, RequestSpec, Resolver, ResolverConfig};
use sloburn::target::{TargetOptions, spawn};
use sloburn::telemetry::{
    Exporter, OtlpConfig, Protocol, Sampler, TelemetryConfig, Tracer, TracesConfig, spans,
};
use tokio_util::sync::CancellationToken;

const SECRET_HEADER: &str = "Bearer hdr-s3cr3t-7f1c";
const SECRET_QUERY: &str = "qry-s3cr3t-91ab";
const SECRET_USER: &str = "usr-s3cr3t-55aa";

/// The receiver as a child process, killed on drop.
struct Receiver {
    child: Child,
    port: u16,
    out: PathBuf,
    _dir: tempfile::TempDir,
}

impl Receiver {
    fn start() -> Receiver {
        let status = Command::new("bash")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/scripts/install-otel-test-tools.sh"
            ))
            .stdout(Stdio::null())
            .status()
            .expect("install script runs");
        assert!(
            status.success(),
            "scripts/install-otel-test-tools.sh failed"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("spans.jsonl");
        let mut child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/it/otel/receiver.py"
            ))
            .arg(&out)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts the receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver prints its port");
        Receiver {
            child,
            port,
            out,
            _dir: dir,
        }
    }

    /// The decoded spans, once at least `n` arrived (bounded wait: 20 s).
    fn spans(&self, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            let spans: Vec<Value> = text
                .lines()
                .map(|l| serde_json::from_str(l).expect("json line"))
                .collect();
            assert!(
                spans.iter().all(|s| s.get("error").is_none()),
                "the receiver could not decode a body: {text}"
            );
            if spans.len() >= n || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn raw(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(endpoint: String, traces: TracesConfig) -> TelemetryConfig {
    TelemetryConfig {
        otlp: OtlpConfig {
            endpoint: Some(endpoint),
            protocol: Some(Protocol::HttpProtobuf),
            headers: vec![],
            timeout: Some(Duration::from_secs(2)),
        },
        traces,
        resource: vec![("deployment.environment".into(), "otel-test".into())],
    }
}

fn client() -> Client {
    let config = ResolverConfig {
        nameservers: vec![],
        ..ResolverConfig::default()
    };
    let resolver = Resolver::new(config, HostsFile::parse("127.0.0.1 localhost\n"));
    Client::new(ClientOptions::default(), Arc::new(resolver))
}

fn request(addr: SocketAddr, query: &str) -> RequestSpec {
    let mut headers = HeaderMap::new();
    let mut auth = HeaderValue::from_static(SECRET_HEADER);
    auth.set_sensitive(true);
    headers.insert("authorization", auth);
    RequestSpec {
        method: Method::GET,
        uri: format!("http://{addr}/api/orders{query}").parse().unwrap(),
        headers,
        body: bytes::Bytes::new(),
    }
}

/// Flushes on a blocking thread (the SDK's flush waits for its export thread).
async fn flush(exporter: &Exporter) {
    let provider = exporter.provider().clone();
    tokio::task::spawn_blocking(move || provider.force_flush())
        .await
        .unwrap()
        .ok();
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_spans_reach_a_real_otlp_receiver_and_match_the_targets_traceparent() {
    let receiver = Receiver::start();
    let stop = CancellationToken::new();
    let target = spawn(TargetOptions::default(), stop.clone()).await.unwrap();
    let traces = TracesConfig {
        sample_ratio: 1.0,
        tracestate: Some("sloburn=canary".into()),
        schedule_delay: Duration::from_millis(100),
        ..TracesConfig::default()
    };
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let exporter = Exporter::start(&config(endpoint, traces.clone())).unwrap();
    let tracer = Tracer::new(exporter.tracer(spans::SCOPE), &traces);
    // As written in config: the URL's user-info and query hold secrets (the worst case; a
    // real display_url keeps `${env:..}` references instead).
    let display = format!(
        "http://{SECRET_USER}:pw@{}/api/orders?api_key={SECRET_QUERY}",
        target.addr
    );

    let run = tracer.run_span("canary", "constant-arrival-rate");
    let client = client();
    let mut conn = client.conn();
    const ITERATIONS: usize = 4;
    let mut sent = 0;
    for _ in 0..ITERATIONS {
        let mut iter = run
            .iteration(Some("checkout"))
            .expect("ratio 1 samples all");
        for (step, query, failed_check) in [
            ("login", "", None),
            ("pay", "?status=503", Some("status is 200")),
        ] {
            let span = iter.request(Some(step));
            let mut req = request(target.addr, query);
            span.inject(&mut req.headers);
            let out = conn.send(&req).await;
            assert!(out.error.is_none(), "{:?}", out.error);
            span.finish(&out, "get", &display, failed_check);
            sent += 1;
        }
        iter.finish();
    }
    run.finish("failed");
    flush(&exporter).await;

    let all = receiver.spans(1 + ITERATIONS + sent);
    let raw = receiver.raw();
    for secret in [
        SECRET_HEADER,
        SECRET_QUERY,
        SECRET_USER,
        "hdr-s3cr3t",
        "pw@",
    ] {
        assert!(!raw.contains(secret), "a secret reached a span: {secret}");
    }
    let runs: Vec<&Value> = all.iter().filter(|s| s["name"] == "run canary").collect();
    let iters: Vec<&Value> = all
        .iter()
        .filter(|s| s["name"] == "iteration checkout")
        .collect();
    let reqs: Vec<&Value> = all.iter().filter(|s| s["kind"] == 3).collect();
    assert_eq!(runs.len(), 1, "{all:#?}");
    assert_eq!(iters.len(), ITERATIONS);
    assert_eq!(reqs.len(), sent, "one CLIENT span per request");
    assert_eq!(all.len(), 1 + ITERATIONS + sent);

    // Run → iteration → request, one trace.
    let run = runs[0];
    let trace = run["trace_id"].as_str().unwrap();
    assert_eq!(run["parent_span_id"], "");
    assert_eq!(attr(run, "sloburn.profile"), "canary");
    assert_eq!(attr(run, "sloburn.executor"), "constant-arrival-rate");
    assert_eq!(attr(run, "sloburn.result"), "failed");
    assert_eq!(run["resource"]["service.name"], "sloburn");
    assert_eq!(run["resource"]["deployment.environment"], "otel-test");
    assert_eq!(
        run["resource"]["service.version"],
        env!("CARGO_PKG_VERSION")
    );
    for it in &iters {
        assert_eq!(it["trace_id"], trace);
        assert_eq!(it["parent_span_id"], run["span_id"]);
        assert_eq!(attr(it, "sloburn.journey"), "checkout");
        assert_eq!(
            attr(it, "sloburn.steps"),
            &serde_json::json!(["login", "pay"])
        );
    }
    let iter_ids: Vec<&Value> = iters.iter().map(|s| &s["span_id"]).collect();

    // The target saw exactly the sampled requests' traceparents: same trace id, the client
    // span as parent.
    let received = target.traceparents();
    assert_eq!(received.len(), sent);
    assert_eq!(target.stats().traceparents_received, sent as u64);
    for r in &reqs {
        assert_eq!(r["trace_id"], trace);
        assert!(iter_ids.contains(&&r["parent_span_id"]), "{r}");
        let tp = format!(
            "00-{}-{}-01",
            r["trace_id"].as_str().unwrap(),
            r["span_id"].as_str().unwrap()
        );
        assert!(received.contains(&tp), "{tp} not in {received:?}");
        let (t, parent, sampled) = sloburn::telemetry::propagation::parse_traceparent(&tp).unwrap();
        assert!(sampled);
        assert_eq!(t.to_string(), trace);
        assert_eq!(parent.to_string(), r["span_id"].as_str().unwrap());

        assert_eq!(r["name"], "GET");
        assert_eq!(attr(r, "http.request.method"), "GET");
        assert_eq!(attr(r, "server.address"), "127.0.0.1");
        assert_eq!(attr(r, "server.port"), target.addr.port());
        assert_eq!(attr(r, "network.protocol.version"), "1.1");
        assert_eq!(
            attr(r, "url.full"),
            &Value::from(format!(
                "http://REDACTED:REDACTED@{}/api/orders?api_key=REDACTED",
                target.addr
            ))
        );
        let events: Vec<&str> = r["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            events,
            [
                "dns",
                "connecting",
                "tls",
                "sending",
                "waiting",
                "receiving"
            ]
        );
        match attr(r, "sloburn.step").as_str().unwrap() {
            "login" => {
                assert_eq!(attr(r, "http.response.status_code"), 200);
                assert!(attr(r, "error.type").is_null());
                assert_eq!(r["status"]["code"], 0, "unset");
            }
            "pay" => {
                assert_eq!(attr(r, "http.response.status_code"), 503);
                assert_eq!(attr(r, "error.type"), "503");
                assert_eq!(r["status"]["code"], 2, "error");
                assert!(
                    r["status"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("status is 200"),
                    "{r}"
                );
            }
            other => panic!("unexpected step {other}"),
        }
    }
    // The stream reached the collector whole.
    assert_eq!(exporter.stats().dropped(), 0);
    assert_eq!(exporter.stats().exported(), all.len() as u64);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn propagate_false_sends_nothing_to_the_target() {
    let receiver = Receiver::start();
    let stop = CancellationToken::new();
    let target = spawn(TargetOptions::default(), stop.clone()).await.unwrap();
    let traces = TracesConfig {
        sample_ratio: 1.0,
        propagate: false,
        tracestate: Some("sloburn=canary".into()),
        ..TracesConfig::default()
    };
    let exporter = Exporter::start(&config(
        format!("http://127.0.0.1:{}", receiver.port),
        traces.clone(),
    ))
    .unwrap();
    let tracer = Tracer::new(exporter.tracer(spans::SCOPE), &traces);
    let run = tracer.run_span("p", "shared-iterations");
    let client = client();
    let mut conn = client.conn();
    for _ in 0..5 {
        let mut iter = run.iteration(None).unwrap();
        let span = iter.request(None);
        assert!(span.traceparent().is_none());
        let mut req = request(target.addr, "");
        span.inject(&mut req.headers);
        assert!(req.headers.get("tracestate").is_none());
        let out = conn.send(&req).await;
        span.finish(&out, "GET", "http://t/", None);
        iter.finish();
    }
    run.finish("passed");
    flush(&exporter).await;
    // The spans are still made and exported; only the target hears nothing.
    assert_eq!(receiver.spans(11).len(), 11);
    assert_eq!(target.stats().traceparents_received, 0);
    assert!(target.traceparents().is_empty());
    stop.cancel();
}

#[test]
fn sample_ratio_a_tenth_over_5000_decisions_is_within_two_points() {
    let sampler = Sampler::new(0.1);
    let sampled = (0..5000).filter(|_| sampler.sample()).count();
    // ±2 percentage points of 5,000: 400..=600.
    assert!((400..=600).contains(&sampled), "{sampled} of 5000");
    assert_eq!((0..5000).filter(|_| Sampler::new(0.0).sample()).count(), 0);
    assert_eq!(
        (0..5000).filter(|_| Sampler::new(1.0).sample()).count(),
        5000
    );
}

/// A port that was just bound and closed: nothing listens there.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// What a 5,000-iteration load at `sample_ratio: 0.1` did with a collector at `endpoint`.
struct Load {
    ok: usize,
    sampled: usize,
    traceparents: u64,
    max_in_flight: u64,
    stats: Arc<sloburn::telemetry::ExportStats>,
}

const QUEUE: usize = 64;
const LOAD_ITERATIONS: usize = 5000;

async fn load_against(endpoint: String) -> Load {
    let stop = CancellationToken::new();
    let target = spawn(TargetOptions::default(), stop.clone()).await.unwrap();
    let traces = TracesConfig {
        sample_ratio: 0.1,
        max_queue_size: QUEUE,
        max_export_batch_size: 32,
        schedule_delay: Duration::from_millis(200),
        ..TracesConfig::default()
    };
    let exporter = Exporter::start(&config(endpoint, traces.clone())).unwrap();
    let stats = exporter.stats().clone();
    let tracer = Tracer::new(exporter.tracer(spans::SCOPE), &traces);
    let run = tracer.run_span("p", "constant-arrival-rate");
    let client = client();
    let mut conn = client.conn();
    let (mut ok, mut sampled, mut max_in_flight) = (0, 0, 0);
    for _ in 0..LOAD_ITERATIONS {
        let mut iter = run.iteration(None);
        let span = iter.as_mut().map(|i| i.request(None));
        let mut req = request(target.addr, "");
        if let Some(s) = &span {
            s.inject(&mut req.headers);
        }
        let out = conn.send(&req).await;
        ok += usize::from(out.status == Some(200));
        if let (Some(s), Some(i)) = (span, iter) {
            s.finish(&out, "GET", "http://t/", None);
            i.finish();
            sampled += 1;
        }
        max_in_flight = max_in_flight.max(stats.in_flight.load(Ordering::Relaxed));
    }
    run.finish("passed");
    let traceparents = target.stats().traceparents_received;
    // Shutting down tries to export what is queued; the collector is not there for it.
    tokio::task::spawn_blocking(move || exporter.shutdown(Duration::from_secs(10)))
        .await
        .unwrap();
    stop.cancel();
    Load {
        ok,
        sampled,
        traceparents,
        max_in_flight,
        stats,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collector_down_drops_and_counts_spans_and_the_load_goes_on() {
    let l = load_against(format!("http://127.0.0.1:{}", closed_port())).await;
    // Every request was answered: tracing into a dead collector cost the load nothing.
    assert_eq!(l.ok, LOAD_ITERATIONS);
    assert!(
        (400..=600).contains(&l.sampled),
        "{} of {LOAD_ITERATIONS}",
        l.sampled
    );
    assert_eq!(l.traceparents, l.sampled as u64);
    assert!(l.max_in_flight <= QUEUE as u64);
    let ended = 2 * l.sampled as u64 + 1;
    let s = &l.stats;
    assert_eq!(
        s.queued.load(Ordering::Relaxed) + s.dropped_queue_full.load(Ordering::Relaxed),
        ended
    );
    // Refused exports are counted as lost, span by span; nothing reached a collector.
    assert_eq!(s.dropped(), ended);
    assert_eq!(s.exported(), 0);
    assert_eq!(s.in_flight.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_collector_fills_the_bounded_queue_and_later_spans_are_dropped_at_once() {
    // Accepted by the kernel (the backlog), never read: every export waits for its timeout.
    let hang = TcpListener::bind("127.0.0.1:0").unwrap();
    let l = load_against(format!("http://{}", hang.local_addr().unwrap())).await;
    assert_eq!(l.ok, LOAD_ITERATIONS);
    assert!(l.max_in_flight <= QUEUE as u64, "{}", l.max_in_flight);
    let s = &l.stats;
    let ended = 2 * l.sampled as u64 + 1;
    // The export blocked on the collector, the queue filled, the rest was dropped at once.
    assert!(s.dropped_queue_full.load(Ordering::Relaxed) > 0);
    assert_eq!(
        s.queued.load(Ordering::Relaxed) + s.dropped_queue_full.load(Ordering::Relaxed),
        ended
    );
    assert_eq!(s.exported(), 0);
    drop(hang);
}

/// A finished request of `waiting` milliseconds, as the client reports it.
fn answered(waiting_ms: u64) -> sloburn::http::Outcome {
    let mut o = sloburn::http::Outcome {
        status: Some(200),
        ..Default::default()
    };
    o.phases.waiting = Duration::from_millis(waiting_ms);
    o
}

#[test]
fn exemplars_ride_on_openmetrics_buckets_and_leave_the_classic_format_as_it_was() {
    use opentelemetry::trace::{SpanId, TraceId};
    use sloburn::metrics::Metrics;
    let m = Metrics::new("0.1.0");
    let p = m.profile("checkout", "canary", &[0.01, 0.1, 0.3, 1.0], &[]);
    for ms in [4, 95, 250] {
        p.observe(&answered(ms), Duration::ZERO, &[]);
    }
    let classic_before = m.encode_with(false, &Default::default());
    let om_before = m.encode_with(true, &Default::default());
    assert!(
        !om_before.contains(" # {"),
        "no exemplar before a sampled request"
    );

    let t1 = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let s1 = SpanId::from_hex("00f067aa0ba902b7").unwrap();
    let t2 = TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap();
    let s2 = SpanId::from_hex("b7ad6b7169203331").unwrap();
    p.observe(&answered(95), Duration::ZERO, &[]);
    p.exemplar(0.095, t1, s1);
    // The latest sampled request of a bucket wins.
    p.observe(&answered(250), Duration::ZERO, &[]);
    p.exemplar(0.25, t1, s1);
    p.observe(&answered(260), Duration::ZERO, &[]);
    p.exemplar(0.26, t2, s2);

    let classic = m.encode_with(false, &Default::default());
    assert!(!classic.contains("trace_id"));
    // Same bytes as a registry that never saw a sampled request.
    let plain = Metrics::new("0.1.0");
    let q = plain.profile("checkout", "canary", &[0.01, 0.1, 0.3, 1.0], &[]);
    for ms in [4, 95, 250, 95, 250, 260] {
        q.observe(&answered(ms), Duration::ZERO, &[]);
    }
    assert_eq!(classic, plain.encode_with(false, &Default::default()));
    assert_ne!(classic, classic_before);
    let (ok, said) = crate::support::promtool_check_metrics(&classic);
    assert!(ok && said.is_empty(), "promtool said:\n{said}");

    let om = m.encode_with(true, &Default::default());
    let bucket = |le: &str| {
        om.lines()
            .find(|l| {
                l.starts_with("sloburn_http_req_duration_seconds_bucket{")
                    && l.contains(&format!("le=\"{le}\""))
            })
            .unwrap()
            .to_string()
    };
    assert!(
        bucket("0.1").contains(
            "} 3 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\",span_id=\"00f067aa0ba902b7\"} 0.095 "
        ),
        "{}",
        bucket("0.1")
    );
    assert!(
        bucket("0.3").contains(
            "} 6 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\",span_id=\"b7ad6b7169203331\"} 0.26 "
        ),
        "{}",
        bucket("0.3")
    );
    assert!(!bucket("0.01").contains(" # "));
    assert!(!bucket("1.0").contains(" # "));
    // Only the request-duration histogram carries them.
    assert_eq!(om.matches("trace_id=").count(), 2);
    assert!(om.ends_with("# EOF\n"));
}

#[test]
fn the_daemons_run_reload_and_store_flush_are_spans_and_its_logs_carry_the_trace_id() {
    use crate::support::{
        AVAILABILITY_SLO, BackgroundTarget, Daemon, daemon_config, eventually, write_config,
    };
    let receiver = Receiver::start();
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let quick = "  quick:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n";
    let mut text = daemon_config(
        target.addr,
        &dir.path().join("data"),
        quick,
        AVAILABILITY_SLO,
    );
    text.push_str(&format!(
        "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:{}\n    headers:\n      Authorization: \"Bearer ${{env:TEST_ADMIN_TOKEN}}\"\n  traces:\n    sample_ratio: 1.0\n    schedule_delay: 100ms\n  resource:\n    deployment.environment: otel-daemon-test\n",
        receiver.port
    ));
    let path = write_config(dir.path(), &text);
    let d = Daemon::start(&path, &[]);
    let named = |name: &str| {
        receiver
            .spans(0)
            .into_iter()
            .find(|s| s["name"] == name && s["scope"] == "sloburn.daemon")
    };
    let run = eventually(Duration::from_secs(30), || named("run")).expect("a run span");
    assert_eq!(attr(&run, "profile"), "quick");
    assert_eq!(
        run["resource"]["deployment.environment"],
        "otel-daemon-test"
    );
    eventually(Duration::from_secs(30), || named("store_flush")).expect("a store flush span");
    d.signal(libc::SIGHUP);
    eventually(Duration::from_secs(30), || named("reload")).expect("a reload span");

    // A log line written inside the run carries the run span's trace id.
    let trace = run["trace_id"].as_str().unwrap().to_string();
    let logged = eventually(Duration::from_secs(10), || {
        d.logs
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains(&trace))
            .cloned()
    });
    assert!(
        logged.is_some(),
        "no log line with trace id {trace}: {:#?}",
        d.logs.lock().unwrap()
    );
    let metrics = d.metrics();
    assert!(
        metrics.contains("sloburn_telemetry_spans_dropped_total{reason=\"export_failed\"} 0"),
        "{metrics}"
    );
    assert!(!receiver.raw().contains(crate::support::ADMIN_TOKEN));
}

#[test]
fn latency_panels_show_exemplars_linked_to_the_traces_datasource() {
    for (file, d) in crate::dashboards::dashboards() {
        if file == "load-runs.json" {
            continue;
        }
        let vars = d["templating"]["list"].as_array().unwrap();
        let traces = vars
            .iter()
            .find(|v| v["name"] == "traces_datasource")
            .unwrap_or_else(|| panic!("{file}: no $traces_datasource"));
        assert_eq!(traces["type"], "datasource", "{file}");
        let with_exemplars: Vec<&Value> = crate::dashboards::panels(&d)
            .into_iter()
            .filter(|p| {
                p["targets"].as_array().into_iter().flatten().any(|t| {
                    t["exemplar"] == true
                        && t["expr"]
                            .as_str()
                            .unwrap_or("")
                            .contains("sloburn_http_req_duration_seconds_bucket")
                })
            })
            .collect();
        assert!(
            !with_exemplars.is_empty(),
            "{file}: no latency panel with exemplars"
        );
        for p in with_exemplars {
            let links = p["fieldConfig"]["defaults"]["links"].as_array().unwrap();
            assert!(
                links.iter().any(|l| {
                    let url = l["url"].as_str().unwrap();
                    url.contains("${traces_datasource}")
                        && url.contains("${__data.fields.trace_id}")
                }),
                "{file}: panel {} has no trace link",
                p["title"]
            );
        }
    }
}

#[test]
fn the_telemetry_section_is_validated_with_positions() {
    let dir = tempfile::tempdir().unwrap();
    let base = "targets:\n  api:\n    url: http://127.0.0.1:1/\n";
    let good = format!(
        "{base}telemetry:\n  otlp:\n    endpoint: grpc://collector:4317\n    headers: {{ Authorization: \"Bearer ${{env:TEST_ADMIN_TOKEN}}\" }}\n  traces:\n    sample_ratio: 0.25\n    propagate: false\n    tracestate: \"sloburn=canary\"\n  resource: {{ service.name: canary-gen, deployment.environment: prod }}\n"
    );
    let cfg = sloburn::config::from_str(&good, "t.yaml", dir.path(), &crate::support::test_env())
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    let t = cfg.telemetry.expect("telemetry section");
    assert_eq!(t.otlp.protocol, Some(Protocol::Grpc));
    assert_eq!(t.otlp.endpoint.as_deref(), Some("grpc://collector:4317"));
    let (name, value) = &t.otlp.headers[0];
    assert_eq!(name, "authorization");
    assert!(value.is_sensitive());
    assert_eq!(
        value.to_str().unwrap(),
        format!("Bearer {}", crate::support::ADMIN_TOKEN)
    );
    assert!(!format!("{value:?}").contains(crate::support::ADMIN_TOKEN));
    assert_eq!(t.traces.sample_ratio, 0.25);
    assert!(!t.traces.propagate);
    assert_eq!(t.traces.tracestate.as_deref(), Some("sloburn=canary"));
    assert_eq!(
        t.resource,
        vec![
            ("service.name".to_string(), "canary-gen".to_string()),
            ("deployment.environment".to_string(), "prod".to_string())
        ]
    );
    let none = sloburn::config::from_str(base, "t.yaml", dir.path(), &crate::support::test_env())
        .unwrap()
        .config;
    assert!(none.telemetry.is_none());

    let bad = format!(
        "{base}telemetry:\n  otlp:\n    endpoint: ftp://collector\n  traces:\n    sample_ratio: 1.5\n    tracestate: \"Bad=1\"\n    sampel_ratio: 0.1\n"
    );
    let err = sloburn::config::from_str(&bad, "t.yaml", dir.path(), &crate::support::test_env())
        .unwrap_err()
        .to_string();
    for want in [
        "t.yaml:6:15: telemetry.otlp.endpoint",
        "t.yaml:8:19: telemetry.traces.sample_ratio: must be between 0 and 1",
        "t.yaml:9:17: telemetry.traces.tracestate",
        "t.yaml:10:5: telemetry.traces.sampel_ratio: unknown field `sampel_ratio` (did you mean `sample_ratio`?)",
    ] {
        assert!(err.contains(want), "missing `{want}` in:\n{err}");
    }
}

/// `/metrics` of an in-process registry, negotiated as the daemon does.
async fn serve_metrics(m: sloburn::metrics::Metrics) -> SocketAddr {
    use axum::http::header::{ACCEPT, CONTENT_TYPE};
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let m = m.clone();
            async move {
                let om = sloburn::metrics::Metrics::wants_openmetrics(
                    headers.get(ACCEPT).and_then(|v| v.to_str().ok()),
                );
                (
                    [(CONTENT_TYPE, sloburn::metrics::Metrics::content_type(om))],
                    m.encode(om),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_stores_the_exemplars_of_exported_request_spans() {
    use crate::support::{Server, free_port, urlencode, wait_ready, which};
    let receiver = Receiver::start();
    let stop = CancellationToken::new();
    let target = spawn(TargetOptions::default(), stop.clone()).await.unwrap();
    let traces = TracesConfig {
        sample_ratio: 1.0,
        schedule_delay: Duration::from_millis(100),
        ..TracesConfig::default()
    };
    let exporter = Exporter::start(&config(
        format!("http://127.0.0.1:{}", receiver.port),
        traces.clone(),
    ))
    .unwrap();
    let tracer = Tracer::new(exporter.tracer(spans::SCOPE), &traces);
    let metrics = sloburn::metrics::Metrics::new("0.1.0");
    let pm = metrics.profile("api", "canary", &[0.0005, 0.001, 0.005, 0.05, 1.0], &[]);
    let scrape = serve_metrics(metrics.clone()).await;

    // What the runner's hook does per sampled request: span, header, request, observe, then
    // the exemplar with the span's ids.
    let run = tracer.run_span("canary", "constant-vus");
    let client = client();
    let mut conn = client.conn();
    for _ in 0..20 {
        let mut iter = run.iteration(None).unwrap();
        let span = iter.request(None);
        let mut req = request(target.addr, "");
        span.inject(&mut req.headers);
        let out = conn.send(&req).await;
        pm.observe(&out, Duration::ZERO, &[]);
        pm.exemplar(
            out.phases.duration().as_secs_f64(),
            span.trace_id(),
            span.span_id(),
        );
        span.finish(&out, "GET", "http://api/", None);
        iter.finish();
    }
    run.finish("passed");
    flush(&exporter).await;
    let exported = receiver.spans(41);
    let client_spans: Vec<(String, String)> = exported
        .iter()
        .filter(|s| s["kind"] == 3)
        .map(|s| {
            (
                s["trace_id"].as_str().unwrap().to_string(),
                s["span_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(client_spans.len(), 20);

    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sloburn\n    static_configs:\n      - targets: [\"{scrape}\"]\n"
    );
    let cfg_path = dir.path().join("prometheus.yml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let port = free_port();
    let mut cmd = Command::new(which("prometheus"));
    cmd.arg(format!("--config.file={}", cfg_path.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--enable-feature=exemplar-storage");
    let prom = Server::spawn(&mut cmd, dir, port);
    let prom_ready = tokio::task::spawn_blocking(move || {
        wait_ready(
            &format!("http://127.0.0.1:{port}/-/ready"),
            port,
            Duration::from_secs(30),
        )
    })
    .await
    .unwrap();
    assert!(prom_ready, "prometheus did not start:\n{}", prom.log_tail());

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let path = format!(
        "/api/v1/query_exemplars?query={}&start={}&end={}",
        urlencode("sloburn_http_req_duration_seconds_bucket"),
        now - 600,
        now + 600
    );
    let prom = Arc::new(prom);
    let p2 = prom.clone();
    let found = tokio::task::spawn_blocking(move || {
        crate::support::eventually(Duration::from_secs(30), || {
            let v = p2.api(&path);
            let ids: Vec<(String, String)> = v["data"]
                .as_array()?
                .iter()
                .flat_map(|series| series["exemplars"].as_array().cloned().unwrap_or_default())
                .map(|e| {
                    (
                        e["labels"]["trace_id"].as_str().unwrap_or("").to_string(),
                        e["labels"]["span_id"].as_str().unwrap_or("").to_string(),
                    )
                })
                .collect();
            (!ids.is_empty()).then_some(ids)
        })
    })
    .await
    .unwrap()
    .unwrap_or_else(|| panic!("no exemplars in Prometheus:\n{}", prom.log_tail()));
    for id in &found {
        assert!(
            client_spans.contains(id),
            "exemplar {id:?} is not an exported client span"
        );
    }
    stop.cancel();
}
