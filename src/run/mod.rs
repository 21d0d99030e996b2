//! `sloburn run`: one profile from a config file, or an ad-hoc run from flags, with a live
//! progress line on a terminal, the k6 + vegeta summary, `--summary-export`, and the outputs
//! of `--out` and `--report` (`crate::output`).
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

use std::io::Write;

mod args;
pub mod capacity;
mod collect;
mod execute;
mod grpc;
mod http_debug;
mod k6flags;
mod overrides;
mod resolve;
mod room;
mod shares;

pub use args::{RunArgs, parse_shard};
pub use execute::{Finished, execute};
pub use resolve::{NotHere, Resolved, Usage, resolve};

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
    if resolved.search {
        eprintln!(
            "error: profile `{0}` is a capacity search (executor: capacity): run it with \
             `sloburn capacity {1} --profile {0}`",
            resolved.name,
            args.file
                .as_ref()
                .map_or("FILE".into(), |p| p.display().to_string())
        );
        return crate::exit::USAGE;
    }
    if let Some(code) = refuse_fd_shortfall(&args, &resolved) {
        return code;
    }
    let runtime = match runtime(args.workers) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let result = runtime.block_on(execute(&args, resolved, true));
    match result {
        Ok(f) if f.interrupted_by.is_some() => crate::exit::INTERRUPTED,
        // Another shard of a collected run: its part is done once the collector has it.
        Ok(Finished {
            collected: Some(collect::Collected::Share { delivered }),
            ..
        }) => match delivered {
            Ok(()) => crate::exit::OK,
            Err(_) => crate::exit::ERROR,
        },
        Ok(Finished {
            collected:
                Some(collect::Collected::Whole {
                    missing: Some(why), ..
                }),
            ..
        }) => {
            eprintln!("{why}");
            crate::exit::INCONCLUSIVE
        }
        Ok(f) if f.report.stats.local_errors_dominate() => crate::exit::ERROR,
        Ok(f) if f.report.inconclusive().is_some() => crate::exit::INCONCLUSIVE,
        Ok(f)
            if f.comparison
                .as_ref()
                .is_some_and(|c| c.regressed().next().is_some()) =>
        {
            crate::exit::THRESHOLDS
        }
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
        (Some(_), _) => crate::load::capacity::fits(&r.spec.executor, r.spec.shard, limit).err()?,
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

/// The runtime a one-shot command runs on: one thread for `--workers 1`, else that many
/// workers. A runtime that cannot start is said, with the exit code to return.
pub fn runtime(workers: usize) -> Result<tokio::runtime::Runtime, i32> {
    let built = if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
    };
    built.map_err(|e| {
        eprintln!("error: cannot start the runtime: {e}");
        crate::exit::ERROR
    })
}
