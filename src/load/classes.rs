//! `http_req_duration` per status class (`1xx` to `5xx`): the record's `classes`. Made at a
//! run's first answer, so a run that never gets one holds a pointer, not five histograms
//! (1,000 runs at once).

use super::record::{ClassRecord, RunRecord};
use crate::hist::Histogram;
use once_cell::race::OnceBox;
use std::time::Duration;

#[derive(Default)]
pub struct Classes(OnceBox<[Histogram; 5]>);

impl Classes {
    /// Records an answer's duration under its status's class (none outside 100 to 599).
    pub fn record(&self, status: usize, duration: Duration) {
        let all = self
            .0
            .get_or_init(|| Box::new(std::array::from_fn(|_| Histogram::new())));
        if let Some(class) = all.get((status / 100).wrapping_sub(1)) {
            class.record(duration);
        }
    }

    pub fn histograms(&self) -> impl Iterator<Item = &Histogram> {
        self.0.get().into_iter().flatten()
    }

    /// Bytes beyond the pointer: the five histograms once made (their tables are counted by
    /// each histogram).
    pub fn held_bytes(&self) -> usize {
        self.0.get().map_or(0, |_| size_of::<[Histogram; 5]>())
    }

    /// Each class seen, in class order.
    pub fn snapshot(&self) -> Vec<ClassRecord> {
        (1..=5u16)
            .zip(self.histograms())
            .filter(|(_, h)| h.count() > 0)
            .filter_map(|(c, h)| {
                Some(ClassRecord {
                    class: RunRecord::class_of(c * 100)?.to_string(),
                    duration: h.snapshot(),
                })
            })
            .collect()
    }
}
