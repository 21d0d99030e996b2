//! OpenSLO in: the examples of the OpenSLO v1 spec's README (written out below) convert with
//! `sloburn openslo import`, the result is a valid sloburn config, and the rules generated from
//! it pass the real `promtool check rules`; a field that does not map is an error at its
//! line:col.

use crate::support::{all_output, sloburn, which};
use std::path::Path;
use std::process::Command;

/// The README's "SLO where SLI is inlined", plus the AlertCondition example and the
/// AlertPolicy that refers to it (README "AlertPolicy", "AlertCondition"); the SLO names the
/// policy (the README's SLO example has no `alertPolicies`; `alertPolicyRef` is from the SLO
/// schema).
const INLINE_SLI: &str = r#"apiVersion: openslo/v1
kind: SLO
metadata:
  name: foo-slo
  displayName: Foo SLO
spec:
  service: foo
  indicator:
    metadata:
      name: foo-error
      displayName: Foo Error
    spec:
      ratioMetric:
        counter: true
        good:
          metricSource:
            metricSourceRef: datadog-datasource
            type: Datadog
            spec:
              query: sum:trace.http.request.hits.by_http_status{http.status_code:200}.as_count()
        total:
          metricSource:
            metricSourceRef: datadog-datasource
            type: Datadog
            spec:
              query: sum:trace.http.request.hits.by_http_status{*}.as_count()
  objectives:
    - displayName: Foo Total Errors
      target: 0.98
  alertPolicies:
    - alertPolicyRef: AlertPolicy
---
apiVersion: openslo/v1
kind: AlertPolicy
metadata:
  name: AlertPolicy
  displayName: Alert Policy
spec:
  description: Alert policy for cpu usage breaches, notifies on-call devops via email
  alertWhenBreaching: true
  alertWhenResolved: false
  conditions:
    - conditionRef: cpu-usage-breach
  notificationTargets:
    - targetRef: OnCallDevopsMailNotification
---
apiVersion: openslo/v1
kind: AlertCondition
metadata:
  name: cpu-usage-breach
  displayName: CPU usage breach
spec:
  description: If the CPU usage is too high for given period then it should alert
  severity: page
  condition:
    kind: burnrate
    threshold: 2
    lookbackWindow: 1h
    alertAfter: 5m
"#;

/// The README's `ratioMetric` example as a `kind: SLI`, referred to by `indicatorRef`, with
/// the README's inline-condition AlertPolicy inlined in the SLO and a calendar-aligned window
/// from the SLO schema.
const REF_SLI: &str = r#"apiVersion: openslo/v1
kind: SLI
metadata:
  name: server-requests
spec:
  ratioMetric:
    counter: true
    good:
      metricSource:
        type: Prometheus
        metricSourceRef: prometheus-datasource
        spec:
          query: sum(localhost_server_requests{code=~"2xx|3xx",host="*",instance="127.0.0.1:9090"})
    total:
      metricSource:
        type: Prometheus
        metricSourceRef: prometheus-datasource
        spec:
          query: localhost_server_requests{code="total",host="*",instance="127.0.0.1:9090"}
---
apiVersion: openslo/v1
kind: SLO
metadata:
  name: bar-slo
spec:
  description: Bar answers
  service: bar
  indicatorRef: server-requests
  timeWindow:
    - duration: 1M
      calendar:
        startTime: 2020-01-01 00:00:00
        timeZone: America/New_York
  budgetingMethod: Occurrences
  objectives:
    - displayName: Bar Total Errors
      targetPercent: 99.99
  alertPolicies:
    - kind: AlertPolicy
      metadata:
        name: AlertPolicy
        displayName: Alert Policy
      spec:
        description: Alert policy for cpu usage breaches, notifies on-call devops via email
        alertWhenBreaching: true
        alertWhenResolved: false
        conditions:
          - kind: AlertCondition
            metadata:
              name: cpu-usage-breach
              displayName: CPU Usage breaching
            spec:
              description: SLO burn rate for cpu-usage-breach exceeds 2
              severity: page
              condition:
                kind: burnrate
                threshold: 2
                lookbackWindow: 1h
                alertAfter: 5m
        notificationTargets:
          - targetRef: OnCallDevopsMailNotification
"#;

fn import(dir: &Path, name: &str, text: &str) -> std::process::Output {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    sloburn()
        .args(["openslo", "import"])
        .arg(&path)
        .output()
        .unwrap()
}

/// Imports `text`, prepends targets for `services`, checks the config and the rules.
fn import_and_check_rules(text: &str, services: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = import(dir.path(), "openslo.yaml", text);
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let yaml = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        stderr.contains("replaced by sloburn's own probes"),
        "the metric sources are named, not dropped: {stderr}"
    );
    let mut cfg = String::from("targets:\n");
    for s in services {
        cfg.push_str(&format!("  {s}:\n    url: http://127.0.0.1:9/{s}\n"));
    }
    cfg.push_str(&yaml);
    let path = dir.path().join("sloburn.yaml");
    std::fs::write(&path, &cfg).unwrap();
    let check = sloburn().arg("check").arg(&path).output().unwrap();
    assert_eq!(
        check.status.code(),
        Some(0),
        "{cfg}\n{}",
        all_output(&check)
    );
    let rules = crate::support::sloburn_rules([path.as_os_str()]);
    let rules_path = dir.path().join("rules.yml");
    std::fs::write(&rules_path, &rules).unwrap();
    let out = Command::new(which("promtool"))
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{rules}\n{}", all_output(&out));
    yaml
}

