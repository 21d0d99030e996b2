//! Pure parts of rebuilding SLO windows from Prometheus (`storage.restore`): which minutes to
//! ask for, in which range queries, and how Prometheus' samples become whole per-minute counts.
//!
//! Minute mapping. The daemon asks for the per-minute increase of `sloburn_slo_events_total`
//! ([`increase_query`]) at step 60 s with every evaluation time on a minute boundary, so the
//! sample at `t = 60·(m+1)` covers `[t−60 s, t]`, which is the store's minute bucket `m`
//! (`[60·m, 60·m + 60)`, see [`super::minute_of`]). In general a sample at `t` goes to the
//! minute that holds most of its window: `round(t / 60) − 1` ([`minute_of_sample`]). The
//! current minute, not yet whole, is one instant query over the seconds it has had so far
//! (window `Ns` at start-up), so the restore ends exactly where the daemon's own counting
//! begins.
//!
//! Extrapolation and resets. Plain `increase(x[1m])` extrapolates each window's first and last
//! sample to the window's edges at the window's average rate: where the load starts or stops
//! inside a window, that adds up to a scrape interval of events at each edge (measured: +0.9 %
//! over a 100 s run). So for each series the value is the last sample in the window minus the
//! last one before it (`x offset 1m`; 0 for a series born in the window, since sloburn's
//! counters start at 0): whole events, no extrapolation, and consecutive minutes add up to
//! exactly the counter's growth. A minute's events are then those between the last scrape at or
//! before its start and the last one at or before its end (shifted by at most one scrape
//! interval). Where the counter was reset (a daemon restart: `resets` in the window, or any
//! sample in the window below the one before it, which catches a restart between the two even
//! when the new life's counter has grown past the old one by the window's end), the series
//! falls back to `increase`, which handles resets but
//! extrapolates that minute (measured: up to 1.3 % over two 25 s lives of a daemon on one
//! address, against 0 % without a reset). Values may then be fractional: each minute's count is the rounded running total minus the rounded
//! running total before it ([`Counts::finish`]), never drifting by half an event per minute.

use std::collections::BTreeMap;
use std::time::Duration;

use super::window::window_minutes;

/// Prometheus refuses a range query that would return more than 11,000 points per series.
pub const MAX_POINTS: i64 = 11_000;

/// The step of every range query: one point per minute bucket.
pub const STEP_SECONDS: i64 = 60;

/// What to ask Prometheus for at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The oldest and newest whole minute; `first > last` when there is none.
    pub first: i64,
    pub last: i64,
    /// The current minute and how many of its seconds have passed (absent at `:00`).
    pub partial: Option<(i64, i64)>,
}

impl Plan {
    /// Whole minutes the plan covers, plus the partial one.
    pub fn minutes(&self) -> i64 {
        (self.last - self.first + 1).max(0) + i64::from(self.partial.is_some())
    }
}

/// The minutes to restore at `now_unix` for an SLO whose windows hold `span`: the last
/// `min(max_age, span)` as the windows count them (the current minute and the whole ones
/// before it, see `slo::Windows`).
pub fn plan(now_unix: i64, span: Duration, max_age: Duration) -> Plan {
    let now_minute = super::minute_of(now_unix);
    let w = window_minutes(span.min(max_age));
    let seconds = now_unix - now_minute * 60;
    Plan {
        first: now_minute - w + 1,
        last: now_minute - 1,
        partial: (seconds > 0).then_some((now_minute, seconds)),
    }
}

/// One `query_range` call: evaluation times `start, start + 60, …, end` (unix seconds), which
/// are the ends of the minutes `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub first: i64,
    pub last: i64,
    pub start: i64,
    pub end: i64,
}

impl Chunk {
    /// Points per series this query returns at most.
    pub fn points(&self) -> i64 {
        self.last - self.first + 1
    }
}

/// The range queries for the whole minutes `first..=last`, newest first (the minutes the short
/// burn windows need come back first), each with at most `max_points` points per series, none
/// overlapping and none leaving a minute out.
pub fn chunks(first: i64, last: i64, max_points: i64) -> Vec<Chunk> {
    let per = max_points.max(1);
    let mut out = Vec::new();
    let mut hi = last;
    while hi >= first {
        let lo = (hi - per + 1).max(first);
        out.push(Chunk {
            first: lo,
            last: hi,
            start: (lo + 1) * STEP_SECONDS,
            end: (hi + 1) * STEP_SECONDS,
        });
        hi = lo - 1;
    }
    out
}

