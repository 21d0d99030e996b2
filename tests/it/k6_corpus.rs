//! Issue 46 item 5, k6: a corpus of k6 scripts written for this test
//! (`tests/it/import/k6corpus/`), each imported with `sloburn import k6`, its config accepted
//! by `sloburn check`, and run by `sloburn run` beside k6 1.1 running the original, each
//! against its own recording HTTP server on 127.0.0.1. Per script the two sequences of
//! (method, path, body) the server received must be equal, once the requests the script's
//! header names as `k6-only` (the calls the import lists as not converted) are taken out of
//! k6's; the lines the import lists as not converted must be exactly those the header names;
//! and over the corpus at least 90 % of the `http.*` calls must be converted.
//!
//! A script's header: `// not converted: 12, 30` (the lines of its `http.*` calls the import
//! must list), `// k6-only: GET /path` (a request k6 sends that the import's run does not; one
//! line per request; a path ending in `*` is a prefix) and `// run: --vus 1 --iterations 1`
//! (for scripts whose own options run for minutes: k6 gets the flags, sloburn's run the same
//! 1 VU and 1 iteration as the profile's executor, as its flags refuse a ramping profile).

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::support::{all_output, root, serve_on_thread, sloburn};

/// (method, path with query, body) as the server received it.
type Req = (String, String, String);

/// What every request gets: the values the scripts read (a token, ids, a list, a header).
const ANSWER: &str = r#"{"token":"tok-abc","id":"ord-1","status":"ok","count":3,"user":{"id":"u-7","name":"alice"},"items":[{"id":"p-1","sku":"sku-1","price":12},{"id":"p-2","sku":"sku-2","price":30}],"data":{"id":"d-1"}}"#;

/// A server on 127.0.0.1 that answers every request with [`ANSWER`] and records it.
fn recording_server() -> (crate::support::ThreadServer, Arc<Mutex<Vec<Req>>>) {
    let seen: Arc<Mutex<Vec<Req>>> = Arc::default();
    let log = seen.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let log = log.clone();
        async move {
            let method = req.method().to_string();
            let path = req
                .uri()
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default();
            let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            log.lock()
                .unwrap()
                .push((method, path, String::from_utf8_lossy(&body).into_owned()));
            (
                [
                    ("content-type", "application/json"),
                    ("x-request-id", "req-42"),
                ],
                ANSWER,
            )
        }
    });
    (serve_on_thread(app), seen)
}

/// A script's header lines.
#[derive(Default)]
struct Header {
    not_converted: BTreeSet<usize>,
    k6_only: Vec<(String, String)>,
    flags: Vec<String>,
}

fn header(text: &str) -> Header {
    let mut h = Header::default();
    for line in text.lines().take_while(|l| l.starts_with("//")) {
        let line = line.trim_start_matches("//").trim();
        if let Some(lines) = line.strip_prefix("not converted:") {
            h.not_converted
                .extend(lines.split(',').map(|n| n.trim().parse::<usize>().unwrap()));
        } else if let Some(req) = line.strip_prefix("k6-only:") {
            let (m, p) = req.trim().split_once(' ').unwrap();
            h.k6_only.push((m.to_string(), p.to_string()));
        } else if let Some(flags) = line.strip_prefix("run:") {
            h.flags = flags.split_whitespace().map(str::to_string).collect();
        }
    }
    h
}

/// Times in milliseconds since the epoch (`Date.now()`, `${timestamp_ms}`) differ between
/// the two runs: each 13-digit number becomes `<ms>`.
fn normalized(seq: Vec<Req>) -> Vec<Req> {
    let ms = |s: &str| {
        let b = s.as_bytes();
        let mut out = String::new();
        let mut i = 0;
        while i < b.len() {
            let run = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
            let bounded = i == 0 || !b[i - 1].is_ascii_digit();
            if run == 13 && bounded {
                out.push_str("<ms>");
                i += run;
            } else {
                out.push(b[i] as char);
                i += 1;
            }
        }
        out
    };
    seq.into_iter()
        .map(|(m, p, b)| (m, ms(&p), ms(&b)))
        .collect()
}

