//! `sloburn capacity`'s front: its flags, the profile resolved as `run` resolves one, the pass
//! conditions (thresholds, `--threshold`, the SLOs on the profile's target), then the search
//! (`crate::capacity`) with its lines, `--summary-export` and `--report`.

use super::{RunArgs, Usage};
use crate::capacity::{self, Capacity, Condition, MAX_STEPS, Plan, SearchConfig, Stepper};
use crate::config::CapacitySpec;
use anyhow::{Context, bail};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct CapacityArgs {
    /// Config file holding the profile (an arrival-rate one), or use --url.
    pub file: Option<PathBuf>,
    /// Which profile of the config (optional when it has only one).
    #[arg(long)]
    pub profile: Option<String>,
    /// Ad-hoc target URL (as `run --url`).
    #[arg(long)]
    pub url: Option<String>,
    #[arg(long, default_value = "GET")]
    pub method: String,
    /// Request header `Name: value` (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    #[arg(long)]
    pub body: Option<String>,
    /// Per-request timeout (default 10s); a defaulted VU pool holds each arrival this long.
    #[arg(long)]
    pub timeout: Option<String>,
    #[arg(long)]
    pub insecure: bool,
    #[arg(long, value_name = "2|1.1|auto")]
    pub http: Option<String>,
    /// A step's pass condition `metric=expression` in k6 syntax, e.g.
    /// `http_req_duration=p(95)<300` (repeatable; with a config, added to the profile's
    /// thresholds and the SLOs on its target). Latency is read from the corrected duration.
    #[arg(long = "threshold")]
    pub thresholds: Vec<String>,
    /// The ceiling, e.g. `2000/s`: no step runs above it (default: the profile's `max_rate`,
    /// for a profile with `executor: capacity`, whose fields are every flag's default below).
    #[arg(long, value_name = "RATE")]
    pub max_rate: Option<String>,
    /// The first step's rate (default: --max-rate ÷ 32).
    #[arg(long, value_name = "RATE")]
    pub start_rate: Option<String>,
    /// How long each step runs (default: long enough for 20 requests past the strictest
    /// percentile at its rate, e.g. 400 for p(95), within 5s and 60s).
    #[arg(long, value_name = "DURATION")]
    pub step_duration: Option<String>,
    /// How close the bracket around the answer is, `5%` (the default) or `0.05`.
    #[arg(long)]
    pub precision: Option<String>,
    /// The budget for the whole search (default 15m); it ends undecided (75) when spent.
    #[arg(long, value_name = "DURATION")]
    pub max_duration: Option<String>,
    /// The pause between steps, so one step's backlog does not fail the next (default 2s).
    #[arg(long, value_name = "DURATION")]
    pub cool_down: Option<String>,
    /// Every step's VU pool (default: each step's rate × --timeout, as `run --rate`).
    #[arg(long)]
    pub max_vus: Option<u32>,
    /// Arrivals sloburn reaches later than this are dropped as its own overload (default
    /// 500ms): steps with them are inconclusive.
    #[arg(long)]
    pub max_lateness: Option<String>,
    /// `-e KEY=VALUE` (repeatable), as `run`.
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Write `{"capacity": {rate, low, high, limited_by, steps, …}}` here.
    #[arg(long)]
    pub summary_export: Option<PathBuf>,
    /// Write a self-contained HTML page plotting each step's rate against its deciding figure.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    /// Runtime worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Search even when --max-vus cannot all hold a connection under the open-file limit
    /// (the shortfall then shows as `local_fd_exhausted` errors: such steps are inconclusive).
    #[arg(long)]
    pub ignore_fd_limit: bool,
}

/// Runs the command inside a runtime it builds; returns the process exit code.
pub fn command(args: CapacityArgs) -> i32 {
    let runtime = match super::runtime(args.workers) {
        Ok(r) => r,
        Err(code) => return code,
    };
    runtime.block_on(async {
        let stop = CancellationToken::new();
        let _watch = watch_signals(&stop);
        match execute(&args, &mut std::io::stdout(), &stop).await {
            Ok(Some(c)) => c.exit_code(),
            Ok(None) => crate::exit::CONFIG,
            Err(e) => {
                eprintln!("error: {e:#}");
                if e.downcast_ref::<Usage>().is_some() {
                    crate::exit::USAGE
                } else {
                    crate::exit::ERROR
                }
            }
        }
    })
}

