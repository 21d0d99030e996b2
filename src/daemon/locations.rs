//! Locations (issue 49): the daemons of `server.locations`, each running every profile whole,
//! asked through their own APIs for one SLO's rows (`GET /api/location/{slo}`: per-minute
//! good and bad events, older hours per hour), concurrently, with the admin token and
//! [`PEER_TIMEOUT`]; this daemon's own rows are read in place. The quorum is then
//! `slo::quorum`'s pure judgement of those rows.
//!
//! A location that did not answer (or answered as another location, or with unusable rows) is
//! named, and reports no bucket: it counts as neither good nor bad. With fewer than K
//! locations answering there is no verdict. A `dns+http://name:port` entry is every A/AAAA
//! record of `name`, looked up again at every answer; a location with several daemons (a
//! sharded one) contributes the sum of their rows, and is missing when one of them is.

use super::peers::{self, PEER_TIMEOUT};
use super::state::Shared;
use crate::slo::quorum::{self, Bucket, Mark, Row};
use crate::slo::{SloReport, Windows, evaluate, minute_of};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// The most rows a location's answer may hold: the minute ring plus every hour of a year.
pub(super) const MAX_ROWS: usize = 7 * 60 + 24 * 366 + 1;
/// Buckets a quorum answer lists (the newest), for the dashboard's rows.
pub(super) const SHOWN_BUCKETS: usize = 60;

/// Whether `slo` is judged by a quorum of locations here.
pub(super) fn quorum_of(shared: &Shared, slo: &str) -> Option<crate::config::locations::Quorum> {
    let cfg = shared.config();
    if cfg.server.locations.me.is_none() || cfg.server.locations.list.is_empty() {
        return None;
    }
    cfg.slos.get(slo)?.quorum
}

/// This daemon's own rows of `slo` now, as `GET /api/location/{slo}` answers them.
pub(super) fn own_rows(shared: &Shared, slo: &str) -> Option<(i64, Vec<Row>)> {
    let now = minute_of(shared.clock.unix_secs_i64());
    let (minutes, period_minutes, _) = shared.budget.period_minutes(slo)?;
    Some((now, quorum::rows_of(&minutes, period_minutes, now)))
}

/// The answer of `GET /api/location/{slo}`: this location's name and its rows.
pub(super) fn local_answer(shared: &Shared, slo: &str) -> Option<Value> {
    let (now, rows) = own_rows(shared, slo)?;
    let rows: Vec<[i64; 4]> = rows
        .iter()
        .map(|r| [r.minute, r.minutes, r.good as i64, r.bad as i64])
        .collect();
    Some(json!({
        "location": shared.config().server.locations.me,
        "slo": slo,
        "now_minute": now,
        "rows": rows,
    }))
}

/// Rows read back from a location's answer, or why they cannot be used.
fn rows_from(v: &Value, name: &str) -> Result<Vec<Row>, String> {
    if v["location"].as_str() != Some(name) {
        return Err(format!(
            "it answers as location {}, not `{name}`",
            v["location"]
        ));
    }
    let list = v["rows"].as_array().ok_or("its answer has no `rows`")?;
    if list.len() > MAX_ROWS {
        return Err(format!("{} rows: at most {MAX_ROWS}", list.len()));
    }
    list.iter()
        .map(|r| {
            let n = |i: usize| r[i].as_i64();
            match (n(0), n(1), n(2), n(3)) {
                (Some(minute), Some(minutes @ 1..=60), Some(g @ 0..), Some(b @ 0..)) => Ok(Row {
                    minute,
                    minutes,
                    good: g as u64,
                    bad: b as u64,
                }),
                _ => Err(format!("a row is not [minute, minutes, good, bad]: {r}")),
            }
        })
        .collect()
}

/// What every call to a location needs, cloned into each call's task.
#[derive(Clone)]
struct Asker {
    client: crate::http::Client,
    headers: http::HeaderMap,
    resolver: std::sync::Arc<crate::http::dns::Resolver>,
}

