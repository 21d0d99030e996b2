//! Parsers for the target's flag and query-string values: durations (the crate's one grammar,
//! from [`crate::units`], a leaf, so the test server still depends on nothing of the daemon's),
//! byte sizes, ratios and status codes. Every parser returns a message, never panics.
//!
//! Durations and sizes are bounded ([`MAX_DURATION`], [`MAX_SIZE`]) for flags and query
//! overrides alike: a request asking for `latency=99999999999h` or `body_size=1000GiB` gets a
//! 400 naming the limit instead of a task asleep for millennia or a terabyte of body.

use std::time::Duration;

/// The longest latency, jitter, stall period or stall length the target accepts.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// The largest body size and trickle rate (bytes per second) the target accepts: 1 GiB.
pub const MAX_SIZE: u64 = 1 << 30;

/// Parses a duration in the crate's one grammar ([`crate::units::parse_duration`]), at most
/// [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::units::parse_duration_within(s, MAX_DURATION)
}

/// Parses a byte count in the crate's one grammar ([`crate::units::parse_size`]), at most
/// [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let n = crate::units::parse_size(s)?;
    if n > MAX_SIZE {
        return Err(format!("`{}` is over the limit of 1GiB", s.trim()));
    }
    Ok(n)
}

/// Parses a probability in `[0, 1]`.
pub fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("ratio `{s}` is not a number"))?;
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("ratio `{s}` must be between 0 and 1"))
    }
}

/// Parses a final response status. 1xx is refused: it is not a final response and hyper would
/// not send it as one.
pub fn parse_status(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(v) if (200..=599).contains(&v) => Ok(v),
        _ => Err(format!("status `{s}` must be a number from 200 to 599")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn dur(s: &str) -> Duration {
        parse_duration(s).unwrap()
    }

    #[test]
    fn durations() {
        assert_eq!(dur("300ms"), Duration::from_millis(300));
        assert_eq!(dur("2s"), Duration::from_secs(2));
        assert_eq!(dur("5m"), Duration::from_secs(300));
        assert_eq!(dur("1h"), Duration::from_secs(3600));
        assert_eq!(dur("1.5s"), Duration::from_millis(1500));
        assert_eq!(dur("250us"), Duration::from_micros(250));
        assert_eq!(dur("0"), Duration::ZERO);
        assert_eq!(dur("0ms"), Duration::ZERO);
        assert_eq!(dur(" 20ms "), Duration::from_millis(20));
        // The shared grammar: compound durations, and days or weeks when they fit the limit.
        assert_eq!(dur("1m30s"), Duration::from_secs(90));
        assert_eq!(dur("0.01d"), Duration::from_secs(864));
        assert_eq!(
            parse_duration("1h1ns"),
            Err("`1h1ns` is over the limit of 1h".into())
        );
        for over in ["5d", "1h30m", "99999999999h", "2w"] {
            assert!(
                parse_duration(over).unwrap_err().contains("limit of 1h"),
                "{over}"
            );
        }
        for bad in [
            "", "20", "ms", "-5ms", "1.2.3s", "5x", "5 ms", "1e400h", "nan", "inf",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn sizes() {
        let cases = [
            ("512", 512),
            ("512B", 512),
            ("1KB", 1000),
            ("1kb", 1000),
            ("4KiB", 4096),
            ("1MiB", 1 << 20),
            ("1MB", 1_000_000),
            ("1GiB", 1 << 30),
            ("1.5KiB", 1536),
            ("0", 0),
        ];
        for (input, want) in cases {
            assert_eq!(parse_size(input), Ok(want), "{input}");
        }
        for bad in ["", "KiB", "-1", "1.5", "1XB", "1e30GiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be rejected");
        }
        for over in ["2GiB", "1073741825", "1000GiB", "1.1GB"] {
            assert!(
                parse_size(over).unwrap_err().contains("limit of 1GiB"),
                "{over}"
            );
        }
    }

    #[test]
    fn ratios_and_statuses() {
        assert_eq!(parse_ratio("0"), Ok(0.0));
        assert_eq!(parse_ratio("0.3"), Ok(0.3));
        assert_eq!(parse_ratio("1"), Ok(1.0));
        for bad in ["-0.1", "1.01", "x", "NaN", ""] {
            assert!(parse_ratio(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(parse_status("503"), Ok(503));
        for bad in ["100", "600", "abc", "-1", "99999"] {
            assert!(parse_status(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
