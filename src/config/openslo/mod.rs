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

use super::walk::{self, Ctx, Fields};
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

mod sli;
use sli::indicator;
mod window;
use window::{objectives, time_window};

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
        let Some((name, _)) = metadata(&mut ctx, &f, &path, None) else {
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

/// `metadata`: name (required), displayName, and labels: read into `labels` when given (an
/// SLO's, which become its rules' labels), otherwise left unread.
pub(super) fn metadata(
    ctx: &mut Ctx,
    f: &Fields,
    path: &str,
    labels: Option<&mut BTreeMap<String, String>>,
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
    if let (Some(n), Some(labels)) = (mf.get("labels"), labels) {
        super::slos::read_labels(ctx, n, &mf.path_of("labels"), labels);
    }
    Some((name?, display))
}

type Find<'a> = dyn Fn(&str, &str) -> Option<&'a Node> + 'a;

fn slo<'a>(ctx: &mut Ctx, doc: &'a Node, path: &str, find: &Find<'a>) -> Option<ImportedSlo> {
    let f = walk::fields(ctx, doc, path, &["apiVersion", "kind", "metadata", "spec"])?;
    let mut labels = BTreeMap::new();
    let (name, display) = metadata(ctx, &f, path, Some(&mut labels))?;
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
    let mut sli = None;
    let found = (&mut description, &mut sli);
    let indicator_ok = slo_indicator(ctx, (spec, &sp), &s, target.as_deref(), find, found);
    let period = match s.get("timeWindow") {
        Some(n) => time_window(ctx, n, &s.path_of("timeWindow")).map(Some),
        None => Some(None),
    };
    if let Some(n) = s.get("budgetingMethod") {
        budgeting_method(ctx, n, &s.path_of("budgetingMethod"));
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

/// The SLO's indicator: inline (`indicator`) or by reference (`indicatorRef`), one of them;
/// only ratio metrics map. Whether it did.
fn slo_indicator<'a>(
    ctx: &mut Ctx,
    (spec, sp): (&Node, &str),
    s: &walk::Fields<'a>,
    target: Option<&str>,
    find: &Find<'a>,
    (description, sli): (&mut Vec<String>, &mut Option<(super::Sli, Vec<String>)>),
) -> bool {
    match (s.get("indicator"), s.get("indicatorRef")) {
        (Some(n), None) => indicator(ctx, n, &s.path_of("indicator"), target, description, sli),
        (None, Some(r)) => {
            let rp = s.path_of("indicatorRef");
            let Some(rn) = walk::string(ctx, r, &rp) else {
                return false;
            };
            match find("SLI", &rn) {
                Some(d) => indicator(ctx, d, &format!("SLI {rn}"), target, description, sli),
                None => {
                    ctx.error(r.pos, &rp, format!("no SLI named `{rn}` in this file"));
                    false
                }
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
            ctx.error(spec.pos, sp, "missing `indicator` or `indicatorRef`");
            false
        }
    }
}

/// `budgetingMethod`: only `Occurrences` maps (sloburn counts good and bad events).
fn budgeting_method(ctx: &mut Ctx, n: &Node, p: &str) {
    match walk::string(ctx, n, p).as_deref() {
        Some("Occurrences") | None => {}
        Some(other) => ctx.error(
            n.pos,
            p,
            format!("budgetingMethod `{other}` does not map: sloburn counts good and bad events (`Occurrences`)"),
        ),
    }
}

/// The value under `key` of a mapping, without checking anything.
fn child<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.value {
        Value::Map(entries) => entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v),
        _ => None,
    }
}
