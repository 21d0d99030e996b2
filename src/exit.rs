//! Process exit codes: part of the command-line interface, shared by every command. A leaf:
//! it imports nothing from the crate.

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
/// A threshold failed (as k6).
pub const THRESHOLDS: i32 = 99;
/// `sloburn run` was stopped by SIGTERM or SIGINT; its summary and export were still written
/// (k6's code for an external abort).
pub const INTERRUPTED: i32 = 105;
/// The daemon was stopped by a second signal before its drain finished (128 + SIGINT).
pub const SECOND_SIGNAL: i32 = 130;
