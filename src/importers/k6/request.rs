//! One `http.*` call as a step: its method, URL, body and params (headers; `auth` and
//! `redirects` converted where sloburn has the same, else listed).

use oxc_ast::ast::*;

use super::state::{Step, Walker, http_callee, unwrap};
use super::values::V;

impl Walker<'_> {
    /// `http.METHOD(...)`: the step it sends, `None` for another call, or why not.
    pub(super) fn request(&self, c: &CallExpression) -> Result<Option<Step>, String> {
        let Some(f) = http_callee(c) else {
            return Ok(None);
        };
        let args: Vec<Option<&Expression>> =
            c.arguments.iter().map(|a| a.as_expression()).collect();
        let arg = |i: usize| args.get(i).copied().flatten();
        let (method, url_at, body_at, params_at) = match f {
            "get" => ("GET", 0, None, 1),
            "head" => ("HEAD", 0, None, 1),
            "del" => ("DELETE", 0, Some(1), 2),
            "options" => ("OPTIONS", 0, Some(1), 2),
            "post" => ("POST", 0, Some(1), 2),
            "put" => ("PUT", 0, Some(1), 2),
            "patch" => ("PATCH", 0, Some(1), 2),
            "request" | "asyncRequest" => {
                let method = arg(0)
                    .ok_or("no method")
                    .and_then(|e| self.value(e).map_err(|_| "the method is not a string"))?
                    .text()
                    .ok_or("the method is not a string")?;
                if method != method.to_ascii_uppercase() {
                    self.note(format!(
                        "line {}: method `{method}` sent as `{}`: k6 sends it as written (methods                          are case-sensitive), sloburn's are upper case",
                        self.line(c.span),
                        method.to_ascii_uppercase()
                    ));
                }
                return self.finish(c, method.to_ascii_uppercase(), arg(1), arg(2), arg(3));
            }
            "batch" => {
                return Err(
                    "http.batch sends its requests at once, in parallel: sloburn's steps are \
                     sequential"
                        .into(),
                );
            }
            _ => return Ok(None),
        };
        self.finish(
            c,
            method.to_string(),
            arg(url_at),
            body_at.and_then(arg),
            arg(params_at),
        )
    }

    fn finish(
        &self,
        c: &CallExpression,
        method: String,
        url: Option<&Expression>,
        body: Option<&Expression>,
        params: Option<&Expression>,
    ) -> Result<Option<Step>, String> {
        let url = url.ok_or("no URL")?;
        let url = self
            .value(url)
            .map_err(|why| format!("the URL: {why}"))?
            .text()
            .ok_or("the URL is not text")?;
        let (url, userinfo) = split_userinfo(&url);
        let mut step = Step {
            method,
            url,
            ..Step::default()
        };
        let mut auth = None;
        if let Some(p) = params.map(unwrap) {
            let p = self.value(p).map_err(|why| format!("the params: {why}"))?;
            auth = self.params(c, &p, &mut step)?;
        }
        match (userinfo, auth.as_deref()) {
            (Some(u), None | Some("basic")) => step.headers.push((
                "Authorization".into(),
                format!("Basic {}", base64(u.as_bytes())),
            )),
            (None, Some("basic")) => self.note(format!(
                "line {}: `auth: 'basic'` without `user:password@` in the URL sends no \
                 credentials, in k6 too",
                self.line(c.span)
            )),
            _ => {}
        }
        self.body(body, &mut step)?;
        Ok(Some(step))
    }

    /// The params' headers into `step`; what else they hold noted with the call's line.
    /// Returns `auth`'s value.
    fn params(&self, c: &CallExpression, p: &V, step: &mut Step) -> Result<Option<String>, String> {
        let V::Obj(fields) = p else {
            return Err("the params are not an object".into());
        };
        let line = self.line(c.span);
        let mut auth = None;
        for (k, v) in fields {
            match (k.as_str(), v) {
                ("headers", V::Obj(h)) => {
                    for (k, v) in h {
                        step.headers
                            .push((k.clone(), v.text().ok_or("a header is not text")?));
                    }
                }
                ("headers", _) => return Err("the headers are not an object".into()),
                // k6's `name` tag names the step (a sub-metric `{name:…}` then matches).
                ("tags", V::Obj(tags)) => {
                    step.name = tags
                        .iter()
                        .find(|(k, _)| k == "name")
                        .and_then(|(_, v)| v.text())
                        .filter(|n| {
                            n.len() <= 64
                                && !n.is_empty()
                                && n.chars()
                                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
                        });
                }
                ("tags", _) => {}
                ("redirects", V::Num(n)) if *n == 0.0 => {}
                ("redirects", _) => self.note(format!(
                    "line {line}: `redirects: {}` not converted: sloburn does not follow \
                     redirects (a 3xx is the response, as with `redirects: 0`)",
                    v.text().unwrap_or_default()
                )),
                ("auth", V::Str(a)) if a == "basic" => auth = Some(a.clone()),
                ("auth", _) => {
                    auth = v.text();
                    self.note(format!(
                        "line {line}: `auth: '{}'` not converted: sloburn has no {} \
                         authentication; the request is sent without it",
                        v.text().unwrap_or_default(),
                        v.text().unwrap_or_default()
                    ));
                }
                (other, _) => self.note(format!(
                    "line {line}: params `{other}` not converted: sloburn has no per-request \
                     equivalent"
                )),
            }
        }
        Ok(auth)
    }

    /// The body: text as it is, an object as k6's form (with its `Content-Type`).
    fn body(&self, body: Option<&Expression>, step: &mut Step) -> Result<(), String> {
        let Some(body) = body else { return Ok(()) };
        let v = self.value(body).map_err(|why| format!("the body: {why}"))?;
        match v {
            V::Null => {}
            V::Obj(_) => {
                step.body = Some(v.form().ok_or("a form value is not text")?);
                if !step
                    .headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    step.headers.push((
                        "Content-Type".into(),
                        "application/x-www-form-urlencoded".into(),
                    ));
                }
            }
            v => step.body = Some(v.text().ok_or("the body is not text")?),
        }
        Ok(())
    }
}

/// `http://user:pass@host/…` → (`http://host/…`, `user:pass`): k6 sends it as basic auth.
fn split_userinfo(url: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (url.to_string(), None);
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => (
            format!("{scheme}://{}", &rest[at + 1..]),
            Some(rest[..at].to_string()),
        ),
        None => (url.to_string(), None),
    }
}

/// Standard base64 with padding (RFC 4648), for a basic `Authorization` header.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_and_userinfo() {
        assert_eq!(super::base64(b"user:pass"), "dXNlcjpwYXNz");
        assert_eq!(super::base64(b"ab"), "YWI=");
        assert_eq!(super::base64(b"a"), "YQ==");
        assert_eq!(
            super::split_userinfo("http://u:p@h:1/x@y"),
            ("http://h:1/x@y".to_string(), Some("u:p".to_string()))
        );
    }
}
