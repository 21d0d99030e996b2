//! Stub DNS resolver with glibc semantics: `/etc/hosts` first, then the `resolv.conf` search
//! list and `ndots` rule, then A and AAAA queries to the nameservers ([`exchange`]).
//!
//! sloburn measures DNS as its own phase, so the resolver is ours rather than the libc
//! `getaddrinfo` on a blocking thread: it is async, shows which names it tried (the Kubernetes
//! `ndots:5` cost is the point of measuring it), and never queries anything but the configured
//! nameservers.

mod exchange;
pub mod select;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use exchange::{Answer, Queries};

const RESOLV_CONF: &str = "/etc/resolv.conf";
const HOSTS: &str = "/etc/hosts";
/// glibc's MAXNS: nameservers past the third are ignored.
const MAX_NAMESERVERS: usize = 3;

/// The parts of `resolv.conf` a stub resolver acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverConfig {
    pub nameservers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: u8,
    /// Per query, per nameserver.
    pub timeout: Duration,
    /// Rounds over the nameserver list.
    pub attempts: u32,
}

impl Default for ResolverConfig {
    /// glibc's defaults when `resolv.conf` says nothing.
    fn default() -> Self {
        ResolverConfig {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }
    }
}

impl ResolverConfig {
    /// Parses `resolv.conf` as glibc does: unknown lines are ignored, the last `search` or
    /// `domain` line wins, option values are clamped to glibc's limits, and a file without
    /// nameservers means the local one (127.0.0.1:53).
    pub fn parse_resolv_conf(text: &str) -> ResolverConfig {
        let mut cfg = ResolverConfig::default();
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // A zone index (`fe80::1%eth0`) cannot be expressed in an IpAddr; skip it.
                    if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok())
                        && cfg.nameservers.len() < MAX_NAMESERVERS
                    {
                        cfg.nameservers.push(SocketAddr::new(ip, 53));
                    }
                }
                Some("search") => {
                    cfg.search = words.map(|w| w.trim_end_matches('.').to_string()).collect();
                }
                Some("domain") => {
                    cfg.search = words
                        .next()
                        .map(|w| vec![w.trim_end_matches('.').to_string()])
                        .unwrap_or_default();
                }
                Some("options") => {
                    for opt in words {
                        let Some((key, value)) = opt.split_once(':') else {
                            continue;
                        };
                        let Ok(n) = value.parse::<u32>() else {
                            continue;
                        };
                        match key {
                            "ndots" => cfg.ndots = n.min(15) as u8,
                            "timeout" => {
                                cfg.timeout = Duration::from_secs(u64::from(n.clamp(1, 30)))
                            }
                            "attempts" => cfg.attempts = n.clamp(1, 5),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if cfg.nameservers.is_empty() {
            cfg.nameservers
                .push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53));
        }
        cfg
    }

    /// The names a lookup of `host` tries, in order (glibc `res_search`).
    pub fn candidates(&self, host: &str) -> Vec<String> {
        if let Some(absolute) = host.strip_suffix('.') {
            return vec![absolute.to_string()];
        }
        let dots = host.bytes().filter(|&b| b == b'.').count();
        let searched = self.search.iter().map(|d| format!("{host}.{d}"));
        if dots >= usize::from(self.ndots) {
            std::iter::once(host.to_string()).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(host.to_string())).collect()
        }
    }
}

/// A parsed `/etc/hosts`: lowercase name → addresses in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostsFile {
    names: HashMap<String, Vec<IpAddr>>,
}

impl HostsFile {
    pub fn parse(text: &str) -> HostsFile {
        let mut names: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or_default();
            let mut words = line.split_whitespace();
            let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) else {
                continue;
            };
            for name in words {
                let entry = names.entry(name.to_ascii_lowercase()).or_default();
                if !entry.contains(&ip) {
                    entry.push(ip);
                }
            }
        }
        HostsFile { names }
    }

    pub fn get(&self, host: &str) -> Option<&[IpAddr]> {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        self.names.get(&key).map(Vec::as_slice)
    }
}

