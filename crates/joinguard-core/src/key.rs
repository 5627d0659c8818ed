//! Private keys: the one place joinguard reads one.
//!
//! Every key joinguard is given goes through [`PrivateKey::from_pem`]: the CA keys in
//! `kubeadm-certs` and in a `--cert-dir`, `--etcd-key`, a kubeconfig's `client-key` /
//! `client-key-data`, and the monitor's key files. It accepts every encoding kubeadm and its users
//! write:
//!
//! - PKCS#1 `RSA PRIVATE KEY`: kubeadm's RSA keys (client-go `keyutil.MarshalPrivateKeyToPEM`,
//!   `x509.MarshalPKCS1PrivateKey`), the default (`encryptionAlgorithm: RSA-2048`, also RSA-3072
//!   and RSA-4096), and Cluster API's CAs;
//! - SEC1 `EC PRIVATE KEY`: kubeadm's ECDSA keys (`encryptionAlgorithm: ECDSA-P256`, and P-384);
//! - PKCS#8 `PRIVATE KEY` with RSA, ECDSA P-256/P-384 or Ed25519 inside (openssl 3's default,
//!   cert-manager, rcgen).
//!
//! and converts them to PKCS#8 with RustCrypto's `pkcs1`, `sec1` and `pkcs8` crates (no DER is
//! parsed by hand), because ring, and rcgen on ring, take PKCS#8 only. ring then checks the key
//! (RSA: 2048 to 4096 bits, two primes, e >= 65537; ECDSA: the public key must be present), so a
//! key that loads here also signs. What cannot be used (an encrypted key, DSA, P-521, RSA outside
//! 2048..=4096 bits, a truncated or garbled PEM) is a [`KeyError`] that names the format it found
//! and says what to do; it never repeats key bytes.
//!
//! This module must not read files, log, or keep key material outside [`Zeroizing`] buffers.

use std::fmt;
use std::path::Path;

use pkcs8::der::asn1::AnyRef;
use pkcs8::der::{Decode, Encode};
use pkcs8::{AlgorithmIdentifierRef, ObjectIdentifier, PrivateKeyInfo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use zeroize::{Zeroize, Zeroizing};

/// `rsaEncryption` (RFC 8017).
const OID_RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
/// `id-RSASSA-PSS` (RFC 4055): an RSA key restricted to PSS; ring signs PSS only with plain RSA keys.
const OID_RSA_PSS: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.10");
/// `id-ecPublicKey` (RFC 5480).
const OID_EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// `secp256r1` (P-256).
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
/// `secp384r1` (P-384).
const OID_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
/// `secp521r1` (P-521): Go can, ring cannot.
const OID_P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");
/// `secp256k1`.
const OID_K256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.10");
/// `id-Ed25519` (RFC 8410).
const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
/// `id-Ed448`.
const OID_ED448: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.113");
/// `id-dsa` (RFC 3279).
const OID_DSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10040.4.1");

/// The RSA sizes ring signs with (`ring::rsa::KeyPair`: 2048 to 4096 bits), which cover
/// kubeadm's `RSA-2048`, `RSA-3072` and `RSA-4096`.
pub const RSA_BITS: std::ops::RangeInclusive<usize> = 2048..=4096;

/// What kind of key it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// RSA with a modulus of this many bits.
    Rsa {
        bits: usize,
    },
    EcdsaP256,
    EcdsaP384,
    Ed25519,
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // kubeadm's encryptionAlgorithm spelling.
            KeyAlgorithm::Rsa { bits } => write!(f, "RSA-{bits}"),
            KeyAlgorithm::EcdsaP256 => f.write_str("ECDSA-P256"),
            KeyAlgorithm::EcdsaP384 => f.write_str("ECDSA-P384"),
            KeyAlgorithm::Ed25519 => f.write_str("Ed25519"),
        }
    }
}

/// How the key was encoded in the PEM it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEncoding {
    /// `BEGIN RSA PRIVATE KEY` (RFC 8017 RSAPrivateKey).
    Pkcs1,
    /// `BEGIN EC PRIVATE KEY` (RFC 5915 ECPrivateKey).
    Sec1,
    /// `BEGIN PRIVATE KEY` (RFC 5208/5958 PrivateKeyInfo).
    Pkcs8,
}

