//! `storage.restore`: at start-up, rebuilds the per-minute windows of every SLO the store has
//! no minute for from Prometheus' `sloburn_slo_events_total`, then lets the next flush write
//! them to the store (so the next start needs no Prometheus).
//!
//! It runs as a task beside the server: `/metrics` and `/healthz` answer from the start, and
//! `/readyz` says "restoring from prometheus…" until every SLO's range came back or
//! `restore.timeout` passed; then the daemon is ready with what it has, and `/readyz`, the log
//! and `sloburn_slo_restored_seconds` / `sloburn_slo_restore_gap_seconds` /
//! `sloburn_slo_restore_state` tell how much that is. Which minutes are asked for and how
//! samples become minute counts is `slo::restore` (pure); this file does the HTTP.
//!
//! Each SLO's range is `now − min(max_age, its period)` to the daemon's start: whole minutes
//! by `query_range` (step 60 s, at most 11,000 points per query), the current minute by one
//! instant query over its seconds so far. Every evaluation time is at or before the start, so
//! the daemon's own new series (scraped only after it listens) never counts twice. The query
//! (`slo::restore::increase_query`) sums every series of the SLO by `result`, each instance's
//! counter resets handled before the sum.
//!
//! Samples are doubted (issue 30, item 9): a minute with a sample that is no number or
//! negative, or with more events than the profiles feeding the SLO could send in a minute
//! ([`plausible_limit`], `slo::restore::plausible_per_minute`), is rejected whole, never seeded
//! nor stored, and named on `/readyz` and in the log; the restore is then incomplete.
//!
//! A failed request (Prometheus down, 5xx, 429) is retried after 0.5 s, doubling to 5 s, until
//! the timeout; a refused query (another 4xx) ends that SLO's restore. The URL is shown only as
//! written (`display_url`), its `${env:..}` references kept.

use super::state::Shared;
use crate::budget::{RestorePhase, RestoreStatus, SloCoverage};
use crate::config::spec::Executor;
use crate::config::{Config, Restore};
use crate::http::{Client, ClientOptions, Conn, RequestSpec};
use crate::rules::EVENTS_METRIC;
use crate::slo::restore::{self as plan, CLOSED_VU_RATE, Counts, MAX_POINTS, STEP_SECONDS};
use bytes::Bytes;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The largest response read: 11,000 points of two series is well under 1 MiB.
const MAX_RESPONSE: usize = 16 << 20;
/// One request's bound (the whole restore has its own).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const FIRST_RETRY: Duration = Duration::from_millis(500);
const LAST_RETRY: Duration = Duration::from_secs(5);

/// Marks the restore as running (so `/readyz` says so from the first request); call before
/// the daemon reports ready, then spawn [`run`].
pub(super) fn begin(shared: &Shared) {
    shared.budget.set_restore(RestoreStatus {
        phase: RestorePhase::Restoring,
        slos: BTreeMap::new(),
        from_store: Vec::new(),
    });
}