/// Where an answer came from, which decides how long it may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Literal,
    Hosts,
    /// DNS, with the smallest TTL along the answer chain.
    Dns {
        ttl: Duration,
    },
}

/// A successful lookup and the names tried on the way (diagnostics and tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub addrs: Vec<IpAddr>,
    pub tried: Vec<String>,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsError {
    #[error("`{host}` not found (tried {})", tried.join(", "))]
    NotFound { host: String, tried: Vec<String> },
    #[error("no nameserver answered for `{host}` (tried {})", tried.join(", "))]
    Timeout { host: String, tried: Vec<String> },
    #[error("`{0}` is not a valid DNS name")]
    InvalidName(String),
    #[error("no nameservers configured")]
    NoNameservers,
    /// EMFILE or ENFILE when opening a socket to a nameserver: sloburn's own limit, so the
    /// request fails as `local_fd_exhausted`, not as `dns`.
    #[error("out of file descriptors (EMFILE/ENFILE) while resolving")]
    LocalFdExhausted,
}

/// A glibc-like stub resolver. Holds no cache: the HTTP client caches with its own TTL policy.
#[derive(Debug, Clone)]
pub struct Resolver {
    config: ResolverConfig,
    hosts: HostsFile,
}

impl Resolver {
    pub fn new(config: ResolverConfig, hosts: HostsFile) -> Resolver {
        Resolver { config, hosts }
    }

    /// The machine's resolver: `/etc/resolv.conf` and `/etc/hosts`. A missing file reads as
    /// empty, as glibc treats it.
    pub fn system() -> Resolver {
        let conf = std::fs::read_to_string(RESOLV_CONF).unwrap_or_default();
        let hosts = std::fs::read_to_string(HOSTS).unwrap_or_default();
        Resolver::new(
            ResolverConfig::parse_resolv_conf(&conf),
            HostsFile::parse(&hosts),
        )
    }

    pub fn config(&self) -> &ResolverConfig {
        &self.config
    }

    pub async fn lookup(&self, host: &str) -> Result<Lookup, DnsError> {
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(Lookup {
                addrs: vec![ip],
                tried: Vec::new(),
                source: Source::Literal,
            });
        }
        if let Some(addrs) = self.hosts.get(host) {
            return Ok(Lookup {
                addrs: addrs.to_vec(),
                tried: vec![host.trim_end_matches('.').to_string()],
                source: Source::Hosts,
            });
        }
        if host.is_empty() || host == "." {
            return Err(DnsError::InvalidName(host.to_string()));
        }
        if self.config.nameservers.is_empty() {
            return Err(DnsError::NoNameservers);
        }
        let mut tried = Vec::new();
        let mut timed_out = false;
        for name in self.config.candidates(host) {
            // A search domain can make an otherwise fine name too long; glibc skips it too.
            let Ok(queries) = Queries::new(&name) else {
                continue;
            };
            tried.push(name);
            match self.query_all(&queries).await? {
                Some(Answer::Found { addrs, ttl }) => {
                    return Ok(Lookup {
                        addrs,
                        tried,
                        source: Source::Dns { ttl },
                    });
                }
                Some(Answer::NoSuchName) => {}
                None => timed_out = true,
            }
        }
        let host = host.to_string();
        if tried.is_empty() {
            Err(DnsError::InvalidName(host))
        } else if timed_out {
            Err(DnsError::Timeout { host, tried })
        } else {
            Err(DnsError::NotFound { host, tried })
        }
    }

    /// `attempts` rounds over the nameservers, stopping at the first definite answer. `None`
    /// when every nameserver timed out or failed (SERVFAIL, REFUSED, garbage); an error when
    /// sloburn had no descriptor left for a socket (no nameserver would do better).
    async fn query_all(&self, queries: &Queries) -> Result<Option<Answer>, DnsError> {
        for _ in 0..self.config.attempts.max(1) {
            for ns in &self.config.nameservers {
                let reply =
                    tokio::time::timeout(self.config.timeout, exchange::query_one(*ns, queries))
                        .await;
                match reply {
                    Ok(Ok(Some(answer))) => return Ok(Some(answer)),
                    Ok(Err(e)) => return Err(e),
                    Ok(Ok(None)) | Err(_) => {}
                }
            }
        }
        Ok(None)
    }
}