impl KeyEncoding {
    fn label(self) -> &'static str {
        match self {
            KeyEncoding::Pkcs1 => "RSA PRIVATE KEY",
            KeyEncoding::Sec1 => "EC PRIVATE KEY",
            KeyEncoding::Pkcs8 => "PRIVATE KEY",
        }
    }
}

impl fmt::Display for KeyEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            KeyEncoding::Pkcs1 => "PKCS#1",
            KeyEncoding::Sec1 => "SEC1",
            KeyEncoding::Pkcs8 => "PKCS#8",
        };
        write!(f, "{name} (BEGIN {})", self.label())
    }
}

/// A usable private key, held as PKCS#8 DER (zeroized on drop). `Debug` never shows it.
pub struct PrivateKey {
    pkcs8: Zeroizing<Vec<u8>>,
    algorithm: KeyAlgorithm,
    encoding: KeyEncoding,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateKey")
            .field("algorithm", &self.algorithm)
            .field("encoding", &self.encoding)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// Why a key cannot be used. The message names the format found and what to do; it carries no
/// key bytes. The caller prefixes where the key came from (flag and file, or kubeadm-certs entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{found}: {problem}")]
pub struct KeyError {
    /// What the PEM holds, e.g. `encrypted PKCS#8 key (BEGIN ENCRYPTED PRIVATE KEY)`.
    pub found: String,
    /// Why it cannot be used and how to fix it.
    pub problem: String,
}

impl KeyError {
    fn new(found: impl Into<String>, problem: impl Into<String>) -> KeyError {
        KeyError {
            found: found.into(),
            problem: problem.into(),
        }
    }
}

impl PrivateKey {
    /// Reads the first private key of a PEM text. `file`, when the PEM came from one, goes into
    /// the advice (`openssl pkey -in FILE ...`).
    pub fn from_pem(pem: &[u8], file: Option<&Path>) -> Result<PrivateKey, KeyError> {
        let blocks = scan_armor(pem);
        let Some(block) = blocks.iter().find(|b| b.label.ends_with("PRIVATE KEY")) else {
            let found = if blocks.is_empty() {
                "no PEM block".to_string()
            } else {
                let labels: Vec<String> = blocks
                    .iter()
                    .map(|b| format!("BEGIN {}", b.label))
                    .collect();
                format!("no private key (the PEM holds {})", labels.join(", "))
            };
            return Err(KeyError::new(
                found,
                "expected one \"BEGIN RSA PRIVATE KEY\", \"BEGIN EC PRIVATE KEY\" or \"BEGIN \
                 PRIVATE KEY\" block, as kubeadm writes them",
            ));
        };
        let decrypt = |what: &str| {
            let f = file.map_or_else(|| "KEY".to_string(), |p| p.display().to_string());
            format!(
                "joinguard does not decrypt keys (kubeadm never writes {what}); decrypt it \
                 first: openssl pkey -in {f} -out {f}.plain, then give that file (mode 0600)"
            )
        };
        let encoding = match block.label.as_str() {
            "ENCRYPTED PRIVATE KEY" => {
                return Err(KeyError::new(
                    "encrypted PKCS#8 key (BEGIN ENCRYPTED PRIVATE KEY)",
                    decrypt("encrypted keys"),
                ))
            }
            "RSA PRIVATE KEY" | "EC PRIVATE KEY" | "DSA PRIVATE KEY" if block.encrypted => {
                return Err(KeyError::new(
                    format!(
                        "encrypted legacy PEM key (BEGIN {}, Proc-Type: 4,ENCRYPTED)",
                        block.label
                    ),
                    decrypt("encrypted keys"),
                ))
            }
            "RSA PRIVATE KEY" => KeyEncoding::Pkcs1,
            "EC PRIVATE KEY" => KeyEncoding::Sec1,
            "PRIVATE KEY" => KeyEncoding::Pkcs8,
            "DSA PRIVATE KEY" => {
                return Err(KeyError::new(
                    "DSA key (BEGIN DSA PRIVATE KEY)",
                    "DSA is not supported: TLS 1.3 and kubeadm use RSA, ECDSA or Ed25519",
                ))
            }
            "OPENSSH PRIVATE KEY" => {
                return Err(KeyError::new(
                    "OpenSSH key (BEGIN OPENSSH PRIVATE KEY)",
                    "an SSH key is not an X.509 private key; give the key the certificate was \
                     issued for (kubeadm: /etc/kubernetes/pki/*.key)",
                ))
            }
            other => {
                return Err(KeyError::new(
                    format!("unsupported key (BEGIN {other})"),
                    "expected \"BEGIN RSA PRIVATE KEY\", \"BEGIN EC PRIVATE KEY\" or \"BEGIN \
                     PRIVATE KEY\", as kubeadm and openssl write them",
                ))
            }
        };
        let pem_name = format!("BEGIN {}", encoding.label());
        if !block.complete {
            return Err(KeyError::new(
                format!("truncated PEM ({pem_name} without its END line)"),
                "the file was cut short; copy it again from the control-plane node",
            ));
        }
        let der = first_key_der(pem).ok_or_else(|| {
            KeyError::new(
                format!("garbled PEM ({pem_name}): its base64 does not decode"),
                "the file was damaged in transit; copy it again from the control-plane node",
            )
        })?;
        let garbled = |what: &str| {
            KeyError::new(
                format!("garbled key, {encoding}: its DER is not {what}"),
                "the file was damaged or is not a key; copy it again from the control-plane node",
            )
        };
        let (pkcs8, algorithm) = match encoding {
            KeyEncoding::Pkcs1 => {
                let bits = rsa_bits(&der).ok_or_else(|| garbled("an RSAPrivateKey"))?;
                let info = PrivateKeyInfo::new(
                    AlgorithmIdentifierRef {
                        oid: OID_RSA,
                        parameters: Some(AnyRef::NULL),
                    },
                    &der,
                );
                (to_der(&info)?, KeyAlgorithm::Rsa { bits })
            }
            KeyEncoding::Sec1 => {
                let ec =
                    sec1::EcPrivateKey::from_der(&der).map_err(|_| garbled("an ECPrivateKey"))?;
                let Some(sec1::EcParameters::NamedCurve(curve)) = ec.parameters else {
                    return Err(KeyError::new(
                        "SEC1 EC key without its curve (BEGIN EC PRIVATE KEY)",
                        "the key does not name its curve; re-export it with openssl ec -param_enc \
                         named_curve",
                    ));
                };
                let algorithm = ec_algorithm(curve, encoding)?;
                if ec.public_key.is_none() {
                    return Err(no_public_key(encoding, file));
                }
                let info = PrivateKeyInfo::new(
                    AlgorithmIdentifierRef {
                        oid: OID_EC,
                        parameters: Some(AnyRef::from(&curve)),
                    },
                    &der,
                );
                (to_der(&info)?, algorithm)
            }
            KeyEncoding::Pkcs8 => {
                let info =
                    PrivateKeyInfo::from_der(&der).map_err(|_| garbled("a PrivateKeyInfo"))?;
                let algorithm = match info.algorithm.oid {
                    OID_RSA => KeyAlgorithm::Rsa {
                        bits: rsa_bits(info.private_key)
                            .ok_or_else(|| garbled("an RSA PrivateKeyInfo"))?,
                    },
                    OID_EC => {
                        let curve = info
                            .algorithm
                            .parameters_oid()
                            .map_err(|_| garbled("an EC PrivateKeyInfo with a named curve"))?;
                        let algorithm = ec_algorithm(curve, encoding)?;
                        let ec = sec1::EcPrivateKey::from_der(info.private_key)
                            .map_err(|_| garbled("an EC PrivateKeyInfo"))?;
                        if ec.public_key.is_none() {
                            return Err(no_public_key(encoding, file));
                        }
                        algorithm
                    }
                    OID_ED25519 => KeyAlgorithm::Ed25519,
                    other => {
                        let name = match other {
                            OID_DSA => "DSA".to_string(),
                            OID_RSA_PSS => "RSASSA-PSS".to_string(),
                            OID_ED448 => "Ed448".to_string(),
                            o => format!("algorithm {o}"),
                        };
                        return Err(KeyError::new(
                            format!("{name} key in PKCS#8 (BEGIN PRIVATE KEY)"),
                            "not supported: give an RSA (2048 to 4096 bits), ECDSA P-256/P-384 or \
                             Ed25519 key, as kubeadm writes them",
                        ));
                    }
                };
                (Zeroizing::new(der.to_vec()), algorithm)
            }
        };
        if let KeyAlgorithm::Rsa { bits } = algorithm {
            if !RSA_BITS.contains(&bits) {
                return Err(KeyError::new(
                    format!("RSA-{bits} key, {encoding}"),
                    format!(
                        "RSA keys must have {} to {} bits (kubeadm writes 2048, 3072 or 4096)",
                        RSA_BITS.start(),
                        RSA_BITS.end()
                    ),
                ));
            }
        }
        let key = PrivateKey {
            pkcs8,
            algorithm,
            encoding,
        };
        key.check_with_ring()?;
        Ok(key)
    }

