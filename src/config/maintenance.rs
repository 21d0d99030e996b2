//! `maintenance:` windows, top level (for every SLO, or those of `slos:`) and per SLO, during
//! which an SLO counts no event: a planned outage spends no budget. A window recurs (`schedule`
//! with a `duration`, in `timezone`) or is fixed (`start` and `end`, RFC 3339).

use super::walk::{self, Ctx};
use super::yaml::Node;
use super::{Maintenance, MaintenanceWhen};
use crate::schedule::Schedule;

/// At most this many windows: each is checked every second.
pub const MAX_WINDOWS: usize = 1000;

const FIELDS: &[&str] = &[
    "name", "schedule", "timezone", "duration", "start", "end", "slos",
];

/// The windows of a `maintenance` list at `path`; `slo` names the SLO of a per-SLO list.
pub fn windows(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    slo: Option<&str>,
    slo_names: &walk::Names,
    out: &mut Vec<Maintenance>,
) {
    for (i, item) in walk::seq(ctx, node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        if out.len() >= MAX_WINDOWS {
            ctx.error(
                item.pos,
                &p,
                format!("at most {MAX_WINDOWS} maintenance windows"),
            );
            return;
        }
        let Some(f) = walk::fields(ctx, item, &p, FIELDS) else {
            continue;
        };
        let name = f
            .get("name")
            .and_then(|n| walk::string(ctx, n, &f.path_of("name")))
            .unwrap_or_else(|| format!("{path}[{i}]"));
        let when = match (f.get("schedule"), f.get("start"), f.get("end")) {
            (Some(s), None, None) => {
                let sp = f.path_of("schedule");
                let tz = f
                    .get("timezone")
                    .and_then(|n| walk::string(ctx, n, &f.path_of("timezone")));
                let schedule = walk::string(ctx, s, &sp).and_then(|text| {
                    Schedule::parse(&text, tz.as_deref())
                        .map_err(|e| ctx.error(s.pos, &sp, format!("`{text}`: {e}")))
                        .ok()
                });
                let duration = match f.get("duration") {
                    Some(d) => walk::duration(ctx, d, &f.path_of("duration")).filter(|d| {
                        let ok = !d.is_zero();
                        if !ok {
                            ctx.error(d_pos(&f), &f.path_of("duration"), "must be above zero");
                        }
                        ok
                    }),
                    None => {
                        ctx.error(item.pos, &p, "a `schedule` needs a `duration`");
                        None
                    }
                };
                schedule
                    .zip(duration)
                    .map(|(schedule, duration)| MaintenanceWhen::Recurring { schedule, duration })
            }
            (None, Some(s), Some(e)) => {
                let start = instant(ctx, s, &f.path_of("start"));
                let end = instant(ctx, e, &f.path_of("end"));
                match (start, end) {
                    (Some(a), Some(b)) if b <= a => {
                        ctx.error(e.pos, &f.path_of("end"), "`end` must be after `start`");
                        None
                    }
                    (Some(start), Some(end)) => Some(MaintenanceWhen::Fixed { start, end }),
                    _ => None,
                }
            }
            _ => {
                ctx.error(
                    item.pos,
                    &p,
                    "give `schedule` with `duration` (recurring), or `start` and `end` (fixed)",
                );
                None
            }
        };
        let mut slos: Vec<String> = slo.map(|s| vec![s.to_string()]).unwrap_or_default();
        if let Some(n) = f.get("slos") {
            let sp = f.path_of("slos");
            if slo.is_some() {
                ctx.error(
                    n.pos,
                    &sp,
                    "a window inside an SLO applies to that SLO only",
                );
            } else {
                for (j, s) in walk::seq(ctx, n, &sp).iter().enumerate() {
                    if let Some(name) =
                        walk::reference(ctx, s, &format!("{sp}[{j}]"), "SLO", slo_names)
                    {
                        slos.push(name);
                    }
                }
            }
        }
        if let Some(when) = when {
            out.push(Maintenance { name, slos, when });
        }
    }
}

fn d_pos(f: &walk::Fields) -> super::yaml::Pos {
    f.get("duration")
        .map_or(super::yaml::Pos { line: 1, col: 1 }, |n| n.pos)
}

/// An RFC 3339 instant as Unix seconds.
fn instant(ctx: &mut Ctx, node: &Node, path: &str) -> Option<i64> {
    let text = walk::string(ctx, node, path)?;
    match chrono::DateTime::parse_from_rfc3339(&text) {
        Ok(t) => Some(t.timestamp()),
        Err(e) => {
            ctx.error(
                node.pos,
                path,
                format!("`{text}` is not an RFC 3339 time (2026-12-24T22:00:00Z): {e}"),
            );
            None
        }
    }
}

impl Maintenance {
    /// Whether the window is open at `now_unix` for `slo`.
    pub fn covers(&self, slo: &str, now_unix: i64) -> bool {
        (self.slos.is_empty() || self.slos.iter().any(|s| s == slo)) && self.active_at(now_unix)
    }

    /// Whether the window is open at `now_unix`: a recurring one from each start for its
    /// duration (the latest start at or before now, found as the first after now − duration).
    pub fn active_at(&self, now_unix: i64) -> bool {
        match &self.when {
            MaintenanceWhen::Fixed { start, end } => (*start..*end).contains(&now_unix),
            MaintenanceWhen::Recurring { schedule, duration } => {
                let from = now_unix - duration.as_secs() as i64;
                let Some(from) = chrono::DateTime::from_timestamp(from, 0) else {
                    return false;
                };
                // `next_after` is strictly after: a start exactly at `from` has just ended.
                schedule
                    .next_after(from)
                    .is_some_and(|start| start.timestamp() <= now_unix)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn recurring_and_fixed_windows_open_and_close() {
        // Sundays 02:00 UTC for 2 h. 2026-12-06 is a Sunday.
        let w = Maintenance {
            name: "w".into(),
            slos: vec![],
            when: MaintenanceWhen::Recurring {
                schedule: Schedule::parse("0 2 * * SUN", None).unwrap(),
                duration: Duration::from_secs(7200),
            },
        };
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().timestamp();
        assert!(!w.active_at(at("2026-12-06T01:59:59Z")));
        assert!(w.active_at(at("2026-12-06T02:00:00Z")));
        assert!(w.active_at(at("2026-12-06T03:59:59Z")));
        assert!(!w.active_at(at("2026-12-06T04:00:00Z")));
        assert!(!w.active_at(at("2026-12-07T02:30:00Z")));
        let f = Maintenance {
            name: "f".into(),
            slos: vec!["a".into()],
            when: MaintenanceWhen::Fixed {
                start: at("2026-12-24T00:00:00Z"),
                end: at("2026-12-26T00:00:00Z"),
            },
        };
        assert!(f.covers("a", at("2026-12-25T12:00:00Z")));
        assert!(!f.covers("b", at("2026-12-25T12:00:00Z")));
        assert!(!f.covers("a", at("2026-12-26T00:00:00Z")));
    }
}
