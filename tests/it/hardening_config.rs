//! Issue 30, items 1, 8 and 10, against the real binary: a mapping past the key cap is a
//! positioned error and a reload of a big config never stops `/metrics`; `rules` and
//! `openslo export` accept the token references `check` accepts; a bearer token with extra
//! whitespace is a wrong token, on the admin and the hook paths.

use crate::support::{ADMIN_TOKEN, Daemon, IDLE, all_output, eventually, sloburn, write_config};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// `MAX_MAP_KEYS`, the keys one mapping may hold.
const CAP: usize = 10_000;

/// A minimal valid config with `slos` whose SLO `s{j}` has the `labels` of `labels(j)`.
fn config_with_labels(slos: usize, labels: impl Fn(usize) -> String) -> String {
    let mut text = String::from("targets:\n  api:\n    url: http://127.0.0.1:9/\nslos:\n");
    for j in 0..slos {
        text.push_str(&format!(
            "  s{j}:\n    target: api\n    sli: availability\n    objective: 99\n    labels: {}\n",
            labels(j)
        ));
    }
    text
}

/// A flow mapping of `n` labels `l0: v, l1: v, ...`.
fn flow_labels(n: usize) -> String {
    let keys: Vec<String> = (0..n).map(|i| format!("l{i}: v")).collect();
    format!("{{{}}}", keys.join(", "))
}

/// `sloburn ARGS` with `env`: (exit code, stdout and stderr).
fn run(args: &[&str], file: &Path, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = sloburn();
    cmd.args(args).arg(file).env_remove("A").env_remove("B");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), all_output(&out))
}

#[test]
fn a_mapping_past_the_key_cap_is_an_error_at_its_first_key_too_many() {
    let dir = tempfile::tempdir().unwrap();
    // At the cap, in block style: parses fully and validates.
    let block: String = (0..CAP).map(|i| format!("      l{i}: v\n")).collect();
    let at_cap = write_config(
        dir.path(),
        &config_with_labels(1, |_| format!("\n{block}")).replace("labels: \n", "labels:\n"),
    );
    let (code, out) = run(&["check"], &at_cap, &[]);
    assert_eq!(code, 0, "{CAP} keys are allowed: {}", tail(&out));

    // One more: the error names the line and column of key CAP + 1 and the mapping's line.
    let over: String = (0..=CAP).map(|i| format!("      l{i}: v\n")).collect();
    let text = config_with_labels(1, |_| format!("\n{over}")).replace("labels: \n", "labels:\n");
    let first = text.lines().position(|l| l == "      l0: v").unwrap() + 1;
    let path = write_config(dir.path(), &text);
    let (code, out) = run(&["check"], &path, &[]);
    assert_eq!(code, 78, "{}", tail(&out));
    let expected = format!(
        "sloburn.yaml:{}:7: YAML syntax: the mapping that starts at line {first} has more than \
         {CAP} keys, the limit",
        first + CAP
    );
    assert!(out.contains(&expected), "{expected}\n{}", tail(&out));
    // `rules` reads configs the same way.
    let (code, out) = run(&["rules"], &path, &[]);
    assert_eq!(code, 78, "{}", tail(&out));
    assert!(out.contains(&expected), "{}", tail(&out));
}

#[test]
fn a_duplicate_key_far_from_the_first_names_both_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut block: String = (0..5_000).map(|i| format!("      l{i}: v\n")).collect();
    block.push_str("      l7: again\n");
    let text = config_with_labels(1, |_| format!("\n{block}")).replace("labels: \n", "labels:\n");
    let first = text.lines().position(|l| l == "      l7: v").unwrap() + 1;
    let dup = text.lines().position(|l| l == "      l7: again").unwrap() + 1;
    let path = write_config(dir.path(), &text);
    let (code, out) = run(&["check"], &path, &[]);
    assert_eq!(code, 78, "{}", tail(&out));
    let expected =
        format!("sloburn.yaml:{dup}:7: YAML syntax: duplicate key `l7` (first at line {first})");
    assert!(out.contains(&expected), "{expected}\n{}", tail(&out));
}

#[test]
fn unknown_references_among_many_names_cost_one_line_each() {
    // 2,000 targets, 2,000 profiles naming targets that do not exist: each error names at
    // most ten known targets, so the report grows with the errors, not their product.
    let n = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("targets:\n");
    for i in 0..n {
        text.push_str(&format!("  t{i}: {{url: \"http://127.0.0.1:9/\"}}\n"));
    }
    text.push_str("profiles:\n");
    for i in 0..n {
        text.push_str(&format!(
            "  p{i}: {{target: nowhere{i}, executor: constant-vus, vus: 1, duration: 1s}}\n"
        ));
    }
    let path = write_config(dir.path(), &text);
    let (code, out) = run(&["check"], &path, &[]);
    assert_eq!(code, 78);
    let errors: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("unknown target"))
        .collect();
    assert_eq!(errors.len(), n, "{}", tail(&out));
    assert!(
        errors[0].ends_with("unknown target `nowhere0` (known: t0, t1, t2, t3, t4, t5, t6, t7, t8, t9 and 1990 more)"),
        "{}",
        errors[0]
    );
    let longest = out.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 300, "a line of {longest} bytes");
}

