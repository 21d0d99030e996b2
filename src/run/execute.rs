//! Running a resolved profile: signals, progress, the outputs, the summary.
//!
//! Every task of a run (the signal watch, the progress line, each output's) ends with
//! [`execute`]: they stop on the run's token, which is cancelled when it returns, an early
//! error included.

use super::args::RunArgs;
use super::collect::{Collect, Collected};
use super::resolve::{Resolved, Usage};
use crate::load::observe::Observers;
use crate::load::runner::{self, Abort, RunReport, RunSpec, Stopper};
use crate::load::stats::RunStats;
use crate::load::summary;
use crate::output::{BadSpec, Last, Outputs, RunInfo};
use crate::signals::{Caught, Signals};
use anyhow::{Context, anyhow};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How a run ended: its report, and the signal that stopped it, if one did.
pub struct Finished {
    pub report: RunReport,
    /// With `--collect`: how the run on every shard ended for this process.
    pub collected: Option<Collected>,
    /// `SIGTERM` or `SIGINT` when a signal stopped the run.
    pub interrupted_by: Option<&'static str>,
    /// `--baseline-url`: the candidate compared with the baseline.
    pub comparison: Option<crate::compare::Comparison>,
}

/// Runs a resolved profile, printing progress and the summary; used by the command and tests.
/// With `handle_signals`, SIGTERM and SIGINT stop the run and SIGHUP is ignored.
pub async fn execute(
    args: &RunArgs,
    r: Resolved,
    handle_signals: bool,
) -> anyhow::Result<Finished> {
    let token = CancellationToken::new();
    let _ends_every_task = token.clone().drop_guard();
    let client = super::http_debug::client(args, &r);
    let stats = Arc::new(RunStats::for_work(
        &r.spec.work.steps(),
        &r.spec.work.journey_names(),
        &r.spec.thresholds,
        &r.name,
    ));
    let stopper = Stopper::new();
    let mut watch = SignalWatch::install(handle_signals, &stopper)?;
    // Ends with the run: the token is cancelled and the set dropped on every return.
    let mut sampler = JoinSet::new();
    let starvation = watch_starvation(&r, &mut sampler, &token);
    let mut outputs =
        Outputs::open(&args.out, args.out_sample, args.report.as_deref()).map_err(|e| {
            match e.downcast::<BadSpec>() {
                Ok(bad) => Usage(bad.0).into(),
                Err(e) => e,
            }
        })?;
    let tty = std::io::stdout().is_terminal() && !args.quiet;
    let mut progress = Progress::start(tty, &stats, r.planned, &token);
    let mut spec = r.spec.clone();
    let collect = join_collect(args, &r, &mut spec).await?;
    let started = crate::clock::tokio_instant() + spec.start_time;
    let start_unix_ms =
        crate::clock::unix_ms() + u64::try_from(spec.start_time.as_millis()).unwrap_or(0);
    let observers = outputs.start(&RunInfo {
        profile: &r.name,
        target: &r.target.name,
        testid: args.testid.as_deref(),
        tags: &r.tags,
        setup: &setup_of(&r),
        work: &r.spec.work,
        headers: &r.target.headers,
        secrets: &r.secrets,
        thresholds: &r.spec.thresholds,
        buckets: &r.target.buckets,
        stats: &stats,
        token: &token,
    })?;
    // The exporter lives as long as this run; it is flushed (bounded by its timeout) before
    // the summary.
    let exporter = start_exporter(&r);
    spec.tracer = exporter.as_ref().zip(r.telemetry.as_ref()).map(|(e, t)| {
        crate::telemetry::Tracer::new(e.tracer(crate::telemetry::spans::SCOPE), &t.traces)
    });
    let run = runner::run(
        &spec,
        &client,
        Observers::new(stats.clone(), observers).with_starvation(starvation),
        stopper,
    );
    // Dropping the run aborts its VUs (their sets die with it); what they had finished stays.
    let mut report = tokio::select! {
        report = run => report.map_err(|e| anyhow!("profile `{}`: {e}", r.name))?,
        () = watch.cut.cancelled() => cut_short(&r.spec, &stats, started, watch.caught.get().copied()),
    };
    let interrupted_by = watch.stop(&report);
    let (collected, notes) = settle_collect(collect, &mut report, &r, interrupted_by).await;
    // The record says a run was interrupted when this process was, or a share it adds was.
    let marked = interrupted_by.or(match &collected {
        Some(Collected::Whole { signal, .. }) => *signal,
        _ => None,
    });
    progress.stop().await;
    stop_exporter(exporter).await;
    // The run and its observers are gone: the outputs see their last samples.
    let (said, stopped) = outputs
        .stop(&Last {
            report: &report,
            interrupted_by: marked,
        })
        .await;
    for line in said {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    let exported = write_export(args, &report, marked);
    let recorded = write_record(args, &r, &report, start_unix_ms);
    print_summary(args, &r, &report, &notes, tty);
    let comparison = print_comparison(args, &report);
    exported?;
    recorded?;
    stopped?;
    Ok(Finished {
        report,
        collected,
        interrupted_by,
        comparison,
    })
}

/// SIGTERM and SIGINT while the run lasts (`watch_signals`); the watch is aborted by `stop` or
/// with this handle. Its handlers are installed before the first request, and tokio keeps
/// them for the life of the process, so a signal during the summary is not fatal either.
struct SignalWatch {
    caught: Arc<OnceLock<&'static str>>,
    /// A second signal: cut the graceful stop short.
    cut: CancellationToken,
    task: JoinSet<()>,
}

impl SignalWatch {
    fn install(handle_signals: bool, stopper: &Stopper) -> anyhow::Result<SignalWatch> {
        let mut watch = SignalWatch {
            caught: Arc::default(),
            cut: CancellationToken::new(),
            task: JoinSet::new(),
        };
        if handle_signals {
            watch.task.spawn(watch_signals(
                Signals::install().context("installing the signal handlers")?,
                stopper.clone(),
                watch.caught.clone(),
                watch.cut.clone(),
            ));
        }
        Ok(watch)
    }

    /// Ends the watch; returns the signal that interrupted the run. One that came after the
    /// run had stopped for another reason did not interrupt it.
    fn stop(&mut self, report: &RunReport) -> Option<&'static str> {
        self.task.abort_all();
        self.caught
            .get()
            .copied()
            .filter(|_| matches!(report.aborted, Some(Abort::Stopped(_))))
    }
}

