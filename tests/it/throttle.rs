//! A throttled sidecar is never a slow target (issue 43): `sloburn run` inside a real cgroup with
//! a CFS quota (a pod's `limits.cpu: 80m`), `sloburn serve` likewise with a latency SLO, and
//! `sloburn run` beside a CPU hog at high priority pinned on its core, each against a loopback
//! `sloburn target` outside the starvation. The requests that overlapped sloburn's own stall are
//! generator-affected: counted and explained, never a failed threshold (exit 99), never a bad
//! SLO event. The same run without the starvation sees no throttling and nothing charged to it.
//!
//! Assertions are on classes and counts (exit codes, affected and throttled counts), never on
//! latencies. Each run is a few seconds of load.

use crate::support::{eventually, free_port, get_blocking, metric_sum, sloburn, wait_ready};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::time::Duration;

/// Arrivals per second under the quota: more than 8 ms of CPU per 100 ms can send at the
/// documented 100 µs a request (so `run` and `serve` warn), several times more for a debug build.
const RATE: &str = "1000/s";
/// Beside the hog: what a sloburn with 1 % of a core still sends some of.
const HOG_RATE: &str = "400/s";
const SECONDS: &str = "3s";
/// The threshold the issue failed with: a 0.1 ms target never takes 50 ms, a throttled sloburn
/// (held up to 92 ms of each 100 ms period) does.
const THRESHOLD: &str = "http_req_duration=max<50";

static NEXT: AtomicU32 = AtomicU32::new(0);

/// One starvation at a time: the hog would starve the other tests' unstarved runs too.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A CPU cgroup with a CFS quota, removed on drop (its tasks moved back to the root first).
struct Cgroup {
    dir: PathBuf,
    root: PathBuf,
    v2: bool,
}

impl Cgroup {
    /// `quota_us` of CPU per `period_us`, or why none can be made here.
    fn with_quota(quota_us: u64, period_us: u64) -> Result<Cgroup, String> {
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: cannot create a cgroup".into());
        }
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let v2 = Path::new("/sys/fs/cgroup");
        let (root, is_v2) = if v1.join("cpu.cfs_quota_us").exists() {
            (v1.to_path_buf(), false)
        } else if std::fs::read_to_string(v2.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu"))
        {
            (v2.to_path_buf(), true)
        } else {
            return Err("no cgroup v1 `cpu` controller and no v2 tree delegating `cpu`".into());
        };
        let name = format!(
            "sloburn-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Relaxed)
        );
        let dir = root.join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cg = Cgroup {
            dir,
            root,
            v2: is_v2,
        };
        let set = if is_v2 {
            cg.write("cpu.max", &format!("{quota_us} {period_us}"))
        } else {
            cg.write("cpu.cfs_period_us", &period_us.to_string())
                .and_then(|()| cg.write("cpu.cfs_quota_us", &quota_us.to_string()))
        };
        set.map(|()| cg)
    }

    fn write(&self, file: &str, value: &str) -> Result<(), String> {
        std::fs::write(self.dir.join(file), value)
            .map_err(|e| format!("{}/{file}: {e}", self.dir.display()))
    }

    /// The kernel's count of periods the cgroup ran out of quota.
    fn throttled_periods(&self) -> u64 {
        let stat = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap();
        stat.lines()
            .find_map(|l| l.strip_prefix("nr_throttled "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    }

    /// `cmd ARGS` with the child in this cgroup from its first instruction: a shell that joins
    /// the cgroup, then execs the command.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec \"$@\"",
                self.dir.display()
            ))
            .arg("sh")
            .arg(program);
        c
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
            }
        }
        let _ = self.v2;
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("could not remove {}: {e}", self.dir.display());
        }
    }
}

/// `sloburn target` at nice -10 (pinned to `cpu` when given), so that the machine's other load
/// rarely holds the target itself: its hold is known (none) and a slow answer is rare. Killed
/// on drop.
struct Target {
    child: std::process::Child,
    base: String,
}

