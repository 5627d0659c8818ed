//! After token discovery: what the bootstrap token may read about the cluster (kubeadm's RBAC
//! lets it get `kube-system/kubeadm-config` and `kube-system/kubeadm-certs`), and the etcd client
//! identity that `--certificate-key` unlocks.
//!
//! - `ClusterConfiguration` (v1beta3 or v1beta4) gives the control-plane endpoint, external etcd
//!   endpoints, and etcd's `heartbeat-interval` / `election-timeout` when they are set; a legacy
//!   `ClusterStatus` gives the control-plane nodes' addresses (stacked etcd on :2379).
//! - `kubeadm-certs` entries are AES-256-GCM with the nonce prepended (kubeadm
//!   `cryptoutil.EncryptBytes`), keyed by the hex-decoded certificate key. External etcd: its CA
//!   and client certificate are in the Secret. Stacked etcd: the etcd CA and its key are, and a
//!   short-lived client certificate is minted from them in memory.
//!
//! Every CA key (kubeadm-certs entry or `--cert-dir` file) is read by [`crate::key::PrivateKey`],
//! so kubeadm's PKCS#1 RSA and SEC1 ECDSA keys work as well as PKCS#8. A minted certificate is
//! signed the way Go signs for an issuer of that type: RSA PKCS#1 v1.5 SHA-256 from an RSA CA,
//! ECDSA P-256/SHA-256 or P-384/SHA-384 from an ECDSA CA. The minted leaf's own key is ECDSA
//! P-256 whatever the CA: ring cannot generate RSA keys, and etcd and kube-apiserver accept any
//! leaf key type the CA signed.
//!
//! Nothing is written to disk; decrypted key material lives in [`Zeroizing`] buffers.

use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde_json::Value;
use zeroize::Zeroizing;

use super::DiscoveryError;
use crate::duration::parse_go_duration;
use crate::input::{Input, Named, Spelling};
use crate::key::KeyError;
use crate::key::PrivateKey;
use crate::kube::{ApiClient, ClientError};
use crate::retry::ApiCallError;
use crate::retry::{self, Recorder, RetryPolicy, WakeOnConnect};

pub const KUBEADM_CONFIG: &str = "/api/v1/namespaces/kube-system/configmaps/kubeadm-config";
pub const KUBEADM_CERTS: &str = "/api/v1/namespaces/kube-system/secrets/kubeadm-certs";
/// Lifetime of a minted etcd client certificate: one preflight run, with room for `--wait`. A
/// monitor renews its own before it runs out (`monitor::renew_loop`).
pub const MINTED_LIFETIME: Duration = Duration::from_secs(3600);

/// Test-only: `JOINGUARD_TEST_MINTED_LIFETIME=SECONDS` (10 to 3600) shortens the lifetime of a
/// minted etcd client certificate, so a lab test can watch a monitor renew it within a minute.
pub const MINTED_LIFETIME_ENV: &str = "JOINGUARD_TEST_MINTED_LIFETIME";

/// The lifetime a minted etcd client certificate gets: [`MINTED_LIFETIME`], or the test knob
/// [`MINTED_LIFETIME_ENV`] when it is set to 10..=3600 seconds.
pub fn minted_lifetime() -> Duration {
    std::env::var(MINTED_LIFETIME_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|s| (10..=3600).contains(s))
        .map_or(MINTED_LIFETIME, Duration::from_secs)
}

/// [`minted_lifetime`] as the notes say it: `1h`, or seconds.
pub fn minted_lifetime_text() -> String {
    let l = minted_lifetime();
    if l == MINTED_LIFETIME {
        "1h".into()
    } else {
        format!("{}s", l.as_secs())
    }
}

/// What kubeadm-config says about the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    pub control_plane_endpoint: Option<String>,
    /// `etcd.external.endpoints`.
    pub external_etcd: Vec<String>,
    /// `etcd.local.extraArgs` `heartbeat-interval` (etcd takes milliseconds).
    pub heartbeat: Option<Duration>,
    /// `etcd.local.extraArgs` `election-timeout`.
    pub election: Option<Duration>,
    /// Legacy `ClusterStatus.apiEndpoints` advertise addresses.
    pub control_plane_addresses: Vec<String>,
    /// Stacked etcd members' client URLs from the etcd static pods' annotations (read with a
    /// short-lived in-memory admin certificate; see [`read_cluster`]).
    pub etcd_pod_urls: Vec<String>,
    /// `certificatesDir`: where kubeadm keeps the cluster's certificates on every control-plane
    /// node (kubeadm's default `/etc/kubernetes/pki`).
    pub certificates_dir: Option<String>,
    /// `kubernetesVersion`, e.g. `v1.32.0` (kubeadm upgrade keeps it current).
    pub kubernetes_version: Option<String>,
    /// `networking.serviceSubnet` and `networking.podSubnet`, each split at `,` (dual-stack
    /// lists both families), in that order: what kubeadm's `HTTPProxyCIDR` checks.
    pub cluster_cidrs: Vec<String>,
}

/// The group of kubeadm's admin.conf from 1.29 on, bound to `cluster-admin` by the
/// `kubeadm:cluster-admins` ClusterRoleBinding; unlike `system:masters` it goes through RBAC and
/// can be unbound (`constants.ClusterAdminsGroupAndClusterRoleBinding`).
pub const CLUSTER_ADMINS_GROUP: &str = "kubeadm:cluster-admins";
/// The group every kubeadm admin.conf had before 1.29: it bypasses RBAC.
pub const MASTERS_GROUP: &str = "system:masters";

