//! Running a resolved profile: signals, progress, the report.

use super::*;
use crate::http::Resolver;
use crate::load::observe::Observers;
use crate::load::runner::{self, Abort, RunReport, RunSpec, Stopper};
use crate::load::stats::RunStats;
use crate::load::{ndjson, summary};
use crate::signals::{Caught, Signals};
use anyhow::{Context, anyhow};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How a run ended: its report, and the signal that stopped it, if one did.
pub struct Finished {
    pub report: RunReport,
    /// With `--collect`: how the run on every shard ended for this process.
    pub collected: Option<super::collect::Collected>,
    /// `SIGTERM` or `SIGINT` when a signal stopped the run.
    pub interrupted_by: Option<&'static str>,
}

/// Runs a resolved profile, printing progress and the summary; used by the command and tests.
/// With `handle_signals`, SIGTERM and SIGINT stop the run and SIGHUP is ignored.
pub async fn execute(
    args: &RunArgs,
    r: Resolved,
    handle_signals: bool,
) -> anyhow::Result<Finished> {
    let client = r.target.client(Arc::new(Resolver::system()));
    let stats = Arc::new(RunStats::for_work(
        &r.spec.work.steps(),
        &r.spec.work.journey_names(),
        &r.spec.thresholds,
        &r.name,
    ));
    let stopper = Stopper::new();
    let caught: Arc<OnceLock<&'static str>> = Arc::default();
    let cut = CancellationToken::new();
    // The signal watch ends with this function: dropping the set aborts it. Its handlers are
    // installed here, before the first request, and tokio keeps them for the life of the
    // process, so a signal during the summary is not fatal either.
    let mut tasks = tokio::task::JoinSet::new();
    if handle_signals {
        tasks.spawn(watch_signals(
            Signals::install().context("installing the signal handlers")?,
            stopper.clone(),
            caught.clone(),
            cut.clone(),
        ));
    }
    let outs = Outs::parse(&args.out, args.out_sample.unwrap_or(1.0))?;
    let out_file = outs.agg.as_ref().map(create_out).transpose()?;
    let mut others: Vec<Arc<dyn crate::load::observe::Observer>> = Vec::new();
    let ndjson = match &outs.json {
        Some(path) => {
            let (out, writer) = ndjson::start(
                create_out(path)?,
                stats.clone(),
                ndjson::Tags {
                    scenario: r.name.clone(),
                    steps: r.spec.work.steps(),
                    journeys: r.spec.work.journey_names(),
                },
                r.spec
                    .thresholds
                    .iter()
                    .map(|t| (t.threshold.metric.clone(), t.threshold.source.clone()))
                    .collect(),
                outs.sample,
            );
            others.push(out);
            Some(writer)
        }
        None => None,
    };
    let tty = std::io::stdout().is_terminal() && !args.quiet;
    // The progress reporter hands its `--out` file back when `done` fires, so the run's last
    // partial second is written too.
    let done = CancellationToken::new();
    let mut progress = tokio::task::JoinSet::new();
    if tty || out_file.is_some() {
        // The baseline is taken here, not when the task first runs: on one worker that can be
        // after the first requests, which would then be in no bucket.
        let baseline = stats.snapshot(Duration::ZERO);
        progress.spawn(report_progress(
            stats.clone(),
            baseline,
            r.planned,
            tty,
            out_file,
            done.clone(),
        ));
    }
    // `--collect`: the shards start together, at the instant the collector set.
    let mut spec = r.spec.clone();
    let collect = match &args.collect {
        Some(url) if r.spec.shard.count() > 1 => {
            let timeout = match &args.collect_timeout {
                Some(t) => crate::units::parse_duration(t)
                    .map_err(|e| Usage(format!("--collect-timeout `{t}`: {e}")))?,
                None => Duration::from_secs(300),
            };
            let c = super::collect::join(url, args.collect_listen, r.spec.shard, &r.name, timeout)
                .await?;
            let wait = c.start_at_ms.saturating_sub(crate::clock::unix_ms());
            spec.start_time = spec.start_time.saturating_add(Duration::from_millis(wait));
            Some(c)
        }
        Some(_) if args.shard.is_none() => {
            return Err(Usage("--collect needs --shard i/N".into()).into());
        }
        _ => None,
    };
    let started = crate::clock::tokio_instant() + spec.start_time;
    let capture = args.report.as_ref().map(|_| {
        crate::web::Recording::start(stats.clone(), None).with_evidence(
            crate::web::evidence::Evidence::for_work(
                stats.clone(),
                &r.spec.work,
                &r.target.headers,
            ),
        )
    });
    others.extend(capture.iter().flat_map(|c| c.observers()));
    // The exporter lives as long as this run; it is flushed (bounded by its timeout) before
    // the summary.
    let exporter = r.telemetry.as_ref().and_then(|t| {
        crate::telemetry::Exporter::start(t)
            .map_err(|e| {
                let _ = writeln!(std::io::stderr(), "warning: telemetry disabled: {e}");
            })
            .ok()
    });
    // The pusher's tasks run beside the load and never hold it up (`remote_write`).
    let pushers: Vec<_> = outs
        .pushes
        .iter()
        .map(|(wire, o)| {
            let labels = super::remote_write::RunLabels {
                profile: r.name.clone(),
                target: r.target.name.clone(),
                testid: args.testid.clone(),
            };
            let buckets = r.target.buckets.clone();
            let p = super::remote_write::Pusher::start(*wire, o, stats.clone(), labels, buckets);
            (wire.name(), p)
        })
        .collect();
    spec.tracer = exporter.as_ref().zip(r.telemetry.as_ref()).map(|(e, t)| {
        crate::telemetry::Tracer::new(e.tracer(crate::telemetry::spans::SCOPE), &t.traces)
    });
    let run = runner::run(
        &spec,
        &client,
        Observers::new(stats.clone(), others),
        stopper,
    );
    // Dropping the run aborts its VUs (their sets die with it); what they had finished stays.
    let mut report = tokio::select! {
        report = run => report.map_err(|e| anyhow!("profile `{}`: {e}", r.name))?,
        () = cut.cancelled() => cut_short(&r.spec, &stats, started, caught.get().copied()),
    };
    let collected = match collect {
        Some(c) => Some(c.finish(&mut report, r.planned).await),
        None => None,
    };
    let mut notes = r.notes.clone();
    match &collected {
        Some(super::collect::Collected::Whole { missing: Some(why) }) => notes.push(why.clone()),
        Some(super::collect::Collected::Whole { missing: None }) => notes.push(format!(
            "the whole run: every one of {} shards' figures added up",
            r.spec.shard.count()
        )),
        Some(super::collect::Collected::Share { .. }) => notes.push(format!(
            "shard {}/{}'s share only: the whole run's verdict is shard 0's",
            r.spec.shard.index(),
            r.spec.shard.count()
        )),
        None => {}
    }
    if let Some(super::collect::Collected::Share {
        delivered: Err(why),
    }) = &collected
    {
        let _ = writeln!(std::io::stderr(), "error: {why}");
    }
    // A signal that came after the run had stopped for another reason did not interrupt it.
    let interrupted_by = caught
        .get()
        .copied()
        .filter(|_| matches!(report.aborted, Some(Abort::Stopped(_))));
    tasks.abort_all();
    done.cancel();
    if let Some(e) = exporter {
        let stats = e.stats().clone();
        let _ = tokio::task::spawn_blocking(move || e.shutdown(Duration::from_secs(10))).await;
        let _ = writeln!(
            std::io::stderr(),
            "telemetry: {} spans exported, {} dropped",
            stats.exported(),
            stats.dropped()
        );
    }
    for (name, p) in pushers {
        let (sent, dropped) = p.finish(&report.stats).await;
        let _ = writeln!(
            std::io::stderr(),
            "{name}: {sent} samples sent, {dropped} dropped"
        );
    }
    if let Some(Ok((Some(mut file), prev))) = progress.join_next().await {
        let line = summary::last_bucket_json(
            &report.stats,
            &prev,
            crate::clock::unix_secs(),
            interrupted_by,
        );
        // The results matter more than this file: a failed write costs its last line only.
        if let Err(e) = writeln!(file, "{line}").and_then(|()| file.sync_all()) {
            let _ = writeln!(
                std::io::stderr(),
                "warning: cannot write the last line of the --out file: {e}"
            );
        }
    }
    // The run and its observers are gone, so the NDJSON writer sees its channel close.
    if let Some(writer) = ndjson {
        match writer.finish() {
            Ok(done) if done.dropped > 0 => {
                let _ = writeln!(
                    std::io::stderr(),
                    "warning: --out json: {} samples dropped, the writer fell behind; use \
                     --out-sample to write fewer",
                    done.dropped
                );
            }
            Ok(_) => {}
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "warning: --out json: {e}");
            }
        }
    }
    let exported = match &args.summary_export {
        Some(path) => {
            let json =
                serde_json::to_string_pretty(&summary::export_json(&report, interrupted_by))?;
            std::fs::write(path, json)
                .with_context(|| format!("cannot write --summary-export `{}`", path.display()))
        }
        None => Ok(()),
    };
    let reported = match (&args.report, capture) {
        (Some(path), Some(c)) => {
            crate::web::report::write_run(path, c, (&r.name, &r.target.name), &report)
        }
        _ => Ok(()),
    };
    // After a SIGHUP the terminal may be gone, or a pipe's reader may be: `println!` would
    // panic there. The files above are written first, and a summary nobody can read is skipped.
    let mut stdout = std::io::stdout().lock();
    let _ = if tty { writeln!(stdout) } else { Ok(()) }
        .and_then(|()| {
            let header = summary::Header {
                profile: &r.name,
                executor: Some(&r.spec.executor),
                graceful_stop: r.spec.graceful_stop,
                outputs: &super::outputs::shown(&args.out),
                notes: &notes,
            };
            writeln!(stdout, "{}", summary::text_with(&header, &report))
        })
        .and_then(|()| stdout.flush());
    exported?;
    reported?;
    Ok(Finished {
        report,
        collected,
        interrupted_by,
    })
}

