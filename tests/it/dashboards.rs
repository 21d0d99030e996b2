//! Grafana dashboards (`dashboards/*.json`): every file parses, uses a current schema and the
//! `${datasource}` template variable everywhere, has the template variables its panels need (from
//! `label_values` queries), and every PromQL expression (panel targets and variable queries)
//! parses with `promql-parser` after template variables are substituted, and names only metrics
//! sloburn exports or recording rules `sloburn rules` generates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::support::{root, sloburn_rules};

use promql_parser::label::MatchOp;
use promql_parser::parser::{self, Expr, VectorSelector};
use serde_json::Value;

/// The metric names a real `sloburn serve` exposes, scraped once per test binary: a daemon with
/// checks, thresholds, an SLO that burns (so every gauge exists) against a target that fails
/// some requests. Histograms contribute their base name too (`histogram_quantile` panels use
/// `_bucket`, heatmaps the base).
fn scraped_names() -> &'static BTreeSet<String> {
    static NAMES: std::sync::OnceLock<BTreeSet<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        use crate::support::{BackgroundTarget, Daemon, eventually, metric_sum, write_config};
        let target = BackgroundTarget::start(sloburn::target::TargetOptions {
            error_ratio: 0.2,
            ..Default::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "storage:\n  path: \"{}\"\n  flush_interval: 1s\ntargets:\n  api:\n    url: http://{}/\n    checks:\n      - status: 200\nprofiles:\n  canary:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 100/s\n    duration: 2s\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\n  search:\n    target: api\n    executor: capacity\n    every: 1h\n    run_on_start: true\n    start_rate: 20/s\n    max_rate: 40/s\n    step_duration: 500ms\n    cool_down: 0s\n    precision: 50%\n    thresholds:\n      http_req_duration: [\"p(95)<5000\"]\n  walker:\n    journey: walk\n    every: 1h\n    run_on_start: true\n    executor: shared-iterations\n    vus: 2\n    iterations: 20\njourneys:\n  walk:\n    target: api\n    steps:\n      - {{ name: one, path: /a }}\n      - {{ name: two, path: /b }}\nslos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 1d\n",
            dir.path().join("data").display(),
            target.addr
        );
        let path = write_config(dir.path(), &config);
        let d = Daemon::start(&path, &["--no-watch"]);
        let text = eventually(std::time::Duration::from_secs(20), || {
            let m = d.metrics();
            (metric_sum(&m, "sloburn_runs_total{profile=\"canary\",result=\"failed\"") >= 1.0
                && m.contains("sloburn_slo_time_to_exhaustion_seconds")
                && m.contains("sloburn_iteration_duration_seconds_bucket")
                && m.contains("sloburn_capacity_rate"))
            .then_some(m)
        })
        .expect("the daemon never finished its run");
        let mut names = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                if let (Some(name), Some("histogram")) = (parts.next(), parts.next()) {
                    names.insert(name.to_string());
                }
            } else if !line.starts_with('#') && !line.is_empty() {
                let end = line.find(['{', ' ']).unwrap_or(line.len());
                names.insert(line[..end].to_string());
            }
        }
        names
    })
}

pub(crate) fn dashboards() -> Vec<(String, Value)> {
    let dir = root().join("dashboards");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "overview, slo-detail, load-runs: {files:?}");
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().to_string(), v)
        })
        .collect()
}

/// Every metric and recording-rule name a Prometheus fed by sloburn has.
fn allowed_names() -> BTreeSet<String> {
    let mut names = scraped_names().clone();
    names.extend(recording_rules());
    names
}

/// Recording-rule names from the real `sloburn rules` output for the shipped configs.
fn recording_rules() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for config in ["config/example.yaml", "deploy/base/config.yaml"] {
        let text = sloburn_rules([root().join(config)]);
        for line in text.lines() {
            if let Some(r) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("record:")
            {
                names.insert(r.trim().trim_matches('"').to_string());
            }
        }
    }
    for must in [
        "slo:sli_error:ratio_rate5m",
        "slo:sli_error:ratio_rate3d",
        "slo:objective:ratio",
        "slo:period_error_budget_remaining:ratio",
    ] {
        assert!(names.contains(must), "{must} not generated: {names:?}");
    }
    names
}

