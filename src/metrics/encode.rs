//! The exposition, in the classic text format, OpenMetrics 1.0 or protobuf (`protobuf.rs`):
//! one pass over [`FAMILIES`], each family's samples read from a [`Snapshot`] of the registry
//! by the [`Source`] that [`source`] names for it. A family without samples is left out, header included.
//!
//! Ordering is deterministic: families in table order (by name), series by label values in
//! byte order (`le` in numeric order), so golden tests can compare whole lines.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::encoder::{Encoder, Sink};
use super::families::*;
use super::process::ProcessStats;
use super::profile::{PHASES_BY_LABEL, ProfileMetrics};
use super::protobuf;
use super::slo::{ReportGauges, SloMetrics};
use super::state::State;
use super::text::{Family, Value, label_set, write_u64};
use super::wire::Labels;
use crate::config::NativeOptions;
use crate::hist::Histogram;

/// What one scrape reads: handles and copies taken under the registry's locks, so none is held
/// while formatting. The atomics behind the handles are read as each family is written.
pub(super) struct Snapshot<'a> {
    pub build_labels: &'a str,
    /// Pairs every sample carries (`location="eu"`), or empty.
    pub constant_labels: &'a str,
    pub process: &'a ProcessStats,
    /// Tasks alive in the runtime that serves the scrape, when there is one.
    pub runtime_tasks: Option<f64>,
    pub profiles: Vec<Arc<ProfileMetrics>>,
    /// Each SLO with its last report (shared, not copied), if it has one yet.
    pub slos: Vec<(Arc<SloMetrics>, Option<Arc<ReportGauges>>)>,
    pub state: State,
}

impl Snapshot<'_> {
    fn reports(&self) -> impl Iterator<Item = (&SloMetrics, &ReportGauges)> {
        self.slos
            .iter()
            .filter_map(|(s, r)| Some((s.as_ref(), r.as_deref()?)))
    }
}

/// A family's samples as `(label set, value)`: label sets the registry keeps are borrowed, not
/// copied (an SLO's window gauges alone are tens of thousands of rows at 1,000 SLOs).
type Rows<'s, V> = Vec<(Cow<'s, str>, V)>;

/// Where a family's samples come from, one variant per way of reading them.
enum Source {
    /// `(label set, value)` rows in label order (gauges, and the fractional CPU counter).
    Floats(for<'s> fn(&'s Snapshot) -> Rows<'s, f64>),
    /// `(label set, count)` rows in label order.
    Counts(for<'s> fn(&'s Snapshot) -> Rows<'s, u64>),
    /// One count per (target, profile), under the profile's label set.
    PerProfile(fn(&ProfileMetrics) -> u64),
    /// Histogram series per (target, profile), with their label sets, appended to a list the
    /// scrape reuses.
    Histograms(for<'p> fn(&'p ProfileMetrics, &mut Vec<(&'p Labels, &'p Histogram)>)),
    /// Counters with one more label per sample, written by their own function.
    Labelled(fn(&mut Encoder, &Family, &[Arc<ProfileMetrics>])),
    /// Gauges of each SLO's last report, whose label sets the report keeps encoded for the
    /// protobuf format (40,000 of the 70,000 samples of 1,000 profiles with 2,000 SLOs).
    Report(Pick),
}

/// Which gauge of an SLO report a family shows.
#[derive(Clone, Copy, PartialEq)]
enum Pick {
    Sli,
    Burn,
    Alert,
}

/// The source of every family in [`FAMILIES`] (a unit test holds that none is missing), by
/// what it reads.
fn source(f: &Family) -> Option<Source> {
    process_source(f)
        .or_else(|| daemon_source(f))
        .or_else(|| profile_source(f))
        .or_else(|| slo_source(f))
}

/// The process's own figures and the build.
fn process_source(f: &Family) -> Option<Source> {
    use Source::*;
    Some(match *f {
        PROCESS_CPU => Floats(|s| one(s.process.cpu_seconds)),
        PROCESS_MAX_FDS => Floats(|s| one(s.process.max_fds)),
        PROCESS_OPEN_FDS => Floats(|s| one(s.process.open_fds)),
        PROCESS_RESIDENT => Floats(|s| one(s.process.resident_memory_bytes)),
        PROCESS_START => Floats(|s| one(s.process.start_time_seconds)),
        PROCESS_VIRTUAL => Floats(|s| one(s.process.virtual_memory_bytes)),
        BUILD_INFO => Floats(|s| vec![(s.build_labels.into(), 1.0)]),
        RUNTIME_TASKS => Floats(|s| one(s.runtime_tasks)),
        _ => return None,
    })
}

