//! The dashboard and the run report in a real headless Chromium (Debian `chromium`, installed
//! by scripts/install-web-test-tools.sh), driven over the DevTools protocol: what the page
//! shows against the API, no console errors, no request outside the daemon's origin (or, for
//! the report, outside its own file with the network off), live figures that move, a
//! screenshot that is not blank; and the series API's shape, and run history across a restart.
//!
//! Chromium is kept off the network: every host but loopback resolves to nothing and goes
//! through a dead proxy on 127.0.0.1:9, and its background services are off.

use crate::support::*;
use base64::Engine;
use serde_json::{Value, json};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::{Message, WebSocket, stream::MaybeTlsStream};

/// Where the screenshots go (kept after the run, for people and CI artifacts).
fn artifacts() -> PathBuf {
    let dir = root().join("target").join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A headless Chromium with its own profile directory; killed on drop.
pub(crate) struct Chrome {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Chrome {
    pub(crate) fn start() -> Chrome {
        let chromium = which("chromium");
        let profile = tempfile::tempdir().unwrap();
        let child = Command::new(chromium)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-default-apps",
                "--disable-domain-reliability",
                "--disable-client-side-phishing-detection",
                "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
                "--no-pings",
                "--metrics-recording-only",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--proxy-server=http://127.0.0.1:9",
                "--allow-file-access-from-files",
                "--window-size=1400,1800",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium (run `make tools`)");
        let file = profile.path().join("DevToolsActivePort");
        let port = eventually(Duration::from_secs(30), || {
            let text = std::fs::read_to_string(&file).ok()?;
            text.lines().next()?.trim().parse::<u16>().ok()
        })
        .expect("chromium did not open its DevTools port");
        Chrome {
            child,
            port,
            _profile: profile,
        }
    }

    /// The first page target, with the domains the tests listen to enabled.
    pub(crate) fn page(&self) -> Page {
        let list = eventually(Duration::from_secs(20), || {
            let (code, body) = get_blocking(&format!("http://127.0.0.1:{}/json/list", self.port));
            let v: Value = serde_json::from_str(&body).ok()?;
            (code == 200).then_some(v)
        })
        .expect("DevTools target list");
        let ws_url = list
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .expect("a page target")
            .to_string();
        let (mut ws, _) = tokio_tungstenite::tungstenite::connect(ws_url.as_str()).unwrap();
        if let MaybeTlsStream::Plain(s) = ws.get_mut() {
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
        }
        let mut page = Page {
            ws,
            next: 0,
            events: Vec::new(),
        };
        for domain in ["Runtime", "Log", "Network", "Page"] {
            page.call(&format!("{domain}.enable"), json!({}));
        }
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": 1400, "height": 1800, "deviceScaleFactor": 1, "mobile": false }),
        );
        page
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One page over the DevTools protocol: calls wait for their answer; events are kept.
pub(crate) struct Page {
    ws: WebSocket<MaybeTlsStream<TcpStream>>,
    next: u64,
    pub(crate) events: Vec<Value>,
}

impl Page {
    /// Reads one message, or None after the read timeout.
    fn read(&mut self) -> Option<Value> {
        match self.ws.read() {
            Ok(Message::Text(t)) => serde_json::from_str(t.as_str()).ok(),
            Ok(_) => None,
            Err(tokio_tungstenite::tungstenite::Error::Io(e))
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                None
            }
            Err(e) => panic!("DevTools connection: {e}"),
        }
    }

    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let msg = json!({ "id": id, "method": method, "params": params }).to_string();
        self.ws.send(Message::Text(msg.into())).unwrap();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(60) {
            if let Some(m) = self.read() {
                if m["id"] == id {
                    assert!(m.get("error").is_none(), "{method}: {m}");
                    return m["result"].clone();
                }
                self.events.push(m);
            }
        }
        panic!("{method}: no answer in 60 s");
    }

    /// Keeps reading events for `d`.
    pub(crate) fn pump(&mut self, d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {
            if let Some(m) = self.read() {
                self.events.push(m);
            }
        }
    }

    pub(crate) fn navigate(&mut self, url: &str) {
        self.call("Page.navigate", json!({ "url": url }));
    }

    /// The value of a JavaScript expression (promises awaited).
    pub(crate) fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expr, "returnByValue": true, "awaitPromise": true }),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Polls `expr` until it is truthy (an exception, as before the page has loaded, counts
    /// as not yet); its value.
    pub(crate) fn wait_for(&mut self, what: &str, expr: &str, limit: Duration) -> Value {
        let start = Instant::now();
        let guarded =
            format!("(() => {{ try {{ return ({expr}); }} catch (e) {{ return null; }} }})()");
        loop {
            let v = self.eval(&guarded);
            if !(v.is_null() || v == json!(false) || v == json!(0) || v == json!("")) {
                return v;
            }
            assert!(
                start.elapsed() < limit,
                "{what}: not so after {limit:?}; console: {:?}",
                self.console_errors()
            );
            self.pump(Duration::from_millis(250));
        }
    }

    /// Console errors, uncaught exceptions and error log entries seen so far.
    fn console_errors(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match e["method"].as_str()? {
                "Runtime.consoleAPICalled" if e["params"]["type"] == "error" => {
                    Some(e["params"]["args"].to_string())
                }
                "Runtime.exceptionThrown" => Some(e["params"]["exceptionDetails"].to_string()),
                "Log.entryAdded" if e["params"]["entry"]["level"] == "error" => {
                    Some(e["params"]["entry"].to_string())
                }
                _ => None,
            })
            .collect()
    }

    /// Every URL the page asked for.
    fn requests(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .filter_map(|e| e["params"]["request"]["url"].as_str().map(str::to_string))
            .collect()
    }

    /// A full-page PNG saved at `path`; returns its luminance variance and distinct colours.
    fn screenshot(&mut self, path: &Path) -> (f64, usize) {
        let r = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": true }),
        );
        let png_bytes = base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().unwrap())
            .unwrap();
        std::fs::write(path, &png_bytes).unwrap();
        pixel_stats(&png_bytes)
    }
}

