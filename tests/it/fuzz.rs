//! Structured fuzzing on stable Rust, on a fixed budget with fixed seeds, so every run tries the
//! same inputs and a failure reproduces (issue 11). The inputs are mutations of the shipped
//! configs and golden files, and token soups for the small grammars. The rules:
//! - never a panic;
//! - `sloburn check`'s path gives success or errors that each start with `file:line:col: `;
//! - every input finishes within a bound (a watchdog thread, not a timing assertion: it only
//!   catches a hang);
//! - inputs that once broke a rule live in `tests/it/fuzz/` and run first, every time.
//!
//! Secrets are checked for shape but not read (`resolve_secrets: false`), so a mutated
//! `${file:...}` never opens a real file.

use crate::support::{root, runtime, serve_in_process};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// How long one input may take before the fuzzer calls it a hang.
const HANG: Duration = Duration::from_secs(20);

/// Runs `f` on its own thread; fails the test when it panics or does not finish within
/// [`HANG`]. Returns its result.
fn bounded<T: Send + 'static>(
    what: &str,
    input: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(v)) => v,
        Ok(Err(_)) => panic!("{what} panicked on input:\n{input:?}"),
        Err(_) => panic!("{what} did not finish within {HANG:?} on input:\n{input:?}"),
    }
}

fn seeds() -> Vec<(String, String)> {
    let mut files = vec![
        root().join("config/example.yaml"),
        root().join("tests/it/golden/bad_config.yaml"),
    ];
    for overlay in [
        "deploy/base/config.yaml",
        "deploy/examples/sidecar/config.yaml",
    ] {
        let p = root().join(overlay);
        if p.exists() {
            files.push(p);
        }
    }
    let mut out: Vec<(String, String)> = files
        .iter()
        .map(|p| (p.display().to_string(), std::fs::read_to_string(p).unwrap()))
        .collect();
    out.push((
        "demo".into(),
        sloburn::demo::CONFIG
            .replace("{TARGET}", "127.0.0.1:1")
            .replace("{DATA}", "/nonexistent/sloburn-fuzz"),
    ));
    out
}

/// Regression inputs kept from earlier finds, one file each.
fn regressions() -> Vec<(String, String)> {
    let dir = root().join("tests/it/fuzz");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            (
                p.display().to_string(),
                String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned(),
            )
        })
        .collect()
}

/// Pieces that matter to YAML, to sloburn's grammars and to its secret syntax.
const TOKENS: &[&str] = &[
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    ",",
    "&a ",
    "*a",
    "<<: *a",
    "!!str ",
    "!!int ",
    "\t",
    "\n",
    "  ",
    "'",
    "\"",
    "#",
    "? ",
    "|\n",
    ">\n",
    "${env:X}",
    "${file:x}",
    "${",
    "}",
    "1e309",
    "-1",
    "0",
    "99999999999999999999",
    ".nan",
    "NaN",
    "1ms",
    "-5s",
    "1h30m",
    "0s",
    "p(95)<",
    "p(99.9)<=",
    "rate<0.1",
    "count>",
    "*/5 * * * *",
    "@hourly",
    "0 0 31 2 *",
    "\u{0}",
    "\u{1b}[31m",
    "ä",
    "null",
    "~",
    "true",
    "http://",
    "https://[::1]:0/",
    "every: ",
    "vus: ",
    "rate: ",
    "100000/s",
    "executor: ramping-vus",
    "stages: [{duration: 1s, target: 5}]",
    "preset: spike",
    "objective: 101",
    "period: 0d",
    "timezone: Mars/Olympus",
    "status: 600",
    "json: {path: $.a}",
];

