//! Issue 33, part 1: native histograms on `/metrics` in the protobuf exposition, scraped by a
//! real Prometheus with `--enable-feature=native-histograms`; the text formats unchanged.

use crate::support::*;
use prost::Message;
use sloburn::http::{Client, ClientOptions, RequestSpec, Resolver};
use sloburn::metrics::proto::MetricFamily;
use sloburn::target::TargetOptions;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const ITERATIONS: u64 = 300;
const BUCKETS: [f64; 8] = [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128];
const DURATION: &str = "sloburn_http_req_duration_seconds";

/// A daemon config with one run of [`ITERATIONS`] requests on start, then nothing for an hour,
/// so every count is final once the run is done.
fn config(target: std::net::SocketAddr, data: &Path, native: &str) -> String {
    let buckets: Vec<String> = BUCKETS.iter().map(|b| format!("{b}s")).collect();
    format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 5s
{native}storage:
  path: "{data}"
  flush_interval: 1s
targets:
  api:
    url: http://{target}/api
    buckets: [{buckets}]
profiles:
  burst:
    target: api
    every: 1h
    run_on_start: true
    executor: shared-iterations
    vus: 4
    iterations: {ITERATIONS}
"#,
        data = data.display(),
        buckets = buckets.join(", "),
    )
}

/// A target whose latencies spread over several classic buckets.
fn spread_target() -> BackgroundTarget {
    BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(2),
        jitter: Duration::from_millis(6),
        distribution: sloburn::target::Distribution::Exponential,
        ..TargetOptions::default()
    })
}

/// The text exposition once the run is over: every request counted.
fn finished_run(d: &Daemon) -> String {
    eventually(Duration::from_secs(60), || {
        let m = d.metrics();
        let done = metric_sum(&m, "sloburn_iterations_total{") == ITERATIONS as f64
            && metric_sum(&m, &format!("{DURATION}_count{{")) == ITERATIONS as f64;
        done.then_some(m)
    })
    .expect("the run did not finish")
}

