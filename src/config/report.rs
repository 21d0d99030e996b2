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
    let (code, errors, warnings) = match result {
        Ok(loaded) => (crate::exit::OK, Vec::new(), loaded.warnings),
        Err(e) => (crate::exit::CONFIG, e.errors, e.warnings),
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
