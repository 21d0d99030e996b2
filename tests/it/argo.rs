//! Argo Rollouts with sloburn: the `AnalysisTemplate` of `deploy/examples/argo/` as Argo reads
//! it. Its web metrics are fetched from a real in-process daemon (a healthy SLO and profile,
//! and a burning one against a target failing half its requests), `jsonPath` applied and the
//! `successCondition`/`failureCondition` evaluated by a small evaluator of the `expr` subset
//! the template uses; its job metric's `sloburn run` is run for real and its exit code is the
//! verdict; it passes Argo Rollouts' CRD schema (npm `@kubernetes-models/argo-rollouts`,
//! installed by `scripts/install-argo-models.sh`; no PyPI package ships it), has the fields
//! Argo's docs require, and the Job inside passes the Kubernetes schemas.

use super::flagger::{config, get_json, send, serve};
use super::support::{ADMIN_TOKEN, all_output, root, runtime, sloburn, spawn_target, which};
use serde_json::{Value, json};
use sloburn::target::TargetOptions;
use std::collections::BTreeMap;
use std::time::Duration;

fn template() -> Value {
    let path = root().join("deploy/examples/argo/analysistemplate.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `{{args.NAME}}` replaced from `args`; panics on an argument the test did not give.
fn substitute(text: &str, args: &BTreeMap<&str, String>) -> String {
    let re = regex::Regex::new(r"\{\{\s*args\.([A-Za-z0-9_-]+)\s*\}\}").unwrap();
    re.replace_all(text, |c: &regex::Captures| {
        args.get(&c[1])
            .unwrap_or_else(|| panic!("no value for args.{}", &c[1]))
            .clone()
    })
    .into_owned()
}

/// Kubernetes-style JSONPath, the subset the template uses: `{$.a.b[0]}`.
fn json_path(v: &Value, path: &str) -> Value {
    let inner = path
        .strip_prefix("{$")
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or_else(|| panic!("jsonPath `{path}` is not `{{$...}}`"));
    let re = regex::Regex::new(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]").unwrap();
    let mut at = v.clone();
    let mut consumed = 0;
    for c in re.captures_iter(inner) {
        let m = c.get(0).unwrap();
        assert_eq!(m.start(), consumed, "jsonPath `{path}`: unsupported part");
        consumed = m.end();
        at = match (c.get(1), c.get(2)) {
            (Some(field), _) => at[field.as_str()].clone(),
            (_, Some(i)) => at[i.as_str().parse::<usize>().unwrap()].clone(),
            _ => unreachable!(),
        };
    }
    assert_eq!(consumed, inner.len(), "jsonPath `{path}`: unsupported part");
    at
}

// ---------------------------------------------------------------------------------------------
// The `expr` subset: `a && b`, `a || b`, comparisons, `result.x["k"][0]`, numbers, strings,
// booleans.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num(f64),
    Str(String),
    Op(&'static str),
}

fn lex(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            out.push(Tok::Num(s[start..i].parse().unwrap()));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_string()));
        } else if c == '"' {
            let end = s[i + 1..].find('"').expect("closed string") + i + 1;
            out.push(Tok::Str(s[i + 1..end].to_string()));
            i = end + 1;
        } else {
            let op = [
                "&&", "||", "==", "!=", "<=", ">=", "<", ">", ".", "[", "]", "(", ")",
            ]
            .into_iter()
            .find(|op| s[i..].starts_with(op))
            .unwrap_or_else(|| panic!("unsupported character `{c}` in `{s}`"));
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    out
}

struct Eval<'a> {
    toks: Vec<Tok>,
    at: usize,
    result: &'a Value,
}

