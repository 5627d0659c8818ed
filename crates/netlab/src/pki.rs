//! Test PKI: certificate authorities and leaf certificates, made the way kubeadm makes them.
//!
//! This module owns key generation and certificate signing for tests: a [`TestCa`] (one CA and the
//! leaves it signs), and a [`KubeadmPki`] (the three CAs, the service-account key pair and the
//! leaves of a kubeadm control plane, with kubeadm's names, subjects, key usages, SANs, validity and
//! file layout), and writing them to disk with safe modes. It must not be used for anything but
//! tests: keys are generated in process, kept in memory unencrypted, and written to the lab's
//! temporary directory.
//!
//! Keys are what kubeadm writes (client-go `keyutil.MarshalPrivateKeyToPEM`): RSA as PKCS#1
//! `RSA PRIVATE KEY`, ECDSA as SEC1 `EC PRIVATE KEY`; by default RSA-2048, kubeadm's default
//! `encryptionAlgorithm`. [`KeyProfile`] picks another (RSA-3072/4096, ECDSA-P256, or PKCS#8, which
//! kubeadm never writes but openssl 3 and cert-manager do), for one CA or, through
//! [`PKI_ENV`] (`NETLAB_PKI`), for a whole test run. ring cannot generate RSA keys, so RSA keys
//! come from RustCrypto's `rsa` crate (key generation only; RUSTSEC-2023-0071 concerns its
//! decryption, which nothing here does).

use std::fmt;
use std::fs;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

use crate::Error;

/// The environment variable that picks the key profile of every lab PKI in a test run:
/// `rsa-2048` (the default), `rsa-3072`, `rsa-4096`, `ecdsa-p256`, `ecdsa-p384`, `pkcs8-p256`,
/// `pkcs8-rsa-2048`.
pub const PKI_ENV: &str = "NETLAB_PKI";

/// How long before "now" certificates become valid by default, so that small clock differences
/// between the test and the process that checks the certificate do not matter.
const DEFAULT_BACKDATE: Duration = Duration::from_secs(3600);
/// Default leaf lifetime of a [`TestCa`]: long enough for any test run.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// A [`TestCa`] lives longer than anything it issues.
const CA_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);
/// kubeadm `constants.CertificateBackdate`: certificates start 5 minutes before their creation.
pub const KUBEADM_BACKDATE: Duration = Duration::from_secs(5 * 60);
/// kubeadm `constants.CertificateValidityPeriod` (v1beta4 `certificateValidityPeriod` default):
/// one year.
pub const KUBEADM_LEAF_VALIDITY: Duration = Duration::from_secs(365 * 24 * 3600);
/// kubeadm `constants.CACertificateValidityPeriod` (v1beta4 `caCertificateValidityPeriod`
/// default): ten years.
pub const KUBEADM_CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A key algorithm, with kubeadm's `encryptionAlgorithm` spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// RSA with this many bits (kubeadm: 2048, 3072, 4096).
    Rsa(usize),
    /// ECDSA on P-256.
    EcdsaP256,
    /// ECDSA on P-384.
    EcdsaP384,
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyAlgorithm::Rsa(bits) => write!(f, "RSA-{bits}"),
            KeyAlgorithm::EcdsaP256 => f.write_str("ECDSA-P256"),
            KeyAlgorithm::EcdsaP384 => f.write_str("ECDSA-P384"),
        }
    }
}

/// How a private key is written to PEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEncoding {
    /// What kubeadm writes: PKCS#1 `RSA PRIVATE KEY` for RSA, SEC1 `EC PRIVATE KEY` for ECDSA.
    Kubeadm,
    /// PKCS#8 `PRIVATE KEY` (openssl 3's default, rcgen's; never kubeadm's).
    Pkcs8,
}

/// The keys of a PKI: their algorithm and encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyProfile {
    /// The algorithm of every key.
    pub algorithm: KeyAlgorithm,
    /// How private keys are written.
    pub encoding: KeyEncoding,
}

impl Default for KeyProfile {
    /// kubeadm's default: RSA-2048, PKCS#1.
    fn default() -> Self {
        KeyProfile::RSA_2048
    }
}

impl KeyProfile {
    /// kubeadm's default (`encryptionAlgorithm: RSA-2048`).
    pub const RSA_2048: KeyProfile = KeyProfile::kubeadm(KeyAlgorithm::Rsa(2048));
    /// `encryptionAlgorithm: ECDSA-P256`: SEC1 keys.
    pub const ECDSA_P256: KeyProfile = KeyProfile::kubeadm(KeyAlgorithm::EcdsaP256);
    /// ECDSA P-256 in PKCS#8, which kubeadm never writes.
    pub const PKCS8_P256: KeyProfile = KeyProfile {
        algorithm: KeyAlgorithm::EcdsaP256,
        encoding: KeyEncoding::Pkcs8,
    };

    /// The algorithm, encoded as kubeadm encodes it.
    pub const fn kubeadm(algorithm: KeyAlgorithm) -> KeyProfile {
        KeyProfile {
            algorithm,
            encoding: KeyEncoding::Kubeadm,
        }
    }