/// SIGTERM and SIGINT end the search (the answer so far is still written); the task ends with
/// the returned set.
fn watch_signals(stop: &CancellationToken) -> tokio::task::JoinSet<()> {
    let mut set = tokio::task::JoinSet::new();
    if let Ok(mut signals) = crate::signals::Signals::install() {
        let stop = stop.clone();
        set.spawn(async move {
            while let Some(caught) = signals.next().await {
                if let crate::signals::Caught::Stop(_) = caught {
                    stop.cancel();
                }
            }
        });
    }
    set
}

/// Resolves, searches, prints and writes; `Ok(None)` when the config is bad (its errors
/// written to `out`). Used by the command and by tests in-process.
pub async fn execute(
    args: &CapacityArgs,
    out: &mut (dyn Write + Send),
    stop: &CancellationToken,
) -> anyhow::Result<Option<Capacity>> {
    // With --url the first step's rate is the flags'; a profile's fields are read once it
    // is resolved.
    let url_start = match &args.url {
        Some(_) => plan_of(args, None)?.search.start,
        None => 1.0,
    };
    let run_args = run_args(args, url_start);
    let mut buffered = Vec::new();
    let resolved = match super::resolve(&run_args, &mut buffered) {
        Ok(Some(r)) => r,
        Ok(None) => {
            out.write_all(&buffered)?;
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    if !resolved.spec.executor.is_arrival_rate() {
        bail!(Usage(format!(
            "capacity runs the open model only: profile `{}` is {}; give it an arrival-rate \
             executor (its rate is replaced by each step's), or use --url",
            resolved.name,
            crate::load::plan::executor_name(&resolved.spec.executor)
        )));
    }
    let cfg = config_of(args)?;
    let spec = cfg
        .as_ref()
        .and_then(|c| c.profiles.get(&resolved.name))
        .and_then(|p| p.capacity.clone());
    let plan = plan_of(args, spec.as_ref())?;
    let max_vus = args.max_vus.or(spec.and_then(|s| s.max_vus));
    if let (Some(vus), Ok(limit), false) = (max_vus, crate::limits::nofile(), args.ignore_fd_limit)
    {
        crate::limits::fits(u64::from(vus), limit).map_err(|why| {
            Usage(format!(
                "--max-vus: {why}; or pass --ignore-fd-limit to measure the shortfall"
            ))
        })?;
    }
    let conditions = conditions(cfg.as_ref(), &resolved)?;
    let stepper = Stepper::new(
        &resolved.spec,
        resolved
            .target
            .client(std::sync::Arc::new(crate::http::Resolver::system())),
        resolved.target.timeout,
        &conditions,
        max_vus,
    );
    writeln!(
        out,
        "capacity of {} ({}): steps from {} up to {}, ±{}%, judged by {}",
        resolved.name,
        resolved.target.display_url,
        capacity::rate(plan.search.start),
        capacity::rate(plan.search.max_rate),
        plan.search.precision * 100.0,
        conditions
            .iter()
            .map(Condition::name)
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let capacity = capacity::drive(&plan, &stepper, &conditions, out, stop).await?;
    writeln!(out, "{}", capacity.summary)?;
    write_files(args, &capacity)?;
    Ok(Some(capacity))
}

/// `--summary-export` and `--report`.
fn write_files(args: &CapacityArgs, c: &Capacity) -> anyhow::Result<()> {
    if let Some(path) = &args.summary_export {
        let json = serde_json::to_string_pretty(&c.export_json())?;
        std::fs::write(path, json)
            .with_context(|| format!("cannot write --summary-export `{}`", path.display()))?;
    }
    if let Some(path) = &args.report {
        std::fs::write(path, capacity::html(c))
            .with_context(|| format!("cannot write --report `{}`", path.display()))?;
    }
    Ok(())
}

/// The search's flags, checked; a flag not given is the capacity profile's field (`spec`), or
/// the default.
fn plan_of(args: &CapacityArgs, spec: Option<&CapacitySpec>) -> anyhow::Result<Plan> {
    let rate_flag = |flag: &str, v: &str| -> anyhow::Result<f64> {
        match crate::units::parse_rate(v) {
            Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
            Ok(_) => Err(Usage(format!("--{flag} must be above zero")).into()),
            Err(e) => Err(Usage(format!("--{flag}: {e}")).into()),
        }
    };
    let duration_flag = |flag: &str, v: &str| -> anyhow::Result<Duration> {
        match crate::units::parse_duration(v) {
            Ok(d) if d.is_zero() && flag != "cool-down" => {
                Err(Usage(format!("--{flag} must be longer than zero")).into())
            }
            Ok(d) => Ok(d),
            Err(e) => Err(Usage(format!("--{flag}: {e}")).into()),
        }
    };
    let max_rate = match (&args.max_rate, spec) {
        (Some(v), _) => rate_flag("max-rate", v)?,
        (None, Some(s)) => s.max_rate,
        (None, None) => bail!(Usage(
            "give --max-rate (the ceiling, e.g. 2000/s), or a profile with `executor: capacity` \
             and its `max_rate`"
                .into()
        )),
    };
    let start = match (&args.start_rate, spec) {
        (Some(s), _) => rate_flag("start-rate", s)?,
        (None, Some(s)) if args.max_rate.is_none() => s.start_rate,
        _ => max_rate / 32.0,
    };
    let precision = match (&args.precision, spec) {
        (Some(p), _) => precision(p)?,
        (None, Some(s)) => s.precision,
        (None, None) => 0.05,
    };
    let search = SearchConfig {
        start,
        max_rate,
        precision,
        growth: 2.0,
        max_steps: MAX_STEPS,
    };
    search.check().map_err(Usage)?;
    let duration = |flag: &str, given: &Option<String>, or: Duration| match given {
        Some(d) => duration_flag(flag, d),
        None => Ok(or),
    };
    Ok(Plan {
        search,
        step_duration: match &args.step_duration {
            Some(d) => Some(duration_flag("step-duration", d)?),
            None => spec.and_then(|s| s.step_duration),
        },
        cool_down: duration(
            "cool-down",
            &args.cool_down,
            spec.map_or(Duration::from_secs(2), |s| s.cool_down),
        )?,
        max_duration: duration(
            "max-duration",
            &args.max_duration,
            spec.map_or(Duration::from_secs(15 * 60), |s| s.max_duration),
        )?,
    })
}

/// `5%`, `5 %` or `0.05`.
fn precision(text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| Usage(format!("--precision `{text}`: write it as 5% or 0.05")))?;
    Ok(if percent { v / 100.0 } else { v })
}

/// The flags `run::resolve` reads: the target, its thresholds, and for `--url` an arrival
/// rate (the first step's; each step replaces it).
fn run_args(args: &CapacityArgs, start: f64) -> RunArgs {
    RunArgs {
        file: args.file.clone(),
        profile: args.profile.clone(),
        url: args.url.clone(),
        method: args.method.clone(),
        headers: args.headers.clone(),
        body: args.body.clone(),
        timeout: args.timeout.clone(),
        insecure: args.insecure,
        http: args.http.clone(),
        thresholds: args.thresholds.clone(),
        rate: args.url.as_ref().map(|_| format!("{start}/s")),
        max_vus: args.max_vus,
        max_lateness: args.max_lateness.clone(),
        env: args.env.clone(),
        workers: args.workers,
        quiet: true,
        ignore_fd_limit: args.ignore_fd_limit,
        ..RunArgs::default()
    }
}

/// The config of `FILE`, read again after `run::resolve` checked it.
fn config_of(args: &CapacityArgs) -> anyhow::Result<Option<crate::config::Config>> {
    let Some(file) = &args.file else {
        return Ok(None);
    };
    // `-e` was checked by `run::resolve`.
    let env = args
        .env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let loaded = crate::config::load_for_run(file, env)
        .map_err(|_| anyhow::anyhow!("{}: the config changed while read", file.display()))?;
    Ok(Some(loaded.config))
}

/// The thresholds (the profile's and `--threshold`'s) and, with a config, the SLOs on the
/// profile's target (those scoped to a journey are not a step's condition).
fn conditions(
    cfg: Option<&crate::config::Config>,
    r: &super::Resolved,
) -> anyhow::Result<Vec<Condition>> {
    let slos = cfg.iter().flat_map(|c| c.slos.values());
    let out = capacity::conditions_of(&r.spec.thresholds, slos, &r.target.name, &r.name)
        .map_err(Usage)?;
    if out.is_empty() {
        bail!(Usage(
            "nothing decides a step: give --threshold (e.g. http_req_duration=p(95)<300), or a \
             profile with thresholds or SLOs on its target"
                .into()
        ));
    }
    Ok(out)
}
