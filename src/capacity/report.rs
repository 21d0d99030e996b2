//! `sloburn capacity --report FILE.html`: one self-contained page (uPlot and the data inlined,
//! nothing loaded from anywhere) plotting each step's rate against the figure that decided it
//! (the deciding percentile, in ms, for a latency condition), passes, fails and inconclusive
//! steps apart, with the limit as a line; and the steps as a table that reads without script.
//! Bounded: one point and one row per step, and a search has at most `max_steps`.

use super::export::Capacity;
use crate::web::assets::{UPLOT_CSS, UPLOT_JS};
use crate::web::report::{esc, inline};

/// Draws the chart from the JSON in `#capacity-data`.
const SCRIPT: &str = r#"
(function () {
  var c = JSON.parse(document.getElementById('capacity-data').textContent);
  var steps = c.steps.filter(function (s) { return s.deciding; });
  steps.sort(function (a, b) { return a.rate - b.rate; });
  var xs = steps.map(function (s) { return s.rate; });
  var pick = function (v) {
    return steps.map(function (s) { return s.verdict === v ? s.deciding.observed : null; });
  };
  var limit = steps.map(function (s) { return s.deciding.limit; });
  var unit = steps.length ? steps[0].deciding.unit : '';
  var dots = function (label, stroke) {
    return { label: label, stroke: stroke, paths: function () { return null; },
             points: { show: true, size: 9, fill: stroke } };
  };
  var el = document.getElementById('chart');
  if (!xs.length || typeof uPlot === 'undefined') { el.textContent = 'no step to plot'; return; }
  var plot = new uPlot({
    width: Math.min(900, window.innerWidth - 40), height: 360,
    scales: { x: { time: false } },
    axes: [{ label: 'rate (arrivals/s)' }, { label: 'deciding figure (' + unit + ')' }],
    series: [{ label: 'rate' }, dots('pass', '#2a9d3a'), dots('fail', '#d13b3b'),
             dots('inconclusive', '#888'), { label: 'limit', stroke: '#555', dash: [6, 4] }]
  }, [xs, pick('pass'), pick('fail'), pick('inconclusive'), limit], el);
  window.__capacity = { plot: plot, data: plot.data };
  document.body.dataset.rendered = '1';
})();
"#;

/// The page for one search.
pub fn html(c: &Capacity) -> String {
    let data = serde_json::to_string(c)
        .unwrap_or_else(|_| "{}".into())
        .replace('<', "\\u003c");
    let mut rows = String::new();
    for s in &c.steps {
        let deciding = match (&s.why, &s.deciding) {
            (Some(why), _) => why.clone(),
            (None, Some(f)) => f.said(),
            (None, None) => String::new(),
        };
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            s.step,
            esc(&super::search::rate(s.rate)),
            s.purpose.as_str(),
            s.verdict.as_str(),
            s.requests,
            esc(&deciding)
        ));
    }
    format!(
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>\
         <meta name=viewport content=\"width=device-width,initial-scale=1\">\
         <title>sloburn capacity report</title>\n<style>{uplot_css}</style>\n\
         <style>body{{font:14px system-ui,sans-serif;margin:20px}}td,th{{padding:2px 8px;\
         text-align:left}}</style></head>\n<body><h1>sloburn capacity report</h1>\n\
         <p id=answer>{answer}</p>\n<div id=chart></div>\n\
         <table><thead><tr><th>step</th><th>rate</th><th>why</th><th>verdict</th>\
         <th>requests</th><th>deciding figure</th></tr></thead><tbody>\n{rows}</tbody></table>\n\
         <script type=\"application/json\" id=capacity-data>{data}</script>\n\
         <script>{uplot_js}</script>\n<script>{script}</script>\n</body></html>\n",
        uplot_css = inline(UPLOT_CSS),
        answer = esc(&c.summary),
        uplot_js = inline(UPLOT_JS),
        script = inline(SCRIPT),
    )
}

#[cfg(test)]
mod tests {
    use super::super::search::Outcome;
    use super::*;

    #[test]
    fn the_page_loads_nothing_and_its_data_cannot_close_the_script() {
        let mut c = Capacity::new(
            &Outcome::BelowLowest {
                lowest: 1.0,
                high: 1.0,
            },
            Vec::new(),
            0.05,
            10.0,
            std::time::Duration::ZERO,
        );
        c.limited_by = Some("</script><b>x</b>".into());
        let page = html(&c);
        assert_eq!(
            page.matches("</script>").count(),
            3,
            "only the three real ends"
        );
        assert!(!page.contains("src=") && !page.contains("href="));
        assert!(page.contains("even the lowest step failed"));
    }
}
