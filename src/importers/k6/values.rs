//! The script values the importer evaluates (numbers, strings, objects, arrays, `__ENV`
//! lookups) and how they print as YAML.

/// A value the script computes, as far as the importer follows it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum V {
    /// Text; `${name}` in it are sloburn references (captures, `vu`, `iter`).
    Str(String),
    Num(f64),
    Bool(bool),
    Obj(Vec<(String, V)>),
    Arr(Vec<V>),
    Null,
}

impl V {
    pub(super) fn text(&self) -> Option<String> {
        match self {
            V::Str(s) => Some(s.clone()),
            V::Num(n) => Some(num(*n)),
            V::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    pub(super) fn json(&self) -> serde_json::Value {
        match self {
            V::Str(s) => serde_json::Value::String(s.clone()),
            V::Num(n) => serde_json::json!(n),
            V::Bool(b) => serde_json::Value::Bool(*b),
            V::Null => serde_json::Value::Null,
            V::Arr(a) => serde_json::Value::Array(a.iter().map(V::json).collect()),
            V::Obj(m) => {
                serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), v.json())).collect())
            }
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&V> {
        match self {
            V::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

pub(super) fn num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}
