//! `sloburn compare OLD NEW`: did it get slower? Two run records ([`RunRecord`], from
//! `sloburn run --record` or the daemon's `/api/runs/{id}/record`) compared per metric and
//! step, each row with its changes, their intervals and a verdict from a test that holds its
//! false-alarm rate (`stat` has the statistics, `rows` the verdicts, `text` the table).
//!
//! The rows: `http_req_duration` (and per step when a run has several), `iteration_duration`
//! for journeys, `http_req_failed` (and per step), `http_reqs` per second. The false-alarm
//! rate `1 − confidence` is shared among the rows compared (Bonferroni), so a comparison of
//! two runs of one unchanged service says `regressed` anywhere at most that often.
//!
//! Records of different shapes (other steps or journeys) are refused: comparing unlike things
//! gives a verdict about nothing. Bounds: a record file is read up to [`MAX_RECORD_BYTES`];
//! every row's work is bounded by the histogram layout's buckets (`stat`).

pub mod ab;
pub mod rows;
pub mod stat;
mod text;

use crate::load::record::RunRecord;
use rows::{Level, Row, Verdict};
use std::path::{Path, PathBuf};

/// The metrics a comparison can show, for `--metric`.
pub const METRICS: [&str; 4] = [
    "http_req_duration",
    "iteration_duration",
    "http_req_failed",
    "http_reqs",
];

/// The largest record file read: a record of every step's histograms is a few hundred KB.
pub const MAX_RECORD_BYTES: u64 = 64 << 20;

/// How two records are compared.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only these metrics (empty: every one).
    pub metrics: Vec<String>,
    /// The smallest relative change worth failing for (0.05 = 5 %).
    pub max_regression: f64,
    /// The intervals' confidence; `1 − confidence` is the comparison's false-alarm rate.
    pub confidence: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            metrics: Vec::new(),
            max_regression: 0.05,
            confidence: 0.99,
        }
    }
}

/// Two records' rows and the level they were judged at.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    pub rows: Vec<Row>,
    pub confidence: f64,
    pub max_regression: f64,
    /// Each row's test level: `(1 − confidence) / rows`.
    pub alpha_per_row: f64,
    /// What differs between the runs besides their figures (their plans).
    pub notes: Vec<String>,
}

impl Comparison {
    pub fn regressed(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Regressed)
    }

    /// `http_req_duration (p50 +10.2%), http_req_failed (+2.10 points)`.
    pub fn regressions(&self) -> Option<String> {
        let named: Vec<String> = self
            .regressed()
            .map(|r| format!("{} ({})", r.name(), r.headline()))
            .collect();
        (!named.is_empty()).then(|| named.join(", "))
    }

    /// The table, its notes and the verdict line.
    pub fn text(&self, old: &str, new: &str) -> String {
        text::render(self, old, new)
    }
}

/// A row to compute: its metric, step, and where its figures are.
enum Source {
    Trend(usize),
    Failed(usize),
    Throughput,
}

