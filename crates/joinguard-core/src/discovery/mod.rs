//! Finding the cluster from a joining node's own inputs, securely: kubeadm's token discovery.
//!
//! The chain (kubeadm `discovery/token`, `RetrieveValidatedConfigInfo`):
//! 1. fetch `kube-public/cluster-info` anonymously over TLS **without** verifying the server (the
//!    node has no CA yet), on the `connect` retry policy;
//! 2. verify the detached HS256 JWS in `jws-kubeconfig-<token id>` with the token secret;
//! 3. check the CA in the signed kubeconfig against the `sha256:` pins (SHA-256 of the DER
//!    SubjectPublicKeyInfo), unless `--discovery-token-unsafe-skip-ca-verification`;
//! 4. fetch cluster-info again, now verifying the server with that CA, and require the same
//!    kubeconfig.
//!
//! Any failure from step 2 on is a trust failure: returned at once, never retried, and no
//! further request is made. This module owns that chain and the token format; it prints nothing
//! and never puts the token secret into an error or a log line.

use std::fmt;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::Value;
use zeroize::Zeroizing;

pub mod cluster;
pub mod input;
pub(crate) mod join;

use crate::failure::{TrustFailure, TrustFailureKind};
use crate::input::{Input, Named};
use crate::kube::ApiClient;
use crate::probe::identity::{CaBundle, ALPN_HTTP1};
use crate::probe::tls::TlsClient;
use crate::retry::{self, ApiCallError, Recorder, RetryError, RetryPolicy, WakeOnConnect};

/// Where cluster-info lives.
pub const CLUSTER_INFO: &str = "/api/v1/namespaces/kube-public/configmaps/cluster-info";
/// The key prefix of the bootstrap signer's signatures (`bootstrapapi.JWSSignatureKeyPrefix`).
pub const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";

/// A bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}`. Its secret never appears in `Debug` output.
#[derive(Clone)]
pub struct BootstrapToken {
    id: String,
    secret: Zeroizing<String>,
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BootstrapToken({}.<redacted>)", self.id)
    }
}

impl BootstrapToken {
    /// Parses a token as kubeadm's `--token` takes it. The error does not repeat the value.
    pub fn parse(s: &str) -> Result<BootstrapToken, TokenFormatError> {
        let ok = |part: &str, n: usize| {
            part.len() == n
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        };
        match s.split_once('.') {
            Some((id, secret)) if ok(id, 6) && ok(secret, 16) => Ok(BootstrapToken {
                id: id.to_string(),
                secret: Zeroizing::new(secret.to_string()),
            }),
            _ => Err(TokenFormatError),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// `id.secret`, for an Authorization header.
    pub(crate) fn expose(&self) -> Zeroizing<String> {
        Zeroizing::new(format!("{}.{}", self.id, self.secret.as_str()))
    }
}

/// A bootstrap token not of the form `[a-z0-9]{6}.[a-z0-9]{16}`. It carries nothing of the
/// value, so it cannot repeat the secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the bootstrap token must have the form [a-z0-9]{{6}}.[a-z0-9]{{16}} \
     (e.g. abcdef.0123456789abcdef); create one with `kubeadm token create`"
)]
pub struct TokenFormatError;

/// A `--discovery-token-ca-cert-hash` pin that cannot be read (a pin is public: it is quoted).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    #[error("{0:?}: a CA pin must look like sha256:<64 hex digits> (`kubeadm token create --print-join-command` prints it)")]
    Form(String),
    #[error("{pin:?}: the SHA-256 pin must have 64 hex digits, it has {digits}")]
    Length { pin: String, digits: usize },
}

/// Why a detached JWS over cluster-info did not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwsError {
    #[error("not a detached compact JWS")]
    NotDetached,
    #[error("the JWS header is not base64url JSON")]
    Header,
    #[error("the JWS algorithm is {0}, not HS256")]
    Algorithm(String),
    #[error("the JWS key id (kid) is missing or not this token's id")]
    KeyId,
    #[error("the JWS signature is not base64url")]
    SignatureEncoding,
    #[error("the HMAC does not match")]
    Mismatch,
}

