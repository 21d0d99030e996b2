//! Head sampling, decided once per iteration.
//!
//! The ratio becomes a threshold on a uniform `u64` (the same idea as the SDK's
//! `TraceIdRatioBased`, but decided before any id exists, so an unsampled iteration costs
//! one random number and a compare: no allocation, no span, no header).

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

    /// One decision with the thread's random generator.
    pub fn sample(&self) -> bool {
        if self.is_off() {
            return false;
        }
        self.always || self.decide(rand::random::<u64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges() {
        assert!(Sampler::new(1.0).decide(u64::MAX));
        assert!(!Sampler::new(0.0).decide(0));
        assert!(Sampler::new(0.0).is_off());
        assert!(Sampler::new(0.5).decide(u64::MAX / 2 - 1));
        assert!(!Sampler::new(0.5).decide(u64::MAX / 2 + 1));
    }
}