/// The daemon's state: runs, reloads, the store, the exporter, thresholds, targets.
fn daemon_source(f: &Family) -> Option<Source> {
    use Source::*;
    Some(match *f {
        ADMIN_AUTH_FAILURES => Counts(|s| {
            let [missing, wrong] = s.state.auth_failures;
            vec![
                (label_set(&[("reason", "missing")]).into(), missing),
                (label_set(&[("reason", "wrong")]).into(), wrong),
            ]
        }),
        RELOAD_SUCCESS_TIME => Floats(|s| one(s.state.last_reload_success)),
        RELOAD_SUCCESSFUL => Floats(|s| one(s.state.last_reload_ok.map(flag))),
        RELOADS => Counts(|s| success_failure(s.state.reloads)),
        LAST_RUN_TIME => Floats(|s| {
            s.state
                .last_run
                .iter()
                .map(|((p, r), t)| (label_set(&[("profile", p), ("result", r)]).into(), *t))
                .collect()
        }),
        NEXT_RUN_TIME => Floats(|s| {
            s.state
                .next_run
                .iter()
                .map(|(p, t)| (label_set(&[("profile", p)]).into(), *t))
                .collect()
        }),
        RUN_ACTIVE => Floats(|s| {
            s.state
                .run_active
                .iter()
                .map(|(p, a)| (label_set(&[("profile", p)]).into(), flag(*a)))
                .collect()
        }),
        RUNS => Counts(|s| {
            s.state
                .runs
                .iter()
                .map(|((p, r), n)| (label_set(&[("profile", p), ("result", r)]).into(), *n))
                .collect()
        }),
        TARGET_INFO => Floats(|s| {
            s.state
                .targets
                .iter()
                .map(|(t, p)| (label_set(&[("target", t), ("protocol", p)]).into(), 1.0))
                .collect()
        }),
        STORE_FLUSHES => Counts(|s| success_failure(s.state.store_flushes)),
        STORE_HEALTHY => Floats(|s| one(s.state.store_healthy.map(flag))),
        TELEMETRY_SPANS_DROPPED => Counts(|s| {
            let Some(t) = &s.state.telemetry else {
                return Vec::new();
            };
            vec![
                (
                    label_set(&[("reason", "export_failed")]).into(),
                    t.dropped_export_failed.load(Relaxed),
                ),
                (
                    label_set(&[("reason", "queue_full")]).into(),
                    t.dropped_queue_full.load(Relaxed),
                ),
            ]
        }),
        CAPACITY_RATE => Floats(|s| {
            let row = |((p, bound), v): (&(String, &'static str), &f64)| {
                (label_set(&[("profile", p), ("bound", bound)]).into(), *v)
            };
            s.state.capacity.iter().map(row).collect()
        }),
        GENERATOR_AFFECTED => Counts(|s| {
            let by = s.state.starvation.as_ref().map(|w| w.affected_by_cause());
            let row = |(c, n): (&str, u64)| (label_set(&[("cause", c)]).into(), n);
            by.into_iter().flatten().map(row).collect()
        }),
        GENERATOR_THROTTLED => Floats(|s| {
            let w = s.state.starvation.as_ref();
            one(w.map(|w| w.totals().throttled.as_secs_f64()))
        }),
        THRESHOLD_PASSED => Floats(|s| {
            let row = |((p, m, t), ok): (&(String, String, String), &bool)| {
                let labels = label_set(&[("profile", p), ("metric", m), ("threshold", t)]);
                (labels.into(), flag(*ok))
            };
            s.state.thresholds.iter().map(row).collect()
        }),
        _ => return None,
    })
}

/// Each (target, profile)'s series: requests, checks, histograms, iterations, VUs.
fn profile_source(f: &Family) -> Option<Source> {
    use Source::*;
    Some(match *f {
        CHECKS => Labelled(checks),
        DATA_RECEIVED => PerProfile(|p| p.data_received.load(Relaxed)),
        DATA_SENT => PerProfile(|p| p.data_sent.load(Relaxed)),
        DROPPED_ITERATIONS => PerProfile(|p| p.dropped.load(Relaxed)),
        GENERATOR_OVERLOADED => PerProfile(|p| p.overloaded.load(Relaxed)),
        SATURATED_ITERATIONS => PerProfile(|p| p.saturated.load(Relaxed)),
        HTTP_REQ_DURATION => {
            Histograms(|p, out| out.extend(p.steps.iter().map(|s| (&s.labels, &s.duration))))
        }
        HTTP_REQ_CORRECTED_DURATION => {
            Histograms(|p, out| out.extend(p.steps.iter().map(|s| (&s.labels, &s.corrected))))
        }
        HTTP_REQ_PHASE => Histograms(phase_histograms),
        HTTP_REQS => Labelled(reqs),
        ITERATION_DURATION => {
            Histograms(|p, out| out.extend(p.journeys.iter().map(|j| (&j.labels, &j.duration))))
        }
        ITERATION_LATENESS => Histograms(|p, out| out.push((&p.labels, &p.lateness))),
        JOURNEY_ITERATIONS => Labelled(journey_iterations),
        JOURNEY_STEP_FAILURES => Labelled(step_failures),
        ITERATIONS => PerProfile(|p| p.iterations.load(Relaxed)),
        LOCAL_ERRORS => Labelled(local_errors),
        VUS => PerProfile(|p| u64::from(p.vus.load(Relaxed))),
        VUS_MAX => PerProfile(|p| u64::from(p.vus_max.load(Relaxed))),
        _ => return None,
    })
}

/// Each SLO's events and its last report's gauges.
fn slo_source(f: &Family) -> Option<Source> {
    use Source::*;
    Some(match *f {
        SLO_ALERT_ACTIVE => Report(Pick::Alert),
        SLO_BURN_RATE => Report(Pick::Burn),
        SLO_BUDGET_REMAINING => Floats(|s| {
            s.reports()
                .map(|(slo, r)| (slo.labels.as_str().into(), r.budget_remaining))
                .collect()
        }),
        SLO_EVENTS => Counts(|s| {
            // "bad" < "good" in byte order.
            let rows = s.slos.iter().flat_map(|(slo, _)| {
                let (good, bad) = slo.events();
                [
                    (slo.bad_labels.as_str().into(), bad),
                    (slo.good_labels.as_str().into(), good),
                ]
            });
            rows.collect()
        }),
        SLO_EXCUSED => Counts(|s| {
            let rows = s
                .slos
                .iter()
                .map(|(slo, _)| (slo.labels.as_str().into(), slo.excused()));
            rows.collect()
        }),
        SLO_MAINTENANCE => Floats(|s| {
            s.slos
                .iter()
                .map(|(slo, _)| (slo.labels.as_str().into(), flag(slo.in_maintenance())))
                .collect()
        }),
        SLO_OBJECTIVE => Floats(|s| {
            s.slos
                .iter()
                .map(|(slo, _)| (slo.labels.as_str().into(), slo.objective()))
                .collect()
        }),
        SLO_RESTORE_GAPS => Floats(|s| restore_rows(s, |(_, gaps)| gaps)),
        SLO_RESTORE_STATE => Floats(|s| {
            let Some((phase, _)) = &s.state.restore else {
                return Vec::new();
            };
            ["done", "incomplete", "restoring"]
                .into_iter()
                .map(|p| (label_set(&[("state", p)]).into(), flag(p == *phase)))
                .collect()
        }),
        SLO_RESTORED => Floats(|s| restore_rows(s, |(restored, _)| restored)),
        SLO_SLI => Report(Pick::Sli),
        SLO_TIME_TO_EXHAUSTION => Floats(|s| {
            s.reports()
                .filter_map(|(slo, r)| Some((slo.labels.as_str().into(), r.time_to_exhaustion?)))
                .collect()
        }),
        _ => return None,
    })
}

/// One restore figure per SLO still configured, in name order: minutes, shown in seconds.
fn restore_rows<'s>(s: &'s Snapshot, pick: fn((u64, u64)) -> u64) -> Rows<'s, f64> {
    let Some((_, coverage)) = &s.state.restore else {
        return Vec::new();
    };
    s.slos
        .iter()
        .filter_map(|(slo, _)| {
            let c = coverage.get(&slo.name)?;
            Some((slo.labels.as_str().into(), pick(*c) as f64 * 60.0))
        })
        .collect()
}

