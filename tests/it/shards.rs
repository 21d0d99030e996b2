//! Issue 31, part 2: SLO state across shards. Three real `sloburn serve --shard i/3` children
//! share one config with `server.peers` naming all three (each skips itself by the index it
//! answers with) and `protect_reads` on, so a peer call that forgot the admin token would fail.
//! They split one profile against a fault target this test starts (a fifth of its answers are
//! 500s). `/api/slos` on every shard is then the whole SLO: each window's events the sum of the
//! three shards' local figures (`?scope=local`) and of what the target itself answered, ratios
//! recomputed from the sums. A killed shard makes every answer `complete: false` naming it,
//! and the Flagger hook's SLO mode inconclusive (503).

use crate::flagger::{hook, payload};
use crate::support::{
    ADMIN_TOKEN, BackgroundTarget, Daemon, eventually, free_port, request, runtime, sloburn,
    write_config,
};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::process::Stdio;
use std::time::Duration;

const SHARDS: u32 = 3;
const ITERATIONS: u64 = 240;
const SLO: &str = "api-availability";

fn config(target: std::net::SocketAddr, data: &std::path::Path, ports: &[u16]) -> String {
    let peers: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let profiles = format!(
        "  burst:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: shared-iterations\n    vus: 4\n    iterations: {ITERATIONS}\n"
    );
    let slos = format!(
        "  {SLO}:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1d\n"
    );
    crate::support::daemon_config(target, data, &profiles, &slos).replacen(
        "server:\n",
        &format!(
            "server:\n  protect_reads: true\n  peers: [{}]\n",
            peers.join(", ")
        ),
        1,
    )
}

