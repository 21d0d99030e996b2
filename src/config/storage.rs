//! The `storage` section: where SLO state is kept and how often it is flushed.

use super::Storage;
use super::walk::{self, Ctx};
use super::yaml::Node;
use std::path::Path;
use std::time::Duration;

pub fn storage(ctx: &mut Ctx, node: Option<&Node>, base: &Path) -> Option<Storage> {
    let mut storage = Storage {
        path: base.join("sloburn-data"),
        flush_interval: Duration::from_secs(5),
    };
    let Some(node) = node else {
        return Some(storage);
    };
    let f = walk::fields(ctx, node, "storage", &["path", "flush_interval"])?;
    if let Some(n) = f.get("path")
        && let Some(p) = walk::string(ctx, n, &f.path_of("path"))
    {
        storage.path = base.join(p);
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
    Some(storage)
}
