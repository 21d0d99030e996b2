//! How the open model protects the target from the generator's own hiccups. Pure: no clock,
//! no I/O; the runner passes in how late an arrival is and the time since the run started.
//!
//! - An arrival the scheduler reaches more than [`Pacing::max_lateness`] after its intended
//!   start is dropped, not sent: after a CPU stall the generator would otherwise fire every
//!   missed arrival at once. The scheduler never waits for a VU, so this lateness is always
//!   the generator's own ([`DropReason::Late`], generator overload), whether or not a VU is
//!   free. With no VU free it is also the generator's when the runtime's lag (how long a VU
//!   task waits to be polled once spawned, smoothed by [`smooth_lag`]) passes the bound: the
//!   VUs are busy because sloburn is slow to read their responses. Otherwise an arrival that
//!   finds no VU free found every VU waiting on the target: the target's failure
//!   ([`DropReason::Saturated`]), a bad event for its SLOs and a failed request in
//!   `http_req_failed`.
//! - An arrival on schedule may open a new connection when no idle one is open: that is the
//!   plan (a slow target needs more connections), bounded by the arrival rate and `max_vus`.
//!   An arrival behind schedule (later than [`CATCH_UP`]) is catching up after a hiccup: it
//!   reuses an idle open connection, or opens one only with a token of a [`ConnectBucket`], and
//!   is otherwise dropped ([`DropReason::ConnectPaced`], the generator's overload). So a
//!   stall's backlog goes out over the connections already open, not over thousands of new
//!   ones. So does an arrival on schedule past the pool a healthy target needs
//!   ([`Connects::expected`]) while the runtime lags: its VU would wait on sloburn, not on the
//!   target.

use std::time::Duration;

/// Why an arrival-rate iteration was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Every VU was busy waiting on the target: the target's failure. A bad event for each
    /// SLO watching the run and a failed request in `http_req_failed`.
    Saturated,
    /// It would have started later than the lateness bound: the generator itself fell
    /// behind (the scheduler or the runtime), not the target.
    Late,
    /// It needed a new connection while the generator was behind (late, or its runtime
    /// lagging) and the connect budget was spent.
    ConnectPaced,
    /// The daemon-wide cap on requests in flight (`server.max_in_flight`) was full: a limit
    /// of sloburn's own configuration.
    InFlightCap,
}

impl DropReason {
    pub const ALL: [DropReason; 4] = [
        DropReason::Saturated,
        DropReason::Late,
        DropReason::ConnectPaced,
        DropReason::InFlightCap,
    ];

    /// The label value (`reason=".."`) and summary word.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::Saturated => "saturated",
            DropReason::Late => "late",
            DropReason::ConnectPaced => "connect_paced",
            DropReason::InFlightCap => "in_flight_cap",
        }
    }

    /// Whether the generator (sloburn, its host or its own limits), not the target, is the
    /// cause: never an SLO event; enough of them make the run inconclusive.
    pub fn is_generator(self) -> bool {
        !self.is_target()
    }

    /// Whether the target is the cause: every VU was waiting on it.
    pub fn is_target(self) -> bool {
        matches!(self, DropReason::Saturated)
    }
}

/// An arrival later than this is catching up: it opens a new connection only with a token.
/// Ten timer ticks: a healthy generator releases arrivals within one.
pub const CATCH_UP: Duration = Duration::from_millis(10);

/// New connections per second never go below this, whatever the rate.
pub const MIN_CONNECT_RATE: f64 = 200.0;

/// New connections that may open at once (the bucket's depth).
pub const CONNECT_BURST: u32 = 64;

/// The open model's protections, fixed for a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pacing {
    /// Arrivals later than this are dropped.
    pub max_lateness: Duration,
    /// Arrivals later than this need a connect token to open a connection.
    pub catch_up: Duration,
    /// New connections per second for arrivals behind schedule.
    pub connect_rate: f64,
    /// New connections that may open at once.
    pub connect_burst: u32,
    /// The VUs a healthy target keeps busy at the peak rate (`config::spec::expected_pool`):
    /// up to this many, an arrival on schedule opens a connection even while the runtime lags.
    pub expected_pool: u32,
}