/// One location's rows of `slo`: every daemon behind its entry asked, their rows summed.
async fn ask_one(a: Asker, name: &str, url: &str, slo: &str) -> Result<Vec<Row>, String> {
    let urls = super::discovery::expand(&a.resolver, url).await?;
    if urls.is_empty() {
        return Err("its DNS name has no A/AAAA records".to_string());
    }
    let mut calls = tokio::task::JoinSet::new();
    for u in urls {
        let a = a.clone();
        let full = format!("{u}/api/location/{slo}");
        calls.spawn(async move {
            let got = peers::call(
                &a.client,
                &a.headers,
                http::Method::GET,
                &full,
                bytes::Bytes::new(),
                PEER_TIMEOUT,
            )
            .await;
            (u, got)
        });
    }
    let mut rows = Vec::new();
    while let Some(done) = calls.join_next().await {
        let Ok((u, got)) = done else { continue };
        match got {
            Ok((200, v)) => rows.extend(rows_from(&v, name).map_err(|e| format!("{u}: {e}"))?),
            Ok((code, _)) => return Err(format!("{u}: it answered {code}")),
            Err(e) => return Err(format!("{u}: {e}")),
        }
    }
    Ok(rows)
}

/// A quorum SLO judged now across every location.
pub(super) struct Judged {
    pub k: u32,
    pub bucket: Duration,
    /// Every location, as listed.
    pub names: Vec<String>,
    /// Each location's own SLO from its rows (`None`: it did not answer).
    pub own: Vec<Option<SloReport>>,
    /// Locations that did not answer, and why.
    pub problems: Vec<(String, String)>,
    pub buckets: Vec<Bucket>,
    /// The quorum SLO's windows (judged minutes) and report.
    pub windows: Windows,
    pub report: SloReport,
    pub now_minute: i64,
}

impl Judged {
    /// Locations that answered.
    pub fn answered(&self) -> usize {
        self.own.iter().filter(|o| o.is_some()).count()
    }

    /// Whether there is a verdict: at least K locations answered.
    pub fn verdict(&self) -> bool {
        self.answered() >= self.k as usize
    }

