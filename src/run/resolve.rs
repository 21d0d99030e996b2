//! What a run runs: a config profile or an ad-hoc `--url` target, with its thresholds.

use super::args::{RunArgs, parse_shard};
use crate::config::spec::Executor;
use crate::config::{self, Config, Profile, Target};
use crate::load::iteration::Work;
use crate::load::placement::Assignment;
use crate::load::plan::Shard;
use crate::load::runner::RunSpec;
use crate::thresholds::ThresholdSpec;
use anyhow::{Context, anyhow, bail};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

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
    /// `--tag NAME=VALUE`, sorted by name.
    pub tags: Vec<(String, String)>,
    /// The values the config's references resolved to (none for `--url`, whose `--header`
    /// secrets are marked sensitive), for the report's evidence to scrub.
    pub secrets: Vec<crate::config::Secret>,
    /// The profile is a capacity search (`executor: capacity`): `sloburn capacity` runs it,
    /// `run` refuses it.
    pub search: bool,
}

/// What a config's profile or the ad-hoc flags give, before the flags both take apply.
struct Picked {
    name: String,
    target: Target,
    work: Work,
    executor: Executor,
    thresholds: Vec<ThresholdSpec>,
    graceful_stop: Duration,
    start_time: Duration,
    max_lateness: Duration,
    /// How long the target may hold an arrival when the VU pool is defaulted.
    hold: Option<Duration>,
    telemetry: Option<crate::telemetry::TelemetryConfig>,
    shard: Shard,
    /// What the command line changed of the profile (`overrides`).
    notes: Vec<String>,
    secrets: Vec<crate::config::Secret>,
    search: bool,
}

/// Resolves the run from `args`; `Ok(None)` when the config is bad (its errors are written to
/// `out`, as `check` writes them).
pub fn resolve(args: &RunArgs, out: &mut impl Write) -> anyhow::Result<Option<Resolved>> {
    let shard = match &args.shard {
        Some(s) => parse_shard(s)?,
        None => Shard::WHOLE,
    };
    let tags = super::k6flags::tags(&args.tags).map_err(Usage)?;
    let picked = match (&args.file, &args.url) {
        (Some(_), Some(_)) => bail!("give a config file or --url, not both"),
        (None, None) => bail!("give a config file (and --profile) or --url for an ad-hoc run"),
        (Some(file), None) => match from_config(args, file, shard, out)? {
            Some(p) => p,
            None => return Ok(None),
        },
        (None, Some(url)) => from_flags(args, url, shard)?,
    };
    let mut resolved = with_common_flags(args, picked)?;
    resolved.tags = tags;
    Ok(Some(resolved))
}

/// A config file's profile (`--profile`, or its only one).
fn from_config(
    args: &RunArgs,
    file: &Path,
    shard: Shard,
    out: &mut impl Write,
) -> anyhow::Result<Option<Picked>> {
    super::k6flags::not_a_script(file).map_err(Usage)?;
    let env = super::k6flags::env_values(&args.env).map_err(Usage)?;
    let cfg = match config::load_for_run(file, env) {
        Ok(l) => l.config,
        Err(e) => {
            config::report(&file.display().to_string(), Err(e), out);
            return Ok(None);
        }
    };
    let profile = pick_profile(&cfg, args.profile.as_deref(), file)?;
    let shard = placed(profile, shard)?;
    let target = cfg
        .targets
        .get(&profile.target)
        .cloned()
        .context("the profile's target vanished")?;
    let work = Work::of(&cfg, profile).context("the profile's journeys vanished")?;
    let mut executor = profile.executor.clone();
    let flags = load_flags(args)?;
    let overridden = super::overrides::apply(&profile.name, &mut executor, profile.vu_hold, flags)
        .map_err(Usage)?;
    let hold = profile.vu_hold.filter(|_| flags.max_vus.is_none());
    Ok(Some(Picked {
        name: profile.name.clone(),
        target,
        work,
        executor,
        thresholds: profile.thresholds.clone(),
        graceful_stop: profile.graceful_stop,
        start_time: profile.start_time,
        max_lateness: profile.max_lateness,
        hold,
        telemetry: cfg.telemetry.clone(),
        secrets: cfg.secrets.clone(),
        shard,
        notes: overridden,
        search: profile.capacity.is_some(),
    }))
}

