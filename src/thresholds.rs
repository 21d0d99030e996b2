//! k6 thresholds: parsing `p(95)<300`-style expressions against sloburn's built-in metrics and
//! their tag-filtered sub-metrics, and evaluating them against a run's aggregates, with k6's
//! semantics. Pure: the runner supplies a [`MetricSource`].
//!
//! Grammar (whitespace allowed between tokens): `aggregation operator value`, where
//! - trend metrics (`http_req_duration`, `http_req_corrected_duration`, `http_req_<phase>`,
//!   `iteration_duration`) take `avg|min|max|med|p(N)` and a plain number of milliseconds;
//! - rate metrics (`http_req_failed`, `checks`) take `rate` and a plain number;
//! - counters (`http_reqs`, `iterations`, `dropped_iterations`, `data_sent`, `data_received`)
//!   take `count` or `rate` (per second) and a plain number;
//! - gauges (`vus`, `vus_max`) take `value`;
//! - operators are `<`, `<=`, `>`, `>=`, `==`, `!=`.
//!
//! As in k6, the limit is a bare number: `p(95)<20ms` is an error (k6 exits 104 on it, "failed
//! parsing threshold expression's right hand side"), and the message says to write `p(95)<20`.
//!
//! A metric name may carry a tag filter, a k6 sub-metric: `http_req_duration{status:200}`,
//! `http_req_failed{expected_response:false}`, `checks{check:status is 200}`, and the tags a
//! request has from its step: `method`, `group` (k6's `::journey::step` path; `""` for a
//! single-request profile and for the root-level metrics `iterations`, `iteration_duration`,
//! `data_sent`, `data_received`), `step` (sloburn's own), `name` (the URL as k6 tags it) and
//! `scenario` (the profile's name). `group_duration` is k6's: one sample per group run.
//!
//! No data, as k6 decides it: a trend with no sample evaluates its aggregates as 0, a counter or
//! gauge as 0, and a rate threshold with no sample passes (k6 finds no `rate` in the empty sink
//! and does not fail it). The result says `no_data`, so nobody prints a made-up `0ns`.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use crate::units;

/// The k6 metric type, which decides the aggregations a threshold may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Trend,
    Rate,
    Counter,
    Gauge,
}

impl MetricKind {
    pub fn name(self) -> &'static str {
        match self {
            MetricKind::Trend => "trend",
            MetricKind::Rate => "rate",
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
        }
    }

    fn allowed(self) -> &'static str {
        match self {
            MetricKind::Trend => "avg, min, max, med or p(N)",
            MetricKind::Rate => "rate",
            MetricKind::Counter => "count or rate",
            MetricKind::Gauge => "value",
        }
    }
}

/// Every metric a threshold may name. The phase names mirror `http::Phase::as_str`.
pub const METRICS: &[(&str, MetricKind)] = &[
    ("http_req_duration", MetricKind::Trend),
    ("http_req_corrected_duration", MetricKind::Trend),
    ("http_req_blocked", MetricKind::Trend),
    ("http_req_dns", MetricKind::Trend),
    ("http_req_connecting", MetricKind::Trend),
    ("http_req_tls_handshaking", MetricKind::Trend),
    ("http_req_sending", MetricKind::Trend),
    ("http_req_waiting", MetricKind::Trend),
    ("http_req_receiving", MetricKind::Trend),
    ("iteration_duration", MetricKind::Trend),
    ("group_duration", MetricKind::Trend),
    ("http_req_failed", MetricKind::Rate),
    ("checks", MetricKind::Rate),
    ("http_reqs", MetricKind::Counter),
    ("iterations", MetricKind::Counter),
    ("dropped_iterations", MetricKind::Counter),
    ("data_sent", MetricKind::Counter),
    ("data_received", MetricKind::Counter),
    ("vus", MetricKind::Gauge),
    ("vus_max", MetricKind::Gauge),
];

/// The kind of a base metric (no tag filter).
pub fn metric_kind(metric: &str) -> Option<MetricKind> {
    METRICS
        .iter()
        .find(|(name, _)| *name == metric)
        .map(|&(_, kind)| kind)
}

/// One tag of a sub-metric filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// `status:200`: the response's status (`0`: no response).
    Status(u16),
    /// `expected_response:true`: the request did not count in `http_req_failed`.
    Expected(bool),
    /// `check:NAME`: one check's results (on `checks`).
    Check(String),
    /// `method:GET`: the request's method (its step's).
    Method(String),
    /// `scenario:NAME`: the profile's name.
    Scenario(String),
    /// `group:::journey::step`: k6's group path of the request's step (`::journey` for a
    /// journey's `group_duration`; `""` at the root).
    Group(String),
    /// `step:NAME`: the journey step's name (`request` for a single-request profile).
    Step(String),
    /// `name:URL`: k6's `name` tag, the step's URL as written (without user part or query).
    Name(String),
    /// `reason:saturated`: why an iteration was dropped (one of [`DROP_REASONS`]; sloburn's
    /// own tag on `dropped_iterations`).
    Reason(String),
}

