//! SLOs grouped by a label (issue 34, part 3): a journey over a 3-tenant data file whose one
//! tenant fails 5 % shows one burning SLO and two healthy ones, in the daemon's API and series;
//! the generated rules alert per value (promtool); `check` says what is wrong with a
//! `group_by`, at its position.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;

use crate::support::{
    all_output, metric_sum, request, runtime, serve_in_process, serve_on_thread, sloburn, stdout_of,
};

/// Each tenant's requests, counted apart; `beta`'s every 20th answers 500 (exactly 5 %).
#[derive(Default)]
struct Tenants {
    acme: AtomicU64,
    beta: AtomicU64,
    corp: AtomicU64,
    other: AtomicU64,
}

async fn tenant(State(t): State<Arc<Tenants>>, Path(name): Path<String>) -> StatusCode {
    let counter = match name.as_str() {
        "acme" => &t.acme,
        "beta" => &t.beta,
        "corp" => &t.corp,
        _ => &t.other,
    };
    let n = counter.fetch_add(1, Relaxed) + 1;
    if name == "beta" && n % 20 == 0 {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::OK
    }
}

const TENANTS_CSV: &str = "tenant,region\nacme,eu\nbeta,us\ncorp,eu\n";

/// A config whose `checkout` SLO is grouped by the data file's `tenant` column.
fn grouped_config(addr: &str, data: &str, objective: &str) -> String {
    format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 5s
storage:
  path: "{data}"
  flush_interval: 1s
targets:
  shop:
    url: http://{addr}/
journeys:
  checkout:
    target: shop
    data: {{ file: tenants.csv, order: sequential }}
    steps:
      - name: order
        path: /t/${{data.tenant}}
        checks: [ {{ status: 200 }} ]
profiles:
  tenants:
    journey: checkout
    executor: shared-iterations
    vus: 3
    iterations: 600
    max_duration: 60s
slos:
  checkout:
    journey: checkout
    sli: availability
    objective: {objective}
    period: 30d
    group_by: tenant
    labels: {{ team: shop }}
"#
    )
}

