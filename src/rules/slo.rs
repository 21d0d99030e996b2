//! One SLO's group: its SLI error ratio per window (from the events counter or native
//! histograms), Sloth's metadata records, the period budget, and one burn alert per tier.

use super::text::{num, percent, promql_duration, sanitize_label_name, template_literal};
use super::yaml::{Group, Rule};
use super::{BURN_ALERT, EVENTS_METRIC, INFO_RECORD, NativeLatency, RulesOptions, SPEC};
use crate::config::quote;
use crate::names;
use crate::slo::{STANDARD_WINDOWS, SloDef, Tier};
use std::collections::BTreeMap;
use std::time::Duration;

/// Matchers for the events counter, optionally with `result`.
pub(super) fn events_selector(slo: &SloDef, opts: &RulesOptions, bad_only: bool) -> String {
    let mut m = Vec::new();
    if let Some(job) = &opts.job {
        m.push(format!("job={}", quote(job)));
    }
    m.push(format!("slo={}", quote(&slo.name)));
    if bad_only {
        m.push("result=\"bad\"".to_string());
    }
    format!("{EVENTS_METRIC}{{{}}}", m.join(","))
}

/// The daemon's burn-rate gauge of `slo` for the window labelled `window`.
pub(super) fn gauge_selector(slo: &SloDef, opts: &RulesOptions, window: &str) -> String {
    let mut m = Vec::new();
    if let Some(job) = &opts.job {
        m.push(format!("job={}", quote(job)));
    }
    m.push(format!("slo={}", quote(&slo.name)));
    m.push(format!("window={}", quote(window)));
    format!("{}{{{}}}", names::SLO_BURN_RATE, m.join(","))
}

/// The native histogram series of a latency SLO: its matchers, `profile` as an anchored
/// alternation of escaped names (PromQL regexes are RE2, which reads `regex::escape`'s output).
pub(super) fn native_selector(n: &NativeLatency, opts: &RulesOptions) -> String {
    let mut m = Vec::new();
    if let Some(job) = &opts.job {
        m.push(format!("job={}", quote(job)));
    }
    for (k, v) in &n.matchers {
        m.push(format!("{k}={}", quote(v)));
    }
    if !n.profiles.is_empty() {
        let names: Vec<String> = n.profiles.iter().map(|p| regex::escape(p)).collect();
        m.push(format!("profile=~{}", quote(&names.join("|"))));
    }
    format!("{}{{{}}}", n.metric, m.join(","))
}

pub(super) fn sli_error_record(w: Duration) -> String {
    format!("slo:sli_error:ratio_rate{}", promql_duration(w))
}

/// One SLO's group: its identity, SLI error ratios, Sloth's metadata records, the info
/// record, then one burn alert per tier, in that order.
pub(super) fn slo_group(slo: &SloDef, opts: &RulesOptions, mode: &str) -> Group {
    let (base, sel) = identity(slo);
    let budget_expr = format!("(1 - {})", num(slo.objective));
    let mut rules = match opts.quorum.get(&slo.name) {
        Some(q) => {
            let windows = rate_windows(slo, &promql_duration(slo.period));
            super::quorum::records(slo, opts, q, &base, &sel, &windows)
        }
        None => sli_records(slo, opts, &base),
    };
    meta_records(slo, opts, &base, &sel, &budget_expr, &mut rules);
    rules.push(info_record(slo, &base, mode));
    for tier in &slo.tiers {
        rules.push(tier_alert(slo, tier, &sel, &budget_expr, opts));
    }
    Group {
        name: format!("sloburn-slo-{}", slo.name),
        rules,
    }
}

/// The labels every record of the SLO carries (its own, then Sloth's identity), and the
/// selector of its identity.
fn identity(slo: &SloDef) -> (BTreeMap<String, String>, String) {
    let id = format!("{}-{}", slo.service, slo.name);
    let mut base = BTreeMap::new();
    for (k, v) in &slo.labels {
        base.insert(sanitize_label_name(k), v.clone());
    }
    // Sloth's identity labels win over user labels of the same name.
    base.insert("sloth_id".to_string(), id.clone());
    base.insert("sloth_service".to_string(), slo.service.clone());
    base.insert("sloth_slo".to_string(), slo.name.clone());
    let sel = format!(
        "{{sloth_id={}, sloth_service={}, sloth_slo={}}}",
        quote(&id),
        quote(&slo.service),
        quote(&slo.name)
    );
    (base, sel)
}

/// Standard windows plus the tiers' windows, in PromQL spelling, shortest first; the period
/// (`period`, PromQL spelling) is recorded separately from `increase`.
fn rate_windows(slo: &SloDef, period: &str) -> Vec<Duration> {
    let mut windows: Vec<Duration> = STANDARD_WINDOWS.to_vec();
    for t in &slo.tiers {
        windows.push(t.long);
        windows.push(t.short);
    }
    windows.sort();
    let mut seen = Vec::new();
    windows.retain(|w| {
        let name = promql_duration(*w);
        let keep = name != period && !seen.contains(&name);
        seen.push(name);
        keep
    });
    windows
}

