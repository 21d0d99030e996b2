//! Quorum SLOs in the API (issue 49): `GET /api/location/{slo}` (this location's rows of one
//! SLO, what the other locations ask for), and the quorum SLO's element of `/api/slos` and
//! `/api/slos/{name}`: the quorum's figures (judged minutes), `quorum` (K, the bucket, who
//! answered, the newest buckets with each location's mark), and `locations`, each location's
//! own SLO from its rows (`null` for one that did not answer).

use super::*;
use crate::daemon::locations::{self, Judged};

/// `GET /api/location/{slo}`: this daemon's own rows of `slo` (read access, as `/api/slos`).
pub(super) async fn location_rows(
    State(shared): State<AppState>,
    Path(slo): Path<String>,
    caller: Caller,
) -> Result<Response, ApiError> {
    authorize(&shared, &caller, false)?;
    if shared.config().server.locations.me.is_none() {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "this daemon has no `server.location`".to_string(),
        ));
    }
    match locations::local_answer(&shared, &slo) {
        Some(v) => Ok(axum::Json(v).into_response()),
        None => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no SLO `{slo}` with live state here"),
        )),
    }
}

/// How an SLO's report is shown (`slos::slo_json`, handed in: the two files do not import
/// each other).
pub(super) type Render = fn(&crate::slo::SloReport) -> serde_json::Value;

/// A judged quorum SLO as the API shows it (the caller adds maintenance and alert rules).
fn judged_json(j: &Judged, slo_json: Render) -> serde_json::Value {
    let mut v = slo_json(&j.report);
    j.describe(&mut v);
    v["unit"] = json!("minutes");
    v["locations"] = j
        .names
        .iter()
        .zip(&j.own)
        .map(|(n, r)| match r {
            Some(r) => {
                let mut o = slo_json(r);
                o["location"] = json!(n);
                o
            }
            None => json!({ "location": n, "answered": false }),
        })
        .collect();
    v
}

/// `slo`'s quorum element, when it is a quorum SLO here.
pub(super) async fn quorum_slo(
    shared: &Shared,
    slo: &str,
    render: Render,
) -> Option<serde_json::Value> {
    locations::quorum_of(shared, slo)?;
    let j = locations::judge(shared, slo).await?;
    Some(judged_json(&j, render))
}

/// Each quorum SLO of a `/api/slos` answer replaced by its quorum element.
pub(super) async fn apply(shared: &Shared, v: &mut serde_json::Value, render: Render) {
    let Some(list) = v["slos"].as_array_mut() else {
        return;
    };
    for slo in list {
        let name = slo["name"].as_str().unwrap_or_default().to_string();
        if let Some(q) = quorum_slo(shared, &name, render).await {
            *slo = q;
        }
    }
}
