//! A run's recorder in one handle: the scatter observer to add to the run's observers, and the
//! one-second sampler task (owned by this handle: dropping it stops the task). The sampler
//! hands every sample to a callback (the daemon's live figures and series ring).

use super::detail::RunDetail;
use super::recorder::{Point, Sample, Sampler, Scatter};
use crate::load::event::Observer;
use crate::load::runner::RunReport;
use crate::load::stats::RunStats;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinSet;

/// What the sampler calls once a second.
pub type OnSample = Arc<dyn Fn(Sample) + Send + Sync>;

pub struct Recording {
    scatter: Arc<Scatter>,
    evidence: Option<Arc<super::evidence::Evidence>>,
    sampler: Arc<Mutex<Sampler>>,
    started_at: f64,
    task: JoinSet<()>,
}

impl Recording {
    /// Starts sampling `stats` now. Call from inside a tokio runtime.
    pub fn start(stats: Arc<RunStats>, on_sample: Option<OnSample>) -> Recording {
        let started_at = crate::clock::unix_secs();
        let sampler = Arc::new(Mutex::new(Sampler::new(stats.clone(), started_at)));
        let mut task = JoinSet::new();
        let s = sampler.clone();
        task.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let sample = match s.lock() {
                    Ok(mut s) => s.tick(crate::clock::unix_secs()),
                    Err(_) => return,
                };
                if let Some(f) = &on_sample {
                    f(sample);
                }
            }
        });
        Recording {
            scatter: Arc::new(Scatter::new(stats)),
            evidence: None,
            sampler,
            started_at,
            task,
        }
    }

    /// Keeps the last failing responses of each step too (`evidence.rs`).
    pub fn with_evidence(mut self, evidence: super::evidence::Evidence) -> Recording {
        self.evidence = Some(Arc::new(evidence));
        self
    }

    /// The observers that fill the scatter and the evidence; add them to the run's
    /// [`Observers`](crate::load::observe::Observers).
    pub fn observers(&self) -> Vec<Arc<dyn Observer>> {
        let mut out: Vec<Arc<dyn Observer>> = vec![self.scatter.clone()];
        if let Some(e) = &self.evidence {
            out.push(e.clone());
        }
        out
    }

    pub fn started_at(&self) -> f64 {
        self.started_at
    }

    /// Stops sampling and returns the run's detail and its last (partial) 10-second slot.
    pub fn finish(mut self, report: &RunReport) -> (RunDetail, Option<Point>) {
        self.task.abort_all();
        let now = crate::clock::unix_secs();
        let (slot, timeline) = match self.sampler.lock() {
            Ok(mut s) => (s.finish(now), s.timeline().to_vec()),
            Err(_) => (None, Vec::new()),
        };
        let mut detail = RunDetail::of(
            report,
            &timeline,
            self.scatter.points(),
            self.started_at,
            now,
        );
        if let Some(e) = &self.evidence {
            detail.evidence = e.failures();
        }
        (detail, slot)
    }
}