    /// RSA, ECDSA P-256/P-384 or Ed25519, and its size.
    #[cfg(test)]
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// How it was encoded in the PEM it came from.
    #[cfg(test)]
    pub fn encoding(&self) -> KeyEncoding {
        self.encoding
    }

    /// E.g. `RSA-2048 key, PKCS#1 (BEGIN RSA PRIVATE KEY)`, for logs and reports.
    pub fn describe(&self) -> String {
        format!("{} key, {}", self.algorithm, self.encoding)
    }

    /// E.g. `RSA-2048 PKCS#1`: what a report says about a key (without PEM labels, so that a
    /// "PRIVATE KEY" in any output always means a leak).
    pub fn summary(&self) -> String {
        let enc = match self.encoding {
            KeyEncoding::Pkcs1 => "PKCS#1",
            KeyEncoding::Sec1 => "SEC1",
            KeyEncoding::Pkcs8 => "PKCS#8",
        };
        format!("{} {enc}", self.algorithm)
    }

    /// The key as rustls takes it (PKCS#8 DER).
    pub(crate) fn to_rustls(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.pkcs8.to_vec()))
    }

    /// The key as PKCS#8 PEM, for etcd-client (which takes PEM).
    pub fn to_pkcs8_pem(&self) -> Zeroizing<Vec<u8>> {
        use pkcs8::der::pem::{self, LineEnding};
        const LABEL: &str = "PRIVATE KEY";
        let len = pem::encoded_len(LABEL, LineEnding::LF, &self.pkcs8)
            .expect("a key's PEM length fits in memory");
        let mut out = Zeroizing::new(vec![0u8; len]);
        let written = pem::encode(LABEL, LineEnding::LF, &self.pkcs8, &mut out)
            .expect("the buffer has the encoded length")
            .len();
        out.truncate(written);
        out
    }

    /// The key as an rcgen signer. It signs the way Go's `x509.CreateCertificate` signs for an
    /// issuer of its type: RSA with PKCS#1 v1.5 SHA-256, ECDSA P-256 with SHA-256, P-384 with
    /// SHA-384, Ed25519 as itself.
    pub(crate) fn to_rcgen(&self) -> Result<rcgen::KeyPair, KeyError> {
        let alg = match self.algorithm {
            KeyAlgorithm::Rsa { .. } => &rcgen::PKCS_RSA_SHA256,
            KeyAlgorithm::EcdsaP256 => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyAlgorithm::EcdsaP384 => &rcgen::PKCS_ECDSA_P384_SHA384,
            KeyAlgorithm::Ed25519 => &rcgen::PKCS_ED25519,
        };
        rcgen::KeyPair::from_pkcs8_der_and_sign_algo(
            &PrivatePkcs8KeyDer::from(self.pkcs8.as_slice()),
            alg,
        )
        .map_err(|e| KeyError::new(self.describe(), format!("cannot sign with it ({e})")))
    }

    /// ring's own checks, so that a key accepted here also signs (and the error says why not).
    fn check_with_ring(&self) -> Result<(), KeyError> {
        use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair};
        let der = self.pkcs8.as_slice();
        let rng = ring::rand::SystemRandom::new();
        let rejected = match self.algorithm {
            KeyAlgorithm::Rsa { .. } => RsaKeyPair::from_pkcs8(der).err(),
            KeyAlgorithm::EcdsaP256 => {
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_ASN1_SIGNING, der, &rng)
                    .err()
            }
            KeyAlgorithm::EcdsaP384 => {
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P384_SHA384_ASN1_SIGNING, der, &rng)
                    .err()
            }
            KeyAlgorithm::Ed25519 => Ed25519KeyPair::from_pkcs8_maybe_unchecked(der).err(),
        };
        match rejected {
            None => Ok(()),
            Some(why) => Err(KeyError::new(
                self.describe(),
                format!(
                    "the key is not valid ({why}); it may be damaged: copy it again from the \
                     control-plane node"
                ),
            )),
        }
    }
}

