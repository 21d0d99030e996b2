//! The dashboard's files, embedded in the binary so the page works offline (no CDN, no
//! external font): uPlot 1.6.32 vendored from npm (`assets/vendor/uplot/`, MIT), and
//! sloburn's own script, style and page shell (`assets/web/`).

pub const UPLOT_JS: &str = include_str!("../../assets/vendor/uplot/uPlot.iife.min.js");
pub const UPLOT_CSS: &str = include_str!("../../assets/vendor/uplot/uPlot.min.css");
pub const UPLOT_LICENSE: &str = include_str!("../../assets/vendor/uplot/LICENSE");
pub const APP_JS: &str = include_str!("../../assets/web/app.js");
pub const APP_CSS: &str = include_str!("../../assets/web/app.css");
pub const DASHBOARD_HTML: &str = include_str!("../../assets/web/dashboard.html");

/// `/assets/{name}`: the content type and body, or None for an unknown name.
pub fn asset(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "uPlot.iife.min.js" => ("text/javascript; charset=utf-8", UPLOT_JS),
        "uPlot.min.css" => ("text/css; charset=utf-8", UPLOT_CSS),
        "uPlot.LICENSE.txt" => ("text/plain; charset=utf-8", UPLOT_LICENSE),
        "app.js" => ("text/javascript; charset=utf-8", APP_JS),
        "app.css" => ("text/css; charset=utf-8", APP_CSS),
        _ => return None,
    })
}
