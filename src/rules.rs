//! Prometheus rule generation: Sloth-compatible SLO recording rules, multiwindow multi-burn-rate
//! alerts per tier, and daemon health alerts, as a rule file or a prometheus-operator
//! `PrometheusRule`.
//!
//! The YAML is written by hand (no YAML crate): every user-derived string is emitted as a JSON
//! string, which is also a valid YAML double-quoted scalar, and inside PromQL as a JSON string,
//! which PromQL's Go-style string syntax accepts. Output is deterministic: labels are sorted,
//! SLOs and tiers keep their input order.
//!
//! Alerts compare the error ratio with `factor * (1 - objective)`, the same floating-point
//! operations as [`crate::slo::evaluate`], so the daemon and Prometheus agree at the threshold.
//! Alerts have no `for`: the short window already stops a fast-burn alert once the errors stop,
//! and a `for` would only delay pages (SRE Workbook ch. 5).

use crate::names;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::slo::{STANDARD_WINDOWS, SloDef, Tier};

/// The counter the daemon exposes; both the rules and the daemon's windows count it.
pub const EVENTS_METRIC: &str = names::SLO_EVENTS_TOTAL;
/// One alert name for every tier; `sloburn_tier` and `severity` tell them apart.
pub const BURN_ALERT: &str = "SloburnErrorBudgetBurn";
pub const ABSENT_ALERT: &str = "SloburnAbsent";
pub const PROFILE_ALERT: &str = "SloburnProfileNotRunning";
/// A TLS probe's certificate is inside its warning tier (`expiry_warning`): severity
/// `warning`, never a page, while the availability SLI stays good.
pub const CERT_ALERT: &str = "SloburnCertificateExpiring";
/// Sloth's info series: one per SLO, value 1. Sloth's Grafana dashboards and UI fill their
/// service and SLO pickers from its labels.
pub const INFO_RECORD: &str = "sloth_slo_info";
/// `sloth_mode` of [`INFO_RECORD`]: Sloth's names for a CLI writing a rule file and a CLI
/// writing a `PrometheusRule`, which is what `sloburn rules` and `sloburn rules --k8s` are.
pub const MODE_PROM: &str = "cli-gen-prom";
pub const MODE_K8S: &str = "cli-gen-k8s";
/// `sloth_spec`: the SLOs come from a sloburn config, not a Sloth spec.
pub const SPEC: &str = "sloburn/v1";

/// Options that are not part of any SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct RulesOptions {
    /// Base URL of the runbook; the tier name is appended as a fragment. Empty: no runbook_url.
    pub runbook_base: String,
    /// How long `sloburn_build_info` may be absent before [`ABSENT_ALERT`] fires.
    pub daemon_absent_for: Duration,
    /// Scheduled profiles as `(name, interval between runs)`: [`PROFILE_ALERT`] fires when a
    /// profile completed no run in two intervals.
    pub profiles: Vec<(String, Duration)>,
    /// Restricts every selector to this scrape job, when several deployments share Prometheus.
    pub job: Option<String>,
    /// Include the `sloburn-daemon` group (absence alerts). `--output DIR` writes it once, in
    /// its own file, so per-SLO files never repeat it.
    pub daemon_alerts: bool,
    /// Latency SLOs whose error ratios are read from native histograms with
    /// `histogram_fraction` (`sloburn rules --native-histograms`), by SLO name. Every other
    /// SLO counts [`EVENTS_METRIC`].
    pub native: BTreeMap<String, NativeLatency>,
    /// TLS probe targets and the name of their warning check (`certificate valid for 14d`):
    /// [`CERT_ALERT`] fires while that check fails.
    pub certificate_warnings: Vec<(String, String)>,
}

/// Where a latency SLO's native histogram is and the bound it holds its requests to: the
/// SLI over window `w` is `histogram_fraction(0, under, sum(rate(metric{matchers}[w])))`.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeLatency {
    /// The histogram family, e.g. `sloburn_http_req_corrected_duration_seconds`.
    pub metric: String,
    /// `(label, value)` equality matchers, and `profile` as a set when the SLO names profiles.
    pub matchers: Vec<(String, String)>,
    /// Profiles whose series count; empty: every profile.
    pub profiles: Vec<String>,
    pub under: Duration,
}

