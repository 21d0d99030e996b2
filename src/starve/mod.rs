//! When sloburn itself was starved of CPU, so that a request's figures are its own stall as much
//! as the target's. `sending` and `connecting` are timed in user space: a sloburn held off the
//! CPU (a CFS quota, as a pod's `limits.cpu`; a busier process on its core; a runtime whose
//! workers are all busy) adds its own wait to the request it was sending.
//!
//! One sampler task ([`Starvation::sample`], every [`TICK`]) reads three witnesses and keeps
//! what they saw as episodes "starved from t0 to t1" in a bounded ring ([`ring`]):
//! - **cgroup throttling**: the process's CPU cgroup's `cpu.stat` (v1 `throttled_time`, v2
//!   `throttled_usec`; [`cgroup`]): time added since the last tick is an episode ending now;
//! - **run-queue delay**: each thread's `/proc/self/task/*/schedstat` wait; the most any thread
//!   waited for a CPU since the last tick, past [`RUN_QUEUE_SLACK`], is an episode ending now;
//! - **timer lateness**: the sampler's own sleep waking more than [`TIMER_SLACK`] after it was
//!   due (the process or its runtime could not run it) is an episode from the due time to now.
//!   While the sampler is that late and has not yet run, the time since it was due counts too
//!   (a request that finished first is judged with it).
//!
//! The sampler looks only while a run holds the watch ([`Starvation::active`]): an idle daemon
//! does not wake 200 times a second.
//!
//! A request whose measured time (from when its VU began it, for every phase) overlaps more than
//! [`BOUND`] of one cause's episodes is **generator-affected** ([`Starvation::judge`]): the run
//! keeps it apart from the target's figures and no SLO counts it. Reading the ring is a few
//! atomic loads; the sampler costs a few `pread`s per tick.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub mod cgroup;
pub mod ring;
mod sampler;

pub use cgroup::Quota;

/// How often the sampler looks.
pub const TICK: Duration = Duration::from_millis(5);
/// A request overlapping more than this of sloburn's starvation is generator-affected. One
/// millisecond: the resolution of tokio's timer, and below any latency objective worth setting.
pub const BOUND: Duration = Duration::from_millis(1);
/// Lateness of the sampler's sleep that is only tokio's timer (1 ms wheel, rounded up) and the
/// worker's wake-up.
pub const TIMER_SLACK: Duration = Duration::from_millis(2);
/// Run-queue wait per tick that is ordinary scheduling.
pub const RUN_QUEUE_SLACK: Duration = Duration::from_millis(1);
/// An episode that begins within this of the previous one of its cause continues it.
const JOIN: Duration = Duration::from_millis(1);

/// CPU time one request costs sloburn, with headroom, for the start-up quota check: 50 µs is
/// the highest figure `BENCHMARKS.md` measured (release build, HTTP/1.1 kept alive, 0.33–0.50 s
/// of CPU per 10,000 requests at 5,000/s); doubled for TLS, journeys, bursts and the sampler.
pub const CPU_PER_REQUEST: Duration = Duration::from_micros(100);

/// A warning when `quota` allows less CPU than `requests_per_second` need at
/// [`CPU_PER_REQUEST`]; `what` names who needs it (`profile \`canary\``). The limit it names
/// is rounded up to 50 millicores.
pub fn quota_warning(quota: Option<Quota>, requests_per_second: f64, what: &str) -> Option<String> {
    let q = quota?;
    let need = requests_per_second * CPU_PER_REQUEST.as_secs_f64();
    if !need.is_finite() || need <= q.cpus() {
        return None;
    }
    let set = ((need * 1000.0 / 50.0).ceil() * 50.0) as u64;
    Some(format!(
        "sloburn's CPU quota is {:.0}m (cgroup: {} µs per {} µs) but {what} at {:.0} requests/s \
         needs about {:.0}m ({} µs of CPU per request, with headroom): set `limits.cpu: {set}m` \
         or more, or lower the rate. Short of it, sloburn is throttled: the requests it overlaps \
         are generator-affected, kept out of the figures, and a threshold they fail makes the \
         run inconclusive",
        q.cpus() * 1000.0,
        q.quota_us,
        q.period_us,
        requests_per_second,
        need * 1000.0,
        CPU_PER_REQUEST.as_micros(),
    ))
}

/// What held sloburn off the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Its cgroup's CPU quota was spent (CFS throttling; a container's `limits.cpu`).
    Throttled,
    /// Its threads waited in the run queue for a CPU (another process on its cores).
    RunQueue,
    /// Its runtime woke a timer late (the process, or every worker, was busy or held).
    Timer,
}

