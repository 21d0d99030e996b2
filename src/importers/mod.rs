//! `sloburn import KIND FILE`: configs from what teams already have, printed as sloburn YAML
//! that `sloburn check` accepts. Each importer reads its file, says on stderr what it could
//! not convert (never dropped silently), and writes the config on stdout.
//!
//! - `har.rs`: a browser recording → one journey, assets and other hosts left out, think
//!   times from the gaps, values a response gave and a later request sent captured.
//! - `openapi.rs`: an OpenAPI 3 document (JSON or YAML) → a target and profile per operation,
//!   or one journey over chosen operations.

/// The largest file an importer reads: a HAR holds every response body of a recording.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

pub mod har;
pub mod k6;
pub mod openapi;

use crate::config::yaml::{Node, Value};

/// A YAML (or JSON, which is YAML) node as a JSON value: an unquoted scalar that reads as a
/// number, boolean or null is one; everything else is a string. Keys keep their order.
pub fn to_json(node: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Scalar { text, quoted: true } => J::String(text.clone()),
        Value::Scalar {
            text,
            quoted: false,
        } => match text.as_str() {
            "null" | "~" | "" => J::Null,
            "true" | "True" | "TRUE" => J::Bool(true),
            "false" | "False" | "FALSE" => J::Bool(false),
            t => {
                if let Ok(i) = t.parse::<i64>() {
                    J::from(i)
                } else if let Some(f) = t
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && t.bytes().any(|b| b.is_ascii_digit()))
                {
                    J::from(f)
                } else {
                    J::String(t.to_string())
                }
            }
        },
        Value::Seq(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| (k.name.clone(), to_json(v)))
                .collect(),
        ),
    }
}

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
        let node = crate::config::yaml::parse("a: 1\nb: '1'\nc: 1.5\nd: true\ne: x\nf: [1, 'y']\n")
            .unwrap();
        assert_eq!(
            to_json(&node),
            serde_json::json!({"a": 1, "b": "1", "c": 1.5, "d": true, "e": "x", "f": [1, "y"]})
        );
    }
}
