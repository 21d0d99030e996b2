//! Flagger's webhook (`POST /api/hooks/flagger`) over real HTTP against an in-process daemon
//! whose target is `sloburn target` on 127.0.0.1 (healthy at `/api`, half failing at
//! `/api?error_ratio=0.5`): verdicts of passing and failing profiles, the SLO mode from live
//! state, one run for concurrent calls with one checksum, the hook token's reach, bad input.

use super::support::{ADMIN_TOKEN, runtime, spawn_target};
use serde_json::Value;
use sloburn::http::{Client, ClientOptions, RequestSpec, Resolver};
use sloburn::target::TargetOptions;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// `server.hook_token` of these tests (`${env:TEST_HOOK_TOKEN}`).
pub const HOOK_TOKEN: &str = "h00k-0nly";

/// The environment these configs are read with: the admin and the hook token.
fn env() -> sloburn::config::Env {
    let vars = BTreeMap::from([
        ("TEST_ADMIN_TOKEN".to_string(), ADMIN_TOKEN.to_string()),
        ("TEST_HOOK_TOKEN".to_string(), HOOK_TOKEN.to_string()),
    ]);
    sloburn::config::Env::from_map(vars, 1)
}

/// Targets `api` (healthy) and `flaky` (half its answers 500, by the target's query), a 2 s
/// profile on each that fails above 1 % failed requests, and an availability SLO on each.
pub fn config(target: SocketAddr, data: &Path, server_extra: &str) -> String {
    format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  hook_token: "${{env:TEST_HOOK_TOKEN}}"
  grace_period: 5s
{server_extra}storage:
  path: "{data}"
  flush_interval: 1s
targets:
  api:
    url: http://{target}/api
    timeout: 2s
    checks:
      - status: 200
  flaky:
    url: http://{target}/api?error_ratio=0.5
    timeout: 2s
    checks:
      - status: 200
profiles:
  canary:
    target: api
    executor: constant-arrival-rate
    rate: 20/s
    duration: 2s
    graceful_stop: 1s
    thresholds:
      http_req_failed: ["rate<0.01"]
  canary-flaky:
    target: flaky
    executor: constant-arrival-rate
    rate: 20/s
    duration: 2s
    graceful_stop: 1s
    thresholds:
      http_req_failed: ["rate<0.01"]
slos:
  api-availability:
    target: api
    sli: availability
    objective: 99.9
    period: 1d
  flaky-availability:
    target: flaky
    sli: availability
    objective: 99.9
    period: 1d
"#,
        data = data.display()
    )
}

/// The daemon in-process on 127.0.0.1:0 with `text` as its fixed config.
pub async fn serve(text: &str, dir: &Path) -> sloburn::daemon::Daemon {
    super::support::serve_in_process_with(text, dir, &env()).await
}

/// One HTTP request with a body: (status, body). Waits up to 60 s (a hook answers when its
/// run ends).
pub async fn send(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let client = Client::new(
        ClientOptions {
            timeout: Duration::from_secs(60),
            ..ClientOptions::default()
        },
        Arc::new(Resolver::system()),
    );
    let mut h = http::HeaderMap::new();
    for (k, v) in headers {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    if !body.is_empty() {
        h.insert("content-type", "application/json".parse().unwrap());
    }
    let outcome = client
        .conn()
        .send(&RequestSpec {
            method: method.parse().unwrap(),
            uri: url.parse().unwrap(),
            headers: h,
            body: bytes::Bytes::from(body.to_string()),
        })
        .await;
    assert!(
        outcome.error.is_none(),
        "{method} {url}: {:?}",
        outcome.error
    );
    (
        outcome.status.unwrap_or(0),
        String::from_utf8_lossy(&outcome.body).into_owned(),
    )
}

/// Flagger's webhook payload (`CanaryWebhookPayload`, as Flagger's docs show it).
pub fn payload(phase: &str, checksum: &str, metadata: &[(&str, &str)]) -> String {
    let metadata: BTreeMap<&str, &str> = metadata.iter().copied().collect();
    serde_json::json!({
        "name": "podinfo",
        "namespace": "test",
        "phase": phase,
        "checksum": checksum,
        "metadata": metadata,
    })
    .to_string()
}

/// POSTs `body` to the hook with `token` as bearer header: (status, JSON or the raw text).
pub async fn hook(base: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("authorization", a)])
        .unwrap_or_default();
    let (code, text) = send("POST", &format!("{base}/api/hooks/flagger"), &headers, body).await;
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (code, v)
}