impl Cause {
    /// In the order a request's cause is named: the most specific witness first.
    pub const ALL: [Cause; 3] = [Cause::Throttled, Cause::RunQueue, Cause::Timer];

    /// The label value and summary word.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Throttled => "cgroup_throttled",
            Cause::RunQueue => "run_queue",
            Cause::Timer => "timer_lateness",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Cause::Throttled => "its cgroup's CPU quota was spent (CFS throttling)",
            Cause::RunQueue => "its threads waited for a CPU held by other processes",
            Cause::Timer => "its runtime woke late (the process or its workers were held)",
        }
    }
}

/// What the sampler could read.
#[derive(Debug, Clone, PartialEq)]
pub struct Sources {
    /// `v1 /sys/fs/cgroup/cpu/…` or why no cgroup counters were read.
    pub cgroup: Result<String, String>,
    /// Whether per-thread run-queue delay was read.
    pub schedstat: bool,
}

/// Totals since the watch began: starved time per cause, the cgroup's own throttling figures,
/// and the requests judged affected per cause. Subtract two to get a run's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub starved: [Duration; Cause::ALL.len()],
    /// The cgroup's `throttled_time` (v1 sums it over CPUs).
    pub throttled: Duration,
    /// Periods in which the cgroup's quota ran out.
    pub throttled_periods: u64,
    pub affected: [u64; Cause::ALL.len()],
}

impl Totals {
    pub fn since(&self, earlier: &Totals) -> Totals {
        Totals {
            starved: std::array::from_fn(|i| self.starved[i].saturating_sub(earlier.starved[i])),
            throttled: self.throttled.saturating_sub(earlier.throttled),
            throttled_periods: self
                .throttled_periods
                .saturating_sub(earlier.throttled_periods),
            affected: std::array::from_fn(|i| self.affected[i].saturating_sub(earlier.affected[i])),
        }
    }

    pub fn affected_total(&self) -> u64 {
        self.affected.iter().sum()
    }

    /// The union of the episodes is at most the sum; the largest is a lower bound.
    pub fn starved_most(&self) -> Duration {
        self.starved.iter().copied().max().unwrap_or_default()
    }
}

/// The watch: one per process that sends load (`run`, `serve`), shared by its runs.
pub struct Starvation {
    base: Instant,
    ring: ring::Ring,
    /// When the sampler last ran, in ns since `base` plus one; 0 while no sampler runs.
    last_tick: AtomicU64,
    starved: [AtomicU64; Cause::ALL.len()],
    throttled_ns: AtomicU64,
    throttled_periods: AtomicU64,
    affected: [AtomicU64; Cause::ALL.len()],
    sources: OnceLock<Sources>,
    quota: Option<Quota>,
    /// Runs holding the watch ([`Active`]); the sampler sleeps while there are none.
    runs: AtomicUsize,
    wake: tokio::sync::Notify,
}

/// A run's hold on the watch: the sampler looks while one is held.
pub struct Active(Arc<Starvation>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.runs.fetch_sub(1, Relaxed);
    }
}

impl Starvation {
    /// Holds the watch for a run: the sampler looks until the returned guard is dropped.
    pub fn active(self: &Arc<Self>) -> Active {
        self.runs.fetch_add(1, Relaxed);
        self.wake.notify_one();
        Active(self.clone())
    }