/// `--duration`, `--vus`, `--rate`, `--iterations` and `--max-vus` as a config's profile takes
/// them (`overrides`).
fn load_flags(args: &RunArgs) -> anyhow::Result<super::overrides::LoadFlags> {
    let duration = match &args.duration {
        Some(s) => match crate::units::parse_duration(s) {
            Ok(d) if d.is_zero() => bail!("--duration must be longer than zero"),
            Ok(d) => Some(d),
            Err(e) => bail!("--duration: {e}"),
        },
        None => None,
    };
    let rate = match &args.rate {
        Some(r) => match crate::units::parse_rate(r) {
            Ok(r) if r > 0.0 => Some(r),
            Ok(_) => bail!("--rate must be above zero"),
            Err(e) => bail!("--rate: {e}"),
        },
        None => None,
    };
    Ok(super::overrides::LoadFlags {
        duration,
        vus: args.vus,
        rate,
        iterations: args.iterations,
        max_vus: args.max_vus,
    })
}

fn pick_profile<'a>(
    cfg: &'a Config,
    name: Option<&str>,
    file: &Path,
) -> anyhow::Result<&'a Profile> {
    let names = || cfg.profiles.keys().cloned().collect::<Vec<_>>().join(", ");
    match name {
        Some(p) => cfg.profiles.get(p).ok_or_else(|| {
            anyhow!(
                "no profile `{p}` in {} (profiles: {})",
                file.display(),
                names()
            )
        }),
        None if cfg.profiles.len() == 1 => Ok(cfg.profiles.values().next().expect("one")),
        None => bail!(
            "{} has {} profiles; pick one with --profile ({})",
            file.display(),
            cfg.profiles.len(),
            names()
        ),
    }
}

/// The shard `profile` runs on: an owned profile runs whole on its owner shard and nowhere
/// else ([`NotHere`]).
fn placed(profile: &Profile, shard: Shard) -> anyhow::Result<Shard> {
    match crate::load::placement::assign(&profile.name, profile.placement, shard) {
        Assignment::Elsewhere { owner } => Err(NotHere(format!(
            "profile `{}` is owned by shard {owner}/{n} (placement: owned): \
             nothing to run on shard {i}/{n}",
            profile.name,
            i = shard.index(),
            n = shard.count()
        ))
        .into()),
        a => Ok(a.run_shard().unwrap_or(shard)),
    }
}

/// An ad-hoc run of `--url`.
fn from_flags(args: &RunArgs, url: &str, shard: Shard) -> anyhow::Result<Picked> {
    let (target, executor) = ad_hoc(args, url)?;
    // A defaulted `--max-vus` holds every arrival for the timeout.
    let hold = (args.max_vus.is_none() && executor.is_arrival_rate()).then_some(target.timeout);
    let work = match &args.baseline_url {
        Some(old) => {
            let (baseline, _) = ad_hoc(args, old).map_err(|e| anyhow!("--baseline-url: {e:#}"))?;
            let side = |t: &Target| crate::compare::ab::Side {
                request: t.request(),
                display_url: t.display_url.clone(),
            };
            crate::compare::ab::work(side(&target), side(&baseline), &target.checks)
        }
        None => Work::single(target.request(), target.checks.clone(), &target.display_url),
    };
    Ok(Picked {
        name: "adhoc".to_string(),
        target,
        work,
        executor,
        thresholds: Vec::new(),
        graceful_stop: Duration::from_secs(30),
        start_time: Duration::ZERO,
        max_lateness: crate::config::spec::DEFAULT_MAX_LATENESS,
        hold,
        telemetry: None,
        secrets: Vec::new(),
        shard,
        notes: Vec::new(),
        search: false,
    })
}

/// `--http`, `--threshold`, `--max-lateness` over what was picked, the VU pool capped to the
/// open-file limit, and the run's spec.
fn with_common_flags(args: &RunArgs, p: Picked) -> anyhow::Result<Resolved> {
    let mut target = p.target;
    if let Some(v) = &args.http {
        target.http = crate::http::HttpVersion::parse(v)
            .ok_or_else(|| Usage(format!("--http `{v}`: write 3, 2, 1.1 or auto")))?;
        let https = target.uri.scheme_str() == Some("https");
        if target.http == crate::http::HttpVersion::Http3 && !https {
            return Err(Usage(format!(
                "--http 3 (HTTP/3 over QUIC) needs an https:// URL, not {}: QUIC is always \
                 encrypted",
                target.display_url
            ))
            .into());
        }
    }
    let mut thresholds = p.thresholds;
    for t in &args.thresholds {
        thresholds.push(threshold_flag(t, args.abort_on_fail)?);
    }
    let max_lateness = match &args.max_lateness {
        Some(s) => match crate::units::parse_duration(s) {
            Ok(d) if d.is_zero() => bail!("--max-lateness must be longer than zero"),
            Ok(d) => d,
            Err(e) => bail!("--max-lateness: {e}"),
        },
        None => p.max_lateness,
    };
    let mut executor = p.executor;
    let pool_note = crate::load::capacity::cap_default_pool(
        &mut executor,
        p.hold,
        p.shard,
        crate::limits::nofile().ok(),
    );
    let planned = crate::load::plan::planned_duration(&executor);
    let spec = RunSpec {
        profile: p.name.clone(),
        executor,
        work: Arc::new(p.work),
        thresholds,
        graceful_stop: p.graceful_stop,
        shard: p.shard,
        global: None,
        start_time: p.start_time,
        max_lateness,
        tracer: None,
    };
    Ok(Resolved {
        name: p.name,
        target,
        spec,
        planned,
        telemetry: p.telemetry,
        secrets: p.secrets,
        notes: p.notes.into_iter().chain(pool_note).collect(),
        tags: Vec::new(),
        search: p.search,
    })
}

