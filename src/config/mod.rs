//! The config: YAML in, a validated [`Config`] out, or every problem with its position.
//!
//! The raw YAML tree never leaves this module. Each error is a [`Diagnostic`] that renders as
//! `file:line:col: path: message`; the checker keeps going after an error so a user fixes all of
//! them in one pass. Secrets (`${env:NAME}`, `${file:PATH}`) are resolved here and marked
//! sensitive, so they never reach `Debug` output, logs or metrics.

mod build;
mod capacity;
pub use capacity::CapacitySpec;
mod document;
pub use build::longest_iteration;
pub use document::{Document, DocumentError};
pub use secrets::expand_flag;
mod checks;
mod executors;
mod files;
mod grpc;
mod journeys;
pub mod locations;
pub mod maintenance;
pub use journeys::{JourneySpec, Journeys, MAX_DATA_FILE_BYTES, StepSpec};
mod diagnostics;
pub mod openslo;
mod profiles;
mod secrets;
mod send;
mod server;
mod slo_groups;
pub use slo_groups::{GroupFilter, SloGroup};
mod presets;
mod slos;
pub mod spec;
mod storage;
mod targets;
mod telemetry;
mod thresholds;
mod tls;
mod walk;
mod yaml;
pub use yaml::MAX_MAP_KEYS;

use crate::checks::Check;
use spec::Executor;
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use diagnostics::{report, report_with};
pub use files::{
    MAX_BODY_FILE_BYTES, MAX_CONFIG_BYTES, MAX_SECRET_FILE_BYTES, read_config, read_regular,
};
pub use yaml::MAX_ALIAS_NODES;
pub use yaml::Pos;

/// One problem found in a config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub pos: Pos,
    /// Dotted path of the offending field, e.g. `targets.checkout.timeout`.
    pub path: String,
    pub message: String,
}

impl Diagnostic {
    /// `file:line:col: path: message`, always one line. The path and message often quote the
    /// config (keys, values, names), so control characters in them are escaped here, the one
    /// place a diagnostic becomes text: a newline from a key cannot forge a second diagnostic,
    /// nor an ESC sequence reach the terminal.
    pub fn render(&self, file: &str) -> String {
        let message = escape_controls(&self.message);
        if self.path.is_empty() {
            format!("{file}:{}:{}: {message}", self.pos.line, self.pos.col)
        } else {
            let path = escape_controls(&self.path);
            format!(
                "{file}:{}:{}: {path}: {message}",
                self.pos.line, self.pos.col
            )
        }
    }
}

/// Control characters (C0, DEL, C1) and the invisible bidi and zero-width marks that can
/// reorder or hide text, as Rust escapes (`\n`, `\u{1b}`); everything else unchanged.
fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    fn hidden(c: char) -> bool {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    }
    if !text.chars().any(hidden) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// How sloburn writes a string into the YAML it generates (rules, imported configs, OpenSLO):
/// a JSON string literal, which is a YAML double-quoted scalar and a PromQL string at once.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

/// A config that failed to load: every error, plus the warnings found on the way.
#[derive(Debug)]
pub struct ConfigError {
    pub file: String,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}", e.render(&self.file))?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// A validated config and the warnings that did not stop it.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<Diagnostic>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// Maintenance windows, top level and per SLO: while one is open the SLOs it names (all,
    /// when it names none) count no event.
    pub maintenance: Vec<Maintenance>,
    pub server: Server,
    pub storage: Storage,
    pub targets: BTreeMap<String, Target>,
    pub profiles: BTreeMap<String, Profile>,
    pub slos: BTreeMap<String, Slo>,
    /// Multi-step iterations, compiled (`journeys:`).
    pub journeys: Journeys,
    /// `telemetry:`; `None` when absent (nothing traced, nothing exported).
    pub telemetry: Option<crate::telemetry::TelemetryConfig>,
    /// Every value a `${env:}` or `${file:}` reference resolved to, anywhere in the config
    /// (headers, URLs, bodies, gRPC metadata, tokens): what a run's evidence scrubs from the
    /// target's answers (`web::scrub`).
    pub secrets: Vec<Secret>,
}

