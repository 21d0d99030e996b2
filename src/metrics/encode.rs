//! The exposition, in the classic text format or OpenMetrics 1.0: one pass over [`FAMILIES`],
//! each family's samples read from a [`Snapshot`] of the registry by the [`Source`] that
//! [`source`] names for it. A family without samples is left out, header included.
//!
//! Ordering is deterministic: families in table order (by name), series by label values in
//! byte order (`le` in numeric order), so golden tests can compare whole lines.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use super::families::*;
use super::process::ProcessStats;
use super::profile::{HistRead, PHASES_BY_LABEL, ProfileMetrics};
use super::registry::State;
use super::slo::{ReportGauges, SloMetrics};
use super::text::{Encoder, Family, Value, label_set};

/// What one scrape reads: handles and copies taken under the registry's locks, so none is held
/// while formatting. The atomics behind the handles are read as each family is written.
pub(super) struct Snapshot<'a> {
    pub build_labels: &'a str,
    pub process: &'a ProcessStats,
    /// Tasks alive in the runtime that serves the scrape, when there is one.
    pub runtime_tasks: Option<f64>,
    pub profiles: Vec<Arc<ProfileMetrics>>,
    /// Each SLO with a copy of its last report, if it has one yet.
    pub slos: Vec<(Arc<SloMetrics>, Option<ReportGauges>)>,
    pub state: State,
}

impl Snapshot<'_> {
    fn reports(&self) -> impl Iterator<Item = (&SloMetrics, &ReportGauges)> {
        self.slos
            .iter()
            .filter_map(|(s, r)| Some((s.as_ref(), r.as_ref()?)))
    }
}

