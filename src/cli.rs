//! The command line: raw clap parsing, then dispatch to the library. Exit codes are part of the
//! interface: 0 ok, 1 runtime error, 2 usage, 78 bad config (EX_CONFIG), 99 thresholds failed.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Exit code for a config that failed validation (sysexits EX_CONFIG).
pub const EXIT_CONFIG: i32 = 78;
/// Exit code when a threshold failed (as k6).
pub const EXIT_THRESHOLDS: i32 = 99;

#[derive(Parser, Debug)]
#[command(
    name = "sloburn",
    version,
    about = "Prometheus-native SLO load-test daemon"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Validate a config: prints every error as `file:line:col: path: message`.
    Check {
        /// The config file.
        file: PathBuf,
    },
    /// Run one profile (or an ad-hoc test from flags) and print a k6/vegeta-style summary.
    /// Exits 99 when a threshold failed.
    Run(crate::run::RunArgs),
    /// The fault-injecting HTTP test server (latency, errors, stalls, resets, slow and large
    /// bodies; per-request overrides in the query string).
    Target(crate::target::TargetOptions),
}

/// Parses `std::env::args`, runs the command and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match cli.command {
        Command::Check { file } => check(&file, &mut std::io::stdout()),
        Command::Run(args) => crate::run::command(args),
        Command::Target(opts) => match crate::target::run_blocking(opts) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: {e:#}");
                1
            }
        },
    }
}

/// `sloburn check`: errors first (one per line), then warnings, then a one-line verdict.
pub fn check(file: &std::path::Path, out: &mut impl std::io::Write) -> i32 {
    report(&file.display().to_string(), crate::config::load(file), out)
}

/// Prints a load result the way `check` does and returns its exit code.
pub fn report(
    name: &str,
    result: Result<crate::config::Loaded, crate::config::ConfigError>,
    out: &mut impl std::io::Write,
) -> i32 {
    let (code, errors, warnings) = match result {
        Ok(loaded) => (0, Vec::new(), loaded.warnings),
        Err(e) => (EXIT_CONFIG, e.errors, e.warnings),
    };
    for e in &errors {
        let _ = writeln!(out, "{}", e.render(name));
    }
    for w in &warnings {
        let _ = writeln!(out, "warning: {}", w.render(name));
    }
    let _ = if errors.is_empty() {
        writeln!(out, "{name}: ok ({} warning(s))", warnings.len())
    } else {
        writeln!(
            out,
            "{name}: {} error(s), {} warning(s)",
            errors.len(),
            warnings.len()
        )
    };
    code
}
