//! The SLO engine in the running daemon: state that survives crashes and restarts, a corrupt
//! store that never stops the load, and the budget guard.

use crate::support::{
    AVAILABILITY_SLO, BackgroundTarget, Daemon, IDLE, daemon_config, eventually, get_blocking,
    metric_sum, period_events, write_config,
};
use sloburn::target::TargetOptions;
use std::path::Path;
use std::time::Duration;

fn config(target: std::net::SocketAddr, data: &Path, profile: &str) -> String {
    daemon_config(target, data, profile, AVAILABILITY_SLO)
}

const STEADY: &str = "  steady:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 100/s\n    duration: 1h\n";
const FIXED: &str = "  fixed:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: shared-iterations\n    vus: 4\n    iterations: 700\n";

#[test]
fn kill_9_loses_at_most_the_unflushed_seconds_and_sigterm_loses_nothing() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    // Phase 1: steady load, then SIGKILL.
    let path = write_config(dir.path(), &config(target.addr, &data, STEADY));
    let mut d = Daemon::start(&path, &["--no-watch"]);
    let pre = d.slo_events_at_least(500, Duration::from_secs(15));
    d.signal(libc::SIGKILL);
    assert_eq!(
        d.wait(Duration::from_secs(5)),
        None,
        "killed by a signal has no code"
    );

    // Phase 2: restart on the same store without load: the period restored from SQLite.
    let path = write_config(dir.path(), &config(target.addr, &data, IDLE));
    let d2 = Daemon::start(&path, &["--no-watch"]);
    let restored = period_events(&d2);
    // Flushed every 1 s, folded every 1 s, at 100 events/s: at most ~300 events may be lost.
    assert!(
        restored + 300 >= pre && restored > 0,
        "restored {restored}, counted {pre} before the kill"
    );
    drop(d2);

    // Phase 3: a fixed number of events, SIGTERM, restart: exact.
    let wiped = dir.path().join("data2");
    let path = write_config(dir.path(), &config(target.addr, &wiped, FIXED));
    let mut d3 = Daemon::start(&path, &["--no-watch"]);
    let done = eventually(Duration::from_secs(20), || {
        let m = d3.metrics();
        (metric_sum(&m, "sloburn_slo_events_total{slo=\"api-availability\"") >= 700.0).then_some(())
    });
    assert!(done.is_some());
    d3.signal(libc::SIGTERM);
    assert_eq!(d3.wait(Duration::from_secs(10)), Some(0));
    let path = write_config(dir.path(), &config(target.addr, &wiped, IDLE));
    let d4 = Daemon::start(&path, &["--no-watch"]);
    assert_eq!(period_events(&d4), 700);
}

#[test]
fn a_corrupt_store_is_moved_aside_and_the_daemon_serves_load_not_ready() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let garbage = b"this is not a database, it is a grocery list: eggs, milk\n".repeat(100);
    std::fs::write(data.join("sloburn.db"), &garbage).unwrap();
    let path = write_config(dir.path(), &config(target.addr, &data, STEADY));
    let d = Daemon::start(&path, &["--no-watch"]);
    let (code, body) = get_blocking(&format!("{}/readyz", d.base));
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("corrupt") && body.contains("sloburn.db.corrupt-"),
        "{body}"
    );
    // Load goes on.
    let served = eventually(Duration::from_secs(10), || {
        (metric_sum(&d.metrics(), "sloburn_http_reqs_total") > 50.0).then_some(())
    });
    assert!(served.is_some());
    assert!(d.metrics().contains("sloburn_store_healthy 0"));
    // The bad file is kept, byte for byte.
    let moved: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_string_lossy().contains("sloburn.db.corrupt-")
                && !p.to_string_lossy().ends_with("-wal")
                && !p.to_string_lossy().ends_with("-shm")
        })
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(std::fs::read(&moved[0]).unwrap(), garbage);
}

#[test]
fn the_budget_guard_aborts_a_run_that_burns_the_budget() {
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: 0.5,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let profile = "  canary:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 50/s\n    duration: 1h\n    guard: { slo: api-availability, max_burn_rate: 14.4, window: 5m }\n";
    let path = write_config(dir.path(), &config(target.addr, &data, profile));
    let started = std::time::Instant::now();
    let d = Daemon::start(&path, &["--no-watch"]);
    let run = eventually(Duration::from_secs(15), || {
        let (_, body) = get_blocking(&format!("{}/api/runs", d.base));
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        (v["runs"][0]["result"] == "aborted_by_guard").then_some(v["runs"][0].clone())
    })
    .expect("the guard never stopped the run");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        run["reason"].as_str().unwrap().contains("api-availability"),
        "{run}"
    );
    assert!(
        d.metrics()
            .contains("sloburn_runs_total{profile=\"canary\",result=\"aborted_by_guard\"} 1")
    );
}

/// A store replaced by rename while the daemon runs (issue 11, item 10): the next flush sees
/// another file at the path, moves it aside untouched, writes the daemon's counts back and says
/// so on `/readyz`; a restart restores every count flushed before the swap.
#[test]
fn a_store_replaced_by_rename_is_detected_reported_and_loses_nothing() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &config(target.addr, &data, STEADY));
    let mut d = Daemon::start(&path, &["--no-watch"]);
    let pre = d.slo_events_at_least(300, Duration::from_secs(15));
    // Swap: our file goes away, a stranger's takes its name (as `mv other.db sloburn.db`).
    let db = data.join("sloburn.db");
    std::fs::rename(&db, dir.path().join("taken-away.db")).unwrap();
    let stranger = b"someone else's file, not sloburn's\n".repeat(50);
    let tmp = data.join("stranger.tmp");
    std::fs::write(&tmp, &stranger).unwrap();
    std::fs::rename(&tmp, &db).unwrap();
    let body = eventually(Duration::from_secs(10), || {
        let (code, body) = get_blocking(&format!("{}/readyz", d.base));
        (code == 503 && body.contains("replaced")).then_some(body)
    })
    .expect("/readyz never reported the swap");
    assert!(body.contains("moved aside"), "{body}");
    let moved: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("sloburn.db.corrupt-"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(std::fs::read(&moved[0]).unwrap(), stranger);
    d.signal(libc::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(10)), Some(0));
    let path = write_config(dir.path(), &config(target.addr, &data, IDLE));
    let d2 = Daemon::start(&path, &["--no-watch"]);
    let restored = period_events(&d2);
    assert!(
        restored >= pre,
        "restored {restored}, counted {pre} before the swap"
    );
    let (code, _) = get_blocking(&format!("{}/readyz", d2.base));
    assert_eq!(code, 200, "a restart on the repaired store is ready");
}
