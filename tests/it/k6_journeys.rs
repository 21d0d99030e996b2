//! Journeys side by side with the real k6 (issue 29, part 2): the same shop, the same mix of
//! two journeys, the same iterations, run by k6 1.1 (a journey is `group(journey, () =>
//! group(step, ...))`) and by `sloburn run`. The journeys use one check name in several steps
//! and both GET and POST. Compared: every `--out json` sample with its tags, the metric
//! definitions, the `{method}`, `{check}`, `{group}` and `{name}` sub-metrics' counts and
//! verdicts, the summary export's `root_group` (groups, checks, ids, counts) and
//! `group_duration`, the exit code, and each check name printed once in the text summary.
//! sloburn's documented extras: `http_req_corrected_duration`, `http_req_dns`, `state`, and
//! the `step` tag on a journey's request and check samples.

use crate::k6::k6;
use crate::support::{ThreadServer, root, serve_on_thread, sloburn, write_config};
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Iterations of each run; the mix puts 70% into `browse`, 30% into `buy`.
const ITERATIONS: u32 = 40;

/// (metric, expression) in both tools. `{name:…}` takes the shop's URL: `BASE` is replaced.
const THRESHOLDS: &[(&str, &str)] = &[
    ("http_req_duration{method:GET}", "p(95)<5000"),
    ("http_reqs{method:GET}", "count>0"),
    ("http_reqs{method:POST}", "count>0"),
    ("http_req_failed{method:POST}", "rate<0.01"),
    ("checks{check:status is 200}", "rate>0.5"),
    ("checks{check:added}", "rate==1"),
    ("http_req_duration{group:::buy::login}", "p(95)<5000"),
    ("http_reqs{group:::buy::cart}", "count>0"),
    ("http_reqs{group:::buy}", "count==0"),
    // Three product pages in four are 404: this one fails in both.
    ("http_req_failed{group:::browse::product}", "rate<0.5"),
    ("checks{group:::browse::product}", "rate>0.2"),
    ("group_duration{group:::buy}", "p(95)<5000"),
    ("group_duration{group:::browse::home}", "max<5000"),
    ("iterations", "count==40"),
    ("iterations{group:::buy}", "count==0"),
    ("http_reqs{name:BASE/login}", "count>0"),
];

/// The shop: a token from `/login` opens `/cart`; a product page answers 200 to the
/// iterations whose number (`X-Iter`) is a multiple of four and 404 to the others, so both
/// tools see the same statuses in the same iterations.
fn shop() -> ThreadServer {
    async fn login() -> (StatusCode, &'static str) {
        (StatusCode::OK, r#"{"token":"t0k"}"#)
    }
    async fn cart(h: HeaderMap) -> StatusCode {
        match h.get("authorization").and_then(|v| v.to_str().ok()) {
            Some("Bearer t0k") => StatusCode::OK,
            _ => StatusCode::UNAUTHORIZED,
        }
    }
    async fn add() -> (StatusCode, &'static str) {
        (StatusCode::CREATED, "added")
    }
    async fn product(h: HeaderMap) -> StatusCode {
        let iter: u64 = h
            .get("x-iter")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1);
        if iter.is_multiple_of(4) {
            StatusCode::OK
        } else {
            StatusCode::NOT_FOUND
        }
    }
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/login", post(login))
        .route("/cart", get(cart))
        .route("/cart/items", post(add))
        .route("/products/1", get(product));
    serve_on_thread(app)
}

fn thresholds(base: &str) -> Vec<(String, String)> {
    THRESHOLDS
        .iter()
        .map(|(m, e)| (m.replace("BASE", base), (*e).to_string()))
        .collect()
}

fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// The k6 script. The journey of iteration k is sloburn's mix: the Weyl sequence
/// `frac(k·φ)` over the cumulative weights (`journey/mix.rs`), in BigInt.
fn k6_script(base: &str) -> String {
    let t: Vec<String> = thresholds(base)
        .iter()
        .map(|(m, e)| format!("    {}: [{}],", js(m), js(e)))
        .collect();
    format!(
        r#"import http from 'k6/http';
import {{ check, group }} from 'k6';
import exec from 'k6/execution';
const B = {base};
export const options = {{
  scenarios: {{ shoppers: {{ executor: 'shared-iterations', vus: 2, iterations: {ITERATIONS} }} }},
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
  thresholds: {{
{thresholds}
  }},
}};
const G = 0x9E3779B97F4A7C15n;
function journey(k) {{
  const x = (((BigInt(k) * G) % (1n << 64n)) * 100n) >> 64n;
  return x < 70n ? 'browse' : 'buy';
}}
const ok = {{ 'status is 200': (r) => r.status === 200 }};
export default function () {{
  const k = exec.scenario.iterationInTest;
  if (journey(k) === 'browse') {{
    group('browse', () => {{
      group('home', () => {{ check(http.get(B + '/'), ok); }});
      group('product', () => {{
        check(http.get(B + '/products/1', {{ headers: {{ 'X-Iter': String(k) }} }}), ok);
      }});
    }});
  }} else {{
    group('buy', () => {{
      let token = '';
      group('login', () => {{
        const r = http.post(B + '/login', JSON.stringify({{ user: 'ann' }}),
          {{ headers: {{ 'Content-Type': 'application/json' }} }});
        check(r, ok);
        token = r.json('token');
      }});
      group('cart', () => {{
        check(http.get(B + '/cart', {{ headers: {{ Authorization: 'Bearer ' + token }} }}), ok);
      }});
      group('add', () => {{
        check(http.post(B + '/cart/items', 'sku=1'), {{ added: (r) => r.status === 201 }});
      }});
    }});
  }}
}}
"#,
        base = js(base),
        thresholds = t.join("\n"),
    )
}

fn sloburn_config(base: &str) -> String {
    let t: Vec<String> = thresholds(base)
        .iter()
        .map(|(m, e)| format!("      {}: [{}]", js(m), js(e)))
        .collect();
    format!(
        r#"targets:
  shop:
    url: {base}/
journeys:
  browse:
    target: shop
    steps:
      - name: home
        path: /
        checks: [ {{ name: "status is 200", status: 200 }} ]
      - name: product
        path: /products/1
        headers: {{ X-Iter: "${{iter}}" }}
        checks: [ {{ name: "status is 200", status: 200 }} ]
  buy:
    target: shop
    steps:
      - name: login
        method: POST
        path: /login
        json: {{ user: ann }}
        checks: [ {{ name: "status is 200", status: 200 }} ]
        capture: {{ token: {{ json: "$.token" }} }}
      - name: cart
        path: /cart
        headers: {{ Authorization: "Bearer ${{token}}" }}
        checks: [ {{ name: "status is 200", status: 200 }} ]
      - name: add
        method: POST
        path: /cart/items
        body: sku=1
        checks: [ {{ name: added, status: 201 }} ]
profiles:
  shoppers:
    mix: [ {{ journey: browse, weight: 70 }}, {{ journey: buy, weight: 30 }} ]
    executor: shared-iterations
    vus: 2
    iterations: {ITERATIONS}
    thresholds:
{thresholds}
"#,
        thresholds = t.join("\n"),
    )
}

struct Ran {
    code: Option<i32>,
    export: Value,
    ndjson: Vec<Value>,
    output: String,
}

