//! A target's `checks` list: status, body, JSON, header and duration checks, each with the
//! name it is reported under.

use super::walk::{self, Ctx};
use super::yaml::{Node, Value};
use crate::checks::{Check, CheckKind, HeaderExpect, JsonExpect, JsonPath};
use crate::units;

/// The kinds of check; a check item holds exactly one of them.
const KINDS: [&str; 6] = [
    "status",
    "body_contains",
    "body_matches",
    "json",
    "header",
    "duration_under",
];

/// Every field a check item may hold: its name and one kind.
const FIELDS: [&str; 7] = [
    "name", KINDS[0], KINDS[1], KINDS[2], KINDS[3], KINDS[4], KINDS[5],
];

pub fn checks(ctx: &mut Ctx, node: &Node, path: &str) -> Vec<Check> {
    let mut out: Vec<Check> = Vec::new();
    let mut names = std::collections::HashSet::new();
    for (i, item) in walk::seq(ctx, node, path).iter().enumerate() {
        let p = format!("{path}[{i}]");
        let Some(f) = walk::fields(ctx, item, &p, &FIELDS) else {
            continue;
        };
        let kinds: Vec<&str> = KINDS.into_iter().filter(|k| f.has(k)).collect();
        if kinds.len() != 1 {
            ctx.error(
                item.pos,
                &p,
                "each check needs exactly one of status, body_contains, body_matches, json, header, duration_under",
            );
            continue;
        }
        let key = kinds[0];
        let Some(n) = f.get(key) else { continue };
        let kp = f.path_of(key);
        let built = match key {
            "status" => status(ctx, n, &kp).map(|r| (CheckKind::Status(r), "status".to_string())),
            "body_contains" => walk::string(ctx, n, &kp)
                .map(|s| (CheckKind::BodyContains(s), "body_contains".to_string())),
            "body_matches" => walk::string(ctx, n, &kp).and_then(|s| {
                regex(ctx, n, &kp, &s).map(|re| (CheckKind::BodyMatches(re), "body_matches".into()))
            }),
            "json" => json_check(ctx, n, &kp),
            "header" => header_check(ctx, n, &kp),
            _ => walk::duration(ctx, n, &kp).map(|d| {
                (
                    CheckKind::DurationUnder(d),
                    format!("duration_under_{}", units::format_duration(d)),
                )
            }),
        };
        let Some((kind, default_name)) = built else {
            continue;
        };
        let name = match f.get("name") {
            Some(n) => walk::string(ctx, n, &f.path_of("name")).unwrap_or(default_name),
            None => default_name,
        };
        if !names.insert(name.clone()) {
            ctx.error(
                item.pos,
                &p,
                format!(
                    "two checks are named `{name}`; give one a `name:` (names become metric labels)"
                ),
            );
            continue;
        }
        out.push(Check { name, kind });
    }
    out
}

fn regex(ctx: &mut Ctx, node: &Node, path: &str, src: &str) -> Option<regex::Regex> {
    match regex::Regex::new(src) {
        Ok(re) => Some(re),
        Err(e) => {
            let msg = e.to_string();
            let last = msg.lines().last().unwrap_or("invalid").trim();
            let last = last.strip_prefix("error: ").unwrap_or(last).to_string();
            ctx.error(node.pos, path, format!("bad regular expression: {last}"));
            None
        }
    }
}

/// `200`, `[200, 204]`, `200-299` or `2xx`.
fn status(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Vec<(u16, u16)>> {
    let mut ranges = Vec::new();
    for item in walk::one_or_many(node) {
        let Some(text) = walk::string(ctx, item, path) else {
            continue;
        };
        let t = text.trim();
        let parsed = if let Some(class) = t.strip_suffix("xx") {
            class
                .parse::<u16>()
                .ok()
                .filter(|c| (1..=5).contains(c))
                .map(|c| (c * 100, c * 100 + 99))
        } else if let Some((a, b)) = t.split_once('-') {
            match (a.trim().parse::<u16>(), b.trim().parse::<u16>()) {
                (Ok(a), Ok(b)) if a <= b => Some((a, b)),
                _ => None,
            }
        } else {
            t.parse::<u16>().ok().map(|c| (c, c))
        };
        match parsed {
            // 0-99: a gRPC status code, or a probe's (0 OK).
            Some((a, b)) if (0..=599).contains(&a) && (0..=599).contains(&b) => ranges.push((a, b)),
            _ => ctx.error(
                item.pos,
                path,
                format!(
                    "`{t}` is not a status: use a code (200), a range (200-299) or a class (2xx)"
                ),
            ),
        }
    }
    (!ranges.is_empty()).then_some(ranges)
}

fn json_check(ctx: &mut Ctx, node: &Node, path: &str) -> Option<(CheckKind, String)> {
    let f = walk::fields(ctx, node, path, &["path", "equals"])?;
    let Some(pn) = f.get("path") else {
        ctx.error(node.pos, path, "missing `path` (like `$.status`)");
        return None;
    };
    let pp = f.path_of("path");
    let src = walk::string(ctx, pn, &pp)?;
    let jp = match JsonPath::parse(&src) {
        Ok(p) => p,
        Err(e) => {
            ctx.error(pn.pos, &pp, e);
            return None;
        }
    };
    let expect = match f.get("equals") {
        Some(n) => JsonExpect::Equals(yaml_to_json(n)),
        None => JsonExpect::Exists,
    };
    Some((CheckKind::Json { path: jp, expect }, format!("json_{src}")))
}

pub(super) fn yaml_to_json(node: &Node) -> serde_json::Value {
    match &node.value {
        Value::Null => serde_json::Value::Null,
        Value::Scalar { text, quoted: true } => serde_json::Value::String(text.clone()),
        Value::Scalar {
            text,
            quoted: false,
        } => match text.as_str() {
            "true" => true.into(),
            "false" => false.into(),
            "null" | "~" => serde_json::Value::Null,
            t => t
                .parse::<i64>()
                .map(serde_json::Value::from)
                .or_else(|_| t.parse::<f64>().map(serde_json::Value::from))
                .unwrap_or_else(|_| serde_json::Value::String(t.to_string())),
        },
        Value::Seq(items) => items.iter().map(yaml_to_json).collect(),
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.name.clone(), yaml_to_json(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
    }
}

fn header_check(ctx: &mut Ctx, node: &Node, path: &str) -> Option<(CheckKind, String)> {
    let f = walk::fields(ctx, node, path, &["name", "equals", "matches"])?;
    let Some(nn) = f.get("name") else {
        ctx.error(node.pos, path, "missing `name` (the header to check)");
        return None;
    };
    let np = f.path_of("name");
    let raw = walk::string(ctx, nn, &np)?;
    let Ok(name) = http::HeaderName::from_bytes(raw.to_ascii_lowercase().as_bytes()) else {
        ctx.error(nn.pos, &np, format!("`{raw}` is not a valid header name"));
        return None;
    };
    let expect = match (f.get("equals"), f.get("matches")) {
        (Some(n), Some(_)) => {
            ctx.error(
                n.pos,
                &f.path_of("equals"),
                "set `equals` or `matches`, not both",
            );
            return None;
        }
        (Some(n), None) => HeaderExpect::Equals(walk::string(ctx, n, &f.path_of("equals"))?),
        (None, Some(n)) => {
            let p = f.path_of("matches");
            let src = walk::string(ctx, n, &p)?;
            HeaderExpect::Matches(regex(ctx, n, &p, &src)?)
        }
        (None, None) => HeaderExpect::Exists,
    };
    let label = format!("header_{}", name.as_str());
    Some((CheckKind::Header { name, expect }, label))
}
