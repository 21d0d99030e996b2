//! `sloburn import har FILE`: a browser recording (HTTP Archive 1.2, as every browser's
//! DevTools exports it) as one journey over the recording's main host.
//!
//! - **Filtered by default:** static assets (by the response's type or the URL's extension)
//!   and other hosts than the main one (the first document's), each counted on stderr;
//!   `--keep-assets` and `--hosts` keep them.
//! - **Think times** are the gaps between one request's end and the next one's start.
//! - **Correlation:** a value that a response returned (a JSON string of 8 or more characters,
//!   or such a response header) and a later request sent (in its URL, a header or its body),
//!   and that no earlier request sent, becomes a `capture` on the step that returned it and a
//!   `${name}` reference where it is sent: a session token is taken from each run's own login,
//!   never replayed from the recording.
//! - Each step checks for the status it got in the recording.
//!
//! Linear in the recording: the values learnt are found in each request by Aho-Corasick
//! automata (`index.rs`), and "sent before" is a set of the tokens sent, so 16,000 entries take
//! about four times what 4,000 do. Bounds: at most [`MAX_STEPS`] requests replayed (past it
//! the import is refused, saying so) and [`MAX_REFS`] values referred to in one request (the
//! rest sent as recorded, noted).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value as J;

mod index;
mod secrets;
mod write;
use index::{Index, Sent, leaves};
use secrets::Credentials;
use write::write;

/// The most requests one imported journey replays.
pub const MAX_STEPS: usize = 50_000;
/// The most values a request refers to by capture; more are sent as recorded.
pub const MAX_REFS: usize = 64;

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub journey: String,
    pub rate: String,
    /// Hosts kept besides the main one.
    pub hosts: Vec<String>,
    pub keep_assets: bool,
}

/// The shortest value correlated: shorter ones (`true`, `42`, `en`) repeat by chance.
const MIN_VALUE: usize = 8;
/// Gaps shorter than this are the browser's own pace, not a user's.
const MIN_THINK_MS: f64 = 50.0;
const MAX_THINK_MS: f64 = 30_000.0;
/// Headers a browser adds by itself, or that a journey must not replay.
const DROPPED_HEADERS: &[&str] = &[
    "host",
    "connection",
    "content-length",
    "accept-encoding",
    "user-agent",
    "origin",
    "referer",
    "sec-fetch-site",
    "sec-fetch-mode",
    "sec-fetch-dest",
    "sec-fetch-user",
    "sec-ch-ua",
    "sec-ch-ua-mobile",
    "sec-ch-ua-platform",
    "upgrade-insecure-requests",
    "pragma",
    "cache-control",
    "if-none-match",
    "if-modified-since",
    "accept-language",
];
const ASSET_EXTENSIONS: &[&str] = &[
    ".js", ".mjs", ".css", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".webp", ".woff",
    ".woff2", ".ttf", ".otf", ".map", ".avif",
];

#[derive(Debug)]
struct Entry {
    method: String,
    url: http::Uri,
    headers: Vec<(String, String)>,
    body: Option<String>,
    status: u16,
    response_headers: Vec<(String, String)>,
    response_body: Option<String>,
    /// Milliseconds since the Unix epoch.
    started_ms: f64,
    time_ms: f64,
}

/// A value a response gave: where to capture it from.
#[derive(Debug, Clone)]
enum From {
    Json(String),
    Header(String),
}

#[derive(Debug)]
struct Step {
    entry: Entry,
    /// The path and query, with `${name}` where a captured value was.
    path: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
    captures: Vec<(String, From)>,
    think_ms: Option<u64>,
}