/// What cannot be read in the kubeconfig that cluster-info carries.
#[derive(Debug, thiserror::Error)]
pub enum ClusterInfoError {
    #[error("the signed kubeconfig is not YAML ({0})")]
    NotYaml(#[source] crate::yaml::YamlError),
    #[error("the signed kubeconfig has no cluster server")]
    NoServer,
    #[error("the signed kubeconfig has no certificate-authority-data")]
    NoCa,
    #[error("the signed kubeconfig's CA is not base64 ({0})")]
    CaEncoding(#[source] base64::DecodeError),
    #[error("the cluster CA is not PEM ({0})")]
    CaPem(#[source] rustls_pki_types::pem::Error),
    #[error("the cluster CA is not X.509 ({0})")]
    CaX509(String),
    #[error("the cluster CA bundle holds no certificate")]
    CaEmpty,
}

/// How the cluster CA is to be trusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaTrust {
    /// `--discovery-token-ca-cert-hash sha256:<hex>` (one or more; any may match).
    Pins(Vec<[u8; 32]>),
    /// `--discovery-token-unsafe-skip-ca-verification`.
    UnsafeSkip,
}

/// Parses one `sha256:<64 hex>` pin (kubeadm's `pubkeypin.Set.Allow`).
pub fn parse_pin(s: &str) -> Result<[u8; 32], PinError> {
    let hex = s
        .strip_prefix("sha256:")
        .ok_or_else(|| PinError::Form(s.to_string()))?;
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(PinError::Length {
            pin: s.to_string(),
            digits: hex.len(),
        });
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        // 64 ASCII hex digits, checked above: every pair parses.
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .map_err(|_| PinError::Form(s.to_string()))?;
    }
    Ok(out)
}

/// What discovery found, and trusts.
#[derive(Clone, Debug)]
pub struct Discovered {
    /// The API server URL in the signed cluster-info (the control-plane endpoint).
    pub server: String,
    /// The cluster CA (PEM), verified against the pins.
    pub ca_pem: Vec<u8>,
    /// True when the CA was not pinned (`UnsafeSkip`): the caller must warn.
    pub ca_unverified: bool,
}

/// Why discovery failed.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// Exit 3: the answer could not be trusted. Never retried.
    #[error("trust failure during token discovery: {0}")]
    Trust(TrustFailure),
    /// Exit 1: the API endpoint could not be reached within the budget, or answered with an
    /// error that is not about trust.
    #[error("token discovery: {0}")]
    Failed(String),
    /// Exit 2: an input turned out wrong against the cluster (e.g. the certificate key).
    #[error("{0}")]
    Input(String),
}

impl DiscoveryError {
    /// The trust failure, if that is why discovery stopped (the CLI exits 3).
    pub fn trust_failure(&self) -> Option<&TrustFailure> {
        match self {
            DiscoveryError::Trust(t) => Some(t),
            _ => None,
        }
    }

    /// What a failed call of discovery means: trust stays trust, a 401 is the bootstrap token
    /// (expired or deleted), anything else a failure to reach or read the cluster.
    pub(crate) fn from_retry(e: RetryError<ApiCallError>) -> DiscoveryError {
        let status = e.last.error().and_then(|x| match x {
            ApiCallError::Status(s) => Some(s.status),
            ApiCallError::Transport(_) => None,
        });
        if let Some(t) = e.trust_failure() {
            DiscoveryError::Trust(t)
        } else if status == Some(401) {
            DiscoveryError::Input(format!(
                "{e}: the API server rejected the bootstrap token: it has expired or was \
                 deleted. Create a new one with `kubeadm token create` on a control-plane node"
            ))
        } else {
            DiscoveryError::Failed(e.to_string())
        }
    }
}

