//! `sloburn import KIND FILE`: configs from what teams already have, printed as sloburn YAML
//! that `sloburn check` accepts. Each importer reads its file, says on stderr what it could
//! not convert (never dropped silently), and writes the config on stdout.
//!
//! - `har.rs`: a browser recording → one journey, assets and other hosts left out, think
//!   times from the gaps, values a response gave and a later request sent captured.
//! - `openapi/`: an OpenAPI 3 document (JSON or YAML) → a target and profile per operation,
//!   or one journey over chosen operations.
//! - `k6/`: a k6 script's straight-line subset, through oxc's syntax tree.

/// The largest file an importer reads: a HAR holds every response body of a recording.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

pub mod har;
pub mod k6;
pub mod openapi;

/// A config name (`[A-Za-z0-9._-]`, at most 64) made from free text: other characters become
/// `-`, runs of them one.
pub fn config_name(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.') {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out = out.trim_end_matches('-');
    let mut out: String = out.chars().take(64).collect();
    if out.is_empty() {
        out.push_str("op");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_scalars() {
        assert_eq!(config_name("find pet by id"), "find-pet-by-id");
        assert_eq!(config_name("GET /pet/{petId}"), "GET-pet-petId");
        assert_eq!(config_name("///"), "op");
    }
}