/// The group to mint the admin certificate for: kubeadm's `kubeadm:cluster-admins` on clusters
/// at 1.29 or later, where kubeadm binds it, `system:masters` before (or when the version is
/// unknown).
pub(crate) fn admin_group(kubernetes_version: Option<&str>) -> &'static str {
    let minor = kubernetes_version.and_then(|v| {
        let mut parts = v.trim().trim_start_matches('v').split('.');
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        Some((major, minor))
    });
    match minor {
        Some(v) if v >= (1, 29) => CLUSTER_ADMINS_GROUP,
        _ => MASTERS_GROUP,
    }
}

/// kubeadm's default `certificatesDir` (`constants.KubernetesDir` + `pki`).
pub const DEFAULT_CERTIFICATES_DIR: &str = "/etc/kubernetes/pki";

impl ClusterFacts {
    /// Parses the kubeadm-config ConfigMap.
    pub(crate) fn from_config_map(cm: &Value) -> Result<ClusterFacts, ClusterConfigError> {
        let text = cm
            .pointer("/data/ClusterConfiguration")
            .and_then(Value::as_str)
            .ok_or(ClusterConfigError::NoClusterConfiguration)?;
        let cc: Value = crate::yaml::from_str(text).map_err(ClusterConfigError::Configuration)?;
        let mut f = ClusterFacts {
            control_plane_endpoint: cc["controlPlaneEndpoint"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            ..ClusterFacts::default()
        };
        f.kubernetes_version = cc["kubernetesVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        f.cluster_cidrs = ["serviceSubnet", "podSubnet"]
            .iter()
            .filter_map(|k| cc["networking"][k].as_str())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        f.certificates_dir = cc["certificatesDir"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        if let Some(eps) = cc["etcd"]["external"]["endpoints"].as_array() {
            f.external_etcd = eps
                .iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect();
        }
        // v1beta4: a list of {name, value}; v1beta3: a map.
        let args = &cc["etcd"]["local"]["extraArgs"];
        let arg = |name: &str| -> Option<String> {
            match args {
                Value::Array(items) => items
                    .iter()
                    .find(|i| i["name"].as_str() == Some(name))
                    .and_then(|i| i["value"].as_str().map(str::to_string)),
                Value::Object(_) => args[name].as_str().map(str::to_string),
                _ => None,
            }
        };
        let ms = |v: String| {
            v.trim()
                .parse::<u64>()
                .map(Duration::from_millis)
                .ok()
                .or_else(|| parse_go_duration(&v))
        };
        f.heartbeat = arg("heartbeat-interval").and_then(ms);
        f.election = arg("election-timeout").and_then(ms);
        if let Some(status) = cm.pointer("/data/ClusterStatus").and_then(Value::as_str) {
            let s: Value = crate::yaml::from_str(status).map_err(ClusterConfigError::Status)?;
            if let Some(m) = s["apiEndpoints"].as_object() {
                f.control_plane_addresses = m
                    .values()
                    .filter_map(|e| e["advertiseAddress"].as_str().map(str::to_string))
                    .collect();
            }
        }
        Ok(f)
    }
}

/// What cannot be read in the kubeadm-config ConfigMap.
#[derive(Debug, thiserror::Error)]
pub enum ClusterConfigError {
    #[error("kubeadm-config has no ClusterConfiguration")]
    NoClusterConfiguration,
    #[error("ClusterConfiguration is not YAML ({0})")]
    Configuration(#[source] crate::yaml::YamlError),
    #[error("ClusterStatus is not YAML ({0})")]
    Status(#[source] crate::yaml::YamlError),
}

/// Why CA material (a CA certificate and its key, from kubeadm-certs or a certificates
/// directory) cannot be used, or a client certificate not minted from it. Each names where the
/// material came from (a kubeadm-certs entry or a file path); none carries key bytes.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    #[error("{name}: {source}")]
    Key {
        name: String,
        #[source]
        source: KeyError,
    },
    #[error("{name}: not a PEM certificate ({reason})")]
    NotPem { name: String, reason: String },
    #[error("{name}: not an X.509 certificate ({reason})")]
    NotX509 { name: String, reason: String },
    #[error(
        "{name}: the certificate is not a CA (no basicConstraints CA:TRUE); give the CA \
         certificate kubeadm wrote (CN {subject:?} is a leaf)"
    )]
    NotCa { name: String, subject: String },
    #[error(
        "{key}: the key does not belong to the CA certificate {cert} (its public key differs); \
         give the key kubeadm wrote next to it"
    )]
    Mismatch { key: String, cert: String },
    #[error(
        "{}: {source} (kubeadm places the etcd CA there for a control-plane join without a \
         certificate key; for external etcd give the etcd CA, client certificate and key \
         instead)",
        path.display()
    )]
    Unreadable {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{name}: {source}")]
    Mint {
        name: String,
        #[source]
        source: MintError,
    },
}

/// Why a client certificate could not be minted from a CA.
#[derive(Debug, thiserror::Error)]
pub enum MintError {
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error("the CA is not PEM text")]
    CaText,
    #[error("the CA certificate is not usable ({0})")]
    CaCertificate(#[source] rcgen::Error),
    #[error("generating a client key: {0}")]
    KeyGeneration(#[source] rcgen::Error),
    #[error("signing the client certificate: {0}")]
    Signing(#[source] rcgen::Error),
}

/// A certificate key that is not 64 hex digits. It carries nothing of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the certificate key must be 64 hex digits (32 bytes), as printed by \
     `kubeadm init phase upload-certs --upload-certs`"
)]
pub struct CertificateKeyError;

