//! What a recording must not replay as it is: header names and values HTTP cannot send
//! (left out and listed), and credentials the browser sent (`Authorization`, cookies, API-key
//! headers), which become `${env:NAME}` references with each variable listed, never printed.
//!
//! One variable per kind (the `Authorization` scheme, a cookie's name, an API-key header), so
//! a rotating token is one variable; every value recorded is then replaced wherever else it
//! is still in the journey (a token also in a URL or a body), by one Aho-Corasick pass over
//! each text: linear in the recording.

use std::collections::{BTreeMap, HashMap};

use aho_corasick::{AhoCorasick, MatchKind};

/// Invalid header names (or values) listed by name, at most this many; the rest counted.
const MAX_LISTED: usize = 20;
/// A value shorter than this is replaced only in its own header: shorter ones (`1`, `dark`)
/// would be found by chance elsewhere.
const MIN_SCRUBBED: usize = 8;

/// Keeps the headers HTTP can send; counts the others by name in `dropped`.
pub(super) fn sendable(headers: &mut Vec<(String, String)>, dropped: &mut BTreeMap<String, usize>) {
    headers.retain(|(k, v)| {
        let ok = http::HeaderName::from_bytes(k.as_bytes()).is_ok()
            && http::HeaderValue::from_str(v).is_ok();
        if !ok {
            *dropped.entry(k.clone()).or_default() += 1;
        }
        ok
    });
}

/// The notes for [`sendable`]'s count.
pub(super) fn dropped_notes(dropped: &BTreeMap<String, usize>) -> Vec<String> {
    let mut notes: Vec<String> = dropped
        .iter()
        .take(MAX_LISTED)
        .map(|(name, n)| {
            format!(
                "left out the request header `{name}` ({n} request(s)): not a valid header name \
                 or value"
            )
        })
        .collect();
    if dropped.len() > MAX_LISTED {
        notes.push(format!(
            "left out {} more invalid request header name(s)",
            dropped.len() - MAX_LISTED
        ));
    }
    notes
}

/// The credentials found, by variable.
#[derive(Default)]
pub(super) struct Credentials {
    /// Kind (`authorization bearer`, `cookie sid`) → variable.
    vars: HashMap<String, String>,
    /// Variable → (what it holds, requests that sent it).
    listed: BTreeMap<String, (String, usize)>,
    /// Every value recorded → its variable.
    values: HashMap<String, String>,
}

impl Credentials {
    /// One request's headers with each credential replaced by its `${env:NAME}` reference; a
    /// value that refers to a capture (`Bearer ${token}`) is the run's own and stays.
    pub(super) fn hide(&mut self, headers: &mut [(String, String)]) {
        for (k, v) in headers.iter_mut() {
            if refers(v) {
                continue;
            }
            let lower = k.to_ascii_lowercase();
            if lower == "cookie" {
                *v = self.cookies(v);
            } else if lower == "authorization" || lower == "proxy-authorization" {
                let (scheme, credential) = match v.split_once(' ') {
                    Some((s, c)) if !c.trim().is_empty() => (s.to_string(), c.trim().to_string()),
                    _ => (String::new(), v.clone()),
                };
                let kind = match scheme.to_ascii_lowercase().as_str() {
                    "bearer" => "bearer token".to_string(),
                    "basic" => "basic credentials".to_string(),
                    "" => lower.clone(),
                    s => format!("{lower} {s}"),
                };
                let what = format!("the {kind} the recording sent in `{k}`");
                let reference = self.reference(&kind, &what, credential);
                *v = if scheme.is_empty() {
                    reference
                } else {
                    format!("{scheme} {reference}")
                };
            } else if is_key_header(&lower) {
                let what = format!("the `{k}` header the recording sent");
                *v = self.reference(&lower, &what, v.clone());
            }
        }
    }

