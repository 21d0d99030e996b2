//! `/metrics` as Prometheus sees it: golden expositions in both formats, the real `promtool`
//! linting them, an OpenMetrics well-formedness check, Accept negotiation, series lifecycle
//! after a reload, and exact counts under concurrent recording.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{golden, promtool_check_metrics};
use sloburn::budget::SloEvents;
use sloburn::http::{ErrorClass, Outcome, Phases};
use sloburn::metrics::{CHUNK, Metrics, ProcessStats};
use sloburn::slo::{SloDef, Windows, default_tiers, evaluate};

const DAY: u64 = 86400;

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/golden")
        .join(name)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn ok(status: u16, waiting: u64) -> Outcome {
    Outcome {
        phases: Phases {
            blocked: ms(1),
            dns: ms(2),
            connecting: ms(3),
            sending: Duration::ZERO,
            waiting: ms(waiting),
            receiving: ms(5),
            ..Phases::default()
        },
        status: Some(status),
        bytes_sent: 100,
        bytes_received: 1000,
        ..Outcome::default()
    }
}

fn failed(error: ErrorClass) -> Outcome {
    Outcome {
        phases: Phases {
            dns: ms(2),
            ..Phases::default()
        },
        error: Some(error),
        ..Outcome::default()
    }
}

fn checks() -> Vec<String> {
    vec!["status".into(), "body".into()]
}

/// Fixed process figures, so the golden text does not depend on this process.
fn process() -> ProcessStats {
    ProcessStats {
        cpu_seconds: Some(1.25),
        resident_memory_bytes: Some(1048576.0),
        virtual_memory_bytes: Some(4194304.0),
        open_fds: Some(12.0),
        max_fds: Some(1024.0),
        start_time_seconds: Some(1700000000.5),
    }
}

/// A small daemon state touching every family except those stamped with the wall clock.
fn scenario() -> Metrics {
    let m = Metrics::new("0.1.0");
    let p = m.profile("checkout", "canary", &[0.01, 0.1, 0.3, 1.0], &checks());
    p.observe(&ok(200, 4), Duration::ZERO, &[true, true]);
    p.observe(&ok(200, 95), Duration::ZERO, &[true, false]);
    // 290 ms of waiting + 5 receiving = 0.295 s of k6's duration; the corrected duration adds
    // the 6 ms of connection phases (0.301 s) but never the 5 ms the generator was late.
    p.observe(&ok(503, 290), ms(5), &[false, true]);
    p.observe(&failed(ErrorClass::ConnectRefused), ms(1), &[false, false]);
    let mut body_broke = ok(200, 20);
    body_broke.error = Some(ErrorClass::Body);
    p.observe(&body_broke, Duration::ZERO, &[true, false]);
    // Every VU was waiting on the target: the target's failure, in the drops too.
    p.saturated();
    // Late by sloburn's own fault: in both the drops and the overload counter.
    p.generator_overloaded(1_700_000_000);
    p.set_vus(3);
    p.set_vus_max(10);
    m.init_profile("canary");
    m.run_started("canary");
    m.set_threshold("canary", "http_req_duration", "p(95)<300ms", false);
    m.set_next_run("canary", Some(1700000300.0));
    m.set_store_healthy(true);
    m.store_flush(true);

    // A clean 30 days, then 1 % bad in the hour before the last 10 minutes against 99.9 %:
    // the 1h..6h windows burn 10, the 5m window saw nothing (NaN SLI), the budget is mostly
    // left and runs out in 0.99 × 30d / 10.
    let period = Duration::from_secs(30 * DAY);
    let def = SloDef {
        name: "checkout-availability".into(),
        service: "checkout".into(),
        objective: 0.999,
        calendar: None,
        period,
        tiers: default_tiers(period),
        labels: BTreeMap::new(),
        description: String::new(),
    };
    let now = 28_000_000;
    let mut w = Windows::new(period);
    w.record(now - 20 * 24 * 60, 10_000_000, 0);
    for ago in 10..70 {
        w.record(now - ago, 99, 1);
    }
    let s = m.slo(&def.name, def.objective);
    let events = Arc::new(SloEvents::default());
    s.read_from(events.clone());
    events.event(true);
    events.event(false);
    s.set_report(&evaluate(&def, &w, now));
    // An SLO without a report yet: only its counters and objective are exposed.
    m.slo("checkout-latency", 0.99);
    m
}

