//! The daemon as users run it: in-process for the API and the demo, as a real child process for
//! reloads, signals and crashes, and scraped by a real Prometheus.

use crate::support::{
    ADMIN_TOKEN, AVAILABILITY_SLO, BackgroundTarget, Daemon, STEADY_50, Server, daemon_config,
    eventually, get_blocking, get_blocking_with, metric_sum, promtool_check_metrics, request, root,
    runtime, serve_in_process, sloburn, spawn_target, write_config,
};
use sloburn::daemon::WATCH_INTERVAL;
use sloburn::target::TargetOptions;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

fn base_config(target: std::net::SocketAddr, data: &Path, extra_profiles: &str) -> String {
    daemon_config(
        target,
        data,
        &format!("{STEADY_50}{extra_profiles}"),
        AVAILABILITY_SLO,
    )
}

#[test]
fn hot_reload_adds_profiles_rejects_bad_configs_and_follows_sighup() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &["--no-watch"]);

    // A valid change with SIGHUP: the new profile shows up in the API and in /metrics.
    let added = "  burst:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: shared-iterations\n    vus: 2\n    iterations: 20\n";
    let reloads = || {
        metric_sum(
            &d.metrics(),
            "sloburn_config_reloads_total{result=\"success\"",
        )
    };
    let loads_at_start = reloads();
    write_config(dir.path(), &base_config(target.addr, &data, added));
    // Two watch intervals and more: a watching daemon has reloaded by then.
    let reloaded = eventually(2 * WATCH_INTERVAL + Duration::from_secs(1), || {
        let profiles = get_blocking(&format!("{}/api/profiles", d.base)).1;
        (profiles.contains("\"burst\"") || reloads() > loads_at_start).then_some(profiles)
    });
    assert_eq!(reloaded, None, "--no-watch reloaded without SIGHUP");
    d.signal(libc::SIGHUP);
    let shown = eventually(Duration::from_secs(10), || {
        let m = d.metrics();
        (m.contains("profile=\"burst\"") && m.contains("sloburn_iterations_total")).then_some(m)
    });
    assert!(shown.is_some(), "burst never appeared in /metrics");
    let profiles = get_blocking(&format!("{}/api/profiles", d.base)).1;
    assert!(profiles.contains("\"burst\""), "{profiles}");

    // An invalid change: rejected, counted, the old config keeps running.
    let reqs_before = metric_sum(
        &d.metrics(),
        "sloburn_http_reqs_total{target=\"api\",profile=\"steady\"",
    );
    write_config(dir.path(), "targets:\n  api:\n    url: nope\n");
    d.signal(libc::SIGHUP);
    let failed = eventually(Duration::from_secs(10), || {
        let m = d.metrics();
        (metric_sum(&m, "sloburn_config_reloads_total{result=\"failure\"") >= 1.0).then_some(m)
    });
    assert!(failed.is_some(), "reload failure not counted");
    std::thread::sleep(Duration::from_millis(1500));
    let m = d.metrics();
    assert!(m.contains("profile=\"burst\""), "old config was dropped");
    let reqs_after = metric_sum(
        &m,
        "sloburn_http_reqs_total{target=\"api\",profile=\"steady\"",
    );
    assert!(
        reqs_after > reqs_before,
        "load stopped: {reqs_before} -> {reqs_after}"
    );
}

#[test]
fn config_file_changes_are_picked_up_without_a_signal() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &[]);
    let added = "  second:\n    target: api\n    every: 1h\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n";
    write_config(dir.path(), &base_config(target.addr, &data, added));
    let seen = eventually(Duration::from_secs(10), || {
        let p = get_blocking(&format!("{}/api/profiles", d.base)).1;
        p.contains("\"second\"").then_some(())
    });
    assert!(seen.is_some());
}

