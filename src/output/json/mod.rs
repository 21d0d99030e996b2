//! `--out json=FILE`: k6's per-sample NDJSON, which k6 tooling reads. One `{"type":"Metric",…}`
//! definition per metric first, then `{"type":"Point","metric":…,"data":{"time":…,"value":…,
//! "tags":{…}}}` lines: per request `http_reqs`, `http_req_duration` and the phases,
//! `http_req_failed`, one `checks` point per check; per iteration `data_sent`,
//! `data_received`, `iteration_duration`, `iterations` (a single-request profile's iteration is
//! its request); per journey step and per journey walked k6's `group_duration`; per dropped
//! iteration `dropped_iterations`; every second `vus` and `vus_max`. sloburn's own
//! `http_req_dns` and `http_req_corrected_duration` come along.
//!
//! Each sample is tagged as k6 tags it: a request with its own step's `method`, `url`, `name`
//! and `group` (`::journey::step`), a check with its step's group, the per-iteration samples
//! in the root group (`""`). Records carry the step's number only; the writer turns it into
//! tags.
//!
//! The request path stays free of locks and allocation: the observer (`record::Tap`) copies a
//! request's figures into a fixed-size record and hands it to a bounded channel; one blocking
//! task (`writer`) formats and writes. When the writer falls behind, samples are dropped and
//! counted (the run is never slowed down to feed a file), and `stop` says how many.

mod record;
mod writer;

use super::sink::{Last, Output, RunInfo, create_file};
use crate::load::event::Observer;
use crate::load::stats::RunStats;
use anyhow::Context;
use record::Tap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::sync_channel;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
pub use writer::Tags;

/// Records waiting for the writer; past this, samples are dropped and counted.
const QUEUE: usize = 1 << 16;

/// The `--out json` output.
pub struct Json {
    file: Option<std::fs::File>,
    sample: f64,
    writer: Option<Writer>,
}

/// The running writer: the blocking task and what the taps could not hand it.
pub struct Writer {
    task: JoinSet<std::io::Result<u64>>,
    dropped: Arc<AtomicU64>,
}

/// How the file came out.
pub struct Done {
    pub lines: u64,
    /// Samples the writer could not keep up with.
    pub dropped: u64,
}

impl Json {
    /// Creates `path`; `sample` in (0, 1] is the fraction of requests written.
    pub fn create(path: &str, sample: f64) -> anyhow::Result<Json> {
        Ok(Json {
            file: Some(create_file(path)?),
            sample,
            writer: None,
        })
    }
}

/// Starts the writer on `file` (inside a tokio runtime); returns the observer that feeds it.
/// It ends when every clone of the observer is gone, or when `token` is cancelled.
pub fn start(
    file: std::fs::File,
    stats: Arc<RunStats>,
    tags: Tags,
    thresholds: Vec<(String, String)>,
    sample: f64,
    token: CancellationToken,
) -> (Arc<dyn Observer>, Writer) {
    let (tx, rx) = sync_channel(QUEUE);
    let dropped = Arc::new(AtomicU64::new(0));
    let writer_stats = stats.clone();
    let mut task = JoinSet::new();
    task.spawn_blocking(move || {
        writer::write_all(rx, file, &writer_stats, &tags, &thresholds, &token)
    });
    (
        Arc::new(Tap::new(tx, stats, sample, dropped.clone())),
        Writer { task, dropped },
    )
}

impl Writer {
    /// Waits for the writer once every observer is gone (drop the run's observers first).
    pub async fn finish(mut self) -> std::io::Result<Done> {
        let lines = match self.task.join_next().await {
            Some(Ok(written)) => written?,
            _ => return Err(std::io::Error::other("the --out json writer panicked")),
        };
        Ok(Done {
            lines,
            dropped: self.dropped.load(Relaxed),
        })
    }
}

