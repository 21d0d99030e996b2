//! What the commands and `slos_from` do with imported SLOs: print them as sloburn YAML
//! (`openslo import`), load them into a config, and write a config's SLOs back as OpenSLO
//! (`openslo export`).

use super::*;
use crate::config::quote;

/// The SLOs as sloburn's `slos:` section.
pub fn to_yaml(slos: &[ImportedSlo], source: &str) -> String {
    let mut out = format!("# Converted by `sloburn openslo import` from {source}.\nslos:\n");
    for s in slos {
        let _ = writeln!(out, "  {}:", quote(&s.name));
        let _ = writeln!(out, "    target: {}", quote(&s.target));
        if !s.profiles.is_empty() {
            let list: Vec<String> = s.profiles.iter().map(|p| quote(p)).collect();
            let _ = writeln!(out, "    profiles: [{}]", list.join(", "));
        }
        match &s.sli {
            super::super::Sli::Availability => {
                let _ = writeln!(out, "    sli: availability");
            }
            super::super::Sli::Latency {
                under,
                exclude_failures,
                corrected,
            } => {
                let _ = writeln!(
                    out,
                    "    sli: {{ latency: {{ under: {}, failures: {}{} }} }}",
                    crate::units::format_duration(*under),
                    if *exclude_failures {
                        "exclude"
                    } else {
                        "include"
                    },
                    if *corrected {
                        ""
                    } else {
                        ", measure: duration"
                    }
                );
            }
        }
        let _ = writeln!(out, "    objective: {}", s.objective);
        match &s.period {
            None => {}
            Some(Period::Rolling(d)) => {
                let _ = writeln!(out, "    period: {}", crate::units::format_duration(*d));
            }
            Some(Period::Calendar(c)) => {
                let _ = writeln!(
                    out,
                    "    period: {{ calendar: {}, timezone: {} }}",
                    c.unit.as_str(),
                    quote(c.tz.name())
                );
            }
        }
        if !s.description.is_empty() {
            let _ = writeln!(out, "    description: {}", quote(&s.description));
        }
        if !s.labels.is_empty() {
            let _ = writeln!(out, "    labels:");
            for (k, v) in &s.labels {
                let _ = writeln!(out, "      {}: {}", quote(k), quote(v));
            }
        }
        if !s.tiers.is_empty() {
            let _ = writeln!(out, "    alerting:\n      tiers:");
            for t in &s.tiers {
                let _ = writeln!(
                    out,
                    "        - {{ name: {}, severity: {}, long: {}, short: {}, factor: {} }}",
                    quote(&t.name),
                    if t.page { "page" } else { "ticket" },
                    crate::units::format_duration(t.long),
                    crate::units::format_duration(t.short),
                    t.factor
                );
            }
        }
    }
    out
}

/// `sloburn openslo import FILE`: the sloburn YAML on `out`, warnings and errors (each with
/// `file:line:col`) on `err`; the exit code (78 for a file that does not map).
pub fn import_command(
    path: &std::path::Path,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let name = path.display().to_string();
    let text = match super::super::files::read_config(path) {
        Ok(t) => t,
        Err(e) => {
            let _ = writeln!(err, "{name}: {e}");
            return crate::exit::CONFIG;
        }
    };
    match import(&text, &name) {
        Ok((slos, warnings)) => {
            for w in &warnings {
                let _ = writeln!(err, "warning: {}", w.render(&name));
            }
            let _ = out.write_all(to_yaml(&slos, &name).as_bytes());
            crate::exit::OK
        }
        Err(e) => {
            for d in &e.errors {
                let _ = writeln!(err, "{}", d.render(&name));
            }
            let _ = writeln!(err, "{name}: {} error(s)", e.errors.len());
            crate::exit::CONFIG
        }
    }
}