/// One `--threshold metric=expression`.
fn threshold_flag(t: &str, abort_on_fail: bool) -> anyhow::Result<ThresholdSpec> {
    let (metric, expr) = split_threshold(t).ok_or_else(|| {
        Usage(format!(
            "--threshold `{t}`: write it as metric=expression, e.g. http_req_duration=p(95)<300"
        ))
    })?;
    let threshold = crate::thresholds::parse(metric.trim(), expr.trim())
        .map_err(|e| Usage(format!("--threshold `{t}`: {e}")))?;
    Ok(ThresholdSpec {
        threshold,
        abort_on_fail,
        delay_abort_eval: Duration::ZERO,
    })
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
pub(super) fn split_threshold(t: &str) -> Option<(&str, &str)> {
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

/// The target and executor of an ad-hoc `--url` run.
pub(super) fn ad_hoc(args: &RunArgs, url: &str) -> anyhow::Result<(Target, Executor)> {
    // `${env:NAME}` and `${file:PATH}` work as in a config, so a secret need not be on the
    // command line; messages show the URL as written.
    let env = config::Env::process_with(super::k6flags::env_values(&args.env).map_err(Usage)?);
    let expanded = config::expand_flag(url, &env).map_err(|e| anyhow!("--url: {e}"))?;
    let uri: http::Uri = expanded
        .parse()
        .map_err(|e| anyhow!("--url `{url}` is not a URL: {e}"))?;
    let grpc = matches!(uri.scheme_str(), Some("grpc" | "grpcs"));
    if !(grpc || matches!(uri.scheme_str(), Some("http" | "https"))) || uri.host().is_none() {
        bail!("--url `{url}` must be an absolute http://, https://, grpc:// or grpcs:// URL");
    }
    if !grpc && (args.grpc_method.is_some() || !args.protos.is_empty()) {
        bail!("--grpc-method and --proto are for a grpc:// or grpcs:// --url");
    }
    let method_name = if args.method.is_empty() {
        "GET"
    } else {
        &args.method
    };
    let method = http::Method::from_bytes(method_name.to_ascii_uppercase().as_bytes())
        .map_err(|_| anyhow!("--method `{}` is not an HTTP method", args.method))?;
    let headers = header_flags(&args.headers, &env)?;
    let duration = duration_flag(&args.duration, "duration", Duration::from_secs(10))?;
    let timeout = duration_flag(&args.timeout, "timeout", Duration::from_secs(10))?;
    if duration.is_zero() {
        bail!("--duration must be longer than zero");
    }
    let executor = executor_flags(args, duration, timeout)?;
    if grpc {
        let target = super::grpc::target(args, url, uri, headers, timeout)?;
        return Ok((target, executor));
    }
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
        protocol: crate::http::Protocol::Http,
        probe: crate::http::probe::ProbeOptions::default(),
        grpc: None,
    };
    Ok((target, executor))
}

/// `-H Name: value`, each expanded as a config's values are (and then sensitive: its `Debug`
/// is redacted).
fn header_flags(given: &[String], env: &config::Env) -> anyhow::Result<http::HeaderMap> {
    let mut headers = http::HeaderMap::new();
    for h in given {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| anyhow!("-H `{h}`: write it as `Name: value`"))?;
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| anyhow!("-H `{h}`: `{}` is not a header name", name.trim()))?;
        let written = value.trim();
        let expanded =
            config::expand_flag(written, env).map_err(|e| anyhow!("-H `{name}`: {e}"))?;
        let mut value = http::HeaderValue::from_str(&expanded).map_err(|_| {
            anyhow!("-H: the value for `{name}` holds characters HTTP does not allow")
        })?;
        value.set_sensitive(written.contains("${"));
        headers.append(name, value);
    }
    Ok(headers)
}

fn duration_flag(s: &Option<String>, what: &str, default: Duration) -> anyhow::Result<Duration> {
    match s {
        Some(s) => crate::units::parse_duration(s).map_err(|e| anyhow!("--{what}: {e}")),
        None => Ok(default),
    }
}

