//! Issue 46 item 5 (OpenAPI and HAR): importers print only what `sloburn check` accepts. An
//! OpenAPI document written for these tests (`import/incidents.yaml`: content types declared
//! three ways, header parameters twice and unsendable, operation ids past 64 characters and
//! repeated, every kind of security scheme, unsafe methods, a production server, a path with
//! a space) and a HAR recording made here (a byte-order mark, header names HTTP cannot send,
//! a bearer token, cookies and an API key): each imports into a config `sloburn check`
//! accepts, credentials come from `${env:NAME}` (each variable listed, no recorded value
//! printed), and what could not be made is listed. The credentials reach a server the test
//! starts from the environment.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::{Value as J, json};

use crate::support::{all_output, root, serve_on_thread, sloburn};

fn incidents() -> std::path::PathBuf {
    root().join("tests/it/import/incidents.yaml")
}

/// `sloburn import KIND FILE ARGS`: (exit code, stdout, stderr).
fn import(kind: &str, file: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = sloburn()
        .args(["import", kind])
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `sloburn check` on `yaml` with `env` set (and nothing else of the test's environment that
/// the config refers to): exit code and output.
fn check(yaml: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("imported.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let mut cmd = sloburn();
    cmd.arg("check").arg(&cfg);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code(), all_output(&out))
}

const INCIDENT_VARS: [(&str, &str); 5] = [
    ("API_KEY_HEADER", "env-key-header"),
    ("API_KEY_QUERY", "env-key-query"),
    ("BASIC_AUTH", "dXNlcjpwdw=="),
    ("BEARER_AUTH", "env-bearer-token"),
    ("OAUTH", "env-oauth-token"),
];

#[test]
fn an_openapi_document_imports_check_clean_one_content_type_names_within_64_credentials_from_env() {
    // The server is not this machine: refused, the host named, until --base-url says where.
    let (code, _, err) = import("openapi", &incidents(), &[]);
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("server is https://api.incidents.example, not this machine")
            && err.contains("--base-url"),
        "{err}"
    );

    // By default only what reads: the four that change state are listed, not imported.
    let (code, yaml, err) = import(
        "openapi",
        &incidents(),
        &["--base-url", "http://127.0.0.1:1"],
    );
    assert_eq!(code, Some(0), "{err}");
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        assert!(
            !yaml.contains(&format!("method: {method}")),
            "{method}: {yaml}"
        );
    }
    assert!(
        err.contains("left out 4 operation(s) that change state (1 DELETE, 1 PATCH, 1 POST, 1 PUT: createIncident, updateIncident, deleteIncident, snoozeIncident): --include-unsafe imports them"),
        "{err}"
    );
    let (code, shown) = check(&yaml, &INCIDENT_VARS);
    assert_eq!(code, Some(0), "{shown}\n{yaml}");

    let (code, yaml, err) = import(
        "openapi",
        &incidents(),
        &["--base-url", "http://127.0.0.1:1", "--include-unsafe"],
    );
    assert_eq!(code, Some(0), "{err}");
    // `check` reads it (the credentials set); without them it names each variable.
    let (code, shown) = check(&yaml, &INCIDENT_VARS);
    assert_eq!(code, Some(0), "{shown}\n{yaml}");
    let (code, shown) = check(&yaml, &[]);
    assert_eq!(code, Some(78), "{shown}");
    for (var, _) in INCIDENT_VARS {
        assert!(
            shown.contains(&format!("environment variable `{var}` is not set")),
            "{var}: {shown}"
        );
        assert!(err.contains(&format!("set {var}: ")), "{var}: {err}");
        assert!(yaml.contains(&format!("# set {var}: ")), "{var}: {yaml}");
    }
    assert!(
        err.contains("security scheme `digestAuth` (http digest) is not converted"),
        "{err}"
    );

    let doc = sloburn::config::Document::parse(&yaml).unwrap().value;
    let targets = doc["targets"].as_object().unwrap();
    // Every operation but the one whose path holds a space, which `check` refuses: listed.
    assert_eq!(targets.len(), 9, "{yaml}");
    assert!(
        err.contains("left out targets.openStatus (line")
            && err.contains("is not a URL")
            && err.contains("left out profiles.openStatus"),
        "{err}"
    );
    assert!(yaml.contains("\n#   \"openStatus\":\n"), "{yaml}");

    // One header of each name: the body's content type, never the parameters' as well.
    for (name, t) in targets {
        let headers: Vec<String> = t["headers"]
            .as_object()
            .map(|h| h.keys().map(|k| k.to_ascii_lowercase()).collect())
            .unwrap_or_default();
        let mut unique = headers.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), headers.len(), "{name}: {headers:?}");
        assert!(
            !headers.contains(&"accept".to_string()),
            "{name}: {headers:?}"
        );
    }
    assert_eq!(
        targets["createIncident"]["headers"]["Content-Type"],
        "application/json"
    );
    assert_eq!(
        targets["updateIncident"]["headers"]["Content-Type"],
        "application/json"
    );
    assert_eq!(
        targets["updateIncident"]["headers"]["From"],
        "oncall@example.com"
    );
    assert!(
        err.contains("header parameter `X Bad`") && err.contains("left out"),
        "{err}"
    );

    // Names: the long id cut to 64, its second one cut to 64 with its `-2`.
    let names: Vec<&String> = targets
        .keys()
        .chain(doc["profiles"].as_object().unwrap().keys())
        .collect();
    assert!(names.iter().all(|n| n.len() <= 64), "{names:?}");
    let long: Vec<&&String> = names
        .iter()
        .filter(|n| n.starts_with("listIncidents"))
        .collect();
    assert_eq!(long.len(), 4, "{long:?}");
    assert!(long.iter().all(|n| n.len() == 64), "{long:?}");
    assert!(long.iter().any(|n| n.ends_with("No-2")), "{long:?}");

    // Each scheme as its header or query parameter, a reference to the variable.
    assert_eq!(
        targets["snoozeIncident"]["headers"]["Authorization"],
        "Basic ${env:BASIC_AUTH}"
    );
    assert_eq!(
        targets["listServices"]["headers"]["X-API-Key"],
        "${env:API_KEY_HEADER}"
    );
    assert!(
        targets["listServices"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/v2/services?api_key=${env:API_KEY_QUERY}"),
        "{yaml}"
    );
    assert_eq!(
        targets["headServices"]["headers"]["Authorization"],
        "Bearer ${env:OAUTH}"
    );
    assert!(
        targets["optionsServices"].get("headers").is_none(),
        "{yaml}"
    );
}

