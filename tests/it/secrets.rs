//! Secrets never leave through an output: a `${env:}` in a target's URL, one in a header and a
//! `${file:}` reach the target (a capturing server here sees them) and nothing else. One test
//! starts a real daemon child, a real `run` of a profile and of `--url`, and `check`, with
//! distinctive values, and greps everything they print or serve: `check` output, text and
//! JSON logs, the `/api/reload` 422 body, the Flagger hook's answers (its token in the
//! metadata), `/metrics`, `/`, every `GET /api/*`, `/readyz`, the
//! run summary, `--summary-export` and `--out json`. A URL is shown as written, its references
//! kept.

use crate::support::{ADMIN_TOKEN, Daemon, eventually, get_blocking, metric_sum, request, runtime};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const URL_SECRET: &str = "url-s3cr3t-7Qx9vK";
const HEADER_SECRET: &str = "hdr-s3cr3t-Zp4wJm";
const FILE_SECRET: &str = "file-s3cr3t-Lm2kTe";
const SECRETS: [&str; 3] = [URL_SECRET, HEADER_SECRET, FILE_SECRET];
/// `server.hook_token`: sent to the daemon in a Flagger payload's metadata, never shown.
const HOOK_SECRET: &str = "hook-s3cr3t-Vb8nQr";

/// An HTTP/1.1 server on 127.0.0.1 that answers `200 ok` to everything, one connection at a
/// time, and keeps every request head it read.
fn capturing_server() -> (std::net::SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                match s.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf).into_owned());
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
        }
    });
    (addr, heads)
}

/// The config: the URL, a header and a file token from references; `url` replaced by `bad_url`
/// when given.
fn config(addr: std::net::SocketAddr, data: &Path, bad_url: Option<&str>) -> String {
    let url = format!("http://{addr}/probe?k=${{env:URL_SECRET}}");
    let url = bad_url.map_or(url, str::to_string);
    format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  hook_token: "${{env:HOOK_SECRET}}"
  grace_period: 5s
storage:
  path: "{data}"
  flush_interval: 1s
targets:
  api:
    url: "{url}"
    headers:
      X-Api-Key: "${{env:HEADER_SECRET}}"
      X-File-Token: "${{file:token.txt}}"
    checks:
      - status: 200
profiles:
  probe:
    target: api
    every: 1h
    run_on_start: true
    executor: shared-iterations
    vus: 1
    iterations: 5
slos:
  api-availability:
    target: api
    sli: availability
    objective: 99.9
    period: 1d
"#,
        data = data.display()
    )
}

fn with_secrets(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env("URL_SECRET", URL_SECRET)
        .env("HEADER_SECRET", HEADER_SECRET)
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("HOOK_SECRET", HOOK_SECRET)
}

