//! The `sloburn-daemon` group: the daemon absent, a scheduled profile not running, a TLS
//! probe's certificate inside its warning tier, a capacity under its floor or fallen
//! (`super::capacity`).

use super::text::{promql_duration, template_literal};
use super::yaml::{Group, Rule};
use super::{ABSENT_ALERT, CERT_ALERT, PROFILE_ALERT, RulesOptions};
use crate::config::quote;
use crate::names;
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) fn daemon_group(opts: &RulesOptions) -> Group {
    let job = opts
        .job
        .as_ref()
        .map(|j| format!("job={}", quote(j)))
        .unwrap_or_default();
    let mut rules = vec![absent_alert(opts, &job)];
    for (profile, interval) in &opts.profiles {
        rules.push(profile_alert(opts, &job, profile, *interval));
    }
    for (target, check) in &opts.certificate_warnings {
        rules.push(certificate_alert(opts, &job, target, check));
    }
    rules.extend(super::capacity::capacity_rules(opts, &job));
    Group {
        name: "sloburn-daemon".to_string(),
        rules,
    }
}

/// A selector of `metric` with the `job` matcher (when there is one) before `matchers`.
fn selector(metric: &str, job: &str, matchers: Vec<String>) -> String {
    let mut m = Vec::new();
    if !job.is_empty() {
        m.push(job.to_string());
    }
    m.extend(matchers);
    format!("{metric}{{{}}}", m.join(","))
}

/// The alert's annotations: its summary, and its runbook anchor when runbooks are configured.
fn annotations(opts: &RulesOptions, summary: String, anchor: &str) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    annotations.insert("summary".to_string(), summary);
    if !opts.runbook_base.is_empty() {
        annotations.insert(
            "runbook_url".to_string(),
            template_literal(&format!("{}#{anchor}", opts.runbook_base)),
        );
    }
    annotations
}

/// The daemon is not scraped at all.
fn absent_alert(opts: &RulesOptions, job: &str) -> Rule {
    let build_info = if job.is_empty() {
        names::BUILD_INFO.to_string()
    } else {
        format!("{}{{{job}}}", names::BUILD_INFO)
    };
    Rule::Alert {
        alert: ABSENT_ALERT,
        expr: format!("absent({build_info})"),
        r#for: Some(opts.daemon_absent_for),
        labels: BTreeMap::from([("severity".to_string(), "ticket".to_string())]),
        annotations: annotations(
            opts,
            "sloburn is not scraped: no synthetic traffic, SLO data or burn alerts from it"
                .to_string(),
            "absent",
        ),
    }
}

/// A scheduled profile completed no run in two of its intervals.
fn profile_alert(opts: &RulesOptions, job: &str, profile: &str, interval: Duration) -> Rule {
    // A skipped run (overlap: skip) is not a completed one.
    let sel = selector(
        names::RUNS_TOTAL,
        job,
        vec![
            format!("profile={}", quote(profile)),
            "result!=\"skipped\"".to_string(),
        ],
    );
    let window = promql_duration(interval.saturating_mul(2));
    // The offset term requires the counter to have existed a whole window ago, so a
    // freshly started daemon is not blamed for runs it could not have made yet.
    let expr =
        format!("sum(increase({sel}[{window}])) < 0.5\nand on ()\ncount({sel} offset {window})\n");
    let summary = template_literal(&format!(
        "sloburn profile {profile} completed no run in {window} (scheduled every {})",
        promql_duration(interval)
    ));
    Rule::Alert {
        alert: PROFILE_ALERT,
        expr,
        r#for: None,
        labels: BTreeMap::from([
            ("severity".to_string(), "ticket".to_string()),
            ("profile".to_string(), template_literal(profile)),
        ]),
        annotations: annotations(opts, summary, "profile-not-running"),
    }
}

/// A TLS probe's certificate check failed inside its warning tier. Every check fails on a
/// probe that failed in transport (a server down, an untrusted chain: no certificate seen), so
/// the alert fires only when the check failed more often than the target's probes did: on a
/// certificate that was seen. (A probe that failed after its handshake does not count.)
fn certificate_alert(opts: &RulesOptions, job: &str, target: &str, check: &str) -> Rule {
    let sel = selector(
        names::CHECKS_TOTAL,
        job,
        vec![
            format!("target={}", quote(target)),
            format!("check={}", quote(check)),
            "result=\"fail\"".to_string(),
        ],
    );
    let failed = selector(
        names::HTTP_REQS_TOTAL,
        job,
        vec![
            format!("target={}", quote(target)),
            "error!=\"none\"".to_string(),
        ],
    );
    let summary = template_literal(&format!(
        "the certificate of {target} fails `{check}`: renew it before it expires"
    ));
    Rule::Alert {
        alert: CERT_ALERT,
        expr: format!("sum(increase({sel}[1h]))\n> (sum(increase({failed}[1h])) or vector(0))\n"),
        r#for: None,
        labels: BTreeMap::from([
            ("severity".to_string(), "warning".to_string()),
            ("target".to_string(), template_literal(target)),
        ]),
        annotations: annotations(opts, summary, "certificate-expiring"),
    }
}
