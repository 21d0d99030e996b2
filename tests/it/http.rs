//! The HTTP client and resolver against real loopback servers started here: phase timings,
//! connection reuse, the search list on the wire, and every error class a socket can produce.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use hickory_proto::op::{Message, OpCode, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{RData, Record, RecordType};
use http::{HeaderMap, Method, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use sloburn::http::{
    Client, ClientOptions, Conn, ErrorClass, HostsFile, Outcome, RequestSpec, Resolver,
    ResolverConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::time::Instant;

/// What a test server saw.
#[derive(Default)]
struct Seen {
    accepted: AtomicUsize,
    connection_close: AtomicUsize,
    peer_ports: Mutex<Vec<u16>>,
}

/// A hyper HTTP/1.1 server on 127.0.0.1:0 that answers every request with `handler`.
async fn serve<F, Fut>(handler: F) -> (SocketAddr, Arc<Seen>)
where
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let seen2 = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, peer)) = listener.accept().await {
            seen2.accepted.fetch_add(1, Ordering::SeqCst);
            seen2.peer_ports.lock().unwrap().push(peer.port());
            let handler = handler.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: http::Request<Incoming>| {
                    if req
                        .headers()
                        .get(http::header::CONNECTION)
                        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"close"))
                    {
                        seen.connection_close.fetch_add(1, Ordering::SeqCst);
                    }
                    let fut = handler(req);
                    async move { Ok::<_, Infallible>(fut.await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    (addr, seen)
}

async fn ok_handler(_req: http::Request<Incoming>) -> Response<Full<Bytes>> {
    Response::new(Full::new(Bytes::from_static(b"ok")))
}

fn get(uri: &str) -> RequestSpec {
    RequestSpec {
        method: Method::GET,
        uri: uri.parse().unwrap(),
        headers: HeaderMap::new(),
        body: Bytes::new(),
    }
}

/// A resolver that knows only `localhost` and asks no nameserver.
fn local_resolver() -> Arc<Resolver> {
    let config = ResolverConfig {
        nameservers: vec![],
        ..ResolverConfig::default()
    };
    Arc::new(Resolver::new(
        config,
        HostsFile::parse("127.0.0.1 localhost\n"),
    ))
}

fn client(opts: ClientOptions) -> Client {
    Client::new(opts, local_resolver())
}

/// Sends `n` requests on one slot, bounded by the client's timeout each.
async fn send_n(conn: &mut Conn, req: &RequestSpec, n: usize) -> Vec<Outcome> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(conn.send(req).await);
    }
    out
}

fn assert_ok(o: &Outcome) {
    assert_eq!(o.error, None, "{o:?}");
    assert_eq!(o.status, Some(200), "{o:?}");
}

#[tokio::test]
async fn waiting_measures_the_servers_think_time() {
    let (addr, _) = serve(|_req| async {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Response::new(Full::new(Bytes::from_static(b"slow")))
    })
    .await;
    let mut conn = client(ClientOptions::default()).conn();
    let req = get(&format!("http://{addr}/think"));
    for _ in 0..5 {
        let began = Instant::now();
        let o = conn.send(&req).await;
        let wall = began.elapsed();
        assert_ok(&o);
        let p = o.phases;
        assert!(p.waiting >= Duration::from_millis(19), "{p:?}");
        assert!(p.waiting < Duration::from_millis(150), "{p:?}");
        assert!(p.sending < p.waiting, "{p:?}");
        assert!(p.receiving < p.waiting, "{p:?}");
        assert_eq!(p.duration(), p.sending + p.waiting + p.receiving);
        assert!(
            p.duration() + p.blocked + p.dns + p.connecting <= wall,
            "{p:?} within {wall:?}"
        );
        assert_eq!(&o.body[..], b"slow");
        assert!(o.bytes_sent > 0 && o.bytes_received > 4, "{o:?}");
    }
}