/// The reasons an arrival-rate iteration is dropped, as `load::pacing::DropReason` names them
/// (a test keeps the two lists equal): `saturated` is the target's failure, the others
/// sloburn's own.
pub const DROP_REASONS: [&str; 4] = ["saturated", "late", "connect_paced", "in_flight_cap"];

impl Tag {
    fn key(&self) -> &'static str {
        match self {
            Tag::Status(_) => "status",
            Tag::Expected(_) => "expected_response",
            Tag::Check(_) => "check",
            Tag::Method(_) => "method",
            Tag::Scenario(_) => "scenario",
            Tag::Group(_) => "group",
            Tag::Step(_) => "step",
            Tag::Name(_) => "name",
            Tag::Reason(_) => "reason",
        }
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tag::Status(s) => write!(f, "status:{s}"),
            Tag::Expected(b) => write!(f, "expected_response:{b}"),
            Tag::Check(c) => write!(f, "check:{c}"),
            Tag::Method(m) => write!(f, "method:{m}"),
            Tag::Scenario(s) => write!(f, "scenario:{s}"),
            Tag::Group(g) => write!(f, "group:{g}"),
            Tag::Step(s) => write!(f, "step:{s}"),
            Tag::Name(n) => write!(f, "name:{n}"),
            Tag::Reason(r) => write!(f, "reason:{r}"),
        }
    }
}

/// The tags a metric's samples carry in sloburn (and in k6).
fn tags_of(base: &str) -> &'static [&'static str] {
    match base {
        "checks" => &["check", "group", "step", "scenario"],
        b if b.starts_with("http_req") => &[
            "status",
            "expected_response",
            "method",
            "group",
            "step",
            "name",
            "scenario",
        ],
        "vus" | "vus_max" => &[],
        "dropped_iterations" => &["reason", "scenario"],
        _ => &["group", "scenario"],
    }
}

/// A metric a threshold names: a built-in metric, optionally narrowed by tags (k6's sub-metric).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricRef {
    /// The built-in metric.
    pub base: &'static str,
    pub kind: MetricKind,
    /// The filter, in the order written; empty for the whole metric.
    pub tags: Vec<Tag>,
}

impl MetricRef {
    pub fn whole(base: &'static str) -> MetricRef {
        MetricRef {
            base,
            kind: metric_kind(base).unwrap_or(MetricKind::Counter),
            tags: Vec::new(),
        }
    }

    /// The name k6 gives the sub-metric: `base{tag:value,…}`; the base name without tags.
    pub fn key(&self) -> String {
        if self.tags.is_empty() {
            return self.base.to_string();
        }
        let tags: Vec<String> = self.tags.iter().map(Tag::to_string).collect();
        format!("{}{{{}}}", self.base, tags.join(","))
    }
}

impl fmt::Display for MetricRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

/// Parses a threshold's metric name: `http_req_duration` or `http_req_duration{status:200}`.
pub fn parse_metric(name: &str) -> Result<MetricRef, ThresholdError> {
    let name = name.trim();
    let (base_text, filter) = match name.find('{') {
        Some(brace) => {
            let Some(inner) = name[brace + 1..].strip_suffix('}') else {
                return Err(ThresholdError::BadFilter {
                    metric: name.to_string(),
                    message: "a tag filter is written `{tag:value}` and ends with `}`".into(),
                });
            };
            (name[..brace].trim(), Some(inner))
        }
        None => (name, None),
    };
    let (base, kind) = METRICS
        .iter()
        .find(|(m, _)| *m == base_text)
        .copied()
        .ok_or_else(|| ThresholdError::UnknownMetric {
            metric: base_text.to_string(),
            did_you_mean: closest(base_text, METRICS.iter().map(|&(m, _)| m)),
        })?;
    let mut tags = Vec::new();
    if let Some(inner) = filter {
        let allowed = tags_of(base);
        let bad = |message: String| ThresholdError::BadFilter {
            metric: name.to_string(),
            message,
        };
        if inner.trim().is_empty() {
            return Err(bad("an empty tag filter; write e.g. `{status:200}`".into()));
        }
        for part in inner.split(',') {
            let Some((key, value)) = part.split_once(':') else {
                return Err(bad(format!("`{}` is not `tag:value`", part.trim())));
            };
            let (key, value) = (key.trim(), value.trim().trim_matches(['"', '\'']));
            if !allowed.contains(&key) {
                let takes = if allowed.is_empty() {
                    "takes no tag filter".to_string()
                } else {
                    format!("can be filtered by {}", allowed.join(", "))
                };
                return Err(bad(format!(
                    "sloburn does not record the tag `{key}` on `{base}`; it {takes}"
                )));
            }
            let tag = match key {
                "status" => Tag::Status(
                    value
                        .parse::<u16>()
                        .ok()
                        .filter(|s| *s < 600)
                        .ok_or_else(|| bad(format!("`{value}` is not a status code")))?,
                ),
                "expected_response" => Tag::Expected(match value {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad(format!("`{value}` is not true or false"))),
                }),
                "check" => Tag::Check(value.to_string()),
                "method" => Tag::Method(value.to_string()),
                "group" => Tag::Group(value.to_string()),
                "step" => Tag::Step(value.to_string()),
                "name" => Tag::Name(value.to_string()),
                "reason" if DROP_REASONS.contains(&value) => Tag::Reason(value.to_string()),
                "reason" => {
                    return Err(bad(format!(
                        "`{value}` is no drop reason; use one of {}",
                        DROP_REASONS.join(", ")
                    )));
                }
                _ => Tag::Scenario(value.to_string()),
            };
            if tags.iter().any(|t: &Tag| t.key() == tag.key()) {
                return Err(bad(format!("the tag `{key}` is given twice")));
            }
            tags.push(tag);
        }
    }
    Ok(MetricRef { base, kind, tags })
}

