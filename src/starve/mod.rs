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
//! A request is **generator-affected** ([`Starvation::judge`], the rule in [`explains`]) only
//! when it was answered (no error class, a status its checks accept: a failure is always the
//! target's) and sloburn's starvation **explains** its latency: one cause's episodes cover at
//! least half of its measured time ([`SHARE`]) and at least [`FLOOR`]. A 1 s target stall
//! during which sloburn waited 20 ms for a CPU is the target's. An affected request stays in
//! every count; only its latency leaves the verdicts (`load::affected`). Reading the ring is a
//! few atomic loads; the sampler costs a few `pread`s per tick.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub mod cgroup;
pub mod ring;
mod sampler;

pub use cgroup::Quota;

/// How often the sampler looks.
pub const TICK: Duration = Duration::from_millis(5);
/// The least starvation that can explain a request's latency: below it, sloburn's wait is
/// charged to the target as any other scheduling noise. Two milliseconds: twice tokio's timer
/// resolution and the sampler's slack, far below a latency objective worth setting (a request
/// that meets its objective is good whatever sloburn added, `budget::watcher`).
pub const FLOOR: Duration = Duration::from_millis(2);
/// The share of a request's measured time one cause's starvation must cover to explain it
/// (`SHARE_NUM / SHARE_DEN`, one half): a request whose time is mostly the target's is the
/// target's, however long sloburn also waited.
pub const SHARE_NUM: u64 = 1;
pub const SHARE_DEN: u64 = 2;

