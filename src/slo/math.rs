//! SLO math over [`Windows`]: SLI, error ratio, burn rate, remaining budget, time to exhaustion
//! and tier states, exactly as DESIGN.md "SLO math" defines them.
//!
//! Tier activation compares the *error ratio* with `factor × budget`, the same floating-point
//! operations the generated Prometheus rules perform, so the daemon and the rules agree even at
//! the threshold (comparing `e / B ≥ factor` could round differently).

use std::time::Duration;

use super::SloDef;
use super::tiers::{Severity, Tier};
use super::window::{STANDARD_WINDOWS, Windows};

/// e = bad / total; NaN when there were no events (undefined, never a made-up 0).
pub fn error_ratio(good: u64, bad: u64) -> f64 {
    let total = good as f64 + bad as f64;
    if total == 0.0 {
        f64::NAN
    } else {
        bad as f64 / total
    }
}

/// SLI = 1 − e; NaN when there were no events.
pub fn sli(good: u64, bad: u64) -> f64 {
    1.0 - error_ratio(good, bad)
}

/// Burn rate = e / B; 0 when there were no events (nothing burned).
pub fn burn_rate(good: u64, bad: u64, budget: f64) -> f64 {
    let e = error_ratio(good, bad);
    if e.is_nan() { 0.0 } else { e / budget }
}

/// Time until the remaining budget is gone at a constant `burn` rate.
///
/// DESIGN.md says "period / burn rate", which is the time to burn a *whole* budget; we scale it
/// by the fraction still remaining (`remaining × period / burn`), so a half-spent budget runs out
/// in half the time. `None` means never (no burn); zero means already exhausted.
pub fn time_to_exhaustion(remaining: f64, period: Duration, burn: f64) -> Option<Duration> {
    if remaining <= 0.0 {
        return Some(Duration::ZERO);
    }
    if burn.is_nan() || burn <= 0.0 || remaining.is_nan() {
        return None;
    }
    Duration::try_from_secs_f64(remaining * period.as_secs_f64() / burn).ok()
}

/// The numbers of one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SloStatus {
    pub window: Duration,
    pub good: u64,
    pub bad: u64,
    /// NaN when the window saw no events.
    pub sli: f64,
    /// NaN when the window saw no events.
    pub error_ratio: f64,
    /// 0 when the window saw no events.
    pub burn_rate: f64,
}

impl SloStatus {
    pub(super) fn of(window: Duration, (good, bad): (u64, u64), budget: f64) -> Self {
        SloStatus {
            window,
            good,
            bad,
            sli: sli(good, bad),
            error_ratio: error_ratio(good, bad),
            burn_rate: burn_rate(good, bad, budget),
        }
    }
}

/// One tier's state: active when both windows burn faster than `factor`.
#[derive(Debug, Clone, PartialEq)]
pub struct TierStatus {
    pub name: String,
    pub severity: Severity,
    pub factor: f64,
    pub long: SloStatus,
    pub short: SloStatus,
    pub active: bool,
    /// Both windows burn past `factor`, but a maintenance window silences the tier: `active`
    /// is then false, as the generated alert (`unless` the maintenance series) is.
    pub silenced: bool,
}

/// Everything the daemon exposes about one SLO at one minute.
#[derive(Debug, Clone, PartialEq)]
pub struct SloReport {
    pub name: String,
    pub objective: f64,
    /// B = 1 − objective.
    pub error_budget: f64,
    /// The standard windows (5m … 3d), shortest first.
    pub windows: Vec<SloStatus>,
    /// The period budget's window: for a calendar period, from its start to now.
    pub period: SloStatus,
    /// `Some` for a calendar period: what it is, and its `[start, end)` in unix seconds.
    pub calendar: Option<(super::Calendar, i64, i64)>,
    /// 1 − e_period / B; may go negative; 1 when the period saw no events.
    pub budget_remaining: f64,
    /// At the 1h burn rate (the fast page tier's long window): see [`time_to_exhaustion`].
    pub time_to_exhaustion: Option<Duration>,
    pub tiers: Vec<TierStatus>,
}

impl SloReport {
    /// The status of a standard window or the period, if it is one of them.
    pub fn window(&self, window: Duration) -> Option<&SloStatus> {
        if window == self.period.window {
            return Some(&self.period);
        }
        self.windows.iter().find(|s| s.window == window)
    }

    /// Whether any tier of `severity` is active.
    pub fn alerting(&self, severity: Severity) -> bool {
        self.tiers
            .iter()
            .any(|t| t.severity == severity && t.active)
    }