/// `slo:sli_error:ratio_rate<w>` per window and for the period, from the events counter or
/// (a latency SLO with native histograms) from `histogram_fraction`.
fn sli_records(slo: &SloDef, opts: &RulesOptions, base: &BTreeMap<String, String>) -> Vec<Rule> {
    let period = promql_duration(slo.period);
    let bad = events_selector(slo, opts, true);
    let all = events_selector(slo, opts, false);
    let native = opts.native.get(&slo.name);
    let mut rules = Vec::new();
    if let Some(n) = native {
        rules.push(Rule::Comment(format!(
            "Native histograms: the error ratio is the share of answered requests slower than\n\
             {under}, from histogram_fraction over {metric}\n\
             (exact to one native bucket). Unlike {EVENTS_METRIC}, a request with no answer\n\
             is not in the histogram and a failed one counts by its latency, not as bad.",
            under = crate::units::format_duration(n.under),
            metric = n.metric,
        )));
    }
    let ratio = |func: &str, w: &str| match native {
        // No traffic in the window: the fraction is NaN (the SLI is undefined), as 0/0 below.
        Some(n) => format!(
            "1 - histogram_fraction(0, {under}, sum({func}({sel}[{w}])))\n",
            under = num(n.under.as_secs_f64()),
            sel = native_selector(n, opts),
        ),
        // `or vector(0)`: a service with no error yet has no bad series at all, and its SLI must
        // still be recorded (as 0 errors), not be absent.
        None => format!(
            "(sum({func}({bad}[{w}])) or vector(0))\n/\nsum({func}({all}[{w}]))\n",
            bad = bad,
            all = all,
        ),
    };
    for w in &rate_windows(slo, &period) {
        let w = promql_duration(*w);
        let mut labels = base.clone();
        labels.insert("sloth_window".to_string(), w.clone());
        rules.push(Rule::Record {
            record: format!("slo:sli_error:ratio_rate{w}"),
            expr: ratio("rate", &w),
            labels,
        });
    }
    // Event-weighted over the period (not an average of 5m ratios, Sloth #241). A calendar
    // period has no PromQL range: its budget comes from the daemon's gauges further down.
    if slo.calendar.is_none() {
        let mut labels = base.clone();
        labels.insert("sloth_window".to_string(), period.clone());
        rules.push(Rule::Record {
            record: format!("slo:sli_error:ratio_rate{period}"),
            expr: ratio("increase", &period),
            labels,
        });
    }
    rules
}

/// Sloth's metadata records: objective, budget, period, the current and the period's burn
/// rate (a calendar period's from the daemon's gauge), the remaining budget.
fn meta_records(
    slo: &SloDef,
    opts: &RulesOptions,
    base: &BTreeMap<String, String>,
    sel: &str,
    budget_expr: &str,
    rules: &mut Vec<Rule>,
) {
    let period = promql_duration(slo.period);
    let meta = |record: &str, expr: String| Rule::Record {
        record: record.to_string(),
        expr,
        labels: base.clone(),
    };
    rules.push(meta(
        "slo:objective:ratio",
        format!("vector({})", num(slo.objective)),
    ));
    rules.push(meta(
        "slo:error_budget:ratio",
        format!("vector{budget_expr}"),
    ));
    rules.push(meta(
        "slo:time_period:days",
        format!("vector({})", num(slo.period.as_secs_f64() / 86400.0)),
    ));
    let burn = |ratio_record: &str| {
        format!(
            "{ratio_record}{sel}\n/ on (sloth_id, sloth_slo, sloth_service) group_left\nslo:error_budget:ratio{sel}\n"
        )
    };
    rules.push(meta(
        "slo:current_burn_rate:ratio",
        burn(&sli_error_record(Duration::from_secs(300))),
    ));
    match slo.calendar {
        None => rules.push(meta(
            "slo:period_burn_rate:ratio",
            burn(&format!("slo:sli_error:ratio_rate{period}")),
        )),
        Some(c) => {
            rules.push(Rule::Comment(format!(
                "Calendar {unit} in {tz}: PromQL cannot express a range that starts at local\n\
                 midnight of the {unit}'s first day, so the period budget is read from the\n\
                 daemon's own gauge ({gauge}{{window=\"{unit}\"}}), the worst\n\
                 instance when several are scraped. The tiers' windows stay rolling.",
                gauge = names::SLO_BURN_RATE,
                unit = c.unit.as_str(),
                tz = c.tz.name(),
            )));
            rules.push(meta(
                "slo:period_burn_rate:ratio",
                format!("max({})\n", gauge_selector(slo, opts, c.unit.as_str())),
            ));
        }
    }
    rules.push(meta(
        "slo:period_error_budget_remaining:ratio",
        format!("1 - slo:period_burn_rate:ratio{sel}"),
    ));
}

