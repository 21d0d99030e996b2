//! Per-minute good/bad counts of one SLO over its whole period, with cheap window sums.
//!
//! Layout, two resolutions. A ring of per-minute counts covers the newest `FINE_MINUTES`
//! (7 hours: the windows of the paging tiers, 5m to 6h) or the whole period when it is shorter; a
//! ring of per-hour counts (absolute hours, `minute div 60`) covers the whole period, with a
//! Fenwick tree over it for the middle of long windows. Memory per SLO is about 15 KB for a
//! period of 30 days (8 × 420 minute bytes + 2 × 8 × 722 hour bytes); the earlier
//! single-resolution layout (4 × 8 bytes per minute of the period) was 1.4 MB for 30 days, which
//! 1,000 profiles with two SLOs each would fill to 2.7 GB over a month.
//!
//! Window definition: at `now`, a window of `w` minutes covers the minutes `now-w+1 ..= now`, i.e.
//! the current (partial) minute and the `w-1` whole minutes before it. Prometheus'
//! `increase(x[5m])` at time `t` covers `(t-5m, t]`, which at minute granularity is between 4 and
//! 5 whole minutes plus the current partial one; we take the lower bound so a window never
//! includes events older than its length, and a window never exceeds the period.
//!
//! Exactness: a window whose oldest minute is in the minute ring is exact (every window of an SLO
//! whose period is at most `FINE_MINUTES`, and every window up to 6 hours of a longer one). A
//! window reaching further back (1d, 3d, the period) is exact in whole hours; its oldest, partial
//! hour is counted pro rata (the hour's counts × its minutes inside the window ÷ 60), so the
//! error is at most one hour's events out of the window (1/24 of an hour's share for 1d, and
//! none when events are spread evenly over the hour).

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

/// Minutes kept at minute resolution: the longest window of the paging tiers (6 hours) plus an
/// hour, so the partial hour at a 6-hour window's old edge is still in minutes.
pub const FINE_MINUTES: i64 = 7 * 60;

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

    /// The value of one slot.
    fn get(&self, index: usize) -> u64 {
        self.range(index, index + 1)
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
    /// Minute ring of `min(len, FINE_MINUTES)` slots. A minute's count saturates at `u32::MAX`
    /// (71 million events a second); the hour ring keeps the exact sum.
    good: Vec<u32>,
    bad: Vec<u32>,
    /// Hour ring: `ceil(len / 60) + 1` slots, so the hour that falls out of the period is never
    /// the one that comes in.
    good_hours: Fenwick,
    bad_hours: Fenwick,
    stale_records: u64,
    stale_events: u64,
}

fn ring_slot(x: i64, len: usize) -> usize {
    // rem_euclid of a positive len is in 0..len, which fits in usize by construction.
    usize::try_from(x.rem_euclid(i64::try_from(len).unwrap_or(1).max(1))).unwrap_or(0)
}