#[test]
fn the_readme_examples_import_and_their_rules_pass_promtool() {
    let yaml = import_and_check_rules(INLINE_SLI, &["foo"]);
    assert!(
        yaml.contains(
            "  \"foo-slo\":\n    target: \"foo\"\n    sli: availability\n    objective: 98\n"
        ),
        "{yaml}"
    );
    assert!(
        yaml.contains("description: \"Foo SLO: Foo Total Errors\""),
        "{yaml}"
    );
    assert!(
        yaml.contains("\"openslo_notification_target\": \"OnCallDevopsMailNotification\""),
        "{yaml}"
    );
    assert!(
        yaml.contains(
            "- { name: \"cpu-usage-breach\", severity: page, long: 1h, short: 5m, factor: 2 }"
        ),
        "{yaml}"
    );

    let yaml = import_and_check_rules(REF_SLI, &["bar"]);
    assert!(yaml.contains("objective: 99.99\n"), "{yaml}");
    assert!(
        yaml.contains("period: { calendar: month, timezone: \"America/New_York\" }"),
        "{yaml}"
    );
    assert!(
        yaml.contains("description: \"Bar answers: Bar Total Errors\""),
        "{yaml}"
    );
}

#[test]
fn a_field_that_does_not_map_is_an_error_at_its_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let text = INLINE_SLI.replace(
        "  objectives:\n    - displayName: Foo Total Errors\n      target: 0.98\n",
        "  budgetingMethod: Timeslices\n  objectives:\n    - displayName: Foo Total Errors\n      target: 0.98\n      timeSliceTarget: 0.95\n",
    );
    let out = import(dir.path(), "bad.yaml", &text);
    assert_eq!(out.status.code(), Some(78), "{}", all_output(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.yaml:27:20: foo-slo.spec.budgetingMethod: budgetingMethod `Timeslices` does not map"), "{err}");
    assert!(err.contains("bad.yaml:31:24: foo-slo.spec.objectives[0].timeSliceTarget: `timeSliceTarget` does not map"), "{err}");
    assert!(
        out.stdout.is_empty(),
        "nothing printed for a file that does not map"
    );

    // An unknown field, a threshold metric, and a kind sloburn has no equivalent for.
    let text = "apiVersion: openslo/v1\nkind: DataSource\nmetadata:\n  name: prom\nspec:\n  type: Prometheus\n---\napiVersion: openslo/v1\nkind: SLO\nmetadata:\n  name: x\nspec:\n  service: x\n  indicator:\n    metadata:\n      name: t\n    spec:\n      thresholdMetric:\n        metricSource:\n          type: Prometheus\n  objectives:\n    - target: 0.9\n      op: lte\n  colour: blue\n";
    let out = import(dir.path(), "bad2.yaml", text);
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad2.yaml:2:7: document 1.kind: kind `DataSource` does not map"),
        "{err}"
    );
    assert!(
        err.contains("bad2.yaml:24:3: x.spec.colour: unknown field `colour`"),
        "{err}"
    );
    assert!(
        err.contains("bad2.yaml:19:9: x.spec.indicator.spec.thresholdMetric: a thresholdMetric"),
        "{err}"
    );
    assert!(
        err.contains("bad2.yaml:23:11: x.spec.objectives[0].op: `op` does not map"),
        "{err}"
    );
}

