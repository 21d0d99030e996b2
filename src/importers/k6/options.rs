//! k6's `options`: the executor (k6's defaults when none is set: 1 VU, 1 iteration), the
//! thresholds sloburn can evaluate, the TLS and redirect options; every other key listed with
//! its line.

use std::collections::BTreeMap;

use super::state::Walker;
use super::values::V;
use crate::config::quote;

/// `options` as evaluated, with the line of each key (`a`, `a.b`, `a.b.c`).
pub(super) struct Options {
    pub(super) v: V,
    pub(super) lines: BTreeMap<String, usize>,
}

impl Options {
    fn line(&self, key: &str) -> usize {
        self.lines.get(key).copied().unwrap_or(1)
    }
}

/// The profile's executor lines, and the function the scenario runs (`exec`).
pub(super) fn executor(
    w: &mut Walker,
    o: &Options,
) -> Result<(Vec<String>, Option<String>), String> {
    let top = &o.v;
    for (k, v) in entries(top) {
        match k.as_str() {
            "vus" | "duration" | "iterations" | "stages" | "scenarios" | "thresholds" => {}
            "insecureSkipTLSVerify" => w.target.insecure = *v == V::Bool(true),
            "tlsVersion" => tls_version(w, v, o.line(k)),
            "maxRedirects" if *v == V::Num(0.0) => {}
            "maxRedirects" => w.note(format!(
                "line {}: options.maxRedirects not converted: sloburn does not follow redirects \
                 (a 3xx is the response, as with `maxRedirects: 0`)",
                o.line(k)
            )),
            _ => w.note(format!(
                "line {}: options.{k} not converted: sloburn has no equivalent",
                o.line(k)
            )),
        }
    }
    let (src, prefix) = match top.get("scenarios") {
        Some(V::Obj(s)) if !s.is_empty() => {
            for (name, scenario) in &s[1..] {
                let exec = scenario.get("exec").and_then(V::text);
                if let Some(f) = exec.and_then(|e| w.functions.get(&e).copied()) {
                    w.miss_within(f.span, &format!("in scenario `{name}`, not converted"));
                }
                w.note(format!(
                    "line {}: options.scenarios.{name} not converted: only the first scenario \
                     ({}) is",
                    o.line(&format!("scenarios.{name}")),
                    s[0].0
                ));
            }
            (s[0].1.clone(), format!("scenarios.{}.", s[0].0))
        }
        _ => (derived(w, top, o), String::new()),
    };
    let executor = src
        .get("executor")
        .and_then(V::text)
        .unwrap_or_else(|| "per-vu-iterations".into());
    let unit = src
        .get("timeUnit")
        .and_then(duration)
        .unwrap_or_else(|| "1s".into());
    let fields = fields_of(&executor)?;
    let arrival = executor.ends_with("arrival-rate");
    let mut out = vec![format!("executor: {executor}")];
    let mut exec = None;
    for (k, v) in entries(&src) {
        let Some((_, ours)) = fields.iter().find(|(theirs, _)| theirs == k) else {
            match k.as_str() {
                "executor" | "timeUnit" => {}
                "exec" => exec = v.text(),
                _ => w.note(format!(
                    "line {}: options.{prefix}{k} not converted: sloburn's {executor} has no \
                     equivalent",
                    o.line(&format!("{prefix}{k}"))
                )),
            }
            continue;
        };
        let text = match (*ours, v) {
            ("stages", V::Arr(stages)) => {
                out.push("stages:".into());
                for s in stages {
                    let d = s
                        .get("duration")
                        .and_then(duration)
                        .ok_or("a stage without a duration")?;
                    let t = s
                        .get("target")
                        .and_then(V::text)
                        .ok_or("a stage without a target")?;
                    let t = if arrival { format!("{t}/{unit}") } else { t };
                    out.push(format!("  - {{ duration: {d}, target: {t} }}"));
                }
                continue;
            }
            ("duration" | "max_duration" | "graceful_ramp_down", v) => duration(v),
            ("rate" | "start_rate", v) => v.text().map(|n| format!("{n}/{unit}")),
            (_, V::Num(n)) => Some(super::values::num(*n)),
            _ => None,
        };
        match text {
            Some(t) => out.push(format!("{ours}: {t}")),
            None => w.note(format!(
                "line {}: options.{prefix}{k} not converted: not a value the importer reads",
                o.line(&format!("{prefix}{k}"))
            )),
        }
    }
    Ok((out, exec))
}

/// k6's fields of `executor` and sloburn's names for them.
fn fields_of(executor: &str) -> Result<&'static [(&'static str, &'static str)], String> {
    Ok(match executor {
        "constant-vus" => &[("vus", "vus"), ("duration", "duration")],
        "ramping-vus" => &[
            ("startVUs", "start_vus"),
            ("stages", "stages"),
            ("gracefulRampDown", "graceful_ramp_down"),
        ],
        "constant-arrival-rate" => &[
            ("rate", "rate"),
            ("duration", "duration"),
            ("preAllocatedVUs", "pre_allocated_vus"),
            ("maxVUs", "max_vus"),
        ],
        "ramping-arrival-rate" => &[
            ("startRate", "start_rate"),
            ("stages", "stages"),
            ("preAllocatedVUs", "pre_allocated_vus"),
            ("maxVUs", "max_vus"),
        ],
        "shared-iterations" | "per-vu-iterations" => &[
            ("vus", "vus"),
            ("iterations", "iterations"),
            ("maxDuration", "max_duration"),
        ],
        other => return Err(format!("the executor `{other}` has no sloburn equivalent")),
    })
}

