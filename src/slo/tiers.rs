//! Multiwindow, multi-burn-rate alert tiers (SRE Workbook ch. 5) and their default factors.

use std::time::Duration;

const MINUTE: u64 = 60;
const HOUR: u64 = 60 * MINUTE;
const DAY: u64 = 24 * HOUR;

/// Who gets told: a page wakes someone, a ticket waits for working hours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Page,
    Ticket,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Page => "page",
            Severity::Ticket => "ticket",
        }
    }
}

/// One alert tier: active when the burn rate over both `long` and `short` exceeds `factor`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tier {
    /// Stable identifier used in the `sloburn_tier` label, e.g. `page-1h`.
    pub name: String,
    pub severity: Severity,
    pub long: Duration,
    pub short: Duration,
    /// Burn-rate threshold (multiple of the budget rate).
    pub factor: f64,
}

/// The Workbook's four tiers, as (severity, long, short, percent of budget consumed in `long`).
const WORKBOOK: [(Severity, &str, u64, u64, u32); 4] = [
    (Severity::Page, "page-1h", HOUR, 5 * MINUTE, 2),
    (Severity::Page, "page-6h", 6 * HOUR, 30 * MINUTE, 5),
    (Severity::Ticket, "ticket-1d", DAY, 2 * HOUR, 10),
    (Severity::Ticket, "ticket-3d", 3 * DAY, 6 * HOUR, 10),
];

/// The SRE Workbook tiers for `period`: factor = budget fraction × period ÷ long window, so a 30d
/// period gives 14.4 / 6 / 3 / 1 and a 28d period 13.44 / 5.6 / 2.8 / 0.933….
///
/// Tiers whose long window exceeds the period are left out: they could never see more than the
/// period's own events, so their factor would not mean what the Workbook intends.
pub fn default_tiers(period: Duration) -> Vec<Tier> {
    let period_secs = period.as_secs();
    WORKBOOK
        .iter()
        .filter(|(_, _, long, _, _)| *long <= period_secs)
        .map(|&(severity, name, long, short, percent)| Tier {
            name: name.to_string(),
            severity,
            long: Duration::from_secs(long),
            short: Duration::from_secs(short),
            // One division of exact integers-as-floats, so 14.4 is the nearest double to 14.4.
            factor: (f64::from(percent) * period_secs as f64) / (100.0 * long as f64),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(period_days: u64, expected: &[(&str, Severity, u64, u64, f64)]) {
        let tiers = default_tiers(Duration::from_secs(period_days * DAY));
        let got: Vec<_> = tiers
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.severity,
                    t.long.as_secs(),
                    t.short.as_secs(),
                    t.factor,
                )
            })
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn factors_for_30d_are_the_workbook_numbers() {
        check(
            30,
            &[
                ("page-1h", Severity::Page, HOUR, 5 * MINUTE, 14.4),
                ("page-6h", Severity::Page, 6 * HOUR, 30 * MINUTE, 6.0),
                ("ticket-1d", Severity::Ticket, DAY, 2 * HOUR, 3.0),
                ("ticket-3d", Severity::Ticket, 3 * DAY, 6 * HOUR, 1.0),
            ],
        );
    }

    #[test]
    fn factors_for_28d_scale_with_the_period() {
        check(
            28,
            &[
                ("page-1h", Severity::Page, HOUR, 5 * MINUTE, 13.44),
                ("page-6h", Severity::Page, 6 * HOUR, 30 * MINUTE, 5.6),
                ("ticket-1d", Severity::Ticket, DAY, 2 * HOUR, 2.8),
                (
                    "ticket-3d",
                    Severity::Ticket,
                    3 * DAY,
                    6 * HOUR,
                    28.0 / 30.0,
                ),
            ],
        );
        let t = default_tiers(Duration::from_secs(28 * DAY));
        assert!((t[3].factor - 0.9333).abs() < 1e-4);
    }

    #[test]
    fn tiers_longer_than_the_period_are_dropped() {
        check(
            1,
            &[
                ("page-1h", Severity::Page, HOUR, 5 * MINUTE, 0.48),
                ("page-6h", Severity::Page, 6 * HOUR, 30 * MINUTE, 0.2),
                ("ticket-1d", Severity::Ticket, DAY, 2 * HOUR, 0.1),
            ],
        );
    }
}