/// Where a family's samples come from, one variant per way of reading them.
enum Source {
    /// `(label set, value)` rows in label order (gauges, and the fractional CPU counter).
    Floats(fn(&Snapshot) -> Vec<(String, f64)>),
    /// `(label set, count)` rows in label order.
    Counts(fn(&Snapshot) -> Vec<(String, u64)>),
    /// One count per (target, profile), under the profile's label set.
    PerProfile(fn(&ProfileMetrics) -> u64),
    /// Histogram series per (target, profile), with their label sets.
    Histograms(for<'p> fn(&'p ProfileMetrics) -> Vec<(&'p String, HistRead)>),
    /// Counters with one more label per sample, written by their own function.
    Labelled(fn(&mut Encoder, &Family, &[Arc<ProfileMetrics>])),
}

/// The source of every family in [`FAMILIES`] (a unit test holds that none is missing).
fn source(f: &Family) -> Option<Source> {
    use Source::*;
    Some(match *f {
        PROCESS_CPU => Floats(|s| one(s.process.cpu_seconds)),
        PROCESS_MAX_FDS => Floats(|s| one(s.process.max_fds)),
        PROCESS_OPEN_FDS => Floats(|s| one(s.process.open_fds)),
        PROCESS_RESIDENT => Floats(|s| one(s.process.resident_memory_bytes)),
        PROCESS_START => Floats(|s| one(s.process.start_time_seconds)),
        PROCESS_VIRTUAL => Floats(|s| one(s.process.virtual_memory_bytes)),
        ADMIN_AUTH_FAILURES => Counts(|s| {
            let [missing, wrong] = s.state.auth_failures;
            vec![
                (label_set(&[("reason", "missing")]), missing),
                (label_set(&[("reason", "wrong")]), wrong),
            ]
        }),
        BUILD_INFO => Floats(|s| vec![(s.build_labels.to_string(), 1.0)]),
        CHECKS => Labelled(checks),
        RELOAD_SUCCESS_TIME => Floats(|s| one(s.state.last_reload_success)),
        RELOAD_SUCCESSFUL => Floats(|s| one(s.state.last_reload_ok.map(flag))),
        RELOADS => Counts(|s| success_failure(s.state.reloads)),
        DATA_RECEIVED => PerProfile(|p| p.data_received.load(Relaxed)),
        DATA_SENT => PerProfile(|p| p.data_sent.load(Relaxed)),
        DROPPED_ITERATIONS => PerProfile(|p| p.dropped.load(Relaxed)),
        GENERATOR_OVERLOADED => PerProfile(|p| p.overloaded.load(Relaxed)),
        HTTP_REQ_DURATION => Histograms(|p| {
            p.steps
                .iter()
                .map(|s| (&s.labels, s.duration.read()))
                .collect()
        }),
        HTTP_REQ_CORRECTED_DURATION => Histograms(|p| {
            p.steps
                .iter()
                .map(|s| (&s.labels, s.corrected.read()))
                .collect()
        }),
        HTTP_REQ_PHASE => Histograms(phase_histograms),
        HTTP_REQS => Labelled(reqs),
        ITERATION_DURATION => Histograms(|p| {
            p.journeys
                .iter()
                .map(|j| (&j.labels, j.duration.read()))
                .collect()
        }),
        ITERATION_LATENESS => Histograms(|p| vec![(&p.labels, p.lateness.read())]),
        JOURNEY_ITERATIONS => Labelled(journey_iterations),
        JOURNEY_STEP_FAILURES => Labelled(step_failures),
        ITERATIONS => PerProfile(|p| p.iterations.load(Relaxed)),
        LAST_RUN_TIME => Floats(|s| {
            s.state
                .last_run
                .iter()
                .map(|((p, r), t)| (label_set(&[("profile", p), ("result", r)]), *t))
                .collect()
        }),
        LOCAL_ERRORS => Labelled(local_errors),
        NEXT_RUN_TIME => Floats(|s| {
            s.state
                .next_run
                .iter()
                .map(|(p, t)| (label_set(&[("profile", p)]), *t))
                .collect()
        }),
        RUN_ACTIVE => Floats(|s| {
            s.state
                .run_active
                .iter()
                .map(|(p, a)| (label_set(&[("profile", p)]), flag(*a)))
                .collect()
        }),
        RUNS => Counts(|s| {
            s.state
                .runs
                .iter()
                .map(|((p, r), n)| (label_set(&[("profile", p), ("result", r)]), *n))
                .collect()
        }),
        RUNTIME_TASKS => Floats(|s| one(s.runtime_tasks)),
        SLO_ALERT_ACTIVE => Floats(|s| {
            s.reports()
                .flat_map(|(_, r)| &r.alerts)
                .map(|(l, a)| (l.clone(), flag(*a)))
                .collect()
        }),
        SLO_BURN_RATE => Floats(|s| {
            s.reports()
                .flat_map(|(_, r)| &r.windows)
                .map(|(l, _, burn)| (l.clone(), *burn))
                .collect()
        }),
        SLO_BUDGET_REMAINING => Floats(|s| {
            s.reports()
                .map(|(slo, r)| (slo.labels.clone(), r.budget_remaining))
                .collect()
        }),
        SLO_EVENTS => Counts(|s| {
            // "bad" < "good" in byte order.
            let rows = s.slos.iter().flat_map(|(slo, _)| {
                let (good, bad) = slo.events();
                [
                    (slo.bad_labels.clone(), bad),
                    (slo.good_labels.clone(), good),
                ]
            });
            rows.collect()
        }),
        SLO_OBJECTIVE => Floats(|s| {
            s.slos
                .iter()
                .map(|(slo, _)| (slo.labels.clone(), slo.objective()))
                .collect()
        }),
        SLO_RESTORE_GAPS => Floats(|s| restore_rows(s, |(_, gaps)| gaps)),
        SLO_RESTORE_STATE => Floats(|s| {
            let Some((phase, _)) = &s.state.restore else {
                return Vec::new();
            };
            ["done", "incomplete", "restoring"]
                .into_iter()
                .map(|p| (label_set(&[("state", p)]), flag(p == *phase)))
                .collect()
        }),
        SLO_RESTORED => Floats(|s| restore_rows(s, |(restored, _)| restored)),
        SLO_SLI => Floats(|s| {
            s.reports()
                .flat_map(|(_, r)| &r.windows)
                .map(|(l, sli, _)| (l.clone(), *sli))
                .collect()
        }),
        SLO_TIME_TO_EXHAUSTION => Floats(|s| {
            s.reports()
                .filter_map(|(slo, r)| Some((slo.labels.clone(), r.time_to_exhaustion?)))
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
                    label_set(&[("reason", "export_failed")]),
                    t.dropped_export_failed.load(Relaxed),
                ),
                (
                    label_set(&[("reason", "queue_full")]),
                    t.dropped_queue_full.load(Relaxed),
                ),
            ]
        }),
        THRESHOLD_PASSED => Floats(|s| {
            let row = |((p, m, t), ok): (&(String, String, String), &bool)| {
                let labels = label_set(&[("profile", p), ("metric", m), ("threshold", t)]);
                (labels, flag(*ok))
            };
            s.state.thresholds.iter().map(row).collect()
        }),
        VUS => PerProfile(|p| u64::from(p.vus.load(Relaxed))),
        VUS_MAX => PerProfile(|p| u64::from(p.vus_max.load(Relaxed))),
        _ => return None,
    })
}

