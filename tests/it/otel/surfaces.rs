//! The surfaces around the spans: exemplars (the encoder, then a real Prometheus), the
//! daemon's own spans and log lines, the dashboards' trace links, the config section.

use super::*;

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
    p.exemplar(0, 0.095, t1, s1);
    // The latest sampled request of a bucket wins.
    p.observe(&answered(250), Duration::ZERO, &[]);
    p.exemplar(0, 0.25, t1, s1);
    p.observe(&answered(260), Duration::ZERO, &[]);
    p.exemplar(0, 0.26, t2, s2);

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
    // Downward-API variables and the standard OTEL_* ones; the config's resource wins.
    let mut cmd = Daemon::command(&path, &[]);
    cmd.env("POD_NAME", "sloburn-7d9f-abcde")
        .env("POD_NAMESPACE", "canaries")
        .env("NODE_NAME", "node-3")
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            "team=sre,deployment.environment=from-env",
        );
    let d = Daemon::spawn(cmd);
    let named = |name: &str| {
        receiver
            .spans(0)
            .into_iter()
            .find(|s| s["name"] == name && s["scope"] == "sloburn.daemon")
    };
    let run = eventually(Duration::from_secs(30), || named("run")).expect("a run span");
    assert_eq!(attr(&run, "profile"), "quick");
    let resource = &run["resource"];
    assert_eq!(resource["deployment.environment"], "otel-daemon-test");
    assert_eq!(resource["team"], "sre");
    assert_eq!(resource["service.name"], "sloburn");
    assert_eq!(resource["k8s.pod.name"], "sloburn-7d9f-abcde");
    assert_eq!(resource["k8s.namespace.name"], "canaries");
    assert_eq!(resource["k8s.node.name"], "node-3");
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
    let (exporter, tracer) = tracing_to(format!("http://127.0.0.1:{}", receiver.port), &traces);
    let metrics = sloburn::metrics::Metrics::new("0.1.0");
    let pm = metrics.profile("api", "canary", &[0.0005, 0.001, 0.005, 0.05, 1.0], &[]);
    let scrape = serve_metrics(metrics.clone()).await;

    // What the runner's hook does per sampled request: span, header, request, observe, then
    // the exemplar with the span's ids.
    let run = tracer.run_span(
        "canary",
        "constant-vus",
        [StepDesc {
            method: "GET",
            display_url: "http://api/",
            step: None,
        }],
    );
    let client = client();
    let mut conn = client.conn();
    for _ in 0..20 {
        let mut iter = run.iteration(None).unwrap();
        let span = iter.request(0);
        let mut req = request(target.addr, "");
        span.inject(&mut req.headers);
        let out = conn.send(&req).await;
        pm.observe(&out, Duration::ZERO, &[]);
        pm.exemplar(
            0,
            out.phases.duration().as_secs_f64(),
            span.trace_id(),
            span.span_id(),
        );
        span.finish(&out, None);
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
