//! The `journeys` section: ordered steps over one target, with captures, `${...}` templates
//! (compiled here, once), a data file and think times. Every unknown variable, capture used
//! before it is set and malformed field is an error at its position.

use super::checks::checks;
use super::secrets;
use super::walk::{self, Ctx, join, reference};
use super::yaml::{Node, Value};
use super::{Env, Target};
use crate::journey::{Capture, DataSet, Escape, Order, Scope, Source, Template, Think};
use crate::load::walk::{Journey, Step, fixed_request};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The largest data file read: its rows are held in memory for the whole run, at most about
/// four times the file's size, and five while it is parsed (`journey::data`).
pub const MAX_DATA_FILE_BYTES: u64 = 64 << 20;

/// The data files one config has loaded, by canonical path and format: journeys that name the
/// same file share one copy of its rows.
type Loaded = HashMap<(PathBuf, bool), Arc<DataSet>>;

const STEP_FIELDS: &[&str] = &[
    "name",
    "method",
    "path",
    "url",
    "headers",
    "body",
    "json",
    "checks",
    "capture",
    "think",
    "on_failure",
];

pub fn journeys(
    ctx: &mut Ctx,
    node: &Node,
    base: &Path,
    env: &Env,
    targets: &BTreeMap<String, Target>,
    target_names: &walk::Names,
) -> BTreeMap<String, Arc<Journey>> {
    let mut out = BTreeMap::new();
    let mut loaded = Loaded::new();
    let site = Site { base, env };
    for (name, _, node) in walk::named(ctx, node, "journeys") {
        let refs = (targets, target_names);
        if let Some(j) = journey(ctx, &name, node, site, refs, &mut loaded) {
            out.insert(name, Arc::new(j));
        }
    }
    out
}

fn journey(
    ctx: &mut Ctx,
    name: &str,
    node: &Node,
    site: Site<'_>,
    (targets, target_names): (&BTreeMap<String, Target>, &walk::Names),
    loaded: &mut Loaded,
) -> Option<Journey> {
    let Site { base, env } = site;
    let path = join("journeys", name);
    let f = walk::fields(
        ctx,
        node,
        &path,
        &["target", "data", "steps", "description"],
    )?;
    let target_name = match f.get("target") {
        Some(n) => reference(ctx, n, &f.path_of("target"), "target", target_names),
        None => {
            ctx.error(node.pos, &path, "missing `target`");
            None
        }
    };
    let data = f
        .get("data")
        .and_then(|n| data(ctx, n, &f.path_of("data"), base, loaded));
    let Some(steps_node) = f.get("steps") else {
        ctx.error(node.pos, &path, "missing `steps`");
        return None;
    };
    let spath = f.path_of("steps");
    let items = walk::seq(ctx, steps_node, &spath);
    if items.is_empty() {
        ctx.error(steps_node.pos, &spath, "a journey needs at least one step");
        return None;
    }
    let target = target_name.as_ref().and_then(|t| targets.get(t));
    // Every capture name with the last step that sets it, so a name used too early is told
    // apart from a typo.
    let mut planned: HashMap<String, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Value::Map(entries) = &item.value
            && let Some((_, cap)) = entries.iter().find(|(k, _)| k.name == "capture")
            && let Value::Map(caps) = &cap.value
        {
            for (k, _) in caps {
                planned.insert(k.name.clone(), i);
            }
        }
    }
    let rows = data.as_ref().map(|(d, _)| d.clone());
    // Captures of the steps before, name to slot.
    let mut set: HashMap<String, usize> = HashMap::new();
    let mut steps = Vec::new();
    let mut names: HashSet<String> = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        let scope = Scope {
            captures: &set,
            later: &planned,
            step: i,
            columns: rows.as_deref().map(DataSet::columns),
            data_failed: f.get("data").is_some() && rows.is_none(),
        };
        let p = format!("{spath}[{i}]");
        let mut new = Vec::new();
        let step = step(ctx, item, &p, &scope, target, Site { base, env }, &mut new);
        for name in new {
            let slot = set.len();
            set.insert(name, slot);
        }
        if let Some(s) = step {
            if !names.insert(s.name.clone()) {
                ctx.error(item.pos, &p, format!("a second step named `{}`", s.name));
            }
            steps.push(s);
        }
    }
    if steps.len() != items.len() {
        return None;
    }
    Some(Journey {
        name: name.to_string(),
        target: target_name?,
        steps,
        data,
        slots: set.len(),
    })
}

