//! Content negotiation for `/metrics`: OpenMetrics 1.0 only when the `Accept` header prefers
//! it, the classic text format otherwise (absent header, `text/plain`, `*/*`, garbage).

/// True when `accept` asks for OpenMetrics text at least as strongly as for the classic format.
///
/// Each media range is weighed by its `q` (default 1). OpenMetrics counts only when named
/// explicitly (`application/openmetrics-text`, version absent, `1.0.0` or `0.0.1`, the versions
/// Prometheus sends); `text/plain`, `text/*` and `*/*` count for the classic format. A tie goes
/// to OpenMetrics, which the client named explicitly. An invalid `q` drops its range.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let mut om = 0.0f64;
    let mut classic = 0.0f64;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q = Some(1.0f64);
        let mut version: Option<String> = None;
        for param in parts {
            let (k, v) = param.split_once('=').unwrap_or((param, ""));
            let v = v.trim().trim_matches('"');
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse::<f64>().ok().filter(|q| (0.0..=1.0).contains(q)),
                "version" => version = Some(v.to_string()),
                _ => {}
            }
        }
        let Some(q) = q else { continue };
        match media.as_str() {
            "application/openmetrics-text"
                if matches!(version.as_deref(), None | Some("1.0.0" | "0.0.1")) =>
            {
                om = om.max(q);
            }
            "text/plain" | "text/*" | "*/*" => classic = classic.max(q),
            _ => {}
        }
    }
    om > 0.0 && om >= classic
}

/// The `Content-Type` of [`super::Metrics::encode`]'s output.
pub fn content_type(openmetrics: bool) -> &'static str {
    if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}
