//! What a run records for its pictures, beside its stats: a bounded reservoir of request
//! samples (vegeta's latency-over-time scatter) filled on the request path with atomics only,
//! and a one-second sampler that turns the run's cumulative stats into a bounded timeline of
//! points (rate, percentiles, errors by class, VUs, drops) and into the 10-second points of a
//! profile's series ring. Nothing here stores every sample: memory is fixed per run.

use crate::hist::HistSnapshot;
use crate::http::{ErrorClass, Outcome};
use crate::load::event::Observer;
use crate::load::stats::RunStats;
use once_cell::race::OnceBox;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tokio::time::Instant;

/// Samples the scatter keeps per run (uniform over the whole run: reservoir sampling).
pub const RESERVOIR: usize = 4096;

/// Points a run's timeline keeps; past it, neighbouring points merge in pairs.
pub const TIMELINE_POINTS: usize = 1800;

/// The width of one point of a profile's series ring.
pub const SLOT_SECONDS: i64 = 10;

const PRESENT: u64 = 1 << 63;
const MAX_T_MS: u64 = (1 << 31) - 1;
const MAX_LATENCY_US: u64 = (1 << 31) - 1;

/// Reservoir slots allocated together: a run with a few requests holds one chunk (1 KiB) and
/// the table of chunks (256 bytes), not the whole reservoir (1,000 short runs at once would
/// otherwise hold 32 MiB of empty slots; with chunks of 256 they held 2.3 MB).
const CHUNK: usize = 128;

/// The scatter's reservoir: an [`Observer`] that keeps a uniform sample of the run's requests
/// as (start offset, latency, failed) packed into one atomic word each.
pub struct Scatter {
    stats: Arc<RunStats>,
    started: Instant,
    seed: u64,
    seen: AtomicU64,
    /// [`RESERVOIR`] slots in chunks of [`CHUNK`], each allocated on its first sample.
    chunks: Box<[OnceBox<[AtomicU64; CHUNK]>]>,
}

/// splitmix64: a cheap, well-mixed hash for the reservoir's slot choice (no lock, no state).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Scatter {
    /// `stats` decides what counts as failed (k6's `http_req_failed`).
    pub fn new(stats: Arc<RunStats>) -> Scatter {
        let started = crate::clock::tokio_instant();
        Scatter {
            stats,
            started,
            seed: mix(std::process::id() as u64 ^ crate::clock::elapsed(started).as_nanos() as u64),
            seen: AtomicU64::new(0),
            chunks: (0..RESERVOIR / CHUNK).map(|_| OnceBox::new()).collect(),
        }
    }

    fn keep(&self, v: u64) {
        let i = self.seen.fetch_add(1, Relaxed);
        let slot = if (i as usize) < RESERVOIR {
            i as usize
        } else {
            let j = mix(i ^ self.seed) % (i + 1);
            if j as usize >= RESERVOIR {
                return;
            }
            j as usize
        };
        let chunk = self.chunks[slot / CHUNK]
            .get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        chunk[slot % CHUNK].store(v, Relaxed);
    }

    /// The samples kept so far, by start time.
    pub fn points(&self) -> ScatterData {
        let mut kept: Vec<(u64, u64, bool)> = self
            .chunks
            .iter()
            .filter_map(OnceBox::get)
            .flat_map(|c| c.iter())
            .map(|s| s.load(Relaxed))
            .filter(|v| v & PRESENT != 0)
            .map(|v| ((v >> 32) & MAX_T_MS, (v >> 1) & MAX_LATENCY_US, v & 1 == 1))
            .collect();
        kept.sort_unstable();
        ScatterData {
            seen: self.seen.load(Relaxed),
            t: kept.iter().map(|k| k.0 as f64 / 1000.0).collect(),
            ms: kept.iter().map(|k| k.1 as f64 / 1000.0).collect(),
            failed: kept.iter().map(|k| u8::from(k.2)).collect(),
        }
    }
}

impl Observer for Scatter {
    fn request_finished(
        &self,
        _step: usize,
        outcome: &Outcome,
        lateness: Duration,
        _checks: &[bool],
    ) {
        let p = &outcome.phases;
        // The same latency the run's `http_req_duration` records (lateness included, so a
        // stall shows), or the whole attempt for a request that got no response.
        let latency = if outcome.status.is_some() {
            p.duration() + lateness
        } else {
            p.blocked + p.dns + p.connecting + p.tls_handshaking + p.duration() + lateness
        };
        // Plotted at its intended start, as vegeta plots by attack time.
        let start = crate::clock::elapsed(self.started).saturating_sub(latency);
        let t_ms = (start.as_millis() as u64).min(MAX_T_MS);
        let us = (latency.as_micros() as u64).min(MAX_LATENCY_US);
        let failed = u64::from(self.stats.is_failed(outcome));
        self.keep(PRESENT | (t_ms << 32) | (us << 1) | failed);
    }
}