#[test]
fn one_failing_tenant_burns_its_own_slo_and_no_other() {
    let tenants = Arc::new(Tenants::default());
    let app = Router::new()
        .route("/t/{name}", get(tenant))
        .with_state(tenants.clone());
    let server = serve_on_thread(app);
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let d = rt.block_on(async {
        std::fs::write(dir.path().join("tenants.csv"), TENANTS_CSV).unwrap();
        let data = dir.path().join("data");
        let text = grouped_config(&server.addr.to_string(), data.to_str().unwrap(), "99");
        let d = serve_in_process(&text, dir.path()).await;
        let base = format!("http://{}", d.addr);
        let runs = crate::support::run_and_wait(&base, "tenants", 1).await;
        assert_eq!(runs[0]["result"], "passed", "{runs}");
        // The counters are folded into the windows on the next one-second tick.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            [&tenants.acme, &tenants.beta, &tenants.corp, &tenants.other].map(|c| c.load(Relaxed)),
            [200, 200, 200, 0],
            "the sequential rows give each tenant a third"
        );

        let (_, body) = request("GET", &format!("{base}/api/slos"), None).await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let slos = v["slos"].as_array().unwrap();
        let mut names: Vec<&str> = slos.iter().map(|s| s["name"].as_str().unwrap()).collect();
        names.sort_unstable();
        assert_eq!(names, ["checkout:acme", "checkout:beta", "checkout:corp"]);
        for s in slos {
            let name = s["name"].as_str().unwrap();
            let value = name.trim_start_matches("checkout:");
            assert_eq!(
                s["group"],
                serde_json::json!({"slo": "checkout", "label": "tenant", "value": value}),
                "{s}"
            );
            let period = (
                s["period"]["good"].as_u64().unwrap(),
                s["period"]["bad"].as_u64().unwrap(),
            );
            let burn = s["burn_rates"]["5m"].as_f64().unwrap();
            let active = s["tiers"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|t| t["active"] == true)
                .count();
            if value == "beta" {
                assert_eq!(period, (190, 10), "{s}");
                // 5 % bad over a 1 % budget: burning five times too fast.
                assert!((burn - 5.0).abs() < 1e-9, "{s}");
                assert!(active > 0, "the burning tenant's tiers fire: {s}");
                assert!(s["budget_remaining"].as_f64().unwrap() < 1.0, "{s}");
            } else {
                assert_eq!(period, (200, 0), "{s}");
                assert_eq!(burn, 0.0, "{s}");
                assert_eq!(active, 0, "a healthy tenant's tiers stay quiet: {s}");
                assert_eq!(s["budget_remaining"].as_f64().unwrap(), 1.0, "{s}");
            }
        }
        let (_, metrics) = request("GET", &format!("{base}/metrics"), None).await;
        for (slo, good, bad) in [
            ("checkout:acme", 200.0, 0.0),
            ("checkout:beta", 190.0, 10.0),
            ("checkout:corp", 200.0, 0.0),
        ] {
            let of = |result: &str| {
                metric_sum(
                    &metrics,
                    &format!("sloburn_slo_events_total{{slo=\"{slo}\",result=\"{result}\"}}"),
                )
            };
            assert_eq!((of("good"), of("bad")), (good, bad), "{slo}");
        }
        d
    });
    // The dashboard shows the three groups, the failing one with its tiers firing.
    let chrome = crate::web::Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("http://{}/", d.addr));
    let cards = page.wait_for(
        "three SLO cards",
        "(() => { const c = [...document.querySelectorAll('article.slo-card')]; \
           return c.length === 3 && c.map(x => ({ name: x.dataset.slo, \
             group: x.querySelector('[data-field=group]').textContent, \
             alerts: x.querySelector('[data-field=alerts]').textContent })); })()",
        Duration::from_secs(30),
    );
    for card in cards.as_array().unwrap() {
        let name = card["name"].as_str().unwrap();
        let value = name.trim_start_matches("checkout:");
        assert_eq!(
            card["group"],
            format!("tenant = {value}, one group of checkout"),
            "{card}"
        );
        let alerts = card["alerts"].as_str().unwrap();
        assert_eq!(alerts == "none", value != "beta", "{card}");
    }
    rt.block_on(d.shutdown());
    drop(server);
}

/// The rules of a grouped SLO alert per value: with the same series as the daemon exports,
/// only the failing tenant's burn alerts fire, and they carry its `tenant` label.
#[test]
fn the_generated_rules_alert_per_value() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tenants.csv"), TENANTS_CSV).unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        grouped_config(
            "127.0.0.1:1",
            dir.path().join("d").to_str().unwrap(),
            "99.9",
        ),
    )
    .unwrap();
    let rules = stdout_of(sloburn().arg("rules").arg(&cfg));
    for value in ["acme", "beta", "corp"] {
        assert!(
            rules.contains(&format!("name: \"sloburn-slo-checkout:{value}\"")),
            "{rules}"
        );
        assert!(rules.contains(&format!("tenant: \"{value}\"")), "{rules}");
    }
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    // Every tenant sends 60 events a minute; beta's are 5 % bad: 50 times its 0.1 % budget.
    let mut series = String::new();
    for (value, bad) in [("acme", 0), ("beta", 3), ("corp", 0)] {
        series.push_str(&format!(
            "      - series: 'sloburn_slo_events_total{{slo=\"checkout:{value}\",result=\"bad\"}}'\n        values: '0+{bad}x120'\n      - series: 'sloburn_slo_events_total{{slo=\"checkout:{value}\",result=\"good\"}}'\n        values: '0+{}x120'\n",
            60 - bad
        ));
    }
    std::fs::write(
        dir.path().join("test.yml"),
        format!(
            r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
{series}    promql_expr_test:
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn",alertstate="firing",tenant="beta"}})
        eval_time: 30m
        exp_samples:
          - value: 4
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn",alertstate="firing",severity="page",sloth_slo="checkout:beta",tenant="beta",team="shop",journey="checkout"}})
        eval_time: 30m
        exp_samples:
          - value: 2
      - expr: count(ALERTS{{alertname="SloburnErrorBudgetBurn",tenant!="beta"}}) or vector(0)
        eval_time: 30m
        exp_samples:
          - value: 0
      - expr: slo:sli_error:ratio_rate5m{{sloth_slo="checkout:acme",tenant="acme"}}
        eval_time: 30m
        exp_samples:
          - labels: 'slo:sli_error:ratio_rate5m{{journey="checkout",sloth_id="shop-checkout:acme",sloth_service="shop",sloth_slo="checkout:acme",sloth_window="5m",team="shop",tenant="acme"}}'
            value: 0
"#
        ),
    )
    .unwrap();
    crate::support::promtool_test_rules(dir.path(), &rules);

    // One file per group with `--output`, named so a ConfigMap key and a PrometheusRule name
    // can take it (`SLO.VALUE`).
    let out = dir.path().join("out");
    let run = sloburn()
        .arg("rules")
        .arg(&cfg)
        .args(["--k8s", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", all_output(&run));
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "checkout.acme.yaml",
            "checkout.beta.yaml",
            "checkout.corp.yaml",
            "sloburn-daemon.yaml"
        ]
    );
    let beta = std::fs::read_to_string(out.join("checkout.beta.yaml")).unwrap();
    assert!(
        beta.contains("  name: \"sloburn-slos-checkout.beta\"\n"),
        "{beta}"
    );
}

