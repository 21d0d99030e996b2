//! Journeys end to end: the real `sloburn` binary walks multi-step iterations against a shop
//! server started here on 127.0.0.1, which checks what it is sent (tokens, users, paths).

use crate::support::*;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What the shop saw.
#[derive(Default)]
struct Shop {
    next: u64,
    /// token → user it was issued to; removed when a cart request spends it.
    issued: HashMap<String, String>,
    logins: BTreeMap<String, u64>,
    carts_ok: u64,
    mismatches: u64,
    unauthorized: u64,
    paths: BTreeMap<String, u64>,
}

type Shared = Arc<Mutex<Shop>>;

async fn login(
    State(s): State<Shared>,
    Json(body): Json<serde_json::Value>,
) -> (StatusCode, String) {
    let (Some(user), Some(pw)) = (body["user"].as_str(), body["password"].as_str()) else {
        return (StatusCode::BAD_REQUEST, "{}".into());
    };
    if pw != format!("pw-{user}") {
        return (StatusCode::FORBIDDEN, "{}".into());
    }
    let mut shop = s.lock().unwrap();
    shop.next += 1;
    let token = format!("tok-{}-{user}", shop.next);
    shop.issued.insert(token.clone(), user.to_string());
    *shop.logins.entry(user.to_string()).or_default() += 1;
    (
        StatusCode::OK,
        serde_json::json!({ "token": token }).to_string(),
    )
}

async fn cart(
    State(s): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> StatusCode {
    let mut shop = s.lock().unwrap();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let Some(token) = token else {
        shop.unauthorized += 1;
        return StatusCode::UNAUTHORIZED;
    };
    // The token must be one issued to this user and not spent yet: the same iteration's.
    match shop.issued.remove(&token) {
        Some(owner) if q.get("user") == Some(&owner) => {
            shop.carts_ok += 1;
            StatusCode::OK
        }
        Some(_) => {
            shop.mismatches += 1;
            StatusCode::OK
        }
        None => {
            shop.unauthorized += 1;
            StatusCode::UNAUTHORIZED
        }
    }
}

async fn count(State(s): State<Shared>, uri: axum::http::Uri) -> &'static str {
    *s.lock().unwrap().paths.entry(uri.to_string()).or_default() += 1;
    "ok"
}

/// Starts the shop on 127.0.0.1 on its own thread; it stops when the handle is dropped.
fn shop() -> (ThreadServer, Shared) {
    let shared: Shared = Arc::default();
    let app = Router::new()
        .route("/login", post(login))
        .route("/cart", get(cart))
        .fallback(count)
        .with_state(shared.clone());
    (serve_on_thread(app), shared)
}

const USERS_CSV: &str = "user,password\nann,pw-ann\nbob,pw-bob\ncid,pw-cid\n";

fn checkout_config(addr: SocketAddr, order: &str, executor: &str) -> String {
    format!(
        r#"targets:
  shop:
    url: http://{addr}/
    headers: {{ User-Agent: sloburn-test }}
journeys:
  checkout:
    target: shop
    data: {{ file: users.csv, order: {order} }}
    steps:
      - name: login
        method: POST
        path: /login
        json: {{ user: "${{data.user}}", password: "${{data.password}}" }}
        checks: [ {{ status: 200 }} ]
        capture: {{ token: {{ json: "$.token" }} }}
      - name: cart
        path: /cart?user=${{data.user}}
        headers: {{ Authorization: "Bearer ${{token}}" }}
        checks: [ {{ status: 200 }} ]
profiles:
  shoppers:
    journey: checkout
{executor}
"#
    )
}

