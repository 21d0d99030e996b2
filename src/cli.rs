//! The command line: raw clap parsing, then dispatch to the library. Exit codes are part of the
//! interface and live in [`crate::exit`]: 0 ok, 1 runtime error, 2 usage, 78 bad config
//! (EX_CONFIG), 99 thresholds failed, 105 `run` stopped by SIGTERM or SIGINT (its results still
//! written), 130 the daemon stopped by a second signal, 70 a panic (logged by
//! [`crate::exit::exit_on_panic`]).

use crate::exit;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "sloburn",
    version,
    about = "Prometheus-native SLO load-test daemon"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log format: `text` (human), `json` (one object per line, for Kubernetes) or `auto`
    /// (text on a terminal, json otherwise).
    #[arg(long, global = true, default_value = "auto")]
    pub log_format: LogFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Auto,
    Text,
    Json,
}

/// Installs the tracing subscriber. `RUST_LOG` overrides the level.
pub fn init_logging(format: LogFormat, default_level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let json = match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // The daemon's own spans: sampled only once `serve` installs an exporter.
    let registry = tracing_subscriber::registry()
        .with(crate::telemetry::daemon::layer())
        .with(filter);
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let _ = if json {
        registry.with(fmt.json().flatten_event(true)).try_init()
    } else {
        registry.with(fmt).try_init()
    };
}

/// Parsed once per process, so the size of its largest variant (`run`'s flags) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub enum Command {
    /// The daemon with a built-in config and an in-process demo target; prints its URLs.
    Demo {
        /// Address for /metrics, the API and the status page (a free port is used when the
        /// default one is taken).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Print the demo's config (for `sloburn target` on 127.0.0.1:8080) and exit.
        #[arg(long)]
        print_config: bool,
    },
    /// The daemon: runs the config's profiles on their schedules and serves /metrics.
    Serve {
        /// The config file (reloaded on SIGHUP and when it changes).
        #[arg(long, short)]
        config: PathBuf,
        /// Overrides server.listen.
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        /// Run shard `i/N` of every profile (e.g. from a StatefulSet ordinal).
        #[arg(long)]
        shard: Option<String>,
        /// Reload only on SIGHUP or the API, not when the file changes.
        #[arg(long)]
        no_watch: bool,
    },
    /// Validate a config: prints every error as `file:line:col: path: message`.
    Check {
        /// The config file.
        file: PathBuf,
        /// Also print where each profile runs on shard `i/N` (`serve --shard i/N`): its share,
        /// owned here (run whole), or owned by another shard.
        #[arg(long)]
        shard: Option<String>,
    },
    /// Run one profile (or an ad-hoc test from flags) and print a k6/vegeta-style summary.
    /// Exits 99 when a threshold failed, 105 when SIGTERM or SIGINT stopped it (the summary and
    /// the export are still written, marked interrupted).
    Run(Box<crate::run::RunArgs>),
    /// Find the highest arrival rate the target serves within its thresholds or SLOs: grow,
    /// bisect to --precision, confirm. Exits 0 with an answer, 99 when even the lowest step
    /// fails, 75 when sloburn itself could not hold a rate (or the budget ran out).
    Capacity(Box<crate::run::capacity::CapacityArgs>),
    /// Did it get slower? Two run records (`run --record FILE`) compared per metric and step.
    Compare(Box<crate::compare::CompareArgs>),
    /// Print Prometheus recording and alerting rules for the config's SLOs.
    Rules {
        /// The config file.
        file: PathBuf,
        /// Wrap the rules in a prometheus-operator `PrometheusRule`.
        #[arg(long)]
        k8s: bool,
        /// `metadata.name` of the PrometheusRule.
        #[arg(long, default_value = "sloburn-slos")]
        name: String,
        /// `metadata.namespace` of the PrometheusRule.
        #[arg(long)]
        namespace: Option<String>,
        /// Extra `metadata.labels` of the PrometheusRule, `key=value` (repeatable).
        #[arg(long = "label")]
        labels: Vec<String>,
        /// Runbook base URL for alert annotations.
        #[arg(long)]
        runbook_base: Option<String>,
        /// Write one file per SLO into this directory instead of printing.
        #[arg(long)]
        output: Option<PathBuf>,
        /// Read latency SLOs' error ratios from native histograms with `histogram_fraction`
        /// (a Prometheus with `--enable-feature=native-histograms` scraping
        /// `server.native_histograms`) instead of the daemon's event counters.
        #[arg(long)]
        native_histograms: bool,
    },
    /// A config from what a team already has, printed as sloburn YAML (what was not
    /// converted is listed on stderr).
    Import {
        #[command(subcommand)]
        kind: Import,
    },
    /// OpenSLO v1 documents to and from sloburn's `slos`.
    Openslo {
        #[command(subcommand)]
        action: Openslo,
    },
    /// The fault-injecting HTTP test server (latency, errors, stalls, resets, slow and large
    /// bodies; per-request overrides in the query string).
    Target(crate::target::TargetOptions),
}