/// Luminance variance and the number of distinct colours of a PNG.
fn pixel_stats(bytes: &[u8]) -> (f64, usize) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.line_size / info.width as usize;
    assert!(channels >= 3, "colour PNG: {:?}", info.color_type);
    let mut colours = std::collections::HashSet::new();
    let (mut n, mut sum, mut sq) = (0f64, 0f64, 0f64);
    for row in buf[..info.buffer_size()].chunks(info.line_size) {
        for px in row.chunks(channels).take(info.width as usize) {
            let y = 0.2126 * px[0] as f64 + 0.7152 * px[1] as f64 + 0.0722 * px[2] as f64;
            n += 1.0;
            sum += y;
            sq += y * y;
            colours.insert((px[0], px[1], px[2]));
        }
    }
    let mean = sum / n;
    (sq / n - mean * mean, colours.len())
}

/// A percentage as the page prints it (`99.900%`) back to a ratio.
fn ratio_of(text: &str) -> f64 {
    text.trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .unwrap_or_else(|_| panic!("not a percentage: {text:?}"))
        / 100.0
}

fn close(a: f64, b: f64, tol: f64, what: &str) {
    assert!((a - b).abs() <= tol, "{what}: page {a} vs API {b}");
}

/// Asserts that the page asked only for `allowed` URLs (by prefix) and logged no error.
pub(crate) fn assert_clean(page: &Page, allowed: &[&str]) {
    let requests = page.requests();
    assert!(!requests.is_empty(), "the request log is empty");
    let outside: Vec<&String> = requests
        .iter()
        .filter(|u| !allowed.iter().any(|a| u.starts_with(a)))
        .collect();
    assert!(
        outside.is_empty(),
        "requests outside {allowed:?}: {outside:?}"
    );
    assert_eq!(
        page.console_errors(),
        Vec::<String>::new(),
        "console errors"
    );
}

fn save_screenshot(page: &mut Page, name: &str) {
    let path = artifacts().join(name);
    let (variance, colours) = page.screenshot(&path);
    assert!(
        variance > 200.0 && colours > 16,
        "{} looks blank: luminance variance {variance:.1}, {colours} colours",
        path.display()
    );
}

