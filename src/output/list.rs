//! The run's outputs: the one parser of `--out` values (with `--out-sample` and `--report`),
//! and the list it builds, started, fed and stopped through [`Output`] only.

use super::json::Json;
use super::json_agg::JsonAgg;
use super::report::Report;
use super::sink::{Last, Output, RunInfo};
use super::{opentelemetry, prometheus_rw};
use crate::load::event::Observer;
use std::path::Path;
use std::sync::Arc;

/// A `--out` or `--out-sample` value the user must fix (a usage error).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadSpec(pub String);

/// Every output of one run, in the order given (`--report` last).
#[derive(Default)]
pub struct Outputs {
    list: Vec<Box<dyn Output>>,
}

/// A parsed `--out` value: a file output (created once every value is known good) or a push.
enum Spec {
    Json(String),
    JsonAgg(String),
    Push(Box<dyn Output>),
}

impl Outputs {
    /// Parses every `--out` value (`json=FILE`, `json-agg=FILE`, `prometheus-rw=URL…`,
    /// `opentelemetry[=URL…]`) and `--out-sample`, then creates the files: a bad value is a
    /// [`BadSpec`] and creates nothing; a file that cannot be created is an I/O error.
    pub fn open(
        specs: &[String],
        sample: Option<f64>,
        report: Option<&Path>,
    ) -> anyhow::Result<Outputs> {
        let sample = sample.unwrap_or(1.0);
        if !(sample > 0.0 && sample <= 1.0) {
            return Err(BadSpec(format!(
                "--out-sample {sample}: give a fraction in (0, 1], e.g. 0.1"
            ))
            .into());
        }
        let mut parsed = Vec::new();
        let mut seen = Vec::new();
        for spec in specs {
            let (kind, parsed_one) = parse(spec)?;
            if seen.contains(&kind) {
                let kind = match parsed_one {
                    Spec::Push(_) => kind.to_string(),
                    _ => format!("{kind}="),
                };
                return Err(BadSpec(format!("--out {kind} is given twice")).into());
            }
            seen.push(kind);
            parsed.push(parsed_one);
        }
        let mut list = Vec::new();
        for spec in parsed {
            list.push(match spec {
                Spec::Json(path) => Box::new(Json::create(&path, sample)?) as Box<dyn Output>,
                Spec::JsonAgg(path) => Box::new(JsonAgg::create(&path)?),
                Spec::Push(push) => push,
            });
        }
        if let Some(path) = report {
            list.push(Box::new(Report::new(path.to_path_buf())));
        }
        Ok(Outputs { list })
    }

    /// Starts every output; returns the observers that take the run's samples.
    pub fn start(&mut self, run: &RunInfo<'_>) -> anyhow::Result<Vec<Arc<dyn Observer>>> {
        let mut observers = Vec::new();
        for o in &mut self.list {
            observers.extend(o.start(run)?);
        }
        Ok(observers)
    }

