//! Head sampling, decided once per iteration.
//!
//! The ratio becomes a threshold on a uniform `u64` (the same idea as the SDK's
//! `TraceIdRatioBased`, but decided before any id exists, so an unsampled iteration costs
//! one random number and a compare: no allocation, no span, no header).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;

/// The sampling decision for a `sample_ratio`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sampler {
    /// Sampled when the draw is below it; `u64::MAX` with `always`.
    threshold: u64,
    always: bool,
}

impl Sampler {
    /// `ratio` is clamped to 0..=1 (config has already rejected anything else).
    pub fn new(ratio: f64) -> Sampler {
        let ratio = if ratio.is_nan() {
            0.0
        } else {
            ratio.clamp(0.0, 1.0)
        };
        Sampler {
            threshold: (ratio * u64::MAX as f64) as u64,
            always: ratio >= 1.0,
        }
    }

    /// Pure: whether a draw from a uniform `u64` is sampled.
    pub fn decide(&self, draw: u64) -> bool {
        self.always || draw < self.threshold
    }

    /// Never samples: every decision is one compare.
    pub fn is_off(&self) -> bool {
        !self.always && self.threshold == 0
    }

    /// One decision with the thread's draw generator.
    pub fn sample(&self) -> bool {
        if self.is_off() {
            return false;
        }
        self.always || self.decide(draw())
    }
}

thread_local! {
    /// A small fast generator per thread, seeded once from the thread's CSPRNG: a sampling
    /// decision needs a uniform draw, not an unpredictable one, and every iteration of a traced
    /// run makes one (ChaCha12's draw cost about five times as much). The SDK's own ids come
    /// from the same kind of generator.
    static DRAWS: RefCell<SmallRng> = RefCell::new(SmallRng::from_rng(&mut rand::rng()));
}

/// One uniform `u64` from this thread's draw generator.
fn draw() -> u64 {
    DRAWS.with(|g| g.borrow_mut().next_u64())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's draws decide about the configured share: 100,000 decisions at 0.01 land
    /// within five standard deviations of 1,000 (about 31 each).
    #[test]
    fn draws_sample_the_configured_share() {
        let s = Sampler::new(0.01);
        let n = (0..100_000).filter(|_| s.sample()).count();
        assert!((845..=1155).contains(&n), "{n} of 100,000 sampled at 0.01");
        let half = Sampler::new(0.5);
        let n = (0..100_000).filter(|_| half.sample()).count();
        assert!(
            (49_200..=50_800).contains(&n),
            "{n} of 100,000 sampled at 0.5"
        );
        assert!((0..1000).all(|_| Sampler::new(1.0).sample()));
        assert!((0..1000).all(|_| !Sampler::new(0.0).sample()));
    }

    #[test]
    fn edges() {
        assert!(Sampler::new(1.0).decide(u64::MAX));
        assert!(!Sampler::new(0.0).decide(0));
        assert!(Sampler::new(0.0).is_off());
        assert!(Sampler::new(0.5).decide(u64::MAX / 2 - 1));
        assert!(!Sampler::new(0.5).decide(u64::MAX / 2 + 1));
    }
}
