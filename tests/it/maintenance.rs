//! Maintenance windows (issue 34, part 4): a run against a failing target inside a window
//! leaves the budget untouched, in the daemon, its store and the series the rules read; the
//! same run outside it burns the budget.

use std::time::Duration;

use sloburn::target::TargetOptions;

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, Daemon, IDLE, daemon_config, metric_sum, request, runtime,
    serve_in_process, spawn_target, write_config,
};

/// POSTs `body` as JSON with the admin token: (status, body).
async fn post_json(url: &str, body: impl Into<bytes::Bytes>) -> (u16, String) {
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
            body: body.into(),
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

/// `sloburn_slo_alert_active` summed over every tier, from `/metrics`.
async fn alerts_active(base: &str) -> f64 {
    let (_, metrics) = request("GET", &format!("{base}/metrics"), None).await;
    metric_sum(&metrics, "sloburn_slo_alert_active{")
}

/// Each tier's `state` in `/api/slos`.
async fn tier_states(base: &str) -> Vec<String> {
    let (_, body) = request("GET", &format!("{base}/api/slos"), None).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["slos"][0]["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// Issue 43: in a window `sloburn_slo_alert_active` stayed 1 and `/api/slos` said `active`,
/// so the shipped "Burn-rate alerts" panel showed a silenced tier firing. Now the tiers that
/// burn are `silenced` (0) while the window is open, and fire again once it is closed.
#[test]
fn a_window_silences_the_tiers_the_alerts_panel_shows() {
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
        crate::support::run_and_wait(&base, "burst", 1).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // 100 % errors: every tier burns past its factor.
        let tiers = tier_states(&base).await.len();
        assert!(tiers >= 3, "{tiers}");
        assert_eq!(alerts_active(&base).await, tiers as f64);
        assert!(tier_states(&base).await.iter().all(|s| s == "firing"));

        let open = post_json(&format!("{base}/api/maintenance"), r#"{"duration": "1h"}"#).await;
        assert_eq!(open.0, 201, "{}", open.1);
        let id = serde_json::from_str::<serde_json::Value>(&open.1).unwrap()["id"]
            .as_u64()
            .unwrap();
        // Opening takes effect at once (the call ticks).
        assert_eq!(alerts_active(&base).await, 0.0);
        assert_eq!(tier_states(&base).await, vec!["silenced"; tiers]);

        let (code, _) = request(
            "DELETE",
            &format!("{base}/api/maintenance/{id}"),
            Some(ADMIN_TOKEN),
        )
        .await;
        assert_eq!(code, 204);
        assert_eq!(alerts_active(&base).await, tiers as f64);
        assert!(tier_states(&base).await.iter().all(|s| s == "firing"));
        d.shutdown().await;
    });
}

/// Issue 44: the alerts were silenced by `max(sloburn_slo_maintenance{slo=…})`, so any scraped
/// instance with an SLO of that name (another job, another namespace) in a window silenced
/// them. Now only a window over every instance the alert sums silences it (promtool).
#[test]
fn another_jobs_window_does_not_silence_this_jobs_alert() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "targets:\n  api:\n    url: http://127.0.0.1:1/\nslos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 30d\n",
    )
    .unwrap();
    let rules = crate::support::stdout_of(crate::support::sloburn().arg("rules").arg(&cfg));
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    let burning = r#"      - series: 'sloburn_slo_events_total{job="shop",instance="a:9090",slo="api-availability",result="bad"}'
        values: '0+60x120'
      - series: 'sloburn_slo_events_total{job="shop",instance="a:9090",slo="api-availability",result="good"}'
        values: '0+60x120'
      - series: 'sloburn_build_info{job="shop",instance="a:9090",version="t"}'
        values: '1+0x120'
      - series: 'sloburn_slo_maintenance{job="billing",instance="b:9090",slo="api-availability"}'
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
{burning}      - series: 'sloburn_slo_maintenance{{job="shop",instance="a:9090",slo="api-availability"}}'
        values: '0+0x120'
    promql_expr_test:
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn",alertstate="firing",severity="page"}})
        eval_time: 30m
        exp_samples:
          - value: 2
  - interval: 1m
    input_series:
{burning}      - series: 'sloburn_slo_maintenance{{job="shop",instance="a:9090",slo="api-availability"}}'
        values: '1+0x120'
    promql_expr_test:
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn"}}) or vector(0)
        eval_time: 30m
        exp_samples:
          - value: 0
"#
        ),
    )
    .unwrap();
    crate::support::promtool_test_rules(dir.path(), &rules);
}

