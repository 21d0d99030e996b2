//! Calendar-aligned SLO periods: the budget of an ISO week (from Monday), a month or a quarter
//! in an IANA time zone resets at local midnight of the period's first day, DST included.
//!
//! Pure: the instant is passed in; the zone rules are the compiled-in tz database (`crate::zone`).
//! Only the period budget is calendar-aligned: the burn-rate windows stay rolling.

use crate::zone::Tz;
use chrono::{Datelike, Duration as Days, Months, NaiveDate, TimeZone, Utc};
use std::time::Duration;

const DAY: u64 = 86400;

/// Which calendar span a period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CalendarUnit {
    Week,
    Month,
    Quarter,
}

impl CalendarUnit {
    pub const NAMES: [&'static str; 3] = ["week", "month", "quarter"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "week" => Some(CalendarUnit::Week),
            "month" => Some(CalendarUnit::Month),
            "quarter" => Some(CalendarUnit::Quarter),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CalendarUnit::Week => "week",
            CalendarUnit::Month => "month",
            CalendarUnit::Quarter => "quarter",
        }
    }
}

/// A calendar period in a time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calendar {
    pub unit: CalendarUnit,
    pub tz: Tz,
}

impl Calendar {
    /// The nominal length (7d, 30d, 90d): what the default tier factors and
    /// `slo:time_period:days` are scaled by.
    pub fn nominal(&self) -> Duration {
        Duration::from_secs(match self.unit {
            CalendarUnit::Week => 7 * DAY,
            CalendarUnit::Month => 30 * DAY,
            CalendarUnit::Quarter => 90 * DAY,
        })
    }

    /// The longest such period can be (a 31-day month, a 92-day quarter), plus a day of margin
    /// for clock changes (a DST change back adds an hour; zones changing sides of the date line
    /// have repeated a day): the length of the per-minute ring that must hold a whole period.
    pub fn longest(&self) -> Duration {
        let days = match self.unit {
            CalendarUnit::Week => 7,
            CalendarUnit::Month => 31,
            CalendarUnit::Quarter => 92,
        };
        Duration::from_secs((days + 1) * DAY)
    }

    /// `[start, end)` in unix seconds of the period containing `unix_seconds`.
    pub fn bounds(&self, unix_seconds: i64) -> (i64, i64) {
        // Year 1 .. 9999: chrono covers far more, but a bogus clock must not reach its edges.
        let s = unix_seconds.clamp(-62_135_596_800, 253_402_300_799 - 100 * DAY as i64);
        let Some(utc) = Utc.timestamp_opt(s, 0).single() else {
            return (s, s + self.nominal().as_secs() as i64);
        };
        let date = utc.with_timezone(&self.tz).date_naive();
        let first = match self.unit {
            CalendarUnit::Week => {
                date - Days::days(i64::from(date.weekday().num_days_from_monday()))
            }
            CalendarUnit::Month => date.with_day(1).unwrap_or(date),
            CalendarUnit::Quarter => {
                NaiveDate::from_ymd_opt(date.year(), (date.month0() / 3) * 3 + 1, 1).unwrap_or(date)
            }
        };
        let next = match self.unit {
            CalendarUnit::Week => first.checked_add_days(chrono::Days::new(7)),
            CalendarUnit::Month => first.checked_add_months(Months::new(1)),
            CalendarUnit::Quarter => first.checked_add_months(Months::new(3)),
        };
        let start = local_midnight(self.tz, first);
        let end = next
            .map(|d| local_midnight(self.tz, d))
            .unwrap_or(start + self.nominal().as_secs() as i64);
        (start, end)
    }
}

/// `unix_seconds` as RFC 3339 in `tz` (`2026-10-01T00:00:00+02:00`).
pub fn rfc3339_in(tz: Tz, unix_seconds: i64) -> String {
    Utc.timestamp_opt(unix_seconds, 0)
        .single()
        .map(|t| t.with_timezone(&tz).to_rfc3339())
        .unwrap_or_default()
}

