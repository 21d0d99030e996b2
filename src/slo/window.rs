//! Per-minute good/bad counts of one SLO over its whole period, with O(log n) window sums.
//!
//! Layout: a ring of `n = period in minutes` slots indexed by `minute mod n`, plus two Fenwick
//! trees (good, bad) over the same slots. Memory is fixed per SLO (4 × 8 bytes × n, about 1.4 MB
//! for 30 days) whatever the traffic, and every window query is two or four prefix sums.
//!
//! Window definition: at `now`, a window of `w` minutes covers the minutes `now-w+1 ..= now`, i.e.
//! the current (partial) minute and the `w-1` whole minutes before it. Prometheus'
//! `increase(x[5m])` at time `t` covers `(t-5m, t]`, which at minute granularity is between 4 and
//! 5 whole minutes plus the current partial one; we take the lower bound so a window never
//! includes events older than its length, and a window never exceeds the period.

use std::time::Duration;

/// The windows DESIGN.md names, besides the period itself.
pub const STANDARD_WINDOWS: [Duration; 7] = [
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(3600),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(6 * 3600),
    Duration::from_secs(86400),
    Duration::from_secs(3 * 86400),
];

/// Number of minute buckets a window spans: rounded up, and at least one (the current minute).
pub fn window_minutes(window: Duration) -> i64 {
    let minutes = window.as_secs().div_ceil(60).max(1);
    i64::try_from(minutes).unwrap_or(i64::MAX)
}

/// Fenwick tree over `u64` with wrapping arithmetic: differences of prefix sums are exact as long
/// as the true totals fit in a `u64`, and removing a slot is adding its two's complement.
#[derive(Debug, Clone)]
struct Fenwick {
    tree: Vec<u64>,
}

impl Fenwick {
    fn new(n: usize) -> Self {
        Fenwick { tree: vec![0; n] }
    }

    fn add(&mut self, index: usize, delta: u64) {
        let mut i = index + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] = self.tree[i - 1].wrapping_add(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of slots `0..end`.
    fn prefix(&self, end: usize) -> u64 {
        let mut sum = 0u64;
        let mut i = end.min(self.tree.len());
        while i > 0 {
            sum = sum.wrapping_add(self.tree[i - 1]);
            i -= i & i.wrapping_neg();
        }
        sum
    }

    /// Sum of slots `start..end`.
    fn range(&self, start: usize, end: usize) -> u64 {
        self.prefix(end).wrapping_sub(self.prefix(start))
    }

    fn clear(&mut self) {
        self.tree.iter_mut().for_each(|v| *v = 0);
    }
}

/// Rolling per-minute good/bad counts over one SLO period.
#[derive(Debug, Clone)]
pub struct Windows {
    len: i64,
    /// Newest minute seen by `record` or `advance`; `None` until the first call.
    head: Option<i64>,
    good: Vec<u64>,
    bad: Vec<u64>,
    good_sum: Fenwick,
    bad_sum: Fenwick,
    stale_records: u64,
    stale_events: u64,
}

impl Windows {
    /// Empty windows for a period, which is rounded up to whole minutes (at least one).
    pub fn new(period: Duration) -> Self {
        let len = window_minutes(period);
        // The period comes from validated config; clamp anyway so a bogus one cannot make us
        // allocate without bound (2^20 minutes is about two years).
        let len = len.min(1 << 20);
        let n = usize::try_from(len).unwrap_or(1);
        Windows {
            len,
            head: None,
            good: vec![0; n],
            bad: vec![0; n],
            good_sum: Fenwick::new(n),
            bad_sum: Fenwick::new(n),
            stale_records: 0,
            stale_events: 0,
        }
    }

    /// Rebuilds windows from persisted `(minute, good, bad)` rows, in any order.
    pub fn restore(period: Duration, minutes: impl IntoIterator<Item = (i64, u64, u64)>) -> Self {
        let mut w = Windows::new(period);
        for (minute, good, bad) in minutes {
            w.record(minute, good, bad);
        }
        w
    }

    /// Period length in minutes (the ring size).
    pub fn period_minutes(&self) -> i64 {
        self.len
    }

