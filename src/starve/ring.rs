//! The timeline of sloburn's starvation: a bounded ring of `[start, end]` episodes (nanoseconds
//! on the watch's own base), each with its [`Cause`]. One writer (the sampler) and any number of
//! readers (every finished request), atomics only: a reader never waits and never allocates.
//!
//! Episodes are pushed in time order and never overlap one of the same cause (each covers a part
//! of the time since the sampler's previous tick), so a cause's overlap with a window is the sum
//! of its episodes' overlaps. Only the newest episode is ever changed (stretched when the next
//! one of its cause continues it) and the sampler ends each at the tick that saw it, so the ends
//! are in push order and a reader walking back from
//! the newest stops at the first episode that ended before its window began.

use super::Cause;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Acquire, Ordering::Release};

/// Episodes kept: the newest [`CAPACITY`]; older ones are forgotten (64 KiB, fixed). At one
/// episode per 5 ms tick that is 20 s of uninterrupted starvation; episodes that continue each
/// other are one entry, so in practice far longer.
pub const CAPACITY: usize = 4096;

struct Slot {
    start: AtomicU64,
    end: AtomicU64,
    cause: AtomicU8,
}

pub(super) struct Ring {
    slots: Box<[Slot]>,
    /// Episodes pushed so far; the newest is at `(head - 1) % CAPACITY`.
    head: AtomicU64,
}

impl Ring {
    pub(super) fn new() -> Ring {
        Ring {
            slots: (0..CAPACITY)
                .map(|_| Slot {
                    start: AtomicU64::new(0),
                    end: AtomicU64::new(0),
                    cause: AtomicU8::new(0),
                })
                .collect(),
            head: AtomicU64::new(0),
        }
    }

    fn slot(&self, i: u64) -> &Slot {
        &self.slots[(i % CAPACITY as u64) as usize]
    }

    /// Adds the episode `[start, end]` of `cause` (the sampler only). An episode of the same
    /// cause as the newest that begins within `join` of its end stretches it instead.
    pub(super) fn push(&self, cause: Cause, start: u64, end: u64, join: u64) {
        if end <= start {
            return;
        }
        let head = self.head.load(Acquire);
        if head > 0 {
            let last = self.slot(head - 1);
            if last.cause.load(Acquire) == cause as u8
                && start <= last.end.load(Acquire).saturating_add(join)
            {
                last.end.fetch_max(end, Release);
                return;
            }
        }
        let s = self.slot(head);
        s.start.store(start, Release);
        s.end.store(end, Release);
        s.cause.store(cause as u8, Release);
        self.head.store(head + 1, Release);
    }

    /// How much of `[from, to]` each cause's episodes cover, by `Cause as usize`.
    #[cfg(test)]
    pub(super) fn overlap(&self, from: u64, to: u64) -> [u64; Cause::ALL.len()] {
        let mut by = [0u64; Cause::ALL.len()];
        let head = self.head.load(Acquire);
        // One short of the capacity: the slot the writer fills next is never read.
        let oldest = head.saturating_sub(CAPACITY as u64 - 1);
        for i in (oldest..head).rev() {
            let s = self.slot(i);
            let end = s.end.load(Acquire);
            if end < from {
                break;
            }
            let start = s.start.load(Acquire);
            let (a, b) = (start.max(from), end.min(to));
            if b > a
                && let Some(c) = by.get_mut(s.cause.load(Acquire) as usize)
            {
                *c += b - a;
            }
        }
        by
    }

    /// The episodes that overlap `[from, to]`, clipped to it, as `(start, end, cause)`, into
    /// `out` (the newest first).
    pub(super) fn clipped(&self, from: u64, to: u64, out: &mut Vec<(u64, u64, u8)>) {
        let head = self.head.load(Acquire);
        let oldest = head.saturating_sub(CAPACITY as u64 - 1);
        for i in (oldest..head).rev() {
            let s = self.slot(i);
            let end = s.end.load(Acquire);
            if end < from {
                break;
            }
            let (a, b) = (s.start.load(Acquire).max(from), end.min(to));
            if b > a {
                out.push((a, b, s.cause.load(Acquire)));
            }
        }
    }

    /// When the newest episode ended (0 with none).
    pub(super) fn last_end(&self) -> u64 {
        match self.head.load(Acquire) {
            0 => 0,
            h => self.slot(h - 1).end.load(Acquire),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_sum_per_cause_and_continued_episodes_join() {
        let r = Ring::new();
        r.push(Cause::Throttled, 100, 200, 10);
        r.push(Cause::Throttled, 205, 300, 10);
        r.push(Cause::RunQueue, 250, 260, 10);
        r.push(Cause::Throttled, 400, 500, 10);
        assert_eq!(
            r.head.load(Acquire),
            3,
            "the second throttle continued the first"
        );
        let o = r.overlap(150, 450);
        assert_eq!(o[Cause::Throttled as usize], (300 - 150) + (450 - 400));
        assert_eq!(o[Cause::RunQueue as usize], 10);
        assert_eq!(o[Cause::Timer as usize], 0);
        assert_eq!(r.overlap(501, 900), [0; 3]);
        assert_eq!(r.last_end(), 500);
    }

    #[test]
    fn a_full_ring_forgets_the_oldest_and_never_reads_a_slot_being_written() {
        let r = Ring::new();
        for i in 0..(CAPACITY as u64 * 2) {
            r.push(Cause::Timer, i * 100, i * 100 + 10, 0);
        }
        let all = r.overlap(0, u64::MAX);
        assert_eq!(all[Cause::Timer as usize], (CAPACITY as u64 - 1) * 10);
    }
}
