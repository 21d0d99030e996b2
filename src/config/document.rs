//! A YAML or JSON document that is not a config (an OpenAPI document for `sloburn import`), read
//! with the config's own YAML reader and handed out as a JSON value, so raw YAML never leaves
//! `config`. A JSON value's map is sorted; each mapping's keys in document order are kept
//! beside it, by JSON pointer.

use super::yaml::{self, Node, Value};
use std::collections::HashMap;

/// A parsed document: its value, and each mapping's keys in the order the document wrote them.
pub struct Document {
    pub value: serde_json::Value,
    order: HashMap<String, Vec<String>>,
}

/// Why a document did not parse, with its 1-based line and column.
#[derive(Debug, Clone, PartialEq)]
pub struct DocumentError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl Document {
    /// Parses YAML (or JSON, which is YAML). Bounded as a config is: at most
    /// [`super::MAX_MAP_KEYS`] keys a mapping.
    pub fn parse(text: &str) -> Result<Document, DocumentError> {
        let node = yaml::parse(text).map_err(|e| DocumentError {
            line: e.pos.line,
            col: e.pos.col,
            message: e.message,
        })?;
        let mut order = HashMap::new();
        let value = to_json(&node, &mut String::new(), &mut order);
        Ok(Document { value, order })
    }

    /// The keys of the mapping at `pointer` (RFC 6901, `""` for the root) in document order;
    /// empty when there is no mapping there.
    pub fn keys(&self, pointer: &str) -> &[String] {
        self.order.get(pointer).map_or(&[], Vec::as_slice)
    }
}

/// A node as a JSON value: an unquoted scalar that reads as a number, boolean or null is one;
/// everything else is a string. Each mapping's key order is recorded under its pointer.
fn to_json(
    node: &Node,
    pointer: &mut String,
    order: &mut HashMap<String, Vec<String>>,
) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Scalar { text, quoted: true } => J::String(text.clone()),
        Value::Scalar {
            text,
            quoted: false,
        } => scalar(text),
        Value::Seq(items) => J::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let len = pointer.len();
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    let v = to_json(item, pointer, order);
                    pointer.truncate(len);
                    v
                })
                .collect(),
        ),
        Value::Map(entries) => {
            order.insert(
                pointer.clone(),
                entries.iter().map(|(k, _)| k.name.clone()).collect(),
            );
            J::Object(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let len = pointer.len();
                        pointer.push('/');
                        pointer.push_str(&k.name.replace('~', "~0").replace('/', "~1"));
                        let value = to_json(v, pointer, order);
                        pointer.truncate(len);
                        (k.name.clone(), value)
                    })
                    .collect(),
            )
        }
    }
}

fn scalar(t: &str) -> serde_json::Value {
    use serde_json::Value as J;
    match t {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_typed_and_key_order_is_kept() {
        let d =
            Document::parse("z: 1\nb: '1'\nc: 1.5\nd: true\ne: x\nf: [1, 'y', {q: 1, a/b: 2}]\n")
                .unwrap();
        assert_eq!(
            d.value,
            serde_json::json!({"z": 1, "b": "1", "c": 1.5, "d": true, "e": "x", "f": [1, "y", {"q": 1, "a/b": 2}]})
        );
        assert_eq!(d.keys(""), ["z", "b", "c", "d", "e", "f"]);
        assert_eq!(d.keys("/f/2"), ["q", "a/b"]);
        assert!(d.keys("/f").is_empty());
        let e = Document::parse("a: [1\n").err().unwrap();
        assert_eq!(e.line, 2);
    }
}
