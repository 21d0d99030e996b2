//! The YAML written: URL encoding, checks, headers, a profile per operation or one journey.

use crate::config::quote;
use std::fmt::Write as _;

use super::*;

/// [`encode`], for other importers.
pub(crate) fn encode_component(s: &str) -> String {
    encode(s)
}

/// Percent-encodes what may not stand in a URL path or query value as it is, and `$` so no
/// value reads as a `${…}` template.
pub(super) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b',' | b':' | b'@')
        {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A `${` in a written value would be a template: write it as `$${` (the literal dollar).
pub(super) fn literal(s: &str) -> String {
    s.replace("${", "$${")
}

pub(super) fn write_checks(out: &mut String, pad: &str, statuses: &[u16]) {
    if statuses.is_empty() {
        return;
    }
    let list: Vec<String> = statuses.iter().map(u16::to_string).collect();
    let _ = writeln!(out, "{pad}checks:\n{pad}  - status: [{}]", list.join(", "));
}

/// `templated`: the values are journey templates, where `${` must be written `$${`. The
/// security scheme's `${env:NAME}` references are written as they are.
pub(super) fn write_headers(out: &mut String, pad: &str, op: &Op, templated: bool) {
    let auth = op.auth.iter().filter_map(|p| match p {
        Place::Header(k, v) => Some((k.clone(), v.clone())),
        Place::Query(..) => None,
    });
    let given = op.headers.iter().map(|(k, v)| {
        let v = if templated { literal(v) } else { v.clone() };
        (k.clone(), v)
    });
    let headers: Vec<(String, String)> = auth.chain(given).collect();
    if headers.is_empty() {
        return;
    }
    let _ = writeln!(out, "{pad}headers:");
    for (k, v) in headers {
        let _ = writeln!(out, "{pad}  {}: {}", quote(&k), quote(&v));
    }
}

/// The operation's path (`literal` for a journey's step) with the security scheme's query
/// parameters after it, their `${env:NAME}` as they are.
fn path_of(op: &Op, templated: bool) -> String {
    let mut path = if templated {
        literal(&op.path)
    } else {
        op.path.clone()
    };
    for p in &op.auth {
        if let Place::Query(k, v) = p {
            path.push(if path.contains('?') { '&' } else { '?' });
            path.push_str(&format!("{k}={v}"));
        }
    }
    path
}

pub(super) fn write_profiles(out: &mut String, base: &str, ops: &[Op], rate: &str) {
    out.push_str("targets:\n");
    for op in ops {
        let _ = writeln!(out, "  {}:", quote(&op.name));
        if !op.summary.is_empty() {
            let _ = writeln!(out, "    # {}", crate::importers::printable(&op.summary));
        }
        let _ = writeln!(
            out,
            "    url: {}",
            quote(&format!("{base}{}", path_of(op, false)))
        );
        let _ = writeln!(out, "    method: {}", op.method);
        write_headers(out, "    ", op, false);
        if let Some((_, body)) = &op.body {
            let _ = writeln!(out, "    body: {}", quote(body));
        }
        write_checks(out, "    ", &op.statuses);
    }
    out.push_str("profiles:\n");
    for op in ops {
        let _ = writeln!(
            out,
            "  {}:\n    target: {}\n    executor: constant-arrival-rate\n    rate: {rate}\n    duration: 1m",
            quote(&op.name),
            quote(&op.name)
        );
    }
}

pub(super) fn write_journey(out: &mut String, name: &str, base: &str, ops: &[&Op], rate: &str) {
    let name = crate::importers::config_name(name);
    let _ = writeln!(
        out,
        "targets:\n  api:\n    url: {}\njourneys:\n  {}:\n    target: api\n    steps:",
        quote(&format!("{base}/")),
        quote(&name)
    );
    for op in ops {
        let _ = writeln!(out, "      - name: {}", quote(&op.name));
        let _ = writeln!(out, "        method: {}", op.method);
        // Relative to the target's URL, so the server's path stays in front.
        let _ = writeln!(
            out,
            "        path: {}",
            quote(path_of(op, true).trim_start_matches('/'))
        );
        write_headers(out, "        ", op, true);
        if let Some((_, body)) = &op.body {
            let _ = writeln!(out, "        body: {}", quote(&literal(body)));
        }
        write_checks(out, "        ", &op.statuses);
    }
    let _ = writeln!(
        out,
        "profiles:\n  {}:\n    journey: {}\n    executor: constant-arrival-rate\n    rate: {rate}\n    duration: 1m",
        quote(&name),
        quote(&name)
    );
}
