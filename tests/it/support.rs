//! Shared test helpers: runtimes, HTTP requests, polling, the daemon as a child process and
//! in-process, a target on its own thread, Prometheus and other child servers, config
//! templates, golden files, external tools and the `sloburn` binary.
//!
//! Tests reach the library through these helpers where they can, so an API that moves is fixed
//! here once.

use serde_json::Value;
use sloburn::http::{Client, ClientOptions, RequestSpec, Resolver};
use sloburn::target::{StatsSnapshot, Target, TargetOptions};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The admin token of every test config (`${env:TEST_ADMIN_TOKEN}`).
pub const ADMIN_TOKEN: &str = "s3cret-admin";

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Installs the Python parts the OTLP receiver and the gRPC test server need (PyPI's
/// `opentelemetry-proto` and `grpcio`), once per machine; idempotent.
pub fn install_otel_test_tools() {
    let status = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/install-otel-test-tools.sh"
        ))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("install script runs");
    assert!(
        status.success(),
        "scripts/install-otel-test-tools.sh failed"
    );
}

/// Installs hypercorn with its HTTP/3 extra (PyPI), the server of tests/it/h3.rs; idempotent.
pub fn install_h3_test_tools() {
    let status = Command::new("bash")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/install-h3-test-tools.sh"
        ))
        .stdout(std::process::Stdio::null())
        .status()
        .expect("install script runs");
    assert!(status.success(), "scripts/install-h3-test-tools.sh failed");
}

