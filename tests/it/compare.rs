//! `sloburn run --record` and `sloburn compare` (issue 48), through the binary: records of real
//! runs against fixed-delay targets the test starts on 127.0.0.1, their verdicts and exit
//! codes; the record fixtures of every version still compared by this build; bad input is 2.

use crate::support::{BackgroundTarget, root, sloburn};
use sloburn::load::record::RunRecord;
use sloburn::target::TargetOptions;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fixed-delay target (`hold_ms`, no jitter) failing `error_ratio` of its requests.
fn target(hold_ms: u64, error_ratio: f64) -> BackgroundTarget {
    BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(hold_ms),
        error_ratio,
        ..TargetOptions::default()
    })
}

/// `sloburn run --url` at `rate` for 4 s against `t`, its record written to `dir/name`.
fn record(t: &BackgroundTarget, dir: &Path, name: &str, rate: &str) -> PathBuf {
    let path = dir.join(name);
    let out = sloburn()
        .args([
            "run",
            "--quiet",
            "--rate",
            rate,
            "--duration",
            "4s",
            "--url",
        ])
        .arg(format!("http://{}/", t.addr))
        .arg("--record")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        path.exists(),
        "no record: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

/// `sloburn compare OLD NEW ARGS…`: its exit code and stdout and stderr together.
fn compare(old: &Path, new: &Path, args: &[&str]) -> (i32, String) {
    let out = sloburn()
        .arg("compare")
        .arg(old)
        .arg(new)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Two records of one 20 ms server are `unchanged` (exit 0, though two runs a few seconds
/// apart are never identical); a 22 ms server against it `regressed` on `http_req_duration`
/// (99, named) and not on its throughput, and against it the 20 ms one `improved` (0); a
/// server failing 2 % of its
/// requests `regressed` on `http_req_failed`. The record holds the plan, its start and the
/// status classes.
#[test]
fn records_of_fixed_delay_servers_compare_with_a_verdict_per_metric() {
    let dir = tempfile::tempdir().unwrap();
    let (same, slower, failing) = (target(20, 0.0), target(22, 0.0), target(20, 0.02));
    // Latency at 100/s: 400 values a side find a 10 % shift of a fixed delay, and a loaded
    // machine keeps up; failures at 300/s: 1,200 a side find 2 points.
    let a1 = record(&same, dir.path(), "a1.json", "100/s");
    let a2 = record(&same, dir.path(), "a2.json", "100/s");
    let b = record(&slower, dir.path(), "b.json", "100/s");
    let f = record(&failing, dir.path(), "f.json", "300/s");
    let a3 = record(&same, dir.path(), "a3.json", "300/s");

    let r: RunRecord = serde_json::from_str(&std::fs::read_to_string(&a1).unwrap()).unwrap();
    assert_eq!(r.version, RunRecord::VERSION);
    let plan = r.plan.as_ref().expect("the plan");
    assert!(plan.load.contains("100.00 iterations/s"), "{plan:?}");
    assert!(plan.start_unix_ms > 1_700_000_000_000, "{plan:?}");
    assert!(r.requests > 300, "{} requests", r.requests);
    let ok = r.classes.iter().find(|c| c.class == "2xx").expect("2xx");
    assert_eq!(ok.duration.count(), r.requests);

    let (code, text) = compare(&a1, &a2, &[]);
    assert_eq!(code, 0, "A/A: {text}");
    assert!(text.trim_end().ends_with("no regression"), "{text}");

    let (code, text) = compare(&a1, &b, &[]);
    assert_eq!(code, 99, "20 ms against 22 ms: {text}");
    assert!(
        text.contains("regressed: http_req_duration (p50 +"),
        "{text}"
    );
    let (code, text) = compare(&b, &a1, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("improved: http_req_duration (p50 -"),
        "{text}"
    );
    // Its throughput held (an arrival rate): compared on that alone, nothing regressed.
    let (code, text) = compare(&a1, &b, &["--metric", "http_reqs"]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("http_reqs") && text.contains("unchanged"),
        "{text}"
    );

    let (code, text) = compare(&a3, &f, &["--metric", "http_req_failed"]);
    assert_eq!(code, 99, "0 % against 2 % failed: {text}");
    assert!(text.contains("regressed: http_req_failed (+"), "{text}");
    assert!(
        !text.contains("http_req_duration"),
        "--metric keeps one: {text}"
    );
}

/// The fixture of every record version this build has read: version 1 (no plan) against
/// version 2, the same figures, compares `unchanged` with a note; JSON output names each row.
#[test]
fn records_from_earlier_builds_still_compare() {
    let golden = root().join("tests/it/golden");
    let (v1, v2) = (golden.join("record-v1.json"), golden.join("record-v2.json"));
    let (code, text) = compare(&v1, &v2, &[]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("without its plan"), "{text}");
    assert!(text.contains("http_req_duration{step:buy/login}"), "{text}");
    let (code, json) = compare(&v1, &v2, &["--json"]);
    assert_eq!(code, 0, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["verdict"] == "unchanged"),
        "{v}"
    );
}

/// Bad input exits 2 with what is wrong: records of another profile's steps, a file that is
/// no record (garbage, a later version, one past the size bound), a bad option.
#[test]
fn unlike_or_broken_records_exit_2_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let golden = root().join("tests/it/golden/record-v2.json");
    let mut other: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&golden).unwrap()).unwrap();
    other["steps"][0]["name"] = "signin".into();
    let other_path = dir.path().join("other.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let (code, text) = compare(&golden, &other_path, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("different runs") && text.contains("buy/signin"),
        "{text}"
    );

    let mut later = other.clone();
    later["version"] = 99.into();
    let later_path = dir.path().join("later.json");
    std::fs::write(&later_path, later.to_string()).unwrap();
    let (code, text) = compare(&golden, &later_path, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("format version 99"), "{text}");

    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, b"\x00\xffnot json").unwrap();
    let (code, text) = compare(&garbage, &golden, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("is not a run record"), "{text}");

    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(sloburn::compare::MAX_RECORD_BYTES + 1)
        .unwrap();
    let (code, text) = compare(&golden, &huge, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("is over 64 MiB"), "{text}");

    let (code, text) = compare(&golden, &golden, &["--max-regression", "lots"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("--max-regression `lots`"), "{text}");
}

