//! The fault model, as pure code: which faults a request gets (server defaults plus query-string
//! overrides), how a delay is drawn from a latency distribution, and when a periodic stall is on.
//! No I/O and no clock: callers pass the RNG and the time since server start.

use std::f64::consts::TAU;
use std::time::Duration;

use rand::{Rng, RngExt};

use super::parse::{parse_duration, parse_ratio, parse_size, parse_status};

/// Shape of the lognormal tail. σ = 1 puts p99 of the extra delay near 6× its mean, a
/// believable service tail.
const LOGNORMAL_SIGMA: f64 = 1.0;

/// How `--jitter` spreads each request's delay around `--latency`. The delay is never negative
/// (draws below zero are clamped to zero).
///
/// - `uniform`: latency ± jitter, uniformly. Mean = latency.
/// - `normal`: latency + N(0, jitter²); jitter is the standard deviation. Mean = latency.
/// - `exponential`: latency + Exp(mean = jitter). Latency is the floor; mean = latency + jitter.
/// - `lognormal`: latency + a lognormal draw with mean jitter and σ = 1 (heavy tail). Latency is
///   the floor; mean = latency + jitter.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Distribution {
    #[default]
    Uniform,
    Normal,
    Exponential,
    Lognormal,
}

impl Distribution {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Self::Uniform),
            "normal" => Ok(Self::Normal),
            "exponential" => Ok(Self::Exponential),
            "lognormal" => Ok(Self::Lognormal),
            _ => Err(format!(
                "distribution `{s}` must be uniform, normal, exponential or lognormal"
            )),
        }
    }
}

/// The faults applied to one request. `Copy`, so a per-request override costs no allocation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Faults {
    pub latency: Duration,
    pub jitter: Duration,
    pub distribution: Distribution,
    /// Probability of answering with `error_status` instead of the normal status.
    pub error_ratio: f64,
    pub error_status: u16,
    /// Forced status for every response (query `status=`); `None` means 200.
    pub status: Option<u16>,
    /// Probability of resetting the connection instead of answering.
    pub reset_ratio: f64,
    /// Exact body length; `None` means the short default JSON body.
    pub body_size: Option<u64>,
    /// Body trickle rate; `None` or `0` means as fast as the socket takes it.
    pub bytes_per_sec: Option<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            distribution: Distribution::Uniform,
            error_ratio: 0.0,
            error_status: 500,
            status: None,
            reset_ratio: 0.0,
            body_size: None,
            bytes_per_sec: None,
        }
    }
}

impl Faults {
    /// Applies query-string overrides (`latency=20ms&status=503&...`) on top of `self`.
    /// Unknown keys are refused so that a typo in a test fails loudly instead of being ignored.
    /// Values are taken verbatim (no percent-decoding); none of the accepted forms needs it.
    pub fn with_query(mut self, query: &str) -> Result<Self, String> {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("override `{pair}` needs a value (`{pair}=...`)"))?;
            match key {
                "latency" => self.latency = parse_duration(value)?,
                "jitter" => self.jitter = parse_duration(value)?,
                "distribution" => self.distribution = Distribution::parse(value)?,
                "status" => self.status = Some(parse_status(value)?),
                "error_ratio" => self.error_ratio = parse_ratio(value)?,
                "error_status" => self.error_status = parse_status(value)?,
                "reset" | "reset_ratio" => self.reset_ratio = parse_ratio(value)?,
                "body_size" => self.body_size = Some(parse_size(value)?),
                "bytes_per_sec" => self.bytes_per_sec = Some(parse_size(value)?),
                _ => {
                    return Err(format!(
                        "unknown override `{key}` (known: latency, jitter, distribution, status, \
                         error_ratio, error_status, reset, body_size, bytes_per_sec)"
                    ));
                }
            }
        }
        Ok(self)
    }

    /// Draws this request's delay (see [`Distribution`]). Never negative.
    pub fn sample_delay<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        if self.jitter.is_zero() {
            return self.latency;
        }
        let latency = self.latency.as_secs_f64();
        let jitter = self.jitter.as_secs_f64();
        let secs = match self.distribution {
            Distribution::Uniform => latency + jitter * (2.0 * rng.random::<f64>() - 1.0),
            Distribution::Normal => latency + jitter * standard_normal(rng),
            Distribution::Exponential => latency + jitter * -unit_open_low(rng).ln(),
            Distribution::Lognormal => {
                let mu = jitter.ln() - LOGNORMAL_SIGMA * LOGNORMAL_SIGMA / 2.0;
                latency + (mu + LOGNORMAL_SIGMA * standard_normal(rng)).exp()
            }
        };
        // NaN and overflow cannot come from finite inputs in practice; fall back to the fixed
        // latency rather than panic if they ever do.
        Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(self.latency)
    }

    /// Draws whether this request gets an injected fault of probability `ratio`.
    pub fn draw<R: Rng + ?Sized>(ratio: f64, rng: &mut R) -> bool {
        // Skipping the draw at 0 keeps the no-fault path free of RNG work.
        ratio > 0.0 && rng.random::<f64>() < ratio
    }
}

/// Uniform in (0, 1], so its logarithm is finite.
fn unit_open_low<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    1.0 - rng.random::<f64>()
}

/// Box–Muller; rand 0.10 ships no normal distribution without `rand_distr`.
fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    let r = (-2.0 * unit_open_low(rng).ln()).sqrt();
    r * (TAU * rng.random::<f64>()).cos()
}

/// A wall-clock periodic stall: the server is frozen during `[k*every, k*every + len)` since start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    every: Duration,
    len: Duration,
}