    /// Newest minute seen, if any.
    pub fn newest_minute(&self) -> Option<i64> {
        self.head
    }

    /// Records that were older than the period when they arrived (after a backwards clock jump
    /// or a late restore), and how many events they carried. They are dropped, not added.
    pub fn stale(&self) -> (u64, u64) {
        (self.stale_records, self.stale_events)
    }

    fn slot(&self, minute: i64) -> usize {
        // rem_euclid of a positive len is in 0..len, which fits in usize by construction.
        usize::try_from(minute.rem_euclid(self.len)).unwrap_or(0)
    }

    /// Adds events to `minute`. A minute newer than any seen first advances the windows to it; a
    /// minute older than the newest but still inside the period is added in place (the clock went
    /// backwards or a late batch arrived); a minute older than the period is dropped and counted.
    pub fn record(&mut self, minute: i64, good: u64, bad: u64) {
        self.advance(minute);
        let head = self.head.unwrap_or(minute);
        if minute <= head.saturating_sub(self.len) {
            self.stale_records = self.stale_records.saturating_add(1);
            self.stale_events = self.stale_events.saturating_add(good.saturating_add(bad));
            return;
        }
        let slot = self.slot(minute);
        let new_good = self.good[slot].saturating_add(good);
        let new_bad = self.bad[slot].saturating_add(bad);
        self.good_sum.add(slot, new_good - self.good[slot]);
        self.bad_sum.add(slot, new_bad - self.bad[slot]);
        self.good[slot] = new_good;
        self.bad[slot] = new_bad;
    }

    /// Moves the newest minute forward to `now_minute`, expiring minutes that fall out of the
    /// period. A `now_minute` in the past is ignored: counts are never dropped because the clock
    /// went backwards. A jump of a period or more clears everything in O(period), not O(jump).
    pub fn advance(&mut self, now_minute: i64) {
        let Some(head) = self.head else {
            self.head = Some(now_minute);
            return;
        };
        if now_minute <= head {
            return;
        }
        let steps = now_minute.saturating_sub(head);
        if steps >= self.len {
            self.good.iter_mut().for_each(|v| *v = 0);
            self.bad.iter_mut().for_each(|v| *v = 0);
            self.good_sum.clear();
            self.bad_sum.clear();
        } else {
            for minute in head + 1..=now_minute {
                // This slot held `minute - len`, which is now out of the period.
                let slot = self.slot(minute);
                self.good_sum.add(slot, self.good[slot].wrapping_neg());
                self.bad_sum.add(slot, self.bad[slot].wrapping_neg());
                self.good[slot] = 0;
                self.bad[slot] = 0;
            }
        }
        self.head = Some(now_minute);
    }

    /// `(good, bad)` over the window ending at `now_minute` (see the module docs). Minutes after
    /// the newest recorded one count as empty; windows longer than the period are clamped to it.
    pub fn totals(&self, window: Duration, now_minute: i64) -> (u64, u64) {
        let Some(head) = self.head else {
            return (0, 0);
        };
        let w = window_minutes(window).min(self.len);
        let lo = now_minute
            .saturating_sub(w - 1)
            .max(head.saturating_sub(self.len - 1));
        let hi = now_minute.min(head);
        if lo > hi {
            return (0, 0);
        }
        let (start, end) = (self.slot(lo), self.slot(hi));
        if start <= end {
            (
                self.good_sum.range(start, end + 1),
                self.bad_sum.range(start, end + 1),
            )
        } else {
            let n = self.good.len();
            (
                self.good_sum
                    .range(start, n)
                    .wrapping_add(self.good_sum.prefix(end + 1)),
                self.bad_sum
                    .range(start, n)
                    .wrapping_add(self.bad_sum.prefix(end + 1)),
            )
        }
    }

