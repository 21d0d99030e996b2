//! The `sloburn-daemon` group: the daemon absent, a scheduled profile not running, a TLS
//! probe's certificate inside its warning tier.

use super::text::{promql_duration, quote, template_literal};
use super::yaml::{Group, Rule};
use super::{ABSENT_ALERT, CERT_ALERT, PROFILE_ALERT, RulesOptions};
use crate::names;
use std::collections::BTreeMap;

pub(super) fn daemon_group(opts: &RulesOptions) -> Group {
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
