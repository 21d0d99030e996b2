//! One entry of the `slos` section: target, objective, period, SLI, labels and alert tiers.

use super::walk::{self, Ctx, join, optional, positive_duration, reference, required};
use super::yaml::{Node, Value};
use super::{Sli, Slo, TierSpec};
use crate::slo::{Calendar, CalendarUnit};
use std::collections::BTreeMap;
use std::time::Duration;

/// The fields of one entry of `slos`. With `group_by`, `slo_groups.rs` makes one SLO per group
/// of the one [`slo`] reads.
pub const FIELDS: &[&str] = &[
    "target",
    "journey",
    "step",
    "profiles",
    "sli",
    "objective",
    "period",
    "description",
    "labels",
    "alerting",
    "maintenance",
    "group_by",
    "max_groups",
    "quorum",
    "quorum_bucket",
];

/// The SLO one entry of `slos` describes.
pub fn slo(
    ctx: &mut Ctx,
    name: &str,
    f: &walk::Fields,
    targets: &walk::Names,
    journeys: &super::Journeys,
    journey_names: &walk::Names,
) -> Option<Slo> {
    let journey = f
        .get("journey")
        .and_then(|n| reference(ctx, n, &f.path_of("journey"), "journey", journey_names));
    let spec = journey.as_ref().and_then(|j| journeys.get(j));
    let step = step(ctx, f, spec);
    let target = match (f.get("target"), f.get("journey")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("target"),
                "a journey SLO watches its journey's target: drop `target`",
            );
            None
        }
        (None, Some(_)) => spec.map(|j| j.target.clone()),
        _ => required(ctx, f, "target", |c, n, p| {
            reference(c, n, p, "target", targets)
        }),
    };
    let objective = required(ctx, f, "objective", objective);
    let period = optional(
        ctx,
        f,
        "period",
        (Duration::from_secs(30 * 86400), None),
        period,
    );
    let sli = required(ctx, f, "sli", sli);
    let profiles = f
        .get("profiles")
        .map(|n| {
            walk::seq(ctx, n, &f.path_of("profiles"))
                .iter()
                .filter_map(|item| walk::string(ctx, item, &f.path_of("profiles")))
                .collect()
        })
        .unwrap_or_default();
    let description = f
        .get("description")
        .and_then(|n| walk::string(ctx, n, &f.path_of("description")))
        .unwrap_or_default();
    let mut labels = BTreeMap::new();
    if let Some(n) = f.get("labels") {
        read_labels(ctx, n, &f.path_of("labels"), &mut labels);
    }
    let quorum = super::locations::read_slo(ctx, f);
    let tiers = f
        .get("alerting")
        .and_then(|n| alerting(ctx, n, &f.path_of("alerting")));
    Some(Slo {
        name: name.to_string(),
        target: target?,
        journey,
        step,
        profiles,
        objective: objective?,
        period: period?.0,
        calendar: period?.1,
        sli: sli?,
        description,
        labels,
        tiers,
        group: None,
        quorum,
    })
}

/// `step`: one step of the SLO's journey (`journey` when it names a known one).
fn step(ctx: &mut Ctx, f: &walk::Fields, journey: Option<&super::JourneySpec>) -> Option<String> {
    let n = f.get("step")?;
    if !f.has("journey") {
        ctx.error(n.pos, &f.path_of("step"), "`step` goes with `journey`");
        return None;
    }
    let p = f.path_of("step");
    let s = walk::string(ctx, n, &p)?;
    let j = journey?;
    if j.steps.iter().any(|st| st.name == s) {
        return Some(s);
    }
    let names: Vec<&str> = j.steps.iter().map(|st| st.name.as_str()).collect();
    ctx.error(
        n.pos,
        &p,
        format!(
            "journey `{}` has no step `{s}` (steps: {})",
            j.name,
            names.join(", ")
        ),
    );
    None
}

