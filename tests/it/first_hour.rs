//! A new user's first hour (issue 46): `check` refuses what cannot run and says what was
//! meant, `run FILE` takes the load flags over the profile or says why not, and `demo` stops
//! when its terminal closes.

use crate::support::{BackgroundTarget, Proc, eventually, root, sloburn};
use sloburn::target::TargetOptions;
use std::time::Duration;

/// `check`'s report of `yaml` (errors and warnings as `check` prints them) and its exit code.
fn check(yaml: &str) -> (i32, String) {
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let result = sloburn::config::from_str(yaml, "first.yaml", &root(), &env);
    let mut out = Vec::new();
    let code = sloburn::config::report("first.yaml", result, &mut out);
    (code, String::from_utf8(out).unwrap())
}

const TARGET: &str = "targets:\n  api: { url: \"http://127.0.0.1:9/\" }\n";

#[test]
fn a_profile_with_nothing_to_send_to_is_refused_where_it_is_written() {
    let yaml = format!(
        "{TARGET}profiles:\n  smoke:\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n"
    );
    let (code, out) = check(&yaml);
    assert_eq!(code, sloburn::exit::CONFIG, "{out}");
    assert!(
        out.contains("first.yaml:5:5: profiles.smoke: missing `target` (or `journey`, or `mix`)"),
        "{out}"
    );
}

#[test]
fn an_objective_written_as_a_ratio_or_with_its_sign_says_what_was_meant() {
    let slo = |objective: &str| {
        format!(
            "{TARGET}slos:\n  api-availability:\n    target: api\n    sli: availability\n    \
             objective: {objective}\n    period: 30d\n"
        )
    };
    let (code, out) = check(&slo("0.999"));
    assert_eq!(code, sloburn::exit::CONFIG, "{out}");
    assert!(
        out.contains("first.yaml:7:16: slos.api-availability.objective:")
            && out.contains("0.999 % would allow 99.001 % of events to fail: did you mean 99.9?"),
        "{out}"
    );
    let (code, out) = check(&slo("\"99.9%\""));
    assert_eq!(code, sloburn::exit::CONFIG, "{out}");
    assert!(out.contains("write `99.9`, without `%`"), "{out}");
    let (code, out) = check(&slo("1"));
    assert_eq!(code, sloburn::exit::CONFIG, "{out}");
    assert!(out.contains("did you mean 100?"), "{out}");
    // A plain percentage still loads.
    let (code, out) = check(&slo("99.9"));
    assert_eq!(code, 0, "{out}");
}

/// A config whose one profile, unchanged, would send 5 requests a second for a minute.
fn slow_profile(dir: &std::path::Path, target: std::net::SocketAddr, executor: &str) -> String {
    let path = dir.join("first.yaml");
    std::fs::write(
        &path,
        format!(
            "targets:\n  api: {{ url: \"http://{target}/\" }}\nprofiles:\n  p:\n    target: api\n{executor}"
        ),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn run_takes_the_load_flags_over_the_profile_or_says_why_not() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let file = slow_profile(
        dir.path(),
        target.addr,
        "    executor: constant-arrival-rate\n    rate: 5/s\n    duration: 1m\n",
    );
    let export = dir.path().join("summary.json");
    let out = sloburn()
        .args([
            "run",
            &file,
            "--profile",
            "p",
            "--duration",
            "1s",
            "--rate",
            "20/s",
            "--quiet",
        ])
        .arg("--summary-export")
        .arg(&export)
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    // 20/s for 1 s: the iterations starting at 0, 50 ms, … 950 ms, not the profile's 300.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&export).unwrap()).unwrap();
    assert_eq!(summary["metrics"]["iterations"]["count"], 20, "{text}");
    assert_eq!(target.stats().requests, 20);
    assert!(
        text.contains("--duration 1s over profile `p`'s 1m")
            && text.contains("--rate 20/s over profile `p`'s 5/s"),
        "the summary says what the flags changed: {text}"
    );

    // A flag the executor has no field for is refused before anything is sent.
    let ramp = slow_profile(
        dir.path(),
        target.addr,
        "    executor: ramping-vus\n    stages: [ { duration: 1m, target: 5 } ]\n",
    );
    let out = sloburn()
        .args([
            "run",
            &ramp,
            "--profile",
            "p",
            "--duration",
            "5s",
            "--vus",
            "3",
        ])
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(sloburn::exit::USAGE), "{text}");
    assert!(
        text.contains("--duration does not apply to profile `p` (ramping-vus)"),
        "{text}"
    );
    assert_eq!(target.stats().requests, 20, "nothing more was sent");
}