#[derive(Debug, Clone)]
pub struct Server {
    pub listen: SocketAddr,
    /// Bearer token for write endpoints; `None` disables them.
    pub admin_token: Option<Secret>,
    /// Bearer token for `POST /api/hooks/flagger` only (so Flagger needs no admin rights).
    pub hook_token: Option<Secret>,
    /// Whether read endpoints also require the token.
    pub protect_reads: bool,
    /// `server.public_evidence`: whether a run's failure evidence (the target's answers,
    /// scrubbed) is shown without the admin token. Off by default.
    pub public_evidence: bool,
    /// How long in-flight requests may take to finish on shutdown.
    pub grace_period: Duration,
    /// Cap on in-flight requests across all profiles.
    pub max_in_flight: u32,
    /// How long the daemon's own server waits for a request head: on a new connection, and
    /// between requests on a kept-alive one (so also its idle timeout).
    pub header_timeout: Duration,
    /// Cap on the daemon's own open HTTP connections (lowered further to fit the fd limit).
    pub max_connections: u32,
    /// The other shards' APIs (`server.peers`), each a base URL (`http://host:port`), as
    /// written: `{i}` stands for a shard index and is expanded by [`Server::peer_urls`].
    pub peers: Vec<String>,
    /// How the protobuf exposition writes histograms (native schema, classic buckets or not).
    pub native_histograms: NativeOptions,
    /// `server.location`, `server.locations` and `server.resolver` (`locations.rs`).
    pub locations: locations::Locations,
}

/// How histograms are written in the protobuf format (`server.native_histograms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NativeOptions {
    /// The native buckets' schema: each bucket is `2^(2^-schema)` times as wide as the last.
    pub schema: i32,
    /// Whether the classic (`le`) buckets are written beside the native ones.
    pub classic_buckets: bool,
}

impl NativeOptions {
    /// The finest schema the exposition is configured at (from [`crate::hist::MIN_SCHEMA`]);
    /// values are recorded finer ([`crate::hist::RECORD_SCHEMA`]) and merged down at each
    /// scrape.
    pub const MAX_SCHEMA: i32 = 5;
    /// The default schema of the native exposition.
    pub const DEFAULT_SCHEMA: i32 = 3;
}