#[tokio::test]
async fn without_keep_alive_every_request_opens_a_connection() {
    let (addr, seen) = serve(ok_handler).await;
    let mut conn = client(ClientOptions {
        keep_alive: false,
        ..ClientOptions::default()
    })
    .conn();
    let outcomes = send_n(&mut conn, &get(&format!("http://{addr}/")), 20).await;
    let mut ports: Vec<u16> = Vec::new();
    for o in &outcomes {
        assert_ok(o);
        assert!(!o.reused);
        assert!(o.phases.connecting > Duration::ZERO, "{o:?}");
        ports.push(o.local_port.unwrap());
    }
    let mut server_ports = seen.peer_ports.lock().unwrap().clone();
    server_ports.sort_unstable();
    ports.sort_unstable();
    assert_eq!(
        ports, server_ports,
        "client and server agree on the local ports"
    );
    ports.dedup();
    assert_eq!(ports.len(), 20, "distinct local ports");
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 20);
    assert_eq!(seen.connection_close.load(Ordering::SeqCst), 20);
}

#[tokio::test]
async fn keep_alive_reuses_one_connection() {
    let (addr, seen) = serve(ok_handler).await;
    let mut conn = client(ClientOptions::default()).conn();
    let outcomes = send_n(
        &mut conn,
        &get(&format!("http://localhost:{}/", addr.port())),
        20,
    )
    .await;
    for (i, o) in outcomes.iter().enumerate() {
        assert_ok(o);
        assert_eq!(o.reused, i > 0, "request {i}");
        assert_eq!(o.local_port, outcomes[0].local_port);
        if i > 0 {
            assert_eq!(o.phases.dns, Duration::ZERO);
            assert_eq!(o.phases.connecting, Duration::ZERO);
            assert_eq!(o.phases.tls_handshaking, Duration::ZERO);
        }
    }
    assert!(outcomes[0].phases.connecting > Duration::ZERO);
    assert_eq!(seen.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(seen.connection_close.load(Ordering::SeqCst), 0);
}

/// One slot whose requests go to two servers in turn, written several ways: each request
/// reaches its own server with its own `Host` (the slot keeps the last parsed endpoint).
#[tokio::test]
async fn a_slot_alternating_between_targets_sends_each_its_own_host() {
    async fn host_echo(req: http::Request<Incoming>) -> Response<Full<Bytes>> {
        let host = req.headers().get(http::header::HOST).cloned();
        Response::new(Full::new(
            host.map_or_else(Bytes::new, |h| Bytes::copy_from_slice(h.as_bytes())),
        ))
    }
    let (a, seen_a) = serve(host_echo).await;
    let (b, seen_b) = serve(host_echo).await;
    let mut conn = client(ClientOptions::default()).conn();
    let mut set_host = get(&format!("http://127.0.0.1:{}/", b.port()));
    set_host
        .headers
        .insert(http::header::HOST, "configured.example".parse().unwrap());
    let cases = [
        (
            get(&format!("http://localhost:{}/x", a.port())),
            format!("localhost:{}", a.port()),
        ),
        (
            get(&format!("http://127.0.0.1:{}/", b.port())),
            format!("127.0.0.1:{}", b.port()),
        ),
        (
            get(&format!("http://user:pw@localhost:{}/", a.port())),
            format!("localhost:{}", a.port()),
        ),
        // The authority as written: a cached endpoint must not answer for another spelling.
        (
            get(&format!("HTTP://LOCALHOST:{}/", a.port())),
            format!("LOCALHOST:{}", a.port()),
        ),
        (set_host, "configured.example".to_string()),
        (
            get(&format!("http://localhost:{}/y", a.port())),
            format!("localhost:{}", a.port()),
        ),
    ];
    for round in 0..2 {
        for (req, host) in &cases {
            let o = conn.send(req).await;
            assert_ok(&o);
            assert_eq!(
                o.body.as_ref(),
                host.as_bytes(),
                "round {round}: {} sent Host {:?}",
                req.uri,
                String::from_utf8_lossy(&o.body)
            );
        }
    }
    // Every switch of server closed the other's connection: one per request that changed server.
    assert!(seen_a.accepted.load(Ordering::SeqCst) >= 2);
    assert!(seen_b.accepted.load(Ordering::SeqCst) >= 2);
}

#[tokio::test]
async fn dns_is_measured_on_a_fresh_lookup_and_zero_on_reuse() {
    let (addr, _) = serve(ok_handler).await;
    let req = get(&format!("http://localhost:{}/", addr.port()));
    let mut conn = client(ClientOptions {
        dns_ttl: Duration::ZERO,
        ..ClientOptions::default()
    })
    .conn();
    let first = conn.send(&req).await;
    let second = conn.send(&req).await;
    assert_ok(&first);
    assert_ok(&second);
    assert!(first.phases.dns > Duration::ZERO, "{:?}", first.phases);
    assert!(second.reused);
    assert_eq!(second.phases.dns, Duration::ZERO);
}

/// The question of a DNS query: its name without the trailing dot, and the query.
fn read_query(bytes: &[u8]) -> (String, Message) {
    let query = Message::from_vec(bytes).unwrap();
    let name = query.queries[0].name().to_ascii();
    (name.trim_end_matches('.').to_string(), query)
}

/// The reply to `query`: an A record `ip` for `answer` (AAAA gets an empty NOERROR), NXDOMAIN
/// for every other name.
fn reply(query: &Message, answer: &str, ip: [u8; 4], ttl: u32) -> Message {
    let q = &query.queries[0];
    let mut resp = Message::response(query.metadata.id, OpCode::Query);
    resp.metadata.recursion_desired = query.metadata.recursion_desired;
    resp.metadata.recursion_available = true;
    resp.add_query(q.clone());
    if q.name().to_ascii().trim_end_matches('.') != answer {
        resp.metadata.response_code = ResponseCode::NXDomain;
    } else if q.query_type() == RecordType::A {
        resp.add_answer(Record::from_rdata(
            q.name().clone(),
            ttl,
            RData::A(A::from(std::net::Ipv4Addr::from(ip))),
        ));
    }
    resp
}

/// A UDP DNS server on 127.0.0.1:0 that records every question name and answers with
/// [`reply`].
async fn dns_server(
    answer: &'static str,
    ip: [u8; 4],
    ttl: u32,
) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    let names2 = names.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = sock.recv_from(&mut buf).await {
            let (name, query) = read_query(&buf[..n]);
            names2.lock().unwrap().push(name);
            let resp = reply(&query, answer, ip, ttl).to_vec().unwrap();
            let _ = sock.send_to(&resp, peer).await;
        }
    });
    (addr, names)
}