impl Default for RulesOptions {
    fn default() -> Self {
        RulesOptions {
            runbook_base: String::new(),
            daemon_absent_for: Duration::from_secs(5 * 60),
            profiles: Vec::new(),
            job: None,
            daemon_alerts: true,
            native: BTreeMap::new(),
            certificate_warnings: Vec::new(),
        }
    }
}

/// Metadata of the generated `PrometheusRule` object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct K8sMeta {
    pub name: String,
    pub namespace: Option<String>,
    /// E.g. the `release`/`prometheus` label the operator's `ruleSelector` matches.
    pub labels: BTreeMap<String, String>,
}

/// A Prometheus rule file (`groups:` …) for `slos`.
/// Each burn alert of `slo` as `(tier name, the alert's PromQL, its \`for\`)`: what the
/// dashboard's alerts table shows, the same text `generate` writes.
pub fn alert_exprs(slo: &SloDef, opts: &RulesOptions) -> Vec<(String, String, Option<Duration>)> {
    slo_group(slo, opts, "rules")
        .rules
        .into_iter()
        .filter_map(|r| match r {
            Rule::Alert {
                expr,
                r#for,
                labels,
                ..
            } => Some((labels.get("sloburn_tier")?.clone(), expr, r#for)),
            _ => None,
        })
        .collect()
}

pub fn generate(slos: &[SloDef], opts: &RulesOptions) -> String {
    let mut out = String::from("# Generated by `sloburn rules`; do not edit.\n");
    write_groups(&mut out, &groups(slos, opts, MODE_PROM), 0);
    out
}

/// The same groups wrapped in a prometheus-operator `PrometheusRule`.
pub fn generate_k8s(slos: &[SloDef], opts: &RulesOptions, meta: &K8sMeta) -> String {
    let mut out = String::from("# Generated by `sloburn rules --k8s`; do not edit.\n");
    out.push_str("apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata:\n");
    let _ = writeln!(out, "  name: {}", quote(&meta.name));
    if let Some(ns) = &meta.namespace {
        let _ = writeln!(out, "  namespace: {}", quote(ns));
    }
    if !meta.labels.is_empty() {
        out.push_str("  labels:\n");
        for (k, v) in &meta.labels {
            let _ = writeln!(out, "    {}: {}", quote(k), quote(v));
        }
    }
    out.push_str("spec:\n");
    write_groups(&mut out, &groups(slos, opts, MODE_K8S), 2);
    out
}

/// Whether `name` is a valid, non-reserved Prometheus label name. Config validation should
/// reject SLO labels failing this; generation sanitizes them as a last resort.
pub fn label_name_is_valid(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !name.starts_with("__")
}

fn sanitize_label_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    while s.starts_with("__") {
        s.remove(0);
    }
    s
}

/// PromQL duration, largest units first (`30d`, `1h30m`, `10s`). Sub-second parts are dropped
/// and zero becomes `1s`, since PromQL rejects an empty range.
pub fn promql_duration(d: Duration) -> String {
    let mut secs = d.as_secs().max(1);
    let mut out = String::new();
    for (unit, size) in [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            let _ = write!(out, "{}{unit}", secs / size);
            secs %= size;
        }
    }
    out
}

/// JSON string literal: a YAML double-quoted scalar and a PromQL string at once.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

/// Prometheus expands alert labels and annotations as Go templates; user text must not be.
fn template_literal(s: &str) -> String {
    s.replace("{{", "{{ \"{{\" }}")
}

/// Shortest form that round-trips, so Prometheus parses exactly the double we computed with.
fn num(x: f64) -> String {
    format!("{x}")
}

