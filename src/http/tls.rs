//! The client's TLS: trust roots (webpki's, or a CA file's in their place), an optional client
//! certificate (mTLS), the certificate name to check (SNI), the lowest protocol version, ALPN,
//! and the verifier of `insecure`. Also the stream type (plain TCP or TLS) hyper runs on.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::client::TlsStream;

use super::rx::RxTcp;

/// The lowest TLS version a client accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsVersion {
    #[default]
    Tls12,
    Tls13,
}

/// A client certificate chain with its private key, for servers that ask for one.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
}

/// A target's TLS settings, already read and parsed (config reads the files).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// Trust anchors; when empty, webpki's roots.
    pub ca: Vec<CertificateDer<'static>>,
    pub client_cert: Option<ClientCert>,
    /// The name sent as SNI and checked in the server's certificate, in place of the URL host.
    pub server_name: Option<String>,
    pub min_version: TlsVersion,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("TlsOptions")
            .field("ca_certs", &self.ca.len())
            .field("client_cert", &self.client_cert.is_some())
            .field("server_name", &self.server_name)
            .field("min_version", &self.min_version)
            .finish()
    }
}

/// Every certificate of a PEM file; an error when there is none or one is malformed.
pub fn parse_certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err("holds no `BEGIN CERTIFICATE` block".into());
    }
    // Their DER is parsed by `client_config`, which config calls before any run.
    Ok(certs)
}

/// The first private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn parse_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => "holds no PEM private key".to_string(),
        e => format!("not a PEM private key: {e}"),
    })
}

