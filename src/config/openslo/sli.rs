//! An OpenSLO `SLI` (inline or referenced): `ratioMetric` and `thresholdMetric` as a sloburn
//! SLO's events and bound, every unmapped field an error at its line:col.

use crate::config::walk::{self, Ctx, join};
use crate::config::yaml::Node;

use super::*;

/// An SLI (inline `{metadata, spec}` or a `kind: SLI` document): a ratio metric maps to
/// sloburn's availability SLI; its metric sources are replaced by sloburn's own probes.
pub(super) fn indicator(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    target: Option<&str>,
    description: &mut Vec<String>,
    found: &mut Option<(crate::config::Sli, Vec<String>)>,
) -> bool {
    let Some(f) = walk::fields(ctx, node, path, &["apiVersion", "kind", "metadata", "spec"]) else {
        return false;
    };
    if metadata(ctx, &f, path, None).is_none() {
        return false;
    }
    let Some(spec) = f.get("spec") else {
        ctx.error(node.pos, path, "missing `spec`");
        return false;
    };
    let sp = f.path_of("spec");
    let Some(s) = walk::fields(
        ctx,
        spec,
        &sp,
        &["description", "ratioMetric", "thresholdMetric"],
    ) else {
        return false;
    };
    if let Some(d) = s
        .get("description")
        .and_then(|n| walk::string(ctx, n, &s.path_of("description")))
    {
        description.push(d);
    }
    if let Some(t) = s.get("thresholdMetric") {
        ctx.error(
            t.pos,
            &s.path_of("thresholdMetric"),
            "a thresholdMetric (one value compared with `op`/`value`) does not map: sloburn's SLIs count good and bad probe requests; use a ratioMetric",
        );
        return false;
    }
    let Some(r) = s.get("ratioMetric") else {
        ctx.error(spec.pos, &sp, "missing `ratioMetric`");
        return false;
    };
    let rp = s.path_of("ratioMetric");
    let Some(rf) = walk::fields(
        ctx,
        r,
        &rp,
        &["counter", "good", "bad", "total", "raw", "rawType"],
    ) else {
        return false;
    };
    for key in ["raw", "rawType"] {
        if let Some(n) = rf.get(key) {
            ctx.error(n.pos, &rf.path_of(key), "a precomputed ratio (`raw`) does not map: sloburn counts good and bad events itself");
            return false;
        }
    }
    if let Some(n) = rf.get("counter") {
        walk::boolean(ctx, n, &rf.path_of("counter"));
    }
    let service = target.unwrap_or("its target");
    let ok = ratio_counts(ctx, (r, &rp), &rf);
    // sloburn's own export names its SLI in a `type: sloburn` source: that maps exactly.
    if let Some(g) = rf.get("good")
        && let Some(src) = child(g, "metricSource")
        && child(src, "type").and_then(Node::as_scalar) == Some("sloburn")
    {
        let gp = join(&rf.path_of("good"), "metricSource");
        let Some(sli) = sloburn_source(ctx, src, &gp) else {
            return false;
        };
        *found = Some(sli);
        return ok;
    }
    for key in ["good", "bad", "total"] {
        if let Some(n) = rf.get(key) {
            ctx.warn(
                n.pos,
                &rf.path_of(key),
                format!("this metric source is replaced by sloburn's own probes of target `{service}` (good and bad requests)"),
            );
        }
    }
    ok
}

/// Whether the ratio metric has `total` and one of `good` or `bad`.
fn ratio_counts(ctx: &mut Ctx, (r, rp): (&Node, &str), rf: &walk::Fields) -> bool {
    let mut ok = rf.has("total");
    if !ok {
        ctx.error(r.pos, rp, "a ratioMetric needs `total` and `good` or `bad`");
    }
    match (rf.get("good"), rf.get("bad")) {
        (Some(_), Some(b)) => {
            ctx.error(b.pos, &rf.path_of("bad"), "give `good` or `bad`, not both");
            ok = false;
        }
        (None, None) => {
            ctx.error(
                r.pos,
                rp,
                "a ratioMetric needs `good` or `bad` with `total`",
            );
            ok = false;
        }
        _ => {}
    }
    ok
}

/// A `type: sloburn` metric source (sloburn's own export): its SLI and profiles, exactly.
fn sloburn_source(
    ctx: &mut Ctx,
    src: &Node,
    gp: &str,
) -> Option<(crate::config::Sli, Vec<String>)> {
    let mf = walk::fields(ctx, src, gp, &["type", "spec"])?;
    let Some(spec) = mf.get("spec") else {
        ctx.error(src.pos, gp, "missing `spec`");
        return None;
    };
    let sf = walk::fields(
        ctx,
        spec,
        &mf.path_of("spec"),
        &["sli", "under", "failures", "measure", "profiles"],
    )?;
    let sli = match sf.get("sli").and_then(Node::as_scalar) {
        Some("latency") => latency(ctx, &sf, spec)?,
        Some("availability") | None => crate::config::Sli::Availability,
        Some(other) => {
            let n = sf.get("sli").unwrap_or(spec);
            ctx.error(
                n.pos,
                &sf.path_of("sli"),
                format!("unknown sloburn SLI `{other}`: `availability` or `latency`"),
            );
            return None;
        }
    };
    let profiles = sf
        .get("profiles")
        .map(|n| {
            walk::seq(ctx, n, &sf.path_of("profiles"))
                .iter()
                .filter_map(|i| walk::string(ctx, i, &sf.path_of("profiles")))
                .collect()
        })
        .unwrap_or_default();
    Some((sli, profiles))
}

/// A sloburn latency SLI: `under`, `failures` (include or exclude), `measure` (corrected or
/// duration).
fn latency(ctx: &mut Ctx, sf: &walk::Fields, spec: &Node) -> Option<crate::config::Sli> {
    let under = walk::required(ctx, sf, "under", walk::positive_duration);
    let exclude = match sf.get("failures").and_then(Node::as_scalar) {
        None | Some("include") => Some(false),
        Some("exclude") => Some(true),
        Some(_) => {
            let n = sf.get("failures").unwrap_or(spec);
            ctx.error(n.pos, &sf.path_of("failures"), "use `include` or `exclude`");
            None
        }
    };
    let corrected = match sf.get("measure").and_then(Node::as_scalar) {
        None | Some("corrected") => Some(true),
        Some("duration") => Some(false),
        Some(_) => {
            let n = sf.get("measure").unwrap_or(spec);
            ctx.error(
                n.pos,
                &sf.path_of("measure"),
                "use `corrected` or `duration`",
            );
            None
        }
    };
    Some(crate::config::Sli::Latency {
        under: under?,
        exclude_failures: exclude?,
        corrected: corrected?,
    })
}