/// The scatter as columns: seconds since the run's start, latency in ms, 1 when failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScatterData {
    /// Requests the reservoir saw; `t.len()` of them were kept.
    pub seen: u64,
    pub t: Vec<f64>,
    pub ms: Vec<f64>,
    pub failed: Vec<u8>,
}

/// One interval of a run or of a profile's series.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Point {
    /// Start of the interval, unix seconds.
    pub t: f64,
    pub seconds: f64,
    pub requests: u64,
    pub failed: u64,
    /// Requests per error class (only classes seen).
    pub errors: BTreeMap<String, u64>,
    /// Latency percentiles of the interval's responses; none without a response.
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Busy VUs at the sample, and the most allocated.
    pub vus: u32,
    pub vus_max: u32,
    pub dropped: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The figures of a run a point is made from, read once a second. A sampler keeps two (the last
/// second's and its open slot's): a whole [`RunRecord`](crate::load::record::RunRecord)
/// copies every histogram, sub-metric and check name, and 1,000 runs at once held two each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub duration: HistSnapshot,
    pub requests: u64,
    pub failed: u64,
    pub errors: Vec<(ErrorClass, u64)>,
    pub dropped: u64,
    pub vus: u32,
    pub vus_max: u32,
}

impl Reading {
    pub fn of(stats: &RunStats) -> Reading {
        Reading {
            duration: stats.duration(),
            requests: stats.requests.load(Relaxed),
            failed: stats.failed.load(Relaxed),
            errors: stats.errors(),
            dropped: stats.dropped.load(Relaxed),
            vus: stats.vus.load(Relaxed),
            vus_max: stats.vus_max.load(Relaxed),
        }
    }
}

impl Point {
    /// The interval from `prev` to `now` (two readings of the same run).
    pub fn between(t: f64, seconds: f64, now: &Reading, prev: &Reading) -> Point {
        let h = now.duration.since(&prev.duration);
        let has = h.count() > 0;
        let q = |x: f64| has.then(|| ms(h.quantile(x)));
        let mut errors = BTreeMap::new();
        for class in ErrorClass::ALL {
            let get = |s: &Reading| {
                s.errors
                    .iter()
                    .find(|(e, _)| *e == class)
                    .map_or(0, |(_, n)| *n)
            };
            let n = get(now).saturating_sub(get(prev));
            if n > 0 {
                errors.insert(class.as_str().to_string(), n);
            }
        }
        Point {
            t,
            seconds,
            requests: now.requests.saturating_sub(prev.requests),
            failed: now.failed.saturating_sub(prev.failed),
            errors,
            p50_ms: q(0.5),
            p90_ms: q(0.9),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            max_ms: has.then(|| ms(h.max())),
            vus: now.vus,
            vus_max: now.vus_max,
            dropped: now.dropped.saturating_sub(prev.dropped),
        }
    }

    /// Requests per second over the interval.
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.requests as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// Folds a neighbouring interval into this one. Counts add up; a percentile becomes the
    /// larger of the two (an approximation that never hides a slow interval).
    pub fn absorb(&mut self, other: &Point) {
        fn max(a: Option<f64>, b: Option<f64>) -> Option<f64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }
        }
        self.t = self.t.min(other.t);
        self.seconds += other.seconds;
        self.requests += other.requests;
        self.failed += other.failed;
        for (k, v) in &other.errors {
            *self.errors.entry(k.clone()).or_default() += v;
        }
        self.p50_ms = max(self.p50_ms, other.p50_ms);
        self.p90_ms = max(self.p90_ms, other.p90_ms);
        self.p95_ms = max(self.p95_ms, other.p95_ms);
        self.p99_ms = max(self.p99_ms, other.p99_ms);
        self.max_ms = max(self.max_ms, other.max_ms);
        self.vus = self.vus.max(other.vus);
        self.vus_max = self.vus_max.max(other.vus_max);
        self.dropped += other.dropped;
    }
}

/// A run's figures while it goes on, refreshed by every sample.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct LiveFigures {
    pub started_at: f64,
    pub elapsed_seconds: f64,
    pub requests: u64,
    pub failed: u64,
    /// Requests per second over the last sample.
    pub rate: f64,
    /// Over the run so far; none before the first response.
    pub p95_ms: Option<f64>,
    pub vus: u32,
}

/// What one sample produced.
pub struct Sample {
    pub live: LiveFigures,
    /// A finished 10-second slot for the profile's series ring.
    pub slot: Option<Point>,
}

