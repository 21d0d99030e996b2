//! Quorum SLOs (issue 49): an SLO judged across locations. Time is cut into buckets; in a
//! bucket a location is bad when its own events there breach the objective (bad ÷ all above
//! the error budget), and the bucket is bad only when at least K locations were bad. A location
//! that did not report a bucket (it had no events there, or did not answer) counts as neither;
//! a bucket with fewer than K locations judged has no verdict and is left out.
//!
//! The quorum SLO counts minutes, not requests: a judged bucket of 5m is 5 good or 5 bad
//! minutes, recorded in ordinary [`Windows`] at the bucket's first minute, so its SLI, burn
//! rates, budget and tiers are [`evaluate`](super::evaluate)'s, time-weighted.
//!
//! Pure: rows and `now` come in, nothing is read or written.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Windows;
use super::window::FINE_MINUTES;

/// One row of a location's SLO events: `minutes` minutes from `minute` (a unix minute index)
/// holding `good` and `bad` events. Windows keep the newest hours minute by minute and older
/// ones per hour, so a row is one minute or (part of) an hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Row {
    pub minute: i64,
    pub minutes: i64,
    pub good: u64,
    pub bad: u64,
}

/// The rows of windows' non-empty `(minute, good, bad)` ([`Windows::minutes`]) at `now_minute`:
/// rows older than the minute ring are hours.
pub fn rows_of(minutes: &[(i64, u64, u64)], period_minutes: i64, now_minute: i64) -> Vec<Row> {
    let fine_from = now_minute - period_minutes.min(FINE_MINUTES) + 1;
    minutes
        .iter()
        .map(|&(minute, good, bad)| Row {
            minute,
            minutes: if minute < fine_from {
                60 - minute.rem_euclid(60)
            } else {
                1
            },
            good,
            bad,
        })
        .collect()
}

/// A location's own windows rebuilt from its rows (its own SLO, as it reports it).
pub fn windows_of_rows(period: Duration, rows: &[Row]) -> Windows {
    Windows::restore(period, rows.iter().map(|r| (r.minute, r.good, r.bad)))
}

/// What one location's events in one bucket say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Good,
    Bad,
}

/// The bucket a row falls in: `(first minute, length in minutes)`. A minute row goes to its
/// `bucket`-minute bucket; an hour row is its own hour-long bucket.
fn bucket_of(row: &Row, bucket: i64) -> (i64, i64) {
    if row.minutes <= 1 {
        (row.minute.div_euclid(bucket) * bucket, bucket)
    } else {
        (row.minute.div_euclid(60) * 60, 60)
    }
}

/// A location's mark per bucket (keyed by first minute, with the bucket's length): bad when
/// its bad events there are more than `budget` of its events.
pub fn marks(rows: &[Row], bucket: i64, budget: f64) -> BTreeMap<i64, (i64, Mark)> {
    let mut sums: BTreeMap<i64, (i64, u64, u64)> = BTreeMap::new();
    for r in rows {
        let (start, len) = bucket_of(r, bucket.max(1));
        let e = sums.entry(start).or_insert((len, 0, 0));
        e.0 = e.0.max(len);
        e.1 = e.1.saturating_add(r.good);
        e.2 = e.2.saturating_add(r.bad);
    }
    sums.into_iter()
        .filter(|(_, (_, g, b))| g.saturating_add(*b) > 0)
        .map(|(start, (len, g, b))| {
            let ratio = b as f64 / (g as f64 + b as f64);
            let mark = if ratio > budget {
                Mark::Bad
            } else {
                Mark::Good
            };
            (start, (len, mark))
        })
        .collect()
}

/// A bucket's verdict for the quorum SLO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// At least K locations were bad.
    Bad,
    /// At least K locations judged it, fewer than K bad.
    Good,
    /// Fewer than K locations judged it.
    NoVerdict,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Bad => "bad",
            State::Good => "good",
            State::NoVerdict => "no_verdict",
        }
    }
}

/// One bucket across every location: each location's mark (`None`: it did not report it).
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    pub start: i64,
    pub minutes: i64,
    pub marks: Vec<Option<Mark>>,
    pub state: State,
}

/// The quorum's buckets, oldest first, from every location's marks (`None` for a location that
/// did not answer: it reports no bucket), in the order given.
pub fn judge(locations: &[Option<BTreeMap<i64, (i64, Mark)>>], k: u32) -> Vec<Bucket> {
    let mut starts: BTreeMap<i64, i64> = BTreeMap::new();
    for (start, (len, _)) in locations.iter().flatten().flat_map(|m| m.iter()) {
        let e = starts.entry(*start).or_insert(*len);
        *e = (*e).max(*len);
    }
    starts
        .into_iter()
        .map(|(start, minutes)| {
            let marks: Vec<Option<Mark>> = locations
                .iter()
                .map(|l| {
                    l.as_ref()
                        .and_then(|m| m.get(&start))
                        .map(|(_, mark)| *mark)
                })
                .collect();
            let bad = marks.iter().filter(|m| **m == Some(Mark::Bad)).count();
            let judged = marks.iter().filter(|m| m.is_some()).count();
            let k = k as usize;
            let state = if bad >= k {
                State::Bad
            } else if judged >= k {
                State::Good
            } else {
                State::NoVerdict
            };
            Bucket {
                start,
                minutes,
                marks,
                state,
            }
        })
        .collect()
}

