//! Generated Prometheus rules, proven with the real `promtool`: `check rules` on the output,
//! `test rules` suites (fixtures in `tests/it/rules/`) showing each alert fires at the minute the
//! math predicts and stays quiet below threshold, and a golden file of the generated text.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::{all_output, root, sloburn, sloburn_rules, stdout_of, which};
use sloburn::rules::{K8sMeta, RulesOptions, generate, generate_k8s};
use sloburn::slo::{SloDef, Windows, default_tiers, evaluate};

const DAY: u64 = 86400;

fn fixtures() -> PathBuf {
    root().join("tests/it/rules")
}

fn promtool() -> PathBuf {
    which("promtool")
}

/// The SLO every promtool fixture is written for: 99.9 % over 30 days, Workbook tiers.
fn checkout() -> SloDef {
    let period = Duration::from_secs(30 * DAY);
    SloDef {
        name: "checkout-availability".into(),
        service: "checkout".into(),
        objective: 0.999,
        calendar: None,
        period,
        tiers: default_tiers(period),
        labels: BTreeMap::from([("team".into(), "shop".into())]),
        description: "Checkout answers 200 with a valid body".into(),
    }
}

fn options() -> RulesOptions {
    RulesOptions {
        runbook_base: "https://runbooks.example/sloburn".into(),
        daemon_absent_for: Duration::from_secs(300),
        profiles: vec![("canary".into(), Duration::from_secs(300))],
        job: None,
        daemon_alerts: true,
        native: BTreeMap::new(),
        certificate_warnings: Vec::new(),
        capacity: Vec::new(),
        quorum: BTreeMap::new(),
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("promtool runs");
    let text = all_output(&out);
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Writes the generated rules next to a copy of `fixture` and runs `promtool test rules` on it.
fn promtool_test(fixture: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("rules.yml"),
        generate(&[checkout()], &options()),
    )
    .expect("write rules");
    std::fs::copy(fixtures().join(fixture), dir.path().join(fixture)).expect("copy fixture");
    run(Command::new(promtool())
        .current_dir(dir.path())
        .args(["test", "rules", fixture]));
}

#[test]
fn generated_rules_pass_promtool_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut other = checkout();
    other.name = "checkout-latency".into();
    other.objective = 0.99;
    other.period = Duration::from_secs(28 * DAY);
    other.tiers = default_tiers(other.period);
    other
        .labels
        .insert("odd-label".into(), "{{ not a template }}".into());
    let path = dir.path().join("rules.yml");
    std::fs::write(&path, generate(&[checkout(), other], &options())).expect("write");
    let out = run(Command::new(promtool())
        .arg("check")
        .arg("rules")
        .arg(&path));
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Compares `got` with the checked-in fixture `name`; `UPDATE_GOLDEN=1` rewrites it instead.
fn golden(name: &str, got: &str) {
    crate::support::golden(&fixtures().join(name), got);
}

#[test]
fn generated_rules_match_golden_file() {
    golden("golden.rules.yml", &generate(&[checkout()], &options()));
}

#[test]
fn generated_prometheus_rule_matches_golden_file() {
    let meta = K8sMeta {
        name: "sloburn".into(),
        namespace: Some("monitoring".into()),
        labels: BTreeMap::from([("release".into(), "kube-prometheus-stack".into())]),
    };
    golden(
        "golden.prometheusrule.yml",
        &generate_k8s(&[checkout()], &RulesOptions::default(), &meta),
    );
}

#[test]
fn fast_burn_pages_at_the_predicted_minute() {
    promtool_test("page_fast_burn.yml");
}

#[test]
fn slow_burn_tickets_and_never_pages() {
    promtool_test("ticket_slow_burn.yml");
}

#[test]
fn burn_below_one_fires_nothing_for_three_days() {
    promtool_test("quiet.yml");
}

#[test]
fn counter_resets_neither_cause_nor_hide_alerts() {
    promtool_test("counter_reset.yml");
}

#[test]
fn replicas_are_summed_before_the_ratio() {
    promtool_test("replicas.yml");
}

/// First minute at which each tier is active per `slo::evaluate`, for `clean` minutes of 1000
/// good events followed by `bad` of each 1000 bad, over `minutes` minutes.
///
/// Prometheus' sample at minute m counts events up to m·60s, and `rate(x[w])` at m covers the
/// intervals between samples m−w … m, i.e. the events of unix minutes m−w … m−1. The daemon
/// evaluated at the end of minute m−1 covers exactly those, so the two must agree minute for
/// minute.
fn daemon_timeline(clean: i64, bad: u64, minutes: i64) -> BTreeMap<String, i64> {
    let slo = checkout();
    let mut w = Windows::new(slo.period);
    let mut first = BTreeMap::new();
    for minute in 0..minutes {
        let b = if minute >= clean { bad } else { 0 };
        w.record(minute, 1000 - b, b);
        // Sample index m = minute + 1 sees this minute's events.
        let report = evaluate(&slo, &w, minute);
        for tier in report.tiers.iter().filter(|t| t.active) {
            first.entry(tier.name.clone()).or_insert(minute + 1);
        }
    }
    first
}

#[test]
fn daemon_predicts_the_minutes_the_fixtures_assert() {
    let fast = daemon_timeline(360, 20, 480);
    // 6h19m, 6h44m, 7h04m, 7h49m in page_fast_burn.yml.
    let want = [
        ("page-1h", 404),
        ("page-6h", 469),
        ("ticket-1d", 424),
        ("ticket-3d", 379),
    ];
    assert_eq!(fast, want.map(|(t, m)| (t.to_string(), m)).into());
    let slow = daemon_timeline(360, 5, 920);
    // 7h31m and 15h01m in ticket_slow_burn.yml; no page.
    let want = [("ticket-1d", 901), ("ticket-3d", 451)];
    assert_eq!(slow, want.map(|(t, m)| (t.to_string(), m)).into());
}

#[test]
fn prometheus_rule_passes_promtool_check_after_unwrapping() {
    // promtool cannot read a PrometheusRule; its `spec` indented back by two is a rule file.
    let meta = K8sMeta {
        name: "sloburn".into(),
        namespace: None,
        labels: BTreeMap::new(),
    };
    let k8s = generate_k8s(&[checkout()], &options(), &meta);
    let spec = k8s.split_once("\nspec:\n").expect("spec").1;
    let unwrapped: String = spec
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
        .collect();
    // The one difference, as in Sloth: `sloth_slo_info` says which generator wrote it.
    assert_eq!(unwrapped.matches("sloth_mode: \"cli-gen-k8s\"").count(), 1);
    assert_eq!(
        unwrapped.replace(
            "sloth_mode: \"cli-gen-k8s\"",
            "sloth_mode: \"cli-gen-prom\""
        ),
        generate(&[checkout()], &options())
            .split_once('\n')
            .expect("header line")
            .1
    );
    assert!(k8s.contains("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("spec.yml");
    std::fs::write(&path, unwrapped).expect("write");
    run(Command::new(promtool())
        .arg("check")
        .arg("rules")
        .arg(&path));
}

#[test]
fn rules_for_every_shipped_config_pass_promtool_check_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(root().join("config")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        // No secrets in the environment: generating rules must not need them.
        let rules = stdout_of(
            sloburn()
                .arg("rules")
                .arg(&path)
                .env_remove("SLOBURN_ADMIN_TOKEN")
                .env_remove("CHECKOUT_TOKEN"),
        );
        let file = dir.path().join("rules.yml");
        std::fs::write(&file, rules).unwrap();
        run(Command::new(promtool())
            .arg("check")
            .arg("rules")
            .arg(&file));
        checked.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    checked.sort();
    assert_eq!(
        checked,
        [
            "example.yaml",
            "grpc.yaml",
            "journeys.yaml",
            "probes.yaml",
            "tenants.yaml"
        ],
        "every shipped config's rules"
    );
}

#[test]
fn rules_for_the_example_config_match_their_golden_file() {
    golden(
        "example-config.rules.yml",
        &sloburn_rules([root().join("config/example.yaml")]),
    );
}

#[test]
fn output_dir_writes_one_file_per_slo_and_the_daemon_alerts_once() {
    let dir = tempfile::tempdir().unwrap();
    sloburn_rules([
        root().join("config/example.yaml").as_os_str(),
        "--output".as_ref(),
        dir.path().as_os_str(),
    ]);
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "checkout-availability.yaml",
            "checkout-latency.yaml",
            "sloburn-daemon.yaml"
        ]
    );
    let mut absent = 0;
    for f in &files {
        let path = dir.path().join(f);
        run(Command::new(promtool())
            .arg("check")
            .arg("rules")
            .arg(&path));
        absent += std::fs::read_to_string(&path)
            .unwrap()
            .matches("alert: SloburnAbsent")
            .count();
    }
    assert_eq!(absent, 1, "the daemon absence alert is written once");
}

// ---------------------------------------------------------------------------------------------
// Sloth compatibility: `sloth_slo_info` and the queries Sloth's dashboards and UI send.

/// How a query is sent: Grafana's `label_values(SELECTOR, LABEL)` variable query (the label
/// values API with `match[]`), an instant PromQL query whose series name the SLO, or an instant
/// query that aggregates the labels away (a count: it must be at least 1).
enum SlothQuery {
    LabelValues(&'static str, &'static str),
    Instant(&'static str),
    Count(&'static str),
}

/// The queries Sloth's consumers send, with `${service}`, `${slo}`, `${sli_window}` and
/// `${min_burning_rate}` as Grafana substitutes them (the picked values, the 5m window and
/// the dashboards' default 1). Each must return the SLO.
///
/// - Grafana dashboard 14348 ("Detailed Sloth slos", gnetId 14348): its two pickers and its
///   panels' queries, as written in its published JSON (the `templating` list and the panels'
///   `expr`s). Left out: the month burn-down panel (it needs Grafana's `${__to:date:M}`) and
///   the SLI panel's `1 - (max(..) OR on() vector(0))`, which answers 1 with no SLO at all, so
///   it could not fail here.
/// - Grafana dashboard 14643 ("High level Sloth SLOs", gnetId 14643): its stat and table
///   queries from the published JSON, which count `sloth_slo_info`.
/// - Sloth's own UI backend (internal/http/backend/storage/prometheus in slok/sloth, its tests
///   name the exact strings): the SLO list from `sloth_slo_info` joined with the metadata
///   records. Verbatim.
const SLOTH_QUERIES: &[(&str, SlothQuery)] = &[
    (
        "14348 $service",
        SlothQuery::LabelValues("slo:objective:ratio", "sloth_service"),
    ),
    (
        "14348 $slo",
        SlothQuery::LabelValues(
            r#"slo:objective:ratio{sloth_service="${service}"}"#,
            "sloth_slo",
        ),
    ),
    (
        "14348 exceeded burning rate",
        SlothQuery::Instant("slo:current_burn_rate:ratio > ${min_burning_rate}"),
    ),
    (
        "14348 objective",
        SlothQuery::Instant(
            r#"slo:objective:ratio{sloth_service="${service}", sloth_slo="${slo}"}"#,
        ),
    ),
    (
        "14348 current burning budget",
        SlothQuery::Instant(
            r#"slo:current_burn_rate:ratio{sloth_service="${service}", sloth_slo="${slo}"} or on() vector(0)"#,
        ),
    ),
    (
        "14348 remaining error budget",
        SlothQuery::Instant(
            r#"slo:period_error_budget_remaining:ratio{sloth_service="${service}", sloth_slo="${slo}"} or on() vector(1)"#,
        ),
    ),
    (
        "14348 burn rate magnitude",
        SlothQuery::Instant(
            r#"slo:current_burn_rate:ratio{sloth_service="${service}", sloth_slo="${slo}"} > 0"#,
        ),
    ),
    ("14643 SLOs", SlothQuery::Count("count(sloth_slo_info)")),
    (
        "14643 services",
        SlothQuery::Count("count(max(sloth_slo_info) by (sloth_service))"),
    ),
    (
        "14643 burning rate",
        SlothQuery::Instant("slo:current_burn_rate:ratio > ${min_burning_rate}"),
    ),
    (
        "14643 budget remaining",
        SlothQuery::Instant(
            "avg(slo:period_error_budget_remaining:ratio) by (owner,sloth_id,sloth_service,sloth_slo,sloth_window)",
        ),
    ),
    (
        "ui SLO list",
        SlothQuery::Instant(r#"sloth_slo_info{sloth_id!=""}"#),
    ),
    (
        "ui SLO details",
        SlothQuery::Instant(
            r#"max(sloth_slo_info{sloth_id!=""}) by (sloth_service, sloth_id, sloth_objective, sloth_slo)"#,
        ),
    ),
    (
        "ui period",
        SlothQuery::Instant(r#"max(slo:time_period:days{sloth_id!=""}) by (sloth_id)"#),
    ),
    (
        "ui budget",
        SlothQuery::Instant(
            r#"max(slo:period_error_budget_remaining:ratio{sloth_id!=""}) by (sloth_id)"#,
        ),
    ),
    (
        "ui burn rate",
        SlothQuery::Instant(r#"max(slo:current_burn_rate:ratio{sloth_id!=""}) by (sloth_id)"#),
    ),
    (
        "ui SLI windows",
        SlothQuery::Instant(
            r#"count({__name__=~"^slo:sli_error:ratio_rate.*"}) by (__name__, sloth_id)"#,
        ),
    ),
];

/// What one Sloth query answers, reduced to the values that name the SLO: label values, or
/// each series' `sloth_slo` (else `sloth_id`).
fn sloth_answer(
    prom: &crate::support::Server,
    q: &SlothQuery,
    service: &str,
    slo: &str,
) -> Vec<String> {
    let sub = |s: &str| {
        s.replace("${service}", service)
            .replace("${slo}", slo)
            .replace("${sli_window}", "5m")
            .replace("${min_burning_rate}", "1")
    };
    match q {
        SlothQuery::LabelValues(selector, label) => {
            let v = prom.api(&format!(
                "/api/v1/label/{label}/values?match[]={}",
                crate::support::urlencode(&sub(selector))
            ));
            v["data"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        }
        SlothQuery::Instant(expr) => prom
            .query(&sub(expr))
            .into_iter()
            .filter(|(_, v)| v.is_finite())
            .filter_map(|(labels, _)| {
                labels["sloth_slo"]
                    .as_str()
                    .or(labels["sloth_id"].as_str())
                    .map(String::from)
            })
            .collect(),
        // One SLO in the config: the count is that one, and nothing made up.
        SlothQuery::Count(expr) => prom
            .query(&sub(expr))
            .into_iter()
            .filter(|(_, v)| v.is_finite() && *v > 0.0)
            .map(|_| "counted".to_string())
            .collect(),
    }
}

#[test]
fn sloth_slo_info_and_sloths_dashboard_queries_return_the_slo() {
    use crate::support::{BackgroundTarget, Daemon, Server, eventually, write_config};
    let target = BackgroundTarget::start(sloburn::target::TargetOptions {
        error_ratio: 0.05,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "storage:\n  path: \"{}\"\n  flush_interval: 1s\ntargets:\n  api:\n    url: http://{}/\n    checks:\n      - status: 200\nprofiles:\n  steady:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 20/s\n    duration: 40s\nslos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.5\n    period: 7d\n",
        dir.path().join("data").display(),
        target.addr
    );
    let path = write_config(dir.path(), &config);
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, sloburn_rules([&path])).unwrap();
    let daemon = Daemon::start(&path, &["--no-watch"]);
    let scrape = daemon.base.trim_start_matches("http://").to_string();
    let prom = Server::prometheus(&scrape, Some(&rules), "1s", None);

    // The info series itself, with Sloth's labels.
    let info = eventually(Duration::from_secs(30), || {
        let r = prom.query("sloth_slo_info");
        (!r.is_empty()).then_some(r)
    })
    .unwrap_or_else(|| panic!("no sloth_slo_info:\n{}", prom.log_tail()));
    assert_eq!(info.len(), 1, "{info:?}");
    let (labels, value) = &info[0];
    assert_eq!(*value, 1.0);
    for (k, v) in [
        ("sloth_id", "api-api-availability"),
        ("sloth_service", "api"),
        ("sloth_slo", "api-availability"),
        ("sloth_objective", "99.5"),
        ("sloth_mode", "cli-gen-prom"),
        ("sloth_spec", "sloburn/v1"),
    ] {
        assert_eq!(labels[k], v, "{k}: {labels}");
    }
    assert!(
        labels["sloth_version"]
            .as_str()
            .is_some_and(|v| v.starts_with("sloburn-v")),
        "{labels}"
    );

    // Every query returns the SLO once the SLI rules have two scrapes of events to rate.
    let wanted = |name: &str| match name {
        n if n.ends_with("$service") => "api",
        "14643 SLOs" | "14643 services" => "counted",
        n if n.starts_with("ui ") && !n.ends_with("details") && !n.ends_with("list") => {
            "api-api-availability"
        }
        _ => "api-availability",
    };
    let mut last = Vec::new();
    let ok = eventually(Duration::from_secs(45), || {
        last = SLOTH_QUERIES
            .iter()
            .map(|(name, q)| {
                let got = sloth_answer(&prom, q, "api", "api-availability");
                (*name, got.iter().any(|g| g == wanted(name)), got)
            })
            .collect::<Vec<_>>();
        last.iter().all(|(_, ok, _)| *ok).then_some(())
    });
    let report: Vec<String> = last
        .iter()
        .map(|(n, ok, got)| format!("{} {n}: {got:?}", if *ok { "ok  " } else { "FAIL" }))
        .collect();
    println!("{}", report.join("\n"));
    assert!(
        ok.is_some(),
        "Sloth queries without the SLO:\n{}",
        report.join("\n")
    );
    drop(daemon);
}