#[test]
fn sigterm_drains_in_flight_requests_and_exits_zero() {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(1500),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let mut d = Daemon::start(&path, &[]);
    // Wait until requests are in flight at the target.
    let busy = eventually(Duration::from_secs(10), || {
        (target.stats().in_flight >= 5).then_some(())
    });
    assert!(busy.is_some());
    let started = Instant::now();
    d.signal(libc::SIGTERM);
    let code = d.wait(Duration::from_secs(10));
    assert_eq!(code, Some(0), "logs: {:?}", d.logs.lock().unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "grace period is 5s"
    );
    // Every request the daemon started was answered before it exited.
    let s = target.stats();
    assert_eq!(s.in_flight, 0, "{s:?}");
    assert!(s.requests >= 5, "{s:?}");
}

#[test]
fn a_bad_config_exits_78_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "targets:\n  a:\n    url: nope\n");
    let out = sloburn()
        .args(["serve", "--listen", "127.0.0.1:1", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("sloburn.yaml:3:10: targets.a.url: `nope` has no scheme"),
        "{stdout}"
    );
}

#[test]
fn admin_api_needs_the_right_token_and_run_now_shows_in_runs() {
    let rt = runtime();
    rt.block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\nstorage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://{}/\nprofiles:\n  once:\n    target: api\n    executor: shared-iterations\n    vus: 2\n    iterations: 10\n",
            dir.path().join("data").display(),
            target
        );
        let d = serve_in_process(&text, dir.path()).await;
        let url = format!("http://{}/api/profiles/once/run", d.addr);
        assert_eq!(request("POST", &url, None).await.0, 401);
        assert_eq!(request("POST", &url, Some("wrong")).await.0, 401);
        let (code, body) = request("POST", &url, Some(ADMIN_TOKEN)).await;
        assert_eq!(code, 202, "{body}");
        let mut finished = None;
        for _ in 0..100 {
            let (_, runs) = request("GET", &format!("http://{}/api/runs", d.addr), None).await;
            let v: serde_json::Value = serde_json::from_str(&runs).unwrap();
            if v["runs"][0]["result"] == "passed" {
                finished = Some(v);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let v = finished.expect("the run never finished");
        assert_eq!(v["runs"][0]["profile"], "once");
        assert_eq!(v["runs"][0]["trigger"], "api");
        assert_eq!(v["runs"][0]["requests"], 10);
        // Unknown profile and the read endpoints.
        let (code, _) = request("POST", &format!("http://{}/api/profiles/nope/run", d.addr), Some(ADMIN_TOKEN)).await;
        assert_eq!(code, 404);
        let (code, spec) = request("GET", &format!("http://{}/api/openapi.json", d.addr), None).await;
        assert_eq!(code, 200);
        assert!(spec.contains("\"openapi\""));
        assert_eq!(request("GET", &format!("http://{}/healthz", d.addr), None).await.0, 200);
        assert_eq!(request("GET", &format!("http://{}/readyz", d.addr), None).await.0, 200);
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn demo_serves_nonzero_request_counters_within_ten_seconds() {
    let rt = runtime();
    let demo_data = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let started = Instant::now();
        let (d, stop) = sloburn::demo::start(
            Some("127.0.0.1:0".parse().unwrap()),
            Some(demo_data.path().to_path_buf()),
        )
        .await
        .unwrap();
        let url = format!("http://{}/metrics", d.addr);
        // Every profile that runs on start counts requests; the unscheduled spike sends none.
        let count = |m: &str, profile: &str| -> f64 {
            let label = format!("profile=\"{profile}\"");
            m.lines()
                .filter(|l| l.starts_with("sloburn_http_reqs_total{") && l.contains(&label))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum()
        };
        let started_profiles = ["shoppers", "checkout-canary", "search-steady"];
        let mut m = String::new();
        while started.elapsed() < Duration::from_secs(10) {
            m = request("GET", &url, None).await.1;
            if started_profiles.iter().all(|p| count(&m, p) > 0.0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for p in started_profiles {
            assert!(count(&m, p) > 0.0, "no requests of `{p}` within 10 s:\n{m}");
        }
        assert_eq!(
            count(&m, "checkout-spike"),
            0.0,
            "the spike has no schedule"
        );
        d.shutdown().await;
        stop.cancel();
    });
}

/// A free loopback port (bound then released; the race is acceptable for test tools).
#[test]
fn a_real_prometheus_scrapes_increasing_counters_and_histograms() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &[]);
    let prom = Server::prometheus(d.base.trim_start_matches("http://"), None, "1s", None);
    let q = "sum(sloburn_http_reqs_total{target=\"api\",profile=\"steady\"})";
    let first = eventually(Duration::from_secs(30), || {
        prom.query(q).first().map(|(_, v)| *v).filter(|v| *v > 0.0)
    })
    .expect("prometheus never saw sloburn_http_reqs_total");
    let second = eventually(Duration::from_secs(15), || {
        prom.query(q)
            .first()
            .map(|(_, v)| *v)
            .filter(|v| *v > first)
    });
    assert!(
        second.is_some(),
        "the counter did not increase past {first}"
    );
    let buckets =
        prom.query("sloburn_http_req_duration_seconds_bucket{target=\"api\",profile=\"steady\"}");
    assert!(buckets.len() >= 2, "{buckets:?}");
    for (labels, _) in &buckets {
        assert_eq!(labels["target"], "api");
        assert_eq!(labels["profile"], "steady");
        assert!(labels["le"].is_string());
    }
    assert!(buckets.iter().any(|(l, _)| l["le"] == "+Inf"));
}