/// A CA that can sign: its certificate (PEM) and its key, checked to belong together.
pub struct SigningCa {
    cert_pem: Vec<u8>,
    key: PrivateKey,
}

impl std::fmt::Debug for SigningCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningCa")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl SigningCa {
    /// Reads a CA certificate and its key. `cert_name` and `key_name` say where they came from
    /// (`kubeadm-certs entry etcd-ca.key`, or a file path) and start every error message; `file`
    /// is the key's path when it is a file, for the advice. Errors never carry key bytes.
    pub fn parse(
        cert_name: &str,
        cert_pem: &[u8],
        key_name: &str,
        key_pem: &[u8],
        file: Option<&std::path::Path>,
    ) -> Result<SigningCa, CaError> {
        let key_error = |source| CaError::Key {
            name: key_name.to_string(),
            source,
        };
        let key = PrivateKey::from_pem(key_pem, file).map_err(key_error)?;
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem).map_err(|e| CaError::NotPem {
            name: cert_name.to_string(),
            reason: e.to_string(),
        })?;
        let cert = pem.parse_x509().map_err(|e| CaError::NotX509 {
            name: cert_name.to_string(),
            reason: e.to_string(),
        })?;
        if !cert.is_ca() {
            return Err(CaError::NotCa {
                name: cert_name.to_string(),
                subject: cert.subject().to_string(),
            });
        }
        let signer = key.to_rcgen().map_err(key_error)?;
        if cert.public_key().subject_public_key.data.as_ref() != signer.public_key_raw() {
            return Err(CaError::Mismatch {
                key: key_name.to_string(),
                cert: cert_name.to_string(),
            });
        }
        Ok(SigningCa {
            cert_pem: cert_pem.to_vec(),
            key,
        })
    }

    /// What the key is, e.g. `RSA-2048 PKCS#1`.
    pub(crate) fn describe_key(&self) -> String {
        self.key.summary()
    }
}

/// The etcd client material that kubeadm-certs (or a kubeadm certificates directory) yields.
#[derive(Clone)]
pub struct EtcdMaterial {
    /// Where it came from, for the report: `kubeadm-certs` or the directory.
    pub source: String,
    pub ca_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Zeroizing<Vec<u8>>,
    /// True for a certificate minted here from the etcd CA (stacked etcd).
    pub minted: bool,
    /// The CA key that signed the minted certificate, e.g. `RSA-2048 PKCS#1`.
    pub ca_key: Option<String>,
    /// The cluster CA and its key (`ca.crt`, `ca.key`), for the admin certificate minted when
    /// the etcd members are unknown.
    cluster_ca: ClusterCa,
}

/// Where the cluster CA and its key are, for the one case that mints with them.
#[derive(Clone, Default)]
enum ClusterCa {
    #[default]
    None,
    /// Decrypted from kubeadm-certs, in memory already.
    Loaded(std::sync::Arc<SigningCa>),
    /// In `--cert-dir`: `ca.key` is read only when an admin certificate is minted.
    OnDisk(std::path::PathBuf),
}

impl ClusterCa {
    #[cfg(test)]
    fn is_some(&self) -> bool {
        !matches!(self, ClusterCa::None)
    }

    /// The CA to mint with; reads `ca.crt` and `ca.key` from disk now if that is where they are
    /// (`None` when the directory has no cluster CA key: a node given only the etcd CA).
    fn load(&self) -> Result<Option<std::sync::Arc<SigningCa>>, CaError> {
        match self {
            ClusterCa::None => Ok(None),
            ClusterCa::Loaded(ca) => Ok(Some(ca.clone())),
            ClusterCa::OnDisk(dir) => {
                let (cp, kp) = (dir.join("ca.crt"), dir.join("ca.key"));
                let read = |path: &std::path::Path| match crate::limits::read_file(path) {
                    Ok(b) => Ok(Some(Zeroizing::new(b))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(source) => Err(CaError::Unreadable {
                        path: path.to_owned(),
                        source,
                    }),
                };
                let (Some(c), Some(k)) = (read(&cp)?, read(&kp)?) else {
                    return Ok(None);
                };
                let ca = SigningCa::parse(
                    &cp.display().to_string(),
                    &c,
                    &kp.display().to_string(),
                    &k,
                    Some(&kp),
                )?;
                Ok(Some(std::sync::Arc::new(ca)))
            }
        }
    }
}

impl std::fmt::Debug for EtcdMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdMaterial")
            .field("minted", &self.minted)
            .finish_non_exhaustive()
    }
}

/// Parses `--certificate-key` (64 hex digits, AES-256). The error never repeats the key.
pub fn parse_certificate_key(s: &str) -> Result<Zeroizing<[u8; 32]>, CertificateKeyError> {
    let s = s.trim();
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(CertificateKeyError);
    }
    let mut k = Zeroizing::new([0u8; 32]);
    for i in 0..32 {
        k[i] = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| CertificateKeyError)?;
    }
    Ok(k)
}

/// kubeadm `cryptoutil.DecryptBytes`: `nonce(12) || ciphertext || tag(16)`, AES-256-GCM.
pub fn decrypt_bytes(data: &[u8], key: &[u8; 32]) -> Option<Zeroizing<Vec<u8>>> {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
    if data.len() < NONCE_LEN + AES_256_GCM.tag_len() {
        return None;
    }
    let (nonce, sealed) = data.split_at(NONCE_LEN);
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).ok()?);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut buf = Zeroizing::new(sealed.to_vec());
    let plain_len = key
        .open_in_place(nonce, Aad::empty(), buf.as_mut_slice())
        .ok()?
        .len();
    buf.truncate(plain_len);
    Some(buf)
}

