//! Every dashboard panel query returns data from a real Server that scrapes `sloburn demo`
//! (in-process) every second for about a minute, with the demo's recording rules loaded and the
//! template variables substituted the way Grafana does (query variables resolved from Server
//! with `label_values`, multi-value variables as a regex of every value). A panel may be empty
//! only if it is in `ALLOWED_EMPTY`, with the reason it needs more history than a minute or is
//! legitimately empty in the demo.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::dashboards::{dashboards, panels, prometheus_annotations};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::support::{Server, get_blocking, runtime, sloburn, stdout_of, urlencode};

/// Panel targets that may be empty after a minute of the demo: (file, panel title, refId,
/// reason). Every entry must name a real target.
///
/// None is needed today. `rate`/`increase` over `[1d]` or `[30d]` (the `slo:*_rate1d`..`30d`
/// rules, the period burn rate and budget) extrapolate from the samples they have, so they
/// answer after two scrapes. The one panel that waits for history is "Thresholds (last run)":
/// `sloburn_threshold_passed` exists once the first `checkout-canary` run (58 s) ends, which
/// the deadline covers. Every alert-state panel has series (0 or 1 per tier): the checkout SLO
/// burns ~7x, so its page-6h (6x) and both ticket tiers fire, page-1h (14.4x) does not.
const ALLOWED_EMPTY: &[(&str, &str, &str, &str)] = &[
    (
        "load-runs.json",
        "Capacity at the SLO",
        "A",
        "the demo has no `executor: capacity` profile; tests/it/capacity_daemon.rs shows the series of a scheduled search",
    ),
    (
        "overview.json",
        "Certificate warnings (TLS probes)",
        "A",
        "the demo probes no TLS certificate, and the panel is empty whenever none is within its warning",
    ),
    (
        "overview.json",
        "annotation Maintenance",
        ANNOTATION,
        "the demo opens no maintenance window; tests/it/maintenance.rs shows the series at 1 in one",
    ),
    (
        "slo-detail.json",
        "annotation Maintenance",
        ANNOTATION,
        "the demo opens no maintenance window; tests/it/maintenance.rs shows the series at 1 in one",
    ),
];

/// The longest the test waits for every panel to have data (about 65 s when all is well: the
/// first checkout-canary run ends at 58 s).
const DEADLINE: Duration = Duration::from_secs(90);