impl Pacing {
    /// The defaults for a run that peaks at `peak_rate` iterations per second: arrivals behind
    /// schedule open connections at a tenth of the arrival rate (at least
    /// [`MIN_CONNECT_RATE`]/s) in bursts of [`CONNECT_BURST`]. A generator behind schedule is
    /// short of CPU; more connections cost it more CPU and make its own slowness look like the
    /// target's latency, so it should send over the connections it has.
    pub fn for_rate(peak_rate: f64, max_lateness: Option<Duration>) -> Pacing {
        let rate = if peak_rate.is_finite() {
            peak_rate
        } else {
            0.0
        };
        Pacing {
            max_lateness: max_lateness.unwrap_or(crate::config::spec::DEFAULT_MAX_LATENESS),
            catch_up: CATCH_UP,
            connect_rate: (rate / 10.0).max(MIN_CONNECT_RATE),
            connect_burst: CONNECT_BURST,
            expected_pool: crate::config::spec::expected_pool(rate),
        }
    }

    /// What to do with an arrival the scheduler reached `late` after its intended start, with
    /// the runtime lagging by `lag`, when `vu_free` says whether a VU (and global slot) is free
    /// for it. The lag alone never drops an arrival that has a VU: a lag measured before a
    /// stall would otherwise stop every dispatch, and with it every new measurement.
    pub fn admit(&self, late: Duration, lag: Duration, vu_free: bool) -> Result<(), DropReason> {
        if late > self.max_lateness || (!vu_free && late + lag > self.max_lateness) {
            Err(DropReason::Late)
        } else if vu_free {
            Ok(())
        } else {
            Err(DropReason::Saturated)
        }
    }

    /// Whether an arrival this late may open a new connection without a token.
    pub fn on_schedule(&self, lateness: Duration) -> bool {
        lateness <= self.catch_up
    }

    pub fn bucket(&self) -> ConnectBucket {
        ConnectBucket::new(self.connect_rate, self.connect_burst)
    }

    pub fn connects(&self) -> Connects {
        Connects {
            on_schedule: self.catch_up,
            bucket: self.bucket(),
            peak: 0,
            expected: self.expected_pool,
        }
    }
}

/// Whether an arrival that found no idle open connection may open one. On schedule with the
/// runtime keeping up: yes (the plan needs it: a stalled target holds more VUs), and the number
/// of VUs then busy is remembered. On schedule while the runtime lags, up to the pool a healthy
/// target needs (`expected`) too. Otherwise (behind schedule, or lagging past `expected`): only
/// while fewer than twice the most VUs ever busy on schedule (at least the burst) are busy,
/// and only with a token.
/// A generator short of CPU makes every request look slow and keeps its VUs busy itself;
/// growing the pool then would only feed the spiral (more connections, more CPU, slower still)
/// and flood the target.
#[derive(Debug, Clone, PartialEq)]
pub struct Connects {
    on_schedule: Duration,
    bucket: ConnectBucket,
    peak: u32,
    expected: u32,
}

impl Connects {
    /// `lateness`: how late the scheduler reached the arrival; `lag`: the runtime's lag
    /// ([`smooth_lag`]); `busy`: VUs busy now, this arrival's included; `now`: time since the
    /// start.
    pub fn may_open(
        &mut self,
        lateness: Duration,
        lag: Duration,
        busy: u32,
        now: Duration,
    ) -> bool {
        if lateness <= self.on_schedule {
            if lag <= self.on_schedule {
                self.peak = self.peak.max(busy);
                return true;
            }
            if busy <= self.expected {
                return true;
            }
        }
        let cap = self.peak.saturating_mul(2).max(CONNECT_BURST);
        busy <= cap && self.bucket.try_take(now)
    }

    /// The most VUs busy at once on schedule.
    pub fn peak(&self) -> u32 {
        self.peak
    }
}

/// The runtime's lag, smoothed: `old` moved an eighth of the way to a new `sample` (both in
/// nanoseconds), so one slow poll does not count as overload but a run of them does within a
/// few dozen arrivals.
pub fn smooth_lag(old: u64, sample: u64) -> u64 {
    old - old / 8 + sample / 8
}

/// A token bucket over new connections. Time is an offset from the run start, passed in.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnectBucket {
    per_ns: f64,
    burst: f64,
    tokens: f64,
    last: Duration,
}

impl ConnectBucket {
    /// Full at the start: `burst` connections may open at once, then `rate` per second.
    pub fn new(rate: f64, burst: u32) -> ConnectBucket {
        let rate = if rate.is_finite() { rate.max(0.0) } else { 0.0 };
        let burst = f64::from(burst.max(1));
        ConnectBucket {
            per_ns: rate / 1e9,
            burst,
            tokens: burst,
            last: Duration::ZERO,
        }
    }