/// Question names in the order first asked (A and AAAA for one name arrive together).
fn distinct_in_order(names: &Mutex<Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names.lock().unwrap().iter() {
        if out.last() != Some(n) {
            out.push(n.clone());
        }
    }
    out
}

fn search_resolver(ns: SocketAddr) -> Resolver {
    Resolver::new(
        ResolverConfig {
            nameservers: vec![ns],
            search: vec!["a.test".into(), "b.test".into(), "c.test".into()],
            ndots: 5,
            timeout: Duration::from_secs(2),
            attempts: 1,
        },
        HostsFile::default(),
    )
}

#[tokio::test]
async fn resolver_walks_the_search_list_like_glibc() {
    let (ns, names) = dns_server("api.shop", [127, 0, 0, 1], 60).await;
    let resolver = search_resolver(ns);

    let lookup = resolver.lookup("api.shop").await.unwrap();
    let expected = [
        "api.shop.a.test",
        "api.shop.b.test",
        "api.shop.c.test",
        "api.shop",
    ];
    assert_eq!(lookup.tried, expected);
    assert_eq!(distinct_in_order(&names), expected, "what the server saw");
    assert_eq!(lookup.addrs, vec![IpAddr::from([127, 0, 0, 1])]);

    names.lock().unwrap().clear();
    let absolute = resolver.lookup("api.shop.").await.unwrap();
    assert_eq!(absolute.tried, ["api.shop"]);
    assert_eq!(distinct_in_order(&names), ["api.shop"]);

    names.lock().unwrap().clear();
    let missing = resolver.lookup("a.b.c.d.e.f").await.unwrap_err();
    let expected = [
        "a.b.c.d.e.f",
        "a.b.c.d.e.f.a.test",
        "a.b.c.d.e.f.b.test",
        "a.b.c.d.e.f.c.test",
    ];
    assert_eq!(
        distinct_in_order(&names),
        expected,
        "ndots reached: as-is first"
    );
    assert!(missing.to_string().contains("not found"), "{missing}");
}

#[tokio::test]
async fn unresolvable_host_is_a_dns_error() {
    let (ns, names) = dns_server("api.shop", [127, 0, 0, 1], 60).await;
    let client = Client::new(ClientOptions::default(), Arc::new(search_resolver(ns)));
    let o = client.conn().send(&get("http://nobody.home:9/")).await;
    assert_eq!(o.error, Some(ErrorClass::Dns), "{o:?}");
    assert_eq!(o.status, None);
    assert!(o.phases.dns > Duration::ZERO);
    assert_eq!(distinct_in_order(&names).len(), 4);
}