#[test]
fn the_demo_dashboard_in_chromium_matches_the_api_and_its_live_figures_move() {
    let port = free_port();
    let _demo = Proc::start(["demo", "--listen", &format!("127.0.0.1:{port}")]);
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        wait_ready(&format!("{base}/healthz"), port, Duration::from_secs(60)),
        "the demo did not start"
    );
    let chrome = Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("{base}/"));

    // Every SLO card has its burn-down drawn; both scheduled profiles have their hour drawn.
    page.wait_for(
        "SLO cards with a chart",
        "(() => { const c = [...document.querySelectorAll('article.slo-card')];
           return c.length >= 2 && c.every(x => x.querySelector('figure.chart canvas')); })()",
        Duration::from_secs(90),
    );
    page.wait_for(
        "profile charts",
        "['checkout-canary', 'search-steady'].every(n => {
           const c = document.querySelector(`article[data-profile=\"${n}\"]`);
           return c && c.querySelectorAll('figure.chart canvas').length >= 3; })",
        Duration::from_secs(90),
    );
    let per_profile = page.eval(
        "[...document.querySelectorAll('article.profile-card')].map(c =>
           c.querySelectorAll('figure.chart').length)",
    );
    let per_profile: Vec<u64> = serde_json::from_value(per_profile).unwrap();
    // The demo's four profiles, each with its four charts: rate, latency, errors, VUs.
    assert_eq!(per_profile, [4, 4, 4, 4], "charts per profile card");

    // The numbers on the cards are those of the /api/slos answer they were drawn from, read
    // in one turn of the page's event loop; and that answer is the daemon's.
    let seen = page.eval(
        "(() => ({
           api: window.__sloburn.last.slos,
           cards: [...document.querySelectorAll('article.slo-card')].map(c => ({
             name: c.dataset.slo,
             objective: c.querySelector('[data-field=objective]').textContent,
             sli: c.querySelector('[data-field=sli]').textContent,
             budget: c.querySelector('[data-field=budget_remaining]').textContent,
             burn: [...c.querySelectorAll('[data-field=burn_rate]')].map(b =>
               [b.dataset.window, b.textContent]),
             charts: c.querySelectorAll('figure.chart canvas').length,
           })),
         }))()",
    );
    let (_, direct) = get_blocking(&format!("{base}/api/slos"));
    let direct: Value = serde_json::from_str(&direct).unwrap();
    let api = seen["api"]["slos"].as_array().unwrap();
    let cards = seen["cards"].as_array().unwrap();
    assert_eq!(cards.len(), api.len());
    assert_eq!(api.len(), direct["slos"].as_array().unwrap().len());
    for (card, slo) in cards.iter().zip(api) {
        let name = slo["name"].as_str().unwrap();
        assert_eq!(card["name"], slo["name"]);
        assert_eq!(card["charts"], 1, "{name}: its burn-down, drawn once");
        let objective = slo["objective"].as_f64().unwrap();
        close(
            ratio_of(card["objective"].as_str().unwrap()),
            objective,
            5e-6,
            name,
        );
        let sli = slo["period"]["sli"].as_f64().unwrap();
        close(ratio_of(card["sli"].as_str().unwrap()), sli, 5e-6, name);
        let budget = slo["budget_remaining"].as_f64().unwrap();
        close(
            ratio_of(card["budget"].as_str().unwrap()),
            budget,
            5e-5,
            name,
        );
        let windows = slo["windows"].as_array().unwrap();
        let burns = card["burn"].as_array().unwrap();
        assert_eq!(burns.len(), windows.len(), "{name}");
        for (b, w) in burns.iter().zip(windows) {
            assert_eq!(b[0], w["window"]);
            let text = b[1].as_str().unwrap();
            match w["burn_rate"].as_f64() {
                Some(rate) => close(
                    text.trim_end_matches('×').parse().unwrap(),
                    rate,
                    0.005,
                    name,
                ),
                None => assert_eq!(text, "no data"),
            }
        }
        let now = direct["slos"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap();
        assert_eq!(now["objective"], slo["objective"], "{name}");
        close(now["period"]["sli"].as_f64().unwrap(), sli, 0.01, name);
    }

    // The run in progress: its figures change between two reads 3 s apart (the canary runs
    // 58 s of every minute when the one before has ended, so it may be idle for up to a minute;
    // a pair of reads that falls across the end of a run is taken again).
    let live = "(() => { const e = document.querySelector(
        'article[data-profile=\"checkout-canary\"] [data-field=live_requests]');
        return e ? e.textContent : null; })()";
    let mut moved = None;
    for _ in 0..5 {
        let a = page.wait_for("a run in progress", live, Duration::from_secs(75));
        page.pump(Duration::from_secs(3));
        let b = page.eval(live);
        if !b.is_null() {
            moved = Some((a, b));
            break;
        }
    }
    let (a, b) = moved.expect("two reads during one run");
    assert_ne!(a, b, "live requests did not change in 3 s");

    save_screenshot(&mut page, "dashboard.png");
    assert_clean(&page, &[&format!("{base}/")]);
}

