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
        .args(["--base-url", "http://127.0.0.1:8080"])
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
    let check = sloburn().arg("check").arg(&cfg).output().unwrap();
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
