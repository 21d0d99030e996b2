//! `executor: capacity` in the daemon (issue 47 items 2 and 3): a scheduled capacity profile
//! searches a worker pool whose capacity is known (N workers each holding a request S: N/S a
//! second, see `capacity::Pool`) through the daemon's runs; its answer is
//! `sloburn_capacity_rate`, a run in `/api/runs` with its steps (kept across a restart), a
//! panel of the dashboard read in headless Chromium, and the input of the generated capacity
//! alert, which promtool fires when the figure drops. And the config's positioned errors.

use crate::capacity::Pool;
use crate::support::{Daemon, eventually, get_blocking, sloburn_rules, which, write_config};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// A daemon config with target `pool` and a capacity profile `search` (`extra` appended to it),
/// judged by `p(95)<150` (a queue wait over 100 ms at p95 past the pool's capacity).
fn config(pool: &Pool, data: &std::path::Path, extra: &str) -> String {
    format!(
        "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  grace_period: 5s\nstorage:\n  \
         path: \"{}\"\n  flush_interval: 1s\ntargets:\n  pool:\n    url: {}\n    timeout: 5s\n\
         profiles:\n  search:\n    target: pool\n    executor: capacity\n    every: 24h\n    \
         run_on_start: true\n    start_rate: 10/s\n    max_rate: 160/s\n    step_duration: 2s\n    \
         cool_down: 300ms\n    precision: 10%\n    max_duration: 90s\n    capacity: {{ min_rate: 20/s, \
         max_drop: 20% }}\n    thresholds:\n      http_req_duration: [\"p(95)<150\"]\n{extra}",
        data.display(),
        pool.url()
    )
}

/// The run of `search` in `/api/runs`, once it finished.
fn finished_search(d: &Daemon, limit: Duration) -> Value {
    eventually(limit, || {
        let (_, body) = get_blocking(&format!("{}/api/runs?profile=search", d.base));
        let runs: Value = serde_json::from_str(&body).ok()?;
        runs["runs"]
            .as_array()?
            .iter()
            .find(|r| r["result"] != "running" && r["capacity"].is_object())
            .cloned()
    })
    .unwrap_or_else(|| panic!("no finished search: {:?}", d.logs.lock().unwrap().last()))
}

