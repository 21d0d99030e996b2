//! The search for the capacity at the SLO, pure: a state machine that is told each step's
//! verdict and answers with the next rate to probe, or the outcome. No clock, no I/O; the
//! stepping (`step`, `drive`) runs what it asks for and stops it when the budget is spent.
//!
//! Grow geometrically from `start` (×`growth`, never past `max_rate`) until a step fails,
//! then bisect between the highest rate that passed and the lowest that failed until they are
//! within `precision` of each other, then confirm the highest pass with a second step at that
//! rate. A confirmation that fails makes its rate the new lowest failure, and the search goes
//! on below it. An inconclusive step (sloburn could not hold the rate) is neither a pass nor a
//! fail: it is run once more, and a second one ends the search as generator-limited. Every
//! path is bounded by `max_steps`.

use serde::Serialize;

/// What the search is asked to find.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchConfig {
    /// The first rate probed (arrivals per second).
    pub start: f64,
    /// The ceiling: no step runs above it.
    pub max_rate: f64,
    /// The answer's bracket: `(high - low) / low` at most this (0.05 is 5 %).
    pub precision: f64,
    /// Each growth step multiplies the rate by this.
    pub growth: f64,
    /// No search runs more steps than this, whatever the verdicts.
    pub max_steps: usize,
}

impl SearchConfig {
    /// Why the config cannot be searched, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        let finite = [self.start, self.max_rate, self.precision, self.growth]
            .iter()
            .all(|v| v.is_finite());
        if !finite || self.start <= 0.0 {
            return Err("the first step's rate must be above zero".into());
        }
        if self.max_rate < self.start {
            return Err(format!(
                "--max-rate ({}) is under the first step ({}): raise it or lower --start-rate",
                rate(self.max_rate),
                rate(self.start)
            ));
        }
        if !(self.precision > 0.0 && self.precision <= 0.5) {
            return Err("--precision must be above 0 % and at most 50 %".into());
        }
        if self.growth <= 1.0 || self.max_steps == 0 {
            return Err("the growth factor must be above 1 and the step limit above 0".into());
        }
        Ok(())
    }
}

/// How a step judged the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// sloburn could not hold the rate: no verdict on the target.
    Inconclusive,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// Why a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    Grow,
    /// Below a failure with no pass under it (a confirmation failed).
    Descend,
    Bisect,
    /// The second step at the answer's rate.
    Confirm,
}

impl Purpose {
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Grow => "grow",
            Purpose::Descend => "descend",
            Purpose::Bisect => "bisect",
            Purpose::Confirm => "confirm",
        }
    }
}

/// One step the search asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Probe {
    pub rate: f64,
    pub purpose: Purpose,
    /// The same step again after an inconclusive one.
    pub retry: bool,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    Probe(Probe),
    Done(Outcome),
}

/// How a search ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `rate` passed twice; `high` is the lowest rate that failed, `None` when `rate` is the
    /// ceiling and nothing failed (the capacity is above `--max-rate`).
    Capacity { rate: f64, high: Option<f64> },
    /// The lowest step failed: the capacity is below it.
    BelowLowest { lowest: f64, high: f64 },
    /// sloburn could not hold `rate` twice: no decision.
    GeneratorLimited {
        rate: f64,
        low: Option<f64>,
        high: Option<f64>,
    },
    /// The budget (or the step limit) ran out before a confirmed answer.
    Undecided {
        low: Option<f64>,
        high: Option<f64>,
        why: Undecided,
    },
}

/// What ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undecided {
    Budget,
    Steps,
    Interrupted,
}

/// The search's state.
#[derive(Debug, Clone)]
pub struct Search {
    cfg: SearchConfig,
    /// Rates that passed, none at or above a later failure.
    passes: Vec<f64>,
    /// The lowest rate that failed.
    high: Option<f64>,
    pending: Option<Probe>,
    steps: usize,
    done: Option<Outcome>,
}

impl Search {
    /// A search and its first step.
    pub fn new(cfg: SearchConfig) -> Result<(Search, Probe), String> {
        cfg.check()?;
        let first = Probe {
            rate: cfg.start,
            purpose: Purpose::Grow,
            retry: false,
        };
        let search = Search {
            cfg,
            passes: Vec::new(),
            high: None,
            pending: Some(first),
            steps: 0,
            done: None,
        };
        Ok((search, first))
    }

    /// The highest rate that passed and still stands.
    pub fn low(&self) -> Option<f64> {
        self.passes.iter().copied().reduce(f64::max)
    }

    pub fn high(&self) -> Option<f64> {
        self.high
    }

