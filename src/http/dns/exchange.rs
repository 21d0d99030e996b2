//! One exchange with one nameserver: the A and AAAA queries for a name, encoded and decoded by
//! hickory-proto, sent together over UDP; a truncated UDP answer is asked again over TCP.
//!
//! Only the transport is ours (tokio sockets and the 2-byte length prefix of DNS over TCP):
//! the wire format is hickory's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RData, RecordType};
use hickory_proto::serialize::binary::BinDecodable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::DnsError;

/// The UDP payload size sent in EDNS: large enough for most answers, small enough to avoid IP
/// fragmentation (the DNS flag day 2020 value).
pub(super) const EDNS_PAYLOAD: u16 = 1232;
const MAX_CNAME_HOPS: usize = 16;

/// What one nameserver said about one name.
pub(super) enum Answer {
    Found {
        addrs: Vec<IpAddr>,
        ttl: Duration,
    },
    /// NXDOMAIN, or NOERROR without addresses: glibc moves to the next candidate.
    NoSuchName,
}

/// The A and AAAA queries for one name, sent together as glibc does.
pub(super) struct Queries {
    name: Name,
    a: Outgoing,
    aaaa: Outgoing,
}

/// One encoded query and the id its reply must carry.
struct Outgoing {
    id: u16,
    bytes: Vec<u8>,
}

impl Queries {
    /// Fails when `name` (no trailing dot) is not a valid DNS name.
    pub(super) fn new(name: &str) -> Result<Queries, DnsError> {
        let invalid = || DnsError::InvalidName(name.to_string());
        let trimmed = name.trim_end_matches('.');
        // Raw labels, as the host was written: hickory checks only the lengths (a label of
        // 1..=63 bytes, a name of at most 255), not the hostname character rules. An empty
        // name is the root.
        let labels = trimmed.split('.').filter(|_| !trimmed.is_empty());
        let fqdn = Name::from_labels(labels.map(str::as_bytes)).map_err(|_| invalid())?;
        let a_id: u16 = rand::random();
        let aaaa_id = a_id.wrapping_add(1);
        Ok(Queries {
            a: Outgoing::new(a_id, &fqdn, RecordType::A).ok_or_else(invalid)?,
            aaaa: Outgoing::new(aaaa_id, &fqdn, RecordType::AAAA).ok_or_else(invalid)?,
            name: fqdn,
        })
    }
}

impl Outgoing {
    /// A recursive query with EDNS, as glibc's `edns0` option sends it.
    fn new(id: u16, name: &Name, qtype: RecordType) -> Option<Outgoing> {
        let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
        msg.metadata.recursion_desired = true;
        msg.add_query(Query::query(name.clone(), qtype));
        let mut edns = Edns::new();
        edns.set_max_payload(EDNS_PAYLOAD);
        msg.set_edns(edns);
        let bytes = msg.to_vec().ok()?;
        Some(Outgoing { id, bytes })
    }
}

/// The parts of a DNS response the resolver needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reply {
    id: u16,
    rcode: ResponseCode,
    /// The TC bit: the answer did not fit the UDP payload, ask again over TCP.
    truncated: bool,
    /// Addresses at the end of the CNAME chain starting at the question name.
    addrs: Vec<IpAddr>,
    /// Smallest TTL among the records used, when any were.
    ttl: Option<u32>,
}

/// Reads a response to a question about `qname`: `None` for anything that is not a response,
/// does not decode, or is about another name. Follows CNAMEs from `qname` and collects the
/// A/AAAA records of the final name.
fn read_reply(bytes: &[u8], qname: &Name) -> Option<Reply> {
    let msg = match Message::from_vec(bytes) {
        Ok(msg) => msg,
        // A truncated answer may be cut inside a record; its header still says to use TCP.
        Err(_) => {
            let Header { metadata, .. } = Header::from_bytes(bytes).ok()?;
            let truncated = metadata.message_type == MessageType::Response && metadata.truncation;
            return truncated.then_some(Reply {
                id: metadata.id,
                rcode: metadata.response_code,
                truncated,
                addrs: Vec::new(),
                ttl: None,
            });
        }
    };
    if msg.metadata.message_type != MessageType::Response {
        return None;
    }
    // A reply about another name is not ours, whatever its id says.
    if msg.queries.iter().any(|q| q.name() != qname) {
        return None;
    }
    let mut target = qname.clone();
    let mut ttl: Option<u32> = None;
    for _ in 0..MAX_CNAME_HOPS {
        let next = msg.answers.iter().find_map(|rec| match &rec.data {
            RData::CNAME(to) if rec.dns_class == DNSClass::IN && rec.name == target => {
                Some((to.0.clone(), rec.ttl))
            }
            _ => None,
        });
        let Some((to, t)) = next else { break };
        ttl = Some(ttl.map_or(t, |x| x.min(t)));
        target = to;
    }
    let mut addrs = Vec::new();
    for rec in &msg.answers {
        if rec.dns_class != DNSClass::IN || rec.name != target {
            continue;
        }
        let ip = match &rec.data {
            RData::A(a) => IpAddr::V4(a.0),
            RData::AAAA(aaaa) => IpAddr::V6(aaaa.0),
            _ => continue,
        };
        addrs.push(ip);
        ttl = Some(ttl.map_or(rec.ttl, |x| x.min(rec.ttl)));
    }
    if addrs.is_empty() {
        ttl = None;
    }
    Some(Reply {
        id: msg.metadata.id,
        rcode: msg.metadata.response_code,
        truncated: msg.metadata.truncation,
        addrs,
        ttl,
    })
}