#[test]
fn promtool_check_metrics_finds_nothing_on_a_live_exposition() {
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: 0.1,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &[]);
    let exposition = eventually(Duration::from_secs(10), || {
        let m = d.metrics();
        (metric_sum(&m, "sloburn_http_reqs_total") > 0.0
            && metric_sum(&m, "sloburn_slo_events_total") > 0.0)
            .then_some(m)
    })
    .expect("no traffic counted");
    // OpenMetrics when the scraper asks for it, ending with `# EOF`.
    let url = format!("{}/metrics", d.base);
    let mut accept = http::HeaderMap::new();
    accept.insert(
        "accept",
        "application/openmetrics-text;version=1.0.0"
            .parse()
            .unwrap(),
    );
    let (_, headers, om) = get_blocking_with(&url, accept);
    assert!(
        headers
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{headers:?}"
    );
    assert!(
        om.ends_with("# EOF\n"),
        "{}",
        &om[om.len().saturating_sub(200)..]
    );
    // promtool reads the classic format (its OpenMetrics support is partial in 2.x).
    let (ok, text) = promtool_check_metrics(&exposition);
    assert!(ok && text.trim().is_empty(), "promtool: {text}");
}

#[test]
fn the_global_in_flight_cap_holds_across_profiles() {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(200),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "server:\n  max_in_flight: 3\nstorage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://{}/\nprofiles:\n  a:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-vus\n    vus: 5\n    duration: 1h\n  b:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 50/s\n    duration: 1h\n",
        dir.path().join("data").display(),
        target.addr
    );
    let path = write_config(dir.path(), &config);
    let d = Daemon::start(&path, &["--no-watch"]);
    let mut max = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        max = max.max(target.stats().in_flight);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(max <= 3, "{max} requests in flight with max_in_flight 3");
    assert!(max >= 2, "no load? max in flight {max}");
    // The open-model profile found the cap full and counted drops.
    let m = d.metrics();
    assert!(
        metric_sum(
            &m,
            "sloburn_dropped_iterations_total{target=\"api\",profile=\"b\""
        ) > 0.0
    );
}

/// Reads that stay open whatever `protect_reads` says: probes, Prometheus, the API's own spec,
/// and the dashboard's page and assets (they hold no data: the page reads the API with the
/// token).
const OPEN_READS: &[&str] = &[
    "/metrics",
    "/healthz",
    "/readyz",
    "/api/openapi.json",
    "/",
    "/assets/{file}",
];

