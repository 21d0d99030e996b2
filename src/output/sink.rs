//! The seam every output implements: [`Output`] (start, samples, stop), what it is told when
//! the run starts ([`RunInfo`]) and when it ends ([`Last`]).

use crate::load::event::Observer;
use crate::load::iteration::Work;
use crate::load::runner::RunReport;
use crate::load::stats::RunStats;
use crate::thresholds::ThresholdSpec;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a run tells its outputs as it starts.
pub struct RunInfo<'a> {
    /// The profile's name (k6's `scenario`, the `profile` label).
    pub profile: &'a str,
    /// The target's name (the `target` label).
    pub target: &'a str,
    /// `--testid`: a `testid` label on every series pushed.
    pub testid: Option<&'a str>,
    /// `--tag NAME=VALUE`: a tag on every sample written and a label on every series pushed.
    pub tags: &'a [(String, String)],
    /// What the run is (URLs, load, command line) as a report names it.
    pub setup: &'a crate::web::detail::RunSetup,
    /// One request or a mix of journeys: their steps and names.
    pub work: &'a Work,
    /// The target's headers, for redacting what a failure's evidence shows.
    pub headers: &'a http::HeaderMap,
    /// The values the config's `${env:}`/`${file:}` references resolved to: scrubbed from
    /// what a failure's evidence shows.
    pub secrets: &'a [crate::config::Secret],
    pub thresholds: &'a [ThresholdSpec],
    /// The target's classic histogram buckets, in seconds.
    pub buckets: &'a [f64],
    /// The run's figures, for outputs that read them on their own tick.
    pub stats: &'a Arc<RunStats>,
    /// The run's token: an output's tasks end when it is cancelled, an early error included.
    pub token: &'a CancellationToken,
}

/// What a run tells its outputs as it ends.
pub struct Last<'a> {
    /// The final figures: those of the summary.
    pub report: &'a RunReport,
    /// The signal that stopped the run, if one did.
    pub interrupted_by: Option<&'a str>,
}

/// One output of a run (as k6's `output.Output`): built from its `--out` value (opening what
/// it writes to), started with the run, fed samples while it lasts, stopped with its final
/// figures. Every task it spawns is its own (a `JoinSet` it holds, so dropping it aborts them)
/// and ends when the run's token is cancelled.
#[async_trait::async_trait]
pub trait Output: Send {
    /// Its `--out` name (`report` for `--report`); a push's counts line starts with it.
    fn name(&self) -> &'static str;

    /// The run starts: start its tasks and return the observers that take each request's
    /// samples as they happen (none for an output that reads the figures on its own tick).
    fn start(&mut self, run: &RunInfo<'_>) -> anyhow::Result<Vec<Arc<dyn Observer>>>;

    /// The run is over and its observers are gone: write or push the final figures, end its
    /// tasks and say how it went (lines for stderr). An error fails the run, after its summary.
    async fn stop(&mut self, last: &Last<'_>) -> anyhow::Result<Vec<String>>;
}

/// Creates an output's file; an error names the `--out` file that could not be.
pub fn create_file(path: &str) -> anyhow::Result<std::fs::File> {
    use anyhow::Context;
    std::fs::File::create(path).with_context(|| format!("cannot create --out file `{path}`"))
}
