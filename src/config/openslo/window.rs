//! An OpenSLO SLO's `timeWindow` (rolling or calendar) and its `objectives`.

use crate::config::walk::{self, Ctx};
use crate::config::yaml::Node;
use crate::slo::{Calendar, CalendarUnit};
use std::time::Duration;

use super::*;

pub(super) fn time_window(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Period> {
    let items = walk::seq(ctx, node, path);
    if items.len() != 1 {
        ctx.error(
            node.pos,
            path,
            format!("timeWindow holds exactly one window, found {}", items.len()),
        );
        return None;
    }
    let p = format!("{path}[0]");
    let f = walk::fields(ctx, &items[0], &p, &["duration", "isRolling", "calendar"])?;
    let Some(dn) = f.get("duration") else {
        ctx.error(items[0].pos, &p, "missing `duration`");
        return None;
    };
    let duration = walk::string(ctx, dn, &f.path_of("duration"))?;
    let rolling = match f.get("isRolling") {
        Some(n) => walk::boolean(ctx, n, &f.path_of("isRolling"))?,
        None => !f.has("calendar"),
    };
    if rolling {
        return rolling_window(ctx, &f, dn, &duration).map(Period::Rolling);
    }
    let unit = match duration.as_str() {
        "1w" => CalendarUnit::Week,
        "1M" => CalendarUnit::Month,
        "1Q" => CalendarUnit::Quarter,
        other => {
            ctx.error(dn.pos, &f.path_of("duration"), format!("a calendar window of `{other}` does not map: sloburn's calendar periods are `1w`, `1M` and `1Q`"));
            return None;
        }
    };
    let mut tz = crate::zone::Tz::UTC;
    if let Some(c) = f.get("calendar") {
        let cp = f.path_of("calendar");
        let cf = walk::fields(ctx, c, &cp, &["startTime", "timeZone"])?;
        if let Some(n) = cf.get("timeZone") {
            tz = time_zone(ctx, n, &cf.path_of("timeZone"))?;
        }
        if let Some(n) = cf.get("startTime") {
            start_time(ctx, n, &cf.path_of("startTime"), unit)?;
        }
    }
    Some(Period::Calendar(Calendar { unit, tz }))
}

/// A rolling window's `duration` at `dn`: whole minutes, at least one, of a fixed length.
fn rolling_window(ctx: &mut Ctx, f: &walk::Fields, dn: &Node, duration: &str) -> Option<Duration> {
    if let Some(n) = f.get("calendar") {
        ctx.error(
            n.pos,
            &f.path_of("calendar"),
            "a rolling window has no calendar",
        );
        return None;
    }
    if duration.ends_with(['M', 'Q', 'Y']) {
        ctx.error(dn.pos, &f.path_of("duration"), format!("a rolling `{duration}` has no fixed length: write days (`30d`) or use a calendar window"));
        return None;
    }
    let d = walk::duration(ctx, dn, &f.path_of("duration"))?;
    if d < Duration::from_secs(60) || d.as_secs() % 60 != 0 {
        ctx.error(
            dn.pos,
            &f.path_of("duration"),
            "the window must be whole minutes, at least 1m",
        );
        return None;
    }
    Some(d)
}

/// A calendar's `timeZone`: an IANA name.
fn time_zone(ctx: &mut Ctx, n: &Node, path: &str) -> Option<crate::zone::Tz> {
    let s = walk::string(ctx, n, path)?;
    match s.parse::<crate::zone::Tz>() {
        Ok(t) => Some(t),
        Err(_) => {
            let hint = ctx.hint(&s, crate::zone::Tz::names());
            ctx.error(n.pos, path, format!("unknown time zone `{s}`{hint}"));
            None
        }
    }
}

/// A calendar's `startTime`: it must be where sloburn's calendar `unit` starts, local midnight
/// of its first day.
fn start_time(ctx: &mut Ctx, n: &Node, sp: &str, unit: CalendarUnit) -> Option<()> {
    use chrono::{Datelike, Timelike};
    let s = walk::string(ctx, n, sp)?;
    let Ok(t) = chrono::NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S") else {
        ctx.error(n.pos, sp, "write the start as `2024-01-01 00:00:00`");
        return None;
    };
    let aligned = t.hour() == 0
        && t.minute() == 0
        && t.second() == 0
        && match unit {
            CalendarUnit::Week => t.weekday() == chrono::Weekday::Mon,
            CalendarUnit::Month => t.day() == 1,
            CalendarUnit::Quarter => t.day() == 1 && t.month0() % 3 == 0,
        };
    if !aligned {
        ctx.error(
            n.pos,
            sp,
            format!("a start of `{s}` does not map: sloburn's calendar {} starts at local midnight of its first day (a Monday, the 1st, or the 1st of January, April, July or October)", unit.as_str()),
        );
        return None;
    }
    Some(())
}

pub(super) fn objectives(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    description: &mut Vec<String>,
) -> Option<f64> {
    let items = walk::seq(ctx, node, path);
    if items.len() != 1 {
        let pos = items.get(1).map_or(node.pos, |n| n.pos);
        ctx.error(
            pos,
            path,
            format!(
                "a sloburn SLO has one objective, found {}: write one SLO per objective",
                items.len()
            ),
        );
        return None;
    }
    let p = format!("{path}[0]");
    let f = walk::fields(
        ctx,
        &items[0],
        &p,
        &[
            "displayName",
            "target",
            "targetPercent",
            "op",
            "value",
            "timeSliceTarget",
            "timeSliceWindow",
        ],
    )?;
    for key in ["op", "value", "timeSliceTarget", "timeSliceWindow"] {
        if let Some(n) = f.get(key) {
            ctx.error(n.pos, &f.path_of(key), format!("`{key}` does not map: it belongs to threshold metrics or time slices, and sloburn counts good and bad events"));
            return None;
        }
    }
    if let Some(d) = f
        .get("displayName")
        .and_then(|n| walk::string(ctx, n, &f.path_of("displayName")))
    {
        description.push(d);
    }
    let percent = match (f.get("target"), f.get("targetPercent")) {
        (Some(n), None) => walk::number(ctx, n, &f.path_of("target")).map(|v| (v * 100.0, n)),
        (None, Some(n)) => walk::number(ctx, n, &f.path_of("targetPercent")).map(|v| (v, n)),
        (Some(_), Some(n)) => {
            ctx.error(
                n.pos,
                &f.path_of("targetPercent"),
                "give `target` or `targetPercent`, not both",
            );
            None
        }
        (None, None) => {
            ctx.error(items[0].pos, &p, "missing `target` or `targetPercent`");
            None
        }
    };
    let (v, n) = percent?;
    // Rounded to what a percentage is written with, so 0.9995 is 99.95, not 99.94999….
    let v = (v * 1e9).round() / 1e9;
    if !(v > 0.0 && v < 100.0) {
        ctx.error(
            n.pos,
            &p,
            format!("the objective must be strictly between 0 and 100 %, found {v}"),
        );
        return None;
    }
    Some(v)
}