    /// A maintenance window covers the SLO: every tier that would fire is silenced instead.
    pub fn silence(&mut self) {
        for t in &mut self.tiers {
            t.silenced |= t.active;
            t.active = false;
        }
    }
}

fn tier_status(tier: &Tier, w: &Windows, now_minute: i64, budget: f64) -> TierStatus {
    let long = SloStatus::of(tier.long, w.totals(tier.long, now_minute), budget);
    let short = SloStatus::of(tier.short, w.totals(tier.short, now_minute), budget);
    let threshold = tier.factor * budget;
    // NaN (no events) compares false: no traffic never alerts.
    let active = long.error_ratio > threshold && short.error_ratio > threshold;
    TierStatus {
        name: tier.name.clone(),
        severity: tier.severity,
        factor: tier.factor,
        long,
        short,
        active,
        silenced: false,
    }
}

/// Evaluates `def` over `w` at `now_minute`.
pub fn evaluate(def: &SloDef, w: &Windows, now_minute: i64) -> SloReport {
    let budget = def.error_budget();
    let windows: Vec<SloStatus> = STANDARD_WINDOWS
        .iter()
        .map(|&d| SloStatus::of(d, w.totals(d, now_minute), budget))
        .collect();
    let period_window = def.period_window(now_minute);
    let period = SloStatus::of(period_window, w.totals(period_window, now_minute), budget);
    let calendar = def.calendar.map(|c| {
        let (s, e) = def.period_bounds(now_minute);
        (c, s * 60, e * 60)
    });
    // Time to exhaustion is scaled by the whole period's length, calendar or rolling.
    let period_length = calendar.map_or(def.period, |(_, s, e)| {
        Duration::from_secs(u64::try_from(e - s).unwrap_or(0))
    });
    let budget_remaining = 1.0 - period.burn_rate;
    let hour = SloStatus::of(
        Duration::from_secs(3600),
        w.totals(Duration::from_secs(3600), now_minute),
        budget,
    );
    SloReport {
        name: def.name.clone(),
        objective: def.objective,
        error_budget: budget,
        windows,
        period,
        calendar,
        budget_remaining,
        time_to_exhaustion: time_to_exhaustion(budget_remaining, period_length, hour.burn_rate),
        tiers: def
            .tiers
            .iter()
            .map(|t| tier_status(t, w, now_minute, budget))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::default_tiers;
    use std::collections::BTreeMap;

    const DAY: u64 = 86400;
    const NOW: i64 = 30_000_000;

    fn def(objective: f64, days: u64) -> SloDef {
        let period = Duration::from_secs(days * DAY);
        SloDef {
            name: "checkout-availability".into(),
            service: "checkout".into(),
            objective,
            period,
            calendar: None,
            tiers: default_tiers(period),
            labels: BTreeMap::new(),
            description: String::new(),
        }
    }

    /// `events` are `(minutes before NOW, good, bad)`; `expected` is a list of
    /// `(window, burn rate)`; tolerance covers float rounding only.
    fn check(events: &[(i64, u64, u64)], expected: &[(Duration, f64)]) -> SloReport {
        let d = def(0.999, 30);
        let mut w = Windows::new(d.period);
        for &(ago, good, bad) in events {
            w.record(NOW - ago, good, bad);
        }
        let report = evaluate(&d, &w, NOW);
        for &(window, burn) in expected {
            let got = report.window(window).expect("standard window").burn_rate;
            assert!(
                (got - burn).abs() < 1e-9,
                "window {window:?}: burn {got}, expected {burn}"
            );
        }
        report
    }

    fn hours(h: u64) -> Duration {
        Duration::from_secs(h * 3600)
    }

    fn minutes(m: u64) -> Duration {
        Duration::from_secs(m * 60)
    }

    /// 1000 events a minute over the last hour, `bad_per_mille` of them bad.
    fn last_hour(bad_per_mille: u64) -> Vec<(i64, u64, u64)> {
        (0..60)
            .map(|ago| (ago, 1000 - bad_per_mille, bad_per_mille))
            .collect()
    }

    #[test]
    fn half_percent_errors_in_the_last_hour_burn_five() {
        // 0.5 % errors against a 0.1 % budget: burn 5 in every window that saw only this hour.
        let events: Vec<_> = (0..60).map(|ago| (ago, 995, 5)).collect();
        let r = check(
            &events,
            &[
                (minutes(5), 5.0),
                (hours(1), 5.0),
                (hours(24), 5.0),
                (Duration::from_secs(30 * DAY), 5.0),
            ],
        );
        assert!((r.budget_remaining - -4.0).abs() < 1e-9);
        assert_eq!(r.time_to_exhaustion, Some(Duration::ZERO));
        // Burn 5 > 3 on 1d and 2h: the ticket-1d tier; 5 < 6 so no page.
        let active: Vec<_> = r
            .tiers
            .iter()
            .filter(|t| t.active)
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(active, ["ticket-1d", "ticket-3d"]);
        assert!(!r.alerting(Severity::Page));
    }

    #[test]
    fn burn_is_event_weighted_across_minutes() {
        // 10 bad of 1000 in one minute, 0 of 9000 in another: e = 10 / 10000, not mean(1%, 0%).
        let r = check(&[(0, 990, 10), (1, 9000, 0)], &[(minutes(5), 1.0)]);
        let s = r.window(minutes(5)).unwrap();
        assert_eq!((s.good, s.bad), (9990, 10));
        assert!((s.sli - 0.999).abs() < 1e-12);
    }

    #[test]
    fn no_traffic_means_nan_sli_zero_burn_full_budget() {
        let r = check(&[], &[(minutes(5), 0.0), (hours(72), 0.0)]);
        for s in r.windows.iter().chain([&r.period]) {
            assert!(s.sli.is_nan() && s.error_ratio.is_nan(), "{s:?}");
            assert_eq!(s.burn_rate, 0.0);
        }
        assert_eq!(r.budget_remaining, 1.0);
        assert_eq!(r.time_to_exhaustion, None);
        assert!(r.tiers.iter().all(|t| !t.active));
    }

    #[test]
    fn traffic_outside_the_short_window_keeps_it_undefined() {
        // Errors 10 minutes ago: the 1h window burns, the 5m window has no events at all.
        let r = check(&[(10, 0, 1000)], &[(minutes(5), 0.0), (hours(1), 1000.0)]);
        assert!(r.window(minutes(5)).unwrap().sli.is_nan());
        assert!(!r.tiers[0].active, "an empty short window must not page");
    }

    #[test]
    fn page_tier_needs_both_windows() {
        // 2 % errors (burn 20) for the last 5 minutes only: 5m burns 20, 1h burns 20 × 5/60.
        let mut events = last_hour(0);
        for e in events.iter_mut().take(5) {
            *e = (e.0, 980, 20);
        }
        let r = check(
            &events,
            &[(minutes(5), 20.0), (hours(1), 20.0 * 5.0 / 60.0)],
        );
        assert!(!r.tiers[0].active);
        // Same burn over the whole hour: both windows exceed 14.4.
        let r = check(&last_hour(20), &[(minutes(5), 20.0), (hours(1), 20.0)]);
        assert!(r.tiers[0].active && r.alerting(Severity::Page));
    }

    #[test]
    fn tier_threshold_is_strictly_greater() {
        // 1 % errors over 3 days against a 1 % budget is burn exactly 1: the 1× tier stays quiet.
        let mut d = def(0.99, 30);
        d.tiers = default_tiers(d.period);
        let mut w = Windows::new(d.period);
        for ago in 0..3 * 24 * 60 {
            w.record(NOW - ago, 99, 1);
        }
        let r = evaluate(&d, &w, NOW);
        let t = r.tiers.iter().find(|t| t.name == "ticket-3d").unwrap();
        assert!(!t.active, "{t:?}");
    }

    #[test]
    fn remaining_budget_and_time_to_exhaustion() {
        // Over 30 days: 250 bad of 1e6 → a quarter of the budget spent; the last hour burns 2.
        let mut events = vec![(10 * 24 * 60, 999_750 - 59_880, 250 - 120)];
        events.extend((0..60).map(|ago| (ago, 998, 2)));
        let r = check(&events, &[(hours(1), 2.0)]);
        assert!((r.budget_remaining - 0.75).abs() < 1e-9);
        // 0.75 × 30d / 2 = 11.25 days.
        let tte = r.time_to_exhaustion.unwrap().as_secs_f64();
        assert!((tte - 11.25 * DAY as f64).abs() < 1.0, "{tte}");
    }

    #[test]
    fn time_to_exhaustion_edges() {
        let p = Duration::from_secs(30 * DAY);
        assert_eq!(time_to_exhaustion(1.0, p, 1.0), Some(p));
        assert_eq!(time_to_exhaustion(-0.5, p, 3.0), Some(Duration::ZERO));
        assert_eq!(time_to_exhaustion(0.5, p, 0.0), None);
        assert_eq!(time_to_exhaustion(0.5, p, f64::NAN), None);
        assert_eq!(time_to_exhaustion(1.0, p, 1e-300), None);
    }
}