impl Eval<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }
    fn eat(&mut self, op: &str) -> bool {
        let hit = matches!(self.peek(), Some(Tok::Op(o)) if *o == op);
        if hit {
            self.at += 1;
        }
        hit
    }
    fn or(&mut self) -> Value {
        let mut v = self.and();
        while self.eat("||") {
            let r = self.and();
            v = json!(truthy(&v) || truthy(&r));
        }
        v
    }
    fn and(&mut self) -> Value {
        let mut v = self.cmp();
        while self.eat("&&") {
            let r = self.cmp();
            v = json!(truthy(&v) && truthy(&r));
        }
        v
    }
    fn cmp(&mut self) -> Value {
        let l = self.operand();
        let op = match self.peek() {
            Some(Tok::Op(op)) if ["==", "!=", "<", "<=", ">", ">="].contains(op) => *op,
            _ => return l,
        };
        self.at += 1;
        let r = self.operand();
        json!(match op {
            "==" => l == r || (l.is_number() && l.as_f64() == r.as_f64()),
            "!=" => !(l == r || (l.is_number() && l.as_f64() == r.as_f64())),
            _ => {
                let (a, b) = (
                    l.as_f64().unwrap_or_else(|| panic!("`{l}` is no number")),
                    r.as_f64().unwrap_or_else(|| panic!("`{r}` is no number")),
                );
                match op {
                    "<" => a < b,
                    "<=" => a <= b,
                    ">" => a > b,
                    _ => a >= b,
                }
            }
        })
    }
    fn operand(&mut self) -> Value {
        let tok = self.peek().cloned().expect("an operand");
        self.at += 1;
        let mut v = match tok {
            Tok::Num(n) => return json!(n),
            Tok::Str(s) => return json!(s),
            Tok::Ident(id) if id == "true" => return json!(true),
            Tok::Ident(id) if id == "false" => return json!(false),
            Tok::Ident(id) if id == "result" => self.result.clone(),
            Tok::Op("(") => {
                let v = self.or();
                assert!(self.eat(")"));
                return v;
            }
            other => panic!("unsupported operand {other:?}"),
        };
        loop {
            if self.eat(".") {
                match self.peek().cloned() {
                    Some(Tok::Ident(f)) => {
                        self.at += 1;
                        v = v[f.as_str()].clone();
                    }
                    other => panic!("field name expected, got {other:?}"),
                }
            } else if self.eat("[") {
                match self.peek().cloned() {
                    Some(Tok::Str(k)) => v = v[k.as_str()].clone(),
                    Some(Tok::Num(n)) => v = v[n as usize].clone(),
                    other => panic!("index expected, got {other:?}"),
                }
                self.at += 1;
                assert!(self.eat("]"));
            } else {
                return v;
            }
        }
    }
}

fn truthy(v: &Value) -> bool {
    v.as_bool()
        .unwrap_or_else(|| panic!("`{v}` is not a boolean"))
}

/// Evaluates an Argo condition with `result` bound.
fn condition(expr: &str, result: &Value) -> bool {
    let mut e = Eval {
        toks: lex(expr),
        at: 0,
        result,
    };
    let v = e.or();
    assert_eq!(e.at, e.toks.len(), "`{expr}`: trailing tokens");
    truthy(&v)
}

#[test]
fn the_condition_evaluator_reads_what_argo_reads() {
    let r = json!({"a": {"b": [1, 2.5]}, "s": "passed", "m": {"5m": 3}});
    assert!(condition("result.a.b[1] == 2.5", &r));
    assert!(condition(
        r#"result.s == "passed" && result.m["5m"] < 14.4"#,
        &r
    ));
    assert!(!condition(
        r#"result.s != "passed" || result.a.b[0] > 1"#,
        &r
    ));
    assert!(condition("(result.a.b[0] >= 1)", &r));
    assert_eq!(json_path(&r, "{$.a.b[0]}"), json!(1));
    assert_eq!(json_path(&r, "{$.s}"), json!("passed"));
}

// ---------------------------------------------------------------------------------------------

/// The verdict of a web metric as Argo gives it: Successful, Failed or Inconclusive.
fn measure(metric: &Value, body: &Value) -> &'static str {
    let web = &metric["provider"]["web"];
    let result = match web["jsonPath"].as_str() {
        Some(p) => json_path(body, p),
        None => body.clone(),
    };
    let success = metric["successCondition"]
        .as_str()
        .map(|c| condition(c, &result));
    let failure = metric["failureCondition"]
        .as_str()
        .map(|c| condition(c, &result));
    match (success, failure) {
        (Some(true), _) => "Successful",
        (_, Some(true)) => "Failed",
        (Some(false), None) => "Failed",
        _ => "Inconclusive",
    }
}

