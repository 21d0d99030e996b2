//! The daemon as users run it: in-process for the API and the demo, as a real child process for
//! reloads, signals and crashes, and scraped by a real Prometheus.

use serde_json::Value;
use sloburn::http::{Client, ClientOptions, RequestSpec, Resolver};
use sloburn::target::{TargetOptions, spawn};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A one-shot HTTP request with the crate's own client: (status, body).
pub async fn request(method: &str, url: &str, token: Option<&str>) -> (u16, String) {
    let client = Client::new(
        ClientOptions {
            timeout: Duration::from_secs(10),
            ..ClientOptions::default()
        },
        Arc::new(Resolver::system()),
    );
    let mut headers = http::HeaderMap::new();
    if let Some(t) = token {
        headers.insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
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
        String::from_utf8_lossy(&outcome.body).into_owned(),
    )
}

pub fn get_blocking(url: &str) -> (u16, String) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(request("GET", url, None))
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

/// A target server on its own runtime thread, for child-process tests.
pub struct BackgroundTarget {
    pub addr: std::net::SocketAddr,
    stop: CancellationToken,
    stats: Arc<std::sync::Mutex<Option<sloburn::target::Target>>>,
    _thread: std::thread::JoinHandle<()>,
}

impl BackgroundTarget {
    pub fn start(opts: TargetOptions) -> BackgroundTarget {
        let stop = CancellationToken::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let slot = Arc::new(std::sync::Mutex::new(None));
        let (stop2, slot2) = (stop.clone(), slot.clone());
        let thread = std::thread::spawn(move || {
            let rt = runtime();
            rt.block_on(async move {
                let t = spawn(
                    TargetOptions {
                        listen: "127.0.0.1:0".parse().unwrap(),
                        ..opts
                    },
                    stop2.clone(),
                )
                .await
                .unwrap();
                tx.send(t.addr).unwrap();
                *slot2.lock().unwrap() = Some(t);
                stop2.cancelled().await;
            });
        });
        let addr = rx.recv().unwrap();
        BackgroundTarget {
            addr,
            stop,
            stats: slot,
            _thread: thread,
        }
    }

    pub fn stats(&self) -> sloburn::target::StatsSnapshot {
        self.stats.lock().unwrap().as_ref().unwrap().stats()
    }
}