#[test]
fn a_config_reads_openslo_files_from_slos_from() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("openslo.yaml"), INLINE_SLI).unwrap();
    let cfg = "targets:\n  foo:\n    url: http://127.0.0.1:9/foo\nslos_from: [openslo.yaml]\nslos:\n  own:\n    target: foo\n    sli: availability\n    objective: 99\n";
    let path = dir.path().join("sloburn.yaml");
    std::fs::write(&path, cfg).unwrap();
    let check = sloburn().arg("check").arg(&path).output().unwrap();
    let text = all_output(&check);
    assert_eq!(check.status.code(), Some(0), "{text}");
    assert!(text.contains("replaced by sloburn's own probes"), "{text}");
    let rules = crate::support::sloburn_rules([path.as_os_str()]);
    assert!(rules.contains("sloth_slo: \"foo-slo\""), "{rules}");
    assert!(rules.contains("sloth_slo: \"own\""), "{rules}");
    assert!(rules.contains("cpu-usage-breach"), "{rules}");

    // The OpenSLO file's own error, at the slos_from entry and at its place in that file.
    std::fs::write(
        dir.path().join("openslo.yaml"),
        INLINE_SLI.replace(
            "      target: 0.98\n",
            "      target: 0.98\n      op: lte\n",
        ),
    )
    .unwrap();
    let check = sloburn().arg("check").arg(&path).output().unwrap();
    let text = all_output(&check);
    assert_eq!(check.status.code(), Some(78), "{text}");
    assert!(text.contains("sloburn.yaml:4:13: slos_from[0]: "), "{text}");
    assert!(
        text.contains("openslo.yaml:30:11: foo-slo.spec.objectives[0].op: `op` does not map"),
        "{text}"
    );

    // A service that is no target here.
    std::fs::write(
        dir.path().join("openslo.yaml"),
        INLINE_SLI.replace("service: foo", "service: fooo"),
    )
    .unwrap();
    let check = sloburn().arg("check").arg(&path).output().unwrap();
    let text = all_output(&check);
    assert_eq!(check.status.code(), Some(78), "{text}");
    assert!(
        text.contains("its service `fooo` is not a target of this config (did you mean `foo`?)"),
        "{text}"
    );
}

#[test]
fn export_round_trips_the_slos_sloburn_defines() {
    let dir = tempfile::tempdir().unwrap();
    let head = "targets:\n  api:\n    url: http://127.0.0.1:9/api\n  web:\n    url: http://127.0.0.1:9/web\nprofiles:\n  idle:\n    target: api\n    executor: constant-vus\n    vus: 1\n    duration: 1s\n";
    let slos = r#"slos:
  api-availability:
    target: api
    sli: availability
    objective: 99.9
  api-latency:
    target: api
    profiles: [idle]
    sli: { latency: { under: 300ms, failures: exclude } }
    objective: 99.5
    period: 28d
    description: "Checkout answers fast."
    labels: { team: shop }
    alerting:
      tiers:
        - { name: fast, severity: page, long: 1h, short: 5m, factor: 13.44 }
        - { name: slow, severity: ticket, long: 90m, short: 10m, factor: 1.5 }
  web-monthly:
    target: web
    sli: availability
    objective: 99
    period: { calendar: month, timezone: Europe/Berlin }
"#;
    let original = dir.path().join("sloburn.yaml");
    std::fs::write(&original, format!("{head}{slos}")).unwrap();
    let out = sloburn()
        .args(["openslo", "export"])
        .arg(&original)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", all_output(&out));
    let exported = String::from_utf8(out.stdout).unwrap();
    assert!(
        exported.contains("apiVersion: openslo/v1\nkind: SLO\n"),
        "{exported}"
    );

    let back = import(dir.path(), "exported.yaml", &exported);
    assert_eq!(
        back.status.code(),
        Some(0),
        "{exported}\n{}",
        all_output(&back)
    );
    assert!(
        back.stderr.is_empty(),
        "sloburn's own sources map without a warning: {}",
        String::from_utf8_lossy(&back.stderr)
    );
    let imported = String::from_utf8(back.stdout).unwrap();
    let env = crate::support::test_env();
    let a = sloburn::config::from_str(&format!("{head}{slos}"), "a.yaml", dir.path(), &env)
        .unwrap_or_else(|e| panic!("{e}"))
        .config;
    let b = sloburn::config::from_str(&format!("{head}{imported}"), "b.yaml", dir.path(), &env)
        .unwrap_or_else(|e| panic!("{imported}\n{e}"))
        .config;
    // The same SLOs: target, profiles, SLI, objective, period, labels, description; the
    // default tiers come back written out, so compare the engine's definitions too.
    assert_eq!(a.slo_defs(), b.slo_defs(), "{imported}");
    for (name, s) in &a.slos {
        let t = &b.slos[name];
        assert_eq!(format!("{:?}", s.sli), format!("{:?}", t.sli));
        assert_eq!(s.profiles, t.profiles);
        assert_eq!(s.target, t.target);
    }
    assert_eq!(a.slos.len(), b.slos.len());
}

/// An OpenSLO SLO's `metadata.labels` are read as sloburn's own `labels` are: a label the rules
/// set themselves (`severity`, `sloth_*`, `slo`) or that is no Prometheus label name is an
/// error at its key.
#[test]
fn openslo_labels_sloburn_sets_itself_are_errors_at_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let text = INLINE_SLI.replace(
        "  displayName: Foo SLO\n",
        "  displayName: Foo SLO\n  labels:\n    team: checkout\n    severity: page\n    9lives: x\n",
    );
    let out = import(dir.path(), "labels.yaml", &text);
    assert_eq!(out.status.code(), Some(78), "{}", all_output(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "labels.yaml:8:5: foo-slo.metadata.labels.severity: `severity` is set by sloburn; pick another label name",
        "labels.yaml:9:5: foo-slo.metadata.labels.9lives: not a valid Prometheus label name",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(!err.contains("team"), "{err}");
    assert_eq!(err.matches("9lives").count(), 1, "each error once:\n{err}");
}