    /// Steps recorded so far.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The verdict of the step last asked for; the next step or the outcome.
    pub fn record(&mut self, verdict: Verdict) -> Next {
        if let Some(done) = &self.done {
            return Next::Done(done.clone());
        }
        let Some(probe) = self.pending.take() else {
            return Next::Done(self.finish(Undecided::Steps));
        };
        self.steps += 1;
        match verdict {
            Verdict::Inconclusive if !probe.retry => {
                return self.ask(Probe {
                    retry: true,
                    ..probe
                });
            }
            Verdict::Inconclusive => {
                let outcome = Outcome::GeneratorLimited {
                    rate: probe.rate,
                    low: self.low(),
                    high: self.high,
                };
                return Next::Done(self.end(outcome));
            }
            Verdict::Pass if probe.purpose == Purpose::Confirm => {
                let outcome = Outcome::Capacity {
                    rate: probe.rate,
                    high: self.high,
                };
                return Next::Done(self.end(outcome));
            }
            Verdict::Pass => self.passes.push(probe.rate),
            Verdict::Fail => {
                self.high = Some(self.high.map_or(probe.rate, |h| h.min(probe.rate)));
                self.passes.retain(|p| *p < probe.rate);
            }
        }
        if self.steps >= self.cfg.max_steps {
            return Next::Done(self.finish(Undecided::Steps));
        }
        self.decide()
    }

    /// Ends the search before it decided (the budget ran out, a signal came).
    pub fn finish(&mut self, why: Undecided) -> Outcome {
        let outcome = Outcome::Undecided {
            low: self.low(),
            high: self.high,
            why,
        };
        self.end(outcome)
    }

    fn end(&mut self, outcome: Outcome) -> Outcome {
        self.pending = None;
        self.done = Some(outcome.clone());
        outcome
    }

    fn ask(&mut self, probe: Probe) -> Next {
        self.pending = Some(probe);
        Next::Probe(probe)
    }

    fn probe(&mut self, rate: f64, purpose: Purpose) -> Next {
        self.ask(Probe {
            rate,
            purpose,
            retry: false,
        })
    }

    fn decide(&mut self) -> Next {
        let c = self.cfg;
        match (self.low(), self.high) {
            (None, None) => self.probe(c.start, Purpose::Grow),
            (Some(low), None) if low >= c.max_rate => self.probe(low, Purpose::Confirm),
            (Some(low), None) => self.probe((low * c.growth).min(c.max_rate), Purpose::Grow),
            (None, Some(high)) if high <= c.start => {
                let outcome = Outcome::BelowLowest {
                    lowest: c.start,
                    high,
                };
                Next::Done(self.end(outcome))
            }
            (None, Some(high)) => self.probe((high / c.growth).max(c.start), Purpose::Descend),
            (Some(low), Some(high)) if (high - low) / low <= c.precision => {
                self.probe(low, Purpose::Confirm)
            }
            (Some(low), Some(high)) => self.probe((low + high) / 2.0, Purpose::Bisect),
        }
    }
}

