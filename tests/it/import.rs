//! `sloburn import openapi` (issue 34, part 1): the Swagger Petstore 3 document, a public spec
//! shipped as a fixture, imports into a config `sloburn check` accepts; a journey over chosen
//! operations runs green against a server the test starts that checks what it is sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::routing::{get, post};

use crate::support::{all_output, root, serve_on_thread, sloburn};

fn petstore() -> std::path::PathBuf {
    root().join("tests/it/import/petstore3.yaml")
}

#[test]
fn the_petstore_imports_into_a_config_that_check_accepts() {
    let out = sloburn()
        .args(["import", "openapi"])
        .arg(petstore())
        .args(["--base-url", "http://127.0.0.1:8080", "--include-unsafe"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let yaml = String::from_utf8(out.stdout).unwrap();
    // Every operation of the document, the binary upload's body named as left out.
    assert_eq!(yaml.matches("\n    target: ").count(), 19, "{yaml}");
    assert!(
        stderr.contains("uploadFile") && stderr.contains("application/octet-stream"),
        "{stderr}"
    );
    assert!(
        yaml.contains("url: \"http://127.0.0.1:8080/v3/pet/1\""),
        "{yaml}"
    );
    assert!(yaml.contains("\\\"name\\\":\\\"doggie\\\""), "{yaml}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("petstore.yaml");
    std::fs::write(&cfg, &yaml).unwrap();
    // The document's security schemes, as the variables the import listed.
    assert!(
        stderr.contains("set PETSTORE_AUTH: a bearer token") && stderr.contains("set API_KEY"),
        "{stderr}"
    );
    let check = sloburn()
        .arg("check")
        .arg(&cfg)
        .env("PETSTORE_AUTH", "t")
        .env("API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}\n{yaml}",
        all_output(&check)
    );
}

#[test]
fn a_petstore_journey_runs_green_against_a_server_that_checks_its_requests() {
    let pets = Arc::new(AtomicUsize::new(0));
    let added = pets.clone();
    let app = axum::Router::new()
        .route(
            "/v3/pet",
            post(move |Json(pet): Json<serde_json::Value>| {
                let added = added.clone();
                async move {
                    // The body is a Pet: its required fields are there.
                    if pet["name"].is_string() && pet["photoUrls"].is_array() {
                        added.fetch_add(1, Ordering::SeqCst);
                        (http::StatusCode::OK, Json(pet))
                    } else {
                        (http::StatusCode::METHOD_NOT_ALLOWED, Json(pet))
                    }
                }
            }),
        )
        .route(
            "/v3/pet/{id}",
            get(
                |axum::extract::Path(id): axum::extract::Path<i64>| async move {
                    Json(serde_json::json!({"id": id, "name": "doggie", "photoUrls": []}))
                },
            ),
        )
        .route(
            "/v3/store/order",
            post(|Json(o): Json<serde_json::Value>| async move { Json(o) }),
        );
    let server = serve_on_thread(app);
    let out = sloburn()
        .args(["import", "openapi"])
        .arg(petstore())
        .args(["--base-url", &format!("http://{}", server.addr)])
        .args([
            "--journey",
            "shop",
            "--operations",
            "addPet,getPetById,placeOrder",
            "--include-unsafe",
        ])
        .args(["--rate", "10/s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let yaml = String::from_utf8(out.stdout)
        .unwrap()
        .replace("duration: 1m", "duration: 2s");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("shop.yaml");
    std::fs::write(&cfg, &yaml).unwrap();
    let export = dir.path().join("summary.json");
    let run = sloburn()
        .args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
        .arg(&export)
        .env("PETSTORE_AUTH", "t")
        .env("API_KEY", "k")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}\n{yaml}", all_output(&run));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let requests = v["metrics"]["http_reqs"]["count"].as_u64().unwrap();
    assert_eq!(requests, 60, "20 iterations of 3 steps: {v}");
    assert_eq!(v["metrics"]["checks"]["fails"], 0, "{v}");
    assert_eq!(pets.load(Ordering::SeqCst), 20);
}

#[test]
fn documents_that_cannot_be_imported_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("swagger: '2.0'\npaths: {}\n", "Swagger 2.0"),
        (
            "openapi: 3.0.0\nservers: [{url: /api}]\npaths: {}\n",
            "--base-url",
        ),
        ("openapi: 3.0.0\npaths: [\n", "not JSON or YAML"),
        ("{\"title\": 1}", "no `openapi` field"),
    ];
    for (text, want) in cases {
        let f = dir.path().join("doc.yaml");
        std::fs::write(&f, text).unwrap();
        let out = sloburn()
            .args(["import", "openapi"])
            .arg(&f)
            .output()
            .unwrap();
        let shown = all_output(&out);
        assert_eq!(out.status.code(), Some(78), "{text}: {shown}");
        assert!(shown.contains(want), "{text}: want {want:?} in {shown}");
    }
    let out = sloburn()
        .args(["import", "openapi"])
        .arg(petstore())
        .args([
            "--base-url",
            "http://127.0.0.1:1",
            "--journey",
            "j",
            "--operations",
            "nope",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(
        all_output(&out).contains("no operation `nope`"),
        "{}",
        all_output(&out)
    );
}

/// The shop a browser logs in to: each login issues a fresh token and a cart; a token serves
/// one visit (cart, then one item added) and is refused after it, so a journey that replayed
/// the recorded token would fail.
#[derive(Default)]
struct Shop {
    /// token → (cart id, requests left)
    sessions: std::sync::Mutex<std::collections::HashMap<String, (String, u32)>>,
    logins: AtomicUsize,
    added: AtomicUsize,
}

const SHOP_PAGE: &str = r#"<!doctype html><html><head><link rel="stylesheet" href="/style.css">
<script src="/app.js"></script></head><body><div id="out"></div></body></html>"#;
const SHOP_JS: &str = r#"
window.addEventListener('load', async () => {
  const login = await fetch('/api/login', {method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({user: 'alice', password: 'wonderland'})});
  const session = await login.json();
  await new Promise(r => setTimeout(r, 300));
  const cart = await (await fetch('/api/cart', {headers: {'Authorization': 'Bearer ' + session.token}})).json();
  await new Promise(r => setTimeout(r, 200));
  const add = await fetch('/api/cart/' + cart.cart_id + '/items', {method: 'POST',
    headers: {'Authorization': 'Bearer ' + session.token, 'Content-Type': 'application/json'},
    body: JSON.stringify({sku: 'sku-42', quantity: 1})});
  document.getElementById('out').textContent = 'done ' + add.status;
});
"#;

fn shop(state: Arc<Shop>) -> axum::Router {
    use axum::extract::{Path, State};
    use axum::http::HeaderMap;
    fn token_of(h: &HeaderMap) -> String {
        h.get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default()
            .to_string()
    }
    fn random(prefix: &str) -> String {
        format!("{prefix}-{:016x}", rand::random::<u64>())
    }
    axum::Router::new()
        .route("/", get(|| async { axum::response::Html(SHOP_PAGE) }))
        .route(
            "/app.js",
            get(|| async { ([("content-type", "text/javascript")], SHOP_JS) }),
        )
        .route(
            "/style.css",
            get(|| async { ([("content-type", "text/css")], "body { margin: 0 }") }),
        )
        .route(
            "/api/login",
            post(
                |State(s): State<Arc<Shop>>, Json(body): Json<serde_json::Value>| async move {
                    if body["user"] != "alice" || body["password"] != "wonderland" {
                        return (http::StatusCode::UNAUTHORIZED, Json(serde_json::json!({})));
                    }
                    s.logins.fetch_add(1, Ordering::SeqCst);
                    let token = random("tok");
                    s.sessions
                        .lock()
                        .unwrap()
                        .insert(token.clone(), (random("cart"), 2));
                    (
                        http::StatusCode::OK,
                        Json(serde_json::json!({"user": "alice", "token": token})),
                    )
                },
            ),
        )
        .route(
            "/api/cart",
            get(|State(s): State<Arc<Shop>>, h: HeaderMap| async move {
                let mut sessions = s.sessions.lock().unwrap();
                match sessions.get_mut(&token_of(&h)) {
                    Some((cart, left)) if *left > 0 => {
                        *left -= 1;
                        (
                            http::StatusCode::OK,
                            Json(serde_json::json!({"cart_id": cart, "items": []})),
                        )
                    }
                    _ => (http::StatusCode::UNAUTHORIZED, Json(serde_json::json!({}))),
                }
            }),
        )
        .route(
            "/api/cart/{cart}/items",
            post(
                |State(s): State<Arc<Shop>>, Path(cart): Path<String>, h: HeaderMap| async move {
                    let mut sessions = s.sessions.lock().unwrap();
                    let token = token_of(&h);
                    let ok =
                        matches!(sessions.get(&token), Some((c, left)) if *c == cart && *left > 0);
                    if !ok {
                        return http::StatusCode::UNAUTHORIZED;
                    }
                    // The visit is over: the token is refused from now on.
                    sessions.remove(&token);
                    s.added.fetch_add(1, Ordering::SeqCst);
                    http::StatusCode::CREATED
                },
            ),
        )
        .with_state(state)
}

/// A HAR 1.2 file built from what Chromium's DevTools protocol reported of the page's
/// requests (as DevTools' own "Save all as HAR" does).
fn har_of(page: &mut crate::web::Page) -> serde_json::Value {
    use serde_json::{Value, json};
    let pairs = |h: &Value| -> Vec<Value> {
        h.as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| json!({"name": k, "value": v.as_str().unwrap_or_default()}))
            .collect()
    };
    let events = page.events.clone();
    let of = |method: &str, id: &Value| -> Option<Value> {
        events
            .iter()
            .find(|e| e["method"] == method && &e["params"]["requestId"] == id)
            .map(|e| e["params"].clone())
    };
    let mut entries = Vec::new();
    for sent in events
        .iter()
        .filter(|e| e["method"] == "Network.requestWillBeSent")
    {
        let p = &sent["params"];
        let id = &p["requestId"];
        let Some(resp) = of("Network.responseReceived", id) else {
            continue;
        };
        // A body-less answer (201 with no content) may end as `loadingFailed` (aborted
        // after the head): DevTools keeps such entries, without content.
        let (done, body) = match of("Network.loadingFinished", id) {
            Some(done) => (
                done,
                page.call("Network.getResponseBody", json!({"requestId": id})),
            ),
            None => match of("Network.loadingFailed", id) {
                Some(failed) => (failed, json!({"body": ""})),
                None => continue,
            },
        };
        let wall_ms = (p["wallTime"].as_f64().unwrap() * 1000.0) as i64;
        let started = chrono::DateTime::from_timestamp_millis(wall_ms).unwrap();
        let took =
            (done["timestamp"].as_f64().unwrap() - p["timestamp"].as_f64().unwrap()) * 1000.0;
        let mut request = json!({
            "method": p["request"]["method"], "url": p["request"]["url"],
            "httpVersion": "HTTP/1.1", "headers": pairs(&p["request"]["headers"]),
            "queryString": [], "cookies": [], "headersSize": -1, "bodySize": -1,
        });
        if let Some(data) = p["request"]["postData"].as_str() {
            request["postData"] = json!({"mimeType": "application/json", "text": data});
        }
        entries.push(json!({
            "startedDateTime": started.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "time": took,
            "request": request,
            "response": {
                "status": resp["response"]["status"], "statusText": "",
                "httpVersion": "HTTP/1.1", "headers": pairs(&resp["response"]["headers"]),
                "cookies": [], "redirectURL": "", "headersSize": -1, "bodySize": -1,
                "content": {"size": -1, "mimeType": resp["response"]["mimeType"],
                            "text": body["body"]},
            },
            "cache": {}, "timings": {"send": 0, "wait": took, "receive": 0},
        }));
    }
    json!({"log": {"version": "1.2", "creator": {"name": "sloburn test", "version": "1"}, "entries": entries}})
}

/// Issue 34's must-show: a login → cart flow recorded by headless Chromium imports into a
/// journey that runs green against the same server, its token (and cart id) captured from
/// each run's own responses, never replayed.
#[test]
fn a_chromium_recording_imports_into_a_journey_that_runs_green() {
    let state = Arc::new(Shop::default());
    let server = serve_on_thread(shop(state.clone()));
    let chrome = crate::web::Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("http://{}/", server.addr));
    let done = page.wait_for(
        "the recorded flow",
        "document.getElementById('out').textContent",
        std::time::Duration::from_secs(30),
    );
    assert_eq!(done, "done 201");
    page.pump(std::time::Duration::from_millis(300));
    let har = har_of(&mut page);
    drop(page);
    drop(chrome);
    assert_eq!(state.logins.load(Ordering::SeqCst), 1);
    let recorded_token = state.sessions.lock().unwrap().len();
    assert_eq!(recorded_token, 0, "the recorded visit's token is spent");

    let dir = tempfile::tempdir().unwrap();
    let har_file = dir.path().join("shop.har");
    std::fs::write(&har_file, serde_json::to_string_pretty(&har).unwrap()).unwrap();
    let out = sloburn()
        .args(["import", "har"])
        .arg(&har_file)
        .args(["--journey", "shop", "--rate", "5/s"])
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let yaml = String::from_utf8(out.stdout).unwrap();
    assert!(yaml.contains("token: { json: \"$.token\" }"), "{yaml}");
    assert!(yaml.contains("\"Bearer ${token}\""), "{yaml}");
    assert!(yaml.contains("cart_id: { json: \"$.cart_id\" }"), "{yaml}");
    assert!(yaml.contains("/api/cart/${cart_id}/items"), "{yaml}");
    assert!(
        !yaml.contains("tok-"),
        "no recorded token is replayed: {yaml}"
    );
    assert!(notes.contains("static asset"), "{notes}");
    // The page itself, login, cart, add: the document load stays a step.
    assert_eq!(yaml.matches("      - name:").count(), 4, "{yaml}");

    let yaml = yaml.replace("duration: 1m", "duration: 2s");
    let cfg = dir.path().join("shop.yaml");
    std::fs::write(&cfg, &yaml).unwrap();
    let export = dir.path().join("summary.json");
    let run = sloburn()
        .args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
        .arg(&export)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}\n{yaml}", all_output(&run));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["metrics"]["checks"]["fails"], 0, "{v}");
    assert_eq!(
        v["metrics"]["http_reqs"]["count"], 40,
        "10 journeys of 4 steps: {v}"
    );
    assert_eq!(state.logins.load(Ordering::SeqCst), 11);
    assert_eq!(state.added.load(Ordering::SeqCst), 11);
}

/// The server the k6 scripts run against: health, products, and a login whose token the cart
/// requires.
fn k6_server() -> crate::support::ThreadServer {
    use axum::http::HeaderMap;
    let authorized = |h: &HeaderMap| {
        h.get("authorization")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("Bearer tok-"))
    };
    serve_on_thread(
        axum::Router::new()
            .route("/health", get(|| async { "ok" }))
            .route(
                "/products",
                get(|| async { Json(serde_json::json!([1, 2, 3])) }),
            )
            .route(
                "/login",
                post(|Json(b): Json<serde_json::Value>| async move {
                    assert_eq!(b["user"], "alice");
                    Json(serde_json::json!({"token": format!("tok-{:x}", rand::random::<u32>())}))
                }),
            )
            .route(
                "/cart",
                get(move |h: HeaderMap| async move {
                    if authorized(&h) {
                        http::StatusCode::OK
                    } else {
                        http::StatusCode::UNAUTHORIZED
                    }
                }),
            )
            .route(
                "/cart/items",
                post(move |h: HeaderMap| async move {
                    if authorized(&h) {
                        http::StatusCode::CREATED
                    } else {
                        http::StatusCode::UNAUTHORIZED
                    }
                }),
            ),
    )
}