#[tokio::test]
async fn dns_cache_respects_the_client_ttl() {
    let (addr, _) = serve(ok_handler).await;
    let (ns, names) = dns_server("api.shop", [127, 0, 0, 1], 60).await;
    let req = get(&format!("http://api.shop.:{}/", addr.port()));
    for (ttl, expected_queries) in [(Duration::from_secs(300), 1), (Duration::ZERO, 3)] {
        names.lock().unwrap().clear();
        let client = Client::new(
            ClientOptions {
                keep_alive: false,
                dns_ttl: ttl,
                ..ClientOptions::default()
            },
            Arc::new(search_resolver(ns)),
        );
        let mut conn = client.conn();
        for o in send_n(&mut conn, &req, 3).await {
            assert_ok(&o);
        }
        // Each lookup asks A and AAAA.
        assert_eq!(
            names.lock().unwrap().len(),
            2 * expected_queries,
            "lookups with ttl {ttl:?}"
        );
    }
}

#[tokio::test]
async fn closed_port_is_connect_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let o = client(ClientOptions::default())
        .conn()
        .send(&get(&format!("http://{addr}/")))
        .await;
    assert_eq!(o.error, Some(ErrorClass::ConnectRefused), "{o:?}");
    assert_eq!(o.status, None);
}

#[tokio::test]
async fn silent_server_is_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let mut conn = client(ClientOptions {
        timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    })
    .conn();
    let began = Instant::now();
    let o = conn.send(&get(&format!("http://{addr}/"))).await;
    let took = began.elapsed();
    assert_eq!(o.error, Some(ErrorClass::Timeout), "{o:?}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(
        o.phases.waiting >= Duration::from_millis(250),
        "{:?}",
        o.phases
    );
    assert!(o.bytes_sent > 0);
}

/// Reads one request head (test requests have no body).
async fn read_head(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    true
}

/// A raw TCP server: `script(connection index, stream)` runs per accepted connection.
async fn raw_server<F, Fut>(script: F) -> (SocketAddr, Arc<AtomicUsize>)
where
    F: Fn(usize, TcpStream) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let i = count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(script(i, s));
        }
    });
    (addr, accepted)
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

#[tokio::test]
async fn reset_before_the_response_is_reset() {
    let (addr, _) = raw_server(|_, mut s| async move {
        if read_head(&mut s).await {
            #[allow(deprecated)] // SO_LINGER 0 is the point: drop sends RST instead of FIN.
            s.set_linger(Some(Duration::ZERO)).unwrap();
        }
    })
    .await;
    let o = client(ClientOptions::default())
        .conn()
        .send(&get(&format!("http://{addr}/")))
        .await;
    assert_eq!(o.error, Some(ErrorClass::Reset), "{o:?}");
    assert_eq!(o.status, None);
}

#[tokio::test]
async fn body_cut_short_is_a_body_error() {
    let (addr, _) = raw_server(|_, mut s| async move {
        if read_head(&mut s).await {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\nonly this")
                .await;
        }
    })
    .await;
    let o = client(ClientOptions::default())
        .conn()
        .send(&get(&format!("http://{addr}/")))
        .await;
    assert_eq!(o.error, Some(ErrorClass::Body), "{o:?}");
    assert_eq!(o.status, Some(200));
}

#[tokio::test]
async fn a_body_of_exactly_max_body_is_kept_and_its_connection_reused() {
    const MIB: usize = 1 << 20;
    let (addr, _) =
        serve(|_req| async { Response::new(Full::new(Bytes::from(vec![b'x'; MIB]))) }).await;
    let mut conn = client(ClientOptions {
        max_body: MIB,
        ..ClientOptions::default()
    })
    .conn();
    let req = get(&format!("http://{addr}/exact"));
    let o = conn.send(&req).await;
    assert_ok(&o);
    assert_eq!(o.body.len(), MIB);
    assert_eq!(o.body_discarded, 0);
    assert!(o.phases.receiving > Duration::ZERO);
    let again = conn.send(&req).await;
    assert_ok(&again);
    assert!(again.reused);
}