fn run_in(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    sloburn()
        .arg("run")
        .arg(dir.join("sloburn.yaml"))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn sequential_users_log_in_and_see_their_own_cart() {
    let (server, shop) = shop();
    let addr = server.addr;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), USERS_CSV).unwrap();
    let exec =
        "    executor: shared-iterations\n    vus: 3\n    iterations: 30\n    max_duration: 60s";
    write_config(dir.path(), &checkout_config(addr, "sequential", exec));
    let export = dir.path().join("summary.json");
    let out = run_in(dir.path(), &["--summary-export", export.to_str().unwrap()]);
    assert!(out.status.success(), "{}", all_output(&out));
    let s = shop.lock().unwrap();
    assert_eq!(
        s.logins.values().copied().collect::<Vec<_>>(),
        [10, 10, 10],
        "{:?}",
        s.logins
    );
    assert_eq!((s.carts_ok, s.mismatches, s.unauthorized), (30, 0, 0));
    // Per-step figures in the summary, as k6 shows groups.
    let text = all_output(&out);
    assert!(
        text.contains("checkout") && text.contains("login") && text.contains("cart"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["metrics"]["iterations"]["count"], 30, "{v}");
    assert_eq!(v["metrics"]["http_reqs"]["count"], 60, "{v}");
}

#[test]
fn unique_rows_end_the_run_and_random_rows_cover_the_file() {
    let (server, shop) = shop();
    let addr = server.addr;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users.csv"), USERS_CSV).unwrap();
    let exec =
        "    executor: shared-iterations\n    vus: 2\n    iterations: 50\n    max_duration: 60s";
    write_config(dir.path(), &checkout_config(addr, "unique", exec));
    let out = run_in(dir.path(), &[]);
    let text = all_output(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("used every row"), "{text}");
    {
        let s = shop.lock().unwrap();
        assert_eq!(s.logins.values().sum::<u64>(), 3, "{:?}", s.logins);
        assert_eq!(s.logins.len(), 3);
    }
    let (server, shop) = self::shop();
    let addr = server.addr;
    let users: String = (0..20).map(|i| format!("u{i},pw-u{i}\n")).collect();
    std::fs::write(
        dir.path().join("users.csv"),
        format!("user,password\n{users}"),
    )
    .unwrap();
    let exec =
        "    executor: shared-iterations\n    vus: 4\n    iterations: 300\n    max_duration: 60s";
    write_config(dir.path(), &checkout_config(addr, "random", exec));
    let out = run_in(dir.path(), &[]);
    assert!(out.status.success(), "{}", all_output(&out));
    let s = shop.lock().unwrap();
    assert_eq!(s.logins.len(), 20, "every row used: {:?}", s.logins);
    assert_eq!(s.logins.values().sum::<u64>(), 300);
    assert_eq!((s.carts_ok, s.mismatches), (300, 0));
}