    /// Takes one token at `now` if there is one. A `now` before the last one (never, from a
    /// monotonic clock) adds nothing.
    pub fn try_take(&mut self, now: Duration) -> bool {
        let elapsed = now.saturating_sub(self.last).as_nanos() as f64;
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.per_ns).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn late_arrivals_with_a_free_vu_are_the_generators_and_dropped() {
        let p = Pacing::for_rate(15_000.0, None);
        assert_eq!(p.max_lateness, crate::config::spec::DEFAULT_MAX_LATENESS);
        let z = Duration::ZERO;
        assert_eq!(p.admit(z, z, true), Ok(()));
        assert_eq!(p.admit(ms(500), z, true), Ok(()));
        assert_eq!(p.admit(ms(501), z, true), Err(DropReason::Late));
        // A lagging runtime alone does not drop an arrival that has a VU.
        assert_eq!(p.admit(z, ms(2_000), true), Ok(()));
        assert!(DropReason::Late.is_generator());
        // On time with no VU free: the target holds them all, the usual k6 drop. Too late with
        // none free: the lateness is still the generator's own (the scheduler never waits for
        // a VU), so it is its overload.
        assert_eq!(p.admit(z, z, false), Err(DropReason::Saturated));
        assert_eq!(p.admit(ms(500), z, false), Err(DropReason::Saturated));
        assert_eq!(p.admit(ms(2_000), z, false), Err(DropReason::Late));
        // No VU free while the runtime lags past the bound: the VUs wait on sloburn.
        assert_eq!(p.admit(ms(100), ms(450), false), Err(DropReason::Late));
        assert_eq!(p.admit(ms(10), ms(100), false), Err(DropReason::Saturated));
        // Every VU waiting on the target is the target's failure; every other reason is
        // sloburn's own.
        assert!(!DropReason::Saturated.is_generator() && DropReason::Saturated.is_target());
        // Threshold filters (`dropped_iterations{reason:…}`) know the same names.
        assert_eq!(
            DropReason::ALL.map(DropReason::as_str),
            crate::thresholds::DROP_REASONS
        );
        for r in [
            DropReason::Late,
            DropReason::ConnectPaced,
            DropReason::InFlightCap,
        ] {
            assert!(r.is_generator() && !r.is_target(), "{r:?}");
        }
        let strict = Pacing::for_rate(10.0, Some(ms(20)));
        assert_eq!(strict.admit(ms(21), z, true), Err(DropReason::Late));
    }

    #[test]
    fn only_arrivals_behind_schedule_are_paced() {
        let p = Pacing::for_rate(2_000.0, None);
        assert!(p.on_schedule(Duration::ZERO));
        assert!(p.on_schedule(CATCH_UP));
        assert!(!p.on_schedule(CATCH_UP + Duration::from_nanos(1)));
    }

    #[test]
    fn behind_schedule_connections_open_for_up_to_twice_the_vus_busy_on_schedule() {
        let p = Pacing::for_rate(15_000.0, None);
        let late = Duration::from_millis(300);
        // On schedule, 20 VUs were busy at most.
        let z = Duration::ZERO;
        let mut c = p.connects();
        for busy in 1..=20 {
            assert!(c.may_open(z, z, busy, z));
        }
        assert_eq!(c.peak(), 20);
        // Behind schedule: connections open while at most max(2 × 20, burst) = 64 VUs are
        // busy, however long it lasts.
        let mut busy = 20;
        for k in 0..10_000u64 {
            if c.may_open(late, z, busy + 1, Duration::from_millis(k)) {
                busy += 1;
            }
        }
        assert_eq!(busy, CONNECT_BURST);
        // A slow target kept 500 busy on schedule: behind it, up to 1,000.
        let mut c = p.connects();
        assert!(c.may_open(z, z, 500, z));
        let mut busy = 500;
        for k in 0..10_000u64 {
            if c.may_open(late, z, busy + 1, Duration::from_millis(k)) {
                busy += 1;
            }
        }
        assert_eq!(busy, 1_000);
        // Within the cap, the token bucket still sets the pace.
        let mut c = p.connects();
        let opened = (0..1_000).filter(|_| c.may_open(late, z, 1, z)).count();
        assert_eq!(opened, CONNECT_BURST as usize);
    }

