//! A stalled target is measured, never hidden (issue 29): with the default VU pool, a target
//! that stalls for 1 s every 5 s shows in the corrected latency and as bad SLO events, and an
//! arrival that finds every VU held by the target is the target's failure (`saturated`), counted
//! against its SLOs. The target here is no part of sloburn: a plain HTTP/1.1 server on its own
//! runtime and thread, on 127.0.0.1, which holds every request that arrives during a stall until
//! the stall ends.

use crate::support::{
    ADMIN_TOKEN, ThreadServer, daemon_config, metric_sum, request, runtime, serve_raw_on_thread,
    sloburn,
};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// Stalls start this long after the server's first request, then every [`PERIOD`].
const FIRST: Duration = Duration::from_secs(1);
const PERIOD: Duration = Duration::from_secs(5);
const STALL: Duration = Duration::from_secs(1);
const RATE: u64 = 500;
/// Two whole periods: two stalls, 20 % of the arrivals held 0 to 1 s.
const SECONDS: u64 = 10;

#[derive(Default)]
struct Stalls {
    first: OnceLock<Instant>,
    /// Every request the server answered: when its head was read, and how long the server held
    /// it (from that read to just before the answer's first byte was written).
    served: Mutex<Vec<(Instant, Duration)>>,
    /// Connections whose answer waits for a stall's end, for [`releaser`] to answer.
    held: Mutex<Vec<Held>>,
    more: Notify,
    releasing: OnceLock<()>,
}

/// A held connection: its socket goes to the releaser and comes back with the count of the
/// answer's bytes written.
struct Held {
    arrived: Instant,
    release: Instant,
    sock: TcpStream,
    back: oneshot::Sender<(TcpStream, usize)>,
}

/// How long a request arriving now waits for the stall it falls in to end (zero outside one).
fn hold(s: &Stalls, now: Instant) -> Duration {
    let t0 = *s.first.get_or_init(|| now);
    let since = now.saturating_duration_since(t0);
    let Some(in_cycle) = since.checked_sub(FIRST) else {
        return Duration::ZERO;
    };
    let phase = Duration::from_nanos((in_cycle.as_nanos() % PERIOD.as_nanos()) as u64);
    STALL.saturating_sub(phase)
}

/// The answer to every request.
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-type: text/plain\r\n\r\nok\n";

/// One keep-alive connection: reads each request head and answers it at once, or hands the
/// socket to [`releaser`] when the request arrived in a stall. Plain HTTP/1.1 on a tokio socket
/// rather than a framework: when a stall ends, 500 answers go out together, and the target
/// writes them as a fast server would (one loop of writes, a few milliseconds), not spread over
/// the tens of milliseconds 500 task wake-ups of a debug framework take.
async fn connection(mut sock: TcpStream, stalls: Arc<Stalls>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let now = Instant::now();
        buf.drain(..head_end);
        let wait = hold(&stalls, now);
        let mut written = 0;
        if wait.is_zero() {
            stalls
                .served
                .lock()
                .unwrap()
                .push((now, Instant::now() - now));
        } else {
            let (back, returned) = oneshot::channel();
            let release = now + wait;
            stalls.held.lock().unwrap().push(Held {
                arrived: now,
                release,
                sock,
                back,
            });
            stalls.more.notify_one();
            let Ok((s, n)) = returned.await else { return };
            (sock, written) = (s, n);
        }
        if sock.write_all(&RESPONSE[written..]).await.is_err() {
            return;
        }
    }
}

/// Answers the held connections whose stall has ended, all in one loop.
async fn releaser(stalls: Arc<Stalls>) {
    loop {
        let next = stalls.held.lock().unwrap().iter().map(|h| h.release).min();
        let Some(next) = next else {
            stalls.more.notified().await;
            continue;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = stalls.more.notified() => continue,
        }
        let now = Instant::now();
        let due: Vec<Held> = {
            let mut held = stalls.held.lock().unwrap();
            let (due, keep) = held.drain(..).partition(|h| h.release <= now);
            *held = keep;
            due
        };
        for h in due {
            let held = Instant::now() - h.arrived;
            stalls.served.lock().unwrap().push((h.arrived, held));
            // An idle socket takes the whole answer; what it does not, its connection writes.
            let n = h.sock.try_write(RESPONSE).unwrap_or(0);
            let _ = h.back.send((h.sock, n));
        }
    }
}

/// Gives the server's thread (the caller) the highest CPU weight it may have. A target runs on
/// its own host; here it shares two cores with the sloburn it answers, which at the end of a
/// stall works through 500 answers in a debug build, and the target's own release of its
/// backlog would otherwise wait for sloburn's. Without the privilege (not root) it keeps its
/// weight, and the test reads what the target then really did.
fn target_priority() {
    // SAFETY: plain syscalls on the calling thread; no memory is passed.
    let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -20) };
}