/// `--rate`'s `(pre-allocated, max)` VUs. Unset, `--max-vus` is `--rate × --timeout` (a stall
/// as long as the timeout is measured, not dropped) within `stall_pool`'s bounds, as its help
/// says; the pre-allocation the user did not set (a tenth of a second of arrivals) never
/// exceeds a `--max-vus` they did: `--rate 2000/s --max-vus 100` was refused against 200.
pub(super) fn vu_pool_flags(args: &RunArgs, rate: f64, timeout: Duration) -> (u32, u32) {
    let (default_pre, _) = crate::config::spec::default_vu_pool(rate);
    match (args.vus, args.max_vus) {
        (Some(pre), Some(max)) => (pre, max),
        (None, Some(max)) => (default_pre.min(max), max),
        (pre, None) => {
            let pre = pre.unwrap_or(default_pre);
            (pre, crate::config::spec::stall_pool(rate, timeout).max(pre))
        }
    }
}

/// `--rate` (open model), `--iterations` (shared), or `--vus` for `duration`.
fn executor_flags(
    args: &RunArgs,
    duration: Duration,
    timeout: Duration,
) -> anyhow::Result<Executor> {
    Ok(match (&args.rate, args.iterations) {
        (Some(_), Some(_)) => bail!("--rate and --iterations do not go together"),
        (Some(rate), None) => {
            let rate = crate::units::parse_rate(rate).map_err(|e| anyhow!("--rate: {e}"))?;
            if rate <= 0.0 {
                bail!("--rate must be above zero");
            }
            let (pre, max) = vu_pool_flags(args, rate, timeout);
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
            max_duration: duration_flag(&args.duration, "duration", Duration::from_secs(600))?,
        },
        (None, None) => Executor::ConstantVus {
            vus: args.vus.unwrap_or(1).max(1),
            duration,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `run --help` said `--max-vus` defaults to 100 ms of arrivals while the run used
    /// `--rate × --timeout`; and `--rate 2000/s --max-vus 100` was refused (exit 1) against a
    /// pre-allocation of 200 the user never set.
    #[test]
    fn the_max_vus_help_states_the_default_the_run_uses() {
        use crate::config::spec::{MAX_DEFAULT_MAX_VUS, MIN_DEFAULT_MAX_VUS};
        use clap::CommandFactory;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let cmd = Cli::command();
        let help = |id: &str| {
            let arg = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.get_help().unwrap().to_string()
        };
        let max_help = help("max_vus");
        for said in [
            "--rate × --timeout".to_string(),
            format!("at least {MIN_DEFAULT_MAX_VUS} and 100 ms of arrivals"),
            format!("at most {MAX_DEFAULT_MAX_VUS}"),
        ] {
            assert!(max_help.contains(&said), "{said}: {max_help}");
        }
        assert!(help("vus").contains("at most --max-vus"));
        let pool = |rate: &str, timeout: u64, vus: Option<u32>, max: Option<u32>| {
            let args = RunArgs {
                rate: Some(rate.into()),
                vus,
                max_vus: max,
                ..RunArgs::default()
            };
            let timeout = Duration::from_secs(timeout);
            match executor_flags(&args, Duration::from_secs(1), timeout) {
                Ok(Executor::ConstantArrivalRate {
                    pre_allocated_vus,
                    max_vus,
                    ..
                }) => Ok((pre_allocated_vus, max_vus)),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e.to_string()),
            }
        };
        // --rate × --timeout, within its bounds.
        assert_eq!(pool("2000/s", 3, None, None), Ok((200, 6000)));
        assert_eq!(pool("5/s", 10, None, None), Ok((1, MIN_DEFAULT_MAX_VUS)));
        assert_eq!(
            pool("1000000/s", 10, None, None),
            Ok((1000, MAX_DEFAULT_MAX_VUS))
        );
        assert_eq!(pool("2000/s", 1, None, None).unwrap().1, 2000);
        // An explicit --max-vus caps the pre-allocation nobody set.
        assert_eq!(pool("2000/s", 10, None, Some(100)), Ok((100, 100)));
        assert_eq!(pool("2000/s", 10, Some(50), Some(100)), Ok((50, 100)));
        // Both given and contradicting: still the user's error.
        assert!(pool("2000/s", 10, Some(300), Some(100)).is_err());
    }

    #[test]
    fn a_threshold_flag_splits_at_the_first_equals_outside_braces() {
        assert_eq!(
            split_threshold("http_req_duration{status:200}=p(95)<300"),
            Some(("http_req_duration{status:200}", "p(95)<300"))
        );
        assert_eq!(
            split_threshold("checks{check:a=b}=rate==1"),
            Some(("checks{check:a=b}", "rate==1"))
        );
        assert_eq!(split_threshold("http_req_failed"), None);
    }
}
