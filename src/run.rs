//! `sloburn run`: one profile from a config file, or an ad-hoc run from flags, with a live
//! progress line on a terminal, the k6 + vegeta summary, `--summary-export`, `--out json`
//! (k6's per-sample NDJSON) and `--out json-agg` (one aggregate line a second).
//!
//! A run reads its profile's config but never the daemon's settings: `server.admin_token` is
//! not resolved, so a run needs no daemon secret. A bad `--threshold` is a usage error (exit 2),
//! a bad threshold in the config a config error (exit 78, with file:line:col); k6 exits 104 for
//! both.
//!
//! SIGTERM and SIGINT stop the run as an abort does (in-flight requests get the graceful stop);
//! the summary, the export and the last `--out json` line are still written, marked with the
//! signal, and the command exits [`crate::exit::INTERRUPTED`]. A second one cuts the graceful
//! stop short and writes the same. SIGHUP is ignored: a closing terminal must not lose a run's
//! results.

use crate::config::{self, Target};
use crate::http::Resolver;
use crate::load::observe::Observers;
use crate::load::placement::Assignment;
use crate::load::plan::Shard;
use crate::load::runner::{self, Abort, RunReport, RunSpec, Stopper};
use crate::load::spec::Executor;
use crate::load::stats::RunStats;
use crate::load::{ndjson, summary};
use crate::signals::{Caught, Signals};
use crate::thresholds::ThresholdSpec;
use anyhow::{Context, anyhow, bail};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct RunArgs {
    /// Config file holding the profile to run (or use --url for an ad-hoc run).
    pub file: Option<PathBuf>,
    /// Which profile of the config to run (optional when it has only one).
    #[arg(long)]
    pub profile: Option<String>,
    /// Ad-hoc target URL; `${env:NAME}` and `${file:PATH}` are expanded (also in -H), and
    /// messages show them as written.
    #[arg(long)]
    pub url: Option<String>,
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Request body.
    #[arg(long)]
    pub body: Option<String>,
    /// Virtual users (closed model), or pre-allocated VUs with --rate.
    #[arg(long)]
    pub vus: Option<u32>,
    /// Open model: iterations per time unit, e.g. `2000/s`.
    #[arg(long)]
    pub rate: Option<String>,
    /// Upper bound on VUs for --rate (default: 100 ms of arrivals, sized for a 50 ms target
    /// with 2x headroom; at least 100).
    #[arg(long)]
    pub max_vus: Option<u32>,
    /// With --rate: drop arrivals the generator reaches later than this behind schedule
    /// (default 500ms), counted as dropped iterations and as generator overload.
    #[arg(long)]
    pub max_lateness: Option<String>,
    /// Test duration, e.g. `30s` (default 10s).
    #[arg(long)]
    pub duration: Option<String>,
    /// Total iterations shared by the VUs (shared-iterations executor).
    #[arg(long)]
    pub iterations: Option<u64>,
    /// Open a new connection for every request (ab without -k).
    #[arg(long)]
    pub no_keep_alive: bool,
    /// Per-request timeout (default 10s).
    #[arg(long)]
    pub timeout: Option<String>,
    /// Skip TLS certificate verification.
    #[arg(long)]
    pub insecure: bool,
    /// HTTP version, over the target's `http`: `2` (h2c prior knowledge on http://, only h2 in
    /// ALPN on https), `1.1`, or `auto` (ALPN on https).
    #[arg(long, value_name = "2|1.1|auto")]
    pub http: Option<String>,
    /// Threshold `metric=expression` in k6 syntax, e.g. `http_req_duration=p(95)<300` (ms) or
    /// `http_req_duration{status:200}=p(99)<500` (repeatable).
    #[arg(long = "threshold")]
    pub thresholds: Vec<String>,
    /// Stop the run as soon as a --threshold fails.
    #[arg(long)]
    pub abort_on_fail: bool,
    /// Run shard `i/N` of the profile (N replicas together produce the whole profile).
    #[arg(long)]
    pub shard: Option<String>,
    /// Write k6's summary-export JSON here.
    #[arg(long)]
    pub summary_export: Option<PathBuf>,
    /// Write a self-contained HTML report of the run here (charts inlined; opens offline).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Outputs (repeatable): `json=FILE` writes k6's per-sample NDJSON (Metric and Point
    /// lines); `json-agg=FILE` one aggregate JSON line per second.
    #[arg(long)]
    pub out: Vec<String>,
    /// Fraction of requests written to `--out json` (0 < f ≤ 1, every k-th request), e.g. 0.1.
    #[arg(long)]
    pub out_sample: Option<f64>,
    /// Runtime worker threads (1 measured fastest per request on small machines).
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// No progress line even on a terminal.
    #[arg(long, short)]
    pub quiet: bool,
    /// Run even when the VUs cannot all hold a connection under the open-file limit (the
    /// shortfall then shows as `local_fd_exhausted` errors).
    #[arg(long)]
    pub ignore_fd_limit: bool,
}

