//! `dns://server[:port]/name?type=A`: one query to one server (no search list, no cache),
//! encoded and decoded by hickory-proto; over UDP, and again over TCP when the answer is
//! truncated. The server's own name, when it is not an address, is looked up first (`dns`
//! phase); the query is `sending` and `waiting` (to the answer).
//!
//! Bounds: one datagram of at most 4,096 bytes read at a time, a TCP answer of at most 65,535
//! (its length prefix), all within the target's `timeout`. A datagram from the server that
//! does not decode as DNS fails the probe at once as `body` (the answer broke); one that
//! decodes but answers another query is passed over.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use bytes::Bytes;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{Instant, timeout_at};

use crate::http::client::{Client, RequestSpec};
use crate::http::transport::Transport;
use crate::http::{ErrorClass, Outcome, Protocol, classify_io};

/// `dns://`: one query, to the server the URL names.
pub(crate) struct Dns;

impl Transport for Dns {
    fn new(_: &Client) -> Dns {
        Dns
    }

    async fn send(&mut self, client: &Client, req: &RequestSpec) -> Outcome {
        Outcome {
            protocol: Protocol::Dns,
            ..probe(client, req).await
        }
    }
}

/// The EDNS payload size offered (the DNS flag day 2020 value).
const EDNS_PAYLOAD: u16 = 1232;

/// The name and record type a `dns://` URL asks for: the path is the name, `?type=` the type
/// (A when absent), as RFC 4501 writes them.
pub(super) fn query_of(uri: &http::Uri) -> Result<(String, RecordType), String> {
    let name = uri.path().trim_start_matches('/');
    if name.is_empty() {
        return Err("give the name to query as the URL's path: dns://SERVER/NAME?type=A".into());
    }
    let name = percent_decode(name);
    let mut qtype = RecordType::A;
    for pair in uri.query().unwrap_or_default().split(['&', ';']) {
        let Some((k, v)) = pair.split_once('=') else {
            if pair.is_empty() {
                continue;
            }
            return Err(format!("`{pair}` is no `type=` parameter"));
        };
        match k.to_ascii_lowercase().as_str() {
            "type" => {
                qtype = RecordType::from_str(&v.to_ascii_uppercase())
                    .ok()
                    .filter(|t| !matches!(t, RecordType::Unknown(_)))
                    .ok_or_else(|| {
                        format!(
                            "`{v}` is not a DNS record type (A, AAAA, CNAME, MX, TXT, SRV, NS…)"
                        )
                    })?;
            }
            // RFC 4501's class parameter: only the Internet class is asked.
            "class" if v.eq_ignore_ascii_case("IN") => {}
            _ => return Err(format!("unknown parameter `{k}`: only `type=` is read")),
        }
    }
    let fqdn = if name.ends_with('.') {
        name
    } else {
        format!("{name}.")
    };
    Name::from_ascii(&fqdn).map_err(|e| format!("`{fqdn}` is not a DNS name: {e}"))?;
    Ok((fqdn, qtype))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn probe(client: &Client, req: &RequestSpec) -> Outcome {
    let start = crate::clock::tokio_instant();
    let deadline = start + client.options().timeout;
    let mut out = Outcome::default();
    let (Ok((name, qtype)), Some(authority)) = (query_of(&req.uri), req.uri.authority()) else {
        out.error = Some(ErrorClass::Other);
        return out;
    };
    let port = authority.port_u16().unwrap_or(53);
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let ip = match host.parse::<IpAddr>() {
        Ok(ip) => ip,
        Err(_) => {
            let t = crate::clock::tokio_instant();
            let looked = timeout_at(deadline, client.resolve(host)).await;
            out.phases.dns = crate::clock::elapsed(t);
            match looked {
                Ok(Ok(addrs)) if !addrs.is_empty() => addrs[0],
                _ => {
                    out.error = Some(ErrorClass::Dns);
                    return out;
                }
            }
        }
    };
    let server = SocketAddr::new(ip, port);
    let Ok(qname) = Name::from_ascii(&name) else {
        out.error = Some(ErrorClass::Other);
        return out;
    };
    let id: u16 = rand::random();
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(qname.clone(), qtype));
    let mut edns = Edns::new();
    edns.set_max_payload(EDNS_PAYLOAD);
    msg.set_edns(edns);
    let Ok(query) = msg.to_vec() else {
        out.error = Some(ErrorClass::Other);
        return out;
    };
    let sent_at = crate::clock::tokio_instant();
    let answer = match udp(server, &query, id, &qname, deadline, &mut out).await {
        Ok(reply) if reply.metadata.truncation => {
            tcp(server, &query, id, &qname, deadline, &mut out).await
        }
        other => other,
    };
    let end = crate::clock::tokio_instant();
    out.phases.waiting = (end - sent_at).saturating_sub(out.phases.sending);
    match answer {
        Ok(reply) => {
            out.status = Some(u16::from(reply.metadata.response_code));
            let mut body = String::new();
            for rec in &reply.answers {
                body.push_str(&rec.data.to_string());
                body.push('\n');
            }
            out.body = Bytes::from(body);
        }
        Err(class) => out.error = Some(class),
    }
    out
}