/// Restores every SLO the store had nothing for, as of `started` (unix seconds, taken before
/// the daemon bound its port), within `cfg.timeout`.
pub(super) async fn run(shared: Arc<Shared>, cfg: Restore, started: i64) {
    let deadline = crate::clock::tokio_instant() + cfg.timeout;
    let candidates = shared.budget.restore_candidates();
    let from_store: Vec<String> = shared
        .budget
        .slo_names()
        .into_iter()
        .filter(|n| !candidates.iter().any(|(c, _)| c == n))
        .collect();
    let mut status = RestoreStatus {
        phase: RestorePhase::Restoring,
        slos: BTreeMap::new(),
        from_store,
    };
    let client = Client::new(
        ClientOptions {
            timeout: REQUEST_TIMEOUT,
            max_body: MAX_RESPONSE,
            ..ClientOptions::default()
        },
        shared.resolver.clone(),
    );
    let mut prom = Prometheus {
        base: cfg.prometheus.expose().to_string(),
        conn: client.conn(),
        deadline,
    };
    let mut problems = Vec::new();
    let config = shared.config();
    for (name, span) in &candidates {
        let p = plan::plan(started, *span, cfg.max_age);
        let limit = plausible_limit(&config, name);
        status.slos.insert(
            name.clone(),
            SloCoverage {
                planned: u64::try_from(p.last - p.first + 1).unwrap_or(0),
                ..SloCoverage::default()
            },
        );
        shared.budget.set_restore(status.clone());
        let outcome = tokio::select! {
            r = restore_slo(&mut prom, &shared, (name, limit), p, started, &mut status) => r,
            _ = shared.shutdown.cancelled() => Err("the daemon is shutting down".into()),
        };
        let complete = outcome.is_ok();
        if let Err(why) = outcome {
            problems.push(format!("{name}: {why}"));
        }
        if let Some(c) = status.slos.get(name)
            && !c.rejected.is_empty()
        {
            let why = format!(
                "{name}: rejected {} minutes of implausible samples ({})",
                c.rejected.len(),
                rejected_text(&c.rejected)
            );
            tracing::warn!(slo = %name, prometheus = %cfg.display_url, limit_per_minute = limit,
                problem = %why, "restore from prometheus rejected samples; they are not stored");
            problems.push(why);
        }
        if let Some(c) = status.slos.get(name) {
            tracing::info!(
                slo = %name,
                complete,
                prometheus = %cfg.display_url,
                restored_minutes = c.restored,
                gap_minutes = c.gap_minutes(),
                gaps = %gaps_text(&c.gaps),
                good = c.good,
                bad = c.bad,
                rejected_minutes = c.rejected.len(),
                "SLO windows restored from prometheus"
            );
        }
    }
    shared.budget.end_restore();
    status.phase = if problems.is_empty() {
        RestorePhase::Done
    } else {
        RestorePhase::Incomplete(problems.join("; "))
    };
    match &status.phase {
        RestorePhase::Incomplete(why) => tracing::warn!(
            prometheus = %cfg.display_url,
            problem = %why,
            "restore from prometheus incomplete; serving with what it restored"
        ),
        _ => tracing::info!(
            prometheus = %cfg.display_url,
            slos = status.slos.len(),
            from_store = status.from_store.len(),
            "restore from prometheus done"
        ),
    }
    shared.budget.set_restore(status);
}

/// One SLO: the current minute, then its whole minutes newest chunk first, each seeded as it
/// arrives (so a timeout keeps what came back).
async fn restore_slo(
    prom: &mut Prometheus,
    shared: &Shared,
    (name, limit): (&str, f64),
    p: plan::Plan,
    started: i64,
    status: &mut RestoreStatus,
) -> Result<(), String> {
    let selector = format!("{EVENTS_METRIC}{{slo=\"{}\"}}", promql_string(name));
    if let Some((minute, seconds)) = p.partial {
        let q = plan::increase_query(&selector, &format!("{seconds}s"));
        let series = prom
            .get(
                "/api/v1/query",
                &[("query", q), ("time", started.to_string())],
            )
            .await?;
        let mut counts = Counts::new(limit);
        for (good, samples) in series {
            for (_, v) in samples {
                counts.add(minute, good, v);
            }
        }
        seed(shared, name, &counts, None, started, status);
    }
    let q = plan::increase_query(&selector, "1m");
    for chunk in plan::chunks(p.first, p.last, MAX_POINTS) {
        let params = [
            ("query", q.clone()),
            ("start", chunk.start.to_string()),
            ("end", chunk.end.to_string()),
            ("step", STEP_SECONDS.to_string()),
        ];
        let series = prom.get("/api/v1/query_range", &params).await?;
        let mut counts = Counts::new(limit);
        for (good, samples) in series {
            for (t, v) in samples {
                let minute = plan::minute_of_sample(t);
                if (chunk.first..=chunk.last).contains(&minute) {
                    counts.add(minute, good, v);
                }
            }
        }
        seed(
            shared,
            name,
            &counts,
            Some((chunk.first, chunk.last)),
            started,
            status,
        );
        shared.budget.set_restore(status.clone());
    }
    Ok(())
}

