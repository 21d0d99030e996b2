//! Every importer's YAML through `sloburn check`'s own validation (`config::from_str`) before
//! it is printed, so what `import` prints is what `check` accepts.
//!
//! Secrets are checked for shape, not read: an imported `${env:NAME}` is set by the user
//! later. What still fails is taken out, never printed as if it were fine: the smallest piece
//! holding the error (a journey's step, else the `targets`/`journeys`/`profiles`/`slos` entry)
//! is turned into comments under a `# left out` line with the reason, and listed on stderr;
//! what referred to it fails the next round and goes the same way. An error outside such a
//! piece, a config past [`MAX_CONFIG_BYTES`] or past [`MAX_ROUNDS`] rounds is the import's
//! error, with `check`'s messages. Each round is one validation (linear in the config) and a
//! pass over its lines.

use std::collections::BTreeMap;
use std::path::Path;

use super::openapi::Imported;
use crate::config::{Diagnostic, Env, MAX_CONFIG_BYTES};

/// The most validations one import takes: each round takes out what failed, and what
/// referred to it fails the next.
pub const MAX_ROUNDS: usize = 8;
/// The most of `check`'s messages an import refused for them prints.
const MAX_SHOWN: usize = 20;
/// How the config is named in `check`'s messages: it has no file yet.
const NAME: &str = "the imported config";

/// `imported` as `check` accepts it (what failed commented out and listed in its notes), or
/// why it cannot be. `input` is the imported file: relative paths resolve beside it.
pub fn verify(mut imported: Imported, input: &Path) -> Result<Imported, String> {
    let size = imported.yaml.len() as u64;
    if size > MAX_CONFIG_BYTES {
        return Err(format!(
            "the config made is {size} bytes, more than the {} MiB `sloburn check` reads: \
             import less of it (fewer operations or a shorter recording)",
            MAX_CONFIG_BYTES >> 20
        ));
    }
    let base = input.parent().unwrap_or(Path::new("."));
    let mut env = Env::process();
    env.resolve_secrets = false;
    for _ in 0..MAX_ROUNDS {
        let errors = match crate::config::from_str(&imported.yaml, NAME, base, &env) {
            Ok(_) => return Ok(imported),
            Err(e) => e.errors,
        };
        let (yaml, notes) = take_out(&imported.yaml, &errors).ok_or_else(|| refused(&errors))?;
        imported.yaml = yaml;
        imported.notes.extend(notes);
    }
    match crate::config::from_str(&imported.yaml, NAME, base, &env) {
        Ok(_) => Ok(imported),
        Err(e) => Err(refused(&e.errors)),
    }
}

/// The import's error: `check`'s messages, the first [`MAX_SHOWN`] of them.
fn refused(errors: &[Diagnostic]) -> String {
    let mut out = String::from("the config made would not pass `sloburn check`:");
    for e in errors.iter().take(MAX_SHOWN) {
        out.push('\n');
        out.push_str(&e.render(NAME));
    }
    if errors.len() > MAX_SHOWN {
        out.push_str(&format!("\n… and {} more", errors.len() - MAX_SHOWN));
    }
    out
}

