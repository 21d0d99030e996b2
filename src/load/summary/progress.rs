//! The live progress line.

use super::*;
use crate::load::record::RunRecord;
use std::time::Duration;

/// The live progress line shown on a terminal, k6 style.
pub fn progress(s: &RunRecord, planned: Duration) -> String {
    format!(
        "running ({}/{}), {}/{} VUs, {} complete, {} dropped, {} errors, {:.0} req/s",
        fmt_duration(s.elapsed),
        fmt_duration(planned),
        s.vus,
        s.vus_max,
        s.iterations,
        s.dropped,
        s.errors_total(),
        s.per_second(s.requests)
    )
}
