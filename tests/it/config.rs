//! Config loading as a user meets it: `sloburn check` output, exit codes, every shipped config.

use crate::support::{golden, limit_address_space, root, sloburn, with_nofile};
use std::path::Path;

#[test]
fn check_reports_every_mistake_with_line_and_column() {
    let name = "tests/it/golden/bad_config.yaml";
    let text = std::fs::read_to_string(root().join(name)).unwrap();
    // A fixed resolver `ndots:5`, as in a Kubernetes pod, so the search-path warning shows.
    let env = sloburn::config::Env::from_map(Default::default(), 5);
    let result = sloburn::config::from_str(&text, name, &root(), &env);
    let mut out = Vec::new();
    let code = sloburn::config::report(name, result, &mut out);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
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
    let mut seen = Vec::new();
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
            seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "example.yaml",
            "grpc.yaml",
            "journeys.yaml",
            "probes.yaml",
            "tenants.yaml"
        ],
        "every shipped config, each loaded"
    );
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
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, "targets:\n  a:\n    url: http://127.0.0.1:1/\n").unwrap();
    let out = sloburn().arg("check").arg(&good).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "targets:\n  a:\n    url: nope\n").unwrap();
    let out = sloburn().arg("check").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("bad.yaml:3:10: targets.a.url: `nope` has no scheme"),
        "{stdout}"
    );
}

#[test]
fn presets_build_executors_and_mistakes_are_reported() {
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let good = "targets:\n  t:\n    url: http://127.0.0.1:1/\nprofiles:\n  smoke:\n    target: t\n    preset: smoke\n    peak_vus: 3\n  stress:\n    target: t\n    preset: stress\n    peak_rate: 200/s\n    duration: 10m\n    max_vus: 50\n  break:\n    target: t\n    preset: breakpoint\n    peak_rate: 1000/s\n    thresholds:\n      http_req_failed: [\"rate<0.01\"]\n";
    let cfg = sloburn::config::from_str(good, "p.yaml", Path::new("."), &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    use sloburn::config::spec::Executor;
    assert!(matches!(
        cfg.profiles["smoke"].executor,
        Executor::RampingVus { .. } | Executor::ConstantVus { .. }
    ));
    match &cfg.profiles["stress"].executor {
        Executor::RampingArrivalRate {
            stages, max_vus, ..
        } => {
            let total: std::time::Duration = stages.iter().map(|s| s.duration).sum();
            assert_eq!(total, std::time::Duration::from_secs(600));
            assert_eq!(*max_vus, 50);
            assert!(stages.iter().any(|s| (s.target - 200.0).abs() < 1e-9));
        }
        other => panic!("{other:?}"),
    }
    // A breakpoint run stops at the first failed threshold.
    assert!(
        cfg.profiles["break"]
            .thresholds
            .iter()
            .all(|t| t.abort_on_fail)
    );

    let bad = "targets:\n  t:\n    url: http://127.0.0.1:1/\nprofiles:\n  a:\n    target: t\n    preset: stres\n    peak_vus: 3\n  b:\n    target: t\n    preset: soak\n    executor: constant-vus\n    peak_vus: 3\n  c:\n    target: t\n    preset: spike\n  d:\n    target: t\n    executor: constant-vus\n    duration: 1m\n    peak_vus: 3\n";
    let err = sloburn::config::from_str(bad, "p.yaml", Path::new("."), &env).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("p.yaml:7:13: profiles.a.preset:"), "{text}");
    assert!(
        text.contains("p.yaml:12:15: profiles.b.executor: set `executor` or `preset`, not both"),
        "{text}"
    );
    assert!(
        text.contains("profiles.c: a preset needs exactly one of `peak_vus`"),
        "{text}"
    );
    assert!(
        text.contains("p.yaml:21:15: profiles.d.peak_vus: `peak_vus` goes with `preset`"),
        "{text}"
    );
}