#[test]
fn an_unsafe_operation_named_in_operations_needs_include_unsafe() {
    let (code, _, err) = import(
        "openapi",
        &incidents(),
        &[
            "--base-url",
            "http://127.0.0.1:1",
            "--journey",
            "j",
            "--operations",
            "listServices,createIncident",
        ],
    );
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("`createIncident` is a POST, which changes state: add --include-unsafe"),
        "{err}"
    );
}

#[test]
fn a_name_past_64_characters_is_refused_for_its_length() {
    let name = "a".repeat(66);
    let yaml = format!("targets:\n  {name}:\n    url: http://127.0.0.1:1/\n");
    let (code, shown) = check(&yaml, &[]);
    assert_eq!(code, Some(78), "{shown}");
    assert!(
        shown.contains("a name is at most 64 characters; this one has 66"),
        "{shown}"
    );
}

/// What the server saw: requests with the environment's credentials, and with anything else.
#[derive(Default)]
struct Seen {
    good: AtomicUsize,
    bad: AtomicUsize,
}

impl Seen {
    fn judge(&self, ok: bool) -> StatusCode {
        if ok {
            self.good.fetch_add(1, Ordering::SeqCst);
            StatusCode::OK
        } else {
            self.bad.fetch_add(1, Ordering::SeqCst);
            StatusCode::UNAUTHORIZED
        }
    }
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The journey over two reading operations runs against a server that answers 200 only to
/// the environment's bearer token (on one) and API keys (header and query, on the other).
#[test]
fn openapi_credentials_reach_the_server_from_the_environment() {
    let seen = Arc::new(Seen::default());
    let (a, b) = (seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/v2/incidents",
            get(move |h: HeaderMap| async move {
                a.judge(
                    header(&h, "authorization") == "Bearer env-bearer-token"
                        && header(&h, "x-request-id") == "req-1",
                )
            }),
        )
        .route(
            "/v2/services",
            get(
                move |h: HeaderMap, q: axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                    b.judge(
                        header(&h, "x-api-key") == "env-key-header"
                            && q.get("api_key").map(String::as_str) == Some("env-key-query"),
                    )
                },
            ),
        );
    let server = serve_on_thread(app);
    let (code, yaml, err) = import(
        "openapi",
        &incidents(),
        &[
            "--base-url",
            &format!("http://{}", server.addr),
            "--journey",
            "reads",
            "--operations",
            "listServices,listIncidentsForTheWholeAccountIncludingResolvedOnesAndTheirNote",
            "--rate",
            "5/s",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    let yaml = yaml.replace("duration: 1m", "duration: 2s");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("reads.yaml");
    std::fs::write(&cfg, &yaml).unwrap();
    let export = dir.path().join("summary.json");
    let mut run = sloburn();
    run.args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
        .arg(&export);
    for (k, v) in INCIDENT_VARS {
        run.env(k, v);
    }
    let run = run.output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}\n{yaml}", all_output(&run));
    let v: J = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(
        v["metrics"]["http_reqs"]["count"], 20,
        "10 journeys of 2 steps: {v}"
    );
    assert_eq!(v["metrics"]["checks"]["fails"], 0, "{v}");
    assert_eq!(seen.good.load(Ordering::SeqCst), 20);
    assert_eq!(seen.bad.load(Ordering::SeqCst), 0);
}

const RECORDED: [&str; 4] = [
    "rec-bearer-0123456789",
    "rec-session-abcdefgh",
    "rec-api-key-987654321",
    "rec-theme",
];

/// A recording on `host` of a page and an API call that sends a bearer token (also in its
/// URL), two cookies, an API key header and two headers HTTP cannot send; with a byte-order
/// mark in front, as some tools write it.
fn recording(host: &str) -> Vec<u8> {
    let page = json!({
        "startedDateTime": "2026-01-01T00:00:00.000Z", "time": 5,
        "request": {"method": "GET", "url": format!("http://{host}/"), "headers": [
            {"name": "Cookie", "value": format!("sid={}", RECORDED[1])}
        ]},
        "response": {"status": 200, "headers": [{"name": "Content-Type", "value": "text/html"}],
                     "content": {"text": "<html></html>"}}
    });
    let api = json!({
        "startedDateTime": "2026-01-01T00:00:01.000Z", "time": 5,
        "request": {"method": "GET", "url": format!("http://{host}/api/me?t={}", RECORDED[0]), "headers": [
            {"name": "Authorization", "value": format!("Bearer {}", RECORDED[0])},
            {"name": "Cookie", "value": format!("sid={}; theme={}", RECORDED[1], RECORDED[3])},
            {"name": "X-Api-Key", "value": RECORDED[2]},
            {"name": "bad header", "value": "x"},
            {"name": "x-broken\u{1}", "value": "y"},
            {"name": "Accept", "value": "application/json"}
        ]},
        "response": {"status": 200, "headers": [{"name": "Content-Type", "value": "application/json"}],
                     "content": {"text": "{\"ok\":true}"}}
    });
    let har = json!({"log": {"version": "1.2", "entries": [page, api]}});
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(serde_json::to_vec_pretty(&har).unwrap());
    bytes
}

const HAR_VARS: [(&str, &str); 4] = [
    ("RECORDED_BEARER_TOKEN", "env-bearer"),
    ("RECORDED_COOKIE_SID", "env-sid"),
    ("RECORDED_COOKIE_THEME", "env-theme"),
    ("RECORDED_X_API_KEY", "env-key"),
];

#[test]
fn a_har_with_a_bom_bad_header_names_and_credentials_imports_check_clean_and_runs_from_env() {
    let seen = Arc::new(Seen::default());
    let (a, b) = (seen.clone(), seen.clone());
    let app = axum::Router::new()
        .route(
            "/",
            get(move |h: HeaderMap| async move { a.judge(header(&h, "cookie") == "sid=env-sid") }),
        )
        .route(
            "/api/me",
            get(
                move |h: HeaderMap, q: axum::extract::Query<std::collections::HashMap<String, String>>| async move {
                    b.judge(
                        header(&h, "authorization") == "Bearer env-bearer"
                            && header(&h, "cookie") == "sid=env-sid; theme=env-theme"
                            && header(&h, "x-api-key") == "env-key"
                            && q.get("t").map(String::as_str) == Some("env-bearer"),
                    )
                },
            ),
        );
    let server = serve_on_thread(app);
    let dir = tempfile::tempdir().unwrap();
    let har = dir.path().join("rec.har");
    let bytes = recording(&server.addr.to_string());
    assert_eq!(&bytes[..3], b"\xef\xbb\xbf");
    std::fs::write(&har, &bytes).unwrap();
    let (code, yaml, err) = import("har", &har, &["--journey", "me", "--rate", "5/s"]);
    assert_eq!(code, Some(0), "the byte-order mark is read: {err}");

    // No recorded credential is printed, on either stream; each variable is listed.
    for secret in RECORDED {
        assert!(!yaml.contains(secret), "{secret}: {yaml}");
        assert!(!err.contains(secret), "{secret}: {err}");
    }
    for (var, _) in HAR_VARS {
        assert!(err.contains(&format!("set {var}: ")), "{var}: {err}");
        assert!(yaml.contains(&format!("${{env:{var}}}")), "{var}: {yaml}");
    }
    assert!(
        err.contains("left out the request header `bad header` (1 request(s))")
            && err.contains("left out the request header `x-broken\\u{1}`"),
        "{err}"
    );
    assert!(
        !yaml.contains("bad header") && !yaml.contains("x-broken"),
        "{yaml}"
    );
    let (code, shown) = check(&yaml, &HAR_VARS);
    assert_eq!(code, Some(0), "{shown}\n{yaml}");

    let yaml = yaml.replace("duration: 1m", "duration: 2s");
    let cfg = dir.path().join("me.yaml");
    std::fs::write(&cfg, &yaml).unwrap();
    let export = dir.path().join("summary.json");
    let mut run = sloburn();
    run.args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
        .arg(&export);
    for (k, v) in HAR_VARS {
        run.env(k, v);
    }
    let run = run.output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}\n{yaml}", all_output(&run));
    let v: J = serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(
        v["metrics"]["http_reqs"]["count"], 20,
        "10 journeys of 2 steps: {v}"
    );
    assert_eq!(v["metrics"]["checks"]["fails"], 0, "{v}");
    assert_eq!(seen.good.load(Ordering::SeqCst), 20);
    assert_eq!(seen.bad.load(Ordering::SeqCst), 0);
}