/// Seeds the budget with `counts` and adds them to the SLO's coverage (of the whole minutes
/// `range`, when they are whole minutes).
fn seed(
    shared: &Shared,
    name: &str,
    counts: &Counts,
    range: Option<(i64, i64)>,
    started: i64,
    status: &mut RestoreStatus,
) {
    let done = counts.finish();
    shared.budget.seed(name, &done.minutes, started);
    let Some(c) = status.slos.get_mut(name) else {
        return;
    };
    let sum =
        |f: fn(&(i64, u64, u64)) -> u64| done.minutes.iter().map(f).fold(0u64, u64::saturating_add);
    c.good = c.good.saturating_add(sum(|m| m.1));
    c.bad = c.bad.saturating_add(sum(|m| m.2));
    c.rejected
        .extend(done.rejected.iter().map(|(m, why)| (*m, why.to_string())));
    c.rejected.sort_unstable();
    if let Some((first, last)) = range {
        let cov = plan::coverage(first, last, counts);
        c.restored += cov.restored;
        c.gaps.extend(cov.gaps);
        c.gaps.sort_unstable();
    }
}

/// Prometheus' HTTP API over one kept-alive connection, bounded by the restore's deadline.
struct Prometheus {
    /// The base URL, references expanded: never in a message.
    base: String,
    conn: Conn,
    deadline: Instant,
}

/// A query's series: whether it counts good events (`result="good"`), and its `(t, value)`
/// samples. Series of another `result` are left out.
type Series = Vec<(bool, Vec<(f64, f64)>)>;

impl Prometheus {
    /// GETs `path` with `params`, retrying what may pass (transport errors, 5xx, 429) until
    /// the deadline.
    async fn get(&mut self, path: &str, params: &[(&str, String)]) -> Result<Series, String> {
        let uri = api_uri(&self.base, path, params)?;
        let req = RequestSpec {
            method: http::Method::GET,
            uri,
            headers: http::HeaderMap::from_iter([(
                http::header::ACCEPT,
                http::HeaderValue::from_static("application/json"),
            )]),
            body: Bytes::new(),
        };
        let mut wait = FIRST_RETRY;
        let mut last: Option<String> = None;
        loop {
            let Ok(out) = tokio::time::timeout_at(self.deadline, self.conn.send(&req)).await else {
                return Err(timed_out(last.as_deref()));
            };
            let why = match (out.error, out.status) {
                (Some(e), _) => format!("cannot reach prometheus: {}", e.as_str()),
                (None, Some(200)) => return parse(&out.body),
                (None, Some(code)) if code == 429 || code >= 500 => {
                    format!("prometheus answered {code}")
                }
                (None, Some(code)) => {
                    let why = parse(&out.body).err().unwrap_or_default();
                    return Err(format!("prometheus refused the query ({code}): {why}"));
                }
                (None, None) => "no response from prometheus".to_string(),
            };
            let now = crate::clock::tokio_instant();
            if now >= self.deadline {
                return Err(timed_out(Some(&why)));
            }
            last = Some(why);
            // Sleep at most until the deadline, which ends the retries.
            tokio::time::sleep_until((now + wait).min(self.deadline)).await;
            wait = (wait * 2).min(LAST_RETRY);
        }
    }
}

fn timed_out(last: Option<&str>) -> String {
    match last {
        Some(why) => format!("timed out ({why})"),
        None => "timed out".into(),
    }
}

/// `base` + `path` + the query: the base's own query (a token a proxy wants) first, then
/// `params`, percent-encoded.
fn api_uri(base: &str, path: &str, params: &[(&str, String)]) -> Result<http::Uri, String> {
    let (head, own_query) = match base.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (base, None),
    };
    let mut uri = format!("{}{path}?", head.trim_end_matches('/'));
    if let Some(q) = own_query.filter(|q| !q.is_empty()) {
        uri.push_str(q);
        uri.push('&');
    }
    let encoded: Vec<String> = params
        .iter()
        .map(|(k, v)| {
            let v = percent_encoding::utf8_percent_encode(v, crate::journey::URL_VALUE);
            format!("{k}={v}")
        })
        .collect();
    uri.push_str(&encoded.join("&"));
    // The base URL was validated by `config`; never say what it expanded to.
    uri.parse()
        .map_err(|_| "the prometheus URL does not make a valid API URL".to_string())
}

