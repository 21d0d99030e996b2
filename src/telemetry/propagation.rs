//! W3C Trace Context headers (<https://www.w3.org/TR/trace-context/>).
//!
//! Only sampled requests carry a `traceparent` (flags `01`). An unsampled request carries no
//! header at all, rather than a `00` (not sampled) one: sloburn decides at the root of the
//! trace, so there is no upstream decision to pass on; a `00` header would still make an
//! instrumented target start a trace context of its own for a request nobody will look at,
//! and it would add bytes and header formatting to the 99 % of requests that tracing should
//! not touch (the cost of `sample_ratio: 0.01` stays that of tracing off).

use std::fmt::Write;

use http::HeaderValue;
use opentelemetry::trace::{SpanId, TraceId};

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

/// `00-<trace id>-<span id>-01`: always 55 bytes.
pub fn traceparent(trace_id: TraceId, span_id: SpanId) -> HeaderValue {
    let mut s = String::with_capacity(55);
    let _ = write!(s, "00-{trace_id}-{span_id}-01");
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// A received `traceparent`: (trace id, parent span id, sampled). `None` when malformed.
pub fn parse_traceparent(value: &str) -> Option<(TraceId, SpanId, bool)> {
    let mut parts = value.trim().split('-');
    let version = parts.next()?;
    let trace = parts.next()?;
    let span = parts.next()?;
    let flags = parts.next()?;
    if version.len() != 2 || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    let flags = u8::from_str_radix(flags, 16).ok()?;
    Some((trace_id, span_id, flags & 1 == 1))
}

/// Whether `value` is a valid `tracestate` list (keys and values per the W3C grammar, at most
/// 32 members, 512 bytes): `Err` says what is wrong.
pub fn check_tracestate(value: &str) -> Result<(), String> {
    if value.len() > 512 {
        return Err("tracestate is longer than 512 bytes".into());
    }
    let members: Vec<&str> = value.split(',').map(str::trim).collect();
    if members.len() > 32 {
        return Err("tracestate has more than 32 members".into());
    }
    for m in members {
        let Some((key, val)) = m.split_once('=') else {
            return Err(format!("tracestate member `{m}` is not key=value"));
        };
        let key_ok = !key.is_empty()
            && key.len() <= 256
            && key
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-*/@".contains(&b))
            && key.as_bytes()[0].is_ascii_lowercase() | key.as_bytes()[0].is_ascii_digit();
        let val_ok = !val.is_empty()
            && val.len() <= 256
            && val
                .bytes()
                .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
            && !val.ends_with(' ');
        if !key_ok || !val_ok {
            return Err(format!(
                "tracestate member `{m}` breaks the W3C key=value grammar"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        let s = SpanId::from_hex("00f067aa0ba902b7").unwrap();
        let v = traceparent(t, s);
        assert_eq!(
            v.to_str().unwrap(),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(parse_traceparent(v.to_str().unwrap()), Some((t, s, true)));
        assert_eq!(parse_traceparent("00-0000-00f067aa0ba902b7-01"), None);
        assert!(check_tracestate("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7").is_ok());
        assert!(check_tracestate("Bad=1").is_err());
        assert!(check_tracestate("a").is_err());
    }
}
