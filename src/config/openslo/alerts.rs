//! OpenSLO `AlertPolicy` and `AlertCondition` objects (inline or by reference) to sloburn's
//! alert tiers: each burn-rate condition one tier, a notification target one label.

use super::super::walk::{self, Ctx};
use super::super::yaml::{Node, Value};
use super::{Find, ImportedTier, metadata};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) fn alert_policy<'a>(
    ctx: &mut Ctx,
    node: &'a Node,
    path: &str,
    find: &Find<'a>,
    tiers: &mut Vec<ImportedTier>,
    labels: &mut BTreeMap<String, String>,
) {
    let Some((node, path)) = resolve(ctx, (node, path), ("alertPolicyRef", "AlertPolicy"), find)
    else {
        return;
    };
    let Some(f) = walk::fields(
        ctx,
        node,
        &path,
        &["apiVersion", "kind", "metadata", "spec"],
    ) else {
        return;
    };
    if metadata(ctx, &f, &path, None).is_none() {
        return;
    }
    let Some(spec) = f.get("spec") else {
        ctx.error(node.pos, &path, "missing `spec`");
        return;
    };
    let sp = f.path_of("spec");
    let Some(s) = walk::fields(
        ctx,
        spec,
        &sp,
        &[
            "description",
            "alertWhenNoData",
            "alertWhenResolved",
            "alertWhenBreaching",
            "conditions",
            "notificationTargets",
        ],
    ) else {
        return;
    };
    if let Some(n) = s.get("description") {
        // Prose about the policy has no place in a tier (README "OpenSLO" says so); it must
        // still be text.
        walk::string(ctx, n, &s.path_of("description"));
    }
    alert_when(ctx, &s);
    if let Some(n) = s.get("notificationTargets") {
        notification_targets(ctx, n, &s.path_of("notificationTargets"), labels);
    }
    let Some(c) = s.get("conditions") else {
        ctx.error(spec.pos, &sp, "missing `conditions`");
        return;
    };
    the_condition(ctx, c, &s.path_of("conditions"), find, tiers);
}

/// `node` at `path`, or the document its `{KEY: name}` names (`key` and `kind`: `alertPolicyRef`
/// and `AlertPolicy`, `conditionRef` and `AlertCondition`); `None` after an error.
fn resolve<'a>(
    ctx: &mut Ctx,
    (node, path): (&'a Node, &str),
    (key, kind): (&str, &str),
    find: &Find<'a>,
) -> Option<(&'a Node, String)> {
    let is_ref =
        matches!(&node.value, Value::Map(entries) if entries.iter().any(|(k, _)| k.name == key));
    if !is_ref {
        return Some((node, path.to_string()));
    }
    let f = walk::fields(ctx, node, path, &[key])?;
    let r = f.get(key)?;
    let name = walk::string(ctx, r, &f.path_of(key))?;
    match find(kind, &name) {
        Some(d) => Some((d, format!("{kind} {name}"))),
        None => {
            ctx.error(
                r.pos,
                &f.path_of(key),
                format!("no {kind} named `{name}` in this file"),
            );
            None
        }
    }
}

/// `alertWhenNoData`, `alertWhenResolved`, `alertWhenBreaching`: only the values a burn-rate
/// tier means map.
fn alert_when(ctx: &mut Ctx, s: &walk::Fields) {
    for (key, allowed, why) in [
        (
            "alertWhenNoData",
            false,
            "sloburn's burn alerts never fire without traffic; the daemon's absence alert covers missing data",
        ),
        (
            "alertWhenResolved",
            false,
            "resolved notifications are Alertmanager's `send_resolved`, not a rule",
        ),
        (
            "alertWhenBreaching",
            true,
            "a burn-rate tier alerts when it breaches",
        ),
    ] {
        if let Some(n) = s.get(key)
            && let Some(v) = walk::boolean(ctx, n, &s.path_of(key))
            && v != allowed
        {
            ctx.error(
                n.pos,
                &s.path_of(key),
                format!("`{key}: {v}` does not map: {why}"),
            );
        }
    }
}