/// A 200 MB response used to be read in full (12.6 GB in 3 s): `max_body` capped only the
/// bytes kept. Now reading stops at the cap, the connection is closed, and the request fails
/// as `body_too_large`, in the client's outcome and in a run's error table.
#[tokio::test]
async fn a_body_over_max_body_is_cut_and_counted_as_body_too_large() {
    const CAP: usize = 64 << 10;
    const BODY: u64 = 64 << 20;
    let (addr, stop) =
        crate::support::spawn_target(sloburn::target::TargetOptions::default()).await;
    let mut conn = client(ClientOptions {
        max_body: CAP,
        ..ClientOptions::default()
    })
    .conn();
    let req = get(&format!("http://{addr}/?body_size={BODY}"));
    for round in 0..3 {
        let o = conn.send(&req).await;
        let seen = (o.error, o.status, o.body.len(), o.bytes_received);
        eprintln!("round {round}: (error, status, kept, read) = {seen:?}");
        assert_eq!(seen.0, Some(ErrorClass::BodyTooLarge), "{seen:?}");
        assert_eq!(seen.1, Some(200));
        assert_eq!(seen.2, CAP);
        // The cap plus what one read of hyper's buffer brings past it, not 64 MiB.
        assert!(
            o.bytes_received < 2 << 20,
            "round {round}: read {} bytes of a {BODY}-byte body",
            o.bytes_received
        );
        assert!(
            !o.reused,
            "round {round}: a cut connection cannot be reused"
        );
    }

    // The same through a run (`sloburn run`'s cap is 1 MiB): counted once per request under
    // its status, in the error table by its class.
    let url = format!("http://{addr}/?body_size=256MiB");
    let args = sloburn::run::RunArgs {
        url: Some(url),
        iterations: Some(6),
        vus: Some(2),
        quiet: true,
        ..sloburn::run::RunArgs::default()
    };
    let resolved = sloburn::run::resolve(&args, &mut std::io::sink())
        .unwrap()
        .unwrap();
    let report = sloburn::run::execute(&args, resolved, false)
        .await
        .unwrap()
        .report;
    stop.cancel();
    let s = &report.stats;
    assert_eq!(s.errors, [(ErrorClass::BodyTooLarge, 6)]);
    assert_eq!(s.statuses, [(200, 6)]);
    assert!(
        s.data_received < 6 * (4 << 20),
        "read {} bytes for six 256 MiB bodies",
        s.data_received
    );
    eprintln!("run: {} bytes received for 6 requests", s.data_received);
    let text = sloburn::load::summary::text("adhoc", &report);
    assert!(text.contains("  body_too_large: 6"), "{text}");
}

#[tokio::test]
async fn idle_close_after_each_response_is_not_an_error() {
    let (addr, accepted) = raw_server(|_, mut s| async move {
        if read_head(&mut s).await {
            let _ = s.write_all(OK).await;
        }
    })
    .await;
    let mut conn = client(ClientOptions::default()).conn();
    for o in send_n(&mut conn, &get(&format!("http://{addr}/")), 10).await {
        assert_ok(&o);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 10);
}

/// The first connection answers once, then takes the next request and closes without a word:
/// the race a keep-alive client loses when the server's idle timer fires as it sends.
async fn stale_after_one() -> (SocketAddr, Arc<AtomicUsize>) {
    raw_server(|i, mut s| async move {
        while read_head(&mut s).await {
            if i == 0 && s.write_all(OK).await.is_ok() && read_head(&mut s).await {
                return;
            }
            if s.write_all(OK).await.is_err() {
                return;
            }
        }
    })
    .await
}

