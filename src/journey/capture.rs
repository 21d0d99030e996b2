//! `capture:` a value from a response, by JSON path (RFC 9535), header or a regex with one
//! group. Compiled at config load; extraction never panics on any response.

use crate::http::Outcome;

#[derive(Debug, Clone)]
pub enum Source {
    Json(serde_json_path::JsonPath),
    Header(http::HeaderName),
    Regex(regex::Regex),
}

#[derive(Debug, Clone)]
pub struct Capture {
    pub name: String,
    /// Where the value lives in the iteration's capture slots.
    pub slot: usize,
    pub source: Source,
}

impl Source {
    /// `json: "$.token"`.
    pub fn json(path: &str) -> Result<Source, String> {
        serde_json_path::JsonPath::parse(path)
            .map(Source::Json)
            .map_err(|e| format!("not a JSON path: {e}"))
    }

    /// `header: NAME`.
    pub fn header(name: &str) -> Result<Source, String> {
        http::HeaderName::from_bytes(name.as_bytes())
            .map(Source::Header)
            .map_err(|_| format!("`{name}` is not a valid header name"))
    }

    /// `regex: "id=(\\d+)"`, with exactly one capture group.
    pub fn regex(pattern: &str) -> Result<Source, String> {
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| format!("not a valid regex: {e}"))?;
        match re.captures_len() {
            2 => Ok(Source::Regex(re)),
            n => Err(format!(
                "the regex must have exactly one group `( )`, it has {}",
                n - 1
            )),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Source::Json(_) => "json",
            Source::Header(_) => "header",
            Source::Regex(_) => "regex",
        }
    }

    /// The value in this response, or `None` when it is not there.
    pub fn extract(&self, outcome: &Outcome) -> Option<String> {
        match self {
            Source::Json(path) => {
                let value: serde_json::Value = serde_json::from_slice(&outcome.body).ok()?;
                match path.query(&value).first()? {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Null => None,
                    other => Some(other.to_string()),
                }
            }
            Source::Header(name) => outcome
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            Source::Regex(re) => {
                let body = std::str::from_utf8(&outcome.body).ok()?;
                Some(re.captures(body)?.get(1)?.as_str().to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(body: &str) -> Outcome {
        let mut o = Outcome {
            status: Some(200),
            body: bytes::Bytes::from(body.to_string()),
            ..Outcome::default()
        };
        o.headers
            .insert("x-session", http::HeaderValue::from_static("s-1"));
        o
    }

    #[test]
    fn json_header_and_regex_captures() {
        let r = response(r#"{"token":"t-9","user":{"id":42},"items":[{"sku":"a"}]}"#);
        assert_eq!(
            Source::json("$.token").unwrap().extract(&r).as_deref(),
            Some("t-9")
        );
        assert_eq!(
            Source::json("$.user.id").unwrap().extract(&r).as_deref(),
            Some("42")
        );
        assert_eq!(
            Source::json("$.items[0].sku")
                .unwrap()
                .extract(&r)
                .as_deref(),
            Some("a")
        );
        assert_eq!(Source::json("$.missing").unwrap().extract(&r), None);
        assert_eq!(
            Source::header("X-Session").unwrap().extract(&r).as_deref(),
            Some("s-1")
        );
        assert_eq!(Source::header("x-none").unwrap().extract(&r), None);
        let re = Source::regex(r#""id":(\d+)"#).unwrap();
        assert_eq!(re.extract(&r).as_deref(), Some("42"));
        assert_eq!(
            Source::json("$.token")
                .unwrap()
                .extract(&response("<html>")),
            None
        );
    }

    #[test]
    fn bad_captures_are_errors() {
        assert!(Source::json("token").unwrap_err().contains("JSON path"));
        assert!(
            Source::regex("id=\\d+")
                .unwrap_err()
                .contains("exactly one group")
        );
        assert!(Source::regex("(a)(b)").unwrap_err().contains("it has 2"));
        assert!(
            Source::regex("(")
                .unwrap_err()
                .contains("not a valid regex")
        );
        assert!(Source::header("bad header").is_err());
    }
}