/// A bad call: its metadata, the status it gets and what its message says.
type Case<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);

pub async fn get_json(url: &str) -> Value {
    let (code, text) = send("GET", url, &[], "").await;
    assert_eq!(code, 200, "GET {url}: {text}");
    serde_json::from_str(&text).unwrap()
}

#[test]
fn flagger_hook_passing_profile_is_200_and_failing_threshold_is_412_naming_it() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);

        let meta = [("profile", "canary"), ("timeout", "30s")];
        let (code, v) = hook(
            &base,
            Some(HOOK_TOKEN),
            &payload("Progressing", "85d557f47b", &meta),
        )
        .await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["mode"], "profile");
        assert_eq!(v["passed"], true);
        assert_eq!(v["result"], "passed");
        assert_eq!(v["joined"], false);
        assert_eq!(v["failed_thresholds"].as_array().unwrap().len(), 0);
        assert_eq!(v["thresholds"][0]["metric"], "http_req_failed");
        assert_eq!(v["thresholds"][0]["passed"], true);
        // The run is an ordinary run record, triggered by Flagger.
        let id = v["run"].as_u64().unwrap();
        let run = get_json(&format!("{base}/api/runs/{id}")).await;
        assert_eq!(run["run"]["trigger"], "flagger");
        assert_eq!(run["run"]["result"], "passed");
        assert_eq!(run["run"]["requests"], 40, "{run}");

        let meta = [("profile", "canary-flaky"), ("timeout", "30s")];
        let (code, v) = hook(
            &base,
            Some(HOOK_TOKEN),
            &payload("Progressing", "85d557f47b", &meta),
        )
        .await;
        assert_eq!(code, 412, "{v}");
        assert_eq!(v["passed"], false);
        assert_eq!(v["result"], "failed");
        let failed = v["failed_thresholds"].as_array().unwrap();
        assert_eq!(failed.len(), 1, "{v}");
        assert_eq!(failed[0]["metric"], "http_req_failed");
        assert_eq!(failed[0]["threshold"], "rate<0.01");
        let observed = failed[0]["observed"].as_f64().unwrap();
        assert!((0.2..0.8).contains(&observed), "half fail: {observed}");
        let reason = v["reason"].as_str().unwrap();
        assert!(
            reason.contains("http_req_failed `rate<0.01` failed"),
            "{reason}"
        );
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn flagger_hook_slo_mode_answers_from_live_burn_and_starts_no_run() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        // Live traffic on both targets: one run of each profile through the admin API.
        for p in ["canary", "canary-flaky"] {
            let url = format!("{base}/api/profiles/{p}/run");
            let auth = format!("Bearer {ADMIN_TOKEN}");
            assert_eq!(
                send("POST", &url, &[("authorization", &auth)], "").await.0,
                202
            );
        }
        let mut done = false;
        for _ in 0..100 {
            let runs = get_json(&format!("{base}/api/runs")).await;
            let runs = runs["runs"].as_array().unwrap().clone();
            if runs.len() == 2 && runs.iter().all(|r| r["result"] != "running") {
                done = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(done, "the two runs did not finish");
        let before = get_json(&format!("{base}/api/runs")).await;

        // Half of flaky's requests fail: a 99.9 % SLO burns at about 500×.
        let meta = [
            ("slo", "flaky-availability"),
            ("max_burn_rate", "14.4"),
            ("window", "5m"),
        ];
        let (code, v) = hook(
            &base,
            Some(HOOK_TOKEN),
            &payload("Progressing", "c1", &meta),
        )
        .await;
        assert_eq!(code, 412, "{v}");
        assert_eq!(v["mode"], "slo");
        assert_eq!(v["passed"], false);
        assert_eq!(v["window"], "5m");
        let burn = v["burn_rate"].as_f64().unwrap();
        assert!((200.0..800.0).contains(&burn), "{burn}");
        assert_eq!(v["max_burn_rate"], 14.4);
        // The healthy one does not burn.
        let meta = [
            ("slo", "api-availability"),
            ("max_burn_rate", "1"),
            ("window", "1h"),
        ];
        let (code, v) = hook(
            &base,
            Some(HOOK_TOKEN),
            &payload("Progressing", "c1", &meta),
        )
        .await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["passed"], true);
        assert_eq!(v["burn_rate"], 0.0);
        // No run started: the run list is the same.
        let after = get_json(&format!("{base}/api/runs")).await;
        assert_eq!(before, after);
        assert!(!d.shared.profiles().iter().any(|p| p.running));

        // Bad SLO-mode input.
        let cases: Vec<Case> = vec![
            (
                vec![("slo", "nope"), ("max_burn_rate", "1"), ("window", "5m")],
                404,
                "no SLO `nope`",
            ),
            (
                vec![("slo", "api-availability"), ("window", "5m")],
                400,
                "max_burn_rate",
            ),
            (
                vec![
                    ("slo", "api-availability"),
                    ("max_burn_rate", "fast"),
                    ("window", "5m"),
                ],
                400,
                "`fast`",
            ),
            (
                vec![
                    ("slo", "api-availability"),
                    ("max_burn_rate", "1"),
                    ("window", "10s"),
                ],
                400,
                "from 1m",
            ),
            (
                vec![
                    ("slo", "api-availability"),
                    ("max_burn_rate", "1"),
                    ("window", "2d"),
                ],
                400,
                "period (1d)",
            ),
            (
                vec![
                    ("slo", "api-availability"),
                    ("max_burn_rate", "1"),
                    ("window", "5 parsecs"),
                ],
                400,
                "`5 parsecs`",
            ),
        ];
        for (meta, want, says) in &cases {
            let (code, v) =
                hook(&base, Some(HOOK_TOKEN), &payload("Progressing", "c1", meta)).await;
            assert_eq!(code, *want, "{meta:?}: {v}");
            let msg = v["error"].as_str().unwrap_or_default();
            assert!(msg.contains(says), "{meta:?}: {msg}");
        }
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn flagger_hook_concurrent_calls_with_one_checksum_start_one_run() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        let meta = [("profile", "canary"), ("timeout", "30s")];
        let body = payload("Progressing", "5f7c8d9e", &meta);
        // Three calls at once with one checksum, and (once one is in) a call with another
        // checksum, which finds the profile busy.
        let other = payload("Progressing", "0ther", &meta);
        let (a, b, c, busy) = tokio::join!(
            hook(&base, Some(HOOK_TOKEN), &body),
            hook(&base, Some(HOOK_TOKEN), &body),
            hook(&base, Some(ADMIN_TOKEN), &body),
            async {
                for _ in 0..50 {
                    if d.shared.profiles().iter().any(|p| p.running) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                hook(&base, Some(HOOK_TOKEN), &other).await
            }
        );
        for (code, v) in [&a, &b, &c] {
            assert_eq!(*code, 200, "{v}");
        }
        let ids: Vec<u64> = [&a, &b, &c]
            .iter()
            .map(|(_, v)| v["run"].as_u64().unwrap())
            .collect();
        assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
        let joined = [&a, &b, &c]
            .iter()
            .filter(|(_, v)| v["joined"] == true)
            .count();
        assert_eq!(joined, 2);
        assert_eq!(busy.0, 409, "{}", busy.1);
        assert!(
            busy.1["error"]
                .as_str()
                .unwrap()
                .contains("running already")
        );
        let runs = get_json(&format!("{base}/api/runs")).await;
        assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
        assert_eq!(runs["runs"][0]["requests"], 40);
        // Once that run has ended, the same call runs anew (Flagger's next analysis interval).
        let (code, v) = hook(&base, Some(HOOK_TOKEN), &body).await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["joined"], false);
        assert!(v["run"].as_u64().unwrap() > ids[0]);
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn flagger_hook_token_grants_the_hook_only() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let text = config(target, &dir.path().join("data"), "  protect_reads: true\n");
        let d = serve(&text, dir.path()).await;
        let base = format!("http://{}", d.addr);
        let meta = [
            ("slo", "api-availability"),
            ("max_burn_rate", "1"),
            ("window", "5m"),
        ];
        let body = payload("Progressing", "abc", &meta);
        assert_eq!(hook(&base, Some(HOOK_TOKEN), &body).await.0, 200);
        assert_eq!(hook(&base, Some(ADMIN_TOKEN), &body).await.0, 200);
        assert_eq!(hook(&base, None, &body).await.0, 401);
        assert_eq!(hook(&base, Some("wrong"), &body).await.0, 401);
        // Flagger sends no headers: the token may ride in the metadata.
        let with_token = [&meta[..], &[("token", HOOK_TOKEN)]].concat();
        let (code, v) = hook(&base, None, &payload("Progressing", "abc", &with_token)).await;
        assert_eq!(code, 200, "{v}");
        let wrong = [&meta[..], &[("token", "nope")]].concat();
        assert_eq!(
            hook(&base, None, &payload("Progressing", "abc", &wrong))
                .await
                .0,
            401
        );
        // The hook token opens nothing else: writes and (protected) reads refuse it.
        let auth = format!("Bearer {HOOK_TOKEN}");
        let h = [("authorization", auth.as_str())];
        for (method, path) in [
            ("POST", "/api/profiles/canary/run"),
            ("POST", "/api/profiles/canary/pause"),
            ("POST", "/api/reload"),
            ("GET", "/api/slos"),
            ("GET", "/api/slos/api-availability"),
            ("GET", "/api/runs"),
        ] {
            let (code, text) = send(method, &format!("{base}{path}"), &h, "").await;
            assert_eq!(code, 401, "{method} {path}: {text}");
        }
        assert!(!d.shared.profiles().iter().any(|p| p.running || p.paused));
        let admin = format!("Bearer {ADMIN_TOKEN}");
        let (code, _) = send(
            "GET",
            &format!("{base}/api/slos"),
            &[("authorization", &admin)],
            "",
        )
        .await;
        assert_eq!(code, 200);
        d.shutdown().await;

        // Without any token configured the hook is off.
        let dir2 = tempfile::tempdir().unwrap();
        let bare = config(target, &dir2.path().join("data"), "")
            .replace("  admin_token: \"${env:TEST_ADMIN_TOKEN}\"\n", "")
            .replace("  hook_token: \"${env:TEST_HOOK_TOKEN}\"\n", "");
        let d = serve(&bare, dir2.path()).await;
        let (code, v) = hook(&format!("http://{}", d.addr), Some(HOOK_TOKEN), &body).await;
        assert_eq!(code, 403, "{v}");
        assert!(v["error"].as_str().unwrap().contains("server.hook_token"));
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn flagger_hook_refuses_bad_input_and_runs_that_cannot_finish_in_time() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        let t = Some(HOOK_TOKEN);
        for body in [
            "{",
            "\"text\"",
            "not json",
            r#"{"metadata": {"profile": 5}}"#,
            "",
        ] {
            let (code, v) = hook(&base, t, body).await;
            assert_eq!(code, 400, "{body:?}: {v}");
            assert!(
                v["error"]
                    .as_str()
                    .unwrap()
                    .contains("not Flagger's webhook JSON"),
                "{v}"
            );
        }
        let target_str = target.to_string();
        let secret_url = format!("http://{target_str}/${{env:TEST_ADMIN_TOKEN}}");
        let cases: Vec<Case> = vec![
            (vec![], 400, "needs `profile`"),
            (
                vec![("profile", "canary"), ("slo", "api-availability")],
                400,
                "both",
            ),
            (
                vec![("profile", "nope")],
                404,
                "no profile `nope` (profiles: canary, canary-flaky)",
            ),
            (
                vec![("profile", "canary"), ("rate", "fast")],
                400,
                "metadata `rate` `fast`",
            ),
            (
                vec![("profile", "canary"), ("rate", "0/s")],
                400,
                "above zero",
            ),
            (
                vec![("profile", "canary"), ("duration", "0s")],
                400,
                "longer than zero",
            ),
            (
                vec![("profile", "canary"), ("duration", "soon")],
                400,
                "`soon`",
            ),
            (
                vec![("profile", "canary"), ("url", "ftp://x/")],
                400,
                "http://",
            ),
            (
                vec![("profile", "canary"), ("url", "not a url")],
                400,
                "not a URL",
            ),
            (
                vec![("profile", "canary"), ("url", &secret_url)],
                400,
                "never from a webhook",
            ),
            (
                vec![("profile", "canary"), ("timeout", "-1s")],
                400,
                "metadata `timeout`",
            ),
            // 2 s planned, plus 1 s graceful stop, against a 2 s timeout.
            (
                vec![("profile", "canary"), ("timeout", "2s")],
                422,
                "up to 3s",
            ),
            // Flagger's default timeout (10s) when none is given.
            (
                vec![("profile", "canary"), ("duration", "20s")],
                422,
                "timeout of 10s",
            ),
            (
                vec![
                    ("profile", "canary"),
                    ("duration", "1h"),
                    ("timeout", "10m"),
                ],
                422,
                "up to 1h",
            ),
        ];
        for (meta, want, says) in &cases {
            let (code, v) = hook(&base, t, &payload("Progressing", "x", meta)).await;
            assert_eq!(code, *want, "{meta:?}: {v}");
            let msg = v["error"].as_str().unwrap_or_default();
            assert!(msg.contains(says), "{meta:?}: {msg}");
        }
        // The header's timeout counts too (the smaller one wins).
        let body = payload(
            "Progressing",
            "x",
            &[("profile", "canary"), ("timeout", "1m")],
        );
        let auth = format!("Bearer {HOOK_TOKEN}");
        let (code, text) = send(
            "POST",
            &format!("{base}/api/hooks/flagger"),
            &[("authorization", &auth), ("sloburn-timeout", "2s")],
            &body,
        )
        .await;
        assert_eq!(code, 422, "{text}");
        // Nothing of this started a run.
        let runs = get_json(&format!("{base}/api/runs")).await;
        assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "{runs}");
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn flagger_hook_overrides_rate_duration_and_url() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        let t = Some(HOOK_TOKEN);
        // 10/s for 1s: exactly 10 arrivals. Flagger's own keys are ignored and listed.
        let meta = [
            ("profile", "canary"),
            ("rate", "10/s"),
            ("duration", "1s"),
            ("timeout", "30s"),
            ("cmd", "hey -z 1m http://podinfo-canary.test:9898/"),
        ];
        let (code, v) = hook(&base, t, &payload("Progressing", "r1", &meta)).await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["requests"], 10, "{v}");
        assert_eq!(v["ignored_metadata"], serde_json::json!(["cmd"]));
        // The canary's URL: every answer 503 there, so the threshold fails; the requests went
        // to the canary, not the target the SLOs watch, so no SLO counts them.
        let canary_url = format!("http://{target}/canary?status=503");
        let meta = [("profile", "canary"), ("url", canary_url.as_str()), ("timeout", "30s")];
        let (code, v) = hook(&base, t, &payload("Progressing", "r2", &meta)).await;
        assert_eq!(code, 412, "{v}");
        assert_eq!(v["failed_thresholds"][0]["metric"], "http_req_failed");
        assert_eq!(v["failed_thresholds"][0]["observed"], 1.0);
        let slo = [("slo", "api-availability"), ("max_burn_rate", "0"), ("window", "5m")];
        let (code, v) = hook(&base, t, &payload("Progressing", "r2", &slo)).await;
        assert_eq!(code, 200, "the canary's failures burnt the SLO: {v}");
        // A ramping or closed profile has no single rate to override.
        let text = config(target, &dir.path().join("data2"), "").replace(
            "profiles:\n",
            "profiles:\n  closed:\n    target: api\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n",
        );
        let dir2 = tempfile::tempdir().unwrap();
        let d2 = serve(&text, dir2.path()).await;
        let meta = [("profile", "closed"), ("rate", "10/s")];
        let (code, v) = hook(&format!("http://{}", d2.addr), t, &payload("Progressing", "r3", &meta)).await;
        assert_eq!(code, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains("`closed` is constant-vus"), "{v}");
        d2.shutdown().await;
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn hook_token_is_checked_like_the_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let target: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let base = config(target, &dir.path().join("data"), "");
    // The same token twice would make the hook token an admin token.
    let same = base.replace("${env:TEST_HOOK_TOKEN}", "${env:TEST_ADMIN_TOKEN}");
    let err = sloburn::config::from_str(&same, "t.yaml", dir.path(), &env())
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(err.contains("t.yaml:3:15"), "{err}");
    assert!(err.contains("must differ from the admin token"), "{err}");
    let missing = base.replace("${env:TEST_HOOK_TOKEN}", "${env:NOT_SET}");
    let err = sloburn::config::from_str(&missing, "t.yaml", dir.path(), &env())
        .map(|_| ())
        .expect_err("refused")
        .to_string();
    assert!(
        err.contains("t.yaml:3:") && err.contains("NOT_SET"),
        "{err}"
    );
}

