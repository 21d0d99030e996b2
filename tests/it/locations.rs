//! Issue 49: locations with a quorum. Config errors, the quorum SLO of three daemons (a, b, c)
//! against one target that fails only some locations' requests, a killed location, the rules
//! under promtool, and locations found by DNS.

use crate::support::root;

/// `check`'s report of `yaml`: its exit code and text.
fn check(yaml: &str) -> (i32, String) {
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let result = sloburn::config::from_str(yaml, "loc.yaml", &root(), &env);
    let mut out = Vec::new();
    let code = sloburn::config::report("loc.yaml", result, &mut out);
    (code, String::from_utf8(out).unwrap())
}

const BASE: &str = "targets:\n  t: { url: http://127.0.0.1:1/ }\n";

fn slo_with(quorum: &str) -> String {
    format!("slos:\n  avail:\n    target: t\n    sli: availability\n    objective: 99\n{quorum}")
}

#[test]
fn each_bad_quorum_or_location_is_a_positioned_check_error() {
    // K larger than N.
    let (code, text) = check(&format!(
        "server:\n  location: a\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: b, url: http://127.0.0.1:2 }}\n{BASE}{}",
        slo_with("    quorum: 3\n")
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains(
            "loc.yaml:13:13: slos.avail.quorum: quorum 3 of 2 location(s) (a, b): at most 2"
        ),
        "{text}"
    );
    // A location listed twice.
    let (code, text) = check(&format!(
        "server:\n  location: a\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: a, url: http://127.0.0.1:2 }}\n{BASE}"
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:5:15: server.locations[1].name: location `a` is listed twice"),
        "{text}"
    );
    // This daemon's own name missing.
    let (code, text) = check(&format!(
        "server:\n  location: c\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: b, url: http://127.0.0.1:2 }}\n{BASE}"
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:4:5: server.locations: this daemon's location `c` is not listed (locations: a, b)"),
        "{text}"
    );
    // `quorum` without `server.location`.
    let (code, text) = check(&format!("{BASE}{}", slo_with("    quorum: 1\n")));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:8:13: slos.avail.quorum: `quorum` needs `server.location`"),
        "{text}"
    );
    // A bucket that does not divide the hour, and one without a quorum.
    let (code, text) = check(&format!("{BASE}{}", slo_with("    quorum_bucket: 7m\n")));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:8:20: slos.avail.quorum_bucket: a quorum bucket is whole minutes"),
        "{text}"
    );
    // `locations` without `location`, and a bad entry URL.
    let (code, text) = check(&format!(
        "server:\n  locations:\n    - {{ name: a, url: ftp://x }}\n{BASE}"
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:3:23: server.locations[0].url: `ftp://x` is not an API address"),
        "{text}"
    );
    assert!(
        text.contains("server.locations: `server.locations` needs `server.location`"),
        "{text}"
    );
}

#[test]
fn a_good_quorum_config_reads_with_its_derived_bucket() {
    let yaml = format!(
        "server:\n  location: b\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: b, url: dns+http://sloburn.b.svc:9090 }}\n  resolver: 127.0.0.1:5353\n{BASE}profiles:\n  p: {{ target: t, executor: constant-arrival-rate, rate: 5/s, duration: 1m }}\n{}",
        slo_with("    quorum: 2\n")
    );
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let loaded = sloburn::config::from_str(&yaml, "loc.yaml", &root(), &env).unwrap();
    let cfg = &loaded.config;
    assert_eq!(cfg.server.locations.me.as_deref(), Some("b"));
    assert_eq!(
        cfg.server.locations.list[1].url,
        "dns+http://sloburn.b.svc:9090"
    );
    assert_eq!(
        cfg.server.locations.resolver,
        Some("127.0.0.1:5353".parse().unwrap())
    );
    let q = cfg.slos["avail"].quorum.unwrap();
    assert_eq!(q.k, 2);
    // 99 %: 100 events; 5/s brings 300 a minute.
    assert_eq!(q.bucket, std::time::Duration::from_secs(60));
}

use crate::flagger::{hook, payload};
use crate::support::{ADMIN_TOKEN, Daemon, eventually, free_port, request, runtime, sloburn};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NAMES: [&str; 3] = ["a", "b", "c"];
const ITERATIONS: u64 = 40;

/// A target that answers 500 to the requests of the locations in `failing` (by the
/// `X-Location` header each location's target sets), 200 to the others.
fn failing_target(failing: Arc<Mutex<BTreeSet<String>>>) -> crate::support::ThreadServer {
    let app = axum::Router::new().route(
        "/api",
        axum::routing::get(move |headers: axum::http::HeaderMap| {
            let failing = failing.clone();
            async move {
                let who = headers
                    .get("x-location")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                if failing.lock().unwrap().contains(&who) {
                    (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down\n")
                } else {
                    (axum::http::StatusCode::OK, "ok\n")
                }
            }
        }),
    );
    crate::support::serve_on_thread(app)
}

/// One location's config: every location listed (`locations` as `name: url`), its own
/// `X-Location` header, one burst profile, a quorum-2 and a quorum-3 SLO with 1m buckets.
fn location_config(
    me: &str,
    locations: &[(String, String)],
    target: std::net::SocketAddr,
    data: &std::path::Path,
    extra_server: &str,
) -> String {
    let list: Vec<String> = locations
        .iter()
        .map(|(n, u)| format!("    - {{ name: {n}, url: \"{u}\" }}"))
        .collect();
    let slo = |name: &str, k: u32| {
        format!(
            "  {name}:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1d\n    quorum: {k}\n    quorum_bucket: 1m\n"
        )
    };
    format!(
        "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  grace_period: 5s\n  location: {me}\n{extra_server}  locations:\n{}\nstorage:\n  path: \"{}\"\n  flush_interval: 1s\ntargets:\n  api:\n    url: http://{target}/api\n    headers: {{ X-Location: {me} }}\n    checks:\n      - status: 200\nprofiles:\n  burst:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: shared-iterations\n    vus: 2\n    iterations: {ITERATIONS}\nslos:\n{}{}",
        list.join("\n"),
        data.display(),
        slo("q2", 2),
        slo("q3", 3),
    )
}

/// `sloburn serve` of `config` on `port`.
fn serve(port: u16, config: &std::path::Path) -> Daemon {
    let mut cmd = sloburn();
    cmd.args(["serve", "--log-format", "json", "--no-watch", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--config")
        .arg(config)
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Daemon::spawn(cmd)
}

fn get(url: &str) -> Value {
    let (code, body) = runtime().block_on(request("GET", url, Some(ADMIN_TOKEN)));
    assert_eq!(code, 200, "GET {url}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// (good, bad) of an SLO element's period.
fn period(slo: &Value) -> (u64, u64) {
    (
        slo["period"]["good"].as_u64().unwrap(),
        slo["period"]["bad"].as_u64().unwrap(),
    )
}

/// Waits until the location at `base` counts `n` events of `q2` of its own.
fn own_events_reach(base: &str, n: u64) {
    eventually(Duration::from_secs(30), || {
        let v = get(&format!("{base}/api/slos/q2?scope=local"));
        let (g, b) = period(&v);
        (g + b >= n).then_some(())
    })
    .unwrap_or_else(|| panic!("{base} did not count {n} events"));
}

/// Each location's own element in a quorum answer, by name.
fn own<'a>(q: &'a Value, name: &str) -> &'a Value {
    q["locations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["location"] == name)
        .unwrap_or_else(|| panic!("no location {name} in {q}"))
}

fn page_active(slo: &Value) -> bool {
    slo["tiers"][0]["active"] == true
}

fn slo_hook(base: &str, slo: &str, checksum: &str) -> (u16, Value) {
    let body = payload(
        "confirm-rollout",
        checksum,
        &[("slo", slo), ("max_burn_rate", "1"), ("window", "5m")],
    );
    runtime().block_on(hook(base, Some(ADMIN_TOKEN), &body))
}

struct Three {
    _dir: tempfile::TempDir,
    daemons: Vec<Daemon>,
    bases: Vec<String>,
}

fn start_three(target: std::net::SocketAddr) -> Three {
    let dir = tempfile::tempdir().unwrap();
    let ports: Vec<u16> = NAMES.iter().map(|_| free_port()).collect();
    let locations: Vec<(String, String)> = NAMES
        .iter()
        .zip(&ports)
        .map(|(n, p)| (n.to_string(), format!("http://127.0.0.1:{p}")))
        .collect();
    let mut daemons = Vec::new();
    for (i, name) in NAMES.iter().enumerate() {
        let d = dir.path().join(name);
        std::fs::create_dir_all(d.join("data")).unwrap();
        let text = location_config(name, &locations, target, &d.join("data"), "");
        let path = crate::support::write_config(&d, &text);
        daemons.push(serve(ports[i], &path));
    }
    let bases = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    Three {
        _dir: dir,
        daemons,
        bases,
    }
}

#[test]
fn issue_49_one_bad_location_burns_only_its_own_slo_two_burn_the_quorum_and_a_dead_one_is_named() {
    let failing = Arc::new(Mutex::new(BTreeSet::from(["b".to_string()])));
    let target = failing_target(failing.clone());
    let mut three = start_three(target.addr);
    for base in &three.bases {
        own_events_reach(base, ITERATIONS);
    }
    // Every series of a location carries its name, in the text and protobuf expositions.
    let text = three.daemons[1].metrics();
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert!(samples.len() > 50, "{text}");
    let unlabelled: Vec<&&str> = samples
        .iter()
        .filter(|l| !l.contains("{location=\"b\""))
        .collect();
    assert!(unlabelled.is_empty(), "{unlabelled:?}");
    let (_, families) = crate::native::protobuf_families(&three.bases[1]);
    let metrics: Vec<_> = families.iter().flat_map(|f| &f.metric).collect();
    assert!(metrics.len() > 50);
    for m in &metrics {
        let first = &m.label[0];
        assert_eq!((first.name(), first.value()), ("location", "b"), "{m:?}");
    }
    // Location b alone fails: the quorum-2 SLO burns nothing, b's own SLO burns.
    let q = get(&format!("{}/api/slos/q2", three.bases[0]));
    assert_eq!(q["complete"], true, "{q}");
    assert_eq!(q["quorum"]["answered"], 3, "{q}");
    let (good, bad) = period(&q);
    assert!(
        good >= 1 && bad == 0,
        "quorum minutes good {good} bad {bad}: {q}"
    );
    assert!(!page_active(&q), "{q}");
    let b = own(&q, "b");
    assert_eq!(period(b), (0, ITERATIONS), "{b}");
    assert!(page_active(b), "b's own page tier: {b}");
    for name in ["a", "c"] {
        assert_eq!(period(own(&q, name)), (ITERATIONS, 0), "{name}: {q}");
    }
    let buckets = q["quorum"]["buckets"].as_array().unwrap();
    assert!(buckets.iter().all(|k| k["state"] == "good"), "{q}");
    assert!(buckets.iter().any(|k| k["locations"]["b"] == "bad"), "{q}");
    let (code, answer) = slo_hook(&three.bases[1], "q2", "one-bad");
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["burn_rate"], 0.0, "{answer}");
    println!(
        "b alone bad: quorum minutes good {good} bad {bad}; b's own period {:?}, burn 5m {}",
        period(b),
        b["burn_rates"]["5m"]
    );

    // Now a and b fail: each location runs again; the bucket of those runs is bad.
    failing.lock().unwrap().insert("a".to_string());
    let started = (sloburn_now_minute(&three.bases[0]), ());
    for base in &three.bases {
        let (code, body) = runtime().block_on(request(
            "POST",
            &format!("{base}/api/profiles/burst/run"),
            Some(ADMIN_TOKEN),
        ));
        assert!((200..300).contains(&code), "{code} {body}");
    }
    for base in &three.bases {
        own_events_reach(base, 2 * ITERATIONS);
    }
    let q = get(&format!("{}/api/slos/q2", three.bases[2]));
    let (good2, bad2) = period(&q);
    assert!(bad2 >= 1, "the quorum burns: {q}");
    assert!(page_active(&q), "the quorum's page tier fires: {q}");
    let buckets = q["quorum"]["buckets"].as_array().unwrap();
    let first_bad = buckets
        .iter()
        .find(|k| k["state"] == "bad")
        .unwrap_or_else(|| panic!("no bad bucket: {q}"));
    // From the bucket where the second location went bad: a and b bad there, c good.
    assert_eq!(first_bad["locations"]["a"], "bad", "{first_bad}");
    assert_eq!(first_bad["locations"]["b"], "bad", "{first_bad}");
    assert_eq!(first_bad["locations"]["c"], "good", "{first_bad}");
    assert!(
        first_bad["start"].as_i64().unwrap() / 60 >= started.0,
        "{first_bad}"
    );
    let (code, answer) = slo_hook(&three.bases[0], "q2", "two-bad");
    assert_eq!(code, 412, "{answer}");
    println!(
        "a and b bad: quorum minutes good {good2} bad {bad2}, first bad bucket {first_bad}, hook {code} burn {}",
        answer["burn_rate"]
    );

    // Location c killed: answers name it; K=3 has no verdict (503), K=2 still judges.
    three.daemons[2].child.kill().unwrap();
    let _ = three.daemons[2].child.wait();
    let all = get(&format!("{}/api/slos", three.bases[0]));
    let q2 = all["slos"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "q2")
        .unwrap();
    assert_eq!(q2["complete"], false, "{q2}");
    assert_eq!(
        q2["quorum"]["missing_locations"],
        serde_json::json!(["c"]),
        "{q2}"
    );
    assert_eq!(own(q2, "c")["answered"], false, "{q2}");
    let (code, answer) = slo_hook(&three.bases[0], "q3", "c-dead");
    assert_eq!(code, 503, "{answer}");
    assert_eq!(
        answer["quorum"]["missing_locations"],
        serde_json::json!(["c"])
    );
    assert!(answer["passed"].is_null(), "{answer}");
    let (code, answer) = slo_hook(&three.bases[0], "q2", "c-dead");
    assert_eq!(code, 412, "K=2 of a and b still judges: {answer}");
    println!(
        "c killed: q3 hook 503, q2 complete false, missing {}",
        q2["quorum"]["missing_locations"]
    );
}

/// The daemon's minute now, from its own answer.
fn sloburn_now_minute(base: &str) -> i64 {
    get(&format!("{base}/api/location/q2"))["now_minute"]
        .as_i64()
        .unwrap()
}

/// The quorum SLO every rules fixture is written for: 99 % over 30 days, quorum 2, 5m buckets.
fn quorum_def() -> sloburn::slo::SloDef {
    let period = Duration::from_secs(30 * 86400);
    sloburn::slo::SloDef {
        name: "q".into(),
        service: "api".into(),
        objective: 0.99,
        period,
        calendar: None,
        tiers: sloburn::slo::default_tiers(period),
        labels: Default::default(),
        description: String::new(),
    }
}

#[test]
fn issue_49_the_quorum_rules_stay_quiet_with_one_bad_location_and_alert_with_two() {
    let opts = sloburn::rules::RulesOptions {
        quorum: [(
            "q".to_string(),
            sloburn::rules::QuorumRule {
                k: 2,
                bucket: Duration::from_secs(300),
            },
        )]
        .into(),
        ..Default::default()
    };
    let rules = sloburn::rules::generate(&[quorum_def()], &opts);
    assert!(rules.contains(sloburn::rules::QUORUM_BAD), "{rules}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    std::fs::copy(
        root().join("tests/it/rules/quorum.yml"),
        dir.path().join("quorum.yml"),
    )
    .unwrap();
    let promtool = crate::support::which("promtool");
    let check = std::process::Command::new(&promtool)
        .current_dir(dir.path())
        .args(["check", "rules", "rules.yml"])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let test = std::process::Command::new(&promtool)
        .current_dir(dir.path())
        .args(["test", "rules", "quorum.yml"])
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{}{}\n{rules}",
        String::from_utf8_lossy(&test.stdout),
        String::from_utf8_lossy(&test.stderr)
    );
}
