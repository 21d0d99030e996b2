//! The imported config as YAML: one target (the request itself, or the first request's
//! origin under a journey), the steps with their named checks and captures, the profile.

use std::fmt::Write as _;

use super::state::{Step, TargetOpts};
use crate::config::quote;

/// What the YAML is made of.
pub(super) struct Parts<'s> {
    pub(super) file: &'s str,
    pub(super) name: &'s str,
    pub(super) steps: &'s [Step],
    /// Per step, its captures: (name, source fields).
    pub(super) captures: &'s [Vec<(String, String)>],
    pub(super) target: &'s TargetOpts,
    pub(super) executor: &'s [String],
    pub(super) thresholds: &'s [String],
}

pub(super) fn yaml(p: &Parts) -> Result<String, String> {
    let first: http::Uri = p.steps[0].url.parse().map_err(|e| {
        format!(
            "{}: the first request's URL `{}`: {e}",
            p.file, p.steps[0].url
        )
    })?;
    let origin = format!(
        "{}://{}/",
        first.scheme_str().unwrap_or("http"),
        first.authority().map(|a| a.as_str()).unwrap_or_default()
    );
    let mut out = format!(
        "# Imported by `sloburn import k6` from {}.\ntargets:\n  {}:\n",
        p.file,
        quote(p.name)
    );
    let s = &p.steps[0];
    let templated = |s: &Step| {
        s.url.contains("${")
            || s.body.as_deref().is_some_and(|b| b.contains("${"))
            || s.headers.iter().any(|(_, v)| v.contains("${"))
    };
    let single = p.steps.len() == 1 && s.think.is_none() && !templated(s);
    if single {
        let _ = writeln!(out, "    url: {}", quote(&s.url.replace("$${", "${")));
        let _ = writeln!(out, "    method: {}", s.method);
        write_target(&mut out, p.target);
        write_parts(&mut out, "    ", s, false);
        let _ = writeln!(
            out,
            "profiles:\n  {}:\n    target: {}",
            quote(p.name),
            quote(p.name)
        );
    } else {
        let _ = writeln!(out, "    url: {}", quote(&origin));
        write_target(&mut out, p.target);
        write_journey(&mut out, p);
    }
    for line in p.executor {
        let _ = writeln!(out, "    {line}");
    }
    if !p.thresholds.is_empty() {
        out.push_str("    thresholds:\n");
        for t in p.thresholds {
            let _ = writeln!(out, "      {t}");
        }
    }
    Ok(out)
}

fn write_target(out: &mut String, t: &TargetOpts) {
    if !t.insecure && t.tls_min.is_none() {
        return;
    }
    out.push_str("    tls:\n");
    if t.insecure {
        out.push_str("      insecure: true\n");
    }
    if let Some(v) = &t.tls_min {
        let _ = writeln!(out, "      min_version: {}", quote(v));
    }
}

/// Several requests: a journey holds the steps.
fn write_journey(out: &mut String, p: &Parts) {
    let _ = writeln!(
        out,
        "journeys:\n  {}:\n    target: {}\n    steps:",
        quote(p.name),
        quote(p.name)
    );
    let mut names = std::collections::HashSet::new();
    for (i, s) in p.steps.iter().enumerate() {
        let own = format!("{}-{}", s.method.to_ascii_lowercase(), i + 1);
        let name = match &s.name {
            Some(n) if names.insert(n.clone()) => n.clone(),
            _ => own,
        };
        let _ = writeln!(out, "      - name: {}", quote(&name));
        let _ = writeln!(out, "        method: {}", s.method);
        let _ = writeln!(out, "        url: {}", quote(&s.url));
        write_parts(out, "        ", s, true);
        let captures = p.captures.get(i).map(Vec::as_slice).unwrap_or_default();
        if !captures.is_empty() {
            let _ = writeln!(out, "        capture:");
            for (n, src) in captures {
                let _ = writeln!(out, "          {n}: {{ {src} }}");
            }
        }
        if let Some(t) = s.think {
            let _ = writeln!(out, "        think: {}ms", (t * 1000.0).round() as u64);
        }
    }
    let _ = writeln!(
        out,
        "profiles:\n  {}:\n    journey: {}",
        quote(p.name),
        quote(p.name)
    );
}

/// Headers, body and checks (each under its k6 name); a target's (not templated) values keep
/// `${` as it is.
fn write_parts(out: &mut String, pad: &str, s: &Step, templated: bool) {
    let t = |v: &str| {
        if templated {
            v.to_string()
        } else {
            v.replace("$${", "${")
        }
    };
    // One value a header (YAML keys are unique): the last written, as k6 sends it.
    let mut headers: Vec<&(String, String)> = Vec::new();
    for h in &s.headers {
        headers.retain(|(k, _)| !k.eq_ignore_ascii_case(&h.0));
        headers.push(h);
    }
    if !headers.is_empty() {
        let _ = writeln!(out, "{pad}headers:");
        for (k, v) in headers {
            let _ = writeln!(out, "{pad}  {}: {}", quote(k), quote(&t(v)));
        }
    }
    if let Some(b) = &s.body {
        let _ = writeln!(out, "{pad}body: {}", quote(&t(b)));
    }
    if !s.checks.is_empty() {
        let _ = writeln!(out, "{pad}checks:");
        for (name, c) in &s.checks {
            let _ = writeln!(out, "{pad}  - {{ name: {}, {c} }}", quote(name));
        }
    }
}
