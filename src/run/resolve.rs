//! What a run runs: a config profile or an ad-hoc `--url` target, with its thresholds.

use super::*;
use crate::config::spec::Executor;
use crate::config::{self, Target};
use crate::load::placement::Assignment;
use crate::load::plan::Shard;
use crate::load::runner::RunSpec;
use crate::thresholds::ThresholdSpec;
use anyhow::{Context, anyhow, bail};
use std::io::Write;
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
                let work = crate::load::iteration::Work::of(&cfg, profile)
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
                let work = crate::load::iteration::Work::single(
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
                    crate::config::spec::DEFAULT_MAX_LATENESS,
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
    let pool_note = crate::load::capacity::cap_default_pool(
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

pub(super) fn ad_hoc(args: &RunArgs, url: &str) -> anyhow::Result<(Target, Executor)> {
    // `${env:NAME}` and `${file:PATH}` work as in a config, so a secret need not be on the
    // command line; messages show the URL as written.
    let env = config::Env::process();
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
            let (default_pre, _) = crate::config::spec::default_vu_pool(rate);
            let default_max = crate::config::spec::stall_pool(rate, timeout);
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

#[cfg(test)]
mod tests {
    use super::*;

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