impl Drop for BackgroundTarget {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// `sloburn serve` as a child process with JSON logs; knows its address once it is ready.
pub struct Daemon {
    pub child: Child,
    pub base: String,
    pub logs: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Daemon {
    pub fn start(config: &Path, extra: &[&str]) -> Daemon {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sloburn"))
            .args([
                "serve",
                "--log-format",
                "json",
                "--listen",
                "127.0.0.1:0",
                "--config",
            ])
            .arg(config)
            .args(extra)
            .env("TEST_ADMIN_TOKEN", "s3cret-admin")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let logs = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let logs2 = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("sloburn ready") {
                    let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
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

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn write_config(dir: &Path, body: &str) -> std::path::PathBuf {
    let path = dir.join("sloburn.yaml");
    // Write then rename, as an editor or a ConfigMap update does: no half-written file is seen.
    let tmp = dir.join(".sloburn.yaml.tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn base_config(target: std::net::SocketAddr, data: &Path, extra_profiles: &str) -> String {
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
  steady:
    target: api
    every: 1h
    run_on_start: true
    executor: constant-arrival-rate
    rate: 50/s
    duration: 1h
{extra_profiles}
slos:
  api-availability:
    target: api
    sli: availability
    objective: 99.9
    period: 1d
"#,
        data = data.display()
    )
}

#[test]
fn hot_reload_adds_profiles_rejects_bad_configs_and_follows_sighup() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &["--no-watch"]);

    // A valid change with SIGHUP: the new profile shows up in the API and in /metrics.
    let added = "  burst:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: shared-iterations\n    vus: 2\n    iterations: 20\n";
    write_config(dir.path(), &base_config(target.addr, &data, added));
    std::thread::sleep(Duration::from_millis(500));
    let before = get_blocking(&format!("{}/api/profiles", d.base)).1;
    assert!(
        !before.contains("\"burst\""),
        "no watch: nothing before SIGHUP: {before}"
    );
    d.signal(libc::SIGHUP);
    let shown = eventually(Duration::from_secs(10), || {
        let m = d.metrics();
        (m.contains("profile=\"burst\"") && m.contains("sloburn_iterations_total")).then_some(m)
    });
    assert!(shown.is_some(), "burst never appeared in /metrics");
    let profiles = get_blocking(&format!("{}/api/profiles", d.base)).1;
    assert!(profiles.contains("\"burst\""), "{profiles}");

    // An invalid change: rejected, counted, the old config keeps running.
    let reqs_before = metric_sum(
        &d.metrics(),
        "sloburn_http_reqs_total{target=\"api\",profile=\"steady\"",
    );
    write_config(dir.path(), "targets:\n  api:\n    url: nope\n");
    d.signal(libc::SIGHUP);
    let failed = eventually(Duration::from_secs(10), || {
        let m = d.metrics();
        (metric_sum(&m, "sloburn_config_reloads_total{result=\"failure\"") >= 1.0).then_some(m)
    });
    assert!(failed.is_some(), "reload failure not counted");
    std::thread::sleep(Duration::from_millis(1500));
    let m = d.metrics();
    assert!(m.contains("profile=\"burst\""), "old config was dropped");
    let reqs_after = metric_sum(
        &m,
        "sloburn_http_reqs_total{target=\"api\",profile=\"steady\"",
    );
    assert!(
        reqs_after > reqs_before,
        "load stopped: {reqs_before} -> {reqs_after}"
    );
}

#[test]
fn config_file_changes_are_picked_up_without_a_signal() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &[]);
    let added = "  second:\n    target: api\n    every: 1h\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n";
    write_config(dir.path(), &base_config(target.addr, &data, added));
    let seen = eventually(Duration::from_secs(10), || {
        let p = get_blocking(&format!("{}/api/profiles", d.base)).1;
        p.contains("\"second\"").then_some(())
    });
    assert!(seen.is_some());
}

#[test]
fn sigterm_drains_in_flight_requests_and_exits_zero() {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(1500),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let mut d = Daemon::start(&path, &[]);
    // Wait until requests are in flight at the target.
    let busy = eventually(Duration::from_secs(10), || {
        (target.stats().in_flight >= 5).then_some(())
    });
    assert!(busy.is_some());
    let started = Instant::now();
    d.signal(libc::SIGTERM);
    let code = d.wait(Duration::from_secs(10));
    assert_eq!(code, Some(0), "logs: {:?}", d.logs.lock().unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "grace period is 5s"
    );
    // Every request the daemon started was answered before it exited.
    let s = target.stats();
    assert_eq!(s.in_flight, 0, "{s:?}");
    assert!(s.requests >= 5, "{s:?}");
}

#[test]
fn a_bad_config_exits_78_before_binding() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), "targets:\n  a:\n    url: nope\n");
    let out = Command::new(env!("CARGO_BIN_EXE_sloburn"))
        .args(["serve", "--listen", "127.0.0.1:1", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("sloburn.yaml:3:10: targets.a.url: `nope` has no scheme"),
        "{stdout}"
    );
}