/// The events of `selector`'s series (a PromQL selector of `sloburn_slo_events_total`) over the
/// window `range` (`1m`, `37s`) ending at the evaluation time, summed by `result`: per series
/// the last sample in the window minus the last before it (0 before its first), or `increase`
/// where the counter was reset (see the module docs).
pub fn increase_query(selector: &str, range: &str) -> String {
    let last = format!("last_over_time({selector}[{range}])");
    let before = format!("({selector} offset {range} or {last} * 0)");
    // A reset can also fall between the last sample before the window and the window's
    // first: a new life of the daemon whose counter has grown past the old one's by the end
    // of the window would otherwise count only the difference. Every sample in the window at
    // or above the one before (`min_over_time`) rules that out.
    format!(
        "sum by (result) ((({last} - {before}) >= 0 \
         and resets({selector}[{range}]) == 0 \
         and (min_over_time({selector}[{range}]) - {before}) >= 0) \
         or increase({selector}[{range}]))"
    )
}

/// The minute bucket of a range-query sample at `t` (unix seconds) of `increase(…[1m])`: the
/// minute holding most of its window `[t−60, t]`, `m` for `t = 60·(m+1)`.
pub fn minute_of_sample(t: f64) -> i64 {
    // Saturating float-to-int cast; timestamps are far inside the range.
    (t / 60.0).round() as i64 - 1
}

/// Why a minute Prometheus answered for was left out of the restore (and never stored).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rejection {
    /// A sample was NaN or infinite.
    NotANumber,
    /// A sample was negative (an increase never is).
    Negative,
    /// More events than the SLO's profiles could send in a minute (the bound, events).
    Implausible(f64),
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejection::NotANumber => f.write_str("not a number"),
            Rejection::Negative => f.write_str("negative"),
            Rejection::Implausible(limit) => write!(
                f,
                "more than the {limit:.0} events a minute its profiles could send"
            ),
        }
    }
}

/// Whole counts of the minutes kept, and the minutes left out with why, both in minute order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finished {
    pub minutes: Vec<(i64, u64, u64)>,
    pub rejected: Vec<(i64, Rejection)>,
}

/// Prometheus' fractional per-minute increases of good and bad events, gathered from every
/// series and query, turned into whole counts by [`Counts::finish`]. A minute with any sample
/// that is no number or negative, or whose events exceed `limit`, is rejected whole: one
/// poisoned series makes the minute's sum meaningless.
#[derive(Debug, Clone)]
pub struct Counts {
    minutes: BTreeMap<i64, (f64, f64)>,
    rejected: BTreeMap<i64, Rejection>,
    /// The most events (good + bad) a minute may plausibly hold.
    limit: f64,
}

impl Counts {
    /// Counts whose minutes hold at most `limit` events each (see [`plausible_per_minute`]).
    pub fn new(limit: f64) -> Counts {
        Counts {
            minutes: BTreeMap::new(),
            rejected: BTreeMap::new(),
            limit,
        }
    }

    /// Adds one sample; a sample that is no number, infinite or negative rejects its minute.
    pub fn add(&mut self, minute: i64, good: bool, value: f64) {
        let why = if !value.is_finite() {
            Rejection::NotANumber
        } else if value < 0.0 {
            Rejection::Negative
        } else {
            let slot = self.minutes.entry(minute).or_insert((0.0, 0.0));
            if good {
                slot.0 += value;
            } else {
                slot.1 += value;
            }
            return;
        };
        self.rejected.entry(minute).or_insert(why);
    }

    /// Whether Prometheus had a sample for `minute` and the minute is kept.
    pub fn has(&self, minute: i64) -> bool {
        !self.rejected.contains_key(&minute)
            && self
                .minutes
                .get(&minute)
                .is_some_and(|&(good, bad)| self.plausible(good + bad))
    }