    /// Parses a [`PKI_ENV`] value.
    pub fn parse(s: &str) -> Result<KeyProfile, Error> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "rsa-2048" | "rsa2048" => KeyProfile::RSA_2048,
            "rsa-3072" => KeyProfile::kubeadm(KeyAlgorithm::Rsa(3072)),
            "rsa-4096" => KeyProfile::kubeadm(KeyAlgorithm::Rsa(4096)),
            "ecdsa-p256" => KeyProfile::ECDSA_P256,
            "ecdsa-p384" => KeyProfile::kubeadm(KeyAlgorithm::EcdsaP384),
            "pkcs8-p256" => KeyProfile::PKCS8_P256,
            "pkcs8-rsa-2048" => KeyProfile {
                algorithm: KeyAlgorithm::Rsa(2048),
                encoding: KeyEncoding::Pkcs8,
            },
            other => {
                return Err(Error::Invalid(format!(
                    "{PKI_ENV}={other:?}: expected rsa-2048, rsa-3072, rsa-4096, ecdsa-p256, \
                     ecdsa-p384, pkcs8-p256 or pkcs8-rsa-2048"
                )))
            }
        })
    }

    /// The profile of this test run: [`PKI_ENV`], or RSA-2048 PKCS#1 when it is unset or empty.
    /// An invalid value panics: a test run must not silently fall back to another PKI.
    pub fn from_env() -> KeyProfile {
        match std::env::var(PKI_ENV) {
            Ok(v) if !v.trim().is_empty() => {
                KeyProfile::parse(&v).unwrap_or_else(|e| panic!("{e}"))
            }
            _ => KeyProfile::default(),
        }
    }

    /// kubeadm's ClusterConfiguration `encryptionAlgorithm` for these keys.
    pub fn encryption_algorithm(&self) -> String {
        self.algorithm.to_string()
    }

    /// The PEM label of a private key of this profile.
    pub fn pem_label(&self) -> &'static str {
        match (self.encoding, self.algorithm) {
            (KeyEncoding::Pkcs8, _) => "PRIVATE KEY",
            (KeyEncoding::Kubeadm, KeyAlgorithm::Rsa(_)) => "RSA PRIVATE KEY",
            (KeyEncoding::Kubeadm, _) => "EC PRIVATE KEY",
        }
    }
}

impl fmt::Display for KeyProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let enc = match (self.encoding, self.algorithm) {
            (KeyEncoding::Pkcs8, _) => "PKCS#8",
            (KeyEncoding::Kubeadm, KeyAlgorithm::Rsa(_)) => "PKCS#1",
            (KeyEncoding::Kubeadm, _) => "SEC1",
        };
        write!(f, "{} {enc}", self.algorithm)
    }
}

/// A generated key: the rcgen signer and the private key PEM in the profile's encoding.
struct GeneratedKey {
    signer: KeyPair,
    pem: String,
}

/// Generates a key of `profile`.
fn generate(profile: KeyProfile) -> Result<GeneratedKey, Error> {
    use pkcs8::der::{Decode, Encode};
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::pkcs8::{EncodePrivateKey, LineEnding};
    let err = |what: &str, e: String| Error::Pki(format!("{profile} key: {what}: {e}"));
    match profile.algorithm {
        KeyAlgorithm::Rsa(bits) => {
            let key = rsa_key(bits).map_err(|e| err("generate", e))?;
            let der = key
                .to_pkcs8_der()
                .map_err(|e| err("PKCS#8", e.to_string()))?;
            let signer = KeyPair::from_pkcs8_der_and_sign_algo(
                &der.as_bytes().into(),
                &rcgen::PKCS_RSA_SHA256,
            )
            .map_err(|e| err("load", e.to_string()))?;
            let pem = match profile.encoding {
                // x509.MarshalPKCS1PrivateKey, as keyutil.MarshalPrivateKeyToPEM writes RSA keys.
                KeyEncoding::Kubeadm => key
                    .to_pkcs1_pem(LineEnding::LF)
                    .map(|p| p.to_string())
                    .map_err(|e| err("PEM", e.to_string()))?,
                KeyEncoding::Pkcs8 => key
                    .to_pkcs8_pem(LineEnding::LF)
                    .map(|p| p.to_string())
                    .map_err(|e| err("PEM", e.to_string()))?,
            };
            Ok(GeneratedKey { signer, pem })
        }
        KeyAlgorithm::EcdsaP256 | KeyAlgorithm::EcdsaP384 => {
            let (alg, curve) = match profile.algorithm {
                KeyAlgorithm::EcdsaP256 => (&rcgen::PKCS_ECDSA_P256_SHA256, "1.2.840.10045.3.1.7"),
                _ => (&rcgen::PKCS_ECDSA_P384_SHA384, "1.3.132.0.34"),
            };
            let signer = KeyPair::generate_for(alg).map_err(|e| err("generate", e.to_string()))?;
            let pem = match profile.encoding {
                KeyEncoding::Pkcs8 => signer.serialize_pem(),
                KeyEncoding::Kubeadm => {
                    // x509.MarshalECPrivateKey (as keyutil writes ECDSA keys): SEC1 with the
                    // named curve and the public key. ring's PKCS#8 wraps an ECPrivateKey without
                    // the curve, so it is re-encoded with it.
                    let der = signer.serialize_der();
                    let info = pkcs8::PrivateKeyInfo::from_der(&der)
                        .map_err(|e| err("PKCS#8", e.to_string()))?;
                    let inner = sec1::EcPrivateKey::from_der(info.private_key)
                        .map_err(|e| err("SEC1", e.to_string()))?;
                    let sec1_key = sec1::EcPrivateKey {
                        private_key: inner.private_key,
                        parameters: Some(sec1::EcParameters::NamedCurve(
                            pkcs8::ObjectIdentifier::new_unwrap(curve),
                        )),
                        public_key: inner.public_key,
                    };
                    let out = sec1_key.to_der().map_err(|e| err("SEC1", e.to_string()))?;
                    pkcs8::der::pem::encode_string("EC PRIVATE KEY", LineEnding::LF, &out)
                        .map_err(|e| err("PEM", e.to_string()))?
                }
            };
            Ok(GeneratedKey { signer, pem })
        }
    }
}

