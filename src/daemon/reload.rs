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
///
/// The work runs on the blocking pool, never on an async worker: a config of 10,000 keys per
/// mapping takes a while to parse and validate, and applying it opens SLO windows in the
/// store; meanwhile `/metrics`, the probes and the runs' requests keep being served.
pub async fn reload(shared: &Arc<Shared>) -> Result<bool, String> {
    off_the_workers(shared, Trigger::Asked).await
}

/// Why a reload happens: asked for (SIGHUP, the API), or the watch that reloads only a
/// changed file and stays quiet when it cannot read it.
#[derive(Clone, Copy, PartialEq)]
enum Trigger {
    Asked,
    Watch,
}

async fn off_the_workers(shared: &Arc<Shared>, trigger: Trigger) -> Result<bool, String> {
    let shared = shared.clone();
    let task = shared
        .tracker
        .clone()
        .spawn_blocking(move || reload_blocking(&shared, trigger));
    task.await
        .unwrap_or_else(|e| Err(format!("the reload stopped: {e}")))
}

/// The reload itself, on a blocking thread. The lock on the last text read is held throughout,
/// so reloads (a SIGHUP, the API and the watch at once) run one at a time, in order.
fn reload_blocking(shared: &Arc<Shared>, trigger: Trigger) -> Result<bool, String> {
    let Source::File(path) = &shared.source else {
        return Ok(false);
    };
    let mut last = shared
        .last_config_text
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let text = match config::read_config(path) {
        Ok(text) => text,
        Err(_) if trigger == Trigger::Watch => return Ok(false),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    if trigger == Trigger::Watch && last.as_deref() == Some(text.as_str()) {
        return Ok(false);
    }
    let span = tracing::info_span!("reload", trace_id = tracing::field::Empty);
    crate::telemetry::daemon::stamp(&span);
    let _in_span = span.enter();
    let result = load_text(path, &text);
    *last = Some(text);
    match result {
        Ok(cfg) => {
            shared
                .metrics
                .set_location(cfg.server.locations.me.as_deref());
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

/// Polls the config file; reloads when its content changed (the read and the comparison run
/// with the reload, on the blocking pool).
pub(super) async fn watch(shared: Arc<Shared>) {
    if !matches!(shared.source, Source::File(_)) {
        return;
    }
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shared.shutdown.cancelled() => return,
        }
        let _ = off_the_workers(&shared, Trigger::Watch).await;
    }
}