/// `sloburn demo` on its own runtime thread; stopped (and joined) on drop.
struct Demo {
    addr: std::net::SocketAddr,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Demo {
    fn start() -> Demo {
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let demo_data = tempfile::tempdir().unwrap();
            runtime().block_on(async move {
                let (d, target_stop) = sloburn::demo::start(
                    Some("127.0.0.1:0".parse().unwrap()),
                    Some(demo_data.path().to_path_buf()),
                )
                .await
                .unwrap();
                tx.send(d.addr).unwrap();
                stop2.cancelled().await;
                // A run in progress drains for up to the grace period; the test does not wait.
                let _ = tokio::time::timeout(Duration::from_secs(2), d.shutdown()).await;
                target_stop.cancel();
            });
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the demo did not start");
        Demo {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The demo config's recording and alerting rules, as `sloburn rules` generates them.
fn demo_rules(dir: &Path) -> PathBuf {
    let config = dir.join("demo.yaml");
    let text = sloburn::demo::CONFIG
        .replace("{TARGET}", "127.0.0.1:9")
        .replace("{DATA}", &dir.join("data").display().to_string());
    std::fs::write(&config, text).unwrap();
    let generated = stdout_of(
        sloburn()
            .arg("rules")
            .arg(&config)
            .env("SLOBURN_DEMO_TOKEN", "unused-by-rules"),
    );
    let rules = dir.join("rules.yaml");
    std::fs::write(&rules, generated).unwrap();
    rules
}

/// The refId given to annotation queries, which Grafana sends as range queries.
const ANNOTATION: &str = "Anno";

/// (panel title, refId, expr) of every panel target, rows' nested panels included, and of every
/// Prometheus annotation (as `annotation NAME`, refId [`ANNOTATION`]).
fn targets(d: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push((
                p["title"].as_str().unwrap().to_string(),
                t["refId"].as_str().unwrap().to_string(),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    for a in prometheus_annotations(d) {
        out.push((
            format!("annotation {}", a["name"].as_str().unwrap()),
            ANNOTATION.to_string(),
            a["expr"].as_str().unwrap().to_string(),
        ));
    }
    out
}

/// A range query over the last `minutes` at a 1 s step, as Grafana asks for annotations:
/// (labels, last value) per series that has any point.
fn query_range(prom: &Server, q: &str, minutes: u64) -> Vec<(Value, f64)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let v = prom.api(&format!(
        "/api/v1/query_range?query={}&start={}&end={now}&step=1",
        urlencode(q),
        now - minutes * 60
    ));
    v["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| {
            let last = r["values"].as_array()?.last()?[1].as_str()?.parse().ok()?;
            Some((r["metric"].clone(), last))
        })
        .collect()
}

/// A template variable's selection: its values and whether Grafana lets it hold several.
pub(crate) struct Selection {
    values: Vec<String>,
    multi: bool,
}

/// Grafana's built-ins and the dashboard's variables substituted. A multi-value variable in a
/// regex matcher becomes `(a|b)` (every value selected); anywhere else a variable must be
/// single-valued and takes its one value.
pub(crate) fn substitute(expr: &str, vars: &BTreeMap<String, Selection>) -> String {
    let builtins = regex::Regex::new(r"\$\{?__(rate_interval|interval|range)\}?").unwrap();
    let s = builtins.replace_all(expr, |c: &regex::Captures| match &c[1] {
        "interval" => "15s",
        _ => "1m",
    });
    let var = regex::Regex::new(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)").unwrap();
    var.replace_all(&s, |c: &regex::Captures| {
        let name = c.get(1).or(c.get(2)).unwrap().as_str();
        let sel = vars
            .get(name)
            .unwrap_or_else(|| panic!("`{expr}` uses ${name}, not a variable of its dashboard"));
        assert!(!sel.values.is_empty(), "${name} has no values: {expr}");
        let before = &s[..c.get(0).unwrap().start()];
        if before.ends_with("=~\"") || before.ends_with("!~\"") {
            let alts: Vec<String> = sel.values.iter().map(|v| promql_regex_escape(v)).collect();
            format!("({})", alts.join("|"))
        } else {
            assert!(
                !sel.multi,
                "multi-value ${name} outside a regex matcher breaks with several values: {expr}"
            );
            sel.values[0].clone()
        }
    })
    .into_owned()
}

/// A value as a literal inside a PromQL regex string, as Grafana escapes multi-value variables:
/// regex metacharacters get a backslash, itself escaped for the double-quoted string.
fn promql_regex_escape(v: &str) -> String {
    v.chars()
        .map(|c| match c {
            '\\' | '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|' => {
                format!("\\\\{c}")
            }
            _ => c.to_string(),
        })
        .collect()
}

/// Whether `expr` uses a variable that has no values (yet).
fn uses_empty(expr: &str, vars: &BTreeMap<String, Selection>) -> bool {
    let var = regex::Regex::new(r"\$\{?(\w+)").unwrap();
    var.captures_iter(expr)
        .any(|c| vars.get(&c[1]).is_some_and(|s| s.values.is_empty()))
}

/// `label_values(selector, label)` as Grafana asks Server for it.
fn label_values(prom: &Server, selector: &str, label: &str) -> Vec<String> {
    let url = format!(
        "{}/api/v1/label/{label}/values?match[]={}",
        prom.base,
        urlencode(selector)
    );
    let (code, body) = get_blocking(&url);
    assert_eq!(code, 200, "{url}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let mut values: Vec<String> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    values.sort();
    values
}

/// The dashboard's variables as a user would pick them: every value of a multi-value query
/// variable, `checkout-availability` (the SLO that burns) for a single-value `$slo`, a custom
/// variable's current value.
pub(crate) fn resolve(prom: &Server, d: &Value) -> BTreeMap<String, Selection> {
    let lv = regex::Regex::new(r"^label_values\((.+),\s*(\w+)\)$").unwrap();
    let mut vars = BTreeMap::new();
    for v in d["templating"]["list"].as_array().unwrap() {
        let name = v["name"].as_str().unwrap().to_string();
        let multi = v["multi"] == true || v["includeAll"] == true;
        let values = match v["type"].as_str().unwrap() {
            "datasource" => continue,
            "custom" => vec![v["current"]["value"].as_str().unwrap().to_string()],
            "query" => {
                let q = v["query"]["query"].as_str().unwrap();
                let c = lv.captures(q).unwrap_or_else(|| panic!("${name}: {q}"));
                // Until the variables it depends on have values, Grafana shows none either.
                let all = if uses_empty(&c[1], &vars) {
                    Vec::new()
                } else {
                    label_values(prom, &substitute(&c[1], &vars), &c[2])
                };
                match (multi, all.iter().position(|x| x == "checkout-availability")) {
                    (true, _) => all,
                    (false, Some(i)) => vec![all[i].clone()],
                    (false, None) => all.into_iter().take(1).collect(),
                }
            }
            other => panic!("${name}: variable type {other} not handled"),
        };
        vars.insert(name, Selection { values, multi });
    }
    vars
}

/// `{label="value",..} value` without the labels every series has.
fn series((labels, value): &(Value, f64)) -> String {
    let labels: Vec<String> = labels
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "__name__" | "job" | "instance"))
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    format!("{{{}}} {value:.4}", labels.join(","))
}

/// One panel target: where it is, the query sent and the series it returned.
struct Row {
    at: String,
    key: (String, String, String),
    query: String,
    result: Vec<(Value, f64)>,
}

/// Every panel target of every dashboard, substituted and queried once.
fn query_all(prom: &Server) -> (Vec<Row>, BTreeMap<String, Vec<String>>) {
    let mut rows = Vec::new();
    let mut seen_vars = BTreeMap::new();
    for (file, d) in dashboards() {
        let vars = resolve(prom, &d);
        for (name, sel) in &vars {
            seen_vars.insert(format!("{file} ${name}"), sel.values.clone());
        }
        // A variable without values fails substitution; report it as empty panels instead.
        let complete = vars.values().all(|s| !s.values.is_empty());
        for (title, ref_id, expr) in targets(&d) {
            let (query, result) = if complete {
                let q = substitute(&expr, &vars);
                let r = if ref_id == ANNOTATION {
                    query_range(prom, &q, 5)
                } else {
                    prom.query(&q)
                };
                (q, r)
            } else {
                (expr.clone(), Vec::new())
            };
            rows.push(Row {
                at: format!("{file} / {title} / {ref_id}"),
                key: (file.clone(), title, ref_id),
                query,
                result,
            });
        }
    }
    (rows, seen_vars)
}

fn allowed_reason(key: &(String, String, String)) -> Option<&'static str> {
    ALLOWED_EMPTY
        .iter()
        .find(|(f, t, r, _)| (*f, *t, *r) == (key.0.as_str(), key.1.as_str(), key.2.as_str()))
        .map(|e| e.3)
}

#[test]
fn every_panel_query_returns_data_after_a_minute_of_the_demo() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let rules = demo_rules(dir.path());
    let demo = Demo::start();
    let prom = Server::prometheus(&demo.addr.to_string(), Some(&rules), "1s", None);

    // Poll until every panel that must have data has it, within the deadline.
    let mut last = None;
    let mut polls = 0;
    let mut first_data: BTreeMap<String, f64> = BTreeMap::new();
    while started.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_secs(3));
        let (rows, vars) = query_all(&prom);
        polls += 1;
        for r in rows.iter().filter(|r| !r.result.is_empty()) {
            first_data
                .entry(r.at.clone())
                .or_insert(started.elapsed().as_secs_f64());
        }
        let missing = rows
            .iter()
            .filter(|r| r.result.is_empty() && allowed_reason(&r.key).is_none())
            .count();
        println!(
            "{:5.1}s: {missing} panel targets empty",
            started.elapsed().as_secs_f64()
        );
        last = Some((rows, vars));
        if missing == 0 {
            break;
        }
    }
    let elapsed = started.elapsed();
    let (rows, vars) = last.expect("no poll ran");

    println!(
        "after {:.1}s ({polls} polls), Server scraping the demo every 1s:",
        elapsed.as_secs_f64()
    );
    for (name, values) in &vars {
        println!("  {name} = {values:?}");
    }
    println!("series  first data  panel / query / values");
    for r in &rows {
        let note = match (r.result.is_empty(), allowed_reason(&r.key)) {
            (true, Some(why)) => format!("  (allowed empty: {why})"),
            (true, None) => "  <- EMPTY".to_string(),
            _ => String::new(),
        };
        let first = first_data
            .get(&r.at)
            .map_or("-".to_string(), |t| format!("{t:.0}s"));
        let values: Vec<String> = r.result.iter().take(4).map(series).collect();
        println!(
            "{:>6}  {first:>10}  {}{note}\n                    {}\n                    {}",
            r.result.len(),
            r.at,
            r.query,
            values.join("  ")
        );
    }

    // The variables resolve to the demo's SLOs, profiles and targets.
    for (name, want) in [
        (
            "overview.json $slo",
            &[
                "checkout-availability",
                "search-latency",
                "shop-browse",
                "shop-checkout",
            ][..],
        ),
        (
            "overview.json $profile",
            &[
                "checkout-canary",
                "checkout-spike",
                "search-steady",
                "shoppers",
            ][..],
        ),
        ("overview.json $target", &["checkout", "search", "shop"][..]),
        (
            "load-runs.json $profile",
            &[
                "checkout-canary",
                "checkout-spike",
                "search-steady",
                "shoppers",
            ][..],
        ),
        (
            "load-runs.json $target",
            &["checkout", "search", "shop"][..],
        ),
        ("slo-detail.json $slo", &["checkout-availability"][..]),
    ] {
        let got: Option<Vec<&str>> = vars
            .get(name)
            .map(|v| v.iter().map(String::as_str).collect());
        assert_eq!(got.as_deref(), Some(want), "{name}");
    }
    assert!(!vars["load-runs.json $phase"].is_empty());

    // Every allow-list entry names a real panel target.
    for (f, t, r, _) in ALLOWED_EMPTY {
        assert!(
            rows.iter()
                .any(|x| (x.key.0.as_str(), x.key.1.as_str(), x.key.2.as_str()) == (*f, *t, *r)),
            "allow-list entry {f} / {t} / {r} matches no panel target"
        );
    }
    let empty: Vec<&str> = rows
        .iter()
        .filter(|r| r.result.is_empty() && allowed_reason(&r.key).is_none())
        .map(|r| r.at.as_str())
        .collect();
    assert!(
        empty.is_empty(),
        "empty panels after {elapsed:?}, not explained by ALLOWED_EMPTY:\n{}",
        empty.join("\n")
    );
    assert!(rows.len() >= 50, "only {} panel targets", rows.len());

    // The demo's failures are HTTP 503s (0.7% of checkout): the error panels count them.
    let result = |at: &str| &rows.iter().find(|r| r.at == at).unwrap().result;
    let ratio = result("overview.json / Error ratio / A");
    assert!(
        ratio
            .iter()
            .any(|(l, v)| l["target"] == "checkout" && *v > 0.0 && *v < 0.05),
        "checkout error ratio: {ratio:?}"
    );
    let classes = result("overview.json / Errors per second by class / A");
    assert!(
        classes
            .iter()
            .any(|(l, v)| l["target"] == "checkout" && l["error"] == "status" && *v > 0.0),
        "no `status` class for checkout: {classes:?}"
    );
}