/// The environment variable naming a directory of RSA keys that the labs of a test run share
/// (`scripts/test` sets it to `.cache/netlab-keys`). Unset, every RSA key is generated when it is
/// needed, as before.
///
/// RSA key generation is most of a lab's start-up on a 2-core machine (about 0.3 s per RSA-2048
/// key, 13 keys for a 3-member kubeadm PKI; docs/kubeadm-pki.md), and a test run starts hundreds
/// of labs. With a pool, the n-th RSA key of a given size that a process asks for is the pool's
/// n-th key of that size: generated by the first process that needs it (the same generator, the
/// same encoding), then read by every later one. So the keys of one process are always distinct
/// from each other (a CA, the "other CA" of a trust test and every leaf each have their own key),
/// while two labs in different processes may hold the same keys: they share no trust store, no
/// namespace and no address, so nothing can tell. Certificates, serials and validity are still
/// made fresh by every lab.
pub const KEY_POOL_ENV: &str = "NETLAB_KEY_POOL";

/// Keys of one size a pool keeps; a process that needs more generates the rest, unkept.
const KEY_POOL_SIZE: usize = 256;

/// An RSA key of `bits` bits: the pool's next one ([`KEY_POOL_ENV`]), or a new one.
fn rsa_key(bits: usize) -> Result<rsa::RsaPrivateKey, String> {
    let fresh =
        || rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits).map_err(|e| e.to_string());
    let Some(dir) = std::env::var_os(KEY_POOL_ENV).filter(|d| !d.is_empty()) else {
        return fresh();
    };
    let index = {
        static NEXT: std::sync::Mutex<std::collections::BTreeMap<usize, usize>> =
            std::sync::Mutex::new(std::collections::BTreeMap::new());
        let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
        let n = next.entry(bits).or_insert(0);
        *n += 1;
        *n - 1
    };
    if index >= KEY_POOL_SIZE {
        return fresh();
    }
    pooled_key(Path::new(&dir), bits, index, fresh)
}