/// A warning for a target host that pays the search-list cost on every fresh lookup
/// (Kubernetes pods run with `ndots:5`).
pub fn ndots_warning(host: &str, ndots: u8) -> Option<String> {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    // `localhost` comes from /etc/hosts before any search domain is tried.
    if host.is_empty()
        || host.ends_with('.')
        || bare.parse::<IpAddr>().is_ok()
        || host.eq_ignore_ascii_case("localhost")
    {
        return None;
    }
    let dots = host.bytes().filter(|&b| b == b'.').count();
    if dots >= usize::from(ndots) {
        return None;
    }
    let noun = if dots == 1 { "dot" } else { "dots" };
    Some(format!(
        "host `{host}` has {dots} {noun}, fewer than ndots:{ndots}, so each lookup first tries \
         every search domain; write `{host}.` to skip the search list"
    ))
}

/// `ndots` from the machine's `/etc/resolv.conf` (glibc's default 1 without one).
pub fn system_ndots() -> u8 {
    std::fs::read_to_string(RESOLV_CONF)
        .map(|t| ResolverConfig::parse_resolv_conf(&t).ndots)
        .unwrap_or(1)
}

/// Time-bounded cache of lookups, keyed by host. Time is passed in so expiry is testable.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    entries: HashMap<String, (Vec<IpAddr>, Instant)>,
}

impl Cache {
    pub(crate) fn get(&self, host: &str, now: Instant) -> Option<Vec<IpAddr>> {
        match self.entries.get(host) {
            Some((addrs, expires)) if *expires > now => Some(addrs.clone()),
            _ => None,
        }
    }

