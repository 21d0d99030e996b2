//! Issue 33, part 2: `sloburn rules --native-histograms` reads latency SLOs from native
//! histograms with `histogram_fraction`, and the dashboards' percentile panels answer from
//! classic or native series alike. A real Prometheus with `--enable-feature=native-histograms`
//! scrapes a daemon that writes native buckets only, evaluates the generated rules, and its
//! recorded SLI matches the daemon's own within one native bucket.
//!
//! `promtool test rules` (2.42, Debian bookworm's) cannot feed native histograms to a unit test
//! (its series notation has no `{{schema:..}}` form: "unexpected character in series
//! sequence"), so the native rules are proven by that real Prometheus instead, besides
//! `promtool check rules` and a golden file.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::dashboards::{dashboards, panels};
use crate::panels::{resolve, substitute};
use crate::support::*;
use sloburn::target::{Distribution, TargetOptions};

const CORRECTED: &str = "sloburn_http_req_corrected_duration_seconds";
/// Journey iterations of the `walker` run (two requests each).
const WALKS: u64 = 8;
/// The native schema the daemon writes: buckets a factor 2^(1/32) (2.2 %) wide.
const SCHEMA: i32 = 5;

/// A daemon config: target `api` at `target`, native buckets only at [`SCHEMA`], a `burst`
/// profile (3 s idle, so Prometheus scrapes its series empty before any request, then about
/// 350 requests) and a `walker` journey profile that run only when asked, and SLOs of every
/// kind of latency scope (plus one availability SLO, which stays on the event counters).
fn config(target: &str, data: &Path) -> String {
    format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 5s
  native_histograms:
    schema: {SCHEMA}
    classic_buckets: false
storage:
  path: "{data}"
  flush_interval: 1s
targets:
  api:
    url: http://{target}/api
    checks:
      - status: 200
profiles:
  burst:
    target: api
    every: 1h
    executor: ramping-arrival-rate
    start_rate: 0/s
    stages:
      - {{ duration: 3s, target: 0/s }}
      - {{ duration: 1s, target: 100/s }}
      - {{ duration: 3s, target: 100/s }}
  walker:
    journey: walk
    every: 1h
    executor: shared-iterations
    vus: 4
    iterations: {WALKS}
  odd.name:
    target: api
    executor: constant-vus
    vus: 1
    duration: 1s
journeys:
  walk:
    target: api
    steps:
      - {{ name: one, path: /a }}
      - {{ name: two, path: /b }}
slos:
  api-availability:
    target: api
    sli: availability
    objective: 99.9
    period: 1d
  api-latency:
    target: api
    profiles: [burst]
    sli: {{ latency: {{ under: 300ms }} }}
    objective: 99
    period: 1d
  api-duration:
    target: api
    profiles: [burst, "odd.name"]
    sli: {{ latency: {{ under: 250ms, measure: duration, failures: exclude }} }}
    objective: 95
    period: 7d
  walk-step:
    journey: walk
    step: two
    sli: {{ latency: {{ under: 1s }} }}
    objective: 99
    period: 1d
  walk-whole:
    journey: walk
    sli: {{ latency: {{ under: 2500ms }} }}
    objective: 90
    period: 1d
"#,
        data = data.display(),
    )
}

/// The generated rules of `config` with `--native-histograms`.
fn native_rules(config: &Path) -> String {
    sloburn_rules([
        config.as_os_str(),
        std::ffi::OsStr::new("--native-histograms"),
    ])
}

/// The rules of the SLO group `slo` in a generated file.
fn group<'r>(rules: &'r str, slo: &str) -> &'r str {
    let start = rules
        .find(&format!("- name: \"sloburn-slo-{slo}\""))
        .unwrap_or_else(|| panic!("no group for {slo}"));
    let rest = &rules[start + 1..];
    &rules[start..start + 1 + rest.find("\n  - name: ").unwrap_or(rest.len())]
}

