//! Issue 31, part 3: `placement: owned` profiles over `--shard i/N`. Three real `sloburn serve`
//! children share one config against a target this test starts; the target counts requests by
//! profile (a path each) and by shard (a header each child fills from its own environment).
//! Each owned profile is sent by exactly one shard, its rendezvous owner, whole; split profiles
//! still come from every shard. Non-owners refuse to run an owned profile (API and Flagger
//! hook: 421 naming the owner), export none of its series, and say so in `/api/profiles`,
//! `check --shard` and the start log; `run --shard` of a non-owner runs nothing.

use crate::flagger::{hook, payload};
use crate::support::{
    ADMIN_TOKEN, Daemon, eventually, get_blocking, metric_sum, request, runtime, serve_on_thread,
    sloburn, write_config,
};
use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Requests seen by the target, by (profile, shard header).
type Seen = Arc<Mutex<BTreeMap<(String, String), u64>>>;

const OWNED: [&str; 6] = [
    "owned-a", "owned-b", "owned-c", "owned-d", "owned-e", "owned-f",
];
const SPLIT: [&str; 2] = ["split-a", "split-b"];
const ITERATIONS: u64 = 30;
const SHARDS: u32 = 3;
const SHARD_ENV: &str = "SLOBURN_TEST_SHARD";

fn counting_target() -> (crate::support::ThreadServer, Seen) {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route(
            "/p/{name}",
            axum::routing::get(
                |State(seen): State<Seen>, UrlPath(name): UrlPath<String>, h: HeaderMap| async move {
                    let shard = h
                        .get("x-shard")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("none")
                        .to_string();
                    *seen.lock().unwrap().entry((name, shard)).or_default() += 1;
                    "ok"
                },
            ),
        )
        .with_state(seen.clone());
    (serve_on_thread(app), seen)
}

/// One target per profile (`/p/NAME`), each sending the shard's number in `X-Shard`; every
/// profile runs `ITERATIONS` shared iterations at start; an SLO watches `owned-a`.
fn config(target: std::net::SocketAddr, data: &Path, run_on_start: bool) -> String {
    let mut targets = String::new();
    let mut profiles = String::new();
    for (name, placement) in OWNED
        .iter()
        .map(|n| (n, "owned"))
        .chain(SPLIT.iter().map(|n| (n, "split")))
    {
        targets.push_str(&format!(
            "  t-{name}:\n    url: http://{target}/p/{name}\n    headers:\n      X-Shard: \"${{env:{SHARD_ENV}}}\"\n    checks:\n      - status: 200\n"
        ));
        // `split` written for one split profile, left to the default for the other.
        let placement = match (placement, *name) {
            ("split", "split-b") => String::new(),
            (p, _) => format!("    placement: {p}\n"),
        };
        profiles.push_str(&format!(
            "  {name}:\n    target: t-{name}\n{placement}    every: 1h\n    run_on_start: {run_on_start}\n    executor: shared-iterations\n    vus: 3\n    iterations: {ITERATIONS}\n"
        ));
    }
    format!(
        "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  grace_period: 5s\nstorage:\n  path: \"{data}\"\n  flush_interval: 1s\ntargets:\n{targets}profiles:\n{profiles}slos:\n  owned-a-availability:\n    target: t-owned-a\n    sli: availability\n    objective: 99\n    period: 1d\n",
        data = data.display()
    )
}

fn total(seen: &Seen, profile: &str) -> u64 {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|((p, _), _)| p == profile)
        .map(|(_, n)| n)
        .sum()
}

fn by_shard(seen: &Seen, profile: &str) -> BTreeMap<String, u64> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|((p, _), _)| p == profile)
        .map(|((_, s), n)| (s.clone(), *n))
        .collect()
}

fn profiles_of(d: &Daemon) -> BTreeMap<String, Value> {
    let (code, body) = get_blocking(&format!("{}/api/profiles", d.base));
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p.clone()))
        .collect()
}