#[test]
fn demo_stops_when_its_terminal_closes() {
    let mut demo = Proc::start(["demo", "--listen", "127.0.0.1:0"]);
    eventually(Duration::from_secs(60), || {
        demo.stdout().contains("status page").then_some(())
    })
    .unwrap_or_else(|| panic!("the demo did not start: {}", demo.stderr()));
    demo.signal(libc::SIGHUP);
    let status = demo
        .wait(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("SIGHUP did not stop the demo: {}", demo.stderr()));
    assert_eq!(status.code(), Some(0), "{}", demo.stderr());
}

#[test]
fn k6_command_line_habits_work() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("samples.json");
    // `-e` fills `${env:…}` in --url; `--tag` tags every sample; K6_* variables set the flags.
    let out = sloburn()
        .args(["run", "--url", "http://${env:TARGET}/", "--quiet"])
        .args([
            "-e",
            &format!("TARGET={}", target.addr),
            "--tag",
            "team=payments",
        ])
        .arg("--out")
        .arg(format!("json={}", json.display()))
        .env("K6_VUS", "2")
        .env("K6_ITERATIONS", "6")
        .env("K6_NO_COLOR", "true")
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert_eq!(target.stats().requests, 6, "K6_ITERATIONS: {text}");
    let points: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["type"] == "Point")
        .collect();
    let requests = points.iter().filter(|p| p["metric"] == "http_reqs").count();
    assert_eq!(requests, 6);
    for p in points
        .iter()
        .filter(|p| !p["metric"].as_str().unwrap().starts_with("vus"))
    {
        assert_eq!(p["data"]["tags"]["team"], "payments", "{p}");
    }

    // `-e` also fills a config's `${env:…}`, over the process's environment.
    let file = dir.path().join("env.yaml");
    std::fs::write(
        &file,
        "targets:\n  api: { url: \"http://${env:TARGET}/\" }\nprofiles:\n  p:\n    target: api\n    executor: shared-iterations\n    vus: 1\n    iterations: 3\n",
    )
    .unwrap();
    let out = sloburn()
        .arg("run")
        .arg(&file)
        .args(["-e", &format!("TARGET={}", target.addr), "--quiet"])
        .env("TARGET", "127.0.0.1:9")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        crate::support::all_output(&out)
    );
    assert_eq!(target.stats().requests, 9);

    // A tag sloburn sets itself, and a k6 script where a config goes, say what to do.
    let out = sloburn()
        .args(["run", "--url", "http://127.0.0.1:9/", "--tag", "scenario=x"])
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(sloburn::exit::USAGE), "{text}");
    assert!(text.contains("sloburn sets `scenario` itself"), "{text}");
    let script = dir.path().join("script.js");
    std::fs::write(&script, "export default function () {}\n").unwrap();
    let out = sloburn().arg("run").arg(&script).output().unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(sloburn::exit::USAGE), "{text}");
    assert!(
        text.contains("is a k6 script") && text.contains("sloburn import k6"),
        "{text}"
    );
    assert_eq!(target.stats().requests, 9, "nothing more was sent");
}

#[test]
fn the_demo_tells_one_story_and_shows_its_config() {
    // `--print-config` prints a config that `check` accepts as it is.
    let out = sloburn().args(["demo", "--print-config"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let env = sloburn::config::Env::from_map(
        [("SLOBURN_DEMO_TOKEN".to_string(), "t".to_string())].into(),
        1,
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = sloburn::config::from_str(&text, "demo.yaml", dir.path(), &env)
        .unwrap_or_else(|e| panic!("{e}\n{text}"))
        .config;
    assert!(text.contains("http://127.0.0.1:8080/checkout"), "{text}");
    // Every failure-rate threshold is at least as strict as the error budget of each
    // availability SLO on its target: a run never reads `passed` while its SLO burns.
    let mut compared = 0;
    for p in cfg.profiles.values() {
        for t in &p.thresholds {
            if t.threshold.metric != "http_req_failed" {
                continue;
            }
            let limit = t.threshold.value;
            for slo in cfg.slos.values().filter(|s| s.target == p.target) {
                if matches!(slo.sli, sloburn::config::Sli::Availability) {
                    let budget = 1.0 - slo.objective / 100.0;
                    assert!(
                        limit <= budget + 1e-12,
                        "{}: http_req_failed {} is looser than {}'s budget {budget}",
                        p.name,
                        t.threshold.source,
                        slo.name
                    );
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 0, "the demo compares a threshold with an SLO");
}