#[test]
fn issue_33_native_rules_read_each_latency_slo_from_its_histogram_and_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &config("127.0.0.1:9", Path::new("/var/lib/x")));
    let rules = native_rules(&path);
    let file = dir.path().join("native.rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let out = Command::new(which("promtool"))
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", all_output(&out));
    golden(&root().join("tests/it/rules/native.rules.yml"), &rules);

    // Each latency SLO names its own histogram and series; every window of it is native.
    for (slo, want) in [
        (
            "api-latency",
            "1 - histogram_fraction(0, 0.3, sum(rate(sloburn_http_req_corrected_duration_seconds{target=\"api\",profile=~\"burst\"}[5m])))",
        ),
        (
            "api-duration",
            "1 - histogram_fraction(0, 0.25, sum(rate(sloburn_http_req_duration_seconds{target=\"api\",profile=~\"burst|odd\\\\.name\"}[5m])))",
        ),
        (
            "walk-step",
            "1 - histogram_fraction(0, 1, sum(rate(sloburn_http_req_corrected_duration_seconds{target=\"api\",journey=\"walk\",step=\"two\"}[5m])))",
        ),
        (
            "walk-whole",
            "1 - histogram_fraction(0, 2.5, sum(rate(sloburn_iteration_duration_seconds{target=\"api\",journey=\"walk\"}[5m])))",
        ),
    ] {
        let g = group(&rules, slo);
        assert!(g.contains(want), "{slo}: no `{want}` in\n{g}");
        assert!(!g.contains("sloburn_slo_events_total{"), "{slo}:\n{g}");
        let windows = g.matches("- record: slo:sli_error:ratio_rate").count();
        assert_eq!(
            windows,
            g.matches("1 - histogram_fraction(").count(),
            "{slo}"
        );
        assert!(
            g.contains("sum(increase("),
            "{slo}: the period from increase"
        );
    }
    // An availability SLO keeps the event counters; without the flag nothing is native.
    let g = group(&rules, "api-availability");
    assert!(g.contains("sloburn_slo_events_total") && !g.contains("histogram_fraction"));
    let classic = sloburn_rules([&path]);
    assert!(!classic.contains("histogram_fraction"));
    assert!(classic.contains("sloburn_slo_events_total{slo=\"api-latency\",result=\"bad\"}"));
}

/// A `sloburn serve` whose target answers in 50..550 ms, uniformly (so about half of the
/// requests miss a 300 ms bound), scraped by a real native-histogram Prometheus that evaluates
/// the generated native rules every second.
struct Setup {
    _target: BackgroundTarget,
    _dir: tempfile::TempDir,
    daemon: Daemon,
    prom: Server,
}

fn setup() -> Setup {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(300),
        jitter: Duration::from_millis(250),
        distribution: Distribution::Uniform,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        &config(&target.addr.to_string(), &dir.path().join("data")),
    );
    let rules = dir.path().join("rules.yml");
    let generated = native_rules(&path);
    assert!(generated.contains("1 - histogram_fraction(0, 0.3, sum(rate("));
    std::fs::write(&rules, generated).unwrap();
    let daemon = Daemon::start(&path, &["--no-watch"]);
    let prom = Server::prometheus_with_config(
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [\"{}\"]\nscrape_configs:\n  - job_name: sloburn\n    static_configs:\n      - targets: [\"{}\"]\n",
            rules.display(),
            daemon.base.trim_start_matches("http://"),
        ),
        &["--enable-feature=native-histograms"],
    );
    let s = Setup {
        _target: target,
        _dir: dir,
        daemon,
        prom,
    };
    // Prometheus applies its targets a few seconds after start: runs start once it scrapes.
    s.until("up{job=\"sloburn\"}", 1.0);
    s
}

impl Setup {
    /// Waits until Prometheus has a sample of `q` equal to `want`.
    fn until(&self, q: &str, want: f64) {
        let got = eventually(Duration::from_secs(60), || {
            let r = self.prom.query(q);
            r.iter().any(|(_, v)| *v == want).then_some(())
        });
        assert!(
            got.is_some(),
            "{q} never became {want}: {:?}\n{}",
            self.prom.query(q),
            self.prom.log_tail()
        );
    }

    /// The daemon's exposition once the runs of `profiles` are over and the requests of
    /// `profile` (all of them when `None`) are every event of `slo`.
    fn finished(&self, profiles: &[&str], profile: Option<&str>, slo: &str) -> String {
        let requests = match profile {
            Some(p) => format!("{CORRECTED}_count{{target=\"api\",profile=\"{p}\""),
            None => format!("{CORRECTED}_count{{"),
        };
        let events = format!("sloburn_slo_events_total{{slo=\"{slo}\"");
        eventually(Duration::from_secs(90), || {
            let m = self.daemon.metrics();
            let done = profiles
                .iter()
                .all(|p| metric_sum(&m, &format!("sloburn_runs_total{{profile=\"{p}\"")) >= 1.0);
            let n = metric_sum(&m, &requests);
            (done && n > 0.0 && metric_sum(&m, &events) == n).then_some(m)
        })
        .unwrap_or_else(|| panic!("the runs of {profiles:?} did not finish"))
    }

    /// Starts `profile` through the admin API.
    fn run(&self, profile: &str) {
        let url = format!("{}/api/profiles/{profile}/run", self.daemon.base);
        let (code, body) = runtime().block_on(request("POST", &url, Some(ADMIN_TOKEN)));
        assert_eq!(code, 202, "{body}");
    }
}