/// The protobuf exposition of a daemon, decoded.
pub(crate) fn protobuf_families(base: &str) -> (String, Vec<MetricFamily>) {
    let mut headers = http::HeaderMap::new();
    let accept = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3";
    headers.insert("accept", accept.parse().unwrap());
    let outcome = runtime().block_on(async {
        let client = Client::new(
            ClientOptions {
                timeout: Duration::from_secs(10),
                ..ClientOptions::default()
            },
            Arc::new(Resolver::system()),
        );
        client
            .conn()
            .send(&RequestSpec {
                method: http::Method::GET,
                uri: format!("{base}/metrics").parse().unwrap(),
                headers,
                body: bytes::Bytes::new(),
            })
            .await
    });
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    let content_type = outcome.headers["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    let mut body = &outcome.body[..];
    let mut families = Vec::new();
    while !body.is_empty() {
        families
            .push(MetricFamily::decode_length_delimited(&mut body).expect("a delimited family"));
    }
    (content_type, families)
}

/// Prometheus with native histograms on (it then asks for the protobuf format first).
fn native_prometheus(scrape: &str) -> Server {
    let cfg = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sloburn\n    static_configs:\n      - targets: [\"{scrape}\"]\n"
    );
    Server::prometheus_with_config(&cfg, &["--enable-feature=native-histograms"])
}

/// The first value of `q` equal to `want` within `limit`, else the last one seen.
fn settles_at(prom: &Server, q: &str, want: f64) -> f64 {
    let mut last = f64::NAN;
    eventually(Duration::from_secs(30), || {
        last = prom.scalar(q);
        (last == want).then_some(())
    });
    last
}

#[test]
fn issue_33_a_real_prometheus_reads_native_histograms_that_match_the_classic_ones() {
    let target = spread_target();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let native_cfg = "  native_histograms:\n    schema: 3\n";
    let path = write_config(dir.path(), &config(target.addr, &data, native_cfg));
    let d = Daemon::start(&path, &[]);
    let text = finished_run(&d);
    let (ok, out) = promtool_check_metrics(&text);
    assert!(ok, "promtool: {out}");
    let scrape = d.base.trim_start_matches("http://");
    let native = native_prometheus(scrape);
    let classic = Server::prometheus(scrape, None, "1s", None);
    let sel = "{profile=\"burst\"}";
    let n = ITERATIONS as f64;

    // The protobuf scrape carries counters too, and the native series' count is every request.
    let iterations = settles_at(&native, &format!("sum(sloburn_iterations_total{sel})"), n);
    assert_eq!(iterations, n, "{}", native.log_tail());
    let count = settles_at(
        &native,
        &format!("histogram_count(sum({DURATION}{sel}))"),
        n,
    );
    assert_eq!(count, n, "native count\n{}", native.log_tail());
    let classic_count = settles_at(&classic, &format!("sum({DURATION}_count{sel})"), n);
    assert_eq!(classic_count, n, "classic count");

    // Each quantile lies in the bucket of its own layout that holds the true quantile: the
    // native one within one native bucket (a factor 2^(1/8) at schema 3) of the classic
    // bucket the classic one falls in.
    let base = 2f64.powf(2f64.powi(-3));
    for q in [0.5, 0.9, 0.99] {
        let c = classic.scalar(&format!(
            "histogram_quantile({q}, sum by (le) ({DURATION}_bucket{sel}))"
        ));
        let nq = native.scalar(&format!("histogram_quantile({q}, sum({DURATION}{sel}))"));
        let hi = BUCKETS
            .iter()
            .copied()
            .find(|b| *b >= c)
            .unwrap_or(f64::INFINITY);
        let lo = BUCKETS.iter().copied().rfind(|b| *b < c).unwrap_or(0.0);
        eprintln!("q{q}: classic {c:.6} s, native {nq:.6} s");
        assert!(
            nq > lo / base && nq <= hi * base,
            "q{q}: native {nq} outside ({lo}/{base}, {hi}*{base}] around classic {c}"
        );
    }
    // And sloburn's own p95 of the run (its 0.78 %-wide histogram, as `/api/runs` reports it):
    // Prometheus's answer from the native series is within one schema-3 bucket of it.
    let (_, runs) = crate::support::get_blocking(&format!("{}/api/runs", d.base));
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    let own = runs["runs"][0]["p95_ms"].as_f64().unwrap() / 1000.0;
    let np95 = native.scalar(&format!("histogram_quantile(0.95, sum({DURATION}{sel}))"));
    eprintln!("p95: sloburn {own:.6} s, native {np95:.6} s");
    assert!(
        np95 >= own / base && np95 <= own * base,
        "native p95 {np95} is more than a bucket ({base}x) from sloburn's own {own}"
    );
    // Every duration family is native: corrected, phases and lateness too (iteration
    // durations exist only for journeys; they are the same histogram type).
    for family in [
        "sloburn_http_req_corrected_duration_seconds",
        "sloburn_http_req_phase_seconds",
        "sloburn_iteration_lateness_seconds",
    ] {
        let c = native.query(&format!("histogram_count({family}{sel})"));
        assert!(!c.is_empty(), "{family} is not native");
    }
}

#[test]
fn issue_33_protobuf_carries_the_configured_schema_and_classic_buckets_only_when_asked() {
    let target = spread_target();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let native_cfg = "  native_histograms:\n    schema: 1\n    classic_buckets: false\n";
    let path = write_config(dir.path(), &config(target.addr, &data, native_cfg));
    let d = Daemon::start(&path, &[]);
    let text = finished_run(&d);
    // The text format keeps its classic buckets whatever the protobuf options.
    assert!(text.contains(&format!("{DURATION}_bucket{{")), "{text}");

    let (content_type, families) = protobuf_families(&d.base);
    assert!(
        content_type.starts_with("application/vnd.google.protobuf"),
        "{content_type}"
    );
    let duration = families
        .iter()
        .find(|f| f.name() == DURATION)
        .expect("the duration family");
    let h = duration.metric[0].histogram.as_ref().unwrap();
    assert_eq!(h.schema(), 1);
    assert!(h.bucket.is_empty(), "classic buckets were turned off");
    assert_eq!(h.sample_count(), ITERATIONS);
    // Native counts (deltas summed back up) plus the zero bucket are every request.
    let mut running = 0i64;
    let native_total: i64 = h
        .positive_delta
        .iter()
        .map(|d| {
            running += d;
            running
        })
        .sum();
    assert_eq!(native_total as u64 + h.zero_count(), ITERATIONS);
    let iterations = families
        .iter()
        .find(|f| f.name() == "sloburn_iterations_total")
        .expect("counters are in the protobuf format");
    assert_eq!(
        iterations.metric[0].counter.as_ref().unwrap().value(),
        ITERATIONS as f64
    );
}

#[test]
fn issue_33_an_out_of_range_schema_is_a_positioned_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "server:\n  native_histograms:\n    schema: 9\ntargets:\n  a:\n    url: http://127.0.0.1:1/\n",
    )
    .unwrap();
    let out = sloburn().arg("check").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "bad.yaml:3:13: server.native_histograms.schema: must be a whole number from -4 to 5"
        ),
        "{stdout}"
    );
}