#[test]
fn under_protect_reads_the_page_asks_once_and_sends_the_token_as_a_header() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (target, _stop) = rt.block_on(spawn_target(Default::default()));
    let text = daemon_config(
        target,
        &dir.path().join("data"),
        "  p:\n    target: api\n    executor: constant-vus\n    vus: 1\n    duration: 2s\n    run_on_start: true\n    every: 1h\n",
        "  avail:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1h\n",
    )
    .replace("  grace_period: 5s\n", "  grace_period: 5s\n  protect_reads: true\n");
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let base = format!("http://{}", d.addr);
    let chrome = Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("{base}/"));
    page.wait_for(
        "the token form",
        "!document.getElementById('login').hidden",
        Duration::from_secs(30),
    );
    assert_eq!(
        page.eval("document.querySelectorAll('article.slo-card').length"),
        0
    );
    let early: Vec<String> = page
        .requests()
        .into_iter()
        .filter(|u| u.contains("/api/"))
        .collect();
    assert!(
        early.is_empty(),
        "API reads before the token was given: {early:?}"
    );
    page.eval(&format!(
        "document.getElementById('token').value = '{ADMIN_TOKEN}';
         document.getElementById('login').requestSubmit(); true"
    ));
    page.wait_for(
        "the SLO card",
        "document.querySelectorAll('article.slo-card').length === 1",
        Duration::from_secs(30),
    );
    assert_eq!(
        page.eval("sessionStorage.getItem('sloburn.token')"),
        json!(ADMIN_TOKEN)
    );
    // A reload in the same tab does not ask again.
    page.call("Page.reload", json!({}));
    page.wait_for(
        "the SLO card after a reload",
        "document.querySelectorAll('article.slo-card').length === 1",
        Duration::from_secs(30),
    );
    assert_eq!(
        page.eval("document.getElementById('login').hidden"),
        json!(true)
    );
    let requests = page.requests();
    assert!(requests.iter().any(|u| u.ends_with("/api/slos")));
    for u in &requests {
        assert!(!u.contains(ADMIN_TOKEN), "the token is in a URL: {u}");
    }
    let sent_header = page.events.iter().any(|e| {
        e["method"] == "Network.requestWillBeSent"
            && e["params"]["request"]["headers"]["Authorization"]
                == json!(format!("Bearer {ADMIN_TOKEN}"))
    });
    assert!(sent_header, "no request carried the bearer header");
    // The run's detail view, through the same token.
    let id = page.wait_for(
        "the finished run in the list",
        "(() => { const r = (window.__sloburn.last.runs.runs || []).find(r => r.result !== 'running');
           return r ? r.id : null; })()",
        Duration::from_secs(30),
    );
    page.eval(&format!("location.hash = '#run/{id}'; true"));
    page.wait_for(
        "the run's detail view",
        "!document.getElementById('run').hidden
           && document.querySelector('#run figure[data-chart=scatter] canvas')
           && document.querySelectorAll('#run figure.chart canvas').length >= 5",
        Duration::from_secs(30),
    );
    // The scatter draws every sample the daemon kept of the run, ok and failed apart, and the
    // samples are of every request the run made.
    let drawn = page.eval(
        "[1, 2].map(i => window.__sloburn.charts.scatter.data[i].filter(v => v !== null).length)",
    );
    let (code, body) = rt.block_on(request(
        "GET",
        &format!("{base}/api/runs/{}", id.as_u64().unwrap()),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 200, "{body}");
    let run: Value = serde_json::from_str(&body).unwrap();
    let scatter = &run["detail"]["scatter"];
    let failed = scatter["failed"].as_array().unwrap();
    let bad = failed.iter().filter(|f| f.as_u64() != Some(0)).count();
    assert_eq!(drawn, json!([failed.len() - bad, bad]), "{scatter}");
    assert!(!failed.is_empty(), "{scatter}");
    assert_eq!(
        scatter["seen"], run["detail"]["summary"]["requests"],
        "the reservoir saw every request"
    );
    assert_clean(&page, &[&format!("{base}/")]);
    rt.block_on(d.shutdown());
}