    /// `a=1; b=2` → `a=${env:RECORDED_COOKIE_A}; b=${env:RECORDED_COOKIE_B}`.
    fn cookies(&mut self, header: &str) -> String {
        let mut out = Vec::new();
        for part in header.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or(("cookie", part));
            let what = format!("the cookie `{name}` the recording sent");
            let reference = self.reference(&format!("cookie {name}"), &what, value.to_string());
            out.push(format!("{name}={reference}"));
        }
        out.join("; ")
    }

    /// The `${env:NAME}` for a value of `kind`, the variable made the first time.
    fn reference(&mut self, kind: &str, what: &str, value: String) -> String {
        let var = match self.vars.get(kind) {
            Some(v) => v.clone(),
            None => {
                let mut var = format!("RECORDED_{}", screaming(kind));
                let mut n = 1;
                while self.listed.contains_key(&var) {
                    n += 1;
                    var = format!("RECORDED_{}_{n}", screaming(kind));
                }
                self.vars.insert(kind.to_string(), var.clone());
                self.listed.insert(var.clone(), (what.to_string(), 0));
                var
            }
        };
        if let Some((_, n)) = self.listed.get_mut(&var) {
            *n += 1;
        }
        self.values.entry(value).or_insert_with(|| var.clone());
        format!("${{env:{var}}}")
    }

    /// Replaces every recorded value (of [`MIN_SCRUBBED`] or more bytes) still in the texts
    /// with its reference; built once, then one pass a text.
    pub(super) fn scrubber(&self) -> Option<Scrubber> {
        let pairs: Vec<(&String, &String)> = self
            .values
            .iter()
            .filter(|(v, _)| v.len() >= MIN_SCRUBBED)
            .collect();
        if pairs.is_empty() {
            return None;
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(pairs.iter().map(|(v, _)| v.as_str()))
            .ok()?;
        let with = pairs
            .iter()
            .map(|(_, var)| format!("${{env:{var}}}"))
            .collect();
        Some(Scrubber { automaton, with })
    }

    /// One line per variable to set, for stderr and the config's head.
    pub(super) fn lines(&self) -> Vec<String> {
        self.listed
            .iter()
            .map(|(var, (what, n))| {
                format!("set {var}: {what} ({n} request(s)), sent as `${{env:{var}}}`")
            })
            .collect()
    }
}

/// Replaces recorded credentials in a text.
pub(super) struct Scrubber {
    automaton: AhoCorasick,
    with: Vec<String>,
}

impl Scrubber {
    pub(super) fn scrub(&self, text: &mut String) {
        if self.automaton.is_match(text.as_str()) {
            *text = self.automaton.replace_all(text, &self.with);
        }
    }
}

/// Whether a template refers to something (`${…}`, not the literal `$${`).
fn refers(v: &str) -> bool {
    v.replace("$${", "").contains("${")
}

/// Headers that carry an API key or token by their name.
fn is_key_header(lower: &str) -> bool {
    [
        "api-key",
        "apikey",
        "api_key",
        "auth-token",
        "access-token",
        "x-token",
    ]
    .iter()
    .any(|k| lower.contains(k))
}

/// `cookie sid` → `COOKIE_SID`.
fn screaming(kind: &str) -> String {
    let mut out = String::new();
    for c in kind.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
        if out.len() >= 48 {
            break;
        }
    }
    let out = out.trim_matches('_');
    if out.is_empty() {
        "VALUE".into()
    } else {
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_become_references_and_are_scrubbed_everywhere() {
        let mut c = Credentials::default();
        let mut h = vec![
            (
                "Authorization".to_string(),
                "Bearer eyJ.secret-token".to_string(),
            ),
            (
                "Cookie".to_string(),
                "sid=abc123456789; theme=dark".to_string(),
            ),
            ("X-Api-Key".to_string(), "k-1234567890".to_string()),
            ("Accept".to_string(), "*/*".to_string()),
        ];
        c.hide(&mut h);
        assert_eq!(h[0].1, "Bearer ${env:RECORDED_BEARER_TOKEN}");
        assert_eq!(
            h[1].1,
            "sid=${env:RECORDED_COOKIE_SID}; theme=${env:RECORDED_COOKIE_THEME}"
        );
        assert_eq!(h[2].1, "${env:RECORDED_X_API_KEY}");
        assert_eq!(h[3].1, "*/*");
        let mut again = vec![
            (
                "authorization".to_string(),
                "Bearer rotated-token-2".to_string(),
            ),
            ("authorization".to_string(), "Bearer ${token}".to_string()),
        ];
        c.hide(&mut again);
        assert_eq!(again[0].1, "Bearer ${env:RECORDED_BEARER_TOKEN}");
        assert_eq!(again[1].1, "Bearer ${token}");
        let mut path = "/a?t=eyJ.secret-token&s=abc123456789&theme=dark".to_string();
        c.scrubber().unwrap().scrub(&mut path);
        assert_eq!(
            path,
            "/a?t=${env:RECORDED_BEARER_TOKEN}&s=${env:RECORDED_COOKIE_SID}&theme=dark"
        );
        let lines = c.lines();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("RECORDED_BEARER_TOKEN: the bearer token")
                    && l.contains("(2 request(s))")),
            "{lines:?}"
        );
        assert!(lines.iter().all(|l| !l.contains("secret-token")));
    }

    #[test]
    fn headers_http_cannot_send_are_counted_by_name() {
        let mut dropped = BTreeMap::new();
        let mut h = vec![
            ("bad name".to_string(), "x".to_string()),
            ("ok".to_string(), "v".to_string()),
            ("x-nl".to_string(), "a\nb".to_string()),
        ];
        sendable(&mut h, &mut dropped);
        assert_eq!(h.len(), 1);
        assert_eq!(dropped.len(), 2);
        assert!(dropped_notes(&dropped)[0].contains("`bad name` (1 request(s))"));
    }
}