#[test]
fn issue_31_owned_profiles_run_whole_on_exactly_one_shard_and_split_ones_on_every_shard() {
    let (server, seen) = counting_target();
    let dir = tempfile::tempdir().unwrap();
    let mut daemons = Vec::new();
    for i in 0..SHARDS {
        let d = dir.path().join(format!("shard{i}"));
        std::fs::create_dir_all(d.join("data")).unwrap();
        let path = write_config(&d, &config(server.addr, &d.join("data"), true));
        let mut cmd = Daemon::command(&path, &["--no-watch", "--shard", &format!("{i}/{SHARDS}")]);
        cmd.env(SHARD_ENV, i.to_string());
        daemons.push(Daemon::spawn(cmd));
    }
    let all: Vec<&str> = OWNED.iter().chain(SPLIT.iter()).copied().collect();
    // Every profile's iterations arrived (shared iterations: the shards' shares sum to the whole).
    let done = eventually(Duration::from_secs(60), || {
        all.iter()
            .all(|p| total(&seen, p) >= ITERATIONS)
            .then_some(())
    });
    assert!(
        done.is_some(),
        "not all iterations arrived: {:?}",
        seen.lock().unwrap()
    );
    // And every run has ended on every shard, so no late copy can still come.
    let idle = eventually(Duration::from_secs(30), || {
        daemons
            .iter()
            .all(|d| profiles_of(d).values().all(|p| p["running"] == false))
            .then_some(())
    });
    assert!(idle.is_some(), "runs still going");

    let mut owners = std::collections::BTreeSet::new();
    for p in OWNED {
        let shards = by_shard(&seen, p);
        assert_eq!(shards.len(), 1, "{p} came from several shards: {shards:?}");
        let (shard, n) = shards.iter().next().unwrap();
        assert_eq!(*n, ITERATIONS, "{p} ran {n} times, not once whole");
        let owner: u32 = shard.parse().unwrap();
        // The shard that sent it is the rendezvous owner, and every shard's API says so.
        assert_eq!(
            sloburn::load::placement::owner(p, 0..SHARDS),
            Some(owner),
            "{p}"
        );
        for (i, d) in daemons.iter().enumerate() {
            let view = &profiles_of(d)[p];
            assert_eq!(view["placement"], "owned", "{view}");
            assert_eq!(view["owner"], owner, "{view}");
            assert_eq!(view["here"], i as u32 == owner, "shard {i}: {view}");
            // Its series exist on its owner only.
            let series = format!("sloburn_runs_total{{profile=\"{p}\"");
            assert_eq!(
                d.metrics().contains(&series),
                i as u32 == owner,
                "shard {i}, {p}"
            );
        }
        owners.insert(owner);
    }
    assert!(
        owners.len() >= 2,
        "the owned profiles all fell on {owners:?}"
    );
    for p in SPLIT {
        let shards = by_shard(&seen, p);
        assert_eq!(shards.len(), SHARDS as usize, "{p}: {shards:?}");
        assert_eq!(total(&seen, p), ITERATIONS, "{p}: {shards:?}");
        for d in &daemons {
            let view = &profiles_of(d)[p];
            assert_eq!(
                (view["placement"].as_str(), view["here"].as_bool()),
                (Some("split"), Some(true))
            );
            assert!(view["owner"].is_null(), "{view}");
        }
    }

    // The SLO watching `owned-a` counts its events on its owner only: all of them there.
    let owner_a = sloburn::load::placement::owner("owned-a", 0..SHARDS).unwrap();
    let events = eventually(Duration::from_secs(10), || {
        let per: Vec<f64> = daemons
            .iter()
            .map(|d| {
                metric_sum(
                    &d.metrics(),
                    "sloburn_slo_events_total{slo=\"owned-a-availability\"",
                )
            })
            .collect();
        (per.iter().sum::<f64>() >= ITERATIONS as f64).then_some(per)
    })
    .expect("owned-a's SLO events");
    for (i, n) in events.iter().enumerate() {
        let want = if i as u32 == owner_a {
            ITERATIONS as f64
        } else {
            0.0
        };
        assert_eq!(*n, want, "shard {i}: {events:?}");
    }

    // A non-owner refuses to start an owned profile, by the API or the Flagger hook, naming
    // its owner; nothing is sent.
    let before = total(&seen, "owned-a");
    let rt = runtime();
    for (i, d) in daemons.iter().enumerate() {
        if i as u32 == owner_a {
            continue;
        }
        let url = format!("{}/api/profiles/owned-a/run", d.base);
        let (code, body) = rt.block_on(request("POST", &url, Some(ADMIN_TOKEN)));
        assert_eq!(code, 421, "shard {i}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v["owner"].as_u64(), v["shards"].as_u64()),
            (Some(owner_a.into()), Some(3))
        );
        assert!(
            v["error"]
                .as_str()
                .unwrap()
                .contains(&format!("shard {owner_a}/3")),
            "{v}"
        );
        let body = payload("pre-rollout", "c1", &[("profile", "owned-a")]);
        let (code, v) = rt.block_on(hook(&d.base, Some(ADMIN_TOKEN), &body));
        assert_eq!(code, 421, "shard {i}: {v}");
        assert_eq!(v["owner"].as_u64(), Some(owner_a.into()), "{v}");
    }
    // The owner runs it again when asked (the whole profile once more).
    let owner = &daemons[owner_a as usize];
    let url = format!("{}/api/profiles/owned-a/run", owner.base);
    let (code, body) = rt.block_on(request("POST", &url, Some(ADMIN_TOKEN)));
    assert_eq!(code, 202, "{body}");
    let again = eventually(Duration::from_secs(30), || {
        (total(&seen, "owned-a") >= before + ITERATIONS).then_some(())
    });
    assert!(again.is_some(), "{:?}", by_shard(&seen, "owned-a"));
    assert_eq!(by_shard(&seen, "owned-a").len(), 1);

    // Each shard's start log says which profiles it owns.
    for (i, d) in daemons.iter().enumerate() {
        let logs = d.logs.lock().unwrap();
        let line = logs
            .iter()
            .find(|l| l.contains("placement: this shard owns"))
            .unwrap_or_else(|| panic!("shard {i}: no placement line in {logs:?}"));
        for p in OWNED {
            let mine = sloburn::load::placement::owner(p, 0..SHARDS) == Some(i as u32);
            assert_eq!(line.contains(p), mine, "shard {i}, {p}: {line}");
        }
    }
    drop(daemons);
}

