//! Alerting on SLO burn, end to end with real servers on 127.0.0.1: `sloburn serve` drives a
//! `sloburn target` answering 30 % errors, a real Prometheus scrapes it and evaluates the rules
//! `sloburn rules` generated, a real Alertmanager routes the page to a webhook this test runs,
//! and Prometheus's recorded SLI agrees with the daemon's own.

use crate::support::{
    BackgroundTarget, Daemon, Server, daemon_config, eventually, find_in_path, free_port,
    metric_sum, request, sloburn_rules, wait_ready, write_config,
};
use serde_json::{Value, json};
use sloburn::metrics::window_label;
use sloburn::rules::promql_duration;
use sloburn::target::TargetOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SLO: &str = "api-availability";
/// `{service}-{slo}`; the service of a config SLO is its target.
const SLOTH_ID: &str = "api-api-availability";
const RATE: u64 = 100;
const ERROR_RATIO: f64 = 0.3;

/// `alertmanager` (upstream) or `prometheus-alertmanager` (Debian) from PATH.
fn alertmanager_bin() -> PathBuf {
    find_in_path("alertmanager")
        .or_else(|| find_in_path("prometheus-alertmanager"))
        .unwrap_or_else(|| {
            panic!("neither alertmanager nor prometheus-alertmanager in PATH: run `make test` (it installs Debian's prometheus-alertmanager package)")
        })
}

/// One webhook delivery: the path (the receiver), when it arrived, the JSON body.
#[derive(Debug, Clone)]
struct Delivery {
    path: String,
    at: Instant,
    body: Value,
}