/// As Sloth writes it: the SLO's labels plus how and from what it was generated, and the
/// objective in percent.
fn info_record(slo: &SloDef, base: &BTreeMap<String, String>, mode: &str) -> Rule {
    let mut info = base.clone();
    info.insert("sloth_mode".to_string(), mode.to_string());
    info.insert("sloth_spec".to_string(), SPEC.to_string());
    info.insert(
        "sloth_version".to_string(),
        format!("sloburn-v{}", env!("CARGO_PKG_VERSION")),
    );
    info.insert("sloth_objective".to_string(), percent(slo.objective));
    Rule::Record {
        record: INFO_RECORD.to_string(),
        expr: "vector(1)".to_string(),
        labels: info,
    }
}

pub(super) fn tier_alert(
    slo: &SloDef,
    tier: &Tier,
    sel: &str,
    budget_expr: &str,
    opts: &RulesOptions,
) -> Rule {
    let threshold = format!("({} * {budget_expr})", num(tier.factor));
    let (long, short) = (promql_duration(tier.long), promql_duration(tier.short));
    // The comparison filters on the error ratio; dividing the survivors by the budget makes
    // `$value` the long window's burn rate. `max without (sloth_window)` lets the two windows'
    // series match in `and`, as Sloth does.
    // A maintenance window silences the alert (`sloburn_slo_maintenance`); with no such series
    // (another exporter, an old sloburn) `unless` keeps it. The alert sums the events of every
    // instance its selector takes, so it is silenced only while every one of them is in a
    // window (`min`): one instance of another job (or namespace) with an SLO of the same name
    // in maintenance silenced it with `max`.
    let mut m = Vec::new();
    if let Some(job) = &opts.job {
        m.push(format!("job={}", quote(job)));
    }
    m.push(format!("slo={}", quote(&slo.name)));
    let maintenance = format!("{}{{{}}}", names::SLO_MAINTENANCE, m.join(","));
    let expr = format!(
        "(\n  max without (sloth_window) (slo:sli_error:ratio_rate{long}{sel} > {threshold})\n  / {budget_expr}\n)\nand\nmax without (sloth_window) (slo:sli_error:ratio_rate{short}{sel} > {threshold})\nunless on ()\nmin({maintenance}) == 1\n"
    );
    let sev = tier.severity.as_str();
    let mut labels = BTreeMap::new();
    labels.insert("severity".to_string(), sev.to_string());
    labels.insert("sloth_severity".to_string(), sev.to_string());
    labels.insert("sloburn_tier".to_string(), template_literal(&tier.name));
    // Already on the series; repeated so two SLOs' alerts are distinct rules (promtool lints
    // identical alert name + labels as duplicates).
    labels.insert(
        "sloth_id".to_string(),
        template_literal(&format!("{}-{}", slo.service, slo.name)),
    );
    labels.insert("sloth_service".to_string(), template_literal(&slo.service));
    labels.insert("sloth_slo".to_string(), template_literal(&slo.name));
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".to_string(),
        format!(
            "{{{{ $labels.sloth_service }}}}/{{{{ $labels.sloth_slo }}}}: error budget burning {{{{ printf \"%.2f\" $value }}}}x too fast over {long} and {short} (threshold {}x)",
            num(tier.factor)
        ),
    );
    // The description is the user's sentence; its own full stop must not double ours.
    let what = if slo.description.trim().is_empty() {
        format!("SLO {} of {}", slo.name, slo.service)
    } else {
        slo.description.trim().trim_end_matches('.').to_string()
    };
    let budget_share = tier.factor * tier.long.as_secs_f64() / slo.period.as_secs_f64();
    annotations.insert(
        "description".to_string(),
        template_literal(&format!(
            "{what}. Objective {}% over {}; at this burn rate more than {}% of the error budget goes in {long}.",
            percent(slo.objective),
            match slo.calendar {
                Some(c) => format!("the calendar {} ({})", c.unit.as_str(), c.tz.name()),
                None => promql_duration(slo.period),
            },
            percent(budget_share),
        )),
    );
    annotations.insert(
        "burn_rate".to_string(),
        "{{ printf \"%.2f\" $value }}".to_string(),
    );
    if !opts.runbook_base.is_empty() {
        annotations.insert(
            "runbook_url".to_string(),
            template_literal(&format!("{}#{}-{}", opts.runbook_base, slo.name, tier.name)),
        );
    }
    Rule::Alert {
        alert: BURN_ALERT,
        expr,
        r#for: None,
        labels,
        annotations,
    }
}