/// k6's shortcuts (`iterations`, `duration`, `stages`) as the scenario k6 derives from them;
/// with none, k6 runs 1 iteration of 1 VU.
fn derived(w: &Walker, top: &V, o: &Options) -> V {
    let get = |k: &str| top.get(k).cloned();
    let vus = get("vus").unwrap_or(V::Num(1.0));
    let mut s = Vec::new();
    if let Some(it) = get("iterations") {
        s.push(("executor".into(), V::Str("shared-iterations".into())));
        s.push(("vus".into(), vus));
        s.push(("iterations".into(), it));
        if let Some(d) = get("duration") {
            s.push(("maxDuration".into(), d));
        }
    } else if let Some(d) = get("duration") {
        s.push(("executor".into(), V::Str("constant-vus".into())));
        s.push(("vus".into(), vus));
        s.push(("duration".into(), d));
    } else if let Some(st) = get("stages") {
        s.push(("executor".into(), V::Str("ramping-vus".into())));
        s.push(("startVUs".into(), vus));
        s.push(("stages".into(), st));
    } else {
        if top.get("vus").is_some() {
            w.note(format!(
                "line {}: options.vus alone: k6 ignores it without `duration`, `iterations` or \
                 `stages` and runs 1 iteration of 1 VU; so does the import",
                o.line("vus")
            ));
        }
        s.push(("executor".into(), V::Str("per-vu-iterations".into())));
        s.push(("vus".into(), V::Num(1.0)));
        s.push(("iterations".into(), V::Num(1.0)));
    }
    V::Obj(s)
}

/// `tlsVersion: 'tls1.2'` (exactly) or `{ min, max }`: sloburn has a minimum (1.2 or 1.3).
fn tls_version(w: &mut Walker, v: &V, line: usize) {
    let (min, max) = match v {
        V::Obj(_) => (
            v.get("min").and_then(V::text),
            v.get("max").and_then(V::text),
        ),
        v => (v.text(), v.text()),
    };
    match min.as_deref() {
        Some("tls1.2") => w.target.tls_min = Some("1.2".into()),
        Some("tls1.3") => w.target.tls_min = Some("1.3".into()),
        Some(other) => w.note(format!(
            "line {line}: options.tlsVersion min `{other}` not converted: sloburn speaks TLS \
             1.2 and 1.3"
        )),
        None => {}
    }
    if let Some(m) = max.filter(|m| m != "tls1.3") {
        w.note(format!(
            "line {line}: options.tlsVersion max `{m}` not converted: sloburn has a minimum \
             version only, and TLS 1.3 stays allowed"
        ));
    }
}

/// The thresholds sloburn evaluates, as YAML lines; custom metrics' and unknown ones listed.
pub(super) fn thresholds(w: &Walker, o: &Options) -> Vec<String> {
    let Some(V::Obj(ts)) = o.v.get("thresholds") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (metric, v) in ts {
        let line = o.line(&format!("thresholds.{metric}"));
        let base = metric.split('{').next().unwrap_or_default().trim();
        if let Some((_, kind)) = w.metrics.values().find(|(name, _)| name == base) {
            w.note(format!(
                "line {line}: threshold on `{metric}` not copied: `{base}` is a custom {kind}, \
                 which sloburn does not have"
            ));
            continue;
        }
        if let Err(e) = crate::thresholds::parse_metric(metric) {
            w.note(format!(
                "line {line}: threshold on `{metric}` not converted: {e}"
            ));
            continue;
        }
        let items = match v {
            V::Arr(items) => items.clone(),
            other => vec![other.clone()],
        };
        let mut list = Vec::new();
        for item in &items {
            let (expr, abort, delay) = match item {
                V::Obj(_) => (
                    item.get("threshold").and_then(V::text),
                    item.get("abortOnFail").cloned(),
                    item.get("delayAbortEval").and_then(V::text),
                ),
                other => (other.text(), None, None),
            };
            let Some(expr) = expr else { continue };
            if let Err(e) = crate::thresholds::parse(metric, &expr) {
                w.note(format!(
                    "line {line}: threshold `{metric}: {expr}` not converted: {e}"
                ));
                continue;
            }
            let abort = abort == Some(V::Bool(true));
            if !abort && delay.is_none() {
                list.push(quote(&expr));
                continue;
            }
            let mut s = format!("{{ threshold: {}", quote(&expr));
            if abort {
                s.push_str(", abort_on_fail: true");
            }
            if let Some(d) = delay {
                s.push_str(&format!(", delay_abort_eval: {}", quote(&d)));
            }
            list.push(format!("{s} }}"));
        }
        if !list.is_empty() {
            out.push(format!("{}: [{}]", quote(metric), list.join(", ")));
        }
    }
    out
}

fn entries(v: &V) -> &[(String, V)] {
    match v {
        V::Obj(m) => m,
        _ => &[],
    }
}

/// k6's duration: `'30s'` as it is, a number as milliseconds.
fn duration(v: &V) -> Option<String> {
    match v {
        V::Num(n) => Some(format!("{}ms", super::values::num(*n))),
        V::Str(s) => Some(s.clone()),
        _ => None,
    }
}
