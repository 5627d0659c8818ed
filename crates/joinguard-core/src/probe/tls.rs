//! TLS handshake probe: a fresh TCP connection, then a full rustls handshake, each timed.
//!
//! This module owns verifying a server against the given CA (server name = the target's host; IP
//! literals are matched against IP SANs), reporting the server certificate's validity window for
//! the clock-skew check, and classifying failures. A certificate the CA does not vouch for is a
//! [`TrustFailure`], distinct from other handshake errors, because the CLI exits 3 for it.
//!
//! Every handshake is a full one: each probe builds its own client configuration with resumption
//! disabled, so no session ticket shortens a later sample.
//!
//! Without a client identity, a server that requires client certificates (etcd with
//! `--client-cert-auth`) still lets the client finish a TLS 1.3 handshake: the client answers the
//! CertificateRequest with an empty Certificate and sends Finished, and the server's
//! `certificate_required` alert only arrives on the first read. So the handshake time measured here
//! is real (one round trip plus crypto) and [`TlsHandshake::client_cert_requested`] says the
//! server would refuse the session. Over TLS 1.2 the server aborts before its Finished and the
//! handshake fails with [`TlsFailure::Handshake`].

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::identity::{crypto_provider, CaBundle, ClientIdentity, IdentityError};
use super::tcp::{self, ms};
use super::{ProbeFailure, Sample};
pub use crate::failure::{CertValidity, TrustFailure, TrustFailureKind};
use crate::target::Target;

impl CertValidity {
    /// Parses the validity of a DER certificate; `None` if it is not X.509.
    pub fn from_der(der: &[u8]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let to_time = |t: i64| {
            if t >= 0 {
                SystemTime::UNIX_EPOCH + Duration::from_secs(t.unsigned_abs())
            } else {
                SystemTime::UNIX_EPOCH - Duration::from_secs(t.unsigned_abs())
            }
        };
        Some(CertValidity {
            not_before: to_time(cert.validity().not_before.timestamp()),
            not_after: to_time(cert.validity().not_after.timestamp()),
            subject: cert.subject().to_string(),
        })
    }
}

impl TrustFailure {
    /// Classifies a rustls certificate error.
    pub(crate) fn from_certificate_error(err: &CertificateError) -> Self {
        let kind = match err {
            CertificateError::UnknownIssuer => TrustFailureKind::UnknownIssuer,
            CertificateError::BadSignature => TrustFailureKind::BadSignature,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TrustFailureKind::NameMismatch
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                TrustFailureKind::Expired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                TrustFailureKind::NotYetValid
            }
            _ => TrustFailureKind::Other,
        };
        let ca_as_leaf = matches!(err, CertificateError::Other(o)
            if matches!(o.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity)));
        let detail = match kind {
            TrustFailureKind::UnknownIssuer => {
                "it is not signed by the given CA (unknown issuer); check the CA file".to_string()
            }
            _ if ca_as_leaf => "the server presents a CA certificate as its own: it must serve a \
                 certificate signed by the CA (kubeadm: etcd/server.crt, apiserver.crt), not the \
                 CA itself"
                .to_string(),
            // rustls' words without its "invalid peer certificate: " lead.
            _ => {
                let text = rustls::Error::InvalidCertificate(err.clone()).to_string();
                text.strip_prefix("invalid peer certificate: ")
                    .map(str::to_string)
                    .unwrap_or(text)
            }
        };
        let detail = format!("server certificate not trusted: {detail}");
        TrustFailure::new(kind, detail)
    }
}

/// Why a TLS handshake probe failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TlsFailure {
    /// The TCP phase failed (refused, timed out, unreachable).
    #[error("TCP: {0}")]
    Tcp(ProbeFailure),
    /// The per-sample timeout elapsed during the TLS handshake.
    #[error("TLS handshake timed out after {0} ms")]
    Timeout(u64),
    /// Our verifier rejected the server certificate.
    #[error("{0}")]
    Untrusted(TrustFailure),
    /// Any other handshake failure: an alert from the server (e.g. it rejected our client
    /// certificate), no common cipher suite or protocol, missing ALPN, a reset mid-handshake.
    #[error("TLS handshake failed: {0}")]
    Handshake(String),
    /// The server answered with something that is not TLS (a plain HTTP listener, another
    /// service on the port): a wrong endpoint, not a certificate problem.
    #[error(
        "the server does not speak TLS on this port (its answer is not a TLS record: {0}); a \
         plain HTTP listener or another service on the port?"
    )]
    NotTls(String),
}

impl TlsFailure {
    /// The trust failure, if that is what this is (the CLI exits 3 for it).
    pub fn trust_failure(&self) -> Option<&TrustFailure> {
        match self {
            TlsFailure::Untrusted(t) => Some(t),
            _ => None,
        }
    }