/// Every `GET` route the server declares (`.route("PATH", get(..))` in any file under src/), so a
/// new read route cannot escape [`protected_reads_need_the_token_and_writes_without_a_token_are_disabled`].
fn declared_get_routes() -> BTreeSet<String> {
    fn walk(dir: &Path, out: &mut BTreeSet<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines() {
                    let Some(rest) = line.trim().strip_prefix(".route(\"") else {
                        continue;
                    };
                    if let Some((route, handler)) = rest.split_once('"')
                        && handler.trim_start_matches(',').trim().starts_with("get(")
                    {
                        out.insert(route.to_string());
                    }
                }
            }
        }
    }
    let mut routes = BTreeSet::new();
    walk(&root().join("src"), &mut routes);
    routes
}

#[test]
fn protected_reads_need_the_token_and_writes_without_a_token_are_disabled() {
    let rt = runtime();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data").display().to_string();
        let protected = serve_in_process(
            &format!(
                "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  protect_reads: true\nstorage:\n  path: \"{data}\"\ntargets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles:\n  p:\n    target: api\n    executor: constant-vus\n    duration: 1s\n"
            ),
            dir.path(),
        )
        .await;
        let base = format!("http://{}", protected.addr);

        // The protected reads: the API's GET paths from its own spec.
        let (code, spec) = request("GET", &format!("{base}/api/openapi.json"), None).await;
        assert_eq!(code, 200, "{spec}");
        let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
        let reads: BTreeSet<String> = spec["paths"]
            .as_object()
            .expect("paths in the OpenAPI spec")
            .iter()
            .filter(|(_, ops)| ops.get("get").is_some())
            .map(|(path, _)| path.clone())
            .collect();
        assert!(reads.len() >= 3, "GET paths in the spec: {reads:?}");

        // Every GET route the server declares is either protected or deliberately open.
        let open: BTreeSet<String> = OPEN_READS.iter().map(|p| p.to_string()).collect();
        let declared = declared_get_routes();
        let classified: BTreeSet<String> = reads.union(&open).cloned().collect();
        assert_eq!(
            declared, classified,
            "a GET route is neither in the OpenAPI spec, PAGES nor OPEN_READS"
        );

        // Path parameters name the one profile of the config, a run (or a run on every shard)
        // that is not kept and an SLO that does not exist (the token gets past the guard to a
        // 404), and one of the dashboard's assets.
        let concrete = |path: &str| {
            path.replace("{name}", "p")
                .replace("{id}", "999")
                .replace("{run}", "0-none")
                .replace("{file}", "app.js")
        };
        let authorized = |path: &str| {
            // `/api/location/{slo}`: this daemon has no `server.location`.
            if path.contains("{id}")
                || path.contains("{run}")
                || path == "/api/slos/{name}"
                || path == "/api/location/{slo}"
            {
                404
            } else {
                200
            }
        };
        for path in &reads {
            let url = format!("{base}{}", concrete(path));
            let (code, body) = request("GET", &url, None).await;
            assert_eq!(code, 401, "{path} without a token: {body}");
            let (code, body) = request("GET", &url, Some("wrong")).await;
            assert_eq!(code, 401, "{path} with a wrong token: {body}");
            let (code, body) = request("GET", &url, Some(ADMIN_TOKEN)).await;
            assert_eq!(code, authorized(path), "{path} with the token: {body}");
        }
        // Health, readiness, metrics, the spec and the dashboard's shell stay open.
        for path in OPEN_READS {
            let (code, body) = request("GET", &format!("{base}{}", concrete(path)), None).await;
            assert!(
                code == 200 || (code == 503 && *path == "/readyz"),
                "{path} without a token: {code} {body}"
            );
        }
        protected.shutdown().await;

        let open = serve_in_process(
            &format!(
                "storage:\n  path: \"{data}-2\"\ntargets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles:\n  p:\n    target: api\n    executor: constant-vus\n    duration: 1s\n"
            ),
            dir.path(),
        )
        .await;
        for path in &reads {
            let url = format!("http://{}{}", open.addr, concrete(path));
            let (code, body) = request("GET", &url, None).await;
            assert_eq!(code, authorized(path), "{path} without protect_reads: {body}");
        }
        let (code, body) = request("POST", &format!("http://{}/api/profiles/p/run", open.addr), Some("anything")).await;
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("admin_token"), "{body}");
        open.shutdown().await;
    });
}

