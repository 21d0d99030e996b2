//! Stub DNS resolver with glibc semantics: `/etc/hosts` first, then the `resolv.conf` search
//! list and `ndots` rule, over a minimal UDP client (A and AAAA).
//!
//! sloburn measures DNS as its own phase, so the resolver is ours rather than the libc
//! `getaddrinfo` on a blocking thread: it is async, shows which names it tried (the Kubernetes
//! `ndots:5` cost is the point of measuring it), and never queries anything but the configured
//! nameservers.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;

const RESOLV_CONF: &str = "/etc/resolv.conf";
const HOSTS: &str = "/etc/hosts";
/// glibc's MAXNS: nameservers past the third are ignored.
const MAX_NAMESERVERS: usize = 3;
const MAX_CNAME_HOPS: usize = 16;

const TYPE_A: u16 = 1;
const TYPE_CNAME: u16 = 5;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;
const RCODE_NXDOMAIN: u8 = 3;

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
            match self.query_all(&queries).await {
                Answer::Found { addrs, ttl } => {
                    return Ok(Lookup {
                        addrs,
                        tried,
                        source: Source::Dns { ttl },
                    });
                }
                Answer::NoSuchName => {}
                Answer::Unanswered => timed_out = true,
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

    /// `attempts` rounds over the nameservers, stopping at the first definite answer.
    async fn query_all(&self, queries: &Queries) -> Answer {
        for _ in 0..self.config.attempts.max(1) {
            for ns in &self.config.nameservers {
                let reply =
                    tokio::time::timeout(self.config.timeout, query_one(*ns, queries)).await;
                if let Ok(Some(answer)) = reply {
                    return answer;
                }
            }
        }
        Answer::Unanswered
    }
}

enum Answer {
    Found {
        addrs: Vec<IpAddr>,
        ttl: Duration,
    },
    /// NXDOMAIN, or NOERROR without addresses: glibc moves to the next candidate.
    NoSuchName,
    /// Every nameserver timed out or failed (SERVFAIL, REFUSED, garbage).
    Unanswered,
}

/// The A and AAAA queries for one name, sent together as glibc does.
struct Queries {
    name: String,
    a: Vec<u8>,
    aaaa: Vec<u8>,
    a_id: u16,
    aaaa_id: u16,
}

impl Queries {
    fn new(name: &str) -> Result<Queries, DnsError> {
        let a_id: u16 = rand::random();
        let aaaa_id = a_id.wrapping_add(1);
        Ok(Queries {
            name: name.to_string(),
            a: encode_query(a_id, name, TYPE_A)?,
            aaaa: encode_query(aaaa_id, name, TYPE_AAAA)?,
            a_id,
            aaaa_id,
        })
    }
}

/// One nameserver, both queries on one socket. `None` means ask the next nameserver.
async fn query_one(ns: SocketAddr, q: &Queries) -> Option<Answer> {
    let bind: SocketAddr = if ns.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(bind).await.ok()?;
    // Connecting makes the kernel drop datagrams from anyone but the nameserver.
    sock.connect(ns).await.ok()?;
    sock.send(&q.a).await.ok()?;
    sock.send(&q.aaaa).await.ok()?;
    let mut buf = [0u8; 1232];
    let mut a: Option<Reply> = None;
    let mut aaaa: Option<Reply> = None;
    while a.is_none() || aaaa.is_none() {
        let n = sock.recv(&mut buf).await.ok()?;
        let Ok(reply) = parse_reply(&buf[..n], &q.name) else {
            continue;
        };
        if reply.rcode == RCODE_NXDOMAIN && (reply.id == q.a_id || reply.id == q.aaaa_id) {
            return Some(Answer::NoSuchName);
        }
        if reply.id == q.a_id && a.is_none() {
            a = Some(reply);
        } else if reply.id == q.aaaa_id && aaaa.is_none() {
            aaaa = Some(reply);
        }
    }
    let (a, aaaa) = (a?, aaaa?);
    if a.rcode != 0 && aaaa.rcode != 0 {
        return None;
    }
    let mut addrs = a.addrs;
    addrs.extend(aaaa.addrs);
    let ttl = match (a.ttl, aaaa.ttl) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 0,
    };
    if addrs.is_empty() {
        Some(Answer::NoSuchName)
    } else {
        Some(Answer::Found {
            addrs,
            ttl: Duration::from_secs(u64::from(ttl)),
        })
    }
}

/// Encodes a recursive query for `name` (no trailing dot) of type `qtype`.
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, DnsError> {
    let mut out = Vec::with_capacity(18 + name.len());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&0x0100u16.to_be_bytes()); // RD
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    encode_name(name, &mut out)?;
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