impl Target {
    fn start(cpu: Option<&str>) -> Target {
        let mut cmd = Command::new("nice");
        cmd.args(["-n", "-10"]);
        if let Some(cpu) = cpu {
            cmd.args(["taskset", "-c", cpu]);
        }
        let mut child = cmd
            .arg(sloburn_path())
            .args(["target", "--listen", "127.0.0.1:0", "--workers", "1"])
            .args(["--log-format", "text"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if let Some(base) = line.strip_prefix("sloburn target listening on ") {
                    let _ = tx.send(base.to_string());
                }
            }
        });
        let base = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the target did not start");
        Target { child, base }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sloburn_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sloburn"))
}

/// One `sloburn run` against `target`: its exit code, its output, its summary export.
struct Ran {
    code: i32,
    out: String,
    export: Value,
}

impl Ran {
    fn affected(&self) -> &Value {
        &self.export["state"]["generator_affected"]
    }

    fn count(&self, key: &str) -> u64 {
        self.affected()[key].as_u64().unwrap_or(0)
    }

    fn by(&self, cause: &str) -> u64 {
        self.affected()["affected_by"][cause].as_u64().unwrap_or(0)
    }

    fn share(&self) -> f64 {
        self.affected()["share"].as_f64().unwrap_or(0.0)
    }
}

fn run(cmd: Command, target: &str) -> Ran {
    run_at(cmd, target, RATE)
}

fn run_at(mut cmd: Command, target: &str, rate: &str) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let out = cmd
        .args([
            "run",
            "--url",
            target,
            "--rate",
            rate,
            "--duration",
            SECONDS,
        ])
        .args(["--threshold", THRESHOLD, "--summary-export"])
        .arg(&export)
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    let export = std::fs::read_to_string(&export)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no summary export:\n{text}"));
    Ran {
        code: out.status.code().unwrap_or(-1),
        out: text,
        export,
    }
}

/// The starved run: never 99; its affected requests counted and explained, `cause` named.
fn assert_charged_to_the_generator(r: &Ran, cause: &str) {
    assert!(
        r.code == 0 || r.code == 75,
        "a starved sloburn failed the target's threshold (exit {}):\n{}",
        r.code,
        r.out
    );
    assert!(r.count("requests") > 0, "nothing affected:\n{}", r.out);
    assert!(
        r.out.contains("generator-affected:") && r.out.contains(cause),
        "the summary does not explain it:\n{}",
        r.out
    );
    if r.code == 75 {
        assert!(
            r.out.contains("inconclusive") && r.out.contains("sloburn"),
            "75 without naming the generator:\n{}",
            r.out
        );
    }
}

/// The same run unstarved: no throttling seen, nothing charged to it, and no more affected than
/// the starved run (on a quiet machine none: a busy one may still hold it in the run queue).
fn assert_unstarved(plain: &Ran, starved: &Ran) {
    assert!(
        plain.code == 0 || plain.code == 75,
        "the unstarved run failed (exit {}):\n{}",
        plain.code,
        plain.out
    );
    assert_eq!(plain.count("throttled_periods"), 0, "{}", plain.out);
    assert_eq!(plain.by("cgroup_throttled"), 0, "{}", plain.out);
    assert!(
        plain.share() < starved.share(),
        "unstarved {} vs starved {}",
        plain.share(),
        starved.share()
    );
}

fn figures(what: &str, r: &Ran) {
    eprintln!(
        "{what}: exit {}, affected {} of {} (throttled_periods {}, by cause {}), max {} ms, \
         would fail {}",
        r.code,
        r.count("requests"),
        r.count("of"),
        r.count("throttled_periods"),
        r.affected()["affected_by"],
        r.affected()["max_duration_ms"],
        r.affected()["would_fail"],
    );
}

#[test]
fn a_cpu_quota_makes_requests_generator_affected_never_a_failed_threshold() {
    let _one = one_at_a_time();
    let cg = match Cgroup::with_quota(8_000, 100_000) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let target = Target::start(None);
    let base = target.base.clone();
    let starved = run(cg.command(&sloburn_path()), &base);
    figures("quota 8ms/100ms", &starved);
    assert!(cg.throttled_periods() > 0, "the quota never throttled");
    assert!(starved.count("throttled_periods") > 0, "{}", starved.out);
    assert!(starved.out.contains("throttled periods"), "{}", starved.out);
    assert!(
        starved.out.contains("warning: sloburn's CPU quota is 80m"),
        "no quota warning at start:\n{}",
        starved.out
    );
    assert_charged_to_the_generator(&starved, "cgroup_throttled");
    let plain = run(sloburn(), &base);
    figures("no quota", &plain);
    assert_unstarved(&plain, &starved);
    assert!(!plain.out.contains("CPU quota is"), "{}", plain.out);
}

