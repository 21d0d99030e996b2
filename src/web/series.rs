//! A profile's last hour as a bounded ring of 10-second points, fed by its runs' samplers
//! (never recomputed per request), the `/api/series` columns built from it, and an SLO's
//! budget burn-down over its period from the per-minute counts.

use super::recorder::{Point, SLOT_SECONDS};
use serde_json::{Map, Value, json};
use std::collections::{BTreeSet, VecDeque};

/// How far back a profile's series reaches.
pub const WINDOW_SECONDS: i64 = 3600;

/// Points a ring holds: one hour at 10 s.
pub const RING_SLOTS: usize = (WINDOW_SECONDS / SLOT_SECONDS) as usize;

/// A profile's last hour, oldest first, at most [`RING_SLOTS`] points.
#[derive(Debug, Default, Clone)]
pub struct Ring {
    points: VecDeque<Point>,
}

impl Ring {
    /// Adds a finished slot. A slot that two runs shared (one ended, the next began within the
    /// same 10 s) is folded into one point.
    pub fn push(&mut self, p: Point) {
        if let Some(last) = self.points.back_mut()
            && last.t == p.t
        {
            last.absorb(&p);
            last.seconds = last.seconds.min(SLOT_SECONDS as f64);
        } else {
            self.points.push_back(p);
        }
        let newest = self.points.back().map_or(0.0, |p| p.t);
        while self.points.len() > RING_SLOTS
            || self
                .points
                .front()
                .is_some_and(|f| f.t <= newest - WINDOW_SECONDS as f64)
        {
            self.points.pop_front();
        }
    }

    /// Adds a slot when there is one.
    pub fn extend(&mut self, p: Option<Point>) {
        if let Some(p) = p {
            self.push(p);
        }
    }

