//! Per-SLO series, read from what the budget publishes: the good/bad event totals the
//! generated rules compute from and the maintenance flag, read live from the budget's own state
//! through [`SloSource`], and the gauges of the daemon's own evaluation (`set_report`, a snapshot
//! the budget's tick publishes). Nothing here writes back into the budget's state.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::state::lock;
use super::text::label_set;
use super::wire::LabelSets;
use crate::slo::SloReport;

/// The gauges of one [`SloReport`], with label sets already escaped.
#[derive(Debug, Default, Clone)]
pub(super) struct ReportGauges {
    /// `(slo+window labels, sli, burn rate)`, sorted by window label.
    pub windows: Vec<(String, f64, f64)>,
    pub budget_remaining: f64,
    /// Absent when the budget never runs out at the current burn.
    pub time_to_exhaustion: Option<f64>,
    /// `(slo+tier+severity labels, active)`, sorted by labels.
    pub alerts: Vec<(String, bool)>,
    /// The window and alert label sets in the protobuf format, made at the first protobuf
    /// scrape of this report (a report lives a minute or more, across many scrapes).
    encoded: OnceLock<[LabelSets; 2]>,
}

impl ReportGauges {
    /// The protobuf label fields of the windows (`[0]`) and the alerts (`[1]`), in order.
    pub(super) fn encoded(&self) -> &[LabelSets; 2] {
        self.encoded.get_or_init(|| {
            [
                LabelSets::of(self.windows.iter().map(|w| w.0.as_str())),
                LabelSets::of(self.alerts.iter().map(|a| a.0.as_str())),
            ]
        })
    }
}

/// One SLO's live state as the budget publishes it for reading: the budget owns and writes it
/// (the hot path adds to its totals), `/metrics` only reads it at each scrape.
pub trait SloSource: Send + Sync + std::fmt::Debug {
    /// `(good, bad)` events since the SLO's series were created.
    fn events(&self) -> (u64, u64);
    /// Whether a maintenance window covers the SLO.
    fn in_maintenance(&self) -> bool;
    /// Requests counted as no event: their latency is sloburn's own starvation.
    fn excused(&self) -> u64 {
        0
    }
}

#[derive(Debug)]
pub struct SloMetrics {
    pub(super) name: String,
    /// `slo=".."`, escaped once.
    pub(super) labels: String,
    pub(super) good_labels: String,
    pub(super) bad_labels: String,
    /// f64 bits: a reload may change the objective of a kept SLO.
    objective: AtomicU64,
    /// The budget's state of this SLO; none yet: no event, no maintenance.
    source: Mutex<Option<Arc<dyn SloSource>>>,
    /// Shared with the scrapes that read it: a scrape takes the `Arc`, not a copy of every
    /// label set.
    pub(super) report: Mutex<Option<Arc<ReportGauges>>>,
}

/// A window as its `window` label: the largest whole unit, `5m`, `1h`, `3d`, `30d`.
pub fn window_label(d: Duration) -> String {
    const UNITS: [(u64, &str); 4] = [(86400, "d"), (3600, "h"), (60, "m"), (1, "s")];
    let secs = d.as_secs();
    if d.subsec_nanos() != 0 || secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    UNITS
        .iter()
        .find(|(unit, _)| secs.is_multiple_of(*unit))
        .map_or_else(
            || format!("{secs}s"),
            |(unit, s)| format!("{}{s}", secs / unit),
        )
}

impl SloMetrics {
    pub(super) fn new(name: &str, objective: f64) -> SloMetrics {
        SloMetrics {
            name: name.into(),
            labels: label_set(&[("slo", name)]),
            good_labels: label_set(&[("slo", name), ("result", "good")]),
            bad_labels: label_set(&[("slo", name), ("result", "bad")]),
            objective: AtomicU64::new(objective.to_bits()),
            source: Mutex::new(None),
            report: Mutex::new(None),
        }
    }

    pub(super) fn set_objective(&self, objective: f64) {
        self.objective.store(objective.to_bits(), Relaxed);
    }