/// The first instant of `date` in `tz`: midnight, or, where midnight falls in a DST gap (some
/// zones change at 00:00), the first local minute that exists; the earlier one when ambiguous.
fn local_midnight(tz: Tz, date: NaiveDate) -> i64 {
    let midnight = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    for minute in 0..(24 * 60) {
        let local = midnight + Days::minutes(minute);
        if let Some(t) = tz.from_local_datetime(&local).earliest() {
            return t.timestamp();
        }
    }
    Utc.from_utc_datetime(&midnight).timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s)
            .expect("rfc3339")
            .timestamp()
    }

    fn cal(unit: CalendarUnit, tz: &str) -> Calendar {
        Calendar {
            unit,
            tz: tz.parse().expect("zone"),
        }
    }

    #[test]
    fn a_berlin_month_starts_at_local_midnight_in_summer_and_winter_time() {
        let c = cal(CalendarUnit::Month, "Europe/Berlin");
        // October 2026: CEST (UTC+2) on the 1st, CET (UTC+1) from the 25th: 31 days + 1 hour.
        let (s, e) = c.bounds(utc("2026-10-15T12:00:00Z"));
        assert_eq!(s, utc("2026-09-30T22:00:00Z"));
        assert_eq!(e, utc("2026-10-31T23:00:00Z"));
        assert_eq!(e - s, (31 * 24 + 1) * 3600);
        // March 2026: CET on the 1st, CEST from the 29th: 31 days − 1 hour.
        let (s, e) = c.bounds(utc("2026-03-29T12:00:00Z"));
        assert_eq!(s, utc("2026-02-28T23:00:00Z"));
        assert_eq!(e, utc("2026-03-31T22:00:00Z"));
        assert_eq!(e - s, (31 * 24 - 1) * 3600);
        // The last second of March in Berlin is still March; the next is April.
        assert_eq!(c.bounds(utc("2026-03-31T21:59:59Z")).0, s);
        assert_eq!(c.bounds(utc("2026-03-31T22:00:00Z")).0, e);
        // In UTC the same instant is still March.
        let u = cal(CalendarUnit::Month, "UTC");
        assert_eq!(
            u.bounds(utc("2026-03-31T22:00:00Z")).0,
            utc("2026-03-01T00:00:00Z")
        );
    }

    #[test]
    fn weeks_start_on_monday_and_quarters_on_the_first_of_jan_apr_jul_oct() {
        let w = cal(CalendarUnit::Week, "Europe/Berlin");
        // Sunday 2026-10-25 is the DST change: that week has 7 days + 1 hour.
        let (s, e) = w.bounds(utc("2026-10-25T12:00:00Z"));
        assert_eq!(s, utc("2026-10-18T22:00:00Z"));
        assert_eq!(e, utc("2026-10-25T23:00:00Z"));
        let q = cal(CalendarUnit::Quarter, "Europe/Berlin");
        let (s, e) = q.bounds(utc("2026-11-30T00:00:00Z"));
        assert_eq!(s, utc("2026-09-30T22:00:00Z"));
        assert_eq!(e, utc("2026-12-31T23:00:00Z"));
        let (s, _) = q.bounds(utc("2026-02-10T00:00:00Z"));
        assert_eq!(s, utc("2025-12-31T23:00:00Z"));
    }

    #[test]
    fn periods_tile_time_in_zones_with_odd_changes() {
        // Zones that change at midnight (Santiago, Beirut, Havana) or skipped a whole day
        // (Apia, 2011-12-30): every instant lies in exactly one period, each period starts
        // where the one before ended, and none is longer than the ring.
        for tz in [
            "America/Santiago",
            "Asia/Beirut",
            "America/Havana",
            "Pacific/Apia",
        ] {
            let c = cal(CalendarUnit::Week, tz);
            let mut t = utc("2011-01-01T00:00:00Z");
            for _ in 0..700 {
                let (s, e) = c.bounds(t);
                assert!(s <= t && t < e, "{tz}: {s} <= {t} < {e}");
                assert_eq!(c.bounds(e).0, e, "{tz}: the next period starts at the end");
                assert!(e - s <= c.longest().as_secs() as i64);
                t = e;
            }
        }
    }

    #[test]
    fn the_ring_holds_the_longest_period() {
        for unit in [
            CalendarUnit::Week,
            CalendarUnit::Month,
            CalendarUnit::Quarter,
        ] {
            let c = cal(unit, "Europe/Berlin");
            let mut t = utc("2024-01-01T00:00:00Z");
            let mut longest = 0;
            for _ in 0..60 {
                let (s, e) = c.bounds(t);
                longest = longest.max(e - s);
                t = e;
            }
            assert!(longest <= c.longest().as_secs() as i64, "{unit:?}");
        }
    }
}