/// A minimal HTTP/1.1 server on 127.0.0.1:0 recording Alertmanager's webhook POSTs.
struct Webhook {
    addr: SocketAddr,
    deliveries: Arc<Mutex<Vec<Delivery>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Webhook {
    fn start() -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let deliveries = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (d2, s2) = (deliveries.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        if let Some(d) = Self::serve(conn) {
                            d2.lock().unwrap().push(d);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(_) => return,
                }
            }
        });
        Webhook {
            addr,
            deliveries,
            stop,
            thread: Some(thread),
        }
    }

    /// Reads one request (Content-Length body), answers 200 and closes the connection.
    fn serve(mut conn: TcpStream) -> Option<Delivery> {
        conn.set_nonblocking(false).ok()?;
        conn.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let n = conn.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
        let len: usize = head
            .lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = conn.read(&mut chunk).ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let raw = &buf[head_end..buf.len().min(head_end + len)];
        let body = serde_json::from_slice(raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned()));
        let _ =
            conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        Some(Delivery {
            path,
            at: Instant::now(),
            body,
        })
    }

    fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.lock().unwrap().clone()
    }

    /// Every firing alert delivered so far, as (receiver path, arrival, alert object).
    fn firing(&self) -> Vec<(String, Instant, Value)> {
        self.deliveries()
            .into_iter()
            .flat_map(|d| {
                let alerts = d.body["alerts"].as_array().cloned().unwrap_or_default();
                alerts
                    .into_iter()
                    .filter(|a| a["status"] == "firing")
                    .map(move |a| (d.path.clone(), d.at, a))
            })
            .collect()
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Alertmanager routing `severity="page"` to `/page` and the rest to `/ticket` on the
/// webhook, grouping per SLO tier, flushing after 1 s; clustering off.
fn alertmanager(webhook: SocketAddr) -> Server {
    let bin = alertmanager_bin();
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        r#"route:
  receiver: ticket
  group_by: [alertname, sloth_id, sloburn_tier]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['severity="page"']
      receiver: page
receivers:
  - name: page
    webhook_configs:
      - url: http://{webhook}/page
        send_resolved: false
  - name: ticket
    webhook_configs:
      - url: http://{webhook}/ticket
        send_resolved: false
"#
    );
    let cfg_path = dir.path().join("alertmanager.yml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg(format!("--config.file={}", cfg_path.display()))
        .arg(format!(
            "--storage.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=");
    let am = Server::spawn(&mut cmd, dir, port);
    let ready = wait_ready(
        &format!("{}/-/ready", am.base),
        port,
        Duration::from_secs(20),
    );
    assert!(ready, "alertmanager did not start:\n{}", am.log_tail());
    am
}

fn config(target: SocketAddr, data: &Path) -> String {
    let profile = format!(
        "  steady:\n    target: api\n    executor: constant-arrival-rate\n    rate: {RATE}/s\n    duration: 60s\n"
    );
    let slo = format!(
        r#"  {SLO}:
    target: api
    sli: availability
    objective: 99
    period: 1h
    labels: {{ team: sre }}
    alerting:
      tiers:
        - {{ name: fast, severity: page, long: 1m, short: 10s, factor: 2 }}
        - {{ name: slow, severity: ticket, long: 5m, short: 1m, factor: 1 }}
"#
    );
    daemon_config(target, data, &profile, &slo)
}

/// One paired reading of the error ratio over a window, from the daemon and from Prometheus.
#[derive(Debug)]
struct Reading {
    window: Duration,
    /// `1 - sloburn_slo_sli_ratio{window}` from the daemon's /metrics.
    daemon: f64,
    /// `slo:sli_error:ratio_rate{window}` from Prometheus.
    prometheus: f64,
    /// The daemon's `sloburn_slo_events_total` (good, bad) at the same scrape.
    daemon_events: (f64, f64),
    /// The same counters as Prometheus last scraped them.
    prometheus_events: f64,
    run_active: f64,
}

impl Reading {
    fn relative_difference(&self) -> f64 {
        (self.daemon - self.prometheus).abs() / self.daemon
    }
}

/// Prometheus first (its value is the older one), then the daemon, about one second apart at most.
fn read(prom: &Server, d: &Daemon, window: Duration) -> Reading {
    let sel = format!("{{sloth_id=\"{SLOTH_ID}\"}}");
    let record = format!("slo:sli_error:ratio_rate{}", promql_duration(window));
    let prometheus = prom.scalar(&format!("{record}{sel}"));
    let prometheus_events = prom.scalar(&format!("sum(sloburn_slo_events_total{{slo=\"{SLO}\"}})"));
    let m = d.metrics();
    let sli = metric_sum(
        &m,
        &format!(
            "sloburn_slo_sli_ratio{{slo=\"{SLO}\",window=\"{}\"}} ",
            window_label(window)
        ),
    );
    let events = |r: &str| {
        metric_sum(
            &m,
            &format!("sloburn_slo_events_total{{slo=\"{SLO}\",result=\"{r}\"}} "),
        )
    };
    Reading {
        window,
        daemon: 1.0 - sli,
        prometheus,
        daemon_events: (events("good"), events("bad")),
        prometheus_events,
        run_active: metric_sum(&m, "sloburn_run_active{profile=\"steady\"} "),
    }
}

#[test]
fn a_fast_burn_pages_through_alertmanager_and_prometheus_agrees_with_the_daemon() {
    let started = Instant::now();
    alertmanager_bin();
    let target = BackgroundTarget::start(TargetOptions {
        error_ratio: ERROR_RATIO,
        ..TargetOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let path = write_config(dir.path(), &config(target.addr, &dir.path().join("data")));

    // The rules exactly as a user generates them.
    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, sloburn_rules([&path])).unwrap();

    let hook = Webhook::start();
    let am = alertmanager(hook.addr);
    let d = Daemon::start(&path, &["--no-watch"]);
    let prom = Server::prometheus(
        d.base.trim_start_matches("http://"),
        Some(&rules),
        "1s",
        Some(am.base.trim_start_matches("http://")),
    );

    // Before any load: Prometheus has both counters at 0 (so its rates start from the daemon's
    // first event), knows the Alertmanager (an alert firing before that would wait for the
    // 1m resend), and has evaluated every generated rule without error.
    let zeros = eventually(Duration::from_secs(20), || {
        let r = prom.query(&format!("sloburn_slo_events_total{{slo=\"{SLO}\"}}"));
        (r.len() == 2 && r.iter().all(|(_, v)| *v == 0.0)).then_some(())
    });
    assert!(
        zeros.is_some(),
        "prometheus never scraped both event counters at 0:\n{}",
        prom.log_tail()
    );
    let discovered = eventually(Duration::from_secs(20), || {
        let v = prom.api("/api/v1/alertmanagers");
        let active = v["data"]["activeAlertmanagers"].as_array()?;
        (!active.is_empty()).then_some(())
    });
    assert!(
        discovered.is_some(),
        "prometheus found no alertmanager:\n{}",
        prom.log_tail()
    );
    let healthy = eventually(Duration::from_secs(20), || {
        let v = prom.api("/api/v1/rules");
        let rules: Vec<Value> = v["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        let evaluated = !rules.is_empty()
            && rules
                .iter()
                .all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z");
        evaluated.then_some(rules)
    });
    let rules_state = healthy.unwrap_or_else(|| {
        panic!(
            "generated rules not all evaluated healthy: {}",
            prom.api("/api/v1/rules")
        )
    });
    assert!(
        rules_state
            .iter()
            .any(|r| r["name"] == "SloburnErrorBudgetBurn"),
        "{rules_state:?}"
    );
    assert!(
        hook.deliveries().is_empty(),
        "alerts without any traffic: {:?}",
        hook.deliveries()
    );
    let setup = started.elapsed();

    // Load: 100 requests/s for 60 s, 30 % answered 500.
    let (code, body) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(request(
            "POST",
            &format!("{}/api/profiles/steady/run", d.base),
            Some("s3cret-admin"),
        ));
    assert_eq!(code, 202, "{body}");
    let load_start = Instant::now();

    // The page: burn rate 30 (0.3 / 0.01) against a threshold of 2 over 1m and 10s. Prometheus's
    // rate() needs two samples, not a full window, so it fires seconds after the first errors.
    let page = eventually(Duration::from_secs(60), || {
        hook.firing()
            .into_iter()
            .find(|(_, _, a)| a["labels"]["severity"] == "page")
    });
    let Some((page_path, page_at, page)) = page else {
        panic!(
            "no page within 60 s of load; deliveries {:?}\nprometheus alerts {}\nalertmanager:\n{}",
            hook.deliveries(),
            prom.api("/api/v1/alerts"),
            am.log_tail()
        );
    };
    let page_after = page_at - load_start;
    assert_eq!(page_path, "/page", "routed by severity: {page}");
    assert_eq!(
        page["labels"],
        json!({
            "alertname": "SloburnErrorBudgetBurn",
            "severity": "page",
            "sloth_severity": "page",
            "sloburn_tier": "fast",
            "sloth_id": SLOTH_ID,
            "sloth_service": "api",
            "sloth_slo": SLO,
            "team": "sre",
        }),
        "{page}"
    );
    let burn: f64 = page["annotations"]["burn_rate"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    // $value is the long window's burn rate; early windows hold a few hundred events, hence
    // the wide band, which still tells a burn rate (30) from a ratio (0.3) or the threshold (2).
    assert!((15.0..=45.0).contains(&burn), "burn_rate {burn}: {page}");
    let summary = page["annotations"]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.starts_with("api/api-availability: error budget burning")
            && summary.ends_with("over 1m and 10s (threshold 2x)"),
        "{summary}"
    );

    // The slow tier is a ticket and goes to the other receiver.
    let ticket = eventually(Duration::from_secs(20), || {
        hook.firing()
            .into_iter()
            .find(|(_, _, a)| a["labels"]["sloburn_tier"] == "slow")
    });
    let (ticket_path, _, ticket) = ticket
        .unwrap_or_else(|| panic!("no ticket within 20 s of the page: {:?}", hook.deliveries()));
    assert_eq!(ticket_path, "/ticket", "{ticket}");
    assert_eq!(ticket["labels"]["severity"], "ticket", "{ticket}");
    for (path, _, a) in hook.firing() {
        let want = if a["labels"]["severity"] == "page" {
            "/page"
        } else {
            "/ticket"
        };
        assert_eq!(path, want, "misrouted: {a}");
        assert_eq!(a["labels"]["alertname"], "SloburnErrorBudgetBurn", "{a}");
    }

    // Live, after 50 s of load: the daemon counts every event up to its last 1 s tick, in
    // per-minute buckets including the current minute (its 5m and 1h windows hold the whole run);
    // Prometheus's record holds the events between its first sample (0, before the load) and its
    // last scrape, up to ~2 s older (1 s scrape + 1 s evaluation). rate()'s extrapolation scales
    // the bad and the total rate by the same factor (same sample timestamps), so it cancels in
    // the ratio. The only difference is those last ~2 s of events, ~200 of 5000: with a 30 %
    // error ratio the two ratios differ by about 0.5 % relative (1 sigma).
    let enough = eventually(Duration::from_secs(55), || {
        let m = d.metrics();
        (metric_sum(&m, &format!("sloburn_slo_events_total{{slo=\"{SLO}\"")) >= 50.0 * RATE as f64)
            .then_some(())
    });
    assert!(
        enough.is_some(),
        "fewer than 50 s of events: {}",
        d.metrics()
    );
    let mut live = Vec::new();
    // The daemon's smallest standard window, and the period (recorded from increase()).
    let windows = [Duration::from_secs(300), Duration::from_secs(3600)];
    for window in windows {
        let r = read(&prom, &d, window);
        assert!(r.run_active == 1.0, "the load ended early: {r:?}");
        for v in [r.daemon, r.prometheus] {
            assert!(
                (v - ERROR_RATIO).abs() <= 0.1 * ERROR_RATIO,
                "error ratio {v} is not near {ERROR_RATIO}: {r:?}"
            );
        }
        assert!(
            r.relative_difference() < 0.02,
            "daemon and prometheus disagree by more than 2 %: {r:?}"
        );
        live.push(r);
    }

    // Settled, once the 60 s run has ended and both sides have seen its last event: the same
    // events on both sides, so the ratios are equal up to floating-point rounding.
    let mut last = Vec::new();
    let settled = eventually(Duration::from_secs(25), || {
        last = windows.map(|w| read(&prom, &d, w)).into_iter().collect();
        last.iter()
            .all(|r| {
                let (g, b) = r.daemon_events;
                r.run_active == 0.0
                    && r.prometheus_events == g + b
                    && (r.daemon - b / (g + b)).abs() < 1e-12
                    && r.relative_difference() < 1e-9
            })
            .then_some(())
    });
    assert!(
        settled.is_some(),
        "after the run, daemon and prometheus should count the same events: {last:?}"
    );
    let (g, b) = last[0].daemon_events;
    eprintln!(
        "alerting: setup {setup:?}, page {page_after:?} after load start (burn {burn}), live {:?}, settled {} events, error ratio {:.4}, total {:?}",
        live.iter()
            .map(|r| format!(
                "{}: daemon {:.5} prometheus {:.5} ({:.2} % apart; daemon {} events, prometheus's last scrape {})",
                window_label(r.window),
                r.daemon,
                r.prometheus,
                100.0 * r.relative_difference(),
                r.daemon_events.0 + r.daemon_events.1,
                r.prometheus_events
            ))
            .collect::<Vec<_>>(),
        g + b,
        b / (g + b),
        started.elapsed()
    );
}

/// The tier-transition log lines of `d` so far: (tier, state, was) of each, in order.
fn transitions(d: &Daemon) -> Vec<(String, String, String)> {
    d.logs
        .lock()
        .unwrap()
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("SLO alert tier"))
        })
        .map(|v| {
            assert_eq!(v["slo"], "flaky", "{v}");
            for field in ["long_burn_rate", "short_burn_rate", "factor"] {
                assert!(v[field].is_number(), "{field} in {v}");
            }
            assert_eq!(
                (&v["long_window"], &v["short_window"]),
                (&json!("1h"), &json!("5m"))
            );
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            (s("tier"), s("state"), s("was"))
        })
        .collect()
}

/// Waits until the transition log holds `n` lines; returns them.
fn transitions_reach(d: &Daemon, n: usize) -> Vec<(String, String, String)> {
    eventually(Duration::from_secs(30), || {
        let seen = transitions(d);
        (seen.len() >= n).then_some(seen)
    })
    .unwrap_or_else(|| panic!("{n} transition lines: {:?}", transitions(d)))
}

/// Issue 46 item 3: a tier that starts firing, is silenced by a maintenance window, fires again
/// when it closes and stops once good traffic dilutes the errors is logged once per change
/// (the daemon's one-second tick evaluates it every second in between, and logs nothing more).
#[test]
fn each_alert_tier_transition_is_logged_once() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    // 40 failures (the target answers 503 to `?status=503`), then 400 good answers: the error
    // ratio goes from 100 % to 40 / 440 = 9 %, across a tier at 2 × the 10 % budget = 20 %.
    let text = format!(
        r#"server:
  admin_token: "${{env:TEST_ADMIN_TOKEN}}"
storage:
  path: "{data}"
targets:
  api:
    url: http://{addr}/api
    checks: [ {{ status: 200 }} ]
journeys:
  failing:
    target: api
    steps: [ {{ name: fail, path: "/api?status=503" }} ]
profiles:
  bad: {{ journey: failing, executor: shared-iterations, vus: 2, iterations: 40 }}
  good: {{ target: api, executor: shared-iterations, vus: 4, iterations: 400 }}
slos:
  flaky:
    target: api
    sli: availability
    objective: 90
    period: 30d
    alerting:
      tiers:
        - {{ name: fast, severity: page, long: 1h, short: 5m, factor: 2 }}
"#,
        data = dir.path().join("data").display(),
        addr = target.addr,
    );
    let config = write_config(dir.path(), &text);
    let d = Daemon::start(&config, &[]);
    let rt = crate::support::runtime();
    let base = d.base.clone();
    let post = |path: &str, body: &'static str| {
        let url = format!("{base}{path}");
        rt.block_on(async move {
            use sloburn::http::{Client, ClientOptions, RequestSpec, Resolver};
            let client = Client::new(ClientOptions::default(), Arc::new(Resolver::system()));
            let mut headers = http::HeaderMap::new();
            let bearer = format!("Bearer {}", crate::support::ADMIN_TOKEN);
            headers.insert("authorization", bearer.parse().unwrap());
            headers.insert("content-type", "application/json".parse().unwrap());
            let out = client
                .conn()
                .send(&RequestSpec {
                    method: http::Method::POST,
                    uri: url.parse().unwrap(),
                    headers,
                    body: body.into(),
                })
                .await;
            (
                out.status.unwrap_or(0),
                String::from_utf8_lossy(&out.body).into_owned(),
            )
        })
    };
    let line = |state: &str, was: &str| ("fast".to_string(), state.to_string(), was.to_string());

    rt.block_on(crate::support::run_and_wait(&base, "bad", 1));
    assert_eq!(transitions_reach(&d, 1), [line("firing", "ok")]);

    let (code, body) = post(
        "/api/maintenance",
        r#"{"duration": "1h", "reason": "test"}"#,
    );
    assert_eq!(code, 201, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"]
        .as_u64()
        .unwrap();
    assert_eq!(transitions_reach(&d, 2)[1], line("silenced", "firing"));
    let (code, _) = rt.block_on(request(
        "DELETE",
        &format!("{base}/api/maintenance/{id}"),
        Some(crate::support::ADMIN_TOKEN),
    ));
    assert_eq!(code, 204);
    assert_eq!(transitions_reach(&d, 3)[2], line("firing", "silenced"));

    rt.block_on(crate::support::run_and_wait(&base, "good", 2));
    assert_eq!(transitions_reach(&d, 4)[3], line("ok", "firing"));
    // Three more ticks (and the good run's last events folded): nothing else is logged.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        transitions(&d),
        [
            line("firing", "ok"),
            line("silenced", "firing"),
            line("firing", "silenced"),
            line("ok", "firing"),
        ]
    );
    let period = crate::support::period_events(&d);
    assert_eq!(period, 440, "every request counted once");
}
