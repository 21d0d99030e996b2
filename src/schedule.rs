//! Schedules: when a profile runs.
//!
//! This module owns
//! - parsing a `schedule:` value (5- or 6-field crontab, `@macros`, a time zone) and
//!   `every:` intervals into a [`Schedule`];
//! - the pure firing rule [`Schedule::next_after`], including what happens at daylight-saving
//!   transitions;
//! - start-time jitter ([`jittered`]) and the overlap policy state machine ([`Slot`]);
//! - [`Ticker`], the only async part: it sleeps until the next firing on an injected [`Clock`].
//!
//! Everything except [`Ticker`] is pure: `now` is always an argument; the ticker reads the one
//! [`Clock`](crate::clock::Clock) it is given.
//!
//! # Daylight-saving time (Vixie cron semantics)
//! Cron fields describe local wall-clock times, and a DST transition makes some wall-clock
//! times happen zero times (spring-forward gap) or twice (fall-back fold). Like Vixie cron
//! (and its descendants cronie and ISC cron) we split jobs in two kinds:
//! - a *wildcard* job has a seconds, minute or hour field that starts with `*` (`*`, `*/5`,
//!   `@hourly`). It describes a rhythm of real time, so it fires at every real instant whose
//!   wall clock matches: both passes through a fold, and not at all inside a gap (the hour
//!   before and the hour after still fire, so every real hour gets its run);
//! - a *fixed-time* job (`30 2 * * *`, `0 9,17 * * 1-5`, `@daily`) describes a time of day and
//!   runs once per matching day: in a fold only on the first pass, and a time that falls in a
//!   gap runs at the first real instant after the gap (03:00 for a 02:30 job in
//!   Europe/Berlin). Several gap times collapse into that one run: never twice.
//!
//! Croner applies its own DST rules (it calls a job fixed only when seconds, minute and hour
//! are all single values, so `0,30 2 * * *` would lose its gap run), so we use croner only on
//! naive wall-clock times and map them to instants here.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::clock::Clock;
use crate::zone::Tz;
use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use rand::RngExt;

/// The shortest `every:` interval. Below one second a load profile would overlap itself by
/// construction, and the firing rule works at second resolution anyway.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// The largest DST fold or gap we account for. Real zones shift by one hour (Lord Howe by 30
/// minutes); three hours leaves room for historical double summer time.
const MAX_SHIFT: TimeDelta = TimeDelta::hours(3);
const SHIFT_SAMPLE: TimeDelta = TimeDelta::minutes(15);

const MACROS: &str = "@hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually";

/// Why a schedule was rejected. The messages are printed after `profiles.x.schedule:`, so
/// they are short and name the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule is empty")]
    Empty,
    #[error("expected 5 or 6 fields, found {0}")]
    FieldCount(usize),
    #[error("unknown macro `{0}` (expected one of {MACROS})")]
    UnknownMacro(String),
    #[error("invalid {field} field `{value}` (allowed: {allowed})")]
    InvalidField {
        field: &'static str,
        value: String,
        allowed: &'static str,
    },
    #[error("invalid cron expression: {0}")]
    Invalid(String),
    #[error("schedule never fires")]
    NeverFires,
    #[error("unknown time zone `{name}`{}", did_you_mean(.suggestion))]
    UnknownTimeZone {
        name: String,
        suggestion: Option<&'static str>,
    },
    #[error("interval must be at least 1s")]
    IntervalTooShort,
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    suggestion.map_or_else(String::new, |s| format!(" (did you mean `{s}`?)"))
}

/// A parsed cron expression together with the DST class it was given by its source text.
#[derive(Clone, PartialEq, Eq)]
pub struct CronExpr {
    // Shared: croner's pattern owns a bitfield per field (its years' alone is hundreds of
    // bytes), and every run and schedule loop holds a copy of its profile. Cloned, 1,000
    // profiles held 22 MB of patterns (heaptrack, `bench/scale.py`).
    cron: std::sync::Arc<Cron>,
    wildcard: bool,
}

impl CronExpr {
    /// Whether DST treats this as a wildcard job (see the module docs).
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronExpr")
            .field("pattern", &self.cron.as_str())
            .field("wildcard", &self.wildcard)
            .finish()
    }
}

/// When a profile runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// A crontab expression evaluated on the wall clock of `tz`. `source` is the text as
    /// written, for logs and the status page.
    Cron {
        expr: CronExpr,
        source: String,
        tz: Tz,
    },
    /// A fixed interval, aligned to multiples of the interval since the Unix epoch so that
    /// replicas and restarts agree on the firing instants without coordination.
    Every(Duration),
}

impl Schedule {
    /// Parses a `schedule:` value: a 5-field crontab (`min hour dom month dow`), a 6-field one
    /// with seconds first, or one of the macros `@hourly @daily @midnight @weekly @monthly
    /// @yearly @annually`. `tz` is an IANA name; without one the schedule runs on UTC.
    pub fn parse(spec: &str, tz: Option<&str>) -> Result<Schedule, ScheduleError> {
        let tz = match tz {
            Some(name) => parse_tz(name)?,
            None => Tz::UTC,
        };
        let source = spec.trim();
        if source.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let expanded = if source.starts_with('@') {
            expand_macro(source)?
        } else {
            source
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 && fields.len() != 6 {
            return Err(ScheduleError::FieldCount(fields.len()));
        }
        let cron = parser()
            .parse(expanded)
            .map_err(|e| field_error(&fields, e))?;
        // Vixie's MIN_STAR/HR_STAR rule, extended to the optional seconds field.
        let time_fields = if fields.len() == 6 { 3 } else { 2 };
        let wildcard = fields.iter().take(time_fields).any(|f| f.starts_with('*'));
        let expr = CronExpr {
            cron: std::sync::Arc::new(cron),
            wildcard,
        };
        if !fires_at_all(&expr.cron) {
            return Err(ScheduleError::NeverFires);
        }
        Ok(Schedule::Cron {
            expr,
            source: source.to_string(),
            tz,
        })
    }

    /// An `every:` schedule. See [`Schedule::Every`] for the alignment.
    pub fn every(interval: Duration) -> Result<Schedule, ScheduleError> {
        if interval < MIN_INTERVAL {
            return Err(ScheduleError::IntervalTooShort);
        }
        Ok(Schedule::Every(interval))
    }

    /// The first firing strictly after `now`, or `None` if there is none representable.
    pub fn next_after(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron { expr, tz, .. } => next_cron(expr, *tz, now),
            Schedule::Every(interval) => next_every(*interval, now),
        }
    }