/// The Canary of `deploy/examples/flagger/`: the fields Flagger's docs require (no schema for
/// the CRD ships on PyPI), and its two webhooks' metadata as written, posted to a daemon with
/// the profile and SLO they name.
#[test]
fn flagger_canary_example_has_flaggers_fields_and_its_webhooks_answer() {
    let path = super::support::root().join("deploy/examples/flagger/canary.yaml");
    let c: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(c["apiVersion"], "flagger.app/v1beta1");
    assert_eq!(c["kind"], "Canary");
    assert!(c["metadata"]["name"].is_string() && c["metadata"]["namespace"].is_string());
    for f in ["apiVersion", "kind", "name"] {
        assert!(c["spec"]["targetRef"][f].is_string(), "targetRef.{f}");
    }
    assert!(c["spec"]["service"]["port"].is_u64());
    let analysis = &c["spec"]["analysis"];
    sloburn::units::parse_duration(analysis["interval"].as_str().unwrap()).unwrap();
    assert!(analysis["threshold"].is_u64());
    const TYPES: &[&str] = &[
        "confirm-rollout",
        "pre-rollout",
        "rollout",
        "confirm-traffic-increase",
        "confirm-promotion",
        "post-rollout",
        "rollback",
        "event",
    ];
    let hooks = analysis["webhooks"].as_array().unwrap();
    for h in hooks {
        assert!(h["name"].is_string(), "{h}");
        assert!(TYPES.contains(&h["type"].as_str().unwrap()), "{h}");
        let url = h["url"].as_str().unwrap();
        assert!(
            url.starts_with("http://") && url.ends_with("/api/hooks/flagger"),
            "{url}"
        );
        sloburn::units::parse_duration(h["timeout"].as_str().unwrap()).unwrap();
        // Flagger's metadata is a map of strings (`*map[string]string`): no numbers in YAML.
        for (k, v) in h["metadata"].as_object().unwrap() {
            assert!(
                v.is_string(),
                "{}: metadata `{k}` is {v}, not a string",
                h["name"]
            );
        }
        if h["metadata"]["profile"].is_string() {
            assert_eq!(
                h["metadata"]["timeout"], h["timeout"],
                "the metadata repeats Flagger's timeout"
            );
        }
    }
    let by_mode = |key: &str| {
        hooks
            .iter()
            .find(|h| h["metadata"][key].is_string())
            .unwrap_or_else(|| panic!("no webhook with `{key}`"))
            .clone()
    };
    let (load, burn) = (by_mode("profile"), by_mode("slo"));
    assert_eq!(load["type"], "pre-rollout");
    assert_eq!(burn["type"], "rollout");

    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let slo = burn["metadata"]["slo"].as_str().unwrap();
        let profile = load["metadata"]["profile"].as_str().unwrap();
        assert_eq!(profile, "canary");
        let text = config(target, &dir.path().join("data"), "").replace("api-availability", slo);
        let d = serve(&text, dir.path()).await;
        let base = format!("http://{}", d.addr);
        let metadata = |h: &Value, changes: &[(&str, &str)]| {
            let mut m: BTreeMap<String, String> = h["metadata"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            m.insert("token".into(), HOOK_TOKEN.into());
            for (k, v) in changes {
                m.insert(k.to_string(), v.to_string());
            }
            serde_json::json!({
                "name": c["metadata"]["name"], "namespace": c["metadata"]["namespace"],
                "phase": "Progressing", "checksum": "6b8f4c", "metadata": m,
            })
            .to_string()
        };
        // As written (the token from the Secret): the live burn, token in the metadata.
        let (code, v) = hook(&base, None, &metadata(&burn, &[])).await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["mode"], "slo");
        // The load test's overrides (the canary's URL, 20/s, 1m) are valid: with a 1s timeout
        // it is refused for its 1m planned duration, before any request is sent.
        let (code, v) = hook(&base, None, &metadata(&load, &[("timeout", "1s")])).await;
        assert_eq!(code, 422, "{v}");
        assert!(v["error"].as_str().unwrap().contains("up to 1m1s"), "{v}");
        d.shutdown().await;
        stop.cancel();
    });
}