/// Issue 11, item 2: `vus: 1000` under a 256-descriptor limit cannot hold its connections, so
/// `check` refuses it instead of letting the run fail on sloburn's side; the soft limit is first
/// raised to the hard one, so a low soft limit alone is not a refusal.
#[test]
fn check_refuses_a_profile_that_cannot_fit_the_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = |vus: u32| {
        let path = dir.path().join(format!("vus{vus}.yaml"));
        std::fs::write(
            &path,
            format!(
                "targets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles:\n  big:\n    target: api\n    executor: constant-vus\n    vus: {vus}\n    duration: 1s\n"
            ),
        )
        .unwrap();
        path
    };
    let big = cfg(1000);
    let out = with_nofile(sloburn().arg("check").arg(&big), 256, 256)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("profiles.big: up to 1000 VUs need 1000 connections")
            && text.contains("open-file limit is 256")
            && text.contains("1 error(s)"),
        "{text}"
    );
    // The same profile fits once the hard limit allows it: the soft limit is raised.
    let out = with_nofile(sloburn().arg("check").arg(&big), 256, 4096)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let small = cfg(100);
    let out = with_nofile(sloburn().arg("check").arg(&small), 256, 256)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// Ten nested lists of ten aliases: 10^10 nodes if aliases were copied without a bound.
fn alias_bomb() -> String {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let prev = format!("*a{}", i - 1);
        text.push_str(&format!("a{i}: &a{i} [{}]\n", vec![prev; 10].join(", ")));
    }
    text
}

#[test]
fn yaml_alias_bomb_is_rejected_with_a_position() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = dir.path().join("bomb.yaml");
    std::fs::write(&bomb, alias_bomb()).unwrap();
    assert!(std::fs::metadata(&bomb).unwrap().len() < 600);
    let mut cmd = sloburn();
    cmd.current_dir(dir.path()).arg("check").arg("bomb.yaml");
    // A bound on expansion, not a timeout: the child gets 512 MB of address space.
    let out = limit_address_space(&mut cmd, 512 << 20).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert!(
        stdout.starts_with("bomb.yaml:4:45: YAML syntax: aliases expand to more than 10000 nodes"),
        "{stdout}"
    );
}

#[test]
fn yaml_alias_bomb_is_rejected_in_process_as_a_reload_would_be() {
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let started = std::time::Instant::now();
    let err = sloburn::config::from_str(&alias_bomb(), "c.yaml", Path::new("."), &env).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(err.errors.len(), 1, "{err}");
    assert!(err.to_string().starts_with("c.yaml:4:45: "), "{err}");
    assert!(err.to_string().contains("aliases"), "{err}");
}

#[test]
fn config_file_over_the_size_limit_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.yaml");
    // Sparse: the size is there, the bytes are not, so the limit must come from the metadata.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(sloburn::config::MAX_CONFIG_BYTES + 1).unwrap();
    let err = sloburn::config::load(&path).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{}:1:1: cannot read the config file: the config file is 4194305 bytes, over the limit of 4 MiB",
            path.display()
        )
    );
    let text = " ".repeat(sloburn::config::MAX_CONFIG_BYTES as usize + 1);
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let err = sloburn::config::from_str(&text, "c.yaml", Path::new("."), &env).unwrap_err();
    assert!(err.to_string().contains("over the limit of 4 MiB"), "{err}");
}

/// Loads a config whose target sends `${file:NAME}` as a header, `NAME` in `dir`.
fn load_with_file_secret(dir: &Path, name: &str) -> Result<(), String> {
    let text = format!(
        "targets:\n  a:\n    url: http://127.0.0.1:1/\n    headers:\n      Authorization: \"${{file:{name}}}\"\n"
    );
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    sloburn::config::from_str(&text, "c.yaml", dir, &env)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[test]
fn file_secret_from_a_fifo_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // On a thread, so a regression fails the test instead of hanging it: no writer ever
    // opens the FIFO, and a blocking open or read would wait forever.
    let (tx, rx) = std::sync::mpsc::channel();
    let path = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(load_with_file_secret(&path, "pipe"));
    });
    let result = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .expect("reading a FIFO secret blocked");
    assert_eq!(
        result.unwrap_err(),
        "c.yaml:5:22: targets.a.headers.Authorization: cannot read `pipe`: a `${file:}` secret must be a regular file, and this is a FIFO"
    );
}