pub fn import(text: &str, file: &str, opts: &Options) -> Result<super::openapi::Imported, String> {
    // The HAR spec allows a byte-order mark; JSON does not.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let doc: J = serde_json::from_str(text).map_err(|e| {
        format!(
            "{file}:{}:{}: not a HAR file (JSON): {e}",
            e.line(),
            e.column()
        )
    })?;
    let entries = doc
        .pointer("/log/entries")
        .and_then(J::as_array)
        .ok_or_else(|| format!("{file}: no `log.entries`: not a HAR file"))?;
    let mut notes = Vec::new();
    let mut all = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        match entry(e) {
            Ok(x) => all.push(x),
            Err(why) => notes.push(format!("entry {i}: not converted: {why}")),
        }
    }
    let main_host = all
        .iter()
        .find(|e| {
            e.response_headers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.contains("html"))
        })
        .or(all.first())
        .and_then(|e| e.url.authority().map(|a| a.as_str().to_string()))
        .ok_or_else(|| format!("{file}: no request in the recording"))?;
    let scheme = all
        .iter()
        .find(|e| e.url.authority().map(|a| a.as_str()) == Some(main_host.as_str()))
        .and_then(|e| e.url.scheme_str().map(str::to_string))
        .unwrap_or_else(|| "http".into());
    let (mut assets, mut foreign) = (0, BTreeMap::<String, usize>::new());
    let mut kept: Vec<Entry> = all
        .into_iter()
        .filter(|e| {
            let host = e.url.authority().map(|a| a.as_str()).unwrap_or_default();
            if host != main_host && !opts.hosts.iter().any(|h| h == host) {
                *foreign.entry(host.to_string()).or_default() += 1;
                return false;
            }
            if !opts.keep_assets && is_asset(e) {
                assets += 1;
                return false;
            }
            true
        })
        .collect();
    if assets > 0 {
        notes.push(format!(
            "left out {assets} static asset request(s) (--keep-assets keeps them)"
        ));
    }
    for (host, n) in &foreign {
        notes.push(format!(
            "left out {n} request(s) to {host} (--hosts {host} keeps them)"
        ));
    }
    if kept.is_empty() {
        return Err(format!("{file}: nothing left to replay on {main_host}"));
    }
    if kept.len() > MAX_STEPS {
        return Err(format!(
            "{file}: {} requests to replay on {main_host}, more than the {MAX_STEPS} one journey \
             takes: cut the recording",
            kept.len()
        ));
    }
    let mut invalid = BTreeMap::new();
    for e in &mut kept {
        secrets::sendable(&mut e.headers, &mut invalid);
    }
    notes.extend(secrets::dropped_notes(&invalid));
    let mut steps = correlate(kept, &mut notes);
    let credentials = hide_credentials(&mut steps);
    for i in 0..steps.len().saturating_sub(1) {
        let end = steps[i].entry.started_ms + steps[i].entry.time_ms.max(0.0);
        let gap = steps[i + 1].entry.started_ms - end;
        if gap >= MIN_THINK_MS {
            steps[i].think_ms = Some(gap.min(MAX_THINK_MS).round() as u64);
        }
    }
    let base = format!("{scheme}://{main_host}/");
    let yaml = write(file, &base, &steps, opts, &credentials);
    notes.extend(credentials);
    Ok(super::openapi::Imported { yaml, notes })
}

/// Every credential the recording sent as a `${env:NAME}` reference, in its header and
/// wherever else its value is; the variables to set, one line each.
fn hide_credentials(steps: &mut [Step]) -> Vec<String> {
    let mut found = Credentials::default();
    for s in steps.iter_mut() {
        found.hide(&mut s.headers);
    }
    if let Some(scrubber) = found.scrubber() {
        for s in steps.iter_mut() {
            scrubber.scrub(&mut s.path);
            for (_, v) in &mut s.headers {
                scrubber.scrub(v);
            }
            if let Some(b) = &mut s.body {
                scrubber.scrub(b);
            }
        }
    }
    found.lines()
}

