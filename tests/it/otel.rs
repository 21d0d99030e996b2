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
    Exporter, OtlpConfig, Protocol, Sampler, StepDesc, TelemetryConfig, Tracer, TracesConfig, spans,
};
use tokio_util::sync::CancellationToken;

/// Exemplars, the daemon's own spans, dashboards, config: the surfaces around the spans.
mod surfaces;

/// `sloburn run` with `telemetry:`: the runner hook end to end.
mod runs;

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
        Receiver::start_with(&[])
    }

    /// `args` after the output file: `--grpc` for OTLP/gRPC.
    fn start_with(args: &[&str]) -> Receiver {
        crate::support::install_otel_test_tools();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("spans.jsonl");
        let mut child = Command::new("python3")
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/it/otel/receiver.py"
            ))
            .arg(&out)
            .args(args)
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

/// An exporter to `endpoint` and the load tracer on it.
fn tracing_to(endpoint: String, traces: &TracesConfig) -> (Exporter, Tracer) {
    let exporter = Exporter::start(&config(endpoint, traces.clone())).unwrap();
    let tracer = Tracer::new(exporter.tracer(spans::SCOPE), traces);
    (exporter, tracer)
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
    let (exporter, tracer) = tracing_to(endpoint, &traces);
    // As written in config: the URL's user-info and query hold secrets (the worst case; a
    // real display_url keeps `${env:..}` references instead).
    let display = format!(
        "http://{SECRET_USER}:pw@{}/api/orders?api_key={SECRET_QUERY}",
        target.addr
    );

    let steps = ["login", "pay"].map(|step| StepDesc {
        method: "get",
        display_url: &display,
        step: Some(step),
    });
    let run = tracer.run_span("canary", "constant-arrival-rate", steps);
    let client = client();
    let mut conn = client.conn();
    const ITERATIONS: usize = 4;
    let mut sent = 0;
    for _ in 0..ITERATIONS {
        let mut iter = run
            .iteration(Some("checkout"))
            .expect("ratio 1 samples all");
        for (step, query, failed_check) in
            [(0, "", None), (1, "?status=503", Some("status is 200"))]
        {
            let span = iter.request(step);
            let mut req = request(target.addr, query);
            span.inject(&mut req.headers);
            let out = conn.send(&req).await;
            assert!(out.error.is_none(), "{:?}", out.error);
            span.finish(&out, failed_check);
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
    let (exporter, tracer) = tracing_to(format!("http://127.0.0.1:{}", receiver.port), &traces);
    let run = tracer.run_span(
        "p",
        "shared-iterations",
        [StepDesc {
            method: "GET",
            display_url: "http://t/",
            step: None,
        }],
    );
    let client = client();
    let mut conn = client.conn();
    for _ in 0..5 {
        let mut iter = run.iteration(None).unwrap();
        let span = iter.request(0);
        assert!(span.traceparent().is_none());
        let mut req = request(target.addr, "");
        span.inject(&mut req.headers);
        assert!(req.headers.get("tracestate").is_none());
        let out = conn.send(&req).await;
        span.finish(&out, None);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_endpoint_exports_over_otlp_grpc() {
    let receiver = Receiver::start_with(&["--grpc"]);
    let traces = TracesConfig {
        sample_ratio: 1.0,
        schedule_delay: Duration::from_millis(100),
        ..TracesConfig::default()
    };
    let mut cfg = config(
        format!("grpc://127.0.0.1:{}", receiver.port),
        traces.clone(),
    );
    cfg.otlp.protocol = Some(Protocol::Grpc);
    let exporter = Exporter::start(&cfg).unwrap();
    let tracer = Tracer::new(exporter.tracer(spans::SCOPE), &traces);
    let run = tracer.run_span(
        "g",
        "constant-vus",
        [StepDesc {
            method: "POST",
            display_url: "http://svc:8080/x",
            step: Some("s"),
        }],
    );
    let mut iter = run.iteration(Some("j")).unwrap();
    let span = iter.request(0);
    let mut out = sloburn::http::Outcome {
        status: Some(204),
        ..Default::default()
    };
    out.phases.waiting = Duration::from_millis(3);
    span.finish(&out, None);
    iter.finish();
    run.finish("passed");
    flush(&exporter).await;
    let got = receiver.spans(3);
    assert_eq!(got.len(), 3, "{got:#?}");
    let req = got
        .iter()
        .find(|s| s["kind"] == 3)
        .expect("the client span");
    assert_eq!(attr(req, "http.request.method"), "POST");
    assert_eq!(attr(req, "http.response.status_code"), 204);
    assert_eq!(attr(req, "server.port"), 8080);
    assert_eq!(exporter.stats().exported(), 3);
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
    let (exporter, tracer) = tracing_to(endpoint, &traces);
    let stats = exporter.stats().clone();
    let run = tracer.run_span(
        "p",
        "constant-arrival-rate",
        [StepDesc {
            method: "GET",
            display_url: "http://t/",
            step: None,
        }],
    );
    let client = client();
    let mut conn = client.conn();
    let (mut ok, mut sampled, mut max_in_flight) = (0, 0, 0);
    for _ in 0..LOAD_ITERATIONS {
        let mut iter = run.iteration(None);
        let span = iter.as_mut().map(|i| i.request(0));
        let mut req = request(target.addr, "");
        if let Some(s) = &span {
            s.inject(&mut req.headers);
        }
        let out = conn.send(&req).await;
        ok += usize::from(out.status == Some(200));
        if let (Some(s), Some(i)) = (span, iter) {
            s.finish(&out, None);
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
