//! What the scrape examples record: one plausible request outcome per number.

use sloburn::http::{ErrorClass, Outcome, Phases};
use std::time::Duration;

/// A plausible request `i`: mostly 200s, a few 503s and timeouts, latencies spread over buckets.
pub fn outcome(i: u64) -> Outcome {
    let (status, error) = match i % 50 {
        0 => (None, Some(ErrorClass::Timeout)),
        1 => (Some(503), None),
        _ => (Some(200), None),
    };
    Outcome {
        phases: Phases {
            dns: Duration::from_micros(200 + i % 300),
            connecting: Duration::from_micros(100 + i % 100),
            waiting: Duration::from_micros(1000 + (i * 7919) % 400_000),
            receiving: Duration::from_micros(50),
            ..Phases::default()
        },
        status,
        error,
        bytes_sent: 120,
        bytes_received: 900,
        ..Outcome::default()
    }
}
