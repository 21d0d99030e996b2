//! Issue 43's smaller untruths, each with its regression test: a templated URL's `name` tag as
//! k6 writes it, `run --max-vus` without a pre-allocation, `storage.path` references, a probe's
//! status 0 in vegeta's error set, the TLS warning without a certificate, and a silenced tier.

use crate::support::*;
use axum::Router;
use axum::routing::get;
use serde_json::Value;

/// A shop whose `/items/{id}` answers 200.
fn items() -> ThreadServer {
    let app = Router::new().route("/items/{id}", get(|| async { "item" }));
    serve_on_thread(app)
}

/// `path: /items/${iter}` is tagged `name: …/items/${}` as k6 tags `http.url` templates, so
/// a threshold ported from k6 (`http_reqs{name:…/items/${}}`) counts the requests; the `url`
/// tag keeps the template as written.
#[test]
fn a_templated_url_is_named_as_k6_names_it() {
    let shop = items();
    let base = format!("http://{}", shop.addr);
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("k6.ndjson");
    let cfg = write_config(
        dir.path(),
        &format!(
            "targets:\n  shop:\n    url: {base}/\njourneys:\n  browse:\n    target: shop\n    steps:\n      \
             - {{ name: item, path: \"/items/${{iter}}\" }}\nprofiles:\n  p:\n    journey: browse\n    \
             executor: shared-iterations\n    vus: 1\n    iterations: 6\n    thresholds:\n      \
             \"http_reqs{{name:{base}/items/${{}}}}\": [\"count==6\"]\n"
        ),
    );
    let out = sloburn()
        .args(["run", cfg.to_str().unwrap(), "--out"])
        .arg(format!("json={}", out_file.display()))
        .output()
        .unwrap();
    let text = all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let names: std::collections::BTreeSet<(String, String)> = std::fs::read_to_string(&out_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "Point" && v["metric"] == "http_reqs")
        .map(|v| {
            let tags = &v["data"]["tags"];
            (
                tags["name"].as_str().unwrap().to_string(),
                tags["url"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [(
            format!("{base}/items/${{}}"),
            format!("{base}/items/${{iter}}")
        )],
        "{text}"
    );
}

/// The lines under vegeta's `Error Set:` in a run's summary.
fn error_set(summary: &str) -> Vec<String> {
    summary
        .lines()
        .skip_while(|l| !l.contains("Error Set:"))
        .skip(1)
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// A TCP probe that connects answers status 0, its OK: vegeta's error set printed `0: 10`
/// beside `Success 100.00%`.
#[test]
fn a_probes_ok_status_is_not_in_the_vegeta_error_set() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts (and closes) a bounded number of connections: one per probe.
    let acceptor = std::thread::spawn(move || {
        for _ in 0..10 {
            if listener.accept().is_err() {
                break;
            }
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        &format!(
            "targets:\n  port:\n    url: tcp://{addr}\nprofiles:\n  p:\n    target: port\n    \
             executor: shared-iterations\n    vus: 1\n    iterations: 10\n"
        ),
    );
    let out = sloburn().arg("run").arg(&cfg).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    acceptor.join().unwrap();
    assert!(
        text.contains("Success       [ratio]                           100.00%"),
        "{text}"
    );
    assert!(
        text.contains("[code:count]                      0:10"),
        "{text}"
    );
    assert_eq!(error_set(&text), Vec::<String>::new(), "{text}");
}

/// `run --rate 2000/s --max-vus 100` was refused (exit 1: "--max-vus (100) is below the
/// pre-allocated VUs (200)") against a pre-allocation the user never set.
#[test]
fn max_vus_alone_caps_the_pre_allocation_it_was_refused_against() {
    let shop = items();
    let out = sloburn()
        .args(["run", "--url", &format!("http://{}/items/1", shop.addr)])
        .args([
            "--rate",
            "2000/s",
            "--max-vus",
            "100",
            "--duration",
            "200ms",
        ])
        .output()
        .unwrap();
    let text = all_output(&out);
    assert!(!text.contains("pre-allocated"), "{text}");
    assert_ne!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("100 max VUs"), "{text}");
}

/// `storage.path: "${env:X}"` was neither expanded nor refused: `serve` made a directory named
/// `${env:X}`, so shards given different values shared one database. `check` now names an
/// unset variable at its position (exit 78).
#[test]
fn check_names_an_unset_variable_in_the_storage_path() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_config(
        dir.path(),
        "storage:\n  path: \"/var/lib/sloburn/${env:SLOBURN_TEST_UNSET_SHARD}\"\ntargets:\n  t:\n    url: http://127.0.0.1:1/\n",
    );
    let out = sloburn()
        .arg("check")
        .arg(&cfg)
        .env_remove("SLOBURN_TEST_UNSET_SHARD")
        .output()
        .unwrap();
    let text = all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains(
            "sloburn.yaml:2:9: storage.path: environment variable `SLOBURN_TEST_UNSET_SHARD` is not set"
        ),
        "{text}"
    );
}
