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

/// The exposition formats `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    OpenMetrics,
    /// Length-delimited `io.prometheus.client.MetricFamily` messages (native histograms).
    Protobuf,
}

/// The media type of the protobuf exposition, as Prometheus asks for it.
pub const PROTOBUF: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// The format `accept` prefers: protobuf when it names the delimited `MetricFamily` protobuf
/// at least as strongly as any text format, else as [`wants_openmetrics`] decides.
pub fn negotiate(accept: Option<&str>) -> Format {
    let mut proto = 0.0f64;
    let mut text = 0.0f64;
    for range in accept.unwrap_or("").split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let (mut q, mut message, mut encoding) = (Some(1.0f64), None, None);
        for param in parts {
            let (k, v) = param.split_once('=').unwrap_or((param, ""));
            let v = v.trim().trim_matches('"').to_string();
            match k.trim().to_ascii_lowercase().as_str() {
                "q" => q = v.parse::<f64>().ok().filter(|q| (0.0..=1.0).contains(q)),
                "proto" => message = Some(v),
                "encoding" => encoding = Some(v),
                _ => {}
            }
        }
        let Some(q) = q else { continue };
        match media.as_str() {
            "application/vnd.google.protobuf"
                if message.as_deref() == Some("io.prometheus.client.MetricFamily")
                    && encoding.as_deref() == Some("delimited") =>
            {
                proto = proto.max(q);
            }
            "application/openmetrics-text" | "text/plain" | "text/*" | "*/*" => {
                text = text.max(q);
            }
            _ => {}
        }
    }
    if proto > 0.0 && proto >= text {
        Format::Protobuf
    } else if wants_openmetrics(accept) {
        Format::OpenMetrics
    } else {
        Format::Text
    }
}

/// The `Content-Type` of each format.
pub fn format_content_type(format: Format) -> &'static str {
    match format {
        Format::Text => content_type(false),
        Format::OpenMetrics => content_type(true),
        Format::Protobuf => PROTOBUF,
    }
}

/// The `Content-Type` of [`super::Metrics::encode`]'s output.
pub fn content_type(openmetrics: bool) -> &'static str {
    if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_only_when_named_with_its_message_and_encoding() {
        let prometheus = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(negotiate(Some(prometheus)), Format::Protobuf);
        let text_first = "text/plain;q=0.9,application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5";
        assert_eq!(negotiate(Some(text_first)), Format::Text);
        let no_encoding = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily";
        assert_eq!(negotiate(Some(no_encoding)), Format::Text);
        let om = "application/openmetrics-text;version=1.0.0";
        assert_eq!(negotiate(Some(om)), Format::OpenMetrics);
        assert_eq!(negotiate(None), Format::Text);
    }
}
