//! `sloburn capacity` (issue 47) as a user runs it, the binary against real servers on
//! loopback: a worker pool whose capacity is known analytically (N workers each holding a
//! request S: N/S a second, a queue beyond), for two (N, S) pairs, one judged by a
//! `--threshold`, one by a config's SLO; a ceiling under the capacity; a lowest step that
//! fails; a generator that gets no CPU (SIGSTOP/SIGCONT); and the flags refused. Every child is
//! waited for within its own `--max-duration` plus slack, every loop here is bounded.

use crate::support::{Proc, write_config};
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A pool of `workers` that each hold a request for `hold`, on its own thread: request k
/// starts when a worker is free (the earliest) and is answered `hold` after it started, so
/// the pool serves `workers / hold` a second and queues beyond (FIFO). The hold is kept on the
/// pool's own schedule, not a sleep's: a late timer delays one answer, never the next start.
pub(crate) struct Pool {
    addr: SocketAddr,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pool {
    pub(crate) fn start(workers: usize, hold: Duration) -> Pool {
        let stop = CancellationToken::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let token = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let free = Arc::new(Mutex::new(vec![tokio::time::Instant::now(); workers]));
                let app = axum::Router::new().fallback(move || {
                    let free = free.clone();
                    async move {
                        let done = {
                            let mut free = free.lock().unwrap();
                            let now = tokio::time::Instant::now();
                            let (i, at) = free
                                .iter()
                                .copied()
                                .enumerate()
                                .min_by_key(|(_, t)| *t)
                                .unwrap();
                            free[i] = at.max(now) + hold;
                            free[i]
                        };
                        tokio::time::sleep_until(done).await;
                        "ok"
                    }
                });
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move { token.cancelled().await })
                    .await
                    .unwrap();
            });
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        Pool {
            addr,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The server returns once the connections the child held are closed; not waited for,
        // so a test never hangs on a peer's socket.
        self.stop.cancel();
        drop(self.thread.take());
    }
}

/// Runs `sloburn capacity ARGS --summary-export …` to its end (at most `limit`): (exit code,
/// stdout, the export's `capacity`, how long it took).
fn capacity(args: &[&str], limit: Duration) -> (i32, String, Value, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("capacity.json");
    let started = Instant::now();
    let mut p = Proc::start(
        ["capacity", "--summary-export", export.to_str().unwrap()]
            .iter()
            .copied()
            .chain(args.iter().copied()),
    );
    let status = p
        .wait(limit)
        .unwrap_or_else(|| panic!("capacity outlived {limit:?}: {}", p.stdout()));
    let took = started.elapsed();
    let code = status.code().unwrap_or(-1);
    let value = std::fs::read_to_string(&export)
        .map(|t| serde_json::from_str::<Value>(&t).unwrap()["capacity"].clone())
        .unwrap_or(Value::Null);
    (code, format!("{}\n{}", p.stdout(), p.stderr()), value, took)
}

/// The search's own bounds, read from what it wrote: a line per step, at most 41 steps, none
/// above `max_rate`, done within `max_duration`.
fn check_bounds(out: &str, c: &Value, max_rate: f64, max_duration: f64) {
    let steps = c["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 41, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("step ")).count(),
        steps.len(),
        "{out}"
    );
    for s in steps {
        assert!(s["rate"].as_f64().unwrap() <= max_rate + 1e-9, "{s}");
    }
    assert!(c["elapsed_s"].as_f64().unwrap() <= max_duration, "{c}");
}