    #[test]
    fn on_schedule_a_stalled_target_grows_the_pool_a_lagging_runtime_does_not() {
        let p = Pacing::for_rate(15_000.0, None);
        let (z, lag) = (Duration::ZERO, ms(50));
        // The runtime keeps up: every VU a stall holds gets its connection, however many.
        assert_eq!(p.expected_pool, 1_500);
        let mut c = p.connects();
        assert!((1..=20_000).all(|busy| c.may_open(z, z, busy, z)));
        // The runtime lags (the VUs wait on sloburn): free up to the pool a healthy target
        // needs, then twice the most busy while it kept up, with tokens.
        let mut c = p.connects();
        assert!(c.may_open(z, z, 40, z));
        assert!((41..=1_500).all(|busy| c.may_open(z, lag, busy, z)));
        let mut busy = 1_500;
        for k in 0..100_000u64 {
            if c.may_open(z, lag, busy + 1, Duration::from_millis(k)) {
                busy += 1;
            }
        }
        assert_eq!(busy, 1_500, "no more while lagging past the expected pool");
        // A lag no longer than the catch-up bound is no lag.
        assert!(c.may_open(z, CATCH_UP, 1_501, z));
    }

    #[test]
    fn the_lag_follows_a_run_of_slow_polls_not_one() {
        let ms_ns = 1_000_000u64;
        let once = smooth_lag(0, 800 * ms_ns);
        assert_eq!(once, 100 * ms_ns);
        let mut lag = 0;
        for _ in 0..40 {
            lag = smooth_lag(lag, 800 * ms_ns);
        }
        assert!(lag > 790 * ms_ns, "{lag}");
        for _ in 0..40 {
            lag = smooth_lag(lag, 0);
        }
        assert!(lag < 10 * ms_ns, "{lag}");
        assert_eq!(
            smooth_lag(u64::MAX, u64::MAX),
            u64::MAX - u64::MAX / 8 + u64::MAX / 8
        );
    }

    #[test]
    fn connect_rate_follows_the_arrival_rate_above_a_floor() {
        assert_eq!(Pacing::for_rate(15_000.0, None).connect_rate, 1_500.0);
        assert_eq!(Pacing::for_rate(10.0, None).connect_rate, MIN_CONNECT_RATE);
        assert_eq!(
            Pacing::for_rate(f64::NAN, None).connect_rate,
            MIN_CONNECT_RATE
        );
    }

    #[test]
    fn the_bucket_allows_its_burst_then_its_rate() {
        let mut b = ConnectBucket::new(1000.0, 64);
        let burst = (0..1000).filter(|_| b.try_take(Duration::ZERO)).count();
        assert_eq!(burst, 64);
        // 10 ms at 1000/s refills 10.
        let more = (0..100).filter(|_| b.try_take(ms(10))).count();
        assert_eq!(more, 10);
        // A long quiet spell refills only to the burst, never beyond.
        let after = (0..1000).filter(|_| b.try_take(ms(60_000))).count();
        assert_eq!(after, 64);
        // Time going backwards adds nothing.
        assert!(!b.try_take(ms(1)));
    }

    #[test]
    fn a_backlog_opens_at_most_the_burst_plus_the_connect_rate() {
        // A 2 s stall at 15,000/s leaves 30,000 arrivals due. Worked through in 20 ms, all
        // needing a connection, the bucket lets through the burst plus 20 ms of the connect
        // rate (94), not 30,000; spread over 2 s, the burst plus 2 s of it (3,064).
        let p = Pacing::for_rate(15_000.0, None);
        for (spread, secs) in [(667u64, 0.020), (66_667, 2.0)] {
            let mut b = p.bucket();
            let opened = (0..30_000u64)
                .filter(|k| b.try_take(Duration::from_secs(2) + Duration::from_nanos(k * spread)))
                .count() as f64;
            let bound = f64::from(p.connect_burst) + p.connect_rate * secs;
            assert!(opened <= bound + 1.0, "{opened} > {bound}");
            assert!(opened >= bound - 2.0, "{opened} < {bound}");
        }
    }

    #[test]
    fn a_zero_or_broken_rate_still_gives_the_burst() {
        let mut b = ConnectBucket::new(f64::INFINITY, 0);
        assert!(b.try_take(Duration::ZERO));
        assert!(!b.try_take(ms(1_000)));
    }
}
