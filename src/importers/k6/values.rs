//! The script values the importer evaluates (numbers, strings, objects, arrays, `__ENV`
//! lookups) and how they print: as JavaScript's `JSON.stringify` and k6's form encoding do.

use std::fmt::Write as _;

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
    /// A number known only when the request is sent (`${vu}`, `${iter}`, `${timestamp_ms}`):
    /// its template, printed without quotes in JSON.
    Raw(String),
}

impl V {
    /// The value as JavaScript turns it into text (`'' + v`), for what has one.
    pub(super) fn text(&self) -> Option<String> {
        match self {
            V::Str(s) | V::Raw(s) => Some(s.clone()),
            V::Num(n) => Some(num(*n)),
            V::Bool(b) => Some(b.to_string()),
            V::Null => Some("null".into()),
            _ => None,
        }
    }

    /// `JSON.stringify(v)`, as JavaScript writes it: keys in JavaScript's order (integer keys
    /// first, ascending, then the others as written), integers without a fraction.
    pub(super) fn json(&self) -> String {
        let mut out = String::new();
        self.json_into(&mut out);
        out
    }

    fn json_into(&self, out: &mut String) {
        match self {
            V::Str(s) => json_string(s, out),
            V::Num(n) if n.is_finite() => out.push_str(&num(*n)),
            V::Num(_) | V::Null => out.push_str("null"),
            V::Raw(s) => out.push_str(s),
            V::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            V::Arr(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.json_into(out);
                }
                out.push(']');
            }
            V::Obj(m) => {
                out.push('{');
                for (i, (k, v)) in js_order(m).into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    json_string(k, out);
                    out.push(':');
                    v.json_into(out);
                }
                out.push('}');
            }
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<&V> {
        match self {
            V::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            V::Arr(a) => key.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        }
    }

    /// k6's form body from an object: `url.Values` encoded, so keys sorted and each key and
    /// value query-escaped (a space as `+`); a `${name}` reference is kept as it is.
    pub(super) fn form(&self) -> Option<String> {
        let V::Obj(m) = self else { return None };
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (k, v) in m {
            pairs.push((query_escape(k), query_escape(&v.text()?)));
        }
        pairs.sort();
        Some(
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&"),
        )
    }
}

/// An object's entries in the order JavaScript enumerates them: keys that are array indices
/// first, ascending, then the rest in the order written.
fn js_order(m: &[(String, V)]) -> Vec<(&String, &V)> {
    let index = |k: &str| {
        (k == "0" || (!k.starts_with('0') && k.len() < 10))
            .then(|| k.parse::<u32>().ok())
            .flatten()
    };
    let mut ints: Vec<(u32, &String, &V)> = m
        .iter()
        .filter_map(|(k, v)| index(k).map(|i| (i, k, v)))
        .collect();
    ints.sort_by_key(|(i, _, _)| *i);
    ints.into_iter()
        .map(|(_, k, v)| (k, v))
        .chain(
            m.iter()
                .filter(|(k, _)| index(k).is_none())
                .map(|(k, v)| (k, v)),
        )
        .collect()
}

/// A JSON string as `JSON.stringify` writes it.
fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Go's `url.QueryEscape` (what k6's form bodies use), keeping `${name}` references whole.
fn query_escape(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while !rest.is_empty() {
        if rest.starts_with("${")
            && let Some(end) = rest.find('}')
        {
            out.push_str(&rest[..=end]);
            rest = &rest[end + 1..];
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        rest = &rest[c.len_utf8()..];
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '-' | '_' | '.' | '~' => out.push(c),
            ' ' => out.push('+'),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    let _ = write!(out, "%{b:02X}");
                }
            }
        }
    }
    out
}

/// A number as JavaScript prints it: integers without a fraction, exponents past 1e21.
pub(super) fn num(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n.is_infinite() {
        if n > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i128)
    } else if n.abs() >= 1e21 {
        format!("{n:e}").replace('e', "e+")
    } else if n.abs() < 1e-6 {
        format!("{n:e}")
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_javascripts() {
        let v = V::Obj(vec![
            ("name".into(), V::Str("a \"b\"\n".into())),
            ("qty".into(), V::Num(500.0)),
            ("price".into(), V::Num(9.5)),
            ("2".into(), V::Bool(true)),
            ("1".into(), V::Null),
            ("vu".into(), V::Raw("${vu}".into())),
            ("tags".into(), V::Arr(vec![V::Num(1.0), V::Str("x".into())])),
        ]);
        assert_eq!(
            v.json(),
            r#"{"1":null,"2":true,"name":"a \"b\"\n","qty":500,"price":9.5,"vu":${vu},"tags":[1,"x"]}"#
        );
        assert_eq!(num(1e21), "1e+21");
        assert_eq!(num(1e-7), "1e-7");
        assert_eq!(num(-3.0), "-3");
    }

    #[test]
    fn forms_are_gos_url_values() {
        let v = V::Obj(vec![
            ("user".into(), V::Str("a b&c".into())),
            ("id".into(), V::Str("${token}".into())),
            ("n".into(), V::Num(5.0)),
        ]);
        assert_eq!(v.form().unwrap(), "id=${token}&n=5&user=a+b%26c");
    }
}