/// The progress line on a terminal, redrawn every second until stopped.
struct Progress {
    done: CancellationToken,
    task: JoinSet<()>,
}

impl Progress {
    fn start(
        tty: bool,
        stats: &Arc<RunStats>,
        planned: Duration,
        token: &CancellationToken,
    ) -> Progress {
        let done = token.child_token();
        let mut task = JoinSet::new();
        if tty {
            task.spawn(report_progress(stats.clone(), planned, done.clone()));
        }
        Progress { done, task }
    }

    /// Stops the line before the summary is printed under it.
    async fn stop(&mut self) {
        self.done.cancel();
        while self.task.join_next().await.is_some() {}
    }
}

/// `--collect`: joins the other shards, which start together at the instant the collector
/// set (added to `spec`'s start time).
async fn join_collect(
    args: &RunArgs,
    r: &Resolved,
    spec: &mut RunSpec,
) -> anyhow::Result<Option<Collect>> {
    match &args.collect {
        Some(url) if r.spec.shard.count() > 1 => {
            let timeout = match &args.collect_timeout {
                Some(t) => crate::units::parse_duration(t)
                    .map_err(|e| Usage(format!("--collect-timeout `{t}`: {e}")))?,
                None => Duration::from_secs(300),
            };
            let c = super::collect::join(url, args, &r.spec, &r.name, timeout).await?;
            let wait = c.start_at_ms.saturating_sub(crate::clock::unix_ms());
            spec.start_time = spec.start_time.saturating_add(Duration::from_millis(wait));
            Ok(Some(c))
        }
        Some(_) if args.shard.is_none() => Err(Usage("--collect needs --shard i/N".into()).into()),
        _ => Ok(None),
    }
}