#[test]
fn a_run_report_opens_offline_from_a_file_and_its_scatter_shows_the_stall() {
    let dir = tempfile::tempdir().unwrap();
    let (_target, url) = Proc::target(&[
        "--latency",
        "30ms",
        "--stall-every",
        "3s",
        "--stall-for",
        "1s",
    ]);
    let report = dir.path().join("r.html");
    let mut run = Proc::start([
        "run",
        "--url",
        &format!("{url}/"),
        "--rate",
        "50/s",
        "--max-vus",
        "120",
        "--duration",
        "5s",
        "--threshold",
        "http_req_duration=p(95)<100",
        "--quiet",
        "--report",
        report.to_str().unwrap(),
    ]);
    let status = run.wait(Duration::from_secs(60)).expect("the run ended");
    assert_eq!(
        status.code(),
        Some(99),
        "the stall fails p(95)<100: {}",
        run.stderr()
    );
    let html = std::fs::read_to_string(&report).unwrap();
    let loads = regex::Regex::new(r#"(?i)\b(src|href)\s*=\s*["']?\s*(https?:)?//"#).unwrap();
    assert!(
        loads.find(&html).is_none(),
        "{:?}",
        loads.find(&html).map(|m| m.as_str())
    );
    assert!(
        !regex::Regex::new(r"(?i)<(link|img|iframe)\b")
            .unwrap()
            .is_match(&html)
    );

    let chrome = Chrome::start();
    let mut page = chrome.page();
    page.call(
        "Network.emulateNetworkConditions",
        json!({ "offline": true, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1 }),
    );
    let file_url = format!("file://{}", report.display());
    page.navigate(&file_url);
    page.wait_for(
        "the report's charts",
        "document.body.dataset.rendered && document.querySelectorAll('figure.chart canvas').length >= 5",
        Duration::from_secs(30),
    );
    // The scatter as uPlot holds it: latencies (ms) of the ok and the failed requests.
    let points = page.eval(
        "(() => { const d = window.__sloburn.charts.scatter.data;
           return [].concat(d[1], d[2]).filter(v => v !== null); })()",
    );
    let points: Vec<f64> = serde_json::from_value(points).unwrap();
    assert!(points.len() > 100, "{} points", points.len());
    let stalled = points.iter().filter(|ms| **ms >= 1000.0).count();
    assert!(
        stalled >= 1,
        "no point at or above the 1 s stall: max {:?}",
        points.iter().cloned().fold(0.0, f64::max)
    );
    assert_eq!(
        page.eval("[...document.querySelectorAll('td .verdict')].map(v => v.textContent)"),
        json!(["✗ FAIL"]),
        "the threshold's verdict"
    );
    // The page says what was run: the URL, the load and the command line; `run` says where
    // the page went.
    let setup = page.eval("document.querySelector('[data-field=setup]').textContent");
    let setup = setup.as_str().unwrap_or_default();
    assert!(
        setup.contains(&format!("{url}/"))
            && setup.contains("50.00 iterations/s for 5s")
            && setup.contains("--rate 50/s --max-vus 120"),
        "{setup}"
    );
    assert!(
        run.stderr()
            .contains(&format!("report written to {}", report.display())),
        "{}",
        run.stderr()
    );
    let pcts =
        page.eval("window.__sloburn.charts.percentiles.data[1].filter(v => v !== null).length");
    assert!(pcts.as_u64().unwrap() >= 3, "percentile points: {pcts}");
    save_screenshot(&mut page, "report.png");
    assert_clean(&page, &[&file_url]);
}