    /// Stops every output, in order, with the run's final figures (call once the run's
    /// observers are gone): what they said for stderr, and the first error, after every
    /// output had its turn.
    pub async fn stop(&mut self, last: &Last<'_>) -> (Vec<String>, anyhow::Result<()>) {
        let mut said = Vec::new();
        let mut failed = None;
        for o in &mut self.list {
            match o.stop(last).await {
                Ok(lines) => said.extend(lines),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        (said, failed.map_or(Ok(()), Err))
    }
}

/// One `--out` value: its kind and what it asks for.
fn parse(spec: &str) -> Result<(&str, Spec), BadSpec> {
    let (kind, value) = spec.split_once('=').unwrap_or((spec, ""));
    let bad_push = |value: &str, e: String| BadSpec(format!("--out {kind}={value}: {e}"));
    let parsed = match kind {
        "json" | "json-agg" if value.is_empty() => {
            return Err(BadSpec(format!(
                "--out `{spec}`: give a file, as in {kind}=FILE"
            )));
        }
        "json" => Spec::Json(value.to_string()),
        "json-agg" => Spec::JsonAgg(value.to_string()),
        prometheus_rw::NAME => Spec::Push(Box::new(
            prometheus_rw::output(value).map_err(|e| bad_push(value, e))?,
        )),
        opentelemetry::NAME => {
            // `opentelemetry` alone goes where the OpenTelemetry SDKs send by default.
            let value = match spec.split_once('=') {
                Some(_) => value.to_string(),
                None => opentelemetry::default_endpoint(),
            };
            Spec::Push(Box::new(
                opentelemetry::output(&value).map_err(|e| bad_push(&value, e))?,
            ))
        }
        _ => {
            return Err(BadSpec(format!(
                "--out `{spec}`: use json=FILE (k6's NDJSON samples), json-agg=FILE \
                 (one aggregate line a second), prometheus-rw=URL (remote write) or \
                 opentelemetry[=URL] (OTLP/HTTP metrics)"
            )));
        }
    };
    Ok((kind, parsed))
}

/// `--out` values as the summary shows them: a push's URL without its user-info, where a
/// password may sit.
pub fn shown(specs: &[String]) -> Vec<String> {
    specs
        .iter()
        .map(|spec| match spec.split_once('=') {
            Some((kind @ (prometheus_rw::NAME | opentelemetry::NAME), url)) => {
                match url.split_once("://") {
                    Some((scheme, rest)) => {
                        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
                        let host = rest[..end]
                            .rsplit_once('@')
                            .map_or(&rest[..end], |(_, h)| h);
                        format!("{kind}={scheme}://{host}{}", &rest[end..])
                    }
                    None => spec.clone(),
                }
            }
            _ => spec.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bad(specs: &[&str], sample: Option<f64>) -> String {
        let specs: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
        match Outputs::open(&specs, sample, None) {
            Ok(_) => panic!("{specs:?} opened"),
            Err(e) => match e.downcast::<BadSpec>() {
                Ok(b) => b.0,
                Err(e) => panic!("{specs:?}: not a usage error: {e:#}"),
            },
        }
    }

    #[test]
    fn a_bad_value_is_a_usage_error_that_creates_no_file() {
        let dir = std::env::temp_dir().join(format!("sloburn-outs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = dir.join("first.ndjson");
        let first_spec = format!("json={}", first.display());
        let second_spec = format!("json={}", dir.join("second.ndjson").display());
        let e = bad(&[&first_spec, &second_spec], None);
        assert_eq!(e, "--out json= is given twice");
        let e = bad(&[&first_spec, "csv=x.csv"], None);
        assert!(e.starts_with("--out `csv=x.csv`: use json=FILE"), "{e}");
        assert!(
            !first.exists(),
            "a file was created before every value was read"
        );
        let _ = std::fs::remove_dir_all(&dir);
        let rw = "prometheus-rw=http://127.0.0.1:9/api/v1/write";
        assert_eq!(bad(&[rw, rw], None), "--out prometheus-rw is given twice");
        assert_eq!(
            bad(&["json-agg"], None),
            "--out `json-agg`: give a file, as in json-agg=FILE"
        );
        for sample in [0.0, 1.5, f64::NAN] {
            assert!(
                bad(&[], Some(sample)).contains("give a fraction in (0, 1]"),
                "{sample}"
            );
        }
    }

    #[test]
    fn the_summary_shows_a_push_url_without_its_user_info() {
        let shown = shown(&[
            "prometheus-rw=https://u:pw@m:9090/api/v1/write?interval=1s".into(),
            "opentelemetry=http://c:4318".into(),
            "json=out.ndjson".into(),
        ]);
        assert_eq!(
            shown,
            [
                "prometheus-rw=https://m:9090/api/v1/write?interval=1s",
                "opentelemetry=http://c:4318",
                "json=out.ndjson",
            ]
        );
    }
}