#[derive(Subcommand, Debug)]
pub enum Import {
    /// A k6 script's straight-line subset (`options`, `http.*` calls, `check`, `sleep`,
    /// captures from `res.json()`): a profile, or a journey for several requests. What is not
    /// converted is listed with its line.
    K6 {
        /// The k6 script.
        file: PathBuf,
        /// The target's, journey's and profile's name.
        #[arg(long, default_value = "k6")]
        name: String,
    },
    /// A browser recording (HAR 1.2, from DevTools' "Save all as HAR"): one journey over the
    /// main host, assets and other hosts left out, tokens captured, think times kept.
    Har {
        /// The HAR file.
        file: PathBuf,
        /// The journey's (and its profile's) name.
        #[arg(long, default_value = "recorded")]
        journey: String,
        /// The profile's arrival rate (journeys per second).
        #[arg(long, default_value = "1/s")]
        rate: String,
        /// Keep requests to these hosts too (host[:port], comma-separated).
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        /// Keep static assets (scripts, styles, images, fonts).
        #[arg(long)]
        keep_assets: bool,
    },
    /// An OpenAPI 3 document (JSON or YAML): a target and a profile per operation, or one
    /// journey over chosen operations.
    Openapi {
        /// The OpenAPI file.
        file: PathBuf,
        /// Scheme, host and port the requests go to (the server URL's path is kept); needed
        /// when the document's server URL is relative or not on this machine (localhost, a
        /// loopback address).
        #[arg(long)]
        base_url: Option<String>,
        /// Each profile's arrival rate.
        #[arg(long, default_value = "1/s")]
        rate: String,
        /// One journey of this name over the operations (all, in document order, or those of
        /// `--operations`), instead of a profile per operation.
        #[arg(long)]
        journey: Option<String>,
        /// Only these operations (operationIds, comma-separated; a journey's steps in this
        /// order).
        #[arg(long, value_delimiter = ',')]
        operations: Vec<String>,
        /// Also import the operations that change state (POST, PUT, PATCH, DELETE…); by
        /// default only GET, HEAD and OPTIONS are.
        #[arg(long)]
        include_unsafe: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum Openslo {
    /// Print the SLOs of an OpenSLO v1 file (SLO, with SLI, AlertPolicy and AlertCondition) as
    /// sloburn YAML; a field that does not map is an error at its line:col.
    Import {
        /// The OpenSLO file (one or more `---` separated documents).
        file: PathBuf,
    },
    /// Print a config's SLOs as OpenSLO v1 documents, which `import` turns back into them.
    Export {
        /// The sloburn config file.
        file: PathBuf,
    },
}

/// Parses `std::env::args`, runs the command and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
        }
    };
    prepare(&cli);
    dispatch(cli.command)
}