#[tokio::test]
async fn stale_keep_alive_connection_is_retried_once() {
    let (addr, accepted) = stale_after_one().await;
    let mut conn = client(ClientOptions::default()).conn();
    let req = get(&format!("http://{addr}/"));
    let first = conn.send(&req).await;
    let second = conn.send(&req).await;
    assert_ok(&first);
    assert_ok(&second);
    assert!(!second.reused, "served by the fresh connection");
    assert!(second.phases.connecting > Duration::ZERO);
    assert_ne!(first.local_port, second.local_port);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn stale_connection_does_not_resend_a_post() {
    let (addr, accepted) = stale_after_one().await;
    let mut conn = client(ClientOptions::default()).conn();
    let req = RequestSpec {
        method: Method::POST,
        ..get(&format!("http://{addr}/"))
    };
    assert_ok(&conn.send(&req).await);
    let second = conn.send(&req).await;
    assert_eq!(second.error, Some(ErrorClass::Reset), "{second:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

async fn tls_server() -> SocketAddr {
    let key = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = key.cert.der().clone();
    let private = rustls::pki_types::PrivateKeyDer::Pkcs8(key.signing_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], private)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc = hyper::service::service_fn(|_req| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"secure"))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn tls_verifies_by_default_and_can_skip_verification() {
    let addr = tls_server().await;
    let req = get(&format!("https://localhost:{}/", addr.port()));

    let o = client(ClientOptions::default()).conn().send(&req).await;
    assert_eq!(
        o.error,
        Some(ErrorClass::Tls),
        "self-signed must fail: {o:?}"
    );
    assert!(o.phases.tls_handshaking > Duration::ZERO);

    let mut conn = client(ClientOptions {
        insecure_skip_verify: true,
        ..ClientOptions::default()
    })
    .conn();
    let first = conn.send(&req).await;
    assert_ok(&first);
    assert_eq!(&first.body[..], b"secure");
    assert!(first.phases.tls_handshaking > Duration::ZERO);
    let second = conn.send(&req).await;
    assert_ok(&second);
    assert!(second.reused);
    assert_eq!(second.phases.tls_handshaking, Duration::ZERO);
    assert!(second.phases.waiting > Duration::ZERO);
}

#[tokio::test]
async fn full_accept_queue_is_a_connect_timeout() {
    // A listener that never accepts: once its accept queue is full, Linux drops further SYNs,
    // so a connect hangs exactly as it does towards a black-holed address.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    let mut full = false;
    for _ in 0..16 {
        match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr)).await {
            Ok(Ok(s)) => fillers.push(s),
            Ok(Err(e)) => panic!("filler connect failed: {e}"),
            Err(_) => {
                full = true;
                break;
            }
        }
    }
    assert!(full, "accept queue never filled");
    let mut conn = client(ClientOptions {
        timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    })
    .conn();
    let o = conn.send(&get(&format!("http://{addr}/"))).await;
    assert_eq!(o.error, Some(ErrorClass::ConnectTimeout), "{o:?}");
    assert!(
        o.phases.connecting >= Duration::from_millis(250),
        "{:?}",
        o.phases
    );
    drop(listener);
}