/// How a threshold reduces a metric to one number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Aggregation {
    Avg,
    Min,
    Max,
    Med,
    /// `p(N)` with N in [0, 100].
    Percentile(f64),
    /// Rate metrics: fraction of true samples. Counters: per second.
    Rate,
    Count,
    /// Gauges: the last value.
    Value,
}

impl Aggregation {
    fn valid_for(self, kind: MetricKind) -> bool {
        match self {
            Aggregation::Avg
            | Aggregation::Min
            | Aggregation::Max
            | Aggregation::Med
            | Aggregation::Percentile(_) => kind == MetricKind::Trend,
            Aggregation::Rate => matches!(kind, MetricKind::Rate | MetricKind::Counter),
            Aggregation::Count => kind == MetricKind::Counter,
            Aggregation::Value => kind == MetricKind::Gauge,
        }
    }
}

impl fmt::Display for Aggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Aggregation::Avg => f.write_str("avg"),
            Aggregation::Min => f.write_str("min"),
            Aggregation::Max => f.write_str("max"),
            Aggregation::Med => f.write_str("med"),
            Aggregation::Percentile(n) => write!(f, "p({n})"),
            Aggregation::Rate => f.write_str("rate"),
            Aggregation::Count => f.write_str("count"),
            Aggregation::Value => f.write_str("value"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    pub fn holds(self, observed: f64, limit: f64) -> bool {
        match self {
            Op::Lt => observed < limit,
            Op::Le => observed <= limit,
            Op::Gt => observed > limit,
            Op::Ge => observed >= limit,
            Op::Eq => observed == limit,
            Op::Ne => observed != limit,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed threshold. `value` is in milliseconds for trend metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The metric's name as k6 writes it: `http_req_duration` or `http_req_duration{status:200}`
    /// (the key in the summary export and the `metric` label).
    pub metric: String,
    /// What `metric` names, parsed.
    pub target: MetricRef,
    pub aggregation: Aggregation,
    pub op: Op,
    pub value: f64,
    /// The expression as written, for summaries and the `threshold` metric label.
    pub source: String,
}

/// Why a threshold was rejected. Expression errors carry the 1-based character column in the
/// expression.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ThresholdError {
    #[error(
        "unknown metric `{metric}`{}; thresholds apply to the built-in metrics only",
        did_you_mean_suffix(.did_you_mean)
    )]
    UnknownMetric {
        metric: String,
        did_you_mean: Option<&'static str>,
    },
    #[error("`{metric}`: {message}")]
    BadFilter { metric: String, message: String },
    #[error("column {column}: {message}")]
    Syntax { column: usize, message: String },
    #[error("invalid delayAbortEval `{value}`: {message}")]
    DelayAbortEval { value: String, message: String },
}

fn did_you_mean_suffix(s: &Option<&'static str>) -> String {
    s.map(|m| format!(" (did you mean `{m}`?)"))
        .unwrap_or_default()
}

impl ThresholdError {
    /// Column (1-based, in characters) within the expression, for expression errors.
    pub fn column(&self) -> Option<usize> {
        match self {
            ThresholdError::Syntax { column, .. } => Some(*column),
            _ => None,
        }
    }
}

