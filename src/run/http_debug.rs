//! `sloburn run --http-debug[=full]`, k6's flag: each request's and response's head (with
//! `full`, their bodies too, the first [`BODY_BYTES`] of each) printed to stderr when the
//! exchange ends, one block per exchange, written whole so two users' blocks never mix.
//!
//! Secrets never show: the values of `Authorization`, `Proxy-Authorization`, `Cookie`,
//! `Set-Cookie`, `X-Api-Key` and of every header marked sensitive (a `${env:}` or `${file:}`
//! in it) print as `[redacted]`, and every value a `${env:}` or `${file:}` reference resolved
//! to is scrubbed wherever else it shows (the URL, other headers, the bodies; `web::scrub`,
//! whose bounds hold: values shorter than 4 bytes are not searched for). Control characters a
//! target sends are escaped, so a body cannot drive the terminal.
//!
//! Off unless asked: the run's client then has no tap and a request pays one branch.

use super::args::HttpDebug;
use crate::config;
use crate::http::{Client, Outcome, RequestSpec, Resolver, Tap};
use crate::web::evidence::Evidence;
use crate::web::scrub::{self, REDACTED, Scrub};
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;

/// Body bytes printed per request or response with `--http-debug=full`.
pub const BODY_BYTES: usize = 2048;

/// Headers whose values are never printed, whatever they hold.
const HIDDEN: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// Prints each exchange of a run's client.
pub struct Printer {
    full: bool,
    scrub: Scrub,
}

impl Printer {
    /// A printer that scrubs `secrets` (the values references resolved to, sensitive header
    /// values) from what it prints.
    pub fn new(mode: HttpDebug, secrets: &[String]) -> Printer {
        Printer {
            full: mode == HttpDebug::Full,
            scrub: Scrub::new(secrets.iter().map(String::as_str)),
        }
    }

    /// The block printed for one exchange.
    pub fn render(&self, req: &RequestSpec, out: &Outcome) -> String {
        let mut text = String::from("Request:\n");
        let target = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let _ = writeln!(text, "{} {target} {:?}", req.method, out.version);
        if !req.headers.contains_key(http::header::HOST)
            && let Some(host) = req.uri.authority()
        {
            let _ = writeln!(text, "host: {host}");
        }
        self.headers(&mut text, &req.headers);
        self.body(&mut text, &req.body);
        text.push_str("\nResponse:\n");
        match out.status {
            Some(status) => {
                let reason = http::StatusCode::from_u16(status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("");
                let _ = writeln!(text, "{:?} {status} {reason}", out.version);
                self.headers(&mut text, &out.headers);
                self.body(&mut text, &out.body);
            }
            None => text.push_str("(no response)\n"),
        }
        if let Some(e) = out.error {
            let why = out
                .error_reason
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            let _ = writeln!(text, "error: {}{why}", e.as_str());
        }
        text.push('\n');
        escape_controls(&self.scrub.apply(&text))
    }

    fn headers(&self, text: &mut String, headers: &http::HeaderMap) {
        for (name, value) in headers {
            let hidden = value.is_sensitive() || HIDDEN.contains(&name.as_str());
            let shown = if hidden {
                REDACTED.into()
            } else {
                String::from_utf8_lossy(value.as_bytes())
            };
            let _ = writeln!(text, "{name}: {shown}");
        }
    }

    fn body(&self, text: &mut String, body: &[u8]) {
        if !self.full || body.is_empty() {
            return;
        }
        // Scrubbed over the cut and a value's length past it, so a secret cut at the limit
        // leaves none of itself (`scrub::redact`).
        let seen = &body[..body.len().min(BODY_BYTES + self.scrub.longest())];
        let kept = scrub::redact(&String::from_utf8_lossy(seen), BODY_BYTES, &[&self.scrub]);
        text.push('\n');
        text.push_str(&kept);
        if body.len() > BODY_BYTES {
            let _ = write!(text, "\n… ({} more bytes)", body.len() - BODY_BYTES);
        }
        text.push('\n');
    }
}

impl Tap for Printer {
    fn exchange(&self, req: &RequestSpec, outcome: &Outcome) {
        let text = self.render(req, outcome);
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
    }
}

/// Control characters but newline and tab, escaped (`\u{1b}`).
fn escape_controls(text: &str) -> String {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return text.to_string();
    }
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if c.is_control() => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// The values `${env:}` and `${file:}` references in `text` resolve to under `env`.
fn reference_values(text: &str, env: &config::Env) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start..];
        let Some(end) = after.find('}') else { break };
        if let Ok(v) = config::expand_flag(&after[..=end], env) {
            out.push(v);
        }
        rest = &after[end + 1..];
    }
    out
}