    /// The time between the next two firings after `now`. The daemon alerts when a profile has
    /// not completed a run within two of these. Near a DST transition a daily job yields 23 or
    /// 25 hours, which is the honest answer for that day. `None` when the schedule has fewer
    /// than two further firings.
    pub fn interval_estimate(&self, now: DateTime<Utc>) -> Option<Duration> {
        if let Schedule::Every(interval) = self {
            return Some(*interval);
        }
        let first = self.next_after(now)?;
        let second = self.next_after(first)?;
        (second - first).to_std().ok()
    }
}

/// For logs and the status page: the expression as written, with its zone unless UTC.
impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Cron { source, tz, .. } if *tz == Tz::UTC => f.write_str(source),
            Schedule::Cron { source, tz, .. } => write!(f, "{source} ({})", tz.name()),
            Schedule::Every(interval) => {
                let secs = interval.as_secs();
                match (interval.subsec_nanos(), secs) {
                    (0, s) if s % 3600 == 0 => write!(f, "every {}h", s / 3600),
                    (0, s) if s % 60 == 0 => write!(f, "every {}m", s / 60),
                    (0, s) => write!(f, "every {s}s"),
                    _ => write!(f, "every {}ms", interval.as_millis()),
                }
            }
        }
    }
}

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

fn expand_macro(spec: &str) -> Result<&'static str, ScheduleError> {
    let pattern = match spec.to_ascii_lowercase().as_str() {
        "@hourly" => "0 * * * *",
        "@daily" | "@midnight" => "0 0 * * *",
        "@weekly" => "0 0 * * 0",
        "@monthly" => "0 0 1 * *",
        "@yearly" | "@annually" => "0 0 1 1 *",
        _ => return Err(ScheduleError::UnknownMacro(spec.to_string())),
    };
    Ok(pattern)
}

/// Croner reports errors in its own words and without saying which field is wrong; parsing
/// each field alone (the others `*`) finds the culprit.
fn field_error(fields: &[&str], whole: croner::errors::CronError) -> ScheduleError {
    const NAMES: [(&str, &str); 6] = [
        ("second", "0-59"),
        ("minute", "0-59"),
        ("hour", "0-23"),
        ("day-of-month", "1-31, L, W"),
        ("month", "1-12 or JAN-DEC"),
        ("day-of-week", "0-7 or SUN-SAT, L, #"),
    ];
    let offset = 6 - fields.len();
    for (i, value) in fields.iter().enumerate() {
        let probe: Vec<&str> = (0..fields.len())
            .map(|j| if j == i { *value } else { "*" })
            .collect();
        if parser().parse(&probe.join(" ")).is_err() {
            let (field, allowed) = NAMES[i + offset];
            return ScheduleError::InvalidField {
                field,
                value: (*value).to_string(),
                allowed,
            };
        }
    }
    ScheduleError::Invalid(whole.to_string())
}

/// Rejects patterns such as `0 0 30 2 *` at load time, so that the daemon never holds a
/// profile that silently never runs. Every valid day-of-month/month combination recurs within
/// 28 years (the Gregorian weekday cycle, which also covers February 29).
fn fires_at_all(cron: &Cron) -> bool {
    let Some(start) =
        chrono::NaiveDate::from_ymd_opt(2001, 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0))
    else {
        return false;
    };
    cron.find_next_occurrence(&start, true)
        .is_ok_and(|first| first.signed_duration_since(start) < TimeDelta::days(29 * 366))
}

fn parse_tz(name: &str) -> Result<Tz, ScheduleError> {
    Tz::from_str(name.trim()).map_err(|_| ScheduleError::UnknownTimeZone {
        name: name.to_string(),
        suggestion: suggest_tz(name.trim()),
    })
}