fn entry(e: &J) -> Result<Entry, String> {
    let req = e.get("request").ok_or("no `request`")?;
    let resp = e.get("response");
    let url: http::Uri = req
        .get("url")
        .and_then(J::as_str)
        .ok_or("no `request.url`")?
        .parse()
        .map_err(|err| format!("`request.url`: {err}"))?;
    if !matches!(url.scheme_str(), Some("http" | "https")) {
        return Err(format!("`{url}` is not http(s)"));
    }
    let pairs = |v: Option<&J>| -> Vec<(String, String)> {
        v.and_then(J::as_array)
            .into_iter()
            .flatten()
            .filter_map(|h| {
                Some((
                    h.get("name")?.as_str()?.to_string(),
                    h.get("value")?.as_str()?.to_string(),
                ))
            })
            // HTTP/2 pseudo-headers (`:authority`) are not headers to send.
            .filter(|(k, _)| !k.starts_with(':'))
            .collect()
    };
    let content = resp.and_then(|r| r.get("content"));
    let response_body = content
        .and_then(|c| c.get("text"))
        .and_then(J::as_str)
        .filter(|_| content.and_then(|c| c.get("encoding")).is_none())
        .map(str::to_string);
    let started_ms = e
        .get("startedDateTime")
        .and_then(J::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map_or(0.0, |t| t.timestamp_millis() as f64);
    let method = req
        .get("method")
        .and_then(J::as_str)
        .unwrap_or("GET")
        .to_ascii_uppercase();
    if http::Method::from_bytes(method.as_bytes()).is_err() {
        return Err(format!("`{method}` is not an HTTP method"));
    }
    Ok(Entry {
        method,
        url,
        headers: pairs(req.get("headers")),
        body: req
            .pointer("/postData/text")
            .and_then(J::as_str)
            .map(str::to_string),
        status: resp
            .and_then(|r| r.get("status"))
            .and_then(J::as_u64)
            .unwrap_or(0) as u16,
        response_headers: pairs(resp.and_then(|r| r.get("headers"))),
        response_body,
        started_ms,
        time_ms: e.get("time").and_then(J::as_f64).unwrap_or(0.0),
    })
}

fn is_asset(e: &Entry) -> bool {
    let ctype = e
        .response_headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.to_ascii_lowercase())
        .unwrap_or_default();
    if ctype.starts_with("image/")
        || ctype.starts_with("font/")
        || ctype.starts_with("text/css")
        || ctype.contains("javascript")
    {
        return true;
    }
    let path = e.url.path().to_ascii_lowercase();
    ASSET_EXTENSIONS.iter().any(|x| path.ends_with(x))
}

/// A capture name from where the value came from: the last key of its path, or the header.
fn name_for(from: &From, taken: &mut BTreeMap<String, usize>) -> String {
    let raw = match from {
        From::Json(p) => p
            .rsplit(['.', '['])
            .find(|s| s.chars().any(|c| c.is_ascii_alphabetic()))
            .unwrap_or("value")
            .trim_matches(|c| c == '\'' || c == ']')
            .to_string(),
        From::Header(h) => h.clone(),
    };
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
        name.insert_str(0, "v_");
    }
    let n = taken.entry(name.clone()).or_default();
    *n += 1;
    if *n > 1 {
        name = format!("{name}_{n}");
    }
    name
}

fn correlate(entries: Vec<Entry>, notes: &mut Vec<String>) -> Vec<Step> {
    let mut known = Known::default();
    let mut steps: Vec<Step> = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        let mut request = Request::recorded(&e);
        if known.refer(&mut request, &mut steps) {
            notes.push(format!(
                "request {} ({} {}): more than {MAX_REFS} values to refer to: the rest are sent \
                 as recorded",
                i + 1,
                e.method,
                e.url
            ));
        }
        known.learn(i, &e);
        steps.push(Step {
            entry: e,
            path: request.path,
            headers: request.headers,
            body: request.body,
            captures: Vec::new(),
            think_ms: None,
        });
    }
    steps
}

/// What a step sends: path and query, headers, body.
struct Request {
    path: String,
    headers: Vec<(String, String)>,
    body: Option<String>,
}