    /// Whether a minute of `sum` events is within the limit (an infinite sum, an overflow, is
    /// not; the samples themselves are finite).
    fn plausible(&self, sum: f64) -> bool {
        sum.is_finite() && sum <= self.limit
    }

    /// `(minute, good, bad)` in minute order for every minute kept (zeros included), each
    /// count the rounded running total minus the one before it; and the rejected minutes.
    /// A minute over the limit is rejected here. Conversions are checked: no count wraps.
    pub fn finish(&self) -> Finished {
        let mut rejected = self.rejected.clone();
        for (&minute, &(good, bad)) in &self.minutes {
            if !self.plausible(good + bad) {
                rejected
                    .entry(minute)
                    .or_insert(Rejection::Implausible(self.limit));
            }
        }
        let (mut sum_good, mut sum_bad) = (0.0f64, 0.0f64);
        let (mut done_good, mut done_bad) = (0u64, 0u64);
        let mut minutes = Vec::with_capacity(self.minutes.len());
        for (&minute, &(good, bad)) in &self.minutes {
            if rejected.contains_key(&minute) {
                continue;
            }
            sum_good += good;
            sum_bad += bad;
            let (Some(total_good), Some(total_bad)) = (whole(sum_good), whole(sum_bad)) else {
                rejected.insert(minute, Rejection::Implausible(self.limit));
                sum_good -= good;
                sum_bad -= bad;
                continue;
            };
            minutes.push((
                minute,
                total_good.saturating_sub(done_good),
                total_bad.saturating_sub(done_bad),
            ));
            (done_good, done_bad) = (total_good, total_bad);
        }
        Finished {
            minutes,
            rejected: rejected.into_iter().collect(),
        }
    }
}

/// `x` rounded to a whole count, when it is a finite, non-negative number below 2^63 (what
/// the store's integers hold); `None` otherwise, never a saturated or wrapped count.
pub fn whole(x: f64) -> Option<u64> {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    let r = x.round();
    // In range, so the cast is exact (no saturation).
    (r.is_finite() && (0.0..LIMIT).contains(&r)).then_some(r as u64)
}

/// How many times the profiles' own peak a minute may hold before it is called implausible:
/// a minute's events are those between two scrapes, and Prometheus looks back up to 5 minutes
/// for the scrape before a minute (so missed scrapes pile up to 5 minutes of events into
/// one), and the profiles that sent them may have run at a somewhat higher rate under an
/// earlier config or a Flagger `rate` override.
pub const PLAUSIBLE_MARGIN: f64 = 10.0;

/// The per-second iteration rate assumed for one VU of a closed-model executor (its rate
/// depends on the target's latency, unknown here): one iteration per 10 µs, beyond any
/// target's answer over a network.
pub const CLOSED_VU_RATE: f64 = 100_000.0;

/// The rate assumed for an SLO no profile of the config feeds (its events came from an
/// earlier config): a million events a second.
pub const UNKNOWN_RATE: f64 = 1_000_000.0;

/// The most events a minute of an SLO may hold: `PLAUSIBLE_MARGIN ×` 60 s × the sum over the
/// profiles feeding it of their peak events a second (`rates`: iterations a second × events
/// an iteration), or `UNKNOWN_RATE` when no profile feeds it.
pub fn plausible_per_minute(rates: &[f64]) -> f64 {
    let per_second: f64 = rates.iter().filter(|r| r.is_finite() && **r > 0.0).sum();
    let per_second = if per_second > 0.0 {
        per_second
    } else {
        UNKNOWN_RATE
    };
    per_second * 60.0 * PLAUSIBLE_MARGIN
}

/// How much of a plan Prometheus could fill.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Minutes with a sample (zero counts included).
    pub restored: u64,
    /// Minutes without one, as inclusive `(first, last)` runs, oldest first.
    pub gaps: Vec<(i64, i64)>,
}

impl Coverage {
    pub fn gap_minutes(&self) -> u64 {
        self.gaps
            .iter()
            .map(|(a, b)| u64::try_from(b - a + 1).unwrap_or(0))
            .sum()
    }
}

