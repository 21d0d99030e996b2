//! vegeta's report (requests, duration, latencies, bytes, success ratio, status codes) and its
//! error set.

use super::*;
use crate::load::record::RunRecord;
use std::fmt::Write;

/// vegeta's text report, which many users read first.
pub(super) fn vegeta(out: &mut String, s: &RunRecord) {
    let wait = s.duration.mean();
    let ok = s.requests - s.failed.min(s.requests);
    let _ = writeln!(
        out,
        "  Requests      [total, rate, throughput]         {}, {:.2}, {:.2}",
        s.requests,
        s.per_second(s.requests),
        s.per_second(ok)
    );
    let _ = writeln!(
        out,
        "  Duration      [total, attack, wait]             {}, {}, {}",
        fmt_duration(s.elapsed),
        fmt_duration(s.elapsed.saturating_sub(wait)),
        fmt_duration(wait)
    );
    let d = &s.duration;
    let _ = writeln!(
        out,
        "  Latencies     [min, mean, 50, 90, 95, 99, max]  {}, {}, {}, {}, {}, {}, {}",
        fmt_duration(d.min()),
        fmt_duration(d.mean()),
        fmt_duration(d.median()),
        fmt_duration(d.quantile(0.90)),
        fmt_duration(d.quantile(0.95)),
        fmt_duration(d.quantile(0.99)),
        fmt_duration(d.max())
    );
    let per = |n: u64| {
        if s.requests > 0 {
            n as f64 / s.requests as f64
        } else {
            0.0
        }
    };
    let _ = writeln!(
        out,
        "  Bytes In      [total, mean]                     {}, {:.2}",
        s.data_received,
        per(s.data_received)
    );
    let _ = writeln!(
        out,
        "  Bytes Out     [total, mean]                     {}, {:.2}",
        s.data_sent,
        per(s.data_sent)
    );
    let _ = writeln!(
        out,
        "  Success       [ratio]                           {:.2}%",
        100.0 * per(ok)
    );
    // Each request once: under its status, or under 0 when no head arrived. Counting every
    // error under 0 too showed `200:30  0:30` for 30 requests whose bodies broke.
    let codes: Vec<String> = s.statuses.iter().map(|(c, n)| format!("{c}:{n}")).collect();
    let _ = writeln!(
        out,
        "  Status Codes  [code:count]                      {}{}",
        codes.join("  "),
        if s.no_response > 0 {
            format!("  0:{}", s.no_response)
        } else {
            String::new()
        }
    );
    let _ = writeln!(out, "  Error Set:");
    for line in error_set(s) {
        let _ = writeln!(out, "  {line}");
    }
}

/// vegeta's error set: a status outside 200-399 is an error named by its status line
/// (`500 Internal Server Error`), as vegeta names it; transport errors by their class. Each with
/// its count. Status 0 is a probe's (and gRPC's) OK, never an error: a request with no answer
/// is counted under its transport class instead.
pub fn error_set(s: &RunRecord) -> Vec<String> {
    let mut lines: Vec<String> = s
        .statuses
        .iter()
        .filter(|(c, _)| *c != 0 && !(200..400).contains(c))
        .map(|(c, n)| {
            let reason = http::StatusCode::from_u16(*c)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("");
            format!("{}: {n}", format!("{c} {reason}").trim_end())
        })
        .collect();
    lines.extend(
        s.errors
            .iter()
            .map(|(class, n)| format!("{}: {n}", class.as_str())),
    );
    lines
}
