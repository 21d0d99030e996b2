//! A weighted mix of journeys. Iteration `k` takes the journey under the point `frac(k·φ)` of
//! the cumulative weights: a low-discrepancy (Weyl) sequence, so any stretch of iterations
//! lands within a fraction of a percent of the weights, with no lock and no shared state
//! beyond the iteration number.

#[derive(Debug, Clone)]
pub struct Mix {
    /// Cumulative weights, ascending; the last is the total.
    cumulative: Vec<u64>,
}

/// 2^64 / φ, the golden-ratio step of the Weyl sequence.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

impl Mix {
    /// `weights` in journey order; all must be positive.
    pub fn new(weights: &[u32]) -> Mix {
        let mut total = 0u64;
        let cumulative = weights
            .iter()
            .map(|w| {
                total += u64::from((*w).max(1));
                total
            })
            .collect();
        Mix { cumulative }
    }

    pub fn len(&self) -> usize {
        self.cumulative.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cumulative.is_empty()
    }

    /// The journey iteration `k` walks.
    pub fn pick(&self, k: u64) -> usize {
        let total = self.cumulative.last().copied().unwrap_or(1);
        if self.cumulative.len() <= 1 {
            return 0;
        }
        let point = k.wrapping_mul(GOLDEN);
        // Scale the 64-bit fraction to [0, total).
        let x = ((u128::from(point) * u128::from(total)) >> 64) as u64;
        self.cumulative.partition_point(|&c| c <= x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_stretch_follows_the_weights() {
        let mix = Mix::new(&[70, 30]);
        for start in [0u64, 17, 1_000_003] {
            let mut counts = [0u32; 2];
            for k in start..start + 2000 {
                counts[mix.pick(k)] += 1;
            }
            assert!((counts[0] as i64 - 1400).abs() <= 10, "{counts:?}");
        }
        let three = Mix::new(&[1, 1, 2]);
        let mut counts = [0u32; 3];
        for k in 0..4000 {
            counts[three.pick(k)] += 1;
        }
        assert!(
            counts
                .iter()
                .zip([1000, 1000, 2000])
                .all(|(c, e)| (*c as i64 - e).abs() <= 10)
        );
        assert_eq!(Mix::new(&[5]).pick(123), 0);
    }
}