/// One restore figure per SLO still configured, in name order: minutes, shown in seconds.
fn restore_rows(s: &Snapshot, pick: fn((u64, u64)) -> u64) -> Vec<(String, f64)> {
    let Some((_, coverage)) = &s.state.restore else {
        return Vec::new();
    };
    s.slos
        .iter()
        .filter_map(|(slo, _)| {
            let c = coverage.get(&slo.name)?;
            Some((slo.labels.clone(), pick(*c) as f64 * 60.0))
        })
        .collect()
}

/// The whole exposition of `s`; `capacity` is a guess of its size, to allocate once.
pub(super) fn encode(s: &Snapshot, openmetrics: bool, capacity: usize) -> String {
    let mut e = Encoder::new(openmetrics, capacity);
    for f in &FAMILIES {
        match source(f) {
            Some(Source::Floats(rows)) => write_rows(&mut e, f, rows(s)),
            Some(Source::Counts(rows)) => write_rows(&mut e, f, rows(s)),
            Some(Source::PerProfile(get)) => per_profile(&mut e, f, &s.profiles, get),
            Some(Source::Histograms(series)) => histograms(&mut e, f, &s.profiles, series),
            Some(Source::Labelled(write)) => write(&mut e, f, &s.profiles),
            None => {}
        }
    }
    e.finish()
}

/// A single unlabelled sample, when the value is known.
fn one(v: Option<f64>) -> Vec<(String, f64)> {
    v.map(|v| (String::new(), v)).into_iter().collect()
}

fn flag(on: bool) -> f64 {
    f64::from(u8::from(on))
}

/// `[success, failure]` counts as rows; "failure" < "success" in byte order.
fn success_failure([success, failure]: [u64; 2]) -> Vec<(String, u64)> {
    vec![
        (label_set(&[("result", "failure")]), failure),
        (label_set(&[("result", "success")]), success),
    ]
}

fn phase_histograms(p: &ProfileMetrics) -> Vec<(&String, HistRead)> {
    p.steps
        .iter()
        .flat_map(|s| {
            PHASES_BY_LABEL
                .iter()
                .zip(&s.phase_labels)
                .filter_map(|(phase, labels)| Some((labels, s.phases.get(*phase as usize)?.read())))
        })
        .collect()
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
            e.sample(&name, "", labels, None, n.load(Relaxed));
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
                e.sample(&name, "", labels, None, n.load(Relaxed));
            }
        }
    }
}

/// A family from rows already in label order; no rows, no family.
fn write_rows(e: &mut Encoder, f: &Family, rows: Vec<(String, impl Value)>) {
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
        e.sample(&name, "", &p.labels, None, get(p));
    }
}

fn histograms(
    e: &mut Encoder,
    f: &Family,
    profiles: &[Arc<ProfileMetrics>],
    series: for<'p> fn(&'p ProfileMetrics) -> Vec<(&'p String, HistRead)>,
) {
    if profiles.is_empty() {
        return;
    }
    e.header(f);
    for p in profiles {
        let le = if e.openmetrics {
            &p.bounds.le_openmetrics
        } else {
            &p.bounds.le_classic
        };
        // Exemplars only in OpenMetrics (the classic format has none) and only on the
        // request-duration histogram, the one the runner feeds sampled requests to: its
        // series are the profile's steps, in order.
        let with_exemplars = e.openmetrics && f.name == HTTP_REQ_DURATION.name;
        for (j, (labels, h)) in series(p).into_iter().enumerate() {
            let exemplars = p
                .steps
                .get(j)
                .filter(|_| with_exemplars)
                .map(|s| &s.duration_exemplars);
            for (i, (le, n)) in le.iter().zip(&h.cumulative).enumerate() {
                match exemplars.and_then(|x| x.get(i)?.read()) {
                    Some(x) => {
                        e.start(f.name, "_bucket", labels, Some(("le", le)));
                        super::text::Value::write(*n, &mut e.out);
                        x.write_suffix(&mut e.out);
                        e.out.push('\n');
                    }
                    None => e.sample(f.name, "_bucket", labels, Some(("le", le)), *n),
                }
            }
            e.sample(f.name, "_sum", labels, None, h.sum_seconds);
            let count = h.cumulative.last().copied().unwrap_or(0);
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
                e.sample(&name, "", labels, Some(("result", result)), n);
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
            e.sample(&name, "", &p.labels, Some(("class", class)), n);
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