    /// Caches for `min(record TTL, policy ttl)`; a zero result caches nothing.
    pub(crate) fn put(&mut self, host: &str, lookup: &Lookup, policy: Duration, now: Instant) {
        let ttl = match lookup.source {
            Source::Dns { ttl } => ttl.min(policy),
            Source::Literal | Source::Hosts => policy,
        };
        if ttl.is_zero() {
            return;
        }
        // Expired entries are dropped on insert so the map stays as small as the live host set.
        self.entries.retain(|_, (_, expires)| *expires > now);
        self.entries
            .insert(host.to_string(), (lookup.addrs.clone(), now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_candidates(search: &[&str], ndots: u8, host: &str, expected: &[&str]) {
        let cfg = ResolverConfig {
            search: search.iter().map(|s| s.to_string()).collect(),
            ndots,
            ..ResolverConfig::default()
        };
        assert_eq!(cfg.candidates(host), expected, "host {host} ndots {ndots}");
    }

    #[test]
    fn candidates_follow_glibc_order() {
        let k8s = [
            "shop.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local",
        ];
        check_candidates(
            &k8s,
            5,
            "checkout",
            &[
                "checkout.shop.svc.cluster.local",
                "checkout.svc.cluster.local",
                "checkout.cluster.local",
                "checkout",
            ],
        );
        check_candidates(
            &k8s,
            2,
            "a.b.c",
            &[
                "a.b.c",
                "a.b.c.shop.svc.cluster.local",
                "a.b.c.svc.cluster.local",
                "a.b.c.cluster.local",
            ],
        );
        check_candidates(&k8s, 5, "checkout.shop.", &["checkout.shop"]);
        check_candidates(&[], 1, "localhost", &["localhost"]);
    }

    #[test]
    fn resolv_conf_parses_like_glibc() {
        let cfg = ResolverConfig::parse_resolv_conf(
            "# comment\n\
             nameserver 10.96.0.10\n\
             nameserver fe80::1%eth0\n\
             nameserver 2001:db8::1\n\
             nameserver 10.0.0.2\n\
             nameserver 10.0.0.3\n\
             domain ignored.example\n\
             search shop.svc.cluster.local svc.cluster.local. cluster.local\n\
             options ndots:5 timeout:2 attempts:9 rotate edns0\n",
        );
        assert_eq!(
            cfg.nameservers,
            vec![
                "10.96.0.10:53".parse().unwrap(),
                "[2001:db8::1]:53".parse().unwrap(),
                "10.0.0.2:53".parse().unwrap(),
            ]
        );
        assert_eq!(
            cfg.search,
            [
                "shop.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local"
            ]
        );
        assert_eq!(cfg.ndots, 5);
        assert_eq!(cfg.timeout, Duration::from_secs(2));
        assert_eq!(cfg.attempts, 5);

        let empty = ResolverConfig::parse_resolv_conf("");
        assert_eq!(empty.nameservers, vec!["127.0.0.1:53".parse().unwrap()]);
        assert_eq!(
            (empty.ndots, empty.timeout, empty.attempts),
            (1, Duration::from_secs(5), 2)
        );
        let domain = ResolverConfig::parse_resolv_conf("search a b\ndomain corp.example\n");
        assert_eq!(domain.search, ["corp.example"]);
    }

    #[test]
    fn hosts_file_lookup_is_case_insensitive_and_ordered() {
        let hosts = HostsFile::parse(
            "127.0.0.1 localhost loopback # trailing comment\n\
             ::1 localhost ip6-localhost\n\
             # 10.0.0.1 commented\n\
             bogus line\n\
             10.1.2.3 Api.Internal\n",
        );
        assert_eq!(
            hosts.get("LOCALHOST").unwrap(),
            [
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert_eq!(
            hosts.get("api.internal.").unwrap(),
            ["10.1.2.3".parse::<IpAddr>().unwrap()]
        );
        assert!(hosts.get("commented").is_none());
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic_on_garbage(
            text in "\\PC{0,200}",
        ) {
            let _ = ResolverConfig::parse_resolv_conf(&text);
            let _ = HostsFile::parse(&text);
            let _ = ndots_warning(&text, 5);
        }

    }

    #[test]
    fn ndots_warning_suggests_the_fqdn() {
        assert_eq!(
            ndots_warning("checkout.shop.svc.cluster.local", 5).unwrap(),
            "host `checkout.shop.svc.cluster.local` has 4 dots, fewer than ndots:5, so each \
             lookup first tries every search domain; write `checkout.shop.svc.cluster.local.` \
             to skip the search list"
        );
        assert!(ndots_warning("checkout.shop.svc.cluster.local.", 5).is_none());
        assert!(ndots_warning("a.b.c.d.e.f", 5).is_none());
        assert!(ndots_warning("10.0.0.1", 5).is_none());
        assert!(ndots_warning("[::1]", 5).is_none());
        assert!(ndots_warning("localhost", 5).is_none());
        assert!(ndots_warning("api.example", 5).unwrap().contains("1 dot,"));
    }

    #[test]
    fn cache_honours_the_smaller_ttl_and_zero_disables_it() {
        let now = crate::clock::tokio_instant();
        let lookup = |ttl| Lookup {
            addrs: vec!["192.0.2.1".parse().unwrap()],
            tried: vec![],
            source: Source::Dns {
                ttl: Duration::from_secs(ttl),
            },
        };
        let mut cache = Cache::default();
        cache.put("a", &lookup(30), Duration::from_secs(300), now);
        assert!(cache.get("a", now + Duration::from_secs(29)).is_some());
        assert!(cache.get("a", now + Duration::from_secs(30)).is_none());
        cache.put("b", &lookup(300), Duration::from_secs(10), now);
        assert!(cache.get("b", now + Duration::from_secs(11)).is_none());
        cache.put("c", &lookup(300), Duration::ZERO, now);
        assert!(cache.get("c", now).is_none());
    }
}