/// How a run ended: its report, and the signal that stopped it, if one did.
pub struct Finished {
    pub report: RunReport,
    /// `SIGTERM` or `SIGINT` when a signal stopped the run.
    pub interrupted_by: Option<&'static str>,
}

/// What to run, resolved from a config file or from flags.
pub struct Resolved {
    pub name: String,
    pub target: Target,
    pub spec: RunSpec,
    pub planned: Duration,
    /// The config's `telemetry:` section: traced iterations are exported while the run lasts.
    pub telemetry: Option<crate::telemetry::TelemetryConfig>,
    /// How the run was set up that its summary should say (a capped default VU pool).
    pub notes: Vec<String>,
}

pub fn resolve(args: &RunArgs, out: &mut impl Write) -> anyhow::Result<Option<Resolved>> {
    let mut shard = match &args.shard {
        Some(s) => parse_shard(s)?,
        None => Shard::WHOLE,
    };
    let mut telemetry = None;
    let (name, target, work, executor, mut thresholds, graceful_stop, start_time, lateness, hold) =
        match (&args.file, &args.url) {
            (Some(_), Some(_)) => bail!("give a config file or --url, not both"),
            (None, None) => bail!("give a config file (and --profile) or --url for an ad-hoc run"),
            (Some(file), None) => {
                let loaded = match config::load_for_run(file) {
                    Ok(l) => l,
                    Err(e) => {
                        config::report(&file.display().to_string(), Err(e), out);
                        return Ok(None);
                    }
                };
                let cfg = loaded.config;
                telemetry = cfg.telemetry.clone();
                let profile = match &args.profile {
                    Some(p) => cfg.profiles.get(p).ok_or_else(|| {
                        anyhow!(
                            "no profile `{p}` in {} (profiles: {})",
                            file.display(),
                            cfg.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                        )
                    })?,
                    None if cfg.profiles.len() == 1 => cfg.profiles.values().next().expect("one"),
                    None => bail!(
                        "{} has {} profiles; pick one with --profile ({})",
                        file.display(),
                        cfg.profiles.len(),
                        cfg.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                };
                // An owned profile runs whole on its owner shard and nowhere else.
                match crate::load::placement::assign(&profile.name, profile.placement, shard) {
                    Assignment::Elsewhere { owner } => {
                        return Err(NotHere(format!(
                            "profile `{}` is owned by shard {owner}/{n} (placement: owned): \
                             nothing to run on shard {i}/{n}",
                            profile.name,
                            i = shard.index(),
                            n = shard.count()
                        ))
                        .into());
                    }
                    a => shard = a.run_shard().unwrap_or(shard),
                }
                let target = cfg
                    .targets
                    .get(&profile.target)
                    .cloned()
                    .context("the profile's target vanished")?;
                let work = cfg
                    .work(profile)
                    .context("the profile's journeys vanished")?;
                (
                    profile.name.clone(),
                    target,
                    work,
                    profile.executor.clone(),
                    profile.thresholds.clone(),
                    profile.graceful_stop,
                    profile.start_time,
                    profile.max_lateness,
                    profile.vu_hold,
                )
            }
            (None, Some(url)) => {
                let (target, executor) = ad_hoc(args, url)?;
                // A defaulted `--max-vus` holds every arrival for the timeout.
                let hold = (args.max_vus.is_none() && executor.is_arrival_rate())
                    .then_some(target.timeout);
                let work = crate::load::walk::Work::single(
                    target.request(),
                    target.checks.clone(),
                    &target.display_url,
                );
                (
                    "adhoc".to_string(),
                    target,
                    work,
                    executor,
                    Vec::new(),
                    Duration::from_secs(30),
                    Duration::ZERO,
                    crate::load::pacing::DEFAULT_MAX_LATENESS,
                    hold,
                )
            }
        };
    let mut target = target;
    if let Some(v) = &args.http {
        target.http = crate::http::HttpVersion::parse(v)
            .ok_or_else(|| Usage(format!("--http `{v}`: write 2, 1.1 or auto")))?;
    }
    for t in &args.thresholds {
        let (metric, expr) = split_threshold(t).ok_or_else(|| {
            Usage(format!(
                "--threshold `{t}`: write it as metric=expression, e.g. http_req_duration=p(95)<300"
            ))
        })?;
        let threshold = crate::thresholds::parse(metric.trim(), expr.trim())
            .map_err(|e| Usage(format!("--threshold `{t}`: {e}")))?;
        thresholds.push(ThresholdSpec {
            threshold,
            abort_on_fail: args.abort_on_fail,
            delay_abort_eval: Duration::ZERO,
        });
    }
    let max_lateness = match &args.max_lateness {
        Some(s) => match crate::units::parse_duration(s) {
            Ok(d) if d.is_zero() => bail!("--max-lateness must be longer than zero"),
            Ok(d) => d,
            Err(e) => bail!("--max-lateness: {e}"),
        },
        None => lateness,
    };
    let mut executor = executor;
    let pool_note = config::capacity::cap_default_pool(
        &mut executor,
        hold,
        shard,
        crate::limits::nofile().ok(),
    );
    let planned = crate::load::plan::planned_duration(&executor);
    let spec = RunSpec {
        profile: name.clone(),
        executor,
        work: Arc::new(work),
        thresholds,
        graceful_stop,
        shard,
        global: None,
        start_time,
        max_lateness,
        tracer: None,
    };
    Ok(Some(Resolved {
        name,
        target,
        spec,
        planned,
        telemetry,
        notes: pool_note.into_iter().collect(),
    }))
}

/// A command-line mistake: exits [`crate::exit::USAGE`] as clap's own errors do.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// `--shard i/N` of a `placement: owned` profile that another shard owns: nothing to run, and
/// not a failure (the owner's run gives the verdict); exits 0 saying which shard owns it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotHere(pub String);

/// `metric=expression`, split at the first `=` outside the metric's tag filter and before the
/// operator (`checks{check:a=b}=rate>0.9` keeps its check name).
fn split_threshold(t: &str) -> Option<(&str, &str)> {
    let mut depth = 0usize;
    for (i, c) in t.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            '=' if depth == 0 => return Some((&t[..i], &t[i + 1..])),
            _ => {}
        }
    }
    None
}