impl Request {
    /// As recorded, less the headers a client sets itself; `${` in it is text, not a
    /// reference.
    fn recorded(e: &Entry) -> Request {
        let path = e
            .url
            .path_and_query()
            .map_or("/".to_string(), |p| p.as_str().to_string());
        let mut headers: Vec<(String, String)> = e
            .headers
            .iter()
            .filter(|(k, _)| !DROPPED_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
            .cloned()
            .collect();
        for (_, v) in &mut headers {
            *v = v.replace("${", "$${");
        }
        Request {
            path: path.replace("${", "$${"),
            headers,
            body: e.body.as_ref().map(|b| b.replace("${", "$${")),
        }
    }
}

/// What the walk over the recording has learnt so far.
#[derive(Default)]
struct Known {
    /// What requests sent before any response gave it is a constant (a user name typed in,
    /// then echoed back): never correlated.
    sent: Sent,
    /// value → (step, source, capture name once used), by id in the order learnt.
    values: Vec<(String, usize, From, Option<String>)>,
    ids: HashMap<String, usize>,
    /// The values (and their percent-encoded forms), to find them in a request.
    index: Index,
    /// Capture names given, for `name_for`.
    taken: BTreeMap<String, usize>,
}

impl Known {
    /// Replaces each value a response gave with a reference to its capture, adding the
    /// capture to the step it came from the first time it is used. True when more than
    /// [`MAX_REFS`] were found (the rest left as recorded).
    fn refer(&mut self, r: &mut Request, steps: &mut [Step]) -> bool {
        let mut hits = Vec::new();
        self.index.find(&r.path, &mut hits);
        for (_, v) in &r.headers {
            self.index.find(v, &mut hits);
        }
        if let Some(b) = &r.body {
            self.index.find(b, &mut hits);
        }
        // Longest first, so a value holding another is replaced whole.
        hits.sort_unstable_by_key(|&id| (std::cmp::Reverse(self.values[id].0.len()), id));
        hits.dedup();
        let past = hits.len() > MAX_REFS;
        for id in hits.into_iter().take(MAX_REFS) {
            let (value, from_step, from, name) = &mut self.values[id];
            let encoded = super::openapi::encode_component(value);
            let in_path = r.path.contains(value.as_str()) || r.path.contains(encoded.as_str());
            let in_headers = r.headers.iter().any(|(_, v)| v.contains(value.as_str()));
            let in_body = r.body.as_ref().is_some_and(|b| b.contains(value.as_str()));
            if !(in_path || in_headers || in_body) {
                continue;
            }
            let n = name
                .get_or_insert_with(|| {
                    let n = name_for(from, &mut self.taken);
                    steps[*from_step].captures.push((n.clone(), from.clone()));
                    n
                })
                .clone();
            let reference = format!("${{{n}}}");
            r.path = r
                .path
                .replace(value.as_str(), &reference)
                .replace(encoded.as_str(), &reference);
            for (_, v) in &mut r.headers {
                *v = v.replace(value.as_str(), &reference);
            }
            if let Some(b) = &mut r.body {
                *b = b.replace(value.as_str(), &reference);
            }
        }
        past
    }

    /// What request `i` sent raw is now known as sent; what its response gives (JSON leaves,
    /// headers that are not generic) is known, unless a request already sent it.
    fn learn(&mut self, i: usize, e: &Entry) {
        self.sent.add(&e.url.to_string());
        for (_, v) in &e.headers {
            self.sent.add(v);
        }
        if let Some(b) = &e.body {
            self.sent.add(b);
        }
        let mut found = Vec::new();
        if let Some(text) = &e.response_body
            && let Ok(v) = serde_json::from_str::<J>(text)
        {
            leaves(&v, "$", MIN_VALUE, &mut found);
        }
        let mut fresh = Vec::new();
        for (value, p) in found {
            self.know(&mut fresh, value, i, From::Json(p));
        }
        for (k, v) in &e.response_headers {
            let lower = k.to_ascii_lowercase();
            let generic = matches!(
                lower.as_str(),
                "date"
                    | "content-type"
                    | "content-length"
                    | "server"
                    | "etag"
                    | "last-modified"
                    | "set-cookie"
                    | "expires"
                    | "vary"
                    | "cache-control"
            );
            if !generic && v.len() >= MIN_VALUE {
                self.know(&mut fresh, v.clone(), i, From::Header(lower));
            }
        }
        let patterns: Vec<(usize, String)> = fresh
            .into_iter()
            .flat_map(|id| {
                let value = &self.values[id].0;
                let encoded = super::openapi::encode_component(value);
                let encoded = (encoded != *value).then_some((id, encoded));
                std::iter::once((id, value.clone())).chain(encoded)
            })
            .collect();
        self.index.add(patterns);
    }