/// What every command needs before it starts: the daemon's malloc settings, logging, and every
/// file descriptor the process may have.
fn prepare(cli: &Cli) {
    // The daemon's malloc settings that glibc reads only at exec: before any thread exists.
    let daemon = matches!(cli.command, Command::Serve { .. } | Command::Demo { .. });
    let not_reexecuted = daemon
        .then(crate::memory::reexec_with_serve_tunables)
        .flatten();
    let quiet = matches!(
        cli.command,
        Command::Run(_)
            | Command::Capacity(_)
            | Command::Check { .. }
            | Command::Rules { .. }
            | Command::Openslo { .. }
            | Command::Import { .. }
    );
    init_logging(cli.log_format, if quiet { "warn" } else { "info" });
    if let Some(e) = not_reexecuted {
        tracing::warn!(error = %e, "cannot re-execute with the daemon's malloc settings; running with glibc's defaults");
    }
    // Every VU holds a descriptor: take all the process may have before anything counts them.
    if let Err(e) = crate::limits::raise_nofile() {
        tracing::warn!(error = %e, "cannot raise the open-file limit");
    }
}

/// Runs one command: a line per subcommand, its flags handed to the library.
fn dispatch(command: Command) -> i32 {
    match command {
        Command::Demo {
            listen,
            print_config,
        } => crate::demo::command(listen, print_config),
        Command::Serve {
            config,
            listen,
            shard,
            no_watch,
        } => match shard_flag(shard.as_deref()) {
            Ok(shard) => crate::daemon::command(crate::daemon::Options {
                source: crate::daemon::Source::File(config),
                listen,
                shard: shard.unwrap_or(crate::load::plan::Shard::WHOLE),
                watch: !no_watch,
            }),
            Err(code) => code,
        },
        Command::Check { file, shard } => match shard_flag(shard.as_deref()) {
            Ok(shard) => check(&file, shard, &mut std::io::stdout()),
            Err(code) => code,
        },
        Command::Import { kind } => import(kind),
        Command::Openslo {
            action: Openslo::Import { file },
        } => crate::config::openslo::import_command(
            &file,
            &mut std::io::stdout(),
            &mut std::io::stderr(),
        ),
        Command::Openslo {
            action: Openslo::Export { file },
        } => match crate::config::load_without_secrets(&file) {
            Ok(l) => {
                print!("{}", crate::config::openslo::export(&l.config));
                exit::OK
            }
            Err(e) => bad_config(&file, e),
        },
        Command::Run(args) => crate::run::command(*args),
        Command::Capacity(args) => crate::run::capacity::command(*args),
        Command::Compare(args) => crate::compare::command(*args),
        Command::Rules {
            file,
            k8s,
            name,
            namespace,
            labels,
            runbook_base,
            output,
            native_histograms,
        } => {
            let cfg = match crate::config::load_without_secrets(&file) {
                Ok(l) => l.config,
                Err(e) => return bad_config(&file, e),
            };
            let meta = match k8s_meta(name, namespace, labels) {
                Ok(meta) => meta,
                Err(code) => return code,
            };
            let how = RulesHow {
                k8s,
                native_histograms,
            };
            exit_code(rules(&cfg, how, &meta, runbook_base, output.as_deref()))
        }
        Command::Target(opts) => exit_code(crate::target::run_blocking(opts)),
    }
}

/// A config that did not load: its errors printed, exit 78.
fn bad_config(file: &std::path::Path, e: crate::config::ConfigError) -> i32 {
    crate::config::report(&file.display().to_string(), Err(e), &mut std::io::stdout());
    exit::CONFIG
}

/// `--shard i/N`, when given; a bad one is printed and is exit 2.
fn shard_flag(shard: Option<&str>) -> Result<Option<crate::load::plan::Shard>, i32> {
    shard.map(crate::run::parse_shard).transpose().map_err(|e| {
        eprintln!("error: {e:#}");
        exit::USAGE
    })
}

/// Exit 0, or the error printed and exit 1.
fn exit_code(result: anyhow::Result<()>) -> i32 {
    match result {
        Ok(()) => exit::OK,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit::ERROR
        }
    }
}