/// `objective`: a percentage strictly between 0 and 100. A ratio (`0.999`, at most 1) or a
/// value written with its sign (`99.9%`) is refused with the number it most likely meant.
fn objective(ctx: &mut Ctx, n: &Node, p: &str) -> Option<f64> {
    if let Some(text) = n.as_scalar().map(str::trim)
        && let Some(v) = text
            .strip_suffix('%')
            .and_then(|t| t.trim().parse::<f64>().ok())
    {
        ctx.error(
            n.pos,
            p,
            format!("the objective is a plain number of percent: write `{v}`, without `%`"),
        );
        return None;
    }
    let v = walk::number(ctx, n, p)?;
    if v > 0.0 && v <= 1.0 {
        ctx.error(
            n.pos,
            p,
            format!(
                "the objective is a percentage, and {v} % would allow {} % of events to fail: \
                 did you mean {}?",
                ((100.0 - v) * 1e6).round() / 1e6,
                (v * 1e8).round() / 1e6
            ),
        );
        return None;
    }
    if !(v > 0.0 && v < 100.0) {
        ctx.error(
            n.pos,
            p,
            format!(
                "the objective is a percentage strictly between 0 and 100 (like 99.9), found {v}"
            ),
        );
        return None;
    }
    Some(v)
}

/// A rolling duration (`30d`) or a calendar period (`{calendar: month, timezone: Europe/Berlin}`).
fn period(ctx: &mut Ctx, node: &Node, path: &str) -> Option<(Duration, Option<Calendar>)> {
    if node.as_scalar().is_some() {
        let d = walk::duration(ctx, node, path)?;
        if d < Duration::from_secs(60) || d.as_secs() % 60 != 0 {
            ctx.error(
                node.pos,
                path,
                "the period must be whole minutes, at least 1m (typically 28d or 30d)",
            );
            return None;
        }
        return Some((d, None));
    }
    let f = walk::fields(ctx, node, path, &["calendar", "timezone"])?;
    let unit = required(ctx, &f, "calendar", |c, n, p| {
        let s = walk::string(c, n, p)?;
        if let Some(u) = CalendarUnit::parse(&s) {
            return Some(u);
        }
        let hint = walk::did_you_mean(&s, CalendarUnit::NAMES)
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        c.error(
            n.pos,
            p,
            format!("unknown calendar period `{s}`{hint}: use `week`, `month` or `quarter`"),
        );
        None
    });
    let tz = optional(ctx, &f, "timezone", crate::zone::Tz::UTC, |c, n, p| {
        let s = walk::string(c, n, p)?;
        if let Ok(tz) = s.parse::<crate::zone::Tz>() {
            return Some(tz);
        }
        let hint = c.hint(&s, crate::zone::Tz::names());
        c.error(
            n.pos,
            p,
            format!(
                "unknown time zone `{s}`{hint}: use an IANA name like `Europe/Berlin` or `UTC`"
            ),
        );
        None
    });
    let cal = Calendar {
        unit: unit?,
        tz: tz?,
    };
    Some((cal.nominal(), Some(cal)))
}