/// Hostile metadata values: every one is refused with a 4xx and a reason, none starts a run,
/// and the daemon answers afterwards.
#[test]
fn flagger_hook_refuses_hostile_values_without_a_run() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        let long = "x".repeat(10_000);
        let mut cases: Vec<Vec<(&str, &str)>> = Vec::new();
        for rate in ["NaN/s", "inf/s", "-5/s", "1/0s", "/s", "5", "5/fortnight"] {
            cases.push(vec![("profile", "canary"), ("rate", rate)]);
        }
        for dur in ["1e400s", "99999999999999999999h", "-1s", "NaN", "1s1"] {
            cases.push(vec![
                ("profile", "canary"),
                ("duration", dur),
                ("timeout", "1m"),
            ]);
        }
        for t in ["0s", "NaN", "99999999999999999999h", ""] {
            cases.push(vec![("profile", "canary"), ("timeout", t)]);
        }
        for (w, m) in [
            ("NaN", "1"),
            ("5m", "NaN"),
            ("5m", "inf"),
            ("5m", "-1"),
            ("", ""),
        ] {
            cases.push(vec![
                ("slo", "api-availability"),
                ("window", w),
                ("max_burn_rate", m),
            ]);
        }
        cases.push(vec![("profile", "")]);
        cases.push(vec![("profile", "\u{0}")]);
        cases.push(vec![("slo", long.as_str())]);
        cases.push(vec![("profile", "canary"), ("url", "http://")]);
        cases.push(vec![("profile", "canary"), ("url", "http://[::1")]);
        for meta in &cases {
            let (code, v) = hook(&base, Some(HOOK_TOKEN), &payload("Progressing", "h", meta)).await;
            assert!(
                [400, 404, 422].contains(&code) && v["error"].is_string(),
                "{meta:?}: {code} {v}"
            );
        }
        let runs = get_json(&format!("{base}/api/runs")).await;
        assert_eq!(runs["runs"].as_array().unwrap().len(), 0, "{runs}");
        let (code, _) = send("GET", &format!("{base}/healthz"), &[], "").await;
        assert_eq!(code, 200);
        d.shutdown().await;
        stop.cancel();
    });
}