#[tokio::test]
async fn stalled_body_is_a_timeout() {
    let (addr, _) = raw_server(|_, mut s| async move {
        if read_head(&mut s).await {
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nstart")
                .await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
    .await;
    let mut conn = client(ClientOptions {
        timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    })
    .conn();
    let o = conn.send(&get(&format!("http://{addr}/"))).await;
    assert_eq!(o.error, Some(ErrorClass::Timeout), "{o:?}");
    assert_eq!(o.status, Some(200));
    assert!(
        o.phases.receiving >= Duration::from_millis(200),
        "{:?}",
        o.phases
    );
}

/// A nameserver that reads queries and never answers.
async fn silent_nameserver() -> (SocketAddr, Arc<AtomicUsize>) {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = sock.local_addr().unwrap();
    let received = Arc::new(AtomicUsize::new(0));
    let count = received.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while sock.recv_from(&mut buf).await.is_ok() {
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (addr, received)
}

fn single_name_resolver(nameservers: Vec<SocketAddr>, attempts: u32) -> Resolver {
    Resolver::new(
        ResolverConfig {
            nameservers,
            search: vec![],
            ndots: 1,
            timeout: Duration::from_millis(100),
            attempts,
        },
        HostsFile::default(),
    )
}

#[tokio::test]
async fn silent_nameserver_is_skipped_then_times_out() {
    let (silent, received) = silent_nameserver().await;
    let (good, names) = dns_server("api.shop", [127, 0, 0, 1], 60).await;

    let lookup = single_name_resolver(vec![silent, good], 2)
        .lookup("api.shop")
        .await
        .unwrap();
    assert_eq!(lookup.addrs, vec![IpAddr::from([127, 0, 0, 1])]);
    assert_eq!(
        received.load(Ordering::SeqCst),
        2,
        "A and AAAA to the silent one first"
    );
    assert_eq!(names.lock().unwrap().len(), 2);

    received.store(0, Ordering::SeqCst);
    let began = Instant::now();
    let err = single_name_resolver(vec![silent], 2)
        .lookup("api.shop")
        .await
        .unwrap_err();
    assert!(
        matches!(err, sloburn::http::DnsError::Timeout { .. }),
        "{err}"
    );
    assert_eq!(
        received.load(Ordering::SeqCst),
        4,
        "two attempts of A and AAAA"
    );
    assert!(began.elapsed() >= Duration::from_millis(190));
}

#[tokio::test]
async fn reply_with_the_wrong_id_is_ignored() {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let ns = sock.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = sock.recv_from(&mut buf).await {
            let (_, query) = read_query(&buf[..n]);
            for (id_flip, ip) in [(0xff00u16, [10, 9, 9, 9]), (0, [127, 0, 0, 2])] {
                let mut resp = reply(&query, "spoof.test", ip, 60);
                resp.metadata.id ^= id_flip;
                let _ = sock.send_to(&resp.to_vec().unwrap(), peer).await;
            }
        }
    });
    let lookup = single_name_resolver(vec![ns], 1)
        .lookup("spoof.test")
        .await
        .unwrap();
    assert_eq!(lookup.addrs, vec![IpAddr::from([127, 0, 0, 2])]);
}

/// What the truncating nameserver saw.
#[derive(Default)]
struct TruncatingSeen {
    udp: AtomicUsize,
    tcp: AtomicUsize,
    /// The EDNS payload size of each UDP query (0 without EDNS).
    edns_payloads: Mutex<Vec<u16>>,
}

/// A nameserver on one 127.0.0.1 port for UDP and TCP: every UDP query gets the TC bit and no
/// answers; over TCP (2-byte length framing) `answer` gets its A record `ip`.
async fn truncating_nameserver(
    answer: &'static str,
    ip: [u8; 4],
) -> (SocketAddr, Arc<TruncatingSeen>) {
    // The UDP port is free for TCP too almost always; bind again if not.
    let (udp, tcp) = loop {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        if let Ok(tcp) = TcpListener::bind(udp.local_addr().unwrap()).await {
            break (udp, tcp);
        }
    };
    let addr = udp.local_addr().unwrap();
    let seen = Arc::new(TruncatingSeen::default());
    let udp_seen = seen.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 512];
        while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
            let (_, query) = read_query(&buf[..n]);
            udp_seen.udp.fetch_add(1, Ordering::SeqCst);
            let payload = query.edns.as_ref().map_or(0, |e| e.max_payload());
            udp_seen.edns_payloads.lock().unwrap().push(payload);
            let mut resp = Message::response(query.metadata.id, OpCode::Query);
            resp.metadata.truncation = true;
            resp.add_query(query.queries[0].clone());
            let _ = udp.send_to(&resp.to_vec().unwrap(), peer).await;
        }
    });
    let tcp_seen = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = tcp.accept().await {
            let seen = tcp_seen.clone();
            tokio::spawn(async move {
                while let Ok(len) = stream.read_u16().await {
                    let mut msg = vec![0u8; usize::from(len)];
                    stream.read_exact(&mut msg).await.unwrap();
                    seen.tcp.fetch_add(1, Ordering::SeqCst);
                    let (_, query) = read_query(&msg);
                    let resp = reply(&query, answer, ip, 60).to_vec().unwrap();
                    let mut framed = u16::try_from(resp.len()).unwrap().to_be_bytes().to_vec();
                    framed.extend_from_slice(&resp);
                    if stream.write_all(&framed).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn truncated_udp_answer_is_asked_again_over_tcp() {
    let (ns, seen) = truncating_nameserver("big.test", [127, 0, 0, 9]).await;
    let lookup = single_name_resolver(vec![ns], 1)
        .lookup("big.test")
        .await
        .unwrap();
    assert_eq!(lookup.addrs, vec![IpAddr::from([127, 0, 0, 9])]);
    assert_eq!(lookup.tried, ["big.test"]);
    assert_eq!(seen.udp.load(Ordering::SeqCst), 2, "A and AAAA over UDP");
    assert_eq!(seen.tcp.load(Ordering::SeqCst), 2, "both again over TCP");
    assert_eq!(
        *seen.edns_payloads.lock().unwrap(),
        [1232, 1232],
        "UDP queries carry EDNS"
    );
}