fn encode_name(name: &str, out: &mut Vec<u8>) -> Result<(), DnsError> {
    let invalid = || DnsError::InvalidName(name.to_string());
    let trimmed = name.trim_end_matches('.');
    if trimmed.len() > 253 {
        return Err(invalid());
    }
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(invalid());
            }
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
    }
    out.push(0);
    Ok(())
}

/// The parts of a DNS response the resolver needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub id: u16,
    pub rcode: u8,
    /// Addresses at the end of the CNAME chain starting at the question name.
    pub addrs: Vec<IpAddr>,
    /// Smallest TTL among the records used, when any were.
    pub ttl: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed DNS message")]
pub struct Malformed;

/// Parses a response to a question about `qname`: checks it is a response, then follows
/// CNAMEs from `qname` and collects the A/AAAA records of the final name.
pub fn parse_reply(msg: &[u8], qname: &str) -> Result<Reply, Malformed> {
    let mut r = Reader { msg, pos: 0 };
    let id = r.u16()?;
    let flags = r.u16()?;
    if flags & 0x8000 == 0 {
        return Err(Malformed);
    }
    let rcode = (flags & 0x000f) as u8;
    let qdcount = r.u16()?;
    let ancount = r.u16()?;
    r.u16()?;
    r.u16()?;
    let wanted = qname.trim_end_matches('.').to_ascii_lowercase();
    for _ in 0..qdcount {
        // A reply about another name is not ours, whatever its id says.
        if r.name()? != wanted {
            return Err(Malformed);
        }
        r.skip(4)?;
    }
    struct Record {
        owner: String,
        rtype: u16,
        ttl: u32,
        data: RData,
    }
    enum RData {
        Addr(IpAddr),
        Cname(String),
        Other,
    }
    let mut records = Vec::with_capacity(usize::from(ancount));
    for _ in 0..ancount {
        let owner = r.name()?;
        let rtype = r.u16()?;
        let class = r.u16()?;
        let ttl = r.u32()?;
        let len = usize::from(r.u16()?);
        let start = r.pos;
        let end = start.checked_add(len).ok_or(Malformed)?;
        if end > msg.len() {
            return Err(Malformed);
        }
        let data = match (class, rtype, len) {
            (CLASS_IN, TYPE_A, 4) => {
                let b = r.bytes(4)?;
                RData::Addr(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))
            }
            (CLASS_IN, TYPE_AAAA, 16) => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(r.bytes(16)?);
                RData::Addr(IpAddr::V6(Ipv6Addr::from(octets)))
            }
            (CLASS_IN, TYPE_CNAME, _) => RData::Cname(r.name()?),
            _ => RData::Other,
        };
        r.pos = end;
        records.push(Record {
            owner,
            rtype,
            ttl,
            data,
        });
    }
    let mut target = wanted;
    let mut ttl: Option<u32> = None;
    for _ in 0..MAX_CNAME_HOPS {
        let next = records.iter().find_map(|rec| match &rec.data {
            RData::Cname(to) if rec.owner == target => Some((to.clone(), rec.ttl)),
            _ => None,
        });
        let Some((to, t)) = next else { break };
        ttl = Some(ttl.map_or(t, |x| x.min(t)));
        target = to;
    }
    let mut addrs = Vec::new();
    for rec in &records {
        if let RData::Addr(ip) = rec.data
            && rec.owner == target
            && (rec.rtype == TYPE_A || rec.rtype == TYPE_AAAA)
        {
            addrs.push(ip);
            ttl = Some(ttl.map_or(rec.ttl, |x| x.min(rec.ttl)));
        }
    }
    if addrs.is_empty() {
        ttl = None;
    }
    Ok(Reply {
        id,
        rcode,
        addrs,
        ttl,
    })
}