pub fn parse_shard(s: &str) -> anyhow::Result<Shard> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| anyhow!("--shard `{s}`: write it as i/N, e.g. 0/3"))?;
    let (i, n): (u32, u32) = (
        i.trim()
            .parse()
            .map_err(|_| anyhow!("--shard `{s}`: `{i}` is not a number"))?,
        n.trim()
            .parse()
            .map_err(|_| anyhow!("--shard `{s}`: `{n}` is not a number"))?,
    );
    Shard::new(i, n).map_err(|e| anyhow!("--shard `{s}`: {e}"))
}

fn ad_hoc(args: &RunArgs, url: &str) -> anyhow::Result<(Target, Executor)> {
    // `${env:NAME}` and `${file:PATH}` work as in a config, so a secret need not be on the
    // command line; messages show the URL as written.
    let env = config::Env::process();
    let expanded = config::expand_flag(url, &env).map_err(|e| anyhow!("--url: {e}"))?;
    let uri: http::Uri = expanded
        .parse()
        .map_err(|e| anyhow!("--url `{url}` is not a URL: {e}"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        bail!("--url `{url}` must be an absolute http:// or https:// URL");
    }
    let method_name = if args.method.is_empty() {
        "GET"
    } else {
        &args.method
    };
    let method = http::Method::from_bytes(method_name.to_ascii_uppercase().as_bytes())
        .map_err(|_| anyhow!("--method `{}` is not an HTTP method", args.method))?;
    let mut headers = http::HeaderMap::new();
    for h in &args.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| anyhow!("-H `{h}`: write it as `Name: value`"))?;
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| anyhow!("-H `{h}`: `{}` is not a header name", name.trim()))?;
        let written = value.trim();
        let expanded =
            config::expand_flag(written, &env).map_err(|e| anyhow!("-H `{name}`: {e}"))?;
        let mut value = http::HeaderValue::from_str(&expanded).map_err(|_| {
            anyhow!("-H: the value for `{name}` holds characters HTTP does not allow")
        })?;
        value.set_sensitive(written.contains("${"));
        headers.append(name, value);
    }
    let dur = |s: &Option<String>, what: &str, default: Duration| -> anyhow::Result<Duration> {
        match s {
            Some(s) => crate::units::parse_duration(s).map_err(|e| anyhow!("--{what}: {e}")),
            None => Ok(default),
        }
    };
    let duration = dur(&args.duration, "duration", Duration::from_secs(10))?;
    let timeout = dur(&args.timeout, "timeout", Duration::from_secs(10))?;
    if duration.is_zero() {
        bail!("--duration must be longer than zero");
    }
    let executor = match (&args.rate, args.iterations) {
        (Some(_), Some(_)) => bail!("--rate and --iterations do not go together"),
        (Some(rate), None) => {
            let rate = crate::units::parse_rate(rate).map_err(|e| anyhow!("--rate: {e}"))?;
            if rate <= 0.0 {
                bail!("--rate must be above zero");
            }
            let (default_pre, _) = crate::load::spec::default_vu_pool(rate);
            let default_max = crate::load::spec::stall_pool(rate, timeout);
            let pre = args.vus.unwrap_or(default_pre);
            let max = args.max_vus.unwrap_or_else(|| default_max.max(pre));
            if max < pre {
                bail!("--max-vus ({max}) is below the pre-allocated VUs ({pre})");
            }
            Executor::ConstantArrivalRate {
                rate,
                duration,
                pre_allocated_vus: pre,
                max_vus: max,
            }
        }
        (None, Some(iterations)) => Executor::SharedIterations {
            vus: args.vus.unwrap_or(1).max(1),
            iterations,
            max_duration: dur(&args.duration, "duration", Duration::from_secs(600))?,
        },
        (None, None) => Executor::ConstantVus {
            vus: args.vus.unwrap_or(1).max(1),
            duration,
        },
    };
    let target = Target {
        name: "adhoc".into(),
        uri,
        display_url: url.to_string(),
        method,
        headers,
        body: args
            .body
            .clone()
            .map(bytes::Bytes::from)
            .unwrap_or_default(),
        timeout,
        keep_alive: !args.no_keep_alive,
        dns_ttl: Duration::from_secs(300),
        max_body: 1 << 20,
        insecure_skip_verify: args.insecure,
        http: crate::http::HttpVersion::Auto,
        h2_max_connections: crate::http::h2::DEFAULT_MAX_CONNECTIONS,
        tls: crate::http::TlsOptions::default(),
        connect_to: None,
        dns_select: crate::http::DnsSelect::First,
        checks: Vec::new(),
        buckets: config::DEFAULT_BUCKETS.to_vec(),
    };
    Ok((target, executor))
}