/// Runs the whole chain against `endpoint` (`host:port`, as `kubeadm join` takes it), through
/// `via` when the environment sends the join's calls to the endpoint through that proxy.
pub async fn discover(
    endpoint: &str,
    token: &BootstrapToken,
    trust: &CaTrust,
    via: Option<&crate::proxy::ProxyUrl>,
    policy: &RetryPolicy,
    recorder: &Recorder,
) -> Result<Discovered, DiscoveryError> {
    let url = format!("https://{endpoint}");
    let insecure = ApiClient::with_tls(
        &url,
        TlsClient::unverified(&[ALPN_HTTP1]).through(via),
        None,
    )
    .map_err(|e| DiscoveryError::Failed(format!("{endpoint}: {e}")))?;
    // Waking on the endpoint's own port says nothing about a path through a proxy.
    let wake = insecure
        .socket_addr()
        .filter(|_| via.is_none())
        .map(WakeOnConnect::new);
    let first = fetch(
        &insecure,
        policy,
        recorder,
        wake.as_ref(),
        "cluster-info get (unverified)",
    )
    .await?;

    // Step 2: the JWS for our token id, over the kubeconfig exactly as served.
    let kubeconfig = first
        .pointer("/data/kubeconfig")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            DiscoveryError::Trust(TrustFailure::new(
                TrustFailureKind::Content,
                "the cluster-info ConfigMap has no kubeconfig",
            ))
        })?
        .to_string();
    let jws_key = format!("{JWS_KEY_PREFIX}{}", token.id());
    let jws = first
        .pointer(&format!("/data/{jws_key}"))
        .and_then(Value::as_str)
        .ok_or_else(|| {
            DiscoveryError::Trust(TrustFailure::new(
                TrustFailureKind::Signature,
                format!(
                    "cluster-info has no signature for token id {:?}: the token is unknown to \
                     this cluster or has expired. Create a new one with `kubeadm token create` \
                     on a control-plane node",
                    token.id()
                ),
            ))
        })?;
    verify_detached_jws(jws, &kubeconfig, token).map_err(|why| {
        DiscoveryError::Trust(TrustFailure::new(
            TrustFailureKind::Signature,
            format!(
                "the cluster-info signature for token id {:?} does not verify ({why}): the \
                 answer was tampered with, or the token secret is wrong. Check the token",
                token.id()
            ),
        ))
    })?;

    // Step 3: the CA the signed kubeconfig carries, against the pins.
    let content = |e: ClusterInfoError| {
        DiscoveryError::Trust(TrustFailure::new(TrustFailureKind::Content, e.to_string()))
    };
    let (server, bundle) = cluster_of(&kubeconfig).map_err(content)?;
    let (ca_pem, unverified) = match trust {
        CaTrust::UnsafeSkip => (bundle, true),
        CaTrust::Pins(pins) => {
            let got = spki_pins(&bundle).map_err(content)?;
            if !got.iter().any(|g| pins.contains(g)) {
                return Err(DiscoveryError::Trust(TrustFailure::new(
                    TrustFailureKind::CaPin,
                    format!(
                        "the cluster CA's public key hash is {}, which matches none of the given \
                     CA pins. Check the pin (`kubeadm token create --print-join-command` \
                     prints it), or the endpoint is not your cluster",
                        got.first()
                            .map(|g| format!("sha256:{}", hex(g)))
                            .unwrap_or_default()
                    ),
                )));
            }
            // Only the certificates a pin vouches for become trust anchors: another CA in the
            // bundle was signed over by the token, not pinned by the operator.
            (pinned_only(&bundle, pins).map_err(content)?, false)
        }
    };

    // Step 4: the same content again, over TLS verified with that CA.
    let ca = CaBundle::from_pem(
        Named::new(Input::ApiserverCacert, "the cluster CA from"),
        std::path::Path::new("cluster-info"),
        ca_pem.clone(),
    )
    .map_err(|e| unusable_ca(&e))?;
    let tls = TlsClient::new(&ca, None, &[ALPN_HTTP1])
        .map_err(|e| unusable_ca(&e))?
        .through(via);
    let trusted = ApiClient::with_tls(&url, tls, None)
        .map_err(|e| DiscoveryError::Failed(format!("{endpoint}: {e}")))?;
    let second = fetch(
        &trusted,
        policy,
        recorder,
        wake.as_ref(),
        "cluster-info get (verified)",
    )
    .await?;
    if second.pointer("/data/kubeconfig").and_then(Value::as_str) != Some(kubeconfig.as_str()) {
        return Err(DiscoveryError::Trust(TrustFailure::new(
            TrustFailureKind::Content,
            "cluster-info changed between the unverified and the verified fetch: something \
             between this node and the API endpoint is rewriting answers",
        )));
    }
    Ok(Discovered {
        server,
        ca_pem,
        ca_unverified: unverified,
    })
}

