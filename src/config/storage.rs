//! The `storage` section: where SLO state is kept, how often it is flushed, and where it is
//! restored from when the store has none (`restore`).

use super::walk::{self, Ctx};
use super::yaml::Node;
use super::{Env, Restore, Secret, Storage};
use std::path::Path;
use std::time::Duration;

/// `restore.max_age` when not given: the longest default SLO period.
const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30 * 86_400);
/// `restore.timeout` when not given.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest `max_age`: a year of minutes (Prometheus keeps 15 days by default).
const MAX_MAX_AGE: Duration = Duration::from_secs(366 * 86_400);
/// The longest `timeout`: start-up must not look stuck for longer.
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

pub fn storage(ctx: &mut Ctx, node: Option<&Node>, base: &Path, env: &Env) -> Option<Storage> {
    let mut storage = Storage {
        path: base.join("sloburn-data"),
        flush_interval: Duration::from_secs(5),
        restore: None,
    };
    let Some(node) = node else {
        return Some(storage);
    };
    let f = walk::fields(ctx, node, "storage", &["path", "flush_interval", "restore"])?;
    if let Some(n) = f.get("path") {
        storage.path = data_path(ctx, n, &f.path_of("path"), base, env).unwrap_or(storage.path);
    }
    if let Some(n) = f.get("flush_interval") {
        let path = f.path_of("flush_interval");
        if let Some(d) = walk::duration(ctx, n, &path) {
            if d.is_zero() || d > Duration::from_secs(10) {
                ctx.error(
                    n.pos,
                    &path,
                    "must be between 1ms and 10s (a crash loses at most this much SLO data)",
                );
            } else {
                storage.flush_interval = d;
            }
        }
    }
    if let Some(n) = f.get("restore") {
        storage.restore = restore(ctx, n, &f.path_of("restore"), base, env);
    }
    Some(storage)
}

/// `storage.path`, its `${env:NAME}` and `${file:PATH}` references expanded as everywhere
/// else (an unset variable is an error at its position): shards given different values must
/// not share one database under a directory named `${env:X}`.
fn data_path(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    base: &Path,
    env: &Env,
) -> Option<std::path::PathBuf> {
    let written = walk::string(ctx, node, path)?;
    let expanded = super::secrets::expand(ctx, &written, node.pos, path, base, env)?;
    if expanded.trim().is_empty() {
        ctx.error(node.pos, path, "the path is empty");
        return None;
    }
    Some(base.join(expanded))
}

/// `storage.restore: { prometheus: URL, max_age: 30d, timeout: 30s }`.
fn restore(ctx: &mut Ctx, node: &Node, path: &str, base: &Path, env: &Env) -> Option<Restore> {
    let f = walk::fields(ctx, node, path, &["prometheus", "max_age", "timeout"])?;
    let url = match f.get("prometheus") {
        Some(n) => prometheus_url(ctx, n, &f.path_of("prometheus"), base, env),
        None => {
            ctx.error(node.pos, path, "missing `prometheus` (its base URL)");
            None
        }
    };
    let max_age = bounded(
        ctx,
        &f,
        "max_age",
        DEFAULT_MAX_AGE,
        Duration::from_secs(60),
        MAX_MAX_AGE,
    );
    let timeout = bounded(
        ctx,
        &f,
        "timeout",
        DEFAULT_TIMEOUT,
        Duration::from_secs(1),
        MAX_TIMEOUT,
    );
    let (prometheus, display_url) = url?;
    Some(Restore {
        prometheus,
        display_url,
        max_age: max_age?,
        timeout: timeout?,
    })
}

/// A duration field between `min` and `max`, `default` when absent; `None` after an error.
fn bounded(
    ctx: &mut Ctx,
    f: &walk::Fields,
    key: &str,
    default: Duration,
    min: Duration,
    max: Duration,
) -> Option<Duration> {
    let Some(n) = f.get(key) else {
        return Some(default);
    };
    let path = f.path_of(key);
    let d = walk::duration(ctx, n, &path)?;
    if d < min || d > max {
        let (lo, hi) = (
            crate::units::format_duration(min),
            crate::units::format_duration(max),
        );
        ctx.error(n.pos, &path, format!("must be between {lo} and {hi}"));
        return None;
    }
    Some(d)
}