/// The quorum SLO's windows: each judged bucket's minutes, good or bad, at its first minute.
pub fn windows(period: Duration, buckets: &[Bucket]) -> Windows {
    let minutes = buckets.iter().filter_map(|b| {
        let m = u64::try_from(b.minutes).unwrap_or(0);
        match b.state {
            State::Bad => Some((b.start, 0, m)),
            State::Good => Some((b.start, m, 0)),
            State::NoVerdict => None,
        }
    });
    Windows::restore(period, minutes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::{SloDef, default_tiers, evaluate};

    const NOW: i64 = 30_000_000;
    const B: f64 = 0.010_000_000_000_000_009; // 1 − 0.99

    fn row(ago: i64, good: u64, bad: u64) -> Row {
        Row {
            minute: NOW - ago,
            minutes: 1,
            good,
            bad,
        }
    }

    fn def() -> SloDef {
        let period = Duration::from_secs(30 * 86400);
        SloDef {
            name: "q".into(),
            service: "t".into(),
            objective: 0.99,
            period,
            calendar: None,
            tiers: default_tiers(period),
            labels: BTreeMap::new(),
            description: String::new(),
        }
    }

    #[test]
    fn a_location_is_bad_in_a_bucket_only_past_the_budget() {
        // Buckets of 5 minutes: NOW − 10 .. are one bucket per 5 minutes.
        let rows = [row(10, 99, 1), row(9, 100, 0), row(4, 98, 2), row(0, 0, 0)];
        let m = marks(&rows, 5, B);
        let got: Vec<Mark> = m.values().map(|(_, mark)| *mark).collect();
        assert_eq!(got, [Mark::Good, Mark::Bad], "{m:?}");
        // A bucket without events is not reported at all.
        assert_eq!(m.len(), 2);
    }

    fn marks_of(rows: &[Row]) -> Option<BTreeMap<i64, (i64, Mark)>> {
        Some(marks(rows, 1, B))
    }

    #[test]
    fn a_bucket_is_bad_only_when_k_locations_were_bad() {
        let a = marks_of(&[row(2, 100, 0), row(1, 100, 0), row(0, 50, 50)]);
        let b = marks_of(&[row(2, 0, 100), row(1, 0, 100), row(0, 0, 100)]);
        let c = marks_of(&[row(2, 100, 0), row(1, 100, 0), row(0, 100, 0)]);
        let buckets = judge(&[a, b, c], 2);
        let states: Vec<State> = buckets.iter().map(|b| b.state).collect();
        // b alone is bad twice (good); then a goes bad too: bad from that bucket on.
        assert_eq!(states, [State::Good, State::Good, State::Bad]);
        assert_eq!(
            buckets[0].marks,
            [Some(Mark::Good), Some(Mark::Bad), Some(Mark::Good)]
        );
        let w = windows(def().period, &buckets);
        let r = evaluate(&def(), &w, NOW);
        // Over 5 minutes: 2 good minutes and 1 bad.
        assert_eq!((r.windows[0].good, r.windows[0].bad), (2, 1));
    }

    #[test]
    fn a_silent_location_counts_as_neither_and_fewer_than_k_judged_is_no_verdict() {
        let a = marks_of(&[row(1, 0, 10), row(0, 10, 0)]);
        let b = marks_of(&[row(1, 0, 10)]);
        // c did not answer; b had no events in the newest minute.
        let buckets = judge(&[a.clone(), b.clone(), None], 2);
        let states: Vec<State> = buckets.iter().map(|b| b.state).collect();
        assert_eq!(states, [State::Bad, State::NoVerdict]);
        assert_eq!(buckets[1].marks, [Some(Mark::Good), None, None]);
        // With K = 3 and c silent, no bucket has a verdict: nothing is counted.
        let buckets = judge(&[a, b, None], 3);
        assert!(buckets.iter().all(|b| b.state == State::NoVerdict));
        let r = evaluate(&def(), &windows(def().period, &buckets), NOW);
        assert_eq!((r.period.good, r.period.bad), (0, 0));
        assert!(r.period.sli.is_nan());
    }

    #[test]
    fn hour_rows_older_than_the_minute_ring_are_hour_buckets() {
        let hour = (NOW - 10 * 60).div_euclid(60) * 60;
        let minutes = [(hour, 50, 50), (NOW - 1, 10, 0)];
        let rows = rows_of(&minutes, 30 * 1440, NOW);
        assert_eq!(rows[0].minutes, 60);
        assert_eq!(rows[1].minutes, 1);
        let m = marks(&rows, 5, B);
        assert_eq!(m[&hour], (60, Mark::Bad));
        // Its own windows come back from its rows.
        let own = windows_of_rows(def().period, &rows);
        assert_eq!(own.totals(def().period, NOW), (60, 50));
    }
}
