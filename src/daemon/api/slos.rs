//! `/api/slos` and `/api/slos/{name}`: an SLO's report as JSON, its maintenance state, and
//! the whole SLO summed over every shard (`?scope=local` for one).

use crate::daemon::state::Shared;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::*;

pub(super) fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else {
        serde_json::Value::Null
    }
}

/// One SLO's live state as the API shows it (an element of `/api/slos`, and `/api/slos/{name}`).
/// `burn_rates` maps each standard window (`5m` … `3d`) to its burn rate.
pub(super) fn slo_json(r: &crate::slo::SloReport) -> serde_json::Value {
    let window = |s: &crate::slo::SloStatus| {
        json!({
            "window": crate::units::format_duration(s.window),
            "good": s.good,
            "bad": s.bad,
            "sli": finite(s.sli),
            "burn_rate": finite(s.burn_rate),
        })
    };
    // A calendar period names itself and its bounds (RFC 3339, in its zone).
    let period = |r: &crate::slo::SloReport| {
        let mut p = window(&r.period);
        if let Some((c, start, end)) = &r.calendar {
            p["window"] = json!(c.unit.as_str());
            p["calendar"] = json!(c.unit.as_str());
            p["timezone"] = json!(c.tz.name());
            p["start"] = json!(crate::slo::rfc3339_in(c.tz, *start));
            p["end"] = json!(crate::slo::rfc3339_in(c.tz, *end));
        }
        p
    };
    let burn_rates: serde_json::Map<String, serde_json::Value> = r
        .windows
        .iter()
        .map(|s| (crate::units::format_duration(s.window), finite(s.burn_rate)))
        .collect();
    json!({
        "name": r.name,
        "objective": r.objective,
        "error_budget": r.error_budget,
        "budget_remaining": finite(r.budget_remaining),
        "time_to_exhaustion_seconds": r.time_to_exhaustion.map(|d| d.as_secs_f64()),
        "windows": r.windows.iter().map(window).collect::<Vec<_>>(),
        "burn_rates": burn_rates,
        "period": period(r),
        "tiers": r.tiers.iter().map(|t| json!({
            "name": t.name,
            "severity": t.severity.as_str(),
            "factor": t.factor,
            "active": t.active,
            "silenced": t.silenced,
            "state": tier_state(t.active, t.silenced),
            "long": window(&t.long),
            "short": window(&t.short),
        })).collect::<Vec<_>>(),
    })
}

/// A tier as the dashboard's alerts table names it: `firing`, `silenced` (it would fire, but a
/// maintenance window covers the SLO, as the generated alert's `unless` does) or `ok`.
fn tier_state(active: bool, silenced: bool) -> &'static str {
    match (active, silenced) {
        (true, _) => "firing",
        (false, true) => "silenced",
        (false, false) => "ok",
    }
}

/// `?scope=local` (this shard's own figures, what a peer asks for) and `?window=` (with
/// `scope=local` on one SLO: its live events over that window, for a peer's guard or hook).
#[derive(serde::Deserialize, Default)]
pub(super) struct SloQuery {
    pub(super) scope: Option<String>,
    pub(super) window: Option<String>,
}

impl SloQuery {
    /// Whether the answer is this shard's own: asked for, or no peers to ask.
    pub(super) fn local(&self, shared: &Shared) -> Result<bool, ApiError> {
        match self.scope.as_deref() {
            Some("local") => Ok(true),
            Some("whole") | None => Ok(!crate::daemon::peers::peered(shared)),
            Some(other) => Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!(
                    "scope `{other}`: `local` (this shard's events) or `whole` (every shard's)"
                ),
            )),
        }
    }
}

/// The `scope` and `shard` fields of a local answer: which shard's events these are.
pub(super) fn local_scope(shared: &Shared, v: &mut serde_json::Value) {
    v["scope"] = json!("local");
    v["shard"] = json!({ "index": shared.shard.index(), "count": shared.shard.count() });
}

/// Every SLO: this shard's figures, or with peers the whole SLO's (every shard's events added
/// up, ratios recomputed), naming any shard that did not answer.
pub(super) async fn slos(
    State(shared): State<AppState>,
    Query(q): Query<SloQuery>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    let reports = shared.budget.reports();
    if q.local(&shared)? {
        let mut v = json!({ "slos": reports.iter().map(slo_json).collect::<Vec<_>>() });
        local_scope(&shared, &mut v);
        if q.scope.is_none() {
            // A quorum SLO answers across its locations unless `scope=local` asks otherwise.
            super::quorum::apply(&shared, &mut v, slo_json).await;
        }
        mark_maintenance(&shared, &mut v);
        return Ok(axum::Json(v).into_response());
    }
    let mut g = crate::daemon::peers::gather(&shared, "/api/slos?scope=local").await;
    let mut merged = Vec::with_capacity(reports.len());
    for r in &reports {
        merged.push(slo_json(&whole(r, &mut g)));
    }
    let mut v = json!({ "slos": merged });
    g.describe(&mut v);
    super::quorum::apply(&shared, &mut v, slo_json).await;
    mark_maintenance(&shared, &mut v);
    Ok(axum::Json(v).into_response())
}

/// Each SLO of a `/api/slos` answer, [`enrich`]ed.
pub(super) fn mark_maintenance(shared: &Shared, v: &mut serde_json::Value) {
    let cfg = shared.config();
    if let Some(list) = v["slos"].as_array_mut() {
        for slo in list {
            enrich(shared, &cfg, slo);
        }
    }
}