/// `slos_from: [FILE]` in a config: the file's SLOs join the config's. The file's own errors
/// are reported at the `slos_from` entry, each naming its place in the OpenSLO file.
pub(in crate::config) fn load_into(
    ctx: &mut Ctx,
    item: &Node,
    path: &str,
    file: &std::path::Path,
    targets: &walk::Names,
    slos: &mut BTreeMap<String, super::super::Slo>,
) {
    let shown = file.display().to_string();
    let text = match super::super::files::read_config(file) {
        Ok(t) => t,
        Err(e) => {
            ctx.error(item.pos, path, format!("cannot read `{shown}`: {e}"));
            return;
        }
    };
    let (imported, warnings) = match import(&text, &shown) {
        Ok(x) => x,
        Err(e) => {
            for d in &e.errors {
                ctx.error(item.pos, path, d.render(&shown));
            }
            return;
        }
    };
    for w in &warnings {
        ctx.warn(item.pos, path, w.render(&shown));
    }
    for s in imported {
        if slos.contains_key(&s.name) {
            ctx.error(
                item.pos,
                path,
                format!("{shown}: SLO `{}` is already defined", s.name),
            );
            continue;
        }
        if !targets.contains(&s.target) {
            let hint = ctx.hint(&s.target, targets.iter());
            ctx.error(
                item.pos,
                path,
                format!(
                    "{shown}: SLO `{}`: its service `{}` is not a target of this config{hint}",
                    s.name, s.target
                ),
            );
            continue;
        }
        let (period, calendar) = match s.period {
            None => (Duration::from_secs(30 * 86400), None),
            Some(Period::Rolling(d)) => (d, None),
            Some(Period::Calendar(c)) => (c.nominal(), Some(c)),
        };
        let tiers = (!s.tiers.is_empty()).then(|| {
            s.tiers
                .iter()
                .map(|t| super::super::TierSpec {
                    name: t.name.clone(),
                    page: t.page,
                    long: t.long,
                    short: t.short,
                    factor: t.factor,
                })
                .collect()
        });
        slos.insert(
            s.name.clone(),
            super::super::Slo {
                name: s.name,
                target: s.target,
                journey: None,
                step: None,
                profiles: s.profiles,
                objective: s.objective,
                period,
                calendar,
                sli: s.sli,
                description: s.description,
                labels: s.labels,
                tiers,
                group: None,
                quorum: None,
            },
        );
    }
}

/// A duration as OpenSLO's shorthand: one number and one unit (`30d`, `90m`).
fn shorthand(d: Duration) -> String {
    let s = d.as_secs();
    for (size, unit) in [(86400, "d"), (3600, "h"), (60, "m")] {
        if s >= size && s.is_multiple_of(size) {
            return format!("{}{unit}", s / size);
        }
    }
    format!("{}m", s.div_ceil(60).max(1))
}

/// The config's SLOs as OpenSLO v1 `SLO` documents that `import` turns back into the same
/// SLOs: the SLI travels in a `type: sloburn` metric source, the tiers (the defaults written
/// out) as inline alert policies.
pub fn export(cfg: &super::super::Config) -> String {
    let mut out = String::from("# Exported by `sloburn openslo export`.\n");
    let mut grouped = std::collections::BTreeSet::new();
    for s in cfg.slos.values() {
        // OpenSLO has no per-label split: a grouped SLO is named in a comment, once.
        if let Some(g) = &s.group {
            if grouped.insert(g.parent.as_str()) {
                let _ = writeln!(
                    out,
                    "# SLO `{}` is grouped by `{}` (`group_by`), which OpenSLO cannot say: left out.",
                    g.parent, g.label
                );
            }
            continue;
        }
        out.push_str("---\napiVersion: openslo/v1\nkind: SLO\nmetadata:\n");
        let _ = writeln!(out, "  name: {}", quote(&s.name));
        if !s.labels.is_empty() {
            out.push_str("  labels:\n");
            for (k, v) in &s.labels {
                let _ = writeln!(out, "    {}: {}", quote(k), quote(v));
            }
        }
        out.push_str("spec:\n");
        if !s.description.is_empty() {
            let _ = writeln!(out, "  description: {}", quote(&s.description));
        }
        let _ = writeln!(out, "  service: {}", quote(&s.target));
        write_indicator(&mut out, s);
        write_time_window(&mut out, s);
        out.push_str("  budgetingMethod: Occurrences\n  objectives:\n");
        let _ = writeln!(out, "    - targetPercent: {}", s.objective);
        write_alert_policies(&mut out, s);
    }
    out
}