/// Decrypts the etcd entries of a kubeadm-certs Secret and returns a client identity for etcd.
///
/// An entry whose key cannot be used (encrypted, unsupported, damaged) is [`DiscoveryError::Input`]
/// (exit 2): the certificate key did decrypt it, so nothing on this node is at fault, but waiting
/// or retrying cannot fix what `kubeadm init phase upload-certs` uploaded either. kubeadm's own
/// join would fail on the same file. The message names the entry and the format found.
/// `key_name` names the key in errors, as the user gave it.
pub fn etcd_material(
    secret: &Value,
    key: &[u8; 32],
    key_name: &Named,
) -> Result<EtcdMaterial, DiscoveryError> {
    let entry = |name: &str| -> Result<Option<Zeroizing<Vec<u8>>>, DiscoveryError> {
        let Some(b64) = secret
            .pointer(&format!(
                "/data/{}",
                name.replace('~', "~0").replace('/', "~1")
            ))
            .and_then(Value::as_str)
        else {
            return Ok(None);
        };
        // Secret data is base64 of the encrypted entry.
        let sealed = STANDARD.decode(b64).map_err(|e| {
            DiscoveryError::Failed(format!("kubeadm-certs entry {name} is not base64 ({e})"))
        })?;
        // kubeadm uploads an empty entry for a file it did not find (copycerts.go
        // `getDataFromDisk`: an external CA without `ca.key`, insecure external etcd).
        if sealed.is_empty() {
            return Ok(None);
        }
        decrypt_bytes(&sealed, key).map(Some).ok_or_else(|| {
            DiscoveryError::Input(format!(
                "{key_name} does not decrypt kubeadm-certs: the key is wrong, or the certificates \
                 were uploaded again with another key (they expire 2 hours after `kubeadm init \
                 phase upload-certs --upload-certs`; run it again and use the key it prints)"
            ))
        })
    };
    let unusable = |e: CaError| {
        DiscoveryError::Input(format!(
            "{e}. kubeadm uploaded it from /etc/kubernetes/pki on a control-plane node: fix the \
             file there and run `kubeadm init phase upload-certs --upload-certs` again"
        ))
    };
    let signing_ca = |crt: &str, key: &str| -> Result<Option<SigningCa>, DiscoveryError> {
        match (entry(crt)?, entry(key)?) {
            (Some(c), Some(k)) => SigningCa::parse(
                &format!("kubeadm-certs entry {crt}"),
                &c,
                &format!("kubeadm-certs entry {key}"),
                &k,
                None,
            )
            .map(Some)
            .map_err(unusable),
            _ => Ok(None),
        }
    };
    let cluster_ca = match signing_ca("ca.crt", "ca.key")? {
        Some(ca) => ClusterCa::Loaded(std::sync::Arc::new(ca)),
        None => ClusterCa::None,
    };
    if let (Some(ca), Some(cert), Some(k)) = (
        entry("external-etcd-ca.crt")?,
        entry("external-etcd.crt")?,
        entry("external-etcd.key")?,
    ) {
        // Read here so that a bad key names its entry; etcd-client gets it as PKCS#8.
        let client_key = PrivateKey::from_pem(&k, None).map_err(|source| {
            unusable(CaError::Key {
                name: "kubeadm-certs entry external-etcd.key".into(),
                source,
            })
        })?;
        return Ok(EtcdMaterial {
            source: "kubeadm-certs".into(),
            ca_pem: ca.to_vec(),
            cert_pem: cert.to_vec(),
            key_pem: client_key.to_pkcs8_pem(),
            minted: false,
            ca_key: None,
            cluster_ca,
        });
    }
    let Some(etcd_ca) = signing_ca("etcd-ca.crt", "etcd-ca.key")? else {
        return Err(DiscoveryError::Failed(
            "kubeadm-certs has neither the etcd CA (stacked etcd) nor the external etcd client \
             certificate"
                .into(),
        ));
    };
    let (cert_pem, key_pem) = mint_client(&etcd_ca, "joinguard-preflight", None, minted_lifetime())
        .map_err(|source| {
            DiscoveryError::Failed(
                CaError::Mint {
                    name: "kubeadm-certs entry etcd-ca.key".into(),
                    source,
                }
                .to_string(),
            )
        })?;
    Ok(EtcdMaterial {
        source: "kubeadm-certs".into(),
        ca_pem: etcd_ca.cert_pem.clone(),
        cert_pem,
        key_pem,
        minted: true,
        ca_key: Some(etcd_ca.describe_key()),
        cluster_ca,
    })
}

