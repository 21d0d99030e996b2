//! `url.full` without secrets: the semantic conventions ask for credentials to be removed
//! and query values to be redacted.
//!
//! The input is a target's `display_url` (as written in config, `${env:..}` references kept,
//! never the expanded secret), so secrets are already out; this also drops user-info and
//! replaces every query value with `REDACTED`, keeping the keys.

/// `scheme://host[:port]/path?key=REDACTED&…`, fragment dropped.
pub fn url_full(display_url: &str) -> String {
    let no_fragment = display_url.split('#').next().unwrap_or("");
    let (head, query) = match no_fragment.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (no_fragment, None),
    };
    let mut out = String::with_capacity(display_url.len() + 16);
    match head.split_once("://") {
        Some((scheme, rest)) => {
            out.push_str(scheme);
            out.push_str("://");
            let (authority, path) = match rest.find('/') {
                Some(i) => rest.split_at(i),
                None => (rest, ""),
            };
            let host = match authority.rfind('@') {
                Some(i) => {
                    out.push_str("REDACTED:REDACTED@");
                    &authority[i + 1..]
                }
                None => authority,
            };
            out.push_str(host);
            out.push_str(path);
        }
        None => out.push_str(head),
    }
    if let Some(q) = query {
        out.push('?');
        for (i, pair) in q.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            match pair.split_once('=') {
                Some((k, _)) => {
                    out.push_str(k);
                    out.push_str("=REDACTED");
                }
                None => out.push_str(pair),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::url_full;

    #[test]
    fn redacts() {
        assert_eq!(
            url_full("https://u:p@h.example:8443/a/b?token=x&q=1#frag"),
            "https://REDACTED:REDACTED@h.example:8443/a/b?token=REDACTED&q=REDACTED"
        );
        assert_eq!(url_full("http://h/x"), "http://h/x");
        assert_eq!(url_full("http://h/x?flag"), "http://h/x?flag");
    }
}