fn sli(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Sli> {
    if let Some(s) = node.as_scalar() {
        return match s {
            "availability" => Some(Sli::Availability),
            other => {
                ctx.error(
                    node.pos,
                    path,
                    format!("unknown SLI `{other}`: use `availability` or `{{latency: {{under: 300ms}}}}`"),
                );
                None
            }
        };
    }
    let f = walk::fields(ctx, node, path, &["availability", "latency"])?;
    if let Some(n) = f.get("latency") {
        let lf = walk::fields(
            ctx,
            n,
            &f.path_of("latency"),
            &["under", "failures", "measure"],
        )?;
        let corrected = optional(ctx, &lf, "measure", true, |c, n, p| {
            match walk::string(c, n, p).as_deref() {
                Some("corrected") => Some(true),
                Some("duration") => Some(false),
                _ => {
                    c.error(
                        n.pos,
                        p,
                        "use `corrected` (from the intended start, the default) or `duration` \
                         (k6's http_req_duration, from the actual start)",
                    );
                    None
                }
            }
        });
        let under = required(ctx, &lf, "under", positive_duration);
        let exclude = optional(ctx, &lf, "failures", false, |c, n, p| {
            match walk::string(c, n, p).as_deref() {
                Some("exclude") => Some(true),
                Some("include") => Some(false),
                _ => {
                    c.error(
                        n.pos,
                        p,
                        "use `include` (failures are bad, the default) or `exclude`",
                    );
                    None
                }
            }
        });
        return Some(Sli::Latency {
            under: under?,
            exclude_failures: exclude?,
            corrected: corrected?,
        });
    }
    if f.has("availability") {
        return Some(Sli::Availability);
    }
    ctx.error(
        node.pos,
        path,
        "expected `availability` or `latency: {under: ..}`",
    );
    None
}

fn alerting(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Vec<TierSpec>> {
    let f = walk::fields(ctx, node, path, &["tiers"])?;
    let tn = f.get("tiers")?;
    let tp = f.path_of("tiers");
    let mut out = Vec::new();
    for (i, item) in walk::seq(ctx, tn, &tp).iter().enumerate() {
        let p = format!("{tp}[{i}]");
        let Some(t) = walk::fields(
            ctx,
            item,
            &p,
            &["name", "severity", "long", "short", "factor"],
        ) else {
            continue;
        };
        let name = required(ctx, &t, "name", walk::string);
        let page = required(ctx, &t, "severity", |c, n, p| {
            match walk::string(c, n, p).as_deref() {
                Some("page") => Some(true),
                Some("ticket") => Some(false),
                _ => {
                    c.error(n.pos, p, "severity is `page` or `ticket`");
                    None
                }
            }
        });
        let long = required(ctx, &t, "long", positive_duration);
        let short = required(ctx, &t, "short", positive_duration);
        let factor = required(ctx, &t, "factor", |c, n, p| {
            let v = walk::number(c, n, p)?;
            if v <= 0.0 {
                c.error(n.pos, p, "must be above zero");
                return None;
            }
            Some(v)
        });
        if let (Some(l), Some(s), Some(n)) = (long, short, t.get("short"))
            && s >= l
        {
            ctx.error(
                n.pos,
                &t.path_of("short"),
                "the short window must be shorter than the long one",
            );
            continue;
        }
        if let (Some(name), Some(page), Some(long), Some(short), Some(factor)) =
            (name, page, long, short, factor)
        {
            out.push(TierSpec {
                name,
                page,
                long,
                short,
                factor,
            });
        }
    }
    Some(out)
}

/// Labels sloburn's rules set themselves: an SLO's own labels may not take them.
pub(super) const RESERVED_LABELS: [&str; 6] = [
    "slo",
    "sloth_id",
    "sloth_service",
    "sloth_slo",
    "sloth_window",
    "severity",
];

/// An SLO's `labels` (sloburn's or OpenSLO's `metadata.labels`): Prometheus label names that
/// sloburn does not set itself, string values.
pub(super) fn read_labels(
    ctx: &mut Ctx,
    n: &Node,
    path: &str,
    labels: &mut BTreeMap<String, String>,
) {
    let Value::Map(entries) = &n.value else {
        ctx.error(
            n.pos,
            path,
            format!("expected a mapping of label values, found {}", n.kind()),
        );
        return;
    };
    for (k, v) in entries {
        let p = join(path, &k.name);
        if !crate::names::label_name_is_valid(&k.name) {
            ctx.error(k.pos, &p, "not a valid Prometheus label name");
        } else if RESERVED_LABELS.contains(&k.name.as_str()) {
            ctx.error(
                k.pos,
                &p,
                format!("`{}` is set by sloburn; pick another label name", k.name),
            );
        } else if let Some(v) = walk::string(ctx, v, &p) {
            labels.insert(k.name.clone(), v);
        }
    }
}
