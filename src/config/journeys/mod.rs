//! The `journeys` section: ordered steps over one target, with captures, `${...}` templates
//! (compiled here, once), a data file and think times. Every unknown variable, capture used
//! before it is set and malformed field is an error at its position. A step is read in
//! `step.rs`; a step's own gRPC call (a mixed HTTP and gRPC journey) in `grpc_step.rs`.

mod grpc_step;
mod step;

use super::secrets;
use super::walk::{self, Ctx, join, reference};
use super::yaml::{Node, Value};
use super::{Env, Target};
use crate::checks::Check;
use crate::journey::{Capture, DataSet, Escape, Order, Scope, Source, Template, Think};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use step::step;

/// The largest data file read: its rows are held in memory for the whole run, at most about
/// four times the file's size, and five while it is parsed (`journey::data`).
pub const MAX_DATA_FILE_BYTES: u64 = 64 << 20;

/// One step of a journey, validated: its templates compiled, its checks and captures read.
/// The engine builds what it sends from it (`load::iteration::Step`).
#[derive(Debug, Clone)]
pub struct StepSpec {
    pub name: String,
    pub method: http::Method,
    /// The absolute URL.
    pub url: Template,
    /// The target's headers first, then the step's (a step's header replaces the target's).
    pub headers: Vec<(http::HeaderName, Template)>,
    pub body: Option<Template>,
    pub checks: Vec<Check>,
    pub captures: Vec<Capture>,
    pub think: Option<Think>,
    /// `on_failure: continue`: a failed step does not end the iteration.
    pub keep_going: bool,
    /// The URL as written (the target's as written, then the step's path, references and
    /// templates kept): what a span's `url.full` is made from.
    pub display_url: String,
    /// A step's own gRPC call (its `grpc:` block, or a `grpc://` URL in a journey over another
    /// target): the URL is the server, the headers its metadata, a body its message(s).
    pub grpc: Option<crate::http::grpc::GrpcSpec>,
}

/// A journey, validated: its steps in order, over one target, with its data file.
#[derive(Debug, Clone)]
pub struct JourneySpec {
    pub name: String,
    pub target: String,
    pub steps: Vec<StepSpec>,
    pub data: Option<(Arc<DataSet>, Order)>,
    /// How many capture slots an iteration needs.
    pub slots: usize,
}

/// The journeys of a config, by name.
pub type Journeys = BTreeMap<String, JourneySpec>;

/// The data files one config has loaded, by canonical path and format: journeys that name the
/// same file share one copy of its rows.
type Loaded = HashMap<(PathBuf, bool), Arc<DataSet>>;

pub fn journeys(
    ctx: &mut Ctx,
    node: &Node,
    base: &Path,
    env: &Env,
    targets: &BTreeMap<String, Target>,
    target_names: &walk::Names,
) -> Journeys {
    let mut out = BTreeMap::new();
    let mut loaded = Loaded::new();
    let site = Site { base, env };
    for (name, _, node) in walk::named(ctx, node, "journeys") {
        let refs = (targets, target_names);
        if let Some(j) = journey(ctx, &name, node, site, refs, &mut loaded) {
            out.insert(name, j);
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
) -> Option<JourneySpec> {
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
    Some(JourneySpec {
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
    // The values references resolve to, for `Config::secrets`.
    let mut resolved = Vec::new();
    let mut resolve = |kind: &str, arg: &str| {
        let mut inner = Ctx::default();
        let reference = format!("${{{kind}:{arg}}}");
        let expanded = secrets::expand(&mut inner, &reference, node.pos, path, base, env);
        resolved.append(&mut inner.secrets);
        match expanded {
            Some(v) if inner.errors.is_empty() => Ok(v),
            _ => Err(inner.errors.first().map_or_else(
                || "cannot resolve the reference".into(),
                |d| d.message.clone(),
            )),
        }
    };
    let compiled = Template::compile(text, scope, escape, &mut resolve);
    ctx.secrets.append(&mut resolved);
    match compiled {
        Ok(t) => Some(t),
        Err(errors) => {
            for e in errors {
                ctx.error(node.pos, path, e.0);
            }
            None
        }
    }
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

/// A step's header (or gRPC metadata) templates, in order.
type Headers = Vec<(http::HeaderName, Template)>;

/// A mapping of header (or metadata) names to templates, each added to `out` in place of one
/// of the same name.
fn header_map(
    ctx: &mut Ctx,
    n: &Node,
    hp: &str,
    scope: &Scope<'_>,
    site: Site<'_>,
    out: &mut Headers,
) {
    let Value::Map(entries) = &n.value else {
        ctx.error(n.pos, hp, format!("expected a mapping, found {}", n.kind()));
        return;
    };
    for (key, value) in entries {
        let p = join(hp, &key.name);
        let Ok(hname) = http::HeaderName::from_bytes(key.name.as_bytes()) else {
            ctx.error(key.pos, &p, "not a valid header name");
            continue;
        };
        let Some(text) = walk::string(ctx, value, &p) else {
            continue;
        };
        if let Some(mut tpl) = compile(ctx, value, &p, &text, scope, Escape::Raw, site) {
            if tpl.is_static() && http::HeaderValue::from_str(&tpl.static_text()).is_err() {
                ctx.error(
                    value.pos,
                    &p,
                    "the header value holds characters HTTP does not allow",
                );
                continue;
            }
            tpl.sensitive |= super::targets::is_sensitive_header(&hname);
            out.retain(|(k, _)| *k != hname);
            out.push((hname, tpl));
        }
    }
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