/// Builds the etcd client identity from a kubeadm certificates directory, as kubeadm's manual
/// certificate distribution (and Cluster API's bootstrap) leaves it on a joining control-plane
/// node: `etcd/ca.crt` + `etcd/ca.key` are required (stacked etcd), `ca.crt` + `ca.key` are used
/// when present. Reads files only (each bounded by [`crate::limits::MAX_FILE`]); every error is
/// bad input that names the file (and, for a key, the format found) and never prints key
/// material.
pub fn etcd_material_from_dir(dir: &std::path::Path) -> Result<EtcdMaterial, CaError> {
    let read = |rel: &str, required: bool| -> Result<Option<Zeroizing<Vec<u8>>>, CaError> {
        let path = dir.join(rel);
        match crate::limits::read_file(&path) {
            Ok(b) => Ok(Some(Zeroizing::new(b))),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(CaError::Unreadable { path, source }),
        }
    };
    let parse = |crt: &str, key: &str, c: &[u8], k: &[u8]| {
        let (cp, kp) = (dir.join(crt), dir.join(key));
        SigningCa::parse(
            &cp.display().to_string(),
            c,
            &kp.display().to_string(),
            k,
            Some(&kp),
        )
    };
    let (Some(ca), Some(ca_key)) = (read("etcd/ca.crt", true)?, read("etcd/ca.key", true)?) else {
        unreachable!("required files are Some or an error");
    };
    let etcd_ca = parse("etcd/ca.crt", "etcd/ca.key", &ca, &ca_key)?;
    // The cluster CA key is read only if an admin certificate is minted with it.
    let cluster_ca = ClusterCa::OnDisk(dir.to_owned());
    let (cert_pem, key_pem) = mint_client(&etcd_ca, "joinguard-preflight", None, minted_lifetime())
        .map_err(|source| CaError::Mint {
            name: dir.join("etcd/ca.key").display().to_string(),
            source,
        })?;
    Ok(EtcdMaterial {
        source: dir.display().to_string(),
        ca_pem: etcd_ca.cert_pem.clone(),
        cert_pem,
        key_pem,
        minted: true,
        ca_key: Some(etcd_ca.describe_key()),
        cluster_ca,
    })
}

/// Where the etcd identity comes from after token discovery.
#[derive(Debug)]
pub enum CertSource<'a> {
    /// `--certificate-key`: read and decrypt the kubeadm-certs Secret.
    KubeadmCerts(&'a [u8; 32]),
    /// `--cert-dir`: already read from disk.
    Files(EtcdMaterial),
    /// A control-plane join with neither: kubeadm expects the shared certificates already in
    /// the cluster's `certificatesDir` on this node (`checkIfReadyForAdditionalControlPlane` in
    /// kubeadm's `cmd/phases/join/preflight.go`: without a certificate key the shared
    /// certificates must exist), so the etcd identity is read from there once kubeadm-config
    /// names the directory.
    CertificatesDir,
}

/// A client certificate (clientAuth, CN `cn`, O `org`), signed by `ca` with the CA key's own
/// algorithm (RSA PKCS#1 v1.5 SHA-256, ECDSA P-256/SHA-256, P-384/SHA-384, Ed25519), valid from
/// [`CLOCK_SKEW`] ago until `lifetime` from now. The leaf key is a fresh ECDSA P-256 key (ring generates no RSA),
/// returned as PKCS#8 PEM.
pub(crate) fn mint_client(
    ca: &SigningCa,
    cn: &str,
    org: Option<&str>,
    lifetime: Duration,
) -> Result<(Vec<u8>, Zeroizing<Vec<u8>>), MintError> {
    use rcgen::{
        CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let signer = ca.key.to_rcgen()?;
    let ca_text = String::from_utf8(ca.cert_pem.clone()).map_err(|_| MintError::CaText)?;
    let issuer = Issuer::from_ca_cert_pem(&ca_text, signer).map_err(MintError::CaCertificate)?;
    let key = KeyPair::generate().map_err(MintError::KeyGeneration)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, cn);
    if let Some(o) = org {
        params.distinguished_name.push(DnType::OrganizationName, o);
    }
    params.is_ca = IsCa::ExplicitNoCa;
    // kubeadm's leaf key usages (pkiutil.NewSignedCert); keyEncipherment is harmless on an
    // ECDSA leaf and Go's verifier ignores key usages of leaves.
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let now = SystemTime::now();
    params.not_before = (now - CLOCK_SKEW).into();
    params.not_after = (now + lifetime).into();
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(MintError::Signing)?;
    Ok((
        cert.pem().into_bytes(),
        Zeroizing::new(key.serialize_pem().into_bytes()),
    ))
}

/// How far before now a minted certificate is valid from: room for a member's clock a little
/// behind this node's, and no more (five minutes made a 5-minute certificate valid for 10).
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Lifetime of the admin certificate minted to list the etcd pods: one request.
pub const ADMIN_LIFETIME: Duration = Duration::from_secs(300);
/// kubeadm's etcd static pods (`etcdutil.NewFromCluster`).
pub const ETCD_PODS: &str =
    "/api/v1/namespaces/kube-system/pods?labelSelector=component%3Detcd%2Ctier%3Dcontrol-plane";
/// The annotation with a stacked member's client URL.
pub const ETCD_URL_ANNOTATION: &str = "kubeadm.kubernetes.io/etcd.advertise-client-urls";