/// `sloburn_capacity_rate{profile="search",bound=…}` in the exposition.
fn gauge(metrics: &str, bound: &str) -> Option<f64> {
    let head = format!("sloburn_capacity_rate{{bound=\"{bound}\",profile=\"search\"}} ");
    let alt = format!("sloburn_capacity_rate{{profile=\"search\",bound=\"{bound}\"}} ");
    metrics.lines().find_map(|l| {
        l.strip_prefix(&head)
            .or_else(|| l.strip_prefix(&alt))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Must show: a scheduled capacity profile in a daemon. N = 2, S = 50 ms: 40/s. The answer is
/// within ±25 % of it (2 s steps, a 10 % bracket); its series, its run with every step, its
/// one-run-at-a-time, its panel in Chromium, its restart, and its alert in promtool.
#[test]
fn a_scheduled_capacity_profile_in_the_daemon() {
    let pool = Pool::start(2, Duration::from_millis(50));
    let analytic = 2.0 / 0.050;
    let dir = tempfile::tempdir().unwrap();
    // An SLO on the target that no step can fail (the pool queues, rarely times out): it is
    // a condition of the search, but the search's requests are never its events.
    let slo = "slos:\n  avail:\n    target: pool\n    sli: availability\n    objective: 50\n    \
               period: 1d\n";
    let cfg = write_config(dir.path(), &config(&pool, &dir.path().join("data"), slo));
    let mut d = Daemon::start(&cfg, &[]);
    // Never beside another run of the profile: the API's start is refused while it searches.
    eventually(Duration::from_secs(20), || {
        let (_, body) = get_blocking(&format!("{}/api/profiles", d.base));
        body.contains("\"running\":true").then_some(())
    })
    .expect("the search started on start-up");
    let url = format!("{}/api/profiles/search/run", d.base);
    let (status, _) = crate::support::runtime().block_on(crate::support::request(
        "POST",
        &url,
        Some(crate::support::ADMIN_TOKEN),
    ));
    assert_eq!(status, 409, "a second run of a searching profile");
    let run = finished_search(&d, Duration::from_secs(100));
    let c = &run["capacity"];
    assert_eq!(run["result"], "passed", "{run}");
    assert_eq!(c["outcome"], "found", "{c}");
    let rate = c["rate"].as_f64().unwrap();
    assert!(
        (rate / analytic - 1.0).abs() <= 0.25,
        "capacity {rate}/s, analytic {analytic}/s: {c}"
    );
    let steps = c["steps"].as_array().unwrap();
    assert!(steps.len() >= 4 && steps.len() <= 41, "{c}");
    assert!(steps.iter().all(|s| s["rate"].as_f64() <= Some(160.0)));
    let requests: u64 = steps.iter().map(|s| s["requests"].as_u64().unwrap()).sum();
    assert_eq!(run["requests"].as_u64(), Some(requests));
    assert_eq!(c["limited_by"], "http_req_duration: p(95)<150", "{c}");
    assert_eq!(steps.last().unwrap()["purpose"], "confirm");
    // The series: the answer, and the steps' requests in the profile's own series.
    let metrics = d.metrics();
    assert_eq!(gauge(&metrics, "low"), Some(rate), "{metrics}");
    assert_eq!(gauge(&metrics, "high"), c["high"].as_f64());
    let sent = crate::support::metric_sum(&metrics, "sloburn_http_reqs_total{");
    assert!(sent >= requests as f64, "{sent} < {requests}");
    let events = crate::support::metric_sum(&metrics, "sloburn_slo_events_total{");
    assert_eq!(
        events, 0.0,
        "a capacity search's requests are never SLO events"
    );
    assert!(
        metrics.contains("slo=\"avail\""),
        "the SLO is exported: {metrics}"
    );
    // The run detail holds the search too.
    let (_, detail) = get_blocking(&format!("{}/api/runs/{}", d.base, run["id"]));
    let detail: Value = serde_json::from_str(&detail).unwrap();
    assert_eq!(detail["run"]["capacity"]["steps"], c["steps"]);
    dashboard_panel(&d.base, &run);
    // A restart keeps the run and the series (the SQLite store).
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(20)), Some(0));
    let quiet = config(&pool, &dir.path().join("data"), "")
        .replace("run_on_start: true", "run_on_start: false");
    let cfg = write_config(dir.path(), &quiet);
    let d = Daemon::start(&cfg, &[]);
    let again = finished_search(&d, Duration::from_secs(10));
    assert_eq!(again["id"], run["id"]);
    assert_eq!(again["capacity"]["steps"], c["steps"]);
    assert_eq!(gauge(&d.metrics(), "low"), Some(rate));
    eprintln!(
        "daemon capacity: {rate}/s (analytic {analytic}/s), {} steps",
        steps.len()
    );
    alert_fires_when_the_figure_drops(&cfg, rate);
}

/// The profile's card draws the searches over time from `/api/runs`: one point per search,
/// the capacity and the lowest rate that failed.
fn dashboard_panel(base: &str, run: &Value) {
    let chrome = crate::web::Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("{base}/"));
    let id = "profile-search-capacity";
    page.wait_for(
        "the capacity panel",
        &format!("document.querySelector('figure[data-chart=\"{id}\"]') && Number(document.querySelector('figure[data-chart=\"{id}\"]').dataset.points) >= 1"),
        Duration::from_secs(30),
    );
    let data = page.eval(&format!("window.__sloburn.charts[\"{id}\"].data"));
    let data: Vec<Vec<Option<f64>>> = serde_json::from_value(data).unwrap();
    assert_eq!(data[0], vec![run["finished_at"].as_f64()]);
    assert_eq!(data[1], vec![run["capacity"]["low"].as_f64()]);
    assert_eq!(data[2], vec![run["capacity"]["high"].as_f64()]);
    let title = page.eval(&format!(
        "document.querySelector('figure[data-chart=\"{id}\"] h4').textContent"
    ));
    assert_eq!(title, "capacity at the SLO, per search (req/s)");
}