#[test]
fn argo_web_metrics_pass_on_a_healthy_slo_and_run_and_fail_on_a_burning_one() {
    runtime().block_on(async {
        let (target, stop) = spawn_target(TargetOptions::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let d = serve(&config(target, &dir.path().join("data"), ""), dir.path()).await;
        let base = format!("http://{}", d.addr);
        let auth = format!("Bearer {ADMIN_TOKEN}");
        let mut ids = BTreeMap::new();
        for p in ["canary", "canary-flaky"] {
            let url = format!("{base}/api/profiles/{p}/run");
            let (code, text) = send("POST", &url, &[("authorization", &auth)], "").await;
            assert_eq!(code, 202, "{text}");
            let v: Value = serde_json::from_str(&text).unwrap();
            ids.insert(p, v["run"].as_u64().unwrap());
        }
        // Both runs ended and their events are in the SLOs' windows (the one-second tick).
        let mut ready = false;
        for _ in 0..150 {
            let runs = get_json(&format!("{base}/api/runs")).await;
            let ended = runs["runs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["result"] != "running");
            let slos = get_json(&format!("{base}/api/slos")).await;
            let counted = slos["slos"].as_array().unwrap().iter().all(|s| {
                let w = &s["windows"][0];
                w["good"].as_u64().unwrap_or(0) + w["bad"].as_u64().unwrap_or(0) >= 40
            });
            if ended && counted {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(ready, "runs or SLO windows never complete");

        // `/api/slos/{name}` is the element of `/api/slos`: the same fields.
        let all = get_json(&format!("{base}/api/slos")).await;
        for s in all["slos"].as_array().unwrap() {
            let name = s["name"].as_str().unwrap();
            let one = get_json(&format!("{base}/api/slos/{name}")).await;
            let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(&one), keys(s));
            assert_eq!(one["name"], s["name"]);
            assert_eq!(keys(&one["burn_rates"]), keys(&s["burn_rates"]));
            assert!(one["burn_rates"]["5m"].is_number(), "{one}");
        }
        let (code, text) = send("GET", &format!("{base}/api/slos/nope"), &[], "").await;
        assert_eq!(code, 404, "{text}");

        let t = template();
        let metrics = t["spec"]["metrics"].as_array().unwrap();
        let web: Vec<&Value> = metrics
            .iter()
            .filter(|m| m["provider"]["web"].is_object())
            .collect();
        assert!(web.len() >= 3, "{web:?}");
        assert!(
            web.iter()
                .any(|m| m["provider"]["web"]["jsonPath"].is_string())
        );
        for (slo, profile, want) in [
            ("api-availability", "canary", "Successful"),
            ("flaky-availability", "canary-flaky", "Failed"),
        ] {
            let args = BTreeMap::from([
                ("sloburn", base.clone()),
                ("slo", slo.to_string()),
                ("profile", profile.to_string()),
            ]);
            for m in &web {
                let url = substitute(m["provider"]["web"]["url"].as_str().unwrap(), &args);
                let body = get_json(&url).await;
                let got = measure(m, &body);
                assert_eq!(got, want, "{} on {url}: {body}", m["name"]);
            }
            // `/api/runs/{id}` holds the same record at `{$.run}`.
            let last_run = web.iter().find(|m| m["name"] == "last-run").unwrap();
            let mut by_id = (*last_run).clone();
            by_id["provider"]["web"]["jsonPath"] = json!("{$.run}");
            let body = get_json(&format!("{base}/api/runs/{}", ids[profile])).await;
            assert_eq!(measure(&by_id, &body), want, "{body}");
        }
        // A run in progress is inconclusive, neither success nor failure.
        let last_run = web.iter().find(|m| m["name"] == "last-run").unwrap();
        let running = json!({"runs": [{"result": "running", "failed_ratio": 0.0}]});
        assert_eq!(measure(last_run, &running), "Inconclusive");
        d.shutdown().await;
        stop.cancel();
    });
}

#[test]
fn argo_job_metric_runs_sloburn_and_its_exit_code_is_the_verdict() {
    let t = template();
    let job = t["spec"]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["provider"]["job"].is_object())
        .expect("a job metric")["provider"]["job"]
        .clone();
    let pod = &job["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(
        job["spec"]["backoffLimit"], 0,
        "a failed verdict is not retried"
    );
    let container = &pod["containers"][0];
    let args: Vec<String> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    assert_eq!(args[0], "run");
    let background = super::support::BackgroundTarget::start(TargetOptions::default());
    let target = background.addr;
    for (path, want) in [("/api", 0), ("/api?error_ratio=0.5", 99)] {
        let values = BTreeMap::from([
            ("canary-url", format!("http://{target}{path}")),
            ("duration", "2s".to_string()),
        ]);
        let argv: Vec<String> = args.iter().map(|a| substitute(a, &values)).collect();
        let out = sloburn().args(&argv).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(want),
            "{argv:?}\n{}",
            all_output(&out)
        );
    }
    // The Job Argo creates from it passes the Kubernetes schemas.
    let mut spec = job["spec"].clone();
    spec["template"]["metadata"] =
        json!({"labels": {"app.kubernetes.io/name": "sloburn-analysis"}});
    let doc = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "sloburn-load-test", "namespace": "shop"},
        "spec": spec,
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.yaml");
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = std::process::Command::new(which("kubernetes-validate"))
        .args(["--strict", "--no-warn", "-k", "1.33.0"])
        .arg(&file)
        .output()
        .unwrap();
    let text = all_output(&out);
    assert!(
        out.status.success() && text.contains(" passed for resource "),
        "{text}"
    );
}

