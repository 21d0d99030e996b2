//! Calendar periods (`period: {calendar: month, timezone: Europe/Berlin}`): the pure budget
//! over month boundaries in Berlin, DST months included; the config's errors; the rules that
//! read the daemon's gauges, checked by the real promtool; and a daemon whose clock is started
//! just before local midnight (the `SLOBURN_TEST_CLOCK_START` hook) resetting its budget.

use crate::support::{
    BackgroundTarget, Daemon, all_output, daemon_config, eventually, get_blocking, sloburn, which,
    write_config,
};
use serde_json::Value;
use sloburn::slo::{Calendar, CalendarUnit, SloDef, Windows, default_tiers, evaluate, minute_of};
use sloburn::target::TargetOptions;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

fn utc(s: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(s)
        .expect("rfc3339")
        .timestamp()
}

fn berlin_month() -> SloDef {
    let cal = Calendar {
        unit: CalendarUnit::Month,
        tz: "Europe/Berlin".parse().expect("zone"),
    };
    SloDef {
        name: "checkout-availability".into(),
        service: "checkout".into(),
        objective: 0.999,
        period: cal.nominal(),
        calendar: Some(cal),
        tiers: default_tiers(cal.nominal()),
        labels: BTreeMap::new(),
        description: String::new(),
    }
}

/// Bad events in the month's last local minute are in the budget until local midnight, and out
/// of it from the first minute of the next month, while the rolling windows still hold them.
fn resets_at_local_midnight(last_minute: &str, midnight: &str, month_start: &str) {
    let def = berlin_month();
    let mut w = Windows::new(def.span());
    // Steady good traffic through the month from its first minute, then 5 bad events.
    let start = minute_of(utc(month_start));
    let before = minute_of(utc(last_minute));
    for m in (start..=before).step_by(60) {
        w.record(m, 100, 0);
    }
    w.record(before, 0, 5);
    let r = evaluate(&def, &w, before);
    let (_, s, e) = r.calendar.expect("calendar period");
    assert_eq!(s, utc(month_start), "the month starts at local midnight");
    assert_eq!(e, utc(midnight), "and ends at the next one");
    assert_eq!(r.period.bad, 5);
    assert!(r.period.good > 0);
    assert!(r.budget_remaining < 1.0);
    // The previous month's events are not counted, though the ring holds more than a month.
    w.record(start - 1, 0, 1000);
    let r = evaluate(&def, &w, before);
    assert_eq!(r.period.bad, 5, "the minute before the month is not in it");

    let after = minute_of(utc(midnight));
    w.advance(after);
    let r = evaluate(&def, &w, after);
    assert_eq!(r.calendar.expect("calendar").1, utc(midnight));
    assert_eq!((r.period.good, r.period.bad), (0, 0), "budget reset");
    assert_eq!(r.budget_remaining, 1.0);
    assert_eq!(r.period.window, Duration::from_secs(60));
    let five = r.window(Duration::from_secs(300)).expect("5m");
    assert_eq!(
        five.bad, 5,
        "the rolling 5m window keeps the last minute's errors"
    );
    assert!(
        r.tiers.iter().any(|t| t.short.bad == 5),
        "tiers stay rolling"
    );
}

#[test]
fn budget_resets_at_berlin_midnight_in_the_dst_months_and_a_plain_one() {
    // October 2026 has 31 days and 1 hour (CEST → CET on the 25th).
    resets_at_local_midnight(
        "2026-10-31T22:59:00Z",
        "2026-10-31T23:00:00Z",
        "2026-09-30T22:00:00Z",
    );
    // March 2026 has 31 days less an hour (CET → CEST on the 29th).
    resets_at_local_midnight(
        "2026-03-31T21:59:00Z",
        "2026-03-31T22:00:00Z",
        "2026-02-28T23:00:00Z",
    );
    // January → February, winter time throughout.
    resets_at_local_midnight(
        "2026-01-31T22:59:00Z",
        "2026-01-31T23:00:00Z",
        "2025-12-31T23:00:00Z",
    );
}

#[test]
fn time_to_exhaustion_scales_with_the_months_real_length() {
    let def = berlin_month();
    let mut w = Windows::new(def.span());
    let now = minute_of(utc("2026-10-15T12:00:00Z"));
    // Burn exactly 1x over the last hour.
    for m in now - 59..=now {
        w.record(m, 999, 1);
    }
    // And more good traffic earlier in the month: part of the budget remains.
    w.record(minute_of(utc("2026-10-01T06:00:00Z")), 999_000, 0);
    let r = evaluate(&def, &w, now);
    let remaining = r.budget_remaining;
    assert!(remaining > 0.0 && remaining < 1.0);
    let burn = r.window(Duration::from_secs(3600)).unwrap().burn_rate;
    let month = ((31 * 24 + 1) * 3600) as f64;
    let expected = remaining * month / burn;
    let got = r.time_to_exhaustion.unwrap().as_secs_f64();
    assert!((got - expected).abs() < 1.0, "{got} vs {expected}");
}

fn check_config(dir: &std::path::Path, period: &str) -> (Option<i32>, String) {
    let text = format!(
        "targets:\n  api:\n    url: http://127.0.0.1:9/\nslos:\n  a:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: {period}\n"
    );
    let path = dir.join("sloburn.yaml");
    std::fs::write(&path, text).unwrap();
    let out = sloburn().arg("check").arg(&path).output().unwrap();
    (out.status.code(), all_output(&out))
}