#[async_trait::async_trait]
impl Output for Json {
    fn name(&self) -> &'static str {
        "json"
    }

    fn start(&mut self, run: &RunInfo<'_>) -> anyhow::Result<Vec<Arc<dyn Observer>>> {
        let file = self.file.take().context("--out json started twice")?;
        let (tap, writer) = start(
            file,
            run.stats.clone(),
            Tags {
                scenario: run.profile.to_string(),
                steps: run.work.steps(),
                journeys: run.work.journey_names(),
                extra: run.tags.to_vec(),
            },
            run.thresholds
                .iter()
                .map(|t| (t.threshold.metric.clone(), t.threshold.source.clone()))
                .collect(),
            self.sample,
            run.token.clone(),
        );
        self.writer = Some(writer);
        Ok(vec![tap])
    }

    async fn stop(&mut self, _last: &Last<'_>) -> anyhow::Result<Vec<String>> {
        let Some(writer) = self.writer.take() else {
            return Ok(Vec::new());
        };
        Ok(match writer.finish().await {
            Ok(done) if done.dropped > 0 => vec![format!(
                "warning: --out json: {} samples dropped, the writer fell behind; use \
                 --out-sample to write fewer",
                done.dropped
            )],
            Ok(_) => Vec::new(),
            Err(e) => vec![format!("warning: --out json: {e}")],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Outcome;
    use crate::load::event::StepInfo;
    use serde_json::{Value, json};
    use std::time::Duration;

    async fn lines(sample: f64, requests: usize) -> Vec<Value> {
        let dir = std::env::temp_dir().join(format!(
            "sloburn-ndjson-{}-{sample}-{requests}",
            std::process::id()
        ));
        let file = std::fs::File::create(&dir).unwrap();
        let stats = Arc::new(RunStats::new(&[]));
        let tags = Tags {
            scenario: "canary".into(),
            steps: vec![StepInfo {
                journey: None,
                name: crate::load::event::SINGLE_STEP.into(),
                checks: vec![crate::checks::Check {
                    name: "ok".into(),
                    kind: crate::checks::CheckKind::Status(vec![(200, 200)]),
                }],
                method: "GET".into(),
                url: "http://127.0.0.1:1/".into(),
            }],
            journeys: Vec::new(),
            extra: Vec::new(),
        };
        let (out, writer) = start(
            file,
            stats,
            tags,
            vec![("http_req_duration".into(), "p(95)<300".into())],
            sample,
            CancellationToken::new(),
        );
        let ok = Outcome {
            status: Some(200),
            phases: crate::http::Phases {
                connecting: Duration::from_millis(3),
                ..Default::default()
            },
            ..Outcome::default()
        };
        for _ in 0..requests {
            out.request_finished(0, &ok, Duration::from_millis(3), &[true]);
        }
        out.iteration_dropped(crate::load::pacing::DropReason::Saturated, 0);
        drop(out);
        let done = writer.finish().await.unwrap();
        let text = std::fs::read_to_string(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        let v: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(done.lines as usize, v.len());
        v
    }

    #[tokio::test]
    async fn definitions_then_points_in_k6_shape() {
        let v = lines(1.0, 3).await;
        assert_eq!(v[0]["type"], "Metric");
        assert_eq!(v[0]["data"]["type"], "counter");
        let dur = v
            .iter()
            .find(|l| l["metric"] == "http_req_duration")
            .unwrap();
        assert_eq!(dur["data"]["thresholds"], json!(["p(95)<300"]));
        let points: Vec<&Value> = v.iter().filter(|l| l["type"] == "Point").collect();
        let reqs = points.iter().filter(|p| p["metric"] == "http_reqs").count();
        assert_eq!(reqs, 3);
        let corrected = points
            .iter()
            .find(|p| p["metric"] == "http_req_corrected_duration")
            .unwrap();
        assert_eq!(corrected["data"]["value"], 3.0);
        let d = points
            .iter()
            .find(|p| p["metric"] == "http_req_duration")
            .unwrap();
        assert_eq!(
            d["data"]["value"], 0.0,
            "k6's duration leaves the connection out"
        );
        assert_eq!(d["data"]["tags"]["status"], "200");
        assert_eq!(d["data"]["tags"]["expected_response"], "true");
        assert_eq!(d["data"]["tags"]["scenario"], "canary");
        let t = d["data"]["time"].as_str().unwrap();
        assert!(chrono::DateTime::parse_from_rfc3339(t).is_ok(), "{t}");
        let check = points.iter().find(|p| p["metric"] == "checks").unwrap();
        assert_eq!(check["data"]["tags"]["check"], "ok");
        assert_eq!(check["data"]["value"], 1.0);
        assert_eq!(
            points
                .iter()
                .filter(|p| p["metric"] == "dropped_iterations")
                .count(),
            1
        );
        assert!(points.iter().any(|p| p["metric"] == "vus_max"));
    }

    #[tokio::test]
    async fn sampling_keeps_an_even_fraction() {
        let v = lines(0.25, 100).await;
        let reqs = v
            .iter()
            .filter(|l| l["type"] == "Point" && l["metric"] == "http_reqs")
            .count();
        assert_eq!(reqs, 25);
    }
}