/// The whole exposition of `s`; `capacity` is a guess of its size, to allocate once.
pub(super) fn encode(s: &Snapshot, openmetrics: bool, capacity: usize) -> String {
    encode_with(s, Encoder::new(openmetrics, capacity)).finish()
}

/// The exposition of `s` in chunks to `sink`, never whole in memory.
pub(super) fn encode_streamed(s: &Snapshot, openmetrics: bool, sink: Sink) {
    encode_with(s, Encoder::streamed(openmetrics, sink)).finish();
}

/// The protobuf exposition of `s`, whole (`sink` `None`, the bytes returned) or in chunks.
pub(super) fn encode_protobuf(s: &Snapshot, opts: NativeOptions, sink: Option<Sink>) -> Vec<u8> {
    encode_with(s, Encoder::protobuf(opts, sink)).finish_protobuf()
}

/// Every family of `s` in order; a streamed exposition whose reader left stops at the next
/// family (its encoding thread is not held for the rest).
fn encode_with(s: &Snapshot, e: Encoder) -> Encoder {
    let mut e = e.with_constant(s.constant_labels);
    for f in &FAMILIES {
        if e.abandoned() {
            break;
        }
        match source(f) {
            Some(Source::Floats(rows)) => write_rows(&mut e, f, rows(s)),
            Some(Source::Counts(rows)) => write_rows(&mut e, f, rows(s)),
            Some(Source::PerProfile(get)) => per_profile(&mut e, f, &s.profiles, get),
            Some(Source::Histograms(series)) => histograms(&mut e, f, &s.profiles, series),
            Some(Source::Labelled(write)) => write(&mut e, f, &s.profiles),
            Some(Source::Report(pick)) => report_gauges(&mut e, f, s, pick),
            None => {}
        }
    }
    e
}