fn closest(word: &str, candidates: impl IntoIterator<Item = &'static str>) -> Option<&'static str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Parse one threshold expression for `metric` (which may carry a tag filter).
pub fn parse(metric: &str, expr: &str) -> Result<Threshold, ThresholdError> {
    let target = parse_metric(metric)?;
    let kind = target.kind;
    let metric = target.key();
    let mut p = Parser {
        chars: expr.chars().collect(),
        pos: 0,
    };
    p.skip_ws();
    if p.at_end() {
        return Err(p.error(format!(
            "empty threshold; expected e.g. `{}`",
            match kind {
                MetricKind::Trend => "p(95)<300",
                MetricKind::Rate => "rate<0.01",
                MetricKind::Counter => "count>0",
                MetricKind::Gauge => "value<100",
            }
        )));
    }
    let agg_col = p.pos;
    let aggregation = p.aggregation(&metric, kind)?;
    if !aggregation.valid_for(kind) {
        return Err(ThresholdError::Syntax {
            column: agg_col + 1,
            message: format!(
                "`{aggregation}` is not valid for {} metric `{metric}`; use {}",
                kind.name(),
                kind.allowed()
            ),
        });
    }
    p.skip_ws();
    let op = p.op(&aggregation)?;
    p.skip_ws();
    let value = p.value(kind, op)?;
    p.skip_ws();
    if !p.at_end() {
        let rest: String = p.chars[p.pos..].iter().collect();
        if rest.starts_with('%') {
            return Err(p.error(format!(
                "percent signs are not supported; write {}% as {}",
                value,
                value / 100.0
            )));
        }
        if kind == MetricKind::Trend && units::duration_unit(rest.trim_end()).is_some() {
            return Err(p.error(unit_message(value, rest.trim_end())));
        }
        return Err(p.error(format!(
            "unexpected `{}` after the value; write one expression per threshold entry",
            rest.trim_end()
        )));
    }
    Ok(Threshold {
        metric,
        target,
        aggregation,
        op,
        value,
        source: expr.to_string(),
    })
}

/// k6 takes trend limits as bare milliseconds and rejects a unit; say what to write instead.
fn unit_message(number: f64, unit: &str) -> String {
    match units::duration_unit(unit) {
        Some(d) => {
            let ms = number * d.as_nanos() as f64 / 1e6;
            format!(
                "k6 thresholds take a plain number of milliseconds, not a unit: write `{ms}` \
                 for {number}{unit} (k6 rejects `{number}{unit}`)"
            )
        }
        None => format!(
            "unknown unit `{unit}`; k6 thresholds take a plain number (milliseconds for trends)"
        ),
    }
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, message: String) -> ThresholdError {
        self.error_at(self.pos, message)
    }

    fn error_at(&self, pos: usize, message: String) -> ThresholdError {
        ThresholdError::Syntax {
            column: pos + 1,
            message,
        }
    }

    fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    fn aggregation(
        &mut self,
        metric: &str,
        kind: MetricKind,
    ) -> Result<Aggregation, ThresholdError> {
        let start = self.pos;
        let word = self.take_while(|c| c.is_alphanumeric() || c == '_');
        let agg = match word.as_str() {
            "avg" => Aggregation::Avg,
            "min" => Aggregation::Min,
            "max" => Aggregation::Max,
            "med" => Aggregation::Med,
            "rate" => Aggregation::Rate,
            "count" => Aggregation::Count,
            "value" => Aggregation::Value,
            "p" => return self.percentile(),
            "" => {
                return Err(self.error(format!(
                    "expected an aggregation ({}) for {} metric `{metric}`, found `{}`",
                    kind.allowed(),
                    kind.name(),
                    self.peek().unwrap_or(' ')
                )));
            }
            w if w.starts_with('p') && w[1..].chars().all(|c| c.is_ascii_digit() || c == '.') => {
                return Err(self.error_at(
                    start,
                    format!("percentiles are written `p({})`, not `{w}`", &w[1..]),
                ));
            }
            w => {
                let names = ["avg", "min", "max", "med", "rate", "count", "value"];
                let hint = closest(w, names)
                    .map(|c| format!(" (did you mean `{c}`?)"))
                    .unwrap_or_default();
                return Err(self.error_at(
                    start,
                    format!(
                        "unknown aggregation `{w}`{hint}; {} metric `{metric}` takes {}",
                        kind.name(),
                        kind.allowed()
                    ),
                ));
            }
        };
        Ok(agg)
    }

    fn percentile(&mut self) -> Result<Aggregation, ThresholdError> {
        self.skip_ws();
        if self.peek() != Some('(') {
            return Err(self.error("expected `(` after `p`, as in `p(95)`".into()));
        }
        self.pos += 1;
        self.skip_ws();
        let num_pos = self.pos;
        let text = self.take_while(|c| c.is_ascii_digit() || c == '.');
        let n: f64 = text.parse().map_err(|_| {
            self.error_at(
                num_pos,
                "expected a percentile between 0 and 100, as in `p(99.9)`".into(),
            )
        })?;
        if !(0.0..=100.0).contains(&n) {
            return Err(self.error_at(num_pos, format!("percentile {text} is outside 0..100")));
        }
        self.skip_ws();
        if self.peek() != Some(')') {
            return Err(self.error("expected `)` to close `p(`".into()));
        }
        self.pos += 1;
        Ok(Aggregation::Percentile(n))
    }

    fn op(&mut self, after: &Aggregation) -> Result<Op, ThresholdError> {
        let two: String = self.chars[self.pos..].iter().take(2).collect();
        let (op, len) = match two.as_str() {
            "<=" => (Op::Le, 2),
            ">=" => (Op::Ge, 2),
            "==" => (Op::Eq, 2),
            "!=" => (Op::Ne, 2),
            _ => match self.peek() {
                Some('<') => (Op::Lt, 1),
                Some('>') => (Op::Gt, 1),
                Some('=') => {
                    return Err(self.error("`=` is not an operator; write `==`".into()));
                }
                Some(c) => {
                    return Err(self.error(format!(
                        "expected an operator (<, <=, >, >=, ==, !=) after `{after}`, found `{c}`"
                    )));
                }
                None => {
                    return Err(self.error(format!(
                        "expected an operator (<, <=, >, >=, ==, !=) after `{after}`"
                    )));
                }
            },
        };
        self.pos += len;
        Ok(op)
    }

    fn value(&mut self, kind: MetricKind, op: Op) -> Result<f64, ThresholdError> {
        let start = self.pos;
        let text =
            self.take_while(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'));
        // Numbers here always start with a digit, sign or dot, so "1e3" is an exponent and
        // "5" followed by letters is a unit.
        if text.is_empty() {
            return Err(self.error(match self.peek() {
                Some(c) => format!("expected a number after `{op}`, found `{c}`"),
                None => format!("expected a number after `{op}`"),
            }));
        }
        let number: f64 = text
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite())
            .ok_or_else(|| self.error_at(start, format!("`{text}` is not a number")))?;
        let unit_pos = self.pos;
        let unit = self.take_while(|c| c.is_alphabetic());
        // Every built-in metric is a duration, a fraction, a count or a number of VUs: none is
        // ever below zero, so a negative limit is a typo that would make the threshold always
        // pass or fail.
        if text.starts_with('-') {
            let what = match kind {
                MetricKind::Trend => "a duration",
                MetricKind::Rate => "a rate (between 0 and 1)",
                MetricKind::Counter => "a count or a per-second rate",
                MetricKind::Gauge => "a number of VUs",
            };
            return Err(self.error_at(
                start,
                format!("`{text}{unit}` is negative; the limit is {what}, never below zero"),
            ));
        }
        if !unit.is_empty() {
            return Err(self.error_at(
                unit_pos,
                if kind == MetricKind::Trend {
                    unit_message(number, &unit)
                } else {
                    format!(
                        "{} metrics take a plain number; remove the unit `{unit}`",
                        kind.name()
                    )
                },
            ));
        }
        Ok(number)
    }
}