impl Default for NativeOptions {
    fn default() -> NativeOptions {
        NativeOptions {
            schema: NativeOptions::DEFAULT_SCHEMA,
            classic_buckets: true,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Storage {
    pub path: PathBuf,
    pub flush_interval: Duration,
    /// `storage.restore`: rebuild SLO windows from Prometheus when the store has none.
    pub restore: Option<Restore>,
}

/// `storage.restore`: where the per-minute SLO counts are read back from when the store has
/// none for an SLO (see `daemon::restore`).
#[derive(Debug, Clone)]
pub struct Restore {
    /// Prometheus' base URL, references expanded: never shown (see `display_url`).
    pub prometheus: Secret,
    /// The URL as written, `${env:..}` and `${file:..}` kept as references.
    pub display_url: String,
    /// How far back to read (capped by each SLO's period).
    pub max_age: Duration,
    /// How long start-up waits for Prometheus before serving with what it has.
    pub timeout: Duration,
}

/// A string that must never be printed. `Debug` shows `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[derive(Clone)]
pub struct Target {
    pub name: String,
    /// The URL the requests go to, its references expanded: never shown (see `display_url`).
    pub uri: http::Uri,
    /// The URL as written, `${env:..}` and `${file:..}` kept as references: what messages,
    /// logs and `Debug` show.
    pub display_url: String,
    pub method: http::Method,
    /// Header values that came from `${env:..}` or `${file:..}` are marked sensitive.
    pub headers: http::HeaderMap,
    pub body: bytes::Bytes,
    pub timeout: Duration,
    pub keep_alive: bool,
    pub dns_ttl: Duration,
    pub max_body: u64,
    /// `tls.insecure`, or its older name `insecure_skip_verify`.
    pub insecure_skip_verify: bool,
    pub http: crate::http::HttpVersion,
    /// `http2.max_connections`: the HTTP/2 connections the target's users share.
    pub h2_max_connections: usize,
    pub tls: crate::http::TlsOptions,
    /// `connect_to`: the host and port dialled in place of the URL's.
    pub connect_to: Option<(String, u16)>,
    pub dns_select: crate::http::DnsSelect,
    pub checks: Vec<Check>,
    /// Histogram bucket upper bounds in seconds, ascending.
    pub buckets: Vec<f64>,
    /// HTTP, or the probe the URL's scheme names.
    pub protocol: crate::http::Protocol,
    pub probe: crate::http::probe::ProbeOptions,
    /// A `grpc://` or `grpcs://` target's call.
    pub grpc: Option<crate::http::grpc::GrpcSpec>,
}

/// Like the derived one, with the URL as written in place of the expanded one (headers from
/// references are sensitive, which `HeaderMap`'s own `Debug` hides).
impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("url", &self.display_url)
            .field("method", &self.method)
            .field("headers", &self.headers)
            .field("body_bytes", &self.body.len())
            .field("timeout", &self.timeout)
            .field("keep_alive", &self.keep_alive)
            .field("checks", &self.checks.len())
            .finish_non_exhaustive()
    }
}

pub use crate::schedule::{Overlap, Schedule};

pub use crate::thresholds::ThresholdSpec;

#[derive(Debug, Clone, PartialEq)]
pub struct Guard {
    pub slo: String,
    pub max_burn_rate: f64,
    pub window: Duration,
}

#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    /// The target it sends to (a journey profile: its journeys' one target).
    pub target: String,
    /// `journey:` or `mix:`: (journey, weight) in mix order; empty for a single request.
    pub mix: Vec<(String, u32)>,
    pub executor: Executor,
    pub schedule: Option<Schedule>,
    pub jitter: Duration,
    pub overlap: Overlap,
    pub run_on_start: bool,
    pub thresholds: Vec<ThresholdSpec>,
    pub graceful_stop: Duration,
    pub start_time: Duration,
    /// Arrival-rate only: an arrival the scheduler reaches later than this is dropped.
    pub max_lateness: Duration,
    pub guard: Option<Guard>,
    /// An arrival-rate profile without `max_vus`: how long its target may hold one iteration
    /// (the timeout, or the largest SLO latency bound if larger; a journey's steps' timeouts
    /// and think times). Its default pool is `rate × vu_hold` (`spec::stall_pool`),
    /// capped at run time by the open-file limit (`load::capacity::cap_default_pool`). `None` when
    /// the profile sets `max_vus` or is no arrival-rate profile.
    pub vu_hold: Option<Duration>,
    /// With `--shard i/N`: every shard runs its share (`split`, the default) or the rendezvous
    /// owner runs it whole (`owned`); see `load::placement`.
    pub placement: spec::Placement,
    /// `executor: capacity`: the search the daemon runs (its `executor` is a step's shape).
    pub capacity: Option<CapacitySpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Sli {
    /// Good = a response arrived, its status is expected and every check passed.
    Availability,
    /// Good = succeeded within `under`. Failures are bad unless `exclude_failures`.
    Latency {
        under: Duration,
        exclude_failures: bool,
        /// Measure from the iteration's intended start (`http_req_corrected_duration`, the
        /// default: a stalled target shows, no coordinated omission), or k6's
        /// `http_req_duration` from the request's actual start (`measure: duration`).
        corrected: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TierSpec {
    pub name: String,
    pub page: bool,
    pub long: Duration,
    pub short: Duration,
    pub factor: f64,
}

#[derive(Debug, Clone)]
pub struct Slo {
    pub name: String,
    pub target: String,
    /// `journey:`: only this journey's traffic counts (with `step`, only that step's requests;
    /// without, one event per iteration, good when every step passed).
    pub journey: Option<String>,
    pub step: Option<String>,
    /// Profiles whose traffic counts; empty means every profile on the target.
    pub profiles: Vec<String>,
    /// Percent, in (0, 100).
    pub objective: f64,
    /// Rolling length, or a calendar period's nominal length (see [`crate::slo::Calendar`]).
    pub period: Duration,
    /// `period: {calendar: month, timezone: Europe/Berlin}`.
    pub calendar: Option<crate::slo::Calendar>,
    pub sli: Sli,
    pub description: String,
    pub labels: BTreeMap<String, String>,
    /// Alert tiers; `None` means the SRE Workbook defaults scaled to the period.
    pub tiers: Option<Vec<TierSpec>>,
    /// One SLO of a `group_by`: which group of the SLO as written it is (`slo_groups.rs`).
    pub group: Option<SloGroup>,
    /// `quorum: K`: judged across `server.locations` (`locations.rs`).
    pub quorum: Option<locations::Quorum>,
}

/// A maintenance window (`maintenance.rs`).
#[derive(Debug, Clone)]
pub struct Maintenance {
    pub name: String,
    /// The SLOs it applies to; empty: every SLO.
    pub slos: Vec<String>,
    pub when: MaintenanceWhen,
}

#[derive(Debug, Clone)]
pub enum MaintenanceWhen {
    /// From each start of `schedule`, for `duration`.
    Recurring {
        schedule: crate::schedule::Schedule,
        duration: Duration,
    },
    /// Unix seconds, `start` included, `end` not.
    Fixed { start: i64, end: i64 },
}

/// Default histogram buckets: HTTP latency from 1 ms to 10 s.
pub const DEFAULT_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Reads and validates a config file.
pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
    load_with(path, &Env::process())
}

/// Reads and validates a config file for `sloburn run`: the daemon's own secrets
/// (`server.admin_token`) are checked for shape but not read, since a run never serves the API.
/// `overrides` are `run -e KEY=VALUE`'s values, over the process's environment.
pub fn load_for_run(
    path: &Path,
    overrides: BTreeMap<String, String>,
) -> Result<Loaded, ConfigError> {
    let mut env = Env::process_with(overrides);
    env.resolve_server_secrets = false;
    load_with(path, &env)
}

/// Reads and validates a config file without reading secrets (for `sloburn rules`).
pub fn load_without_secrets(path: &Path) -> Result<Loaded, ConfigError> {
    let mut env = Env::process();
    env.resolve_secrets = false;
    load_with(path, &env)
}

fn load_with(path: &Path, env: &Env) -> Result<Loaded, ConfigError> {
    let file = path.display().to_string();
    let text = files::read_config(path).map_err(|e| ConfigError {
        file: file.clone(),
        errors: vec![Diagnostic {
            pos: Pos { line: 1, col: 1 },
            path: String::new(),
            message: format!("cannot read the config file: {e}"),
        }],
        warnings: Vec::new(),
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    from_str(&text, &file, base, env)
}

/// Looks up an environment variable by name.
type VarLookup = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where `${env:..}` and `${file:..}` references are resolved from; tests pass their own.
pub struct Env {
    vars: VarLookup,
    /// DNS `ndots` for the search-path warning.
    pub ndots: u8,
    /// False for commands that never send traffic (`rules`): secret references are then
    /// checked for shape but not read, so generating rules needs no credentials.
    pub resolve_secrets: bool,
    /// False for `run`: the `server` section's secrets belong to the daemon only.
    pub resolve_server_secrets: bool,
}

impl Env {
    pub fn process() -> Env {
        Env {
            vars: Box::new(|name| std::env::var(name).ok()),
            ndots: crate::http::system_ndots(),
            resolve_secrets: true,
            resolve_server_secrets: true,
        }
    }

    /// The process's environment with `overrides` (k6's `-e KEY=VALUE`) over it.
    pub fn process_with(overrides: BTreeMap<String, String>) -> Env {
        if overrides.is_empty() {
            return Env::process();
        }
        let vars = move |name: &str| overrides.get(name).cloned().or(std::env::var(name).ok());
        Env {
            vars: Box::new(vars),
            ..Env::process()
        }
    }

    pub fn from_map(map: BTreeMap<String, String>, ndots: u8) -> Env {
        Env {
            vars: Box::new(move |name| map.get(name).cloned()),
            ndots,
            resolve_secrets: true,
            resolve_server_secrets: true,
        }
    }

    fn var(&self, name: &str) -> Option<String> {
        (self.vars)(name)
    }
}

/// Validates config text. `file` names it in messages; `base` resolves relative paths.
pub fn from_str(text: &str, file: &str, base: &Path, env: &Env) -> Result<Loaded, ConfigError> {
    // `load` refuses a larger file before reading it; this covers callers that read the text
    // themselves (the daemon's reload).
    if text.len() as u64 > MAX_CONFIG_BYTES {
        return Err(ConfigError {
            file: file.to_string(),
            errors: vec![Diagnostic {
                pos: Pos { line: 1, col: 1 },
                path: String::new(),
                message: format!(
                    "the config is {} bytes, over the limit of {}",
                    text.len(),
                    files::show_bytes(MAX_CONFIG_BYTES)
                ),
            }],
            warnings: Vec::new(),
        });
    }
    let root = yaml::parse(text).map_err(|e| ConfigError {
        file: file.to_string(),
        errors: vec![Diagnostic {
            pos: e.pos,
            path: String::new(),
            message: format!("YAML syntax: {}", e.message),
        }],
        warnings: Vec::new(),
    })?;
    let mut ctx = walk::Ctx::default();
    let config = build::config(&mut ctx, &root, base, env);
    let mut warnings = ctx.warnings;
    warnings.sort_by_key(|d| (d.pos.line, d.pos.col));
    match config {
        Some(config) if ctx.errors.is_empty() => Ok(Loaded { config, warnings }),
        _ => {
            let mut errors = ctx.errors;
            errors.sort_by_key(|d| (d.pos.line, d.pos.col));
            Err(ConfigError {
                file: file.to_string(),
                errors,
                warnings,
            })
        }
    }
}

impl Slo {
    /// The pure SLO engine's definition: objective as a ratio, tiers resolved.
    pub fn def(&self) -> crate::slo::SloDef {
        let tiers = match &self.tiers {
            Some(t) => t
                .iter()
                .map(|t| crate::slo::Tier {
                    name: t.name.clone(),
                    severity: if t.page {
                        crate::slo::Severity::Page
                    } else {
                        crate::slo::Severity::Ticket
                    },
                    long: t.long,
                    short: t.short,
                    factor: t.factor,
                })
                .collect(),
            None => crate::slo::default_tiers(self.period),
        };
        // A journey SLO's rules and alerts say which journey (and step) they watch.
        let mut labels = self.labels.clone();
        if let Some(j) = &self.journey {
            labels.entry("journey".into()).or_insert_with(|| j.clone());
        }
        if let Some(s) = &self.step {
            labels.entry("step".into()).or_insert_with(|| s.clone());
        }
        crate::slo::SloDef {
            name: self.name.clone(),
            service: self.target.clone(),
            objective: self.objective / 100.0,
            period: self.period,
            calendar: self.calendar,
            tiers,
            labels,
            description: self.description.clone(),
        }
    }
}

impl Config {
    /// Every SLO's definition, in name order.
    pub fn slo_defs(&self) -> Vec<crate::slo::SloDef> {
        self.slos.values().map(Slo::def).collect()
    }

    /// `(profile, longest gap between runs)` for every scheduled profile, for the
    /// not-running alert. The gap is the largest over a fixed reference stretch of firings
    /// (from 2025-01-01 UTC, up to a year), so it covers DST days and month ends and the
    /// generated rules do not depend on the day they are generated.
    /// Each TLS probe target with the name of its warning check, for the rules.
    pub fn certificate_warnings(&self) -> Vec<(String, String)> {
        self.targets
            .values()
            .flat_map(|t| {
                t.checks
                    .iter()
                    .filter(|c| c.kind.is_warning())
                    .map(|c| (t.name.clone(), c.name.clone()))
            })
            .collect()
    }

    pub fn schedule_intervals(&self) -> Vec<(String, Duration)> {
        self.profiles
            .values()
            .filter_map(|p| Some((p.name.clone(), longest_gap(p.schedule.as_ref()?)?)))
            .collect()
    }
}

fn longest_gap(schedule: &Schedule) -> Option<Duration> {
    if let Schedule::Every(d) = schedule {
        return Some(*d);
    }
    let start = chrono::DateTime::from_timestamp(1_735_689_600, 0)?; // 2025-01-01T00:00:00Z
    let end = start + chrono::TimeDelta::days(366);
    let mut t = schedule.next_after(start)?;
    let mut longest = Duration::ZERO;
    for _ in 0..2000 {
        let Some(next) = schedule.next_after(t) else {
            break;
        };
        longest = longest.max((next - t).to_std().ok()?);
        if next > end {
            break;
        }
        t = next;
    }
    (!longest.is_zero()).then_some(longest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_escapes_control_and_bidi_characters_only() {
        let d = Diagnostic {
            pos: Pos { line: 2, col: 3 },
            path: "targets.\u{202e}a".into(),
            message: "`naïve\tvalue\r\n\u{9b}31m` €".into(),
        };
        assert_eq!(
            d.render("c.yaml"),
            "c.yaml:2:3: targets.\\u{202e}a: `naïve\\tvalue\\r\\n\\u{9b}31m` €"
        );
    }

    fn slo_config(latency: &str) -> Result<Loaded, ConfigError> {
        let text = format!(
            "targets:\n  t:\n    url: http://127.0.0.1:1/\nslos:\n  s:\n    target: t\n    \
             sli: {{ latency: {latency} }}\n    objective: 99\n"
        );
        from_str(
            &text,
            "c.yaml",
            Path::new("."),
            &Env::from_map(BTreeMap::new(), 1),
        )
    }

    #[test]
    fn latency_slis_measure_the_corrected_latency_unless_told() {
        let sli = |latency: &str| slo_config(latency).map(|l| l.config.slos["s"].sli.clone());
        let corrected = |latency: &str| match sli(latency) {
            Ok(Sli::Latency { corrected, .. }) => corrected,
            other => panic!("{other:?}"),
        };
        assert!(corrected("{ under: 300ms }"));
        assert!(corrected("{ under: 300ms, measure: corrected }"));
        assert!(!corrected("{ under: 300ms, measure: duration }"));
        let err = slo_config("{ under: 300ms, measure: wall }").unwrap_err();
        assert!(
            err.errors[0].message.contains("use `corrected`"),
            "{:?}",
            err.errors
        );
    }
}