/// `yaml` with the piece holding each error commented out under its reasons, and a note per
/// piece; `None` when an error is in no piece that can go.
fn take_out(yaml: &str, errors: &[Diagnostic]) -> Option<(String, Vec<String>)> {
    let lines: Vec<&str> = yaml.lines().collect();
    // First line of a piece → (its last line, its reasons).
    let mut pieces = BTreeMap::<usize, (usize, Vec<String>)>::new();
    for e in errors {
        let at = e.pos.line.checked_sub(1)?;
        let (start, end) = piece(&lines, at)?;
        let reason = if e.path.is_empty() {
            e.message.clone()
        } else {
            format!("{}: {}", e.path, e.message)
        };
        pieces
            .entry(start)
            .or_insert((end, Vec::new()))
            .1
            .push(reason);
    }
    let mut out = String::with_capacity(yaml.len() + 256);
    let mut notes = Vec::new();
    let mut i = 0;
    for (start, (end, reasons)) in pieces {
        if start < i {
            continue; // inside a piece already taken out
        }
        for line in &lines[i..start] {
            out.push_str(line);
            out.push('\n');
        }
        let what = label(&lines, start);
        for r in &reasons {
            let shown = super::printable(r);
            out.push_str(&format!("# left out (`sloburn check`: {shown}):\n"));
            notes.push(super::printable(&format!(
                "left out {what} (line {} of the config made): {r}",
                start + 1
            )));
        }
        for line in &lines[start..=end] {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
        i = end + 1;
    }
    for line in &lines[i.min(lines.len())..] {
        out.push_str(line);
        out.push('\n');
    }
    Some((out, notes))
}

/// What a piece is, for its note: `targets.NAME`, or `the step NAME`.
fn label(lines: &[&str], start: usize) -> String {
    let line = lines[start].trim();
    let unquoted = |s: &str| s.trim().trim_matches('"').to_string();
    if let Some(item) = line.strip_prefix("- ") {
        let name = item
            .strip_prefix("name:")
            .map_or(item.to_string(), unquoted);
        return format!("the step {name}");
    }
    let section = (0..start)
        .rev()
        .find(|&j| indent(lines[j]) == Some(0))
        .map_or("", |j| lines[j].trim().trim_end_matches(':'));
    format!("{section}.{}", unquoted(line.trim_end_matches(':')))
}

/// A line's indentation, `None` for a blank or comment line.
fn indent(line: &str) -> Option<usize> {
    let body = line.trim_start_matches(' ');
    (!body.is_empty() && !body.starts_with('#')).then(|| line.len() - body.len())
}

fn is_item(line: &str) -> bool {
    let body = line.trim_start();
    body == "-" || body.starts_with("- ")
}

/// The line holding `at`'s line: the nearest earlier line less indented (a list item's may be
/// its key's, as indented as it).
fn parent(lines: &[&str], at: usize) -> Option<usize> {
    let own = indent(lines[at])?;
    let item = is_item(lines[at]);
    (0..at).rev().find(|&j| match indent(lines[j]) {
        Some(n) => n < own || (item && n == own && !is_item(lines[j])),
        None => false,
    })
}

/// The lines (first, last) of the smallest piece that can go holding line `at`: a journey's
/// step (an item of a `steps:` list), else an entry of a top-level section.
fn piece(lines: &[&str], at: usize) -> Option<(usize, usize)> {
    let mut line = at.min(lines.len().checked_sub(1)?);
    indent(lines[line])?;
    loop {
        let up = parent(lines, line)?;
        let step = is_item(lines[line]) && lines[up].trim() == "steps:";
        let entry = indent(lines[up]) == Some(0)
            && matches!(
                lines[up].trim(),
                "targets:" | "journeys:" | "profiles:" | "slos:"
            );
        if step || entry {
            return Some((line, end_of(lines, line)));
        }
        line = up;
    }
}

/// The last line of the piece that starts at `start`: before the next line as or less
/// indented (comments and blank lines at its end left outside it).
fn end_of(lines: &[&str], start: usize) -> usize {
    let own = indent(lines[start]).unwrap_or(0);
    let mut last = start;
    for (j, line) in lines.iter().enumerate().skip(start + 1) {
        match indent(line) {
            Some(n) if n <= own => break,
            Some(_) => last = j,
            None => {}
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    fn imported(yaml: &str) -> Imported {
        Imported {
            yaml: yaml.to_string(),
            notes: Vec::new(),
        }
    }

    fn check(yaml: &str) -> Result<(), String> {
        let mut env = Env::process();
        env.resolve_secrets = false;
        crate::config::from_str(yaml, "t", Path::new("."), &env)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_bad_target_and_the_profile_on_it_are_taken_out_and_listed() {
        let yaml = "# head\ntargets:\n  good:\n    url: \"http://127.0.0.1:9/a\"\n  bad:\n    url: \"http://127.0.0.1:9/b\"\n    headers:\n      \"a b\": \"x\"\n    timeout: 1s\nprofiles:\n  good:\n    target: good\n    executor: constant-arrival-rate\n    rate: 1/s\n    duration: 1m\n  bad:\n    target: bad\n    executor: constant-arrival-rate\n    rate: 1/s\n    duration: 1m\n";
        assert!(check(yaml).is_err());
        let got = verify(imported(yaml), Path::new("x.json")).unwrap();
        check(&got.yaml).unwrap();
        assert!(
            got.yaml
                .contains("# left out (`sloburn check`: targets.bad.headers"),
            "{}",
            got.yaml
        );
        assert!(got.yaml.contains("#   bad:\n#     url:"), "{}", got.yaml);
        assert!(
            got.yaml.contains("\n  good:\n    target: good"),
            "{}",
            got.yaml
        );
        assert_eq!(got.notes.len(), 2, "{:?}", got.notes);
        assert!(
            got.notes[0].starts_with("left out targets.bad (line 5"),
            "{:?}",
            got.notes
        );
        assert!(got.notes[1].contains("profiles.bad"), "{:?}", got.notes);
    }

    #[test]
    fn a_bad_step_goes_alone_and_the_journey_stays() {
        let yaml = "targets:\n  t:\n    url: \"http://127.0.0.1:9/\"\njourneys:\n  j:\n    target: t\n    steps:\n      - name: one\n        path: /a\n      - name: two\n        path: /b\n        headers:\n          \"x\\ny\": \"v\"\nprofiles:\n  j:\n    journey: j\n    executor: constant-arrival-rate\n    rate: 1/s\n    duration: 1m\n";
        assert!(check(yaml).is_err());
        let got = verify(imported(yaml), Path::new("x.har")).unwrap();
        check(&got.yaml).unwrap();
        assert!(got.yaml.contains("#       - name: two"), "{}", got.yaml);
        assert!(got.yaml.contains("      - name: one\n"), "{}", got.yaml);
        assert_eq!(got.notes.len(), 1, "{:?}", got.notes);
        assert!(
            got.notes[0].starts_with("left out the step two (line 10"),
            "{:?}",
            got.notes
        );
    }

    #[test]
    fn an_error_outside_any_piece_is_the_imports_error() {
        let yaml = "nonsense: 1\ntargets: {}\n";
        let e = verify(imported(yaml), Path::new("x")).unwrap_err();
        assert!(e.contains("would not pass `sloburn check`"), "{e}");
        assert!(e.contains("the imported config:1:1"), "{e}");
        let big = imported(&"#".repeat(MAX_CONFIG_BYTES as usize + 1));
        assert!(verify(big, Path::new("x")).unwrap_err().contains("MiB"));
    }
}