/// The one-second sampler of a run: call [`Sampler::tick`] once a second and
/// [`Sampler::finish`] when the run ends.
pub struct Sampler {
    stats: Arc<RunStats>,
    started_unix: f64,
    prev: Reading,
    prev_unix: f64,
    timeline: Vec<Point>,
    /// The open 10-second slot: its key (unix / 10), and the figures at its start.
    slot: Option<(i64, Reading, f64)>,
}

impl Sampler {
    pub fn new(stats: Arc<RunStats>, started_unix: f64) -> Sampler {
        let prev = Reading::of(&stats);
        Sampler {
            stats,
            started_unix,
            slot: Some((
                (started_unix as i64).div_euclid(SLOT_SECONDS),
                prev.clone(),
                started_unix,
            )),
            prev,
            prev_unix: started_unix,
            timeline: Vec::new(),
        }
    }

    /// Samples the run at `now_unix`.
    pub fn tick(&mut self, now_unix: f64) -> Sample {
        let now = Reading::of(&self.stats);
        let point = Point::between(
            self.prev_unix,
            (now_unix - self.prev_unix).max(0.0),
            &now,
            &self.prev,
        );
        let live = LiveFigures {
            started_at: self.started_unix,
            elapsed_seconds: (now_unix - self.started_unix).max(0.0),
            requests: now.requests,
            failed: now.failed,
            rate: point.rate(),
            p95_ms: (now.duration.count() > 0).then(|| ms(now.duration.quantile(0.95))),
            vus: now.vus,
        };
        self.push(point);
        let key = (now_unix as i64).div_euclid(SLOT_SECONDS);
        let slot = match &self.slot {
            Some((k, _, _)) if *k != key => self.close_slot(&now, now_unix, Some(key)),
            _ => None,
        };
        self.prev = now;
        self.prev_unix = now_unix;
        Sample { live, slot }
    }

    /// The last partial second and the open slot, when the run has ended.
    pub fn finish(&mut self, now_unix: f64) -> Option<Point> {
        let now = Reading::of(&self.stats);
        if now.requests > self.prev.requests || now.dropped > self.prev.dropped {
            let point = Point::between(
                self.prev_unix,
                (now_unix - self.prev_unix).max(0.0),
                &now,
                &self.prev,
            );
            // A sliver of a second would show as a spike in the rate: it joins the second
            // before it.
            match self.timeline.last_mut() {
                Some(last) if point.seconds < 1.0 => last.absorb(&point),
                _ => self.push(point),
            }
        }
        let slot = self.close_slot(&now, now_unix, None);
        self.prev = now;
        self.prev_unix = now_unix;
        slot
    }

    fn close_slot(&mut self, now: &Reading, now_unix: f64, next: Option<i64>) -> Option<Point> {
        let (key, base, base_unix) = self.slot.take()?;
        self.slot = next.map(|k| (k, now.clone(), now_unix));
        // A run's first and last slots are partial: their rate is over the time it ran in them.
        let slot_start = (key * SLOT_SECONDS) as f64;
        let end = match next {
            Some(_) => slot_start + SLOT_SECONDS as f64,
            None => now_unix,
        };
        let seconds = (end - base_unix.max(slot_start)).clamp(1.0, SLOT_SECONDS as f64);
        Some(Point::between(slot_start, seconds, now, &base))
    }

    fn push(&mut self, point: Point) {
        if self.timeline.len() >= TIMELINE_POINTS {
            let old = std::mem::take(&mut self.timeline);
            for pair in old.chunks(2) {
                let mut p = pair[0].clone();
                if let Some(b) = pair.get(1) {
                    p.absorb(b);
                }
                self.timeline.push(p);
            }
        }
        self.timeline.push(point);
    }