fn get(url: &str) -> Value {
    let (code, body) = runtime().block_on(request("GET", url, Some(ADMIN_TOKEN)));
    assert_eq!(code, 200, "GET {url}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// (good, bad) of every window of the SLO in an `/api/slos` answer: the standard windows, the
/// tiers' long and short ones, then the period.
fn events(answer: &Value) -> Vec<(String, u64, u64)> {
    let slo = answer["slos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == SLO)
        .unwrap_or_else(|| panic!("no {SLO} in {answer}"));
    let mut out = Vec::new();
    let tiers = slo["tiers"].as_array().unwrap();
    let tier_windows = tiers.iter().flat_map(|t| [&t["long"], &t["short"]]);
    for w in slo["windows"]
        .as_array()
        .unwrap()
        .iter()
        .chain(tier_windows)
        .chain([&slo["period"]])
    {
        out.push((
            w["window"].as_str().unwrap().to_string(),
            w["good"].as_u64().unwrap(),
            w["bad"].as_u64().unwrap(),
        ));
    }
    out
}

fn sum(parts: &[Vec<(String, u64, u64)>]) -> Vec<(String, u64, u64)> {
    let mut out = parts[0].clone();
    for p in &parts[1..] {
        for (o, (w, g, b)) in out.iter_mut().zip(p) {
            assert_eq!(&o.0, w);
            o.1 += g;
            o.2 += b;
        }
    }
    out
}

fn period(e: &[(String, u64, u64)]) -> (u64, u64) {
    let (_, g, b) = e.last().unwrap();
    (*g, *b)
}

fn shard(i: u32, port: u16, config: &std::path::Path) -> Daemon {
    let mut cmd = sloburn();
    cmd.args(["serve", "--log-format", "json", "--no-watch", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(config)
        .args(["--shard", &format!("{i}/{SHARDS}")])
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Daemon::spawn(cmd)
}

#[test]
fn issue_31_api_slos_on_any_shard_is_the_whole_slo_and_a_missing_shard_is_named() {
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: 0.2,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..SHARDS).map(|_| free_port()).collect();
    let mut daemons = Vec::new();
    for i in 0..SHARDS {
        let d = dir.path().join(format!("shard{i}"));
        std::fs::create_dir_all(d.join("data")).unwrap();
        let path = write_config(&d, &config(target.addr, &d.join("data"), &ports));
        daemons.push(shard(i, ports[i as usize], &path));
    }
    let local = |d: &Daemon| events(&get(&format!("{}/api/slos?scope=local", d.base)));
    // Every iteration answered, and every shard folded its events: the locals add up to what
    // the target served.
    let settled = eventually(Duration::from_secs(90), || {
        let served = target.stats().requests;
        let parts: Vec<_> = daemons.iter().map(local).collect();
        let (g, b) = period(&sum(&parts));
        (served == ITERATIONS && g + b == ITERATIONS).then_some(parts)
    });
    let parts = settled.unwrap_or_else(|| {
        panic!(
            "not settled: target served {}, locals {:?}",
            target.stats().requests,
            daemons
                .iter()
                .map(|d| period(&local(d)))
                .collect::<Vec<_>>()
        )
    });
    let want = sum(&parts);
    let errors = target.stats().errors_injected;
    assert_eq!(period(&want), (ITERATIONS - errors, errors));
    assert!(errors > 0 && errors < ITERATIONS, "{errors} errors");
    // Each shard sent a share, not the whole: its local figure alone is not the SLO's.
    for p in &parts {
        let (g, b) = period(p);
        assert!(g + b > 0 && g + b < ITERATIONS, "{p:?}");
    }
    for (i, d) in daemons.iter().enumerate() {
        let local_answer = get(&format!("{}/api/slos?scope=local", d.base));
        assert_eq!(local_answer["scope"], "local");
        assert_eq!(local_answer["shard"]["index"], i);
        let whole = get(&format!("{}/api/slos", d.base));
        assert_eq!(whole["scope"], "whole", "{whole}");
        assert_eq!(whole["complete"], true, "{whole}");
        assert_eq!(whole["missing_shards"], serde_json::json!([]), "{whole}");
        assert_eq!(whole["shards_answered"], serde_json::json!([0, 1, 2]));
        assert_eq!(events(&whole), want, "shard {i}");
        // Ratios come from the sums: the 1h burn rate is the whole SLO's error ratio / 1 %.
        let slo = &whole["slos"][0];
        let (g, b) = period(&want);
        let burn = slo["burn_rates"]["1h"].as_f64().unwrap();
        let expected = b as f64 / (g + b) as f64 / (1.0 - 0.99);
        assert!((burn - expected).abs() < 1e-6, "{burn} vs {expected}");
        let remaining = slo["budget_remaining"].as_f64().unwrap();
        assert!((remaining - (1.0 - expected)).abs() < 1e-6, "{remaining}");
        // One SLO alone: the same figures, and the same completeness.
        let one = get(&format!("{}/api/slos/{SLO}", d.base));
        assert_eq!(one["complete"], true, "{one}");
        assert_eq!(events(&serde_json::json!({ "slos": [one.clone()] })), want);
    }
    // The Flagger hook's SLO mode answers from the whole SLO's burn too.
    let body = payload(
        "pre-rollout",
        "c1",
        &[("slo", SLO), ("max_burn_rate", "1000"), ("window", "1h")],
    );
    let (code, answer) = runtime().block_on(hook(&daemons[0].base, Some(ADMIN_TOKEN), &body));
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["complete"], true, "{answer}");
    let (g, b) = period(&want);
    let expected = b as f64 / (g + b) as f64 / (1.0 - 0.99);
    assert!(
        (answer["burn_rate"].as_f64().unwrap() - expected).abs() < 1e-6,
        "{answer} vs {expected}"
    );

    // Shard 2 goes away: the others still answer, with its events left out and it named.
    let mut gone = daemons.pop().unwrap();
    gone.child.kill().unwrap();
    gone.child.wait().unwrap();
    let without = sum(&parts[..2]);
    for (i, d) in daemons.iter().enumerate() {
        let whole = get(&format!("{}/api/slos", d.base));
        assert_eq!(whole["complete"], false, "{whole}");
        assert_eq!(whole["missing_shards"], serde_json::json!([2]), "{whole}");
        assert_eq!(whole["shards_answered"], serde_json::json!([0, 1]));
        let errors = whole["peer_errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "{whole}");
        assert_eq!(
            errors[0]["peer"],
            format!("http://127.0.0.1:{}", ports[2]),
            "{whole}"
        );
        assert_eq!(events(&whole), without, "shard {i}");
        let one = get(&format!("{}/api/slos/{SLO}", d.base));
        assert_eq!(one["complete"], false, "{one}");
        assert_eq!(one["missing_shards"], serde_json::json!([2]), "{one}");
    }
    let (code, answer) = runtime().block_on(hook(&daemons[0].base, Some(ADMIN_TOKEN), &body));
    assert_eq!(code, 503, "{answer}");
    assert_eq!(answer["missing_shards"], serde_json::json!([2]), "{answer}");
    assert!(answer["passed"].is_null(), "{answer}");
}

#[test]
fn issue_31_server_peers_refuses_what_is_no_peer_address_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let text = "server:\n  peers:\n    - \"https://sloburn-{i}.sloburn:9090\"\n    - \"not a host\"\n    - \"sloburn-{i}.sloburn:9090\"\ntargets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles: {}\n";
    let path = write_config(dir.path(), text);
    let out = sloburn().arg("check").arg(&path).output().unwrap();
    let err =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(78), "{err}");
    assert!(
        err.contains(":3:7: server.peers[0]") && err.contains("plain http"),
        "{err}"
    );
    assert!(
        err.contains(":4:7: server.peers[1]") && err.contains("not a peer address"),
        "{err}"
    );
    assert!(!err.contains("server.peers[2]"), "{err}");
}

/// A target that fails every request from shard 1 (its `X-Shard` header) and answers the
/// others 200: each shard's own traffic is all good or all bad, the whole SLO half bad.
fn shard_failing_target() -> crate::support::ThreadServer {
    let app = axum::Router::new().route(
        "/api",
        axum::routing::get(|h: axum::http::HeaderMap| async move {
            if h.get("x-shard").and_then(|v| v.to_str().ok()) == Some("1") {
                axum::http::StatusCode::INTERNAL_SERVER_ERROR
            } else {
                axum::http::StatusCode::OK
            }
        }),
    );
    crate::support::serve_on_thread(app)
}

#[test]
fn issue_31_the_budget_guard_and_the_flagger_slo_mode_judge_the_whole_slo_not_a_shards_share() {
    let target = shard_failing_target();
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let peers: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let mut daemons = Vec::new();
    for i in 0..2u32 {
        let d = dir.path().join(format!("shard{i}"));
        std::fs::create_dir_all(d.join("data")).unwrap();
        // Shard 0's own events are all good: only shard 1's (its peer's) can trip its guard.
        let text = format!(
            "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  grace_period: 5s\n  peers: [{peers}]\nstorage:\n  path: \"{data}\"\ntargets:\n  api:\n    url: http://{addr}/api\n    headers: {{ X-Shard: \"{i}\" }}\n    checks:\n      - status: 200\nprofiles:\n  canary:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 20/s\n    duration: 1h\n    guard: {{ slo: {SLO}, max_burn_rate: 10, window: 5m }}\nslos:\n  {SLO}:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1d\n",
            peers = peers.join(", "),
            data = d.join("data").display(),
            addr = target.addr,
        );
        let path = write_config(&d, &text);
        let mut cmd = sloburn();
        cmd.args(["serve", "--log-format", "json", "--no-watch", "--listen"])
            .arg(format!("127.0.0.1:{}", ports[i as usize]))
            .arg("--config")
            .arg(&path)
            .args(["--shard", &format!("{i}/2")])
            .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        daemons.push(Daemon::spawn(cmd));
    }
    let guarded = |d: &Daemon| {
        eventually(Duration::from_secs(60), || {
            let v = get(&format!("{}/api/runs", d.base));
            (v["runs"][0]["result"] == "aborted_by_guard").then_some(v["runs"][0].clone())
        })
    };
    // Shard 0 sent only good requests, yet the whole SLO burns at 50×: its guard stops it.
    let run = guarded(&daemons[0]).expect("shard 0's guard never saw its peer's bad events");
    let reason = run["reason"].as_str().unwrap();
    assert!(reason.contains(SLO) && !reason.contains("without"), "{run}");
    let local = get(&format!(
        "{}/api/slos/{SLO}?scope=local&window=5m",
        daemons[0].base
    ));
    let (g, b) = (
        local["asked"]["good"].as_u64(),
        local["asked"]["bad"].as_u64(),
    );
    assert!(
        g > Some(0) && b == Some(0),
        "shard 0's own events are all good: {local}"
    );
    guarded(&daemons[1]).expect("shard 1's guard");

    // The hook on shard 0 answers from the whole SLO too: burning, so 412, where its own
    // figures (no bad event) would pass.
    let body = payload(
        "pre-rollout",
        "c2",
        &[("slo", SLO), ("max_burn_rate", "10"), ("window", "1h")],
    );
    let (code, answer) = runtime().block_on(hook(&daemons[0].base, Some(ADMIN_TOKEN), &body));
    assert_eq!(code, 412, "{answer}");
    assert_eq!(answer["complete"], true, "{answer}");
    assert_eq!(answer["shards_answered"], serde_json::json!([0, 1]));
    assert!(answer["burn_rate"].as_f64().unwrap() > 10.0, "{answer}");
}

#[test]
fn issue_31_server_peers_with_a_restore_from_prometheus_is_warned_of_double_counting() {
    let dir = tempfile::tempdir().unwrap();
    let text = "server:\n  peers: [\"sloburn-{i}.sloburn:9090\"]\nstorage:\n  path: data\n  restore: { prometheus: \"http://127.0.0.1:1\" }\ntargets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles: {}\n";
    let path = write_config(dir.path(), text);
    let out = sloburn().arg("check").arg(&path).output().unwrap();
    let all =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{all}");
    assert!(
        all.contains(":5:12: storage.restore") && all.contains("add again"),
        "{all}"
    );
}