    pub fn len(&self) -> usize {
        self.points.len()
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The hour up to `now_unix` as columns on a fixed 10 s grid: `t` (unix seconds) and one
    /// array per figure, `null` where no run was sending load (no data, never a made-up zero).
    pub fn columns(&self, now_unix: i64) -> Value {
        let last = now_unix.div_euclid(SLOT_SECONDS) * SLOT_SECONDS;
        let first = last - WINDOW_SECONDS + SLOT_SECONDS;
        let grid: Vec<i64> = (0..RING_SLOTS as i64)
            .map(|i| first + i * SLOT_SECONDS)
            .collect();
        // Both are in time order: one pass.
        let mut points = self.points.iter().peekable();
        let rows: Vec<Option<&Point>> = grid
            .iter()
            .map(|t| {
                while points.next_if(|p| (p.t as i64) < *t).is_some() {}
                points.next_if(|p| p.t as i64 == *t)
            })
            .collect();
        let col = |f: &dyn Fn(&Point) -> Option<f64>| -> Vec<Value> {
            rows.iter()
                .map(|p| p.and_then(f).map_or(Value::Null, |v| json!(round(v))))
                .collect()
        };
        let classes: BTreeSet<&String> = self.points.iter().flat_map(|p| p.errors.keys()).collect();
        let mut by_class = Map::new();
        for class in classes {
            by_class.insert(
                class.clone(),
                Value::Array(col(&|p: &Point| {
                    (p.requests > 0).then(|| {
                        p.errors.get(class).copied().unwrap_or(0) as f64 / p.requests as f64
                    })
                })),
            );
        }
        json!({
            "t": grid,
            "requests": col(&|p| Some(p.requests as f64)),
            "rate": col(&|p| Some(p.rate())),
            "p50_ms": col(&|p| p.p50_ms),
            "p90_ms": col(&|p| p.p90_ms),
            "p95_ms": col(&|p| p.p95_ms),
            "p99_ms": col(&|p| p.p99_ms),
            "failed_ratio": col(&|p| (p.requests > 0).then(|| p.failed as f64 / p.requests as f64)),
            "error_ratio": by_class,
            "vus": col(&|p| Some(p.vus as f64)),
            "vus_max": col(&|p| Some(p.vus_max as f64)),
            "dropped": col(&|p| Some(p.dropped as f64)),
        })
    }
}

/// Six significant digits are plenty for a chart and keep the JSON short.
fn round(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let mag = 10f64.powi(5 - v.abs().log10().floor() as i32);
    (v * mag).round() / mag
}

/// An SLO's budget over its period: at each point, the budget remaining counting the events
/// from the period's start up to that minute (so the last point is today's
/// `budget_remaining`), `None` while the period has no event.
///
/// The line starts where the events do: at the start of the first minute with events (the
/// whole budget, 1, as `budget_remaining` is before any event), then one point per step up to
/// now, the step growing with the span drawn so there are at most [`BURN_DOWN_POINTS`]. A new
/// SLO is drawn a minute at a time from its first minute, not one point per twelfth of a day
/// of a 30-day period (a single dot for hours).
#[derive(Debug, Clone, PartialEq)]
pub struct BurnDown {
    pub t: Vec<i64>,
    pub remaining: Vec<Option<f64>>,
}

/// At most this many points per burn-down after its start, whatever the period.
pub const BURN_DOWN_POINTS: i64 = 240;

/// Builds the burn-down from `(minute, good, bad)` rows (minutes ascending), for the period of
/// `period_minutes` ending at `now_minute`, with error budget `budget` (1 − objective).
pub fn burn_down(
    minutes: &[(i64, u64, u64)],
    now_minute: i64,
    period_minutes: i64,
    budget: f64,
) -> BurnDown {
    let start = now_minute - period_minutes + 1;
    let in_period = |r: &&(i64, u64, u64)| r.0 >= start && r.0 <= now_minute;
    let first = minutes
        .iter()
        .filter(in_period)
        .find(|r| r.1 + r.2 > 0)
        .map(|r| r.0);
    let mut out = BurnDown {
        t: Vec::new(),
        remaining: Vec::new(),
    };
    if let Some(f) = first.filter(|_| budget > 0.0) {
        out.t.push(f * 60);
        out.remaining.push(Some(1.0));
    }
    let from = first.unwrap_or(start);
    let step = ((now_minute - from + 1).max(1) + BURN_DOWN_POINTS - 1) / BURN_DOWN_POINTS;
    let (mut good, mut bad) = (0u64, 0u64);
    let mut rows = minutes.iter().filter(in_period).peekable();
    let mut m = from + step - 1;
    loop {
        let edge = m.min(now_minute);
        while let Some(r) = rows.next_if(|r| r.0 <= edge) {
            good += r.1;
            bad += r.2;
        }
        out.t.push((edge + 1) * 60);
        out.remaining
            .push((good + bad > 0 && budget > 0.0).then(|| {
                let e = bad as f64 / (good + bad) as f64;
                1.0 - e / budget
            }));
        if edge >= now_minute {
            break;
        }
        m += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t: f64, requests: u64) -> Point {
        Point {
            t,
            seconds: 10.0,
            requests,
            p95_ms: (requests > 0).then_some(12.0),
            ..Point::default()
        }
    }

    #[test]
    fn the_ring_keeps_one_hour_and_folds_a_shared_slot() {
        let mut r = Ring::default();
        for i in 0..RING_SLOTS as i64 + 50 {
            r.push(point((i * 10) as f64, 10));
        }
        assert_eq!(r.len(), RING_SLOTS);
        r.push(point(((RING_SLOTS as i64 + 49) * 10) as f64, 5));
        assert_eq!(r.len(), RING_SLOTS, "same slot folded");
        let now = (RING_SLOTS as i64 + 49) * 10 + 3;
        let c = r.columns(now);
        let t = c["t"].as_array().unwrap();
        assert_eq!(t.len(), RING_SLOTS);
        assert_eq!(c["requests"][RING_SLOTS - 1], json!(15.0));
        assert_eq!(c["rate"][RING_SLOTS - 1], json!(1.5));
    }

    #[test]
    fn slots_without_a_run_are_null_not_zero() {
        let mut r = Ring::default();
        r.push(point(1000.0, 0));
        r.push(point(1020.0, 4));
        let c = r.columns(1025);
        let n = RING_SLOTS;
        assert_eq!(c["t"][n - 1], json!(1020));
        assert_eq!(c["p95_ms"][n - 1], json!(12.0));
        assert_eq!(c["requests"][n - 2], Value::Null, "1010: no run");
        assert_eq!(
            c["requests"][n - 3],
            json!(0.0),
            "1000: a run that sent nothing"
        );
        assert_eq!(
            c["p95_ms"][n - 3],
            Value::Null,
            "no responses: no percentile"
        );
    }

    #[test]
    fn the_burn_down_ends_at_the_budget_remaining() {
        // 99% objective: 1% budget. 1000 good, then 5 bad: half the budget gone.
        let rows = vec![(100, 500, 0), (150, 500, 0), (200, 0, 5)];
        let b = burn_down(&rows, 299, 300, 0.01);
        assert_eq!(
            b.t.len(),
            1 + 200,
            "the whole budget at the first event's minute, then one point a minute"
        );
        assert_eq!((b.t[0], b.remaining[0]), (100 * 60, Some(1.0)));
        assert_eq!(b.t.last(), Some(&(300 * 60)));
        let last = b.remaining.last().unwrap().unwrap();
        assert!(
            (last - (1.0 - (5.0 / 1005.0) / 0.01)).abs() < 1e-12,
            "{last}"
        );
        let before_bad =
            b.t.iter()
                .position(|t| *t == 200 * 60)
                .map(|i| b.remaining[i].unwrap());
        assert_eq!(before_bad, Some(1.0));
        assert!(
            burn_down(&[], 10, 60, 0.01)
                .remaining
                .iter()
                .all(Option::is_none)
        );
    }

    /// Issue 46: a 30-day SLO's chart was one dot for its first three hours (one point per
    /// 180 minutes). Now it is a line from its first minute, a point a minute while young.
    #[test]
    fn a_young_slo_is_a_line_from_its_first_minute() {
        let period = 30 * 24 * 60;
        let now = 50_000_000;
        let drawn = |rows: &[(i64, u64, u64)]| {
            let b = burn_down(rows, now, period, 0.001);
            assert!(
                b.t.windows(2).all(|w| w[0] < w[1]),
                "time ascends: {:?}",
                b.t
            );
            b.t.into_iter()
                .zip(b.remaining)
                .filter_map(|(t, r)| Some((t, r?)))
                .collect::<Vec<_>>()
        };
        let first_minute = drawn(&[(now, 99, 1)]);
        assert_eq!(
            first_minute,
            [(now * 60, 1.0), ((now + 1) * 60, 1.0 - 0.01 / 0.001)],
            "a line within the first minute: from the whole budget to now"
        );
        let three = drawn(&[(now - 2, 100, 0), (now - 1, 100, 0), (now, 99, 1)]);
        assert_eq!(three.len(), 4, "{three:?}");
        assert_eq!(three[0], ((now - 2) * 60, 1.0));
        // A full period stays within the bound.
        let full: Vec<(i64, u64, u64)> = (0..period).map(|i| (now - i, 10, 0)).rev().collect();
        let b = burn_down(&full, now, period, 0.001);
        assert!(b.t.len() as i64 <= BURN_DOWN_POINTS + 1, "{}", b.t.len());
        assert_eq!(b.t.last(), Some(&((now + 1) * 60)));
        // Rows before the period (kept longer by a calendar SLO) start nothing.
        let b = burn_down(&[(now - period - 5, 1, 1), (now, 1, 0)], now, period, 0.001);
        assert_eq!(b.t[0], now * 60);
    }
}