/// Rate samples: `hits` of `total` samples were true (failed requests for `http_req_failed`,
/// passing checks for `checks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateValue {
    pub hits: u64,
    pub total: u64,
}

/// A counter's total and its average per second over the run so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CounterValue {
    pub count: f64,
    pub per_second: f64,
}

/// A trend metric's distribution (a histogram read at one moment).
pub trait Trend {
    fn count(&self) -> u64;
    fn mean(&self) -> Duration;
    fn min(&self) -> Duration;
    fn max(&self) -> Duration;
    fn median(&self) -> Duration;
    /// `q` in 0..=1.
    fn quantile(&self, q: f64) -> Duration;
}

/// The run's aggregates, as the runner holds them, looked up by the metric's k6 name
/// ([`MetricRef::key`], so sub-metrics too). `None` means the run never recorded the metric,
/// which evaluates like k6's empty sinks.
pub trait MetricSource {
    fn trend(&self, metric: &str) -> Option<&dyn Trend>;
    fn rate(&self, metric: &str) -> Option<RateValue>;
    fn counter(&self, metric: &str) -> Option<CounterValue>;
    fn gauge(&self, metric: &str) -> Option<f64>;
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdResult {
    pub passed: bool,
    /// The aggregate compared with the limit (milliseconds for trends); 0 when `no_data`.
    pub observed: f64,
    /// The metric had no samples. Trends (and metrics the run does not know) were then
    /// compared as 0, as in k6; a rate threshold passed without a comparison.
    pub no_data: bool,
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Threshold {
    pub fn evaluate(&self, src: &dyn MetricSource) -> ThresholdResult {
        let compare = |observed: f64, no_data: bool| ThresholdResult {
            passed: self.op.holds(observed, self.value),
            observed,
            no_data,
        };
        match self.target.kind {
            MetricKind::Trend => match src.trend(&self.metric) {
                Some(h) if h.count() > 0 => {
                    let d = match self.aggregation {
                        Aggregation::Avg => h.mean(),
                        Aggregation::Min => h.min(),
                        Aggregation::Max => h.max(),
                        Aggregation::Med => h.median(),
                        Aggregation::Percentile(n) => h.quantile(n / 100.0),
                        _ => Duration::ZERO,
                    };
                    compare(millis(d), false)
                }
                _ => compare(0.0, true),
            },
            MetricKind::Counter => match src.counter(&self.metric) {
                // A count of 0 is a real figure, not a missing one.
                Some(c) => compare(
                    if self.aggregation == Aggregation::Count {
                        c.count
                    } else {
                        c.per_second
                    },
                    false,
                ),
                _ => compare(0.0, true),
            },
            MetricKind::Rate => match src.rate(&self.metric) {
                Some(r) if r.total > 0 => compare(r.hits as f64 / r.total as f64, false),
                _ => ThresholdResult {
                    passed: true,
                    observed: 0.0,
                    no_data: true,
                },
            },
            MetricKind::Gauge => match src.gauge(&self.metric) {
                Some(v) => compare(v, false),
                None => compare(0.0, true),
            },
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.metric, self.source)
    }
}

/// A threshold with k6's object-form options (`abortOnFail`, `delayAbortEval`).
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdSpec {
    pub threshold: Threshold,
    /// Stop the run as soon as this threshold fails (checked while the run is in progress).
    pub abort_on_fail: bool,
    /// How long into the run before a failure may abort it, so early noise cannot.
    pub delay_abort_eval: Duration,
}

impl ThresholdSpec {
    /// The string form `"p(95)<300"` is `ThresholdSpec::parse(m, e, false, None)`; the object
    /// form `{threshold, abortOnFail, delayAbortEval: "10s"}` passes its fields through.
    pub fn parse(
        metric: &str,
        expr: &str,
        abort_on_fail: bool,
        delay_abort_eval: Option<&str>,
    ) -> Result<ThresholdSpec, ThresholdError> {
        let threshold = parse(metric, expr)?;
        let delay_abort_eval = match delay_abort_eval {
            Some(s) => {
                units::parse_duration(s).map_err(|message| ThresholdError::DelayAbortEval {
                    value: s.to_string(),
                    message,
                })?
            }
            None => Duration::ZERO,
        };
        Ok(ThresholdSpec {
            threshold,
            abort_on_fail,
            delay_abort_eval,
        })
    }

    /// Whether this result, observed `elapsed` into the run, must stop the run now.
    pub fn should_abort(&self, result: &ThresholdResult, elapsed: Duration) -> bool {
        self.abort_on_fail && !result.passed && elapsed >= self.delay_abort_eval
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Phase;
    use crate::load::hist::Histogram;
    use std::collections::HashMap;

    fn render(metric: &str, expr: &str) -> String {
        match parse(metric, expr) {
            Ok(t) => format!(
                "ok: {} {} {} {}",
                t.metric,
                t.aggregation,
                t.op,
                match t.target.kind {
                    MetricKind::Trend => format!("{}ms", t.value),
                    _ => format!("{}", t.value),
                }
            ),
            Err(e) => format!("error: {e}"),
        }
    }

    const CASES: &[(&str, &str)] = &[
        ("http_req_duration", "p(95)<300"),
        ("http_req_duration", "p(99.9) <= 1500"),
        ("http_req_duration", "  avg < 200  "),
        ("http_req_duration", "med>=0.5"),
        ("http_req_duration", "max!=120000"),
        ("http_req_duration", "min==0"),
        ("http_req_corrected_duration", "p(99)<1000"),
        ("http_req_dns", "p(90)<50"),
        ("http_req_tls_handshaking", "p( 50 )<100"),
        ("iteration_duration", "avg<1e3"),
        ("http_req_failed", "rate<0.01"),
        ("checks", "rate>0.99"),
        ("http_reqs", "count>=100"),
        ("http_reqs", "rate>50"),
        ("dropped_iterations", "count==0"),
        ("data_received", "count>1000000"),
        ("vus", "value<10"),
        ("vus_max", "value>=1"),
        ("http_req_duration{status:200}", "p(95)<300"),
        ("http_req_duration{ status: 200 }", "p(95)<300"),
        ("http_req_duration{expected_response:true}", "max<1000"),
        ("http_req_failed{status:500}", "rate>0.5"),
        ("http_reqs{status:404}", "count==0"),
        ("checks{check:status is 200}", "rate>0.9"),
        ("http_req_waiting{method:GET,scenario:canary}", "p(95)<300"),
        ("http_req_duration{group:::buy::login}", "p(95)<300"),
        ("http_reqs{step:cart,method:POST}", "count>0"),
        ("http_req_failed{name:http://shop/login}", "rate<0.01"),
        ("checks{check:status is 200,group:::buy::cart}", "rate>0.9"),
        ("group_duration{group:::buy}", "p(95)<2000"),
        ("iterations{group:}", "count>0"),
        ("dropped_iterations{reason:saturated}", "count==0"),
        (
            "dropped_iterations{reason:late,scenario:canary}",
            "count<10",
        ),
        ("http_req_duration", "p(95)<300ms"),
        ("http_req_duration", "p(95)<1.5s"),
        ("http_req_duration", "p(95)<500us"),
        ("http_req_duration", ""),
        ("http_req_duration", "p95<300"),
        ("http_req_duration", "p(95<300"),
        ("http_req_duration", "p(101)<300"),
        ("http_req_duration", "p()<300"),
        ("http_req_duration", "avgg<300"),
        ("http_req_duration", "rate<0.1"),
        ("http_req_duration", "count<10"),
        ("http_req_duration", "p(95)=300"),
        ("http_req_duration", "p(95)"),
        ("http_req_duration", "p(95) 300"),
        ("http_req_duration", "p(95)<"),
        ("http_req_duration", "p(95)<fast"),
        ("http_req_duration", "p(95)<300 ms"),
        ("http_req_duration", "p(95)<300sec"),
        ("http_req_duration", "p(95)<300 && avg<100"),
        ("http_req_failed", "rate<1%"),
        ("http_req_failed", "rate<0.01s"),
        ("http_req_failed", "avg<0.1"),
        ("checks", "count>0"),
        ("http_reqs", "p(95)<10"),
        ("vus", "avg<10"),
        ("vus_max", "value<10s"),
        ("http_req_durations", "p(95)<300"),
        ("http_req_dsn", "p(95)<300"),
        ("http_req_duration{status:abc}", "p(95)<300"),
        ("http_req_duration{status:200", "p(95)<300"),
        ("http_req_duration{}", "p(95)<300"),
        ("http_req_duration{url:http://x}", "p(95)<300"),
        ("http_req_duration{status:200,status:201}", "p(95)<300"),
        ("checks{status:200}", "rate>0.9"),
        ("group_duration{method:GET}", "p(95)<300"),
        ("iterations{step:cart}", "count>0"),
        ("dropped_iterations{reason:no_vu}", "count==0"),
        ("http_req_failed{reason:saturated}", "rate<0.01"),
        ("vus{scenario:a}", "value<10"),
        ("http_req_duration{expected_response:yes}", "p(95)<300"),
        ("http_req_duration", "p(95)<1.2.3"),
        ("http_req_duration", "p(95)<µ"),
    ];

    #[test]
    fn parser_golden() {
        let mut out = String::new();
        for (metric, expr) in CASES {
            out.push_str(&format!("{metric} {expr:?}\n  {}\n", render(metric, expr)));
        }
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/golden/thresholds/parse.txt"
        );
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(std::path::Path::new(path).parent().unwrap()).unwrap();
            std::fs::write(path, &out).unwrap();
        }
        let golden = std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(
            out, golden,
            "parser output differs from {path}; rerun with UPDATE_GOLDEN=1 and review the diff"
        );
    }

    #[test]
    fn every_phase_has_a_trend_metric() {
        for phase in Phase::ALL {
            let name = format!("http_req_{}", phase.as_str());
            assert_eq!(metric_kind(&name), Some(MetricKind::Trend), "{name}");
        }
    }

    #[test]
    fn errors_report_the_column_in_the_expression() {
        assert_eq!(
            parse("http_req_duration", "p(95) =300")
                .unwrap_err()
                .column(),
            Some(7)
        );
        assert_eq!(
            parse("http_req_duration", "avg<3x").unwrap_err().column(),
            Some(6)
        );
        assert_eq!(
            parse("http_req_duration", "p(95)<20ms")
                .unwrap_err()
                .column(),
            Some(9)
        );
        assert_eq!(
            parse("http_req_failed", "rate<0.1s").unwrap_err().column(),
            Some(9)
        );
        assert_eq!(parse("nope", "rate<0.1").unwrap_err().column(), None);
    }

    #[test]
    fn negative_threshold_durations_are_rejected() {
        let err = parse("http_req_duration", "p(95)<-20").unwrap_err();
        assert_eq!(err.column(), Some(7));
        assert_eq!(
            err.to_string(),
            "column 7: `-20` is negative; the limit is a duration, never below zero"
        );
        assert_eq!(
            parse("http_req_waiting", "avg < -1").unwrap_err().column(),
            Some(7)
        );
        assert_eq!(
            parse("http_req_failed", "rate<-0.1").unwrap_err().column(),
            Some(6)
        );
        assert_eq!(
            parse("dropped_iterations", "count<=-0")
                .unwrap_err()
                .column(),
            Some(8)
        );
        assert_eq!(parse("http_reqs", "rate>-5").unwrap_err().column(), Some(6));
        // A negative exponent is not a negative value.
        assert_eq!(parse("http_req_failed", "rate<1e-3").unwrap().value, 0.001);
        assert_eq!(parse("http_req_duration", "p(95)<+20").unwrap().value, 20.0);
    }

    #[derive(Default)]
    struct Source {
        trends: HashMap<&'static str, crate::load::hist::HistSnapshot>,
        rates: HashMap<&'static str, RateValue>,
        counters: HashMap<&'static str, CounterValue>,
        gauges: HashMap<&'static str, f64>,
    }

    impl MetricSource for Source {
        fn trend(&self, metric: &str) -> Option<&dyn Trend> {
            self.trends.get(metric).map(|h| h as &dyn Trend)
        }
        fn rate(&self, metric: &str) -> Option<RateValue> {
            self.rates.get(metric).copied()
        }
        fn counter(&self, metric: &str) -> Option<CounterValue> {
            self.counters.get(metric).copied()
        }
        fn gauge(&self, metric: &str) -> Option<f64> {
            self.gauges.get(metric).copied()
        }
    }

    fn source() -> Source {
        let h = Histogram::new();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        let mut src = Source::default();
        src.trends.insert("http_req_duration", h.snapshot());
        src.trends
            .insert("http_req_duration{status:200}", Histogram::new().snapshot());
        src.gauges.insert("vus_max", 4.0);
        src.rates.insert(
            "http_req_failed",
            RateValue {
                hits: 3,
                total: 200,
            },
        );
        src.counters.insert(
            "http_reqs",
            CounterValue {
                count: 200.0,
                per_second: 20.0,
            },
        );
        src
    }

    fn eval(metric: &str, expr: &str, src: &Source) -> ThresholdResult {
        parse(metric, expr).expect("valid threshold").evaluate(src)
    }

    #[test]
    fn evaluation_uses_the_right_aggregate() {
        let src = source();
        let r = eval("http_req_duration", "max<=100", &src);
        assert!(r.passed && r.observed == 100.0 && !r.no_data);
        assert!(!eval("http_req_duration", "max<100", &src).passed);
        assert!(eval("http_req_duration", "min==1", &src).passed);
        // k6 p(95) of 1..=100 ms: 95.05 ms; buckets keep it within 0.39%.
        let p95 = eval("http_req_duration", "p(95)<1000", &src).observed;
        assert!((p95 - 95.05).abs() < 95.05 * 0.004, "{p95}");
        assert!(eval("http_req_duration", "avg==50.5", &src).passed);
        assert!(!eval("http_req_duration", "med>60", &src).passed);
        assert!(eval("vus_max", "value==4", &src).passed);
        assert!(!eval("vus_max", "value<4", &src).passed);
        let failed = eval("http_req_failed", "rate<0.01", &src);
        assert!(!failed.passed && failed.observed == 0.015);
        assert!(eval("http_reqs", "count==200", &src).passed);
        assert!(eval("http_reqs", "rate>=20", &src).passed);
        assert!(!eval("http_reqs", "rate>20", &src).passed);
    }

    #[test]
    fn missing_metrics_evaluate_like_empty_k6_sinks() {
        let src = Source::default();
        let r = eval("http_req_duration", "p(95)<300", &src);
        assert!(r.passed && r.no_data && r.observed == 0.0);
        // k6: an empty trend compares as 0, so a lower bound fails.
        let r = eval("http_req_duration", "avg>1", &src);
        assert!(!r.passed && r.no_data);
        // k6: a rate with no samples passes whatever the bound.
        let r = eval("checks", "rate>0.99", &src);
        assert!(r.passed && r.no_data);
        assert!(eval("http_req_failed", "rate<0.01", &src).passed);
        assert!(eval("dropped_iterations", "count==0", &src).passed);
        assert!(!eval("vus_max", "value>0", &src).passed);
        // A registered sub-metric that saw nothing is no data too.
        let with = source();
        let r = eval("http_req_duration{status:200}", "p(95)<300", &with);
        assert!(r.passed && r.no_data);
    }

    #[test]
    fn abort_on_fail_waits_for_delay_abort_eval() {
        let spec = ThresholdSpec::parse("http_req_failed", "rate<0.01", true, Some("1m30s"))
            .expect("valid spec");
        assert_eq!(spec.delay_abort_eval, Duration::from_secs(90));
        let failing = spec.threshold.evaluate(&source());
        assert!(!spec.should_abort(&failing, Duration::from_secs(89)));
        assert!(spec.should_abort(&failing, Duration::from_secs(90)));
        let passing = ThresholdResult {
            passed: true,
            observed: 0.0,
            no_data: false,
        };
        assert!(!spec.should_abort(&passing, Duration::from_secs(100)));
        let plain = ThresholdSpec::parse("http_req_failed", "rate<0.01", false, None).unwrap();
        assert!(!plain.should_abort(&failing, Duration::from_secs(100)));
    }

    #[test]
    fn trend_values_are_bare_milliseconds() {
        // As k6: the limit is a bare number of milliseconds, and a unit is an error that says
        // what to write.
        let err = |expr| parse("http_req_duration", expr).unwrap_err().to_string();
        assert!(err("p(95)<500us").contains("write `0.5` for 500us"));
        assert!(err("p(95)<500µs").contains("write `0.5`"));
        assert!(err("p(95)<1.5s").contains("write `1500` for 1.5s"));
        assert!(err("p(95)<2m").contains("write `120000`"));
        assert!(err("p(95)<20ms").contains("k6 rejects `20ms`"));
        assert_eq!(
            parse("http_req_duration", "p(95)<300").unwrap().value,
            300.0
        );
    }

    #[test]
    fn delay_abort_eval_uses_the_shared_duration_grammar() {
        let d = |s| {
            ThresholdSpec::parse("checks", "rate>0.9", true, Some(s)).map(|t| t.delay_abort_eval)
        };
        assert_eq!(d("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(d("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(d("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(d("1.5h"), Ok(Duration::from_secs(5_400)));
        assert_eq!(d("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(d("0"), Ok(Duration::ZERO));
        assert!(d("10").is_err());
        assert!(d("10 parsecs").is_err());
        assert!(d("").is_err());
        let err = ThresholdSpec::parse("checks", "rate>0.9", true, Some("soon")).unwrap_err();
        assert!(matches!(err, ThresholdError::DelayAbortEval { .. }));
    }
}