/// A rate as the output writes it: `40/s`, `97.5/s`, `3.12/s`.
pub fn rate(r: f64) -> String {
    if (r - r.round()).abs() < 1e-9 {
        format!("{}/s", r.round())
    } else if r >= 10.0 {
        format!("{r:.1}/s")
    } else {
        format!("{r:.2}/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(start: f64, max_rate: f64) -> SearchConfig {
        SearchConfig {
            start,
            max_rate,
            precision: 0.05,
            growth: 2.0,
            max_steps: 64,
        }
    }

    /// Runs a search against `judge` (rate → verdict); returns the rates probed and the
    /// outcome.
    fn check(c: SearchConfig, mut judge: impl FnMut(f64) -> Verdict) -> (Vec<Probe>, Outcome) {
        let (mut search, mut probe) = Search::new(c).unwrap();
        let mut probes = Vec::new();
        for _ in 0..1000 {
            probes.push(probe);
            match search.record(judge(probe.rate)) {
                Next::Probe(p) => probe = p,
                Next::Done(o) => return (probes, o),
            }
        }
        panic!("the search did not end: {probes:?}");
    }

    /// A target whose capacity is `cap`: every rate at or under it passes.
    fn capacity(cap: f64) -> impl FnMut(f64) -> Verdict {
        move |r| {
            if r <= cap {
                Verdict::Pass
            } else {
                Verdict::Fail
            }
        }
    }

    #[test]
    fn grows_bisects_and_confirms_within_the_precision() {
        for cap in [13.0, 77.0, 100.0, 123.4, 999.0] {
            let (probes, outcome) = check(cfg(10.0, 1000.0), capacity(cap));
            let Outcome::Capacity {
                rate,
                high: Some(high),
            } = outcome
            else {
                panic!("{cap}: {outcome:?}");
            };
            assert!(rate <= cap && cap < high, "{cap}: {rate}..{high}");
            assert!((high - rate) / rate <= 0.05, "{cap}: {rate}..{high}");
            let last = probes.last().unwrap();
            assert_eq!((last.rate, last.purpose), (rate, Purpose::Confirm));
            // Grows by doubling first: 10, 20, 40, ...
            assert_eq!(probes[1].rate, 20.0, "{cap}: {probes:?}");
            assert!(probes.iter().all(|p| p.rate <= 1000.0));
            assert!(probes.len() <= 16, "{cap}: {} steps", probes.len());
        }
    }

    #[test]
    fn above_the_ceiling_says_so_and_never_exceeds_it() {
        let (probes, outcome) = check(cfg(10.0, 150.0), capacity(1e9));
        assert_eq!(
            outcome,
            Outcome::Capacity {
                rate: 150.0,
                high: None
            }
        );
        let rates: Vec<f64> = probes.iter().map(|p| p.rate).collect();
        assert_eq!(rates, [10.0, 20.0, 40.0, 80.0, 150.0, 150.0]);
    }

    #[test]
    fn the_lowest_step_failing_is_below_lowest() {
        let (probes, outcome) = check(cfg(10.0, 1000.0), capacity(5.0));
        assert_eq!(probes.len(), 1);
        assert_eq!(
            outcome,
            Outcome::BelowLowest {
                lowest: 10.0,
                high: 10.0
            }
        );
    }

    #[test]
    fn an_inconclusive_step_is_retried_once_then_ends_the_search() {
        // The generator holds up to 60/s: the answer is never a figure.
        let (probes, outcome) = check(cfg(10.0, 1000.0), |r| {
            if r > 60.0 {
                Verdict::Inconclusive
            } else {
                Verdict::Pass
            }
        });
        assert_eq!(
            outcome,
            Outcome::GeneratorLimited {
                rate: 80.0,
                low: Some(40.0),
                high: None
            }
        );
        let tail: Vec<(f64, bool)> = probes
            .iter()
            .rev()
            .take(2)
            .map(|p| (p.rate, p.retry))
            .collect();
        assert_eq!(tail, [(80.0, true), (80.0, false)]);
        // Once inconclusive, then a verdict: the search goes on with it.
        let mut flaky = 0;
        let (_, outcome) = check(cfg(10.0, 1000.0), |r| {
            if r == 80.0 && flaky == 0 {
                flaky += 1;
                Verdict::Inconclusive
            } else {
                capacity(100.0)(r)
            }
        });
        assert!(matches!(outcome, Outcome::Capacity { .. }), "{outcome:?}");
    }

    #[test]
    fn a_failed_confirmation_moves_the_bracket_down() {
        // The target passes 97.5 the first time only (it degrades); later 90 holds.
        let mut seen = 0;
        let (probes, outcome) = check(cfg(10.0, 1000.0), |r| {
            if (95.0..=100.0).contains(&r) {
                seen += 1;
                if seen == 1 {
                    return Verdict::Pass;
                }
                return Verdict::Fail;
            }
            capacity(92.0)(r)
        });
        let Outcome::Capacity { rate, high } = outcome else {
            panic!("{outcome:?}")
        };
        assert!(
            rate <= 92.0 && high.unwrap() > 92.0,
            "{rate} {high:?}: {probes:?}"
        );
        assert!(
            probes
                .iter()
                .filter(|p| p.purpose == Purpose::Confirm)
                .count()
                >= 2
        );
    }

    #[test]
    fn every_search_is_bounded_in_steps() {
        // A judge that flips at random still ends within max_steps (+ a retry).
        let mut x: u64 = 7;
        let mut c = cfg(1.0, 1e6);
        c.max_steps = 20;
        let (probes, outcome) = check(c, |_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match x >> 62 {
                0 => Verdict::Inconclusive,
                1 => Verdict::Fail,
                _ => Verdict::Pass,
            }
        });
        assert!(probes.len() <= 21, "{}", probes.len());
        let _ = outcome;
        let (probes, outcome) = check(c, capacity(1e9 - 1.0));
        assert!(probes.len() <= 20);
        assert!(matches!(
            outcome,
            Outcome::Capacity { .. } | Outcome::Undecided { .. }
        ));
    }

    #[test]
    fn bad_configs_say_why() {
        assert!(Search::new(cfg(0.0, 10.0)).is_err());
        let e = Search::new(cfg(20.0, 10.0)).unwrap_err();
        assert!(
            e.contains("--max-rate (10/s) is under the first step (20/s)"),
            "{e}"
        );
        let mut c = cfg(1.0, 10.0);
        c.precision = 0.0;
        assert!(Search::new(c).is_err());
        c.precision = f64::NAN;
        assert!(Search::new(c).is_err());
    }

    #[test]
    fn the_budget_ends_a_search_with_what_it_knows() {
        let (mut s, _) = Search::new(cfg(10.0, 1000.0)).unwrap();
        assert!(matches!(s.record(Verdict::Pass), Next::Probe(_)));
        assert!(matches!(s.record(Verdict::Fail), Next::Probe(_)));
        assert_eq!(
            s.finish(Undecided::Budget),
            Outcome::Undecided {
                low: Some(10.0),
                high: Some(20.0),
                why: Undecided::Budget
            }
        );
        assert!(matches!(s.record(Verdict::Pass), Next::Done(_)));
    }

    #[test]
    fn rates_read_as_written() {
        assert_eq!(rate(40.0), "40/s");
        assert_eq!(rate(97.5), "97.5/s");
        assert_eq!(rate(3.125), "3.12/s");
    }
}