/// One gauge of every SLO report, in SLO order and each report's label order.
fn report_gauges(e: &mut Encoder, f: &Family, s: &Snapshot, pick: Pick) {
    let rows = |r: &ReportGauges| match pick {
        Pick::Alert => r.alerts.len(),
        Pick::Sli | Pick::Burn => r.windows.len(),
    };
    if s.reports().all(|(_, r)| rows(r) == 0) {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    let proto = e.proto.is_some();
    for (_, r) in s.reports() {
        let encoded = proto.then(|| &r.encoded()[usize::from(pick == Pick::Alert)]);
        let at = |i: usize| encoded.and_then(|x| x.get(i));
        match pick {
            Pick::Alert => {
                for (i, (labels, active)) in r.alerts.iter().enumerate() {
                    e.sample_encoded(&name, labels, at(i), flag(*active));
                }
            }
            Pick::Sli | Pick::Burn => {
                for (i, (labels, sli, burn)) in r.windows.iter().enumerate() {
                    let v = if pick == Pick::Sli { *sli } else { *burn };
                    e.sample_encoded(&name, labels, at(i), v);
                }
            }
        }
    }
}

/// A single unlabelled sample, when the value is known.
fn one(v: Option<f64>) -> Rows<'static, f64> {
    v.map(|v| ("".into(), v)).into_iter().collect()
}

fn flag(on: bool) -> f64 {
    f64::from(u8::from(on))
}

/// `[success, failure]` counts as rows; "failure" < "success" in byte order.
fn success_failure([success, failure]: [u64; 2]) -> Rows<'static, u64> {
    vec![
        (label_set(&[("result", "failure")]).into(), failure),
        (label_set(&[("result", "success")]).into(), success),
    ]
}

fn phase_histograms<'p>(p: &'p ProfileMetrics, out: &mut Vec<(&'p Labels, &'p Histogram)>) {
    for s in &p.steps {
        let by_label = PHASES_BY_LABEL.iter().zip(&s.phase_labels);
        out.extend(
            by_label.filter_map(|(phase, labels)| Some((labels, s.phases.get(*phase as usize)?))),
        );
    }
}

