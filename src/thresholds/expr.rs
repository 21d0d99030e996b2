//! The expression grammar, `aggregation operator value`: aggregations, operators and the
//! parser that reports the column of an error.

use crate::units;
use std::fmt;

use super::*;

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
    pub(super) fn valid_for(self, kind: MetricKind) -> bool {
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

/// k6 takes trend limits as bare milliseconds and rejects a unit; say what to write instead.
pub(super) fn unit_message(number: f64, unit: &str) -> String {
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

pub(super) struct Parser {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
}

impl Parser {
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.chars.len()
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    pub(super) fn error(&self, message: String) -> ThresholdError {
        self.error_at(self.pos, message)
    }

    pub(super) fn error_at(&self, pos: usize, message: String) -> ThresholdError {
        ThresholdError::Syntax {
            column: pos + 1,
            message,
        }
    }

    pub(super) fn take_while(&mut self, f: impl Fn(char) -> bool) -> String {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        self.chars[start..self.pos].iter().collect()
    }

    pub(super) fn aggregation(
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

    pub(super) fn percentile(&mut self) -> Result<Aggregation, ThresholdError> {
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

    pub(super) fn op(&mut self, after: &Aggregation) -> Result<Op, ThresholdError> {
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

    pub(super) fn value(&mut self, kind: MetricKind, op: Op) -> Result<f64, ThresholdError> {
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