/// One script's figures: (http.* calls converted, calls in all), or what went wrong.
fn run_one(k6: &Path, dir: &Path, file: &Path) -> Result<(usize, usize), String> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let (server, seen) = recording_server();
    let original = std::fs::read_to_string(file).unwrap();
    let h = header(&original);
    let text = loopback(&original, &server.addr.to_string());
    let script = dir.join(&name);
    std::fs::write(&script, &text).unwrap();

    let imported = sloburn()
        .args(["import", "k6"])
        .arg(&script)
        .output()
        .unwrap();
    let notes = String::from_utf8_lossy(&imported.stderr).into_owned();
    if imported.status.code() != Some(0) {
        return Err(format!("{name}: import failed\n{notes}"));
    }
    let yaml = String::from_utf8_lossy(&imported.stdout).into_owned();
    let cfg = dir.join(format!("{name}.yaml"));
    std::fs::write(&cfg, &yaml).unwrap();
    let checked = sloburn().arg("check").arg(&cfg).output().unwrap();
    if checked.status.code() != Some(0) {
        return Err(format!(
            "{name}: check refused the import\n{}\n{yaml}",
            all_output(&checked)
        ));
    }
    let (listed, tally) = listed_calls(&notes);
    if listed != h.not_converted {
        return Err(format!(
            "{name}: the import lists as not converted the http.* calls of lines {listed:?}, \
             the script's header says {:?}\n{notes}",
            h.not_converted
        ));
    }
    let (done, total) = tally.ok_or_else(|| format!("{name}: no tally in\n{notes}"))?;
    if total - done != listed.len() {
        return Err(format!(
            "{name}: {done} of {total} converted, {} listed\n{notes}",
            listed.len()
        ));
    }

    let k6_run = std::process::Command::new(k6)
        .args(["run", "--quiet", "--no-color"])
        .args(&h.flags)
        .arg(&script)
        .env("K6_NO_USAGE_REPORT", "true")
        .output()
        .unwrap();
    // 99: a threshold failed (the custom metrics' ones); the requests were sent.
    if !matches!(k6_run.status.code(), Some(0 | 99)) {
        return Err(format!("{name}: k6 failed\n{}", all_output(&k6_run)));
    }
    let mut theirs = normalized(std::mem::take(&mut *seen.lock().unwrap()));
    for (m, p) in &h.k6_only {
        // `/category/*`: a path k6 picks when it runs (a random choice).
        let matches = |tp: &str| match p.strip_suffix('*') {
            Some(prefix) => tp.starts_with(prefix),
            None => tp == p,
        };
        let at = theirs
            .iter()
            .position(|(tm, tp, _)| tm == m && matches(tp))
            .ok_or_else(|| format!("{name}: k6 did not send the k6-only {m} {p}: {theirs:#?}"))?;
        theirs.remove(at);
    }
    // `run:` scripts: k6 takes the flags over its options; sloburn's `--vus`/`--iterations`
    // refuse a ramping or arrival-rate profile, so its run gets the same 1 VU and 1 iteration
    // in the profile (the imported executor passed `check` above).
    let run_cfg = if h.flags.is_empty() {
        cfg.clone()
    } else {
        let from = yaml.find("\n    executor:").unwrap();
        let to = yaml.find("\n    thresholds:").unwrap_or(yaml.len());
        let once = "\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1";
        let path = dir.join(format!("{name}.once.yaml"));
        std::fs::write(&path, format!("{}{once}{}", &yaml[..from], &yaml[to..])).unwrap();
        path
    };
    let run = sloburn()
        .arg("run")
        .arg(&run_cfg)
        .arg("--quiet")
        .output()
        .unwrap();
    if !matches!(run.status.code(), Some(0 | 99)) {
        return Err(format!(
            "{name}: sloburn run failed\n{}\n{yaml}",
            all_output(&run)
        ));
    }
    let ours = normalized(std::mem::take(&mut *seen.lock().unwrap()));
    if ours.is_empty() {
        return Err(format!(
            "{name}: sloburn's run sent nothing\n{}",
            all_output(&run)
        ));
    }
    if ours != theirs {
        return Err(format!(
            "{name}: the requests differ\n  k6 (less its k6-only): {theirs:#?}\n  sloburn: \
             {ours:#?}\n{notes}\n{yaml}"
        ));
    }
    eprintln!(
        "{name}: {done}/{total} http.* calls converted, {} requests equal",
        ours.len()
    );
    Ok((done, total))
}