/// A PromQL double-quoted string's content.
fn promql_string(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A Prometheus API answer: a matrix (`query_range`) or a vector (`query`); an error answer
/// gives its `error` text.
fn parse(body: &[u8]) -> Result<Series, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("prometheus sent no JSON answer: {e}"))?;
    if v["status"] != "success" {
        let why = v["error"].as_str().unwrap_or("no reason given");
        return Err(format!(
            "prometheus: {}",
            why.chars().take(300).collect::<String>()
        ));
    }
    let results = v["data"]["result"]
        .as_array()
        .ok_or("prometheus' answer has no data.result")?;
    let mut out = Vec::new();
    for r in results {
        let good = match r["metric"]["result"].as_str() {
            Some("good") => true,
            Some("bad") => false,
            _ => continue,
        };
        let points: Vec<&Value> = match (r["values"].as_array(), r.get("value")) {
            (Some(values), _) => values.iter().collect(),
            (None, Some(value)) => vec![value],
            (None, None) => Vec::new(),
        };
        let samples = points
            .into_iter()
            .filter_map(|p| {
                let t = p[0].as_f64()?;
                let v = p[1].as_str()?.parse::<f64>().ok()?;
                Some((t, v))
            })
            .collect();
        out.push((good, samples));
    }
    Ok(out)
}

/// At most three gap runs as UTC times, and how many more there are.
pub(super) fn gaps_text(gaps: &[(i64, i64)]) -> String {
    if gaps.is_empty() {
        return "none".into();
    }
    let at = |minute: i64| {
        chrono::DateTime::from_timestamp(minute.saturating_mul(60), 0)
            .map(|t| t.format("%Y-%m-%dT%H:%MZ").to_string())
            .unwrap_or_default()
    };
    let mut shown: Vec<String> = gaps
        .iter()
        .take(3)
        .map(|&(a, b)| {
            if a == b {
                at(a)
            } else {
                format!("{}..{}", at(a), at(b))
            }
        })
        .collect();
    if gaps.len() > 3 {
        shown.push(format!("{} more", gaps.len() - 3));
    }
    shown.join(", ")
}

/// The restore's line for `/readyz`: its state and each SLO's coverage.
pub(super) fn readyz_line(status: &RestoreStatus) -> String {
    let head = match &status.phase {
        RestorePhase::Restoring => "restoring from prometheus…".to_string(),
        RestorePhase::Done => "restored from prometheus".to_string(),
        RestorePhase::Incomplete(why) => {
            format!("restore from prometheus incomplete, serving with what it has ({why})")
        }
    };
    let mut parts: Vec<String> = status
        .slos
        .iter()
        .map(|(name, c)| {
            let rejected = if c.rejected.is_empty() {
                String::new()
            } else {
                format!(
                    ", rejected {} minutes: {}",
                    c.rejected.len(),
                    rejected_text(&c.rejected)
                )
            };
            format!(
                "{name} {} of {} minutes, {} good, {} bad, gaps: {}{rejected}",
                c.restored,
                c.planned,
                c.good,
                c.bad,
                gaps_text(&c.gaps)
            )
        })
        .collect();
    if !status.from_store.is_empty() {
        parts.push(format!("from the store: {}", status.from_store.join(", ")));
    }
    if parts.is_empty() {
        head
    } else {
        format!("{head}: {}", parts.join("; "))
    }
}

/// At most three rejected minutes as UTC times with why, and how many more there are.
fn rejected_text(rejected: &[(i64, String)]) -> String {
    let mut shown: Vec<String> = rejected
        .iter()
        .take(3)
        .map(|(m, why)| format!("{} {why}", gaps_text(&[(*m, *m)])))
        .collect();
    if rejected.len() > 3 {
        shown.push(format!("{} more", rejected.len() - 3));
    }
    shown.join(", ")
}