/// A case-insensitive exact match, else the closest name within a small edit distance. It runs
/// only on the error path, over ~600 names.
fn suggest_tz(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    let mut best: Option<(usize, &'static str)> = None;
    for candidate in Tz::names() {
        let distance = strsim::levenshtein(&lower, &candidate.to_ascii_lowercase());
        if best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    let budget = (name.chars().count() / 4).clamp(1, 3);
    best.filter(|(d, _)| *d <= budget).map(|(_, n)| n)
}

fn next_every(interval: Duration, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let step = i128::try_from(interval.as_nanos()).ok()?;
    if step == 0 {
        return None;
    }
    let now_ns =
        i128::from(now.timestamp()) * 1_000_000_000 + i128::from(now.timestamp_subsec_nanos());
    let next = (now_ns.div_euclid(step) + 1).checked_mul(step)?;
    let secs = i64::try_from(next.div_euclid(1_000_000_000)).ok()?;
    let nanos = u32::try_from(next.rem_euclid(1_000_000_000)).ok()?;
    DateTime::from_timestamp(secs, nanos)
}

fn offset_at(tz: Tz, at: DateTime<Utc>) -> TimeDelta {
    TimeDelta::seconds(i64::from(
        tz.offset_from_utc_datetime(&at.naive_utc())
            .fix()
            .local_minus_utc(),
    ))
}

/// The wall clock of `at` in `tz`; `None` only within hours of chrono's representable range,
/// where `naive_local` would panic.
fn local(tz: Tz, at: DateTime<Utc>) -> Option<NaiveDateTime> {
    at.naive_utc().checked_add_signed(offset_at(tz, at))
}

/// How far the wall clock of some instant in `(now, now + MAX_SHIFT]` falls below the wall
/// clock of `now`: non-zero only when a fold is ahead, whose second pass repeats wall-clock
/// times we would otherwise treat as past.
fn fold_lookback(tz: Tz, now: DateTime<Utc>) -> TimeDelta {
    let here = offset_at(tz, now);
    samples(now, now.checked_add_signed(MAX_SHIFT).unwrap_or(now))
        .map(|s| here - offset_at(tz, s))
        .max()
        .unwrap_or(TimeDelta::zero())
        .max(TimeDelta::zero())
}

/// How far past the wall clock of `at` a naive match can still map to an instant before
/// `at`: non-zero only when a fold ended shortly before `at`.
fn fold_lookahead(tz: Tz, at: DateTime<Utc>) -> TimeDelta {
    let here = offset_at(tz, at);
    samples(at.checked_sub_signed(MAX_SHIFT).unwrap_or(at), at)
        .map(|s| offset_at(tz, s) - here)
        .max()
        .unwrap_or(TimeDelta::zero())
        .max(TimeDelta::zero())
}

fn samples(from: DateTime<Utc>, to: DateTime<Utc>) -> impl Iterator<Item = DateTime<Utc>> {
    std::iter::successors(Some(from), move |s| {
        s.checked_add_signed(SHIFT_SAMPLE)
            .filter(|next| *next <= to)
    })
}

/// Scans naive wall-clock matches in order and keeps the earliest real instant after `now`.
/// Wall-clock order equals real order except across a fold, so the scan starts early enough
/// to see a fold's second pass and stops once no later wall-clock time can map before the
/// best instant found.
fn next_cron(expr: &CronExpr, tz: Tz, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut cursor = local(tz, now)?.checked_sub_signed(fold_lookback(tz, now))?;
    let mut inclusive = true;
    let mut best: Option<DateTime<Utc>> = None;
    let mut horizon: Option<NaiveDateTime> = None;
    loop {
        let Ok(wall) = expr.cron.find_next_occurrence(&cursor, inclusive) else {
            return best;
        };
        if horizon.is_some_and(|h| wall > h) {
            return best;
        }
        for at in instants(expr, tz, wall).into_iter().flatten() {
            if at > now && best.is_none_or(|b| at < b) {
                best = Some(at);
                // Without a representable horizon the scan could not stop, so stop here.
                horizon = Some(
                    local(tz, at)
                        .and_then(|l| l.checked_add_signed(fold_lookahead(tz, at)))
                        .unwrap_or(wall),
                );
            }
        }
        cursor = wall;
        inclusive = false;
    }
}

/// The real instants at which a matching wall-clock time fires (see the module docs).
fn instants(expr: &CronExpr, tz: Tz, wall: NaiveDateTime) -> [Option<DateTime<Utc>>; 2] {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(at) => [Some(at.to_utc()), None],
        LocalResult::Ambiguous(first, second) if expr.wildcard => {
            [Some(first.to_utc()), Some(second.to_utc())]
        }
        LocalResult::Ambiguous(first, _) => [Some(first.to_utc()), None],
        LocalResult::None if expr.wildcard => [None, None],
        LocalResult::None => [gap_end(tz, wall), None],
    }
}

/// The first real instant whose wall clock is past `wall`, which lies in a gap. The gap's
/// transition instant is bracketed by reading `wall` with each of the two offsets around it,
/// then found by bisection to the second.
fn gap_end(tz: Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let as_utc = wall.and_utc();
    let one = offset_at(tz, as_utc);
    let other = offset_at(tz, as_utc.checked_sub_signed(one)?);
    let past = |at: DateTime<Utc>| local(tz, at).is_some_and(|l| l > wall);
    let mut lo = as_utc.checked_sub_signed(one.max(other))?;
    let mut hi = as_utc.checked_sub_signed(one.min(other))?;
    if past(lo) || !past(hi) {
        return None;
    }
    while hi - lo > TimeDelta::seconds(1) {
        let mid = lo + (hi - lo) / 2;
        if past(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// Spreads a run's start over `[next, next + max_jitter]` (inclusive, nanosecond resolution)
/// so that many replicas or profiles on the same schedule do not hit a target in lockstep.
/// A jitter beyond ~584 years is clamped; an unrepresentable result falls back to `next`.
pub fn jittered(
    next: DateTime<Utc>,
    max_jitter: Duration,
    rng: &mut impl rand::Rng,
) -> DateTime<Utc> {
    let max = u64::try_from(max_jitter.as_nanos()).unwrap_or(u64::MAX);
    if max == 0 {
        return next;
    }
    let delay = rng.random_range(0..=max);
    i64::try_from(delay)
        .ok()
        .and_then(|ns| next.checked_add_signed(TimeDelta::nanoseconds(ns)))
        .unwrap_or(next)
}

/// What to do when a run is due while the previous one of the same profile still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Drop the due run, like Kubernetes CronJob `concurrencyPolicy: Forbid`. The default:
    /// a load test that overlaps itself doubles the load it was sized for.
    #[default]
    Skip,
    /// Start the due run as soon as the current one finishes. The queue is one deep: further
    /// due runs while one is pending are dropped, so a profile that is slower than its
    /// schedule runs back to back instead of building an unbounded backlog.
    Queue,
}

/// The answer to "a run is due".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Start,
    Skip,
    Enqueue,
}

/// The overlap state of one profile. Pure: the caller says whether a run is in progress and
/// reports when it finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    policy: Overlap,
    pending: bool,
}

impl Slot {
    pub fn new(policy: Overlap) -> Slot {
        Slot {
            policy,
            pending: false,
        }
    }

    pub fn policy(&self) -> Overlap {
        self.policy
    }

    /// Whether a queued run waits for the current one to finish.
    pub fn has_pending(&self) -> bool {
        self.pending
    }

    /// A run is due. When nothing runs the due run starts and also stands in for any pending
    /// one, so a stale queue entry can never cause a second start.
    pub fn on_due(&mut self, running: bool) -> Decision {
        if !running {
            self.pending = false;
            return Decision::Start;
        }
        match self.policy {
            Overlap::Skip => Decision::Skip,
            Overlap::Queue if self.pending => Decision::Skip,
            Overlap::Queue => {
                self.pending = true;
                Decision::Enqueue
            }
        }
    }

    /// The running run finished; returns whether the queued run should start now.
    pub fn on_finished(&mut self) -> bool {
        std::mem::take(&mut self.pending)
    }
}

/// One firing: the scheduled instant, and the jittered instant the run was released at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    pub scheduled: DateTime<Utc>,
    pub released: DateTime<Utc>,
}

