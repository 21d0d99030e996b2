//! The built-in metrics a threshold may name, their k6 types, and the tag filters of their
//! sub-metrics (`http_req_duration{status:200}`).

use std::fmt;

use super::*;

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

    pub(super) fn allowed(self) -> &'static str {
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
    pub(super) fn key(&self) -> &'static str {
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
pub(super) fn tags_of(base: &str) -> &'static [&'static str] {
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
