//! Issue 44 item 4 over gRPC: a real grpcio server (`grpc/echo_metadata.py`) that sends every
//! call's metadata back as initial metadata, as trailing metadata, in its reply and in its
//! error message. The `${env:}` values sloburn sent as metadata (a target's, a journey step's,
//! a step's own gRPC call's) are in no output of `sloburn run` nor of the daemon, while the
//! echoes themselves are kept as evidence, scrubbed.

use crate::support::{ADMIN_TOKEN, Daemon, runtime, write_config};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The planted `${env:}` values: (variable, what it is, its value).
const PLANTED: [(&str, &str, &str); 4] = [
    ("GE_01", "target metadata", "grpcplant01targetq8"),
    ("GE_02", "target bearer token", "grpcplant02bearerz3"),
    ("GE_03", "journey step metadata", "grpcplant03stepk1"),
    ("GE_04", "a step's own call's metadata", "grpcplant04ownw7"),
];

/// The test service's folder: `sloburn/test/echo.proto` and its import.
fn protos() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/grpc"))
}

/// The echoing server as a child process, killed on drop.
struct EchoServer {
    child: Child,
    port: u16,
}

impl EchoServer {
    fn start(dir: &Path) -> EchoServer {
        crate::support::install_otel_test_tools();
        let pool =
            sloburn::http::grpc::compile(&[protos().join("sloburn/test/echo.proto")], &[protos()])
                .expect("echo.proto compiles");
        let fds = dir.join("echo.fds");
        std::fs::write(&fds, pool.encode_to_vec()).unwrap();
        let mut child = Command::new("python3")
            .arg(protos().join("echo_metadata.py"))
            .arg(&fds)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts the gRPC server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server prints its port");
        EchoServer { child, port }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A journey over the echoing target: a call whose reply fails a check (the echo is in its
/// body and headers), a call answered INTERNAL with the metadata in its message, and a step's
/// own gRPC call with metadata of its own, answered INTERNAL too.
fn config(dir: &Path, port: u16) -> PathBuf {
    let protos = protos();
    let protos = protos.display();
    let text = format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 2s
storage:
  path: "{data}"
targets:
  echo:
    url: grpc://127.0.0.1:{port}
    grpc:
      method: sloburn.test.Echo/Say
      protos: ["{protos}/sloburn/test/echo.proto"]
      import_paths: ["{protos}"]
      metadata:
        x-target: "${{env:GE_01}}"
        authorization: "Bearer ${{env:GE_02}}"
journeys:
  leak:
    target: echo
    steps:
      - name: echoed
        json: {{ text: "echo" }}
        headers: {{ x-step: "${{env:GE_03}}" }}
        checks: [ {{ status: 0 }}, {{ name: never, body_contains: "no-such-text" }} ]
        on_failure: continue
      - name: failed
        json: {{ text: "fail" }}
        headers: {{ x-step: "${{env:GE_03}}" }}
        checks: [ {{ status: 0 }} ]
        on_failure: continue
      - name: own
        url: grpc://127.0.0.1:{port}
        grpc:
          method: sloburn.test.Echo/Say
          protos: ["{protos}/sloburn/test/echo.proto"]
          import_paths: ["{protos}"]
          metadata: {{ x-own: "${{env:GE_04}}" }}
          message: {{ text: "fail" }}
        checks: [ {{ status: 0 }} ]
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

/// The planted values in the environment, and the admin token.
fn planted_env(cmd: &mut Command) -> &mut Command {
    for (var, _, value) in PLANTED {
        cmd.env(var, value);
    }
    cmd.env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
}

/// Which planted values `text` (an output named `what`) holds.
fn leaks(what: &str, text: &str) -> Vec<String> {
    PLANTED
        .iter()
        .filter(|(_, _, v)| text.contains(v))
        .map(|(_, name, _)| format!("{what}: {name}"))
        .collect()
}

/// The 4 planted values in none of: `sloburn run`'s `--report` HTML, `--out json`, summary,
/// `--summary-export` and stderr; the daemon's `/api/runs/{id}` (with the token),
/// `/api/runs`, `/api/series`, `/metrics` and logs. The evidence is there, with the server's
/// echoes (initial and trailing metadata, the reply, the status message) scrubbed.
#[test]
fn grpc_metadata_echoed_by_the_server_is_in_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let server = EchoServer::start(dir.path());
    let config = config(dir.path(), server.port);
    let mut found = Vec::new();

    let out = |f: &str| dir.path().join(f);
    let run = planted_env(
        crate::support::sloburn()
            .arg("run")
            .arg(&config)
            .args(["--profile", "leak", "--report"])
            .arg(out("report.html"))
            .arg("--out")
            .arg(format!("json={}", out("samples.ndjson").display()))
            .arg("--summary-export")
            .arg(out("summary.json")),
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stdout.contains("leak"), "no summary: {stdout}\n{stderr}");
    let report = std::fs::read_to_string(out("report.html")).unwrap();
    // The echoes are in the report's evidence, scrubbed.
    for echoed in ["echo-x-target", "trailer-x-step", "trailer-x-own"] {
        assert!(
            report.contains(echoed),
            "no {echoed} in the report's evidence"
        );
    }
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

    let (detail, from_daemon) = daemon_outputs(&config);
    found.extend(from_daemon);
    // Each step's evidence holds the server's echoes, values scrubbed: initial and trailing
    // metadata, and the reply.
    let v: serde_json::Value = serde_json::from_str(&detail).unwrap();
    let evidence = v["detail"]["evidence"].as_array().unwrap();
    let echoed = |step: &str, header: &str| {
        evidence
            .iter()
            .filter(|e| e["step"] == format!("leak::{step}"))
            .flat_map(|e| e["headers"].as_array().into_iter().flatten())
            .filter(|h| h[0] == header)
            .map(|h| h[1].as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    for (step, header, shown) in [
        ("echoed", "echo-x-target", "[redacted]"),
        ("echoed", "trailer-x-step", "[redacted]"),
        ("echoed", "trailer-authorization", "Bearer [redacted]"),
        ("failed", "echo-x-step", "[redacted]"),
        ("failed", "trailer-x-target", "[redacted]"),
        ("own", "echo-x-own", "[redacted]"),
        ("own", "trailer-x-own", "[redacted]"),
    ] {
        let seen = echoed(step, header);
        assert!(
            !seen.is_empty() && seen.iter().all(|s| s == shown),
            "{step}'s {header}: {seen:?} in {detail}"
        );
    }
    let reply = evidence
        .iter()
        .find(|e| e["step"] == "leak::echoed")
        .and_then(|e| e["body"].as_str())
        .unwrap_or("");
    assert!(
        reply.contains(r#""x-step":"[redacted]""#),
        "the reply's echo: {reply}"
    );
    eprintln!(
        "gRPC echo: {} planted values, {} found; report {} B, run detail {} B",
        PLANTED.len(),
        found.len(),
        report.len(),
        detail.len()
    );
    assert!(found.is_empty(), "planted values in outputs: {found:#?}");
}

/// A run of `leak` through the daemon's API: its detail (with the token) and the planted
/// values found in everything the daemon shows.
fn daemon_outputs(config: &Path) -> (String, Vec<String>) {
    let mut cmd = Daemon::command(config, &["--no-watch"]);
    planted_env(&mut cmd);
    let d = Daemon::spawn(cmd);
    let rt = runtime();
    let get = |path: &str| {
        rt.block_on(crate::support::request(
            "GET",
            &format!("{}{path}", d.base),
            Some(ADMIN_TOKEN),
        ))
        .1
    };
    let (code, body) = rt.block_on(crate::support::request(
        "POST",
        &format!("{}/api/profiles/leak/run", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 202, "{body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["run"].clone();
    let detail = crate::support::eventually(Duration::from_secs(30), || {
        let body = get(&format!("/api/runs/{id}"));
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        (v["run"]["result"] != "running" && v["detail"]["evidence"].as_array()?.len() > 2)
            .then_some(body)
    })
    .expect("the run's evidence");
    let mut found = leaks("/api/runs/{id} with the token", &detail);
    found.extend(leaks("/api/series", &get("/api/series")));
    found.extend(leaks("/api/runs", &get("/api/runs")));
    found.extend(leaks("/metrics", &d.metrics()));
    found.extend(leaks("daemon's logs", &d.logs.lock().unwrap().join("\n")));
    (detail, found)
}