/// Whether a socket could not be made because sloburn is out of file descriptors (its own
/// limit or the system's): that is no nameserver's fault, and no other nameserver would do
/// better.
fn fd_exhausted(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// One nameserver, both queries on one UDP socket. `Ok(None)` means ask the next nameserver;
/// the error is [`DnsError::LocalFdExhausted`], when no socket could be opened.
pub(super) async fn query_one(ns: SocketAddr, q: &Queries) -> Result<Option<Answer>, DnsError> {
    let bind: SocketAddr = if ns.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = match UdpSocket::bind(bind).await {
        Ok(s) => s,
        Err(e) if fd_exhausted(&e) => return Err(DnsError::LocalFdExhausted),
        Err(_) => return Ok(None),
    };
    let mut replies = match udp_exchange(&sock, ns, q).await {
        Some(Udp::Replies(r)) => r,
        Some(Udp::NoSuchName) => return Ok(Some(Answer::NoSuchName)),
        None => return Ok(None),
    };
    for (reply, out) in replies.iter_mut().zip([&q.a, &q.aaaa]) {
        if reply.truncated {
            let Some(again) = query_tcp(ns, out, &q.name).await? else {
                return Ok(None);
            };
            *reply = again;
            if reply.rcode == ResponseCode::NXDomain {
                return Ok(Some(Answer::NoSuchName));
            }
        }
    }
    let [a, aaaa] = replies;
    if a.rcode != ResponseCode::NoError && aaaa.rcode != ResponseCode::NoError {
        return Ok(None);
    }
    let mut addrs = a.addrs;
    addrs.extend(aaaa.addrs);
    let ttl = match (a.ttl, aaaa.ttl) {
        (Some(x), Some(y)) => x.min(y),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => 0,
    };
    Ok(Some(if addrs.is_empty() {
        Answer::NoSuchName
    } else {
        Answer::Found {
            addrs,
            ttl: Duration::from_secs(u64::from(ttl)),
        }
    }))
}

/// What the UDP exchange gave: both replies, or an NXDOMAIN to either (the name does not
/// exist, whatever the other says).
enum Udp {
    Replies([Reply; 2]),
    NoSuchName,
}

/// Both queries over `sock`; `None` when the nameserver gave no usable answer.
async fn udp_exchange(sock: &UdpSocket, ns: SocketAddr, q: &Queries) -> Option<Udp> {
    // Connecting makes the kernel drop datagrams from anyone but the nameserver.
    sock.connect(ns).await.ok()?;
    sock.send(&q.a.bytes).await.ok()?;
    sock.send(&q.aaaa.bytes).await.ok()?;
    // Room for a server that sends more than the payload size it was told.
    let mut buf = vec![0u8; 4096];
    let mut a: Option<Reply> = None;
    let mut aaaa: Option<Reply> = None;
    while a.is_none() || aaaa.is_none() {
        let n = sock.recv(&mut buf).await.ok()?;
        let Some(reply) = read_reply(&buf[..n], &q.name) else {
            continue;
        };
        let slot = if reply.id == q.a.id {
            &mut a
        } else if reply.id == q.aaaa.id {
            &mut aaaa
        } else {
            continue;
        };
        if reply.rcode == ResponseCode::NXDomain {
            return Some(Udp::NoSuchName);
        }
        slot.get_or_insert(reply);
    }
    Some(Udp::Replies([a?, aaaa?]))
}

/// One query over TCP to the same nameserver, each message behind its 2-byte length.
/// `Ok(None)` when it gave no usable reply.
async fn query_tcp(
    ns: SocketAddr,
    out: &Outgoing,
    qname: &Name,
) -> Result<Option<Reply>, DnsError> {
    let mut stream = match TcpStream::connect(ns).await {
        Ok(s) => s,
        Err(e) if fd_exhausted(&e) => return Err(DnsError::LocalFdExhausted),
        Err(_) => return Ok(None),
    };
    let exchange = async {
        let len = u16::try_from(out.bytes.len()).ok()?;
        let mut framed = Vec::with_capacity(2 + out.bytes.len());
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(&out.bytes);
        stream.write_all(&framed).await.ok()?;
        let len = stream.read_u16().await.ok()?;
        let mut msg = vec![0u8; usize::from(len)];
        stream.read_exact(&mut msg).await.ok()?;
        read_reply(&msg, qname).filter(|reply| reply.id == out.id)
    };
    Ok(exchange.await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::Record;
    use hickory_proto::rr::rdata::{A, CNAME};

    fn name(s: &str) -> Name {
        Name::from_ascii(s).unwrap()
    }

    /// A response with a CNAME chain and an unrelated A record, as real servers send them.
    fn response(id: u16, qname: &str, rcode: ResponseCode) -> Vec<u8> {
        let mut msg = Message::response(id, OpCode::Query);
        msg.metadata.response_code = rcode;
        msg.add_query(Query::query(name(qname), RecordType::A));
        let web = name(&format!("web.{qname}"));
        msg.add_answer(Record::from_rdata(
            name(qname),
            300,
            RData::CNAME(CNAME(web.clone())),
        ));
        msg.add_answer(Record::from_rdata(web, 60, RData::A(A::new(192, 0, 2, 7))));
        // An A record for another owner must not be picked.
        msg.add_answer(Record::from_rdata(
            name("x."),
            10,
            RData::A(A::new(198, 51, 100, 1)),
        ));
        msg.to_vec().unwrap()
    }

    #[test]
    fn reply_follows_the_cname_chain() {
        let msg = response(0xbeef, "api.example.", ResponseCode::NoError);
        let reply = read_reply(&msg, &name("API.example.")).unwrap();
        assert_eq!(reply.id, 0xbeef);
        assert_eq!(reply.rcode, ResponseCode::NoError);
        assert!(!reply.truncated);
        assert_eq!(reply.addrs, vec!["192.0.2.7".parse::<IpAddr>().unwrap()]);
        assert_eq!(reply.ttl, Some(60));
    }

    #[test]
    fn foreign_or_broken_replies_are_ignored() {
        let msg = response(1, "api.example.", ResponseCode::NoError);
        assert!(read_reply(&msg, &name("other.example.")).is_none());
        for cut in 0..msg.len() {
            let _ = read_reply(&msg[..cut], &name("api.example."));
        }
        let q = Queries::new("api.example").unwrap();
        assert!(
            read_reply(&q.a.bytes, &q.name).is_none(),
            "a query is no reply"
        );
    }

    #[test]
    fn a_truncated_reply_cut_inside_a_record_still_asks_for_tcp() {
        let mut msg = response(9, "api.example.", ResponseCode::NoError);
        msg[2] |= 0x02; // TC
        let reply = read_reply(&msg[..msg.len() - 3], &name("api.example.")).unwrap();
        assert!(reply.truncated);
        assert_eq!(reply.id, 9);
        assert!(reply.addrs.is_empty());
    }

    #[test]
    fn queries_are_recursive_with_edns() {
        let q = Queries::new("ab.c").unwrap();
        assert_eq!(q.aaaa.id, q.a.id.wrapping_add(1));
        for (out, qtype) in [(&q.a, RecordType::A), (&q.aaaa, RecordType::AAAA)] {
            let msg = Message::from_vec(&out.bytes).unwrap();
            assert_eq!(msg.metadata.id, out.id);
            assert!(msg.metadata.recursion_desired);
            assert_eq!(msg.queries.len(), 1);
            assert_eq!(msg.queries[0].name(), &name("ab.c."));
            assert_eq!(msg.queries[0].query_type(), qtype);
            assert_eq!(msg.edns.as_ref().unwrap().max_payload(), EDNS_PAYLOAD);
        }
    }

    #[test]
    fn names_are_validated_before_sending() {
        assert!(Queries::new(&"a".repeat(64)).is_err());
        assert!(Queries::new("a..b").is_err());
        assert!(Queries::new(&["abc"; 70].join(".")).is_err());
        assert!(Queries::new("").unwrap().name.is_root());
        assert!(Queries::new(&"a".repeat(63)).is_ok());
        // Labels go out as written, as before: hickory's hostname rules are not applied.
        assert!(Queries::new("-._srv.example").is_ok());
    }

    proptest::proptest! {
        #[test]
        fn reading_garbage_never_panics(
            msg in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
        ) {
            let _ = read_reply(&msg, &name("a.b."));
        }

        #[test]
        fn queries_decode_back(labels in proptest::collection::vec("[a-z0-9-]{1,20}", 1..5)) {
            let q = Queries::new(&labels.join(".")).unwrap();
            let msg = Message::from_vec(&q.a.bytes).unwrap();
            proptest::prop_assert_eq!(msg.metadata.id, q.a.id);
            proptest::prop_assert_eq!(msg.queries[0].name(), &q.name);
        }
    }
}