/// Grafana's built-ins and the dashboard's own variables, replaced by something PromQL parses.
fn substitute(expr: &str, vars: &BTreeMap<String, String>) -> String {
    let builtins = regex::Regex::new(r"\$\{?__(rate_interval|interval|range)(_ms|_s)?\}?").unwrap();
    let s = builtins.replace_all(expr, |c: &regex::Captures| match &c[1] {
        "range" => "1h".to_string(),
        _ => "5m".to_string(),
    });
    let var = regex::Regex::new(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)").unwrap();
    var.replace_all(&s, |c: &regex::Captures| {
        let name = c.get(1).or(c.get(2)).unwrap().as_str();
        vars.get(name)
            .cloned()
            .unwrap_or_else(|| panic!("`{expr}` uses ${name}, not a variable of its dashboard"))
    })
    .into_owned()
}

fn selectors<'a>(e: &'a Expr, out: &mut Vec<&'a VectorSelector>) {
    match e {
        Expr::Aggregate(a) => {
            selectors(&a.expr, out);
            if let Some(p) = &a.param {
                selectors(p, out);
            }
        }
        Expr::Unary(u) => selectors(&u.expr, out),
        Expr::Binary(b) => {
            selectors(&b.lhs, out);
            selectors(&b.rhs, out);
        }
        Expr::Paren(p) => selectors(&p.expr, out),
        Expr::Subquery(s) => selectors(&s.expr, out),
        Expr::VectorSelector(v) => out.push(v),
        Expr::MatrixSelector(m) => out.push(&m.vs),
        Expr::Call(c) => c.args.args.iter().for_each(|a| selectors(a, out)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// Parses one (substituted) expression; returns the problems: parse errors and unknown names.
fn check_expr(expr: &str, allowed: &BTreeSet<String>) -> Vec<String> {
    let ast = match parser::parse(expr) {
        Ok(ast) => ast,
        Err(e) => return vec![format!("does not parse: {e}: {expr}")],
    };
    let mut sels = Vec::new();
    selectors(&ast, &mut sels);
    if sels.is_empty() {
        return vec![format!("selects no metric: {expr}")];
    }
    let mut problems = Vec::new();
    for v in sels {
        let by_name = v.matchers.matchers.iter().find(|m| m.name == "__name__");
        match (&v.name, by_name) {
            (Some(name), _) if !allowed.contains(name) => {
                problems.push(format!("unknown metric `{name}` in {expr}"))
            }
            (Some(_), _) => {}
            (None, Some(m)) => match &m.op {
                MatchOp::Equal if !allowed.contains(&m.value) => {
                    problems.push(format!("unknown metric `{}` in {expr}", m.value))
                }
                MatchOp::Re(re) if !allowed.iter().any(|n| re.is_match(n)) => {
                    problems.push(format!("`{}` matches no known metric in {expr}", m.value))
                }
                MatchOp::Equal | MatchOp::Re(_) => {}
                _ => problems.push(format!("negative __name__ matcher in {expr}")),
            },
            (None, None) => problems.push(format!("selector without a metric name in {expr}")),
        }
    }
    problems
}

/// Every panel, rows' nested panels included.
pub(crate) fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        out.push(p);
        out.extend(p["panels"].as_array().into_iter().flatten());
    }
    out
}