/// Stops the run on the first SIGTERM or SIGINT, naming it in `caught`; a second one cuts the
/// graceful stop short (`cut`), as a CI cancel does before it kills. SIGHUP only logs.
pub(super) async fn watch_signals(
    mut s: Signals,
    stopper: Stopper,
    caught: Arc<OnceLock<&'static str>>,
    cut: CancellationToken,
) {
    let mut seen = 0;
    loop {
        let name = match s.next().await {
            Some(Caught::Stop(name)) => name,
            Some(Caught::Hangup) => {
                tracing::info!("SIGHUP ignored; the run goes on");
                continue;
            }
            None => return,
        };
        seen += 1;
        if seen == 1 {
            let _ = caught.set(name);
            stopper.stop(Abort::Stopped(format!("interrupted by {name}")));
        } else {
            cut.cancel();
            return;
        }
    }
}

/// The report of a run whose graceful stop a second signal cut short: the figures of the
/// requests that finished; those still in flight are not counted.
pub(super) fn cut_short(
    spec: &RunSpec,
    stats: &RunStats,
    started: tokio::time::Instant,
    first: Option<&str>,
) -> RunReport {
    let snapshot = stats.snapshot(crate::clock::tokio_instant().saturating_duration_since(started));
    RunReport {
        thresholds: spec
            .thresholds
            .iter()
            .map(|t| (t.clone(), t.threshold.evaluate(&snapshot)))
            .collect(),
        stats: snapshot,
        aborted: Some(Abort::Stopped(format!(
            "interrupted by {}; a second signal cut the graceful stop short",
            first.unwrap_or("a signal")
        ))),
    }
}

/// The progress line on a terminal and one `--out json` line a second, until `done`; returns
/// the file and the last figures written, for the final line.
pub(super) async fn report_progress(
    stats: Arc<RunStats>,
    mut prev: crate::load::record::RunRecord,
    planned: Duration,
    tty: bool,
    mut file: Option<std::fs::File>,
    done: CancellationToken,
) -> (Option<std::fs::File>, crate::load::record::RunRecord) {
    let start = crate::clock::tokio_instant();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = done.cancelled() => return (file, prev),
        }
        let now = stats.snapshot(crate::clock::elapsed(start));
        if tty {
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "\r\x1b[2K{}", summary::progress(&now, planned))
                .and_then(|()| stdout.flush());
        }
        if let Some(f) = file.as_mut() {
            let line = summary::bucket_json(&now, &prev, crate::clock::unix_secs());
            if writeln!(f, "{line}").is_err() {
                file = None;
            }
        }
        prev = now;
    }
}