/// The coverage of the minutes `first..=last` by `counts`.
pub fn coverage(first: i64, last: i64, counts: &Counts) -> Coverage {
    let mut c = Coverage::default();
    let mut gap: Option<(i64, i64)> = None;
    for minute in first..=last {
        if counts.has(minute) {
            c.restored += 1;
            if let Some(g) = gap.take() {
                c.gaps.push(g);
            }
        } else {
            gap = Some(gap.map_or((minute, minute), |(a, _)| (a, minute)));
        }
    }
    c.gaps.extend(gap);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_ends_at_now_and_spans_min_of_max_age_and_the_period() {
        // 12:00:37 on some day: minute m, 37 s into it.
        let m = 29_000_000;
        let now = m * 60 + 37;
        let day = Duration::from_secs(86_400);
        let p = plan(now, day, Duration::from_secs(30 * 86_400));
        assert_eq!(p.last, m - 1);
        assert_eq!(p.first, m - 1440 + 1);
        assert_eq!(p.partial, Some((m, 37)));
        assert_eq!(p.minutes(), 1440, "the same minutes the windows hold");
        // max_age shorter than the period.
        let p = plan(now, day, Duration::from_secs(3600));
        assert_eq!((p.first, p.last), (m - 59, m - 1));
        // On the minute: no partial minute.
        let p = plan(m * 60, day, day);
        assert_eq!(p.partial, None);
        assert_eq!(p.minutes(), 1439);
    }

    #[test]
    fn chunks_stay_under_the_point_limit_and_cover_each_minute_once() {
        let (first, last) = (1000, 1000 + 43_200 - 1); // 30 days
        let cs = chunks(first, last, MAX_POINTS);
        assert_eq!(cs.len(), 4);
        assert!(cs.iter().all(|c| c.points() <= MAX_POINTS));
        assert_eq!(cs[0].last, last, "newest first");
        let mut seen: Vec<i64> = cs.iter().flat_map(|c| c.first..=c.last).collect();
        seen.sort();
        assert_eq!(seen, (first..=last).collect::<Vec<_>>());
        for c in &cs {
            // Prometheus returns (end - start) / step + 1 points.
            assert_eq!((c.end - c.start) / STEP_SECONDS + 1, c.points());
            assert_eq!(minute_of_sample(c.start as f64), c.first);
            assert_eq!(minute_of_sample(c.end as f64), c.last);
        }
        // Exactly the limit: one query; one more minute: two.
        assert_eq!(chunks(0, MAX_POINTS - 1, MAX_POINTS).len(), 1);
        assert_eq!(chunks(0, MAX_POINTS, MAX_POINTS).len(), 2);
        assert!(chunks(5, 4, MAX_POINTS).is_empty());
    }

    #[test]
    fn a_sample_goes_to_the_minute_holding_most_of_its_window() {
        let m = 29_000_000i64;
        let end = ((m + 1) * 60) as f64;
        assert_eq!(minute_of_sample(end), m);
        assert_eq!(minute_of_sample(end + 20.0), m, "window [m:20, m+1:20]");
        assert_eq!(minute_of_sample(end - 20.0), m, "window [m-1:40, m:40]");
        assert_eq!(minute_of_sample(end + 40.0), m + 1);
        // Before 1970 too (minute_of rounds down there).
        assert_eq!(minute_of_sample(-60.0), -2);
        assert_eq!(super::super::minute_of(-120), -2);
    }

    #[test]
    fn the_query_is_promql_and_falls_back_to_increase() {
        let q = increase_query("sloburn_slo_events_total{slo=\"a\"}", "1m");
        let before = "(sloburn_slo_events_total{slo=\"a\"} offset 1m or \
                      last_over_time(sloburn_slo_events_total{slo=\"a\"}[1m]) * 0)";
        assert_eq!(
            q,
            format!(
                "sum by (result) (((last_over_time(sloburn_slo_events_total{{slo=\"a\"}}[1m]) - \
                 {before}) >= 0 and resets(sloburn_slo_events_total{{slo=\"a\"}}[1m]) == 0 and \
                 (min_over_time(sloburn_slo_events_total{{slo=\"a\"}}[1m]) - {before}) >= 0) or \
                 increase(sloburn_slo_events_total{{slo=\"a\"}}[1m]))"
            )
        );
        for range in ["1m", "37s"] {
            let q = increase_query("sloburn_slo_events_total{slo=\"a\"}", range);
            promql_parser::parser::parse(&q).unwrap_or_else(|e| panic!("{q}: {e}"));
        }
    }

    #[test]
    fn whole_counts_keep_the_rounded_total() {
        let mut c = Counts::new(1e9);
        // 0.4 a minute for ten minutes: rounding each would give 0, the total is 4.
        for m in 0..10 {
            c.add(m, true, 0.4);
            c.add(m, false, 10.6);
        }
        // Another series of the same SLO (a second instance) adds to the same minutes.
        c.add(3, true, 1.0);
        c.add(11, true, f64::NAN);
        c.add(12, false, -1.0);
        let done = c.finish();
        let out = done.minutes;
        assert_eq!(out.len(), 10, "no minute for a bad sample alone");
        assert_eq!(
            done.rejected,
            vec![(11, Rejection::NotANumber), (12, Rejection::Negative)]
        );
        let good: u64 = out.iter().map(|r| r.1).sum();
        let bad: u64 = out.iter().map(|r| r.2).sum();
        assert_eq!(good, 5);
        assert_eq!(bad, 106);
        assert!(out.iter().all(|r| r.2 == 10 || r.2 == 11), "{out:?}");
        // Running totals never differ from Prometheus' by more than half an event.
        let mut run = (0.0, 0u64);
        for (m, g, _) in &out {
            run.0 += 0.4 + if *m == 3 { 1.0 } else { 0.0 };
            run.1 += g;
            assert!((run.0 - run.1 as f64).abs() <= 0.5, "{m}: {run:?}");
        }
    }

    #[test]
    fn coverage_counts_minutes_and_gap_runs() {
        let mut c = Counts::new(1e9);
        for m in [10, 11, 14, 15, 16, 19] {
            c.add(m, true, 0.0);
        }
        let cov = coverage(8, 20, &c);
        assert_eq!(cov.restored, 6);
        assert_eq!(cov.gaps, vec![(8, 9), (12, 13), (17, 18), (20, 20)]);
        assert_eq!(cov.gap_minutes(), 7);
        assert_eq!(coverage(10, 11, &c).gaps, vec![]);
        assert_eq!(coverage(1, 0, &c), Coverage::default());
    }

    /// Issue 30, item 9: 1e300 became 18,446,744,073,709,551,612 good events and a budget of
    /// −49. A minute over the bound, or with any sample that is no number or negative, is
    /// rejected whole and never becomes a count; no count saturates or wraps.
    #[test]
    fn absurd_minutes_are_rejected_whole_and_nothing_wraps() {
        let limit = plausible_per_minute(&[10.0]);
        assert_eq!(limit, 6_000.0, "10/s for 60 s, ten times");
        let mut c = Counts::new(limit);
        c.add(1, true, 100.0);
        c.add(1, false, 3.0);
        c.add(2, true, 1e300);
        c.add(2, false, 3.0);
        c.add(3, true, 50.0);
        c.add(3, false, f64::NAN);
        c.add(4, true, f64::INFINITY);
        c.add(5, true, 5_000.0);
        c.add(5, false, 1_001.0);
        c.add(6, true, 5_999.0);
        c.add(6, false, 1.0);
        c.add(7, true, f64::MAX);
        c.add(7, true, f64::MAX);
        let done = c.finish();
        assert_eq!(done.minutes, vec![(1, 100, 3), (6, 5_999, 1)]);
        assert_eq!(
            done.rejected,
            vec![
                (2, Rejection::Implausible(limit)),
                (3, Rejection::NotANumber),
                (4, Rejection::NotANumber),
                (5, Rejection::Implausible(limit)),
                (7, Rejection::Implausible(limit)),
            ]
        );
        assert!(!c.has(2) && c.has(1));
        assert_eq!(whole(1e300), None);
        assert_eq!(whole(-0.6), None);
        assert_eq!(whole(f64::NAN), None);
        assert_eq!(whole(2.5), Some(3));
        assert_eq!(plausible_per_minute(&[]), UNKNOWN_RATE * 600.0);
        assert_eq!(plausible_per_minute(&[f64::NAN, 0.0]), UNKNOWN_RATE * 600.0);
    }
}