/// The most events a minute of SLO `name` may hold (`slo::restore::plausible_per_minute`):
/// the profiles of the config that feed it (its target's, narrowed by its `profiles:`), each
/// at its peak iteration rate (an arrival-rate profile's highest rate; a closed-model one's
/// most VUs at `CLOSED_VU_RATE` each) times the events an iteration gives it (one per
/// iteration for a journey or step SLO, else the most steps of the profile's journeys).
fn plausible_limit(cfg: &Config, name: &str) -> f64 {
    let Some(slo) = cfg.slos.get(name) else {
        return plan::plausible_per_minute(&[]);
    };
    let rates: Vec<f64> = cfg
        .profiles
        .values()
        .filter(|p| p.target == slo.target)
        .filter(|p| slo.profiles.is_empty() || slo.profiles.contains(&p.name))
        .map(|p| {
            let per_iteration = if slo.journey.is_some() || p.mix.is_empty() {
                1.0
            } else {
                p.mix
                    .iter()
                    .filter_map(|(j, _)| cfg.journeys.get(j))
                    .map(|j| j.steps.len())
                    .max()
                    .unwrap_or(1) as f64
            };
            iteration_rate(&p.executor) * per_iteration
        })
        .collect();
    plan::plausible_per_minute(&rates)
}

/// A profile's peak iterations a second: its arrival rate, or its most VUs at
/// `CLOSED_VU_RATE`.
fn iteration_rate(e: &Executor) -> f64 {
    let vus = match e {
        Executor::ConstantArrivalRate { .. } | Executor::RampingArrivalRate { .. } => {
            return e.peak_rate();
        }
        Executor::ConstantVus { vus, .. }
        | Executor::SharedIterations { vus, .. }
        | Executor::PerVuIterations { vus, .. } => f64::from(*vus),
        Executor::RampingVus {
            start_vus, stages, ..
        } => stages
            .iter()
            .map(|s| s.target)
            .fold(f64::from(*start_vus), f64::max),
    };
    vus * CLOSED_VU_RATE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_uris_keep_the_base_path_and_query() {
        let params = [("query", "sum by (result) (x{slo=\"a\"}[1m])".to_string())];
        let u = api_uri("http://p:9090/", "/api/v1/query", &params).unwrap();
        assert_eq!(
            u.to_string(),
            "http://p:9090/api/v1/query?query=sum%20by%20%28result%29%20%28x%7Bslo%3D%22a%22%7D%5B1m%5D%29"
        );
        let u = api_uri(
            "https://p/prom?token=t",
            "/api/v1/query",
            &[("time", "5".into())],
        )
        .unwrap();
        assert_eq!(u.to_string(), "https://p/prom/api/v1/query?token=t&time=5");
    }

    #[test]
    fn answers_parse_by_result_and_errors_say_why() {
        let matrix = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"result":"good"},"values":[[120,"3.5"],[180,"0"]]},
            {"metric":{"result":"bad"},"values":[[120,"1"]]},
            {"metric":{},"values":[[120,"7"]]}]}}"#;
        let s = parse(matrix).unwrap();
        assert_eq!(
            s,
            vec![
                (true, vec![(120.0, 3.5), (180.0, 0.0)]),
                (false, vec![(120.0, 1.0)])
            ]
        );
        let vector = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"result":"bad"},"value":[1700000037.5,"2"]}]}}"#;
        assert_eq!(
            parse(vector).unwrap(),
            vec![(false, vec![(1_700_000_037.5, 2.0)])]
        );
        let err = br#"{"status":"error","errorType":"bad_data","error":"exceeded maximum resolution of 11,000 points per timeseries"}"#;
        assert!(parse(err).unwrap_err().contains("11,000 points"));
        assert!(parse(b"<html>").unwrap_err().contains("no JSON"));
    }

    #[test]
    fn names_are_quoted_for_promql() {
        assert_eq!(promql_string(r#"a"b\c"#), r#"a\"b\\c"#);
    }

    #[test]
    fn readyz_line_names_coverage_and_gaps() {
        let m = 29_000_000; // 2025-02-19T21:20Z
        let status = RestoreStatus {
            phase: RestorePhase::Done,
            slos: BTreeMap::from([(
                "api".to_string(),
                SloCoverage {
                    planned: 10,
                    restored: 7,
                    gaps: vec![(m, m + 1), (m + 5, m + 5)],
                    good: 90,
                    bad: 3,
                    rejected: Vec::new(),
                },
            )]),
            from_store: vec!["web".into()],
        };
        assert_eq!(
            readyz_line(&status),
            "restored from prometheus: api 7 of 10 minutes, 90 good, 3 bad, gaps: \
             2025-02-19T21:20Z..2025-02-19T21:21Z, 2025-02-19T21:25Z; from the store: web"
        );
    }
}
