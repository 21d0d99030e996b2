//! The statistics of a comparison, over histograms' buckets instead of raw samples. Pure: no
//! I/O, no clock, no randomness.
//!
//! - [`rank_test`]: Mann-Whitney U computed exactly from two histograms' bucket counts (the
//!   values of one bucket are ties), with the tie-corrected normal approximation for its
//!   p-value (statrs' normal).
//! - [`quantile_spread`]: the exact bootstrap distribution of a quantile: a resample's value at
//!   rank r falls at or below bucket k when at least r + 1 of its n draws do, a binomial tail
//!   (statrs' binomial); no resampling, so no seed and no Monte Carlo error.
//! - [`ratio_interval`]: the interval of `new / old − 1` from two such distributions, drawn
//!   independently (each side its own resample), over every pair of their points.
//! - [`proportions`] and [`rates`]: two error rates (Agresti-Caffo interval, pooled z test) and
//!   two throughputs (Poisson rate ratio on the log scale).

use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, Normal};

/// One histogram bucket: its key (the bucket's lowest nanosecond, the same bucket in both
/// histograms when they share the layout, as every sloburn histogram does), its value (the
/// midpoint) and its count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    pub key: u64,
    pub value: f64,
    pub count: u64,
}

/// Most pairs [`ratio_interval`] weighs: each side's points are merged into fewer, wider ones
/// past this, so the time and memory stay bounded whatever the spread.
const MAX_PAIRS: usize = 1_000_000;

/// Mann-Whitney's answer for `new` against `old`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankTest {
    /// Two-sided p-value.
    pub p: f64,
    /// P(a new value > an old one) + ½ P(tie): 0.5 when neither side is slower.
    pub slower_share: f64,
}

/// Mann-Whitney U of `new` against `old` (both ascending by key).
pub fn rank_test(old: &[Bucket], new: &[Bucket]) -> RankTest {
    let n1: f64 = old.iter().map(|b| b.count as f64).sum();
    let n2: f64 = new.iter().map(|b| b.count as f64).sum();
    let (mut i, mut j) = (0, 0);
    let (mut below_old, mut u, mut ties) = (0.0f64, 0.0f64, 0.0f64);
    while i < old.len() || j < new.len() {
        let key = match (old.get(i), new.get(j)) {
            (Some(a), Some(b)) => a.key.min(b.key),
            (Some(a), None) => a.key,
            (None, Some(b)) => b.key,
            (None, None) => break,
        };
        let take = |side: &[Bucket], at: &mut usize| match side.get(*at) {
            Some(b) if b.key == key => {
                *at += 1;
                b.count as f64
            }
            _ => 0.0,
        };
        let a = take(old, &mut i);
        let b = take(new, &mut j);
        u += b * (below_old + a / 2.0);
        let t = a + b;
        ties += t * t * t - t;
        below_old += a;
    }
    let (pairs, all) = (n1 * n2, n1 + n2);
    if pairs == 0.0 || all < 2.0 {
        return RankTest {
            p: 1.0,
            slower_share: 0.5,
        };
    }
    let variance = pairs / 12.0 * ((all + 1.0) - ties / (all * (all - 1.0)));
    let shift = u - pairs / 2.0;
    let p = if variance > 0.0 {
        // With the continuity correction.
        let z = (shift.abs() - 0.5).max(0.0) / variance.sqrt();
        (2.0 * Normal::standard().sf(z)).min(1.0)
    } else {
        1.0
    };
    RankTest {
        p,
        slower_share: u / pairs,
    }
}

/// The exact bootstrap distribution of the value at rank `floor(q·(n−1))` (k6's quantile
/// position): `(bucket value, probability)` for the buckets it may fall in (below 1e-12
/// left out).
pub fn quantile_spread(buckets: &[Bucket], q: f64) -> Vec<(f64, f64)> {
    let n: u64 = buckets.iter().map(|b| b.count).sum();
    if n == 0 {
        return Vec::new();
    }
    let rank = (q.clamp(0.0, 1.0) * (n - 1) as f64).floor() as u64;
    let mut out = Vec::new();
    let (mut seen, mut below) = (0u64, 0.0f64);
    for b in buckets {
        seen += b.count;
        let share = seen as f64 / n as f64;
        // P(at least rank + 1 of n draws fall at or below this bucket).
        let at_or_below = if seen >= n {
            1.0
        } else {
            Binomial::new(share, n).map_or(0.0, |d| d.sf(rank))
        };
        let mass = at_or_below - below;
        if mass > 1e-12 {
            out.push((b.value, mass));
        }
        below = at_or_below;
        if below >= 1.0 - 1e-12 {
            break;
        }
    }
    out
}