#[test]
fn exposition_matches_golden_in_both_formats() {
    let m = scenario();
    golden(
        &golden_path("metrics.prom"),
        &m.encode_with(false, &process()),
    );
    golden(
        &golden_path("metrics.openmetrics.txt"),
        &m.encode_with(true, &process()),
    );
}

/// Many series of every shape at once: several profiles in label order (one with hostile names,
/// one walking two journeys), layouts with integral and fractional bounds (the OpenMetrics
/// `le` differs), exemplars on some buckets, SLO reports, a restore and span losses. Exemplar
/// timestamps read the clock, so they are masked before the comparison.
fn wide() -> Metrics {
    use opentelemetry::trace::{SpanId, TraceId};
    use sloburn::metrics::StepLayout;
    let m = scenario();
    for (t, p) in [("zeta", "b"), ("alpha", "a"), ("we\"ird\\\nname", "p\"q")] {
        let pm = m.profile(t, p, &[0.005, 0.25, 1.0, 2.5, 10.0], &checks());
        for i in 0..40u64 {
            let o = if i % 13 == 0 {
                failed(ErrorClass::Reset)
            } else {
                ok(if i % 7 == 0 { 500 } else { 200 }, i * 37)
            };
            pm.observe(&o, ms(i % 3), &[i % 5 > 0, i % 2 == 0]);
        }
        pm.set_vus(u32::from(p.len() as u8));
        pm.set_vus_max(4);
        m.init_profile(p);
        m.set_next_run(p, Some(1_700_000_060.25));
    }
    let step = |journey: &str, name: &str, checks: &[&str]| StepLayout {
        journey: Some(journey.into()),
        step: name.into(),
        checks: checks.iter().map(|c| c.to_string()).collect(),
    };
    let layout = [
        step("browse", "home", &["status"]),
        step("checkout", "login", &["status", "token"]),
        step("checkout", "pay", &["status", "status"]),
    ];
    let journeys = ["browse".to_string(), "checkout".to_string()];
    let shop = m.profile_steps("shop", "shoppers", &[0.1, 1.0], &layout, &journeys);
    for i in 0..12u64 {
        let s = (i % 3) as usize;
        shop.observe_step(s, &ok(200, 20 * i), ms(i), &[i % 4 > 0, true]);
        if i % 4 == 0 {
            shop.step_failed(s, (i % 3) as usize);
        }
        shop.iteration_finished(usize::from(s > 0), (i % 3) as usize, ms(100 * i));
    }
    let trace = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
    let span = SpanId::from_hex("00f067aa0ba902b7").unwrap();
    shop.exemplar(1, 0.05, trace, span);
    shop.exemplar(1, 3.5, trace, span);
    m.profile("alpha", "a", &[0.005, 0.25, 1.0, 2.5, 10.0], &checks())
        .exemplar(0, 1.0, trace, span);
    m.set_threshold("b", "http_req_failed", "rate<0.01", true);
    let stats = Arc::new(sloburn::telemetry::ExportStats::default());
    stats
        .dropped_queue_full
        .store(3, std::sync::atomic::Ordering::Relaxed);
    m.set_telemetry(stats);
    let coverage = [("checkout-availability".to_string(), (120, 5))].into();
    m.set_restore("incomplete", coverage);
    m.admin_auth_failure(true);
    m.reload(false);
    m
}