/// `--collect`: the whole run's figures on shard 0, this shard's delivered on the others;
/// with the summary's notes on what the figures cover.
async fn settle_collect(
    collect: Option<Collect>,
    report: &mut RunReport,
    r: &Resolved,
    signal: Option<&str>,
) -> (Option<Collected>, Vec<String>) {
    let collected = match collect {
        Some(c) => Some(c.finish(report, r.planned, signal).await),
        None => None,
    };
    let mut notes = r.notes.clone();
    match &collected {
        Some(Collected::Whole {
            missing: Some(why), ..
        }) => notes.push(why.clone()),
        Some(Collected::Whole { missing: None, .. }) => notes.push(format!(
            "the whole run: every one of {} shards' figures added up",
            r.spec.shard.count()
        )),
        Some(Collected::Share { delivered }) => {
            notes.push(format!(
                "shard {}/{}'s share only: the whole run's verdict is shard 0's",
                r.spec.shard.index(),
                r.spec.shard.count()
            ));
            if let Err(why) = delivered {
                let _ = writeln!(std::io::stderr(), "error: {why}");
            }
        }
        None => {}
    }
    (collected, notes)
}

/// The config's `telemetry:` exporter, if it can start (a warning if not: the load goes on).
fn start_exporter(r: &Resolved) -> Option<crate::telemetry::Exporter> {
    r.telemetry.as_ref().and_then(|t| {
        crate::telemetry::Exporter::start(t)
            .map_err(|e| {
                let _ = writeln!(std::io::stderr(), "warning: telemetry disabled: {e}");
            })
            .ok()
    })
}

/// Flushes the exporter (at most 10 s) and says what it sent.
async fn stop_exporter(exporter: Option<crate::telemetry::Exporter>) {
    let Some(e) = exporter else { return };
    let stats = e.stats().clone();
    let _ = tokio::task::spawn_blocking(move || e.shutdown(Duration::from_secs(10))).await;
    let _ = writeln!(
        std::io::stderr(),
        "telemetry: {} spans exported, {} dropped",
        stats.exported(),
        stats.dropped()
    );
}

/// `--summary-export`: k6's summary JSON.
fn write_export(
    args: &RunArgs,
    report: &RunReport,
    interrupted_by: Option<&str>,
) -> anyhow::Result<()> {
    let Some(path) = &args.summary_export else {
        return Ok(());
    };
    let json = serde_json::to_string_pretty(&summary::export_json(report, interrupted_by))?;
    std::fs::write(path, json)
        .with_context(|| format!("cannot write --summary-export `{}`", path.display()))
}

/// `--record`: the run's record with its plan, every value the run sent from a secret
/// scrubbed (the record holds the config's names only; this holds whatever a name took).
fn write_record(
    args: &RunArgs,
    r: &Resolved,
    report: &RunReport,
    start_unix_ms: u64,
) -> anyhow::Result<()> {
    let Some(path) = &args.record else {
        return Ok(());
    };
    let mut record = report.stats.clone();
    let (load, _, _) = summary::scenario_line(&r.name, &r.spec.executor, r.spec.graceful_stop);
    let shard = r.spec.shard;
    record.plan = Some(crate::load::record::RunPlan {
        profile: r.name.clone(),
        target: r.target.name.clone(),
        load,
        planned: r.planned,
        start_unix_ms,
        shard: (shard.count() > 1).then(|| format!("{}/{}", shard.index(), shard.count())),
    });
    let json = serde_json::to_string(&record)?;
    let scrub = crate::web::scrub::Scrub::new(r.secrets.iter().map(|s| s.expose()));
    std::fs::write(path, scrub.apply(&json).as_bytes())
        .with_context(|| format!("cannot write --record `{}`", path.display()))
}