fn to_der(info: &PrivateKeyInfo<'_>) -> Result<Zeroizing<Vec<u8>>, KeyError> {
    info.to_der().map(Zeroizing::new).map_err(|e| {
        KeyError::new(
            "private key",
            format!("cannot re-encode it as PKCS#8 ({e})"),
        )
    })
}

fn ec_algorithm(curve: ObjectIdentifier, encoding: KeyEncoding) -> Result<KeyAlgorithm, KeyError> {
    match curve {
        OID_P256 => Ok(KeyAlgorithm::EcdsaP256),
        OID_P384 => Ok(KeyAlgorithm::EcdsaP384),
        other => {
            let name = match other {
                OID_P521 => "P-521".to_string(),
                OID_K256 => "secp256k1".to_string(),
                o => format!("curve {o}"),
            };
            Err(KeyError::new(
                format!("ECDSA {name} key, {encoding}"),
                "only P-256 and P-384 are supported (kubeadm's ECDSA-P256 and ECDSA-P384)",
            ))
        }
    }
}

fn no_public_key(encoding: KeyEncoding, file: Option<&Path>) -> KeyError {
    let f = file.map_or_else(|| "KEY".to_string(), |p| p.display().to_string());
    KeyError::new(
        format!("EC key without its public key, {encoding}"),
        format!(
            "the key was exported without its public key (openssl ec -no_public); export it \
             again with it: openssl ec -in {f} -out {f}.full"
        ),
    )
}