struct Reader<'a> {
    msg: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end = self.pos.checked_add(n).ok_or(Malformed)?;
        let out = self.msg.get(self.pos..end).ok_or(Malformed)?;
        self.pos = end;
        Ok(out)
    }
    fn skip(&mut self, n: usize) -> Result<(), Malformed> {
        self.bytes(n).map(|_| ())
    }
    fn u16(&mut self) -> Result<u16, Malformed> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, Malformed> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a possibly compressed name, lowercased, without the trailing dot.
    fn name(&mut self) -> Result<String, Malformed> {
        let mut out = String::new();
        let mut pos = self.pos;
        // Where reading resumes after the first compression pointer.
        let mut resume: Option<usize> = None;
        // Every pointer must move strictly backwards, which also rules out loops.
        let mut limit = pos;
        loop {
            let len = *self.msg.get(pos).ok_or(Malformed)?;
            match len & 0xc0 {
                0x00 if len == 0 => {
                    pos += 1;
                    break;
                }
                0x00 => {
                    let label = self
                        .msg
                        .get(pos + 1..pos + 1 + usize::from(len))
                        .ok_or(Malformed)?;
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.extend(label.iter().map(|b| b.to_ascii_lowercase() as char));
                    if out.len() > 255 {
                        return Err(Malformed);
                    }
                    pos += 1 + usize::from(len);
                }
                0xc0 => {
                    let low = *self.msg.get(pos + 1).ok_or(Malformed)?;
                    let to = (usize::from(len & 0x3f) << 8) | usize::from(low);
                    if to >= limit {
                        return Err(Malformed);
                    }
                    resume.get_or_insert(pos + 2);
                    limit = to;
                    pos = to;
                }
                _ => return Err(Malformed),
            }
        }
        self.pos = resume.unwrap_or(pos);
        Ok(out)
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

    /// Builds a response with a compressed CNAME chain, as real servers send it.
    fn response(id: u16, qname: &str, rcode: u8) -> Vec<u8> {
        let mut m = encode_query(id, qname, TYPE_A).unwrap();
        m[2] = 0x81;
        m[3] = 0x80 | rcode;
        m[7] = 3; // ancount
        // qname at offset 12: CNAME → "web.cdn" + suffix pointer
        m.extend_from_slice(&[0xc0, 12]);
        m.extend_from_slice(&TYPE_CNAME.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        m.extend_from_slice(&300u32.to_be_bytes());
        let cname_at = m.len() + 2;
        m.extend_from_slice(&[0, 6, 3, b'w', b'e', b'b', 0xc0, 12]);
        // web.<qname> A 192.0.2.7 with ttl 60
        m.extend_from_slice(&[0xc0, cname_at as u8]);
        m.extend_from_slice(&TYPE_A.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        m.extend_from_slice(&60u32.to_be_bytes());
        m.extend_from_slice(&[0, 4, 192, 0, 2, 7]);
        // An unrelated A record for another owner must not be picked.
        m.extend_from_slice(&[1, b'x', 0]);
        m.extend_from_slice(&TYPE_A.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        m.extend_from_slice(&10u32.to_be_bytes());
        m.extend_from_slice(&[0, 4, 198, 51, 100, 1]);
        m
    }

    #[test]
    fn reply_follows_compressed_cname_chain() {
        let msg = response(0xbeef, "api.example", 0);
        let reply = parse_reply(&msg, "API.example.").unwrap();
        assert_eq!(reply.id, 0xbeef);
        assert_eq!(reply.rcode, 0);
        assert_eq!(reply.addrs, vec!["192.0.2.7".parse::<IpAddr>().unwrap()]);
        assert_eq!(reply.ttl, Some(60));
    }

    #[test]
    fn malformed_replies_are_rejected_not_panicked_on() {
        let msg = response(1, "api.example", 0);
        for cut in 0..msg.len() {
            let _ = parse_reply(&msg[..cut], "api.example");
        }
        // A pointer to itself must not loop.
        let mut looped = encode_query(1, "a", TYPE_A).unwrap();
        looped[2] = 0x81;
        looped[7] = 1;
        let at = looped.len() as u8;
        looped.extend_from_slice(&[0xc0, at]);
        assert_eq!(parse_reply(&looped, "a"), Err(Malformed));
        // A query (QR bit clear) is not a reply.
        assert_eq!(
            parse_reply(&encode_query(1, "a", TYPE_A).unwrap(), "a"),
            Err(Malformed)
        );
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic_on_garbage(
            msg in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            text in "\\PC{0,200}",
        ) {
            let _ = parse_reply(&msg, "a.b");
            let _ = ResolverConfig::parse_resolv_conf(&text);
            let _ = HostsFile::parse(&text);
            let _ = ndots_warning(&text, 5);
        }

        #[test]
        fn encoded_queries_parse_back(labels in proptest::collection::vec("[a-z0-9-]{1,20}", 1..5)) {
            let name = labels.join(".");
            let mut msg = encode_query(7, &name, TYPE_A).unwrap();
            msg[2] |= 0x80;
            let reply = parse_reply(&msg, &name).unwrap();
            proptest::prop_assert_eq!(reply.id, 7);
            proptest::prop_assert!(reply.addrs.is_empty());
        }
    }

    #[test]
    fn names_are_validated_before_sending() {
        assert!(encode_query(1, &"a".repeat(64), TYPE_A).is_err());
        assert!(encode_query(1, "a..b", TYPE_A).is_err());
        assert!(encode_query(1, &["abc"; 70].join("."), TYPE_A).is_err());
        let q = encode_query(0x1234, "ab.c", TYPE_AAAA).unwrap();
        assert_eq!(&q[12..], &[2, b'a', b'b', 1, b'c', 0, 0, 28, 0, 1]);
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
        let now = Instant::now();
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