fn percent(ratio: f64) -> String {
    let s = format!("{:.6}", ratio * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

enum Rule {
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

struct Group {
    name: String,
    rules: Vec<Rule>,
}

fn groups(slos: &[SloDef], opts: &RulesOptions, mode: &str) -> Vec<Group> {
    let mut groups: Vec<Group> = slos.iter().map(|s| slo_group(s, opts, mode)).collect();
    if opts.daemon_alerts {
        groups.push(daemon_group(opts));
    }
    groups
}

/// Matchers for the events counter, optionally with `result`.
fn events_selector(slo: &SloDef, opts: &RulesOptions, bad_only: bool) -> String {
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
fn gauge_selector(slo: &SloDef, opts: &RulesOptions, window: &str) -> String {
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
fn native_selector(n: &NativeLatency, opts: &RulesOptions) -> String {
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

fn sli_error_record(w: Duration) -> String {
    format!("slo:sli_error:ratio_rate{}", promql_duration(w))
}

fn slo_group(slo: &SloDef, opts: &RulesOptions, mode: &str) -> Group {
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
    let budget_expr = format!("(1 - {})", num(slo.objective));
    let period = promql_duration(slo.period);

    // Standard windows plus the tiers' windows, in PromQL spelling, shortest first; the period
    // is recorded separately from `increase`.
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
    for w in &windows {
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
    // As Sloth writes it: the SLO's labels plus how and from what it was generated, and the
    // objective in percent.
    let mut info = base.clone();
    info.insert("sloth_mode".to_string(), mode.to_string());
    info.insert("sloth_spec".to_string(), SPEC.to_string());
    info.insert(
        "sloth_version".to_string(),
        format!("sloburn-v{}", env!("CARGO_PKG_VERSION")),
    );
    info.insert("sloth_objective".to_string(), percent(slo.objective));
    rules.push(Rule::Record {
        record: INFO_RECORD.to_string(),
        expr: "vector(1)".to_string(),
        labels: info,
    });

    for tier in &slo.tiers {
        rules.push(tier_alert(slo, tier, &sel, &budget_expr, opts));
    }
    Group {
        name: format!("sloburn-slo-{}", slo.name),
        rules,
    }
}

fn tier_alert(
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
    // (another exporter, an old sloburn) `unless` keeps it.
    let mut m = Vec::new();
    if let Some(job) = &opts.job {
        m.push(format!("job={}", quote(job)));
    }
    m.push(format!("slo={}", quote(&slo.name)));
    let maintenance = format!("{}{{{}}}", names::SLO_MAINTENANCE, m.join(","));
    let expr = format!(
        "(\n  max without (sloth_window) (slo:sli_error:ratio_rate{long}{sel} > {threshold})\n  / {budget_expr}\n)\nand\nmax without (sloth_window) (slo:sli_error:ratio_rate{short}{sel} > {threshold})\nunless on ()\nmax({maintenance}) == 1\n"
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

fn daemon_group(opts: &RulesOptions) -> Group {
    let job = opts
        .job
        .as_ref()
        .map(|j| format!("job={}", quote(j)))
        .unwrap_or_default();
    let build_info = if job.is_empty() {
        names::BUILD_INFO.to_string()
    } else {
        format!("{}{{{job}}}", names::BUILD_INFO)
    };
    let mut rules = Vec::new();
    let mut annotations = BTreeMap::new();
    annotations.insert(
        "summary".to_string(),
        "sloburn is not scraped: no synthetic traffic, SLO data or burn alerts from it".to_string(),
    );
    if !opts.runbook_base.is_empty() {
        annotations.insert(
            "runbook_url".to_string(),
            template_literal(&format!("{}#absent", opts.runbook_base)),
        );
    }
    rules.push(Rule::Alert {
        alert: ABSENT_ALERT,
        expr: format!("absent({build_info})"),
        r#for: Some(opts.daemon_absent_for),
        labels: BTreeMap::from([("severity".to_string(), "ticket".to_string())]),
        annotations,
    });
    for (profile, interval) in &opts.profiles {
        let mut m = Vec::new();
        if !job.is_empty() {
            m.push(job.clone());
        }
        m.push(format!("profile={}", quote(profile)));
        // A skipped run (overlap: skip) is not a completed one.
        m.push("result!=\"skipped\"".to_string());
        let sel = format!("{}{{{}}}", names::RUNS_TOTAL, m.join(","));
        let window = promql_duration(interval.saturating_mul(2));
        // The offset term requires the counter to have existed a whole window ago, so a
        // freshly started daemon is not blamed for runs it could not have made yet.
        let expr = format!(
            "sum(increase({sel}[{window}])) < 0.5\nand on ()\ncount({sel} offset {window})\n"
        );
        let mut annotations = BTreeMap::new();
        annotations.insert(
            "summary".to_string(),
            template_literal(&format!(
                "sloburn profile {profile} completed no run in {window} (scheduled every {})",
                promql_duration(*interval)
            )),
        );
        if !opts.runbook_base.is_empty() {
            annotations.insert(
                "runbook_url".to_string(),
                template_literal(&format!("{}#profile-not-running", opts.runbook_base)),
            );
        }
        rules.push(Rule::Alert {
            alert: PROFILE_ALERT,
            expr,
            r#for: None,
            labels: BTreeMap::from([
                ("severity".to_string(), "ticket".to_string()),
                ("profile".to_string(), template_literal(profile)),
            ]),
            annotations,
        });
    }
    for (target, check) in &opts.certificate_warnings {
        let mut m = Vec::new();
        if !job.is_empty() {
            m.push(job.clone());
        }
        m.push(format!("target={}", quote(target)));
        m.push(format!("check={}", quote(check)));
        m.push("result=\"fail\"".to_string());
        let sel = format!("{}{{{}}}", names::CHECKS_TOTAL, m.join(","));
        let mut annotations = BTreeMap::new();
        annotations.insert(
            "summary".to_string(),
            template_literal(&format!(
                "the certificate of {target} fails `{check}`: renew it before it expires"
            )),
        );
        if !opts.runbook_base.is_empty() {
            annotations.insert(
                "runbook_url".to_string(),
                template_literal(&format!("{}#certificate-expiring", opts.runbook_base)),
            );
        }
        rules.push(Rule::Alert {
            alert: CERT_ALERT,
            expr: format!("sum(increase({sel}[1h])) > 0\n"),
            r#for: None,
            labels: BTreeMap::from([
                ("severity".to_string(), "warning".to_string()),
                ("target".to_string(), template_literal(target)),
            ]),
            annotations,
        });
    }
    Group {
        name: "sloburn-daemon".to_string(),
        rules,
    }
}

fn write_groups(out: &mut String, groups: &[Group], indent: usize) {
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

fn write_rule(out: &mut String, rule: &Rule, pad: &str) {
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

fn write_expr(out: &mut String, expr: &str, pad: &str) {
    // Always a literal block: PromQL stays readable and needs no YAML escaping. No line starts
    // with a space, and user text inside is JSON-escaped, so it holds no raw newline.
    let _ = writeln!(out, "{pad}  expr: |");
    for line in expr.lines() {
        let _ = writeln!(out, "{pad}    {line}");
    }
}

fn write_map(out: &mut String, key: &str, map: &BTreeMap<String, String>, pad: &str) {
    if map.is_empty() {
        return;
    }
    let _ = writeln!(out, "{pad}  {key}:");
    for (k, v) in map {
        let _ = writeln!(out, "{pad}    {k}: {}", quote(v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slo::default_tiers;

    fn slo() -> SloDef {
        let period = Duration::from_secs(30 * 86400);
        SloDef {
            name: "checkout-availability".into(),
            service: "checkout".into(),
            objective: 0.999,
            calendar: None,
            period,
            tiers: default_tiers(period),
            labels: BTreeMap::from([("team".into(), "shop".into())]),
            description: String::new(),
        }
    }

    #[test]
    fn durations_use_largest_units() {
        let check = |secs: u64, want: &str| {
            assert_eq!(promql_duration(Duration::from_secs(secs)), want);
        };
        check(300, "5m");
        check(5400, "1h30m");
        check(86400, "1d");
        check(30 * 86400, "30d");
        check(10, "10s");
        check(0, "1s");
        check(90061, "1d1h1m1s");
    }

    #[test]
    fn label_names() {
        assert!(label_name_is_valid("team"));
        assert!(label_name_is_valid("_x1"));
        assert!(!label_name_is_valid("1x"));
        assert!(!label_name_is_valid("a-b"));
        assert!(!label_name_is_valid("__name__"));
        assert!(!label_name_is_valid(""));
        assert_eq!(sanitize_label_name("a-b.c"), "a_b_c");
        assert_eq!(sanitize_label_name("9lives"), "_9lives");
        assert_eq!(sanitize_label_name("__x"), "_x");
        assert!(label_name_is_valid(&sanitize_label_name("")));
    }

    /// Issue 12, item 7: "correctly.. Objective" and runbook links without the SLO's name.
    #[test]
    fn descriptions_end_once_and_runbook_links_name_the_slo() {
        let mut s = slo();
        s.description = "The checkout canary gets a correct answer. ".into();
        let opts = RulesOptions {
            runbook_base: "https://runbooks.example/sloburn".into(),
            ..RulesOptions::default()
        };
        let out = generate(&[s], &opts);
        assert!(out.contains("a correct answer. Objective 99.9%"), "{out}");
        assert!(!out.contains(".."), "{out}");
        assert!(
            out.contains("https://runbooks.example/sloburn#checkout-availability-page-1h"),
            "{out}"
        );
        assert!(!out.contains("sloburn#page-1h"), "{out}");
    }

    #[test]
    fn hostile_strings_are_escaped() {
        let mut s = slo();
        s.name = "a\"b\\c\nd".into();
        s.description = "uses {{ $value }} literally".into();
        let out = generate(&[s], &RulesOptions::default());
        assert!(out.contains(r#"slo="a\"b\\c\nd""#), "{out}");
        assert!(
            out.contains(r#"uses {{ \"{{\" }} $value }} literally"#),
            "{out}"
        );
        assert!(out.lines().all(|l| !l.ends_with(' ')));
    }

    #[test]
    fn tier_windows_outside_the_standard_set_get_recorded() {
        let mut s = slo();
        s.tiers[0].long = Duration::from_secs(60);
        s.tiers[0].short = Duration::from_secs(10);
        let out = generate(&[s], &RulesOptions::default());
        for w in [
            "10s", "1m", "5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d",
        ] {
            let record = format!("- record: slo:sli_error:ratio_rate{w}\n");
            assert_eq!(out.matches(&record).count(), 1, "{w}");
        }
    }

    #[test]
    fn period_equal_to_a_standard_window_is_recorded_once_from_increase() {
        let mut s = slo();
        s.period = Duration::from_secs(3 * 86400);
        s.tiers = default_tiers(s.period);
        let out = generate(&[s], &RulesOptions::default());
        assert_eq!(
            out.matches("- record: slo:sli_error:ratio_rate3d\n")
                .count(),
            1
        );
        assert!(out.contains(
            "increase(sloburn_slo_events_total{slo=\"checkout-availability\",result=\"bad\"}[3d])"
        ));
    }

    /// Issue 12, item 12: Sloth's dashboards fill their pickers from `sloth_slo_info`.
    #[test]
    fn every_slo_gets_sloth_slo_info_with_mode_spec_version_and_objective() {
        let out = generate(&[slo()], &RulesOptions::default());
        let at = out
            .find("- record: sloth_slo_info\n")
            .expect("no sloth_slo_info");
        let rule: String = out[at..].lines().take(13).collect::<Vec<_>>().join("\n");
        for want in [
            "expr: |\n    vector(1)",
            "sloth_id: \"checkout-checkout-availability\"",
            "sloth_mode: \"cli-gen-prom\"",
            "sloth_objective: \"99.9\"",
            "sloth_service: \"checkout\"",
            "sloth_slo: \"checkout-availability\"",
            "sloth_spec: \"sloburn/v1\"",
            "team: \"shop\"",
        ] {
            let want = want.replace("\n    ", "\n          ");
            assert!(rule.contains(&want), "{want} missing:\n{rule}");
        }
        let k8s = generate_k8s(&[slo()], &RulesOptions::default(), &K8sMeta::default());
        assert!(k8s.contains("sloth_mode: \"cli-gen-k8s\""), "{k8s}");
        assert_eq!(out.matches("- record: sloth_slo_info\n").count(), 1);
    }

    #[test]
    fn output_is_deterministic() {
        let opts = RulesOptions {
            profiles: vec![("canary".into(), Duration::from_secs(300))],
            ..RulesOptions::default()
        };
        assert_eq!(generate(&[slo()], &opts), generate(&[slo()], &opts));
    }
}
