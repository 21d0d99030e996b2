//! OpenSLO v1 in: `SLO` documents, with the `SLI`, `AlertPolicy` and `AlertCondition` objects
//! they refer to (or inline), converted to sloburn's `slos` section.
//!
//! Every field is either mapped or an error at its `line:col`: nothing is dropped silently.
//! The one field kept only as a warning is an SLI's metric source: sloburn measures the
//! service with its own probes (good and bad requests of its target), so the query of another
//! system (Prometheus, Datadog, …) is replaced, and the warning says so at the query.
//!
//! Mapping: `metadata.name` → the SLO's name; `spec.service` → its target; a `ratioMetric` SLI
//! → `sli: availability`; `timeWindow` rolling → `period: 28d`, calendar-aligned `1w`/`1M`/`1Q`
//! → `period: {calendar: week|month|quarter, timezone}`; one objective's `target` or
//! `targetPercent` → `objective`; `budgetingMethod: Occurrences` (the only one sloburn counts);
//! description and display names → `description`; `metadata.labels` → `labels`; each alert
//! policy's burn-rate condition → one tier (`threshold` → factor, `lookbackWindow` → long
//! window, `alertAfter` → short window, or a twelfth of the long one when zero, `severity`
//! page or ticket); a policy's notification target → the label `openslo_notification_target`,
//! which Alertmanager can route on.

use super::walk::{self, Ctx, Fields, join};
use super::yaml::{self, Node, Pos, Value};
use super::{ConfigError, Diagnostic};
use crate::slo::{Calendar, CalendarUnit};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

mod alerts;
mod commands;
use alerts::alert_policy;
pub(super) use commands::load_into;
pub use commands::{export, import_command, to_yaml};

/// One imported SLO, ready to be printed as sloburn YAML.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedSlo {
    pub name: String,
    pub target: String,
    /// Percent.
    pub objective: f64,
    /// Availability, unless sloburn's own export named another SLI.
    pub sli: super::Sli,
    pub profiles: Vec<String>,
    pub period: Option<Period>,
    pub description: String,
    pub labels: BTreeMap<String, String>,
    pub tiers: Vec<ImportedTier>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Period {
    Rolling(Duration),
    Calendar(Calendar),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ImportedTier {
    pub name: String,
    pub page: bool,
    pub long: Duration,
    pub short: Duration,
    pub factor: f64,
}

/// Converts an OpenSLO file to sloburn SLOs, with the warnings (replaced metric sources).
pub fn import(text: &str, file: &str) -> Result<(Vec<ImportedSlo>, Vec<Diagnostic>), ConfigError> {
    let docs = yaml::parse_documents(text).map_err(|e| ConfigError {
        file: file.to_string(),
        errors: vec![Diagnostic {
            pos: e.pos,
            path: String::new(),
            message: e.message,
        }],
        warnings: Vec::new(),
    })?;
    let mut ctx = Ctx::default();
    let mut objects: Vec<(String, String, &Node, Pos)> = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        if doc.is_null() {
            continue;
        }
        let path = format!("document {}", i + 1);
        let Some(f) = walk::fields(
            &mut ctx,
            doc,
            &path,
            &["apiVersion", "kind", "metadata", "spec"],
        ) else {
            continue;
        };
        match f.get("apiVersion").and_then(Node::as_scalar) {
            Some("openslo/v1") => {}
            Some(other) => {
                let pos = f.get("apiVersion").map_or(doc.pos, |n| n.pos);
                ctx.error(
                    pos,
                    &f.path_of("apiVersion"),
                    format!("`{other}` is not read: sloburn reads OpenSLO `openslo/v1`"),
                );
                continue;
            }
            None => {
                ctx.error(doc.pos, &path, "missing `apiVersion: openslo/v1`");
                continue;
            }
        }
        let Some(kind_node) = f.get("kind") else {
            ctx.error(doc.pos, &path, "missing `kind`");
            continue;
        };
        let kind = kind_node.as_scalar().unwrap_or_default().to_string();
        if !matches!(
            kind.as_str(),
            "SLO" | "SLI" | "AlertPolicy" | "AlertCondition"
        ) {
            ctx.error(
                kind_node.pos,
                &f.path_of("kind"),
                format!("kind `{kind}` does not map to sloburn: it reads SLO, SLI, AlertPolicy and AlertCondition (sloburn's targets are its services and data sources)"),
            );
            continue;
        }
        let Some((name, _)) = metadata(&mut ctx, &f, &path, &mut BTreeMap::new()) else {
            continue;
        };
        objects.push((kind, name, doc, doc.pos));
    }
    // The first object of each kind and name, hashed: references resolve in one lookup each.
    let mut by_name: std::collections::HashMap<(&str, &str), &Node> =
        std::collections::HashMap::new();
    for (kind, name, doc, _) in &objects {
        by_name
            .entry((kind.as_str(), name.as_str()))
            .or_insert(*doc);
    }
    let find = |kind: &str, name: &str| by_name.get(&(kind, name)).copied();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (kind, name, doc, _) in &objects {
        if kind != "SLO" {
            continue;
        }
        let path = name.clone();
        if let Some(s) = slo(&mut ctx, doc, &path, &find) {
            if !seen.insert(s.name.clone()) {
                ctx.error(doc.pos, &path, format!("a second SLO named `{}`", s.name));
            } else {
                out.push(s);
            }
        }
    }
    if ctx.errors.is_empty() {
        Ok((out, ctx.warnings))
    } else {
        Err(ConfigError {
            file: file.to_string(),
            errors: ctx.errors,
            warnings: ctx.warnings,
        })
    }
}

