//! A request that waits for capacity of its handler (the daemon's `/metrics` waits for an
//! encoding permit): while it waits its connection holds a slot but nothing of its answer, so
//! it may give way to a newcomer (after idle connections and stalled readers). A crowd of such
//! requests then never keeps a probe out.
//!
//! The connection is known from a task-local its task sets around hyper's connection (hyper
//! polls the service's futures on that task): no extension per request, no allocation.

use super::table::Active;
use std::future::Future;
use std::sync::Arc;

tokio::task_local! {
    static CONNECTION: Arc<Active>;
}

/// Awaits `f` (a wait for capacity) with the request's connection marked as waiting, so that
/// it may be closed for a newcomer meanwhile (the handler's future is then dropped). Outside a
/// server's connection it is `f`.
pub async fn waiting<F: Future>(f: F) -> F::Output {
    let Ok(active) = CONNECTION.try_with(Arc::clone) else {
        return f.await;
    };
    active.queue(true);
    let _mark = Mark(active);
    f.await
}

/// The mark of a waiting request, taken off when the wait ends or is dropped.
struct Mark(Arc<Active>);

impl Drop for Mark {
    fn drop(&mut self) {
        self.0.queue(false);
    }
}

/// `f` (a connection's serving) with `active` known to [`waiting`].
pub(super) async fn scope<F: Future>(active: Arc<Active>, f: F) -> F::Output {
    CONNECTION.scope(active, f).await
}
