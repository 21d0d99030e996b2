//! Load-test type presets (Grafana's "load test types" guide) expressed as k6 executors built
//! from stages, so a profile can say `preset: average` instead of writing stages by hand.
//!
//! `peak` is the highest load the shape ever reaches (VUs, or iterations/s for arrival-rate
//! executors): a preset never exceeds what the user asked for, which matters when canary load
//! runs against production. Choose a stress peak above your average-load peak yourself.
//!
//! Shapes, as stage weights (the guide's example durations, which are also the defaults):
//!
//! | preset     | shape                                        | default total |
//! |------------|----------------------------------------------|---------------|
//! | smoke      | constant min(peak, 3) for the whole run      | 1m            |
//! | average    | ramp 0→peak 5m, hold 30m, ramp →0 5m         | 40m           |
//! | stress     | ramp 0→peak 10m, hold 30m, ramp →0 5m        | 45m           |
//! | soak       | ramp 0→peak 5m, hold 8h, ramp →0 5m          | 8h10m         |
//! | spike      | ramp 0→peak 2m, ramp →0 1m (no plateau)      | 3m            |
//! | breakpoint | ramp 0→peak over the whole run, never down   | 2h            |
//!
//! `duration_scale` replaces the default total; stages keep their proportions. Breakpoint is
//! meant to be stopped by an `abort_on_fail` threshold before it reaches the peak.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::spec::{Executor, Stage};

/// k6's default `gracefulRampDown`.
const GRACEFUL_RAMP_DOWN: Duration = Duration::from_secs(30);
/// Smoke tests use "a few" VUs (the guide's example uses 3).
const SMOKE_LOAD: f64 = 3.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    Smoke,
    Average,
    Stress,
    Soak,
    Spike,
    Breakpoint,
}

impl Preset {
    pub const ALL: [Preset; 6] = [
        Preset::Smoke,
        Preset::Average,
        Preset::Stress,
        Preset::Soak,
        Preset::Spike,
        Preset::Breakpoint,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Smoke => "smoke",
            Preset::Average => "average",
            Preset::Stress => "stress",
            Preset::Soak => "soak",
            Preset::Spike => "spike",
            Preset::Breakpoint => "breakpoint",
        }
    }

    /// Stage weights (minutes in the guide's examples) and targets as fractions of the peak.
    fn shape(self) -> &'static [(u64, f64)] {
        match self {
            Preset::Smoke => &[(1, 1.0)],
            Preset::Average => &[(5, 1.0), (30, 1.0), (5, 0.0)],
            Preset::Stress => &[(10, 1.0), (30, 1.0), (5, 0.0)],
            Preset::Soak => &[(5, 1.0), (480, 1.0), (5, 0.0)],
            Preset::Spike => &[(2, 1.0), (1, 0.0)],
            Preset::Breakpoint => &[(120, 1.0)],
        }
    }

    /// Total duration when no `duration_scale` is given.
    pub fn default_duration(self) -> Duration {
        let minutes: u64 = self.shape().iter().map(|&(w, _)| w).sum();
        Duration::from_secs(minutes * 60)
    }

    /// The load the shape holds at its highest point for a requested `peak`. Non-finite or
    /// negative peaks count as 0 so that bad input yields an idle plan rather than a panic.
    fn level(self, peak: f64) -> f64 {
        let peak = if peak.is_finite() { peak.max(0.0) } else { 0.0 };
        match self {
            Preset::Smoke => peak.min(SMOKE_LOAD),
            _ => peak,
        }
    }

    /// The preset's stages, starting from 0 load. Stage durations are cut at integer
    /// nanoseconds from cumulative weights, so they sum to the total exactly.
    pub fn stages(self, peak: f64, duration_scale: Option<Duration>) -> Vec<Stage> {
        let total = duration_scale.unwrap_or_else(|| self.default_duration());
        let total_ns = total.as_nanos();
        let shape = self.shape();
        let weight_sum: u64 = shape.iter().map(|&(w, _)| w).sum();
        let level = self.level(peak);
        let mut cum = 0u64;
        let mut prev_ns = 0u128;
        shape
            .iter()
            .map(|&(w, fraction)| {
                cum += w;
                let end_ns = total_ns * u128::from(cum) / u128::from(weight_sum);
                let len = end_ns - prev_ns;
                prev_ns = end_ns;
                Stage {
                    duration: Duration::from_nanos(u64::try_from(len).unwrap_or(u64::MAX)),
                    target: level * fraction,
                }
            })
            .collect()
    }

    /// The executor for this preset. With `arrival_rate`, `peak` is iterations/s and the open
    /// model is used; otherwise `peak` is a VU count (rounded). For arrival rates the VU pool is
    /// the default of [`super::spec::default_vu_pool`]; a profile that knows its latency
    /// should set the pool itself.
    pub fn executor(
        self,
        peak: f64,
        arrival_rate: bool,
        duration_scale: Option<Duration>,
    ) -> Executor {
        let stages = self.stages(peak, duration_scale);
        let level = self.level(peak);
        let total = sum(&stages);
        match (self, arrival_rate) {
            (Preset::Smoke, false) => Executor::ConstantVus {
                vus: vus(level).max(u32::from(level > 0.0)),
                duration: total,
            },
            (Preset::Smoke, true) => {
                let (pre_allocated_vus, max_vus) = pool(level);
                Executor::ConstantArrivalRate {
                    rate: level,
                    duration: total,
                    pre_allocated_vus,
                    max_vus,
                }
            }
            (_, false) => Executor::RampingVus {
                start_vus: 0,
                stages: stages
                    .into_iter()
                    .map(|s| Stage {
                        duration: s.duration,
                        target: f64::from(vus(s.target)),
                    })
                    .collect(),
                graceful_ramp_down: GRACEFUL_RAMP_DOWN,
            },
            (_, true) => {
                let (pre_allocated_vus, max_vus) = pool(level);
                Executor::RampingArrivalRate {
                    start_rate: 0.0,
                    stages,
                    pre_allocated_vus,
                    max_vus,
                }
            }
        }
    }
}