/// Must show: for two (N, S) pairs the answer is within ±10 % of N/S, and the search ends
/// within its --max-duration. Here N = 4, S = 40 ms (100/s) judged by `p(95)<120`: a queue
/// wait over 80 ms at p95. Past the capacity the queue grows (λ − N/S)·t, so a 2 s step 5 %
/// over it fails; under it only the machine's hiccups wait, and they may take up to 80 ms.
#[test]
fn finds_a_worker_pools_known_capacity_by_a_threshold() {
    let pool = Pool::start(4, Duration::from_millis(40));
    let analytic = 4.0 / 0.040;
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("capacity.html");
    let (code, out, c, took) = capacity(
        &[
            "--report",
            report.to_str().unwrap(),
            "--url",
            &pool.url(),
            "--threshold",
            "http_req_duration=p(95)<120",
            "--start-rate",
            "25/s",
            "--max-rate",
            "400/s",
            "--step-duration",
            "2s",
            "--cool-down",
            "300ms",
            "--timeout",
            "5s",
            "--max-duration",
            "120s",
        ],
        Duration::from_secs(150),
    );
    assert_eq!(code, 0, "{out}");
    let rate = c["rate"].as_f64().unwrap_or_else(|| panic!("{out}"));
    assert!(
        (rate / analytic - 1.0).abs() <= 0.10,
        "capacity {rate}/s, analytic {analytic}/s\n{out}"
    );
    let (low, high) = (c["low"].as_f64().unwrap(), c["high"].as_f64().unwrap());
    assert!(
        low <= rate && rate < high && (high - low) / low <= 0.05 + 1e-9,
        "{c}"
    );
    assert_eq!(c["limited_by"], "http_req_duration: p(95)<120", "{c}");
    assert_eq!(c["outcome"], "found");
    let last = c["steps"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["purpose"].as_str(), last["verdict"].as_str()),
        (Some("confirm"), Some("pass"))
    );
    assert!(out.contains(c["summary"].as_str().unwrap()), "{out}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .ends_with("; limited by http_req_duration: p(95)<120)"),
        "{c}"
    );
    check_bounds(&out, &c, 400.0, 120.0);
    assert!(took < Duration::from_secs(135), "{took:?}");
    eprintln!("N=4 S=40ms: {rate}/s (analytic {analytic}/s) in {took:?}\n{out}");
    report_in_chromium(&report, &c);
}

/// `--report`, offline in headless Chromium: the chart holds every step's rate against its
/// deciding figure (ms), passes and fails apart, and the limit; nothing loaded from anywhere.
fn report_in_chromium(report: &std::path::Path, c: &Value) {
    let chrome = crate::web::Chrome::start();
    let mut page = chrome.page();
    page.call(
        "Network.emulateNetworkConditions",
        serde_json::json!({ "offline": true, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1 }),
    );
    let url = format!("file://{}", report.display());
    page.navigate(&url);
    page.wait_for(
        "the capacity chart",
        "document.body.dataset.rendered && document.querySelectorAll('#chart canvas').length >= 1",
        Duration::from_secs(30),
    );
    let data = page.eval("window.__capacity.data");
    let data: Vec<Vec<Option<f64>>> = serde_json::from_value(data).unwrap();
    let steps = c["steps"].as_array().unwrap();
    let mut rates: Vec<f64> = steps.iter().map(|s| s["rate"].as_f64().unwrap()).collect();
    rates.sort_by(f64::total_cmp);
    let xs: Vec<f64> = data[0].iter().map(|x| x.unwrap()).collect();
    assert_eq!(xs, rates);
    let (passes, fails) = (
        data[1].iter().flatten().count(),
        data[2].iter().flatten().count(),
    );
    let count = |v: &str| steps.iter().filter(|s| s["verdict"] == v).count();
    assert_eq!((passes, fails), (count("pass"), count("fail")));
    assert!(
        data[4].iter().all(|l| *l == Some(120.0)),
        "the limit line: {:?}",
        data[4]
    );
    let answer = page.eval("document.getElementById('answer').textContent");
    assert_eq!(answer, c["summary"]);
    crate::web::assert_clean(&page, &[&url]);
}

/// The second pair, N = 2, S = 50 ms (40/s), from a config: the profile's target's latency
/// SLO (95 % under 150 ms) decides.
#[test]
fn finds_a_worker_pools_known_capacity_by_a_configs_slo() {
    let pool = Pool::start(2, Duration::from_millis(50));
    let analytic = 2.0 / 0.050;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &pool_config(&pool));
    let (code, out, c, took) = capacity(
        &[
            config.to_str().unwrap(),
            "--profile",
            "probe",
            "--start-rate",
            "10/s",
            "--max-rate",
            "160/s",
            "--step-duration",
            "3s",
            "--cool-down",
            "300ms",
            "--max-duration",
            "150s",
        ],
        Duration::from_secs(180),
    );
    assert_eq!(code, 0, "{out}");
    let rate = c["rate"].as_f64().unwrap_or_else(|| panic!("{out}"));
    assert!(
        (rate / analytic - 1.0).abs() <= 0.10,
        "capacity {rate}/s, analytic {analytic}/s\n{out}"
    );
    assert_eq!(
        c["limited_by"], "SLO pool-latency (p(95) of its latency)",
        "{c}"
    );
    check_bounds(&out, &c, 160.0, 150.0);
    eprintln!("N=2 S=50ms: {rate}/s (analytic {analytic}/s) in {took:?}\n{out}");
}