/// The rustls config for `opts` offering `alpn`; `Err` when the key does not fit the
/// certificate or a CA certificate is unusable (config reports that before any run).
pub fn client_config(
    opts: &TlsOptions,
    insecure: bool,
    alpn: &[&[u8]],
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&'static rustls::SupportedProtocolVersion] = match opts.min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(SkipVerify(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        if opts.ca.is_empty() {
            roots.roots = webpki_roots::TLS_SERVER_ROOTS.to_vec();
        } else {
            for cert in &opts.ca {
                roots
                    .add(cert.clone())
                    .map_err(|e| format!("a CA certificate is not a usable trust anchor: {e}"))?;
            }
        }
        builder.with_root_certificates(roots)
    };
    let mut config = match &opts.client_cert {
        Some(c) => builder
            .with_client_auth_cert(c.chain.clone(), c.key.clone_key())
            .map_err(|e| format!("the key does not go with the certificate: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// What shapes a rustls config: everything in [`client_config`]'s arguments (the SNI name is
/// per connection, so not here).
struct Shape {
    ca: Vec<CertificateDer<'static>>,
    client_cert: Option<ClientCert>,
    min_version: TlsVersion,
    insecure: bool,
    alpn: Vec<Vec<u8>>,
}

impl Shape {
    fn fits(&self, opts: &TlsOptions, insecure: bool, alpn: &[&[u8]]) -> bool {
        self.insecure == insecure
            && self.min_version == opts.min_version
            && self.alpn.iter().map(Vec::as_slice).eq(alpn.iter().copied())
            && self.ca == opts.ca
            && self.client_cert == opts.client_cert
    }
}

/// How many distinct configs are kept; the oldest goes first.
const KEPT_CONFIGS: usize = 64;

static CONFIGS: Mutex<VecDeque<(Shape, Arc<rustls::ClientConfig>)>> = Mutex::new(VecDeque::new());

/// [`client_config`], built once per distinct options and kept: the daemon makes a client per
/// run, and building the roots, the verifier and the provider each time cost 24 KB and tens of
/// microseconds per run (1,000 profiles starting together). Each call still gets a session
/// cache of its own, so a run resumes only the sessions it made itself, as before.
pub fn shared_client_config(
    opts: &TlsOptions,
    insecure: bool,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, String> {
    let kept = CONFIGS.lock().ok().and_then(|c| {
        c.iter()
            .find(|(shape, _)| shape.fits(opts, insecure, alpn))
            .map(|(_, config)| config.clone())
    });
    let base = match kept {
        Some(config) => config,
        None => {
            let config = Arc::new(client_config(opts, insecure, alpn)?);
            if let Ok(mut c) = CONFIGS.lock() {
                if c.len() >= KEPT_CONFIGS {
                    c.pop_front();
                }
                let shape = Shape {
                    ca: opts.ca.clone(),
                    client_cert: opts.client_cert.clone(),
                    min_version: opts.min_version,
                    insecure,
                    alpn: alpn.iter().map(|p| p.to_vec()).collect(),
                };
                c.push_back((shape, config.clone()));
            }
            config
        }
    };
    let mut config = (*base).clone();
    config.resumption = rustls::client::Resumption::default();
    Ok(Arc::new(config))
}

/// The name to send as SNI and verify: `server_name` when set, else the URL host.
pub(crate) fn server_name(opts: &TlsOptions, host: &str) -> Option<ServerName<'static>> {
    let host = opts.server_name.as_deref().unwrap_or(host);
    let host = host.trim_start_matches('[').trim_end_matches([']', '.']);
    ServerName::try_from(host.to_string()).ok()
}

/// Accepts any certificate but still checks handshake signatures, so the handshake costs what
/// a verified one does minus the chain walk.
#[derive(Debug)]
struct SkipVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for SkipVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Plain TCP or TLS over TCP, as one stream type for hyper.
pub(crate) enum Stream {
    Plain(RxTcp),
    Tls(Box<TlsStream<RxTcp>>),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many kept configs have `alpn`.
    fn kept_with(alpn: &[u8]) -> usize {
        CONFIGS
            .lock()
            .unwrap()
            .iter()
            .filter(|(shape, _)| shape.alpn.iter().any(|p| p == alpn))
            .count()
    }

    /// Clients of the same options share one built config (each with its own session cache);
    /// other options get their own, and options that do not build are still refused.
    #[test]
    fn configs_are_built_once_per_shape() {
        let alpn: &[&[u8]] = &[b"sloburn-test-shape"];
        let opts = TlsOptions::default();
        let a = shared_client_config(&opts, false, alpn).unwrap();
        let b = shared_client_config(&opts, false, alpn).unwrap();
        assert!(
            !Arc::ptr_eq(&a, &b),
            "each client gets its own session cache"
        );
        assert_eq!(a.alpn_protocols, [b"sloburn-test-shape".to_vec()]);
        assert_eq!(kept_with(b"sloburn-test-shape"), 1);
        shared_client_config(&opts, true, alpn).unwrap();
        let tls13 = TlsOptions {
            min_version: TlsVersion::Tls13,
            ..TlsOptions::default()
        };
        shared_client_config(&tls13, false, alpn).unwrap();
        assert_eq!(kept_with(b"sloburn-test-shape"), 3);
        let junk = parse_certs(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        let bad = TlsOptions {
            ca: junk.unwrap(),
            ..TlsOptions::default()
        };
        assert!(shared_client_config(&bad, false, alpn).is_err());
        assert!(shared_client_config(&bad, false, alpn).is_err());
        assert_eq!(kept_with(b"sloburn-test-shape"), 3);
    }

    #[test]
    fn pem_errors_are_messages_not_panics() {
        assert!(
            parse_certs(b"")
                .unwrap_err()
                .contains("no `BEGIN CERTIFICATE`")
        );
        let junk = parse_certs(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        let ca = TlsOptions {
            ca: junk.unwrap(),
            ..TlsOptions::default()
        };
        assert!(
            client_config(&ca, false, &[])
                .unwrap_err()
                .contains("trust anchor")
        );
        assert!(
            parse_key(b"hello")
                .unwrap_err()
                .contains("no PEM private key")
        );
    }

    #[test]
    fn a_key_of_another_certificate_is_refused_and_a_matching_one_accepted() {
        let a = rcgen::generate_simple_self_signed(vec!["a.test".into()]).unwrap();
        let b = rcgen::generate_simple_self_signed(vec!["b.test".into()]).unwrap();
        let chain = parse_certs(a.cert.pem().as_bytes()).unwrap();
        let opts = |key: &str| TlsOptions {
            client_cert: Some(ClientCert {
                chain: chain.clone(),
                key: Arc::new(parse_key(key.as_bytes()).unwrap()),
            }),
            ..TlsOptions::default()
        };
        let err = client_config(&opts(&b.signing_key.serialize_pem()), false, &[]).unwrap_err();
        assert!(err.contains("does not go with"), "{err}");
        client_config(&opts(&a.signing_key.serialize_pem()), false, &[b"h2"]).unwrap();
    }

    #[test]
    fn server_name_overrides_the_url_host() {
        let opts = TlsOptions {
            server_name: Some("shop.internal".into()),
            ..TlsOptions::default()
        };
        assert_eq!(
            server_name(&opts, "127.0.0.1"),
            Some(ServerName::try_from("shop.internal").unwrap())
        );
        assert_eq!(
            server_name(&TlsOptions::default(), "[::1]"),
            Some(ServerName::try_from("::1").unwrap().to_owned())
        );
    }
}