/// Runs the command inside a runtime it builds; returns the process exit code.
pub fn command(args: RunArgs) -> i32 {
    let mut stdout = std::io::stdout();
    let resolved = match resolve(&args, &mut stdout) {
        Ok(Some(r)) => r,
        Ok(None) => return crate::exit::CONFIG,
        Err(e) if e.downcast_ref::<NotHere>().is_some() => {
            eprintln!("{e:#}");
            return crate::exit::OK;
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            return if e.downcast_ref::<Usage>().is_some() {
                crate::exit::USAGE
            } else {
                crate::exit::ERROR
            };
        }
    };
    if let Some(code) = refuse_fd_shortfall(&args, &resolved) {
        return code;
    }
    let runtime = if args.workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(args.workers)
            .enable_all()
            .build()
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return crate::exit::ERROR;
        }
    };
    let result = runtime.block_on(execute(&args, resolved, true));
    match result {
        Ok(f) if f.interrupted_by.is_some() => crate::exit::INTERRUPTED,
        Ok(f) if f.report.stats.local_errors_dominate() => crate::exit::ERROR,
        Ok(f) if f.report.inconclusive().is_some() => crate::exit::INCONCLUSIVE,
        Ok(f) if f.report.thresholds_passed() => crate::exit::OK,
        Ok(_) => crate::exit::THRESHOLDS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            if e.downcast_ref::<Usage>().is_some() {
                crate::exit::USAGE
            } else {
                crate::exit::ERROR
            }
        }
    }
}

