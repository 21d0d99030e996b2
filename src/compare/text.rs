//! The comparison as a table: a block per row (a trend's quantiles one per line), the notes,
//! and the verdict line.

use super::Comparison;
use super::rows::{Figures, Row, Verdict, percent};
use std::fmt::Write;

pub(super) fn render(c: &Comparison, old: &str, new: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "comparing NEW {new} against OLD {old} ({}% confidence, --max-regression {})\n",
        c.confidence * 100.0,
        percent(c.max_regression).trim_start_matches('+'),
    );
    for r in &c.rows {
        block(&mut out, r);
    }
    for n in &c.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = match c.regressions() {
        Some(named) => writeln!(out, "regressed: {named}"),
        None => {
            let improved: Vec<String> = c
                .rows
                .iter()
                .filter(|r| r.verdict == Verdict::Improved)
                .map(|r| format!("{} ({})", r.name(), r.headline()))
                .collect();
            if improved.is_empty() {
                writeln!(out, "no regression")
            } else {
                writeln!(out, "no regression; improved: {}", improved.join(", "))
            }
        }
    };
    out.trim_end().to_string()
}

fn interval(low: f64, high: f64) -> String {
    if low.is_finite() && high.is_finite() {
        format!("[{}, {}]", percent(low), percent(high))
    } else {
        String::new()
    }
}

fn ms(seconds: f64) -> String {
    format!("{:.2}ms", seconds * 1000.0)
}

fn block(out: &mut String, r: &Row) {
    let verdict = format!("{:<9} p={:.2e}", r.verdict.as_str(), r.p);
    let _ = match &r.figures {
        Figures::Trend {
            quantiles,
            old_count,
            new_count,
            ..
        } => {
            let _ = writeln!(
                out,
                "{:<44} {verdict}\n  values {old_count} → {new_count}",
                r.name()
            );
            for q in quantiles {
                let _ = writeln!(
                    out,
                    "  p{:<3} {:>10} → {:<10} {:>7} {}",
                    (q.q * 100.0).round(),
                    ms(q.old),
                    ms(q.new),
                    percent(q.change),
                    interval(q.low, q.high)
                );
            }
            Ok(())
        }
        Figures::Rate { old, new, change } => {
            let share = |(h, n): (u64, u64)| {
                if n > 0 {
                    format!("{:.2}% ({h}/{n})", h as f64 * 100.0 / n as f64)
                } else {
                    "no requests".into()
                }
            };
            writeln!(
                out,
                "{:<44} {verdict}\n  {} → {}  {:+.2} points [{:+.2}, {:+.2}]",
                r.name(),
                share(*old),
                share(*new),
                change.estimate * 100.0,
                change.low * 100.0,
                change.high * 100.0
            )
        }
        Figures::Throughput { old, new, change } => writeln!(
            out,
            "{:<44} {verdict}\n  {old:.2}/s → {new:.2}/s  {} {}",
            r.name(),
            percent(change.estimate),
            interval(change.low, change.high)
        ),
    };
    if let Some(n) = &r.note {
        let _ = writeln!(out, "  ({n})");
    }
}
