//! Issue 49: locations with a quorum. Config errors, the quorum SLO of three daemons (a, b, c)
//! against one target that fails only some locations' requests, a killed location, the rules
//! under promtool, and locations found by DNS.

use crate::support::root;

/// `check`'s report of `yaml`: its exit code and text.
fn check(yaml: &str) -> (i32, String) {
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let result = sloburn::config::from_str(yaml, "loc.yaml", &root(), &env);
    let mut out = Vec::new();
    let code = sloburn::config::report("loc.yaml", result, &mut out);
    (code, String::from_utf8(out).unwrap())
}

const BASE: &str = "targets:\n  t: { url: http://127.0.0.1:1/ }\n";

fn slo_with(quorum: &str) -> String {
    format!("slos:\n  avail:\n    target: t\n    sli: availability\n    objective: 99\n{quorum}")
}

#[test]
fn each_bad_quorum_or_location_is_a_positioned_check_error() {
    // K larger than N.
    let (code, text) = check(&format!(
        "server:\n  location: a\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: b, url: http://127.0.0.1:2 }}\n{BASE}{}",
        slo_with("    quorum: 3\n")
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains(
            "loc.yaml:13:13: slos.avail.quorum: quorum 3 of 2 location(s) (a, b): at most 2"
        ),
        "{text}"
    );
    // A location listed twice.
    let (code, text) = check(&format!(
        "server:\n  location: a\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: a, url: http://127.0.0.1:2 }}\n{BASE}"
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:5:15: server.locations[1].name: location `a` is listed twice"),
        "{text}"
    );
    // This daemon's own name missing.
    let (code, text) = check(&format!(
        "server:\n  location: c\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: b, url: http://127.0.0.1:2 }}\n{BASE}"
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:4:5: server.locations: this daemon's location `c` is not listed (locations: a, b)"),
        "{text}"
    );
    // `quorum` without `server.location`.
    let (code, text) = check(&format!("{BASE}{}", slo_with("    quorum: 1\n")));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:8:13: slos.avail.quorum: `quorum` needs `server.location`"),
        "{text}"
    );
    // A bucket that does not divide the hour, and one without a quorum.
    let (code, text) = check(&format!("{BASE}{}", slo_with("    quorum_bucket: 7m\n")));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:8:20: slos.avail.quorum_bucket: a quorum bucket is whole minutes"),
        "{text}"
    );
    // `locations` without `location`, and a bad entry URL.
    let (code, text) = check(&format!(
        "server:\n  locations:\n    - {{ name: a, url: ftp://x }}\n{BASE}"
    ));
    assert_eq!(code, sloburn::exit::CONFIG, "{text}");
    assert!(
        text.contains("loc.yaml:3:23: server.locations[0].url: `ftp://x` is not an API address"),
        "{text}"
    );
    assert!(
        text.contains("server.locations: `server.locations` needs `server.location`"),
        "{text}"
    );
}

#[test]
fn a_good_quorum_config_reads_with_its_derived_bucket() {
    let yaml = format!(
        "server:\n  location: b\n  locations:\n    - {{ name: a, url: http://127.0.0.1:1 }}\n    - {{ name: b, url: dns+http://sloburn.b.svc:9090 }}\n  resolver: 127.0.0.1:5353\n{BASE}profiles:\n  p: {{ target: t, executor: constant-arrival-rate, rate: 5/s, duration: 1m }}\n{}",
        slo_with("    quorum: 2\n")
    );
    let env = sloburn::config::Env::from_map(Default::default(), 1);
    let loaded = sloburn::config::from_str(&yaml, "loc.yaml", &root(), &env).unwrap();
    let cfg = &loaded.config;
    assert_eq!(cfg.server.location.as_deref(), Some("b"));
    assert_eq!(cfg.server.locations[1].url, "dns+http://sloburn.b.svc:9090");
    assert_eq!(cfg.server.resolver, Some("127.0.0.1:5353".parse().unwrap()));
    let q = cfg.slos["avail"].quorum.unwrap();
    assert_eq!(q.k, 2);
    // 99 %: 100 events; 5/s brings 300 a minute.
    assert_eq!(q.bucket, std::time::Duration::from_secs(60));
}
