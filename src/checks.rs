//! Checks: pure functions from a response [`Outcome`] to pass/fail per check, and the SLO's
//! notion of a good request. No I/O; the config module builds the [`Check`] list.

use crate::http::Outcome;
use regex::Regex;
use std::time::Duration;

/// One check with its stable name (the `check` label of `sloburn_checks_total`).
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub kind: CheckKind,
}

#[derive(Debug, Clone)]
pub enum CheckKind {
    /// The status is one of these inclusive ranges (a single code is a range of one).
    Status(Vec<(u16, u16)>),
    BodyContains(String),
    BodyMatches(Regex),
    Json {
        path: JsonPath,
        expect: JsonExpect,
    },
    Header {
        name: http::HeaderName,
        expect: HeaderExpect,
    },
    DurationUnder(Duration),
    /// A TLS probe's certificates stay valid this long: the warning tier. Counted in
    /// `sloburn_checks_total` like any check, but never fails a request or an SLO event (a
    /// certificate that has expired fails the handshake, and that does).
    CertificateValidFor(Duration),
}

impl CheckKind {
    /// A warning: counted, never part of a request's verdict.
    pub fn is_warning(&self) -> bool {
        matches!(self, CheckKind::CertificateValidFor(_))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum JsonExpect {
    Exists,
    Equals(serde_json::Value),
}

#[derive(Debug, Clone)]
pub enum HeaderExpect {
    Exists,
    Equals(String),
    Matches(Regex),
}

/// A JSONPath subset: `$`, `.field`, `['field']` and `[index]` steps.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    pub source: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
}

impl JsonPath {
    pub fn parse(src: &str) -> Result<JsonPath, String> {
        let rest = src
            .strip_prefix('$')
            .ok_or_else(|| format!("JSON path `{src}` must start with `$`"))?;
        let mut steps = Vec::new();
        let mut chars = rest.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '.' => {
                    let mut name = String::new();
                    while let Some(&(_, c)) = chars.peek() {
                        if c == '.' || c == '[' {
                            break;
                        }
                        name.push(c);
                        chars.next();
                    }
                    if name.is_empty() {
                        return Err(format!("JSON path `{src}`: empty field name at {}", i + 2));
                    }
                    steps.push(Step::Field(name));
                }
                '[' => {
                    let mut inner = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == ']' {
                            closed = true;
                            break;
                        }
                        inner.push(c);
                    }
                    if !closed {
                        return Err(format!("JSON path `{src}`: `[` without `]`"));
                    }
                    let quoted = inner
                        .strip_prefix('\'')
                        .and_then(|s| s.strip_suffix('\''))
                        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
                    match quoted {
                        Some(name) => steps.push(Step::Field(name.to_string())),
                        None => steps.push(Step::Index(inner.trim().parse().map_err(|_| {
                            format!("JSON path `{src}`: `[{inner}]` is neither an index nor a quoted name")
                        })?)),
                    }
                }
                other => {
                    return Err(format!(
                        "JSON path `{src}`: unexpected `{other}` (use `$.a.b[0]`)"
                    ));
                }
            }
        }
        Ok(JsonPath {
            source: src.to_string(),
            steps,
        })
    }

    pub fn select<'v>(&self, mut value: &'v serde_json::Value) -> Option<&'v serde_json::Value> {
        for step in &self.steps {
            value = match step {
                Step::Field(name) => value.get(name.as_str())?,
                Step::Index(i) => value.get(*i)?,
            };
        }
        Some(value)
    }
}