    /// Keeps `value` (given by step `i`) when no request sent it and it is not known yet.
    fn know(&mut self, fresh: &mut Vec<usize>, value: String, i: usize, from: From) {
        if self.sent.holds(&value) || self.ids.contains_key(&value) {
            return;
        }
        let id = self.values.len();
        self.ids.insert(value.clone(), id);
        self.values.push((value, i, from, None));
        fresh.push(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn har(entries: J) -> String {
        serde_json::json!({"log": {"version": "1.2", "entries": entries}}).to_string()
    }

    fn e(
        method: &str,
        url: &str,
        headers: J,
        body: Option<&str>,
        status: u16,
        resp: &str,
        at: &str,
    ) -> J {
        serde_json::json!({
            "startedDateTime": at, "time": 10,
            "request": {"method": method, "url": url, "headers": headers,
                        "postData": body.map(|b| serde_json::json!({"mimeType": "application/json", "text": b}))},
            "response": {"status": status, "headers": [{"name": "Content-Type", "value": "application/json"}],
                         "content": {"mimeType": "application/json", "text": resp}}
        })
    }

    #[test]
    fn a_token_from_a_response_becomes_a_capture_and_a_reference() {
        let text = har(serde_json::json!([
            {"startedDateTime": "2026-01-01T00:00:00.000Z", "time": 5,
             "request": {"method": "GET", "url": "http://shop.test/", "headers": []},
             "response": {"status": 200, "headers": [{"name": "Content-Type", "value": "text/html"}], "content": {"text": "<html>"}}},
            {"startedDateTime": "2026-01-01T00:00:00.010Z", "time": 1,
             "request": {"method": "GET", "url": "http://shop.test/app.js", "headers": []},
             "response": {"status": 200, "headers": [{"name": "Content-Type", "value": "text/javascript"}], "content": {"text": ""}}},
            {"startedDateTime": "2026-01-01T00:00:00.020Z", "time": 1,
             "request": {"method": "GET", "url": "http://cdn.other/x.json", "headers": []},
             "response": {"status": 200, "headers": [], "content": {"text": "{}"}}},
            e("POST", "http://shop.test/api/login", serde_json::json!([{"name": "Content-Type", "value": "application/json"}]),
              Some(r#"{"user":"alice-the-user"}"#), 200, r#"{"user":"alice-the-user","session":{"token":"tok-123456789"}}"#,
              "2026-01-01T00:00:01.000Z"),
            e("GET", "http://shop.test/api/cart?t=tok-123456789", serde_json::json!([{"name": "Authorization", "value": "Bearer tok-123456789"}, {"name": "Cookie", "value": "a=b"}]),
              None, 200, r#"{"items":[]}"#, "2026-01-01T00:00:02.500Z"),
        ]));
        let opts = Options {
            journey: "shop".into(),
            rate: "1/s".into(),
            ..Options::default()
        };
        let got = import(&text, "rec.har", &opts).unwrap();
        let y = &got.yaml;
        assert!(
            y.contains("capture:\n          token: { json: \"$.session.token\" }"),
            "{y}"
        );
        assert!(y.contains("\"Bearer ${token}\""), "{y}");
        assert!(y.contains("path: \"/api/cart?t=${token}\""), "{y}");
        // Sent before it came back: a constant, not a capture.
        assert!(!y.contains("${user}"), "{y}");
        // The recorded cookie is the user's to give, never replayed as recorded.
        assert!(
            y.contains("\"Cookie\": \"a=${env:RECORDED_COOKIE_A}\""),
            "{y}"
        );
        assert!(
            got.notes
                .iter()
                .any(|n| n.starts_with("set RECORDED_COOKIE_A:")),
            "{:?}",
            got.notes
        );
        assert!(y.contains("think: 1490ms"), "{y}");
        assert_eq!(y.matches("- name:").count(), 3, "{y}");
        assert!(
            got.notes.iter().any(|n| n.contains("1 static asset")),
            "{:?}",
            got.notes
        );
        assert!(
            got.notes.iter().any(|n| n.contains("cdn.other")),
            "{:?}",
            got.notes
        );
    }
}
