//! The one grammar for human units: durations (`300ms`, `2s`, `1m30s`, `30d`), rates (`50/s`,
//! `3000/m`) and sizes (`512`, `4KiB`, `1MiB`). The config, the `run` flags, threshold
//! expressions, `delayAbortEval` and the test target's flags and query all read durations here,
//! so a value written for one is understood by all. A leaf: it uses nothing from the crate.
//! Errors are short messages meant to follow a `file:line:col: path:` (or `--flag:`) prefix.

use std::time::Duration;

/// Each duration unit and its length in nanoseconds. Factors are derived from these integers
/// (`nanos / 1e9` for seconds, `nanos / 1e6` for milliseconds), which rounds to the same `f64`
/// as writing the decimal constant.
const DURATION_UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
    ("w", 7 * 86_400_000_000_000),
];

/// The length of one duration unit (`ms`, `s`, `d`, ...), or `None` for anything else.
pub fn duration_unit(unit: &str) -> Option<Duration> {
    DURATION_UNITS
        .iter()
        .find(|(u, _)| *u == unit)
        .map(|(_, nanos)| Duration::from_nanos(*nanos))
}

/// Parses `300ms`, `2s`, `1.5s`, `5m`, `1h30m`, `30d`. A bare `0` is accepted; any other bare
/// number is rejected because its unit would be a guess.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    let total = duration_secs(s)?;
    if total > 10.0 * 365.0 * 86400.0 {
        return Err(format!("`{s}` is too long (at most 10 years)"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// [`parse_duration`] with a smaller bound, named in the message (`over the limit of 1h`).
pub fn parse_duration_within(text: &str, max: Duration) -> Result<Duration, String> {
    let s = text.trim();
    let total = duration_secs(s)?;
    if total > max.as_secs_f64() {
        return Err(format!(
            "`{s}` is over the limit of {}",
            format_duration(max)
        ));
    }
    Ok(Duration::from_secs_f64(total))
}

/// The seconds a trimmed duration stands for: finite, not yet bounded.
fn duration_secs(s: &str) -> Result<f64, String> {
    if s.is_empty() {
        return Err("expected a duration like `300ms`, `2s` or `5m`, found an empty value".into());
    }
    if s == "0" {
        return Ok(0.0);
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return Err(format!(
                "`{s}` is not a duration: expected a number before `{rest}`"
            ));
        }
        let number: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("`{s}` is not a duration: bad number `{}`", &rest[..num_len]))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        if unit.is_empty() {
            return Err(format!(
                "`{s}` has no unit: write it as `{s}ms`, `{s}s` or `{s}m`"
            ));
        }
        let factor = duration_unit(unit)
            .map(|d| d.as_nanos() as f64 / 1e9)
            .ok_or_else(|| {
                format!("`{s}` has an unknown unit `{unit}` (use ns, us, ms, s, m, h, d or w)")
            })?;
        total += number * factor;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() {
        return Err(format!("`{s}` is too long (at most 10 years)"));
    }
    Ok(total)
}

/// Formats a duration the way it is written in configs (`300ms`, `2s`, `1h30m`).
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return if d.is_zero() {
            "0s".into()
        } else {
            format!("{}us", d.as_micros())
        };
    }
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let mut secs = d.as_secs();
    let mut out = String::new();
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// Parses a rate `N/s`, `N/m`, `N/h` or `N/5s` into iterations per second.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let s = text.trim();
    let Some((num, per)) = s.split_once('/') else {
        return Err(format!(
            "`{s}` is not a rate: write it as `50/s` or `3000/m`"
        ));
    };
    let count: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a rate: `{}` is not a number", num.trim()))?;
    if !count.is_finite() || count < 0.0 {
        return Err(format!("`{s}`: the rate must be zero or more"));
    }
    let per = per.trim();
    let unit = match per {
        "s" => Duration::from_secs(1),
        "m" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        other => parse_duration(other).map_err(|e| format!("`{s}`: {e}"))?,
    };
    if unit.is_zero() {
        return Err(format!("`{s}`: the time unit must be longer than zero"));
    }
    Ok(count / unit.as_secs_f64())
}