#[test]
fn a_weighted_mix_follows_its_weights_and_think_time_is_not_request_time() {
    let (server, shop) = shop();
    let addr = server.addr;
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"targets:
  shop: {{ url: "http://{addr}/" }}
journeys:
  browse:
    target: shop
    steps: [ {{ name: home, path: /browse }} ]
  buy:
    target: shop
    steps: [ {{ name: pay, path: /buy }} ]
  slow:
    target: shop
    steps:
      - {{ name: look, path: /look, think: 40ms..60ms }}
      - {{ name: leave, path: /leave }}
profiles:
  mixed:
    mix: [ {{ journey: browse, weight: 70 }}, {{ journey: buy, weight: 30 }} ]
    executor: shared-iterations
    vus: 8
    iterations: 2000
    max_duration: 60s
  thinking:
    journey: slow
    executor: per-vu-iterations
    vus: 2
    iterations: 10
"#
    );
    write_config(dir.path(), &config);
    let out = run_in(dir.path(), &["--profile", "mixed"]);
    assert!(out.status.success(), "{}", all_output(&out));
    {
        let s = shop.lock().unwrap();
        let browse = s.paths.get("/browse").copied().unwrap_or(0) as f64;
        let buy = s.paths.get("/buy").copied().unwrap_or(0) as f64;
        assert_eq!(browse + buy, 2000.0);
        // The mix is exact (a Weyl sequence over the iteration number): 70 % of 2,000 within
        // one iteration.
        assert!((browse - 1400.0).abs() <= 1.0, "browse {browse}, buy {buy}");
    }
    let export = dir.path().join("think.json");
    let out = run_in(
        dir.path(),
        &[
            "--profile",
            "thinking",
            "--summary-export",
            export.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", all_output(&out));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let m = &v["metrics"];
    let iter_min = m["iteration_duration"]["min"].as_f64().unwrap();
    let iter_avg = m["iteration_duration"]["avg"].as_f64().unwrap();
    let req_avg = m["http_req_duration"]["avg"].as_f64().unwrap();
    assert_eq!(m["iterations"]["count"], 20, "{v}");
    assert_eq!(m["http_reqs"]["count"], 40, "{v}");
    // Every iteration thought at least 40 ms. An iteration is its two requests plus its think
    // time, so its mean is at least two request means plus 40 ms; were the think time inside
    // a request's duration, the request mean would absorb it and this would fail, however
    // slow the machine.
    assert!(iter_min >= 40.0, "iteration_duration min {iter_min} ms");
    assert!(
        iter_avg >= 2.0 * req_avg + 39.5,
        "iteration_duration avg {iter_avg} ms vs http_req_duration avg {req_avg} ms"
    );
}

#[test]
fn unknown_variables_and_early_captures_are_positioned_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = r#"targets:
  shop: { url: "http://127.0.0.1:9/" }
journeys:
  checkout:
    target: shop
    steps:
      - name: cart
        path: /cart/${cart_id}
      - name: login
        path: /login
        headers: { X-Who: "${usr}" }
        capture: { cart_id: { regex: "id=(\\d+)" } }
profiles:
  p: { journey: checkout, executor: constant-vus, vus: 1, duration: 1s }
"#;
    let path = write_config(dir.path(), config);
    let out = sloburn().arg("check").arg(&path).output().unwrap();
    let text = all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    let file = path.display().to_string();
    assert!(
        text.contains(&format!("{file}:8:15:"))
            && text.contains("`${cart_id}` is used before it is captured"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{file}:11:27:")) && text.contains("unknown variable `${usr}`"),
        "{text}"
    );
}

/// The demo's "browse then checkout" journey: its checkout step fails about 2% of the time
/// against a 99.5% objective, so that step's SLO burns (about 4×) while the browse step's,
/// fed by the same iterations, does not.
#[test]
fn the_demo_journey_burns_the_failing_steps_slo_only() {
    let rt = runtime();
    let data = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let (d, stop) = sloburn::demo::start(
            Some("127.0.0.1:0".parse().unwrap()),
            Some(data.path().to_path_buf()),
        )
        .await
        .unwrap();
        let url = format!("http://{}/api/slos", d.addr);
        let period = |v: &serde_json::Value, name: &str| {
            let s = v["slos"]
                .as_array()
                .and_then(|a| a.iter().find(|s| s["name"] == name))
                .cloned()
                .unwrap_or_default();
            let p = &s["period"];
            (
                p["good"].as_u64().unwrap_or(0),
                p["bad"].as_u64().unwrap_or(0),
                p["burn_rate"].as_f64().unwrap_or(0.0),
            )
        };
        let started = std::time::Instant::now();
        let (browse, checkout) = loop {
            let (_, body) = request("GET", &url, None).await;
            let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let (b, c) = (period(&v, "shop-browse"), period(&v, "shop-checkout"));
            if c.0 + c.1 >= 800 || started.elapsed() > std::time::Duration::from_secs(60) {
                break (b, c);
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        };
        d.shutdown().await;
        stop.cancel();
        assert!(
            checkout.0 + checkout.1 >= 800,
            "checkout events {checkout:?}"
        );
        // Every iteration browses first, and only a browse that passed goes on to checkout.
        assert!(
            browse.0 >= checkout.0 + checkout.1,
            "{browse:?} vs {checkout:?}"
        );
        assert_eq!(browse.1, 0, "the browse step never fails: {browse:?}");
        assert_eq!(browse.2, 0.0);
        let bad_share = checkout.1 as f64 / (checkout.0 + checkout.1) as f64;
        assert!(
            (0.005..0.045).contains(&bad_share),
            "checkout bad share {bad_share}"
        );
        assert!(
            checkout.2 > 1.0,
            "the checkout step's SLO burns: {checkout:?}"
        );
    });
}

