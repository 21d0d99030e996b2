//! Config loading as a user meets it: `sloburn check` output, exit codes, every shipped config.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `actual` with a checked-in golden file; `UPDATE_GOLDEN=1` rewrites it.
pub fn golden(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    assert_eq!(
        expected,
        actual,
        "{} drifted (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

#[test]
fn check_reports_every_mistake_with_line_and_column() {
    let name = "tests/it/golden/bad_config.yaml";
    let text = std::fs::read_to_string(root().join(name)).unwrap();
    // A fixed resolver `ndots:5`, as in a Kubernetes pod, so the search-path warning shows.
    let env = sloburn::config::Env::from_map(Default::default(), 5);
    let result = sloburn::config::from_str(&text, name, &root(), &env);
    let mut out = Vec::new();
    let code = sloburn::cli::report(name, result, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(code, sloburn::cli::EXIT_CONFIG, "{text}");
    golden(&root().join("tests/it/golden/bad_config.txt"), &text);
    // The golden file is reviewed by hand; these keep its key promises from silently changing.
    let errors = text.lines().filter(|l| !l.starts_with("warning:")).count() - 1;
    assert!(errors >= 15, "{text}");
    assert!(text.contains(
        "bad_config.yaml:6:5: targets.api.timout: unknown field `timout` (did you mean `timeout`?)"
    ));
    assert!(text.contains(
        "bad_config.yaml:18:13: profiles.canary.target: unknown target `webb` (did you mean `web`?)"
    ));
    assert!(text.contains("warning: tests/it/golden/bad_config.yaml:14:10: targets.web.url: host `web.default.svc.cluster.local`"));
}

#[test]
fn every_shipped_config_loads() {
    let dir = root().join("config");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let env = sloburn::config::Env::from_map(
                [
                    ("SLOBURN_ADMIN_TOKEN".to_string(), "t0ken-value".to_string()),
                    ("CHECKOUT_TOKEN".to_string(), "s3cret-value".to_string()),
                ]
                .into(),
                5,
            );
            let text = std::fs::read_to_string(&path).unwrap();
            let loaded = sloburn::config::from_str(&text, &path.display().to_string(), &dir, &env)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(!loaded.config.targets.is_empty());
            // Secrets never show up in the Debug form that logs would use.
            let debug = format!("{:?}", loaded.config);
            assert!(!debug.contains("s3cret-value") && !debug.contains("t0ken-value"));
            seen += 1;
        }
    }
    assert!(seen >= 1);
}

#[test]
fn missing_env_secret_is_an_error_that_names_the_variable_only() {
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let text = "targets:\n  a:\n    url: http://127.0.0.1:1/\n    headers:\n      Authorization: \"Bearer ${env:NOPE_TOKEN}\"\n";
    let err = sloburn::config::from_str(text, "c.yaml", Path::new("."), &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "c.yaml:5:22: targets.a.headers.Authorization: environment variable `NOPE_TOKEN` is not set"
    );
}

#[test]
fn check_exit_codes_from_the_binary() {
    let bin = env!("CARGO_BIN_EXE_sloburn");
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "targets:\n  a:\n    url: http://127.0.0.1:1/\n").unwrap();
    let out = std::process::Command::new(bin)
        .arg("check")
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "targets:\n  a:\n    url: nope\n").unwrap();
    let out = std::process::Command::new(bin)
        .arg("check")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("bad.yaml:3:10: targets.a.url: `nope` has no scheme"),
        "{stdout}"
    );
}