fn pool_config(pool: &Pool) -> String {
    format!(
        "targets:\n  pool:\n    url: {}\n    timeout: 5s\nprofiles:\n  probe:\n    target: pool\n    \
         executor: constant-arrival-rate\n    rate: 1/s\n    duration: 1s\n  vus:\n    target: pool\n    \
         executor: constant-vus\n    vus: 1\n    duration: 1s\nslos:\n  pool-latency:\n    target: pool\n    \
         sli: {{ latency: {{ under: 150ms }} }}\n    objective: 95\n    period: 1d\n",
        pool.url()
    )
}

/// Must show: a target whose capacity is above --max-rate: the answer says so, and the
/// export carries no made-up rate.
#[test]
fn a_capacity_above_the_ceiling_is_said_never_made_up() {
    let pool = Pool::start(4, Duration::from_millis(40));
    let (code, out, c, _) = capacity(
        &[
            "--url",
            &pool.url(),
            "--threshold",
            "http_req_duration=p(95)<80",
            "--start-rate",
            "10/s",
            "--max-rate",
            "20/s",
            "--step-duration",
            "1500ms",
            "--cool-down",
            "200ms",
            "--max-duration",
            "60s",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(code, 0, "{out}");
    assert!(c["rate"].is_null(), "{c}");
    assert_eq!(c["low"].as_f64(), Some(20.0), "{c}");
    assert!(c["high"].is_null(), "{c}");
    assert_eq!(c["outcome"], "above_max_rate");
    assert_eq!(c["limited_by"], "--max-rate");
    assert!(
        out.contains("capacity at SLO: above --max-rate 20/s"),
        "{out}"
    );
    check_bounds(&out, &c, 20.0, 60.0);
    let rates: Vec<f64> = c["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rate"].as_f64().unwrap())
        .collect();
    assert_eq!(
        rates,
        [10.0, 20.0, 20.0],
        "grow, grow to the ceiling, confirm: {out}"
    );
}

/// A profile with `executor: capacity` is the command's too: its fields are the flags'
/// defaults (here a ceiling of 20/s under the pool's 100/s, so the steps are known), and a
/// flag still wins over its field.
#[test]
fn the_command_searches_a_capacity_profile_with_its_fields() {
    let pool = Pool::start(4, Duration::from_millis(40));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(
        dir.path(),
        &format!(
            "targets:\n  pool:\n    url: {}\n    timeout: 5s\nprofiles:\n  search:\n    target: pool\n    \
             executor: capacity\n    start_rate: 10/s\n    max_rate: 20/s\n    step_duration: 1500ms\n    \
             cool_down: 200ms\n    max_duration: 60s\n    thresholds:\n      http_req_duration: [\"p(95)<80\"]\n",
            pool.url()
        ),
    );
    let (code, out, c, _) = capacity(&[config.to_str().unwrap()], Duration::from_secs(90));
    assert_eq!(code, 0, "{out}");
    assert_eq!(c["outcome"], "above_max_rate", "{c}");
    let rates: Vec<f64> = c["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rate"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [10.0, 20.0, 20.0], "{out}");
    assert!(
        c["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["duration_s"].as_f64() == Some(1.5))
    );
    check_bounds(&out, &c, 20.0, 60.0);
    // --max-rate over the field: the first step is the flag's ÷ 32, the field's start unused.
    let (code, out, c, _) = capacity(
        &[
            config.to_str().unwrap(),
            "--max-rate",
            "320/s",
            "--max-duration",
            "1s",
        ],
        Duration::from_secs(30),
    );
    assert_eq!(code, 75, "{out}");
    assert!(out.contains("steps from 10/s up to 320/s"), "{out}");
    assert_eq!(c["outcome"], "undecided", "{c}");
}

/// Even the lowest step fails: exit 99, the capacity is below it, no rate.
#[test]
fn the_lowest_step_failing_exits_99() {
    let pool = Pool::start(1, Duration::from_millis(50));
    let (code, out, c, _) = capacity(
        &[
            "--url",
            &pool.url(),
            "--threshold",
            "http_req_duration=p(95)<100",
            "--start-rate",
            "80/s",
            "--max-rate",
            "200/s",
            "--step-duration",
            "2s",
            "--timeout",
            "5s",
            "--max-duration",
            "60s",
        ],
        Duration::from_secs(90),
    );
    assert_eq!(code, 99, "{out}");
    assert!(c["rate"].is_null(), "{c}");
    assert_eq!(c["outcome"], "below_lowest");
    assert_eq!(c["high"].as_f64(), Some(80.0));
    assert_eq!(c["steps"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(c["steps"][0]["verdict"], "fail");
    assert!(
        out.contains("capacity at SLO: below 80/s: even the lowest step failed"),
        "{out}"
    );
}

/// Must show: a generator that cannot reach the rates asked is inconclusive (75), never a
/// capacity figure. The generator gets no CPU for 700 ms of every second (SIGSTOP, SIGCONT:
/// as a CPU quota throttles it), past its 500 ms lateness bound: it drops arrivals of its own.
#[test]
fn a_starved_generator_is_inconclusive_never_a_figure() {
    let pool = Pool::start(4, Duration::from_millis(5));
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("capacity.json");
    let mut p = Proc::start([
        "capacity",
        "--url",
        &pool.url(),
        "--threshold",
        "http_req_duration=p(95)<100",
        "--start-rate",
        "20/s",
        "--max-rate",
        "100/s",
        "--step-duration",
        "3s",
        "--cool-down",
        "100ms",
        "--workers",
        "1",
        "--max-duration",
        "60s",
        "--summary-export",
        export.to_str().unwrap(),
    ]);
    let pid = p.child.id() as i32;
    let mut status = None;
    // At most 90 rounds of a second: the child's own budget is 60 s.
    for _ in 0..90 {
        std::thread::sleep(Duration::from_millis(300));
        if let Some(s) = p.child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_millis(700));
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
    let status = status
        .or_else(|| p.wait(Duration::from_secs(10)))
        .unwrap_or_else(|| panic!("did not end: {}", p.stdout()));
    let out = p.stdout();
    assert_eq!(status.code(), Some(75), "{out}\n{}", p.stderr());
    let c: Value = serde_json::from_str::<Value>(&std::fs::read_to_string(&export).unwrap())
        .unwrap()["capacity"]
        .clone();
    assert!(c["rate"].is_null(), "{c}");
    assert_eq!(c["outcome"], "inconclusive", "{c}");
    let steps = c["steps"].as_array().unwrap();
    let last_two: Vec<&str> = steps
        .iter()
        .rev()
        .take(2)
        .map(|s| s["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(last_two, ["inconclusive", "inconclusive"], "{out}");
    assert!(
        steps
            .iter()
            .rev()
            .take(2)
            .all(|s| s["generator_dropped"].as_u64() > Some(0))
    );
    assert!(
        out.contains("capacity at SLO: inconclusive: sloburn could not hold"),
        "{out}"
    );
    assert!(
        !out.contains("capacity at SLO: 2") && !out.contains("between"),
        "{out}"
    );
}

/// Bad input, each a usage error (2) saying what to do, before any request: a VU profile,
/// a ceiling under the first step, a counter threshold, nothing to judge by, VUs past the
/// open-file limit, a precision past 50 %.
#[test]
fn capacity_refuses_what_cannot_be_searched() {
    let pool = Pool::start(1, Duration::from_millis(1));
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &pool_config(&pool));
    let url = pool.url();
    let config = config.to_str().unwrap();
    for (args, said) in [
        (
            vec![config, "--profile", "vus", "--max-rate", "10/s"],
            "capacity runs the open model only: profile `vus` is constant-vus",
        ),
        (
            vec![
                "--url",
                &url,
                "--threshold",
                "http_req_duration=p(95)<9",
                "--max-rate",
                "10/s",
                "--start-rate",
                "20/s",
            ],
            "--max-rate (10/s) is under the first step (20/s)",
        ),
        (
            vec![
                "--url",
                &url,
                "--threshold",
                "http_reqs=rate>5",
                "--max-rate",
                "10/s",
            ],
            "cannot decide a capacity",
        ),
        (
            vec!["--url", &url, "--max-rate", "10/s"],
            "nothing decides a step",
        ),
        (
            vec![
                "--url",
                &url,
                "--threshold",
                "http_req_duration=p(95)<9",
                "--max-rate",
                "10/s",
                "--max-vus",
                "4000000000",
            ],
            "but the open-file limit is",
        ),
        (
            vec![
                "--url",
                &url,
                "--threshold",
                "http_req_duration=p(95)<9",
                "--max-rate",
                "10/s",
                "--precision",
                "80%",
            ],
            "--precision must be above 0 % and at most 50 %",
        ),
    ] {
        let (code, out, c, took) = capacity(&args, Duration::from_secs(20));
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(out.contains(said), "{args:?}: {out}");
        assert!(c.is_null() && took < Duration::from_secs(20));
    }
}

/// A hostile target: accepts every connection and never answers (held until the test ends, at
/// most 60 s). Every request times out: no answer counts slower than any limit, so the lowest
/// step fails (99) within its bounds, never a pass on no evidence.
#[test]
fn a_target_that_never_answers_fails_the_lowest_step_in_bounded_time() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    let holder = std::thread::spawn(move || {
        let mut held = Vec::new();
        let started = Instant::now();
        while !flag.load(std::sync::atomic::Ordering::Relaxed)
            && started.elapsed() < Duration::from_secs(60)
            && held.len() < 10_000
        {
            match listener.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        held.len()
    });
    let (code, out, c, took) = capacity(
        &[
            "--url",
            &url,
            "--threshold",
            "http_req_duration=p(95)<100",
            "--start-rate",
            "10/s",
            "--max-rate",
            "100/s",
            "--step-duration",
            "2s",
            "--timeout",
            "1s",
            "--max-duration",
            "30s",
        ],
        Duration::from_secs(45),
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let held = holder.join().unwrap();
    assert_eq!(code, 99, "{out}");
    assert!(held >= 1, "no connection reached the silent target");
    assert_eq!(c["outcome"], "below_lowest", "{c}");
    let deciding = &c["steps"][0]["deciding"];
    assert!(deciding["unanswered"].as_u64().unwrap() >= 10, "{deciding}");
    assert!(
        out.contains("requests got no answer (counted slower than any limit)"),
        "{out}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// SIGINT during a search ends it: exit 105, the export still written, no figure.
#[test]
fn an_interrupted_search_says_so_and_writes_what_it_has() {
    let pool = Pool::start(4, Duration::from_millis(10));
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("capacity.json");
    let mut p = Proc::start([
        "capacity",
        "--url",
        &pool.url(),
        "--threshold",
        "http_req_duration=p(95)<100",
        "--start-rate",
        "10/s",
        "--max-rate",
        "1000/s",
        "--step-duration",
        "1s",
        "--cool-down",
        "5s",
        "--summary-export",
        export.to_str().unwrap(),
    ]);
    crate::support::eventually(Duration::from_secs(30), || {
        p.stdout().contains("step 1:").then_some(())
    })
    .unwrap_or_else(|| panic!("no step: {}", p.stderr()));
    p.signal(libc::SIGINT);
    let status = p.wait(Duration::from_secs(20)).expect("the search ended");
    let out = p.stdout();
    assert_eq!(status.code(), Some(105), "{out}");
    let c: Value = serde_json::from_str::<Value>(&std::fs::read_to_string(&export).unwrap())
        .unwrap()["capacity"]
        .clone();
    assert_eq!(c["outcome"], "interrupted", "{c}");
    assert!(c["rate"].is_null());
    assert_eq!(c["low"].as_f64(), Some(10.0), "{c}");
    assert!(
        out.contains("capacity at SLO: undecided: interrupted"),
        "{out}"
    );
}
