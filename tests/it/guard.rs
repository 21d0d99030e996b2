//! Issue 44, items 4 and 6, against a real daemon (a child process) and real hostile peers: a
//! wrong-token flood from one loopback source beside right tokens from another, and a target
//! that echoes back everything sloburn sends (item 5, slow readers, is `slow_readers.rs`).

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, BackgroundTarget, Daemon, IDLE, daemon_config, runtime,
    write_config,
};
use sloburn::target::TargetOptions;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request from `source` (a loopback address) on a connection of its own: the status, or
/// 0 when the connection failed. Every step is bounded by 5 s.
async fn call_from(
    source: IpAddr,
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> u16 {
    let limit = Duration::from_secs(5);
    let attempt = async {
        let socket = tokio::net::TcpSocket::new_v4().ok()?;
        socket.bind(SocketAddr::new(source, 0)).ok()?;
        let mut s = socket.connect(addr).await.ok()?;
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(head.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf);
        text.split(' ').nth(1)?.parse::<u16>().ok()
    };
    tokio::time::timeout(limit, attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

fn daemon_addr(d: &Daemon) -> SocketAddr {
    d.base.trim_start_matches("http://").parse().unwrap()
}

/// Item 6: ~250 wrong tokens a second from 127.0.0.2 (twice the issue's flood), and meanwhile
/// every right call from 127.0.0.1 (an admin write, the Flagger hook) is served. The flood is
/// limited on its own source (it sees 429s).
#[test]
fn a_wrong_token_flood_from_one_source_never_locks_out_a_right_token_from_another() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let text = daemon_config(
        target.addr,
        &dir.path().join("data"),
        IDLE,
        AVAILABILITY_SLO,
    );
    let d = Daemon::start(&write_config(dir.path(), &text), &["--no-watch"]);
    let addr = daemon_addr(&d);
    let flooder: IpAddr = "127.0.0.2".parse().unwrap();
    let caller: IpAddr = "127.0.0.1".parse().unwrap();
    let hook = r#"{"name":"podinfo","namespace":"test","phase":"Progressing","checksum":"c1","metadata":{"slo":"api-availability","max_burn_rate":"14.4","window":"5m"}}"#;
    let rt = runtime();
    let (flood, right) = rt.block_on(async {
        let started = Instant::now();
        let flood = tokio::spawn(async move {
            let (mut n, mut limited) = (0u64, 0u64);
            let mut tick = tokio::time::interval(Duration::from_millis(4));
            while started.elapsed() < Duration::from_secs(4) && n < 2000 {
                tick.tick().await;
                let code = call_from(flooder, addr, "POST", "/api/reload", Some("guess"), "").await;
                n += 1;
                limited += u64::from(code == 429);
            }
            (n, limited, started.elapsed())
        });
        // Right calls from the other source while the flood runs.
        let mut right = Vec::new();
        tokio::time::sleep(Duration::from_millis(300)).await;
        while started.elapsed() < Duration::from_secs(3) && right.len() < 60 {
            let calls = [
                ("POST", "/api/profiles/idle/pause", ""),
                ("POST", "/api/profiles/idle/resume", ""),
                ("POST", "/api/hooks/flagger", hook),
            ];
            for (method, path, body) in calls {
                let code = call_from(caller, addr, method, path, Some(ADMIN_TOKEN), body).await;
                right.push((path, code));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (flood.await.unwrap(), right)
    });
    let (sent, limited, took) = flood;
    let rate = sent as f64 / took.as_secs_f64();
    eprintln!(
        "flood: {sent} wrong tokens in {took:?} ({rate:.0}/s), {limited} answered 429; right calls: {}",
        right.len()
    );
    assert!(rate >= 125.0, "the flood ran at {rate:.0}/s only");
    assert!(limited > 0, "the flooding source was never limited");
    assert!(right.len() >= 15, "{} right calls", right.len());
    let refused: Vec<_> = right.iter().filter(|(_, c)| *c != 200).collect();
    assert!(
        refused.is_empty(),
        "{} of {} right calls refused: {refused:?}",
        refused.len(),
        right.len()
    );
}

/// The 13 values of the echo test: (what it is, its value). Letters and digits only, so the
/// target sees and echoes them as they are, in a URL too.
const PLANTED: [(&str, &str); 13] = [
    ("env header", "plant01envheaderq8"),
    ("file header", "plant02fileheaderz3"),
    ("env in the URL path", "plant03envpathk1"),
    ("env query value", "plant04envqueryw7"),
    ("env bearer token", "plant05envbearerm2"),
    ("env cookie", "plant06envcookiex5"),
    ("env JSON body", "plant07envbodyj4"),
    ("data column user", "plant08datauserc6"),
    ("data column password", "plant09datapassv9"),
    ("data column pin (query)", "plant10datapinr2"),
    ("data column api_key (header)", "plant11dataapikeyt8"),
    ("json capture (header)", "plant12capturetokeny1"),
    ("header capture (query)", "plant13capturesidh5"),
];

/// A target that reflects everything it receives: `POST /login` answers 200 with a token in
/// its JSON and a session id in a header (both captured); anything else answers 500 (so it is
/// failure evidence) with the request's method, URI, body and headers in its body, and the
/// URI and every request header again as response headers.
async fn echo(req: axum::extract::Request) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    if parts.uri.path() == "/login" {
        return (
            [("x-sid", PLANTED[12].1)],
            axum::Json(serde_json::json!({ "token": PLANTED[11].1 })),
        )
            .into_response();
    }
    let mut text = format!(
        "{} {}\n{}\n",
        parts.method,
        parts.uri,
        String::from_utf8_lossy(&body)
    );
    let mut headers = http::HeaderMap::new();
    headers.insert("x-echo-uri", parts.uri.to_string().parse().unwrap());
    for (name, value) in &parts.headers {
        text.push_str(&format!("{name}: {}\n", value.to_str().unwrap_or("?")));
        if let Ok(n) = http::HeaderName::from_bytes(format!("x-echo-{name}").as_bytes()) {
            headers.append(n, value.clone());
        }
    }
    (http::StatusCode::INTERNAL_SERVER_ERROR, headers, text).into_response()
}

/// Starts [`echo`] on 127.0.0.1:0 on a runtime of its own (kept alive by the returned value).
fn start_echo() -> (SocketAddr, tokio::runtime::Runtime) {
    let rt = runtime();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        let _ = axum::serve(listener, axum::Router::new().fallback(echo)).await;
    });
    (addr, rt)
}

/// The config of the echo test in `dir`: the secret file, the data file, a journey that sends
/// every planted value (two captured from the login), and `server` lines for the daemon.
fn echo_config(dir: &std::path::Path, echo: SocketAddr) -> std::path::PathBuf {
    let p = |i: usize| PLANTED[i].1;
    std::fs::write(dir.join("secret.txt"), format!("{}\n", p(1))).unwrap();
    std::fs::write(
        dir.join("users.csv"),
        format!(
            "user,password,pin,api_key\n{},{},{},{}\n",
            p(7),
            p(8),
            p(9),
            p(10)
        ),
    )
    .unwrap();
    let text = format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 2s
storage:
  path: "{data}"
targets:
  echo:
    url: http://{echo}/
    headers:
      X-Token: "${{env:GUARD_01}}"
      X-File: "${{file:secret.txt}}"
journeys:
  leak:
    target: echo
    data: {{ file: users.csv, order: sequential }}
    steps:
      - name: login
        method: POST
        path: /login
        json: {{ user: "${{data.user}}", password: "${{data.password}}" }}
        checks: [ {{ status: 200 }} ]
        capture: {{ token: {{ json: "$.token" }}, sid: {{ header: X-Sid }} }}
      - name: echo
        method: POST
        path: "/echo/${{env:GUARD_03}}?key=${{env:GUARD_04}}&pin=${{data.pin}}&sid=${{sid}}"
        headers:
          Authorization: "Bearer ${{env:GUARD_05}}"
          Cookie: "c=${{env:GUARD_06}}"
          X-Api-Key: "${{data.api_key}}"
          X-Session: "${{token}}"
        json: {{ note: "${{env:GUARD_07}}", user: "${{data.user}}", password: "${{data.password}}" }}
        checks: [ {{ status: 200 }} ]
profiles:
  leak:
    journey: leak
    executor: shared-iterations
    vus: 1
    iterations: 3
    max_duration: 30s
"#,
        data = dir.join("data").display(),
    );
    write_config(dir, &text)
}