/// Key `index` of size `bits` in the pool at `dir`: read, or generated and kept. A file that does
/// not parse as a key of that size (a crash between write and rename cannot leave one, but a
/// hand-edited pool could) is replaced.
fn pooled_key(
    dir: &Path,
    bits: usize,
    index: usize,
    fresh: impl Fn() -> Result<rsa::RsaPrivateKey, String>,
) -> Result<rsa::RsaPrivateKey, String> {
    use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
    use rsa::traits::PublicKeyParts;
    let sub = dir.join(format!("rsa-{bits}"));
    let path = sub.join(format!("{index:03}.pem"));
    if let Ok(pem) = fs::read_to_string(&path) {
        if let Ok(key) = rsa::RsaPrivateKey::from_pkcs8_pem(&pem) {
            if key.size() * 8 == bits {
                return Ok(key);
            }
        }
    }
    let key = fresh()?;
    // Written beside its final name and renamed, so that a process reading the pool never sees
    // half a key; two processes making the same index at once each keep their own (the last
    // rename wins the file).
    let kept = (|| -> std::io::Result<()> {
        fs::create_dir_all(&sub)?;
        let pem = key
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let tmp = sub.join(format!(
            ".{index:03}.{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ));
        write_file(&tmp, pem.as_bytes(), 0o600)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        fs::rename(&tmp, &path)
    })();
    if let Err(e) = kept {
        // The key is good; only the pool missed it.
        eprintln!(
            "netlab: could not keep an RSA key in {}: {e}",
            sub.display()
        );
    }
    Ok(key)
}

/// A serial number as kubeadm draws one: uniform in [1, MaxInt64) (`pkiutil.NewSignedCert`).
fn random_serial() -> SerialNumber {
    let n: u64 = (rand::random::<u64>() >> 1).max(1);
    SerialNumber::from_slice(&n.to_be_bytes())
}

/// A self-signed certificate authority.
///
/// The [`fmt::Debug`] output names the CA but never prints the private key.
pub struct TestCa {
    common_name: String,
    profile: KeyProfile,
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for TestCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCa")
            .field("common_name", &self.common_name)
            .field("profile", &self.profile)
            .field("key", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// What to put in a leaf certificate. Start from `CertSpec::default()` and set what matters.
#[derive(Clone, Debug, Default)]
pub struct CertSpec {
    /// Subject CN; for Kubernetes client certificates this is the user name.
    pub common_name: String,
    /// Subject O; for Kubernetes client certificates this is the group, e.g. `system:masters`.
    pub organization: Option<String>,
    /// IP subject alternative names.
    pub ips: Vec<IpAddr>,
    /// DNS subject alternative names.
    pub dns: Vec<String>,
    /// Add the serverAuth extended key usage.
    pub server: bool,
    /// Add the clientAuth extended key usage.
    pub client: bool,
    /// Start of validity; default one hour ago.
    pub not_before: Option<SystemTime>,
    /// End of validity; default 24 hours from now.
    pub not_after: Option<SystemTime>,
}

impl CertSpec {
    /// A server certificate (serverAuth) for the given addresses.
    pub fn server(common_name: &str, ips: &[IpAddr], dns: &[&str]) -> CertSpec {
        CertSpec {
            common_name: common_name.to_string(),
            ips: ips.to_vec(),
            dns: dns.iter().map(|d| (*d).to_string()).collect(),
            server: true,
            ..CertSpec::default()
        }
    }

    /// A client certificate (clientAuth) for the given identity.
    pub fn client(common_name: &str, organization: Option<&str>) -> CertSpec {
        CertSpec {
            common_name: common_name.to_string(),
            organization: organization.map(str::to_string),
            client: true,
            ..CertSpec::default()
        }
    }
}

/// A signed leaf certificate and its private key, both PEM.
#[derive(Clone)]
pub struct IssuedCert {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PEM, in the issuing CA's [`KeyProfile`] encoding (PKCS#1 for RSA and SEC1
    /// for ECDSA by default, as kubeadm writes them).
    pub key_pem: String,
}

impl fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedCert")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

impl IssuedCert {
    /// Writes `<dir>/<stem>.crt` (mode 0644) and `<dir>/<stem>.key` (mode 0600), creating `dir`
    /// if needed, and returns the two paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), Error> {
        fs::create_dir_all(dir)
            .map_err(|e| Error::Pki(format!("create {}: {e}", dir.display())))?;
        let crt = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        write_file(&crt, self.cert_pem.as_bytes(), 0o644)?;
        write_file(&key, self.key_pem.as_bytes(), 0o600)?;
        Ok((crt, key))
    }
}

impl TestCa {
    /// A new CA with subject CN `common_name`, keys of this run's profile
    /// ([`KeyProfile::from_env`]), valid from an hour ago for a week.
    pub fn new(common_name: &str) -> Result<TestCa, Error> {
        TestCa::with_profile(common_name, KeyProfile::from_env())
    }

    /// A new CA whose key, and the keys of everything it issues, have `profile`.
    pub fn with_profile(common_name: &str, profile: KeyProfile) -> Result<TestCa, Error> {
        let now = SystemTime::now();
        TestCa::build(
            common_name,
            profile,
            now - DEFAULT_BACKDATE,
            now + CA_LIFETIME,
        )
    }

    /// kubeadm's `pkiutil.NewSelfSignedCACert`: CN `common_name` (also its one DNS SAN), key
    /// usages digitalSignature, keyEncipherment and keyCertSign, CA:TRUE, valid from 5 minutes
    /// ago for ten years.
    fn build(
        common_name: &str,
        profile: KeyProfile,
        not_before: SystemTime,
        not_after: SystemTime,
    ) -> Result<TestCa, Error> {
        let key = generate(profile)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
            KeyUsagePurpose::KeyCertSign,
        ];
        if let Ok(dns) = common_name.try_into() {
            params.subject_alt_names = vec![SanType::DnsName(dns)];
        }
        params.serial_number = Some(random_serial());
        params.not_before = not_before.into();
        params.not_after = not_after.into();
        let cert = params
            .self_signed(&key.signer)
            .map_err(|e| Error::Pki(format!("self-sign CA {common_name}: {e}")))?;
        Ok(TestCa {
            common_name: common_name.to_string(),
            profile,
            cert_pem: cert.pem(),
            key_pem: key.pem,
            issuer: Issuer::new(params, key.signer),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key, PEM in the CA's profile encoding (`ca.key`, `etcd-ca.key` in
    /// kubeadm-certs).
    pub fn key_pem(&self) -> String {
        self.key_pem.clone()
    }

    /// The CA subject CN.
    pub fn common_name(&self) -> &str {
        &self.common_name
    }

    /// The key profile of the CA and of what it issues.
    pub fn profile(&self) -> KeyProfile {
        self.profile
    }

    /// Writes the CA certificate to `<dir>/<stem>.crt` and returns its path.
    pub fn write_ca(&self, dir: &Path, stem: &str) -> Result<PathBuf, Error> {
        fs::create_dir_all(dir)
            .map_err(|e| Error::Pki(format!("create {}: {e}", dir.display())))?;
        let crt = dir.join(format!("{stem}.crt"));
        write_file(&crt, self.cert_pem.as_bytes(), 0o644)?;
        Ok(crt)
    }

    /// Writes `<dir>/<stem>.crt` (0644) and `<dir>/<stem>.key` (0600), as kubeadm writes a CA.
    pub fn write_ca_and_key(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), Error> {
        let crt = self.write_ca(dir, stem)?;
        let key = dir.join(format!("{stem}.key"));
        write_file(&key, self.key_pem.as_bytes(), 0o600)?;
        Ok((crt, key))
    }

    /// Generates a key of the CA's profile and a leaf certificate for `spec`, signed by this CA
    /// with its own key's algorithm. Key usages are kubeadm's (`pkiutil.NewSignedCert`):
    /// digitalSignature and keyEncipherment.
    pub fn issue(&self, spec: &CertSpec) -> Result<IssuedCert, Error> {
        let what = || {
            format!(
                "certificate {:?} from CA {:?}",
                spec.common_name, self.common_name
            )
        };
        if spec.common_name.is_empty() {
            return Err(Error::Pki(format!("{}: empty common name", what())));
        }
        let key = generate(self.profile).map_err(|e| Error::Pki(format!("{}: {e}", what())))?;
        let now = SystemTime::now();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, spec.common_name.as_str());
        if let Some(org) = &spec.organization {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org.as_str());
        }
        let mut sans: Vec<SanType> = Vec::new();
        for name in &spec.dns {
            let ia5 = name
                .as_str()
                .try_into()
                .map_err(|e| Error::Pki(format!("{}: DNS name {name:?}: {e}", what())))?;
            sans.push(SanType::DnsName(ia5));
        }
        sans.extend(spec.ips.iter().copied().map(SanType::IpAddress));
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        if spec.server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if spec.client {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial());
        params.not_before = spec.not_before.unwrap_or(now - DEFAULT_BACKDATE).into();
        params.not_after = spec.not_after.unwrap_or(now + DEFAULT_LIFETIME).into();
        // rcgen signs with the issuer key's own algorithm, as Go's x509.CreateCertificate does:
        // RSA PKCS#1 v1.5 SHA-256, ECDSA P-256 SHA-256, P-384 SHA-384.
        let cert = params
            .signed_by(&key.signer, &self.issuer)
            .map_err(|e| Error::Pki(format!("{}: sign: {e}", what())))?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.pem,
        })
    }
}

/// kubeadm's certificate names and subjects, from `cmd/kubeadm/app/phases/certs/certlist.go` and
/// `cmd/kubeadm/app/constants/constants.go` (the sources and versions are in `docs/kubeadm-pki.md`).
pub mod names {
    /// `KubeadmCertRootCA`: `ca.{crt,key}`, CN `kubernetes`.
    pub const CA_CN: &str = "kubernetes";
    /// `KubeadmCertFrontProxyCA`: `front-proxy-ca.{crt,key}`.
    pub const FRONT_PROXY_CA_CN: &str = "front-proxy-ca";
    /// `KubeadmCertEtcdCA`: `etcd/ca.{crt,key}`.
    pub const ETCD_CA_CN: &str = "etcd-ca";
    /// `APIServerCertCommonName`.
    pub const APISERVER_CN: &str = "kube-apiserver";
    /// `APIServerKubeletClientCertCommonName`.
    pub const APISERVER_KUBELET_CLIENT_CN: &str = "kube-apiserver-kubelet-client";
    /// `ClusterAdminsGroupAndClusterRoleBinding`: apiserver-kubelet-client's O since kubeadm 1.29
    /// (before: `system:masters`).
    pub const CLUSTER_ADMINS_GROUP: &str = "kubeadm:cluster-admins";
    /// `FrontProxyClientCertCommonName`.
    pub const FRONT_PROXY_CLIENT_CN: &str = "front-proxy-client";
    /// `EtcdHealthcheckClientCertCommonName`.
    pub const ETCD_HEALTHCHECK_CLIENT_CN: &str = "kube-etcd-healthcheck-client";
    /// `APIServerEtcdClientCertCommonName`.
    pub const APISERVER_ETCD_CLIENT_CN: &str = "kube-apiserver-etcd-client";
    /// The files `kubeadm join --control-plane` needs before it starts, relative to
    /// `/etc/kubernetes/pki`: copycerts.go `certsToTransfer` for stacked etcd (what kubeadm's
    /// manual certificate distribution copies, and what kubeadm-certs carries).
    pub const SHARED_FILES: [&str; 8] = [
        "ca.crt",
        "ca.key",
        "sa.key",
        "sa.pub",
        "front-proxy-ca.crt",
        "front-proxy-ca.key",
        "etcd/ca.crt",
        "etcd/ca.key",
    ];
}

/// The PKI of one kubeadm control plane, as `kubeadm init phase certs all` makes it: the cluster
/// CA (`ca`), the front-proxy CA, the etcd CA, the service-account key pair (`sa.key` follows
/// `encryptionAlgorithm`, like every other key), and on demand each node's and each component's
/// leaf certificate, all with one [`KeyProfile`].
pub struct KubeadmPki {
    profile: KeyProfile,
    ca: TestCa,
    front_proxy_ca: TestCa,
    etcd_ca: TestCa,
    sa_key_pem: String,
    sa_pub_pem: String,
}

impl fmt::Debug for KubeadmPki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeadmPki")
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl KubeadmPki {
    /// A new PKI with this run's profile ([`KeyProfile::from_env`]).
    pub fn new() -> Result<KubeadmPki, Error> {
        KubeadmPki::with_profile(KeyProfile::from_env())
    }

    /// A new PKI whose every key has `profile`.
    pub fn with_profile(profile: KeyProfile) -> Result<KubeadmPki, Error> {
        let now = SystemTime::now();
        let ca = |cn: &str| {
            TestCa::build(
                cn,
                profile,
                now - KUBEADM_BACKDATE,
                now + KUBEADM_CA_VALIDITY,
            )
        };
        // RSA key generation dominates a lab's start-up (about 0.1 to 0.5 s per RSA-2048 key,
        // `cargo run -p netlab --example pki_timing`): the four keys are made in parallel.
        let (ca_r, fp_r, etcd_r, sa_r) = std::thread::scope(|s| {
            let a = s.spawn(|| ca(names::CA_CN));
            let b = s.spawn(|| ca(names::FRONT_PROXY_CA_CN));
            let c = s.spawn(|| ca(names::ETCD_CA_CN));
            let sa = generate(profile);
            let join = |h: std::thread::ScopedJoinHandle<'_, Result<TestCa, Error>>| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Pki("key generation panicked".into())))
            };
            (join(a), join(b), join(c), sa)
        });
        let sa = sa_r?;
        Ok(KubeadmPki {
            profile,
            ca: ca_r?,
            front_proxy_ca: fp_r?,
            etcd_ca: etcd_r?,
            sa_key_pem: sa.pem,
            // pkiutil.EncodePublicKeyPEM: PKIX `PUBLIC KEY`.
            sa_pub_pem: sa.signer.public_key_pem(),
        })
    }

    /// The key profile of every key.
    pub fn profile(&self) -> KeyProfile {
        self.profile
    }

    /// The cluster CA, `ca.{crt,key}` (CN `kubernetes`).
    pub fn ca(&self) -> &TestCa {
        &self.ca
    }

    /// `front-proxy-ca.{crt,key}`.
    pub fn front_proxy_ca(&self) -> &TestCa {
        &self.front_proxy_ca
    }

    /// `etcd/ca.{crt,key}` (CN `etcd-ca`).
    pub fn etcd_ca(&self) -> &TestCa {
        &self.etcd_ca
    }

    /// `sa.key`, PEM in the profile's encoding.
    pub fn sa_key_pem(&self) -> &str {
        &self.sa_key_pem
    }

    /// `sa.pub`, PKIX `PUBLIC KEY` PEM.
    pub fn sa_pub_pem(&self) -> &str {
        &self.sa_pub_pem
    }

    fn leaf(&self, ca: &TestCa, mut spec: CertSpec) -> Result<IssuedCert, Error> {
        let now = SystemTime::now();
        spec.not_before = Some(now - KUBEADM_BACKDATE);
        spec.not_after = Some(now + KUBEADM_LEAF_VALIDITY);
        ca.issue(&spec)
    }

    /// `etcd/server.{crt,key}` of `node` (`KubeadmCertEtcdServer`, `GetEtcdAltNames`): CN the node
    /// name, serverAuth and clientAuth, DNS `<node>`, `localhost`, IPs the advertise address,
    /// 127.0.0.1 and ::1.
    pub fn etcd_server(&self, node: &str, advertise: IpAddr) -> Result<IssuedCert, Error> {
        self.leaf(&self.etcd_ca, etcd_member_spec(node, advertise))
    }

    /// `etcd/peer.{crt,key}` of `node` (`KubeadmCertEtcdPeer`, `GetEtcdPeerAltNames`): the same
    /// subject, usages and SANs as the server certificate.
    pub fn etcd_peer(&self, node: &str, advertise: IpAddr) -> Result<IssuedCert, Error> {
        self.leaf(&self.etcd_ca, etcd_member_spec(node, advertise))
    }

    /// `etcd/healthcheck-client.{crt,key}`: CN `kube-etcd-healthcheck-client`, clientAuth, no O
    /// (kubeadm 1.31+; `system:masters` before), no SANs.
    pub fn etcd_healthcheck_client(&self) -> Result<IssuedCert, Error> {
        self.leaf(
            &self.etcd_ca,
            CertSpec::client(names::ETCD_HEALTHCHECK_CLIENT_CN, None),
        )
    }

    /// `apiserver-etcd-client.{crt,key}`: CN `kube-apiserver-etcd-client`, clientAuth, no O
    /// (kubeadm 1.31+; `system:masters` before), no SANs.
    pub fn apiserver_etcd_client(&self) -> Result<IssuedCert, Error> {
        self.leaf(
            &self.etcd_ca,
            CertSpec::client(names::APISERVER_ETCD_CLIENT_CN, None),
        )
    }

    /// `apiserver.{crt,key}` (`KubeadmCertAPIServer`, `GetAPIServerAltNames`): CN
    /// `kube-apiserver`, serverAuth, DNS `<node>`, `kubernetes`, `kubernetes.default`,
    /// `kubernetes.default.svc`, `kubernetes.default.svc.cluster.local`, IPs 10.96.0.1 (the first
    /// address of the default service subnet 10.96.0.0/12), the advertise address and, when it is
    /// an IP, the control-plane endpoint's host; a DNS control-plane endpoint is a DNS SAN.
    pub fn apiserver(
        &self,
        node: &str,
        advertise: IpAddr,
        control_plane_endpoint: Option<&str>,
    ) -> Result<IssuedCert, Error> {
        let mut dns = vec![
            node.to_string(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
            "kubernetes.default.svc.cluster.local".into(),
        ];
        let mut ips = vec![IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)), advertise];
        if let Some(ep) = control_plane_endpoint {
            let host = ep
                .rsplit_once(':')
                .map_or(ep, |(h, _)| h)
                .trim_matches(|c| c == '[' || c == ']');
            match host.parse::<IpAddr>() {
                Ok(ip) if !ips.contains(&ip) => ips.push(ip),
                Ok(_) => {}
                Err(_) if !dns.iter().any(|d| d == host) => dns.push(host.to_string()),
                Err(_) => {}
            }
        }
        let spec = CertSpec {
            common_name: names::APISERVER_CN.into(),
            ips,
            dns,
            server: true,
            ..CertSpec::default()
        };
        self.leaf(&self.ca, spec)
    }

    /// `apiserver-kubelet-client.{crt,key}`: CN `kube-apiserver-kubelet-client`, O
    /// `kubeadm:cluster-admins`, clientAuth.
    pub fn apiserver_kubelet_client(&self) -> Result<IssuedCert, Error> {
        self.leaf(
            &self.ca,
            CertSpec::client(
                names::APISERVER_KUBELET_CLIENT_CN,
                Some(names::CLUSTER_ADMINS_GROUP),
            ),
        )
    }

    /// `front-proxy-client.{crt,key}`: CN `front-proxy-client`, clientAuth, from the front-proxy CA.
    pub fn front_proxy_client(&self) -> Result<IssuedCert, Error> {
        self.leaf(
            &self.front_proxy_ca,
            CertSpec::client(names::FRONT_PROXY_CLIENT_CN, None),
        )
    }

    /// The shared files ([`names::SHARED_FILES`]) with their contents and modes, in kubeadm's
    /// layout: what a joining control-plane node has in `/etc/kubernetes/pki` before
    /// `kubeadm join` when the certificates were distributed by hand (or by Cluster API).
    pub fn shared_files(&self) -> Vec<(&'static str, String, u32)> {
        vec![
            ("ca.crt", self.ca.cert_pem.clone(), 0o644),
            ("ca.key", self.ca.key_pem.clone(), 0o600),
            ("sa.key", self.sa_key_pem.clone(), 0o600),
            // keyutil.WriteKey writes sa.pub with mode 0600 too.
            ("sa.pub", self.sa_pub_pem.clone(), 0o600),
            (
                "front-proxy-ca.crt",
                self.front_proxy_ca.cert_pem.clone(),
                0o644,
            ),
            (
                "front-proxy-ca.key",
                self.front_proxy_ca.key_pem.clone(),
                0o600,
            ),
            ("etcd/ca.crt", self.etcd_ca.cert_pem.clone(), 0o644),
            ("etcd/ca.key", self.etcd_ca.key_pem.clone(), 0o600),
        ]
    }

    /// Writes [`KubeadmPki::shared_files`] under `dir` (kubeadm's `/etc/kubernetes/pki` layout)
    /// and returns the paths written.
    pub fn write_shared(&self, dir: &Path) -> Result<Vec<PathBuf>, Error> {
        let mut out = Vec::new();
        for (rel, body, mode) in self.shared_files() {
            let path = dir.join(rel);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)
                    .map_err(|e| Error::Pki(format!("create {}: {e}", parent.display())))?;
            }
            write_file(&path, body.as_bytes(), mode)?;
            out.push(path);
        }
        Ok(out)
    }

    /// The `kubeadm-certs` Secret's entries for stacked etcd: each shared file under its
    /// copycerts.go `certOrKeyNameToSecretName` name (`etcd/ca.crt` becomes `etcd-ca.crt`), with
    /// the file's exact bytes.
    pub fn kubeadm_certs_entries(&self) -> Vec<(String, String)> {
        self.shared_files()
            .into_iter()
            .map(|(rel, body, _)| (rel.replace('/', "-"), body))
            .collect()
    }
}