/// `metadata`: name (required), displayName, labels (into `labels`).
fn metadata(
    ctx: &mut Ctx,
    f: &Fields,
    path: &str,
    labels: &mut BTreeMap<String, String>,
) -> Option<(String, Option<String>)> {
    let Some(m) = f.get("metadata") else {
        ctx.error(f.node.pos, path, "missing `metadata.name`");
        return None;
    };
    let mp = f.path_of("metadata");
    let mf = walk::fields(ctx, m, &mp, &["name", "displayName", "labels"])?;
    let name = walk::required(ctx, &mf, "name", walk::string);
    let display = mf
        .get("displayName")
        .and_then(|n| walk::string(ctx, n, &mf.path_of("displayName")));
    if let Some(n) = mf.get("labels") {
        let lp = mf.path_of("labels");
        if let Value::Map(entries) = &n.value {
            for (k, v) in entries {
                let p = join(&lp, &k.name);
                if !crate::rules::label_name_is_valid(&k.name) {
                    ctx.error(k.pos, &p, "not a valid Prometheus label name");
                } else if let Some(v) = walk::string(ctx, v, &p) {
                    labels.insert(k.name.clone(), v);
                }
            }
        } else {
            ctx.error(
                n.pos,
                &lp,
                format!("expected a mapping of label values, found {}", n.kind()),
            );
        }
    }
    Some((name?, display))
}

type Find<'a> = dyn Fn(&str, &str) -> Option<&'a Node> + 'a;

fn slo<'a>(ctx: &mut Ctx, doc: &'a Node, path: &str, find: &Find<'a>) -> Option<ImportedSlo> {
    let f = walk::fields(ctx, doc, path, &["apiVersion", "kind", "metadata", "spec"])?;
    let mut labels = BTreeMap::new();
    let (name, display) = metadata(ctx, &f, path, &mut labels)?;
    let Some(spec) = f.get("spec") else {
        ctx.error(doc.pos, path, "missing `spec`");
        return None;
    };
    let sp = f.path_of("spec");
    let s = walk::fields(
        ctx,
        spec,
        &sp,
        &[
            "description",
            "service",
            "indicator",
            "indicatorRef",
            "timeWindow",
            "budgetingMethod",
            "objectives",
            "alertPolicies",
        ],
    )?;
    let mut description: Vec<String> = Vec::new();
    description.extend(display);
    if let Some(d) = s
        .get("description")
        .and_then(|n| walk::string(ctx, n, &s.path_of("description")))
    {
        description.push(d);
    }
    let target = walk::required(ctx, &s, "service", walk::string);
    // The indicator: inline or by reference; only ratio metrics map.
    let mut sli = None;
    let indicator_ok = match (s.get("indicator"), s.get("indicatorRef")) {
        (Some(n), None) => indicator(
            ctx,
            n,
            &s.path_of("indicator"),
            target.as_deref(),
            &mut description,
            &mut sli,
        ),
        (None, Some(r)) => {
            let rp = s.path_of("indicatorRef");
            match walk::string(ctx, r, &rp) {
                Some(rn) => match find("SLI", &rn) {
                    Some(d) => indicator(
                        ctx,
                        d,
                        &format!("SLI {rn}"),
                        target.as_deref(),
                        &mut description,
                        &mut sli,
                    ),
                    None => {
                        ctx.error(r.pos, &rp, format!("no SLI named `{rn}` in this file"));
                        false
                    }
                },
                None => false,
            }
        }
        (Some(_), Some(r)) => {
            ctx.error(
                r.pos,
                &s.path_of("indicatorRef"),
                "give `indicator` or `indicatorRef`, not both",
            );
            false
        }
        (None, None) => {
            ctx.error(spec.pos, &sp, "missing `indicator` or `indicatorRef`");
            false
        }
    };
    let period = match s.get("timeWindow") {
        Some(n) => time_window(ctx, n, &s.path_of("timeWindow")).map(Some),
        None => Some(None),
    };
    if let Some(n) = s.get("budgetingMethod") {
        let p = s.path_of("budgetingMethod");
        match walk::string(ctx, n, &p).as_deref() {
            Some("Occurrences") | None => {}
            Some(other) => ctx.error(
                n.pos,
                &p,
                format!("budgetingMethod `{other}` does not map: sloburn counts good and bad events (`Occurrences`)"),
            ),
        }
    }
    let objective = match s.get("objectives") {
        Some(n) => objectives(ctx, n, &s.path_of("objectives"), &mut description),
        None => {
            ctx.error(spec.pos, &sp, "missing `objectives`");
            None
        }
    };
    let mut tiers = Vec::new();
    if let Some(n) = s.get("alertPolicies") {
        let ap = s.path_of("alertPolicies");
        for (i, item) in walk::seq(ctx, n, &ap).iter().enumerate() {
            alert_policy(
                ctx,
                item,
                &format!("{ap}[{i}]"),
                find,
                &mut tiers,
                &mut labels,
            );
        }
    }
    if !indicator_ok {
        return None;
    }
    let (sli, profiles) = sli.unwrap_or((super::Sli::Availability, Vec::new()));
    Some(ImportedSlo {
        name,
        sli,
        profiles,
        target: target?,
        objective: objective?,
        period: period?,
        description: description.join(": "),
        labels,
        tiers,
    })
}