/// A real Prometheus scraping each address in `scrapes` every second (one job, so the series of
/// two daemons differ only in `instance`), evaluating `rules` every second.
pub(crate) fn prometheus_scraping(scrapes: &[String], rules: &Path) -> Server {
    let targets: Vec<String> = scrapes.iter().map(|s| format!("\"{s}\"")).collect();
    let cfg = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [\"{}\"]\nscrape_configs:\n  - job_name: sloburn\n    static_configs:\n      - targets: [{}]\n",
        rules.display(),
        targets.join(", ")
    );
    Server::prometheus_with_config(&cfg, &[])
}

/// Panels that show one value per key (tables, stats, bar gauges), where a series per pod would
/// be a row or a value per pod.
fn is_one_value_per_key(panel_type: &str) -> bool {
    matches!(panel_type, "table" | "stat" | "bargauge" | "gauge")
}

/// Issue 12, item 13: with the shard overlay every pod exports its own SLO gauges. Two sharded
/// daemons scraped by one Prometheus: the overview's SLO table has one row per SLO, and no
/// table, stat or bar gauge of any dashboard splits by instance.
#[test]
fn slo_tables_and_stats_show_one_row_per_slo_across_two_shards() {
    use crate::support::{BackgroundTarget, Daemon, eventually, write_config};
    let target = BackgroundTarget::start(sloburn::target::TargetOptions {
        error_ratio: 0.2,
        ..Default::default()
    });
    let root_dir = tempfile::tempdir().unwrap();
    let config = |data: &Path| {
        format!(
            "storage:\n  path: \"{}\"\n  flush_interval: 1s\ntargets:\n  api:\n    url: http://{}/\n    checks:\n      - status: 200\nprofiles:\n  canary:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 40/s\n    duration: 6s\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\nslos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 30d\n",
            data.display(),
            target.addr
        )
    };
    let mut daemons = Vec::new();
    for i in 0..2 {
        let dir = root_dir.path().join(format!("shard{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let path = write_config(&dir, &config(&dir.join("data")));
        let shard = format!("{i}/2");
        daemons.push(Daemon::start(&path, &["--no-watch", "--shard", &shard]));
    }
    let rules = root_dir.path().join("rules.yml");
    std::fs::write(
        &rules,
        stdout_of(
            sloburn()
                .arg("rules")
                .arg(root_dir.path().join("shard0/sloburn.yaml")),
        ),
    )
    .unwrap();
    let scrapes: Vec<String> = daemons
        .iter()
        .map(|d| d.base.trim_start_matches("http://").to_string())
        .collect();
    let prom = prometheus_scraping(&scrapes, &rules);

    // Both shards scraped, both burning (so every SLO gauge exists), both runs finished.
    let both = |q: &str| prom.query(q).len() == 2;
    let needed = [
        "sloburn_slo_objective_ratio",
        "sloburn_slo_time_to_exhaustion_seconds",
        "sloburn_threshold_passed",
        "sloburn_last_run_timestamp_seconds",
    ];
    // A deadline for a hung test only, never a measurement: two daemons, their runs and
    // Prometheus's 1 s scrapes take 7 s alone; 150 s is over 20× that, for a machine loaded by
    // the whole suite and a build beside it.
    let ready = eventually(Duration::from_secs(150), || {
        needed.iter().all(|q| both(q)).then_some(())
    });
    assert!(
        ready.is_some(),
        "two shards never both reported:\n{}",
        needed
            .iter()
            .map(|q| format!("{q}: {:?}", prom.query(q)))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Every one-value-per-key target has data (the rules need a few evaluations) and none is
    // split by instance.
    let check = || {
        let mut checked = 0;
        let mut problems = Vec::new();
        for (file, d) in dashboards() {
            let vars = resolve(&prom, &d);
            for p in panels(&d) {
                if !is_one_value_per_key(p["type"].as_str().unwrap_or_default()) {
                    continue;
                }
                let title = p["title"].as_str().unwrap();
                for t in p["targets"].as_array().into_iter().flatten() {
                    let expr = t["expr"].as_str().unwrap();
                    let at = format!("{file} / {title} / {}", t["refId"].as_str().unwrap());
                    if uses_empty(expr, &vars) {
                        problems.push(format!("{at}: a variable has no values"));
                        continue;
                    }
                    let q = substitute(expr, &vars);
                    let r = prom.query(&q);
                    if r.is_empty() {
                        problems.push(format!("{at}: no data: {q}"));
                    }
                    if r.iter().any(|(l, _)| l.get("instance").is_some()) {
                        problems.push(format!("{at}: one series per instance: {q}"));
                    }
                    checked += 1;
                }
            }
        }
        (checked, problems)
    };
    let mut last = (0, Vec::new());
    // The rules need a few 1 s evaluations (2–4 s idle): as above, a deadline only.
    let done = eventually(Duration::from_secs(120), || {
        last = check();
        last.1.is_empty().then_some(())
    });
    let (checked, problems) = last;
    assert!(done.is_some(), "{}", problems.join("\n"));
    assert!(checked >= 15, "only {checked} targets checked");

    // The SLO table: one row, whatever each target's aggregation.
    let overview = dashboards()
        .into_iter()
        .find(|(f, _)| f == "overview.json")
        .unwrap()
        .1;
    let vars = resolve(&prom, &overview);
    let table = panels(&overview)
        .into_iter()
        .find(|p| p["title"] == "SLOs: SLI vs objective, budget, burn")
        .unwrap();
    for t in table["targets"].as_array().unwrap() {
        let q = substitute(t["expr"].as_str().unwrap(), &vars);
        let r = prom.query(&q);
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        assert_eq!(r[0].0["slo"], "api-availability", "{q}");
    }
    // The table's budget is the mean of the shards' budgets, both read at one instant.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let at = |q: &str| -> Vec<f64> {
        let v = prom.api(&format!("/api/v1/query?query={}&time={now}", urlencode(q)));
        v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["value"][1].as_str().unwrap().parse().unwrap())
            .collect()
    };
    let per_shard = at("sloburn_slo_error_budget_remaining_ratio");
    let shown = at(&substitute(
        table["targets"][2]["expr"].as_str().unwrap(),
        &vars,
    ));
    assert_eq!((per_shard.len(), shown.len()), (2, 1));
    let mean = (per_shard[0] + per_shard[1]) / 2.0;
    assert!(
        (shown[0] - mean).abs() <= 1e-9 * mean.abs().max(1.0),
        "{shown:?} vs {per_shard:?}"
    );
    drop(daemons);
}