/// A byte count: `512`, `512B`, `1KB` (1000), `4KiB` (1024), `1MB`, `1MiB`, `1GB`, `1GiB`. Units
/// are case-insensitive and may follow a space; a fraction only where it comes out to whole
/// bytes (`1.5KiB` = 1536, never `1.5`). The one size grammar: the config's sizes and the
/// target's query (`body_size`, `bytes_per_sec`) both read it.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let s = text.trim();
    if let Ok(n) = s.parse::<u64>() {
        return Ok(n);
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size: write it as `512`, `4KiB` or `1MiB`"))?;
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "`{s}` has an unknown size unit `{}` (use B, KB, MB, GB, KiB, MiB or GiB)",
                unit.trim()
            ));
        }
    };
    let bytes = n * factor;
    // 2^53 keeps the f64 -> u64 conversion exact.
    if !bytes.is_finite() || bytes > 9_007_199_254_740_992.0 {
        return Err(format!("`{s}` is out of range"));
    }
    if bytes.fract() != 0.0 {
        return Err(format!("`{s}` is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = |s: &str| parse_duration(s).unwrap();
        assert_eq!(ok("300ms"), Duration::from_millis(300));
        assert_eq!(ok("2s"), Duration::from_secs(2));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("30d"), Duration::from_secs(30 * 86400));
        assert_eq!(ok("500us"), Duration::from_micros(500));
        assert_eq!(ok("0"), Duration::ZERO);
        assert!(parse_duration("10").unwrap_err().contains("no unit"));
        assert!(parse_duration("5 minutes").is_err());
        assert!(
            parse_duration("2x")
                .unwrap_err()
                .contains("unknown unit `x`")
        );
        assert!(parse_duration("").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn unit_factors_round_like_the_decimal_constants() {
        let secs = |u| duration_unit(u).unwrap().as_nanos() as f64 / 1e9;
        let millis = |u| duration_unit(u).unwrap().as_nanos() as f64 / 1e6;
        assert_eq!(secs("ns"), 1e-9);
        assert_eq!(secs("us"), 1e-6);
        assert_eq!(secs("ms"), 1e-3);
        assert_eq!(millis("ns"), 1e-6);
        assert_eq!(millis("µs"), 1e-3);
        assert_eq!(millis("h"), 3_600e3);
        assert_eq!(duration_unit("x"), None);
        assert_eq!(duration_unit(""), None);
    }

    #[test]
    fn days_weeks_and_the_ten_year_ceiling() {
        assert_eq!(parse_duration("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert_eq!(parse_duration("1d12h"), Ok(Duration::from_secs(36 * 3_600)));
        assert_eq!(
            parse_duration("3650d"),
            Ok(Duration::from_secs(3650 * 86_400))
        );
        assert!(
            parse_duration("3651d")
                .unwrap_err()
                .contains("at most 10 years")
        );
    }

    #[test]
    fn durations_round_trip_through_format() {
        for s in ["300ms", "2s", "5m", "1h30m", "30d", "0s", "1d2h3m4s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("50/s").unwrap(), 50.0);
        assert_eq!(parse_rate("3000/m").unwrap(), 50.0);
        assert_eq!(parse_rate("10/5s").unwrap(), 2.0);
        assert_eq!(parse_rate("3600/h").unwrap(), 1.0);
        assert!(parse_rate("50").unwrap_err().contains("50/s"));
        assert!(parse_rate("x/s").is_err());
        assert!(parse_rate("5/0s").is_err());
        assert!(parse_rate("-5/s").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4KiB").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1KB").unwrap(), 1000);
        assert!(parse_size("1 parsec").is_err());
        assert_eq!(parse_size("1kib").unwrap(), 1024);
        assert_eq!(parse_size("1 MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("1.5KiB").unwrap(), 1536);
        for bad in ["", "KiB", "-1", "1.5", "1XB", "1e30GiB", "1.1.1KB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