fn ran(out: std::process::Output, dir: &Path, name: &str) -> Ran {
    let output = crate::support::all_output(&out);
    let export = std::fs::read_to_string(dir.join(format!("{name}.json")))
        .unwrap_or_else(|e| panic!("{name}: no summary export ({e})\n{output}"));
    let ndjson = std::fs::read_to_string(dir.join(format!("{name}.ndjson")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    Ran {
        code: out.status.code(),
        export: serde_json::from_str(&export).unwrap(),
        ndjson,
        output,
    }
}

fn run_k6(dir: &Path, base: &str) -> Ran {
    let script = dir.join("shop.js");
    std::fs::write(&script, k6_script(base)).unwrap();
    let out = Command::new(k6())
        .args(["run", "--no-color", "--summary-export"])
        .arg(dir.join("k6.json"))
        .arg("--out")
        .arg(format!("json={}", dir.join("k6.ndjson").display()))
        .arg(&script)
        .env("K6_NO_USAGE_REPORT", "true")
        .output()
        .unwrap();
    ran(out, dir, "k6")
}

fn run_sloburn(dir: &Path, base: &str) -> Ran {
    let config = write_config(dir, &sloburn_config(base));
    let out = sloburn()
        .arg("run")
        .arg(&config)
        .arg("--summary-export")
        .arg(dir.join("sloburn.json"))
        .arg("--out")
        .arg(format!("json={}", dir.join("sloburn.ndjson").display()))
        .output()
        .unwrap();
    ran(out, dir, "sloburn")
}

/// sloburn's own metrics, left out of the comparison.
const EXTRA_METRICS: &[&str] = &["http_req_corrected_duration", "http_req_dns"];

/// Every sample as (metric, its tags) with how many there are. The VU gauges are written by
/// the clock (k6: one pair a second, none in a run under a second; sloburn also one at the
/// end), not per request: left out, with sloburn's extra metrics and `step` tag.
fn samples(lines: &[Value]) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for l in lines.iter().filter(|l| l["type"] == "Point") {
        let metric = l["metric"].as_str().unwrap().to_string();
        if EXTRA_METRICS.contains(&metric.as_str()) || metric.starts_with("vus") {
            continue;
        }
        let mut tags = l["data"]["tags"].clone();
        if let Value::Object(m) = &mut tags {
            m.remove("step");
        }
        *out.entry((metric, tags.to_string())).or_insert(0) += 1;
    }
    out
}

/// The metrics defined by `Metric` lines that have samples (k6 defines a metric with its
/// first sample, sloburn up front; the VU gauges by the clock, as above), with their types and sub-metrics (in name order: k6's
/// order is its map's).
fn definitions(lines: &[Value]) -> BTreeMap<String, Value> {
    let sampled: BTreeSet<&str> = lines
        .iter()
        .filter(|l| l["type"] == "Point")
        .filter_map(|l| l["metric"].as_str())
        .filter(|m| !m.starts_with("vus"))
        .collect();
    lines
        .iter()
        .filter(|l| l["type"] == "Metric")
        .map(|l| (l["metric"].as_str().unwrap().to_string(), l["data"].clone()))
        .filter(|(m, _)| !EXTRA_METRICS.contains(&m.as_str()) && sampled.contains(m.as_str()))
        .map(|(m, mut data)| {
            if let Value::Array(subs) = &mut data["submetrics"] {
                subs.sort_by_key(|x| x["name"].to_string());
            }
            (m, data)
        })
        .collect()
}

/// The lines of the text summary's TOTAL RESULTS that list a check (`    ✓ NAME`).
fn check_lines(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| !l.contains("█ TOTAL RESULTS"))
        .take_while(|l| l.trim() != "HTTP")
        .filter(|l| l.starts_with("    ✓ ") || l.starts_with("    ✗ "))
        .map(str::trim_end)
        .collect()
}

/// The `value`s of `metric`'s samples whose `group` tag is `group` or, when `nested`, a group
/// inside it (every group when `group` is empty).
fn sample_values(lines: &[Value], metric: &str, group: &str, nested: bool) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l["type"] == "Point" && l["metric"] == metric)
        .filter(|l| {
            let g = l["data"]["tags"]["group"].as_str().unwrap_or_default();
            group.is_empty() || g == group || (nested && g.starts_with(&format!("{group}::")))
        })
        .map(|l| l["data"]["value"].as_f64().unwrap())
        .collect()
}

