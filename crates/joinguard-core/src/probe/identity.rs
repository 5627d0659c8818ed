//! TLS material: CA bundles and client identities loaded from PEM files, and the rustls client
//! configurations built from them.
//!
//! This module owns reading the etcd CA, client certificate and key and the cluster CA, and
//! turning them into typed values (keys through [`crate::key::PrivateKey`], which takes PKCS#1,
//! SEC1 and PKCS#8). Its errors name the input as the user gave it (a [`Named`]) and say what was
//! expected, so the CLI can print them as they are and exit 2. It does no network I/O and never logs key material:
//! private-key buffers are zeroized on drop, and `Debug` of a [`ClientIdentity`] shows the
//! certificate only.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use rustls_pki_types::pem::{PemObject, SectionKind};
use rustls_pki_types::CertificateDer;
use zeroize::Zeroizing;

use crate::input::{Input, Named};

/// ALPN protocol id of HTTP/2, which etcd's gRPC listener requires (etcd sets `NextProtos =
/// ["h2"]` on its TLS listeners, `client/pkg/transport/listener.go`).
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1, for `/readyz` and `/raft/probing`.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Why TLS material could not be loaded. Every variant names the flag; the CLI maps all of them to
/// exit 2 (invalid input).
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{flag} {}: cannot read the file ({source}); expected a readable PEM file", path.display())]
    Unreadable {
        flag: Named,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{flag} {}: not a PEM file ({reason}); expected {expected}", path.display())]
    NotPem {
        flag: Named,
        path: PathBuf,
        reason: String,
        expected: &'static str,
    },
    #[error("{flag} {}: the PEM file holds no certificate; expected at least one \"BEGIN CERTIFICATE\" block", path.display())]
    NoCertificate { flag: Named, path: PathBuf },
    /// The key file holds no usable key: encrypted, unsupported, truncated or garbled. The
    /// message names the format found ([`crate::key::KeyError`]).
    #[error("{flag} {}: {source}", path.display())]
    Key {
        flag: Named,
        path: PathBuf,
        #[source]
        source: crate::key::KeyError,
    },
    #[error("{flag} {}: certificate is not valid X.509 ({reason})", path.display())]
    BadCertificate {
        flag: Named,
        path: PathBuf,
        reason: String,
    },
    #[error("{flag} {}: private key is not usable ({reason}); expected an RSA, ECDSA or Ed25519 key", path.display())]
    BadKey {
        flag: Named,
        path: PathBuf,
        reason: String,
    },
    #[error("{flag} {}: the private key does not match the certificate in {} ({cert_flag}); expected the key the certificate was issued for", key_path.display(), cert_path.display())]
    KeyMismatch {
        /// The key's flag: the key is what the operator should check first.
        flag: Named,
        cert_flag: Named,
        key_path: PathBuf,
        cert_path: PathBuf,
    },
    #[error("{flag}: cannot build a TLS client configuration ({reason})")]
    Config { flag: Named, reason: String },
}

impl IdentityError {
    /// The input whose value is at fault.
    pub fn input(&self) -> Input {
        match self {
            IdentityError::Unreadable { flag, .. }
            | IdentityError::NotPem { flag, .. }
            | IdentityError::NoCertificate { flag, .. }
            | IdentityError::Key { flag, .. }
            | IdentityError::BadCertificate { flag, .. }
            | IdentityError::BadKey { flag, .. }
            | IdentityError::KeyMismatch { flag, .. }
            | IdentityError::Config { flag, .. } => flag.input(),
        }
    }
}

/// The crypto provider every joinguard TLS connection uses. Explicit, so no process-wide default
/// has to be installed (and a second rustls provider in the build cannot make it ambiguous).
pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Trust anchors: the certificates of one CA file.
#[derive(Clone)]
pub struct CaBundle {
    flag: Named,
    path: PathBuf,
    pem: Vec<u8>,
    certs: Vec<CertificateDer<'static>>,
    roots: Arc<RootCertStore>,
}

impl fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaBundle")
            .field("flag", &self.flag)
            .field("path", &self.path)
            .field("certs", &self.certs.len())
            .finish()
    }
}

impl CaBundle {
    /// Reads a CA bundle from `path`, given with `flag`.
    pub fn load(flag: Named, path: &Path) -> Result<Self, IdentityError> {
        let pem = read_file(&flag, path)?;
        Self::from_pem(flag, path, pem)
    }

    /// Parses a CA bundle from PEM bytes; `path` is only used in error messages.
    pub fn from_pem(flag: Named, path: &Path, pem: Vec<u8>) -> Result<Self, IdentityError> {
        let certs = parse_certs(&flag, path, &pem, "a PEM file with the CA certificate")?;
        let mut roots = RootCertStore::empty();
        for cert in &certs {
            roots
                .add(cert.clone())
                .map_err(|e| IdentityError::BadCertificate {
                    flag: flag.clone(),
                    path: path.to_owned(),
                    reason: format!("not usable as a trust anchor: {e}"),
                })?;
        }
        Ok(CaBundle {
            flag,
            path: path.to_owned(),
            pem,
            certs,
            roots: Arc::new(roots),
        })
    }

    /// The flag this bundle came from.
    pub fn named(&self) -> &Named {
        &self.flag
    }

    /// The file this bundle came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The PEM text as read (for etcd-client, which takes PEM).
    pub fn pem(&self) -> &[u8] {
        &self.pem
    }

    /// The CA certificates, DER.
    pub fn certs(&self) -> &[CertificateDer<'static>] {
        &self.certs
    }

    /// The trust anchors as a rustls root store.
    pub fn roots(&self) -> Arc<RootCertStore> {
        self.roots.clone()
    }
}

