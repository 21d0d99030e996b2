//! Exemplars for the request-duration histogram (OpenMetrics only).
//!
//! One slot per bucket holds the latest sampled request that fell in it (latest, not a
//! reservoir: the freshest trace is the one an SRE wants behind a burning bucket). A slot is a
//! small seqlock of atomics: written only when a sampled request finishes (the runner calls
//! [`ProfileMetrics::exemplar`](super::ProfileMetrics::exemplar)), so a request that is not
//! sampled touches nothing here and nothing allocates on any request. A writer that finds the
//! slot being written by another skips (the other one is just as recent); a reader that sees a
//! write in progress leaves the bucket's exemplar out of that scrape.

use std::fmt::Write;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

#[derive(Debug, Default)]
pub(super) struct Slot {
    /// Even: stable; odd: being written. 0: never written.
    seq: AtomicU64,
    trace_hi: AtomicU64,
    trace_lo: AtomicU64,
    span: AtomicU64,
    value_nanos: AtomicU64,
    unix_millis: AtomicU64,
}

/// A copy of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Exemplar {
    pub trace_id: u128,
    pub span_id: u64,
    pub value_nanos: u64,
    pub unix_millis: u64,
}

impl Slot {
    pub fn write(&self, e: Exemplar) {
        let seq = self.seq.load(Relaxed);
        if seq % 2 == 1
            || self
                .seq
                .compare_exchange(seq, seq + 1, Acquire, Relaxed)
                .is_err()
        {
            return;
        }
        self.trace_hi.store((e.trace_id >> 64) as u64, Relaxed);
        self.trace_lo.store(e.trace_id as u64, Relaxed);
        self.span.store(e.span_id, Relaxed);
        self.value_nanos.store(e.value_nanos, Relaxed);
        self.unix_millis.store(e.unix_millis, Relaxed);
        self.seq.store(seq + 2, Release);
    }

    pub fn read(&self) -> Option<Exemplar> {
        let before = self.seq.load(Acquire);
        if before == 0 || before % 2 == 1 {
            return None;
        }
        let e = Exemplar {
            trace_id: (u128::from(self.trace_hi.load(Relaxed)) << 64)
                | u128::from(self.trace_lo.load(Relaxed)),
            span_id: self.span.load(Relaxed),
            value_nanos: self.value_nanos.load(Relaxed),
            unix_millis: self.unix_millis.load(Relaxed),
        };
        std::sync::atomic::fence(Acquire);
        (self.seq.load(Relaxed) == before).then_some(e)
    }
}

impl Exemplar {
    /// ` # {trace_id="…",span_id="…"} <value> <timestamp>`: what follows a bucket's count.
    pub fn write_suffix(&self, out: &mut String) {
        let _ = write!(
            out,
            " # {{trace_id=\"{:032x}\",span_id=\"{:016x}\"}} ",
            self.trace_id, self.span_id
        );
        super::text::write_f64(out, self.value_nanos as f64 / 1e9);
        let _ = write!(
            out,
            " {}.{:03}",
            self.unix_millis / 1000,
            self.unix_millis % 1000
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_round_trip_and_suffix() {
        let s = Slot::default();
        assert_eq!(s.read(), None);
        let e = Exemplar {
            trace_id: 0x4bf92f3577b34da6a3ce929d0e0e4736,
            span_id: 0x00f067aa0ba902b7,
            value_nanos: 67_000_000,
            unix_millis: 1_700_000_000_123,
        };
        s.write(e);
        assert_eq!(s.read(), Some(e));
        let mut out = String::new();
        e.write_suffix(&mut out);
        assert_eq!(
            out,
            " # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\",span_id=\"00f067aa0ba902b7\"} 0.067 1700000000.123"
        );
    }
}