    /// Classifies an error from the rustls handshake (tokio-rustls wraps it in `io::Error`).
    pub(crate) fn from_handshake_io(err: std::io::Error, observed: &Observed) -> Self {
        let rustls_err = err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .cloned();
        match rustls_err {
            Some(e) => TlsFailure::from_rustls(&e, observed),
            None => match err.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    TlsFailure::Handshake("the server closed the connection mid-handshake".into())
                }
                _ => TlsFailure::Handshake(err.to_string()),
            },
        }
    }

    pub(crate) fn from_rustls(err: &rustls::Error, observed: &Observed) -> Self {
        match err {
            rustls::Error::InvalidCertificate(ce) => {
                let mut t = TrustFailure::from_certificate_error(ce);
                t.server_cert = observed.server_cert();
                TlsFailure::Untrusted(t)
            }
            rustls::Error::AlertReceived(alert) => {
                let hint = match alert {
                    rustls::AlertDescription::CertificateRequired
                    | rustls::AlertDescription::BadCertificate
                    | rustls::AlertDescription::UnknownCA
                    | rustls::AlertDescription::CertificateUnknown => {
                        if observed.client_cert_sent() {
                            "; the server does not accept our client certificate (is it signed by the server's CA?)"
                        } else {
                            "; the server requires a client certificate"
                        }
                    }
                    _ => "",
                };
                TlsFailure::Handshake(format!("server sent alert {alert:?}{hint}"))
            }
            rustls::Error::InvalidMessage(m) => TlsFailure::NotTls(format!("{m:?}")),
            other => TlsFailure::Handshake(other.to_string()),
        }
    }
}

impl From<TlsFailure> for ProbeFailure {
    fn from(f: TlsFailure) -> Self {
        match f {
            TlsFailure::Tcp(p) => p,
            TlsFailure::Timeout(ms) => ProbeFailure::Timeout(ms),
            other => ProbeFailure::Tls(other.to_string()),
        }
    }
}

/// What one session saw: the server's leaf certificate and whether a client certificate was asked
/// for. Shared between the verifier/resolver and the probe, one per connection.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    server_cert: Mutex<Option<CertificateDer<'static>>>,
    cert_requested: AtomicBool,
    cert_sent: AtomicBool,
}

impl Observed {
    pub(crate) fn server_cert(&self) -> Option<CertValidity> {
        let guard = self.server_cert.lock().ok()?;
        guard.as_ref().and_then(|c| CertValidity::from_der(c))
    }
    pub(crate) fn client_cert_requested(&self) -> bool {
        self.cert_requested.load(Ordering::Relaxed)
    }
    pub(crate) fn client_cert_sent(&self) -> bool {
        self.cert_sent.load(Ordering::Relaxed)
    }
}

/// Delegates to webpki and remembers the leaf it was shown (even when it rejects it, so a clock
/// skew check can still read notBefore/notAfter).
#[derive(Debug)]
struct ObservingVerifier {
    inner: Arc<dyn ServerCertVerifier>,
    observed: Arc<Observed>,
}

impl ServerCertVerifier for ObservingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Ok(mut slot) = self.observed.server_cert.lock() {
            *slot = Some(end_entity.clone().into_owned());
        }
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Accepts any certificate chain, but checks that the server holds the key of the certificate it
/// presented (the handshake signature), like Go's `InsecureSkipVerify`.
#[derive(Debug)]
struct AcceptAnyServerCert;

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &crypto_provider().signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &crypto_provider().signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        crypto_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Presents the identity (if any) and remembers that the server asked for one.
#[derive(Debug)]
struct ObservingResolver {
    identity: Option<Arc<CertifiedKey>>,
    observed: Arc<Observed>,
}

impl ResolvesClientCert for ObservingResolver {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.observed.cert_requested.store(true, Ordering::Relaxed);
        if self.identity.is_some() {
            self.observed.cert_sent.store(true, Ordering::Relaxed);
        }
        self.identity.clone()
    }

    fn has_certs(&self) -> bool {
        self.identity.is_some()
    }
}

/// How to open TLS sessions to one kind of target: the trust anchors, the client identity to
/// present (if any) and the ALPN protocols to offer.
///
/// A client that accepts any server certificate is not part of the API: only token discovery's
/// first, JWS-authenticated fetch of cluster-info builds one, inside the crate.
///
/// ```compile_fail
/// let _ = joinguard_core::probe::tls::TlsClient::unverified(&[b"http/1.1"]);
/// ```
#[derive(Clone)]
pub struct TlsClient {
    verifier: Arc<dyn ServerCertVerifier>,
    identity: Option<Arc<CertifiedKey>>,
    alpn: Vec<Vec<u8>>,
    /// An HTTP proxy every connection is tunnelled through (CONNECT), as a Go client does when
    /// the environment sends its calls there; `None`: direct.
    via: Option<crate::proxy::ProxyUrl>,
}