/// Issue 12, item 4: `run_on_start` means "when the daemon starts". Reloading an unchanged
/// config (SIGHUP, the API, or a rewritten file) starts no extra run; a profile that is new in
/// a reloaded config runs once.
#[test]
fn reloads_of_an_unchanged_config_start_no_extra_runs() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let once = "  once:\n    target: api\n    run_on_start: true\n    executor: shared-iterations\n    vus: 1\n    iterations: 5\n";
    let text = daemon_config(target.addr, &data, once, "");
    let path = write_config(dir.path(), &text);
    let d = Daemon::start(&path, &[]);
    let runs = |profile: &str| {
        metric_sum(
            &d.metrics(),
            &format!("sloburn_runs_total{{profile=\"{profile}\""),
        )
    };
    assert!(
        eventually(Duration::from_secs(10), || (runs("once") >= 1.0)
            .then_some(()))
        .is_some(),
        "the run_on_start run never finished"
    );
    let reloads = || {
        metric_sum(
            &d.metrics(),
            "sloburn_config_reloads_total{result=\"success\"",
        )
    };
    let before = reloads();
    for i in 0..3 {
        d.signal(libc::SIGHUP);
        let (code, body) = runtime().block_on(request(
            "POST",
            &format!("{}/api/reload", d.base),
            Some(ADMIN_TOKEN),
        ));
        assert_eq!(code, 200, "{body}");
        // Rewrite the same content too: the file watch sees a write, not a change.
        write_config(dir.path(), &text);
        assert!(
            eventually(Duration::from_secs(5), || (reloads()
                >= before + 2.0 * (i + 1) as f64)
                .then_some(()))
            .is_some(),
            "reload {i} was not applied"
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(runs("once"), 1.0, "an unchanged reload started a run");
    let (_, body) = get_blocking(&format!("{}/api/runs", d.base));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{body}");

    // A profile added by a reload is new: it runs once, and `once` still does not.
    let added = once.replace("once:", "added:");
    write_config(
        dir.path(),
        &daemon_config(target.addr, &data, &format!("{once}{added}"), ""),
    );
    d.signal(libc::SIGHUP);
    assert!(
        eventually(Duration::from_secs(10), || (runs("added") >= 1.0)
            .then_some(()))
        .is_some(),
        "the new run_on_start profile never ran"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(runs("once"), 1.0);
    assert_eq!(runs("added"), 1.0);
}

/// Issue 12, items 5 and 7: two demos at once keep stores of their own (removed when they
/// stop), the printed curl starts the on-demand profile (202, not 409), and a taken port is a
/// sentence, not a Rust debug dump.
#[test]
fn two_demos_keep_separate_stores_and_the_printed_curl_starts_a_run() {
    use crate::support::Proc;
    let start = || {
        let p = Proc::start(["demo", "--listen", "127.0.0.1:0"]);
        let out = eventually(Duration::from_secs(20), || {
            let s = p.stdout();
            s.contains("SLO state is kept in").then_some(s)
        })
        .unwrap_or_else(|| panic!("the demo never printed its URLs: {}", p.stderr()));
        (p, out)
    };
    let (mut a, out_a) = start();
    let (mut b, out_b) = start();
    let store = |out: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix("SLO state is kept in "))
            .unwrap()
            .trim()
            .to_string()
    };
    let (store_a, store_b) = (store(&out_a), store(&out_b));
    assert_ne!(store_a, store_b, "two demos share a store");
    // The printed curl, taken apart and sent as printed.
    let curl = out_a
        .lines()
        .find(|l| l.trim_start().starts_with("curl -X POST"))
        .expect("no curl line");
    let token = curl
        .split("Bearer ")
        .nth(1)
        .and_then(|r| r.split('\'').next())
        .unwrap();
    let url = curl.split_whitespace().last().unwrap();
    let (code, body) = runtime().block_on(request("POST", url, Some(token)));
    assert_eq!(code, 202, "{curl}: {body}");
    // A taken port is said plainly.
    let taken = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let mut c = Proc::start(["demo", "--listen", taken.as_str()]);
    let status = c
        .wait(Duration::from_secs(20))
        .expect("demo on a taken port kept running");
    assert_eq!(status.code(), Some(1));
    let err = c.stderr();
    assert!(
        err.contains("cannot listen on") && !err.contains("Bind("),
        "{err}"
    );
    for p in [&mut a, &mut b] {
        p.signal(libc::SIGTERM);
        assert_eq!(
            p.wait(Duration::from_secs(15)).and_then(|s| s.code()),
            Some(0)
        );
    }
    assert!(!Path::new(&store_a).exists() && !Path::new(&store_b).exists());
}