/// A run's last iterations may walk every step and think time of a journey after the planned
/// duration, and the up-front check counts them (issue 30, item 6: a 3-step journey with think
/// times was accepted under a 4 s webhook timeout and answered after 6.8 s, when Flagger had
/// given up). Against the real binary: refused at once under 4 s, run and answered under 20 s.
#[test]
fn flagger_hook_counts_a_journeys_steps_and_think_times_against_its_timeout() {
    let target = super::support::BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 30s
storage:
  path: "{data}"
targets:
  api:
    url: http://{addr}/api
    timeout: 1s
journeys:
  walk:
    target: api
    steps:
      - {{ name: one, path: /api, think: 1s }}
      - {{ name: two, path: /api, think: 1s }}
      - {{ name: three, path: /api, think: 1s }}
profiles:
  walk:
    journey: walk
    executor: constant-arrival-rate
    rate: 2/s
    duration: 1s
"#,
        data = dir.path().join("data").display(),
        addr = target.addr
    );
    let path = super::support::write_config(dir.path(), &config);
    let d = super::support::Daemon::start(&path, &[]);
    runtime().block_on(async {
        // 1 s planned, then up to 3 × (1 s timeout + 1 s think) for the last iteration: 7 s.
        let call = |timeout: &'static str| {
            payload(
                "pre-rollout",
                timeout,
                &[("profile", "walk"), ("timeout", timeout)],
            )
        };
        let (code, v) = hook(&d.base, Some(ADMIN_TOKEN), &call("4s")).await;
        assert_eq!(code, 422, "{v}");
        let why = v["error"].as_str().unwrap_or_default();
        assert!(
            why.contains("may take up to 7s") && why.contains("think times"),
            "{v}"
        );
        assert_eq!(v["run"], Value::Null, "no run was started: {v}");
        let (code, v) = hook(&d.base, Some(ADMIN_TOKEN), &call("20s")).await;
        assert_eq!(code, 200, "{v}");
        assert_eq!(v["run"], 1, "the refused call started no run: {v}");
    });
}