/// The generated capacity alert, in promtool: a week at the daemon's figure then 30 % under it
/// fires `dropped` (not `below_min_rate`: still over 20/s); the figure held fires nothing; a
/// figure under 20/s fires `below_min_rate`.
fn alert_fires_when_the_figure_drops(cfg: &std::path::Path, rate: f64) {
    let rules = sloburn_rules([cfg.to_str().unwrap()]);
    assert!(rules.contains("alert: SloburnCapacityLow"), "{rules}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    let low = rate * 0.7;
    let test = format!(
        r#"rule_files: [rules.yml]
evaluation_interval: 1h
tests:
  - interval: 1h
    input_series:
      - series: 'sloburn_capacity_rate{{profile="search",bound="low",instance="a",job="sloburn"}}'
        values: '{rate}x168 {low}x4'
      - series: 'sloburn_capacity_rate{{profile="search",bound="low",instance="b",job="sloburn"}}'
        values: '{rate}x172'
      - series: 'sloburn_capacity_rate{{profile="search",bound="low",instance="c",job="sloburn"}}'
        values: '{rate}x168 10x4'
      - series: 'sloburn_build_info{{instance="a",job="sloburn"}}'
        values: '1x172'
    alert_rule_test:
      - eval_time: 167h
        alertname: SloburnCapacityLow
        exp_alerts: []
      - eval_time: 170h
        alertname: SloburnCapacityLow
        exp_alerts:
          - exp_labels: {{ severity: ticket, profile: search, sloburn_capacity: dropped, bound: low, instance: a, job: sloburn }}
            exp_annotations: {{ summary: "the capacity of search at its SLO fell to {low}/s, more than 20% under its 7-day median" }}
          - exp_labels: {{ severity: ticket, profile: search, sloburn_capacity: dropped, bound: low, instance: c, job: sloburn }}
            exp_annotations: {{ summary: "the capacity of search at its SLO fell to 10/s, more than 20% under its 7-day median" }}
          - exp_labels: {{ severity: ticket, profile: search, sloburn_capacity: below_min_rate, bound: low, instance: c, job: sloburn }}
            exp_annotations: {{ summary: "the capacity of search at its SLO is 10/s, under its min_rate 20/s" }}
"#
    );
    std::fs::write(dir.path().join("test.yml"), test).unwrap();
    let out = Command::new(which("promtool"))
        .current_dir(dir.path())
        .args(["test", "rules", "test.yml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}\n{rules}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Item 3: `check` refuses what cannot be searched, each error at its file:line:col.
#[test]
fn check_positions_what_a_capacity_profile_cannot_be() {
    let head = "targets:\n  t:\n    url: http://127.0.0.1:9/\nprofiles:\n  p:\n    target: t\n    executor: capacity\n";
    let cases: &[(&str, &str)] = &[
        // VU executors' fields mixed in.
        (
            "    max_rate: 100/s\n    vus: 10\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\n",
            "t.yaml:9:10: profiles.p.vus: `vus` is a VU executor's: a capacity search is open model only",
        ),
        // Thresholds that cannot fail with the target.
        (
            "    max_rate: 100/s\n    thresholds:\n      http_reqs: [\"rate>10\"]\n",
            "t.yaml:10:7: profiles.p.thresholds.http_reqs: `http_reqs` cannot fail a capacity step",
        ),
        // max_rate under the first step.
        (
            "    max_rate: 10/s\n    start_rate: 20/s\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\n",
            "t.yaml:8:15: profiles.p.max_rate: max_rate (10/s) is under the first step (start_rate 20/s)",
        ),
        // No pass condition at all.
        (
            "    max_rate: 100/s\n",
            "t.yaml:7:15: profiles.p.executor: nothing decides a capacity step of `p`",
        ),
        // A bad alert setting.
        (
            "    max_rate: 100/s\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\n    capacity: { max_drop: 150% }\n",
            "t.yaml:11:27: profiles.p.capacity.max_drop: max_drop must be above 0 % and under 100 %",
        ),
        // Split across shards: each shard would search a share of the rate.
        (
            "    max_rate: 100/s\n    placement: split\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\n",
            "t.yaml:9:16: profiles.p.placement: a capacity search runs whole in one daemon, never split across shards",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (body, said) in cases {
        let text = format!("{head}{body}");
        let e = sloburn::config::from_str(&text, "t.yaml", dir.path(), &crate::support::test_env())
            .err()
            .unwrap_or_else(|| panic!("accepted:\n{text}"))
            .to_string();
        assert!(e.contains(said), "{said}\nnot in:\n{e}\n{text}");
    }
    // A latency SLO on the target is a pass condition: accepted, and it searches the open
    // model with the search's fields.
    let ok = format!(
        "{head}    max_rate: 100/s\n    step_duration: 2s\nslos:\n  lat:\n    target: t\n    sli: {{ latency: {{ under: 100ms }} }}\n    objective: 95\n    period: 1d\n"
    );
    let cfg = sloburn::config::from_str(&ok, "t.yaml", dir.path(), &crate::support::test_env())
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    let c = cfg.profiles["p"].capacity.clone().unwrap();
    assert_eq!((c.max_rate, c.start_rate), (100.0, 100.0 / 32.0));
    assert_eq!(c.step_duration, Some(Duration::from_secs(2)));
    assert_eq!(c.precision, 0.05);
    // Whole on its owner shard, never split.
    assert_eq!(
        cfg.profiles["p"].placement,
        sloburn::config::spec::Placement::Owned
    );
    // `sloburn check` says it as every config error, and exits 78.
    let bad = write_config(dir.path(), &format!("{head}    max_rate: 100/s\n"));
    let out = crate::support::sloburn()
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let text = crate::support::all_output(&out);
    assert!(
        text.contains(":7:15: profiles.p.executor: nothing decides"),
        "{text}"
    );
    // `run` on a capacity profile points at `capacity`, and sends nothing.
    let good = write_config(dir.path(), &ok);
    let out = crate::support::sloburn()
        .arg("run")
        .arg(&good)
        .args(["--profile", "p"])
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "profile `p` is a capacity search (executor: capacity): run it with `sloburn capacity "
        ),
        "{text}"
    );
}
