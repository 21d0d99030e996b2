//! Process exit codes: part of the command-line interface, shared by every command, and the
//! panic hook that ends the process with one. A leaf: it imports nothing from the crate.

/// Success.
pub const OK: i32 = 0;
/// A runtime error (cannot bind, cannot start the runtime, cannot write a file).
pub const ERROR: i32 = 1;
/// Bad command-line usage (clap's convention).
pub const USAGE: i32 = 2;
/// `serve` stopped holding SLO counts or run records it could not write to its store, which
/// stayed unusable to the end (sysexits EX_IOERR); the log says what was lost. Distinct from
/// 1 so a supervisor can tell lost state from a daemon that never started.
pub const STATE_LOST: i32 = 74;
/// A config that failed validation (sysexits EX_CONFIG).
pub const CONFIG: i32 = 78;
/// The run cannot judge its target: the generator fell behind and dropped arrivals of its
/// own (`RunReport::inconclusive`); run it again with more CPU or a lower rate (sysexits
/// EX_TEMPFAIL: a temporary failure, worth retrying). Never a failed target.
pub const INCONCLUSIVE: i32 = 75;
/// sloburn itself failed: a panic, which is a bug (sysexits EX_SOFTWARE). [`exit_on_panic`]
/// logs it and ends the process with this code, whatever thread or task it happened on.
pub const PANIC: i32 = 70;
/// A threshold failed (as k6).
pub const THRESHOLDS: i32 = 99;
/// `sloburn run` was stopped by SIGTERM or SIGINT; its summary and export were still written
/// (k6's code for an external abort).
pub const INTERRUPTED: i32 = 105;
/// The daemon was stopped by a second signal before its drain finished (128 + SIGINT).
pub const SECOND_SIGNAL: i32 = 130;

/// Makes every panic, on any thread or tokio task, log itself and end the process with
/// [`PANIC`]. The release build aborts on panic (no unwinding, no unwind tables: Cargo.toml)
/// and the debug build unwinds; with this hook both end the same way, before either happens,
/// so a supervisor sees a clear exit code and the log says where, instead of a daemon that
/// runs on without the task that panicked. Logged as an ERROR event in the configured format
/// once logging is up (text or JSON); before that, or when the panic is in the logger itself,
/// or ERROR is filtered out, std's own report on stderr (with a backtrace under
/// `RUST_BACKTRACE`). Installed by the binary only: the library's tests keep the default hook.
pub fn exit_on_panic() {
    let std_report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let location = info.location();
        let in_logger = location.is_some_and(|l| l.file().contains("tracing"));
        if !in_logger
            && tracing::dispatcher::has_been_set()
            && tracing::enabled!(tracing::Level::ERROR)
        {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
                .unwrap_or("(a panic without a message)");
            let thread = std::thread::current();
            tracing::error!(
                thread = thread.name().unwrap_or("unnamed"),
                location = %location.map(|l| l.to_string()).unwrap_or_default(),
                exit_code = PANIC,
                "sloburn panicked (a bug), exiting: {message}"
            );
        } else {
            std_report(info);
        }
        std::process::exit(PANIC);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Set by the parent test in the child it starts: the child panics for real.
    const CHILD: &str = "SLOBURN_EXIT_PANIC_CHILD";

    /// Re-runs this test binary on `child`, one ignored test below, with `logging` telling
    /// the child whether to set up a JSON subscriber first.
    fn run_child(child: &str, logging: bool) -> (Option<i32>, String) {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "--nocapture",
                "--test-threads=1",
                child,
            ])
            .env(CHILD, if logging { "json" } else { "plain" })
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_task_that_panics_ends_the_process_with_70_and_says_where() {
        for logging in [true, false] {
            let (code, stderr) = run_child("exit::tests::child_panics_in_a_task", logging);
            assert_eq!(code, Some(PANIC), "logging {logging}: {stderr}");
            assert!(stderr.contains("the child's deliberate panic"), "{stderr}");
            assert!(stderr.contains("src/exit.rs:"), "{stderr}");
            // The runtime went on running its other tasks until the hook ended the process:
            // nothing after the panicked task's join ever ran.
            assert!(!stderr.contains("ran on after the panic"), "{stderr}");
            let json = stderr.lines().find(|l| l.contains("sloburn panicked"));
            match logging {
                true => {
                    let line: serde_json::Value = serde_json::from_str(json.unwrap()).unwrap();
                    assert_eq!(line["level"], "ERROR", "{line}");
                    assert_eq!(line["exit_code"], PANIC, "{line}");
                    assert_eq!(line["thread"], "child-worker", "{line}");
                }
                // No subscriber: std's own report ("thread '…' panicked at file:line").
                false => assert!(json.is_none() && stderr.contains("panicked at"), "{stderr}"),
            }
        }
    }

    #[test]
    #[ignore = "a child process of a_task_that_panics_ends_the_process_with_70_and_says_where"]
    fn child_panics_in_a_task() {
        let Ok(mode) = std::env::var(CHILD) else {
            return;
        };
        if mode == "json" {
            tracing_subscriber::fmt()
                .json()
                .flatten_event(true)
                .with_writer(std::io::stderr)
                .init();
        }
        exit_on_panic();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("child-worker")
            .build()
            .unwrap();
        rt.block_on(async {
            let task = tokio::spawn(async { panic!("the child's deliberate panic") });
            let joined = task.await;
            eprintln!("ran on after the panic: {joined:?}");
        });
    }
}
