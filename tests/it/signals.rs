//! Signals to `sloburn run` and `sloburn target` as child processes (the daemon's are in
//! `daemon`): SIGTERM and SIGINT end a run with its results written and marked interrupted,
//! exit 105; SIGHUP stops neither command.

use crate::support::{BackgroundTarget, Proc, eventually, get_blocking, sloburn};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// `sloburn run` at 200/s for up to 30 s against `url`, exporting into `dir`.
fn start_run(url: &str, duration: &str, dir: &Path) -> Proc {
    let export = dir.join("summary.json");
    let out = dir.join("out.jsonl");
    Proc::start([
        "run",
        "--url",
        url,
        "--rate",
        "200/s",
        "--duration",
        duration,
        "--summary-export",
        export.to_str().unwrap(),
        "--out",
        &format!("json-agg={}", out.display()),
    ])
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

/// The requests a target has answered, from its `/stats`.
fn answered(base: &str) -> u64 {
    let (code, body) = get_blocking(&format!("{base}/stats"));
    assert_eq!(code, 200, "{body}");
    let stats: Value = serde_json::from_str(&body).unwrap();
    stats["requests"].as_u64().unwrap()
}

fn signal_stops_run_with_results(sig: i32, name: &str) {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let mut run = start_run(&format!("http://{}/", target.addr), "30s", dir.path());
    let sent = eventually(Duration::from_secs(15), || {
        (target.stats().requests >= 50).then_some(())
    });
    assert!(
        sent.is_some(),
        "no load reached the target: {}",
        run.stderr()
    );

    run.signal(sig);
    let stdout = exits_interrupted(&mut run, Duration::from_secs(15));
    assert!(
        stdout.contains(&format!("stopped: interrupted by {name}")),
        "{stdout}"
    );
    assert!(stdout.contains("http_reqs"), "{stdout}");

    let export = read_json(&dir.path().join("summary.json"));
    assert_eq!(export["state"]["interrupted"], true, "{export:#}");
    assert_eq!(export["state"]["signal"], name, "{export:#}");
    let run_ms = export["state"]["testRunDurationMs"].as_f64().unwrap();
    assert!(
        run_ms < 25_000.0,
        "the run went on after {name}: {run_ms} ms"
    );
    let reqs = export["metrics"]["http_reqs"]["count"].as_u64().unwrap();
    assert!(reqs > 0, "{export:#}");

    // The `--out` file is complete: its buckets add up to the export's count, and the last
    // line carries the same mark.
    let lines: Vec<Value> = std::fs::read_to_string(dir.path().join("out.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = lines.last().expect("at least the final line");
    assert_eq!(last["interrupted"], true, "{last}");
    assert_eq!(last["signal"], name, "{last}");
    let summed: u64 = lines.iter().map(|l| l["http_reqs"].as_u64().unwrap()).sum();
    assert_eq!(summed, reqs, "the --out buckets against the export");
}

/// Waits up to `limit` for `run` to exit with the interrupted code; returns its stdout.
fn exits_interrupted(run: &mut Proc, limit: Duration) -> String {
    let status = run.wait(limit);
    let stdout = run.stdout();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(sloburn::exit::INTERRUPTED),
        "{status:?}\n{stdout}\n{}",
        run.stderr()
    );
    stdout
}

#[test]
fn sigterm_to_run_writes_the_summary_and_export_marked_interrupted() {
    signal_stops_run_with_results(libc::SIGTERM, "SIGTERM");
}

#[test]
fn sigint_to_run_writes_the_summary_and_export_marked_interrupted() {
    signal_stops_run_with_results(libc::SIGINT, "SIGINT");
}

#[test]
fn sighup_does_not_kill_run_or_target() {
    let (mut target, base) = Proc::target(&[]);
    target.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        target.child.try_wait().unwrap().is_none(),
        "SIGHUP stopped the target: {}",
        target.stderr()
    );
    assert_eq!(get_blocking(&format!("{base}/")).0, 200);

    let dir = tempfile::tempdir().unwrap();
    let mut run = start_run(&format!("{base}/"), "3s", dir.path());
    let before = answered(&base);
    let sent = eventually(Duration::from_secs(10), || {
        (answered(&base) > before + 20).then_some(())
    });
    assert!(
        sent.is_some(),
        "no load reached the target: {}",
        run.stderr()
    );
    run.signal(libc::SIGHUP);
    let status = run.wait(Duration::from_secs(20));
    let stdout = run.stdout();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(sloburn::exit::OK),
        "{status:?}\n{stdout}\n{}",
        run.stderr()
    );
    assert!(stdout.contains("http_reqs"), "{stdout}");
    assert!(!stdout.contains("interrupted"), "{stdout}");
    let export = read_json(&dir.path().join("summary.json"));
    assert_eq!(export["state"]["interrupted"], false, "{export:#}");
    assert_eq!(export["state"]["signal"], Value::Null, "{export:#}");
    let run_ms = export["state"]["testRunDurationMs"].as_f64().unwrap();
    assert!(run_ms >= 2_900.0, "the run ended early: {run_ms} ms");

    // Still serving after both signals, then SIGTERM stops it as before.
    assert_eq!(get_blocking(&format!("{base}/")).0, 200);
    target.signal(libc::SIGTERM);
    let status = target.wait(Duration::from_secs(15));
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "{status:?}\n{}",
        target.stderr()
    );
}

/// The terminal that sent the SIGHUP is often gone: writing the summary then fails (EIO, or
/// EPIPE on a pipe), and that must cost the summary only, never the files or the exit code.
#[test]
fn a_run_whose_stdout_is_gone_still_writes_its_export() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let mut child = sloburn()
        .args(["run", "--url", &format!("http://{}/", target.addr)])
        .args(["--rate", "50/s", "--duration", "1s", "--summary-export"])
        .arg(&export)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(sloburn::exit::OK),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let export = read_json(&export);
    assert!(export["metrics"]["http_reqs"]["count"].as_u64().unwrap() > 0);
}

/// The first signal lets in-flight requests finish (up to 30 s for a `--url` run); a CI cancel
/// sends a second one before it kills, and that one must end the run at once, results written.
#[test]
fn a_second_signal_cuts_the_graceful_stop_short_and_still_writes_the_export() {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_secs(20),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let mut run = Proc::start([
        "run",
        "--url",
        &format!("http://{}/", target.addr),
        "--vus",
        "2",
        "--duration",
        "30s",
        "--summary-export",
        export.to_str().unwrap(),
    ]);
    let waiting = eventually(Duration::from_secs(15), || {
        (target.stats().in_flight >= 2).then_some(())
    });
    assert!(
        waiting.is_some(),
        "no request reached the target: {}",
        run.stderr()
    );

    run.signal(libc::SIGTERM);
    // The graceful stop waits for the two requests the target holds for 20 s.
    let early = run.wait(Duration::from_secs(1));
    assert!(early.is_none(), "the first signal did not wait: {early:?}");
    run.signal(libc::SIGINT);
    let stdout = exits_interrupted(&mut run, Duration::from_secs(10));
    assert!(
        stdout.contains("interrupted by SIGTERM; a second signal cut the graceful stop short"),
        "{stdout}"
    );
    let export = read_json(&export);
    assert_eq!(export["state"]["interrupted"], true, "{export:#}");
    assert_eq!(export["state"]["signal"], "SIGTERM", "{export:#}");
    // The two held requests never finished, so they are not counted.
    assert_eq!(export["metrics"]["http_reqs"]["count"], 0, "{export:#}");
}
