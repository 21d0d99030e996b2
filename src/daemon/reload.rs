//! Reloading the config: on SIGHUP, on the API's `/api/reload`, and when the file's content
//! changes (polled through the path, so a ConfigMap's `..data` symlink swap is seen). A bad
//! config is counted and rejected; the previous one keeps running.

use super::schedules::reapply;
use super::state::{Shared, Source};
use crate::config::{self, Config};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How often the config file is re-read to notice changes (ConfigMap symlink swaps included:
/// the path is re-resolved every time).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Re-reads the config source; applies it when valid. Returns the error text otherwise, and
/// `Ok(false)` for a built-in config, which has nothing to reload.
pub fn reload(shared: &Arc<Shared>) -> Result<bool, String> {
    let Source::File(path) = &shared.source else {
        return Ok(false);
    };
    let span = tracing::info_span!("reload", trace_id = tracing::field::Empty);
    crate::telemetry::daemon::stamp(&span);
    let _in_span = span.enter();
    let text =
        config::read_config(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let result = load_text(path, &text);
    if let Ok(mut last) = shared.last_config_text.lock() {
        *last = Some(text);
    }
    match result {
        Ok(cfg) => {
            reapply(shared, Arc::new(cfg));
            shared.metrics.reload(true);
            tracing::info!(config = %path.display(), "config reloaded");
            Ok(true)
        }
        Err(e) => {
            shared.metrics.reload(false);
            tracing::error!(config = %path.display(), errors = %e, "config reload rejected; the previous config keeps running");
            Err(e)
        }
    }
}

/// Parses and validates a config file's text; the error is the rendered diagnostics.
pub(super) fn load_text(path: &Path, text: &str) -> Result<Config, String> {
    let base = path.parent().unwrap_or(Path::new("."));
    config::from_str(
        text,
        &path.display().to_string(),
        base,
        &config::Env::process(),
    )
    .map(|l| l.config)
    .map_err(|e| e.to_string())
}

/// Polls the config file; reloads when its content changed.
pub(super) async fn watch(shared: Arc<Shared>) {
    let Source::File(path) = shared.source.clone() else {
        return;
    };
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        let Ok(text) = config::read_config(&path) else {
            continue;
        };
        let changed = shared
            .last_config_text
            .lock()
            .map(|last| last.as_deref() != Some(text.as_str()))
            .unwrap_or(false);
        if changed {
            let _ = reload(&shared);
        }
    }
}