    /// Non-empty minutes inside the period, oldest first, as `(minute, good, bad)` for
    /// persistence; [`Windows::restore`] takes them back.
    pub fn minutes(&self) -> impl Iterator<Item = (i64, u64, u64)> + '_ {
        let (first, last) = match self.head {
            Some(head) => (head - (self.len - 1), head),
            None => (1, 0),
        };
        (first..=last).filter_map(move |minute| {
            let slot = self.slot(minute);
            let (good, bad) = (self.good[slot], self.bad[slot]);
            (good != 0 || bad != 0).then_some((minute, good, bad))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MIN: u64 = 60;

    fn mins(m: u64) -> Duration {
        Duration::from_secs(m * MIN)
    }

    /// Records `events` into fresh windows of `period_min` minutes and compares the totals of
    /// each `(window_min, now, expected)`.
    fn check(period_min: u64, events: &[(i64, u64, u64)], expected: &[(u64, i64, (u64, u64))]) {
        let mut w = Windows::new(mins(period_min));
        for &(minute, good, bad) in events {
            w.record(minute, good, bad);
        }
        for &(window, now, want) in expected {
            assert_eq!(
                w.totals(mins(window), now),
                want,
                "window {window}m at minute {now}"
            );
        }
    }

    #[test]
    fn window_covers_current_minute_and_the_ones_before() {
        // Minutes 100..=104 are the 5m window at 104; minute 99 is just outside.
        let events = [(99, 1, 0), (100, 10, 0), (104, 100, 1)];
        check(
            60,
            &events,
            &[
                (5, 104, (110, 1)),
                (6, 104, (111, 1)),
                (1, 104, (100, 1)),
                (5, 103, (11, 0)),
                (5, 105, (100, 1)),
                (5, 109, (0, 0)),
                (60, 104, (111, 1)),
            ],
        );
    }

    #[test]
    fn sub_minute_windows_round_up_to_one_minute() {
        let mut w = Windows::new(mins(60));
        w.record(10, 3, 1);
        w.record(9, 5, 5);
        assert_eq!(w.totals(Duration::from_secs(10), 10), (3, 1));
        assert_eq!(w.totals(Duration::from_secs(61), 10), (8, 6));
        assert_eq!(window_minutes(Duration::ZERO), 1);
    }

    #[test]
    fn windows_longer_than_the_period_are_clamped() {
        check(
            10,
            &[(0, 1, 0), (10, 2, 0), (19, 4, 1)],
            &[(10, 19, (6, 1)), (1000, 19, (6, 1)), (20, 19, (6, 1))],
        );
    }

    #[test]
    fn empty_windows_report_nothing() {
        let w = Windows::new(mins(30 * 24 * 60));
        assert_eq!(w.totals(mins(5), 1_000_000), (0, 0));
        assert_eq!(w.minutes().count(), 0);
    }

    #[test]
    fn clock_backwards_within_period_adds_to_the_old_minute() {
        let mut w = Windows::new(mins(60));
        w.record(1000, 10, 0);
        w.record(990, 5, 2);
        w.advance(980);
        assert_eq!(w.newest_minute(), Some(1000));
        assert_eq!(w.totals(mins(60), 1000), (15, 2));
        assert_eq!(w.totals(mins(5), 1000), (10, 0));
        // Querying at the earlier "now" the clock went back to sees the old minute.
        assert_eq!(w.totals(mins(1), 990), (5, 2));
        assert_eq!(w.stale(), (0, 0));
    }

    #[test]
    fn clock_backwards_beyond_period_is_dropped_and_counted() {
        let mut w = Windows::new(mins(60));
        w.record(1000, 10, 0);
        w.record(940, 5, 2); // exactly one period back: out
        w.record(941, 1, 1); // oldest minute still in the period
        assert_eq!(w.stale(), (1, 7));
        assert_eq!(w.totals(mins(60), 1000), (11, 1));
        assert_eq!(
            w.minutes().collect::<Vec<_>>(),
            [(941, 1, 1), (1000, 10, 0)]
        );
    }

    #[test]
    fn clock_forwards_by_days_expires_everything() {
        let mut w = Windows::new(mins(30 * 24 * 60));
        w.record(0, 10, 1);
        w.record(100, 10, 1);
        // Forty days in minutes: far beyond the period, must not loop per minute of the gap.
        let later = 40 * 24 * 60;
        w.advance(later);
        assert_eq!(w.totals(mins(30 * 24 * 60), later), (0, 0));
        w.record(later, 7, 0);
        assert_eq!(w.totals(mins(30 * 24 * 60), later), (7, 0));
        assert_eq!(w.minutes().collect::<Vec<_>>(), [(later, 7, 0)]);
        // A far jump to the end of the i64 range stays panic-free.
        w.record(i64::MAX, 1, 1);
        assert_eq!(w.totals(mins(5), i64::MAX), (1, 1));
        w.record(i64::MIN, 1, 1);
        assert_eq!(w.stale(), (1, 2));
    }

    #[test]
    fn clock_forwards_within_period_expires_only_old_minutes() {
        check(
            60,
            &[(0, 1, 0), (30, 2, 0), (70, 4, 1)],
            &[(60, 70, (6, 1)), (60, 89, (6, 1)), (60, 90, (4, 1))],
        );
    }

    #[test]
    fn restore_round_trips_minutes() {
        let mut w = Windows::new(mins(120));
        for m in 0..500 {
            w.record(m, m as u64, (m % 7) as u64);
        }
        let saved: Vec<_> = w.minutes().collect();
        let mut rev = saved.clone();
        rev.reverse();
        let r = Windows::restore(mins(120), rev);
        assert_eq!(r.minutes().collect::<Vec<_>>(), saved);
        for window in STANDARD_WINDOWS {
            assert_eq!(r.totals(window, 499), w.totals(window, 499));
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Record(i64, u64, u64),
        Advance(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0i64..3000, 0u64..1000, 0u64..1000).prop_map(|(m, g, b)| Op::Record(m, g, b)),
            1 => (0i64..3000).prop_map(Op::Advance),
        ]
    }

    proptest! {
        #[test]
        fn totals_match_brute_force(
            period in 1u64..400,
            ops in proptest::collection::vec(op(), 0..200),
            queries in proptest::collection::vec((1u64..500, -50i64..50), 1..20),
        ) {
            let mut w = Windows::new(mins(period));
            let len = period as i64;
            let mut head: Option<i64> = None;
            let mut accepted: Vec<(i64, u64, u64)> = Vec::new();
            for op in &ops {
                match *op {
                    Op::Record(m, g, b) => {
                        w.record(m, g, b);
                        let h = head.map_or(m, |h| h.max(m));
                        head = Some(h);
                        if m > h - len {
                            accepted.push((m, g, b));
                        }
                    }
                    Op::Advance(m) => {
                        w.advance(m);
                        head = Some(head.map_or(m, |h| h.max(m)));
                    }
                }
            }
            prop_assert_eq!(w.newest_minute(), head);
            let Some(head) = head else { return Ok(()); };
            let live = |m: i64| m > head - len;
            let mut windows: Vec<u64> = queries.iter().map(|q| q.0).collect();
            windows.extend(STANDARD_WINDOWS.iter().map(|d| d.as_secs() / 60));
            for (i, &win) in windows.iter().enumerate() {
                let now = head + queries[i % queries.len()].1;
                let span = (win as i64).min(len);
                let want = accepted
                    .iter()
                    .filter(|(m, _, _)| live(*m) && *m <= now && *m > now - span)
                    .fold((0u64, 0u64), |acc, (_, g, b)| (acc.0 + g, acc.1 + b));
                prop_assert_eq!(w.totals(mins(win), now), want, "window {} now {}", win, now);
            }
            let mut per_minute = std::collections::BTreeMap::<i64, (u64, u64)>::new();
            for &(m, g, b) in accepted.iter().filter(|e| live(e.0)) {
                let e = per_minute.entry(m).or_default();
                e.0 += g;
                e.1 += b;
            }
            let want: Vec<_> = per_minute
                .into_iter()
                .filter(|(_, (g, b))| *g != 0 || *b != 0)
                .map(|(m, (g, b))| (m, g, b))
                .collect();
            prop_assert_eq!(w.minutes().collect::<Vec<_>>(), want);
        }
    }
}