/// The dashboard's Prometheus annotation queries (Grafana's built-in one excluded).
pub(crate) fn prometheus_annotations(d: &Value) -> Vec<&Value> {
    d["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["builtIn"] != 1)
        .collect()
}

fn variables(d: &Value) -> Vec<&Value> {
    d["templating"]["list"].as_array().unwrap().iter().collect()
}

/// Each variable's stand-in: a custom variable's first value (e.g. a quantile), else a word.
fn stand_ins(d: &Value) -> BTreeMap<String, String> {
    variables(d)
        .into_iter()
        .map(|v| {
            let name = v["name"].as_str().unwrap().to_string();
            let value = match v["type"].as_str() {
                Some("custom") => v["query"]
                    .as_str()
                    .unwrap()
                    .split(',')
                    .next()
                    .unwrap()
                    .trim()
                    .to_string(),
                _ => "x".to_string(),
            };
            (name, value)
        })
        .collect()
}

/// Every PromQL expression of a dashboard, with where it is: panel targets and the selectors of
/// `label_values(SELECTOR, label)` variable queries.
fn expressions(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("panel {}: target without expr", p["title"]));
            out.push((
                format!("panel `{}` {}", p["title"], t["refId"]),
                e.to_string(),
            ));
        }
    }
    for a in prometheus_annotations(d) {
        out.push((
            format!("annotation `{}`", a["name"]),
            a["expr"].as_str().unwrap().to_string(),
        ));
    }
    let lv = regex::Regex::new(r"^label_values\((.+),\s*(\w+)\)$").unwrap();
    for v in variables(d).into_iter().filter(|v| v["type"] == "query") {
        let q = v["query"]["query"].as_str().unwrap();
        let c = lv
            .captures(q)
            .unwrap_or_else(|| panic!("variable {}: not label_values(..): {q}", v["name"]));
        out.push((format!("variable ${}", v["name"]), c[1].to_string()));
    }
    out
}

#[test]
fn dashboards_use_a_current_schema_and_the_datasource_variable() {
    let mut uids = BTreeSet::new();
    for (file, d) in dashboards() {
        assert!(d["schemaVersion"].as_u64().unwrap() >= 39, "{file}");
        assert!(
            uids.insert(d["uid"].as_str().unwrap().to_string()),
            "{file}: duplicate uid"
        );
        assert!(
            d["title"].as_str().unwrap().starts_with("sloburn / "),
            "{file}"
        );

        let vars = variables(&d);
        let ds = vars
            .iter()
            .find(|v| v["name"] == "datasource")
            .expect("datasource variable");
        assert_eq!(ds["type"], "datasource", "{file}");
        assert_eq!(ds["query"], "prometheus", "{file}");

        let mut ids = BTreeSet::new();
        for p in panels(&d) {
            let at = format!("{file}: panel {}", p["title"]);
            assert!(ids.insert(p["id"].as_u64().unwrap()), "{at}: duplicate id");
            let g = &p["gridPos"];
            assert!(
                g["x"].as_u64().unwrap() + g["w"].as_u64().unwrap() <= 24,
                "{at}: wider than the grid"
            );
            if p["type"] == "row" {
                continue;
            }
            assert_eq!(p["datasource"]["type"], "prometheus", "{at}");
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{at}");
            let targets = p["targets"].as_array().unwrap();
            assert!(!targets.is_empty(), "{at}: no query");
            for t in targets {
                assert_eq!(t["datasource"]["uid"], "${datasource}", "{at}");
            }
        }
        for v in vars.iter().filter(|v| v["type"] == "query") {
            assert_eq!(
                v["datasource"]["uid"], "${datasource}",
                "{file}: ${}",
                v["name"]
            );
        }
    }
}

#[test]
fn dashboards_have_the_slo_profile_and_target_variables_from_label_values() {
    let need: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("overview.json", &["slo", "profile", "target"][..]),
        ("slo-detail.json", &["slo"][..]),
        ("load-runs.json", &["profile", "target"][..]),
    ]);
    for (file, d) in dashboards() {
        let vars = variables(&d);
        for name in need[file.as_str()] {
            let v = vars
                .iter()
                .find(|v| v["name"] == *name)
                .unwrap_or_else(|| panic!("{file}: no ${name}"));
            assert_eq!(v["type"], "query", "{file}: ${name}");
            let q = v["query"]["query"].as_str().unwrap();
            assert!(
                q.starts_with("label_values(") && q.ends_with(&format!(", {name})")),
                "{file}: ${name}: {q}"
            );
        }
    }
}