/// Issue 12, item 7: a failed run names the threshold that failed and what it saw.
#[test]
fn a_failed_run_names_its_failed_threshold() {
    let rt = runtime();
    rt.block_on(async {
        let (addr, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "storage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://{addr}/\nprofiles:\n  strict:\n    target: api\n    run_on_start: true\n    executor: shared-iterations\n    vus: 1\n    iterations: 5\n    thresholds:\n      http_req_duration: [\"p(95)<0.001\"]\n      http_reqs: [\"count>1\"]\n",
            dir.path().join("data").display()
        );
        let d = serve_in_process(&text, dir.path()).await;
        let mut run = serde_json::Value::Null;
        for _ in 0..100 {
            let (_, body) = request("GET", &format!("http://{}/api/runs", d.addr), None).await;
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            if v["runs"][0]["result"] == "failed" {
                run = v["runs"][0].clone();
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let reason = run["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("http_req_duration `p(95)<0.001` failed (observed ")
                && !reason.contains("count>1"),
            "{run}"
        );
        d.shutdown().await;
        stop.cancel();
    });
}

/// The `GLIBC_TUNABLES` a running process was executed with (`/proc/<pid>/environ`). glibc cuts
/// the variable in place at each `:` while it parses it (a NUL for each), so the tunables after
/// the first read as entries of their own there: they are joined back.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tunables_of(d: &Daemon) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{}/environ", d.child.id())).unwrap();
    let mut entries = raw
        .split(|b| *b == 0)
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let first = entries.find_map(|v| v.strip_prefix("GLIBC_TUNABLES=").map(str::to_owned))?;
    let rest = entries.take_while(|v| v.starts_with("glibc."));
    Some(
        std::iter::once(first)
            .chain(rest)
            .collect::<Vec<_>>()
            .join(":"),
    )
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn serve_reexecutes_itself_with_a_small_malloc_thread_cache_and_keeps_the_users_tunables() {
    use sloburn::memory::SERVE_TCACHE_COUNT;
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        &base_config(target.addr, &dir.path().join("data"), ""),
    );
    let ours = format!("glibc.malloc.tcache_count={SERVE_TCACHE_COUNT}");
    // (GLIBC_TUNABLES given, the re-exec marker given, GLIBC_TUNABLES the daemon runs with)
    let cases: [(Option<&str>, bool, Option<String>); 4] = [
        (None, false, Some(ours.clone())),
        (
            Some("glibc.malloc.perturb=0"),
            false,
            Some(format!("glibc.malloc.perturb=0:{ours}")),
        ),
        // The user's own size stands.
        (
            Some("glibc.malloc.tcache_count=5"),
            false,
            Some("glibc.malloc.tcache_count=5".into()),
        ),
        // A process that was re-executed once is never re-executed again.
        (None, true, None),
    ];
    for (given, marker, want) in cases {
        let mut cmd = Daemon::command(&path, &["--no-watch"]);
        match given {
            Some(v) => cmd.env("GLIBC_TUNABLES", v),
            None => cmd.env_remove("GLIBC_TUNABLES"),
        };
        match marker {
            true => cmd.env("SLOBURN_REEXECUTED", "1"),
            false => cmd.env_remove("SLOBURN_REEXECUTED"),
        };
        let d = Daemon::spawn(cmd);
        // The process the test started is the one serving (an exec keeps the process id), and
        // it was executed with the cache setting.
        assert_eq!(tunables_of(&d), want, "{given:?}, marker {marker}");
        // Named after its binary still, not after `/proc/self/exe`.
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", d.child.id())).unwrap();
        assert_eq!(comm.trim(), "sloburn", "{given:?}");
        assert!(d.metrics().contains("sloburn_build_info"), "{given:?}");
    }
}

/// A binary with a file capability runs in glibc's secure mode (`AT_SECURE`), where malloc
/// tunables are ignored and may be erased from the variable: `serve` must start once there, not
/// re-execute itself (let alone in a loop). The same copy without the capability is
/// re-executed. Both run as `nobody` (`setpriv`): root gains no capability from a file. Needs
/// root, to set the capability and to change user, and fails without it (the suite runs as
/// root, as CI does: README, "Two commands") rather than pass having checked nothing.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_binary_with_a_file_capability_is_not_reexecuted() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::process::{Command, Stdio};
    // SAFETY: geteuid only reads the calling process's credentials.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "setting a file capability and changing user need root: run the suite as root"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = dir.path().join("c.yaml");
    std::fs::write(
        &config,
        "targets:\n  app: { url: \"http://127.0.0.1:9/\" }\nprofiles:\n  p: { target: app, every: 1h, executor: constant-vus, vus: 1, duration: 1s }\n",
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let copy = |name: &str| {
        let path = dir.path().join(name);
        std::fs::copy(env!("CARGO_BIN_EXE_sloburn"), &path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    let capable = copy("sloburn");
    let plain_dir = dir.path().join("plain");
    std::fs::create_dir(&plain_dir).unwrap();
    std::fs::set_permissions(&plain_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let plain = copy("plain/sloburn");
    let setcap = ["/usr/sbin/setcap", "/sbin/setcap"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("setcap (Debian libcap2-bin; scripts/install-test-tools.sh installs it)");
    let set = Command::new(setcap)
        .arg("cap_net_bind_service=+ep")
        .arg(&capable)
        .status()
        .unwrap();
    assert!(set.success(), "setcap failed");
    let start = |binary: &Path| {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(binary)
            .args(["serve", "--log-format", "json", "--listen", "127.0.0.1:0"])
            .arg("--config")
            .arg(&config)
            .arg("--no-watch")
            .env_remove("GLIBC_TUNABLES")
            .env_remove("SLOBURN_REEXECUTED")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Daemon::spawn(cmd)
    };
    let status = |d: &Daemon, key: &str| -> String {
        let s = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_default()
            .trim()
            .to_string()
    };

    let d = start(&capable);
    // The capability is in effect (secure mode), and the process was not re-executed.
    assert_ne!(status(&d, "CapEff:"), "0000000000000000");
    assert_eq!(tunables_of(&d), None);
    assert!(d.metrics().contains("sloburn_build_info"));
    drop(d);

    let d = start(&plain);
    assert_eq!(status(&d, "CapEff:"), "0000000000000000");
    assert_eq!(
        tunables_of(&d),
        Some(format!(
            "glibc.malloc.tcache_count={}",
            sloburn::memory::SERVE_TCACHE_COUNT
        ))
    );
    assert!(d.metrics().contains("sloburn_build_info"));
}