/// The modulus size of a PKCS#1 RSAPrivateKey; `None` when it does not parse or is multi-prime
/// (ring signs with two-prime keys only).
fn rsa_bits(der: &[u8]) -> Option<usize> {
    let k = pkcs1::RsaPrivateKey::from_der(der).ok()?;
    if k.other_prime_infos.is_some() {
        return None;
    }
    let n = k.modulus.as_bytes();
    let first = *n.first()?;
    Some(n.len() * 8 - first.leading_zeros() as usize)
}

/// The DER of the first private-key block (any of the three labels), zeroized on drop; `None` when
/// the PEM does not decode.
fn first_key_der(pem: &[u8]) -> Option<Zeroizing<Vec<u8>>> {
    let mut key = PrivateKeyDer::from_pem_slice(pem).ok()?;
    let der = Zeroizing::new(key.secret_der().to_vec());
    key.zeroize();
    Some(der)
}

/// One `-----BEGIN X-----` block of a PEM text, as far as its armor goes.
#[derive(Debug)]
struct Armor {
    label: String,
    /// A legacy `Proc-Type: 4,ENCRYPTED` header (RFC 1421, OpenSSL's traditional encryption).
    encrypted: bool,
    /// Its `-----END X-----` line was found.
    complete: bool,
}

/// The blocks of a PEM text: only the armor lines and RFC 1421 headers are looked at, so that an
/// encrypted, truncated or foreign block can be named before any base64 or DER is decoded.
fn scan_armor(pem: &[u8]) -> Vec<Armor> {
    let text = String::from_utf8_lossy(pem);
    let mut out: Vec<Armor> = Vec::new();
    let mut open = false;
    for line in text.lines().map(str::trim) {
        if let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            out.push(Armor {
                label: label.to_string(),
                encrypted: false,
                complete: false,
            });
            open = true;
        } else if let Some(label) = line
            .strip_prefix("-----END ")
            .and_then(|l| l.strip_suffix("-----"))
        {
            if let Some(last) = out.last_mut().filter(|b| open && b.label == label) {
                last.complete = true;
            }
            open = false;
        } else if open && line.starts_with("Proc-Type:") && line.contains("ENCRYPTED") {
            if let Some(last) = out.last_mut() {
                last.encrypted = true;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
