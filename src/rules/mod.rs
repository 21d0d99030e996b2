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

mod capacity;
mod daemon;
mod quorum;
pub use quorum::{LOCATION_BAD, QUORUM_BAD, QuorumRule};
mod slo;
mod text;
mod yaml;

use crate::config::{Config, Sli, Slo, quote};
use crate::names;
use crate::slo::SloDef;
pub use capacity::{CAPACITY_ALERT, CapacityAlert, capacity_alerts};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;
pub use text::promql_duration;
use yaml::{Group, Rule, write_groups};

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
    /// Capacity profiles with `capacity: {min_rate, max_drop}`: [`CAPACITY_ALERT`].
    pub capacity: Vec<CapacityAlert>,
    /// Quorum SLOs (`quorum: K`), by name: their error ratios come from every location's
    /// events ([`quorum_rules`]).
    pub quorum: BTreeMap<String, QuorumRule>,
}

impl RulesOptions {
    /// The defaults, with `config`'s quorum SLOs ([`quorum_rules`]).
    pub fn with_quorum(config: &Config) -> RulesOptions {
        RulesOptions {
            quorum: quorum_rules(config),
            ..RulesOptions::default()
        }
    }
}

/// Every quorum SLO of `config` (one with `quorum`) with its K and bucket.
pub fn quorum_rules(config: &Config) -> BTreeMap<String, QuorumRule> {
    config
        .slos
        .iter()
        .filter_map(|(n, s)| {
            let q = s.quorum?;
            Some((
                n.clone(),
                QuorumRule {
                    k: q.k,
                    bucket: q.bucket,
                },
            ))
        })
        .collect()
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

impl NativeLatency {
    /// Where a latency SLO's requests are in the native histograms: the corrected or k6
    /// duration of the target's requests (one journey step's with `step`), or a whole journey's
    /// iterations (`sloburn_iteration_duration_seconds`, what a whole-journey SLO times).
    /// `None` for an availability SLO.
    pub fn of(slo: &Slo) -> Option<NativeLatency> {
        let Sli::Latency {
            under, corrected, ..
        } = slo.sli
        else {
            return None;
        };
        let mut matchers = vec![("target".to_string(), slo.target.clone())];
        let metric = match (&slo.journey, &slo.step) {
            (Some(j), None) => {
                matchers.push(("journey".into(), j.clone()));
                names::ITERATION_DURATION
            }
            (journey, step) => {
                if let (Some(j), Some(s)) = (journey, step) {
                    matchers.push(("journey".into(), j.clone()));
                    matchers.push(("step".into(), s.clone()));
                }
                if corrected {
                    names::HTTP_REQ_CORRECTED_DURATION
                } else {
                    names::HTTP_REQ_DURATION
                }
            }
        };
        Some(NativeLatency {
            metric: metric.to_string(),
            matchers,
            profiles: slo.profiles.clone(),
            under,
        })
    }
}

/// The native histogram of every latency SLO of `config`, by SLO name (`sloburn rules
/// --native-histograms`).
pub fn native_latency(config: &Config) -> BTreeMap<String, NativeLatency> {
    config
        .slos
        .values()
        .filter_map(|s| Some((s.name.clone(), NativeLatency::of(s)?)))
        .collect()
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
            capacity: Vec::new(),
            quorum: BTreeMap::new(),
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

/// Each burn alert of `slo` as `(tier name, the alert's PromQL, its \`for\`)`: what the
/// dashboard's alerts table shows, the same text `generate` writes.
pub fn alert_exprs(slo: &SloDef, opts: &RulesOptions) -> Vec<(String, String, Option<Duration>)> {
    slo::slo_group(slo, opts, "rules")
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

/// A Prometheus rule file (`groups:` …) for `slos`.
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

fn groups(slos: &[SloDef], opts: &RulesOptions, mode: &str) -> Vec<Group> {
    let mut groups: Vec<Group> = slos.iter().map(|s| slo::slo_group(s, opts, mode)).collect();
    if opts.daemon_alerts {
        groups.push(daemon::daemon_group(opts));
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::text::sanitize_label_name;
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
        assert!(names::label_name_is_valid("team"));
        assert!(names::label_name_is_valid("_x1"));
        assert!(!names::label_name_is_valid("1x"));
        assert!(!names::label_name_is_valid("a-b"));
        assert!(!names::label_name_is_valid("__name__"));
        assert!(!names::label_name_is_valid(""));
        assert_eq!(sanitize_label_name("a-b.c"), "a_b_c");
        assert_eq!(sanitize_label_name("9lives"), "_9lives");
        assert_eq!(sanitize_label_name("__x"), "_x");
        assert!(names::label_name_is_valid(&sanitize_label_name("")));
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
