//! One row of a comparison: a metric (and step) of two records, its changes with their
//! intervals, and its verdict. Pure.
//!
//! A trend (`http_req_duration`, `iteration_duration`) is `regressed` when the rank test says
//! the new values are larger at the row's significance level AND the shift is worth failing
//! for: the median's change is past `max_regression`. `improved` is the mirror. The tail
//! quantiles' changes are shown with their intervals but decide nothing: a loaded machine
//! moves a run's p90 to p99 by 20 to 30 % from one run to the next while its median holds
//! (bench/compare.py), and the rank test asks about the whole distribution's location. An error rate (`http_req_failed`) is
//! `regressed` when the two-proportion test says it rose; throughput (`http_reqs`) when the
//! rate test says it fell by more than `max_regression`. Everything else is `unchanged`.

use super::stat::{self, Bucket, Difference};
use crate::hist::HistSnapshot;
use serde::Serialize;

/// The quantiles a trend row shows.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.95, 0.99];

/// Fewer values than this on a side: the rank test's normal approximation is not trusted and
/// the row says so, `unchanged`.
pub const MIN_VALUES: u64 = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regressed,
    Improved,
    Unchanged,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::Unchanged => "unchanged",
        }
    }
}

/// What a row is judged with.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    /// The intervals' confidence.
    pub confidence: f64,
    /// The row's test level: (1 − confidence) divided among the rows compared.
    pub alpha: f64,
    /// The smallest relative change worth failing for (0.05 = 5 %).
    pub max_regression: f64,
}

/// One quantile of both sides, in seconds, and its relative change with its interval (NaN
/// when it has none).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct QuantileChange {
    pub q: f64,
    pub old: f64,
    pub new: f64,
    pub change: f64,
    pub low: f64,
    pub high: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Figures {
    /// Latency quantiles, the value counts, and P(new > old) + ½ P(tie).
    Trend {
        quantiles: Vec<QuantileChange>,
        old_count: u64,
        new_count: u64,
        slower_share: f64,
    },
    /// A rate as (hits, total) on each side; the change in points, absolute.
    Rate {
        old: (u64, u64),
        new: (u64, u64),
        change: Difference,
    },
    /// Per second on each side; the change relative.
    Throughput {
        old: f64,
        new: f64,
        change: Difference,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub metric: &'static str,
    /// `journey/step` (or the step's name), `None` for the whole run.
    pub step: Option<String>,
    pub figures: Figures,
    /// The test's two-sided p-value.
    pub p: f64,
    pub verdict: Verdict,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Row {
    /// `http_req_duration{step:cart}` or `http_req_duration`.
    pub fn name(&self) -> String {
        match &self.step {
            Some(s) => format!("{}{{step:{s}}}", self.metric),
            None => self.metric.to_string(),
        }
    }

    /// The change that named its verdict, for a one-line answer: `p50 +10.2%`.
    pub fn headline(&self) -> String {
        match &self.figures {
            Figures::Trend { quantiles, .. } => {
                let beyond = quantiles
                    .iter()
                    .max_by(|a, b| a.change.abs().total_cmp(&b.change.abs()));
                let q = match self.verdict {
                    Verdict::Unchanged => quantiles.first(),
                    _ => quantiles
                        .first()
                        .filter(|q| q.change.is_finite())
                        .or(beyond),
                };
                q.map_or_else(String::new, |q| {
                    format!("p{} {}", (q.q * 100.0).round(), percent(q.change))
                })
            }
            Figures::Rate { change, .. } => format!("{:+.2} points", change.estimate * 100.0),
            Figures::Throughput { change, .. } => percent(change.estimate),
        }
    }
}

/// `+10.2%`.
pub fn percent(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1}%", x * 100.0)
    } else {
        "n/a".into()
    }
}

fn buckets(h: &HistSnapshot) -> Vec<Bucket> {
    h.ranges()
        .map(|(lo, hi, count)| Bucket {
            key: lo,
            value: lo as f64 + (hi - lo) as f64 / 2.0,
            count,
        })
        .collect()
}