#[test]
fn admin_api_needs_the_right_token_and_run_now_shows_in_runs() {
    let rt = runtime();
    rt.block_on(async {
        let stop = CancellationToken::new();
        let t = spawn(
            TargetOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                ..TargetOptions::default()
            },
            stop.clone(),
        )
        .await
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        // SAFETY: tests that read this variable set it to the same value.
        unsafe { std::env::set_var("TEST_ADMIN_TOKEN", "s3cret-admin") };
        let text = format!(
            "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\nstorage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://{}/\nprofiles:\n  once:\n    target: api\n    executor: shared-iterations\n    vus: 2\n    iterations: 10\n",
            dir.path().join("data").display(),
            t.addr
        );
        let cfg = sloburn::config::from_str(&text, "t.yaml", dir.path(), &sloburn::config::Env::process())
            .unwrap()
            .config;
        let d = sloburn::daemon::start(sloburn::daemon::Options {
            source: sloburn::daemon::Source::Fixed(Box::new(cfg)),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            shard: sloburn::load::plan::Shard::WHOLE,
            watch: false,
        })
        .await
        .unwrap();
        let url = format!("http://{}/api/profiles/once/run", d.addr);
        assert_eq!(request("POST", &url, None).await.0, 401);
        assert_eq!(request("POST", &url, Some("wrong")).await.0, 401);
        let (code, body) = request("POST", &url, Some("s3cret-admin")).await;
        assert_eq!(code, 202, "{body}");
        let mut finished = None;
        for _ in 0..100 {
            let (_, runs) = request("GET", &format!("http://{}/api/runs", d.addr), None).await;
            let v: serde_json::Value = serde_json::from_str(&runs).unwrap();
            if v["runs"][0]["result"] == "passed" {
                finished = Some(v);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let v = finished.expect("the run never finished");
        assert_eq!(v["runs"][0]["profile"], "once");
        assert_eq!(v["runs"][0]["trigger"], "api");
        assert_eq!(v["runs"][0]["requests"], 10);
        // Unknown profile and the read endpoints.
        let (code, _) = request("POST", &format!("http://{}/api/profiles/nope/run", d.addr), Some("s3cret-admin")).await;
        assert_eq!(code, 404);
        let (code, spec) = request("GET", &format!("http://{}/api/openapi.json", d.addr), None).await;
        assert_eq!(code, 200);
        assert!(spec.contains("\"openapi\""));
        assert_eq!(request("GET", &format!("http://{}/healthz", d.addr), None).await.0, 200);
        assert_eq!(request("GET", &format!("http://{}/readyz", d.addr), None).await.0, 200);
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn demo_serves_nonzero_request_counters_within_ten_seconds() {
    let rt = runtime();
    let demo_data = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let started = Instant::now();
        let (d, stop) = sloburn::demo::start(
            Some("127.0.0.1:0".parse().unwrap()),
            Some(demo_data.path().to_path_buf()),
        )
        .await
        .unwrap();
        let url = format!("http://{}/metrics", d.addr);
        let mut total = 0.0;
        while started.elapsed() < Duration::from_secs(10) {
            let (_, m) = request("GET", &url, None).await;
            total = metric_sum(&m, "sloburn_http_reqs_total");
            if total > 0.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(total > 0.0, "no requests counted within 10 s");
        d.shutdown().await;
        stop.cancel();
    });
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
        let bin = which("prometheus");
        let dir = tempfile::tempdir().unwrap();
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
        let cfg_path = dir.path().join("prometheus.yml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
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

pub fn which(tool: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join(tool))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("{tool} not found in PATH: run `make test` (it installs Debian's prometheus package)"))
}

#[test]
fn a_real_prometheus_scrapes_increasing_counters_and_histograms() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &[]);
    let prom = Server::prometheus(d.base.trim_start_matches("http://"), None, "1s", None);
    let q = "sum(sloburn_http_reqs_total{target=\"api\",profile=\"steady\"})";
    let first = eventually(Duration::from_secs(30), || {
        prom.query(q).first().map(|(_, v)| *v).filter(|v| *v > 0.0)
    })
    .expect("prometheus never saw sloburn_http_reqs_total");
    let second = eventually(Duration::from_secs(15), || {
        prom.query(q)
            .first()
            .map(|(_, v)| *v)
            .filter(|v| *v > first)
    });
    assert!(
        second.is_some(),
        "the counter did not increase past {first}"
    );
    let buckets =
        prom.query("sloburn_http_req_duration_seconds_bucket{target=\"api\",profile=\"steady\"}");
    assert!(buckets.len() >= 2, "{buckets:?}");
    for (labels, _) in &buckets {
        assert_eq!(labels["target"], "api");
        assert_eq!(labels["profile"], "steady");
        assert!(labels["le"].is_string());
    }
    assert!(buckets.iter().any(|(l, _)| l["le"] == "+Inf"));
}

#[test]
fn promtool_check_metrics_finds_nothing_on_a_live_exposition() {
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: 0.1,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let path = write_config(dir.path(), &base_config(target.addr, &data, ""));
    let d = Daemon::start(&path, &[]);
    let exposition = eventually(Duration::from_secs(10), || {
        let m = d.metrics();
        (metric_sum(&m, "sloburn_http_reqs_total") > 0.0
            && metric_sum(&m, "sloburn_slo_events_total") > 0.0)
            .then_some(m)
    })
    .expect("no traffic counted");
    // OpenMetrics when the scraper asks for it, ending with `# EOF`.
    let url = format!("{}/metrics", d.base);
    let om = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let client = Client::new(ClientOptions::default(), Arc::new(Resolver::system()));
            let mut headers = http::HeaderMap::new();
            headers.insert(
                "accept",
                "application/openmetrics-text;version=1.0.0"
                    .parse()
                    .unwrap(),
            );
            let o = client
                .conn()
                .send(&RequestSpec {
                    method: http::Method::GET,
                    uri: url.parse().unwrap(),
                    headers,
                    body: bytes::Bytes::new(),
                })
                .await;
            assert!(
                o.headers
                    .get("content-type")
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .starts_with("application/openmetrics-text"),
                "{:?}",
                o.headers
            );
            String::from_utf8_lossy(&o.body).into_owned()
        });
    assert!(
        om.ends_with("# EOF\n"),
        "{}",
        &om[om.len().saturating_sub(200)..]
    );
    // promtool reads the classic format (its OpenMetrics support is partial in 2.x).
    let body = exposition;
    {
        let mut child = Command::new(which("promtool"))
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.trim().is_empty(),
            "promtool: {text}"
        );
    }
}