/// Reads kubeadm-config (and, with a certificate key, kubeadm-certs) with the bootstrap token,
/// on `policy`. For stacked etcd in a cluster without a ClusterStatus, the member URLs are on the
/// etcd pods, which a bootstrap token may not list: with the cluster CA from kubeadm-certs it
/// mints an in-memory admin certificate for that one list, as the join itself would with the same
/// key material: CN `joinguard-preflight:<node>` (the audit log names the node), O
/// `kubeadm:cluster-admins` on clusters at 1.29 or later (RBAC-bound, revocable; kubeadm's own
/// admin.conf group since 1.29), `system:masters` before or after a 403, valid 5 minutes.
pub async fn read_cluster(
    client: &ApiClient,
    admin: impl Fn(&[u8], Zeroizing<Vec<u8>>) -> Result<ApiClient, ClientError>,
    policy: &RetryPolicy,
    recorder: &Recorder,
    certs: Option<CertSource<'_>>,
    spelling: Spelling,
    node_name: Option<&str>,
) -> Result<(ClusterFacts, Option<EtcdMaterial>), DiscoveryError> {
    let wake = client.socket_addr().map(WakeOnConnect::new);
    let get = |c: &ApiClient, op: &'static str, path: &'static str| {
        let wake = wake.clone();
        let c = c.clone();
        async move {
            retry::run(policy, op, recorder, wake.as_ref(), |ctx| {
                c.get(path, ctx.timeout)
            })
            .await
            .map_err(DiscoveryError::from_retry)
        }
    };
    let cm = get(client, "kube-system/kubeadm-config get", KUBEADM_CONFIG).await?;
    let mut facts =
        ClusterFacts::from_config_map(&cm).map_err(|e| DiscoveryError::Failed(e.to_string()))?;
    let material = match certs {
        None => return Ok((facts, None)),
        Some(CertSource::Files(m)) => m,
        Some(CertSource::CertificatesDir) => {
            let dir = facts
                .certificates_dir
                .clone()
                .unwrap_or_else(|| DEFAULT_CERTIFICATES_DIR.to_string());
            etcd_material_from_dir(std::path::Path::new(&dir)).map_err(|e| {
                let f = |i| spelling.spell(i);
                DiscoveryError::Input(format!(
                    "a control-plane join without {key} needs the cluster's shared certificates \
                     on this node, as kubeadm join does, and joinguard needs the etcd CA among \
                     them to check etcd: {e}. Give one of: {key} (with {token}: the etcd CA comes \
                     from the kubeadm-certs Secret), {dir} DIR (kubeadm's layout), {config} with \
                     controlPlane.certificateKey, or {explicit}",
                    key = f(Input::CertificateKey),
                    token = f(Input::Token),
                    dir = f(Input::CertDir),
                    config = f(Input::Config),
                    explicit = spelling.explicit_etcd(),
                ))
            })?
        }
        Some(CertSource::KubeadmCerts(k)) => {
            let secret = get(client, "kube-system/kubeadm-certs get", KUBEADM_CERTS).await?;
            etcd_material(&secret, k, &spelling.name(Input::CertificateKey))?
        }
    };
    let stacked_unknown =
        facts.external_etcd.is_empty() && facts.control_plane_addresses.is_empty();
    let cluster_ca = if stacked_unknown {
        material
            .cluster_ca
            .load()
            .map_err(|e| DiscoveryError::Input(e.to_string()))?
    } else {
        None
    };
    if let Some(ca) = &cluster_ca {
        // The node's name in the CN, for the API server's audit log.
        let cn = match node_name {
            Some(n) => format!("joinguard-preflight:{n}"),
            None => "joinguard-preflight".to_string(),
        };
        let mut group = admin_group(facts.kubernetes_version.as_deref());
        let pods = loop {
            let (cert, key) = mint_client(ca, &cn, Some(group), ADMIN_LIFETIME)
                .map_err(|e| DiscoveryError::Failed(e.to_string()))?;
            let admin_client =
                admin(&cert, key).map_err(|e| DiscoveryError::Failed(e.to_string()))?;
            let r = retry::run(
                policy,
                "kube-system/pods list (etcd)",
                recorder,
                wake.as_ref(),
                |ctx| admin_client.get(ETCD_PODS, ctx.timeout),
            )
            .await;
            match r {
                Ok(v) => break v,
                // A cluster whose `kubeadm:cluster-admins` binding was removed (or never made):
                // kubeadm's pre-1.29 group, once.
                Err(e)
                    if group == CLUSTER_ADMINS_GROUP
                        && matches!(e.last.error(), Some(ApiCallError::Status(s)) if s.status == 403) =>
                {
                    group = MASTERS_GROUP;
                }
                Err(e) => return Err(DiscoveryError::from_retry(e)),
            }
        };
        facts.etcd_pod_urls = pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["metadata"]["annotations"][ETCD_URL_ANNOTATION].as_str())
            .filter_map(|urls| urls.split(',').map(str::trim).find(|u| !u.is_empty()))
            .map(str::to_string)
            .collect();
    }
    Ok((facts, Some(material)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key_name() -> Named {
        crate::input::tests::named(Input::CertificateKey)
    }

    #[test]
    fn the_admin_group_is_kubeadms_for_the_clusters_version() {
        for (v, want) in [
            (Some("v1.28.9"), MASTERS_GROUP),
            (Some("v1.29.0"), CLUSTER_ADMINS_GROUP),
            (Some("v1.36.1"), CLUSTER_ADMINS_GROUP),
            (Some("1.31"), CLUSTER_ADMINS_GROUP),
            (Some("v2.0.0"), CLUSTER_ADMINS_GROUP),
            (Some("latest"), MASTERS_GROUP),
            (None, MASTERS_GROUP),
        ] {
            assert_eq!(admin_group(v), want, "{v:?}");
        }
    }

    #[test]
    fn facts_from_v1beta4_and_v1beta3_layouts() {
        let v4 = json!({"data": {"ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta4\ncontrolPlaneEndpoint: 10.0.0.10:6443\netcd:\n  local:\n    extraArgs:\n    - name: heartbeat-interval\n      value: \"250\"\n    - name: election-timeout\n      value: \"2500\"\nkind: ClusterConfiguration\n"}});
        let f = ClusterFacts::from_config_map(&v4).unwrap();
        assert_eq!(f.control_plane_endpoint.as_deref(), Some("10.0.0.10:6443"));
        assert_eq!(f.heartbeat, Some(Duration::from_millis(250)));
        assert_eq!(f.election, Some(Duration::from_millis(2500)));
        let v3 = json!({"data": {
            "ClusterConfiguration": "apiVersion: kubeadm.k8s.io/v1beta3\netcd:\n  external:\n    endpoints:\n    - https://10.0.0.21:2379\n    - https://10.0.0.22:2379\nkind: ClusterConfiguration\n",
            "ClusterStatus": "apiEndpoints:\n  cp-1:\n    advertiseAddress: 10.0.0.11\n    bindPort: 6443\n",
        }});
        let f = ClusterFacts::from_config_map(&v3).unwrap();
        assert_eq!(
            f.external_etcd,
            ["https://10.0.0.21:2379", "https://10.0.0.22:2379"]
        );
        assert_eq!(f.control_plane_addresses, ["10.0.0.11"]);
        assert_eq!(f.heartbeat, None);
    }

    #[test]
    fn certificate_keys_and_decryption() {
        use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
        let hex = "ab".repeat(32);
        let key = parse_certificate_key(&hex).unwrap();
        assert!(parse_certificate_key("abcd")
            .unwrap_err()
            .to_string()
            .contains("64 hex digits"));
        assert!(!parse_certificate_key(&"zz".repeat(32))
            .unwrap_err()
            .to_string()
            .contains("zz"));
        let nonce = [7u8; 12];
        let mut buf = b"secret material".to_vec();
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &*key).unwrap())
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
            .unwrap();
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&buf);
        assert_eq!(
            decrypt_bytes(&sealed, &key).unwrap().as_slice(),
            b"secret material"
        );
        let wrong = parse_certificate_key(&"cd".repeat(32)).unwrap();
        assert!(decrypt_bytes(&sealed, &wrong).is_none());
        assert!(decrypt_bytes(&sealed[..10], &key).is_none());
    }

    /// The signature algorithm OID of a PEM certificate, and whether it chains to `ca_pem` as a
    /// clientAuth certificate (rustls' webpki verifier, as etcd's Go verifier would check it).
    fn signature_and_chain(cert_pem: &[u8], ca_pem: &[u8]) -> (String, Result<(), rustls::Error>) {
        let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem).unwrap();
        let cert = pem.parse_x509().unwrap();
        let oid = cert.signature_algorithm.algorithm.to_id_string();
        let mut roots = rustls::RootCertStore::empty();
        use rustls_pki_types::pem::PemObject;
        for c in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(c.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let der = rustls_pki_types::CertificateDer::from(pem.contents.clone());
        let chain = verifier
            .verify_client_cert(&der, &[], rustls_pki_types::UnixTime::now())
            .map(|_| ());
        (oid, chain)
    }

    /// kubeadm's default CA (RSA-2048, its key PKCS#1 `BEGIN RSA PRIVATE KEY`) failed here with
    /// "the CA key is not usable (Could not parse key pair)": rcgen on ring takes PKCS#8 only.
    /// Every CA kubeadm can write now mints, and signs as Go signs for that issuer type.
    #[test]
    fn mints_from_every_ca_key_kubeadm_writes_with_the_issuers_signature() {
        use netlab::pki::{KeyAlgorithm, KeyEncoding, KeyProfile, TestCa};
        let sha256_rsa = "1.2.840.113549.1.1.11";
        let ecdsa_sha256 = "1.2.840.10045.4.3.2";
        let ecdsa_sha384 = "1.2.840.10045.4.3.3";
        let cases = [
            (KeyProfile::RSA_2048, sha256_rsa),
            (KeyProfile::kubeadm(KeyAlgorithm::Rsa(3072)), sha256_rsa),
            (KeyProfile::kubeadm(KeyAlgorithm::Rsa(4096)), sha256_rsa),
            (KeyProfile::ECDSA_P256, ecdsa_sha256),
            (KeyProfile::kubeadm(KeyAlgorithm::EcdsaP384), ecdsa_sha384),
            (KeyProfile::PKCS8_P256, ecdsa_sha256),
            (
                KeyProfile {
                    algorithm: KeyAlgorithm::Rsa(2048),
                    encoding: KeyEncoding::Pkcs8,
                },
                sha256_rsa,
            ),
        ];
        for (profile, want_sig) in cases {
            let ca = TestCa::with_profile("etcd-ca", profile).unwrap();
            let signing = SigningCa::parse(
                "etcd/ca.crt",
                ca.cert_pem().as_bytes(),
                "etcd/ca.key",
                ca.key_pem().as_bytes(),
                None,
            )
            .unwrap_or_else(|e| panic!("{profile}: {e}"));
            let (cert, key) =
                mint_client(&signing, "joinguard-preflight", None, MINTED_LIFETIME).unwrap();
            let (sig, chain) = signature_and_chain(&cert, ca.cert_pem().as_bytes());
            assert_eq!(sig, want_sig, "{profile}");
            chain.unwrap_or_else(|e| panic!("{profile}: minted cert does not verify: {e}"));
            // The minted leaf key is ECDSA P-256 (ring generates no RSA), PKCS#8.
            let leaf = PrivateKey::from_pem(&key, None).unwrap();
            assert_eq!(leaf.algorithm(), crate::key::KeyAlgorithm::EcdsaP256);
        }
    }

    /// `--cert-dir` reads the cluster CA key only when it mints an admin certificate with it:
    /// a damaged (or unreadable) `ca.key` does not stop a run that never needs it, and is named
    /// when one does.
    #[test]
    fn the_cluster_ca_key_is_read_only_to_mint() {
        use netlab::pki::{KeyProfile, KubeadmPki};
        let dir = tempfile::tempdir().unwrap();
        KubeadmPki::with_profile(KeyProfile::ECDSA_P256)
            .unwrap()
            .write_shared(dir.path())
            .unwrap();
        std::fs::write(dir.path().join("ca.key"), "not a key").unwrap();
        let m = etcd_material_from_dir(dir.path()).expect("the etcd identity needs no ca.key");
        assert!(m.minted && m.cluster_ca.is_some());
        let Err(e) = m.cluster_ca.load() else {
            panic!("minting reads ca.key");
        };
        assert!(e.to_string().contains("ca.key"), "{e}");
    }

    /// A minted certificate is valid from 30 s ago until its lifetime from now: no wider.
    #[test]
    fn a_minted_certificate_is_valid_for_its_lifetime_and_30_s_of_skew() {
        use netlab::pki::{KeyProfile, TestCa};
        let ca = TestCa::with_profile("etcd-ca", KeyProfile::ECDSA_P256).unwrap();
        let signing = SigningCa::parse(
            "etcd/ca.crt",
            ca.cert_pem().as_bytes(),
            "etcd/ca.key",
            ca.key_pem().as_bytes(),
            None,
        )
        .unwrap();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let (cert, _) = mint_client(&signing, "joinguard-preflight", None, ADMIN_LIFETIME).unwrap();
        use rustls_pki_types::pem::PemObject;
        let der = rustls_pki_types::CertificateDer::from_pem_slice(&cert).unwrap();
        let (_, x) = x509_parser::parse_x509_certificate(&der).unwrap();
        let from = x.validity().not_before.timestamp();
        let until = x.validity().not_after.timestamp();
        assert!((now - from - 30).abs() <= 2, "not before {from}, now {now}");
        assert_eq!(until - from, 30 + ADMIN_LIFETIME.as_secs() as i64);
    }

    #[test]
    fn a_ca_key_that_is_not_the_certificates_is_refused() {
        use netlab::pki::{KeyProfile, TestCa};
        let a = TestCa::with_profile("etcd-ca", KeyProfile::ECDSA_P256).unwrap();
        let b = TestCa::with_profile("etcd-ca", KeyProfile::ECDSA_P256).unwrap();
        let e = SigningCa::parse(
            "etcd/ca.crt",
            a.cert_pem().as_bytes(),
            "etcd/ca.key",
            b.key_pem().as_bytes(),
            None,
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("etcd/ca.key: the key does not belong to the CA certificate etcd/ca.crt"),
            "{e}"
        );
        let leaf = a.issue(&netlab::pki::CertSpec::client("c", None)).unwrap();
        let e = SigningCa::parse(
            "etcd/ca.crt",
            leaf.cert_pem.as_bytes(),
            "etcd/ca.key",
            leaf.key_pem.as_bytes(),
            None,
        )
        .unwrap_err();
        assert!(e.to_string().contains("is not a CA"), "{e}");
    }

    fn sealed_secret(entries: &[(&str, &[u8])], key: &[u8; 32]) -> Value {
        use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
        let mut data = serde_json::Map::new();
        for (name, body) in entries {
            let b64 = if body.is_empty() {
                String::new()
            } else {
                let nonce = [9u8; 12];
                let mut buf = body.to_vec();
                LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).unwrap())
                    .seal_in_place_append_tag(
                        Nonce::assume_unique_for_key(nonce),
                        Aad::empty(),
                        &mut buf,
                    )
                    .unwrap();
                let mut sealed = nonce.to_vec();
                sealed.extend_from_slice(&buf);
                STANDARD.encode(sealed)
            };
            data.insert((*name).to_string(), b64.into());
        }
        json!({ "data": data })
    }

    #[test]
    fn kubeadm_certs_entries_in_kubeadm_formats_mint_and_bad_ones_name_the_entry() {
        use netlab::pki::{KeyProfile, KubeadmPki};
        let key = [5u8; 32];
        let pki = KubeadmPki::with_profile(KeyProfile::RSA_2048).unwrap();
        let entries = pki.kubeadm_certs_entries();
        let all: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(n, b)| (n.as_str(), b.as_bytes()))
            .collect();
        let m = etcd_material(&sealed_secret(&all, &key), &key, &key_name()).unwrap();
        assert!(m.minted);
        assert_eq!(m.ca_key.as_deref(), Some("RSA-2048 PKCS#1"));
        assert!(m.cluster_ca.is_some());

        // kubeadm uploads an empty entry for a file it did not find (an external CA without
        // ca.key): that is "absent", not a wrong certificate key.
        let mut no_ca_key = all.clone();
        no_ca_key.retain(|(n, _)| *n != "ca.key");
        no_ca_key.push(("ca.key", b""));
        let m = etcd_material(&sealed_secret(&no_ca_key, &key), &key, &key_name()).unwrap();
        assert!(!m.cluster_ca.is_some());

        let encrypted = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../joinguard/tests/data/keys/encrypted-pkcs8.pem"),
        )
        .unwrap();
        let mut bad = all.clone();
        bad.retain(|(n, _)| *n != "etcd-ca.key");
        bad.push(("etcd-ca.key", &encrypted));
        let e = etcd_material(&sealed_secret(&bad, &key), &key, &key_name()).unwrap_err();
        assert!(matches!(e, DiscoveryError::Input(_)), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "kubeadm-certs entry etcd-ca.key: encrypted PKCS#8 key (BEGIN ENCRYPTED PRIVATE KEY)"
            ),
            "{msg}"
        );
        assert!(msg.contains("kubeadm init phase upload-certs"), "{msg}");
        assert!(!msg.contains(&String::from_utf8_lossy(&encrypted[40..100]).to_string()));
    }
}