impl Check {
    /// Whether this check passes for `outcome`. A transport failure fails every check.
    pub fn passes(&self, outcome: &Outcome) -> bool {
        if outcome.error.is_some() {
            return false;
        }
        match &self.kind {
            CheckKind::Status(ranges) => outcome
                .status
                .is_some_and(|s| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&s))),
            CheckKind::BodyContains(needle) => memfind(&outcome.body, needle.as_bytes()),
            CheckKind::BodyMatches(re) => std::str::from_utf8(&outcome.body)
                .map(|b| re.is_match(b))
                .unwrap_or(false),
            CheckKind::Json { path, expect } => {
                let Ok(doc) = serde_json::from_slice::<serde_json::Value>(&outcome.body) else {
                    return false;
                };
                match (path.select(&doc), expect) {
                    (None, _) => false,
                    (Some(_), JsonExpect::Exists) => true,
                    (Some(v), JsonExpect::Equals(want)) => json_equal(v, want),
                }
            }
            CheckKind::Header { name, expect } => {
                let mut values = outcome.headers.get_all(name).iter().peekable();
                match expect {
                    HeaderExpect::Exists => values.peek().is_some(),
                    HeaderExpect::Equals(want) => values.any(|v| v.as_bytes() == want.as_bytes()),
                    HeaderExpect::Matches(re) => {
                        values.any(|v| v.to_str().map(|s| re.is_match(s)).unwrap_or(false))
                    }
                }
            }
            CheckKind::DurationUnder(limit) => outcome.duration() < *limit,
            CheckKind::CertificateValidFor(d) => outcome
                .cert_seconds_left
                .is_some_and(|left| left >= d.as_secs() as i64),
        }
    }
}

