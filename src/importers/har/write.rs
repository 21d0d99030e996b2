//! The journey written: the target, one step per request (captures, think times, the status
//! recorded as its check) and the profile; the variables to set as comments at the top.

use std::fmt::Write as _;

use super::{From, Options, Step};
use crate::config::quote;
use crate::importers::{UniqueNames, config_name, printable};

/// A step's headers: on one line when it is short, else one a line.
fn write_headers(out: &mut String, headers: &[(String, String)]) {
    if headers.is_empty() {
        return;
    }
    let pairs: Vec<String> = headers
        .iter()
        .map(|(k, v)| format!("{}: {}", quote(k), quote(v)))
        .collect();
    let line = pairs.join(", ");
    if line.len() <= 100 {
        let _ = writeln!(out, "        headers: {{ {line} }}");
    } else {
        let _ = writeln!(out, "        headers:");
        for p in pairs {
            let _ = writeln!(out, "          {p}");
        }
    }
}

pub(super) fn write(
    file: &str,
    base: &str,
    steps: &[Step],
    opts: &Options,
    variables: &[String],
) -> String {
    let journey = config_name(&opts.journey);
    let mut out = format!(
        "# Imported by `sloburn import har` from {}: {} request(s) on {}.\n# Review the captures and think times, then add a schedule and SLOs.\n",
        printable(file),
        steps.len(),
        printable(base),
    );
    for v in variables {
        let _ = writeln!(out, "# {}", printable(v));
    }
    let _ = write!(
        out,
        "targets:\n  recorded:\n    url: {}\njourneys:\n  {}:\n    target: recorded\n    steps:\n",
        quote(base),
        quote(&journey)
    );
    let mut names = UniqueNames::default();
    for s in steps {
        let e = &s.entry;
        let last = e
            .url
            .path()
            .rsplit('/')
            .find(|p| !p.is_empty())
            .unwrap_or("root");
        let name = names.give(&config_name(&format!(
            "{} {last}",
            e.method.to_ascii_lowercase()
        )));
        let _ = writeln!(out, "      - name: {}", quote(&name));
        // GET is a step's default: a long recording stays within what `check` reads.
        if e.method != "GET" {
            let _ = writeln!(out, "        method: {}", e.method);
        }
        let _ = writeln!(out, "        path: {}", quote(&s.path));
        write_headers(&mut out, &s.headers);
        if let Some(b) = &s.body {
            let _ = writeln!(out, "        body: {}", quote(b));
        }
        if e.status > 0 {
            let _ = writeln!(out, "        checks: [{{ status: {} }}]", e.status);
        }
        if !s.captures.is_empty() {
            let _ = writeln!(out, "        capture:");
            for (n, from) in &s.captures {
                let source = match from {
                    From::Json(p) => format!("{{ json: {} }}", quote(p)),
                    From::Header(h) => format!("{{ header: {} }}", quote(h)),
                };
                let _ = writeln!(out, "          {n}: {source}");
            }
        }
        if let Some(ms) = s.think_ms {
            let _ = writeln!(out, "        think: {ms}ms");
        }
    }
    let _ = writeln!(
        out,
        "profiles:\n  {}:\n    journey: {}\n    executor: constant-arrival-rate\n    rate: {}\n    duration: 1m",
        quote(&journey),
        quote(&journey),
        opts.rate
    );
    out
}