#[test]
fn issue_33_a_real_prometheus_records_the_daemons_latency_sli_from_native_histograms() {
    let s = setup();
    let sel = "{profile=\"burst\"}";
    s.run("burst");
    // The series are made when the run starts: scraped empty in its idle seconds, `rate` then
    // sees every request.
    s.until(&format!("histogram_count(sum({CORRECTED}{sel}))"), 0.0);
    let text = s.finished(&["burst"], Some("burst"), "api-latency");
    let n = metric_sum(&text, "sloburn_slo_events_total{slo=\"api-latency\"");
    let bad = metric_sum(
        &text,
        "sloburn_slo_events_total{slo=\"api-latency\",result=\"bad\"",
    );
    let own = bad / n;
    assert!(
        n > 200.0 && own > 0.2 && own < 0.8,
        "{bad} of {n} slower than 300 ms"
    );
    s.until(&format!("histogram_count(sum({CORRECTED}{sel}))"), n);

    // Within one native bucket: the share of requests in the buckets around 300 ms bounds how
    // far interpolation inside the bucket holding 300 ms can be from the daemon's exact count.
    let base = 2f64.powf(2f64.powi(-SCHEMA));
    let slack = s.prom.scalar(&format!(
        "histogram_fraction({}, {}, sum(rate({CORRECTED}{sel}[5m])))",
        0.3 / base,
        0.3 * base
    ));
    assert!(slack < 0.05, "{slack} of the requests near 300 ms");
    // The rule as evaluated after the last scrape: equal to its expression over final data.
    let recorded = "slo:sli_error:ratio_rate5m{sloth_slo=\"api-latency\"}";
    let direct = format!("1 - histogram_fraction(0, 0.3, sum(rate({CORRECTED}{sel}[5m])))");
    let want = s.prom.scalar(&direct);
    let mut last = f64::NAN;
    eventually(Duration::from_secs(30), || {
        last = s.prom.scalar(recorded);
        ((last - want).abs() < 1e-9).then_some(())
    });
    eprintln!("daemon {own:.4}, native rule {last:.4} ({want:.4}), one bucket {slack:.4}");
    assert!(
        (last - own).abs() <= slack + 1e-9,
        "recorded {last}, daemon {own}, allowed {slack}\n{}",
        s.prom.log_tail()
    );
    // The same ratio through the period's `increase`.
    let period = s
        .prom
        .scalar("slo:sli_error:ratio_rate1d{sloth_slo=\"api-latency\"}");
    assert!((period - own).abs() <= slack + 1e-9, "1d: {period}");

    // Burning about 50x a 1 % budget: Prometheus fires the tiers the daemon fires.
    let daemon_tiers = || {
        let m = s.daemon.metrics();
        let mut t: Vec<String> = m
            .lines()
            .filter(|l| l.starts_with("sloburn_slo_alert_active{slo=\"api-latency\""))
            .filter(|l| l.ends_with(" 1"))
            .filter_map(|l| Some(l.split("tier=\"").nth(1)?.split('"').next()?.to_string()))
            .collect();
        t.sort();
        t
    };
    let theirs = daemon_tiers();
    assert!(!theirs.is_empty(), "the daemon fires no tier at {own}");
    let ours = eventually(Duration::from_secs(30), || {
        let mut t: Vec<String> = s
            .prom
            .query("ALERTS{alertname=\"SloburnErrorBudgetBurn\",sloth_slo=\"api-latency\",alertstate=\"firing\"}")
            .iter()
            .filter_map(|(l, _)| Some(l["sloburn_tier"].as_str()?.to_string()))
            .collect();
        t.sort();
        (t == theirs).then_some(t)
    });
    assert_eq!(ours.as_ref(), Some(&theirs), "{}", s.prom.log_tail());
}

/// Every percentile panel (and the latency heatmap) answers from a Prometheus that has native
/// series only, where its classic half alone is empty.
#[test]
fn issue_33_percentile_panels_answer_from_native_histograms() {
    let s = setup();
    s.run("burst");
    s.run("walker");
    let text = s.finished(&["burst", "walker"], None, "api-availability");
    let all = metric_sum(&text, &format!("{CORRECTED}_count{{"));
    s.until(&format!("histogram_count(sum({CORRECTED}))"), all);
    s.until(
        "histogram_count(sum(sloburn_iteration_duration_seconds))",
        WALKS as f64,
    );
    let mut checked = 0;
    let mut problems = Vec::new();
    for (file, d) in dashboards() {
        let vars = resolve(&s.prom, &d);
        for p in panels(&d) {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap_or_default();
                if !expr.contains("_bucket") {
                    continue;
                }
                let at = format!("{file} / {} / {}", p["title"], t["refId"]);
                let q = substitute(expr, &vars);
                let Some((classic, native)) = q.split_once(" or ") else {
                    problems.push(format!("{at}: classic buckets only: {expr}"));
                    continue;
                };
                if !s.prom.query(classic).is_empty() {
                    problems.push(format!("{at}: classic series in a native-only Prometheus"));
                }
                if native.contains("_bucket") || s.prom.query(native).is_empty() {
                    problems.push(format!("{at}: no native answer: {native}"));
                }
                if s.prom.query(&q).is_empty() {
                    problems.push(format!("{at}: empty: {q}"));
                }
                checked += 1;
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // 13 percentile panels and the latency heatmap.
    assert_eq!(checked, 14);
}