/// `check --shard i/N` says where each profile runs; `run --shard i/N` of an owned profile
/// runs it whole on its owner and nothing elsewhere; a bad `placement` is an error at its
/// line and column.
#[test]
fn issue_31_check_and_run_follow_the_owner() {
    let (server, seen) = counting_target();
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(
        dir.path(),
        &config(server.addr, &dir.path().join("data"), false),
    );
    let owner_b = sloburn::load::placement::owner("owned-b", 0..SHARDS).unwrap();
    for i in 0..SHARDS {
        let out = sloburn()
            .args(["check", "--shard", &format!("{i}/{SHARDS}")])
            .arg(&path)
            .env(SHARD_ENV, i.to_string())
            .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}");
        let want = if i == owner_b {
            "profiles.owned-b: owned here: runs it whole".to_string()
        } else {
            format!("profiles.owned-b: owned by shard {owner_b}/3: not run here")
        };
        assert!(text.contains(&want), "shard {i}: {text}");
        assert!(
            text.contains("profiles.split-b: split: runs 1/3 of it"),
            "{text}"
        );
    }
    for i in 0..SHARDS {
        let out = sloburn()
            .args([
                "run",
                "--quiet",
                "--profile",
                "owned-b",
                "--shard",
                &format!("{i}/{SHARDS}"),
            ])
            .arg(&path)
            .env(SHARD_ENV, i.to_string())
            .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "shard {i}: {err}");
        if i != owner_b {
            assert!(
                err.contains(&format!("owned by shard {owner_b}/3")),
                "shard {i}: {err}"
            );
        }
    }
    // Only the owner sent, and it sent the whole profile.
    let shards = by_shard(&seen, "owned-b");
    assert_eq!(
        shards,
        BTreeMap::from([(owner_b.to_string(), ITERATIONS)]),
        "{shards:?}"
    );

    let bad =
        std::fs::read_to_string(&path)
            .unwrap()
            .replacen("placement: owned", "placement: whole", 1);
    let bad_path = dir.path().join("bad.yaml");
    std::fs::write(&bad_path, &bad).unwrap();
    let line = bad
        .lines()
        .position(|l| l.contains("placement: whole"))
        .unwrap()
        + 1;
    let out = sloburn()
        .arg("check")
        .arg(&bad_path)
        .env(SHARD_ENV, "0")
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains(&format!(
            "bad.yaml:{line}:16: profiles.owned-a.placement: `whole` is not a placement"
        )),
        "{text}"
    );
}