/// Each wrong `group_by` is an error at its position; a right one by `step` or
/// `status_class` makes one SLO per step or class.
#[test]
fn group_by_errors_are_positioned_and_steps_and_classes_group() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tenants.csv"),
        "tenant,region\nacme,eu\nbeta,us\ncorp,eu\nbad tenant,eu\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("ok.csv"), TENANTS_CSV).unwrap();
    let cfg = dir.path().join("g.yaml");
    std::fs::write(
        &cfg,
        r#"targets:
  shop:
    url: http://127.0.0.1:1/
journeys:
  spaced:
    target: shop
    data: { file: tenants.csv }
    steps:
      - { name: order, path: "/t/${data.tenant}" }
  checkout:
    target: shop
    data: { file: ok.csv }
    steps:
      - { name: login, path: "/login/${data.tenant}" }
      - { name: order, path: "/t/${data.tenant}" }
  plain:
    target: shop
    steps:
      - { name: one, path: / }
profiles:
  p:
    journey: checkout
    executor: shared-iterations
    vus: 1
    iterations: 1
    guard: { slo: by-tenant }
slos:
  too-many:
    journey: checkout
    sli: availability
    objective: 99
    group_by: tenant
    max_groups: 2
  no-column:
    journey: checkout
    sli: availability
    objective: 99
    group_by: tennant
  no-journey:
    target: shop
    sli: availability
    objective: 99
    group_by: tenant
  no-data:
    journey: plain
    sli: availability
    objective: 99
    group_by: tenant
  bad-value:
    journey: spaced
    sli: availability
    objective: 99
    group_by: tenant
  step-and-step:
    journey: checkout
    step: order
    sli: availability
    objective: 99
    group_by: step
  whole-journey-status:
    journey: checkout
    sli: availability
    objective: 99
    group_by: status_class
  reserved:
    journey: checkout
    sli: availability
    objective: 99
    group_by: { column: tenant, label: severity }
  alone:
    target: shop
    sli: availability
    objective: 99
    max_groups: 3
  by-tenant:
    journey: checkout
    sli: availability
    objective: 99
    group_by: { column: region, label: zone }
"#,
    )
    .unwrap();
    let out = sloburn()
        .args(["check", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let text = all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    for want in [
        "g.yaml:32:15: slos.too-many.group_by: `tenant` has more than 2 distinct values in journey `checkout`'s data file (`max_groups`)",
        "g.yaml:38:15: slos.no-column.group_by: journey `checkout`'s data file has no column `tennant` (did you mean `tenant`?) (columns: tenant, region)",
        "g.yaml:43:15: slos.no-journey.group_by: a data-file column groups a journey's iterations: give the SLO a `journey`",
        "g.yaml:48:15: slos.no-data.group_by: journey `plain` has no data file to take `tenant` from",
        "g.yaml:53:15: slos.bad-value.group_by: row 4 of journey `spaced`'s data file: its `tenant` cannot name an SLO",
        "g.yaml:59:15: slos.step-and-step.group_by: `group_by: step` makes one SLO per step of the journey: drop `step`",
        "g.yaml:64:15: slos.whole-journey-status.group_by: a whole-journey SLO counts iterations, which have no status",
        "g.yaml:69:15: slos.reserved.group_by: the label `severity` is set by sloburn",
        "g.yaml:74:17: slos.alone.max_groups: `max_groups` goes with `group_by`",
        "g.yaml:26:19: profiles.p.guard.slo: SLO `by-tenant` is grouped (`group_by`): guard one of its groups, like `by-tenant:eu`, `by-tenant:us`",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert!(
        !text.contains("bad tenant"),
        "a data value is never quoted:\n{text}"
    );

    // Steps and status classes.
    let good = dir.path().join("ok.yaml");
    std::fs::write(
        &good,
        r#"targets:
  shop:
    url: http://127.0.0.1:1/
journeys:
  checkout:
    target: shop
    steps:
      - { name: login, path: /login }
      - { name: order, path: /order }
slos:
  per-step:
    journey: checkout
    sli: availability
    objective: 99
    group_by: step
  per-class:
    target: shop
    sli: { latency: { under: 100ms } }
    objective: 99
    group_by: status_class
"#,
    )
    .unwrap();
    let cfg = sloburn::config::load(&good).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = cfg.config.slos.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "per-class:1xx",
            "per-class:2xx",
            "per-class:3xx",
            "per-class:4xx",
            "per-class:5xx",
            "per-class:none",
            "per-step:login",
            "per-step:order",
        ]
    );
    let login = &cfg.config.slos["per-step:login"];
    assert_eq!(login.step.as_deref(), Some("login"));
    assert_eq!(
        login.def().labels.get("step").map(String::as_str),
        Some("login")
    );
    let five = &cfg.config.slos["per-class:5xx"];
    assert_eq!(
        five.def().labels.get("status_class").map(String::as_str),
        Some("5xx")
    );
    // A column named as a template names it.
    let templated = dir.path().join("templated.yaml");
    std::fs::write(
        &templated,
        "targets:\n  shop: { url: \"http://127.0.0.1:1/\" }\njourneys:\n  j:\n    target: shop\n    data: { file: ok.csv }\n    steps: [ { name: s, path: \"/t/${data.tenant}\" } ]\nslos:\n  t: { journey: j, sli: availability, objective: 99, group_by: data.tenant }\n",
    )
    .unwrap();
    let cfg = sloburn::config::load(&templated).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = cfg.config.slos.keys().map(String::as_str).collect();
    assert_eq!(names, ["t:acme", "t:beta", "t:corp"]);
    assert_eq!(
        cfg.config.slos["t:beta"]
            .def()
            .labels
            .get("tenant")
            .map(String::as_str),
        Some("beta")
    );
    let rules = stdout_of(sloburn().arg("rules").arg(&good));
    assert!(rules.contains("status_class: \"5xx\""), "{rules}");
    // OpenSLO has no grouping: the export says what it left out rather than name 8 SLOs.
    let exported = stdout_of(sloburn().args(["openslo", "export"]).arg(&good));
    assert!(
        exported.contains("# SLO `per-step` is grouped by `step` (`group_by`)")
            && exported.contains("# SLO `per-class` is grouped by `status_class`")
            && !exported.contains("kind: SLO"),
        "{exported}"
    );
}