/// The exposition with each exemplar's timestamp (its last field) replaced by `T`.
fn mask_exemplar_times(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.split_once(" # {") {
            Some(_) => {
                let (head, _) = line.rsplit_once(' ').unwrap();
                out.push_str(head);
                out.push_str(" T");
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[test]
fn wide_exposition_matches_golden_in_both_formats() {
    let m = wide();
    let classic = m.encode_with(false, &process());
    assert!(!classic.contains(" # {"), "exemplars in the classic format");
    golden(&golden_path("metrics_wide.prom"), &classic);
    let om = m.encode_with(true, &process());
    assert_eq!(om.matches(" # {trace_id=").count(), 3, "{om}");
    golden(
        &golden_path("metrics_wide.openmetrics.txt"),
        &mask_exemplar_times(&om),
    );
}

#[test]
fn key_lines_are_exact() {
    let text = scenario().encode_with(false, &process());
    let lines: Vec<&str> = text.lines().collect();
    let expect = [
        // The four requests with a status, corrected (every phase, 6 ms of connection
        // included, no lateness): 15 ms, 106 ms, 31 ms, 301 ms; k6's duration: 9, 100 (le is
        // inclusive), 25 and 295 ms.
        r#"sloburn_http_req_corrected_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="0.01"} 0"#,
        r#"sloburn_http_req_corrected_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="0.1"} 2"#,
        r#"sloburn_http_req_corrected_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="0.3"} 3"#,
        r#"sloburn_http_req_corrected_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="+Inf"} 4"#,
        r#"sloburn_http_req_corrected_duration_seconds_sum{target="checkout",profile="canary",step="request"} 0.453"#,
        r#"sloburn_http_req_corrected_duration_seconds_count{target="checkout",profile="canary",step="request"} 4"#,
        r#"sloburn_http_req_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="0.01"} 1"#,
        r#"sloburn_http_req_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="0.1"} 3"#,
        r#"sloburn_http_req_duration_seconds_bucket{target="checkout",profile="canary",step="request",le="0.3"} 4"#,
        r#"sloburn_http_req_duration_seconds_sum{target="checkout",profile="canary",step="request"} 0.429"#,
        r#"sloburn_http_req_duration_seconds_count{target="checkout",profile="canary",step="request"} 4"#,
        r#"sloburn_http_req_phase_seconds_count{target="checkout",profile="canary",step="request",phase="dns"} 4"#,
        r#"sloburn_http_req_phase_seconds_sum{target="checkout",profile="canary",step="request",phase="dns"} 0.008"#,
        r#"sloburn_iteration_lateness_seconds_count{target="checkout",profile="canary"} 5"#,
        r#"sloburn_http_reqs_total{target="checkout",profile="canary",step="request",status="0",error="connect_refused"} 1"#,
        r#"sloburn_http_reqs_total{target="checkout",profile="canary",step="request",status="200",error="body"} 1"#,
        r#"sloburn_http_reqs_total{target="checkout",profile="canary",step="request",status="200",error="none"} 2"#,
        r#"sloburn_http_reqs_total{target="checkout",profile="canary",step="request",status="503",error="none"} 1"#,
        r#"sloburn_checks_total{target="checkout",profile="canary",step="request",check="body",result="fail"} 3"#,
        r#"sloburn_checks_total{target="checkout",profile="canary",step="request",check="status",result="pass"} 3"#,
        r#"sloburn_iterations_total{target="checkout",profile="canary"} 5"#,
        r#"sloburn_dropped_iterations_total{target="checkout",profile="canary"} 2"#,
        r#"sloburn_generator_overloaded_iterations_total{target="checkout",profile="canary"} 1"#,
        r#"sloburn_saturated_iterations_total{target="checkout",profile="canary"} 1"#,
        r#"sloburn_data_sent_bytes_total{target="checkout",profile="canary"} 400"#,
        r#"sloburn_vus_max{target="checkout",profile="canary"} 10"#,
        r#"sloburn_runs_total{profile="canary",result="failed"} 0"#,
        r#"sloburn_runs_total{profile="canary",result="passed"} 0"#,
        r#"sloburn_run_active{profile="canary"} 1"#,
        r#"sloburn_threshold_passed{profile="canary",metric="http_req_duration",threshold="p(95)<300ms"} 0"#,
        r#"sloburn_next_run_timestamp_seconds{profile="canary"} 1700000300"#,
        r#"sloburn_slo_events_total{slo="checkout-availability",result="bad"} 1"#,
        r#"sloburn_slo_events_total{slo="checkout-latency",result="good"} 0"#,
        r#"sloburn_slo_objective_ratio{slo="checkout-availability"} 0.999"#,
        r#"sloburn_slo_sli_ratio{slo="checkout-availability",window="5m"} NaN"#,
        r#"sloburn_slo_sli_ratio{slo="checkout-availability",window="1h"} 0.99"#,
        r#"sloburn_slo_burn_rate{slo="checkout-availability",window="5m"} 0"#,
        r#"sloburn_slo_alert_active{slo="checkout-availability",tier="page-1h",severity="page"} 0"#,
        r#"sloburn_slo_alert_active{slo="checkout-availability",tier="ticket-1d",severity="ticket"} 1"#,
        r#"sloburn_store_flushes_total{result="success"} 1"#,
        r#"sloburn_store_flushes_total{result="failure"} 0"#,
        r#"sloburn_config_reloads_total{result="success"} 0"#,
        r#"sloburn_build_info{version="0.1.0"} 1"#,
        "process_cpu_seconds_total 1.25",
        "process_start_time_seconds 1700000000.5",
    ];
    for line in expect {
        assert!(lines.contains(&line), "missing line {line}\n{text}");
    }
    // No report yet: no gauges for checkout-latency; no reload yet: no reload gauges.
    assert!(!text.contains(r#"sloburn_slo_sli_ratio{slo="checkout-latency""#));
    assert!(!text.contains("sloburn_config_last_reload_successful"));
    // A budget that never runs out has no time to exhaustion.
    assert!(!text.contains("sloburn_slo_time_to_exhaustion_seconds{slo=\"checkout-latency\"}"));
}

/// The scenario plus everything clock-stamped and a hostile profile name.
fn full() -> Metrics {
    let m = scenario();
    m.run_finished("canary", "passed");
    m.run_finished("canary", "aborted_by_guard");
    m.reload(false);
    m.reload(true);
    let p = m.profile("we\"ird\\\nname", "p", &[0.5], &[]);
    p.observe(&ok(200, 1), Duration::ZERO, &[]);
    m
}

#[test]
fn promtool_accepts_the_classic_exposition() {
    let text = full().encode(false);
    let (success, said) = promtool_check_metrics(&text);
    assert!(success && said.is_empty(), "promtool said:\n{said}\n{text}");
}

#[test]
fn promtool_finds_nothing_in_openmetrics_but_its_counter_naming() {
    // promtool 2.42 lints with the classic parser, which takes OpenMetrics' `# TYPE x counter`
    // + `x_total` samples as an untyped `x_total` without HELP. That is the only complaint
    // allowed: one per counter family, naming exactly that family.
    let text = full().encode(true);
    let (_, said) = promtool_check_metrics(&text);
    let counters: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .map(|name| format!("{name}_total no help text"))
        .collect();
    let complaints: Vec<&str> = said.lines().collect();
    assert_eq!(complaints, counters, "promtool said:\n{said}");
}

/// A strict-enough OpenMetrics 1.0 text reader: metadata before samples, families contiguous
/// and never repeated, sample names from the family's type, label syntax, values, histogram
/// buckets cumulative with `+Inf` equal to `_count`, `# EOF` last.
fn check_openmetrics(text: &str) -> Result<usize, String> {
    let body = text
        .strip_suffix("# EOF\n")
        .ok_or("does not end with # EOF")?;
    let mut seen = std::collections::HashSet::new();
    let mut family: Option<(String, String)> = None;
    let mut samples = 0;
    let mut last_bucket: Option<(String, f64, u64)> = None;
    for (i, line) in body.lines().enumerate() {
        let err = |m: &str| format!("line {}: {m}: {line}", i + 1);
        if let Some(meta) = line.strip_prefix("# ") {
            let mut parts = meta.splitn(3, ' ');
            let (kw, name, rest) = (parts.next(), parts.next(), parts.next());
            let (Some(kw), Some(name)) = (kw, name) else {
                return Err(err("bad metadata"));
            };
            match kw {
                "TYPE" => {
                    if !seen.insert(name.to_string()) {
                        return Err(err("family repeated"));
                    }
                    let kind = rest.ok_or_else(|| err("no type"))?;
                    if !["counter", "gauge", "histogram"].contains(&kind) {
                        return Err(err("unknown type"));
                    }
                    family = Some((name.to_string(), kind.to_string()));
                }
                "HELP" | "UNIT" => {
                    if family.as_ref().map(|f| f.0.as_str()) != Some(name) {
                        return Err(err("metadata for another family"));
                    }
                    if kw == "UNIT" && !name.ends_with(&format!("_{}", rest.unwrap_or("?"))) {
                        return Err(err("unit is not the name's suffix"));
                    }
                }
                _ => return Err(err("unknown comment")),
            }
            continue;
        }
        let (fam, kind) = family.as_ref().ok_or_else(|| err("sample before TYPE"))?;
        let (series, value) = line.rsplit_once(' ').ok_or_else(|| err("no value"))?;
        let value: f64 = match value {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|_| err("bad value"))?,
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (
                n,
                l.strip_suffix('}').ok_or_else(|| err("unclosed labels"))?,
            ),
            None => (series, ""),
        };
        let suffix = name
            .strip_prefix(fam.as_str())
            .ok_or_else(|| err("sample outside its family"))?;
        let allowed: &[&str] = match kind.as_str() {
            "counter" => &["_total"],
            "gauge" => &[""],
            _ => &["_bucket", "_sum", "_count"],
        };
        if !allowed.contains(&suffix) {
            return Err(err("suffix not allowed for type"));
        }
        let mut le = None;
        let mut rest = labels;
        let mut others = String::new();
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"").ok_or_else(|| err("bad label"))?;
            if !k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(err("bad label name"));
            }
            let mut end = None;
            let mut escaped = false;
            for (j, c) in after.char_indices() {
                match (escaped, c) {
                    (true, '\\' | '"' | 'n') => escaped = false,
                    (true, _) => return Err(err("bad escape")),
                    (false, '\\') => escaped = true,
                    (false, '"') => {
                        end = Some(j);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end.ok_or_else(|| err("unterminated value"))?;
            if k == "le" {
                le = Some(&after[..end]);
            } else {
                others.push_str(&rest[..k.len() + 2 + end + 1]);
            }
            rest = &after[end + 1..];
            rest = rest.strip_prefix(',').unwrap_or(rest);
        }
        if (suffix == "_total" || kind == "histogram") && value < 0.0 {
            return Err(err("negative counter"));
        }
        match suffix {
            "_bucket" => {
                let le = le.ok_or_else(|| err("bucket without le"))?;
                let bound: f64 = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    if !le.contains('.') && !le.contains('e') {
                        return Err(err("le not canonical"));
                    }
                    le.parse().map_err(|_| err("bad le"))?
                };
                if let Some((prev_series, prev_bound, prev)) = &last_bucket
                    && *prev_series == others
                    && (bound <= *prev_bound || (value as u64) < *prev)
                {
                    return Err(err("buckets not ascending or not cumulative"));
                }
                last_bucket = Some((others, bound, value as u64));
            }
            "_count" => {
                let inf = last_bucket
                    .as_ref()
                    .filter(|b| b.0 == others && b.1.is_infinite());
                if inf.map(|b| b.2) != Some(value as u64) {
                    return Err(err("_count differs from the +Inf bucket"));
                }
            }
            _ => {}
        }
        samples += 1;
    }
    Ok(samples)
}

#[test]
fn openmetrics_output_is_well_formed() {
    let text = full().encode(true);
    let samples = check_openmetrics(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(samples > 100, "{samples}");
    assert_eq!(text.matches("# EOF").count(), 1);
    // The checker itself rejects what it should.
    assert!(check_openmetrics("# TYPE a gauge\na 1\n").is_err());
    assert!(check_openmetrics("# TYPE a counter\na 1\n# EOF\n").is_err());
    assert!(
        check_openmetrics("# TYPE a histogram\na_bucket{le=\"1\"} 1\na_count 1\n# EOF\n").is_err()
    );
    assert!(check_openmetrics("# TYPE a gauge\n# TYPE b gauge\na 1\n# EOF\n").is_err());
}

#[test]
fn accept_negotiation() {
    let cases = [
        (None, false),
        (Some(""), false),
        (Some("text/plain"), false),
        (Some("text/plain;version=0.0.4"), false),
        (Some("*/*"), false),
        (Some("application/openmetrics-text"), true),
        (
            Some("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            true,
        ),
        (Some("Application/OpenMetrics-Text;Version=1.0.0"), true),
        (Some("application/openmetrics-text;version=2.0.0"), false),
        // Prometheus 2.x default scrape protocols.
        (
            Some(
                "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                 version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
            ),
            true,
        ),
        // Prometheus 3 defaults.
        (
            Some(
                "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,\
                 application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;\
                 escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
            ),
            true,
        ),
        // Classic preferred by q.
        (
            Some("text/plain;version=0.0.4;q=0.9,application/openmetrics-text;q=0.5"),
            false,
        ),
        (Some("application/openmetrics-text;q=0"), false),
        (Some("application/openmetrics-text;q=banana"), false),
        (Some("application/openmetrics-text;q=0.5, */*"), false),
        (
            Some("application/json, application/openmetrics-text;q=0.1"),
            true,
        ),
        (Some(",;=,;;"), false),
    ];
    for (accept, want) in cases {
        assert_eq!(Metrics::wants_openmetrics(accept), want, "{accept:?}");
    }
    assert!(Metrics::content_type(true).starts_with("application/openmetrics-text; version=1.0.0"));
    assert!(Metrics::content_type(false).starts_with("text/plain; version=0.0.4"));
}

/// The `/metrics` endpoint streams the exposition: the chunks put together are the text
/// `encode` writes, each full chunk ends at a line's end, and a reader that leaves gets no
/// more chunks.
#[test]
fn a_streamed_exposition_is_the_whole_text_in_line_aligned_chunks() {
    let m = Metrics::new("x");
    for i in 0..120 {
        let p = m.profile(
            &format!("t{i}"),
            &format!("p{i}"),
            &[0.01, 0.1, 1.0],
            &checks(),
        );
        p.observe(&ok(200, 1 + i), Duration::ZERO, &[true, true]);
        m.init_profile(&format!("p{i}"));
        m.slo(&format!("slo-{i}"), 0.99);
    }
    for om in [false, true] {
        let whole = m.encode(om);
        assert!(
            whole.len() > 3 * CHUNK,
            "{} bytes: too few for chunks",
            whole.len()
        );
        let chunks = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let got = chunks.clone();
        m.encode_streamed(
            om,
            Box::new(move |c| {
                got.lock().unwrap().push(String::from_utf8(c).unwrap());
                true
            }),
        );
        let chunks = chunks.lock().unwrap();
        // The process figures are read per call: compare without them.
        let strip = |t: &str| {
            t.lines()
                .filter(|l| !l.contains("process_") && !l.contains("sloburn_runtime_"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(strip(&chunks.concat()), strip(&whole), "openmetrics: {om}");
        let (last, full) = chunks.split_last().unwrap();
        assert!(full.len() >= 3, "{} chunks", chunks.len());
        for c in full {
            assert!(c.len() >= CHUNK && c.len() < CHUNK + 4096, "{}", c.len());
            assert!(c.ends_with('\n'));
        }
        assert!(last.ends_with(if om { "# EOF\n" } else { "\n" }));
    }
    // The reader leaves after the first chunk: no second one is handed over.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    m.encode_streamed(
        false,
        Box::new(move |_| {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            false
        }),
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn retain_profiles_drops_series_of_removed_profiles() {
    let m = Metrics::new("x");
    for (t, p) in [("a", "keep"), ("b", "gone"), ("a", "gone")] {
        m.profile(t, p, &[0.1], &checks())
            .observe(&ok(200, 1), Duration::ZERO, &[true, true]);
        m.init_profile(p);
        m.set_next_run(p, Some(1.0));
        m.set_threshold(p, "http_req_failed", "rate<0.01", true);
    }
    let s = Arc::new(SloEvents::default());
    m.slo("old", 0.9).read_from(s.clone());
    m.slo("new", 0.9);
    m.retain_profiles(&[("a".into(), "keep".into())]);
    m.retain_slos(&["new".into()]);
    let text = m.encode(false);
    assert!(!text.contains("gone"), "{text}");
    assert!(!text.contains("\"old\""), "{text}");
    assert!(text.contains(r#"sloburn_iterations_total{target="a",profile="keep"} 1"#));
    assert!(text.contains(r#"sloburn_runs_total{profile="keep",result="passed"} 0"#));
    assert!(text.contains(r#"sloburn_slo_events_total{slo="new",result="bad"} 0"#));
    // A stale handle still records, invisibly.
    s.event(true);
    assert!(!m.encode(false).contains("\"old\""));
    // Removing everything leaves no profile family announced without samples.
    m.retain_profiles(&[]);
    let text = m.encode(false);
    assert!(
        !text.contains("sloburn_http_req_duration_seconds"),
        "{text}"
    );
    assert!(!text.contains("sloburn_vus"), "{text}");
    let (success, said) = promtool_check_metrics(&text);
    assert!(success && said.is_empty(), "{said}");
}

#[test]
fn profile_is_shared_until_its_layout_changes() {
    let m = Metrics::new("x");
    let a = m.profile("t", "p", &[0.1, 0.2], &checks());
    let b = m.profile("t", "p", &[0.1, 0.2], &checks());
    assert!(Arc::ptr_eq(&a, &b));
    let c = m.profile("t", "p", &[0.1, 0.5], &checks());
    assert!(!Arc::ptr_eq(&a, &c));
    c.observe(&ok(200, 1), Duration::ZERO, &[true, true]);
    let text = m.encode(false);
    assert!(text.contains(
        r#"sloburn_http_req_duration_seconds_bucket{target="t",profile="p",step="request",le="0.5"} 1"#
    ));
    assert!(!text.contains(r#"le="0.2""#));
    let d = m.profile("t", "p", &[0.1, 0.5], &["status".into()]);
    assert!(!Arc::ptr_eq(&c, &d));
}

#[test]
fn concurrent_observes_sum_exactly() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 100_000;
    let m = Metrics::new("x");
    let p = m.profile("t", "p", &[0.001, 0.01, 0.1], &checks());
    let slo = m.slo("s", 0.99);
    let events = Arc::new(SloEvents::default());
    slo.read_from(events.clone());
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (p, events) = (&p, &events);
            scope.spawn(move || {
                let outcomes = [ok(200, 1), ok(500, 50), failed(ErrorClass::Timeout)];
                for i in 0..PER_THREAD {
                    let o = &outcomes[((i + t) % 3) as usize];
                    p.observe(o, Duration::ZERO, &[i % 2 == 0, true]);
                    events.event(o.status == Some(200));
                }
            });
        }
    });
    let n = THREADS * PER_THREAD;
    let text = m.encode(false);
    let value = |series: &str| -> u64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .unwrap_or_else(|| panic!("no {series}"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    };
    assert_eq!(
        value(r#"sloburn_iterations_total{target="t",profile="p"}"#),
        n
    );
    let reqs: u64 = text
        .lines()
        .filter(|l| l.starts_with("sloburn_http_reqs_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(reqs, n);
    // (i + t) % 3 over 100k consecutive i per thread: each class exactly n/3 rounded per thread.
    let per_class = |k: u64| -> u64 {
        (0..THREADS)
            .map(|t| (0..PER_THREAD).filter(|i| (i + t) % 3 == k).count() as u64)
            .sum()
    };
    assert_eq!(
        value(
            r#"sloburn_http_reqs_total{target="t",profile="p",step="request",status="0",error="timeout"}"#
        ),
        per_class(2)
    );
    let with_status = per_class(0) + per_class(1);
    assert_eq!(
        value(r#"sloburn_http_req_duration_seconds_count{target="t",profile="p",step="request"}"#),
        with_status
    );
    assert_eq!(
        value(
            r#"sloburn_http_req_duration_seconds_bucket{target="t",profile="p",step="request",le="0.01"}"#
        ),
        per_class(0)
    );
    assert_eq!(
        value(
            r#"sloburn_checks_total{target="t",profile="p",step="request",check="status",result="fail"}"#
        ),
        n / 2
    );
    assert_eq!(
        value(r#"sloburn_data_sent_bytes_total{target="t",profile="p"}"#),
        100 * with_status
    );
    assert_eq!(slo.events(), (per_class(0), n - per_class(0)));
}

#[test]
fn clock_stamped_series() {
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let m = full();
    let text = m.encode(false);
    let stamp = |prefix: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix}\n{text}"));
        line.rsplit_once(' ').unwrap().1.parse().unwrap()
    };
    for prefix in [
        r#"sloburn_last_run_timestamp_seconds{profile="canary",result="passed"}"#,
        r#"sloburn_last_run_timestamp_seconds{profile="canary",result="aborted_by_guard"}"#,
        "sloburn_config_last_reload_success_timestamp_seconds ",
    ] {
        let t = stamp(prefix);
        assert!(t >= before && t < before + 60.0, "{prefix} {t}");
    }
    for line in [
        r#"sloburn_runs_total{profile="canary",result="aborted_by_guard"} 1"#,
        r#"sloburn_run_active{profile="canary"} 0"#,
        r#"sloburn_config_reloads_total{result="failure"} 1"#,
        r#"sloburn_config_reloads_total{result="success"} 1"#,
        "sloburn_config_last_reload_successful 1",
        r#"sloburn_http_reqs_total{target="we\"ird\\\nname",profile="p",step="request",status="200",error="none"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
    m.set_next_run("canary", None);
    assert!(
        !m.encode(false)
            .contains("sloburn_next_run_timestamp_seconds")
    );
}