/// The stalling server, on its own thread and runtime; stopped when dropped. The [`Stalls`]
/// records what it served.
fn stall_server() -> (ThreadServer, Arc<Stalls>) {
    let stalls = Arc::new(Stalls::default());
    let record = stalls.clone();
    let server = serve_raw_on_thread(move |sock| {
        if stalls.releasing.set(()).is_ok() {
            target_priority();
            tokio::spawn(releaser(stalls.clone()));
        }
        tokio::spawn(connection(sock, stalls.clone()))
    });
    (server, record)
}

/// What the machine did in one run, per request the server answered: `(held, late + held)`, in
/// ms. `held` is the server's own hold, a floor of the latency sloburn can measure (the request
/// was sent before the server read it, the answer arrived after the server wrote it). `late` is
/// how long after its due time at `RATE` the request reached the server, the due times placed
/// as early as the arrivals allow (the k-th arrival is due k / `RATE` after the earliest zero
/// consistent with every arrival): with it, `late + held` is when the answer left less when
/// the request was due, what sloburn's corrected latency measures but for the loopback's
/// microseconds. Whatever the load on the machine, sloburn's figure lies between the two.
fn served(stalls: &Stalls) -> Vec<(f64, f64)> {
    let mut served = stalls.served.lock().unwrap().clone();
    served.sort_by_key(|(arrived, _)| *arrived);
    let period = Duration::from_secs(1) / RATE as u32;
    let due = |k: usize| period * k as u32;
    let zero = served
        .iter()
        .enumerate()
        .map(|(k, (arrived, _))| *arrived - due(k))
        .min()
        .expect("the server answered requests");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    served
        .iter()
        .enumerate()
        .map(|(k, (arrived, held))| {
            let late = arrived.saturating_duration_since(zero + due(k));
            (ms(*held), ms(late + *held))
        })
        .collect()
}

/// k6's `p(N)`: linear interpolation between the closest ranks of the sorted values.
fn k6_quantile(mut values: Vec<f64>, q: f64) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pos = q * (values.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    values[lo] + (values[hi] - values[lo]) * (pos - lo as f64)
}

/// Slack on the server's figures: the histogram's 0.27 % on a quantile, and 10 ms, ten times
/// the loopback delivery and timer reads an idle machine adds.
const SLACK_MS: f64 = 10.0;

#[test]
fn the_stall_clock_holds_a_fifth_of_each_period() {
    let s = Stalls::default();
    let t0 = Instant::now();
    assert_eq!(hold(&s, t0), Duration::ZERO);
    let at = |ms: u64| hold(&s, t0 + Duration::from_millis(ms));
    assert_eq!(at(999), Duration::ZERO);
    assert_eq!(at(1_000), Duration::from_secs(1));
    assert_eq!(at(1_750), Duration::from_millis(250));
    assert_eq!(at(2_000), Duration::ZERO);
    assert_eq!(at(5_999), Duration::ZERO);
    assert_eq!(at(6_100), Duration::from_millis(900));
}