    pub fn missing(&self) -> Vec<&str> {
        self.names
            .iter()
            .zip(&self.own)
            .filter(|(_, o)| o.is_none())
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// The fields a quorum SLO's answer carries besides its figures.
    pub fn describe(&self, v: &mut Value) {
        let missing = self.missing();
        let shown = self.buckets.len().saturating_sub(SHOWN_BUCKETS);
        let buckets: Vec<Value> = self.buckets[shown..]
            .iter()
            .map(|b| {
                let marks: serde_json::Map<String, Value> = self
                    .names
                    .iter()
                    .zip(&b.marks)
                    .map(|(n, m)| {
                        let m = match m {
                            Some(Mark::Bad) => json!("bad"),
                            Some(Mark::Good) => json!("good"),
                            None => Value::Null,
                        };
                        (n.clone(), m)
                    })
                    .collect();
                json!({
                    "start": b.start * 60,
                    "minutes": b.minutes,
                    "state": b.state.as_str(),
                    "locations": marks,
                })
            })
            .collect();
        v["scope"] = json!("locations");
        v["complete"] = json!(missing.is_empty());
        v["quorum"] = json!({
            "k": self.k,
            "bucket": crate::units::format_duration(self.bucket),
            "locations": self.names,
            "answered": self.answered(),
            "missing_locations": missing,
            "verdict": self.verdict(),
            "location_errors": self.problems.iter()
                .map(|(l, e)| json!({"location": l, "error": e}))
                .collect::<Vec<_>>(),
            "buckets": buckets,
        });
    }
}

/// `slo` judged now: every location asked at once (this one read in place), each one's own SLO
/// rebuilt from its rows, the buckets judged, the quorum's windows and report.
pub(super) async fn judge(shared: &Shared, slo: &str) -> Option<Judged> {
    let cfg = shared.config();
    let q = quorum_of(shared, slo)?;
    let def = cfg.slos.get(slo)?.def();
    let me = cfg.server.locations.me.clone()?;
    let (now, mine) = own_rows(shared, slo)?;
    let asker = Asker {
        client: peers::client(shared, PEER_TIMEOUT),
        headers: peers::headers(shared),
        resolver: super::discovery::resolver(shared),
    };
    // The set dies with this call: no location call outlives the answer it was for.
    let mut calls = tokio::task::JoinSet::new();
    for l in cfg.server.locations.list.iter().filter(|l| l.name != me) {
        let (name, url, slo) = (l.name.clone(), l.url.clone(), slo.to_string());
        let asker = asker.clone();
        calls.spawn(async move {
            let got = ask_one(asker, &name, &url, &slo).await;
            (name, got)
        });
    }
    let mut rows: BTreeMap<String, Result<Vec<Row>, String>> = BTreeMap::new();
    rows.insert(me, Ok(mine));
    while let Some(done) = calls.join_next().await {
        if let Ok((name, got)) = done {
            rows.insert(name, got);
        }
    }
    let names: Vec<String> = cfg
        .server
        .locations
        .list
        .iter()
        .map(|l| l.name.clone())
        .collect();
    let bucket = i64::try_from(q.bucket.as_secs() / 60).unwrap_or(1).max(1);
    let budget = def.error_budget();
    let mut problems = Vec::new();
    let mut own = Vec::new();
    let mut marks = Vec::new();
    for n in &names {
        match rows.remove(n) {
            Some(Ok(r)) => {
                let w = quorum::windows_of_rows(def.period, &r);
                own.push(Some(evaluate(&def, &w, now)));
                marks.push(Some(quorum::marks(&r, bucket, budget)));
            }
            other => {
                let why = match other {
                    Some(Err(e)) => e,
                    _ => "not asked".to_string(),
                };
                problems.push((n.clone(), why));
                own.push(None);
                marks.push(None);
            }
        }
    }
    let buckets = quorum::judge(&marks, q.k);
    let windows = quorum::windows(def.period, &buckets);
    let report = evaluate(&def, &windows, now);
    Some(Judged {
        k: q.k,
        bucket: q.bucket,
        names,
        own,
        problems,
        buckets,
        windows,
        report,
        now_minute: now,
    })
}

/// The Flagger hook's SLO mode on a quorum SLO: the quorum's burn over `window` against
/// `max_burn_rate`; 503 (no verdict) when fewer than K locations answered.
pub(super) async fn hook_answer(
    shared: &Shared,
    slo: &str,
    window: Duration,
    max: f64,
) -> (axum::http::StatusCode, Value) {
    use axum::http::StatusCode;
    let Some(j) = judge(shared, slo).await else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"error": format!("SLO `{slo}` has no live state yet")}),
        );
    };
    let (good, bad) = j.windows.totals(window, j.now_minute);
    let burn = crate::slo::burn_rate(good, bad, j.report.error_budget);
    let passed = burn <= max;
    let mut body = json!({
        "mode": "slo",
        "slo": slo,
        "window": crate::units::format_duration(window),
        "burn_rate": if burn.is_finite() { json!(burn) } else { Value::Null },
        "max_burn_rate": max,
        "passed": passed,
        "good_minutes": good,
        "bad_minutes": bad,
    });
    j.describe(&mut body);
    if !j.verdict() {
        body["passed"] = Value::Null;
        body["reason"] = json!(format!(
            "inconclusive: {} of {} locations answered (quorum {}); missing {:?}",
            j.answered(),
            j.names.len(),
            j.k,
            j.missing()
        ));
        return (StatusCode::SERVICE_UNAVAILABLE, body);
    }
    let status = if passed {
        StatusCode::OK
    } else {
        StatusCode::PRECONDITION_FAILED
    };
    (status, body)
}