/// `compare: last_passed` (issue 48): the run is compared with the profile's last passing run
/// as `sloburn compare` compares two records. With none yet, the answer says so and stands on
/// the thresholds; an equal canary (20 ms like the last passing run) gets 200; a canary 10 %
/// slower (22 ms) 412, naming `http_req_duration` and its change.
#[test]
fn flagger_compare_mode_answers_412_naming_the_regressed_metric() {
    runtime().block_on(async {
        let fixed = |ms| TargetOptions {
            latency: Duration::from_millis(ms),
            ..TargetOptions::default()
        };
        let (primary, stop) = spawn_target(fixed(20)).await;
        let (slower, stop_slower) = spawn_target(fixed(22)).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(primary, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        let t = Some(HOOK_TOKEN);
        let call = |url: String, checksum: &'static str| {
            let base = base.clone();
            async move {
                let meta = [
                    ("profile", "canary"),
                    ("url", url.as_str()),
                    ("rate", "50/s"),
                    ("duration", "2s"),
                    ("timeout", "30s"),
                    ("compare", "last_passed"),
                ];
                hook(&base, t, &payload("Progressing", checksum, &meta)).await
            }
        };
        let (code, v) = call(format!("http://{primary}/api"), "c1").await;
        assert_eq!(code, 200, "{v}");
        assert!(
            v["comparison"]["note"]
                .as_str()
                .unwrap()
                .contains("no passing run"),
            "{v}"
        );
        let first = v["run"].clone();
        let (code, v) = call(format!("http://{primary}/api"), "c2").await;
        assert_eq!(code, 200, "an equal canary: {v}");
        assert_eq!(v["comparison"]["against"], first, "{v}");
        assert_eq!(v["comparison"]["regressed"], serde_json::json!([]), "{v}");
        let (code, v) = call(format!("http://{slower}/api"), "c3").await;
        assert_eq!(code, 412, "a 10 % slower canary: {v}");
        let regressed = &v["comparison"]["regressed"][0];
        assert_eq!(regressed["metric"], "http_req_duration", "{v}");
        assert!(
            regressed["change"].as_str().unwrap().starts_with("p50 +"),
            "{v}"
        );
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("regressed against run"),
            "{v}"
        );
        let meta = [("profile", "canary"), ("compare", "yesterday")];
        let (code, v) = hook(&base, t, &payload("Progressing", "c4", &meta)).await;
        assert_eq!(code, 400, "{v}");
        d.shutdown().await;
        stop.cancel();
        stop_slower.cancel();
    });
}