#[test]
fn the_global_in_flight_cap_holds_across_profiles() {
    let target = BackgroundTarget::start(TargetOptions {
        latency: Duration::from_millis(200),
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "server:\n  max_in_flight: 3\nstorage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://{}/\nprofiles:\n  a:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-vus\n    vus: 5\n    duration: 1h\n  b:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 50/s\n    duration: 1h\n",
        dir.path().join("data").display(),
        target.addr
    );
    let path = write_config(dir.path(), &config);
    let d = Daemon::start(&path, &["--no-watch"]);
    let mut max = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        max = max.max(target.stats().in_flight);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(max <= 3, "{max} requests in flight with max_in_flight 3");
    assert!(max >= 2, "no load? max in flight {max}");
    // The open-model profile found the cap full and counted drops.
    let m = d.metrics();
    assert!(
        metric_sum(
            &m,
            "sloburn_dropped_iterations_total{target=\"api\",profile=\"b\""
        ) > 0.0
    );
}

#[test]
fn protected_reads_need_the_token_and_writes_without_a_token_are_disabled() {
    let rt = runtime();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let start = |text: String| {
            let cfg = sloburn::config::from_str(&text, "t.yaml", dir.path(), &sloburn::config::Env::process())
                .unwrap()
                .config;
            sloburn::daemon::start(sloburn::daemon::Options {
                source: sloburn::daemon::Source::Fixed(Box::new(cfg)),
                listen: Some("127.0.0.1:0".parse().unwrap()),
                shard: sloburn::load::plan::Shard::WHOLE,
                watch: false,
            })
        };
        let data = dir.path().join("data").display().to_string();
        // SAFETY: tests that read this variable set it to the same value.
        unsafe { std::env::set_var("TEST_ADMIN_TOKEN", "s3cret-admin") };
        let protected = start(format!(
            "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\n  protect_reads: true\nstorage:\n  path: \"{data}\"\ntargets:\n  api:\n    url: http://127.0.0.1:1/\n"
        ))
        .await
        .unwrap();
        let runs = format!("http://{}/api/runs", protected.addr);
        assert_eq!(request("GET", &runs, None).await.0, 401);
        assert_eq!(request("GET", &runs, Some("s3cret-admin")).await.0, 200);
        // Health and metrics stay open for probes and Prometheus.
        assert_eq!(request("GET", &format!("http://{}/metrics", protected.addr), None).await.0, 200);
        protected.shutdown().await;

        let open = start(format!(
            "storage:\n  path: \"{data}-2\"\ntargets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles:\n  p:\n    target: api\n    executor: constant-vus\n    duration: 1s\n"
        ))
        .await
        .unwrap();
        assert_eq!(request("GET", &format!("http://{}/api/runs", open.addr), None).await.0, 200);
        let (code, body) = request("POST", &format!("http://{}/api/profiles/p/run", open.addr), Some("anything")).await;
        assert_eq!(code, 403, "{body}");
        assert!(body.contains("admin_token"), "{body}");
        open.shutdown().await;
    });
}