#[test]
fn unknown_calendars_and_zones_are_config_errors_with_position_and_hint() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = check_config(dir.path(), "{ calendar: mnth, timezone: Europe/Berlin }");
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("sloburn.yaml:9:25"), "{out}");
    assert!(
        out.contains("unknown calendar period `mnth` (did you mean `month`?)"),
        "{out}"
    );

    let (code, out) = check_config(dir.path(), "{ calendar: month, timezone: Europe/Berln }");
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("sloburn.yaml:9:42"), "{out}");
    assert!(out.contains("(did you mean `Europe/Berlin`?)"), "{out}");

    let (code, out) = check_config(dir.path(), "{ calendar: month, tz: UTC }");
    assert_eq!(code, Some(78), "{out}");
    assert!(out.contains("sloburn.yaml:9:32"), "{out}");
    assert!(out.contains("unknown field `tz`"), "{out}");

    let (code, out) = check_config(dir.path(), "{ calendar: quarter }");
    assert_eq!(code, Some(0), "the zone defaults to UTC: {out}");
    let (code, out) = check_config(dir.path(), "30d");
    assert_eq!(code, Some(0), "a duration stays rolling: {out}");
}

#[test]
fn rules_read_the_daemons_gauge_for_a_calendar_period_and_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let text = "targets:\n  api:\n    url: http://127.0.0.1:9/\nslos:\n  monthly:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: { calendar: month, timezone: Europe/Berlin }\n  rolling:\n    target: api\n    sli: availability\n    objective: 99\n    period: 28d\n";
    let cfg = dir.path().join("sloburn.yaml");
    std::fs::write(&cfg, text).unwrap();
    let rules = crate::support::sloburn_rules([cfg.as_os_str()]);
    assert!(
        rules.contains("PromQL cannot express a range that starts at local"),
        "{rules}"
    );
    assert!(rules.contains("max(sloburn_slo_burn_rate{slo=\"monthly\",window=\"month\"})"));
    assert!(
        !rules.contains("record: slo:sli_error:ratio_rate30d"),
        "{rules}"
    );
    assert!(
        rules.contains("record: slo:sli_error:ratio_rate28d"),
        "rolling unchanged"
    );
    assert!(rules.contains("over the calendar month (Europe/Berlin)"));
    let path = dir.path().join("rules.yml");
    std::fs::write(&path, &rules).unwrap();
    let out = Command::new(which("promtool"))
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", all_output(&out));
}

/// A daemon whose clock starts 45 s before midnight of 1 November 2026 in Berlin (the end of
/// the DST month): the events of a short run are in October's budget, and gone from it after
/// local midnight, while the rolling 5m window keeps them. The schedule runs on the daemon's one
/// clock, shifted too: `every: 1d` fires next at 00:00 UTC (01:00 in Berlin), after the test, so
/// the run at start is the only one.
#[test]
fn a_daemon_resets_the_budget_at_local_midnight() {
    let target = BackgroundTarget::start(TargetOptions::default());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let profile = "  burst:\n    target: api\n    every: 1d\n    run_on_start: true\n    executor: constant-arrival-rate\n    rate: 20/s\n    duration: 5s\n";
    let slo = "  api-availability:\n    target: api\n    sli: availability\n    objective: 99.9\n    period: { calendar: month, timezone: Europe/Berlin }\n";
    let path = write_config(dir.path(), &daemon_config(target.addr, &data, profile, slo));
    let midnight = utc("2026-10-31T23:00:00Z");
    let mut cmd = Daemon::command(&path, &["--no-watch"]);
    cmd.env(sloburn::daemon::TEST_CLOCK_ENV, (midnight - 45).to_string());
    let d = Daemon::spawn(cmd);
    let slos = || -> Value {
        let (_, body) = get_blocking(&format!("{}/api/slos", d.base));
        serde_json::from_str(&body).unwrap_or_default()
    };
    let october = eventually(Duration::from_secs(40), || {
        let v = slos();
        let p = v["slos"][0]["period"].clone();
        (p["start"] == "2026-10-01T00:00:00+02:00" && p["good"].as_u64() >= Some(50)).then_some(p)
    })
    .unwrap_or_else(|| panic!("no October budget with events: {}", slos()));
    assert_eq!(october["window"], "month");
    assert_eq!(october["timezone"], "Europe/Berlin");
    assert_eq!(october["end"], "2026-11-01T00:00:00+01:00");
    let before = october["good"].as_u64().unwrap();

    let november = eventually(Duration::from_secs(90), || {
        let v = slos();
        let s = v["slos"][0].clone();
        (s["period"]["start"] == "2026-11-01T00:00:00+01:00").then_some(s)
    })
    .unwrap_or_else(|| panic!("no November period: {}", slos()));
    assert_eq!(
        november["period"]["good"], 0,
        "reset at local midnight: {november}"
    );
    assert_eq!(november["period"]["bad"], 0);
    assert_eq!(november["budget_remaining"], 1.0);
    let five = november["windows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["window"] == "5m")
        .cloned()
        .unwrap();
    assert!(
        five["good"].as_u64().unwrap() >= before,
        "the rolling 5m window keeps October's last minute: {five}"
    );
    let metrics = d.metrics();
    assert!(
        metrics.contains("sloburn_slo_burn_rate{slo=\"api-availability\",window=\"month\"}"),
        "the gauge names the calendar period"
    );
}