/// Numbers, strings and booleans by their kind; an array by the kinds it holds.
fn shape(v: &Value) -> Value {
    match v {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("bool"),
        Value::Number(_) => json!("number"),
        Value::String(_) => json!("string"),
        Value::Array(items) => {
            let mut kinds: Vec<Value> = Vec::new();
            for k in items.iter().map(shape) {
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            kinds.sort_by_key(|k| k.to_string());
            Value::Array(kinds)
        }
        Value::Object(m) => Value::Object(m.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
    }
}

#[test]
fn the_series_api_has_its_documented_shape_and_runs_survive_a_restart() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (target, _stop) = rt.block_on(spawn_target(Default::default()));
    let text = daemon_config(
        target,
        &dir.path().join("data"),
        "  p:\n    target: api\n    executor: constant-arrival-rate\n    rate: 20/s\n    duration: 3s\n    max_vus: 10\n    run_on_start: true\n    every: 1h\n    thresholds:\n      http_req_duration: [\"p(95)<5000\"]\n",
        "  avail:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1h\n",
    );
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let base = format!("http://{}", d.addr);
    let finished = eventually(Duration::from_secs(30), || {
        let (_, body) = get_blocking(&format!("{base}/api/runs"));
        let v: Value = serde_json::from_str(&body).ok()?;
        let run = v["runs"].get(0)?.clone();
        (run["result"] == "passed").then_some(run)
    })
    .expect("the run passed");
    let (_, body) = get_blocking(&format!("{base}/api/series"));
    let series: Value = serde_json::from_str(&body).unwrap();
    let p = &series["profiles"][0];
    assert_eq!(p["points"]["t"].as_array().unwrap().len(), 360);
    let requests: f64 = p["points"]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_f64)
        .sum();
    assert_eq!(
        requests,
        finished["requests"].as_f64().unwrap(),
        "the ring holds the run"
    );
    assert_eq!(p["live"], Value::Null);
    assert_eq!(p["last_run"]["id"], finished["id"]);
    golden(
        &root().join("tests/it/golden/series_shape.json"),
        &(serde_json::to_string_pretty(&shape(&series)).unwrap() + "\n"),
    );

    let id = finished["id"].as_u64().unwrap();
    let (code, body) = get_blocking(&format!("{base}/api/runs/{id}"));
    assert_eq!(code, 200, "{body}");
    let detail: Value = serde_json::from_str(&body).unwrap();
    let d1 = detail["detail"].clone();
    assert_eq!(d1["thresholds"][0]["passed"], json!(true));
    assert_eq!(d1["thresholds"][0]["unit"], json!("ms"));
    assert_eq!(
        d1["scatter"]["t"].as_array().unwrap().len() as u64,
        d1["summary"]["requests"].as_u64().unwrap()
    );
    assert!(!d1["timeline"].as_array().unwrap().is_empty());
    assert_eq!(d1["statuses"], json!([[200, d1["summary"]["requests"]]]));
    rt.block_on(d.shutdown());

    // After a restart the history (and the detail) come back from the store, and new runs
    // get new ids.
    let text = text.replace("    run_on_start: true\n", "");
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let base = format!("http://{}", d.addr);
    let (_, body) = get_blocking(&format!("{base}/api/runs?profile=p"));
    let runs: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(runs["runs"][0]["id"], finished["id"]);
    assert_eq!(runs["runs"][0]["requests"], finished["requests"]);
    let (_, body) = get_blocking(&format!("{base}/api/runs/{id}"));
    let again: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(again["detail"], d1);
    let (code, body) = rt.block_on(request(
        "POST",
        &format!("{base}/api/profiles/p/run"),
        Some(ADMIN_TOKEN),
    ));
    assert_eq!(code, 202, "{body}");
    let started: Value = serde_json::from_str(&body).unwrap();
    assert!(started["run"].as_u64().unwrap() > id, "{started}");
    rt.block_on(d.shutdown());
}

