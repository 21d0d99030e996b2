//! The small text forms rule files need: label names made valid, PromQL durations, Go template
//! literals, numbers that round-trip. (Valid label names are `names::label_name_is_valid`;
//! quoted strings `config::quote`.)

use std::fmt::Write as _;
use std::time::Duration;

/// A label name made valid (`names::label_name_is_valid`): config validation rejects SLO
/// labels failing it, so generation sanitizes them only as a last resort.
pub(super) fn sanitize_label_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    while s.starts_with("__") {
        s.remove(0);
    }
    s
}

/// PromQL duration, largest units first (`30d`, `1h30m`, `10s`). Sub-second parts are dropped
/// and zero becomes `1s`, since PromQL rejects an empty range.
pub fn promql_duration(d: Duration) -> String {
    let mut secs = d.as_secs().max(1);
    let mut out = String::new();
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            let _ = write!(out, "{}{unit}", secs / size);
            secs %= size;
        }
    }
    out
}

/// Prometheus expands alert labels and annotations as Go templates; user text must not be.
pub(super) fn template_literal(s: &str) -> String {
    s.replace("{{", "{{ \"{{\" }}")
}

/// Shortest form that round-trips, so Prometheus parses exactly the double we computed with.
pub(super) fn num(x: f64) -> String {
    format!("{x}")
}

pub(super) fn percent(ratio: f64) -> String {
    let s = format!("{:.6}", ratio * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
