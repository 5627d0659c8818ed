//! Test PKI: a throwaway certificate authority and the leaf certificates a lab needs.
//!
//! This module owns key generation and certificate signing for tests (etcd server, peer and client
//! certificates, and later kubeadm-certs fixtures), and writing them to disk with safe modes. It
//! must not be used for anything but tests: keys are ECDSA P-256 generated in process, kept in
//! memory unencrypted, and written to the lab's temporary directory.

use std::fmt;
use std::fs;
use std::io::Write;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use crate::Error;

/// How long before "now" certificates become valid by default, so that small clock differences
/// between the test and the process that checks the certificate do not matter.
const DEFAULT_BACKDATE: Duration = Duration::from_secs(3600);
/// Default leaf lifetime: long enough for any test run.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The CA lives longer than anything it issues (kubeadm's CA gets 10 years; a week is plenty here).
const CA_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// A self-signed certificate authority for one lab or one etcd cluster.
///
/// The [`fmt::Debug`] output names the CA but never prints the private key.
pub struct TestCa {
    common_name: String,
    cert_pem: String,
    key: KeyPair,
    issuer: Issuer<'static, KeyPair>,
}

impl fmt::Debug for TestCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestCa")
            .field("common_name", &self.common_name)
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
    /// The private key, PKCS#8 PEM.
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
    /// Generates a new CA key and a self-signed CA certificate with subject CN `common_name`.
    pub fn new(common_name: &str) -> Result<TestCa, Error> {
        let key = KeyPair::generate().map_err(|e| Error::Pki(format!("CA key: {e}")))?;
        let now = SystemTime::now();
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
        ];
        params.not_before = (now - DEFAULT_BACKDATE).into();
        params.not_after = (now + CA_LIFETIME).into();
        let cert = params
            .self_signed(&key)
            .map_err(|e| Error::Pki(format!("self-sign CA {common_name}: {e}")))?;
        // The issuer needs its own copy of the key; the CA keeps one to export it.
        let issuer_key = KeyPair::from_pem(&key.serialize_pem())
            .map_err(|e| Error::Pki(format!("reload CA key: {e}")))?;
        Ok(TestCa {
            common_name: common_name.to_string(),
            cert_pem: cert.pem(),
            key,
            issuer: Issuer::new(params, issuer_key),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA private key, PKCS#8 PEM (for fixtures such as kubeadm's `kubeadm-certs` Secret).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// The CA subject CN.
    pub fn common_name(&self) -> &str {
        &self.common_name
    }

    /// Writes the CA certificate to `<dir>/<stem>.crt` and returns its path.
    pub fn write_ca(&self, dir: &Path, stem: &str) -> Result<PathBuf, Error> {
        fs::create_dir_all(dir)
            .map_err(|e| Error::Pki(format!("create {}: {e}", dir.display())))?;
        let crt = dir.join(format!("{stem}.crt"));
        write_file(&crt, self.cert_pem.as_bytes(), 0o644)?;
        Ok(crt)
    }

    /// Generates a key and a leaf certificate for `spec`, signed by this CA.
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
        let key = KeyPair::generate().map_err(|e| Error::Pki(format!("{}: key: {e}", what())))?;
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
        let mut sans: Vec<SanType> = spec.ips.iter().copied().map(SanType::IpAddress).collect();
        for name in &spec.dns {
            let ia5 = name
                .as_str()
                .try_into()
                .map_err(|e| Error::Pki(format!("{}: DNS name {name:?}: {e}", what())))?;
            sans.push(SanType::DnsName(ia5));
        }
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        // kubeadm's leaf certificates carry digitalSignature and keyEncipherment.
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
        params.not_before = spec.not_before.unwrap_or(now - DEFAULT_BACKDATE).into();
        params.not_after = spec.not_after.unwrap_or(now + DEFAULT_LIFETIME).into();
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| Error::Pki(format!("{}: sign: {e}", what())))?;
        Ok(IssuedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Writes `data` to `path` with `mode`, replacing any existing file (and its mode).
fn write_file(path: &Path, data: &[u8], mode: u32) -> Result<(), Error> {
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
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::server::WebPkiClientVerifier;
    use rustls::RootCertStore;
    use x509_parser::extensions::GeneralName;
    use x509_parser::pem::parse_x509_pem;

    fn parse(pem: &str) -> x509_parser::pem::Pem {
        let (rest, pem) = parse_x509_pem(pem.as_bytes()).expect("PEM");
        assert!(rest.iter().all(u8::is_ascii_whitespace), "trailing data");
        pem
    }

    fn roots(ca: &TestCa) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        let der = rustls_pemfile::certs(&mut ca.cert_pem().as_bytes())
            .next()
            .unwrap()
            .unwrap();
        roots.add(der).unwrap();
        Arc::new(roots)
    }

    fn leaf_der(leaf: &IssuedCert) -> CertificateDer<'static> {
        rustls_pemfile::certs(&mut leaf.cert_pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
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
        let mut r = leaf.key_pem.as_bytes();
        let key = rustls_pemfile::private_key(&mut r).unwrap().expect("a key");
        assert!(matches!(key, rustls::pki_types::PrivateKeyDer::Pkcs8(_)));
        // The CA key exported is the key that signed the CA certificate.
        let ca_key = KeyPair::from_pem(&ca.key_pem()).unwrap();
        let pem = parse(ca.cert_pem());
        let x509 = pem.parse_x509().unwrap();
        assert_eq!(
            x509.public_key().subject_public_key.data.as_ref(),
            ca_key.public_key_raw()
        );
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