#[test]
fn a_cpu_hog_at_high_priority_on_sloburns_core_is_never_the_targets_latency() {
    let _one = one_at_a_time();
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root, cannot run a hog at nice -20");
        return;
    }
    // The target on the other CPU, out of the hog's way.
    let target = Target::start(Some("1"));
    let base = target.base.clone();
    let mut hog = Command::new("taskset")
        .args([
            "-c",
            "0",
            "nice",
            "-n",
            "-20",
            "sh",
            "-c",
            "while :; do :; done",
        ])
        .spawn()
        .unwrap();
    let mut pinned = Command::new("taskset");
    pinned.args(["-c", "0"]).arg(sloburn_path());
    let starved = run_at(pinned, &base, HOG_RATE);
    let _ = hog.kill();
    let _ = hog.wait();
    figures("hog at nice -20 on CPU 0", &starved);
    assert!(
        starved.by("run_queue") + starved.by("timer_lateness") > 0,
        "{}",
        starved.out
    );
    assert_charged_to_the_generator(
        &starved,
        if starved.by("run_queue") > 0 {
            "run_queue"
        } else {
            "timer_lateness"
        },
    );
    let plain = run_at(sloburn(), &base, HOG_RATE);
    figures("no hog", &plain);
    assert_unstarved(&plain, &starved);
}

#[test]
fn a_throttled_daemon_counts_no_bad_slo_event_for_its_own_stall() {
    let _one = one_at_a_time();
    let cg = match Cgroup::with_quota(8_000, 100_000) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let target = Target::start(None);
    let base = target.base.clone();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = format!(
        "server:\n  listen: 127.0.0.1:{port}\nstorage:\n  path: {data}\ntargets:\n  api:\n    url: \
         {base}/\nprofiles:\n  steady:\n    target: api\n    every: 1h\n    run_on_start: true\n    \
         executor: constant-arrival-rate\n    rate: {RATE}\n    duration: {SECONDS}\nslos:\n  \
         api-latency:\n    target: api\n    sli: {{ latency: {{ under: 50ms }} }}\n    objective: \
         99\n    period: 1d\n",
        data = dir.path().join("data").display()
    );
    let path = dir.path().join("sloburn.yaml");
    std::fs::write(&path, config).unwrap();
    let mut cmd = cg.command(&sloburn_path());
    cmd.args(["serve", "--log-format", "text", "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let ready = wait_ready(
        &format!("http://127.0.0.1:{port}/healthz"),
        port,
        Duration::from_secs(60),
    );
    let scraped = ready
        .then(|| {
            eventually(Duration::from_secs(60), || {
                let (_, text) = get_blocking(&metrics);
                let done = metric_sum(&text, "sloburn_runs_total") >= 1.0;
                done.then_some(text)
            })
        })
        .flatten();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let text = scraped.unwrap_or_else(|| panic!("the daemon's run never finished:\n{stderr}"));
    let bad = metric_sum(
        &text,
        "sloburn_slo_events_total{slo=\"api-latency\",result=\"bad\"}",
    );
    let good = metric_sum(
        &text,
        "sloburn_slo_events_total{slo=\"api-latency\",result=\"good\"}",
    );
    let affected = metric_sum(&text, "sloburn_generator_affected_requests_total");
    let throttled = metric_sum(&text, "sloburn_generator_throttled_seconds_total");
    eprintln!(
        "daemon under quota: good {good}, bad {bad}, affected {affected}, throttled {throttled}s, \
         cgroup throttled periods {}",
        cg.throttled_periods()
    );
    assert!(throttled > 0.0, "{text}");
    assert!(affected > 0.0, "{text}");
    assert_eq!(bad, 0.0, "sloburn's own stall burned the SLO:\n{text}");
    assert!(
        stderr.contains("sloburn's CPU quota is 80m"),
        "no quota warning:\n{stderr}"
    );
}