/// `notificationTargets`: one `targetRef`, the SLO's `openslo_notification_target` label.
fn notification_targets(ctx: &mut Ctx, n: &Node, np: &str, labels: &mut BTreeMap<String, String>) {
    for (i, item) in walk::seq(ctx, n, np).iter().enumerate() {
        let ip = format!("{np}[{i}]");
        let Some(tf) = walk::fields(ctx, item, &ip, &["targetRef"]) else {
            continue;
        };
        let Some(t) = walk::required(ctx, &tf, "targetRef", walk::string) else {
            continue;
        };
        match labels.get("openslo_notification_target") {
            Some(old) if *old != t => ctx.error(
                item.pos,
                &ip,
                format!("a second notification target `{t}` (the SLO's label already names `{old}`): sloburn routes by one label per SLO"),
            ),
            _ => {
                labels.insert("openslo_notification_target".to_string(), t);
            }
        }
    }
}

/// `conditions`: exactly one, inline or by `conditionRef`, a tier of its own name.
fn the_condition<'a>(
    ctx: &mut Ctx,
    c: &'a Node,
    cp: &str,
    find: &Find<'a>,
    tiers: &mut Vec<ImportedTier>,
) {
    let items = walk::seq(ctx, c, cp);
    if items.len() != 1 {
        ctx.error(
            c.pos,
            cp,
            format!(
                "an alert policy holds exactly one condition, found {}",
                items.len()
            ),
        );
        return;
    }
    let ip = format!("{cp}[0]");
    let at = (&items[0], ip.as_str());
    let Some((cnode, cpath)) = resolve(ctx, at, ("conditionRef", "AlertCondition"), find) else {
        return;
    };
    if let Some(t) = condition(ctx, cnode, &cpath) {
        if tiers.iter().any(|o| o.name == t.name) {
            ctx.error(
                cnode.pos,
                &cpath,
                format!("a second tier named `{}`", t.name),
            );
        } else {
            tiers.push(t);
        }
    }
}

fn condition(ctx: &mut Ctx, node: &Node, path: &str) -> Option<ImportedTier> {
    let f = walk::fields(ctx, node, path, &["apiVersion", "kind", "metadata", "spec"])?;
    let (name, _) = metadata(ctx, &f, path, None)?;
    let Some(spec) = f.get("spec") else {
        ctx.error(node.pos, path, "missing `spec`");
        return None;
    };
    let sp = f.path_of("spec");
    let s = walk::fields(ctx, spec, &sp, &["description", "severity", "condition"])?;
    if let Some(n) = s.get("description") {
        walk::string(ctx, n, &s.path_of("description"));
    }
    let page = walk::required(ctx, &s, "severity", |c, n, p| {
        match walk::string(c, n, p).as_deref() {
            Some("page") => Some(true),
            Some("ticket") => Some(false),
            Some(other) => {
                c.error(
                    n.pos,
                    p,
                    format!(
                        "severity `{other}` does not map: sloburn's tiers are `page` or `ticket`"
                    ),
                );
                None
            }
            None => None,
        }
    });
    let Some(cn) = s.get("condition") else {
        ctx.error(spec.pos, &sp, "missing `condition`");
        return None;
    };
    let cf = walk::fields(
        ctx,
        cn,
        &s.path_of("condition"),
        &["kind", "threshold", "lookbackWindow", "alertAfter"],
    )?;
    if let Some(k) = cf.get("kind") {
        let kp = cf.path_of("kind");
        if let Some(kind) = walk::string(ctx, k, &kp)
            && kind != "burnrate"
        {
            ctx.error(
                k.pos,
                &kp,
                format!("condition kind `{kind}` does not map: sloburn's tiers are `burnrate`"),
            );
            return None;
        }
    }
    let factor = walk::required(ctx, &cf, "threshold", |c, n, p| {
        let v = walk::number(c, n, p)?;
        if v <= 0.0 {
            c.error(n.pos, p, "the burn-rate threshold must be above zero");
            return None;
        }
        Some(v)
    });
    let long = walk::required(ctx, &cf, "lookbackWindow", walk::positive_duration);
    let after = cf
        .get("alertAfter")
        .map(|n| walk::duration(ctx, n, &cf.path_of("alertAfter")))
        .unwrap_or(Some(Duration::ZERO));
    let long = long?;
    let after = after?;
    let short = if after.is_zero() {
        Duration::from_secs((long.as_secs() / 12).max(60) / 60 * 60)
    } else {
        after
    };
    if short >= long {
        let pos = cf.get("alertAfter").map_or(cn.pos, |n| n.pos);
        ctx.error(
            pos,
            &cf.path_of("alertAfter"),
            "alertAfter (the short window) must be shorter than lookbackWindow",
        );
        return None;
    }
    Some(ImportedTier {
        name,
        page: page?,
        long,
        short,
        factor: factor?,
    })
}