/// The shipped shop example: `check` passes (data file read, every template compiled), and the
/// rules for its journey SLOs pass `promtool check rules` and name their journey and step.
#[test]
fn the_shipped_shop_example_checks_and_its_rules_pass_promtool() {
    let example = root().join("config/journeys.yaml");
    let out = sloburn()
        .arg("check")
        .arg(&example)
        .env("SLOBURN_ADMIN_TOKEN", "t")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", all_output(&out));
    let rules = sloburn_rules([&example]);
    for want in [
        r#"journey: "checkout""#,
        r#"step: "cart""#,
        r#"sloburn_slo_events_total{slo="cart-availability""#,
    ] {
        assert!(rules.contains(want), "{want} not in\n{rules}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yaml");
    std::fs::write(&file, &rules).unwrap();
    let out = std::process::Command::new(which("promtool"))
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", all_output(&out));
}

/// A header value rendered with a line break (here from a data row) cannot be sent as
/// configured: the step fails as `template`, a local error (no SLO event), and the request is
/// never sent without its header (issue 30, item 7: it used to go out without `Authorization`).
#[test]
fn a_header_rendered_with_a_line_break_fails_the_step_and_is_never_sent_without_it() {
    // Requests seen (with `Authorization`, without it).
    let seen: Arc<Mutex<(u64, u64)>> = Arc::default();
    let counter = seen.clone();
    let app = Router::new().fallback(move |headers: HeaderMap| {
        let counter = counter.clone();
        async move {
            let mut n = counter.lock().unwrap();
            if headers.contains_key("authorization") {
                n.0 += 1;
            } else {
                n.1 += 1;
            }
            "ok"
        }
    });
    let server = serve_on_thread(app);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tokens.json"),
        r#"[{"token": "good"}, {"token": "bad\r\nX-Injected: 1"}]"#,
    )
    .unwrap();
    let config = format!(
        r#"targets:
  api:
    url: http://{}/
journeys:
  call:
    target: api
    data: {{ file: tokens.json, order: sequential }}
    steps:
      - name: authorized
        path: /x
        headers: {{ Authorization: "Bearer ${{data.token}}" }}
        checks: [ {{ status: 200 }} ]
profiles:
  p:
    journey: call
    executor: shared-iterations
    vus: 1
    iterations: 10
    max_duration: 30s
    thresholds: {{ http_req_failed: ["rate==0"] }}
"#,
        server.addr
    );
    write_config(dir.path(), &config);
    let export = dir.path().join("summary.json");
    let out = run_in(dir.path(), &["--summary-export", export.to_str().unwrap()]);
    let text = all_output(&out);
    assert_eq!(
        out.status.code(),
        Some(99),
        "the failed steps fail the threshold:\n{text}"
    );
    assert_eq!(*seen.lock().unwrap(), (5, 0), "{text}");
    assert!(text.contains("template"), "the class is named:\n{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["metrics"]["http_req_failed"]["passes"], 5, "{v}");
    // Every row bad: the run measured its own data, not the target, and says what to fix.
    std::fs::write(
        dir.path().join("tokens.json"),
        r#"[{"token": "bad\nX-Injected: 1"}]"#,
    )
    .unwrap();
    let out = run_in(dir.path(), &[]);
    let text = all_output(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("10 of 10 requests failed inside sloburn (a step's request could not be built from its template)"),
        "{text}"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        (5, 0),
        "nothing more was sent: {text}"
    );
}