/// Starts profile `profile` through the admin API and waits (at most a minute) until the
/// daemon has `n` finished runs; the runs list, newest first.
pub async fn run_and_wait(base: &str, profile: &str, n: usize) -> serde_json::Value {
    let (code, body) = request(
        "POST",
        &format!("{base}/api/profiles/{profile}/run"),
        Some(ADMIN_TOKEN),
    )
    .await;
    assert_eq!(code, 202, "{body}");
    for _ in 0..600 {
        let (_, runs) = request("GET", &format!("{base}/api/runs"), None).await;
        let v: serde_json::Value = serde_json::from_str(&runs).unwrap();
        let done = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["result"].is_string() && r["result"] != "running")
            .count();
        if done >= n {
            return v["runs"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("run {n} of `{profile}` never finished");
}

/// A one-shot HTTP request with the crate's own client: (status, body).
pub async fn request(method: &str, url: &str, token: Option<&str>) -> (u16, String) {
    let mut headers = http::HeaderMap::new();
    if let Some(t) = token {
        headers.insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let (status, _, body) = request_with(method, url, headers).await;
    (status, body)
}

/// A one-shot HTTP request with the given headers: (status, response headers, body).
pub async fn request_with(
    method: &str,
    url: &str,
    headers: http::HeaderMap,
) -> (u16, http::HeaderMap, String) {
    let client = Client::new(
        ClientOptions {
            timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        },
        Arc::new(Resolver::system()),
    );
    let outcome = client
        .conn()
        .send(&RequestSpec {
            method: method.parse().unwrap(),
            uri: url.parse().unwrap(),
            headers,
            body: bytes::Bytes::new(),
        })
        .await;
    assert!(
        outcome.error.is_none(),
        "{method} {url}: {:?}",
        outcome.error
    );
    (
        outcome.status.unwrap_or(0),
        outcome.headers,
        String::from_utf8_lossy(&outcome.body).into_owned(),
    )
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub fn get_blocking(url: &str) -> (u16, String) {
    block_on(request("GET", url, None))
}

/// `GET url` with the given headers, from a thread without a runtime.
pub fn get_blocking_with(url: &str, headers: http::HeaderMap) -> (u16, http::HeaderMap, String) {
    block_on(request_with("GET", url, headers))
}

/// The value of one sample line `name{labels} value` (labels as written), summed over lines
/// whose series starts with `prefix`.
pub fn metric_sum(exposition: &str, prefix: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(prefix))
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// Polls `f` every 100 ms until it returns Some or `limit` passes.
pub fn eventually<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

/// A free loopback port (bound then released; the race is acceptable for test tools).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The last lines of a child's log file, for failure messages.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Polls `GET url` until it answers 200; nothing may be listening yet.
pub fn wait_ready(url: &str, port: u16, limit: Duration) -> bool {
    eventually(limit, || {
        TcpStream::connect(("127.0.0.1", port)).ok()?;
        (get_blocking(url).0 == 200).then_some(())
    })
    .is_some()
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The fault target.

/// `sloburn target` on 127.0.0.1:0 in the current runtime: its address and the token that stops
/// it.
pub async fn spawn_target(opts: TargetOptions) -> (SocketAddr, CancellationToken) {
    let (t, token) = spawn_target_handle(opts).await;
    (t.addr, token)
}

async fn spawn_target_handle(opts: TargetOptions) -> (Target, CancellationToken) {
    let token = CancellationToken::new();
    let t = sloburn::target::spawn(
        TargetOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..opts
        },
        token.clone(),
    )
    .await
    .unwrap();
    (t, token)
}

/// A target server on its own runtime thread, for child-process tests.
pub struct BackgroundTarget {
    pub addr: SocketAddr,
    stop: CancellationToken,
    target: Arc<Mutex<Option<Target>>>,
    _thread: std::thread::JoinHandle<()>,
}

impl BackgroundTarget {
    pub fn start(opts: TargetOptions) -> BackgroundTarget {
        let (tx, rx) = std::sync::mpsc::channel();
        let slot = Arc::new(Mutex::new(None));
        let slot2 = slot.clone();
        let thread = std::thread::spawn(move || {
            runtime().block_on(async move {
                let (t, stop) = spawn_target_handle(opts).await;
                let addr = t.addr;
                *slot2.lock().unwrap() = Some(t);
                tx.send((addr, stop.clone())).unwrap();
                stop.cancelled().await;
            });
        });
        let (addr, stop) = rx.recv().unwrap();
        BackgroundTarget {
            addr,
            stop,
            target: slot,
            _thread: thread,
        }
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.target.lock().unwrap().as_ref().unwrap().stats()
    }
}

impl Drop for BackgroundTarget {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

// ---------------------------------------------------------------------------------------------
// Configs.

/// Writes `sloburn.yaml` in `dir` the way an editor or a ConfigMap update does (write, then
/// rename), so no half-written file is ever seen; returns its path.
pub fn write_config(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("sloburn.yaml");
    let tmp = dir.join(".sloburn.yaml.tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// 50 requests a second for an hour, from the start.
pub const STEADY_50: &str = "  steady:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 50/s\n    duration: 1h\n";

/// A profile that never runs by itself (no schedule): a daemon that restores and serves.
pub const IDLE: &str =
    "  idle:\n    target: api\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n";

/// good + bad over the first SLO's whole period, from the daemon's API.
pub fn period_events(d: &Daemon) -> u64 {
    let (_, body) = get_blocking(&format!("{}/api/slos", d.base));
    let v: Value = serde_json::from_str(&body).unwrap();
    let p = &v["slos"][0]["period"];
    p["good"].as_u64().unwrap_or(0) + p["bad"].as_u64().unwrap_or(0)
}

/// The `api-availability` SLO on target `api`: 99.9 % over a day.
pub const AVAILABILITY_SLO: &str = "  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 1d\n";

/// A daemon config: admin token from `TEST_ADMIN_TOKEN`, 5 s grace period, storage in `data`
/// flushed every second, target `api` at `target` checking for 200, then `profiles` and `slos`
/// (YAML map entries indented by two spaces).
pub fn daemon_config(target: SocketAddr, data: &Path, profiles: &str, slos: &str) -> String {
    format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
  grace_period: 5s
storage:
  path: "{data}"
  flush_interval: 1s
targets:
  api:
    url: http://{target}/api
    checks:
      - status: 200
profiles:
{profiles}
slos:
{slos}"#,
        data = data.display()
    )
}

/// The environment test configs are read with: only `TEST_ADMIN_TOKEN`.
pub fn test_env() -> sloburn::config::Env {
    let vars = BTreeMap::from([("TEST_ADMIN_TOKEN".to_string(), ADMIN_TOKEN.to_string())]);
    sloburn::config::Env::from_map(vars, 1)
}

/// The daemon in-process on 127.0.0.1:0 with `text` as its fixed config (no file watch).
pub async fn serve_in_process(text: &str, dir: &Path) -> sloburn::daemon::Daemon {
    serve_in_process_with(text, dir, &test_env()).await
}

/// [`serve_in_process`], the config read with `env`.
pub async fn serve_in_process_with(
    text: &str,
    dir: &Path,
    env: &sloburn::config::Env,
) -> sloburn::daemon::Daemon {
    let cfg = sloburn::config::from_str(text, "t.yaml", dir, env)
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    sloburn::daemon::start(sloburn::daemon::Options {
        source: sloburn::daemon::Source::Fixed(Box::new(cfg)),
        listen: Some("127.0.0.1:0".parse().unwrap()),
        shard: sloburn::load::plan::Shard::WHOLE,
        watch: false,
    })
    .await
    .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The daemon as a child process.

/// `sloburn serve` as a child process with JSON logs; knows its address once it is ready.
pub struct Daemon {
    pub child: Child,
    pub base: String,
    pub logs: Arc<Mutex<Vec<String>>>,
}

impl Daemon {
    pub fn start(config: &Path, extra: &[&str]) -> Daemon {
        Daemon::spawn(Daemon::command(config, extra))
    }

    /// Like `start`, with the child's `RLIMIT_NOFILE` (soft and hard) set to `nofile`.
    pub fn start_with_fd_limit(config: &Path, extra: &[&str], nofile: u64) -> Daemon {
        let mut cmd = Daemon::command(config, extra);
        with_nofile(&mut cmd, nofile, nofile);
        Daemon::spawn(cmd)
    }

    /// `sloburn serve` on 127.0.0.1:0 with JSON logs and the test token, not yet started.
    pub fn command(config: &Path, extra: &[&str]) -> Command {
        let mut cmd = sloburn();
        cmd.args([
            "serve",
            "--log-format",
            "json",
            "--listen",
            "127.0.0.1:0",
            "--config",
        ])
        .arg(config)
        .args(extra)
        .env("TEST_ADMIN_TOKEN", ADMIN_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        cmd
    }

    /// Spawns `cmd` (from `Daemon::command`) and waits for its "sloburn ready" line.
    pub fn spawn(mut cmd: Command) -> Daemon {
        let mut child = cmd.spawn().unwrap();
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let logs2 = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("sloburn ready") {
                    let v: Value = serde_json::from_str(&line).unwrap_or_default();
                    if let Some(a) = v["addr"].as_str() {
                        let _ = tx.send(a.to_string());
                    }
                }
                logs2.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("daemon did not become ready: {:?}", logs.lock().unwrap()));
        Daemon {
            child,
            base: format!("http://{addr}"),
            logs,
        }
    }

    pub fn metrics(&self) -> String {
        get_blocking(&format!("{}/metrics", self.base)).1
    }

    /// Waits up to `limit` until `/metrics` counts at least `n` events of the `api-availability`
    /// SLO; returns the count seen, or fails the test.
    pub fn slo_events_at_least(&self, n: u64, limit: Duration) -> u64 {
        eventually(limit, || {
            let seen = metric_sum(
                &self.metrics(),
                "sloburn_slo_events_total{slo=\"api-availability\"",
            );
            (seen >= n as f64).then_some(seen as u64)
        })
        .expect("no SLO events counted")
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0);
    }

    /// Waits for exit up to `limit`; returns the exit code.
    pub fn wait(&mut self, limit: Duration) -> Option<i32> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

/// Raises this process's soft fd limit to its hard limit (tests that open many sockets).
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write only the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Any `sloburn` command as a child process.

/// A `sloburn` child whose stdout and stderr are collected line by line; killed on drop.
pub struct Proc {
    pub child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Proc {
    /// `sloburn ARGS`.
    pub fn start<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Proc {
        let mut child = sloburn()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let collect = |pipe: Box<dyn std::io::Read + Send>| {
            let lines = Arc::new(Mutex::new(Vec::new()));
            let sink = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(line);
                }
            });
            lines
        };
        let stdout = collect(Box::new(child.stdout.take().unwrap()));
        let stderr = collect(Box::new(child.stderr.take().unwrap()));
        Proc {
            child,
            stdout,
            stderr,
        }
    }

    /// `sloburn target --listen 127.0.0.1:0 ARGS`, once it prints its address: (child, base URL).
    pub fn target(args: &[&str]) -> (Proc, String) {
        let p = Proc::start(
            ["target", "--listen", "127.0.0.1:0", "--workers", "1"]
                .iter()
                .chain(args),
        );
        let base = eventually(Duration::from_secs(20), || {
            p.stdout()
                .lines()
                .find_map(|l| l.strip_prefix("sloburn target listening on "))
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("the target did not start: {}", p.stderr()));
        (p, base)
    }

    /// Everything the child has printed on stdout so far.
    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().join("\n")
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: plain kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0);
    }

    /// Waits for exit up to `limit`, then for its output to be read; None while it still runs.
    pub fn wait(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Each reader thread holds a clone until EOF, which follows the exit closely.
                eventually(Duration::from_secs(5), || {
                    (Arc::strong_count(&self.stdout) == 1 && Arc::strong_count(&self.stderr) == 1)
                        .then_some(())
                });
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Child servers: Prometheus, Alertmanager.

/// A child server (Prometheus, Alertmanager) with its log file; killed on drop.
pub struct Server {
    child: Child,
    pub base: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    pub fn spawn(cmd: &mut Command, dir: tempfile::TempDir, port: u16) -> Server {
        let log = dir.path().join("log.txt");
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap();
        Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        }
    }

    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }

    /// A real Prometheus scraping `scrape` every second, evaluating `rules` (if any) every
    /// `eval_interval` and sending alerts to the Alertmanager at `am` (if any).
    pub fn prometheus(
        scrape: &str,
        rules: Option<&Path>,
        eval_interval: &str,
        am: Option<&str>,
    ) -> Server {
        let cfg = format!(
            r#"global:
  scrape_interval: 1s
  evaluation_interval: {eval_interval}
{rule_files}{alerting}scrape_configs:
  - job_name: sloburn
    static_configs:
      - targets: ["{scrape}"]
"#,
            rule_files = rules
                .map(|r| format!("rule_files: [\"{}\"]\n", r.display()))
                .unwrap_or_default(),
            alerting = am
                .map(|a| format!("alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: [\"{a}\"]\n"))
                .unwrap_or_default(),
        );
        Server::prometheus_with_config(&cfg, &[])
    }

    /// A real Prometheus with `config` as its `prometheus.yml` and `flags` (feature flags)
    /// besides its config, storage and listen flags; ready when this returns.
    pub fn prometheus_with_config(config: &str, flags: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let cfg_path = dir.path().join("prometheus.yml");
        std::fs::write(&cfg_path, config).unwrap();
        let port = free_port();
        let mut cmd = Command::new(which("prometheus"));
        cmd.arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(flags);
        let prom = Server::spawn(&mut cmd, dir, port);
        let ready = wait_ready(
            &format!("{}/-/ready", prom.base),
            port,
            Duration::from_secs(30),
        );
        assert!(ready, "prometheus did not start:\n{}", prom.log_tail());
        prom
    }

    pub fn api(&self, path: &str) -> Value {
        let (code, body) = get_blocking(&format!("{}{path}", self.base));
        assert_eq!(code, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Instant query: (labels, value) per series.
    pub fn query(&self, q: &str) -> Vec<(Value, f64)> {
        let v = self.api(&format!("/api/v1/query?query={}", urlencode(q)));
        v["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|r| {
                let value = r["value"][1]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(f64::NAN);
                (r["metric"].clone(), value)
            })
            .collect()
    }

    /// The one value of `q`; NaN when it has no series.
    pub fn scalar(&self, q: &str) -> f64 {
        let r = self.query(q);
        assert!(r.len() <= 1, "{q}: {r:?}");
        r.first().map_or(f64::NAN, |(_, v)| *v)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Tools and the binary.

/// `tool` from PATH, if it is there.
pub fn find_in_path(tool: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|p| p.join(tool))
        .find(|p| p.is_file())
}

/// `tool` from PATH; fails the test saying how to install it.
pub fn which(tool: &str) -> PathBuf {
    let install = match tool {
        "prometheus" | "promtool" => "run `make test` (it installs Debian's prometheus package)",
        _ => "run `bash scripts/install-k8s-test-tools.sh` (make test does)",
    };
    find_in_path(tool).unwrap_or_else(|| panic!("{tool} not found in PATH: {install}"))
}

/// The `sloburn` binary under test.
pub fn sloburn() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sloburn"))
}

/// Limits the address space of the child `cmd` starts (`RLIMIT_AS`, as `prlimit --as` does),
/// so a child that tries to allocate without bound fails inside the limit instead of taking
/// the machine's memory.
pub fn limit_address_space(cmd: &mut Command, bytes: u64) -> &mut Command {
    with_rlimit(cmd, libc::RLIMIT_AS, bytes, bytes)
}

/// Runs `cmd`; fails the test with its output unless it succeeds. Returns stdout.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `sloburn rules ARGS`: the generated rules.
pub fn sloburn_rules<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    stdout_of(sloburn().arg("rules").args(args))
}

/// A finished child's stdout followed by its stderr, as text.
pub fn all_output(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` with `input` on its standard input; its whole output.
pub fn pipe_through(cmd: &mut Command, input: &[u8]) -> std::process::Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `promtool check metrics` on `text`: (success, what it said).
pub fn promtool_check_metrics(text: &str) -> (bool, String) {
    let out = pipe_through(
        Command::new(which("promtool")).args(["check", "metrics"]),
        text.as_bytes(),
    );
    let said = all_output(&out);
    (out.status.success(), said)
}

// ---------------------------------------------------------------------------------------------
// Golden files.

/// Compares `actual` with the checked-in golden file at `path`; `UPDATE_GOLDEN=1` rewrites it.
pub fn golden(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} drifted at line {}; review and rerun with UPDATE_GOLDEN=1\n--- golden\n{}\n+++ actual\n{}",
            path.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            actual.lines().nth(line).unwrap_or("<end>"),
        );
    }
}

/// Starts `cmd` with `RLIMIT_NOFILE` set to `soft`/`hard` in the child only.
pub fn with_nofile(cmd: &mut Command, soft: u64, hard: u64) -> &mut Command {
    with_rlimit(cmd, libc::RLIMIT_NOFILE, soft, hard)
}

/// Starts `cmd` with `resource` limited to `soft`/`hard` in the child only.
fn with_rlimit(
    cmd: &mut Command,
    resource: libc::__rlimit_resource_t,
    soft: u64,
    hard: u64,
) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the closure only calls setrlimit, which is async-signal-safe,
    // on a plain value copied into it.
    unsafe {
        cmd.pre_exec(move || {
            let rl = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(resource, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    }
}

/// A test's own HTTP server (an axum `Router`) on 127.0.0.1, on its own thread and runtime, so
/// it shares no worker with the test's runtime or the daemon it serves; stopped when dropped.
pub struct ThreadServer {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Serves `app` on a free port of 127.0.0.1 until the returned handle is dropped.
pub fn serve_on_thread(app: axum::Router) -> ThreadServer {
    on_thread(|listener, stopped| async move {
        // Not a graceful stop: requests still held (a stalled answer) end with the runtime.
        tokio::select! {
            _ = axum::serve(listener, app) => {}
            _ = stopped => {}
        }
    })
}

/// Accepts connections on a free port of 127.0.0.1 and hands each to `accept` (which spawns
/// its task), until the returned handle is dropped: for a test server that is no framework.
pub fn serve_raw_on_thread<F>(accept: F) -> ThreadServer
where
    F: Fn(tokio::net::TcpStream) -> tokio::task::JoinHandle<()> + Send + 'static,
{
    on_thread(|listener, mut stopped| async move {
        loop {
            tokio::select! {
                got = listener.accept() => match got {
                    Ok((sock, _)) => {
                        let _ = sock.set_nodelay(true);
                        drop(accept(sock));
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                _ = &mut stopped => break,
            }
        }
    })
}

/// Runs `serve` on its own thread and current-thread runtime with a listener on a free port
/// of 127.0.0.1; it stops when `stopped` fires (the handle is dropped).
fn on_thread<S, Fut>(serve: S) -> ThreadServer
where
    S: FnOnce(tokio::net::TcpListener, tokio::sync::oneshot::Receiver<()>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            serve(listener, stopped).await;
        });
        rt.shutdown_timeout(Duration::from_secs(1));
    });
    ThreadServer {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `promtool test rules test.yml` in `dir` (beside the `rules.yml` it names); fails the test
/// with promtool's output and the rules when a case does not hold.
pub fn promtool_test_rules(dir: &Path, rules: &str) {
    let out = Command::new(which("promtool"))
        .current_dir(dir)
        .args(["test", "rules", "test.yml"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}\n{rules}", all_output(&out));
}

/// What [`run_capped`] saw of a child: its output, its peak resident memory (`VmHWM` of
/// `/proc/PID/status`, in bytes, read every 5 ms while it ran) and how long it ran.
pub struct Capped {
    pub out: std::process::Output,
    pub peak_rss: u64,
    pub took: Duration,
}

impl Capped {
    /// `peak MiB in seconds`, for a test's report line.
    pub fn figure(&self) -> String {
        format!(
            "peak RSS {:.1} MiB in {:.2} s",
            self.peak_rss as f64 / (1 << 20) as f64,
            self.took.as_secs_f64()
        )
    }
}

/// Runs `cmd` under `cap` bytes of address space ([`limit_address_space`]), reading its peak
/// RSS as it runs (`ru_maxrss` will not do: a forked child starts from the test's own RSS), and
/// reaps it with `wait4`.
#[allow(clippy::zombie_processes)] // reaped by wait4, which `Child` does not know of
pub fn run_capped(cmd: &mut Command, cap: u64) -> Capped {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    limit_address_space(cmd, cap);
    let started = std::time::Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let status_file = format!("/proc/{}/status", child.id());
    let peak = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let hwm = std::fs::read_to_string(&status_file).ok().and_then(|s| {
                    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
                    line.split_whitespace().nth(1)?.parse::<u64>().ok()
                });
                peak = peak.max(hwm.unwrap_or(0) * 1024);
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the child is ours and not yet reaped; both pointers are to live locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as libc::pid_t, "wait4 reaps the child");
    let took = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak_rss = peak.join().unwrap();
    let _ = usage;
    Capped {
        out: std::process::Output {
            status: std::process::ExitStatus::from_raw(status),
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        },
        peak_rss,
        took,
    }
}
