//! The command-line habits k6 users bring: `-e KEY=VALUE` (values for `${env:KEY}`), `--tag
//! NAME=VALUE` (a tag on every sample), and a k6 script given where a config goes.

use std::collections::BTreeMap;
use std::path::Path;

/// Tags sloburn itself puts on samples or series: a `--tag` may not take their names.
const RESERVED_TAGS: &[&str] = &[
    "check",
    "error",
    "error_code",
    "expected_response",
    "group",
    "journey",
    "le",
    "method",
    "name",
    "profile",
    "proto",
    "quantile",
    "scenario",
    "status",
    "step",
    "target",
    "testid",
    "url",
];

/// The most `-e` or `--tag` values a run takes, and the longest value: a command line, not a
/// data file.
const MAX_PAIRS: usize = 64;
const MAX_VALUE: usize = 4096;

/// `KEY=VALUE` pairs of a repeated flag, each key checked by `key_ok`.
fn pairs(
    flag: &str,
    given: &[String],
    key_ok: impl Fn(&str) -> Result<(), String>,
) -> Result<Vec<(String, String)>, String> {
    if given.len() > MAX_PAIRS {
        return Err(format!(
            "{flag}: at most {MAX_PAIRS} values, found {}",
            given.len()
        ));
    }
    given
        .iter()
        .map(|g| {
            let (k, v) = g
                .split_once('=')
                .ok_or_else(|| format!("{flag} `{g}`: write it as KEY=VALUE"))?;
            key_ok(k).map_err(|why| format!("{flag} `{k}`: {why}"))?;
            if v.len() > MAX_VALUE {
                return Err(format!(
                    "{flag} `{k}`: the value is {} bytes, over the {MAX_VALUE}-byte limit",
                    v.len()
                ));
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

/// `-e KEY=VALUE`: what `${env:KEY}` reads in the config, `--url` and `-H`, over the process's
/// environment (a later `-e` of the same key wins, as in k6).
pub(super) fn env_values(given: &[String]) -> Result<BTreeMap<String, String>, String> {
    let valid = |k: &str| {
        if !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            Ok(())
        } else {
            Err("a variable name is letters, digits and `_`, not starting with a digit".into())
        }
    };
    Ok(pairs("-e", given, valid)?.into_iter().collect())
}

/// `--tag NAME=VALUE`: a tag on every sample of `--out json` and a label on every series that
/// `--out prometheus-rw` and `opentelemetry` push. The name is a Prometheus label name that
/// sloburn does not use itself.
pub(super) fn tags(given: &[String]) -> Result<Vec<(String, String)>, String> {
    let valid = |k: &str| {
        if !crate::names::label_name_is_valid(k) || k.starts_with("__") {
            Err("a tag name is letters, digits and `_`, not starting with a digit or `__`".into())
        } else if RESERVED_TAGS.contains(&k) {
            Err(format!("sloburn sets `{k}` itself; pick another name"))
        } else {
            Ok(())
        }
    };
    let mut tags = pairs("--tag", given, valid)?;
    tags.sort();
    if let Some(w) = tags.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(format!("--tag `{}` is given twice", w[0].0));
    }
    Ok(tags)
}

/// Flags whose values may hold a secret: a report shows them as `…` (a header and `-e` keep
/// their name).
const SECRET_FLAGS: &[&str] = &["-H", "--header", "-e", "--env", "--body", "--collect-token"];

/// The command line as a report shows it: the values of [`SECRET_FLAGS`] replaced by `…`, and
/// every URL without its user part and with its query values redacted.
pub(super) fn shown_command(args: impl IntoIterator<Item = String>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut secret_next: Option<String> = None;
    for (i, arg) in args.into_iter().enumerate() {
        let shown = if i == 0 {
            "sloburn".to_string()
        } else if let Some(flag) = secret_next.take() {
            hide(&flag, &arg)
        } else if let Some((flag, value)) = arg
            .split_once('=')
            .filter(|(f, _)| f.starts_with("--") && SECRET_FLAGS.contains(f))
        {
            format!("{flag}={}", hide(flag, value))
        } else if SECRET_FLAGS.contains(&arg.as_str()) {
            secret_next = Some(arg.clone());
            arg
        } else if arg.contains("://") {
            crate::telemetry::redact::url_full(&arg)
        } else {
            arg
        };
        out.push(quote(&shown));
    }
    out.join(" ")
}

/// A secret flag's value as shown: `Name: …` for a header, `KEY=…` for `-e`, else `…`.
fn hide(flag: &str, value: &str) -> String {
    match flag {
        "-H" | "--header" => value
            .split_once(':')
            .map_or("…".into(), |(name, _)| format!("{name}: …")),
        "-e" | "--env" => value
            .split_once('=')
            .map_or("…".into(), |(key, _)| format!("{key}=…")),
        _ => "…".into(),
    }
}

/// Shell quoting for an argument that needs it.
fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+…".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// A k6 script given where a config goes: point to the importer rather than fail on its
/// JavaScript as YAML.
pub(super) fn not_a_script(file: &Path) -> Result<(), String> {
    let script = file
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["js", "mjs", "cjs", "ts"].contains(&e.to_ascii_lowercase().as_str()));
    if script {
        let f = file.display();
        return Err(format!(
            "{f} is a k6 script; sloburn runs a YAML config: convert it with \
             `sloburn import k6 {f} > sloburn.yaml`, then `sloburn run sloburn.yaml`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn env_values_are_key_value_and_the_last_wins() {
        let env = env_values(&s(&["A=1", "TOKEN=x=y", "A=2"])).unwrap();
        assert_eq!(env.get("A").map(String::as_str), Some("2"));
        assert_eq!(env.get("TOKEN").map(String::as_str), Some("x=y"));
        assert!(
            env_values(&s(&["novalue"]))
                .unwrap_err()
                .contains("KEY=VALUE")
        );
        assert!(env_values(&s(&["1A=x"])).is_err());
        assert!(env_values(&s(&["A-B=x"])).is_err());
    }

    #[test]
    fn tags_are_label_names_sloburn_does_not_use() {
        assert_eq!(
            tags(&s(&["team=payments", "env=staging"])).unwrap(),
            [
                ("env".to_string(), "staging".to_string()),
                ("team".to_string(), "payments".to_string())
            ]
        );
        assert!(
            tags(&s(&["profile=x"]))
                .unwrap_err()
                .contains("sets `profile` itself")
        );
        assert!(tags(&s(&["__name__=x"])).is_err());
        assert!(tags(&s(&["a b=x"])).is_err());
        assert!(tags(&s(&["a=1", "a=2"])).unwrap_err().contains("twice"));
        let many: Vec<String> = (0..=MAX_PAIRS).map(|i| format!("t{i}=x")).collect();
        assert!(tags(&many).is_err());
    }

    #[test]
    fn the_shown_command_hides_every_secret_value() {
        let args = [
            "target/debug/sloburn",
            "run",
            "--url",
            "https://user:pw@api.test/x?key=k3y",
            "-H",
            "Authorization: Bearer s3cret",
            "-e",
            "TOKEN=t0ken",
            "--body={\"password\":\"hunter2\"}",
            "--collect-token",
            "c0llect",
            "--rate",
            "50/s",
        ]
        .map(String::from);
        let shown = shown_command(args);
        for secret in ["pw", "k3y", "s3cret", "t0ken", "hunter2", "c0llect"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert_eq!(
            shown,
            "sloburn run --url 'https://REDACTED:REDACTED@api.test/x?key=REDACTED' -H \
             'Authorization: …' -e TOKEN=… --body=… --collect-token … --rate 50/s"
        );
    }

    #[test]
    fn a_k6_script_points_to_the_importer() {
        let e = not_a_script(Path::new("load/test.js")).unwrap_err();
        assert!(e.contains("sloburn import k6 load/test.js"), "{e}");
        assert!(not_a_script(Path::new("test.TS")).is_err());
        assert!(not_a_script(Path::new("sloburn.yaml")).is_ok());
    }
}