/// `sloburn import k6|har|openapi`.
fn import(kind: Import) -> i32 {
    match kind {
        Import::K6 { file, name } => import_with(&file, "1/s", |text, shown| {
            crate::importers::k6::import(
                text,
                shown,
                &crate::importers::har::Options {
                    journey: name.clone(),
                    ..Default::default()
                },
            )
        }),
        Import::Har {
            file,
            journey,
            rate,
            hosts,
            keep_assets,
        } => import_with(&file, &rate, |text, name| {
            crate::importers::har::import(
                text,
                name,
                &crate::importers::har::Options {
                    journey: journey.clone(),
                    rate: rate.clone(),
                    hosts: hosts.clone(),
                    keep_assets,
                },
            )
        }),
        Import::Openapi {
            file,
            base_url,
            rate,
            journey,
            operations,
            include_unsafe,
        } => import_openapi(
            &file,
            &crate::importers::openapi::Options {
                base_url,
                rate,
                journey,
                operations,
                include_unsafe,
            },
        ),
    }
}

/// The `PrometheusRule`'s metadata from `--name`, `--namespace` and `--label key=value`s; a
/// label without `=` is printed and is exit 2.
fn k8s_meta(
    name: String,
    namespace: Option<String>,
    labels: Vec<String>,
) -> Result<crate::rules::K8sMeta, i32> {
    let mut meta = crate::rules::K8sMeta {
        name,
        namespace,
        labels: Default::default(),
    };
    for l in labels {
        match l.split_once('=') {
            Some((k, v)) => {
                meta.labels.insert(k.to_string(), v.to_string());
            }
            None => {
                eprintln!("error: --label `{l}`: write it as key=value");
                return Err(exit::USAGE);
            }
        }
    }
    Ok(meta)
}

/// `sloburn check`: errors first (one per line), then warnings, then a one-line verdict.
/// With `shard`, first one line per profile saying where it runs on that shard.
pub fn check(
    file: &std::path::Path,
    shard: Option<crate::load::plan::Shard>,
    out: &mut impl std::io::Write,
) -> i32 {
    let loaded = crate::config::load(file);
    if let (Some(shard), Ok(l)) = (shard, &loaded) {
        placement_lines(&l.config, shard, out);
    }
    let limit = crate::limits::nofile().ok();
    let (refused, capped) = match &loaded {
        Ok(l) => (
            limit
                .map(|limit| crate::load::capacity::fd_refusals(&l.config, limit))
                .unwrap_or_default(),
            crate::load::capacity::pool_caps(&l.config, limit),
        ),
        Err(_) => (Vec::new(), Vec::new()),
    };
    crate::config::report_with(&file.display().to_string(), loaded, &refused, &capped, out)
}

/// `placement (shard i/N): profiles.NAME: …` for every profile, in name order.
fn placement_lines(
    cfg: &crate::config::Config,
    shard: crate::load::plan::Shard,
    out: &mut impl std::io::Write,
) {
    use crate::load::placement::{Assignment, assign};
    let (i, n) = (shard.index(), shard.count());
    for p in cfg.profiles.values() {
        let what = match assign(&p.name, p.placement, shard) {
            Assignment::Share(_) => format!("split: runs 1/{n} of it"),
            Assignment::Whole if n == 1 => "runs it whole (one shard)".to_string(),
            Assignment::Whole => "owned here: runs it whole".to_string(),
            Assignment::Elsewhere { owner } => {
                format!("owned by shard {owner}/{n}: not run here")
            }
        };
        let _ = writeln!(
            out,
            "placement (shard {i}/{n}): profiles.{}: {what}",
            p.name
        );
    }
}

/// `sloburn import openapi`.
fn import_openapi(file: &std::path::Path, opts: &crate::importers::openapi::Options) -> i32 {
    import_with(file, &opts.rate, |text, name| {
        crate::importers::openapi::import(text, name, opts)
    })
}