/// The script pointed at `addr`: its placeholder host `127.0.0.1:1` replaced.
fn loopback(text: &str, addr: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:1") {
        let after = &rest[at + "127.0.0.1:1".len()..];
        out.push_str(&rest[..at]);
        if after.starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str("127.0.0.1:1");
        } else {
            out.push_str(addr);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// From the import's notes: the lines of the http.* calls listed as not converted, and the
/// tally (converted, in all).
fn listed_calls(notes: &str) -> (BTreeSet<usize>, Option<(usize, usize)>) {
    let mut lines = BTreeSet::new();
    let mut tally = None;
    for n in notes.lines() {
        let n = n.trim_start_matches("warning: ");
        if let Some(rest) = n.strip_prefix("line ")
            && let Some((num, what)) = rest.split_once(": ")
            && what.starts_with("http.")
            && what.contains(" not converted")
        {
            lines.insert(num.parse().unwrap());
        }
        if let Some(rest) = n.strip_prefix("http.* calls: ") {
            let mut words = rest.split_whitespace();
            let done = words.next().and_then(|w| w.parse().ok());
            let total = words.nth(1).and_then(|w| w.parse().ok());
            tally = done.zip(total);
        }
    }
    (lines, tally)
}

/// Each construct the issue lists, by a piece of script text that writes it.
const CONSTRUCTS: &[(&str, &str)] = &[
    ("a re-assigned response", "  res = http."),
    ("params held in a name", "payload, params)"),
    ("an inline check", "check(http.get("),
    (
        "check names that collide",
        "'status is 200': (r) => r.status === 200 });",
    ),
    ("an integer in a JSON body", "limit: 500,"),
    ("no options", "A smoke test with no options"),
    (
        "a threshold key written twice",
        "http_req_duration: ['p(95)<500', 'p(99)<1000']",
    ),
    ("a Counter", "new Counter("),
    ("a Trend", "new Trend("),
    ("a Rate", "new Rate("),
    ("a Gauge", "new Gauge("),
    ("a custom metric's threshold", "errors: ['count<1']"),
    ("console.log", "console.log("),
    ("scenarios.*.exec", "exec: 'browse'"),
    ("Date.now()", "Date.now()"),
    ("arr[0].id", "items[0].id"),
    ("TypeScript", "interface LoginBody"),
    ("insecureSkipTLSVerify", "insecureSkipTLSVerify: true"),
    ("maxRedirects", "maxRedirects: 0"),
    ("tlsVersion", "tlsVersion:"),
    ("auth: 'digest'", "auth: 'digest'"),
];

#[test]
fn a_corpus_of_k6_scripts_imports_into_runs_that_send_k6s_requests() {
    let k6 = crate::k6::k6();
    let corpus = root().join("tests/it/import/k6corpus");
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "js" || e == "ts"))
        .collect();
    files.sort();
    assert!(files.len() >= 40, "{} scripts", files.len());
    let all: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    for (what, text) in CONSTRUCTS {
        assert!(
            all.contains(text),
            "no script of the corpus writes {what} (`{text}`)"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let queue = Mutex::new(files.clone());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                loop {
                    let Some(f) = queue.lock().unwrap().pop() else {
                        break;
                    };
                    let r = run_one(&k6, dir.path(), &f);
                    results.lock().unwrap().push(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let failures: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let (done, total) = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .fold((0, 0), |(d, t), (a, b)| (d + a, t + b));
    eprintln!(
        "k6 corpus: {} scripts, {} with equal request sequences; {done} of {total} http.* calls \
         converted ({:.1} %)",
        files.len(),
        results.len() - failures.len(),
        100.0 * done as f64 / total.max(1) as f64
    );
    assert!(
        failures.is_empty(),
        "{} of {} scripts failed:\n{}",
        failures.len(),
        files.len(),
        failures
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    assert!(
        done * 10 >= total * 9,
        "{done} of {total} http.* calls converted: under 90 %"
    );
}
