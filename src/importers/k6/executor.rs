//! k6's `options` (`vus`/`duration`, `stages`, `scenarios`) as a sloburn executor.

use super::*;

/// The profile's executor lines from k6's `options`.
pub(super) fn executor(opts: &V, notes: &mut Vec<String>) -> Result<Vec<String>, String> {
    let dur = |v: &V| {
        v.text().map(|t| {
            if t.chars().all(|c| c.is_ascii_digit() || c == '.') {
                format!("{t}ms")
            } else {
                t
            }
        })
    };
    let int = |v: Option<&V>| {
        v.and_then(|v| match v {
            V::Num(n) => Some(*n as u64),
            _ => None,
        })
    };
    let mut out = Vec::new();
    let scenario = match opts.get("scenarios") {
        Some(V::Obj(s)) if !s.is_empty() => {
            if s.len() > 1 {
                notes.push(format!(
                    "options.scenarios: only the first ({}) is converted; {} more left out",
                    s[0].0,
                    s.len() - 1
                ));
            }
            Some(s[0].1.clone())
        }
        _ => None,
    };
    let src = scenario.as_ref().unwrap_or(opts);
    let executor = src.get("executor").and_then(V::text).unwrap_or_else(|| {
        if src.get("stages").is_some() {
            "ramping-vus".into()
        } else if src.get("iterations").is_some() {
            "shared-iterations".into()
        } else {
            "constant-vus".into()
        }
    });
    let unit = src
        .get("timeUnit")
        .and_then(&dur)
        .unwrap_or_else(|| "1s".into());
    let rate = |v: &V| v.text().map(|n| format!("{n}/{unit}"));
    out.push(format!("executor: {executor}"));
    let arrival = executor.ends_with("arrival-rate");
    for (k6, ours) in [
        ("vus", "vus"),
        ("startVUs", "start_vus"),
        ("iterations", "iterations"),
        ("preAllocatedVUs", "pre_allocated_vus"),
        ("maxVUs", "max_vus"),
    ] {
        if let Some(n) = int(src.get(k6)) {
            out.push(format!("{ours}: {n}"));
        }
    }
    for (k6, ours) in [
        ("duration", "duration"),
        ("maxDuration", "max_duration"),
        ("gracefulRampDown", "graceful_ramp_down"),
    ] {
        if let Some(d) = src.get(k6).and_then(&dur) {
            out.push(format!("{ours}: {d}"));
        }
    }
    if let Some(r) = src.get("rate").and_then(rate) {
        out.push(format!("rate: {r}"));
    }
    if let Some(r) = src.get("startRate").and_then(rate) {
        out.push(format!("start_rate: {r}"));
    }
    if let Some(V::Arr(stages)) = src.get("stages") {
        out.push("stages:".into());
        for s in stages {
            let d = s
                .get("duration")
                .and_then(&dur)
                .ok_or("a stage without a duration")?;
            let t = s.get("target").ok_or("a stage without a target")?;
            let t = if arrival { rate(t) } else { t.text() }.ok_or("a stage's target")?;
            out.push(format!("  - {{ duration: {d}, target: {t} }}"));
        }
    }
    Ok(out)
}
