//! How a config load is shown to a person: `sloburn check`, and every command that reads a
//! config (`run`, `rules`), prints the same lines and returns the same exit code.

use super::{ConfigError, Loaded};

/// Errors first (one per line, `file:line:col: path: message`), then warnings, then a one-line
/// verdict. Returns the exit code: 0, or [`crate::exit::CONFIG`].
pub fn report(
    name: &str,
    result: Result<Loaded, ConfigError>,
    out: &mut impl std::io::Write,
) -> i32 {
    report_with(name, result, &[], &[], out)
}

/// [`report`] with errors found after validation that have no position (`path: message`),
/// such as profiles that cannot fit the open-file limit.
pub fn report_with(
    name: &str,
    result: Result<Loaded, ConfigError>,
    later: &[String],
    notes: &[String],
    out: &mut impl std::io::Write,
) -> i32 {
    let (mut code, errors, warnings) = match result {
        Ok(loaded) => (crate::exit::OK, Vec::new(), loaded.warnings),
        Err(e) => (crate::exit::CONFIG, e.errors, e.warnings),
    };
    for e in &errors {
        let _ = writeln!(out, "{}", e.render(name));
    }
    for e in later {
        let _ = writeln!(out, "{name}: {e}");
        code = crate::exit::CONFIG;
    }
    let errors = errors.len() + later.len();
    for w in &warnings {
        let _ = writeln!(out, "warning: {}", w.render(name));
    }
    for n in notes {
        let _ = writeln!(out, "warning: {name}: {n}");
    }
    let warned = warnings.len() + notes.len();
    let _ = if errors == 0 {
        writeln!(out, "{name}: ok ({warned} warning(s))")
    } else {
        writeln!(out, "{name}: {errors} error(s), {warned} warning(s)")
    };
    code
}
