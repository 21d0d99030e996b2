//! The live progress line.

use super::*;
use crate::load::record::RunRecord;
use std::time::Duration;

/// The live progress line shown on a terminal, k6 style. `failed` counts what k6 counts in
/// `http_req_failed` (a response with an unexpected status as well as a transport error), so a
/// target answering 503 to everything never reads as `0 failed`.
pub fn progress(s: &RunRecord, planned: Duration) -> String {
    format!(
        "running ({}/{}), {}/{} VUs, {} complete, {} dropped, {} failed, {:.0} req/s",
        fmt_duration(s.elapsed),
        fmt_duration(planned),
        s.vus,
        s.vus_max,
        s.iterations,
        s.dropped,
        s.failed,
        s.per_second(s.requests)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_responses_count_as_k6_counts_them() {
        // Every response a 503: no transport error, yet every request failed.
        let mut s = crate::load::stats::RunStats::new(&[]).snapshot(Duration::from_secs(2));
        s.requests = 40;
        s.failed = 40;
        s.statuses = vec![(503, 40)];
        let line = progress(&s, Duration::from_secs(10));
        assert!(line.contains("40 failed"), "{line}");
        s.failed = 0;
        assert!(progress(&s, Duration::from_secs(10)).contains(" 0 failed"));
    }
}