/// An SLI (inline `{metadata, spec}` or a `kind: SLI` document): a ratio metric maps to
/// sloburn's availability SLI; its metric sources are replaced by sloburn's own probes.
fn indicator(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    target: Option<&str>,
    description: &mut Vec<String>,
    found: &mut Option<(super::Sli, Vec<String>)>,
) -> bool {
    let Some(f) = walk::fields(ctx, node, path, &["apiVersion", "kind", "metadata", "spec"]) else {
        return false;
    };
    if metadata(ctx, &f, path, &mut BTreeMap::new()).is_none() {
        return false;
    }
    let Some(spec) = f.get("spec") else {
        ctx.error(node.pos, path, "missing `spec`");
        return false;
    };
    let sp = f.path_of("spec");
    let Some(s) = walk::fields(
        ctx,
        spec,
        &sp,
        &["description", "ratioMetric", "thresholdMetric"],
    ) else {
        return false;
    };
    if let Some(d) = s
        .get("description")
        .and_then(|n| walk::string(ctx, n, &s.path_of("description")))
    {
        description.push(d);
    }
    if let Some(t) = s.get("thresholdMetric") {
        ctx.error(
            t.pos,
            &s.path_of("thresholdMetric"),
            "a thresholdMetric (one value compared with `op`/`value`) does not map: sloburn's SLIs count good and bad probe requests; use a ratioMetric",
        );
        return false;
    }
    let Some(r) = s.get("ratioMetric") else {
        ctx.error(spec.pos, &sp, "missing `ratioMetric`");
        return false;
    };
    let rp = s.path_of("ratioMetric");
    let Some(rf) = walk::fields(
        ctx,
        r,
        &rp,
        &["counter", "good", "bad", "total", "raw", "rawType"],
    ) else {
        return false;
    };
    for key in ["raw", "rawType"] {
        if let Some(n) = rf.get(key) {
            ctx.error(n.pos, &rf.path_of(key), "a precomputed ratio (`raw`) does not map: sloburn counts good and bad events itself");
            return false;
        }
    }
    if let Some(n) = rf.get("counter") {
        walk::boolean(ctx, n, &rf.path_of("counter"));
    }
    let service = target.unwrap_or("its target");
    let mut ok = rf.has("total");
    if !ok {
        ctx.error(
            r.pos,
            &rp,
            "a ratioMetric needs `total` and `good` or `bad`",
        );
    }
    match (rf.get("good"), rf.get("bad")) {
        (Some(_), Some(b)) => {
            ctx.error(b.pos, &rf.path_of("bad"), "give `good` or `bad`, not both");
            ok = false;
        }
        (None, None) => {
            ctx.error(
                r.pos,
                &rp,
                "a ratioMetric needs `good` or `bad` with `total`",
            );
            ok = false;
        }
        _ => {}
    }
    // sloburn's own export names its SLI in a `type: sloburn` source: that maps exactly.
    if let Some(g) = rf.get("good")
        && let Some(src) = child(g, "metricSource")
        && child(src, "type").and_then(Node::as_scalar) == Some("sloburn")
    {
        let gp = join(&rf.path_of("good"), "metricSource");
        let Some(mf) = walk::fields(ctx, src, &gp, &["type", "spec"]) else {
            return false;
        };
        let Some(spec) = mf.get("spec") else {
            ctx.error(src.pos, &gp, "missing `spec`");
            return false;
        };
        let Some(sf) = walk::fields(
            ctx,
            spec,
            &mf.path_of("spec"),
            &["sli", "under", "failures", "measure", "profiles"],
        ) else {
            return false;
        };
        let sli = match sf.get("sli").and_then(Node::as_scalar) {
            Some("latency") => {
                let under = walk::required(ctx, &sf, "under", walk::positive_duration);
                let exclude = match sf.get("failures").and_then(Node::as_scalar) {
                    None | Some("include") => Some(false),
                    Some("exclude") => Some(true),
                    Some(_) => {
                        let n = sf.get("failures").unwrap_or(spec);
                        ctx.error(n.pos, &sf.path_of("failures"), "use `include` or `exclude`");
                        None
                    }
                };
                let corrected = match sf.get("measure").and_then(Node::as_scalar) {
                    None | Some("corrected") => Some(true),
                    Some("duration") => Some(false),
                    Some(_) => {
                        let n = sf.get("measure").unwrap_or(spec);
                        ctx.error(
                            n.pos,
                            &sf.path_of("measure"),
                            "use `corrected` or `duration`",
                        );
                        None
                    }
                };
                match (under, exclude, corrected) {
                    (Some(under), Some(exclude_failures), Some(corrected)) => super::Sli::Latency {
                        under,
                        exclude_failures,
                        corrected,
                    },
                    _ => return false,
                }
            }
            Some("availability") | None => super::Sli::Availability,
            Some(other) => {
                let n = sf.get("sli").unwrap_or(spec);
                ctx.error(
                    n.pos,
                    &sf.path_of("sli"),
                    format!("unknown sloburn SLI `{other}`: `availability` or `latency`"),
                );
                return false;
            }
        };
        let profiles = sf
            .get("profiles")
            .map(|n| {
                walk::seq(ctx, n, &sf.path_of("profiles"))
                    .iter()
                    .filter_map(|i| walk::string(ctx, i, &sf.path_of("profiles")))
                    .collect()
            })
            .unwrap_or_default();
        *found = Some((sli, profiles));
        return ok;
    }
    for key in ["good", "bad", "total"] {
        if let Some(n) = rf.get(key) {
            ctx.warn(
                n.pos,
                &rf.path_of(key),
                format!("this metric source is replaced by sloburn's own probes of target `{service}` (good and bad requests)"),
            );
        }
    }
    ok
}