/// Sleeps from firing to firing. The daemon's per-profile loop is meant to be a `select!` over
/// `ticker.tick()`, the profile's running task finishing, and the shutdown token: a tick goes
/// through [`Slot::on_due`], a finished run through [`Slot::on_finished`].
///
/// Firings missed while the process was stopped or busy are not replayed (a burst of catch-up
/// load tests helps nobody), and a scheduled instant is never returned twice, even if the wall
/// clock steps backwards.
#[derive(Debug)]
pub struct Ticker {
    schedule: Schedule,
    max_jitter: Duration,
    clock: Clock,
    last: Option<DateTime<Utc>>,
}

/// Long sleeps are cut into pieces so that a wall-clock step (NTP, suspend) is noticed
/// within this bound instead of after the whole monotonic sleep.
const MAX_SLEEP: Duration = Duration::from_secs(60);

impl Ticker {
    pub fn new(schedule: Schedule, max_jitter: Duration, clock: Clock) -> Ticker {
        Ticker {
            schedule,
            max_jitter,
            clock,
            last: None,
        }
    }

    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The wall clock it sleeps on (a test steps it as NTP would).
    pub fn clock_mut(&mut self) -> &mut Clock {
        &mut self.clock
    }

    /// Waits for the next firing and returns it, or `None` when the schedule has no further
    /// firing. Cancel-safe: dropping the future loses nothing but the jitter draw.
    pub async fn tick(&mut self, rng: &mut impl rand::Rng) -> Option<Tick> {
        let now = self.clock.utc();
        let from = self.last.map_or(now, |last| last.max(now));
        let scheduled = self.schedule.next_after(from)?;
        let released = jittered(scheduled, self.max_jitter, rng);
        loop {
            let now = self.clock.utc();
            let Ok(remaining) = (released - now).to_std() else {
                break;
            };
            if remaining.is_zero() {
                break;
            }
            tokio::time::sleep(remaining.min(MAX_SLEEP)).await;
        }
        self.last = Some(scheduled);
        Some(Tick {
            scheduled,
            released,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("bad test time {s}: {e}"))
            .to_utc()
    }

    fn sched(spec: &str, tz: Option<&str>) -> Schedule {
        Schedule::parse(spec, tz).unwrap_or_else(|e| panic!("{spec}: {e}"))
    }

    /// The next firing of `spec` after `now`.
    fn check(spec: &str, tz: Option<&str>, now: &str, expected: &str) {
        let got = sched(spec, tz).next_after(utc(now));
        assert_eq!(got, Some(utc(expected)), "{spec} in {tz:?} after {now}");
    }

    /// Every firing in `(from, to]`, by iterating `next_after` the way the daemon does.
    fn firings(schedule: &Schedule, from: &str, to: &str) -> Vec<DateTime<Utc>> {
        let (mut at, to) = (utc(from), utc(to));
        let mut out = Vec::new();
        while let Some(next) = schedule.next_after(at) {
            if next > to {
                break;
            }
            assert!(next > at, "next_after went backwards: {at} -> {next}");
            out.push(next);
            at = next;
        }
        out
    }

    fn assert_firings(spec: &str, tz: &str, from: &str, to: &str, expected: &[&str]) {
        let expected: Vec<_> = expected.iter().map(|s| utc(s)).collect();
        assert_eq!(
            firings(&sched(spec, Some(tz)), from, to),
            expected,
            "{spec} in {tz}"
        );
    }

    fn error(spec: &str, tz: Option<&str>) -> String {
        match Schedule::parse(spec, tz) {
            Ok(s) => panic!("{spec} parsed as {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    // 2026-01-15 is a Thursday.
    const NOW: &str = "2026-01-15T10:17:23.5Z";

    #[test]
    fn five_field_expressions() {
        check("*/5 * * * *", None, NOW, "2026-01-15T10:20:00Z");
        check("0 9 * * 1-5", None, NOW, "2026-01-16T09:00:00Z");
        check("0 12 * * MON", None, NOW, "2026-01-19T12:00:00Z");
        check("0 0 1 jan,jul *", None, NOW, "2026-07-01T00:00:00Z");
        check("17 10 * * *", None, NOW, "2026-01-16T10:17:00Z");
        check("18 10 * * *", None, NOW, "2026-01-15T10:18:00Z");
        // Vixie: when both day fields are restricted, either may match.
        check("0 0 13 * 5", None, NOW, "2026-01-16T00:00:00Z");
        check("0 0 L * *", None, NOW, "2026-01-31T00:00:00Z");
    }

    #[test]
    fn six_field_expressions_put_seconds_first() {
        check("*/10 * * * * *", None, NOW, "2026-01-15T10:17:30Z");
        check("15 30 2 * * *", None, NOW, "2026-01-16T02:30:15Z");
        check("0 0 12 * * SUN", None, NOW, "2026-01-18T12:00:00Z");
    }

    #[test]
    fn macros() {
        check("@hourly", None, NOW, "2026-01-15T11:00:00Z");
        check("@daily", None, NOW, "2026-01-16T00:00:00Z");
        check("@midnight", None, NOW, "2026-01-16T00:00:00Z");
        check("@weekly", None, NOW, "2026-01-18T00:00:00Z");
        check("@monthly", None, NOW, "2026-02-01T00:00:00Z");
        check("@yearly", None, NOW, "2027-01-01T00:00:00Z");
        check("@ANNUALLY", None, NOW, "2027-01-01T00:00:00Z");
    }

    #[test]
    fn time_zones_shift_the_wall_clock() {
        check(
            "0 9 * * *",
            Some("Europe/Berlin"),
            NOW,
            "2026-01-16T08:00:00Z",
        );
        check(
            "0 9 * * *",
            Some("America/New_York"),
            NOW,
            "2026-01-15T14:00:00Z",
        );
        check("@daily", Some("Asia/Kolkata"), NOW, "2026-01-15T18:30:00Z");
        check("0 9 * * *", Some("UTC"), NOW, "2026-01-16T09:00:00Z");
    }

    #[test]
    fn source_and_dst_class_are_kept() {
        let Schedule::Cron { expr, source, tz } = sched("  30 2 * * * ", Some("Europe/Berlin"))
        else {
            panic!("not a cron schedule");
        };
        assert_eq!(source, "30 2 * * *");
        assert_eq!(tz, "Europe/Berlin".parse::<Tz>().expect("zone"));
        assert!(!expr.is_wildcard());
        for spec in ["*/5 * * * *", "0 * * * *", "@hourly", "*/20 30 1 * * *"] {
            let Schedule::Cron { expr, .. } = sched(spec, None) else {
                panic!("not a cron schedule");
            };
            assert!(expr.is_wildcard(), "{spec}");
        }
    }

    // Europe/Berlin 2026: 02:00 CET -> 03:00 CEST on Sunday 29 March (01:00Z),
    // 03:00 CEST -> 02:00 CET on Sunday 25 October (01:00Z).

    #[test]
    fn berlin_spring_forward_daily_job_in_the_gap_runs_once_after_it() {
        assert_firings(
            "30 2 * * *",
            "Europe/Berlin",
            "2026-03-27T12:00:00Z",
            "2026-03-31T12:00:00Z",
            &[
                "2026-03-28T01:30:00Z",
                "2026-03-29T01:00:00Z", // 03:00 CEST, the first instant after the gap
                "2026-03-30T00:30:00Z",
                "2026-03-31T00:30:00Z",
            ],
        );
    }

    #[test]
    fn berlin_spring_forward_two_gap_times_collapse_into_one_run() {
        // Croner on its own calls this an interval job and drops both runs.
        assert_firings(
            "0,30 2 * * *",
            "Europe/Berlin",
            "2026-03-28T12:00:00Z",
            "2026-03-30T12:00:00Z",
            &[
                "2026-03-29T01:00:00Z",
                "2026-03-30T00:00:00Z",
                "2026-03-30T00:30:00Z",
            ],
        );
    }

    #[test]
    fn berlin_spring_forward_hourly_job_runs_each_real_hour() {
        assert_firings(
            "30 * * * *",
            "Europe/Berlin",
            "2026-03-28T23:00:00Z",
            "2026-03-29T03:59:00Z",
            &[
                "2026-03-28T23:30:00Z", // 00:30 CET
                "2026-03-29T00:30:00Z", // 01:30 CET
                "2026-03-29T01:30:00Z", // 03:30 CEST; 02:30 does not exist
                "2026-03-29T02:30:00Z",
                "2026-03-29T03:30:00Z",
            ],
        );
    }

    #[test]
    fn berlin_fall_back_daily_job_runs_once() {
        assert_firings(
            "30 2 * * *",
            "Europe/Berlin",
            "2026-10-23T12:00:00Z",
            "2026-10-26T12:00:00Z",
            &[
                "2026-10-24T00:30:00Z",
                "2026-10-25T00:30:00Z", // first pass (CEST) only
                "2026-10-26T01:30:00Z",
            ],
        );
    }

    #[test]
    fn berlin_fall_back_multi_value_fixed_job_runs_first_pass_only() {
        // Croner on its own runs this four times during the fold.
        assert_firings(
            "0,30 2 * * *",
            "Europe/Berlin",
            "2026-10-24T12:00:00Z",
            "2026-10-26T12:00:00Z",
            &[
                "2026-10-25T00:00:00Z",
                "2026-10-25T00:30:00Z",
                "2026-10-26T01:00:00Z",
                "2026-10-26T01:30:00Z",
            ],
        );
    }

    #[test]
    fn berlin_fall_back_hourly_job_runs_each_real_hour() {
        assert_firings(
            "0 * * * *",
            "Europe/Berlin",
            "2026-10-24T22:30:00Z",
            "2026-10-25T03:30:00Z",
            &[
                "2026-10-24T23:00:00Z", // 01:00 CEST
                "2026-10-25T00:00:00Z", // 02:00 CEST
                "2026-10-25T01:00:00Z", // 02:00 CET
                "2026-10-25T02:00:00Z", // 03:00 CET
                "2026-10-25T03:00:00Z",
            ],
        );
    }

    #[test]
    fn berlin_fall_back_from_inside_the_fold() {
        let daily = sched("30 2 * * *", Some("Europe/Berlin"));
        let hourly = sched("30 * * * *", Some("Europe/Berlin"));
        // 02:45 CEST, first pass: the hourly job still has 02:30 CET ahead.
        let first_pass = utc("2026-10-25T00:45:00Z");
        assert_eq!(
            hourly.next_after(first_pass),
            Some(utc("2026-10-25T01:30:00Z"))
        );
        assert_eq!(
            daily.next_after(first_pass),
            Some(utc("2026-10-26T01:30:00Z"))
        );
        // 02:10 CET, second pass: the daily job already ran during the first pass.
        let second_pass = utc("2026-10-25T01:10:00Z");
        assert_eq!(
            hourly.next_after(second_pass),
            Some(utc("2026-10-25T01:30:00Z"))
        );
        assert_eq!(
            daily.next_after(second_pass),
            Some(utc("2026-10-26T01:30:00Z"))
        );
    }

    // America/New_York 2026: 02:00 EST -> 03:00 EDT on Sunday 8 March (07:00Z),
    // 02:00 EDT -> 01:00 EST on Sunday 1 November (06:00Z).

    #[test]
    fn new_york_spring_forward_daily_job_in_the_gap_runs_once_after_it() {
        assert_firings(
            "30 2 * * *",
            "America/New_York",
            "2026-03-06T12:00:00Z",
            "2026-03-09T12:00:00Z",
            &[
                "2026-03-07T07:30:00Z",
                "2026-03-08T07:00:00Z", // 03:00 EDT
                "2026-03-09T06:30:00Z",
            ],
        );
    }

    #[test]
    fn new_york_spring_forward_hourly_job_runs_each_real_hour() {
        assert_firings(
            "0 * * * *",
            "America/New_York",
            "2026-03-08T05:30:00Z",
            "2026-03-08T09:30:00Z",
            &[
                "2026-03-08T06:00:00Z", // 01:00 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT
                "2026-03-08T08:00:00Z",
                "2026-03-08T09:00:00Z",
            ],
        );
    }

    #[test]
    fn new_york_fall_back_daily_job_runs_once() {
        assert_firings(
            "30 1 * * *",
            "America/New_York",
            "2026-10-30T12:00:00Z",
            "2026-11-02T12:00:00Z",
            &[
                "2026-10-31T05:30:00Z",
                "2026-11-01T05:30:00Z", // 01:30 EDT only
                "2026-11-02T06:30:00Z",
            ],
        );
    }

    #[test]
    fn new_york_fall_back_hourly_and_seconds_jobs_run_each_real_instant() {
        assert_firings(
            "0 * * * *",
            "America/New_York",
            "2026-11-01T03:30:00Z",
            "2026-11-01T08:30:00Z",
            &[
                "2026-11-01T04:00:00Z", // 00:00 EDT
                "2026-11-01T05:00:00Z", // 01:00 EDT
                "2026-11-01T06:00:00Z", // 01:00 EST
                "2026-11-01T07:00:00Z", // 02:00 EST
                "2026-11-01T08:00:00Z",
            ],
        );
        assert_firings(
            "*/20 30 1 * * *",
            "America/New_York",
            "2026-11-01T00:00:00Z",
            "2026-11-01T12:00:00Z",
            &[
                "2026-11-01T05:30:00Z",
                "2026-11-01T05:30:20Z",
                "2026-11-01T05:30:40Z",
                "2026-11-01T06:30:00Z",
                "2026-11-01T06:30:20Z",
                "2026-11-01T06:30:40Z",
            ],
        );
    }

    #[test]
    fn whole_year_hourly_runs_exactly_once_per_real_hour() {
        for tz in ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"] {
            let fired = firings(
                &sched("0 * * * *", Some(tz)),
                "2025-12-31T23:59:00Z",
                "2027-01-01T00:00:00Z",
            );
            // Lord Howe shifts by 30 minutes, so its hourly job loses or gains a half hour
            // twice a year instead of keeping a strict rhythm.
            let gaps: Vec<_> = fired.windows(2).map(|w| w[1] - w[0]).collect();
            let odd = gaps.iter().filter(|g| **g != TimeDelta::hours(1)).count();
            let expected_odd = if tz == "Australia/Lord_Howe" { 2 } else { 0 };
            assert_eq!(odd, expected_odd, "{tz}: {gaps:?}");
            assert!(gaps.iter().all(|g| *g >= TimeDelta::minutes(30)), "{tz}");
        }
    }

    #[test]
    fn whole_year_daily_fixed_job_runs_exactly_once_per_local_day() {
        for tz_name in ["Europe/Berlin", "America/New_York"] {
            let tz = parse_tz(tz_name).expect("known zone");
            for spec in ["30 2 * * *", "0 0 * * *", "59 23 * * *"] {
                let fired = firings(
                    &sched(spec, Some(tz_name)),
                    "2026-01-01T12:00:00Z",
                    "2026-12-31T12:00:00Z",
                );
                let days: Vec<_> = fired
                    .iter()
                    .map(|t| t.with_timezone(&tz).date_naive())
                    .collect();
                let mut distinct = days.clone();
                distinct.dedup();
                assert_eq!(days, distinct, "{spec} in {tz_name} ran twice on a day");
                assert_eq!(days.len(), 364, "{spec} in {tz_name} missed a day");
            }
        }
    }

    #[test]
    fn every_aligns_to_the_unix_epoch() {
        let five = Schedule::every(Duration::from_secs(300)).expect("valid");
        assert_eq!(five.next_after(utc(NOW)), Some(utc("2026-01-15T10:20:00Z")));
        assert_eq!(
            five.next_after(utc("2026-01-15T10:20:00Z")),
            Some(utc("2026-01-15T10:25:00Z"))
        );
        // Two replicas started at different moments agree on the firing.
        assert_eq!(
            five.next_after(utc("2026-01-15T10:15:00.001Z")),
            Some(utc("2026-01-15T10:20:00Z"))
        );
        let odd = Schedule::every(Duration::from_secs(7)).expect("valid");
        let next = odd.next_after(utc(NOW)).expect("fires");
        assert_eq!(next.timestamp() % 7, 0);
        assert!(next > utc(NOW) && next - utc(NOW) <= TimeDelta::seconds(7));
        let ninety = Schedule::every(Duration::from_secs(90 * 60)).expect("valid");
        assert_eq!(
            ninety.next_after(utc(NOW)),
            Some(utc("2026-01-15T10:30:00Z"))
        );
        assert_eq!(
            ninety.next_after(utc("1969-12-31T23:00:00Z")),
            Some(utc("1970-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn interval_estimate_is_the_gap_between_the_next_two_firings() {
        let now = utc(NOW);
        let estimate = |spec: &str, tz: Option<&str>, now| sched(spec, tz).interval_estimate(now);
        assert_eq!(
            estimate("*/5 * * * *", None, now),
            Some(Duration::from_secs(300))
        );
        // Uneven schedules give the next gap, not an average.
        assert_eq!(
            estimate("0 9,17 * * *", None, now),
            Some(Duration::from_secs(16 * 3600))
        );
        let morning = utc("2026-01-15T08:00:00Z");
        assert_eq!(
            estimate("0 9,17 * * *", None, morning),
            Some(Duration::from_secs(8 * 3600))
        );
        assert_eq!(
            estimate(
                "30 2 * * *",
                Some("Europe/Berlin"),
                utc("2026-03-28T12:00:00Z")
            ),
            Some(Duration::from_secs(23 * 3600 + 1800))
        );
        let leap_day = estimate("0 0 29 2 *", None, now).expect("fires");
        assert_eq!(
            leap_day,
            (utc("2032-02-29T00:00:00Z") - utc("2028-02-29T00:00:00Z"))
                .to_std()
                .expect("positive")
        );
        let every = Schedule::every(Duration::from_secs(42)).expect("valid");
        assert_eq!(every.interval_estimate(now), Some(Duration::from_secs(42)));
    }

    #[test]
    fn invalid_expressions_say_what_is_wrong() {
        assert_eq!(error("* * * *", None), "expected 5 or 6 fields, found 4");
        assert_eq!(
            error("* * * * * * *", None),
            "expected 5 or 6 fields, found 7"
        );
        assert_eq!(error("   ", None), "schedule is empty");
        assert_eq!(
            error("61 * * * *", None),
            "invalid minute field `61` (allowed: 0-59)"
        );
        assert_eq!(
            error("0 61 * * * *", None),
            "invalid minute field `61` (allowed: 0-59)"
        );
        assert_eq!(
            error("60 * * * * *", None),
            "invalid second field `60` (allowed: 0-59)"
        );
        assert_eq!(
            error("0 24 * * *", None),
            "invalid hour field `24` (allowed: 0-23)"
        );
        assert_eq!(
            error("0 0 0 * *", None),
            "invalid day-of-month field `0` (allowed: 1-31, L, W)"
        );
        assert_eq!(
            error("0 0 * 13 *", None),
            "invalid month field `13` (allowed: 1-12 or JAN-DEC)"
        );
        assert_eq!(
            error("0 0 * * funday", None),
            "invalid day-of-week field `funday` (allowed: 0-7 or SUN-SAT, L, #)"
        );
        assert_eq!(
            error("*/0 * * * *", None),
            "invalid minute field `*/0` (allowed: 0-59)"
        );
        assert_eq!(
            error("@fortnightly", None),
            "unknown macro `@fortnightly` (expected one of @hourly, @daily, @midnight, @weekly, @monthly, @yearly, @annually)"
        );
        assert_eq!(error("0 0 30 2 *", None), "schedule never fires");
    }

    #[test]
    fn unknown_time_zones_get_a_suggestion_when_close() {
        assert_eq!(
            error("@daily", Some("Europe/Berln")),
            "unknown time zone `Europe/Berln` (did you mean `Europe/Berlin`?)"
        );
        assert_eq!(
            error("@daily", Some("america/new_york")),
            "unknown time zone `america/new_york` (did you mean `America/New_York`?)"
        );
        assert_eq!(
            error("@daily", Some("Mars/Olympus_Mons")),
            "unknown time zone `Mars/Olympus_Mons`"
        );
        // The zone is checked even when the expression is fine, and before it.
        assert!(error("61 * * * *", Some("Nowhere")).starts_with("unknown time zone `Nowhere`"));
    }

    #[test]
    fn intervals_below_one_second_are_rejected() {
        assert_eq!(
            Schedule::every(Duration::ZERO),
            Err(ScheduleError::IntervalTooShort)
        );
        assert_eq!(
            Schedule::every(Duration::from_millis(999)).map_err(|e| e.to_string()),
            Err("interval must be at least 1s".to_string())
        );
        assert!(Schedule::every(MIN_INTERVAL).is_ok());
    }

    #[test]
    fn jitter_stays_within_bounds_and_spreads() {
        let mut rng = StdRng::seed_from_u64(7);
        let next = utc(NOW);
        let max = Duration::from_secs(30);
        let draws: Vec<_> = (0..10_000)
            .map(|_| jittered(next, max, &mut rng) - next)
            .collect();
        let bound = TimeDelta::seconds(30);
        assert!(draws.iter().all(|d| *d >= TimeDelta::zero() && *d <= bound));
        let (lo, hi) = (draws.iter().min().copied(), draws.iter().max().copied());
        assert!(
            lo.is_some_and(|d| d < TimeDelta::milliseconds(100)),
            "{lo:?}"
        );
        assert!(
            hi.is_some_and(|d| d > TimeDelta::milliseconds(29_900)),
            "{hi:?}"
        );
        let below_half = draws
            .iter()
            .filter(|d| **d < TimeDelta::seconds(15))
            .count();
        assert!((4_500..5_500).contains(&below_half), "{below_half}");
    }

    #[test]
    fn jitter_edge_cases_never_panic() {
        let mut rng = StdRng::seed_from_u64(1);
        let next = utc(NOW);
        assert_eq!(jittered(next, Duration::ZERO, &mut rng), next);
        let mut seen: Vec<_> = (0..200)
            .map(|_| jittered(next, Duration::from_nanos(1), &mut rng) - next)
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(
            seen,
            [TimeDelta::zero(), TimeDelta::nanoseconds(1)],
            "both ends are reachable"
        );
        let huge = jittered(next, Duration::MAX, &mut rng);
        assert!(huge >= next);
        let end = DateTime::<Utc>::MAX_UTC;
        assert!(jittered(end, Duration::from_secs(3600), &mut rng) >= end);
    }

    #[test]
    fn display_shows_the_source_and_zone() {
        assert_eq!(sched(" */5 * * * * ", None).to_string(), "*/5 * * * *");
        assert_eq!(
            sched("@daily", Some("Europe/Berlin")).to_string(),
            "@daily (Europe/Berlin)"
        );
        let every = |d| Schedule::every(d).expect("valid").to_string();
        assert_eq!(every(Duration::from_secs(7200)), "every 2h");
        assert_eq!(every(Duration::from_secs(300)), "every 5m");
        assert_eq!(every(Duration::from_secs(90)), "every 90s");
        assert_eq!(every(Duration::from_millis(1500)), "every 1500ms");
    }

    #[test]
    fn extreme_instants_give_none_instead_of_panicking() {
        for schedule in [
            sched("* * * * * *", Some("Asia/Tokyo")),
            sched("30 2 * * *", Some("America/New_York")),
            Schedule::every(Duration::from_secs(3600)).expect("valid"),
        ] {
            assert_eq!(
                schedule.next_after(DateTime::<Utc>::MAX_UTC),
                None,
                "{schedule:?}"
            );
            let min = DateTime::<Utc>::MIN_UTC;
            assert!(
                schedule.next_after(min).is_none_or(|next| next > min),
                "{schedule:?}"
            );
            assert_eq!(
                schedule
                    .interval_estimate(DateTime::<Utc>::MAX_UTC)
                    .is_some(),
                matches!(schedule, Schedule::Every(_))
            );
        }
    }

    #[test]
    fn skip_policy_drops_due_runs_while_one_runs() {
        let mut slot = Slot::new(Overlap::Skip);
        assert_eq!(slot.on_due(false), Decision::Start);
        assert_eq!(slot.on_due(true), Decision::Skip);
        assert_eq!(slot.on_due(true), Decision::Skip);
        assert!(!slot.has_pending());
        assert!(!slot.on_finished());
        assert_eq!(slot.on_due(false), Decision::Start);
    }

    #[test]
    fn queue_policy_holds_at_most_one_pending_run() {
        let mut slot = Slot::new(Overlap::Queue);
        assert_eq!(slot.on_due(false), Decision::Start);
        assert_eq!(slot.on_due(true), Decision::Enqueue);
        assert!(slot.has_pending());
        assert_eq!(slot.on_due(true), Decision::Skip);
        assert!(
            slot.on_finished(),
            "the queued run starts when the first finishes"
        );
        assert!(!slot.has_pending());
        assert!(
            !slot.on_finished(),
            "the second due run was dropped, not queued"
        );
        // A due run while nothing runs absorbs a stale pending entry.
        assert_eq!(slot.on_due(true), Decision::Enqueue);
        assert_eq!(slot.on_due(false), Decision::Start);
        assert!(!slot.on_finished());
    }

    #[tokio::test(start_paused = true)]
    async fn ticker_sleeps_until_each_firing() {
        let clock = Clock::on_tokio(utc(NOW));
        let mut ticker = Ticker::new(sched("*/5 * * * *", None), Duration::ZERO, clock);
        let mut rng = StdRng::seed_from_u64(3);
        for expected in [
            "2026-01-15T10:20:00Z",
            "2026-01-15T10:25:00Z",
            "2026-01-15T10:30:00Z",
        ] {
            let tick = ticker.tick(&mut rng).await.expect("fires");
            assert_eq!(tick.scheduled, utc(expected));
            assert_eq!(tick.released, tick.scheduled);
            let late = ticker.clock_mut().utc() - tick.scheduled;
            assert!(
                late >= TimeDelta::zero() && late < TimeDelta::milliseconds(2),
                "{late}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ticker_waits_for_the_jittered_release() {
        let clock = Clock::on_tokio(utc(NOW));
        let max = Duration::from_secs(20);
        let mut ticker = Ticker::new(
            Schedule::every(Duration::from_secs(60)).expect("valid"),
            max,
            clock,
        );
        let mut rng = StdRng::seed_from_u64(11);
        for _ in 0..20 {
            let tick = ticker.tick(&mut rng).await.expect("fires");
            assert_eq!(tick.scheduled.timestamp() % 60, 0);
            assert!(tick.released >= tick.scheduled);
            assert!(tick.released - tick.scheduled <= TimeDelta::seconds(20));
            assert!(ticker.clock_mut().utc() >= tick.released);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ticker_never_repeats_a_firing_when_the_clock_steps_back_and_skips_missed_ones() {
        let clock = Clock::on_tokio(utc(NOW));
        let mut ticker = Ticker::new(sched("*/5 * * * *", None), Duration::ZERO, clock);
        let mut rng = StdRng::seed_from_u64(5);
        let first = ticker.tick(&mut rng).await.expect("fires");
        assert_eq!(first.scheduled, utc("2026-01-15T10:20:00Z"));
        ticker.clock_mut().step(TimeDelta::minutes(-3));
        let second = ticker.tick(&mut rng).await.expect("fires");
        assert_eq!(second.scheduled, utc("2026-01-15T10:25:00Z"));
        assert!(ticker.clock_mut().utc() >= second.scheduled);
        ticker.clock_mut().step(TimeDelta::hours(1));
        let third = ticker.tick(&mut rng).await.expect("fires");
        assert_eq!(third.scheduled, utc("2026-01-15T11:30:00Z"));
    }
}