fn data(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    base: &Path,
    loaded: &mut Loaded,
) -> Option<(Arc<DataSet>, Order)> {
    let f = walk::fields(ctx, node, path, &["file", "order"])?;
    let order = match f.get("order") {
        Some(n) => {
            let p = f.path_of("order");
            let text = walk::string(ctx, n, &p)?;
            match Order::parse(&text) {
                Some(o) => o,
                None => {
                    ctx.error(
                        n.pos,
                        &p,
                        format!("unknown order `{text}`: use sequential, random or unique"),
                    );
                    return None;
                }
            }
        }
        None => Order::Sequential,
    };
    let Some(n) = f.get("file") else {
        ctx.error(node.pos, path, "missing `file`");
        return None;
    };
    let p = f.path_of("file");
    let rel = walk::string(ctx, n, &p)?;
    let file = base.join(&rel);
    let json = rel.to_ascii_lowercase().ends_with(".json");
    let key = (
        std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone()),
        json,
    );
    if let Some(d) = loaded.get(&key) {
        return Some((d.clone(), order));
    }
    let bytes = match super::files::read_regular(&file, "a data file", MAX_DATA_FILE_BYTES) {
        Ok(b) => b,
        Err(e) => {
            ctx.error(n.pos, &p, format!("cannot read `{rel}`: {e}"));
            return None;
        }
    };
    match DataSet::parse(&bytes, json) {
        Ok(d) => {
            let d = Arc::new(d);
            loaded.insert(key, d.clone());
            Some((d, order))
        }
        Err(e) if e.line.is_some() => {
            ctx.error(n.pos, &p, format!("`{rel}` {e}"));
            None
        }
        Err(e) => {
            ctx.error(n.pos, &p, format!("`{rel}`: {e}"));
            None
        }
    }
}

/// Where relative files and `${env:..}` references are resolved.
#[derive(Clone, Copy)]
struct Site<'a> {
    base: &'a Path,
    env: &'a Env,
}

/// Compiles `text` at `node`, recording each template error there.
fn compile(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    text: &str,
    scope: &Scope<'_>,
    escape: Escape,
    site: Site<'_>,
) -> Option<Template> {
    let (base, env) = (site.base, site.env);
    let mut resolve = |kind: &str, arg: &str| {
        let mut inner = Ctx::default();
        let reference = format!("${{{kind}:{arg}}}");
        match secrets::expand(&mut inner, &reference, node.pos, path, base, env) {
            Some(v) if inner.errors.is_empty() => Ok(v),
            _ => Err(inner.errors.first().map_or_else(
                || "cannot resolve the reference".into(),
                |d| d.message.clone(),
            )),
        }
    };
    match Template::compile(text, scope, escape, &mut resolve) {
        Ok(t) => Some(t),
        Err(errors) => {
            for e in errors {
                ctx.error(node.pos, path, e.0);
            }
            None
        }
    }
}

