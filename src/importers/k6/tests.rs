//! The importer on small scripts: what it converts, what it lists, and that `check` accepts
//! what it prints.

use super::*;

/// Imports `script` (named `file`) and checks the YAML as `sloburn check` does.
fn imported(script: &str, file: &str) -> (String, Vec<String>) {
    let got = import(script, file, &Default::default()).unwrap();
    let checked = crate::config::from_str(
        &got.yaml,
        "imported.yaml",
        std::path::Path::new("."),
        &crate::config::Env::process(),
    );
    assert!(checked.is_ok(), "{:?}\n{}", checked.err(), got.yaml);
    (got.yaml, got.notes)
}

const HEAD: &str = "import http from 'k6/http';\nimport { check } from 'k6';\n";

#[test]
fn a_reassigned_response_keeps_its_own_checks_under_their_names() {
    let (yaml, notes) = imported(
        &format!(
            "{HEAD}export default function () {{\n  let res = http.get('http://h/a');\n  \
             check(res, {{ 'a ok': (r) => r.status === 200 }});\n  res = http.post('http://h/b', \
             JSON.stringify({{ n: 500, f: 0.5 }}));\n  check(res, {{ 'b ok': (r) => r.status === 201, \
             'b also': (r) => r.status === 201 }});\n  check(http.get('http://h/c'), {{ 'c ok': (r) \
             => r.status === 200 }});\n}}\n"
        ),
        "a.js",
    );
    let b = yaml.find("post-2").unwrap();
    let c = yaml.find("get-3").unwrap();
    assert!(
        yaml[..b].contains("{ name: \"a ok\", status: 200 }"),
        "{yaml}"
    );
    assert!(
        yaml[b..c].contains("{ name: \"b ok\", status: 201 }"),
        "{yaml}"
    );
    assert!(
        yaml[b..c].contains("{ name: \"b also\", status: 201 }"),
        "{yaml}"
    );
    assert!(
        yaml[c..].contains("{ name: \"c ok\", status: 200 }"),
        "{yaml}"
    );
    assert!(yaml.contains(r#"{\"n\":500,\"f\":0.5}"#), "{yaml}");
    // No options: k6's default, 1 VU and 1 iteration.
    assert!(
        yaml.contains("executor: per-vu-iterations\n    vus: 1\n    iterations: 1"),
        "{yaml}"
    );
    assert_eq!(notes, vec!["http.* calls: 3 of 3 converted"]);
}

#[test]
fn custom_metrics_and_their_thresholds_are_listed_and_a_key_written_twice_is_one() {
    let (yaml, notes) = imported(
        &format!(
            "{HEAD}import {{ Counter }} from 'k6/metrics';\nconst errors = new Counter('errors');\n\
             export const options = {{ iterations: 1, thresholds: {{\n  http_req_duration: \
             ['p(95)<800'],\n  errors: ['count<1'],\n  http_req_duration: ['p(95)<500'],\n}} }};\n\
             export default function () {{\n  http.get('http://h/a');\n  errors.add(1);\n  \
             console.log('x');\n}}\n"
        ),
        "m.js",
    );
    assert_eq!(yaml.matches("\"http_req_duration\"").count(), 1, "{yaml}");
    assert!(
        yaml.contains("\"http_req_duration\": [\"p(95)<500\"]"),
        "{yaml}"
    );
    assert!(!yaml.contains("errors"), "{yaml}");
    let all = notes.join("\n");
    for want in [
        "line 4: custom metric `errors` (Counter) not converted",
        "line 8: `http_req_duration` is written twice",
        "line 7: threshold on `errors` not copied",
        "line 12: `errors.add` not converted",
        "line 13: `console.log` ignored",
    ] {
        assert!(all.contains(want), "{want}\n{all}");
    }
}

#[test]
fn every_call_not_converted_is_listed_with_its_line_and_counted() {
    let (_, notes) = imported(
        &format!(
            "{HEAD}export default function () {{\n  http.get('http://h/a');\n  if (__VU > 1) {{\n    \
             http.get('http://h/b');\n  }}\n  http.batch([['GET', 'http://h/c']]);\n  \
             http.get(`http://h/${{Math.random()}}`);\n}}\n"
        ),
        "l.js",
    );
    let all = notes.join("\n");
    for want in [
        "line 6: http.get not converted: a statement the importer does not follow",
        "line 8: http.batch not converted",
        "line 9: http.get not converted: the URL: `Math.random()` is computed when k6 runs",
        "http.* calls: 1 of 4 converted",
    ] {
        assert!(all.contains(want), "{want}\n{all}");
    }
}

#[test]
fn typescript_tls_and_redirect_options_and_auth() {
    let (yaml, notes) = imported(
        "import http from 'k6/http';\ninterface P { id: string }\nexport const options: \
         Record<string, unknown> = {\n  iterations: 1,\n  insecureSkipTLSVerify: true,\n  \
         tlsVersion: http.TLS_1_2,\n  maxRedirects: 4,\n};\nexport default function (): void {\n  \
         const p: P = { id: 'x' } as P;\n  http.get(`https://u:pw@h/${p.id}`, { auth: 'digest' \
         });\n}\n",
        "t.ts",
    );
    assert!(
        yaml.contains("tls:\n      insecure: true\n      min_version: \"1.2\""),
        "{yaml}"
    );
    let all = notes.join("\n");
    for want in [
        "line 6: options.tlsVersion max `tls1.2` not converted",
        "line 7: options.maxRedirects not converted",
        "line 11: `auth: 'digest'` not converted",
        "http.* calls: 1 of 1 converted",
    ] {
        assert!(all.contains(want), "{want}\n{all}");
    }
}

/// Hostile scripts: loops that would make a million steps, a function that calls itself, and
/// one that fans out, end at their bounds with a few notes, not a note per turn.
#[test]
fn loops_and_calls_stop_at_their_bounds() {
    let nested = format!(
        "{HEAD}export default function () {{\n  for (let i = 0; i < 100; i++) {{\n    for (let j \
         = 0; j < 100; j++) {{\n      for (let k = 0; k < 100; k++) {{\n        \
         http.get(`http://h/${{i}}/${{j}}/${{k}}`);\n      }}\n    }}\n  }}\n}}\n"
    );
    let got = import(&nested, "n.js", &Default::default()).unwrap();
    assert_eq!(got.yaml.matches("- name: ").count(), state::MAX_STEPS);
    assert!(got.notes.len() < 5, "{:?}", got.notes);
    assert!(
        got.notes[0].contains("stops past 10000 steps"),
        "{:?}",
        got.notes
    );

    let recursive = format!(
        "{HEAD}function f(n) {{ http.get('http://h/r'); f(n); f(n); }}\n\
         export default function () {{ f(1); }}\n"
    );
    let got = import(&recursive, "r.js", &Default::default()).unwrap();
    let steps = got.yaml.matches("- name: ").count();
    assert!(steps <= state::MAX_FOLLOWS, "{steps} steps");
    assert!(got.notes.len() < 5, "{:?}", got.notes);
    assert!(
        got.notes.iter().any(|n| n.contains("calls nested past 16")),
        "{:?}",
        got.notes
    );
    // A function of one expression that calls itself: evaluated as deep as the bound, then
    // the import stops with the line.
    let pure = format!(
        "{HEAD}const g = (x) => g(x) + g(x);\nexport default function () {{\n  \
         http.get(`http://h/${{g(1)}}`);\n}}\n"
    );
    let err = import(&pure, "g.js", &Default::default()).unwrap_err();
    assert!(
        err.starts_with("g.js:3: an expression deeper than 256"),
        "{err}"
    );
}