    /// A watch with nothing seen yet; its sampler starts with [`Starvation::sample`]. Reads the
    /// cgroup's quota once.
    pub fn new() -> Starvation {
        Starvation {
            base: crate::clock::instant(),
            ring: ring::Ring::new(),
            last_tick: AtomicU64::new(0),
            starved: Default::default(),
            throttled_ns: AtomicU64::new(0),
            throttled_periods: AtomicU64::new(0),
            affected: Default::default(),
            sources: OnceLock::new(),
            quota: cgroup::Cgroup::find().ok().and_then(|c| c.quota()),
            runs: AtomicUsize::new(0),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// The CPU quota of the process's cgroup (the lowest up its ancestors), if it has one.
    pub fn quota(&self) -> Option<Quota> {
        self.quota
    }

    /// What the sampler reads (`None` before it started).
    pub fn sources(&self) -> Option<&Sources> {
        self.sources.get()
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.base).as_nanos() as u64
    }

    fn now_ns(&self) -> u64 {
        crate::clock::elapsed(self.base).as_nanos() as u64
    }

    /// Whether a request that began at `began` and took `took` (every phase) overlapped more
    /// than [`BOUND`] of sloburn's starvation, and of which cause (the first of [`Cause::ALL`]
    /// past the bound). Counts it when it did.
    pub fn judge(&self, began: Instant, took: Duration) -> Option<Cause> {
        let from = self.ns(began);
        let to = from.saturating_add(took.as_nanos() as u64);
        if to <= from || self.last_tick.load(Relaxed) == 0 && self.ring.last_end() < from {
            return None;
        }
        let mut by = self.ring.overlap(from, to);
        let pending = self.pending(self.now_ns());
        if let Some(start) = pending {
            let (a, b) = (start.max(from), to);
            by[Cause::Timer as usize] += b.saturating_sub(a);
        }
        let bound = BOUND.as_nanos() as u64;
        let cause = Cause::ALL.into_iter().find(|c| by[*c as usize] > bound)?;
        self.affected[cause as usize].fetch_add(1, Relaxed);
        Some(cause)
    }

    /// While the sampler is late past its slack and has not run: since when it was due.
    fn pending(&self, now: u64) -> Option<u64> {
        let last = self.last_tick.load(Relaxed).checked_sub(1)?;
        let due = last + (TICK + TIMER_SLACK).as_nanos() as u64;
        (now > due).then_some(due)
    }

    /// Records an episode (the sampler only).
    fn starved(&self, cause: Cause, start: u64, end: u64) {
        if end <= start {
            return;
        }
        self.ring.push(cause, start, end, JOIN.as_nanos() as u64);
        self.starved[cause as usize].fetch_add(end - start, Relaxed);
    }

    pub fn totals(&self) -> Totals {
        Totals {
            starved: std::array::from_fn(|i| Duration::from_nanos(self.starved[i].load(Relaxed))),
            throttled: Duration::from_nanos(self.throttled_ns.load(Relaxed)),
            throttled_periods: self.throttled_periods.load(Relaxed),
            affected: std::array::from_fn(|i| self.affected[i].load(Relaxed)),
        }
    }
}

impl std::fmt::Debug for Starvation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Starvation")
            .field("totals", &self.totals())
            .field("quota", &self.quota)
            .finish_non_exhaustive()
    }
}

impl Default for Starvation {
    fn default() -> Starvation {
        Starvation::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_affected_only_past_the_bound_and_by_the_most_specific_cause() {
        let s = Starvation::new();
        let at = |ms: u64| s.base + Duration::from_millis(ms);
        let ns = |ms: u64| ms * 1_000_000;
        // As the sampler pushes them: each ends at the tick that saw it.
        s.starved(Cause::Timer, ns(100), ns(140));
        s.starved(Cause::Throttled, ns(110), ns(140));
        s.starved(Cause::Timer, ns(140), ns(150));
        s.starved(Cause::RunQueue, ns(300), ns(300) + 900_000);
        // Before, after and beside the episodes: measured cleanly.
        assert_eq!(s.judge(at(10), Duration::from_millis(50)), None);
        assert_eq!(s.judge(at(160), Duration::from_millis(100)), None);
        // 0.9 ms of run-queue delay is within the bound.
        assert_eq!(s.judge(at(299), Duration::from_millis(5)), None);
        // Overlapping both: named by the throttling.
        assert_eq!(
            s.judge(at(120), Duration::from_millis(5)),
            Some(Cause::Throttled)
        );
        // Only the timer's part.
        assert_eq!(
            s.judge(at(142), Duration::from_millis(20)),
            Some(Cause::Timer)
        );
        let t = s.totals();
        assert_eq!(t.affected, [1, 0, 1]);
        assert_eq!(t.starved[Cause::Timer as usize], Duration::from_millis(50));
        assert_eq!(t.starved_most(), Duration::from_millis(50));
        assert_eq!(
            s.ring.overlap(0, u64::MAX)[Cause::Throttled as usize],
            ns(30)
        );
    }

    #[test]
    fn a_late_sampler_that_has_not_run_yet_counts_since_it_was_due() {
        let s = Starvation::new();
        let at = |ms: u64| s.base + Duration::from_millis(ms);
        // The sampler last ran 0 ms after the base; "now" is far later (the test's own time).
        s.last_tick.store(1, Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(
            s.judge(at(2), Duration::from_millis(20)),
            Some(Cause::Timer)
        );
        // A request that ended before the sampler was due is clean.
        assert_eq!(s.judge(at(0), Duration::from_millis(6)), None);
        // No sampler: nothing pending.
        s.last_tick.store(0, Relaxed);
        assert_eq!(s.judge(at(2), Duration::from_millis(20)), None);
    }
}