/// Prometheus' base URL (`http://prometheus:9090`, or with a path prefix), read as a target's
/// URL is (http or https, a host, references expanded, messages showing it as written), and
/// without credentials; the API path goes after its path, its query (a token a proxy wants)
/// before the API's parameters.
fn prometheus_url(
    ctx: &mut Ctx,
    node: &Node,
    path: &str,
    base: &Path,
    env: &Env,
) -> Option<(Secret, String)> {
    let (uri, written) = super::targets::url(ctx, node, path, base, env)?;
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        ctx.error(
            node.pos,
            path,
            "credentials in the URL are not sent; put Prometheus behind a URL without them",
        );
        return None;
    }
    Some((Secret::new(uri.to_string()), written))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(text: &str) -> (Option<Storage>, Vec<String>) {
        let env = Env::from_map(BTreeMap::from([("PROM".into(), "hidden:9090".into())]), 5);
        let root = super::super::yaml::parse(text).unwrap();
        let node = match &root.value {
            super::super::yaml::Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.name == "storage")
                .map(|(_, v)| v.clone()),
            _ => None,
        };
        let mut ctx = Ctx::default();
        let s = storage(&mut ctx, node.as_ref(), Path::new("."), &env);
        let errors = ctx
            .errors
            .iter()
            .map(|d| format!("{}:{}: {}: {}", d.pos.line, d.pos.col, d.path, d.message))
            .collect();
        (s, errors)
    }

    #[test]
    fn restore_defaults_and_keeps_the_url_as_written() {
        let (s, errors) =
            read("storage:\n  restore:\n    prometheus: \"http://${env:PROM}/prom\"\n");
        assert!(errors.is_empty(), "{errors:?}");
        let r = s.unwrap().restore.unwrap();
        assert_eq!(r.prometheus.expose(), "http://hidden:9090/prom");
        assert_eq!(r.display_url, "http://${env:PROM}/prom");
        assert_eq!(r.max_age, Duration::from_secs(30 * 86_400));
        assert_eq!(r.timeout, Duration::from_secs(30));
        assert!(!format!("{r:?}").contains("hidden"), "{r:?}");
        let (s, errors) = read("storage:\n  path: x\n");
        assert!(errors.is_empty() && s.unwrap().restore.is_none());
    }

    /// `path: "${env:X}"` made `serve` create a directory named `${env:X}`.
    #[test]
    fn the_path_expands_its_references_and_refuses_an_unset_variable() {
        let (s, errors) = read("storage:\n  path: \"/var/lib/${env:PROM}/db\"\n");
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(s.unwrap().path, Path::new("/var/lib/hidden:9090/db"));
        let (_, errors) = read("storage:\n  path: \"${env:SHARD_DIR}\"\n");
        assert_eq!(
            errors,
            ["2:9: storage.path: environment variable `SHARD_DIR` is not set"]
        );
        let (_, errors) = read("storage:\n  path: \"${env:PROM\"\n");
        assert_eq!(errors, ["2:9: storage.path: `${` without a closing `}`"]);
    }

    #[test]
    fn restore_errors_point_at_the_field() {
        let text = "storage:\n  restore:\n    prometheus: \"ftp://p:21\"\n    max_age: 0s\n    timeout: forever\n    step: 1m\n";
        let (_, errors) = read(text);
        let want = [
            "3:17: storage.restore.prometheus: unsupported scheme `ftp`",
            "4:14: storage.restore.max_age: must be between 1m and 366d",
            "5:14: storage.restore.timeout:",
            "6:5: storage.restore.step:",
        ];
        for w in want {
            assert!(errors.iter().any(|e| e.starts_with(w)), "{w}: {errors:?}");
        }
        let (_, errors) = read("storage:\n  restore:\n    max_age: 1d\n");
        assert!(errors[0].contains("missing `prometheus`"), "{errors:?}");
        for bad in ["prometheus:9090", "http://u:${env:PROM}@p/", "http:///x"] {
            let (_, errors) = read(&format!(
                "storage:\n  restore:\n    prometheus: \"{bad}\"\n"
            ));
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(!errors[0].contains("hidden"), "{errors:?}");
        }
    }
}