fn step(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    scope: &Scope<'_>,
    target: Option<&Target>,
    site: Site<'_>,
    new: &mut Vec<String>,
) -> Option<Step> {
    let f = walk::fields(ctx, node, path, STEP_FIELDS)?;
    let name = match f.get("name") {
        Some(n) => {
            let p = f.path_of("name");
            let name = walk::string(ctx, n, &p)?;
            if !walk::is_label_safe(&name) {
                ctx.error(
                    n.pos,
                    &p,
                    "a step name is a metric label value: letters, digits, `-`, `_`, `.`; at most 64",
                );
                return None;
            }
            name
        }
        None => {
            ctx.error(node.pos, path, "missing `name`");
            return None;
        }
    };
    let path = &join(path.rsplit_once('[').map_or(path, |(a, _)| a), &name);
    let method = match f.get("method") {
        Some(n) => {
            let p = f.path_of("method");
            let m = walk::string(ctx, n, &p)?.to_ascii_uppercase();
            match http::Method::from_bytes(m.as_bytes()) {
                Ok(m) => m,
                Err(_) => {
                    ctx.error(n.pos, &p, format!("`{m}` is not an HTTP method"));
                    return None;
                }
            }
        }
        None => http::Method::GET,
    };
    let url = match (f.get("path"), f.get("url")) {
        (Some(n), Some(_)) => {
            ctx.error(n.pos, &f.path_of("path"), "set `path` or `url`, not both");
            None
        }
        (Some(n), None) => {
            let p = f.path_of("path");
            let text = walk::string(ctx, n, &p)?;
            let tpl = compile(ctx, n, &p, &text, scope, Escape::Url, site);
            target.zip(tpl).map(|(t, tpl)| {
                let mut url = Template::literal(&base_for(&t.uri, text.starts_with('/')));
                url.sensitive = t.display_url.contains("${");
                url.append(tpl);
                url
            })
        }
        (None, Some(n)) => {
            let p = f.path_of("url");
            let text = walk::string(ctx, n, &p)?;
            let scheme = text.split_once("://").map(|(s, _)| s).unwrap_or_default();
            if crate::http::Protocol::of_scheme(scheme).is_none() {
                ctx.error(
                    n.pos,
                    &p,
                    "a step's `url` is absolute: http://, https://, ws://, wss://, tcp://, tls:// or dns://",
                );
                None
            } else if crate::http::Protocol::of_scheme(scheme) == Some(crate::http::Protocol::Grpc)
                && target.is_some_and(|t| t.protocol != crate::http::Protocol::Grpc)
            {
                // A step names no gRPC method of its own yet: it would be sent as nothing.
                ctx.error(
                    n.pos,
                    &p,
                    "a step cannot call gRPC from a journey over an HTTP target yet: give the gRPC calls a journey over a grpc:// target",
                );
                None
            } else {
                compile(ctx, n, &p, &text, scope, Escape::Url, site)
            }
        }
        (None, None) => target.map(|t| Template::literal(&t.uri.to_string())),
    };
    let mut headers: Vec<(http::HeaderName, Template)> = Vec::new();
    if let Some(t) = target {
        for (k, v) in &t.headers {
            let mut tpl = Template::literal(&String::from_utf8_lossy(v.as_bytes()));
            tpl.sensitive = v.is_sensitive();
            headers.push((k.clone(), tpl));
        }
    }
    if let Some(n) = f.get("headers") {
        let hp = f.path_of("headers");
        match &n.value {
            Value::Map(entries) => {
                for (key, value) in entries {
                    let p = join(&hp, &key.name);
                    let Ok(hname) = http::HeaderName::from_bytes(key.name.as_bytes()) else {
                        ctx.error(key.pos, &p, "not a valid header name");
                        continue;
                    };
                    let Some(text) = walk::string(ctx, value, &p) else {
                        continue;
                    };
                    if let Some(mut tpl) = compile(ctx, value, &p, &text, scope, Escape::Raw, site)
                    {
                        if tpl.is_static()
                            && http::HeaderValue::from_str(&tpl.static_text()).is_err()
                        {
                            ctx.error(
                                value.pos,
                                &p,
                                "the header value holds characters HTTP does not allow",
                            );
                            continue;
                        }
                        tpl.sensitive |= super::targets::is_sensitive_header(&hname);
                        headers.retain(|(k, _)| *k != hname);
                        headers.push((hname, tpl));
                    }
                }
            }
            _ => ctx.error(
                n.pos,
                &hp,
                format!("expected a mapping, found {}", n.kind()),
            ),
        }
    }
    let body = match (f.get("body"), f.get("json")) {
        (Some(n), Some(_)) => {
            ctx.error(n.pos, &f.path_of("body"), "set `body` or `json`, not both");
            None
        }
        (Some(n), None) => {
            let p = f.path_of("body");
            let text = walk::string(ctx, n, &p)?;
            Some(compile(ctx, n, &p, &text, scope, Escape::Raw, site)?)
        }
        (None, Some(n)) => {
            let mut t = Template::default();
            json(ctx, n, &f.path_of("json"), scope, site, &mut t)?;
            if !headers
                .iter()
                .any(|(k, _)| *k == http::header::CONTENT_TYPE)
            {
                headers.push((
                    http::header::CONTENT_TYPE,
                    Template::literal("application/json"),
                ));
            }
            Some(t)
        }
        (None, None) => None,
    };
    let step_checks = f
        .get("checks")
        .map(|n| checks(ctx, n, &f.path_of("checks")))
        .unwrap_or_default();
    let mut captures = Vec::new();
    if let Some(n) = f.get("capture") {
        let cp = f.path_of("capture");
        match &n.value {
            Value::Map(entries) => {
                for (key, value) in entries {
                    let p = join(&cp, &key.name);
                    if let Some(source) = capture(ctx, value, &p) {
                        // A name set again keeps its slot; a new one takes the next free one
                        // (the journey adds it to `captures` after this step).
                        let slot = match scope.captures.get(&key.name) {
                            Some(slot) => *slot,
                            None => {
                                new.push(key.name.clone());
                                scope.captures.len() + new.len() - 1
                            }
                        };
                        captures.push(Capture {
                            name: key.name.clone(),
                            slot,
                            source,
                        });
                    }
                }
            }
            _ => ctx.error(
                n.pos,
                &cp,
                format!("expected a mapping, found {}", n.kind()),
            ),
        }
    }
    let think = match f.get("think") {
        Some(n) => {
            let p = f.path_of("think");
            let text = walk::string(ctx, n, &p)?;
            match Think::parse(&text) {
                Ok(t) => Some(t),
                Err(e) => {
                    ctx.error(n.pos, &p, e);
                    return None;
                }
            }
        }
        None => None,
    };
    let keep_going = match f.get("on_failure") {
        Some(n) => {
            let p = f.path_of("on_failure");
            match walk::string(ctx, n, &p)?.as_str() {
                "stop" => false,
                "continue" => true,
                other => {
                    ctx.error(
                        n.pos,
                        &p,
                        format!("unknown `{other}`: use stop or continue"),
                    );
                    return None;
                }
            }
        }
        None => false,
    };
    let written = f
        .get("path")
        .or(f.get("url"))
        .and_then(|n| n.as_scalar())
        .unwrap_or("");
    let display_url = match (f.has("url"), target) {
        (true, _) => written.to_string(),
        (false, Some(t)) => display_for(&t.display_url, written),
        (false, None) => String::new(),
    };
    let mut step = Step {
        display_url,
        name,
        method,
        url: url?,
        headers,
        body,
        checks: step_checks,
        captures,
        think,
        keep_going,
        fixed: None,
    };
    if step.url.is_static() {
        let text = step.url.static_text();
        if text.parse::<http::Uri>().is_err() {
            let pos = f.get("path").or(f.get("url")).map_or(node.pos, |n| n.pos);
            ctx.error(pos, path, "the step's URL does not parse");
            return None;
        }
    }
    step.fixed = fixed_request(&step).map(Arc::new);
    Some(step)
}