/// Whether starvation covering `overlap` (ns, by `Cause as usize`) of a request's measured
/// `took_ns` explains its latency, and by which cause: the first of [`Cause::ALL`] whose own
/// episodes cover at least [`FLOOR`] and at least [`SHARE_NUM`]/[`SHARE_DEN`] of `took_ns`.
/// Causes are judged each alone (their episodes overlap one another: a throttled process also
/// wakes late), so the union is never double counted. Pure.
pub fn explains(overlap: [u64; Cause::ALL.len()], took_ns: u64) -> Option<Cause> {
    let floor = FLOOR.as_nanos() as u64;
    Cause::ALL.into_iter().find(|c| {
        let o = overlap[*c as usize].min(took_ns);
        o >= floor && o.saturating_mul(SHARE_DEN) >= took_ns.saturating_mul(SHARE_NUM)
    })
}
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
         or more, or lower the rate. Short of it, sloburn is throttled: the latency of the \
         requests its stall explains leaves the verdicts, and a threshold they alone fail \
         makes the run inconclusive",
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

    /// Whether sloburn's starvation explains the latency of an answered request that began at
    /// `began` and took `took` in all: [`explains`] over the episodes that overlap the parts of
    /// its time sloburn drove, a sampler overdue counted as timer lateness since it was due.
    /// Each part is `(offset from began, length)`. `frozen` is where cgroup throttling counts:
    /// `load::observe` passes the whole request, since a throttled cgroup runs none of sloburn
    /// (it notices a finished connect late, and its transport's write stamp is taken in user
    /// space), and the share rule keeps a long stall of the target the target's. `alone` are the parts sloburn drives by
    /// itself (its own connection's wait, its write): the run-queue delay and the timer's
    /// lateness are process-wide witnesses that some thread waited, which on a loaded machine
    /// is nearly always, so they are judged only there, never over a connect the peer holds.
    /// Run-queue delay or timer lateness while the answer is awaited is never counted: waiting
    /// and receiving end at the kernel's receive stamps (`http::rx`). The caller judges only answered requests and
    /// counts the affected ones ([`Starvation::count`]).
    pub fn judge(
        &self,
        began: Instant,
        frozen: (Duration, Duration),
        alone: [(Duration, Duration); 2],
        took: Duration,
    ) -> Option<Cause> {
        self.judge_within(began, frozen, alone, took, took)
    }

    /// [`Starvation::judge`], counting at most `own` of the starvation it sees: the part of the
    /// request's time that was timed in user space at all. A request the kernel timed on both
    /// ends (`http::tx`, `http::rx`) holds sloburn's stall only in its wait for its own
    /// connection; however long sloburn was starved around it, no more of its latency can be
    /// sloburn's.
    pub fn judge_within(
        &self,
        began: Instant,
        frozen: (Duration, Duration),
        alone: [(Duration, Duration); 2],
        took: Duration,
        own: Duration,
    ) -> Option<Cause> {
        if frozen.1 < FLOOR || own < FLOOR {
            return None;
        }
        let from = self.ns(began);
        if self.last_tick.load(Relaxed) == 0 && self.ring.last_end() < from {
            return None;
        }
        let pending = self.pending(self.now_ns());
        // Each witness's episodes where it counts, clipped: throttling over `frozen`, the
        // others over `alone`; an overdue sampler as timer lateness since it was due.
        let mut parts: Vec<(u64, u64, u8)> = Vec::new();
        // An overdue sampler counts everywhere: a sampler that could not run says sloburn was
        // frozen (a throttled cgroup runs none of it) as surely as the cgroup's counter, which
        // it has not read yet.
        let mut window = |(at, len): (Duration, Duration), keep: &dyn Fn(u8) -> bool| {
            let a = from.saturating_add(at.as_nanos() as u64);
            let b = a.saturating_add(len.as_nanos() as u64);
            let start = parts.len();
            self.ring.clipped(a, b, &mut parts);
            let mut i = start;
            while i < parts.len() {
                if keep(parts[i].2) {
                    i += 1;
                } else {
                    parts.swap_remove(i);
                }
            }
            if let Some(due) = pending {
                let s = due.max(a);
                if b > s {
                    parts.push((s, b, Cause::Timer as u8));
                }
            }
        };
        window(frozen, &|c| c == Cause::Throttled as u8);
        for part in alone.into_iter().filter(|p| !p.1.is_zero()) {
            window(part, &|c| c != Cause::Throttled as u8);
        }
        explains_union(&mut parts, took.as_nanos() as u64, own.as_nanos() as u64)
    }

    /// Counts one generator-affected request of `cause`.
    pub fn count(&self, cause: Cause) {
        self.affected[cause as usize].fetch_add(1, Relaxed);
    }

    /// While the sampler is late past its slack and has not run: since when it was due.
    fn pending(&self, now: u64) -> Option<u64> {
        let last = self.last_tick.load(Relaxed).checked_sub(1)?;
        let due = last + (TICK + TIMER_SLACK).as_nanos() as u64;
        (now > due).then_some(due)
    }

    /// Records an episode from `start` to `end` as the sampler would (tests elsewhere in the
    /// crate inject starvation with it).
    #[cfg(test)]
    pub(crate) fn episode(&self, cause: Cause, start: Instant, end: Instant) {
        self.starved(cause, self.ns(start), self.ns(end));
    }

    /// Records an episode (the sampler only).
    fn starved(&self, cause: Cause, start: u64, end: u64) {
        if end <= start {
            return;
        }
        self.ring.push(cause, start, end, JOIN.as_nanos() as u64);
        self.starved[cause as usize].fetch_add(end - start, Relaxed);
    }

    /// The affected requests so far by cause, as (label value, count), in [`Cause::ALL`] order.
    pub fn affected_by_cause(&self) -> [(&'static str, u64); Cause::ALL.len()] {
        Cause::ALL.map(|c| (c.as_str(), self.affected[c as usize].load(Relaxed)))
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

/// [`explains`] over episodes of several causes at once: their union's length (episodes of
/// different causes overlap; each moment counts once), named by the cause that covers the most
/// of it. Sorts `parts`.
fn explains_union(parts: &mut [(u64, u64, u8)], took_ns: u64, own_ns: u64) -> Option<Cause> {
    parts.sort_unstable();
    let (mut union, mut reach) = (0u64, 0u64);
    let mut by = [0u64; Cause::ALL.len()];
    for &(a, b, c) in parts.iter() {
        if let Some(n) = by.get_mut(c as usize) {
            *n += b - a;
        }
        let a = a.max(reach);
        if b > a {
            union += b - a;
            reach = b;
        }
    }
    let floor = FLOOR.as_nanos() as u64;
    let union = union.min(took_ns).min(own_ns);
    if union < floor || union.saturating_mul(SHARE_DEN) < took_ns.saturating_mul(SHARE_NUM) {
        return None;
    }
    let most = Cause::ALL
        .into_iter()
        .max_by_key(|c| (by[*c as usize], std::cmp::Reverse(*c as usize)))?;
    Some(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn only(cause: Cause, ns: u64) -> [u64; 3] {
        let mut by = [0; 3];
        by[cause as usize] = ns;
        by
    }

    #[test]
    fn starvation_explains_a_latency_only_past_half_of_it_and_the_floor() {
        // A 0.1 ms target held 92 ms by sloburn's quota: sloburn's.
        assert_eq!(
            explains(only(Cause::Throttled, 92 * MS), 92 * MS + MS / 10),
            Some(Cause::Throttled)
        );
        // Exactly half is enough; a nanosecond less is the target's.
        assert_eq!(
            explains(only(Cause::RunQueue, 5 * MS), 10 * MS),
            Some(Cause::RunQueue)
        );
        assert_eq!(explains(only(Cause::RunQueue, 5 * MS - 1), 10 * MS), None);
        // A 1 s target stall during which sloburn waited 20 ms for a CPU: the target's.
        assert_eq!(explains(only(Cause::RunQueue, 20 * MS), 1000 * MS), None);
        // Under the floor never, however large the share.
        assert_eq!(explains(only(Cause::Timer, 2 * MS - 1), 2 * MS - 1), None);
        assert_eq!(
            explains(only(Cause::Timer, 2 * MS), 2 * MS),
            Some(Cause::Timer)
        );
        // Causes are judged each alone: two quarters are not a half.
        assert_eq!(explains([MS * 3, MS * 3, 0], 12 * MS), None);
        // Both past the rule: named by the most specific witness.
        assert_eq!(
            explains([6 * MS, 8 * MS, 9 * MS], 10 * MS),
            Some(Cause::Throttled)
        );
        // An episode longer than the request covers it once.
        assert_eq!(
            explains(only(Cause::Timer, 50 * MS), 3 * MS),
            Some(Cause::Timer)
        );
        assert_eq!(explains([0; 3], 0), None);
    }

    #[test]
    fn a_request_is_judged_on_the_episodes_its_window_overlaps() {
        let s = Starvation::new();
        // Sent from `began` for `acting`, answered `took` after `began`.
        let one = |acting: Duration| [(Duration::ZERO, acting), (acting, Duration::ZERO)];
        let judge =
            |at, acting: Duration, took| s.judge(at, (Duration::ZERO, acting), one(acting), took);
        let at = |ms: u64| s.base + Duration::from_millis(ms);
        let ms = Duration::from_millis;
        // As the sampler pushes them: each ends at the tick that saw it.
        s.starved(Cause::Timer, 100 * MS, 140 * MS);
        s.starved(Cause::Throttled, 110 * MS, 140 * MS);
        s.starved(Cause::RunQueue, 300 * MS, 304 * MS);
        // Before, after and beside the episodes: the target's.
        assert_eq!(judge(at(10), ms(50), ms(50)), None);
        assert_eq!(judge(at(160), ms(100), ms(100)), None);
        // Sent during the throttling and answered at once: sloburn's, named by the throttling.
        assert_eq!(judge(at(120), ms(20), ms(25)), Some(Cause::Throttled));
        // Sent before it, the answer awaited across it: the target's (the kernel stamped the
        // answer; sloburn's stall is not in it).
        assert_eq!(judge(at(105), Duration::from_micros(100), ms(40)), None);
        // 4 ms of run-queue delay before a 10 ms request was on the wire: sloburn's; 3 of 9:
        // the target's.
        assert_eq!(judge(at(298), ms(8), ms(8)), Some(Cause::RunQueue));
        assert_eq!(judge(at(301), ms(9), ms(9)), None);
        // A 20 ms connect the peer held, across run-queue delay: the target's; the same
        // connect across throttling: sloburn noticed it late, sloburn's.
        let split = [(ms(0), ms(1)), (ms(21), ms(1))];
        assert_eq!(s.judge(at(290), (ms(0), ms(22)), split, ms(22)), None);
        assert_eq!(
            s.judge(at(112), (ms(0), ms(22)), split, ms(22)),
            Some(Cause::Throttled)
        );
        // Its own connection's wait and its write: 10 of 20 ms of run-queue delay is enough;
        // 5 of 20 is not.
        let rq = Starvation::new();
        rq.starved(Cause::RunQueue, 0, 20 * MS);
        let split = [(ms(0), ms(5)), (ms(15), ms(5))];
        let took = ms(20);
        assert_eq!(
            rq.judge(rq.base, (ms(0), took), split, took),
            Some(Cause::RunQueue)
        );
        let split = [(ms(0), ms(5)), (ms(25), ms(5))];
        assert_eq!(rq.judge(rq.base, (ms(0), ms(30)), split, ms(30)), None);
        // On the wire within the floor: never read.
        assert_eq!(judge(at(120), Duration::from_micros(1900), ms(3)), None);
        // A 1 s stall of the target across all of it: the target's.
        assert_eq!(
            judge(at(0), Duration::from_secs(1), Duration::from_secs(1)),
            None
        );
        s.count(Cause::Throttled);
        s.count(Cause::RunQueue);
        let t = s.totals();
        assert_eq!(t.affected, [1, 1, 0]);
        assert_eq!(t.starved[Cause::Timer as usize], Duration::from_millis(40));
        assert_eq!(t.starved_most(), Duration::from_millis(40));
        assert_eq!(
            s.ring.overlap(0, u64::MAX)[Cause::Throttled as usize],
            30 * MS
        );
    }

    #[test]
    fn the_start_up_warning_names_the_limit_to_set() {
        let q = Quota {
            quota_us: 8_000,
            period_us: 100_000,
        };
        let w = quota_warning(Some(q), 2000.0, "profile `canary`").unwrap();
        assert!(w.contains("quota is 80m"), "{w}");
        assert!(w.contains("set `limits.cpu: 200m`"), "{w}");
        assert_eq!(quota_warning(Some(q), 500.0, "p"), None);
        assert_eq!(quota_warning(None, 1e6, "p"), None);
    }
}