/// Issue 34's must-show: three k6 scripts (constant arrival rate, stages, a login flow) import
/// into configs whose runs send as many requests as k6 itself on the same server.
#[test]
fn k6_scripts_import_into_runs_with_k6s_request_counts() {
    let k6 = crate::k6::k6();
    let server = k6_server();
    let base = format!("http://{}", server.addr);
    let dir = tempfile::tempdir().unwrap();
    for name in ["arrival", "stages", "login"] {
        let text = std::fs::read_to_string(root().join(format!("tests/it/import/k6/{name}.js")))
            .unwrap()
            .replace("http://127.0.0.1:1", &base);
        let script = dir.path().join(format!("{name}.js"));
        std::fs::write(&script, &text).unwrap();
        let k6_export = dir.path().join(format!("{name}.k6.json"));
        let k6_run = std::process::Command::new(&k6)
            .args(["run", "--quiet", "--no-color", "--summary-export"])
            .arg(&k6_export)
            .arg(&script)
            .env("K6_NO_USAGE_REPORT", "true")
            .output()
            .unwrap();
        assert!(
            k6_run.status.success(),
            "k6 {name}: {}",
            all_output(&k6_run)
        );
        let imported = sloburn()
            .args(["import", "k6"])
            .arg(&script)
            .output()
            .unwrap();
        assert_eq!(
            imported.status.code(),
            Some(0),
            "{name}: {}",
            all_output(&imported)
        );
        let notes = String::from_utf8_lossy(&imported.stderr).to_string();
        if name == "login" {
            assert!(
                notes.contains("line 27") && notes.contains("console.log"),
                "{notes}"
            );
        }
        let cfg = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&cfg, &imported.stdout).unwrap();
        let ours = dir.path().join(format!("{name}.sloburn.json"));
        let run = sloburn()
            .args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
            .arg(&ours)
            .output()
            .unwrap();
        let yaml = String::from_utf8_lossy(&imported.stdout).to_string();
        assert_eq!(
            run.status.code(),
            Some(0),
            "{name}: {}\n{yaml}",
            all_output(&run)
        );
        let count = |f: &std::path::Path| {
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            (
                v["metrics"]["http_reqs"]["count"].as_u64().unwrap(),
                v["metrics"]["checks"]["fails"].as_u64().unwrap_or(0),
            )
        };
        let (theirs, their_fails) = count(&k6_export);
        let (mine, my_fails) = count(&ours);
        assert_eq!(
            mine, theirs,
            "{name}: sloburn sent {mine}, k6 {theirs}\n{yaml}"
        );
        assert_eq!((my_fails, their_fails), (0, 0), "{name}");
    }
}
