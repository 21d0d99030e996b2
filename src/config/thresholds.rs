//! A profile's `thresholds` mapping: metric (or k6 sub-metric, `http_req_duration{status:200}`)
//! to k6 threshold expressions, with positions that point into the expression.

use super::ThresholdSpec;
use super::walk::{self, Ctx, join, optional};
use super::yaml::{Node, Pos, Value};
use std::time::Duration;

pub fn thresholds(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    abort_default: bool,
) -> Vec<ThresholdSpec> {
    let mut out = Vec::new();
    let Value::Map(entries) = &node.value else {
        ctx.error(
            node.pos,
            path,
            format!(
                "expected a mapping of metric → thresholds, found {}",
                node.kind()
            ),
        );
        return out;
    };
    for (key, value) in entries {
        let p = join(path, &key.name);
        // Metric-level problems (unknown name, bad tag filter) are reported once, at the key.
        if let Err(e) = crate::thresholds::parse_metric(&key.name) {
            ctx.error(key.pos, &p, e.to_string());
            continue;
        }
        for (i, item) in walk::one_or_many(value).into_iter().enumerate() {
            let ip = format!("{p}[{i}]");
            let (expr_node, abort, delay) = match &item.value {
                Value::Map(_) => {
                    let Some(f) = walk::fields(
                        ctx,
                        item,
                        &ip,
                        &["threshold", "abort_on_fail", "delay_abort_eval"],
                    ) else {
                        continue;
                    };
                    let Some(expr_node) = f.get("threshold") else {
                        ctx.error(item.pos, &ip, "missing `threshold`");
                        continue;
                    };
                    let abort = optional(ctx, &f, "abort_on_fail", abort_default, walk::boolean);
                    let delay =
                        optional(ctx, &f, "delay_abort_eval", Duration::ZERO, walk::duration);
                    let (Some(abort), Some(delay)) = (abort, delay) else {
                        continue;
                    };
                    (expr_node, abort, delay)
                }
                _ => (item, abort_default, Duration::ZERO),
            };
            let Some(expr) = walk::string(ctx, expr_node, &ip) else {
                continue;
            };
            match crate::thresholds::parse(&key.name, &expr) {
                Ok(threshold) => out.push(ThresholdSpec {
                    threshold,
                    abort_on_fail: abort,
                    delay_abort_eval: delay,
                }),
                Err(crate::thresholds::ThresholdError::Syntax { column, message }) => {
                    let quoted = matches!(expr_node.value, Value::Scalar { quoted: true, .. });
                    let pos = Pos {
                        line: expr_node.pos.line,
                        col: expr_node.pos.col + usize::from(quoted) + column - 1,
                    };
                    ctx.error(pos, &ip, format!("`{expr}`: {message}"));
                }
                Err(e) => ctx.error(expr_node.pos, &ip, e.to_string()),
            }
        }
    }
    out
}