    pub(super) fn objective(&self) -> f64 {
        f64::from_bits(self.objective.load(Relaxed))
    }

    /// Reads the SLO's event totals and maintenance flag from `source`, the budget's state.
    pub fn read_from(&self, source: Arc<dyn SloSource>) {
        *lock(&self.source) = Some(source);
    }

    fn source(&self) -> Option<Arc<dyn SloSource>> {
        lock(&self.source).clone()
    }

    /// Whether a maintenance window covers the SLO: `sloburn_slo_maintenance`.
    pub(super) fn in_maintenance(&self) -> bool {
        self.source().is_some_and(|s| s.in_maintenance())
    }

    /// `(good, bad)` as the budget counts them: `sloburn_slo_events_total`.
    pub fn events(&self) -> (u64, u64) {
        self.source().map_or((0, 0), |s| s.events())
    }

    /// Requests counted as no event for sloburn's own starvation:
    /// `sloburn_slo_excused_events_total`.
    pub fn excused(&self) -> u64 {
        self.source().map_or(0, |s| s.excused())
    }

    /// Replaces the evaluation gauges. The period's window is labelled like the standard ones
    /// (`30d`), a calendar period by its name (`week`, `month`, `quarter`); when the period
    /// equals a standard window it is exposed once.
    pub fn set_report(&self, report: &SloReport) {
        let mut windows: Vec<(String, f64, f64)> = Vec::new();
        for (i, s) in report.windows.iter().chain([&report.period]).enumerate() {
            // A calendar period is labelled by its name (`month`): its window grows all period.
            let label = match &report.calendar {
                Some((c, _, _)) if i == report.windows.len() => c.unit.as_str().to_string(),
                _ => window_label(s.window),
            };
            if windows.iter().all(|w| w.0 != label) {
                windows.push((label, s.sli, s.burn_rate));
            }
        }
        windows.sort_by(|a, b| a.0.cmp(&b.0));
        let windows = windows
            .into_iter()
            .map(|(w, sli, burn)| (label_set(&[("slo", &self.name), ("window", &w)]), sli, burn))
            .collect();
        let mut alerts: Vec<((String, &str), bool)> = Vec::new();
        for t in &report.tiers {
            let key = (t.name.clone(), t.severity.as_str());
            // Two tiers with one name would be one series: keep the first.
            if alerts.iter().all(|a| a.0 != key) {
                alerts.push((key, t.active));
            }
        }
        alerts.sort_by(|a, b| a.0.cmp(&b.0));
        let gauges = ReportGauges {
            windows,
            budget_remaining: report.budget_remaining,
            time_to_exhaustion: report.time_to_exhaustion.map(|d| d.as_secs_f64()),
            alerts: alerts
                .into_iter()
                .map(|((tier, sev), active)| {
                    (
                        label_set(&[("slo", &self.name), ("tier", &tier), ("severity", sev)]),
                        active,
                    )
                })
                .collect(),
            encoded: OnceLock::new(),
        };
        *lock(&self.report) = Some(Arc::new(gauges));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_labels_use_the_largest_whole_unit() {
        let cases = [
            (300, "5m"),
            (1800, "30m"),
            (3600, "1h"),
            (7200, "2h"),
            (21600, "6h"),
            (86400, "1d"),
            (259200, "3d"),
            (2592000, "30d"),
            (5400, "90m"),
            (61, "61s"),
        ];
        for (secs, want) in cases {
            assert_eq!(window_label(Duration::from_secs(secs)), want);
        }
        assert_eq!(window_label(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn events_and_maintenance_are_read_from_the_source() {
        #[derive(Debug)]
        struct Fixed;
        impl SloSource for Fixed {
            fn events(&self) -> (u64, u64) {
                (2, 1)
            }
            fn in_maintenance(&self) -> bool {
                true
            }
        }
        let s = SloMetrics::new("a", 0.99);
        assert_eq!((s.events(), s.in_maintenance()), ((0, 0), false));
        s.read_from(Arc::new(Fixed));
        assert_eq!((s.events(), s.in_maintenance()), ((2, 1), true));
    }
}
