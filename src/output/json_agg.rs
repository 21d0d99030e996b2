//! `--out json-agg=FILE`: one JSON line a second with that second's figures (deltas), and a
//! last line with the run's final partial second, marked when a signal stopped the run
//! (`load::summary::bucket_json`). A line that cannot be written ends the file's lines but
//! never the run.

use super::sink::{Last, Output, RunInfo, create_file};
use crate::load::event::Observer;
use crate::load::record::RunRecord;
use crate::load::stats::RunStats;
use crate::load::summary;
use anyhow::Context;
use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub struct JsonAgg {
    file: Option<File>,
    /// Ends the ticker (a child of the run's token).
    done: CancellationToken,
    /// The ticker, which hands the file and its last figures back when `done` fires.
    task: JoinSet<(Option<File>, RunRecord)>,
}

impl JsonAgg {
    /// Creates `path` (an error says which `--out` file could not be).
    pub fn create(path: &str) -> anyhow::Result<JsonAgg> {
        Ok(JsonAgg {
            file: Some(create_file(path)?),
            done: CancellationToken::new(),
            task: JoinSet::new(),
        })
    }
}

#[async_trait::async_trait]
impl Output for JsonAgg {
    fn name(&self) -> &'static str {
        "json-agg"
    }

    fn start(&mut self, run: &RunInfo<'_>) -> anyhow::Result<Vec<Arc<dyn Observer>>> {
        let file = self.file.take().context("--out json-agg started twice")?;
        self.done = run.token.child_token();
        // The baseline is taken here, not when the task first runs: on one worker that can be
        // after the first requests, which would then be in no line.
        let baseline = run.stats.snapshot(Duration::ZERO);
        self.task.spawn(write_seconds(
            run.stats.clone(),
            baseline,
            file,
            self.done.clone(),
        ));
        Ok(Vec::new())
    }

    async fn stop(&mut self, last: &Last<'_>) -> anyhow::Result<Vec<String>> {
        self.done.cancel();
        let Some(Ok((Some(mut file), prev))) = self.task.join_next().await else {
            return Ok(Vec::new());
        };
        let line = summary::last_bucket_json(
            &last.report.stats,
            &prev,
            crate::clock::unix_secs(),
            last.interrupted_by,
        );
        // The results matter more than this file: a failed write costs its last line only.
        Ok(
            match writeln!(file, "{line}").and_then(|()| file.sync_all()) {
                Ok(()) => Vec::new(),
                Err(e) => vec![format!(
                    "warning: cannot write the last line of the --out file: {e}"
                )],
            },
        )
    }
}

/// One line a second until `done`; returns the file (unless a write failed) and the last
/// figures written, for the final line.
async fn write_seconds(
    stats: Arc<RunStats>,
    mut prev: RunRecord,
    file: File,
    done: CancellationToken,
) -> (Option<File>, RunRecord) {
    let mut file = Some(file);
    let start = crate::clock::tokio_instant();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = done.cancelled() => return (file, prev),
        }
        let now = stats.snapshot(crate::clock::elapsed(start));
        if let Some(f) = file.as_mut() {
            let line = summary::bucket_json(&now, &prev, crate::clock::unix_secs());
            if writeln!(f, "{line}").is_err() {
                file = None;
            }
        }
        prev = now;
    }
}
