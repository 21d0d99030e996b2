//! The rule model (groups of records, alerts and comments) and its YAML, written by hand:
//! every user-derived string as a JSON string, which is a YAML double-quoted scalar too.

use super::text::promql_duration;
use crate::config::quote;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

pub(super) enum Rule {
    /// A `#` line before the next rule.
    Comment(String),
    Record {
        record: String,
        expr: String,
        labels: BTreeMap<String, String>,
    },
    Alert {
        alert: &'static str,
        expr: String,
        r#for: Option<Duration>,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
}

pub(super) struct Group {
    pub(super) name: String,
    pub(super) rules: Vec<Rule>,
}

pub(super) fn write_groups(out: &mut String, groups: &[Group], indent: usize) {
    let pad = " ".repeat(indent);
    let _ = writeln!(out, "{pad}groups:");
    for g in groups {
        let _ = writeln!(out, "{pad}  - name: {}", quote(&g.name));
        let _ = writeln!(out, "{pad}    rules:");
        for r in &g.rules {
            write_rule(out, r, &format!("{pad}      "));
        }
    }
}

pub(super) fn write_rule(out: &mut String, rule: &Rule, pad: &str) {
    match rule {
        Rule::Comment(text) => {
            for line in text.lines() {
                let _ = writeln!(out, "{pad}# {line}");
            }
        }
        Rule::Record {
            record,
            expr,
            labels,
        } => {
            let _ = writeln!(out, "{pad}- record: {record}");
            write_expr(out, expr, pad);
            write_map(out, "labels", labels, pad);
        }
        Rule::Alert {
            alert,
            expr,
            r#for,
            labels,
            annotations,
        } => {
            let _ = writeln!(out, "{pad}- alert: {alert}");
            write_expr(out, expr, pad);
            if let Some(d) = r#for {
                let _ = writeln!(out, "{pad}  for: {}", promql_duration(*d));
            }
            write_map(out, "labels", labels, pad);
            write_map(out, "annotations", annotations, pad);
        }
    }
}

pub(super) fn write_expr(out: &mut String, expr: &str, pad: &str) {
    // Always a literal block: PromQL stays readable and needs no YAML escaping. No line starts
    // with a space, and user text inside is JSON-escaped, so it holds no raw newline.
    let _ = writeln!(out, "{pad}  expr: |");
    for line in expr.lines() {
        let _ = writeln!(out, "{pad}    {line}");
    }
}

pub(super) fn write_map(out: &mut String, key: &str, map: &BTreeMap<String, String>, pad: &str) {
    if map.is_empty() {
        return;
    }
    let _ = writeln!(out, "{pad}  {key}:");
    for (k, v) in map {
        let _ = writeln!(out, "{pad}    {k}: {}", quote(v));
    }
}