/// A step's URL as written, for spans: the target's URL as written (references kept) with the
/// path resolved the way [`base_for`] resolves it.
fn display_for(target: &str, path: &str) -> String {
    let after_scheme = target.find("://").map_or(0, |i| i + 3);
    let origin_end = target[after_scheme..]
        .find('/')
        .map_or(target.len(), |i| after_scheme + i);
    if path.is_empty() {
        return target.to_string();
    }
    if path.starts_with('/') {
        return format!("{}{path}", &target[..origin_end]);
    }
    let base = target.split(['?', '#']).next().unwrap_or(target);
    let dir = base
        .rfind('/')
        .filter(|i| *i >= origin_end)
        .map_or(base.len(), |i| i);
    format!("{}/{path}", &base[..dir])
}

/// The URL text a step's `path` is appended to: the origin for an absolute path, else the
/// target URL's directory.
fn base_for(uri: &http::Uri, absolute: bool) -> String {
    let origin = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("http"),
        uri.authority().map_or("", |a| a.as_str())
    );
    if absolute {
        return origin;
    }
    let path = uri.path();
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    format!("{origin}{dir}/")
}

fn capture(ctx: &mut Ctx, node: &Node, path: &str) -> Option<Source> {
    let f = walk::fields(ctx, node, path, &["json", "header", "regex"])?;
    let kinds: Vec<&str> = ["json", "header", "regex"]
        .into_iter()
        .filter(|k| f.has(k))
        .collect();
    if kinds.len() != 1 {
        ctx.error(node.pos, path, "set one of `json`, `header` or `regex`");
        return None;
    }
    let kind = kinds[0];
    let n = f.get(kind)?;
    let p = f.path_of(kind);
    let text = walk::string(ctx, n, &p)?;
    let made = match kind {
        "json" => Source::json(&text),
        "header" => Source::header(&text),
        _ => Source::regex(&text),
    };
    made.map_err(|e| ctx.error(n.pos, &p, e)).ok()
}

/// A YAML value as JSON text; strings are templates.
fn json(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    scope: &Scope<'_>,
    site: Site<'_>,
    out: &mut Template,
) -> Option<()> {
    match &node.value {
        Value::Null => out.push_literal("null"),
        Value::Scalar { text, quoted } => {
            let plain = !quoted
                && (matches!(text.as_str(), "true" | "false" | "null")
                    || serde_json::from_str::<serde_json::Number>(text).is_ok());
            if plain {
                out.push_literal(text);
            } else {
                let t = compile(ctx, node, path, text, scope, Escape::Json, site)?;
                out.append(t.into_json_string());
            }
        }
        Value::Seq(items) => {
            out.push_literal("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_literal(",");
                }
                json(ctx, item, &format!("{path}[{i}]"), scope, site, out)?;
            }
            out.push_literal("]");
        }
        Value::Map(entries) => {
            out.push_literal("{");
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_literal(",");
                }
                out.push_literal(&serde_json::to_string(&k.name).unwrap_or_default());
                out.push_literal(":");
                json(ctx, v, &join(path, &k.name), scope, site, out)?;
            }
            out.push_literal("}");
        }
    }
    Some(())
}