/// A client certificate chain and its private key (`--etcd-cert`, `--etcd-key`).
///
/// The key is checked against the certificate when loaded. Key bytes (PEM and DER) are zeroized
/// when the identity is dropped; `Debug` never shows them.
pub struct ClientIdentity {
    cert_path: PathBuf,
    key_path: PathBuf,
    cert_pem: Vec<u8>,
    key_pem: Zeroizing<Vec<u8>>,
    chain: Vec<CertificateDer<'static>>,
    certified: Arc<CertifiedKey>,
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .field("chain", &self.chain.len())
            .field("key", &"<redacted>")
            .finish()
    }
}

impl ClientIdentity {
    /// Reads a client certificate and its key, each named as the user gave it.
    pub fn load(
        (cert_flag, cert_path): (Named, &Path),
        (key_flag, key_path): (Named, &Path),
    ) -> Result<Self, IdentityError> {
        let cert_pem = read_file(&cert_flag, cert_path)?;
        let key_pem = Zeroizing::new(read_file(&key_flag, key_path)?);
        Self::from_pem(
            (cert_flag, cert_path, cert_pem),
            (key_flag, key_path, key_pem),
        )
    }

    /// A client identity from PEM already read: a certificate chain and its private key, each
    /// with the input it came from and the path (or place) errors name.
    pub fn from_pem(
        (cert_flag, cert_path, cert_pem): (Named, &Path, Vec<u8>),
        (key_flag, key_path, key_pem): (Named, &Path, Zeroizing<Vec<u8>>),
    ) -> Result<Self, IdentityError> {
        let chain = parse_certs(
            &cert_flag,
            cert_path,
            &cert_pem,
            "a PEM file with the client certificate",
        )?;
        let key = crate::key::PrivateKey::from_pem(&key_pem, Some(key_path)).map_err(|source| {
            IdentityError::Key {
                flag: key_flag.clone(),
                path: key_path.to_owned(),
                source,
            }
        })?;
        let mut der = key.to_rustls();
        let signing_key = rustls::crypto::ring::sign::any_supported_type(&der).map_err(|e| {
            IdentityError::BadKey {
                flag: key_flag.clone(),
                path: key_path.to_owned(),
                reason: e.to_string(),
            }
        })?;
        // ring keeps its own copy; etcd-client gets the key as PKCS#8 PEM whatever the file held.
        zeroize::Zeroize::zeroize(&mut der);
        drop(key_pem);
        let key_pem = key.to_pkcs8_pem();
        let certified = CertifiedKey::new(chain.clone(), signing_key);
        match certified.keys_match() {
            Ok(()) => {}
            // The provider cannot derive a public key for this key type: nothing to compare.
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                return Err(IdentityError::KeyMismatch {
                    flag: key_flag,
                    cert_flag,
                    key_path: key_path.to_owned(),
                    cert_path: cert_path.to_owned(),
                });
            }
            Err(e) => {
                return Err(IdentityError::BadCertificate {
                    flag: cert_flag,
                    path: cert_path.to_owned(),
                    reason: e.to_string(),
                })
            }
        }
        Ok(ClientIdentity {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            cert_pem,
            key_pem,
            chain,
            certified: Arc::new(certified),
        })
    }

    /// The certificate chain, leaf first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.chain
    }

    /// The certificate PEM text (for etcd-client).
    pub fn cert_pem(&self) -> &[u8] {
        &self.cert_pem
    }

    /// The key PEM text (for etcd-client, which takes PEM). Do not log or copy it around.
    pub fn key_pem(&self) -> &[u8] {
        &self.key_pem
    }

    /// The chain and signing key, as rustls presents them.
    pub(crate) fn certified_key(&self) -> Arc<CertifiedKey> {
        self.certified.clone()
    }
}

fn read_file(flag: &Named, path: &Path) -> Result<Vec<u8>, IdentityError> {
    crate::limits::read_file(path).map_err(|source| IdentityError::Unreadable {
        flag: flag.clone(),
        path: path.to_owned(),
        source,
    })
}

/// Any PEM section, of whatever kind: a file of the wrong kind (a key given as a certificate)
/// is then told apart from a file that is not PEM at all.
struct PemSection(SectionKind, Vec<u8>);

impl PemObject for PemSection {
    fn from_pem(kind: SectionKind, der: Vec<u8>) -> Option<Self> {
        Some(PemSection(kind, der))
    }
}

fn parse_certs(
    flag: &Named,
    path: &Path,
    pem: &[u8],
    expected: &'static str,
) -> Result<Vec<CertificateDer<'static>>, IdentityError> {
    let mut certs = Vec::new();
    let mut items = 0usize;
    for item in PemSection::pem_slice_iter(pem) {
        let item = item.map_err(|e| IdentityError::NotPem {
            flag: flag.clone(),
            path: path.to_owned(),
            reason: e.to_string(),
            expected,
        })?;
        items += 1;
        if item.0 == SectionKind::Certificate {
            certs.push(CertificateDer::from(item.1));
        }
    }
    if items == 0 {
        return Err(IdentityError::NotPem {
            flag: flag.clone(),
            path: path.to_owned(),
            reason: "no PEM block found".into(),
            expected,
        });
    }
    if certs.is_empty() {
        return Err(IdentityError::NoCertificate {
            flag: flag.clone(),
            path: path.to_owned(),
        });
    }
    for der in &certs {
        x509_parser::parse_x509_certificate(der).map_err(|e| IdentityError::BadCertificate {
            flag: flag.clone(),
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    }
    Ok(certs)
}

#[cfg(test)]
mod tests;