/// Whether `bytes` is the answer to our query: a response, our id, our question.
fn reply_of(bytes: &[u8], id: u16, qname: &Name) -> Option<Message> {
    let msg = Message::from_vec(bytes).ok()?;
    (msg.metadata.message_type == MessageType::Response
        && msg.metadata.id == id
        && msg.queries.iter().all(|q| q.name() == qname))
    .then_some(msg)
}

/// A truncated answer may not decode whole; its header still says to ask over TCP.
fn truncated_header(bytes: &[u8], id: u16) -> Option<Message> {
    use hickory_proto::serialize::binary::BinDecodable;
    let header = hickory_proto::op::Header::from_bytes(bytes).ok()?;
    let m = header.metadata;
    (m.message_type == MessageType::Response && m.id == id && m.truncation).then(|| {
        let mut msg = Message::new(id, MessageType::Response, OpCode::Query);
        msg.metadata.truncation = true;
        msg.metadata.response_code = ResponseCode::NoError;
        msg
    })
}

async fn udp(
    server: SocketAddr,
    query: &[u8],
    id: u16,
    qname: &Name,
    deadline: Instant,
    out: &mut Outcome,
) -> Result<Message, ErrorClass> {
    let bind: SocketAddr = if server.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(bind)
        .await
        .map_err(|e| classify_io(&e, true))?;
    sock.connect(server)
        .await
        .map_err(|e| classify_io(&e, true))?;
    out.local_port = sock.local_addr().ok().map(|a| a.port());
    let t = crate::clock::tokio_instant();
    sock.send(query).await.map_err(|e| classify_io(&e, false))?;
    out.phases.sending = crate::clock::elapsed(t);
    out.bytes_sent = query.len() as u64;
    let mut buf = vec![0u8; 4096];
    loop {
        // A refused port answers with ICMP, which the connected socket reads as ECONNREFUSED.
        let n = match timeout_at(deadline, sock.recv(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(e)) => return Err(classify_io(&e, true)),
            Err(_) => return Err(ErrorClass::Timeout),
        };
        out.bytes_received += n as u64;
        if let Some(msg) =
            reply_of(&buf[..n], id, qname).or_else(|| truncated_header(&buf[..n], id))
        {
            return Ok(msg);
        }
        if malformed(&buf[..n]) {
            return Err(ErrorClass::Body);
        }
    }
}

/// Whether a datagram from the server (the socket is connected: no one else's is read) is no
/// DNS message at all: the server's answer broke, failed at once as `body` rather than waited
/// on to the timeout. A well-formed message that is not our answer (another id or question,
/// a late answer) is passed over, as resolvers do.
fn malformed(bytes: &[u8]) -> bool {
    Message::from_vec(bytes).is_err()
}

async fn tcp(
    server: SocketAddr,
    query: &[u8],
    id: u16,
    qname: &Name,
    deadline: Instant,
    out: &mut Outcome,
) -> Result<Message, ErrorClass> {
    let mut stream = match timeout_at(deadline, TcpStream::connect(server)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(classify_io(&e, true)),
        Err(_) => return Err(ErrorClass::ConnectTimeout),
    };
    let exchange = async {
        let len = u16::try_from(query.len()).map_err(|_| ErrorClass::Other)?;
        let mut framed = Vec::with_capacity(2 + query.len());
        framed.extend_from_slice(&len.to_be_bytes());
        framed.extend_from_slice(query);
        stream
            .write_all(&framed)
            .await
            .map_err(|e| classify_io(&e, false))?;
        let len = stream
            .read_u16()
            .await
            .map_err(|e| classify_io(&e, false))?;
        let mut msg = vec![0u8; usize::from(len)];
        stream
            .read_exact(&mut msg)
            .await
            .map_err(|e| classify_io(&e, false))?;
        Ok::<_, ErrorClass>(msg)
    };
    let msg = match timeout_at(deadline, exchange).await {
        Ok(r) => r?,
        Err(_) => return Err(ErrorClass::Timeout),
    };
    out.bytes_sent += query.len() as u64 + 2;
    out.bytes_received += msg.len() as u64 + 2;
    reply_of(&msg, id, qname).ok_or(ErrorClass::Body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_names_the_query() {
        let q = |s: &str| query_of(&s.parse().unwrap());
        assert_eq!(
            q("dns://127.0.0.1:5353/api.shop.example?type=AAAA").unwrap(),
            ("api.shop.example.".to_string(), RecordType::AAAA)
        );
        assert_eq!(
            q("dns://10.0.0.10/kubernetes.default.svc.cluster.local.").unwrap(),
            (
                "kubernetes.default.svc.cluster.local.".to_string(),
                RecordType::A
            )
        );
        assert_eq!(
            q("dns://1.2.3.4/x.example?type=mx").unwrap().1,
            RecordType::MX
        );
        assert!(q("dns://1.2.3.4/").unwrap_err().contains("path"));
        assert!(
            q("dns://1.2.3.4/x?type=BOGUS")
                .unwrap_err()
                .contains("record type")
        );
        assert!(q("dns://1.2.3.4/x?ttl=3").unwrap_err().contains("ttl"));
    }
}