/// Issue 34's failure evidence: a run against a target that fails and echoes the bearer token
/// (in a header and its body) shows its last failing responses in the run's detail view, the
/// token redacted wherever it was.
#[test]
fn the_run_detail_shows_failing_responses_with_the_secret_redacted() {
    use axum::http::HeaderMap;
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let server = crate::support::serve_on_thread(axum::Router::new().route(
        "/api",
        axum::routing::get(|h: HeaderMap| async move {
            let auth = h
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            (
                http::StatusCode::SERVICE_UNAVAILABLE,
                [("x-echo-auth", auth.clone())],
                format!("{{\"error\":\"backend down\",\"seen\":\"{auth}\"}}"),
            )
        }),
    ));
    // Evidence is open here (`server.public_evidence`), so the page shows it without a token;
    // without the key it needs the token (`guard::an_echoing_target_…`).
    let text = daemon_config(
        server.addr,
        &dir.path().join("data"),
        "  p:\n    target: api\n    executor: shared-iterations\n    vus: 2\n    iterations: 20\n    run_on_start: true\n    every: 1h\n",
        "  avail:\n    target: api\n    sli: availability\n    objective: 99\n    period: 1h\n",
    )
    .replace("server:\n", "server:\n  public_evidence: true\n")
    .replace(
        "    checks:\n      - status: 200\n",
        "    headers: { Authorization: \"Bearer ${env:TEST_ADMIN_TOKEN}\" }\n    checks:\n      - status: 200\n",
    );
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let base = format!("http://{}", d.addr);
    let id = crate::support::eventually(Duration::from_secs(30), || {
        let (_, body) = crate::support::get_blocking(&format!("{base}/api/runs"));
        let v: Value = serde_json::from_str(&body).ok()?;
        let r = v["runs"]
            .as_array()?
            .iter()
            .find(|r| r["result"] != "running")?;
        r["id"].as_u64()
    })
    .expect("the run finished");
    let (_, body) = crate::support::get_blocking(&format!("{base}/api/runs/{id}"));
    assert!(
        !body.contains(ADMIN_TOKEN),
        "the token leaked into /api/runs/{id}"
    );
    let v: Value = serde_json::from_str(&body).unwrap();
    let ev = v["detail"]["evidence"].as_array().unwrap();
    assert_eq!(ev.len(), 5, "the last 5 of the step's 20 failures: {v}");
    assert_eq!(ev[0]["status"], 503);
    assert_eq!(ev[0]["failed_checks"], json!(["status"]));
    assert!(ev[0]["body"].as_str().unwrap().contains("backend down"));
    assert!(ev[0]["body"].as_str().unwrap().contains("[redacted]"));

    let chrome = Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("{base}/#run/{id}"));
    page.wait_for(
        "the evidence in the run's detail view",
        "document.querySelectorAll('#run details.failure').length === 5",
        Duration::from_secs(30),
    );
    page.eval(
        "document.querySelectorAll('#run details.failure').forEach(d => d.open = true); true",
    );
    let shown = page
        .eval("document.querySelector('#run .evidence').innerText")
        .as_str()
        .unwrap()
        .to_string();
    assert!(shown.contains("x-echo-auth"), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
    assert!(shown.contains("backend down"), "{shown}");
    assert!(
        !shown.contains(ADMIN_TOKEN),
        "the token is on the page: {shown}"
    );
    let shot = page.call("Page.captureScreenshot", json!({ "format": "png" }));
    if let Some(png) = shot["data"].as_str()
        && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(png)
    {
        let _ = std::fs::write(artifacts().join("run-evidence.png"), bytes);
    }
    rt.block_on(d.shutdown());
}

/// Issue 34's alerts table: each SLO card lists its burn-rate tiers with their state, both
/// windows' burn, threshold, `for`, time to exhaustion and the PromQL `sloburn rules` writes.
#[test]
fn each_slo_card_shows_its_alerts_table_with_the_rules_promql() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let (target, _stop) = rt.block_on(spawn_target(sloburn::target::TargetOptions {
        error_ratio: 1.0,
        ..Default::default()
    }));
    let text = daemon_config(
        target,
        &dir.path().join("data"),
        "  p:\n    target: api\n    executor: shared-iterations\n    vus: 2\n    iterations: 50\n    run_on_start: true\n    every: 1h\n",
        "  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: 30d\n",
    );
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let base = format!("http://{}", d.addr);
    let chrome = Chrome::start();
    let mut page = chrome.page();
    page.navigate(&format!("{base}/"));
    page.wait_for(
        "the page tiers firing in the alerts table",
        "document.querySelectorAll('article.slo-card .alerts [data-field=tier-state]').length === 4
           && document.querySelector('article.slo-card .alerts [data-tier=page-1h]').textContent === 'firing'",
        Duration::from_secs(30),
    );
    let rows = page.eval(
        "Array.from(document.querySelectorAll('article.slo-card .alerts tbody tr')).map(r => Array.from(r.cells).slice(0, 8).map(c => c.textContent))",
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows[0][0], "page-1h");
    assert_eq!(rows[0][2], "firing");
    assert_eq!(rows[0][5], "14.4×");
    assert!(
        rows[0][3].as_str().unwrap().ends_with("over 1h"),
        "{rows:?}"
    );
    assert!(
        rows[0][4].as_str().unwrap().ends_with("over 5m"),
        "{rows:?}"
    );
    // Every request failed: the budget is spent, and no tier says when it will be.
    assert!(rows.iter().all(|r| r[7] == "spent"), "{rows:?}");
    let promql =
        page.eval("document.querySelector('article.slo-card .alerts pre.promql').textContent");
    let rules = sloburn_rules([&write_config(dir.path(), &text)]);
    let promql = promql.as_str().unwrap();
    assert!(promql.contains("slo:sli_error:ratio_rate1h"), "{promql}");
    assert!(
        rules.contains(promql.lines().next().unwrap()),
        "the table's PromQL is the rule's:\n{promql}"
    );
    assert_clean(&page, &[&format!("{base}/")]);
    rt.block_on(d.shutdown());
}

