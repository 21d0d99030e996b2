//! An operation's security requirement as `${env:NAME}` references: bearer, basic, OAuth 2
//! and OpenID Connect as an `Authorization` header, an API key as its header, query parameter
//! or cookie. No credential is ever written; each variable is named once, with what it holds.

use std::collections::BTreeMap;

use serde_json::Value as J;

use super::resolve;

/// Where one scheme puts its credential.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Place {
    Header(String, String),
    Query(String, String),
}

/// The document's security schemes as they are used, and the variables they need.
#[derive(Debug, Default)]
pub(super) struct Security {
    /// Variable → what to put in it, in name order.
    pub(super) variables: BTreeMap<String, String>,
    /// Schemes that could not be converted, each noted once.
    unconverted: BTreeMap<String, String>,
}

impl Security {
    /// What `op` must send for its first security requirement (the operation's `security`,
    /// else the document's; `{}` or `[]` is none). A scheme that cannot be converted is
    /// noted in `left_out`.
    pub(super) fn places(&mut self, doc: &J, op: &J, left_out: &mut Vec<String>) -> Vec<Place> {
        let requirement = op
            .get("security")
            .or_else(|| doc.get("security"))
            .and_then(J::as_array)
            .and_then(|a| a.first())
            .and_then(J::as_object);
        let mut out = Vec::new();
        for name in requirement.into_iter().flat_map(|r| r.keys()) {
            let scheme = doc
                .pointer("/components/securitySchemes")
                .and_then(|s| s.get(name))
                .map(|s| resolve(doc, s));
            match scheme.map(|s| self.place(name, s)) {
                Some(Ok(p)) => out.push(p),
                Some(Err(why)) => {
                    left_out.push(why.clone());
                    self.unconverted.insert(name.clone(), why);
                }
                None => left_out.push(format!(
                    "security scheme `{name}` is not in `components.securitySchemes`: \
                     add its credential by hand"
                )),
            }
        }
        out
    }

    fn place(&mut self, name: &str, s: &J) -> Result<Place, String> {
        let field = |k: &str| s.get(k).and_then(J::as_str).unwrap_or_default();
        let var = variable(name);
        let reference = format!("${{env:{var}}}");
        let (place, holds) = match (field("type"), field("scheme").to_ascii_lowercase().as_str()) {
            ("http", "bearer") | ("oauth2" | "openIdConnect", _) => (
                Place::Header("Authorization".into(), format!("Bearer {reference}")),
                format!("a bearer token (`{name}`)"),
            ),
            ("http", "basic") => (
                Place::Header("Authorization".into(), format!("Basic {reference}")),
                format!("base64 of user:password (`{name}`)"),
            ),
            ("apiKey", _) => {
                let key = field("name");
                let header = field("in") != "query";
                if key.is_empty()
                    || (header && http::HeaderName::from_bytes(key.as_bytes()).is_err())
                {
                    return Err(format!(
                        "security scheme `{name}`: an API key without a usable `name`"
                    ));
                }
                let place = match field("in") {
                    "header" => Place::Header(key.to_string(), reference),
                    "query" => Place::Query(super::encode(key), reference),
                    "cookie" => Place::Header("Cookie".into(), format!("{key}={reference}")),
                    other => {
                        return Err(format!(
                            "security scheme `{name}`: an API key `in: {other}` is not converted"
                        ));
                    }
                };
                (
                    place,
                    format!("an API key (`{name}`, {} `{key}`)", field("in")),
                )
            }
            (ty, scheme) => {
                return Err(format!(
                    "security scheme `{name}` ({ty} {scheme}) is not converted: add its \
                     credential by hand"
                ));
            }
        };
        self.variables.entry(var).or_insert(holds);
        Ok(place)
    }

    /// One line per variable to set, for stderr and the config's head.
    pub(super) fn lines(&self) -> Vec<String> {
        self.variables
            .iter()
            .map(|(var, holds)| format!("set {var}: {holds}, sent as `${{env:{var}}}`"))
            .collect()
    }
}

/// An environment variable's name from a scheme's: `bearerAuth` → `BEARER_AUTH`.
fn variable(scheme: &str) -> String {
    let mut out = String::new();
    let mut lower_before = false;
    for c in scheme.chars() {
        if c.is_ascii_uppercase() && lower_before {
            out.push('_');
        }
        lower_before = c.is_ascii_lowercase() || c.is_ascii_digit();
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let mut out = out.trim_matches('_').to_string();
    out.truncate(64);
    if !out.starts_with(|c: char| c.is_ascii_alphabetic()) {
        out.insert_str(0, "API_");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_become_env_references_and_each_variable_is_named_once() {
        assert_eq!(variable("bearerAuth"), "BEARER_AUTH");
        assert_eq!(variable("api_key"), "API_KEY");
        assert_eq!(variable("9 lives!"), "API_9_LIVES");
        let doc = serde_json::json!({
            "security": [{"bearerAuth": []}],
            "components": {"securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "Bearer"},
                "key": {"type": "apiKey", "in": "query", "name": "api key"},
                "digest": {"type": "http", "scheme": "digest"}
            }}
        });
        let mut s = Security::default();
        let mut notes = Vec::new();
        let op = serde_json::json!({});
        assert_eq!(
            s.places(&doc, &op, &mut notes),
            [Place::Header(
                "Authorization".into(),
                "Bearer ${env:BEARER_AUTH}".into()
            )]
        );
        let op = serde_json::json!({"security": [{"key": [], "digest": []}]});
        assert_eq!(
            s.places(&doc, &op, &mut notes),
            [Place::Query("api%20key".into(), "${env:KEY}".into())]
        );
        assert!(
            notes[0].contains("`digest` (http digest) is not converted"),
            "{notes:?}"
        );
        let none = serde_json::json!({"security": [{}]});
        assert!(s.places(&doc, &none, &mut notes).is_empty());
        assert_eq!(s.lines().len(), 2, "{:?}", s.lines());
    }
}