#[test]
fn every_promql_expression_parses_and_names_only_real_metrics() {
    let allowed = allowed_names();
    let mut used = BTreeSet::new();
    let mut problems = Vec::new();
    let mut n = 0;
    for (file, d) in dashboards() {
        let vars = stand_ins(&d);
        for (at, expr) in expressions(&d) {
            let e = substitute(&expr, &vars);
            for p in check_expr(&e, &allowed) {
                problems.push(format!("{file}: {at}: {p}"));
            }
            if let Ok(ast) = parser::parse(&e) {
                let mut sels = Vec::new();
                selectors(&ast, &mut sels);
                used.extend(sels.iter().filter_map(|v| v.name.clone()));
            }
            n += 1;
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(n >= 60, "only {n} expressions");
    // The dashboards cover what the issue asks: histograms, phases, checks, SLO math, rules.
    for must in [
        "sloburn_http_req_duration_seconds_bucket",
        "sloburn_http_req_phase_seconds_bucket",
        "sloburn_iteration_lateness_seconds_bucket",
        "sloburn_checks_total",
        "sloburn_dropped_iterations_total",
        "sloburn_slo_burn_rate",
        "sloburn_slo_error_budget_remaining_ratio",
        "sloburn_slo_alert_active",
        "sloburn_slo_events_total",
        "sloburn_data_sent_bytes_total",
        "slo:period_error_budget_remaining:ratio",
    ] {
        assert!(used.contains(must), "no panel uses {must}");
    }
}

#[test]
fn the_checker_rejects_unknown_metrics_bad_promql_and_stray_variables() {
    let allowed = allowed_names();
    assert!(check_expr("rate(sloburn_http_reqs_total[5m])", &allowed).is_empty());
    assert!(check_expr(r#"{__name__=~"slo:sli_error:ratio_rate.*"}"#, &allowed).is_empty());
    for bad in [
        "rate(sloburn_http_requests_total[5m])",
        "sum(rate(sloburn_http_reqs_total[5m]) by",
        r#"{__name__=~"sloburn_nope.*"}"#,
        "slo:sli_error:ratio_rate7m",
        "vector(1)",
    ] {
        assert!(!check_expr(bad, &allowed).is_empty(), "{bad} passed");
    }
    let vars = BTreeMap::from([("slo".to_string(), "x".to_string())]);
    assert_eq!(
        substitute(r#"rate(a{slo="$slo"}[$__rate_interval]) ${slo}"#, &vars),
        r#"rate(a{slo="x"}[5m]) x"#
    );
    let stray = std::panic::catch_unwind(|| substitute("a{x=\"$nope\"}", &vars));
    assert!(stray.is_err(), "an undefined variable must fail");
}

/// Issue 12, item 13: every dashboard marks each run, from its start to its end, and the moment
/// it finished with its result, from the daemon's own gauges.
#[test]
fn dashboards_annotate_run_start_end_and_result() {
    for (file, d) in dashboards() {
        let annotations = prometheus_annotations(&d);
        let by_name = |name: &str| {
            *annotations
                .iter()
                .find(|a| a["name"] == name)
                .unwrap_or_else(|| panic!("{file}: no `{name}` annotation"))
        };
        for a in &annotations {
            assert_eq!(a["datasource"]["type"], "prometheus", "{file}");
            assert_eq!(a["datasource"]["uid"], "${datasource}", "{file}");
            assert_eq!(a["enable"], true, "{file}");
        }
        // A region per run: Grafana joins the steps where the series has a value.
        let runs = by_name("Runs");
        let expr = runs["expr"].as_str().unwrap();
        assert!(
            expr.contains("sloburn_run_active") && expr.ends_with("> 0"),
            "{file}: {expr}"
        );
        assert!(
            expr.starts_with("max by (profile) ("),
            "{file}: one region per profile, not per pod"
        );
        assert_eq!(runs["useValueForTime"], false, "{file}");
        // A point where a run ended: the gauge's value (ms) is the time.
        let done = by_name("Run finished");
        let expr = done["expr"].as_str().unwrap();
        assert!(
            expr.contains("sloburn_last_run_timestamp_seconds") && expr.ends_with("* 1000"),
            "{file}: {expr}"
        );
        assert_eq!(done["useValueForTime"], true, "{file}");
        assert!(
            done["titleFormat"].as_str().unwrap().contains("{{result}}"),
            "{file}"
        );
    }
}
