//! The whole SLO from its shards: each shard's good and bad events per window added up, and
//! every ratio, burn rate, budget and tier recomputed from the sums with the same math as one
//! daemon's [`evaluate`](super::evaluate). Never an average of the shards' ratios: a shard
//! that sent ten events and one that sent a million weigh what they sent.

use std::collections::BTreeMap;
use std::time::Duration;

use super::math::{SloReport, SloStatus, TierStatus, time_to_exhaustion};

/// One shard's events of one SLO: good and bad per window length, and over the period budget
/// (kept apart: a calendar period's window is its start to now, not a standard length).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub windows: BTreeMap<Duration, (u64, u64)>,
    pub period: (u64, u64),
}

impl Counts {
    /// The events of every window `report` holds: the standard ones, the tiers' long and short
    /// ones, and the period.
    pub fn of(report: &SloReport) -> Counts {
        let mut windows = BTreeMap::new();
        let tier_windows = report.tiers.iter().flat_map(|t| [&t.long, &t.short]);
        for s in report.windows.iter().chain(tier_windows) {
            windows.insert(s.window, (s.good, s.bad));
        }
        Counts {
            windows,
            period: (report.period.good, report.period.bad),
        }
    }
}

/// `local` with each of `others` added: the events of every window summed, then SLI, error
/// ratio, burn rate, budget, time to exhaustion and tier states recomputed from the sums.
/// A window that one of `others` lacks is an error naming it (that shard runs another config),
/// never a zero.
pub fn merged(local: &SloReport, others: &[Counts]) -> Result<SloReport, Duration> {
    let budget = local.error_budget;
    let add = |s: &SloStatus| -> Result<SloStatus, Duration> {
        let (mut good, mut bad) = (s.good, s.bad);
        for o in others {
            let (g, b) = o.windows.get(&s.window).copied().ok_or(s.window)?;
            good = good.saturating_add(g);
            bad = bad.saturating_add(b);
        }
        Ok(SloStatus::of(s.window, (good, bad), budget))
    };
    let windows = local
        .windows
        .iter()
        .map(add)
        .collect::<Result<Vec<_>, _>>()?;
    let (mut good, mut bad) = (local.period.good, local.period.bad);
    for o in others {
        good = good.saturating_add(o.period.0);
        bad = bad.saturating_add(o.period.1);
    }
    let period = SloStatus::of(local.period.window, (good, bad), budget);
    let mut tiers = Vec::with_capacity(local.tiers.len());
    for t in &local.tiers {
        let long = add(&t.long)?;
        let short = add(&t.short)?;
        let threshold = t.factor * budget;
        tiers.push(TierStatus {
            long,
            short,
            active: long.error_ratio > threshold && short.error_ratio > threshold,
            // A maintenance window is the daemon's to apply (`/api/slos` does).
            silenced: false,
            ..t.clone()
        });
    }
    let period_length = local.calendar.map_or(local.period.window, |(_, s, e)| {
        Duration::from_secs(u64::try_from(e - s).unwrap_or(0))
    });
    let budget_remaining = 1.0 - period.burn_rate;
    let hour = windows
        .iter()
        .find(|s| s.window == Duration::from_secs(3600))
        .map_or(0.0, |s| s.burn_rate);
    Ok(SloReport {
        name: local.name.clone(),
        objective: local.objective,
        error_budget: budget,
        windows,
        period,
        calendar: local.calendar,
        budget_remaining,
        time_to_exhaustion: time_to_exhaustion(budget_remaining, period_length, hour),
        tiers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::{SloDef, Windows, default_tiers, evaluate};

    const DAY: u64 = 86400;
    const NOW: i64 = 30_000_000;

    fn def() -> SloDef {
        let period = Duration::from_secs(30 * DAY);
        SloDef {
            name: "checkout".into(),
            service: "checkout".into(),
            objective: 0.99,
            period,
            calendar: None,
            tiers: default_tiers(period),
            labels: BTreeMap::new(),
            description: String::new(),
        }
    }

    /// Windows holding `minutes` (minutes ago, good, bad).
    fn shard(minutes: &[(i64, u64, u64)]) -> Windows {
        let mut w = Windows::new(def().period);
        for &(ago, g, b) in minutes {
            w.record(NOW - ago, g, b);
        }
        w.advance(NOW);
        w
    }

    fn check(shards: &[&[(i64, u64, u64)]]) {
        let d = def();
        let reports: Vec<SloReport> = shards
            .iter()
            .map(|m| evaluate(&d, &shard(m), NOW))
            .collect();
        let counts: Vec<Counts> = reports[1..].iter().map(Counts::of).collect();
        let got = merged(&reports[0], &counts).unwrap();
        let all: Vec<(i64, u64, u64)> = shards.iter().flat_map(|m| m.iter().copied()).collect();
        let want = evaluate(&d, &shard(&all), NOW);
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
    }

    #[test]
    fn the_whole_slo_is_what_one_daemon_with_every_shards_events_would_report() {
        check(&[
            &[(0, 900, 100), (90, 50, 0)],
            &[(3, 10, 5)],
            &[(2000, 1, 1)],
        ]);
        check(&[&[], &[(0, 10, 10)], &[]]);
        check(&[&[], &[], &[]]);
        check(&[&[(1, 1_000_000, 0)], &[(1, 0, 1000)]]);
    }

    #[test]
    fn ratios_are_recomputed_from_summed_counts_never_averaged() {
        let d = def();
        // 10 events all bad on one shard, 990 all good on another: 1 % bad, burn 1, not 50 %.
        let a = evaluate(&d, &shard(&[(0, 0, 10)]), NOW);
        let b = evaluate(&d, &shard(&[(0, 990, 0)]), NOW);
        let m = merged(&a, &[Counts::of(&b)]).unwrap();
        let five = &m.windows[0];
        assert_eq!((five.good, five.bad), (990, 10));
        assert!((five.burn_rate - 1.0).abs() < 1e-9, "{}", five.burn_rate);
        assert!(a.tiers.iter().any(|t| t.active));
        assert!(m.tiers.iter().all(|t| !t.active));
        assert!(
            (m.budget_remaining - 0.0).abs() < 1e-9,
            "{}",
            m.budget_remaining
        );
    }

    #[test]
    fn a_shard_without_a_window_is_an_error_naming_it_never_a_zero() {
        let d = def();
        let a = evaluate(&d, &shard(&[(0, 1, 1)]), NOW);
        let mut c = Counts::of(&a);
        c.windows.remove(&Duration::from_secs(3600));
        assert_eq!(merged(&a, &[c]), Err(Duration::from_secs(3600)));
    }
}