/// What the daemon adds to an SLO's figures: whether a maintenance window covers it now, and
/// each tier's alert as `sloburn rules` writes it (its PromQL and `for`), for the dashboard's
/// alerts table.
pub(super) fn enrich(shared: &Shared, cfg: &crate::config::Config, slo: &mut serde_json::Value) {
    let name = slo["name"].as_str().unwrap_or_default().to_string();
    let maintenance = shared.budget.in_maintenance(&name);
    slo["maintenance"] = json!(maintenance);
    if maintenance && let Some(tiers) = slo["tiers"].as_array_mut() {
        // Also the whole SLO's tiers, recomputed from every shard's counts.
        for t in tiers {
            let silenced = t["active"] == true || t["silenced"] == true;
            t["active"] = json!(false);
            t["silenced"] = json!(silenced);
            t["state"] = json!(tier_state(false, silenced));
        }
    }
    let Some(conf) = cfg.slos.get(&name) else {
        return;
    };
    if let Some(g) = &conf.group {
        slo["group"] = json!({"slo": g.parent, "label": g.label, "value": g.value});
    }
    let def = conf.def();
    let alerts = crate::rules::alert_exprs(&def, &crate::rules::RulesOptions::default());
    if let Some(tiers) = slo["tiers"].as_array_mut() {
        for t in tiers {
            let tier = t["name"].as_str().unwrap_or_default().to_string();
            if let Some((_, expr, r#for)) = alerts.iter().find(|(n, _, _)| *n == tier) {
                t["expr"] = json!(expr);
                t["for"] = json!(r#for.map_or("0s".to_string(), crate::units::format_duration));
            }
        }
    }
}

/// `local` plus every answering peer's figures of the same SLO. A peer whose answer lacks them,
/// or a window of them (another config), is dropped from `g`, so it is named missing, never
/// taken as zero.
pub(super) fn whole(
    local: &crate::slo::SloReport,
    g: &mut crate::daemon::peers::Gathered,
) -> crate::slo::SloReport {
    let need = crate::slo::Counts::of(local);
    let mut parts = Vec::new();
    let mut unusable = Vec::new();
    for (i, answer) in &g.answers {
        // A peer's `/api/slos` holds a list; its `/api/slos/{name}` is the one SLO.
        let found = match answer["slos"].as_array() {
            Some(list) => list.iter().find(|s| s["name"] == local.name.as_str()),
            None => Some(answer).filter(|a| a["name"] == local.name.as_str()),
        };
        match found.and_then(crate::daemon::peers::counts_of) {
            Some(c) => match need.windows.keys().find(|w| !c.windows.contains_key(w)) {
                None => parts.push(c),
                Some(w) => unusable.push((
                    *i,
                    format!(
                        "no `{}` window for SLO `{}`",
                        crate::units::format_duration(*w),
                        local.name
                    ),
                )),
            },
            None => unusable.push((*i, format!("no figures for SLO `{}`", local.name))),
        }
    }
    for (i, why) in unusable {
        g.drop_answer(i, why);
    }
    // Every part holds every window `local` has, so the merge cannot lack one.
    crate::slo::merged(local, &parts).unwrap_or_else(|_| local.clone())
}

/// One SLO: the same object as its element of `/api/slos` (for Argo Rollouts' web metrics).
pub(super) async fn slo(
    State(shared): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<SloQuery>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    let local = q.local(&shared)?;
    if q.scope.as_deref() != Some("local")
        && let Some(mut v) = super::quorum::quorum_slo(&shared, &name, slo_json).await
    {
        enrich(&shared, &shared.config(), &mut v);
        return Ok(axum::Json(v).into_response());
    }
    let reports = shared.budget.reports();
    let Some(r) = reports.iter().find(|r| r.name == name) else {
        return if shared.config().slos.contains_key(&name) {
            Err(ApiError(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("SLO `{name}` has no report yet (the first one-second tick is due)"),
            ))
        } else {
            Err(ApiError(StatusCode::NOT_FOUND, format!("no SLO `{name}`")))
        };
    };
    if local {
        let mut v = slo_json(r);
        enrich(&shared, &shared.config(), &mut v);
        // Asked for explicitly (as a peer does), it says whose figures these are; otherwise
        // it stays exactly its element of `/api/slos` (Argo's web metrics read both).
        if q.scope.is_some() {
            local_scope(&shared, &mut v);
        }
        if let Some(w) = &q.window {
            let window = crate::units::parse_duration(w.trim())
                .map_err(|e| ApiError(StatusCode::BAD_REQUEST, format!("window `{w}`: {e}")))?;
            if let Some((good, bad, _)) =
                shared
                    .budget
                    .totals(&name, window, shared.clock.unix_secs() as i64)
            {
                v["asked"] = json!({
                    "window": crate::units::format_duration(window),
                    "good": good,
                    "bad": bad,
                });
            }
        }
        return Ok(axum::Json(v).into_response());
    }
    let mut g =
        crate::daemon::peers::gather(&shared, &format!("/api/slos/{name}?scope=local")).await;
    let mut v = slo_json(&whole(r, &mut g));
    g.describe(&mut v);
    enrich(&shared, &shared.config(), &mut v);
    Ok(axum::Json(v).into_response())
}