/// The issue's case with defaults: `sloburn run --url … --rate 500/s` against a target that
/// stalls 1 s every 5 s. 20 % of the arrivals wait 0 to 1 s: p90 ≈ 500 ms, p95 ≈ 750 ms,
/// p99 ≈ 950 ms, and nothing is dropped (the default pool holds the timeout's worth of
/// arrivals). The old default (100 VUs) dropped the stalled users and read p95 under 410 ms.
/// Each corrected quantile lies between the same quantile of the server's own holds and of
/// its holds plus each request's lateness ([`served`]): bounds from what the machine did in
/// this run, where fixed bands around the analytic figures failed on a loaded machine.
#[test]
fn a_stalled_target_is_measured_with_the_default_pool() {
    let _heavy = crate::load::heavy();
    let (server, stalls) = stall_server();
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("summary.json");
    let out = sloburn()
        .args(["run", "--url"])
        .arg(format!("http://{}/", server.addr))
        .args(["--rate", &format!("{RATE}/s")])
        .args(["--duration", &format!("{SECONDS}s"), "--quiet"])
        .arg("--summary-export")
        .arg(&export)
        .output()
        .unwrap();
    drop(server);
    let summary = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    let m = &json["metrics"];
    let count = |name: &str| m[name]["count"].as_u64().unwrap_or(0);
    // A machine too loaded to send 500/s from a debug build: sloburn drops the arrivals it fell
    // behind on as its own (never the target's), and calls the run inconclusive (75); the
    // figures of the requests it sent are still checked below.
    let overloaded = count("generator_overloaded_iterations");
    let code = if overloaded > 0 { 75 } else { 0 };
    assert_eq!(out.status.code(), Some(code), "{summary}");
    let c = &m["http_req_corrected_duration"];
    let p = |q: &str| c[q].as_f64().unwrap();
    eprintln!(
        "corrected p(90) {:.0} ms, p(95) {:.0} ms, p(99) {:.0} ms\n{summary}",
        p("p(90)"),
        p("p(95)"),
        p("p(99)")
    );
    let served = served(&stalls);
    for (name, q) in [("p(90)", 0.90), ("p(95)", 0.95), ("p(99)", 0.99)] {
        let held = k6_quantile(served.iter().map(|s| s.0).collect(), q);
        let left = k6_quantile(served.iter().map(|s| s.1).collect(), q);
        eprintln!("{name}: server held {held:.1} ms, answered {left:.1} ms after due");
        assert!(
            p(name) >= held * (1.0 - 0.0027) - 0.01,
            "{name} {} ms, under the server's own hold {held:.1} ms: {c}",
            p(name)
        );
        assert!(
            p(name) <= left * (1.0 + 0.0027) + SLACK_MS,
            "{name} {} ms, over the {left:.1} ms the answer took from its due time: {c}",
            p(name)
        );
    }
    let requests = count("http_reqs");
    assert_eq!(
        requests + overloaded,
        RATE * SECONDS,
        "every arrival was sent but those the generator fell behind on\n{summary}"
    );
    assert_eq!(
        served.len() as u64,
        requests,
        "the server answered each request"
    );
    // Nothing was turned away for want of a VU: every drop is the generator's.
    assert_eq!(count("dropped_iterations"), overloaded, "{summary}");
    assert!(!summary.contains("target saturated"), "{summary}");
    // The pool was sized for the timeout: 500/s × 10 s.
    assert!(summary.contains("5000 max VUs"), "{summary}");
}