impl fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsClient")
            .field("identity", &self.identity.is_some())
            .field("alpn", &self.alpn)
            .field("via", &self.via.as_ref().map(|p| &p.authority))
            .finish()
    }
}

impl TlsClient {
    /// Verifies servers against `ca`, presents `identity` when asked, and offers `alpn`.
    pub fn new(
        ca: &CaBundle,
        identity: Option<&ClientIdentity>,
        alpn: &[&[u8]],
    ) -> Result<Self, IdentityError> {
        let verifier = WebPkiServerVerifier::builder_with_provider(ca.roots(), crypto_provider())
            .build()
            .map_err(|e| IdentityError::Config {
                flag: ca.named().clone(),
                reason: e.to_string(),
            })?;
        Ok(TlsClient {
            verifier,
            identity: identity.map(ClientIdentity::certified_key),
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            via: None,
        })
    }

    /// A client that accepts any server certificate (the handshake signatures are still
    /// checked). Only for kubeadm's token discovery, whose first fetch of `cluster-info` is
    /// deliberately unverified: its content is authenticated by the JWS and the CA pin instead.
    pub(crate) fn unverified(alpn: &[&[u8]]) -> Self {
        TlsClient {
            verifier: Arc::new(AcceptAnyServerCert),
            identity: None,
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            via: None,
        }
    }

    /// The same client, reaching its servers through `proxy` (an `http://` proxy: a CONNECT
    /// tunnel, then TLS with the target inside it), or direct with `None`. A proxy of another
    /// scheme is not tunnelled through: the connection goes direct, and `HTTPProxy` says the
    /// path was not verified.
    pub fn through(&self, proxy: Option<&crate::proxy::ProxyUrl>) -> Self {
        TlsClient {
            via: proxy.filter(|p| p.scheme == "http").cloned(),
            ..self.clone()
        }
    }

    /// The proxy this client tunnels through, if any.
    pub fn proxy(&self) -> Option<&crate::proxy::ProxyUrl> {
        self.via.as_ref()
    }

    /// Whether a client identity is configured.
    pub(crate) fn has_identity(&self) -> bool {
        self.identity.is_some()
    }

    /// The same trust and identity, offering other ALPN protocols.
    pub(crate) fn with_alpn(&self, alpn: &[&[u8]]) -> Self {
        TlsClient {
            alpn: alpn.iter().map(|p| p.to_vec()).collect(),
            ..self.clone()
        }
    }

    /// The same trust and ALPN, without a client identity.
    pub fn without_identity(&self) -> Self {
        TlsClient {
            identity: None,
            ..self.clone()
        }
    }

    /// A configuration for one session, with its own observation slot and no resumption.
    pub(crate) fn session(&self) -> Result<(Arc<ClientConfig>, Arc<Observed>), TlsFailure> {
        let observed = Arc::new(Observed::default());
        let mut config = ClientConfig::builder_with_provider(crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsFailure::Handshake(format!("TLS client configuration: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ObservingVerifier {
                inner: self.verifier.clone(),
                observed: observed.clone(),
            }))
            .with_client_cert_resolver(Arc::new(ObservingResolver {
                identity: self.identity.clone(),
                observed: observed.clone(),
            }));
        config.alpn_protocols = self.alpn.clone();
        config.resumption = rustls::client::Resumption::disabled();
        Ok((Arc::new(config), observed))
    }
}

/// The result of one TLS handshake, phase by phase.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsHandshake {
    /// The address connected to: the server's, or the proxy's through one.
    pub peer: SocketAddr,
    pub dns: Duration,
    /// TCP `connect()`; through a proxy, the connect and the CONNECT to its `200`.
    pub connect: Duration,
    /// ClientHello to the client's Finished (TLS 1.3: one round trip plus crypto).
    pub handshake: Duration,
    /// Negotiated protocol version, e.g. "TLSv1_3".
    pub protocol: Option<String>,
    /// Negotiated ALPN protocol, e.g. "h2".
    pub alpn: Option<String>,
    /// The server's leaf certificate validity (for the clock-skew check).
    pub server_cert: Option<CertValidity>,
    /// The server sent a CertificateRequest.
    pub client_cert_requested: bool,
    /// We answered it with a certificate (false: we had no identity to present).
    pub client_cert_sent: bool,
}

