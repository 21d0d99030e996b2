//! Issue 31, part 1: one verdict for a sharded run. Three real `sloburn serve --shard i/3`
//! children on loopback, each with `server.peers` naming all three (by port), split one
//! profile against a target this test starts. The target answers each shard with its own
//! latency (a header each child fills from its environment) and records every request: when it
//! arrived and how long it held it.
//!
//! A Flagger hook call to shard 1 runs on all three at one instant (each shard's plan zero, as
//! the target sees it, never before the instant the collector set and within 500 ms of the
//! others: a few ms on an idle machine), and shard 1 answers once, with the
//! thresholds evaluated on the merged histogram: its p95 is the p95 of every request the target
//! held (not an average of the shards' p95s, which the per-shard latencies set far apart), and
//! its request count is the target's. A shard killed mid-run makes the answer inconclusive
//! (503) naming it; a shard whose `abort_on_fail` threshold fails stops every shard's share.

use crate::flagger::{hook, payload};
use crate::support::{
    ADMIN_TOKEN, Daemon, eventually, free_port, request, runtime, serve_on_thread, sloburn,
    write_config,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SHARDS: u32 = 3;
const SHARD_ENV: &str = "SLOBURN_TEST_SHARD";

/// One request as the target saw it: which shard sent it, when it arrived, how long it was held.
#[derive(Clone, Copy, Debug)]
struct Seen {
    shard: u32,
    arrived: Instant,
    held: Duration,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// The latency the target gives shard `shard`'s `n`-th request: far apart per shard (5, 20 and
/// 60 ms and up), so a p95 averaged over shards lands nowhere near the whole run's.
fn latency(shard: u32, n: usize) -> Duration {
    let base = [5, 20, 60][shard as usize % 3];
    Duration::from_millis(base + (n % 10) as u64)
}

fn target() -> (crate::support::ThreadServer, Log) {
    let log: Log = Arc::default();
    let counts: Arc<Mutex<BTreeMap<u32, usize>>> = Arc::default();
    let (log2, counts2) = (log.clone(), counts.clone());
    let app = axum::Router::new().route(
        "/api",
        axum::routing::get(move |h: axum::http::HeaderMap| {
            let (log, counts) = (log2.clone(), counts2.clone());
            async move {
                let arrived = Instant::now();
                let shard: u32 = h
                    .get("x-shard")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(99);
                let n = {
                    let mut c = counts.lock().unwrap();
                    let e = c.entry(shard).or_default();
                    *e += 1;
                    *e
                };
                tokio::time::sleep(latency(shard, n)).await;
                log.lock().unwrap().push(Seen {
                    shard,
                    arrived,
                    held: arrived.elapsed(),
                });
                "ok"
            }
        }),
    );
    (serve_on_thread(app), log)
}

/// The config every shard reads: `canary` (split, constant arrival rate `rate` for
/// `duration`) with `thresholds` (YAML lines under `thresholds:`), `peers` its peer list.
fn config(
    target: std::net::SocketAddr,
    rate: u32,
    duration: &str,
    thresholds: &str,
    peers: &[String],
) -> String {
    let peers: Vec<String> = peers.iter().map(|p| format!("\"{p}\"")).collect();
    format!(
        "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  grace_period: 5s\n  protect_reads: true\n  peers: [{peers}]\nstorage:\n  path: \"DATA\"\ntargets:\n  api:\n    url: http://{target}/api\n    headers:\n      X-Shard: \"${{env:{SHARD_ENV}}}\"\n    checks:\n      - status: 200\nprofiles:\n  canary:\n    target: api\n    executor: constant-arrival-rate\n    rate: {rate}/s\n    duration: {duration}\n    graceful_stop: 2s\n    thresholds:\n{thresholds}",
        peers = peers.join(", "),
    )
}

/// `sloburn serve --shard i/3` on `port` with `text` (its own data directory under `dir`).
fn spawn_shard(dir: &std::path::Path, i: u32, port: u16, text: &str) -> Daemon {
    let d = dir.join(format!("shard{i}"));
    std::fs::create_dir_all(d.join("data")).unwrap();
    let text = text.replace("DATA", &d.join("data").display().to_string());
    let path = write_config(&d, &text);
    let mut cmd = sloburn();
    cmd.args(["serve", "--log-format", "json", "--no-watch", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(&path)
        .args(["--shard", &format!("{i}/{SHARDS}")])
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .env(SHARD_ENV, i.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Daemon::spawn(cmd)
}

/// Three shards of [`config`], every shard a peer of every other.
fn shards(
    dir: &std::path::Path,
    target: std::net::SocketAddr,
    rate: u32,
    duration: &str,
    thresholds: &str,
) -> Vec<Daemon> {
    let ports: Vec<u16> = (0..SHARDS).map(|_| free_port()).collect();
    let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let text = config(target, rate, duration, thresholds, &peers);
    (0..SHARDS)
        .map(|i| spawn_shard(dir, i, ports[i as usize], &text))
        .collect()
}

/// The Flagger hook on `d`, running `canary` (a 60 s timeout).
fn call_hook(d: &Daemon) -> (u16, Value) {
    let body = payload(
        "pre-rollout",
        "sharded",
        &[("profile", "canary"), ("timeout", "60s")],
    );
    runtime().block_on(hook(&d.base, Some(ADMIN_TOKEN), &body))
}

/// k6's `p(N)`: linear interpolation between the closest ranks of the sorted values, in ms.
fn k6_quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pos = q * (values.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    values[lo] + (values[hi] - values[lo]) * (pos - lo as f64)
}

fn held_ms(seen: &[Seen], shard: Option<u32>) -> Vec<f64> {
    seen.iter()
        .filter(|s| shard.is_none_or(|i| s.shard == i))
        .map(|s| s.held.as_secs_f64() * 1000.0)
        .collect()
}

fn runs_of(d: &Daemon) -> Value {
    let (code, body) = runtime().block_on(request(
        "GET",
        &format!("{}/api/runs", d.base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn issue_31_a_flagger_call_to_one_shard_runs_on_all_three_at_one_instant_and_answers_once_on_the_merged_histogram()
 {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let rate = 60;
    let daemons = shards(
        dir.path(),
        server.addr,
        rate,
        "3s",
        "      http_req_duration: [\"p(95)<500\"]\n      http_req_failed: [\"rate<0.01\"]\n",
    );
    let (code, answer) = call_hook(&daemons[1]);
    assert_eq!(code, 200, "{answer:#}");
    assert_eq!(answer["result"], "passed", "{answer:#}");
    let shards = &answer["shards"];
    assert_eq!(shards["collector"], 1, "{shards:#}");
    assert_eq!(shards["complete"], true, "{shards:#}");
    assert_eq!(shards["shards_answered"], serde_json::json!([0, 1, 2]));

    // Every arrival of the plan (rate × 3 s) reached the target, a third from each shard, and
    // the one answer counts exactly what the target saw.
    let seen = log.lock().unwrap().clone();
    let planned = u64::from(rate) * 3;
    assert_eq!(seen.len() as u64, planned, "target saw {}", seen.len());
    assert_eq!(
        answer["requests"].as_u64(),
        Some(seen.len() as u64),
        "{answer:#}"
    );
    for i in 0..SHARDS {
        let n = seen.iter().filter(|s| s.shard == i).count() as u64;
        assert_eq!(n, planned / u64::from(SHARDS), "shard {i}");
        let share = &shards["shares"][i as usize];
        assert_eq!(share["index"], i, "{shards:#}");
        assert_eq!(share["requests"].as_u64(), Some(n), "{shards:#}");
    }

    // One start instant: shard i's first arrival is the plan's iteration i (arrivals are
    // dealt `k mod 3`), due i / rate after the plan's zero; the zeros the target saw agree.
    let start_at = shards["start_at_ms"].as_u64().expect("start_at_ms");
    assert_one_start(&seen, start_at, f64::from(rate));

    // The threshold was judged on the merged histogram: its p95 is the p95 of every request
    // the target held (the client also counts loopback and its own scheduling: a few ms),
    // and nowhere near the average of the shards' p95s.
    let whole = k6_quantile(&mut held_ms(&seen, None), 0.95);
    let averaged: f64 = (0..SHARDS)
        .map(|i| k6_quantile(&mut held_ms(&seen, Some(i)), 0.95))
        .sum::<f64>()
        / f64::from(SHARDS);
    let p95 = answer["p95_ms"].as_f64().unwrap();
    let observed = answer["thresholds"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["metric"] == "http_req_duration")
        .unwrap()["observed"]
        .as_f64()
        .unwrap();
    eprintln!(
        "p95: answered {p95:.2} ms (threshold saw {observed:.2}), target {whole:.2} ms, average of \
         shards' p95s {averaged:.2} ms"
    );
    assert!((observed - p95).abs() < 0.01, "{observed} vs {p95}");
    assert!(
        p95 >= whole * 0.996 && p95 <= whole * 1.004 + 5.0,
        "answered p95 {p95} ms, the target's {whole} ms"
    );
    assert!(
        (averaged - whole).abs() > 20.0,
        "the shards' latencies are too alike to tell a merge from an average"
    );

    // The peers ran their shares for shard 1; nobody else answered the hook, and only shard 1
    // records a verdict: the others list their part as a share of its run (issue 43, item 5).
    for (i, d) in daemons.iter().enumerate() {
        let runs = runs_of(d);
        let run = &runs["runs"][0];
        let trigger = if i == 1 { "flagger" } else { "shard 1" };
        assert_eq!(run["trigger"], trigger, "shard {i}: {runs:#}");
        let result = if i == 1 { "passed" } else { "share" };
        assert_eq!(run["result"], result, "shard {i}: {runs:#}");
    }
    // And the verdict stays readable on the collector under the run's id.
    let id = shards["run"].as_str().unwrap();
    let (code, body) = runtime().block_on(request(
        "GET",
        &format!("{}/api/shard-runs/{id}", daemons[1].base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["verdict"]["requests"], answer["requests"], "{v:#}");
}

/// `sloburn_runs_total{profile="canary",result=R}` on `d`, by result (those above zero).
fn runs_total(d: &Daemon) -> BTreeMap<String, f64> {
    d.metrics()
        .lines()
        .filter(|l| l.starts_with("sloburn_runs_total{") && l.contains("profile=\"canary\""))
        .filter_map(|l| {
            let result = l.split("result=\"").nth(1)?.split('"').next()?.to_string();
            let n: f64 = l.rsplit_once(' ')?.1.parse().ok()?;
            (n > 0.0).then_some((result, n))
        })
        .collect()
}

/// Issue 43, item 5: a run that passes as a whole (180 requests of the `count>=150` it
/// needs), whose shares would each fail that threshold alone (60 each), is one run: passed,
/// recorded and counted in `sloburn_runs_total` by the collector only, once across the three;
/// the other shards list their part as a share of it, judged by no threshold.
#[test]
fn issue_43_a_run_on_three_shards_is_one_verdict_counted_once_and_the_others_list_shares() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let daemons = shards(
        dir.path(),
        server.addr,
        60,
        "3s",
        "      http_reqs: [\"count>=150\"]\n",
    );
    let (code, answer) = call_hook(&daemons[2]);
    assert_eq!(code, 200, "{answer:#}");
    assert_eq!(answer["result"], "passed", "{answer:#}");
    assert_eq!(answer["requests"], 180, "{answer:#}");
    assert_eq!(log.lock().unwrap().len(), 180);
    let run = answer["shards"]["run"].as_str().unwrap().to_string();
    // Every shard has finished its part (the collector answered after polling each share).
    let counted: Vec<BTreeMap<String, f64>> = daemons.iter().map(runs_total).collect();
    eprintln!("sloburn_runs_total by shard: {counted:?}");
    let total: f64 = counted.iter().flat_map(|m| m.values()).sum();
    assert_eq!(total, 1.0, "{counted:?}");
    assert_eq!(counted[2].get("passed"), Some(&1.0), "{counted:?}");
    for (i, d) in daemons.iter().enumerate() {
        let runs = runs_of(d);
        let row = &runs["runs"][0];
        if i == 2 {
            assert_eq!(row["result"], "passed", "{runs:#}");
            assert_eq!(row["requests"], 180, "{runs:#}");
            assert!(row.get("share_of").is_none(), "{runs:#}");
            continue;
        }
        assert_eq!(row["result"], "share", "shard {i}: {runs:#}");
        assert_eq!(row["requests"], 60, "shard {i}: {runs:#}");
        assert_eq!(row["share_of"]["run"], run.as_str(), "shard {i}: {runs:#}");
        assert_eq!(row["share_of"]["shard"], i, "shard {i}: {runs:#}");
        assert_eq!(row["share_of"]["collector"], 2, "shard {i}: {runs:#}");
        assert_eq!(
            row["thresholds"],
            serde_json::json!([]),
            "shard {i}: {runs:#}"
        );
        // Its part is over: the profile is idle there.
        let active: Vec<String> = d
            .metrics()
            .lines()
            .filter(|l| l.starts_with("sloburn_run_active{") && l.contains("\"canary\""))
            .map(str::to_string)
            .collect();
        assert!(
            !active.is_empty() && active.iter().all(|l| l.ends_with(" 0")),
            "shard {i}: {active:?}"
        );
    }
}

#[test]
fn issue_31_a_shard_killed_mid_run_makes_the_one_verdict_inconclusive_and_names_it() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let mut daemons = shards(
        dir.path(),
        server.addr,
        30,
        "20s",
        "      http_req_failed: [\"rate<0.01\"]\n",
    );
    let collector = daemons[1].base.clone();
    let call = std::thread::spawn(move || {
        let body = payload(
            "pre-rollout",
            "killed",
            &[("profile", "canary"), ("timeout", "60s")],
        );
        runtime().block_on(hook(&collector, Some(ADMIN_TOKEN), &body))
    });
    // Shard 2's share is under way at the target: kill it there.
    let going = eventually(Duration::from_secs(30), || {
        (log.lock().unwrap().iter().filter(|s| s.shard == 2).count() >= 5).then_some(())
    });
    assert!(going.is_some(), "shard 2 never sent its share");
    daemons[2].child.kill().unwrap();
    daemons[2].child.wait().unwrap();

    let (code, answer) = call.join().unwrap();
    assert_eq!(code, 503, "{answer:#}");
    assert_eq!(answer["result"], "inconclusive", "{answer:#}");
    assert_eq!(answer["passed"], false, "{answer:#}");
    let shards = &answer["shards"];
    assert_eq!(
        shards["missing_shards"],
        serde_json::json!([2]),
        "{shards:#}"
    );
    assert_eq!(shards["complete"], false, "{shards:#}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(
        reason.contains("[2]") && reason.contains("shard 2"),
        "{reason}"
    );
    // The others' shares were stopped, not left to run their 20 s for no verdict: the target
    // saw well under half of the plan's 600 arrivals.
    let seen = log.lock().unwrap().len();
    assert!(seen < 300, "{seen} requests: the shares were not stopped");
    // Shard 0's share was stopped; the collector's history holds the whole run's verdict.
    for (i, result) in [(0, "aborted"), (1, "inconclusive")] {
        let runs = runs_of(&daemons[i]);
        assert_eq!(runs["runs"][0]["result"], result, "shard {i}: {runs:#}");
    }
}

#[test]
fn issue_31_one_shards_failed_abort_on_fail_threshold_stops_every_shard_and_fails_the_run() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    // Only shard 2's requests (60 ms and up) break the 40 ms bound; on its own figures it
    // aborts, and the collector (shard 0) stops the other two.
    let daemons = shards(
        dir.path(),
        server.addr,
        30,
        "20s",
        "      http_req_duration:\n        - { threshold: \"p(95)<40\", abort_on_fail: true }\n",
    );
    let (code, answer) = call_hook(&daemons[0]);
    assert_eq!(code, 412, "{answer:#}");
    assert_eq!(answer["result"], "aborted", "{answer:#}");
    let reason = answer["reason"].as_str().unwrap();
    assert!(reason.contains("shard 2"), "{reason}");
    assert_eq!(answer["shards"]["complete"], true, "{answer:#}");
    // Stopped everywhere: the target saw well under half of the plan's 600 arrivals.
    let seen = log.lock().unwrap().len() as u64;
    assert!(seen < 300, "{seen} requests: the shares were not stopped");
    assert!(answer["requests"].as_u64() > Some(0), "{answer:#}");
    for (i, d) in daemons.iter().enumerate() {
        let runs = runs_of(d);
        assert_eq!(runs["runs"][0]["result"], "aborted", "shard {i}: {runs:#}");
    }
}

/// A peer that says it is shard 2 and runs nothing: it answers for its share with shard 0's
/// (a real one), its duration histogram's count raised by 1,000: figures no histogram makes.
fn lying_peer(shard0: String) -> crate::support::ThreadServer {
    let app = axum::Router::new()
        .route(
            "/api/shard-runs",
            axum::routing::post(|| async {
                (
                    axum::http::StatusCode::ACCEPTED,
                    axum::Json(serde_json::json!({ "shard": { "index": 2, "count": 3 } })),
                )
            }),
        )
        .route(
            "/api/shard-runs/{run}",
            axum::routing::get(
                move |axum::extract::Path(run): axum::extract::Path<String>| {
                    let shard0 = shard0.clone();
                    async move {
                        let url = format!("{shard0}/api/shard-runs/{run}?scope=local");
                        let (_, body) = request("GET", &url, Some(ADMIN_TOKEN)).await;
                        let mut v: Value = serde_json::from_str(&body).unwrap_or_default();
                        v["shard"]["index"] = 2.into();
                        if let Some(n) = v["shares"]["duration"]["count"].as_u64() {
                            v["shares"]["duration"]["count"] = (n + 1000).into();
                        }
                        axum::Json(v)
                    }
                },
            ),
        );
    serve_on_thread(app)
}

#[test]
fn issue_31_a_peers_figures_that_no_histogram_makes_are_refused_and_the_verdict_names_it() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = (0..2).map(|_| free_port()).collect();
    let liar = lying_peer(format!("http://127.0.0.1:{}", ports[0]));
    let peers = vec![
        format!("127.0.0.1:{}", ports[0]),
        format!("127.0.0.1:{}", ports[1]),
        liar.addr.to_string(),
    ];
    let text = config(
        server.addr,
        30,
        "2s",
        "      http_req_failed: [\"rate<0.01\"]\n",
        &peers,
    );
    let daemons: Vec<Daemon> = (0..2)
        .map(|i| spawn_shard(dir.path(), i, ports[i as usize], &text))
        .collect();
    let (code, answer) = call_hook(&daemons[1]);
    assert_eq!(code, 503, "{answer:#}");
    assert_eq!(answer["result"], "inconclusive", "{answer:#}");
    let shards = &answer["shards"];
    assert_eq!(
        shards["missing_shards"],
        serde_json::json!([2]),
        "{shards:#}"
    );
    assert_eq!(
        shards["shards_answered"],
        serde_json::json!([0, 1]),
        "{shards:#}"
    );
    let why = shards["errors"][0]["error"].as_str().unwrap();
    assert!(
        why.contains("broken") && why.contains("not the sum"),
        "{why}"
    );
    // The figures that were added are the two real shards': what the target saw.
    let seen = log.lock().unwrap().len() as u64;
    assert_eq!(answer["requests"].as_u64(), Some(seen), "{answer:#}");
}

#[test]
fn issue_31_a_share_to_start_is_checked_before_anything_runs() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let text = config(
        server.addr,
        30,
        "2s",
        "      http_req_failed: [\"rate<0.01\"]\n",
        &[format!("127.0.0.1:{port}")],
    );
    let d = spawn_shard(dir.path(), 0, port, &text);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let post = |body: &str, token: Option<&str>| {
        let headers: Vec<(&str, String)> = token
            .map(|t| vec![("authorization", format!("Bearer {t}"))])
            .unwrap_or_default();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        runtime().block_on(crate::flagger::send(
            "POST",
            &format!("{}/api/shard-runs", d.base),
            &headers,
            body,
        ))
    };
    let ask = |run: &str, profile: &str, at: u64, overrides: &str| {
        format!(
            r#"{{"run":"{run}","profile":"{profile}","start_at_ms":{at},"from":1,"overrides":{overrides}}}"#
        )
    };
    let cases: Vec<(String, Option<&str>, u16, &str)> = vec![
        (
            ask("r-1", "canary", now_ms + 500, "{}"),
            None,
            401,
            "Bearer",
        ),
        (
            "not json".into(),
            Some(ADMIN_TOKEN),
            400,
            "no share of a run",
        ),
        (
            ask("r/../1", "canary", now_ms + 500, "{}"),
            Some(ADMIN_TOKEN),
            400,
            "letters, digits",
        ),
        (
            ask("r-2", "nope", now_ms + 500, "{}"),
            Some(ADMIN_TOKEN),
            404,
            "no profile `nope`",
        ),
        (
            ask("r-3", "canary", now_ms - 5_000, "{}"),
            Some(ADMIN_TOKEN),
            409,
            "passed",
        ),
        (
            ask("r-4", "canary", now_ms + 3_600_000, "{}"),
            Some(ADMIN_TOKEN),
            400,
            "clocks",
        ),
        (
            ask("r-5", "canary", now_ms + 500, r#"{"rate":"-3/s"}"#),
            Some(ADMIN_TOKEN),
            400,
            "metadata `rate`",
        ),
    ];
    for (body, token, code, says) in &cases {
        let (got, text) = post(body, *token);
        assert_eq!(got, *code, "{body}: {text}");
        assert!(text.contains(says), "{body}: {text}");
    }
    // None of them started anything.
    let runs = runs_of(&d);
    assert_eq!(runs["runs"], serde_json::json!([]), "{runs:#}");
    assert!(log.lock().unwrap().is_empty());
}

#[test]
fn issue_31_a_run_started_through_the_api_on_one_shard_runs_on_all_three_and_its_verdict_is_kept() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let daemons = shards(
        dir.path(),
        server.addr,
        30,
        "2s",
        "      http_req_failed: [\"rate<0.01\"]\n",
    );
    let (code, body) = runtime().block_on(request(
        "POST",
        &format!("{}/api/profiles/canary/run", daemons[2].base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 202, "{body}");
    let started: Value = serde_json::from_str(&body).unwrap();
    let run = started["shard_run"].as_str().unwrap().to_string();
    let url = format!("{}/api/shard-runs/{run}", daemons[2].base);
    let verdict = eventually(Duration::from_secs(60), || {
        let (code, body) = runtime().block_on(request("GET", &url, Some(ADMIN_TOKEN)));
        assert_eq!(code, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        (v["state"] == "finished").then(|| v["verdict"].clone())
    })
    .expect("the run on every shard never finished");
    assert_eq!(verdict["result"], "passed", "{verdict:#}");
    assert_eq!(
        verdict["shards"]["shards_answered"],
        serde_json::json!([0, 1, 2]),
        "{verdict:#}"
    );
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 60);
    assert_eq!(verdict["requests"].as_u64(), Some(60), "{verdict:#}");
    for i in 0..SHARDS {
        assert_eq!(
            seen.iter().filter(|s| s.shard == i).count(),
            20,
            "shard {i}"
        );
    }
    // A peer's share is its own: asked for the whole verdict, a shard that did not collect the
    // run says so.
    let (code, body) = runtime().block_on(request(
        "GET",
        &format!("{}/api/shard-runs/{run}", daemons[0].base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 404, "{body}");
    let (code, body) = runtime().block_on(request(
        "GET",
        &format!("{}/api/shard-runs/{run}?scope=local", daemons[0].base),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 200, "{body}");
    let local: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(local["shares"]["requests"], 20, "{local:#}");
}

/// `canary` at 30/s for `duration` every 6 s, its peers all three shards; only the shards in
/// `up` are started.
fn scheduled_shards(
    dir: &std::path::Path,
    target: std::net::SocketAddr,
    duration: &str,
    up: std::ops::Range<u32>,
) -> Vec<Daemon> {
    let ports: Vec<u16> = (0..SHARDS).map(|_| free_port()).collect();
    let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let text = config(
        target,
        30,
        duration,
        "      http_req_failed: [\"rate<0.01\"]\n",
        &peers,
    )
    .replace("    executor:", "    every: 6s\n    executor:");
    up.map(|i| spawn_shard(dir, i, ports[i as usize], &text))
        .collect()
}

/// `canary` every 6 s on three shards: each scheduled run is started by shard 0 on every
/// shard at one instant and judged once on shard 0, the peers' own due times leaving it to
/// shard 0.
#[test]
fn issue_31_a_scheduled_run_of_a_split_profile_runs_on_every_shard_with_one_verdict_from_shard_0() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let daemons = scheduled_shards(dir.path(), server.addr, "2s", 0..SHARDS);
    // The first scheduled run that every shard was up for (an earlier one may have found a
    // peer still starting, and be inconclusive naming it).
    let record = eventually(Duration::from_secs(60), || {
        let runs = runs_of(&daemons[0]);
        runs["runs"].as_array().unwrap().iter().rev().find_map(|r| {
            (r["trigger"] == "schedule"
                && r["result"] != "running"
                && r["shards"]["complete"] == true)
                .then(|| r.clone())
        })
    })
    .unwrap_or_else(|| {
        panic!(
            "no scheduled run on every shard finished:\n{:#}\n{:#}",
            runs_of(&daemons[0]),
            runs_of(&daemons[1])
        )
    });
    let shards = &record["shards"];
    assert_eq!(record["result"], "passed", "{record:#}");
    assert_eq!(shards["collector"], 0, "{record:#}");
    assert_eq!(shards["shards_answered"], serde_json::json!([0, 1, 2]));
    assert_eq!(record["requests"].as_u64(), Some(60), "{record:#}");
    let run = shards["run"].as_str().unwrap().to_string();
    let start_at = shards["start_at_ms"].as_u64().unwrap();
    // Each peer ran its share of that run for shard 0, and never a scheduled run of its own.
    for d in &daemons[1..] {
        let runs = runs_of(d);
        let all = runs["runs"].as_array().unwrap();
        assert!(
            all.iter().all(|r| r["trigger"] == "shard 0"),
            "a peer started a run of its own: {runs:#}"
        );
        let (code, body) = runtime().block_on(request(
            "GET",
            &format!("{}/api/shard-runs/{run}?scope=local", d.base),
            Some(ADMIN_TOKEN),
        ));
        assert_eq!(code, 200, "{body}");
        let local: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(local["shares"]["requests"], 20, "{local:#}");
    }
    // At one instant, as the target saw it: the shares' first arrivals around the run's start.
    let seen = log.lock().unwrap().clone();
    assert_one_start(&seen, start_at, 30.0);
}

/// The shards started their shares of the run starting at `start_at_ms` (unix ms) at that
/// instant, as the target saw it: shard i's first arrival of the run is the plan's iteration i
/// (arrivals are dealt `k mod 3`), due i / `rate` after the plan's zero. No shard's zero is
/// before the instant (without the barrier a shard starts when asked, the collector's `LEAD` of
/// 1 s early; an arrival up to 2 s before it counts, an earlier run's ended 4 s before),
/// and the zeros are within half of that lead of each other: on an idle machine they are a few
/// milliseconds apart, and a loaded 2-core machine has delayed one by tens.
fn assert_one_start(seen: &[Seen], start_at_ms: u64, rate: f64) {
    let at = std::time::SystemTime::UNIX_EPOCH + Duration::from_millis(start_at_ms);
    let now_wall = std::time::SystemTime::now();
    let now = Instant::now();
    let start = now - now_wall.duration_since(at).unwrap();
    let zeros: Vec<Instant> = (0..SHARDS)
        .map(|i| {
            let first = seen
                .iter()
                .filter(|s| s.shard == i && s.arrived + Duration::from_secs(2) >= start)
                .map(|s| s.arrived)
                .min()
                .unwrap();
            first - Duration::from_secs_f64(f64::from(i) / rate)
        })
        .collect();
    let (lo, hi) = (zeros.iter().min().unwrap(), zeros.iter().max().unwrap());
    let skew = *hi - *lo;
    let early = start.saturating_duration_since(*lo);
    eprintln!(
        "start skew across the three shards, at the target: {skew:?}; earliest {early:?} before the instant"
    );
    // The instant is whole milliseconds of the wall clock, read apart from the monotonic one.
    assert!(
        early <= Duration::from_millis(20),
        "a shard started {early:?} before the instant"
    );
    assert!(skew < Duration::from_millis(500), "start skew {skew:?}");
}

/// Shard 0 never comes up: the other shards wait for it at each due time, then run their own
/// shares alone (a missed scheduled run would hide the target), saying so in the trigger.
#[test]
fn issue_31_without_shard_0_the_other_shards_run_their_scheduled_shares_alone() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let daemons = scheduled_shards(dir.path(), server.addr, "1s", 1..SHARDS);
    for d in &daemons {
        let run = eventually(Duration::from_secs(60), || {
            let runs = runs_of(d);
            runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|r| (r["result"] != "running").then(|| r.clone()))
        })
        .expect("no run");
        assert_eq!(run["trigger"], "schedule (shard 0 silent)", "{run:#}");
        assert_eq!(run["requests"].as_u64(), Some(10), "{run:#}");
    }
    assert!(log.lock().unwrap().iter().all(|s| s.shard != 0));
}

// ---------------------------------------------------------------------------------------------
// Part 4: the Indexed Job example's command line, as three local processes.

/// The Job example's container arguments, for local process `i` of 3: its config (the shipped
/// one, sent to `target` at a test's rate with `thresholds` swapped in when given), pod 0's
/// address on loopback, its summary-export in `dir`.
fn job_args(
    dir: &std::path::Path,
    i: u32,
    port: u16,
    target: std::net::SocketAddr,
    p95_bound: &str,
) -> Vec<String> {
    let root = crate::support::root().join("deploy/examples/job");
    let job: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root.join("job.yaml")).unwrap()).unwrap();
    let config = std::fs::read_to_string(root.join("config.yaml"))
        .unwrap()
        .replace(
            "http://checkout.shop.svc.cluster.local./healthz",
            &format!("http://{target}/api"),
        )
        .replace("rate: 3000/s", "rate: 60/s")
        .replace("duration: 2m", "duration: 2s")
        .replace("\"p(95)<300\"", &format!("\"p(95)<{p95_bound}\""));
    let config_path = dir.join(format!("config-{i}.yaml"));
    std::fs::write(&config_path, config).unwrap();
    let args = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let a = a.as_str().unwrap();
            match a {
                "/etc/sloburn/config.yaml" => config_path.display().to_string(),
                "/tmp/summary.json" => dir.join(format!("summary-{i}.json")).display().to_string(),
                a if a.starts_with("http://sloburn-job-0.") => format!("http://127.0.0.1:{port}"),
                a => a.replace("$(JOB_COMPLETION_INDEX)", &i.to_string()),
            }
        })
        .collect::<Vec<_>>();
    let mut args = args;
    args.extend([
        "--collect-listen".to_string(),
        format!("127.0.0.1:{port}"),
        "--collect-timeout".to_string(),
        "5s".to_string(),
        "--quiet".to_string(),
    ]);
    args
}

/// Runs the Job's command line as processes `shards` (indices of 3); their exit codes.
fn run_job(
    dir: &std::path::Path,
    target: std::net::SocketAddr,
    shards: &[u32],
    p95_bound: &str,
) -> (Vec<i32>, Vec<crate::support::Proc>) {
    let port = free_port();
    let mut procs: Vec<crate::support::Proc> = shards
        .iter()
        .map(|i| crate::support::Proc::start(job_args(dir, *i, port, target, p95_bound)))
        .collect();
    let codes = procs
        .iter_mut()
        .map(|p| {
            let status = p.wait(Duration::from_secs(90)).expect("still running");
            status.code().unwrap()
        })
        .collect();
    (codes, procs)
}

#[test]
fn issue_31_the_indexed_jobs_command_line_as_three_processes_gives_one_merged_verdict() {
    let (server, log) = target();
    let dir = tempfile::tempdir().unwrap();
    let (codes, procs) = run_job(dir.path(), server.addr, &[0, 1, 2], "300");
    assert_eq!(codes, vec![0, 0, 0], "{}", procs[0].stderr());
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 120);
    // Pod 0's summary is the whole run's, the others say theirs is a share.
    let whole = procs[0].stdout();
    assert!(whole.contains("every one of 3 shards"), "{whole}");
    assert!(
        procs[1].stdout().contains("share only"),
        "{}",
        procs[1].stdout()
    );
    let export: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary-0.json")).unwrap())
            .unwrap();
    let metrics = &export["metrics"];
    assert_eq!(metrics["http_reqs"]["count"], 120, "{metrics:#}");
    let p95 = metrics["http_req_duration"]["p(95)"].as_f64().unwrap();
    let target_p95 = k6_quantile(&mut held_ms(&seen, None), 0.95);
    assert!(
        p95 >= target_p95 * 0.996 && p95 <= target_p95 * 1.004 + 5.0,
        "merged p95 {p95} ms, the target's {target_p95} ms"
    );
    log.lock().unwrap().clear();

    // A bound the merged run breaks: 99 from pod 0 alone, the others' part done (0).
    let dir = tempfile::tempdir().unwrap();
    let (codes, procs) = run_job(dir.path(), server.addr, &[0, 1, 2], "4");
    assert_eq!(codes, vec![99, 0, 0], "{}", procs[0].stderr());
    log.lock().unwrap().clear();

    // A pod that never comes: pod 0 starts without it after the timeout and says 75, naming it.
    let dir = tempfile::tempdir().unwrap();
    let (codes, procs) = run_job(dir.path(), server.addr, &[0, 1], "300");
    assert_eq!(
        codes,
        vec![75, 0],
        "{}\n{}",
        procs[0].stderr(),
        procs[1].stderr()
    );
    let err = procs[0].stderr();
    assert!(err.contains("[2]") && err.contains("shard 2"), "{err}");
}