#[test]
fn argo_analysis_template_has_the_fields_argo_requires() {
    let t = template();
    assert_eq!(t["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(t["kind"], "AnalysisTemplate");
    assert!(t["metadata"]["name"].is_string());
    let declared: Vec<&str> = t["spec"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    let text =
        std::fs::read_to_string(root().join("deploy/examples/argo/analysistemplate.yaml")).unwrap();
    let re = regex::Regex::new(r"\{\{\s*args\.([A-Za-z0-9_-]+)\s*\}\}").unwrap();
    for c in re.captures_iter(&text) {
        assert!(declared.contains(&&c[1]), "args.{} is not declared", &c[1]);
    }
    let metrics = t["spec"]["metrics"].as_array().unwrap();
    let mut names = std::collections::BTreeSet::new();
    for m in metrics {
        let name = m["name"].as_str().expect("every metric has a name");
        assert!(names.insert(name), "metric {name} twice");
        let provider = m["provider"].as_object().expect("a provider");
        assert_eq!(provider.len(), 1, "{name}: one provider");
        if let Some(web) = provider.get("web") {
            let url = web["url"].as_str().unwrap();
            assert!(url.starts_with("{{args.sloburn}}/api/"), "{url}");
            assert!(
                m["successCondition"].is_string(),
                "{name}: successCondition"
            );
            if let Some(p) = web["jsonPath"].as_str() {
                assert!(p.starts_with("{$") && p.ends_with('}'), "{p}");
            }
            assert!(web["timeoutSeconds"].as_u64().is_some_and(|s| s > 0));
        } else {
            let job = &provider["job"]["spec"]["template"]["spec"];
            assert!(job["containers"][0]["image"].is_string(), "{name}");
        }
        for key in ["interval", "initialDelay"] {
            if let Some(d) = m[key].as_str() {
                sloburn::units::parse_duration(d).unwrap_or_else(|e| panic!("{name}.{key}: {e}"));
            }
        }
    }
}

/// The folder `scripts/install-argo-models.sh` installs to (it prints it).
fn argo_models() -> std::path::PathBuf {
    let out = std::process::Command::new("bash")
        .arg(root().join("scripts/install-argo-models.sh"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", all_output(&out));
    std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// `validate.mjs` on `doc`: (valid, output).
fn argo_schema_check(dir: &std::path::Path, doc: &Value) -> (bool, String) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("t.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = std::process::Command::new("node")
        .arg(dir.join("validate.mjs"))
        .arg(&file)
        .output()
        .unwrap();
    let text = all_output(&out);
    (out.status.success() && text.trim() == "valid", text)
}

#[test]
fn argo_analysis_template_passes_argos_crd_schema() {
    let dir = argo_models();
    let t = template();
    let (ok, out) = argo_schema_check(&dir, &t);
    assert!(ok, "{out}");
    // The same validator refuses a condition that is no string and a metric without provider.
    let mut bad = t.clone();
    bad["spec"]["metrics"][0]["successCondition"] = json!(14.4);
    let (ok, out) = argo_schema_check(&dir, &bad);
    assert!(!ok && out.contains("successCondition"), "{out}");
    let mut bad = t.clone();
    bad["spec"]["metrics"][1]
        .as_object_mut()
        .unwrap()
        .remove("provider");
    let (ok, out) = argo_schema_check(&dir, &bad);
    assert!(!ok && out.contains("provider"), "{out}");
}