fn vus(v: f64) -> u32 {
    // `as` saturates, and callers pass finite non-negative values.
    v.round() as u32
}

fn pool(rate: f64) -> (u32, u32) {
    super::spec::default_vu_pool(rate)
}

fn sum(stages: &[Stage]) -> Duration {
    stages
        .iter()
        .fold(Duration::ZERO, |acc, s| acc.saturating_add(s.duration))
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Preset, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown preset `{s}`; use one of smoke, average, stress, soak, spike, \
                     breakpoint"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::plan::{self, ArrivalPlan, VuPlan};

    fn mins(m: u64) -> Duration {
        Duration::from_secs(m * 60)
    }

    #[test]
    fn default_totals_follow_the_guide() {
        let totals: Vec<_> = Preset::ALL.iter().map(|p| p.default_duration()).collect();
        assert_eq!(
            totals,
            vec![mins(1), mins(40), mins(45), mins(490), mins(3), mins(120)]
        );
        for p in Preset::ALL {
            let stages = p.stages(50.0, None);
            assert_eq!(sum(&stages), p.default_duration(), "{p}");
        }
    }

    #[test]
    fn scaled_stages_sum_exactly_to_the_requested_total() {
        for p in Preset::ALL {
            for total in [
                Duration::from_secs(1),
                Duration::from_millis(7_777),
                mins(13),
            ] {
                let stages = p.stages(10.0, Some(total));
                assert_eq!(sum(&stages), total, "{p} {total:?}");
            }
        }
    }

    #[test]
    fn shapes_peak_at_the_requested_load_and_end_where_the_guide_says() {
        for p in Preset::ALL {
            let stages = p.stages(200.0, None);
            let top = stages.iter().map(|s| s.target).fold(0.0, f64::max);
            let last = stages.last().map(|s| s.target);
            match p {
                Preset::Smoke => assert_eq!(top, 3.0),
                _ => assert_eq!(top, 200.0, "{p}"),
            }
            match p {
                Preset::Average | Preset::Stress | Preset::Soak | Preset::Spike => {
                    assert_eq!(last, Some(0.0), "{p}")
                }
                Preset::Smoke => assert_eq!(last, Some(3.0)),
                Preset::Breakpoint => assert_eq!(last, Some(200.0)),
            }
        }
        let spike = Preset::Spike.stages(1000.0, Some(mins(3)));
        assert_eq!(spike[0].duration, mins(2));
        assert_eq!(spike[1].duration, mins(1));
    }

    #[test]
    fn average_arrival_rate_runs_the_integrated_iteration_count() {
        let ex = Preset::Average.executor(100.0, true, Some(Duration::from_secs(40)));
        assert_eq!(plan::planned_duration(&ex), Duration::from_secs(40));
        assert_eq!(plan::max_vus(&ex), 100);
        // 5s ramp to 100/s (250) + 30s hold (3000) + 5s ramp down (250): the 3,500th would
        // start at the very end, which a ramping arrival rate never does (as k6).
        let arrival = ArrivalPlan::new(&ex).expect("valid");
        assert_eq!(arrival.total_iterations(), 3_499);
    }

    #[test]
    fn vu_presets_build_vu_executors() {
        let ex = Preset::Stress.executor(40.4, false, Some(Duration::from_secs(45)));
        let p = VuPlan::new(&ex).expect("valid");
        assert_eq!(p.max_vus(), 40);
        assert_eq!(p.vus_at(Duration::from_secs(10)), 40);
        assert_eq!(p.vus_at(Duration::from_secs(5)), 20);
        assert_eq!(p.duration(), Duration::from_secs(45));
        let smoke = Preset::Smoke.executor(0.4, false, None);
        assert_eq!(
            smoke,
            Executor::ConstantVus {
                vus: 1,
                duration: mins(1)
            }
        );
    }

    #[test]
    fn bad_peaks_give_idle_plans_not_panics() {
        for peak in [f64::NAN, -5.0, f64::INFINITY] {
            for p in Preset::ALL {
                for arrival in [false, true] {
                    let ex = p.executor(peak, arrival, Some(Duration::from_secs(10)));
                    assert!(
                        plan::Plan::new(&ex, plan::Shard::WHOLE).is_ok(),
                        "{p} {peak}"
                    );
                }
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for p in Preset::ALL {
            assert_eq!(p.as_str().parse::<Preset>(), Ok(p));
        }
        assert!("load".parse::<Preset>().is_err());
    }
}