impl Stall {
    /// Both must be positive and `len < every`, otherwise the server would never answer.
    pub fn new(every: Duration, len: Duration) -> Result<Self, String> {
        if every.is_zero() || len.is_zero() {
            return Err("--stall-every and --stall-for must both be positive".into());
        }
        if len >= every {
            return Err(format!(
                "--stall-for ({len:?}) must be shorter than --stall-every ({every:?}), \
                 otherwise the server never answers"
            ));
        }
        Ok(Self { every, len })
    }

    /// How long until the current stall ends, or `None` when no stall is on at `since_start`.
    pub fn remaining(&self, since_start: Duration) -> Option<Duration> {
        let every = self.every.as_nanos();
        let offset = since_start.as_nanos() % every;
        let len = self.len.as_nanos();
        (offset < len).then(|| {
            // `len - offset` < `len`, which came from a Duration, so it fits in u64 nanos.
            Duration::from_nanos(u64::try_from(len - offset).unwrap_or(u64::MAX))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn faults(latency_ms: u64, jitter_ms: u64, distribution: Distribution) -> Faults {
        Faults {
            latency: Duration::from_millis(latency_ms),
            jitter: Duration::from_millis(jitter_ms),
            distribution,
            ..Faults::default()
        }
    }

    /// Mean (in ms) over 10k seeded draws; asserts every draw is non-negative.
    fn mean_ms(f: &Faults) -> f64 {
        let mut rng = SmallRng::seed_from_u64(7);
        let n = 10_000;
        let mut sum = 0.0;
        for _ in 0..n {
            let d = f.sample_delay(&mut rng);
            sum += d.as_secs_f64() * 1e3;
        }
        sum / n as f64
    }

    fn check_mean(f: Faults, want_ms: f64) {
        let got = mean_ms(&f);
        assert!(
            (got - want_ms).abs() <= want_ms * 0.05,
            "{:?}: mean {got:.2}ms, want ~{want_ms}ms",
            f.distribution
        );
    }

    #[test]
    fn distribution_means() {
        check_mean(faults(20, 5, Distribution::Uniform), 20.0);
        check_mean(faults(20, 5, Distribution::Normal), 20.0);
        check_mean(faults(20, 5, Distribution::Exponential), 25.0);
        check_mean(faults(20, 5, Distribution::Lognormal), 25.0);
        check_mean(faults(20, 0, Distribution::Lognormal), 20.0);
    }

    #[test]
    fn distributions_never_negative_and_respect_floor() {
        let mut rng = SmallRng::seed_from_u64(1);
        for dist in [
            Distribution::Uniform,
            Distribution::Normal,
            Distribution::Exponential,
            Distribution::Lognormal,
        ] {
            // Jitter far above latency: without clamping, uniform and normal would go negative.
            let f = faults(1, 50, dist);
            let mut zeros = 0;
            for _ in 0..10_000 {
                let d = f.sample_delay(&mut rng);
                if d.is_zero() {
                    zeros += 1;
                }
                if matches!(dist, Distribution::Exponential | Distribution::Lognormal) {
                    assert!(d >= f.latency, "{dist:?}: {d:?} below the latency floor");
                }
            }
            if matches!(dist, Distribution::Uniform | Distribution::Normal) {
                assert!(
                    zeros > 1000,
                    "{dist:?}: negative draws should clamp to zero"
                );
            }
        }
    }

    #[test]
    fn query_overrides() {
        let base = Faults::default();
        let f = base
            .with_query("latency=20ms&jitter=5ms&distribution=normal&status=503&error_ratio=0.5&error_status=502&reset=1&body_size=1KiB&bytes_per_sec=100")
            .unwrap();
        assert_eq!(f.latency, Duration::from_millis(20));
        assert_eq!(f.jitter, Duration::from_millis(5));
        assert_eq!(f.distribution, Distribution::Normal);
        assert_eq!(f.status, Some(503));
        assert_eq!(f.error_ratio, 0.5);
        assert_eq!(f.error_status, 502);
        assert_eq!(f.reset_ratio, 1.0);
        assert_eq!(f.body_size, Some(1024));
        assert_eq!(f.bytes_per_sec, Some(100));
        assert_eq!(base.with_query(""), Ok(base));
        assert_eq!(base.with_query("&&"), Ok(base));
        for bad in [
            "latency=fast",
            "status=99",
            "error_ratio=2",
            "reset",
            "bogus=1",
            "body_size=-1",
            "distribution=pareto",
        ] {
            assert!(base.with_query(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn draws_follow_the_ratio() {
        let mut rng = SmallRng::seed_from_u64(3);
        assert!(!(0..1000).any(|_| Faults::draw(0.0, &mut rng)));
        assert!((0..1000).all(|_| Faults::draw(1.0, &mut rng)));
        let hits = (0..10_000).filter(|_| Faults::draw(0.3, &mut rng)).count();
        assert!((2700..3300).contains(&hits), "{hits}");
    }

    #[test]
    fn stall_windows() {
        let ms = Duration::from_millis;
        let s = Stall::new(ms(1000), ms(500)).unwrap();
        assert_eq!(s.remaining(ms(0)), Some(ms(500)));
        assert_eq!(s.remaining(ms(200)), Some(ms(300)));
        assert_eq!(s.remaining(ms(500)), None);
        assert_eq!(s.remaining(ms(999)), None);
        assert_eq!(s.remaining(ms(3100)), Some(ms(400)));
        assert!(Stall::new(ms(500), ms(500)).is_err());
        assert!(Stall::new(ms(0), ms(0)).is_err());
        assert!(Stall::new(ms(1000), ms(0)).is_err());
    }
}
