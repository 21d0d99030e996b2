//! `run --shard i/N --collect URL`'s collector: with a token, a join or a share that lacks it
//! (or brings a wrong one) is refused 401 and the run's verdict comes from the rightful shards
//! alone; without one it warns, once, that it is unauthenticated. It serves on the daemon's
//! server, so sockets that never send a byte cannot lock the shards out, even past its
//! descriptors.

use crate::support::{BackgroundTarget, eventually, free_port, sloburn, with_nofile};
use serde_json::Value;
use sloburn::target::TargetOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "collect-4f1d0c7e9b";

/// One `sloburn run` process of a collected run, its output in files.
struct Shard {
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Shard {
    /// `sloburn run` of shard `i`/3 against `target`, collected on 127.0.0.1:`port`.
    fn command(dir: &Path, i: u32, port: u16, target: SocketAddr) -> Command {
        let mut cmd = sloburn();
        cmd.env_remove("SLOBURN_COLLECT_TOKEN").args([
            "run".to_string(),
            "--url".into(),
            format!("http://{target}/"),
            "--rate".into(),
            "30/s".into(),
            "--duration".into(),
            "2s".into(),
            "--max-vus".into(),
            "10".into(),
            "--shard".into(),
            format!("{i}/3"),
            "--collect".into(),
            format!("http://127.0.0.1:{port}"),
            "--collect-listen".into(),
            format!("127.0.0.1:{port}"),
            "--collect-timeout".into(),
            "5s".into(),
            "--summary-export".into(),
            dir.join(format!("summary-{i}.json")).display().to_string(),
            "--quiet".into(),
        ]);
        cmd
    }

    fn start(dir: &Path, i: u32, mut cmd: Command) -> Shard {
        let out = dir.join(format!("out-{i}"));
        let err = dir.join(format!("err-{i}"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Shard { child, out, err }
    }

    /// The exit code, within 60 s (killed past it).
    fn code(&mut self) -> i32 {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("still running after 60 s: {}", self.stderr());
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST path` with `body` and the `Authorization` header `auth` on a connection of its own:
/// the status code, or why there is none.
fn post(port: u16, path: &str, auth: Option<&str>, body: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: c\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    s.read_to_string(&mut answer).map_err(|e| e.to_string())?;
    answer
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status in {answer:?}"))
}

/// The merged summary-export of shard 0.
fn requests_of_the_whole_run(dir: &Path) -> u64 {
    let export: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary-0.json")).unwrap())
            .unwrap();
    export["metrics"]["http_reqs"]["count"].as_u64().unwrap()
}

#[test]
fn a_join_or_a_share_without_the_collect_token_is_refused_and_the_rightful_shards_give_the_verdict()
{
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The three ways to give the token: a reference on the command line, the environment
    // variable, the value itself.
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    cmd.env("COLLECT_TEST_TOKEN", TOKEN)
        .args(["--collect-token", "${env:COLLECT_TEST_TOKEN}"]);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let join = r#"{"shard":1,"count":3,"profile":"url"}"#;
    let first = eventually(Duration::from_secs(20), || {
        post(port, "/v1/join", None, join).ok()
    })
    .unwrap_or_else(|| panic!("the collector did not listen: {}", collector.stderr()));
    assert_eq!(first, 401, "a join without a token");
    let wrong = format!("Bearer {TOKEN}x");
    let spaced = format!("Bearer  {TOKEN}");
    for auth in [Some(wrong.as_str()), Some(spaced.as_str()), Some(TOKEN)] {
        assert_eq!(post(port, "/v1/join", auth, join), Ok(401), "{auth:?}");
    }
    for auth in [None, Some(wrong.as_str())] {
        assert_eq!(
            post(port, "/v1/shares/1", auth, "{}"),
            Ok(401),
            "a share with {auth:?}"
        );
    }
    let mut cmd = Shard::command(dir.path(), 1, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut one = Shard::start(dir.path(), 1, cmd);
    let mut cmd = Shard::command(dir.path(), 2, port, target.addr);
    cmd.args(["--collect-token", TOKEN]);
    let mut two = Shard::start(dir.path(), 2, cmd);
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(
        codes,
        [0, 0, 0],
        "{}\n{}\n{}",
        collector.stderr(),
        one.stderr(),
        two.stderr()
    );
    assert!(
        collector.stdout().contains("every one of 3 shards"),
        "{}",
        collector.stdout()
    );
    assert_eq!(requests_of_the_whole_run(dir.path()), 60);
    let err = collector.stderr();
    assert!(err.contains("refused 6 calls"), "{err}");
    assert!(!err.contains("unauthenticated"), "{err}");
    // The token is never printed.
    for s in [&collector, &one, &two] {
        assert!(!s.stdout().contains(TOKEN) && !s.stderr().contains(TOKEN));
    }
}

#[test]
fn a_shard_with_a_wrong_collect_token_is_refused_and_named_by_the_collector() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let mut cmd = Shard::command(dir.path(), 1, port, target.addr);
    cmd.env("SLOBURN_COLLECT_TOKEN", TOKEN);
    let mut one = Shard::start(dir.path(), 1, cmd);
    let mut cmd = Shard::command(dir.path(), 2, port, target.addr);
    cmd.args(["--collect-token", "not-the-token"]);
    let mut two = Shard::start(dir.path(), 2, cmd);
    assert_eq!(two.code(), 1, "{}", two.stderr());
    assert!(
        two.stderr().contains("wrong bearer token"),
        "{}",
        two.stderr()
    );
    assert_eq!(
        [collector.code(), one.code()],
        [75, 0],
        "{}",
        collector.stderr()
    );
    let err = collector.stderr();
    assert!(err.contains("[2]") && err.contains("shard 2"), "{err}");
}

#[test]
fn idle_sockets_past_its_descriptors_do_not_lock_the_shards_out_of_the_collector() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // 128 descriptors: 10 VUs, the reserve, and a server that keeps to a quarter.
    let mut cmd = Shard::command(dir.path(), 0, port, target.addr);
    with_nofile(&mut cmd, 128, 128);
    let mut collector = Shard::start(dir.path(), 0, cmd);
    let listening = eventually(Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).ok()
    });
    assert!(listening.is_some(), "{}", collector.stderr());
    // 150 sockets that never send a byte: more than the collector has descriptors.
    let idle: Vec<TcpStream> = (0..150)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert!(idle.len() >= 140, "only {} connections opened", idle.len());
    let mut one = Shard::start(
        dir.path(),
        1,
        Shard::command(dir.path(), 1, port, target.addr),
    );
    let mut two = Shard::start(
        dir.path(),
        2,
        Shard::command(dir.path(), 2, port, target.addr),
    );
    let codes = [collector.code(), one.code(), two.code()];
    assert_eq!(codes, [0, 0, 0], "{}", collector.stderr());
    assert_eq!(requests_of_the_whole_run(dir.path()), 60);
    // Without a token: one warning, on the collector only.
    let err = collector.stderr();
    assert_eq!(err.matches("unauthenticated").count(), 1, "{err}");
    assert!(!one.stderr().contains("unauthenticated"));
    drop(idle);
}