/// Part 5: the overview's SLO table with an SLO fed by one owned profile on two shards. The
/// pod that does not own it has no events of the SLO (budget 1, burn 0, SLI NaN); the table
/// must show the owner's figures, not their mean with the idle pod's.
#[test]
fn issue_31_the_slo_table_shows_an_owned_profiles_slo_as_its_owner_sees_it() {
    use crate::dashboards::{dashboards, panels};
    use crate::panels::{prometheus_scraping, resolve, substitute};
    use crate::support::{BackgroundTarget, stdout_of};
    let target = BackgroundTarget::start(sloburn::target::TargetOptions {
        error_ratio: 0.2,
        ..Default::default()
    });
    let root = tempfile::tempdir().unwrap();
    let config = |data: &Path| {
        format!(
            "storage:\n  path: \"{}\"\n  flush_interval: 1s\ntargets:\n  api:\n    url: http://{}/\n    checks:\n      - status: 200\nprofiles:\n  canary:\n    target: api\n    placement: owned\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 40/s\n    duration: 6s\nslos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 30d\n",
            data.display(),
            target.addr
        )
    };
    let owner = sloburn::load::placement::owner("canary", 0..2).unwrap() as usize;
    let mut daemons = Vec::new();
    for i in 0..2 {
        let dir = root.path().join(format!("shard{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let path = write_config(&dir, &config(&dir.join("data")));
        daemons.push(Daemon::start(
            &path,
            &["--no-watch", "--shard", &format!("{i}/2")],
        ));
    }
    let rules = root.path().join("rules.yml");
    let text = stdout_of(
        sloburn()
            .arg("rules")
            .arg(root.path().join("shard0/sloburn.yaml")),
    );
    std::fs::write(&rules, text).unwrap();
    let scrapes: Vec<String> = daemons
        .iter()
        .map(|d| d.base.trim_start_matches("http://").to_string())
        .collect();
    let prom = prometheus_scraping(&scrapes, &rules);
    let overview = dashboards()
        .into_iter()
        .find(|(f, _)| f == "overview.json")
        .unwrap()
        .1;
    let table = panels(&overview)
        .into_iter()
        .find(|p| p["title"] == "SLOs: SLI vs objective, budget, burn")
        .unwrap();
    let owner_instance = &scrapes[owner];
    // Both pods scraped with their gauges, the owner's budget already spent in part.
    let ready = eventually(Duration::from_secs(60), || {
        let r = prom.query("sloburn_slo_error_budget_remaining_ratio");
        let spent = r
            .iter()
            .any(|(l, v)| l["instance"] == owner_instance.as_str() && *v < 0.0);
        let ended = !prom.query("sloburn_last_run_timestamp_seconds").is_empty();
        (r.len() == 2 && spent && ended).then_some(())
    });
    assert!(
        ready.is_some(),
        "{:?}",
        prom.query("sloburn_slo_error_budget_remaining_ratio")
    );
    let vars = resolve(&prom, &overview);
    let at = |q: &str| -> Vec<(String, f64)> {
        prom.query(q)
            .into_iter()
            .map(|(l, v)| (l["instance"].as_str().unwrap_or("").to_string(), v))
            .collect()
    };
    // Columns: SLI (period), objective... find them by metric name.
    for (metric, window) in [
        ("sloburn_slo_error_budget_remaining_ratio", None),
        ("sloburn_slo_burn_rate", Some("1h")),
    ] {
        let expr = table["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["expr"].as_str().unwrap())
            .find(|e| e.starts_with(&format!("avg by (slo) ({metric}")))
            .unwrap_or_else(|| panic!("no {metric} column"));
        let sel = match window {
            Some(w) => format!("{metric}{{window=\"{w}\"}}"),
            None => metric.to_string(),
        };
        let per_pod = at(&sel);
        let mine = per_pod
            .iter()
            .find(|(i, _)| i == owner_instance)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("{sel}: no owner series in {per_pod:?}"));
        let shown = at(&substitute(expr, &vars));
        assert_eq!(shown.len(), 1, "{expr}: {shown:?}");
        assert!(
            (shown[0].1 - mine).abs() <= 1e-9 * mine.abs().max(1.0),
            "{metric}: shown {shown:?}, the owner's {mine}, every pod's {per_pod:?}"
        );
    }
    drop(daemons);
}