/// Numbers compare by value (`1` equals `1.0`); everything else structurally.
fn json_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn memfind(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// The results of all checks for one response, in check order: computed once per request, on
/// the stack for up to 16 checks (no allocation per request).
pub enum Results {
    Inline([bool; 16], usize),
    Heap(Vec<bool>),
}

impl Results {
    pub fn of(checks: &[Check], outcome: &Outcome) -> Results {
        if checks.len() <= 16 {
            let mut a = [false; 16];
            for (slot, c) in a.iter_mut().zip(checks) {
                *slot = c.passes(outcome);
            }
            Results::Inline(a, checks.len())
        } else {
            Results::Heap(checks.iter().map(|c| c.passes(outcome)).collect())
        }
    }

    pub fn as_slice(&self) -> &[bool] {
        match self {
            Results::Inline(a, n) => &a[..*n],
            Results::Heap(v) => v,
        }
    }
}

/// The availability SLI's verdict, the one definition of a good request: a response arrived,
/// its status is expected (2xx/3xx when no status check is configured) and every check passed.
/// `results` are this outcome's check results in check order ([`Results::of`]), so the hot path
/// evaluates each check once.
pub fn verdict(checks: &[Check], results: &[bool], outcome: &Outcome) -> bool {
    if outcome.error.is_some() {
        return false;
    }
    let has_status_check = checks
        .iter()
        .any(|c| matches!(c.kind, CheckKind::Status(_)));
    let status_ok = has_status_check || outcome.status_is_ok();
    status_ok
        && checks
            .iter()
            .zip(results)
            .all(|(c, passed)| *passed || c.kind.is_warning())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ErrorClass;

    fn is_good(checks: &[Check], outcome: &Outcome) -> bool {
        verdict(checks, Results::of(checks, outcome).as_slice(), outcome)
    }

    fn response(status: u16, body: &str) -> Outcome {
        Outcome {
            status: Some(status),
            body: bytes::Bytes::copy_from_slice(body.as_bytes()),
            ..Outcome::default()
        }
    }

    fn check(kind: CheckKind, outcome: &Outcome, expected: bool) {
        let c = Check {
            name: "t".into(),
            kind,
        };
        assert_eq!(c.passes(outcome), expected, "{c:?} on {outcome:?}");
    }

    #[test]
    fn a_certificate_check_reads_the_seconds_left_at_the_handshake() {
        let week = Duration::from_secs(7 * 86_400);
        let left = |secs: Option<i64>| Outcome {
            status: Some(0),
            cert_seconds_left: secs,
            ..Outcome::default()
        };
        check(
            CheckKind::CertificateValidFor(week),
            &left(Some(8 * 86_400)),
            true,
        );
        check(
            CheckKind::CertificateValidFor(week),
            &left(Some(7 * 86_400)),
            true,
        );
        check(
            CheckKind::CertificateValidFor(week),
            &left(Some(6 * 86_400)),
            false,
        );
        check(CheckKind::CertificateValidFor(week), &left(Some(-5)), false);
        check(CheckKind::CertificateValidFor(week), &left(None), false);
    }

    #[test]
    fn status_single_list_and_range() {
        let ok = response(204, "");
        check(CheckKind::Status(vec![(200, 200)]), &ok, false);
        check(CheckKind::Status(vec![(200, 200), (204, 204)]), &ok, true);
        check(CheckKind::Status(vec![(200, 299)]), &ok, true);
        check(CheckKind::Status(vec![(300, 399)]), &ok, false);
    }

    #[test]
    fn body_checks() {
        let r = response(200, r#"{"status":"up","n":1,"items":[{"id":7}]}"#);
        check(CheckKind::BodyContains("\"up\"".into()), &r, true);
        check(CheckKind::BodyContains("down".into()), &r, false);
        check(
            CheckKind::BodyMatches(Regex::new(r#""n":\d+"#).unwrap()),
            &r,
            true,
        );
        let json = |p: &str, e: JsonExpect| CheckKind::Json {
            path: JsonPath::parse(p).unwrap(),
            expect: e,
        };
        check(json("$.status", JsonExpect::Equals("up".into())), &r, true);
        check(
            json("$.status", JsonExpect::Equals("down".into())),
            &r,
            false,
        );
        check(
            json("$.n", JsonExpect::Equals(serde_json::json!(1.0))),
            &r,
            true,
        );
        check(json("$.items[0].id", JsonExpect::Exists), &r, true);
        check(json("$['items'][1]", JsonExpect::Exists), &r, false);
        check(
            json("$.status", JsonExpect::Exists),
            &response(200, "not json"),
            false,
        );
    }

    #[test]
    fn header_and_duration_checks() {
        let mut r = response(200, "");
        r.headers
            .insert("content-type", "application/json".parse().unwrap());
        r.phases.waiting = Duration::from_millis(250);
        let name = http::HeaderName::from_static("content-type");
        check(
            CheckKind::Header {
                name: name.clone(),
                expect: HeaderExpect::Equals("application/json".into()),
            },
            &r,
            true,
        );
        check(
            CheckKind::Header {
                name: http::HeaderName::from_static("x-missing"),
                expect: HeaderExpect::Exists,
            },
            &r,
            false,
        );
        check(
            CheckKind::Header {
                name,
                expect: HeaderExpect::Matches(Regex::new("^application/").unwrap()),
            },
            &r,
            true,
        );
        check(
            CheckKind::DurationUnder(Duration::from_millis(300)),
            &r,
            true,
        );
        check(
            CheckKind::DurationUnder(Duration::from_millis(200)),
            &r,
            false,
        );
    }

    #[test]
    fn transport_errors_fail_everything_and_are_never_good() {
        let mut r = response(200, "ok");
        r.error = Some(ErrorClass::Reset);
        check(CheckKind::DurationUnder(Duration::from_secs(1)), &r, false);
        assert!(!is_good(&[], &r));
    }

    #[test]
    fn good_means_expected_status_and_all_checks() {
        assert!(is_good(&[], &response(200, "")));
        assert!(!is_good(&[], &response(503, "")));
        let accept_503 = Check {
            name: "s".into(),
            kind: CheckKind::Status(vec![(503, 503)]),
        };
        assert!(is_good(
            std::slice::from_ref(&accept_503),
            &response(503, "")
        ));
        let body = Check {
            name: "b".into(),
            kind: CheckKind::BodyContains("ok".into()),
        };
        assert!(!is_good(&[accept_503, body], &response(503, "nope")));
    }

    #[test]
    fn results_beyond_sixteen_checks_are_kept_in_order() {
        let checks: Vec<Check> = (0..20)
            .map(|i| Check {
                name: format!("c{i}"),
                kind: CheckKind::BodyContains(if i % 3 == 0 { "up" } else { "down" }.into()),
            })
            .collect();
        let r = response(200, "up");
        let results = Results::of(&checks, &r);
        assert!(matches!(results, Results::Heap(_)));
        let want: Vec<bool> = (0..20).map(|i| i % 3 == 0).collect();
        assert_eq!(results.as_slice(), want.as_slice());
        let few = Results::of(&checks[..4], &r);
        assert!(matches!(few, Results::Inline(..)));
        assert_eq!(few.as_slice(), &want[..4]);
        assert!(!verdict(&checks, results.as_slice(), &r));
    }

    #[test]
    fn json_path_errors() {
        assert!(
            JsonPath::parse("status")
                .unwrap_err()
                .contains("must start with `$`")
        );
        assert!(JsonPath::parse("$.a[").is_err());
        assert!(JsonPath::parse("$.a[x]").is_err());
        assert!(JsonPath::parse("$..a").is_err());
    }
}
