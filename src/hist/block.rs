//! [`Block`]: 16 bucket counters of 32 bits, with 64-bit carries made only if one of them ever
//! passes 2^31. A block is 72 bytes where 16 `u64` counters were 128: a daemon's series are
//! cumulative and a spread one holds dozens of blocks per histogram.
//!
//! A counter's value is `carried + narrow`. When an add takes `narrow` to 2^31 (exactly one
//! add sees it, from `fetch_add`), that writer moves 2^31 into the counter's wide word: (B) the
//! wide word gains 2^31 and a pending flag, (C) `narrow` loses 2^31, (D) the flag is cleared.
//! A reader takes the wide word, `narrow`, then the wide word again; when both wide reads agree
//! it knows the state `narrow` was read in: pending with `narrow` at or past 2^31 is between B
//! and C (2^31 counted twice), anything else is exact. Counts only grow, so a scrape never sees
//! one go back. A second carry of one counter takes 2^31 more values, so two never overlap.

use std::sync::atomic::{
    AtomicU32, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};

use once_cell::race::OnceBox;

/// Counters per block.
pub(super) const BLOCK: usize = 16;
/// Where a narrow counter hands 2^31 to its wide word.
const CARRY: u32 = 1 << 31;
/// A wide word: carried count × 2, plus 1 while a carry is pending.
const PENDING: u64 = 1;

pub(super) struct Block {
    narrow: [AtomicU32; BLOCK],
    wide: OnceBox<[AtomicU64; BLOCK]>,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.read()).finish()
    }
}

impl Block {
    pub(super) fn new() -> Block {
        Block {
            narrow: std::array::from_fn(|_| AtomicU32::new(0)),
            wide: OnceBox::new(),
        }
    }

    /// One more in counter `i` (`i < BLOCK`).
    #[inline]
    pub(super) fn add(&self, i: usize) {
        if let Some(n) = self.narrow.get(i)
            && n.fetch_add(1, Relaxed) == CARRY - 1
        {
            self.carry(i);
        }
    }

    #[cold]
    fn carry(&self, i: usize) {
        let wide = self
            .wide
            .get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        let (Some(w), Some(n)) = (wide.get(i), self.narrow.get(i)) else {
            return;
        };
        w.fetch_add((u64::from(CARRY) << 1) | PENDING, Release);
        n.fetch_sub(CARRY, Release);
        w.fetch_sub(PENDING, Release);
    }

    /// Every counter's value.
    pub(super) fn read(&self) -> [u64; BLOCK] {
        let narrow: [u64; BLOCK] = std::array::from_fn(|i| u64::from(self.narrow[i].load(Acquire)));
        // A carry's wide words are made before its narrow counter loses 2^31: none made means
        // no narrow value read above had lost it.
        let Some(wide) = self.wide.get() else {
            return narrow;
        };
        std::array::from_fn(|i| {
            loop {
                let w = wide[i].load(Acquire);
                let n = u64::from(self.narrow[i].load(Acquire));
                if wide[i].load(Acquire) != w {
                    // A carry moved on while `n` was read: each does so twice, 2^31 values apart.
                    continue;
                }
                let twice = w & PENDING != 0 && n >= u64::from(CARRY);
                break (w >> 1) + n - if twice { u64::from(CARRY) } else { 0 };
            }
        })
    }

    /// Bytes this block holds: itself and its carries, if made.
    pub(super) fn bytes(&self) -> usize {
        size_of::<Block>() + self.wide.get().map_or(0, size_of_val)
    }

    /// Sets counter `i` to just below its carry (tests reach 2^31 without 2^31 adds).
    #[cfg(test)]
    pub(super) fn set_near_carry(&self, i: usize, below: u32) {
        self.narrow[i].store(CARRY - below, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_carry_past_32_bits_exactly() {
        let b = Block::new();
        b.add(3);
        assert!(b.wide.get().is_none());
        b.set_near_carry(5, 2);
        b.add(5);
        assert_eq!(b.read()[5], u64::from(CARRY) - 1);
        b.add(5);
        assert_eq!(b.read()[5], u64::from(CARRY));
        assert!(b.wide.get().is_some(), "the carry made the wide words");
        b.add(5);
        assert_eq!(b.read()[5], u64::from(CARRY) + 1);
        assert_eq!(b.read()[3], 1);
        // Three more carries, as if 2^33 values had come.
        let mut expected = u64::from(CARRY) + 1;
        for _ in 0..3 {
            let skipped = CARRY - 1 - b.narrow[5].load(Relaxed);
            b.narrow[5].store(CARRY - 1, Relaxed);
            b.add(5);
            expected += u64::from(skipped) + 1;
            assert_eq!(b.read()[5], expected);
        }
        assert_eq!(expected, 4 * u64::from(CARRY));
        assert_eq!(b.narrow[5].load(Relaxed), 0);
    }

    /// Mid-carry states read as the exact count: between B and C (pending, 2^31 in both
    /// words) and between C and D.
    #[test]
    fn a_read_during_a_carry_counts_it_once() {
        let b = Block::new();
        b.set_near_carry(0, 1);
        b.add(0);
        let wide = b
            .wide
            .get_or_init(|| Box::new(std::array::from_fn(|_| AtomicU64::new(0))));
        // The carry's writer stopped after B.
        b.narrow[0].store(CARRY, Relaxed);
        wide[0].store((u64::from(CARRY) << 1) | PENDING, Relaxed);
        assert_eq!(b.read()[0], u64::from(CARRY));
        // After C.
        b.narrow[0].store(0, Relaxed);
        assert_eq!(b.read()[0], u64::from(CARRY));
    }

    /// Many threads add across a carry: nothing lost, nothing counted twice, and a reader
    /// beside them never sees a count go back.
    #[test]
    fn concurrent_adds_across_a_carry_lose_nothing() {
        let b = Block::new();
        b.set_near_carry(7, 20_000);
        let base = u64::from(CARRY) - 20_000;
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        b.add(7);
                    }
                });
            }
            s.spawn(|| {
                let mut last = 0;
                for _ in 0..20_000 {
                    let now = b.read()[7];
                    assert!(now >= last, "{now} < {last}");
                    last = now;
                }
            });
        });
        assert_eq!(b.read()[7], base + 40_000);
    }
}