/// The widths the dashboard must fit: a small laptop to a full-HD monitor.
const WIDTHS: [u32; 3] = [1024, 1440, 1920];

/// Every visible table of the page that spills out of its card's content box (or, outside a
/// card, its section's) or scrolls sideways, and any card or the page itself whose content is
/// wider than it: each as `where [its header]: table px vs box px`.
const OVERFLOWS: &str = r#"(() => {
  const out = [];
  const inner = (e) => {
    const r = e.getBoundingClientRect(), s = getComputedStyle(e);
    return { left: r.left + parseFloat(s.paddingLeft) + parseFloat(s.borderLeftWidth),
             right: r.right - parseFloat(s.paddingRight) - parseFloat(s.borderRightWidth) };
  };
  const name = (e) => {
    const card = e.closest('.card');
    const where = card ? (card.dataset.slo || card.dataset.profile || 'card') : (e.closest('section') || {}).id;
    const head = e.querySelector('thead') ? e.querySelector('thead').textContent.slice(0, 40) : '';
    return `${where} [${head}]`;
  };
  for (const t of document.querySelectorAll('main:not([hidden]) table')) {
    const r = t.getBoundingClientRect();
    if (r.width === 0) continue; // closed <details>
    const box = t.closest('.card') || t.closest('section');
    const b = inner(box);
    if (r.right > b.right + 0.5 || r.left < b.left - 0.5) {
      out.push(`${name(t)}: ${r.left.toFixed(0)}..${r.right.toFixed(0)} px in ${b.left.toFixed(0)}..${b.right.toFixed(0)}`);
    }
    if (t.scrollWidth > t.clientWidth + 1) {
      out.push(`${name(t)}: scrolls ${t.scrollWidth} px in ${t.clientWidth}`);
    }
  }
  for (const c of document.querySelectorAll('main:not([hidden]) .card')) {
    if (c.scrollWidth > c.clientWidth + 1) out.push(`card ${name(c)}: ${c.scrollWidth} px of content in ${c.clientWidth}`);
  }
  const page = document.documentElement;
  if (page.scrollWidth > page.clientWidth + 1) out.push(`the page: ${page.scrollWidth} px in ${page.clientWidth}`);
  return out;
})()"#;

/// Issue 46: the alerts table overflowed its card at 1,400 px. At 1024, 1440 and 1920 px no
/// table of the demo dashboard leaves its card, no card or page scrolls sideways, and the
/// budget charts are lines (at least two points); a screenshot of each width is kept.
#[test]
fn no_table_overflows_its_card_from_1024_to_1920_px() {
    let port = free_port();
    let _demo = Proc::start(["demo", "--listen", &format!("127.0.0.1:{port}")]);
    let base = format!("http://127.0.0.1:{port}");
    assert!(
        wait_ready(&format!("{base}/healthz"), port, Duration::from_secs(60)),
        "the demo did not start"
    );
    let chrome = Chrome::start();
    let mut page = chrome.page();
    for width in WIDTHS {
        page.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": 1200, "deviceScaleFactor": 1, "mobile": false }),
        );
        page.navigate(&format!("{base}/"));
        // Drawn: every SLO card with its alerts table and a burn-down line, every profile with
        // its charts, and the runs table.
        page.wait_for(
            "the dashboard drawn",
            "(() => { const c = [...document.querySelectorAll('article.slo-card')];
               return c.length >= 2 && c.every(x => x.querySelector('.alerts tbody tr')
                   && Number(x.querySelector('figure.chart').dataset.points) >= 2
                   && x.querySelector('figure.chart canvas'))
                 && [...document.querySelectorAll('article.profile-card')].every(p =>
                   p.querySelectorAll('figure.chart').length === 4)
                 && document.querySelector('#run-list table'); })()",
            Duration::from_secs(120),
        );
        let overflows = page.eval(OVERFLOWS);
        save_screenshot(&mut page, &format!("dashboard-{width}.png"));
        assert_eq!(
            overflows,
            json!([]),
            "at {width} px (screenshot: target/test-artifacts/dashboard-{width}.png)"
        );
    }
    assert_clean(&page, &[&format!("{base}/")]);
}
