//! The run's outputs: `--summary-export`, `--out json`, `--out json-agg` files and the
//! `--out prometheus-rw` push (`remote_write`).

use super::*;
use anyhow::Context;

/// Where `--out` goes: k6's NDJSON, the per-second aggregate, or both.
pub(super) struct Outs {
    pub(super) json: Option<String>,
    pub(super) agg: Option<String>,
    pub(super) rw: Option<super::remote_write::RwOptions>,
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
            rw: None,
            sample,
        };
        for spec in specs {
            let (kind, path) = spec.split_once('=').unwrap_or((spec, ""));
            if kind == "prometheus-rw" {
                let opts = super::remote_write::RwOptions::parse(path)
                    .map_err(|e| Usage(format!("--out prometheus-rw={path}: {e}")))?;
                if outs.rw.replace(opts).is_some() {
                    return Err(Usage("--out prometheus-rw= is given twice".into()).into());
                }
                continue;
            }
            let slot = match kind {
                "json" => &mut outs.json,
                "json-agg" => &mut outs.agg,
                _ => {
                    return Err(Usage(format!(
                        "--out `{spec}`: use json=FILE (k6's NDJSON samples), json-agg=FILE \
                         (one aggregate line a second) or prometheus-rw=URL (remote write)"
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