/// A CA that cluster-info carries (and that its pins or signature vouched for) that rustls
/// cannot use.
pub(crate) fn unusable_ca(e: &dyn std::fmt::Display) -> DiscoveryError {
    DiscoveryError::Trust(TrustFailure::new(
        TrustFailureKind::Content,
        format!("the cluster-info CA is not usable: {e}"),
    ))
}

async fn fetch(
    client: &ApiClient,
    policy: &RetryPolicy,
    recorder: &Recorder,
    wake: Option<&WakeOnConnect>,
    op: &str,
) -> Result<Value, DiscoveryError> {
    retry::run(policy, op, recorder, wake, |ctx| {
        client.get(CLUSTER_INFO, ctx.timeout)
    })
    .await
    .map_err(DiscoveryError::from_retry)
}

/// Verifies a compact detached JWS (`<header>..<signature>`, HS256) over `content`: the header
/// must say HS256 with our token id, and the HMAC must match (compared in constant time).
pub fn verify_detached_jws(
    jws: &str,
    content: &str,
    token: &BootstrapToken,
) -> Result<(), JwsError> {
    let mut parts = jws.split('.');
    let (Some(header), Some(""), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwsError::NotDetached);
    };
    let header_json: Value = URL_SAFE_NO_PAD
        .decode(header)
        .ok()
        .and_then(|h| serde_json::from_slice(&h).ok())
        .ok_or(JwsError::Header)?;
    if header_json["alg"] != "HS256" {
        return Err(JwsError::Algorithm(header_json["alg"].to_string()));
    }
    // Required, and this token's: the bootstrap signer always sets it, and kubeadm compares the
    // whole detached JWS it recomputes with `kid` = the token id (`DetachedTokenIsValid`,
    // k8s.io/cluster-bootstrap/token/jws), so a header without it never verifies there either.
    if header_json.get("kid").and_then(Value::as_str) != Some(token.id()) {
        return Err(JwsError::KeyId);
    }
    let sig = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| JwsError::SignatureEncoding)?;
    let signed = format!("{header}.{}", URL_SAFE_NO_PAD.encode(content));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.secret.as_bytes());
    ring::hmac::verify(&key, signed.as_bytes(), &sig).map_err(|_| JwsError::Mismatch)
}

/// The server and CA of the one cluster in a cluster-info kubeconfig. Public only for the fuzz
/// target `cluster_info_jws`.
#[doc(hidden)]
pub fn cluster_of(kubeconfig: &str) -> Result<(String, Vec<u8>), ClusterInfoError> {
    let v: serde_json::Value =
        crate::yaml::from_str(kubeconfig).map_err(ClusterInfoError::NotYaml)?;
    let cluster = &v["clusters"][0]["cluster"];
    let server = cluster["server"]
        .as_str()
        .ok_or(ClusterInfoError::NoServer)?
        .to_string();
    let ca = cluster["certificate-authority-data"]
        .as_str()
        .ok_or(ClusterInfoError::NoCa)?;
    let ca = STANDARD
        .decode(ca.trim())
        .map_err(ClusterInfoError::CaEncoding)?;
    Ok((server, ca))
}