/// Runs `profile` in a daemon against the stalling server and returns its `/metrics` once
/// the run has ended.
fn daemon_run(profile: &str, slos: &str) -> (String, Arc<Stalls>) {
    let (server, stalls) = stall_server();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let exposition = runtime().block_on(async {
        let text = daemon_config(server.addr, &data, profile, slos);
        let d = crate::support::serve_in_process(&text, dir.path()).await;
        let base = format!("http://{}", d.addr);
        let ended = r#"sloburn_runs_total{profile="stall""#;
        let deadline = Instant::now() + Duration::from_secs(SECONDS + 60);
        let mut m = String::new();
        while Instant::now() < deadline {
            m = request("GET", &format!("{base}/metrics"), None).await.1;
            if metric_sum(&m, ended) >= 1.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(metric_sum(&m, ended) >= 1.0, "the run did not end:\n{m}");
        // The SLO counters are folded once a second.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let (_, m) = request("GET", &format!("{base}/metrics"), Some(ADMIN_TOKEN)).await;
        d.shutdown().await;
        m
    });
    drop(server);
    (exposition, stalls)
}

/// The most requests the server held at once.
fn most_held_at_once(stalls: &Stalls) -> usize {
    let mut edges: Vec<(Instant, i32)> = Vec::new();
    for (arrived, held) in stalls.served.lock().unwrap().iter() {
        edges.push((*arrived, 1));
        edges.push((*arrived + *held, -1));
    }
    // At one instant a release is counted before an arrival.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

fn slo_excused(m: &str, slo: &str) -> f64 {
    metric_sum(
        m,
        &format!(r#"sloburn_slo_excused_events_total{{slo="{slo}"}}"#),
    )
}

fn slo_events(m: &str, slo: &str, result: &str) -> f64 {
    metric_sum(
        m,
        &format!(r#"sloburn_slo_events_total{{slo="{slo}",result="{result}"}}"#),
    )
}

const STALL_PROFILE: &str = "  stall:\n    target: api\n    every: 1h\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 500/s\n    duration: 10s\n";

/// An SLO over the stall case with defaults (the issue's 500/s) counts every stalled user who
/// waited past the latency bound: 2 stalls × rate × 0.9 s bad events, and nothing else. Two
/// things keep the count honest when a stall ends and 500 answers arrive at once: sloburn
/// times each answer by the kernel's receive stamp (`http::rx`), not by when its task got to
/// it, and the test's target writes its backlog as a plain server on its own host would, in
/// one loop at the highest CPU weight. What remains over the analytic figure is the target's
/// own release time (904–906 bad events at 500/s with the machine loaded, against 900), and
/// the test reads it from the server: at least every request the server held past 100 ms is
/// bad, at most those whose answer left 90 ms after their due time ([`served`]; the 10 ms are
/// [`SLACK_MS`]). Without the kernel stamps the answers read late after a stall add ~50.
#[test]
fn an_slo_over_a_stall_counts_the_stalled_users_as_bad_events() {
    let _heavy = crate::load::heavy();
    let rate = RATE;
    let profile = STALL_PROFILE;
    let slos = "  fast:\n    target: api\n    sli: { latency: { under: 100ms } }\n    objective: 99\n    period: 1d\n  up:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1d\n";
    let (m, stalls) = daemon_run(profile, slos);
    let served = served(&stalls);
    let (good, bad) = (
        slo_events(&m, "fast", "good"),
        slo_events(&m, "fast", "bad"),
    );
    let analytic = 2.0 * rate as f64 * 0.9;
    let floor = served.iter().filter(|s| s.0 > 100.0).count() as f64;
    let ceiling = served.iter().filter(|s| s.1 > 100.0 - SLACK_MS).count() as f64;
    eprintln!(
        "latency SLO: {good} good, {bad} bad (analytic {analytic}; the server held {floor} past \
         100 ms, answered {ceiling} past {} ms of their due time)",
        100.0 - SLACK_MS
    );
    // Every arrival is one event, but those a loaded machine's generator fell behind on, and
    // the answers past the objective whose latency was sloburn's own CPU starvation (excused,
    // issue 43): its own trouble, never the target's, and no SLO event.
    let overloaded = metric_sum(
        &m,
        r#"sloburn_generator_overloaded_iterations_total{target="api",profile="stall""#,
    );
    let excused = slo_excused(&m, "fast");
    assert_eq!(
        good + bad + overloaded + excused,
        (rate * SECONDS) as f64,
        "every arrival is one event"
    );
    assert_eq!(
        served.len() as f64,
        good + bad + excused,
        "the server answered each"
    );
    assert!(
        floor <= bad + excused && bad <= ceiling,
        "{bad} bad events ({excused} excused); the server held {floor} past 100 ms, {ceiling} \
         left after 90 ms"
    );
    // Slow is not down: every stalled user got an answer.
    assert_eq!(slo_events(&m, "up", "bad"), 0.0);
    assert_eq!(
        metric_sum(
            &m,
            r#"sloburn_saturated_iterations_total{target="api",profile="stall""#
        ),
        0.0
    );
}

/// A pool too small for the stall (`max_vus: 100` at 500/s): the arrivals that find every VU
/// held by the target are turned away, and each is a bad event for availability (the user got
/// nothing) as for latency, never the generator's overload.
#[test]
fn arrivals_turned_away_by_a_saturated_target_are_bad_events() {
    let _heavy = crate::load::heavy();
    let profile = format!("{STALL_PROFILE}    pre_allocated_vus: 10\n    max_vus: 100\n");
    let slos = "  up:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1d\n";
    let (m, stalls) = daemon_run(&profile, slos);
    let saturated = metric_sum(
        &m,
        r#"sloburn_saturated_iterations_total{target="api",profile="stall""#,
    );
    let overloaded = metric_sum(
        &m,
        r#"sloburn_generator_overloaded_iterations_total{target="api",profile="stall""#,
    );
    let (good, bad) = (slo_events(&m, "up", "good"), slo_events(&m, "up", "bad"));
    eprintln!("saturated {saturated}, overloaded {overloaded}; SLO {good} good, {bad} bad");
    // Each stall holds 100 users and turns away the rest of its 500 arrivals: 2 × 400 on an
    // idle machine (700–820 seen). A loaded one sends late, some of a stall's arrivals after
    // it ended; the counts are then checked against what the server saw: it held the pool's
    // 100 at once, never more, and every arrival was answered, turned away, or the generator's.
    let most = most_held_at_once(&stalls);
    let answered = stalls.served.lock().unwrap().len() as f64;
    assert_eq!(most, 100, "the server held the pool's 100 users at once");
    assert_eq!(
        answered + saturated + overloaded,
        (RATE * SECONDS) as f64,
        "{answered} answered, {saturated} turned away, {overloaded} the generator's"
    );
    assert!(
        saturated >= 2.0 * (RATE as f64 * 0.5 - 100.0),
        "{saturated} saturated drops, 2 × 400 on an idle machine; at least 2 × 150 while the \
         generator is less than half a stall late"
    );
    assert_eq!(bad, saturated, "each user turned away is one bad event");
    assert_eq!(good + bad + overloaded, (RATE * SECONDS) as f64);
    // No threshold: the run itself passes and the SLO carries the failure; a generator that
    // fell behind on too many arrivals makes it inconclusive instead (its own trouble).
    let result = |r: &str| {
        metric_sum(
            &m,
            &format!(r#"sloburn_runs_total{{profile="stall",result="{r}"}}"#),
        )
    };
    let inconclusive = overloaded > 0.0 && result("inconclusive") == 1.0;
    assert!(
        result("passed") == 1.0 || inconclusive,
        "the run passes (or is the generator's inconclusive): {overloaded} overloaded"
    );
}