/// `--baseline-url`: the two sides compared as `sloburn compare` compares two records, after
/// the summary.
fn print_comparison(args: &RunArgs, report: &RunReport) -> Option<crate::compare::Comparison> {
    args.baseline_url.as_ref()?;
    let (old, new) = crate::compare::ab::sides(&report.stats)?;
    let url = |u: &Option<String>| u.clone().unwrap_or_default();
    let options = crate::compare::Options::default();
    let c = crate::compare::compare(&old, &new, &options).ok()?;
    let text = c.text(
        &format!("(baseline) {}", url(&args.baseline_url)),
        &format!("(candidate) {}", url(&args.url)),
    );
    let _ = writeln!(std::io::stdout().lock(), "\n{text}");
    Some(c)
}

/// The end-of-test summary on stdout. After a SIGHUP the terminal may be gone, or a pipe's
/// reader may be: `println!` would panic there. The files are written first, and a summary
/// nobody can read is skipped.
fn print_summary(args: &RunArgs, r: &Resolved, report: &RunReport, notes: &[String], tty: bool) {
    let mut stdout = std::io::stdout().lock();
    let _ = if tty { writeln!(stdout) } else { Ok(()) }
        .and_then(|()| {
            let header = summary::Header {
                profile: &r.name,
                executor: Some(&r.spec.executor),
                graceful_stop: r.spec.graceful_stop,
                outputs: &crate::output::shown(&args.out),
                notes,
            };
            writeln!(stdout, "{}", summary::text_with(&header, report))
        })
        .and_then(|()| stdout.flush());
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

/// Starts the run's starvation watch (`crate::starve`) on `tasks`, stopped by `token`, and
/// warns when the cgroup's CPU quota is below what the profile's rate needs.
fn watch_starvation(
    r: &Resolved,
    tasks: &mut JoinSet<()>,
    token: &CancellationToken,
) -> Arc<crate::starve::Starvation> {
    let watch = Arc::new(crate::starve::Starvation::new());
    tasks.spawn(watch.clone().sample(token.clone()));
    let steps = r.spec.work.steps().len().max(1);
    let journeys = r.spec.work.journey_names().len().max(1);
    // Requests per iteration: a journey's steps, on average over the mix's journeys.
    let per_iteration = steps.div_ceil(journeys) as f64;
    let rate = r.spec.executor.peak_rate() / f64::from(r.spec.shard.count()) * per_iteration;
    let what = format!("profile `{}`", r.name);
    if let Some(w) = crate::starve::quota_warning(watch.quota(), rate, &what) {
        let _ = writeln!(std::io::stderr(), "warning: {w}");
    }
    watch
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
        starved: None,
        would_fail: Vec::new(),
    }
}

/// The progress line on a terminal, once a second until `done`.
pub(super) async fn report_progress(
    stats: Arc<RunStats>,
    planned: Duration,
    done: CancellationToken,
) {
    let start = crate::clock::tokio_instant();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = done.cancelled() => return,
        }
        let now = stats.snapshot(crate::clock::elapsed(start));
        let mut stdout = std::io::stdout().lock();
        let _ = write!(stdout, "\r\x1b[2K{}", summary::progress(&now, planned))
            .and_then(|()| stdout.flush());
    }
}

/// What a report names of the run: its URLs, its load as k6's scenario line, the command line
/// with its secret values hidden.
fn setup_of(r: &Resolved) -> crate::web::detail::RunSetup {
    let mut urls: Vec<String> = r.spec.work.steps().into_iter().map(|s| s.url).collect();
    urls.dedup();
    let (load, _, _) =
        crate::load::summary::scenario_line(&r.name, &r.spec.executor, r.spec.graceful_stop);
    crate::web::detail::RunSetup {
        urls,
        load,
        command: super::k6flags::shown_command(std::env::args()),
    }
}