/// `pubkeypin.Hash` of every certificate in a PEM bundle.
pub fn spki_pins(ca_pem: &[u8]) -> Result<Vec<[u8; 32]>, ClusterInfoError> {
    use rustls_pki_types::pem::PemObject;
    let mut out = Vec::new();
    for der in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem) {
        let der = der.map_err(ClusterInfoError::CaPem)?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
            .map_err(|e| ClusterInfoError::CaX509(e.to_string()))?;
        let d = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
        let mut pin = [0u8; 32];
        pin.copy_from_slice(d.as_ref());
        out.push(pin);
    }
    if out.is_empty() {
        return Err(ClusterInfoError::CaEmpty);
    }
    Ok(out)
}

/// The certificates of a PEM bundle whose public key hash is among `pins`, as PEM.
fn pinned_only(bundle: &[u8], pins: &[[u8; 32]]) -> Result<Vec<u8>, ClusterInfoError> {
    use pkcs8::der::pem::{encode_string, LineEnding};
    use rustls_pki_types::pem::PemObject;
    let mut out = Vec::new();
    let ders = rustls_pki_types::CertificateDer::pem_slice_iter(bundle);
    for (der, pin) in ders.zip(spki_pins(bundle)?) {
        let der = der.map_err(ClusterInfoError::CaPem)?;
        if !pins.contains(&pin) {
            continue;
        }
        let pem = encode_string("CERTIFICATE", LineEnding::LF, der.as_ref())
            .expect("a certificate's PEM length fits in memory");
        out.extend_from_slice(pem.as_bytes());
    }
    Ok(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The `connect` policy with an optional absolute deadline, as discovery uses it.
pub fn policy(deadline: Option<tokio::time::Instant>) -> RetryPolicy {
    let p = RetryPolicy::connect();
    match deadline {
        Some(d) => p.with_deadline(d),
        None => p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain HTTP listener where the API server should be: a wrong endpoint, exit 1 in the
    /// CLI, never a trust failure (exit 3: "someone may be in the path").
    #[tokio::test]
    async fn a_listener_that_does_not_speak_tls_is_no_trust_failure() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            for _ in 0..4 {
                let Ok((mut c, _)) = listener.accept().await else {
                    return;
                };
                let mut buf = [0u8; 512];
                let _ = c.read(&mut buf).await;
                let _ = c
                    .write_all(b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
            }
        });
        let e = discover(
            &addr.to_string(),
            &token(),
            &CaTrust::UnsafeSkip,
            None,
            &policy(None),
            &crate::retry::Recorder::new(),
        )
        .await
        .unwrap_err();
        server.abort();
        assert!(
            matches!(&e, DiscoveryError::Failed(m) if m.contains("does not speak TLS")),
            "{e:?}"
        );
    }

    fn token() -> BootstrapToken {
        BootstrapToken::parse("abcdef.0123456789abcdef").unwrap()
    }

    fn sign(content: &str, id: &str, secret: &str) -> String {
        let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"HS256","kid":"{id}"}}"#));
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let sig = ring::hmac::sign(
            &key,
            format!("{header}.{}", URL_SAFE_NO_PAD.encode(content)).as_bytes(),
        );
        format!("{header}..{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    #[test]
    fn token_format_is_checked_without_echoing_it() {
        assert!(BootstrapToken::parse("abcdef.0123456789abcdef").is_ok());
        for bad in [
            "abcdef0123456789abcdef",
            "ABCDEF.0123456789abcdef",
            "abcde.0123456789abcdef",
            "abcdef.0123456789abcde_",
        ] {
            let e = BootstrapToken::parse(bad).unwrap_err();
            assert!(!e.to_string().contains(bad), "{e}");
        }
        assert!(!format!("{:?}", token()).contains("0123456789abcdef"));
        // The error is one fixed text, whatever the value (fuzz target `flags`).
        let reference = BootstrapToken::parse("x").unwrap_err();
        for bad in ["abcdef.0123456789a", "", "abcdef.", ".0123456789abcdef"] {
            assert_eq!(
                BootstrapToken::parse(bad).unwrap_err(),
                reference,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_detached_jws_verifies_only_with_the_right_secret_and_content() {
        let jws = sign("kubeconfig text", "abcdef", "0123456789abcdef");
        assert!(verify_detached_jws(&jws, "kubeconfig text", &token()).is_ok());
        assert!(verify_detached_jws(&jws, "kubeconfig text!", &token()).is_err());
        let other = sign("kubeconfig text", "abcdef", "ffffffffffffffff");
        assert!(verify_detached_jws(&other, "kubeconfig text", &token()).is_err());
        let wrong_kid = sign("kubeconfig text", "zzzzzz", "0123456789abcdef");
        assert!(verify_detached_jws(&wrong_kid, "kubeconfig text", &token())
            .unwrap_err()
            .to_string()
            .contains("key id"));
        assert!(verify_detached_jws("a.b.c", "x", &token()).is_err());
    }

    /// In pin mode only the pinned certificates of cluster-info's bundle become trust anchors.
    #[test]
    fn only_pinned_certificates_of_the_bundle_are_trusted() {
        let a = netlab::pki::TestCa::new("cluster-ca").unwrap();
        let b = netlab::pki::TestCa::new("other-ca").unwrap();
        let bundle = format!("{}{}", a.cert_pem(), b.cert_pem());
        let pins = spki_pins(bundle.as_bytes()).unwrap();
        assert_eq!(pins.len(), 2);
        let (pa, pb) = (pins[0], pins[1]);
        let only_a = pinned_only(bundle.as_bytes(), &[pa]).unwrap();
        assert_eq!(spki_pins(&only_a).unwrap(), vec![pa]);
        let only_b = pinned_only(bundle.as_bytes(), &[pb, [0; 32]]).unwrap();
        assert_eq!(spki_pins(&only_b).unwrap(), vec![pb]);
        // The anchors are the very certificates the server sent.
        let der = |pem: &[u8]| {
            use rustls_pki_types::pem::PemObject;
            rustls_pki_types::CertificateDer::pem_slice_iter(pem)
                .map(|d| d.unwrap().as_ref().to_vec())
                .collect::<Vec<_>>()
        };
        assert_eq!(der(&only_a), der(a.cert_pem().as_bytes()));
        let both = pinned_only(bundle.as_bytes(), &[pb, pa]).unwrap();
        assert_eq!(spki_pins(&both).unwrap(), vec![pa, pb]);
    }

    /// A signature with the right secret but no `kid` is refused: kubeadm would refuse it too.
    #[test]
    fn a_detached_jws_without_a_key_id_is_refused() {
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256"}"#);
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"0123456789abcdef");
        let content = "kubeconfig text";
        let sig = ring::hmac::sign(
            &key,
            format!("{header}.{}", URL_SAFE_NO_PAD.encode(content)).as_bytes(),
        );
        let jws = format!("{header}..{}", URL_SAFE_NO_PAD.encode(sig.as_ref()));
        let e = verify_detached_jws(&jws, content, &token()).unwrap_err();
        assert!(matches!(e, JwsError::KeyId), "{e}");
        let numeric = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","kid":7}"#);
        let jws = format!("{numeric}..{}", URL_SAFE_NO_PAD.encode(sig.as_ref()));
        assert!(matches!(
            verify_detached_jws(&jws, content, &token()),
            Err(JwsError::KeyId)
        ));
    }

    #[test]
    fn pins_parse_like_kubeadm() {
        let p = parse_pin(&format!("sha256:{}", "ab".repeat(32))).unwrap();
        assert_eq!(p, [0xab; 32]);
        assert!(parse_pin("md5:abcd")
            .unwrap_err()
            .to_string()
            .contains("sha256:"));
        assert!(parse_pin("sha256:abcd")
            .unwrap_err()
            .to_string()
            .contains("64 hex digits"));
    }
}