fn mutate(rng: &mut SmallRng, text: &str) -> String {
    let mut s: Vec<u8> = text.as_bytes().to_vec();
    for _ in 0..rng.random_range(1..=3) {
        let len = s.len().max(1);
        match rng.random_range(0..6) {
            0 if !s.is_empty() => {
                let at = rng.random_range(0..s.len());
                let n = rng.random_range(1..=16).min(s.len() - at);
                s.drain(at..at + n);
            }
            1 => {
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                let at = rng.random_range(0..len).min(s.len());
                s.splice(at..at, t.bytes());
            }
            2 if !s.is_empty() => {
                let at = rng.random_range(0..s.len());
                s[at] = rng.random_range(0..128u8);
            }
            3 => {
                // Duplicate a line.
                let text = String::from_utf8_lossy(&s).into_owned();
                let lines: Vec<&str> = text.lines().collect();
                if !lines.is_empty() {
                    let i = rng.random_range(0..lines.len());
                    let mut out: Vec<&str> = lines.clone();
                    out.insert(i, lines[i]);
                    s = out.join("\n").into_bytes();
                }
            }
            4 => {
                // Swap two lines.
                let text = String::from_utf8_lossy(&s).into_owned();
                let mut lines: Vec<&str> = text.lines().collect();
                if lines.len() > 1 {
                    let (a, b) = (
                        rng.random_range(0..lines.len()),
                        rng.random_range(0..lines.len()),
                    );
                    lines.swap(a, b);
                    s = lines.join("\n").into_bytes();
                }
            }
            _ => {
                let at = rng.random_range(0..len).min(s.len());
                s.truncate(at);
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

/// Whether the config was accepted, when the outcome keeps the rules; what is wrong otherwise.
fn check_config(text: String) -> Result<bool, String> {
    let dir = std::env::temp_dir();
    let mut env = sloburn::config::Env::from_map(Default::default(), 1);
    env.resolve_secrets = false;
    match sloburn::config::from_str(&text, "fuzz.yaml", &dir, &env) {
        Ok(_) => Ok(true),
        Err(e) if e.errors.is_empty() => Err("an error result with no error in it".into()),
        Err(e) => match e.errors.iter().find_map(|d| {
            let line = d.render("fuzz.yaml");
            let mut parts = line.splitn(4, ':');
            let ok = parts.next() == Some("fuzz.yaml")
                && parts
                    .next()
                    .and_then(|l| l.parse::<u32>().ok())
                    .is_some_and(|l| l >= 1)
                && parts
                    .next()
                    .and_then(|c| c.parse::<u32>().ok())
                    .is_some_and(|c| c >= 1);
            (!ok).then(|| format!("an error without file:line:col: {line:?}"))
        }) {
            Some(problem) => Err(problem),
            None => Ok(false),
        },
    }
}

#[test]
fn check_never_panics_and_always_gives_file_line_col() {
    let mut cases: Vec<(String, String)> = regressions();
    let seeds = seeds();
    let mut rng = SmallRng::seed_from_u64(0x5107_b0a2);
    for round in 0..300 {
        for (name, text) in &seeds {
            cases.push((format!("{name} mutation {round}"), mutate(&mut rng, text)));
        }
    }
    let total = cases.len();
    let (mut mutated_valid, mut accepted) = (0usize, 0usize);
    for (name, text) in cases {
        let from_valid = !name.contains("bad_config") && name.contains(" mutation ");
        let input = text.clone();
        let ok = match bounded(&name, &input, move || check_config(text)) {
            Ok(ok) => ok,
            Err(problem) => panic!("{name}: {problem}\ninput:\n{input}"),
        };
        if from_valid {
            mutated_valid += 1;
            accepted += usize::from(ok);
        }
    }
    assert!(total >= 1200, "the budget shrank: {total} inputs");
    eprintln!("{total} inputs; {accepted} of {mutated_valid} mutations of valid configs accepted");
    // Both outcomes must be common, or the fuzzer tests only one side of the validator.
    assert!(
        accepted * 20 >= mutated_valid && accepted * 20 <= mutated_valid * 19,
        "{accepted} of {mutated_valid} mutations of valid configs were accepted"
    );
}

fn soup(rng: &mut SmallRng, tokens: &[&str], max: usize) -> String {
    (0..rng.random_range(0..=max))
        .map(|_| tokens[rng.random_range(0..tokens.len())])
        .collect()
}

#[test]
fn threshold_parser_never_panics_and_points_inside_the_expression() {
    const T: &[&str] = &[
        "p(",
        "95",
        "99.9",
        ")",
        "<",
        "<=",
        ">",
        ">=",
        "==",
        "!=",
        "avg",
        "med",
        "min",
        "max",
        "rate",
        "count",
        "ms",
        "s",
        "us",
        "m",
        "h",
        "d",
        "-",
        ".",
        "e",
        "9999999999999999999999",
        " ",
        "(",
        "1",
        "0",
        "NaN",
        "inf",
        "\u{1b}",
        "ä",
    ];
    const METRICS: &[&str] = &[
        "http_req_duration",
        "http_req_failed",
        "checks",
        "http_reqs",
        "iterations",
        "http_req_waiting",
        "nope",
        "",
    ];
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..5000 {
        let metric = METRICS[rng.random_range(0..METRICS.len())];
        let expr = soup(&mut rng, T, 8);
        let input = format!("{metric}: {expr}");
        let e2 = expr.clone();
        let result = bounded("threshold parser", &input, move || {
            sloburn::thresholds::parse(metric, &e2)
                .map(|_| ())
                .map_err(|e| e.column())
        });
        if let Err(Some(col)) = result {
            assert!(
                col >= 1 && col <= expr.chars().count() + 1,
                "column {col} outside {expr:?}"
            );
        }
    }
}

#[test]
fn schedule_parser_never_panics_and_next_runs_are_found() {
    const T: &[&str] = &[
        "*",
        "/",
        ",",
        "-",
        "0",
        "59",
        "60",
        "1",
        "5",
        "L",
        "W",
        "#",
        "?",
        "@hourly",
        "@daily",
        "@reboot",
        " ",
        " ",
        " ",
        "MON",
        "JAN",
        "31",
        "2",
        "24",
        "99999999999",
        "\t",
    ];
    const ZONES: &[Option<&str>] = &[
        None,
        Some("UTC"),
        Some("Europe/Berlin"),
        Some("America/St_Johns"),
        Some("Nope/Zone"),
        Some(""),
    ];
    let mut rng = SmallRng::seed_from_u64(11);
    let now = chrono::DateTime::parse_from_rfc3339("2026-03-29T00:30:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    for _ in 0..3000 {
        let spec = soup(&mut rng, T, 11);
        let tz = ZONES[rng.random_range(0..ZONES.len())];
        let input = format!("{spec:?} in {tz:?}");
        bounded("schedule parser", &input, move || {
            // A schedule that parses fires (one that never can is `NeverFires`): its next run
            // is found, and it is after now.
            if let Ok(s) = sloburn::schedule::Schedule::parse(&spec, tz) {
                let next = s.next_after(now);
                assert!(next.is_some_and(|t| t > now), "next run {next:?}");
            }
        });
    }
}

#[test]
fn target_query_overrides_never_panic() {
    const KEYS: &[&str] = &[
        "latency",
        "jitter",
        "distribution",
        "error_ratio",
        "error_status",
        "status",
        "body_size",
        "body_delay",
        "reset_ratio",
        "stall_every",
        "stall_for",
        "nope",
        "",
    ];
    const VALUES: &[&str] = &[
        "10ms",
        "0",
        "-1",
        "1e309",
        "NaN",
        "normal",
        "lognormal",
        "uniform",
        "x",
        "999",
        "0.5",
        "1.5",
        "1GiB",
        "%ff",
        "%",
        "+",
        "&",
        "=",
        "99999999999h",
        "",
    ];
    let mut rng = SmallRng::seed_from_u64(13);
    for _ in 0..3000 {
        let query: Vec<String> = (0..rng.random_range(0..5))
            .map(|_| {
                format!(
                    "{}={}",
                    KEYS[rng.random_range(0..KEYS.len())],
                    VALUES[rng.random_range(0..VALUES.len())]
                )
            })
            .collect();
        let query = query.join("&");
        let q = query.clone();
        bounded("target query", &query, move || {
            if let Ok(f) = sloburn::target::Faults::default().with_query(&q) {
                let mut r = SmallRng::seed_from_u64(1);
                let _ = f.sample_delay(&mut r);
            }
        });
    }
}

/// Raw HTTP/1.1 to the daemon's own server on 127.0.0.1: odd methods, paths, headers and
/// bodies. Never a 500, never a dropped daemon: it still answers `/healthz` at the end.
#[test]
fn the_api_answers_every_odd_request_without_a_server_error() {
    const METHODS: &[&str] = &[
        "GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "GeT",
    ];
    const PATHS: &[&str] = &[
        "/",
        "/metrics",
        "/healthz",
        "/readyz",
        "/api/openapi.json",
        "/api/profiles",
        "/api/runs",
        "/api/slos",
        "/api/profiles/p/run",
        "/api/profiles/p/pause",
        "/api/profiles/p/resume",
        "/api/profiles/%00/run",
        "/api/profiles/../../etc/passwd/run",
        "/api/profiles/ä/pause",
        "/api/reload",
        "/api/hooks/flagger",
        "/api/slos/x",
        "/api//profiles",
        "/nope",
        "/metrics?x=%zz",
    ];
    const HEADERS: &[&str] = &[
        "Authorization: Bearer s3cret-admin\r\n",
        "Authorization: Bearer wrong\r\n",
        "Authorization: Basic Zm9vOmJhcg==\r\n",
        "Authorization: Bearer \r\n",
        "Accept: application/openmetrics-text; version=1.0.0\r\n",
        "Accept: */*;q=xyz\r\n",
        "Content-Type: application/json\r\n",
        "Content-Length: 5\r\n",
        "Transfer-Encoding: chunked\r\n",
        "X-Long: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
    ];
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "server:\n  admin_token: \"${{env:TEST_ADMIN_TOKEN}}\"\nstorage:\n  path: \"{}\"\ntargets:\n  api:\n    url: http://127.0.0.1:1/\nprofiles:\n  p:\n    target: api\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n",
        dir.path().join("data").display()
    );
    let rt = runtime();
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let addr = d.addr;
    let mut rng = SmallRng::seed_from_u64(17);
    let mut answered = 0;
    for i in 0..300 {
        let mut req = format!(
            "{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n",
            METHODS[rng.random_range(0..METHODS.len())],
            PATHS[rng.random_range(0..PATHS.len())]
        );
        for _ in 0..rng.random_range(0..3) {
            req.push_str(HEADERS[rng.random_range(0..HEADERS.len())]);
        }
        req.push_str("\r\n");
        req.push_str(&soup(
            &mut rng,
            &["{", "}", "\"a\"", ":", "1", "0\r\n\r\n", "x"],
            6,
        ));
        let input = req.clone();
        let status = bounded("the API", &input, move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            let mut buf = Vec::new();
            let _ = s.read_to_end(&mut buf);
            let head = String::from_utf8_lossy(&buf);
            head.split_whitespace()
                .nth(1)
                .and_then(|c| c.parse::<u16>().ok())
        });
        if let Some(code) = status {
            answered += 1;
            assert!(code != 500, "request {i} got 500:\n{input}");
        }
    }
    assert!(
        answered >= 250,
        "only {answered} of 300 odd requests got an answer"
    );
    let (code, _) = rt.block_on(crate::support::request(
        "GET",
        &format!("http://{addr}/healthz"),
        None,
    ));
    assert_eq!(code, 200);
    rt.block_on(d.shutdown());
}

/// Where a many-key mapping goes (`{keys}` is replaced by the mapping's entries, one a line at
/// the indentation given): every kind of mapping the config reads.
const MANY_KEY_SITES: &[(&str, &str)] = &[
    (
        "server:\n{keys}targets:\n  api:\n    url: http://127.0.0.1:9/\n",
        "  ",
    ),
    ("targets:\n{keys}", "  "),
    (
        "targets:\n  api:\n    url: http://127.0.0.1:9/\n    headers:\n{keys}",
        "      ",
    ),
    (
        "targets:\n  api:\n    url: http://127.0.0.1:9/\nslos:\n  s:\n    target: api\n    sli: availability\n    objective: 99\n    labels:\n{keys}",
        "      ",
    ),
    (
        "targets:\n  api:\n    url: http://127.0.0.1:9/\nprofiles:\n{keys}",
        "  ",
    ),
    (
        "targets:\n  api:\n    url: http://127.0.0.1:9/\njourneys:\n  j:\n    target: api\n    steps:\n      - path: /\n        capture:\n{keys}      - path: /${c1}\n",
        "          ",
    ),
    (
        "targets:\n  api:\n    url: http://127.0.0.1:9/\ntelemetry:\n  resource:\n{keys}",
        "    ",
    ),
];

/// One entry of a many-key mapping: a key (a name, an unknown near-miss, a duplicate, a bad
/// header name) and a value of the kind the site might want or not.
fn many_key_entry(rng: &mut SmallRng, i: usize, indent: &str) -> String {
    let key = match rng.random_range(0..20) {
        0 => format!("k{}", rng.random_range(0..i.max(1))),
        1 => "listen".to_string(),
        2 => format!("x y{i}"),
        3 => format!("tagret{i}"),
        _ => format!("k{i}"),
    };
    let value = match rng.random_range(0..6) {
        0 => "{url: \"http://127.0.0.1:9/\"}".to_string(),
        1 => "{target: api, executor: constant-vus, vus: 1, duration: 1s}".to_string(),
        2 => "{json: \"$.a\"}".to_string(),
        3 => "[1, 2]".to_string(),
        4 => String::new(),
        _ => "v".to_string(),
    };
    format!("{indent}{key}: {value}\n")
}

#[test]
fn many_key_mappings_never_panic_and_stay_positioned() {
    let cap = sloburn::config::MAX_MAP_KEYS;
    let mut rng = SmallRng::seed_from_u64(0x30_0001);
    // Sizes around the cap, and some anywhere up to three times it; bounded: 28 inputs.
    for round in 0..28 {
        let (site, indent) = MANY_KEY_SITES[round % MANY_KEY_SITES.len()];
        let n = match round / MANY_KEY_SITES.len() {
            0 => cap,
            1 => cap + 1,
            2 => rng.random_range(1..cap),
            _ => rng.random_range(cap..3 * cap),
        };
        let unique = rng.random_range(0..2) == 0;
        let entries: String = (0..n)
            .map(|i| {
                if unique {
                    format!("{indent}k{i}: v\n")
                } else {
                    many_key_entry(&mut rng, i, indent)
                }
            })
            .collect();
        let text = site.replace("{keys}", &entries);
        let shown = format!(
            "round {round}: {n} keys, site {}",
            round % MANY_KEY_SITES.len()
        );
        let head = text[..text.len().min(300)].to_string();
        let outcome = bounded(&shown, &head, move || check_config(text));
        if let Err(problem) = outcome {
            panic!("{shown}: {problem}");
        }
    }
}

/// Pieces that matter to CSV and JSON data files.
const DATA_TOKENS: &[&[u8]] = &[
    b",",
    b"\"",
    b"\"\"",
    b"\n",
    b"\r\n",
    b"\r",
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b"null",
    b"true",
    b"1e999",
    b"-0.0",
    b"18446744073709551616",
    b"\\u0000",
    b"\\ud800",
    b"\\",
    b"\"user\":",
    b"\"k\":1,",
    b"[1]",
    b"{}",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\0",
];

/// Byte-level mutations: a data file need not be UTF-8, and its bad bytes must be errors too.
fn mutate_data(rng: &mut SmallRng, seed: &[u8]) -> Vec<u8> {
    let mut s = seed.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = rng.random_range(0..=s.len());
        match rng.random_range(0..6) {
            0 if at < s.len() => {
                let n = rng.random_range(1..=8).min(s.len() - at);
                s.drain(at..at + n);
            }
            1 | 2 => {
                let t = DATA_TOKENS[rng.random_range(0..DATA_TOKENS.len())];
                s.splice(at..at, t.iter().copied());
            }
            3 if at < s.len() => s[at] = rng.random_range(0..=255u8),
            4 => {
                // Repeat a line, or add rows of new keys: the shapes of issue 30.
                let line_start = s[..at]
                    .iter()
                    .rposition(|b| *b == b'\n')
                    .map_or(0, |i| i + 1);
                let line_end = s[at..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(s.len(), |i| at + i + 1);
                let line = s[line_start..line_end].to_vec();
                for _ in 0..rng.random_range(1..=50) {
                    s.splice(line_end..line_end, line.iter().copied());
                }
            }
            _ => s.truncate(at),
        }
    }
    s
}

/// Seeded mutations of a CSV and a JSON data file through `check`'s path (issue 30): never a
/// panic, every error at a `file:line:col`, and an error about the data file at its `data`
/// entry (line 7, column 19) with the data file's own line when it has one.
#[test]
fn data_files_never_panic_and_their_errors_are_at_the_data_entry() {
    const CSV: &[u8] = b"user,password,n\nann,a1,1\nbob,\"b,2\",2\n\"c\"\"id\",,3\n";
    const JSON: &[u8] = b"[\n{\"user\":\"ann\",\"password\":\"a1\",\"n\":1},\n\
        {\"password\":\"b\\\"2\",\"user\":\"bob\",\"ok\":true,\"z\":null},\n\
        {\"user\":\"c\\u00e9\",\"f\":1.5e3,\"n\":-2}\n]\n";
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(0xda7a_f11e);
    let (mut inputs, mut accepted, mut at_entry) = (0usize, 0usize, 0usize);
    for round in 0..400 {
        for (name, seed) in [("users.csv", CSV), ("users.json", JSON)] {
            let bytes = if round == 0 {
                seed.to_vec()
            } else {
                mutate_data(&mut rng, seed)
            };
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).unwrap();
            let text = format!(
                "targets:\n  api:\n    url: http://127.0.0.1:1/\njourneys:\n  j:\n    target: api\n    data: {{ file: \"{}\", order: random }}\n    steps:\n      - name: s\n        path: /u/${{data.user}}\n        json: {{ n: \"${{data.n}}\" }}\nprofiles:\n  p:\n    journey: j\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n",
                path.display()
            );
            let input = format!(
                "{name} round {round}: {:?}",
                String::from_utf8_lossy(&bytes)
            );
            let mut env = sloburn::config::Env::from_map(Default::default(), 1);
            env.resolve_secrets = false;
            let errors = bounded(
                "a data file",
                &input,
                move || match sloburn::config::from_str(
                    &text,
                    "fuzz.yaml",
                    std::path::Path::new("/"),
                    &env,
                ) {
                    Ok(_) => Vec::new(),
                    Err(e) => e.errors.iter().map(|d| d.render("fuzz.yaml")).collect(),
                },
            );
            inputs += 1;
            accepted += usize::from(errors.is_empty());
            for e in &errors {
                let mut parts = e.splitn(4, ':');
                let (file, line, col) = (parts.next(), parts.next(), parts.next());
                assert!(
                    file == Some("fuzz.yaml")
                        && line
                            .and_then(|l| l.parse::<u32>().ok())
                            .is_some_and(|l| l >= 1)
                        && col
                            .and_then(|c| c.parse::<u32>().ok())
                            .is_some_and(|c| c >= 1),
                    "an error without file:line:col: {e}\ninput: {input}"
                );
                if e.contains(&format!("{name}`")) {
                    at_entry += 1;
                    assert!(
                        e.starts_with("fuzz.yaml:7:19: journeys.j.data.file: "),
                        "not at the data entry: {e}\ninput: {input}"
                    );
                    // A fault inside the file names its line; only a file without rows has none.
                    assert!(
                        e.contains(&format!("{name}` line "))
                            || e.ends_with("the data file has no rows")
                            || e.ends_with("the data file is empty"),
                        "no line in the data file: {e}\ninput: {input}"
                    );
                }
            }
        }
    }
    eprintln!("{inputs} data files; {accepted} accepted, {at_entry} data-file errors");
    // Both outcomes must be common, or the fuzzer tests only one side of the parsers.
    assert!(
        accepted * 10 >= inputs && at_entry * 10 >= inputs,
        "{accepted} of {inputs} accepted, {at_entry} data-file errors"
    );
}
