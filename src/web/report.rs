//! `sloburn run --report FILE.html`: one self-contained file (uPlot, script, style and the
//! run's data inlined; no `src` or `href` that loads anything) that opens from a CI artifact
//! store or an email attachment with no network and no server. This module only renders the
//! page; the run's `--report` output records the run and calls it.

use super::assets::{APP_CSS, APP_JS, UPLOT_CSS, UPLOT_JS};
use super::detail::RunDetail;
use std::path::Path;

/// Text safe inside a `<script>` or `<style>` element: `</` cannot close it early.
pub(crate) fn inline(text: &str) -> String {
    text.replace("</", "<\\/")
}

/// Text safe in HTML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report page for one run.
pub fn html(detail: &RunDetail) -> String {
    // `<` only occurs inside JSON strings, where `\u003c` means the same.
    let data = serde_json::to_string(detail)
        .unwrap_or_else(|_| "{}".into())
        .replace('<', "\\u003c");
    let title = match detail.setup.as_ref().and_then(|s| s.urls.first()) {
        Some(url) => format!("sloburn run report: {} → {url}", detail.profile),
        None => format!("sloburn run report: {}", detail.profile),
    };
    format!(
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width,initial-scale=1\">\
         <title>{title}</title>\n<style>{uplot_css}</style>\n<style>{app_css}</style></head>\n\
         <body class=report><header><h1>{title}</h1></header><main id=run></main>\n\
         <script type=\"application/json\" id=run-data>{data}</script>\n\
         <script>{uplot_js}</script>\n<script>{app_js}</script>\n\
         <script>SB.report(JSON.parse(document.getElementById('run-data').textContent));</script>\n\
         </body></html>\n",
        title = esc(&title),
        uplot_css = inline(UPLOT_CSS),
        app_css = inline(APP_CSS),
        uplot_js = inline(UPLOT_JS),
        app_js = inline(APP_JS),
    )
}

/// Writes the report to `path`.
pub fn write(path: &Path, detail: &RunDetail) -> std::io::Result<()> {
    std::fs::write(path, html(detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_loads_nothing_and_its_data_cannot_close_the_script() {
        let detail = RunDetail {
            profile: "p".into(),
            reason: Some("</script><b>x</b>".into()),
            ..RunDetail::default()
        };
        let page = html(&detail);
        assert_eq!(
            page.matches("</script>").count(),
            4,
            "only the four real ends"
        );
        for attr in ["src=", "href="] {
            assert!(!page.contains(&format!("{attr}\"http")), "{attr}");
            assert!(!page.contains(&format!("{attr}http")), "{attr}");
        }
        let start = page.find("id=run-data>").unwrap() + "id=run-data>".len();
        let end = start + page[start..].find("</script>").unwrap();
        let back: RunDetail = serde_json::from_str(&page[start..end]).unwrap();
        assert_eq!(back, detail);
    }
}