/// The protobuf scrape is streamed as the text is: the chunks put together decode to the same
/// families as the whole exposition, every full chunk ends between families, and a reader that
/// leaves gets no more chunks.
#[test]
fn issue_33_a_streamed_protobuf_exposition_is_the_whole_one_in_family_aligned_chunks() {
    use sloburn::http::{Outcome, Phases};
    use sloburn::metrics::{CHUNK, Format, Metrics};
    let m = Metrics::new("x");
    for i in 0..300u64 {
        let p = m.profile(
            &format!("t{i}"),
            &format!("p{i}"),
            &[0.01, 0.1, 1.0],
            &["status".to_string()],
        );
        for j in 0..20 {
            let o = Outcome {
                phases: Phases {
                    waiting: Duration::from_micros(100 + 997 * (i + j)),
                    ..Phases::default()
                },
                status: Some(200),
                ..Outcome::default()
            };
            p.observe(&o, Duration::ZERO, &[true]);
        }
        m.init_profile(&format!("p{i}"));
    }
    let decode = |mut bytes: &[u8]| {
        let mut names = Vec::new();
        while !bytes.is_empty() {
            let f = MetricFamily::decode_length_delimited(&mut bytes).expect("a family");
            // The process figures are read per call: compare without them.
            if !f.name().starts_with("process_") && !f.name().starts_with("sloburn_runtime_") {
                names.push(f);
            }
        }
        names
    };
    let whole = m.encode_protobuf();
    assert!(whole.len() > 2 * CHUNK, "{} bytes: too few", whole.len());
    let chunks = Arc::new(std::sync::Mutex::new(Vec::<Vec<u8>>::new()));
    let got = chunks.clone();
    m.encode_format_streamed(
        Format::Protobuf,
        Box::new(move |c| {
            got.lock().unwrap().push(c);
            true
        }),
    );
    let chunks = chunks.lock().unwrap();
    assert!(chunks.len() >= 2, "{} chunks", chunks.len());
    for c in &chunks[..chunks.len() - 1] {
        assert!(c.len() >= CHUNK, "{}", c.len());
        // Each chunk decodes on its own: it ends where a family does.
        assert!(!decode(c).is_empty());
    }
    assert_eq!(decode(&chunks.concat()), decode(&whole));
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    m.encode_format_streamed(
        Format::Protobuf,
        Box::new(move |_| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            false
        }),
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
}

/// A sampled request's exemplar rides on its classic bucket, or in the histogram's own
/// exemplars when classic buckets are off.
#[test]
fn issue_33_exemplars_are_in_the_protobuf_histogram() {
    use opentelemetry::trace::{SpanId, TraceId};
    use sloburn::config::NativeOptions;
    use sloburn::http::{Outcome, Phases};
    use sloburn::metrics::Metrics;
    let m = Metrics::new("x");
    let p = m.profile("t", "p", &[0.01, 0.1, 1.0], &[]);
    let o = Outcome {
        phases: Phases {
            waiting: Duration::from_millis(50),
            ..Phases::default()
        },
        status: Some(200),
        ..Outcome::default()
    };
    p.observe(&o, Duration::ZERO, &[]);
    let trace = TraceId::from_bytes([0xab; 16]);
    p.exemplar(0, 0.05, trace, SpanId::from_bytes([0xcd; 8]));
    let histogram = |m: &Metrics| {
        let bytes = m.encode_protobuf();
        let mut rest = &bytes[..];
        loop {
            let f = MetricFamily::decode_length_delimited(&mut rest).expect("the family");
            if f.name() == DURATION {
                return f.metric[0].histogram.clone().unwrap();
            }
        }
    };
    let h = histogram(&m);
    let with: Vec<_> = h.bucket.iter().filter(|b| b.exemplar.is_some()).collect();
    assert_eq!(with.len(), 1, "{h:?}");
    assert_eq!(with[0].upper_bound(), 0.1);
    let x = with[0].exemplar.as_ref().unwrap();
    assert_eq!(x.value(), 0.05);
    assert_eq!(x.label[0].value(), "ab".repeat(16));
    assert_eq!(x.label[1].value(), "cd".repeat(8));
    assert!(h.exemplars.is_empty());

    m.set_native_options(NativeOptions {
        schema: 3,
        classic_buckets: false,
    });
    let h = histogram(&m);
    assert!(h.bucket.is_empty());
    assert_eq!(h.exemplars.len(), 1, "{h:?}");
    assert_eq!(h.exemplars[0].value(), 0.05);
}