/// One tool's `group_duration` against its other figures of the same run: for each group, the
/// sum of its durations is at least the sum of its requests' `http_req_duration` (every
/// request of a group runs inside it); the journeys' (`::browse`, `::buy`: one per iteration)
/// at most the sum of `iteration_duration`; and the export's avg, min, max and percentiles
/// are those of the samples (k6's interpolated percentiles; `quantile_error` is the relative
/// precision of the tool's percentiles). A group timed in the wrong unit, over the wrong span
/// or not at all fails here; `> 0` did not see it.
fn group_durations_hold_together(r: &Ran, who: &str, quantile_error: f64) {
    let sum = |v: Vec<f64>| v.iter().sum::<f64>();
    for group in [
        "::browse",
        "::browse::home",
        "::browse::product",
        "::buy",
        "::buy::login",
        "::buy::cart",
        "::buy::add",
    ] {
        let durations = sample_values(&r.ndjson, "group_duration", group, false);
        assert!(!durations.is_empty(), "{who}: no group_duration of {group}");
        let lasted = sum(durations);
        let requests = sum(sample_values(&r.ndjson, "http_req_duration", group, true));
        assert!(
            lasted >= requests && requests > 0.0,
            "{who}: {group} lasted {lasted:.3} ms in all, its requests {requests:.3} ms"
        );
    }
    let journeys = sum(sample_values(
        &r.ndjson,
        "group_duration",
        "::browse",
        false,
    )) + sum(sample_values(&r.ndjson, "group_duration", "::buy", false));
    let iterations = sum(sample_values(&r.ndjson, "iteration_duration", "", true));
    // (sloburn times a journey and its iteration as one span: equal, but for the sums' rounding)
    assert!(
        journeys <= iterations * (1.0 + 1e-12),
        "{who}: journeys lasted {journeys:.3} ms, their iterations {iterations:.3} ms"
    );
    let mut all = sample_values(&r.ndjson, "group_duration", "", true);
    all.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let export = &r.export["metrics"]["group_duration"];
    let close = |stat: &str, want: f64, rel: f64| {
        let got = export[stat].as_f64().unwrap();
        assert!(
            (got - want).abs() <= want.abs() * rel + 1e-6,
            "{who}: group_duration {stat} {got} in the export, {want} from the samples"
        );
    };
    close("min", all[0], 1e-9);
    close("max", all[all.len() - 1], 1e-9);
    close("avg", sum(all.clone()) / all.len() as f64, 1e-9);
    for (stat, q) in [
        ("med", 0.5),
        ("p(90)", 0.9),
        ("p(95)", 0.95),
        ("p(99)", 0.99),
    ] {
        let pos = q * (all.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        let want = all[lo] + (all[hi] - all[lo]) * (pos - lo as f64);
        close(stat, want, quantile_error + 1e-9);
    }
}

/// The figures a sub-metric's entry in the export holds that must be equal, not close:
/// counts, passes and fails, and the threshold verdicts.
fn exact(entry: &Value) -> Value {
    let mut v = serde_json::Map::new();
    for key in ["count", "passes", "fails", "thresholds"] {
        if let Some(x) = entry.get(key) {
            v.insert(key.into(), x.clone());
        }
    }
    Value::Object(v)
}

#[test]
fn a_journey_run_tags_filters_and_exports_each_request_as_k6_does() {
    // scripts/install-k6.sh pins k6 1.1.
    let version = Command::new(k6()).arg("version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).contains("k6 v1.1."),
        "{version:?}"
    );
    assert!(root().join("scripts/install-k6.sh").exists());
    let server = shop();
    let addr = server.addr;
    let base = format!("http://{addr}");
    let dir = tempfile::tempdir().unwrap();
    let k = run_k6(dir.path(), &base);
    let s = run_sloburn(dir.path(), &base);

    // k6 walked the journeys the mix picks (the figures the rest of the test compares are
    // about these requests), and one threshold fails in both.
    let browse: Vec<u64> = (0..u64::from(ITERATIONS))
        .filter(|k| {
            let point = u128::from(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            (point * 100) >> 64 < 70
        })
        .collect();
    let buy = u64::from(ITERATIONS) - browse.len() as u64;
    let found = browse.iter().filter(|k| k.is_multiple_of(4)).count() as u64;
    assert_eq!(k.code, Some(99), "k6:\n{}", k.output);
    assert_eq!(s.code, k.code, "sloburn:\n{}", s.output);
    let mk = &k.export["metrics"];
    let ms = &s.export["metrics"];
    assert_eq!(mk["iterations"]["count"], ITERATIONS);
    assert_eq!(
        mk["http_reqs"]["count"],
        2 * browse.len() as u64 + 3 * buy,
        "{}",
        k.output
    );
    assert_eq!(
        mk["checks{check:status is 200}"]["passes"],
        browse.len() as u64 + found + 2 * buy
    );

    // Every sample and its tags.
    let (ks, ss) = (samples(&k.ndjson), samples(&s.ndjson));
    let only_k6: Vec<_> = ks.iter().filter(|(x, n)| ss.get(*x) != Some(n)).collect();
    let only_sloburn: Vec<_> = ss.iter().filter(|(x, n)| ks.get(*x) != Some(n)).collect();
    assert!(
        only_k6.is_empty() && only_sloburn.is_empty(),
        "--out json samples differ (metric, tags) → count:\n  k6: {only_k6:#?}\n  sloburn: \
         {only_sloburn:#?}"
    );
    // sloburn's `step` tag names the step of the group.
    let login = s
        .ndjson
        .iter()
        .find(|l| l["metric"] == "http_reqs" && l["data"]["tags"]["group"] == "::buy::login")
        .unwrap();
    assert_eq!(login["data"]["tags"]["step"], "login");
    assert_eq!(login["data"]["tags"]["method"], "POST");
    let (kd, sd) = (definitions(&k.ndjson), definitions(&s.ndjson));
    for m in kd.keys().chain(sd.keys()) {
        assert_eq!(sd.get(m), kd.get(m), "the Metric line of {m}: sloburn, k6");
    }

    // The export: the same metrics (but the clock's VU gauges, which k6 leaves out of a run
    // shorter than a second), the same counts and verdicts of every sub-metric.
    let keys = |m: &Value| -> BTreeSet<String> {
        m.as_object()
            .unwrap()
            .keys()
            .filter(|k| !EXTRA_METRICS.contains(&k.as_str()) && !k.starts_with("vus"))
            .cloned()
            .collect()
    };
    assert_eq!(keys(ms), keys(mk), "summary-export metrics");
    for key in keys(mk) {
        let (ke, se) = (exact(&mk[&key]), exact(&ms[&key]));
        if key.contains('{') || key == "checks" || key == "iterations" || key == "http_reqs" {
            assert_eq!(se, ke, "{key}: sloburn (left) and k6 (right)");
        }
    }
    for (m, _) in thresholds(&base) {
        assert!(mk[&m]["thresholds"].is_object(), "k6 has {m}");
    }
    // group_duration: the same relations hold in both tools' figures (k6's show the
    // relations are k6's): a group lasts at least as long as its requests, the journeys at
    // most as long as their iterations, and the export summarises the samples.
    group_durations_hold_together(&k, "k6", 0.0);
    group_durations_hold_together(&s, "sloburn", 0.0027);
    // root_group: the groups, their checks with k6's ids, paths and counts; no check at the
    // root, since every check is made in a group.
    assert_eq!(
        s.export["root_group"], k.export["root_group"],
        "root_group: sloburn (left) and k6 (right)"
    );
    assert_eq!(k.export["root_group"]["checks"], serde_json::json!({}));

    // The text summary lists a check name once, with every step's counts.
    assert_eq!(
        check_lines(&s.output),
        check_lines(&k.output),
        "checks in the text summary\nsloburn:\n{}\nk6:\n{}",
        s.output,
        k.output
    );
}