/// The central `confidence` interval of `new / old − 1`, each drawn from its spread
/// ([`quantile_spread`]); `None` when either is empty or every old value is zero.
pub fn ratio_interval(
    old: &[(f64, f64)],
    new: &[(f64, f64)],
    confidence: f64,
) -> Option<(f64, f64)> {
    let limit = (MAX_PAIRS as f64).sqrt() as usize;
    let (old, new) = (coarsen(old, limit), coarsen(new, limit));
    let mut pairs: Vec<(f64, f64)> = Vec::with_capacity(old.len() * new.len());
    for &(o, po) in old.iter().filter(|(o, _)| *o > 0.0) {
        for &(n, pn) in &new {
            pairs.push((n / o - 1.0, po * pn));
        }
    }
    if pairs.is_empty() {
        return None;
    }
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    let tail = (1.0 - confidence) / 2.0 * total;
    let at = |mass: f64| {
        let mut seen = 0.0;
        for &(v, w) in &pairs {
            seen += w;
            if seen >= mass {
                return v;
            }
        }
        pairs[pairs.len() - 1].0
    };
    Some((at(tail), at(total - tail)))
}

/// At most `limit` points: neighbours merged into one at their weighted mean value.
fn coarsen(points: &[(f64, f64)], limit: usize) -> Vec<(f64, f64)> {
    let per = points.len().div_ceil(limit.max(1)).max(1);
    points
        .chunks(per)
        .map(|c| {
            let w: f64 = c.iter().map(|p| p.1).sum();
            let v = if w > 0.0 {
                c.iter().map(|p| p.0 * p.1).sum::<f64>() / w
            } else {
                c[0].0
            };
            (v, w)
        })
        .collect()
}

/// A change with its interval and the test's two-sided p-value.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Difference {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub p: f64,
}

/// The normal quantile for a central `confidence` interval (2.576 at 0.99).
pub fn z_of(confidence: f64) -> f64 {
    Normal::standard().inverse_cdf(1.0 - (1.0 - confidence) / 2.0)
}

/// `new_hits/new_n − old_hits/old_n`: the Agresti-Caffo interval (one hit and one miss added
/// to each side, so it holds at zero hits too) and the pooled two-proportion z test.
pub fn proportions(old: (u64, u64), new: (u64, u64), confidence: f64) -> Difference {
    let rate = |(h, n): (u64, u64)| if n > 0 { h as f64 / n as f64 } else { 0.0 };
    let estimate = rate(new) - rate(old);
    let adjusted = |(h, n): (u64, u64)| {
        let p = (h as f64 + 1.0) / (n as f64 + 2.0);
        (p, p * (1.0 - p) / (n as f64 + 2.0))
    };
    let ((po, vo), (pn, vn)) = (adjusted(old), adjusted(new));
    let half = z_of(confidence) * (vo + vn).sqrt();
    let (n1, n2) = (old.1 as f64, new.1 as f64);
    let pooled = (old.0 + new.0) as f64 / (n1 + n2).max(1.0);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1.max(1.0) + 1.0 / n2.max(1.0))).sqrt();
    let p = if se > 0.0 && n1 > 0.0 && n2 > 0.0 {
        (2.0 * Normal::standard().sf(estimate.abs() / se)).min(1.0)
    } else {
        1.0
    };
    Difference {
        estimate,
        low: pn - po - half,
        high: pn - po + half,
        p,
    }
}

/// The relative change of a rate, `(new / new_secs) / (old / old_secs) − 1`, as Poisson
/// counts: the log ratio's interval and z test (`sqrt(1/a + 1/b)`).
pub fn rates(old: (u64, f64), new: (u64, f64), confidence: f64) -> Difference {
    let (a, b) = (old.0 as f64, new.0 as f64);
    if a == 0.0 || b == 0.0 || old.1 <= 0.0 || new.1 <= 0.0 {
        let estimate = if a == 0.0 && b == 0.0 { 0.0 } else { f64::NAN };
        return Difference {
            estimate,
            low: f64::NAN,
            high: f64::NAN,
            p: 1.0,
        };
    }
    let log_ratio = (b / new.1).ln() - (a / old.1).ln();
    let se = (1.0 / a + 1.0 / b).sqrt();
    let half = z_of(confidence) * se;
    Difference {
        estimate: log_ratio.exp() - 1.0,
        low: (log_ratio - half).exp() - 1.0,
        high: (log_ratio + half).exp() - 1.0,
        p: (2.0 * Normal::standard().sf(log_ratio.abs() / se)).min(1.0),
    }
}