/// `sloburn run --url NEW --baseline-url OLD`: one arrival process, each iteration to one side.
fn ab(new: &BackgroundTarget, old: &BackgroundTarget) -> (i32, String) {
    let out = sloburn()
        .args([
            "run",
            "--quiet",
            "--rate",
            "100/s",
            "--duration",
            "3s",
            "--url",
        ])
        .arg(format!("http://{}/", new.addr))
        .arg("--baseline-url")
        .arg(format!("http://{}/", old.addr))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// A/B under one load, a few short runs (bench/compare.py has the 20 × 10 s figures): two
/// identical 20 ms servers are `unchanged` (exit 0), a 22 ms candidate against a 20 ms
/// baseline `regressed` on `http_req_duration` (99), an 18 ms one `improved`; each side got
/// half the arrivals.
#[test]
fn ab_under_one_load_judges_the_candidate_against_the_baseline() {
    let (a, a2, slow, fast) = (
        target(20, 0.0),
        target(20, 0.0),
        target(22, 0.0),
        target(18, 0.0),
    );
    for _ in 0..2 {
        let (code, text) = ab(&a, &a2);
        assert_eq!(code, 0, "A/A: {text}");
        assert!(text.trim_end().ends_with("no regression"), "{text}");
        let (code, text) = ab(&slow, &a);
        assert_eq!(code, 99, "22 ms against 20 ms: {text}");
        assert!(
            text.contains("regressed: http_req_duration (p50 +"),
            "{text}"
        );
    }
    let (code, text) = ab(&fast, &a);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("improved: http_req_duration (p50 -"),
        "{text}"
    );
    // Both sides in the summary (as journeys), each with about half of 300 requests.
    assert!(
        text.contains("candidate") && text.contains("baseline"),
        "{text}"
    );
    let halves: Vec<u64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("values "))
        .flat_map(|l| l.split(" → ").map(|n| n.trim().parse::<u64>().unwrap()))
        .collect();
    assert!(!halves.is_empty(), "{text}");
    for n in halves {
        assert!((120..=180).contains(&n), "a side's values: {n}\n{text}");
    }
}