    pub fn timeline(&self) -> &[Point] {
        &self.timeline
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Phases;

    fn outcome(status: Option<u16>, waiting_ms: u64) -> Outcome {
        Outcome {
            status,
            error: status.is_none().then_some(ErrorClass::Timeout),
            phases: Phases {
                waiting: Duration::from_millis(waiting_ms),
                ..Phases::default()
            },
            ..Outcome::default()
        }
    }

    #[test]
    fn a_point_is_as_small_as_the_readme_says() {
        // README: the ring is 360 points of 152 bytes, about 55 KiB per profile.
        assert_eq!(std::mem::size_of::<Point>(), 152);
    }

    #[test]
    fn the_reservoir_stays_bounded_and_keeps_latency_and_failure() {
        let stats = Arc::new(RunStats::new(&[]));
        let s = Scatter::new(stats);
        s.request_finished(0, &outcome(Some(200), 1500), Duration::ZERO, &[]);
        s.request_finished(0, &outcome(None, 3), Duration::from_millis(2), &[]);
        let p = s.points();
        assert_eq!(p.seen, 2);
        let mut got: Vec<(u64, u8)> =
            p.ms.iter()
                .zip(&p.failed)
                .map(|(m, f)| (m.round() as u64, *f))
                .collect();
        got.sort();
        assert_eq!(got, vec![(5, 1), (1500, 0)]);
        let allocated = |s: &Scatter| s.chunks.iter().filter(|c| c.get().is_some()).count();
        assert_eq!(
            allocated(&s),
            1,
            "a short run holds one chunk of the reservoir"
        );
        let bytes = s.chunks.len() * size_of::<OnceBox<[AtomicU64; CHUNK]>>()
            + allocated(&s) * size_of::<[AtomicU64; CHUNK]>();
        assert!(bytes <= 1536, "a short run's reservoir holds {bytes} bytes");
        for _ in 0..3 * RESERVOIR {
            s.request_finished(0, &outcome(Some(200), 1), Duration::ZERO, &[]);
        }
        let p = s.points();
        assert_eq!(p.seen, 2 + 3 * RESERVOIR as u64);
        assert_eq!(p.t.len(), RESERVOIR);
        assert_eq!(allocated(&s), RESERVOIR / CHUNK);
        assert!(p.t.windows(2).all(|w| w[0] <= w[1]), "sorted by time");
    }

    #[test]
    fn points_hold_the_interval_and_merge_without_hiding_the_slow_one() {
        let stats = Arc::new(RunStats::new(&[]));
        let before = Reading::of(&stats);
        for ms in [10, 10, 10, 200] {
            stats.request_finished(0, &outcome(Some(200), ms), Duration::ZERO, &[]);
        }
        stats.request_finished(0, &outcome(None, 0), Duration::ZERO, &[]);
        let mid = Reading::of(&stats);
        let whole = stats.snapshot(Duration::from_secs(1));
        assert_eq!(mid.duration, whole.duration);
        assert_eq!(mid.errors, whole.errors);
        assert_eq!((mid.requests, mid.failed), (whole.requests, whole.failed));
        let a = Point::between(0.0, 1.0, &mid, &before);
        assert_eq!((a.requests, a.failed), (5, 1));
        assert_eq!(a.errors.get("timeout"), Some(&1));
        let p50 = a.p50_ms.unwrap();
        assert!((9.9..10.1).contains(&p50), "{p50}");
        assert!(a.max_ms.unwrap() >= 199.0, "{:?}", a.max_ms);
        let b = Point::between(1.0, 1.0, &Reading::of(&stats), &mid);
        assert_eq!(b.requests, 0);
        assert_eq!(b.p95_ms, None, "no responses: no percentile, never a zero");
        let mut m = a.clone();
        m.absorb(&b);
        assert_eq!((m.t, m.seconds, m.requests), (0.0, 2.0, 5));
        assert_eq!(m.p95_ms, a.p95_ms);
    }

    /// 1,000 runs at once hold a sampler each: two readings, not two whole snapshots (which
    /// made it 1.8 KB before its vectors).
    #[test]
    fn a_sampler_keeps_readings_not_snapshots() {
        assert!(size_of::<Sampler>() <= 384, "{}", size_of::<Sampler>());
    }

    #[tokio::test]
    async fn the_sampler_fills_ten_second_slots_and_a_bounded_timeline() {
        let stats = Arc::new(RunStats::new(&[]));
        let mut s = Sampler::new(stats.clone(), 1005.0);
        let mut slots = Vec::new();
        for i in 1..=TIMELINE_POINTS as u64 + 20 {
            stats.request_finished(0, &outcome(Some(200), 5), Duration::ZERO, &[]);
            let sample = s.tick(1005.0 + i as f64);
            assert_eq!(sample.live.requests, i);
            slots.extend(sample.slot);
        }
        slots.extend(s.finish(1005.0 + TIMELINE_POINTS as f64 + 20.5));
        assert!(s.timeline().len() <= TIMELINE_POINTS);
        let total: u64 = s.timeline().iter().map(|p| p.requests).sum();
        assert_eq!(total, TIMELINE_POINTS as u64 + 20);
        assert_eq!(slots[0].t, 1000.0);
        assert_eq!(slots[0].seconds, 5.0, "the run began at 1005");
        assert_eq!(slots[1].t, 1010.0);
        assert_eq!(slots[1].seconds, 10.0);
        assert!(
            (slots.last().unwrap().seconds - 5.5).abs() < 1e-9,
            "it ended at 2825.5"
        );
        assert_eq!(slots.iter().map(|p| p.requests).sum::<u64>(), total);
        assert!(slots.iter().all(|p| p.t as i64 % SLOT_SECONDS == 0));
    }
}
