//! Probes as SLIs (issue 32, part 3): `tcp://`, `tls://` and `dns://` targets against servers
//! these tests start on 127.0.0.1: a closed and a slow TCP port, TLS with certificates made
//! here (one expiring in 5 days: the warning tier, never the availability SLI), and a DNS
//! server with a good, a slow, a failing and a truncated answer.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, TXT};
use hickory_proto::rr::{Name, RData, Record};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::PrivateKeyDer;
use sloburn::http::probe::ProbeOptions;
use sloburn::http::{
    Client, ClientOptions, ErrorClass, HostsFile, Outcome, Protocol, RequestSpec, Resolver,
    ResolverConfig,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use crate::support::{free_port, get_blocking, metric_sum, serve_in_process};

fn client(protocol: Protocol, probe: ProbeOptions, tls: sloburn::http::TlsOptions) -> Client {
    Client::new(
        ClientOptions {
            timeout: Duration::from_secs(2),
            protocol,
            probe,
            tls,
            ..ClientOptions::default()
        },
        Arc::new(Resolver::new(
            ResolverConfig::default(),
            HostsFile::default(),
        )),
    )
}

async fn probe(c: &Client, url: &str, body: &'static [u8]) -> Outcome {
    let req = RequestSpec {
        method: http::Method::GET,
        uri: url.parse().unwrap(),
        headers: http::HeaderMap::new(),
        body: bytes::Bytes::from_static(body),
    };
    c.conn().send(&req).await
}

/// A TCP server: each connection waits `delay`, then answers `PONG\n` to whatever it reads.
async fn tcp_server(delay: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf).await;
                tokio::time::sleep(delay).await;
                let _ = s.write_all(b"PONG\n").await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn tcp_probes_a_closed_a_slow_and_an_answering_port() {
    let c = client(Protocol::Tcp, ProbeOptions::default(), Default::default());
    let closed = free_port();
    let out = probe(&c, &format!("tcp://127.0.0.1:{closed}"), b"").await;
    assert_eq!(out.error, Some(ErrorClass::ConnectRefused), "{out:?}");
    assert_eq!(out.status, None);

    let fast = tcp_server(Duration::ZERO).await;
    let out = probe(&c, &format!("tcp://{fast}"), b"").await;
    assert_eq!((out.status, out.error), (Some(0), None), "{out:?}");
    assert_eq!(out.protocol, Protocol::Tcp);
    assert!(out.duration() >= out.phases.connecting);

    let expecting = ProbeOptions {
        expect: Some(bytes::Bytes::from_static(b"PONG")),
        ..ProbeOptions::default()
    };
    let c = client(Protocol::Tcp, expecting, Default::default());
    let slow = tcp_server(Duration::from_millis(300)).await;
    let out = probe(&c, &format!("tcp://{slow}"), b"PING\n").await;
    assert_eq!((out.status, out.error), (Some(0), None), "{out:?}");
    assert_eq!(&out.body[..], b"PONG\n");
    assert!(
        out.phases.waiting >= Duration::from_millis(290),
        "the slow answer is waiting: {:?}",
        out.phases
    );
    assert!(out.duration() >= Duration::from_millis(290));

    // A server that closes without saying what is expected: the answer is kept for the
    // `expect` check to fail on.
    let never = ProbeOptions {
        expect: Some(bytes::Bytes::from_static(b"READY")),
        ..ProbeOptions::default()
    };
    let c = client(Protocol::Tcp, never, Default::default());
    let out = probe(&c, &format!("tcp://{fast}"), b"PING\n").await;
    assert_eq!(
        (out.status, &out.body[..]),
        (Some(0), &b"PONG\n"[..]),
        "{out:?}"
    );
    // One that holds the connection silent: the probe ends at its timeout (2 s).
    let silent = tcp_server(Duration::from_secs(30)).await;
    let out = probe(&c, &format!("tcp://{silent}"), b"PING\n").await;
    assert_eq!(out.error, Some(ErrorClass::Timeout), "{out:?}");
}

/// A CA and a server certificate for 127.0.0.1 and localhost that expires `days` from now,
/// as PEM files `ca.pem` (in `dir`) and the server's config.
fn pki(dir: &Path, days: u64) -> rustls::ServerConfig {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    params.not_before = epoch + (now - Duration::from_secs(86_400));
    params.not_after = epoch + (now + Duration::from_secs(days * 86_400));
    let cert = params.signed_by(&key, &ca).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.as_ref().pem()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap()
}

async fn tls_server(config: rustls::ServerConfig) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut s) = acceptor.accept(tcp).await {
                    let mut buf = [0u8; 64];
                    // Answers a line; a probe that only handshakes closes first.
                    if let Ok(n) = s.read(&mut buf).await
                        && n > 0
                    {
                        let _ = s.write_all(b"220 ready\n").await;
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn tls_probes_report_the_chain_expiry_and_fail_an_untrusted_chain() {
    let dir = tempfile::tempdir().unwrap();
    let addr = tls_server(pki(dir.path(), 5)).await;
    let ca = std::fs::read(dir.path().join("ca.pem")).unwrap();
    let tls = sloburn::http::TlsOptions {
        ca: sloburn::http::tls::parse_certs(&ca).unwrap(),
        ..Default::default()
    };
    let c = client(Protocol::Tls, ProbeOptions::default(), tls);
    let out = probe(&c, &format!("tls://{addr}"), b"").await;
    assert_eq!((out.status, out.error), (Some(0), None), "{out:?}");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let left = out.cert_not_after.unwrap() - now;
    assert!((4 * 86_400..=5 * 86_400).contains(&left), "{left}");
    let report: serde_json::Value = serde_json::from_slice(&out.body).unwrap();
    assert!(
        report["expires_in_days"].as_f64().unwrap() <= 5.0,
        "{report}"
    );
    assert!(out.phases.tls_handshaking > Duration::ZERO);

    // Untrusted: the webpki roots do not know this CA.
    let c = client(Protocol::Tls, ProbeOptions::default(), Default::default());
    let out = probe(&c, &format!("tls://{addr}"), b"").await;
    assert_eq!(out.error, Some(ErrorClass::Tls), "{out:?}");
}

/// Issue 43: a TLS failure said only `error=tls`. Its reason is on the outcome (and in failure
/// evidence) while the class stays `tls`; a server that is down has no TLS reason and no
/// certificate, so nothing about one can be said.
#[tokio::test]
async fn a_tls_failure_names_its_reason_and_a_down_server_shows_no_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let addr = tls_server(pki(dir.path(), 5)).await;
    let ca = sloburn::http::tls::parse_certs(&std::fs::read(dir.path().join("ca.pem")).unwrap())
        .unwrap();
    let untrusted = client(Protocol::Tls, ProbeOptions::default(), Default::default());
    let out = probe(&untrusted, &format!("tls://{addr}"), b"").await;
    assert_eq!(
        (out.error, out.error_reason, out.cert_seconds_left),
        (Some(ErrorClass::Tls), Some("unknown issuer"), None),
        "{out:?}"
    );
    let other_name = sloburn::http::TlsOptions {
        ca,
        server_name: Some("other.example".into()),
        ..Default::default()
    };
    let c = client(Protocol::Tls, ProbeOptions::default(), other_name);
    let out = probe(&c, &format!("tls://{addr}"), b"").await;
    assert_eq!(
        (out.error, out.error_reason),
        (Some(ErrorClass::Tls), Some("name mismatch")),
        "{out:?}"
    );
    let down = format!("tls://127.0.0.1:{}", free_port());
    let out = probe(&untrusted, &down, b"").await;
    assert_eq!(
        (out.error, out.error_reason, out.cert_seconds_left),
        (Some(ErrorClass::ConnectRefused), None, None),
        "{out:?}"
    );
}

/// Issue 43: the certificate warning ("renew it") fired for a server that was down or whose
/// chain was untrusted, where no certificate was seen: every check fails on a failed probe.
/// It fires now only when the check failed more often than the target's probes did.
#[test]
fn the_certificate_warning_is_quiet_when_no_certificate_was_seen() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "targets:\n  down:\n    url: tls://127.0.0.1:8443\n  untrusted:\n    url: tls://127.0.0.1:9443\n  expiring:\n    url: tls://127.0.0.1:10443\n",
    )
    .unwrap();
    let rules = crate::support::stdout_of(crate::support::sloburn().arg("rules").arg(&cfg));
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    let check = "check=\"certificate valid for 14d\"";
    std::fs::write(
        dir.path().join("test.yml"),
        format!(
            r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'sloburn_checks_total{{target="down",profile="p",step="request",{check},result="fail"}}'
        values: '0+1x90'
      - series: 'sloburn_http_reqs_total{{target="down",profile="p",step="request",status="0",error="connect_refused"}}'
        values: '0+1x90'
      - series: 'sloburn_checks_total{{target="untrusted",profile="p",step="request",{check},result="fail"}}'
        values: '0+2x90'
      - series: 'sloburn_http_reqs_total{{target="untrusted",profile="p",step="request",status="0",error="tls"}}'
        values: '0+2x90'
      - series: 'sloburn_checks_total{{target="expiring",profile="p",step="request",{check},result="fail"}}'
        values: '0+2x90'
      - series: 'sloburn_http_reqs_total{{target="expiring",profile="p",step="request",status="0",error="connect_refused"}}'
        values: '0+1x90'
      - series: 'sloburn_http_reqs_total{{target="expiring",profile="p",step="request",status="0",error="none"}}'
        values: '0+1x90'
      - series: 'sloburn_build_info{{version="t"}}'
        values: '1+0x90'
    alert_rule_test:
      - eval_time: 30m
        alertname: SloburnCertificateExpiring
        exp_alerts:
          - exp_labels: {{ severity: warning, target: expiring }}
            exp_annotations:
              summary: "the certificate of expiring fails `certificate valid for 14d`: renew it before it expires"
"#
        ),
    )
    .unwrap();
    crate::support::promtool_test_rules(dir.path(), &rules);
}