/// The daemon child's resident memory, in bytes (`VmRSS`).
fn rss(d: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// `GET /api/maintenance` of a daemon child: (windows, bytes of the answer).
fn listed(d: &Daemon) -> (Vec<serde_json::Value>, usize) {
    let (code, body) = crate::support::get_blocking(&format!("{}/api/maintenance", d.base));
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    (v["windows"].as_array().unwrap().clone(), body.len())
}

/// Issue 44: 100 windows of 200,000 repeats of a name took RSS from 22 MB to 1.15 GB and
/// `GET /api/maintenance` answered 100 MB; an unknown name must be refused; and a window opened
/// through the API was lost on restart. Against a real `serve` child, restarted for real.
#[test]
fn api_windows_are_bounded_checked_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let slos = format!(
        "{AVAILABILITY_SLO}  db:\n    target: api\n    sli: {{ latency: {{ under: 300ms }} }}\n    objective: 99\n    period: 1d\n"
    );
    let text = daemon_config(
        "127.0.0.1:1".parse().unwrap(),
        &dir.path().join("data"),
        IDLE,
        &slos,
    );
    let path = write_config(dir.path(), &text);
    let mut d = Daemon::start(&path, &["--no-watch"]);
    let rt = runtime();
    let url = format!("{}/api/maintenance", d.base);

    // Unknown names: a 400 that names the first (cut, escaped).
    let (code, body) = rt.block_on(post_json(
        &url,
        r#"{"duration": "1h", "slos": ["api-availability", "nope"]}"#,
    ));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains(r#"no SLO \"nope\""#), "{body}");
    let long = "x".repeat(100_000);
    let (code, body) = rt.block_on(post_json(
        &url,
        format!(r#"{{"duration": "1h", "slos": ["{long}"]}}"#),
    ));
    assert_eq!(code, 400);
    assert!(body.len() < 300, "{} bytes: {body}", body.len());

    // 100 windows, each 200,000 repeats of one name (1 MB per body): each holds the name once.
    let names = vec!["db"; 200_000];
    let big = serde_json::to_string(
        &serde_json::json!({"duration": "1h", "slos": names, "reason": "r".repeat(1000)}),
    )
    .unwrap();
    let before = rss(&d);
    let started = std::time::Instant::now();
    for i in 0..100 {
        let (code, body) = rt.block_on(post_json(&url, big.clone()));
        assert_eq!(code, 201, "window {i}: {}", &body[..body.len().min(300)]);
        assert!(
            body.len() < 300,
            "the answer holds the name once: {} bytes",
            body.len()
        );
    }
    let took = started.elapsed();
    let (windows, bytes) = listed(&d);
    let grown = rss(&d).saturating_sub(before);
    println!(
        "100 windows of 200,000 names: {took:?}, RSS grew {} KB, GET /api/maintenance {bytes} bytes",
        grown / 1024
    );
    assert_eq!(windows.len(), 100);
    assert!(
        windows
            .iter()
            .all(|w| w["slos"] == serde_json::json!(["db"]))
    );
    assert!(
        windows
            .iter()
            .all(|w| w["reason"].as_str().unwrap().len() == 200)
    );
    assert!(bytes < 100 * 600, "{bytes} bytes");
    assert!(grown < 32 << 20, "RSS grew {grown} bytes");
    // The 101st is refused.
    let (code, _) = rt.block_on(post_json(&url, r#"{"duration": "1h"}"#));
    assert_eq!(code, 400);

    // A real restart: SIGTERM, a new process on the same store.
    let (ids, _) = listed(&d);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(20)), Some(0));
    let mut d = Daemon::start(&path, &["--no-watch"]);
    let (again, _) = listed(&d);
    let brief = |ws: &[serde_json::Value]| -> Vec<String> {
        ws.iter()
            .map(|w| format!("{} {} {} {}", w["id"], w["end"], w["active"], w["slos"]))
            .collect()
    };
    assert_eq!(
        brief(&again),
        brief(&ids),
        "the same windows after the restart"
    );
    assert_eq!(
        again, ids,
        "the same windows, ids, ends and reasons after the restart"
    );
    let (_, slos) = crate::support::get_blocking(&format!("{}/api/slos", d.base));
    let v: serde_json::Value = serde_json::from_str(&slos).unwrap();
    let covered: Vec<bool> = v["slos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["maintenance"].as_bool().unwrap())
        .collect();
    assert_eq!(
        covered,
        [false, true],
        "db is covered, api-availability is not"
    );

    // Closed windows stay closed after another restart.
    let url = format!("{}/api/maintenance", d.base);
    for w in &again {
        let id = w["id"].as_u64().unwrap();
        let (code, _) = rt.block_on(request("DELETE", &format!("{url}/{id}"), Some(ADMIN_TOKEN)));
        assert_eq!(code, 204);
    }
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(20)), Some(0));
    let d = Daemon::start(&path, &["--no-watch"]);
    assert_eq!(listed(&d).0, Vec::<serde_json::Value>::new());
}
