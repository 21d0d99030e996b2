//! Peers and locations found by DNS (issue 49): a `server.peers` or `server.locations` entry
//! `dns+http://name:port` stands for one `http://ADDRESS:port` per A/AAAA record of `name`,
//! looked up again at every answer, so a StatefulSet that scales is followed without a reload.
//! The lookup goes to `server.resolver` when set (one try, [`LOOKUP_TIMEOUT`]), else to the
//! machine's resolver (`resolv.conf`, its search list and `ndots`). A failed lookup makes the
//! entry a peer or location that did not answer, named with the DNS error: never zero events.

use super::state::Shared;
use crate::http::dns::{HostsFile, Resolver, ResolverConfig};
use std::sync::Arc;
use std::time::Duration;

/// How long one lookup at `server.resolver` may take.
pub(super) const LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);
/// At most this many daemons behind one `dns+http://` entry.
pub(super) const MAX_RECORDS: usize = 256;

/// The resolver `dns+http://` entries are looked up with.
pub(super) fn resolver(shared: &Shared) -> Arc<Resolver> {
    match shared.config().server.locations.resolver {
        Some(ns) => Arc::new(Resolver::new(
            ResolverConfig {
                nameservers: vec![ns],
                search: Vec::new(),
                ndots: 1,
                timeout: LOOKUP_TIMEOUT,
                attempts: 1,
            },
            HostsFile::parse(""),
        )),
        None => shared.resolver.clone(),
    }
}

/// The base URLs behind one entry: itself, or one per address its `dns+http://` name has now.
pub(super) async fn expand(resolver: &Resolver, url: &str) -> Result<Vec<String>, String> {
    let Some(rest) = url.strip_prefix("dns+") else {
        return Ok(vec![url.to_string()]);
    };
    let uri: http::Uri = rest.parse().map_err(|_| "not a valid URL".to_string())?;
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path().trim_end_matches('/');
    let found = resolver
        .lookup(host)
        .await
        .map_err(|e| format!("DNS lookup failed: {e}"))?;
    let mut addrs = found.addrs;
    addrs.sort();
    addrs.dedup();
    addrs.truncate(MAX_RECORDS);
    Ok(addrs
        .into_iter()
        .map(|ip| format!("http://{}{path}", std::net::SocketAddr::new(ip, port)))
        .collect())
}