/// The warning tier: a certificate 5 days from expiry passes availability (the SLO counts
/// every probe good) and fails only the `certificate valid for 14d` check.
#[test]
fn an_expiring_certificate_warns_without_burning_the_availability_slo() {
    let rt = crate::support::runtime();
    let dir = tempfile::tempdir().unwrap();
    let addr = rt.block_on(tls_server(pki(dir.path(), 5)));
    let text = format!(
        r#"storage:
  path: "{data}"
  flush_interval: 1s
targets:
  cert:
    url: tls://{addr}
    tls: {{ ca: ca.pem }}
profiles:
  probe:
    target: cert
    every: 1h
    run_on_start: true
    executor: shared-iterations
    vus: 2
    iterations: 20
slos:
  cert-availability:
    target: cert
    sli: availability
    objective: 99.9
    period: 1d
"#,
        data = dir.path().join("data").display()
    );
    let d = rt.block_on(serve_in_process(&text, dir.path()));
    let base = format!("http://{}", d.addr);
    let metrics = crate::support::eventually(Duration::from_secs(30), || {
        let (_, body) = get_blocking(&format!("{base}/metrics"));
        (metric_sum(&body, "sloburn_slo_events_total{") >= 20.0).then_some(body)
    })
    .expect("20 probes reach the SLO");
    assert_eq!(
        metric_sum(
            &metrics,
            "sloburn_slo_events_total{slo=\"cert-availability\",result=\"bad\"}"
        ),
        0.0
    );
    let warned = metrics
        .lines()
        .filter(|l| {
            l.starts_with("sloburn_checks_total{")
                && l.contains("check=\"certificate valid for 14d\"")
                && l.contains("result=\"fail\"")
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum::<f64>();
    assert_eq!(warned, 20.0, "{metrics}");
    assert!(
        metrics.contains("sloburn_target_info{target=\"cert\",protocol=\"tls\"} 1"),
        "{metrics}"
    );
    rt.block_on(d.shutdown());
}

/// A DNS server on 127.0.0.1 (UDP and TCP on one port): `ok.test.` answers 192.0.2.1,
/// `slow.test.` the same after 300 ms, `fail.test.` SERVFAIL, `big.test.` 40 TXT records,
/// truncated over UDP and whole over TCP.
async fn dns_server() -> SocketAddr {
    // A free UDP port may be taken for TCP by another test: try again with another one.
    let mut bound = None;
    for _ in 0..50 {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        if let Ok(tcp) = TcpListener::bind(addr).await {
            bound = Some((udp, addr, tcp));
            break;
        }
    }
    let (udp, addr, tcp) = bound.expect("a port free for both UDP and TCP");
    fn answer(query: &[u8], over_udp: bool) -> Option<(Vec<u8>, Duration)> {
        let q = Message::from_vec(query).ok()?;
        let question = q.queries.first()?.clone();
        let mut m = Message::new(q.metadata.id, MessageType::Response, OpCode::Query);
        m.metadata.recursion_available = true;
        m.add_query(question.clone());
        let name = question.name().to_ascii();
        let mut delay = Duration::ZERO;
        match name.as_str() {
            "ok.test." | "slow.test." => {
                if name == "slow.test." {
                    delay = Duration::from_millis(300);
                }
                m.add_answer(Record::from_rdata(
                    question.name().clone(),
                    60,
                    RData::A(A::new(192, 0, 2, 1)),
                ));
            }
            "fail.test." => m.metadata.response_code = ResponseCode::ServFail,
            "big.test." if over_udp => m.metadata.truncation = true,
            "big.test." => {
                for i in 0..40 {
                    m.add_answer(Record::from_rdata(
                        Name::from_ascii("big.test.").unwrap(),
                        60,
                        RData::TXT(TXT::new(vec![format!("record {i} {}", "x".repeat(40))])),
                    ));
                }
            }
            _ => m.metadata.response_code = ResponseCode::NXDomain,
        }
        Some((m.to_vec().ok()?, delay))
    }
    let udp = Arc::new(udp);
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, from)) = udp.recv_from(&mut buf).await {
            if let Some((reply, delay)) = answer(&buf[..n], true) {
                let udp = udp.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = udp.send_to(&reply, from).await;
                });
            }
        }
    });
    tokio::spawn(async move {
        while let Ok((mut s, _)) = tcp.accept().await {
            tokio::spawn(async move {
                let Ok(len) = s.read_u16().await else { return };
                let mut q = vec![0u8; usize::from(len)];
                if s.read_exact(&mut q).await.is_err() {
                    return;
                }
                if let Some((reply, _)) = answer(&q, false) {
                    let _ = s.write_all(&(reply.len() as u16).to_be_bytes()).await;
                    let _ = s.write_all(&reply).await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn dns_probes_a_good_a_slow_a_failing_and_a_truncated_answer() {
    let server = dns_server().await;
    let c = client(Protocol::Dns, ProbeOptions::default(), Default::default());
    let out = probe(&c, &format!("dns://{server}/ok.test?type=A"), b"").await;
    assert_eq!((out.status, out.error), (Some(0), None), "{out:?}");
    assert_eq!(&out.body[..], b"192.0.2.1\n");
    assert!(out.status_is_ok());

    let out = probe(&c, &format!("dns://{server}/slow.test"), b"").await;
    assert_eq!(out.status, Some(0));
    assert!(
        out.duration() >= Duration::from_millis(290),
        "{:?}",
        out.phases
    );

    let out = probe(&c, &format!("dns://{server}/fail.test"), b"").await;
    assert_eq!(
        (out.status, out.error),
        (Some(2), None),
        "SERVFAIL is RCODE 2: {out:?}"
    );
    assert!(!out.status_is_ok());

    let out = probe(&c, &format!("dns://{server}/nope.test"), b"").await;
    assert_eq!(out.status, Some(3), "NXDOMAIN");

    let out = probe(&c, &format!("dns://{server}/big.test?type=TXT"), b"").await;
    assert_eq!((out.status, out.error), (Some(0), None), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.body).lines().count(), 40);

    // A UDP port held by a socket connected to another peer: the kernel delivers it nothing
    // from the probe and answers with ICMP "port unreachable", a refusal, at once. Held, the
    // port cannot be taken by anything else while the probe runs.
    let held = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    held.connect("127.0.0.1:9").unwrap();
    let closed = held.local_addr().unwrap().port();
    let out = probe(&c, &format!("dns://127.0.0.1:{closed}/ok.test"), b"").await;
    assert_eq!(out.error, Some(ErrorClass::ConnectRefused), "{out:?}");
    // A server that reads every query and never answers: the client's timeout (2 s).
    let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let out = probe(&c, &format!("dns://{silent_addr}/ok.test"), b"").await;
    assert_eq!(out.error, Some(ErrorClass::Timeout), "{out:?}");
    let mut query = [0u8; 512];
    let (n, _) = silent.try_recv_from(&mut query).unwrap();
    assert!(n > 12, "the query reached the silent server ({n} bytes)");
}

#[test]
fn check_names_bad_probe_fields_with_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("p.yaml");
    std::fs::write(
        &cfg,
        "targets:\n  a:\n    url: tcp://127.0.0.1\n  b:\n    url: dns://127.0.0.1/x?type=BOGUS\n  c:\n    url: tcp://127.0.0.1:5432\n    method: POST\n  d:\n    url: tcp://127.0.0.1:1/path\n    expiry_warning: 3d\n",
    )
    .unwrap();
    let out = crate::support::sloburn()
        .args(["check", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    for want in [
        "p.yaml:3:10: targets.a.url: a tcp:// probe needs a port",
        "p.yaml:5:10: targets.b.url: `BOGUS` is not a DNS record type",
        "p.yaml:8:13: targets.c.method: a tcp:// probe has no `method`",
        "targets.d.url: a tcp:// probe has no path or query",
        "targets.d.expiry_warning: a tcp:// probe has no `expiry_warning`",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// A WebSocket server on 127.0.0.1: echoes each message after `delay`; refuses with 401 an
/// upgrade to `/private` without `Authorization: Bearer t0k`; `/silent` never answers.
async fn ws_server(delay: Duration) -> SocketAddr {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut path = String::new();
                // The callback's type is tungstenite's: its error is the refusal response.
                #[allow(clippy::result_large_err)]
                let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                    path = req.uri().path().to_string();
                    let authorized = req
                        .headers()
                        .get("authorization")
                        .is_some_and(|v| v == "Bearer t0k");
                    if req.uri().path() == "/private" && !authorized {
                        let mut no = ErrorResponse::new(Some("no token".into()));
                        *no.status_mut() = http::StatusCode::UNAUTHORIZED;
                        return Err(no);
                    }
                    Ok(resp)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tcp, check).await else {
                    return;
                };
                while let Some(Ok(msg)) = ws.next().await {
                    if msg.is_text() || msg.is_binary() {
                        if path == "/silent" {
                            continue;
                        }
                        tokio::time::sleep(delay).await;
                        if ws.send(msg).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn websocket_sessions_time_the_upgrade_and_the_round_trip() {
    let expecting = |text: &'static str| ProbeOptions {
        expect: Some(bytes::Bytes::from_static(text.as_bytes())),
        ..ProbeOptions::default()
    };
    let fast = ws_server(Duration::ZERO).await;
    let c = client(Protocol::WebSocket, expecting("ping-1"), Default::default());
    let out = probe(&c, &format!("ws://{fast}/echo"), b"{\"ping\":\"ping-1\"}").await;
    assert_eq!((out.status, out.error), (Some(101), None), "{out:?}");
    assert!(out.status_is_ok());
    assert_eq!(&out.body[..], b"{\"ping\":\"ping-1\"}");
    assert_eq!(out.protocol, Protocol::WebSocket);

    let slow = ws_server(Duration::from_millis(300)).await;
    let out = probe(&c, &format!("ws://{slow}/echo"), b"ping-1").await;
    assert_eq!((out.status, out.error), (Some(101), None), "{out:?}");
    assert!(
        out.phases.waiting >= Duration::from_millis(290),
        "the round trip is waiting: {:?}",
        out.phases
    );
    assert!(out.duration() >= out.phases.waiting + out.phases.sending);

    // Refused upgrade: the server's status is the outcome, and not a good one.
    let out = probe(&c, &format!("ws://{fast}/private"), b"ping-1").await;
    assert_eq!((out.status, out.error), (Some(401), None), "{out:?}");
    assert!(!out.status_is_ok());
    let mut authorized = RequestSpec {
        method: http::Method::GET,
        uri: format!("ws://{fast}/private").parse().unwrap(),
        headers: http::HeaderMap::new(),
        body: bytes::Bytes::from_static(b"ping-1"),
    };
    authorized
        .headers
        .insert("authorization", "Bearer t0k".parse().unwrap());
    let out = c.conn().send(&authorized).await;
    assert_eq!(out.status, Some(101), "{out:?}");

    // No echo: the session ends at the timeout (2 s).
    let out = probe(&c, &format!("ws://{fast}/silent"), b"ping-1").await;
    assert_eq!(
        (out.status, out.error),
        (Some(101), Some(ErrorClass::Timeout)),
        "{out:?}"
    );
    let closed = free_port();
    let out = probe(&c, &format!("ws://127.0.0.1:{closed}/"), b"x").await;
    assert_eq!(out.error, Some(ErrorClass::ConnectRefused), "{out:?}");
}

/// `sloburn run` on a WebSocket target: every session a request, checks on the echoed JSON,
/// and the k6 summary's counts.
#[test]
fn sloburn_run_drives_websocket_sessions_with_checks() {
    let rt = crate::support::runtime();
    let addr = rt.block_on(ws_server(Duration::ZERO));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ws.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"targets:
  chat:
    url: ws://{addr}/chat
    body: '{{"op":"ping","n":7}}'
    expect: '"ping"'
    timeout: 2s
    checks:
      - json: {{ path: "$.n", equals: 7 }}
      - duration_under: 1s
profiles:
  sessions:
    target: chat
    executor: shared-iterations
    vus: 4
    iterations: 40
    thresholds:
      http_req_failed: ["rate==0"]
      checks: ["rate==1"]
"#
        ),
    )
    .unwrap();
    let export = dir.path().join("summary.json");
    let out = crate::support::sloburn()
        .args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
        .arg(&export)
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["metrics"]["http_reqs"]["count"], 40, "{v}");
    assert_eq!(v["metrics"]["checks"]["passes"], 120, "{v}");
    assert_eq!(v["metrics"]["checks"]["fails"], 0, "{v}");
    drop(rt);
}

/// A journey that logs in over HTTP and opens a WebSocket session with the captured token:
/// the step's own `ws://` URL picks the protocol, its headers are templated.
#[test]
fn a_journey_logs_in_over_http_then_opens_a_websocket_with_the_token() {
    let rt = crate::support::runtime();
    let ws = rt.block_on(ws_server(Duration::ZERO));
    let login = crate::support::serve_on_thread(axum::Router::new().route(
        "/login",
        axum::routing::post(|| async { axum::Json(serde_json::json!({ "token": "t0k" })) }),
    ));
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("j.yaml");
    std::fs::write(
        &cfg,
        format!(
            r#"targets:
  api:
    url: http://{login}/
    timeout: 2s
journeys:
  chat:
    target: api
    steps:
      - name: login
        method: POST
        path: /login
        checks: [ {{ status: 200 }} ]
        capture: {{ token: {{ json: "$.token" }} }}
      - name: open
        url: ws://{ws}/private
        headers: {{ Authorization: "Bearer ${{token}}" }}
        body: "hello ${{vu}}"
        checks: [ {{ body_contains: "hello" }} ]
profiles:
  chatters:
    journey: chat
    executor: shared-iterations
    vus: 2
    iterations: 10
    thresholds:
      http_req_failed: ["rate==0"]
      checks: ["rate==1"]
"#,
            login = login.addr
        ),
    )
    .unwrap();
    let export = dir.path().join("summary.json");
    let out = crate::support::sloburn()
        .args(["run", cfg.to_str().unwrap(), "--quiet", "--summary-export"])
        .arg(&export)
        .output()
        .unwrap();
    let text = crate::support::all_output(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&export).unwrap()).unwrap();
    assert_eq!(v["metrics"]["http_reqs"]["count"], 20, "{v}");
    assert_eq!(v["metrics"]["checks"]["fails"], 0, "{v}");
    assert_eq!(v["metrics"]["checks"]["passes"], 20, "{v}");
    drop(rt);
}

/// `sloburn rules` gives each TLS probe a `warning` alert on its certificate check; promtool
/// shows it firing while the check fails and quiet for a certificate that passes.
#[test]
fn the_certificate_warning_alert_fires_on_the_failing_check_only() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "targets:\n  old-cert:\n    url: tls://127.0.0.1:8443\n  new-cert:\n    url: tls://127.0.0.1:9443\n    expiry_warning: 30d\n",
    )
    .unwrap();
    let rules = crate::support::stdout_of(crate::support::sloburn().arg("rules").arg(&cfg));
    assert!(rules.contains("SloburnCertificateExpiring"), "{rules}");
    std::fs::write(dir.path().join("rules.yml"), &rules).unwrap();
    std::fs::write(
        dir.path().join("test.yml"),
        r#"rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'sloburn_checks_total{target="old-cert",profile="p",step="request",check="certificate valid for 14d",result="fail"}'
        values: '0+1x90'
      - series: 'sloburn_checks_total{target="new-cert",profile="p",step="request",check="certificate valid for 30d",result="fail"}'
        values: '0+0x90'
      - series: 'sloburn_checks_total{target="new-cert",profile="p",step="request",check="certificate valid for 30d",result="pass"}'
        values: '0+1x90'
      - series: 'sloburn_build_info{version="t"}'
        values: '1+0x90'
    alert_rule_test:
      - eval_time: 30m
        alertname: SloburnCertificateExpiring
        exp_alerts:
          - exp_labels: { severity: warning, target: old-cert }
            exp_annotations:
              summary: "the certificate of old-cert fails `certificate valid for 14d`: renew it before it expires"
"#,
    )
    .unwrap();
    crate::support::promtool_test_rules(dir.path(), &rules);
}

/// A journey over an HTTP target may send a step to a `grpc://` URL (issue 32: without a
/// `grpc:` block, the health check); an HTTP field on that step is an error where it is.
#[test]
fn a_grpc_step_in_an_http_journey_checks_and_its_http_fields_are_positioned_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("j.yaml");
    let text = "targets:\n  api:\n    url: http://127.0.0.1:1/\njourneys:\n  j:\n    target: api\n    steps:\n      - name: login\n        path: /login\n      - name: call\n        url: grpc://127.0.0.1:2\n";
    let check = |text: &str| {
        std::fs::write(&cfg, text).unwrap();
        let out = crate::support::sloburn()
            .args(["check", cfg.to_str().unwrap()])
            .output()
            .unwrap();
        (out.status.code(), crate::support::all_output(&out))
    };
    let (code, out) = check(text);
    assert_eq!(code, Some(0), "{out}");
    let (code, out) = check(&format!("{text}        method: POST\n"));
    assert_eq!(code, Some(78), "{out}");
    assert!(
        out.contains("j.yaml:12:17: journeys.j.steps[1].method: a gRPC step has no `method`"),
        "{out}"
    );
}