#[test]
fn file_secret_from_dev_zero_is_refused() {
    let err = load_with_file_secret(Path::new("."), "/dev/zero").unwrap_err();
    assert!(
        err.ends_with("cannot read `/dev/zero`: a `${file:}` secret must be a regular file, and this is a character device"),
        "{err}"
    );
    let err = load_with_file_secret(Path::new("/"), "tmp").unwrap_err();
    assert!(err.ends_with("and this is a directory"), "{err}");
}

#[test]
fn file_secret_over_the_size_limit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let limit = sloburn::config::MAX_SECRET_FILE_BYTES as usize;
    std::fs::write(dir.path().join("fits"), "t".repeat(limit)).unwrap();
    assert_eq!(load_with_file_secret(dir.path(), "fits"), Ok(()));
    std::fs::write(dir.path().join("big"), "t".repeat(limit + 1)).unwrap();
    let err = load_with_file_secret(dir.path(), "big").unwrap_err();
    assert!(
        err.ends_with(
            "cannot read `big`: a `${file:}` secret is 65537 bytes, over the limit of 64 KiB"
        ),
        "{err}"
    );
}

#[test]
fn body_file_must_be_a_regular_file() {
    let text = "targets:\n  a:\n    url: http://127.0.0.1:1/\n    method: POST\n    body_file: /dev/zero\n";
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let err = sloburn::config::from_str(text, "c.yaml", Path::new("."), &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "c.yaml:5:16: targets.a.body_file: cannot read `/dev/zero`: a `body_file` must be a regular file, and this is a character device"
    );
}

#[test]
fn negative_threshold_durations_are_rejected_at_their_column() {
    let text = "targets:\n  t:\n    url: http://127.0.0.1:1/\nprofiles:\n  p:\n    target: t\n    executor: constant-vus\n    vus: 1\n    duration: 1m\n    thresholds:\n      http_req_duration: [\"p(95)<-20ms\"]\n      http_req_failed: [rate<-0.01]\n";
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let err = sloburn::config::from_str(text, "c.yaml", Path::new("."), &env).unwrap_err();
    assert_eq!(
        err.to_string(),
        "c.yaml:11:34: profiles.p.thresholds.http_req_duration[0]: `p(95)<-20ms`: `-20ms` is negative; the limit is a duration, never below zero\n\
         c.yaml:12:30: profiles.p.thresholds.http_req_failed[0]: `rate<-0.01`: `-0.01` is negative; the limit is a rate (between 0 and 1), never below zero"
    );
}

#[test]
fn control_characters_in_config_values_cannot_forge_diagnostic_lines() {
    let dir = tempfile::tempdir().unwrap();
    // YAML double-quoted escapes put a newline, ESC sequences and a BEL into a key, a value
    // and a name; each is quoted back by a diagnostic.
    let text = concat!(
        "targets:\n",
        "  a:\n",
        "    url: http://127.0.0.1:1/\n",
        "    \"timeout\\nctl.yaml:1:1: forged line\\e[31m\": 1s\n",
        "    method: \"GET\\x1b[2J\"\n",
        "profiles:\n",
        "  \"p\\x1b]0;title\\x07\": {}\n",
    );
    std::fs::write(dir.path().join("ctl.yaml"), text).unwrap();
    let out = sloburn()
        .current_dir(dir.path())
        .args(["check", "ctl.yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78), "{out:?}");
    assert!(
        !out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07),
        "{out:?}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        concat!(
            "ctl.yaml:4:5: targets.a.timeout\\nctl.yaml:1:1: forged line\\u{1b}[31m: unknown field `timeout\\nctl.yaml:1:1: forged line\\u{1b}[31m`\n",
            "ctl.yaml:5:13: targets.a.method: `GET\\u{1b}[2J` is not an HTTP method\n",
            "ctl.yaml:7:3: profiles.p\\u{1b}]0;title\\u{7}: names may use only letters, digits, `-`, `_` and `.` (they become metric label values)\n",
            "ctl.yaml: 3 error(s), 0 warning(s)\n",
        )
    );
    assert_eq!(stdout.lines().count(), 4);
}