/// `sloburn import KIND`: the config on stdout, what was not converted on stderr; exit 78
/// (EX_CONFIG) for a file the importer cannot read, 2 for a bad `--rate`.
fn import_with(
    file: &std::path::Path,
    rate: &str,
    import: impl FnOnce(&str, &str) -> Result<crate::importers::openapi::Imported, String>,
) -> i32 {
    if let Err(e) = crate::units::parse_rate(rate) {
        eprintln!("error: --rate `{rate}`: {e}");
        return exit::USAGE;
    }
    let name = file.display().to_string();
    let read = crate::config::read_regular(file, "the file", crate::importers::MAX_INPUT_BYTES)
        .and_then(|b| String::from_utf8(b).map_err(|_| "not UTF-8 text".to_string()));
    let text = match read {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{}", crate::importers::printable(&format!("{name}: {e}")));
            return exit::CONFIG;
        }
    };
    match import(&text, &name).and_then(|i| crate::importers::verify::verify(i, file)) {
        Ok(imported) => {
            for n in &imported.notes {
                eprintln!("warning: {}", crate::importers::printable(n));
            }
            print!("{}", imported.yaml);
            exit::OK
        }
        Err(e) => {
            // Line by line: the importer's own lines stay lines, each escaped and cut.
            let lines: Vec<String> = e.split('\n').map(crate::importers::printable).collect();
            eprintln!("error: {}", lines.join("\n"));
            exit::CONFIG
        }
    }
}

/// How `sloburn rules` writes: a rule file or a `PrometheusRule`, latency from the events or
/// from native histograms.
#[derive(Debug, Clone, Copy, Default)]
pub struct RulesHow {
    pub k8s: bool,
    pub native_histograms: bool,
}

/// `sloburn rules`: to stdout, or one file per SLO under `output`.
pub fn rules(
    cfg: &crate::config::Config,
    how: RulesHow,
    meta: &crate::rules::K8sMeta,
    runbook_base: Option<String>,
    output: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let k8s = how.k8s;
    let mut opts = crate::rules::RulesOptions {
        profiles: cfg.schedule_intervals(),
        certificate_warnings: cfg.certificate_warnings(),
        capacity: crate::rules::capacity_alerts(cfg),
        ..crate::rules::RulesOptions::with_quorum(cfg)
    };
    if how.native_histograms {
        opts.native = crate::rules::native_latency(cfg);
    }
    if let Some(base) = runbook_base {
        opts.runbook_base = base;
    }
    let render = |defs: &[crate::slo::SloDef], meta: &crate::rules::K8sMeta| {
        if k8s {
            crate::rules::generate_k8s(defs, &opts, meta)
        } else {
            crate::rules::generate(defs, &opts)
        }
    };
    let defs = cfg.slo_defs();
    match output {
        None => {
            print!("{}", render(&defs, meta));
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create `{}`", dir.display()))?;
            let per_slo = crate::rules::RulesOptions {
                daemon_alerts: false,
                ..opts.clone()
            };
            let render_with = |o: &crate::rules::RulesOptions,
                               defs: &[crate::slo::SloDef],
                               m: &crate::rules::K8sMeta| {
                if k8s {
                    crate::rules::generate_k8s(defs, o, m)
                } else {
                    crate::rules::generate(defs, o)
                }
            };
            let mut stems = std::collections::HashSet::new();
            for def in &defs {
                // A group's `SLO:VALUE` as `SLO.VALUE`: a file name a ConfigMap key and a
                // PrometheusRule name (a DNS subdomain) can both take.
                let stem = def.name.replace(':', ".");
                if !stems.insert(stem.clone()) {
                    anyhow::bail!(
                        "two SLOs would both be written to `{stem}.yaml`: rename one (a group `SLO:VALUE` is written as `SLO.VALUE`)"
                    );
                }
                let mut m = meta.clone();
                m.name = format!("{}-{stem}", meta.name);
                let path = dir.join(format!("{stem}.yaml"));
                std::fs::write(&path, render_with(&per_slo, std::slice::from_ref(def), &m))
                    .with_context(|| format!("cannot write `{}`", path.display()))?;
            }
            let mut m = meta.clone();
            m.name = format!("{}-daemon", meta.name);
            let path = dir.join("sloburn-daemon.yaml");
            std::fs::write(&path, render_with(&opts, &[], &m))
                .with_context(|| format!("cannot write `{}`", path.display()))?;
        }
    }
    Ok(())
}
