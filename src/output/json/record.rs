//! The request path's half of `--out json`: [`Tap`], the observer that copies each event's
//! figures into a fixed-size [`Record`] and hands it to the writer through a bounded channel,
//! with no lock and no allocation. A full channel drops the sample and counts it; `sample`
//! keeps every k-th request (systematic, not random).

use crate::http::{ErrorClass, Outcome, Phase};
use crate::load::event::IterationResult;
use crate::load::event::Observer;
use crate::load::pacing::DropReason;
use crate::load::stats::RunStats;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, SystemTime};

/// Checks per request that fit the record (a bit each); later ones are not written.
pub const MAX_CHECKS: usize = 64;

/// What the request path sends the writer: plain numbers only.
pub enum Record {
    Request(Request),
    /// A journey step's group ended.
    Step {
        time: SystemTime,
        step: u32,
        took: Duration,
    },
    /// A journey iteration's bytes.
    Data {
        time: SystemTime,
        sent: u64,
        received: u64,
    },
    /// A journey iteration ended (not a dropped one).
    Iteration {
        time: SystemTime,
        journey: u32,
        took: Duration,
    },
    Dropped(SystemTime),
}

/// A request's figures.
pub struct Request {
    pub time: SystemTime,
    /// The request's step (`load::iteration`'s `StepId`).
    pub step: u32,
    pub status: u16,
    pub error: Option<ErrorClass>,
    pub failed: bool,
    pub phases: [Duration; 7],
    pub duration: Duration,
    /// `http_req_corrected_duration`: every phase (`Phases::total`), no lateness.
    pub corrected: Duration,
    pub sent: u64,
    pub received: u64,
    pub checks: u64,
    pub n_checks: u8,
    /// k6's `proto` tag.
    pub proto: &'static str,
}

/// The observer half: cheap, on the request path.
pub struct Tap {
    tx: SyncSender<Record>,
    stats: Arc<RunStats>,
    sample: f64,
    seen: AtomicU64,
    dropped: Arc<AtomicU64>,
}

impl Tap {
    /// Sends to `tx`, keeping the fraction `sample` in (0, 1] of the requests and counting
    /// in `dropped` what the channel had no room for.
    pub fn new(
        tx: SyncSender<Record>,
        stats: Arc<RunStats>,
        sample: f64,
        dropped: Arc<AtomicU64>,
    ) -> Tap {
        Tap {
            tx,
            stats,
            sample: sample.clamp(f64::MIN_POSITIVE, 1.0),
            seen: AtomicU64::new(0),
            dropped,
        }
    }

    fn send(&self, r: Record) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(r) {
            self.dropped.fetch_add(1, Relaxed);
        }
    }

    /// Systematic sampling: request k is kept when `floor((k+1)·f) > floor(k·f)`.
    fn keep(&self) -> bool {
        if self.sample >= 1.0 {
            return true;
        }
        let k = self.seen.fetch_add(1, Relaxed) as f64;
        ((k + 1.0) * self.sample).floor() > (k * self.sample).floor()
    }
}

impl Observer for Tap {
    fn request_finished(
        &self,
        step: usize,
        outcome: &Outcome,
        _lateness: Duration,
        checks: &[bool],
    ) {
        if !self.keep() {
            return;
        }
        let mut bits = 0u64;
        for (i, passed) in checks.iter().take(MAX_CHECKS).enumerate() {
            bits |= u64::from(*passed) << i;
        }
        self.send(Record::Request(Request {
            time: crate::clock::system_time(),
            step: step as u32,
            status: outcome.status.unwrap_or(0),
            error: outcome.error,
            failed: self.stats.is_failed_at(step, outcome),
            phases: Phase::ALL.map(|p| crate::load::record::k6_phase(&outcome.phases, p)),
            duration: outcome.duration(),
            corrected: outcome.phases.total(),
            sent: outcome.bytes_sent,
            received: outcome.bytes_received,
            checks: bits,
            n_checks: checks.len().min(MAX_CHECKS) as u8,
            proto: if outcome.version == http::Version::HTTP_2 {
                "HTTP/2.0"
            } else {
                "HTTP/1.1"
            },
        }));
    }

    fn step_finished(&self, step: usize, took: Duration) {
        self.send(Record::Step {
            time: crate::clock::system_time(),
            step: step as u32,
            took,
        });
    }

    fn iteration_data(&self, _journey: usize, sent: u64, received: u64) {
        self.send(Record::Data {
            time: crate::clock::system_time(),
            sent,
            received,
        });
    }

    fn iteration_finished(&self, journey: usize, result: IterationResult, took: Duration) {
        if result != IterationResult::Dropped {
            self.send(Record::Iteration {
                time: crate::clock::system_time(),
                journey: journey as u32,
                took,
            });
        }
    }

    fn iteration_dropped(&self, _reason: DropReason, _journey: usize) {
        self.send(Record::Dropped(crate::clock::system_time()));
    }
}