/// The status line of `method path` sent over a fresh connection with `headers` and `body`
/// written byte for byte (a trailing space stays a trailing space).
fn raw(base: &str, method: &str, path: &str, headers: &str, body: &str) -> String {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_bearer_token_with_extra_whitespace_is_a_wrong_token() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  hook_token: \"${{env:HOOK}}\"\n\
             storage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://127.0.0.1:9/\nprofiles:\n{IDLE}",
            dir.path().join("data").display()
        ),
    );
    let mut cmd = Daemon::command(&config, &[]);
    cmd.env("HOOK", "h00k-token");
    let d = Daemon::spawn(cmd);
    let pause = |auth: &str| raw(&d.base, "POST", "/api/profiles/idle/pause", auth, "");
    assert!(pause(&format!("Authorization: Bearer {ADMIN_TOKEN}\r\n")).contains(" 200 "));
    // HTTP/1.1 takes the whitespace around a field's value off (RFC 9110, 5.5), so a token
    // with a trailing space never reaches the check; whitespace inside the value does.
    for (what, header) in [
        (
            "two spaces",
            format!("Authorization: Bearer  {ADMIN_TOKEN}\r\n"),
        ),
        (
            "a space and a tab",
            format!("Authorization: Bearer \t{ADMIN_TOKEN}\r\n"),
        ),
        ("a tab", format!("Authorization: Bearer\t{ADMIN_TOKEN}\r\n")),
    ] {
        let status = pause(&header);
        assert!(
            status.contains(" 401 "),
            "admin token with {what}: {status}"
        );
    }
    // The hook: a right token gets past the check to the payload (400: neither mode).
    let hook = |auth: &str, body: &str| raw(&d.base, "POST", "/api/hooks/flagger", auth, body);
    let empty = r#"{"name":"c","namespace":"n","phase":"pre-rollout","metadata":{}}"#;
    assert!(hook("Authorization: Bearer h00k-token\r\n", empty).contains(" 400 "));
    for (what, header) in [
        ("two spaces", "Authorization: Bearer  h00k-token\r\n"),
        ("three spaces", "Authorization: Bearer   h00k-token\r\n"),
    ] {
        let status = hook(header, empty);
        assert!(status.contains(" 401 "), "hook token with {what}: {status}");
    }
    let meta = |token: &str| {
        format!(
            r#"{{"name":"c","namespace":"n","phase":"pre-rollout","metadata":{{"token":"{token}"}}}}"#
        )
    };
    assert!(hook("", &meta("h00k-token")).contains(" 400 "));
    for token in [" h00k-token", "h00k-token "] {
        let status = hook("", &meta(token));
        assert!(
            status.contains(" 401 "),
            "metadata token `{token}`: {status}"
        );
    }
    // Each refused one was counted as a wrong token.
    let wrong = crate::support::metric_sum(
        &d.metrics(),
        "sloburn_admin_auth_failures_total{reason=\"wrong\"}",
    );
    assert_eq!(
        wrong, 6.0,
        "each padded token is a wrong one (the tab alone: missing)"
    );
}

/// The server section with two token references, and an SLO to export and make rules of.
fn token_config(dir: &Path, admin: &str, hook: &str) -> String {
    format!(
        "server:\n  admin_token: \"{admin}\"\n  hook_token: \"{hook}\"\nstorage:\n  path: \"{}\"\n\
         targets:\n  api:\n    url: http://127.0.0.1:9/\n\
         slos:\n  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n",
        dir.join("data").display()
    )
}