/// Parses the TLS server name for `host`: an IP literal (brackets allowed) or a DNS name.
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, TlsFailure> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_string())
        .map_err(|e| TlsFailure::Handshake(format!("invalid TLS server name {host:?}: {e}")))
}

/// Connects to `host:port` and completes a TLS handshake with `tls`, all within `timeout`.
/// Returns the open stream (for a request on the same connection) and the timings.
pub async fn handshake(
    host: &str,
    port: u16,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<(TlsStream<TcpStream>, TlsHandshake), TlsFailure> {
    let (stream, result, _) = handshake_observed(host, port, tls, timeout).await?;
    Ok((stream, result))
}

/// [`handshake`] to `host`, verifying the certificate for `name` (a kubeconfig's
/// `tls-server-name`, or `host` itself).
pub async fn handshake_named(
    host: &str,
    name: &str,
    port: u16,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<(TlsStream<TcpStream>, TlsHandshake), TlsFailure> {
    let (stream, result, _) = handshake_inner(host, name, port, tls, timeout).await?;
    Ok((stream, result))
}

/// [`handshake`], also returning the session's observation slot (for classifying a later alert).
pub(crate) async fn handshake_observed(
    host: &str,
    port: u16,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<(TlsStream<TcpStream>, TlsHandshake, Arc<Observed>), TlsFailure> {
    handshake_inner(host, host, port, tls, timeout).await
}

async fn handshake_inner(
    host: &str,
    name: &str,
    port: u16,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<(TlsStream<TcpStream>, TlsHandshake, Arc<Observed>), TlsFailure> {
    let deadline = Instant::now() + timeout;
    let name = server_name(name)?;
    let (config, observed) = tls.session()?;
    let tcp = match &tls.via {
        Some(proxy) => {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            super::proxy::open(proxy, bare, port, timeout).await
        }
        None => tcp::connect(host, port, timeout).await,
    }
    .map_err(TlsFailure::Tcp)?;
    let connector = TlsConnector::from(config);
    let t0 = Instant::now();
    let stream = match tokio::time::timeout_at(deadline, connector.connect(name, tcp.stream)).await
    {
        Err(_) => return Err(TlsFailure::Timeout(ms(timeout))),
        Ok(Err(e)) => return Err(TlsFailure::from_handshake_io(e, &observed)),
        Ok(Ok(s)) => s,
    };
    let handshake = t0.elapsed();
    let (_, conn) = stream.get_ref();
    let result = TlsHandshake {
        peer: tcp.peer,
        dns: tcp.dns,
        connect: tcp.connect,
        handshake,
        protocol: conn.protocol_version().map(|v| format!("{v:?}")),
        alpn: conn
            .alpn_protocol()
            .map(|p| String::from_utf8_lossy(p).into_owned()),
        server_cert: conn
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| CertValidity::from_der(c))
            .or_else(|| observed.server_cert()),
        client_cert_requested: observed.client_cert_requested(),
        client_cert_sent: observed.client_cert_sent(),
    };
    Ok((stream, result, observed))
}

/// Completes a handshake, writes `hello` (e.g. the HTTP/2 client preface) and waits for the
/// server's first bytes, all within `timeout`. This is how to learn whether the server accepted
/// our client certificate: in TLS 1.3 its verdict (an alert) only arrives after the handshake.
/// Data, or silence until the timeout, counts as accepted; an alert or a close does not.
pub async fn confirm(
    host: &str,
    port: u16,
    tls: &TlsClient,
    hello: &[u8],
    timeout: Duration,
) -> Result<TlsHandshake, TlsFailure> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let deadline = Instant::now() + timeout;
    let (mut stream, result, observed) = handshake_observed(host, port, tls, timeout).await?;
    let exchange = async {
        stream.write_all(hello).await?;
        stream.flush().await?;
        let mut buf = [0u8; 64];
        stream.read(&mut buf).await
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Err(_) | Ok(Ok(1..)) => Ok(result),
        Ok(Ok(0)) => Err(TlsFailure::Handshake(
            "the server closed the connection right after the handshake".into(),
        )),
        Ok(Err(e)) => Err(TlsFailure::from_handshake_io(e, &observed)),
    }
}

/// One TLS handshake probe against `target` on a fresh connection, closed afterwards.
pub async fn probe(
    target: &Target,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<TlsHandshake, TlsFailure> {
    let (stream, result) = handshake(&target.host, target.port, tls, timeout).await?;
    drop(stream);
    Ok(result)
}

/// The handshake time of a probe result as a [`Sample`].
pub fn sample(result: &Result<TlsHandshake, TlsFailure>) -> Sample {
    Sample {
        result: match result {
            Ok(h) => Ok(h.handshake),
            Err(e) => Err(e.clone().into()),
        },
    }
}
