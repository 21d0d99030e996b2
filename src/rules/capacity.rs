//! The capacity alert (issue 47): a profile with `executor: capacity` and `capacity: {min_rate,
//! max_drop}` pages nobody but gets a ticket when its last search's capacity
//! (`sloburn_capacity_rate{bound="low"}`) is under `min_rate`, or fell more than `max_drop`
//! under its own 7-day median (`quantile_over_time(0.5, …[7d])`, so one noisy night does not
//! move the baseline). Each instance is compared with its own history.

use super::RulesOptions;
use super::text::template_literal;
use super::yaml::Rule;
use crate::config::{Config, quote};
use crate::names;
use std::collections::BTreeMap;

pub const CAPACITY_ALERT: &str = "SloburnCapacityLow";

/// One capacity profile's alert settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityAlert {
    pub profile: String,
    /// Arrivals a second.
    pub min_rate: Option<f64>,
    /// A share: 0.2 fires on a capacity under 80 % of its 7-day median.
    pub max_drop: Option<f64>,
}

/// The capacity profiles of `cfg` that configure an alert.
pub fn capacity_alerts(cfg: &Config) -> Vec<CapacityAlert> {
    cfg.profiles
        .values()
        .filter_map(|p| {
            let c = p.capacity.as_ref()?;
            (c.min_rate.is_some() || c.max_drop.is_some()).then(|| CapacityAlert {
                profile: p.name.clone(),
                min_rate: c.min_rate,
                max_drop: c.max_drop,
            })
        })
        .collect()
}

/// The alerts of every capacity profile, `job` the scrape job's matcher (or empty).
pub(super) fn capacity_rules(opts: &RulesOptions, job: &str) -> Vec<Rule> {
    let mut rules = Vec::new();
    for a in &opts.capacity {
        let mut m = Vec::new();
        if !job.is_empty() {
            m.push(job.to_string());
        }
        m.push(format!("profile={}", quote(&a.profile)));
        m.push("bound=\"low\"".to_string());
        let sel = format!("{}{{{}}}", names::CAPACITY_RATE, m.join(","));
        if let Some(min) = a.min_rate {
            rules.push(alert(
                opts,
                &a.profile,
                format!("{sel} < {min}\n"),
                "below_min_rate",
                format!(
                    "the capacity of {} at its SLO is {{{{ $value }}}}/s, under its min_rate {min}/s",
                    template_literal(&a.profile)
                ),
            ));
        }
        if let Some(drop) = a.max_drop {
            let keep = 1.0 - drop;
            rules.push(alert(
                opts,
                &a.profile,
                format!("{sel}\n< {keep} * quantile_over_time(0.5, {sel}[7d])\n"),
                "dropped",
                format!(
                    "the capacity of {} at its SLO fell to {{{{ $value }}}}/s, more than {}% under \
                     its 7-day median",
                    template_literal(&a.profile),
                    drop * 100.0
                ),
            ));
        }
    }
    rules
}

fn alert(opts: &RulesOptions, profile: &str, expr: String, why: &str, summary: String) -> Rule {
    let mut annotations = BTreeMap::from([("summary".to_string(), summary)]);
    if !opts.runbook_base.is_empty() {
        annotations.insert(
            "runbook_url".to_string(),
            template_literal(&format!("{}#capacity-low", opts.runbook_base)),
        );
    }
    Rule::Alert {
        alert: CAPACITY_ALERT,
        expr,
        r#for: None,
        labels: BTreeMap::from([
            ("severity".to_string(), "ticket".to_string()),
            ("profile".to_string(), template_literal(profile)),
            ("sloburn_capacity".to_string(), why.to_string()),
        ]),
        annotations,
    }
}