/// The SLO's `indicator`: its SLI in a `type: sloburn` metric source (which `import` maps
/// back exactly), its events as the total.
fn write_indicator(out: &mut String, s: &super::super::Slo) {
    out.push_str("  indicator:\n    metadata:\n");
    let _ = writeln!(out, "      name: {}", quote(&format!("{}-sli", s.name)));
    out.push_str("    spec:\n      ratioMetric:\n        counter: true\n        good:\n          metricSource:\n            type: sloburn\n            spec:\n");
    match &s.sli {
        super::super::Sli::Availability => out.push_str("              sli: availability\n"),
        super::super::Sli::Latency {
            under,
            exclude_failures,
            corrected,
        } => {
            let _ = writeln!(
                out,
                "              sli: latency\n              under: {}\n              failures: {}\n              measure: {}",
                crate::units::format_duration(*under),
                if *exclude_failures {
                    "exclude"
                } else {
                    "include"
                },
                if *corrected { "corrected" } else { "duration" }
            );
        }
    }
    if !s.profiles.is_empty() {
        let list: Vec<String> = s.profiles.iter().map(|p| quote(p)).collect();
        let _ = writeln!(out, "              profiles: [{}]", list.join(", "));
    }
    out.push_str(
        "        total:\n          metricSource:\n            type: sloburn\n            spec:\n",
    );
    let _ = writeln!(
        out,
        "              query: {}",
        quote(&format!(
            "sum(sloburn_slo_events_total{{slo=\"{}\"}})",
            s.name
        ))
    );
}

/// The SLO's `timeWindow`: rolling, or a calendar period in its time zone.
fn write_time_window(out: &mut String, s: &super::super::Slo) {
    out.push_str("  timeWindow:\n");
    match &s.calendar {
        None => {
            let _ = writeln!(
                out,
                "    - duration: {}\n      isRolling: true",
                shorthand(s.period)
            );
        }
        Some(c) => {
            let d = match c.unit {
                CalendarUnit::Week => "1w",
                CalendarUnit::Month => "1M",
                CalendarUnit::Quarter => "1Q",
            };
            // 2024-01-01 is a Monday and the first day of a month and a quarter.
            let _ = writeln!(
                out,
                "    - duration: {d}\n      calendar:\n        startTime: 2024-01-01 00:00:00\n        timeZone: {}\n      isRolling: false",
                quote(c.tz.name())
            );
        }
    }
}

/// The SLO's tiers (the defaults written out) as inline alert policies, a burn-rate condition
/// each.
fn write_alert_policies(out: &mut String, s: &super::super::Slo) {
    let def = s.def();
    if !def.tiers.is_empty() {
        out.push_str("  alertPolicies:\n");
    }
    for t in &def.tiers {
        let _ = writeln!(
            out,
            "    - kind: AlertPolicy\n      metadata:\n        name: {policy}\n      spec:\n        alertWhenBreaching: true\n        conditions:\n          - kind: AlertCondition\n            metadata:\n              name: {name}\n            spec:\n              severity: {sev}\n              condition:\n                kind: burnrate\n                threshold: {factor}\n                lookbackWindow: {long}\n                alertAfter: {short}",
            policy = quote(&format!("{}-{}", s.name, t.name)),
            name = quote(&t.name),
            sev = t.severity.as_str(),
            factor = t.factor,
            long = shorthand(t.long),
            short = shorthand(t.short),
        );
    }
}