#[test]
fn check_rules_export_and_serve_agree_on_the_admin_and_hook_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let commands: [&[&str]; 3] = [&["check"], &["rules"], &["openslo", "export"]];
    let differ = "the hook token must differ from the admin token";

    // Two references to different secrets: every command accepts it, the daemon serves.
    let path = write_config(
        dir.path(),
        &token_config(dir.path(), "${env:A}", "${env:B}"),
    );
    let env = [("A", "admin-secret"), ("B", "hook-secret")];
    for args in commands {
        let (code, out) = run(args, &path, &env);
        assert_eq!(code, 0, "{args:?}: {out}");
    }
    // Without the secrets `check` cannot read them, while `rules` and `export` need none.
    assert_eq!(run(&["check"], &path, &[]).0, 78);
    assert_eq!(run(&["rules"], &path, &[]).0, 0);
    assert_eq!(run(&["openslo", "export"], &path, &[]).0, 0);
    let serve = |env: &[(&str, &str)]| {
        let port = crate::support::free_port().to_string();
        let mut cmd = sloburn();
        cmd.args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--config",
        ])
        .arg(&path)
        .env_remove("A")
        .env_remove("B")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let status = eventually(Duration::from_secs(20), || child.try_wait().unwrap());
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        (status.and_then(|s| s.code()), all_output(&out))
    };
    let (code, out) = serve(&env);
    assert_eq!(code, None, "serve keeps running: {out}");

    // The same reference twice: every command refuses it, at the hook token.
    let path = write_config(
        dir.path(),
        &token_config(dir.path(), "${env:A}", "${env:A}"),
    );
    for args in commands {
        let (code, out) = run(args, &path, &env);
        assert_eq!(code, 78, "{args:?}: {out}");
        assert!(
            out.contains("sloburn.yaml:3:15: server.hook_token:"),
            "{args:?}: {out}"
        );
        assert!(out.contains(differ), "{args:?}: {out}");
    }
    let (code, out) = serve(&env);
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains(differ), "{out}");

    // Two references that resolve to the same secret: the commands that resolve them refuse;
    // `rules` and `export` never read them.
    let path = write_config(
        dir.path(),
        &token_config(dir.path(), "${env:A}", "${env:B}"),
    );
    let same = [("A", "one-secret"), ("B", "one-secret")];
    let (code, out) = run(&["check"], &path, &same);
    assert_eq!(code, 78, "{out}");
    assert!(out.contains(differ), "{out}");
    assert!(
        !out.contains("one-secret"),
        "the secret is never shown: {out}"
    );
    let (code, out) = serve(&same);
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains(differ), "{out}");
    assert_eq!(run(&["rules"], &path, &same).0, 0);
    assert_eq!(run(&["openslo", "export"], &path, &same).0, 0);
}

#[test]
fn a_reload_of_a_big_config_never_stops_metrics() {
    // One runtime worker, so a reload parsed on it would stop every answer until it ends.
    let dir = tempfile::tempdir().unwrap();
    let small = config_with_labels(1, |_| "{team: a}".into());
    let small = format!(
        "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\nstorage:\n  path: \"{}\"\n{small}",
        dir.path().join("data").display()
    );
    let config = write_config(dir.path(), &small);
    let mut cmd = Daemon::command(&config, &["--no-watch"]);
    cmd.env("TOKIO_WORKER_THREADS", "1");
    let d = Daemon::spawn(cmd);
    // 25 SLOs of 10,000 labels each: 250,000 keys, about 2.5 MB, seconds of parsing.
    let big_slos: String = (0..25)
        .map(|j| {
            format!(
                "  big{j}:\n    target: api\n    sli: availability\n    objective: 99\n    labels: {}\n",
                flow_labels(CAP)
            )
        })
        .collect();
    let big = format!("{small}{big_slos}");
    write_config(dir.path(), &big);

    let base = d.base.clone();
    let started = Instant::now();
    let reload = std::thread::spawn(move || {
        let status = raw(
            &base,
            "POST",
            "/api/reload",
            &format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"),
            "",
        );
        (status, started.elapsed())
    });
    // Scrapes one after another while the reload runs (bounded: at most 2,000 of them).
    let mut answered = Vec::new();
    for i in 0..2_000 {
        if reload.is_finished() {
            break;
        }
        let path = if i % 2 == 0 { "/metrics" } else { "/healthz" };
        let t = Instant::now();
        let status = raw(&d.base, "GET", path, "", "");
        if !reload.is_finished() {
            answered.push((status, t.elapsed()));
        }
    }
    let (status, took) = reload.join().unwrap();
    assert!(status.contains(" 200 "), "the reload: {status}");
    assert!(
        d.metrics()
            .contains("sloburn_slo_objective_ratio{slo=\"big24\"}")
    );
    // Every scrape during the reload answered, each in a small part of the reload's time.
    assert!(
        answered.len() >= 3,
        "{} scrapes during a {took:?} reload",
        answered.len()
    );
    let slowest = answered.iter().map(|(_, t)| *t).max().unwrap();
    for (status, _) in &answered {
        assert!(status.contains(" 200 "), "{status}");
    }
    assert!(
        slowest * 3 < took,
        "the slowest of {} scrapes took {slowest:?}, the reload {took:?}",
        answered.len()
    );
}

/// The last lines of a command's output, for failure messages.
fn tail(out: &str) -> String {
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}