/// Journey iterations by result; only profiles that walk journeys have them.
fn journey_iterations(e: &mut Encoder, f: &Family, profiles: &[Arc<ProfileMetrics>]) {
    if profiles.iter().all(|p| p.journeys.is_empty()) {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for j in profiles.iter().flat_map(|p| &p.journeys) {
        for (labels, n) in j.result_labels.iter().zip(&j.results) {
            e.sample_labels(&name, labels, None, n.load(Relaxed));
        }
    }
}

/// Failed journey steps by reason.
fn step_failures(e: &mut Encoder, f: &Family, profiles: &[Arc<ProfileMetrics>]) {
    if profiles.iter().all(|p| p.journeys.is_empty()) {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for p in profiles.iter().filter(|p| !p.journeys.is_empty()) {
        for s in &p.steps {
            for (labels, n) in s.failure_labels.iter().zip(&s.failures) {
                e.sample_labels(&name, labels, None, n.load(Relaxed));
            }
        }
    }
}

/// A family from rows already in label order; no rows, no family.
fn write_rows(e: &mut Encoder, f: &Family, rows: Rows<impl Value>) {
    if rows.is_empty() {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for (labels, v) in rows {
        e.sample(&name, "", &labels, None, v);
    }
}

fn per_profile(
    e: &mut Encoder,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    get: fn(&ProfileMetrics) -> u64,
) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for p in profiles {
        e.sample_labels(&name, &p.labels, None, get(p));
    }
}

fn histograms(
    e: &mut Encoder,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    series: for<'p> fn(&'p ProfileMetrics, &mut Vec<(&'p Labels, &'p Histogram)>),
) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    if let Some(out) = e.proto.as_deref_mut() {
        return protobuf::histograms(out, f, profiles, series);
    }
    // Exemplars only in OpenMetrics (the classic format has none) and only on the
    // request-duration histogram, the one the runner feeds sampled requests to: its series
    // are the profile's steps, in order.
    let with_exemplars = e.openmetrics && f.name == HTTP_REQ_DURATION.name;
    // Buffers reused for every series: a large scrape writes tens of thousands of them.
    let mut list = Vec::new();
    let mut cumulative = Vec::new();
    let mut bucket = String::new();
    for p in profiles {
        let tails = if e.openmetrics {
            &p.bounds.le_tail_openmetrics
        } else {
            &p.bounds.le_tail_classic
        };
        list.clear();
        series(p, &mut list);
        for (j, &(labels, hist)) in list.iter().enumerate() {
            let labels = labels.as_str();
            hist.classic_into(&mut cumulative);
            let sum_seconds = hist.sum_seconds();
            let exemplars = p
                .steps
                .get(j)
                .filter(|_| with_exemplars)
                .and_then(|s| s.exemplars());
            // `name_bucket{labels,le="`: the same for every bucket of the series.
            bucket.clear();
            bucket.push_str(f.name);
            bucket.push_str("_bucket{");
            if !e.constant().is_empty() {
                bucket.push_str(e.constant());
                bucket.push(',');
            }
            if !labels.is_empty() {
                bucket.push_str(labels);
                bucket.push(',');
            }
            bucket.push_str("le=\"");
            let out = &mut e.out;
            for (i, (tail, n)) in tails.iter().zip(&cumulative).enumerate() {
                out.push_str(&bucket);
                out.push_str(tail);
                write_u64(out, *n);
                if let Some(x) = exemplars.and_then(|x| x.get(i)?.read()) {
                    x.write_suffix(out);
                }
                out.push('\n');
            }
            e.sample(f.name, "_sum", labels, None, sum_seconds);
            let count = cumulative.last().copied().unwrap_or(0);
            e.sample(f.name, "_count", labels, None, count);
        }
    }
}

/// Check results: a `result` label of `fail` and `pass` per check.
fn checks(e: &mut Encoder, f: &Family, profiles: &[Arc<ProfileMetrics>]) {
    let steps = || profiles.iter().flat_map(|p| &p.steps);
    if steps().all(|s| s.check_labels.is_empty()) {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for s in steps() {
        for (labels, pass, fail) in s.checks() {
            // "fail" < "pass" in byte order.
            for (result, n) in [("fail", fail), ("pass", pass)] {
                e.sample_labels(&name, labels, Some(("result", result)), n);
            }
        }
    }
}

/// Requests: the profile's labels plus `status` (appended here) and `error`.
fn reqs(e: &mut Encoder, f: &Family, profiles: &[Arc<ProfileMetrics>]) {
    let rows: Vec<_> = profiles
        .iter()
        .flat_map(|p| &p.steps)
        .map(|s| (s, s.reqs()))
        .collect();
    if rows.iter().all(|(_, r)| r.is_empty()) {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    let mut labels = String::new();
    for (s, reqs) in rows {
        for (status, error, n) in reqs {
            if let Some(p) = e.proto.as_mut() {
                let extra = [("status", status.as_str()), ("error", error)];
                p.sample_encoded(s.labels.proto(), &extra, n as f64);
                continue;
            }
            labels.clear();
            labels.push_str(&s.labels);
            labels.push_str(",status=\"");
            labels.push_str(&status);
            labels.push('"');
            e.sample(&name, "", &labels, Some(("error", error)), n);
        }
    }
}

/// Local errors: the profile's labels plus `class`, every local class even at zero, so a rate
/// over them exists before the first one happens.
fn local_errors(e: &mut Encoder, f: &Family, profiles: &[Arc<ProfileMetrics>]) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    let name = f.sample_name();
    for p in profiles {
        for (class, n) in p.local_errors() {
            e.sample_labels(&name, &p.labels, Some(("class", class)), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_a_source() {
        for f in &FAMILIES {
            assert!(source(f).is_some(), "{}", f.name);
        }
    }
}