/// The environment of the echo test: the planted `${env:}` values and the admin token.
fn echo_env(cmd: &mut std::process::Command) -> &mut std::process::Command {
    for (var, i) in [
        ("GUARD_01", 0),
        ("GUARD_03", 2),
        ("GUARD_04", 3),
        ("GUARD_05", 4),
        ("GUARD_06", 5),
        ("GUARD_07", 6),
    ] {
        cmd.env(var, PLANTED[i].1);
    }
    cmd.env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
}

/// Which planted values `text` (an output named `what`) holds.
fn leaks(what: &str, text: &str) -> Vec<String> {
    PLANTED
        .iter()
        .filter(|(_, v)| text.contains(v))
        .map(|(name, _)| format!("{what}: {name}"))
        .collect()
}

/// Item 4: a target that echoes everything back (URL, headers, body) and 13 planted values
/// (env, file, data file columns, captures; in the path, the query, headers and bodies): none
/// is in any output of `sloburn run` (the `--report` HTML, `--out json`, the summary,
/// `--summary-export`, stderr) nor of the daemon (`/api/runs/{id}` with the token, the
/// dashboard's `/api/series`, `/metrics`, its logs). The evidence is there, echo and all,
/// with the values replaced; without the token `/api/runs/{id}` withholds it. HTTP only: the
/// gRPC metadata's `${env:}` values are in the same scrubbed set (`Config::secrets`), but no
/// echoing gRPC server is started here.
#[test]
fn an_echoing_target_gets_none_of_13_planted_values_into_any_output() {
    let (echo, _echo_rt) = start_echo();
    let dir = tempfile::tempdir().unwrap();
    let config = echo_config(dir.path(), echo);
    let mut found = Vec::new();

    // `sloburn run` with every output.
    let out = |f: &str| dir.path().join(f);
    let run = echo_env(
        crate::support::sloburn()
            .arg("run")
            .arg(&config)
            .args(["--profile", "leak", "--report"])
            .arg(out("report.html"))
            .arg("--out")
            .arg(format!("json={}", out("samples.ndjson").display()))
            .arg("--summary-export")
            .arg(out("summary.json"))
            .arg("--record")
            .arg(out("record.json")),
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stdout.contains("leak"), "no summary: {stdout}\n{stderr}");
    let report = std::fs::read_to_string(out("report.html")).unwrap();
    // The evidence is in the report, echoed request and all, scrubbed.
    assert!(
        report.contains("/echo/"),
        "no echo in the report's evidence"
    );
    assert!(
        report.contains("[redacted]"),
        "nothing redacted in the report"
    );
    found.extend(leaks("--report", &report));
    found.extend(leaks(
        "--out json",
        &std::fs::read_to_string(out("samples.ndjson")).unwrap(),
    ));
    found.extend(leaks("summary", &stdout));
    found.extend(leaks(
        "--summary-export",
        &std::fs::read_to_string(out("summary.json")).unwrap(),
    ));
    found.extend(leaks("run's stderr", &stderr));
    found.extend(leaks(
        "--record",
        &std::fs::read_to_string(out("record.json")).unwrap(),
    ));

    // The daemon: a run through the API, then everything it shows.
    let mut cmd = Daemon::command(&config, &["--no-watch"]);
    echo_env(&mut cmd);
    let d = Daemon::spawn(cmd);
    let rt = runtime();
    let get = |path: &str, token: Option<&str>| {
        rt.block_on(crate::support::request(
            "GET",
            &format!("{}{path}", d.base),
            token,
        ))
    };
    let (code, body) = rt.block_on(crate::support::request(
        "POST",
        &format!("{}/api/profiles/leak/run", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 202, "{body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["run"].clone();
    let detail = crate::support::eventually(Duration::from_secs(30), || {
        let (_, body) = get(&format!("/api/runs/{id}"), Some(ADMIN_TOKEN));
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        (v["run"]["result"] != "running" && v["detail"]["evidence"].as_array()?.len() > 1)
            .then_some(body)
    })
    .expect("the run's evidence");
    assert!(detail.contains("/echo/") && detail.contains("[redacted]"));
    found.extend(leaks("/api/runs/{id} with the token", &detail));
    let (_, open) = get(&format!("/api/runs/{id}"), None);
    let open: serde_json::Value = serde_json::from_str(&open).unwrap();
    assert_eq!(open["detail"]["evidence"], serde_json::json!([]), "{open}");
    assert!(open["detail"]["evidence_withheld"].is_string(), "{open}");
    found.extend(leaks(
        "/api/series",
        &get("/api/series", Some(ADMIN_TOKEN)).1,
    ));
    found.extend(leaks("/api/runs", &get("/api/runs", Some(ADMIN_TOKEN)).1));
    let (code, record) = get(&format!("/api/runs/{id}/record"), Some(ADMIN_TOKEN));
    assert_eq!(code, 200, "{record}");
    let read: sloburn::load::record::RunRecord = serde_json::from_str(&record).unwrap();
    assert_eq!(read.plan.map(|p| p.profile), Some("leak".to_string()));
    found.extend(leaks("/api/runs/{id}/record", &record));
    found.extend(leaks("/metrics", &d.metrics()));
    found.extend(leaks("daemon's logs", &d.logs.lock().unwrap().join("\n")));
    eprintln!(
        "echo test: {} planted values, {} found; report {} B, run detail {} B",
        PLANTED.len(),
        found.len(),
        report.len(),
        detail.len()
    );
    assert!(found.is_empty(), "planted values in outputs: {found:#?}");
}