/// The value under `key` of a mapping, without checking anything.
fn child<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
        _ => None,
    }
}

fn time_window(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Period> {
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
        return Some(Period::Rolling(d));
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
    let mut tz = chrono_tz::UTC;
    if let Some(c) = f.get("calendar") {
        let cp = f.path_of("calendar");
        let cf = walk::fields(ctx, c, &cp, &["startTime", "timeZone"])?;
        if let Some(n) = cf.get("timeZone") {
            let s = walk::string(ctx, n, &cf.path_of("timeZone"))?;
            match s.parse::<chrono_tz::Tz>() {
                Ok(t) => tz = t,
                Err(_) => {
                    let hint = ctx.hint(&s, chrono_tz::TZ_VARIANTS.iter().map(|t| t.name()));
                    ctx.error(
                        n.pos,
                        &cf.path_of("timeZone"),
                        format!("unknown time zone `{s}`{hint}"),
                    );
                    return None;
                }
            }
        }
        if let Some(n) = cf.get("startTime") {
            let sp = cf.path_of("startTime");
            let s = walk::string(ctx, n, &sp)?;
            let Ok(t) = chrono::NaiveDateTime::parse_from_str(&s, "%Y-%m-%d %H:%M:%S") else {
                ctx.error(n.pos, &sp, "write the start as `2024-01-01 00:00:00`");
                return None;
            };
            use chrono::{Datelike, Timelike};
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
                    &sp,
                    format!("a start of `{s}` does not map: sloburn's calendar {} starts at local midnight of its first day (a Monday, the 1st, or the 1st of January, April, July or October)", unit.as_str()),
                );
                return None;
            }
        }
    }
    Some(Period::Calendar(Calendar { unit, tz }))
}

fn objectives(
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
