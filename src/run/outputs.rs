//! The run's outputs: `--summary-export`, `--out json`, `--out json-agg` files and the
//! `--out prometheus-rw` and `--out opentelemetry` pushes (`remote_write`).

use super::remote_write::{RwOptions, Wire};
use super::*;
use anyhow::Context;

/// Where `--out` goes: k6's NDJSON, the per-second aggregate, or both.
pub(super) struct Outs {
    pub(super) json: Option<String>,
    pub(super) agg: Option<String>,
    /// `--out prometheus-rw` and `--out opentelemetry`: at most one of each.
    pub(super) pushes: Vec<(Wire, RwOptions)>,
    pub(super) sample: f64,
}

impl Outs {
    pub(super) fn parse(specs: &[String], sample: f64) -> anyhow::Result<Outs> {
        if !(sample > 0.0 && sample <= 1.0) {
            return Err(Usage(format!(
                "--out-sample {sample}: give a fraction in (0, 1], e.g. 0.1"
            ))
            .into());
        }
        let mut outs = Outs {
            json: None,
            agg: None,
            pushes: Vec::new(),
            sample,
        };
        for spec in specs {
            let (kind, path) = spec.split_once('=').unwrap_or((spec, ""));
            let wire = match kind {
                "prometheus-rw" => Some(Wire::RemoteWrite),
                "opentelemetry" => Some(Wire::Otlp),
                _ => None,
            };
            if let Some(wire) = wire {
                // `opentelemetry` alone goes where the OpenTelemetry SDKs send by default.
                let value = match (wire, spec.split_once('=')) {
                    (Wire::Otlp, None) => std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
                        .unwrap_or_else(|_| "http://localhost:4318".into()),
                    _ => path.to_string(),
                };
                let opts = RwOptions::parse(&value, wire)
                    .map_err(|e| Usage(format!("--out {kind}={value}: {e}")))?;
                if outs.pushes.iter().any(|(w, _)| *w == wire) {
                    return Err(Usage(format!("--out {kind} is given twice")).into());
                }
                outs.pushes.push((wire, opts));
                continue;
            }
            let slot = match kind {
                "json" => &mut outs.json,
                "json-agg" => &mut outs.agg,
                _ => {
                    return Err(Usage(format!(
                        "--out `{spec}`: use json=FILE (k6's NDJSON samples), json-agg=FILE \
                         (one aggregate line a second), prometheus-rw=URL (remote write) or \
                         opentelemetry[=URL] (OTLP/HTTP metrics)"
                    ))
                    .into());
                }
            };
            if path.is_empty() {
                return Err(
                    Usage(format!("--out `{spec}`: give a file, as in {kind}=FILE")).into(),
                );
            }
            if slot.replace(path.to_string()).is_some() {
                return Err(Usage(format!("--out {kind}= is given twice")).into());
            }
        }
        Ok(outs)
    }
}

pub(super) fn create_out(path: &String) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot create --out file `{path}`"))
}

/// `--out` values as the summary shows them: a push's URL without its user-info, where a
/// password may sit.
pub(super) fn shown(specs: &[String]) -> Vec<String> {
    specs
        .iter()
        .map(|spec| match spec.split_once('=') {
            Some((kind @ ("prometheus-rw" | "opentelemetry"), url)) => {
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
