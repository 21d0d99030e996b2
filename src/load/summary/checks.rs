//! k6's checks as its summary and export name them: counted under their name, and the MD5
//! ids of groups and checks.

use md5::{Digest, Md5};
use serde_json::{Value, json};

/// Checks counted under their name, as k6 counts one name in one group: a name used twice
/// (two steps, or two checks of a step) is one check with both counts, in first-seen order.
pub(super) fn by_name(checks: &[(String, u64, u64)]) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for (name, p, f) in checks {
        match out.iter_mut().find(|(n, _, _)| n == name) {
            Some((_, op, of)) => {
                *op += p;
                *of += f;
            }
            None => out.push((name.clone(), *p, *f)),
        }
    }
    out
}

/// A check as k6's summary-export writes it, at `path` (`::name`, `::group::name`).
pub(super) fn check_json(path: &str, name: &str, passes: u64, fails: u64) -> Value {
    json!({ "name": name, "path": path, "id": k6_id(path), "passes": passes, "fails": fails })
}

/// k6's ids: the MD5 of a group's or check's path.
pub(super) fn k6_id(path: &str) -> String {
    Md5::digest(path.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