fn etcd_member_spec(node: &str, advertise: IpAddr) -> CertSpec {
    let ips = vec![
        advertise,
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ];
    CertSpec {
        common_name: node.to_string(),
        ips,
        dns: vec![node.to_string(), "localhost".into()],
        server: true,
        client: true,
        ..CertSpec::default()
    }
}

/// Writes `data` to `path` with `mode`, replacing any existing file (and its mode).
pub fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<(), Error> {
    let err = |e: std::io::Error| Error::Pki(format!("write {}: {e}", path.display()));
    // Remove first so that an existing file with a wider mode is not reused.
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    f.write_all(data).map_err(err)?;
    f.sync_all().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    use rustls::client::danger::ServerCertVerifier;
    use rustls::client::WebPkiServerVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::server::WebPkiClientVerifier;
    use rustls::RootCertStore;
    use x509_parser::extensions::GeneralName;
    use x509_parser::pem::parse_x509_pem;

    /// The pool gives a process distinct keys, keeps each one, and hands the same key to a
    /// later reader of the same index; a damaged file is replaced.
    #[test]
    fn a_key_pool_keeps_each_key_and_hands_it_out_again() {
        use rsa::traits::PublicKeyParts;
        let dir = tempfile::tempdir().unwrap();
        let made = std::sync::atomic::AtomicUsize::new(0);
        let fresh = || {
            made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024).map_err(|e| e.to_string())
        };
        let first = pooled_key(dir.path(), 1024, 0, fresh).unwrap();
        let second = pooled_key(dir.path(), 1024, 1, fresh).unwrap();
        assert_ne!(first.n(), second.n(), "two indices, two keys");
        let again = pooled_key(dir.path(), 1024, 0, fresh).unwrap();
        assert_eq!(again.n(), first.n(), "index 0 read back");
        assert_eq!(made.load(std::sync::atomic::Ordering::Relaxed), 2);
        let file = dir.path().join("rsa-1024/000.pem");
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Another size does not read this one's files.
        let other = dir.path().join("rsa-2048");
        fs::create_dir_all(&other).unwrap();
        fs::copy(&file, other.join("000.pem")).unwrap();
        let big = pooled_key(dir.path(), 2048, 0, || {
            rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).map_err(|e| e.to_string())
        })
        .unwrap();
        assert_eq!(big.size(), 256, "a 1024-bit key under rsa-2048 is not used");
        fs::write(
            dir.path().join("rsa-1024/001.pem"),
            "-----BEGIN PRIVATE KEY-----\nbad\n",
        )
        .unwrap();
        let replaced = pooled_key(dir.path(), 1024, 1, fresh).unwrap();
        assert_ne!(replaced.n(), second.n());
        assert_eq!(made.load(std::sync::atomic::Ordering::Relaxed), 3);
        let reread = pooled_key(dir.path(), 1024, 1, fresh).unwrap();
        assert_eq!(reread.n(), replaced.n());
        assert_eq!(made.load(std::sync::atomic::Ordering::Relaxed), 3);
        let no_tmp = fs::read_dir(dir.path().join("rsa-1024"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(no_tmp, 0, "no temporary file left");
    }

    fn parse(pem: &str) -> x509_parser::pem::Pem {
        let (rest, pem) = parse_x509_pem(pem.as_bytes()).expect("PEM");
        assert!(rest.iter().all(u8::is_ascii_whitespace), "trailing data");
        pem
    }

    fn roots(ca: &TestCa) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        let der = CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap();
        roots.add(der).unwrap();
        Arc::new(roots)
    }

    fn leaf_der(leaf: &IssuedCert) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(leaf.cert_pem.as_bytes()).unwrap()
    }

    /// The raw public key of the CA's exported key, whatever its encoding.
    fn ca_public_key(ca: &TestCa) -> Vec<u8> {
        use pkcs8::der::Decode;
        let key = PrivateKeyDer::from_pem_slice(ca.key_pem().as_bytes()).unwrap();
        match key {
            rustls::pki_types::PrivateKeyDer::Pkcs1(k) => {
                use rsa::pkcs1::{DecodeRsaPrivateKey, EncodeRsaPublicKey};
                let k = rsa::RsaPrivateKey::from_pkcs1_der(k.secret_pkcs1_der()).unwrap();
                k.to_public_key()
                    .to_pkcs1_der()
                    .unwrap()
                    .as_bytes()
                    .to_vec()
            }
            rustls::pki_types::PrivateKeyDer::Sec1(k) => {
                sec1::EcPrivateKey::from_der(k.secret_sec1_der())
                    .unwrap()
                    .public_key
                    .unwrap()
                    .to_vec()
            }
            other => KeyPair::try_from(&other).unwrap().public_key_raw().to_vec(),
        }
    }

    fn cert_public_key(pem: &str) -> Vec<u8> {
        let pem = parse(pem);
        let x509 = pem.parse_x509().unwrap();
        x509.public_key().subject_public_key.data.to_vec()
    }

    fn verify_server(ca: &TestCa, leaf: &IssuedCert, name: &str) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(roots(ca), provider)
            .build()
            .unwrap();
        let name = ServerName::try_from(name.to_string()).unwrap();
        verifier
            .verify_server_cert(&leaf_der(leaf), &[], &name, &[], UnixTime::now())
            .map(|_| ())
    }

    fn verify_client(ca: &TestCa, leaf: &IssuedCert) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca), provider)
            .build()
            .unwrap();
        verifier
            .verify_client_cert(&leaf_der(leaf), &[], UnixTime::now())
            .map(|_| ())
    }

    #[test]
    fn issued_cert_chains_to_ca_with_sans_and_ekus() {
        let ca = TestCa::new("netlab-test-ca").unwrap();
        let spec = CertSpec {
            common_name: "m1".into(),
            organization: Some("system:masters".into()),
            ips: vec![
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2)),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
            ],
            dns: vec!["localhost".into()],
            server: true,
            client: true,
            ..CertSpec::default()
        };
        let leaf = ca.issue(&spec).unwrap();

        let ca_pem = parse(ca.cert_pem());
        let ca_x509 = ca_pem.parse_x509().unwrap();
        let leaf_pem = parse(&leaf.cert_pem);
        let x509 = leaf_pem.parse_x509().unwrap();

        // Issuer, and the chain as a TLS peer checks it (signature, validity, EKU, SAN).
        assert_eq!(x509.issuer(), ca_x509.subject());
        assert_eq!(ca_x509.issuer(), ca_x509.subject());
        assert!(ca_x509.is_ca());
        verify_server(&ca, &leaf, "198.18.0.2").expect("server chain");
        verify_server(&ca, &leaf, "localhost").expect("server chain, DNS");
        verify_server(&ca, &leaf, "198.18.0.9").expect_err("IP not in SANs");
        verify_client(&ca, &leaf).expect("client chain");
        let other = TestCa::new("other").unwrap();
        verify_server(&other, &leaf, "198.18.0.2").expect_err("other CA");
        assert!(!x509.is_ca());
        assert!(x509.validity().is_valid());

        // Subject.
        let cn: Vec<_> = x509
            .subject()
            .iter_common_name()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(cn, ["m1"]);
        let o: Vec<_> = x509
            .subject()
            .iter_organization()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(o, ["system:masters"]);

        // SANs.
        let san = x509
            .subject_alternative_name()
            .unwrap()
            .expect("SAN extension");
        let mut ips = Vec::new();
        let mut dns = Vec::new();
        for name in &san.value.general_names {
            match name {
                GeneralName::IPAddress(b) => ips.push(b.to_vec()),
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                other => panic!("unexpected SAN {other:?}"),
            }
        }
        assert_eq!(ips, [vec![198, 18, 0, 2], vec![127, 0, 0, 1]]);
        assert_eq!(dns, ["localhost"]);

        // EKUs.
        let eku = x509
            .extended_key_usage()
            .unwrap()
            .expect("EKU extension")
            .value;
        assert!(eku.server_auth && eku.client_auth);
        assert!(!eku.code_signing && !eku.any);
    }

    #[test]
    fn client_only_cert_has_only_client_auth_and_validity_is_honoured() {
        let ca = TestCa::new("ca").unwrap();
        let now = SystemTime::now();
        let mut spec = CertSpec::client("joinguard-test", None);
        spec.not_before = Some(now - Duration::from_secs(7200));
        spec.not_after = Some(now - Duration::from_secs(3600));
        let leaf = ca.issue(&spec).unwrap();
        let pem = parse(&leaf.cert_pem);
        let x509 = pem.parse_x509().unwrap();
        let eku = x509.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        assert!(x509.subject_alternative_name().unwrap().is_none());
        verify_client(&ca, &leaf).expect_err("expired");
        let fresh = ca.issue(&CertSpec::client("joinguard-test", None)).unwrap();
        verify_client(&ca, &fresh).expect("client chain");
        verify_server(&ca, &fresh, "localhost").expect_err("no serverAuth EKU");
        assert!(!x509.validity().is_valid(), "expired on purpose");
        let nb = x509.validity().not_before.timestamp();
        let want = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            - 7200;
        assert!((nb - want).abs() <= 1, "not_before {nb} vs {want}");
    }

    #[test]
    fn keys_are_loadable_and_match_and_debug_hides_them() {
        let ca = TestCa::new("ca").unwrap();
        let leaf = ca
            .issue(&CertSpec::server("s", &[], &["localhost"]))
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("a key");
        match ca.profile() {
            KeyProfile {
                encoding: KeyEncoding::Pkcs8,
                ..
            } => assert!(matches!(key, rustls::pki_types::PrivateKeyDer::Pkcs8(_))),
            KeyProfile {
                algorithm: KeyAlgorithm::Rsa(_),
                ..
            } => assert!(matches!(key, rustls::pki_types::PrivateKeyDer::Pkcs1(_))),
            _ => assert!(matches!(key, rustls::pki_types::PrivateKeyDer::Sec1(_))),
        }
        // The CA key exported is the key that signed the CA certificate.
        assert_eq!(ca_public_key(&ca), cert_public_key(ca.cert_pem()));
        let dbg = format!("{ca:?} {leaf:?}");
        assert!(!dbg.contains("PRIVATE KEY"), "{dbg}");
        assert!(!dbg.contains(ca.key_pem().lines().nth(1).unwrap()));
    }

    #[test]
    fn write_uses_private_mode_for_keys() {
        let dir = tempfile::tempdir().unwrap();
        let ca = TestCa::new("ca").unwrap();
        let leaf = ca.issue(&CertSpec::client("c", Some("g"))).unwrap();
        let (crt, key) = leaf.write(&dir.path().join("sub"), "client").unwrap();
        assert_eq!(crt.file_name().unwrap(), "client.crt");
        assert_eq!(key.file_name().unwrap(), "client.key");
        assert_eq!(
            fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(fs::read_to_string(&crt).unwrap(), leaf.cert_pem);
        let ca_path = ca.write_ca(dir.path(), "ca").unwrap();
        assert_eq!(fs::read_to_string(ca_path).unwrap(), ca.cert_pem());
        // Rewriting replaces the file and keeps the mode.
        leaf.write(&dir.path().join("sub"), "client").unwrap();
        assert_eq!(
            fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn empty_common_name_is_rejected() {
        let ca = TestCa::new("ca").unwrap();
        let err = ca.issue(&CertSpec::default()).unwrap_err();
        assert!(err.to_string().contains("empty common name"), "{err}");
    }
}