/// The run's client: with a [`Printer`] as its tap under `--http-debug`.
pub(super) fn client(args: &super::args::RunArgs, r: &super::resolve::Resolved) -> Client {
    let resolver = Arc::new(Resolver::system());
    let Some(mode) = args.http_debug else {
        return r.target.client(resolver);
    };
    let mut secrets: Vec<String> = r.secrets.iter().map(|s| s.expose().to_string()).collect();
    secrets.extend(Evidence::secrets_of(&r.target.headers));
    if let Ok(given) = super::k6flags::env_values(&args.env) {
        let env = config::Env::process_with(given);
        let flags = args.url.iter().chain(&args.headers);
        secrets.extend(flags.flat_map(|f| reference_values(f, &env)));
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let printer: Arc<dyn Tap> = Arc::new(Printer::new(mode, &secrets));
    Client::tapped(r.target.client_options(), resolver, Some(printer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn exchange() -> (RequestSpec, Outcome) {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "authorization",
            HeaderValue::from_static("Bearer t0ken-abc"),
        );
        let mut marked = HeaderValue::from_static("from-env-42");
        marked.set_sensitive(true);
        headers.insert("x-tenant", marked);
        headers.insert("accept", HeaderValue::from_static("application/json"));
        let req = RequestSpec {
            method: http::Method::POST,
            uri: "http://127.0.0.1:8080/login?key=k3y-value".parse().unwrap(),
            headers,
            body: bytes::Bytes::from_static(b"{\"password\":\"hunter22\"}"),
        };
        let mut back = http::HeaderMap::new();
        back.insert("set-cookie", HeaderValue::from_static("sid=abcdef"));
        back.insert("x-echo", HeaderValue::from_static("k3y-value"));
        let out = Outcome {
            status: Some(401),
            headers: back,
            body: bytes::Bytes::from_static(b"no \x1b[31mhunter22\x1b[0m here"),
            ..Outcome::default()
        };
        (req, out)
    }

    #[test]
    fn heads_show_and_secrets_do_not() {
        let (req, out) = exchange();
        let secrets = ["k3y-value".to_string(), "hunter22".to_string()];
        let heads = Printer::new(HttpDebug::Headers, &secrets).render(&req, &out);
        assert!(
            heads.starts_with(
                "Request:\nPOST /login?key=[redacted] HTTP/1.1\nhost: 127.0.0.1:8080\n"
            ),
            "{heads}"
        );
        for line in [
            "authorization: [redacted]",
            "x-tenant: [redacted]",
            "accept: application/json",
            "Response:\nHTTP/1.1 401 Unauthorized",
            "set-cookie: [redacted]",
            "x-echo: [redacted]",
        ] {
            assert!(heads.contains(line), "{line} in\n{heads}");
        }
        assert!(
            !heads.contains("password"),
            "no body without full:\n{heads}"
        );
        let full = Printer::new(HttpDebug::Full, &secrets).render(&req, &out);
        assert!(full.contains("{\"password\":\"[redacted]\"}"), "{full}");
        assert!(
            full.contains("no \\u{1b}[31m[redacted]\\u{1b}[0m here"),
            "{full}"
        );
        for secret in [
            "t0ken",
            "from-env-42",
            "k3y-value",
            "hunter22",
            "abcdef",
            "\x1b",
        ] {
            assert!(!full.contains(secret), "{secret:?} in\n{full}");
        }
    }

    #[test]
    fn bodies_are_cut_and_a_failure_says_why() {
        let (mut req, mut out) = exchange();
        req.body = bytes::Bytes::from(vec![b'a'; BODY_BYTES + 10]);
        out.status = None;
        out.error = Some(crate::http::ErrorClass::ConnectRefused);
        let text = Printer::new(HttpDebug::Full, &[]).render(&req, &out);
        assert!(
            text.contains(&format!("{}\n… (10 more bytes)", "a".repeat(10))),
            "{text}"
        );
        assert!(!text.contains(&"a".repeat(BODY_BYTES + 1)));
        assert!(
            text.contains("(no response)\nerror: connect_refused"),
            "{text}"
        );
    }

    #[test]
    fn references_in_flags_give_their_values() {
        let env = config::Env::from_map([("TOKEN".to_string(), "s3cret".to_string())].into(), 1);
        assert_eq!(
            reference_values("http://h/?t=${env:TOKEN}&u=${env:UNSET}", &env),
            ["s3cret"]
        );
        assert!(reference_values("no refs ${ here", &env).is_empty());
    }
}