/// Refuses, as `check` does, a run whose VUs cannot all hold a connection under the open-file
/// limit: its errors would be sloburn's, not the target's. Returns the exit code when refused:
/// 78 for a config's profile (with the `check` line), 2 for flags.
fn refuse_fd_shortfall(args: &RunArgs, r: &Resolved) -> Option<i32> {
    if args.ignore_fd_limit {
        return None;
    }
    let limit = crate::limits::nofile().ok()?;
    let why = match (&args.file, args.max_vus.or(args.vus)) {
        (Some(_), _) => config::fd_fits(&r.spec.executor, r.spec.shard, limit).err()?,
        // Flags: only VUs asked for are refused; a defaulted `--max-vus` is not the user's
        // choice (past the limit its shortfall shows as `local_fd_exhausted`).
        (None, Some(vus)) => {
            crate::limits::fits(u64::from(r.spec.shard.share_u32(vus)), limit).err()?
        }
        (None, None) => return None,
    };
    let why = format!("{why}; or pass --ignore-fd-limit to measure the shortfall");
    match &args.file {
        Some(file) => {
            let name = file.display().to_string();
            println!("{name}: profiles.{}: {why}\n{name}: 1 error(s)", r.name);
            Some(crate::exit::CONFIG)
        }
        None => {
            eprintln!("error: --vus/--max-vus: {why}");
            Some(crate::exit::USAGE)
        }
    }
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
    let started = tokio::time::Instant::now() + r.spec.start_time;
    let capture = args
        .report
        .as_ref()
        .map(|_| crate::web::Capture::start(stats.clone(), None));
    others.extend(capture.iter().map(|c| c.observer()));
    // The exporter lives as long as this run; it is flushed (bounded by its timeout) before
    // the summary.
    let exporter = r.telemetry.as_ref().and_then(|t| {
        crate::telemetry::Exporter::start(t)
            .map_err(|e| {
                let _ = writeln!(std::io::stderr(), "warning: telemetry disabled: {e}");
            })
            .ok()
    });
    let mut spec = r.spec.clone();
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
    let report = tokio::select! {
        report = run => report.map_err(|e| anyhow!("profile `{}`: {e}", r.name))?,
        () = cut.cancelled() => cut_short(&r.spec, &stats, started, caught.get().copied()),
    };
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
    if let Some(Ok((Some(mut file), prev))) = progress.join_next().await {
        let line = summary::last_bucket_json(&report.stats, &prev, unix_now(), interrupted_by);
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
                outputs: &args.out,
                notes: &r.notes,
            };
            writeln!(stdout, "{}", summary::text_with(&header, &report))
        })
        .and_then(|()| stdout.flush());
    exported?;
    reported?;
    Ok(Finished {
        report,
        interrupted_by,
    })
}

/// Where `--out` goes: k6's NDJSON, the per-second aggregate, or both.
struct Outs {
    json: Option<String>,
    agg: Option<String>,
    sample: f64,
}

impl Outs {
    fn parse(specs: &[String], sample: f64) -> anyhow::Result<Outs> {
        if !(sample > 0.0 && sample <= 1.0) {
            return Err(Usage(format!(
                "--out-sample {sample}: give a fraction in (0, 1], e.g. 0.1"
            ))
            .into());
        }
        let mut outs = Outs {
            json: None,
            agg: None,
            sample,
        };
        for spec in specs {
            let (kind, path) = spec.split_once('=').unwrap_or((spec, ""));
            let slot = match kind {
                "json" => &mut outs.json,
                "json-agg" => &mut outs.agg,
                _ => {
                    return Err(Usage(format!(
                        "--out `{spec}`: use json=FILE (k6's NDJSON samples) or json-agg=FILE \
                         (one aggregate line a second)"
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

fn create_out(path: &String) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot create --out file `{path}`"))
}

/// Stops the run on the first SIGTERM or SIGINT, naming it in `caught`; a second one cuts the
/// graceful stop short (`cut`), as a CI cancel does before it kills. SIGHUP only logs.
async fn watch_signals(
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
fn cut_short(
    spec: &RunSpec,
    stats: &RunStats,
    started: tokio::time::Instant,
    first: Option<&str>,
) -> RunReport {
    let snapshot = stats.snapshot(tokio::time::Instant::now().saturating_duration_since(started));
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
async fn report_progress(
    stats: Arc<RunStats>,
    mut prev: crate::load::stats::StatsSnapshot,
    planned: Duration,
    tty: bool,
    mut file: Option<std::fs::File>,
    done: CancellationToken,
) -> (Option<std::fs::File>, crate::load::stats::StatsSnapshot) {
    let start = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = done.cancelled() => return (file, prev),
        }
        let now = stats.snapshot(start.elapsed());
        if tty {
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "\r\x1b[2K{}", summary::progress(&now, planned))
                .and_then(|()| stdout.flush());
        }
        if let Some(f) = file.as_mut() {
            let line = summary::bucket_json(&now, &prev, unix_now());
            if writeln!(f, "{line}").is_err() {
                file = None;
            }
        }
        prev = now;
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