impl Windows {
    /// Empty windows for a period, which is rounded up to whole minutes (at least one).
    pub fn new(period: Duration) -> Self {
        let len = window_minutes(period);
        // The period comes from validated config; clamp anyway so a bogus one cannot make us
        // allocate without bound (2^20 minutes is about two years).
        let len = len.min(1 << 20);
        let fine = usize::try_from(len.min(FINE_MINUTES)).unwrap_or(1);
        let hours = usize::try_from((len + 59) / 60 + 1).unwrap_or(2);
        Windows {
            len,
            head: None,
            good: vec![0; fine],
            bad: vec![0; fine],
            good_hours: Fenwick::new(hours),
            bad_hours: Fenwick::new(hours),
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

    /// Period length in minutes.
    pub fn period_minutes(&self) -> i64 {
        self.len
    }

    /// Newest minute seen, if any.
    pub fn newest_minute(&self) -> Option<i64> {
        self.head
    }

    /// Bytes this SLO's counts take on the heap (their capacity, touched or not).
    pub fn heap_bytes(&self) -> usize {
        (self.good.capacity() + self.bad.capacity()) * size_of::<u32>()
            + (self.good_hours.tree.capacity() + self.bad_hours.tree.capacity()) * size_of::<u64>()
    }

    /// Records that were older than the period when they arrived (after a backwards clock jump
    /// or a late restore), and how many events they carried. They are dropped, not added.
    pub fn stale(&self) -> (u64, u64) {
        (self.stale_records, self.stale_events)
    }

    fn slot(&self, minute: i64) -> usize {
        ring_slot(minute, self.good.len())
    }

    fn hour_slot(&self, hour: i64) -> usize {
        ring_slot(hour, self.good_hours.tree.len())
    }

    /// Whether `minute` (inside the period) is still in the minute ring.
    fn fine(&self, head: i64, minute: i64) -> bool {
        minute > head - self.good.len() as i64 && minute <= head
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
        if self.fine(head, minute) {
            let slot = self.slot(minute);
            let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
            self.good[slot] = clamp(u64::from(self.good[slot]).saturating_add(good));
            self.bad[slot] = clamp(u64::from(self.bad[slot]).saturating_add(bad));
        }
        let h = self.hour_slot(minute.div_euclid(60));
        self.good_hours.add(h, good);
        self.bad_hours.add(h, bad);
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
        if steps >= self.good.len() as i64 {
            self.good.iter_mut().for_each(|v| *v = 0);
            self.bad.iter_mut().for_each(|v| *v = 0);
        } else {
            for minute in head + 1..=now_minute {
                // This slot held `minute - fine`, which is now out of the minute ring.
                let slot = self.slot(minute);
                self.good[slot] = 0;
                self.bad[slot] = 0;
            }
        }
        let (old_hour, new_hour) = (head.div_euclid(60), now_minute.div_euclid(60));
        let hours = self.good_hours.tree.len() as i64;
        if new_hour - old_hour >= hours {
            self.good_hours.clear();
            self.bad_hours.clear();
        } else {
            for hour in old_hour + 1..=new_hour {
                // This slot held `hour - hours`, wholly older than the period.
                let h = self.hour_slot(hour);
                self.good_hours
                    .add(h, self.good_hours.get(h).wrapping_neg());
                self.bad_hours.add(h, self.bad_hours.get(h).wrapping_neg());
            }
        }
        self.head = Some(now_minute);
    }

    /// Sums of whole hours `first..=last` (absolute hours inside the hour ring).
    fn hours_sum(&self, first: i64, last: i64) -> (u64, u64) {
        if first > last {
            return (0, 0);
        }
        let (start, end) = (self.hour_slot(first), self.hour_slot(last));
        let n = self.good_hours.tree.len();
        let range = |f: &Fenwick| {
            if start <= end {
                f.range(start, end + 1)
            } else {
                f.range(start, n).wrapping_add(f.prefix(end + 1))
            }
        };
        (range(&self.good_hours), range(&self.bad_hours))
    }

    /// Minutes `lo..=hi` of one hour: exact for those in the minute ring; the others get the
    /// rest of the hour's counts (what the ring does not hold) pro rata to their minutes.
    fn part_hour(&self, head: i64, lo: i64, hi: i64) -> (u64, u64) {
        let fine_from = head - self.good.len() as i64 + 1;
        let fine_sum = |from: i64, to: i64| {
            (from.max(fine_from)..=to.min(head)).fold((0u64, 0u64), |(g, b), m| {
                let s = self.slot(m);
                (g + u64::from(self.good[s]), b + u64::from(self.bad[s]))
            })
        };
        let exact = fine_sum(lo, hi);
        if lo >= fine_from {
            return exact;
        }
        let hour = lo.div_euclid(60);
        let (first, last) = (hour * 60, hour * 60 + 59);
        let (hour_good, hour_bad) = self.hours_sum(hour, hour);
        let (in_ring_good, in_ring_bad) = fine_sum(first, last);
        let coarse_minutes = u128::try_from(last.min(fine_from - 1) - first + 1).unwrap_or(1);
        let share = u128::try_from(hi.min(fine_from - 1) - lo + 1).unwrap_or(0);
        let pro_rata = |rest: u64| (u128::from(rest) * share / coarse_minutes.max(1)) as u64;
        (
            exact.0 + pro_rata(hour_good.saturating_sub(in_ring_good)),
            exact.1 + pro_rata(hour_bad.saturating_sub(in_ring_bad)),
        )
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
        let (hlo, hhi) = (lo.div_euclid(60), hi.div_euclid(60));
        if hlo == hhi {
            return self.part_hour(head, lo, hi);
        }
        // A first or last hour wholly inside the window is summed as an hour.
        let first_whole = if lo.rem_euclid(60) == 0 { hlo } else { hlo + 1 };
        let last_whole = if hi.rem_euclid(60) == 59 {
            hhi
        } else {
            hhi - 1
        };
        let left = if first_whole == hlo {
            (0, 0)
        } else {
            self.part_hour(head, lo, hlo * 60 + 59)
        };
        let right = if last_whole == hhi {
            (0, 0)
        } else {
            self.part_hour(head, hhi * 60, hi)
        };
        let mid = self.hours_sum(first_whole, last_whole);
        (
            left.0.wrapping_add(mid.0).wrapping_add(right.0),
            left.1.wrapping_add(mid.1).wrapping_add(right.1),
        )
    }

    /// Non-empty minutes inside the period, oldest first, as `(minute, good, bad)`: what a
    /// burn-down is drawn from. Minutes still in the minute ring come one by one; older ones
    /// come as one row per hour, at the hour's first minute inside the period.
    pub fn minutes(&self) -> impl Iterator<Item = (i64, u64, u64)> + '_ {
        let (first, last) = match self.head {
            Some(head) => (head - (self.len - 1), head),
            None => (1, 0),
        };
        let fine_from = last - self.good.len() as i64 + 1;
        let coarse = (first.div_euclid(60)..=(fine_from - 1).div_euclid(60))
            .filter(move |_| first < fine_from)
            .filter_map(move |hour| {
                let (lo, hi) = ((hour * 60).max(first), (hour * 60 + 59).min(fine_from - 1));
                let (good, bad) = self.part_hour(last, lo, hi);
                (good != 0 || bad != 0).then_some((lo, good, bad))
            });
        let fine = (fine_from.max(first)..=last).filter_map(move |minute| {
            let slot = self.slot(minute);
            let (good, bad) = (u64::from(self.good[slot]), u64::from(self.bad[slot]));
            (good != 0 || bad != 0).then_some((minute, good, bad))
        });
        coarse.chain(fine)
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
    fn a_30_day_slo_takes_kilobytes_not_megabytes() {
        // One minute-resolution ring over the whole period was 1.4 MB per 30-day SLO, and 1,000
        // profiles with two SLOs each held 1.3 GB.
        let w = Windows::new(mins(30 * 24 * 60));
        assert!(w.heap_bytes() < 16 * 1024, "{} bytes", w.heap_bytes());
        // A short period stays wholly at minute resolution.
        assert_eq!(Windows::new(mins(60)).heap_bytes(), 60 * 8 + 2 * 2 * 8);
    }

    #[test]
    fn a_long_period_is_exact_up_to_6_hours_and_within_an_hour_beyond() {
        let period = 30 * 24 * 60;
        let mut w = Windows::new(mins(period));
        let events = |m: i64| ((m % 13) as u64, u64::from(m % 7 == 0));
        let (start, head) = (1_000_000i64, 1_000_000 + period as i64 + 500);
        for m in start..=head {
            let (g, b) = events(m);
            w.record(m, g, b);
        }
        let brute = |lo: i64, hi: i64| {
            (lo..=hi).fold((0u64, 0u64), |acc, m| {
                let (g, b) = events(m);
                (acc.0 + g, acc.1 + b)
            })
        };
        for now in [head, head - 1, head - 37] {
            for win in STANDARD_WINDOWS {
                let got = w.totals(win, now);
                let lo = now - window_minutes(win) + 1;
                let want = brute(lo, now.min(head));
                if window_minutes(win) <= 6 * 60 {
                    assert_eq!(got, want, "window {win:?} at {now}");
                } else {
                    // Beyond the minute ring: within the oldest hour's events.
                    let hour = brute(lo, lo + 59);
                    assert!(
                        got.0.abs_diff(want.0) <= hour.0,
                        "{win:?}: {got:?} vs {want:?}"
                    );
                    assert!(
                        got.1.abs_diff(want.1) <= hour.1.max(1),
                        "{win:?}: {got:?} vs {want:?}"
                    );
                }
            }
        }
        // The period: exact but for its oldest, partial hour (at most 60 minutes of events).
        let got = w.totals(mins(period), head);
        let want = brute(head - period as i64 + 1, head);
        let hour = brute(head - period as i64 + 1, head - period as i64 + 60);
        assert!(got.0.abs_diff(want.0) <= hour.0, "{got:?} vs {want:?}");
        assert!(
            got.1.abs_diff(want.1) <= hour.1.max(1),
            "{got:?} vs {want:?}"
        );
        // The burn-down rows hold the same events as the period total, hours beyond 3 days.
        let rows: Vec<_> = w.minutes().collect();
        let sum = rows.iter().fold((0, 0), |a, r| (a.0 + r.1, a.1 + r.2));
        assert_eq!(sum, got);
        assert!(rows.len() < FINE_MINUTES as usize + period as usize / 60);
        assert!(rows.windows(2).all(|p| p[0].0 < p[1].0));
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