#[test]
fn secrets_in_a_url_a_header_and_a_file_never_appear_in_any_output() {
    let (addr, heads) = capturing_server();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token.txt"), format!("{FILE_SECRET}\n")).unwrap();
    let data = dir.path().join("data");
    let good = config(addr, &data, None);
    let written_bad = format!("{addr}/probe?k=${{env:URL_SECRET}} x");
    let bad = config(addr, &data, Some(&written_bad));
    let good_path = dir.path().join("good.yaml");
    std::fs::write(&good_path, &good).unwrap();
    let bad_path = dir.path().join("bad.yaml");
    std::fs::write(&bad_path, &bad).unwrap();
    // Every output, by where it came from.
    let mut outputs: Vec<(String, String)> = Vec::new();

    // The daemon: its probe run, then every read it serves, then a bad config over the live one.
    let live = dir.path().join("sloburn.yaml");
    std::fs::write(&live, &good).unwrap();
    let mut cmd = Daemon::command(&live, &["--no-watch"]);
    cmd.current_dir(dir.path()).env("RUST_LOG", "debug");
    with_secrets(&mut cmd);
    let d = Daemon::spawn(cmd);
    eventually(Duration::from_secs(20), || {
        let runs = metric_sum(&d.metrics(), "sloburn_runs_total{profile=\"probe\"");
        (runs >= 1.0).then_some(())
    })
    .expect("the probe run never finished");
    for path in ["/metrics", "/", "/api/profiles", "/api/runs", "/api/slos"] {
        outputs.push((path.into(), get_blocking(&format!("{}{path}", d.base)).1));
    }
    let rt = runtime();
    let (_, readyz) = rt.block_on(request(
        "GET",
        &format!("{}/readyz", d.base),
        Some(ADMIN_TOKEN),
    ));
    outputs.push(("/readyz".into(), readyz));
    // Flagger's webhook with the hook token in its metadata: answered, refused, and a bad value.
    for (meta, want) in [
        (
            serde_json::json!({"slo": "api-availability", "max_burn_rate": "1", "window": "5m", "token": HOOK_SECRET}),
            200,
        ),
        (
            serde_json::json!({"slo": "api-availability", "max_burn_rate": "1", "window": "5m", "token": format!("{HOOK_SECRET}x")}),
            401,
        ),
        (
            serde_json::json!({"profile": "probe", "rate": "fast", "token": HOOK_SECRET}),
            400,
        ),
    ] {
        let body = serde_json::json!({"name": "podinfo", "namespace": "test", "phase": "Progressing", "checksum": "1", "metadata": meta}).to_string();
        let (code, answer) = rt.block_on(crate::flagger::send(
            "POST",
            &format!("{}/api/hooks/flagger", d.base),
            &[],
            &body,
        ));
        assert_eq!(code, want, "{answer}");
        outputs.push(("/api/hooks/flagger".into(), answer));
    }
    std::fs::write(&live, &bad).unwrap();
    let (code, body) = rt.block_on(request(
        "POST",
        &format!("{}/api/reload", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 422, "{body}");
    assert!(body.contains(&written_bad), "the URL as written: {body}");
    outputs.push(("/api/reload 422".into(), body));
    let metrics = d.metrics();
    assert_eq!(
        metric_sum(&metrics, "sloburn_config_reloads_total{result=\"failure\""),
        1.0
    );
    outputs.push(("/metrics after the reload".into(), metrics));
    let logs = d.logs.lock().unwrap().join("\n");
    assert!(
        logs.contains("\"config reload rejected") && logs.contains(&written_bad),
        "{logs}"
    );
    outputs.push(("daemon JSON log".into(), logs));
    drop(d);

    // The same reload under text logs.
    std::fs::write(&live, &good).unwrap();
    let port = crate::support::free_port();
    let mut child = with_secrets(crate::support::sloburn().current_dir(dir.path()))
        .env("RUST_LOG", "debug")
        .args(["--log-format", "text", "serve", "--no-watch", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(&live)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    assert!(crate::support::wait_ready(
        &format!("{base}/healthz"),
        port,
        Duration::from_secs(20)
    ));
    std::fs::write(&live, &bad).unwrap();
    let (code, body) = rt.block_on(request(
        "POST",
        &format!("{base}/api/reload"),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 422, "{body}");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    crate::support::eventually(Duration::from_secs(15), || child.try_wait().unwrap());
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let logs = crate::support::all_output(&out);
    assert!(
        logs.contains("config reload rejected") && logs.contains(&written_bad),
        "{logs}"
    );
    outputs.push(("daemon text log".into(), logs));

    // `check` of both configs.
    for path in [&good_path, &bad_path] {
        let out = with_secrets(crate::support::sloburn().current_dir(dir.path()))
            .arg("check")
            .arg(path)
            .output()
            .unwrap();
        outputs.push((
            format!("check {}", path.display()),
            crate::support::all_output(&out),
        ));
    }
    let (_, bad_check) = outputs.last().unwrap();
    assert!(bad_check.contains(&written_bad), "{bad_check}");

    // `run` of the profile, text logs at debug, with both result files.
    let export = dir.path().join("summary.json");
    let lines = dir.path().join("out.json");
    let out = with_secrets(crate::support::sloburn().current_dir(dir.path()))
        .env("RUST_LOG", "debug")
        .args(["--log-format", "text", "run"])
        .arg(&good_path)
        .arg("--summary-export")
        .arg(&export)
        .arg("--out")
        .arg(format!("json={}", lines.display()))
        .output()
        .unwrap();
    let all = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(all.contains("profile: probe"), "{all}");
    outputs.push(("run: summary and log".into(), all));
    outputs.push((
        "--summary-export".into(),
        std::fs::read_to_string(&export).unwrap(),
    ));
    outputs.push((
        "--out json".into(),
        std::fs::read_to_string(&lines).unwrap(),
    ));

    // `run --url` with the references on the command line, and a broken one.
    let url = format!("http://{addr}/adhoc?k=${{env:URL_SECRET}}");
    let out = with_secrets(&mut crate::support::sloburn())
        .args(["run", "--url", &url, "--iterations", "3", "--quiet"])
        .args(["-H", "X-Api-Key: ${env:HEADER_SECRET}"])
        .output()
        .unwrap();
    let all = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{all}");
    outputs.push(("run --url".into(), all));
    let broken = format!("{addr}/adhoc?k=${{env:URL_SECRET}}");
    let out = with_secrets(&mut crate::support::sloburn())
        .args(["run", "--url", &broken, "--iterations", "1"])
        .output()
        .unwrap();
    let all = crate::support::all_output(&out);
    assert_ne!(out.status.code(), Some(0), "{all}");
    assert!(all.contains(&broken), "the URL as written: {all}");
    outputs.push(("run --url, broken".into(), all));

    for (source, text) in &outputs {
        for secret in SECRETS.iter().chain(&[HOOK_SECRET]) {
            assert!(!text.contains(secret), "{source} shows {secret}:\n{text}");
        }
    }
    // The requests carried the real values: the daemon's, the profile run's and `--url`'s.
    let heads = heads.lock().unwrap().join("\n");
    let with = |needle: &str| heads.matches(needle).count();
    assert_eq!(
        with(HOOK_SECRET),
        0,
        "the hook token went to the target: {heads}"
    );
    assert!(
        with(&format!("GET /probe?k={URL_SECRET} ")) >= 10,
        "{heads}"
    );
    assert!(with(&format!("GET /adhoc?k={URL_SECRET} ")) == 3, "{heads}");
    assert!(
        with(&format!("x-api-key: {HEADER_SECRET}")) >= 13,
        "{heads}"
    );
    assert!(
        with(&format!("x-file-token: {FILE_SECRET}")) >= 10,
        "{heads}"
    );
}