/// Compares `new` against `old`; an error says why the two cannot be compared, or which
/// option is wrong.
pub fn compare(old: &RunRecord, new: &RunRecord, o: &Options) -> Result<Comparison, String> {
    check_options(o)?;
    same_shape(old, new)?;
    let labels: Vec<String> = old
        .steps
        .iter()
        .map(|s| match &s.journey {
            Some(j) => format!("{j}/{}", s.name),
            None => s.name.clone(),
        })
        .collect();
    let many = old.steps.len() > 1;
    // (metric, step index or none, source): step index usize::MAX is the whole run.
    let mut planned: Vec<(&'static str, Source)> =
        vec![("http_req_duration", Source::Trend(usize::MAX))];
    if many {
        planned.extend((0..labels.len()).map(|i| ("http_req_duration", Source::Trend(i))));
    }
    if !old.journeys.is_empty() {
        planned.push(("iteration_duration", Source::Trend(usize::MAX - 1)));
    }
    planned.push(("http_req_failed", Source::Failed(usize::MAX)));
    if many {
        planned.extend((0..labels.len()).map(|i| ("http_req_failed", Source::Failed(i))));
    }
    planned.push(("http_reqs", Source::Throughput));
    planned.retain(|(m, _)| o.metrics.is_empty() || o.metrics.iter().any(|x| x == m));
    let level = Level {
        confidence: o.confidence,
        alpha: (1.0 - o.confidence) / planned.len().max(1) as f64,
        max_regression: o.max_regression,
    };
    let rows = planned
        .into_iter()
        .map(|(metric, source)| row(old, new, metric, source, &labels, &level))
        .collect();
    Ok(Comparison {
        rows,
        confidence: o.confidence,
        max_regression: o.max_regression,
        alpha_per_row: level.alpha,
        notes: plan_notes(old, new),
    })
}

fn row(
    old: &RunRecord,
    new: &RunRecord,
    metric: &'static str,
    source: Source,
    labels: &[String],
    l: &Level,
) -> Row {
    let step = |i: usize| labels.get(i).cloned();
    match source {
        Source::Trend(usize::MAX) => rows::trend(metric, None, &old.duration, &new.duration, l),
        Source::Trend(i) if i == usize::MAX - 1 => rows::trend(
            metric,
            None,
            &old.iteration_duration,
            &new.iteration_duration,
            l,
        ),
        Source::Trend(i) => rows::trend(
            metric,
            step(i),
            &old.steps[i].duration,
            &new.steps[i].duration,
            l,
        ),
        Source::Failed(usize::MAX) => rows::rate(
            metric,
            None,
            old.failed_with_saturated(),
            new.failed_with_saturated(),
            l,
        ),
        Source::Failed(i) => {
            let of = |r: &RunRecord| (r.steps[i].failed, r.steps[i].requests);
            rows::rate(metric, step(i), of(old), of(new), l)
        }
        Source::Throughput => {
            let of = |r: &RunRecord| (r.requests, r.elapsed.as_secs_f64());
            rows::throughput(metric, of(old), of(new), l)
        }
    }
}

fn check_options(o: &Options) -> Result<(), String> {
    if !(o.confidence > 0.5 && o.confidence < 1.0) {
        return Err(format!(
            "--confidence {}: give a level between 0.5 and 1, e.g. 0.99",
            o.confidence
        ));
    }
    if !(o.max_regression.is_finite() && o.max_regression >= 0.0) {
        return Err(format!(
            "--max-regression {}: give a change of 0 or more, e.g. 5%",
            o.max_regression
        ));
    }
    for m in &o.metrics {
        if !METRICS.contains(&m.as_str()) {
            return Err(format!("--metric `{m}`: one of {}", METRICS.join(", ")));
        }
    }
    Ok(())
}

/// The same steps (names and journeys, in order) and journeys on both sides, and histograms a
/// `Histogram` could make.
fn same_shape(old: &RunRecord, new: &RunRecord) -> Result<(), String> {
    let steps = |r: &RunRecord| -> Vec<(Option<String>, String)> {
        r.steps
            .iter()
            .map(|s| (s.journey.clone(), s.name.clone()))
            .collect()
    };
    let shown = |r: &RunRecord| -> String {
        r.steps
            .iter()
            .map(|s| match &s.journey {
                Some(j) => format!("{j}/{}", s.name),
                None => s.name.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    if steps(old) != steps(new) {
        return Err(format!(
            "the records are of different runs: OLD's steps are [{}], NEW's [{}]; compare runs of \
             the same profile",
            shown(old),
            shown(new)
        ));
    }
    let journeys = |r: &RunRecord| {
        r.journeys
            .iter()
            .map(|j| j.name.clone())
            .collect::<Vec<_>>()
    };
    if journeys(old) != journeys(new) {
        return Err("the records are of different runs: their journeys differ".into());
    }
    for (side, r) in [("OLD", old), ("NEW", new)] {
        let all = [&r.duration, &r.iteration_duration]
            .into_iter()
            .chain(r.steps.iter().map(|s| &s.duration));
        for h in all {
            h.check()
                .map_err(|e| format!("{side}: a broken histogram: {e}"))?;
        }
    }
    Ok(())
}

/// Notes on plans that differ (another load, another profile): the comparison still runs.
fn plan_notes(old: &RunRecord, new: &RunRecord) -> Vec<String> {
    let mut notes = Vec::new();
    match (&old.plan, &new.plan) {
        (Some(a), Some(b)) => {
            if a.profile != b.profile || a.target != b.target {
                notes.push(format!(
                    "OLD ran profile `{}` on `{}`, NEW `{}` on `{}`",
                    a.profile, a.target, b.profile, b.target
                ));
            }
            if a.load != b.load {
                notes.push(format!("the loads differ: OLD {}; NEW {}", a.load, b.load));
            }
        }
        (None, _) | (_, None) => {
            notes.push("a record without its plan (version 1): the loads were not compared".into())
        }
    }
    notes
}

/// Reads a record file (JSON, any version this build reads), at most [`MAX_RECORD_BYTES`].
pub fn read_record(path: &Path) -> Result<RunRecord, String> {
    use std::io::Read;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    let mut text = Vec::new();
    file.take(MAX_RECORD_BYTES + 1)
        .read_to_end(&mut text)
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if text.len() as u64 > MAX_RECORD_BYTES {
        return Err(format!(
            "`{shown}` is over {} MiB: not a run record",
            MAX_RECORD_BYTES >> 20
        ));
    }
    serde_json::from_slice(&text)
        .map_err(|e| format!("`{shown}` is not a run record sloburn reads: {e}"))
}

/// `sloburn compare`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The baseline's record (`sloburn run --record FILE`, or `/api/runs/{id}/record`).
    pub old: PathBuf,
    /// The candidate's record.
    pub new: PathBuf,
    /// Only this metric (repeatable): http_req_duration, iteration_duration, http_req_failed,
    /// http_reqs.
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// The smallest change worth failing for, e.g. `5%` or `0.05`.
    #[arg(long, default_value = "5%")]
    pub max_regression: String,
    /// The intervals' confidence; 1 − it is the false-alarm rate of the whole comparison.
    #[arg(long, default_value_t = 0.99)]
    pub confidence: f64,
    /// Print the comparison as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `5%` or `0.05`.
pub fn parse_share(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    };
    v.map_err(|_| format!("--max-regression `{s}`: write a share such as 5% or 0.05"))
}

/// Runs `sloburn compare`: 0 when nothing regressed, 99 naming what did, 2 on bad input.
pub fn command(args: CompareArgs) -> i32 {
    match compare_files(&args) {
        Ok((c, out)) => {
            println!("{out}");
            if c.regressed().next().is_some() {
                crate::exit::THRESHOLDS
            } else {
                crate::exit::OK
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            crate::exit::USAGE
        }
    }
}

fn compare_files(args: &CompareArgs) -> Result<(Comparison, String), String> {
    let options = Options {
        metrics: args.metrics.clone(),
        max_regression: parse_share(&args.max_regression)?,
        confidence: args.confidence,
    };
    let old = read_record(&args.old)?;
    let new = read_record(&args.new)?;
    let c = compare(&old, &new, &options)?;
    let out = if args.json {
        serde_json::to_string_pretty(&c).map_err(|e| e.to_string())?
    } else {
        c.text(
            &args.old.display().to_string(),
            &args.new.display().to_string(),
        )
    };
    Ok((c, out))
}

#[cfg(test)]
mod tests;