/// A latency row.
pub fn trend(
    metric: &'static str,
    step: Option<String>,
    old: &HistSnapshot,
    new: &HistSnapshot,
    l: &Level,
) -> Row {
    let (bo, bn) = (buckets(old), buckets(new));
    let quantiles: Vec<QuantileChange> = QUANTILES
        .iter()
        .map(|&q| {
            let (o, n) = (old.quantile(q).as_secs_f64(), new.quantile(q).as_secs_f64());
            let interval = stat::ratio_interval(
                &stat::quantile_spread(&bo, q),
                &stat::quantile_spread(&bn, q),
                l.confidence,
            );
            let (low, high) = interval.unwrap_or((f64::NAN, f64::NAN));
            let change = if o > 0.0 { n / o - 1.0 } else { f64::NAN };
            QuantileChange {
                q,
                old: o,
                new: n,
                change,
                low,
                high,
            }
        })
        .collect();
    let (old_count, new_count) = (old.count(), new.count());
    let rank = stat::rank_test(&bo, &bn);
    let (verdict, note) = if old_count.min(new_count) < MIN_VALUES {
        (
            Verdict::Unchanged,
            Some(format!(
                "too few values to tell (fewer than {MIN_VALUES} on a side)"
            )),
        )
    } else {
        trend_verdict(&quantiles, rank, l)
    };
    Row {
        metric,
        step,
        figures: Figures::Trend {
            quantiles,
            old_count,
            new_count,
            slower_share: rank.slower_share,
        },
        p: rank.p,
        verdict,
        note,
    }
}

fn trend_verdict(
    quantiles: &[QuantileChange],
    rank: stat::RankTest,
    l: &Level,
) -> (Verdict, Option<String>) {
    if rank.p >= l.alpha {
        return (Verdict::Unchanged, None);
    }
    let dir = if rank.slower_share > 0.5 { 1.0 } else { -1.0 };
    let t = l.max_regression;
    let median = quantiles.first().is_some_and(|m| m.change * dir > t);
    match (median, dir > 0.0) {
        (true, true) => (Verdict::Regressed, None),
        (true, false) => (Verdict::Improved, None),
        (false, _) => (
            Verdict::Unchanged,
            Some(format!(
                "a real shift, within ±{} (--max-regression)",
                percent(t).trim_start_matches('+')
            )),
        ),
    }
}

/// An error-rate row: (hits, total) on each side.
pub fn rate(
    metric: &'static str,
    step: Option<String>,
    old: (u64, u64),
    new: (u64, u64),
    l: &Level,
) -> Row {
    let change = stat::proportions(old, new, l.confidence);
    let verdict = match (change.p < l.alpha, change.estimate > 0.0) {
        (true, true) => Verdict::Regressed,
        (true, false) => Verdict::Improved,
        (false, _) => Verdict::Unchanged,
    };
    Row {
        metric,
        step,
        figures: Figures::Rate { old, new, change },
        p: change.p,
        verdict,
        note: None,
    }
}

/// A throughput row: (count, seconds) on each side.
pub fn throughput(metric: &'static str, old: (u64, f64), new: (u64, f64), l: &Level) -> Row {
    let change = stat::rates(old, new, l.confidence);
    let per = |(n, s): (u64, f64)| if s > 0.0 { n as f64 / s } else { 0.0 };
    let t = l.max_regression;
    let verdict = if change.p >= l.alpha {
        Verdict::Unchanged
    } else if change.estimate < -t {
        Verdict::Regressed
    } else if change.estimate > t {
        Verdict::Improved
    } else {
        Verdict::Unchanged
    };
    Row {
        metric,
        step: None,
        figures: Figures::Throughput {
            old: per(old),
            new: per(new),
            change,
        },
        p: change.p,
        verdict,
        note: None,
    }
}
