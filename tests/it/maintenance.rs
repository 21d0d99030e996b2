//! Maintenance windows (issue 34, part 4): a run against a failing target inside a window
//! leaves the budget untouched, in the daemon, its store and the series the rules read; the
//! same run outside it burns the budget.

use std::time::Duration;

use sloburn::target::TargetOptions;

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, daemon_config, metric_sum, request, runtime, serve_in_process,
    spawn_target,
};

/// POSTs `body` as JSON with the admin token: (status, body).
async fn post_json(url: &str, body: &'static str) -> (u16, String) {
    use sloburn::http::{Client, ClientOptions, RequestSpec, Resolver};
    let client = Client::new(
        ClientOptions::default(),
        std::sync::Arc::new(Resolver::system()),
    );
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "authorization",
        format!("Bearer {ADMIN_TOKEN}").parse().unwrap(),
    );
    headers.insert("content-type", "application/json".parse().unwrap());
    let out = client
        .conn()
        .send(&RequestSpec {
            method: http::Method::POST,
            uri: url.parse().unwrap(),
            headers,
            body: bytes::Bytes::from_static(body.as_bytes()),
        })
        .await;
    (
        out.status.unwrap_or(0),
        String::from_utf8_lossy(&out.body).into_owned(),
    )
}

async fn slo_period(base: &str) -> (u64, u64, bool) {
    let (_, body) = request("GET", &format!("{base}/api/slos"), None).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let s = &v["slos"][0];
    (
        s["period"]["good"].as_u64().unwrap_or(0),
        s["period"]["bad"].as_u64().unwrap_or(0),
        s["maintenance"].as_bool().unwrap(),
    )
}

#[test]
fn errors_inside_a_window_spend_no_budget_and_errors_outside_do() {
    let rt = runtime();
    rt.block_on(async {
        let (target, _stop) = spawn_target(TargetOptions {
            error_ratio: 1.0,
            ..TargetOptions::default()
        })
        .await;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let profile = "  burst:\n    target: api\n    executor: shared-iterations\n    vus: 2\n    iterations: 50\n";
        let text = daemon_config(target, &data, profile, AVAILABILITY_SLO);
        let d = serve_in_process(&text, dir.path()).await;
        let base = format!("http://{}", d.addr);

        // A window over every SLO, opened through the admin API.
        let (code, body) = request(
            "POST",
            &format!("{base}/api/maintenance"),
            Some(ADMIN_TOKEN),
        )
        .await;
        assert_eq!(code, 400, "a body is required: {body}");
        let open = post_json(
            &format!("{base}/api/maintenance"),
            r#"{"duration": "1h", "reason": "database upgrade"}"#,
        )
        .await;
        assert_eq!(open.0, 201, "{}", open.1);
        let id = serde_json::from_str::<serde_json::Value>(&open.1).unwrap()["id"]
            .as_u64()
            .unwrap();
        assert_eq!(slo_period(&base).await, (0, 0, true));
        crate::support::run_and_wait(&base, "burst", 1).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (_, metrics) = request("GET", &format!("{base}/metrics"), None).await;
        assert_eq!(
            metric_sum(&metrics, "sloburn_slo_events_total{"),
            0.0,
            "inside the window no event counts"
        );
        // The series the alerts' `unless` and the dashboards' "Maintenance" annotation read.
        assert_eq!(
            metric_sum(&metrics, "sloburn_slo_maintenance{slo=\"api-availability\"}"),
            1.0
        );
        assert_eq!(slo_period(&base).await, (0, 0, true));
        // The requests themselves were sent and failed: the load went on.
        assert!(metric_sum(&metrics, "sloburn_http_reqs_total{") >= 50.0);

        let (code, _) = request(
            "DELETE",
            &format!("{base}/api/maintenance/{id}"),
            Some(ADMIN_TOKEN),
        )
        .await;
        assert_eq!(code, 204);
        let (code, _) = request(
            "DELETE",
            &format!("{base}/api/maintenance/{id}"),
            Some(ADMIN_TOKEN),
        )
        .await;
        assert_eq!(code, 404);
        crate::support::run_and_wait(&base, "burst", 2).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (_, metrics) = request("GET", &format!("{base}/metrics"), None).await;
        assert_eq!(
            metric_sum(&metrics, "sloburn_slo_events_total{slo=\"api-availability\",result=\"bad\"}"),
            50.0
        );
        assert_eq!(slo_period(&base).await, (0, 50, false));
        // Flushed and read back by a new daemon on the same store: the same 50, no more.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        d.shutdown().await;
        let again = serve_in_process(&text, dir.path()).await;
        let (good, bad, _) = slo_period(&format!("http://{}", again.addr)).await;
        assert_eq!((good, bad), (0, 50), "the store holds what the series showed");
        again.shutdown().await;
    });
}

#[test]
fn configured_windows_are_checked_with_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("m.yaml");
    std::fs::write(
        &cfg,
        "targets:\n  api:\n    url: http://127.0.0.1:1/\nslos:\n  a:\n    target: api\n    sli: availability\n    objective: 99\n    maintenance:\n      - { schedule: \"0 2 * * SUN\" }\nmaintenance:\n  - { start: 2026-12-24T00:00:00Z, end: 2026-12-23T00:00:00Z }\n  - { schedule: \"0 2 * * SUN\", duration: 2h, slos: [nope] }\n  - { schedule: \"61 2 * * *\", duration: 1h }\n  - { duration: 1h }\n",
    )
    .unwrap();
    let out = crate::support::sloburn()
        .args(["check", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    for want in [
        "m.yaml:10:9: slos.a.maintenance[0]: a `schedule` needs a `duration`",
        "maintenance[0].end: `end` must be after `start`",
        "maintenance[1].slos[0]:",
        "maintenance[2].schedule: `61 2 * * *`",
        "maintenance[3]: give `schedule` with `duration` (recurring), or `start` and `end` (fixed)",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// The generated burn alerts are silent while `sloburn_slo_maintenance` is 1 and fire on the
/// same errors without it (promtool, the series as the daemon exports them).
#[test]
fn the_burn_alerts_are_silent_during_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "targets:\n  api:\n    url: http://127.0.0.1:1/\nslos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 30d\n",
    )
    .unwrap();
    let rules = crate::support::stdout_of(crate::support::sloburn().arg("rules").arg(&cfg));
    assert!(rules.contains("unless on ()"), "{rules}");
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    let burning = r#"      - series: 'sloburn_slo_events_total{slo="api-availability",result="bad"}'
        values: '0+60x120'
      - series: 'sloburn_slo_events_total{slo="api-availability",result="good"}'
        values: '0+60x120'
      - series: 'sloburn_build_info{version="t"}'
        values: '1+0x120'
"#;
    std::fs::write(
        dir.path().join("test.yml"),
        format!(
            r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{burning}      - series: 'sloburn_slo_maintenance{{slo="api-availability"}}'
        values: '1+0x120'
    promql_expr_test:
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn"}}) or vector(0)
        eval_time: 30m
        exp_samples:
          - value: 0
  - interval: 1m
    input_series:
{burning}      - series: 'sloburn_slo_maintenance{{slo="api-availability"}}'
        values: '0+0x120'
    promql_expr_test:
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn",alertstate="firing",severity="page"}}) > 0
        eval_time: 30m
        exp_samples:
          - value: 2
"#
        ),
    )
    .unwrap();
    crate::support::promtool_test_rules(dir.path(), &rules);
}
