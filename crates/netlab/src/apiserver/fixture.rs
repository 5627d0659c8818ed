//! The "kubeadm init" fixture: what a real `kubeadm init` (with `--upload-certs`) leaves in the
//! API for a joining node, written through the stand-in into etcd.
//!
//! It owns the formats kubeadm and the cluster-bootstrap library use: the `cluster-info`
//! kubeconfig and its detached HS256 JWS (`k8s.io/cluster-bootstrap/token/jws`), bootstrap token
//! Secrets, the `kubeadm-config` ClusterConfiguration YAML, the `kubeadm-certs` Secret whose
//! entries are AES-256-GCM sealed with the certificate key and the nonce prepended
//! (`cryptoutil.EncryptBytes` in `kubeadm/app/phases/copycerts`), kubeadm's RBAC, and the CA
//! pin (`pubkeypin.Hash`). It must not be used to check joinguard's own implementation of these
//! formats against itself: tests recompute them independently.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::fmt;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use serde_json::{json, Value};

use super::time::format_rfc3339;
use super::{ApiServer, Error};
use crate::pki::TestCa;

/// `bootstrapapi.BootstrapTokenSecretPrefix`.
pub const TOKEN_SECRET_PREFIX: &str = "bootstrap-token-";
/// The group kubeadm's default token carries (`kubeadmconstants.NodeBootstrapTokenAuthGroup`).
pub const NODE_BOOTSTRAP_GROUP: &str = "system:bootstrappers:kubeadm:default-node-token";
/// `bootstrapapi.JWSSignatureKeyPrefix`.
pub const JWS_KEY_PREFIX: &str = "jws-kubeconfig-";
/// kubeadm's default token TTL (`constants.DefaultTokenDuration`).
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

/// The kubeadm config API version the ClusterConfiguration is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KubeadmApiVersion {
    /// `kubeadm.k8s.io/v1beta3` (extraArgs as a map).
    V1beta3,
    /// `kubeadm.k8s.io/v1beta4` (extraArgs as a list of name/value; the 1.31+ default).
    #[default]
    V1beta4,
}

impl KubeadmApiVersion {
    fn as_str(self) -> &'static str {
        match self {
            KubeadmApiVersion::V1beta3 => "kubeadm.k8s.io/v1beta3",
            KubeadmApiVersion::V1beta4 => "kubeadm.k8s.io/v1beta4",
        }
    }
}

/// An external etcd, as ClusterConfiguration `etcd.external` describes it.
#[derive(Clone)]
pub struct ExternalEtcd {
    /// Client URLs.
    pub endpoints: Vec<String>,
    /// The client certificate (PEM) kube-apiserver uses; uploaded as `external-etcd.crt`.
    pub client_cert_pem: String,
    /// Its key (PEM); uploaded as `external-etcd.key`.
    pub client_key_pem: String,
}

impl fmt::Debug for ExternalEtcd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternalEtcd")
            .field("endpoints", &self.endpoints)
            .field("client_key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// One control-plane node in the legacy `ClusterStatus`.
#[derive(Clone, Debug)]
pub struct ApiEndpoint {
    /// The node name.
    pub node: String,
    /// `advertiseAddress`.
    pub address: IpAddr,
    /// `bindPort`.
    pub port: u16,
}

/// What to write. Make one with [`FixtureOptions::new`] and set what matters.
pub struct FixtureOptions<'a> {
    /// The bootstrap token, `[a-z0-9]{6}.[a-z0-9]{16}`.
    pub token: String,
    /// The token's expiration; `None` means it never expires. Default: 24 h from now.
    pub token_expiration: Option<SystemTime>,
    /// The certificate key, 64 hex digits (32 bytes, AES-256). With it, `kubeadm-certs` is
    /// written, as `kubeadm init --upload-certs` does.
    pub certificate_key: Option<String>,
    /// The etcd CA. For stacked etcd it goes into kubeadm-certs as `etcd-ca.crt` and `etcd-ca.key`;
    /// for external etcd as `external-etcd-ca.crt`.
    pub etcd_ca: &'a TestCa,
    /// External etcd; `None` for stacked (local) etcd.
    pub external_etcd: Option<ExternalEtcd>,
    /// Extra flags for the local etcd (`etcd.local.extraArgs`), e.g. `heartbeat-interval`.
    pub etcd_extra_args: Vec<(String, String)>,
    /// `controlPlaneEndpoint`; default the stand-in's `ip:port`.
    pub control_plane_endpoint: Option<String>,
    /// Write a legacy `ClusterStatus` key (kubeadm < 1.22) with these endpoints, if any.
    pub cluster_status: Vec<ApiEndpoint>,
    /// Stacked etcd's static pod mirrors, `(node name, client URL)`: Pods `etcd-<node>` in
    /// kube-system with kubeadm's labels and `kubeadm.kubernetes.io/etcd.advertise-client-urls`
    /// annotation (kubeadm >= 1.18 finds the members through them).
    pub etcd_pods: Vec<(String, String)>,
    /// The ClusterConfiguration API version.
    pub api_version: KubeadmApiVersion,
    /// `kubernetesVersion`.
    pub kubernetes_version: String,
}

impl fmt::Debug for FixtureOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixtureOptions")
            .field("token", &"<redacted>")
            .field(
                "certificate_key",
                &self.certificate_key.as_ref().map(|_| "<redacted>"),
            )
            .field("external_etcd", &self.external_etcd)
            .field("api_version", &self.api_version)
            .finish_non_exhaustive()
    }
}

impl<'a> FixtureOptions<'a> {
    /// Defaults for `token` and a stacked etcd with CA `etcd_ca`.
    pub fn new(token: impl Into<String>, etcd_ca: &'a TestCa) -> FixtureOptions<'a> {
        FixtureOptions {
            token: token.into(),
            token_expiration: Some(SystemTime::now() + DEFAULT_TOKEN_TTL),
            certificate_key: None,
            etcd_ca,
            external_etcd: None,
            etcd_extra_args: Vec::new(),
            control_plane_endpoint: None,
            cluster_status: Vec::new(),
            etcd_pods: Vec::new(),
            api_version: KubeadmApiVersion::default(),
            kubernetes_version: "v1.32.0".into(),
        }
    }
}

/// What the fixture wrote, for the test to use.
#[derive(Clone)]
pub struct Fixture {
    /// The bootstrap token.
    pub token: String,
    /// Its id (the part before the dot).
    pub token_id: String,
    /// `sha256:<hex>` over the cluster CA's DER SubjectPublicKeyInfo, as
    /// `kubeadm token create --print-join-command` prints it.
    pub ca_pin: String,
    /// The `kubeconfig` key of `cluster-info`.
    pub cluster_info_kubeconfig: String,
    /// The ClusterConfiguration YAML in `kubeadm-config`.
    pub cluster_configuration: String,
    /// The certificate key, if kubeadm-certs was written.
    pub certificate_key: Option<String>,
    /// The kubeadm-certs entry names (e.g. `ca.crt`, `etcd-ca.key`); empty without a key.
    pub kubeadm_certs: Vec<String>,
}

impl fmt::Debug for Fixture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fixture")
            .field("token_id", &self.token_id)
            .field("token", &"<redacted>")
            .field("ca_pin", &self.ca_pin)
            .field(
                "certificate_key",
                &self.certificate_key.as_ref().map(|_| "<redacted>"),
            )
            .field("kubeadm_certs", &self.kubeadm_certs)
            .finish_non_exhaustive()
    }
}

/// Writes what `kubeadm init --upload-certs` leaves behind into the stand-in. Objects that exist
/// are replaced, so the fixture can be re-run.
pub fn kubeadm_init(api: &ApiServer, opts: FixtureOptions<'_>) -> Result<Fixture, Error> {
    let bad = |m: String| Error::Fixture(m);
    let (token_id, token_secret) = super::auth::parse_bootstrap_token(&opts.token)
        .ok_or_else(|| bad("the token must match [a-z0-9]{6}.[a-z0-9]{16}".into()))?;
    let key = match &opts.certificate_key {
        Some(k) => Some(decode_certificate_key(k).ok_or_else(|| {
            bad("the certificate key must be 64 hex digits (32 bytes, AES-256)".into())
        })?),
        None => None,
    };
    let endpoint = opts
        .control_plane_endpoint
        .clone()
        .unwrap_or_else(|| api.addr().to_string());

    // cluster-info, as `kubeadm init` phase bootstrap-token writes it, and the signature the
    // bootstrap signer controller adds for each token with usage-bootstrap-signing.
    let kubeconfig = cluster_info_kubeconfig(&format!("https://{endpoint}"), api.ca_pem());
    let jws = detached_jws(&kubeconfig, token_id, token_secret);
    api.upsert(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": {"kubeconfig": kubeconfig, format!("{JWS_KEY_PREFIX}{token_id}"): jws},
    }))?;
    api.upsert(bootstrap_token_secret(
        &opts.token,
        opts.token_expiration,
        &[NODE_BOOTSTRAP_GROUP],
        "The default bootstrap token generated by 'kubeadm init'.",
    )?)?;

    let cluster_configuration = cluster_configuration(&opts, &endpoint);
    let mut data = json!({ "ClusterConfiguration": cluster_configuration });
    if !opts.cluster_status.is_empty() {
        data["ClusterStatus"] = cluster_status(&opts.cluster_status).into();
    }
    api.upsert(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": data,
    }))?;

    let mut kubeadm_certs = Vec::new();
    if let Some(key) = key {
        let entries = cert_entries(api, &opts)?;
        let mut data = serde_json::Map::new();
        for (name, content) in &entries {
            data.insert(
                name.clone(),
                STANDARD
                    .encode(encrypt_bytes(content.as_bytes(), &key))
                    .into(),
            );
            kubeadm_certs.push(name.clone());
        }
        api.upsert(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "kubeadm-certs", "namespace": "kube-system"},
            "data": data,
        }))?;
    }
    for (node, url) in &opts.etcd_pods {
        api.upsert(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": format!("etcd-{node}"), "namespace": "kube-system",
                "labels": {"component": "etcd", "tier": "control-plane"},
                "annotations": {"kubeadm.kubernetes.io/etcd.advertise-client-urls": url},
            },
            "spec": {"nodeName": node, "containers": [{"name": "etcd", "image": "registry.k8s.io/etcd:3.5.16-0"}]},
        }))?;
    }
    for obj in rbac(&opts.kubernetes_version) {
        api.upsert(obj)?;
    }
    Ok(Fixture {
        token: opts.token.clone(),
        token_id: token_id.to_string(),
        ca_pin: ca_pin(api.ca_pem())?,
        cluster_info_kubeconfig: kubeconfig,
        cluster_configuration,
        certificate_key: opts.certificate_key.clone(),
        kubeadm_certs,
    })
}

/// A bootstrap token Secret as `kubeadm token create` writes it (usages authentication and
/// signing), in `kube-system`.
pub fn bootstrap_token_secret(
    token: &str,
    expiration: Option<SystemTime>,
    extra_groups: &[&str],
    description: &str,
) -> Result<Value, Error> {
    let (id, secret) = super::auth::parse_bootstrap_token(token)
        .ok_or_else(|| Error::Fixture("the token must match [a-z0-9]{6}.[a-z0-9]{16}".into()))?;
    let mut data = json!({
        "token-id": STANDARD.encode(id),
        "token-secret": STANDARD.encode(secret),
        "usage-bootstrap-authentication": STANDARD.encode("true"),
        "usage-bootstrap-signing": STANDARD.encode("true"),
        "description": STANDARD.encode(description),
    });
    if !extra_groups.is_empty() {
        data["auth-extra-groups"] = STANDARD.encode(extra_groups.join(",")).into();
    }
    if let Some(t) = expiration {
        data["expiration"] = STANDARD.encode(format_rfc3339(t)).into();
    }
    Ok(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
        "metadata": {"name": format!("{TOKEN_SECRET_PREFIX}{id}"), "namespace": "kube-system"},
        "data": data,
    }))
}

/// The kubeconfig kubeadm puts in `cluster-info` (one nameless cluster, no users).
pub fn cluster_info_kubeconfig(server: &str, ca_pem: &str) -> String {
    format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: {server}\n  name: \"\"\ncontexts: null\ncurrent-context: \"\"\nkind: Config\npreferences: {{}}\nusers: null\n",
        STANDARD.encode(ca_pem)
    )
}

/// `ComputeDetachedSignature`: a compact HS256 JWS over `content` with key `token_secret` and
/// header `{"alg":"HS256","kid":"<token_id>"}`, its payload stripped: `<header>..<signature>`.
pub fn detached_jws(content: &str, token_id: &str, token_secret: &str) -> String {
    // go-jose marshals the protected header from a map, so its keys come sorted.
    let header = URL_SAFE_NO_PAD.encode(format!(r#"{{"alg":"HS256","kid":"{token_id}"}}"#));
    let payload = URL_SAFE_NO_PAD.encode(content);
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token_secret.as_bytes());
    let sig = ring::hmac::sign(&key, format!("{header}.{payload}").as_bytes());
    format!("{header}..{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

/// `pubkeypin.Hash`: `sha256:` and the lowercase hex SHA-256 of the first certificate's DER
/// SubjectPublicKeyInfo.
pub fn ca_pin(cert_pem: &str) -> Result<String, Error> {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map_err(|e| Error::Fixture(format!("CA pin: PEM: {e}")))?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| Error::Fixture(format!("CA pin: certificate: {e}")))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    Ok(format!("sha256:{}", hex(digest.as_ref())))
}

/// `cryptoutil.EncryptBytes`: AES-256-GCM with a random 12-byte nonce, returned as
/// `nonce || ciphertext || tag` (Go's `gcm.Seal(nonce, nonce, data, nil)`).
pub fn encrypt_bytes(data: &[u8], key: &[u8; 32]) -> Vec<u8> {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).expect("a 32-byte key"));
    let nonce: [u8; 12] = rand::random();
    let mut buf = data.to_vec();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
        .expect("AES-GCM seal of an in-memory buffer");
    let mut out = nonce.to_vec();
    out.extend_from_slice(&buf);
    out
}

/// The inverse of [`encrypt_bytes`] (`cryptoutil.DecryptBytes`); `None` if the key is wrong or
/// the data was changed.
pub fn decrypt_bytes(data: &[u8], key: &[u8; 32]) -> Option<Vec<u8>> {
    use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
    if data.len() < 12 + 16 {
        return None;
    }
    let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).ok()?);
    let (nonce, sealed) = data.split_at(12);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut buf = sealed.to_vec();
    let plain = key.open_in_place(nonce, Aad::empty(), &mut buf).ok()?;
    Some(plain.to_vec())
}

/// Hex-decodes a 32-byte certificate key.
pub fn decode_certificate_key(hex_key: &str) -> Option<[u8; 32]> {
    let b = hex_key.trim().as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The kubeadm-certs entries for `copycerts.certsToTransfer`, named as
/// `copycerts.certOrKeyNameToSecretName` names them (`etcd/ca.crt` becomes `etcd-ca.crt`), each the
/// exact bytes of the lab PKI's file. Stacked etcd: `ca.*`, `front-proxy-ca.*`, `sa.*`,
/// `etcd-ca.*`; external etcd: the etcd CA and client certificate and key instead of `etcd-ca.*`.
fn cert_entries(
    api: &ApiServer,
    opts: &FixtureOptions<'_>,
) -> Result<Vec<(String, String)>, Error> {
    let pki = |e: crate::Error| Error::Fixture(format!("kubeadm-certs: {e}"));
    // A stand-in with a CA of the test's own has no lab PKI: the other shared files come from a
    // fresh one of the same key profile.
    let own;
    let lab = match api.pki() {
        Some(p) => p.as_ref(),
        None => {
            own = crate::pki::KubeadmPki::with_profile(api.ca().profile()).map_err(pki)?;
            &own
        }
    };
    let mut entries = vec![
        ("ca.crt".to_string(), api.ca().cert_pem().to_string()),
        ("ca.key".to_string(), api.ca().key_pem()),
    ];
    entries.extend(
        lab.kubeadm_certs_entries()
            .into_iter()
            .filter(|(name, _)| name.starts_with("front-proxy-ca.") || name.starts_with("sa.")),
    );
    match &opts.external_etcd {
        None => {
            entries.push(("etcd-ca.crt".into(), opts.etcd_ca.cert_pem().to_string()));
            entries.push(("etcd-ca.key".into(), opts.etcd_ca.key_pem()));
        }
        Some(ext) => {
            entries.push((
                "external-etcd-ca.crt".into(),
                opts.etcd_ca.cert_pem().to_string(),
            ));
            entries.push(("external-etcd.crt".into(), ext.client_cert_pem.clone()));
            entries.push(("external-etcd.key".into(), ext.client_key_pem.clone()));
        }
    }
    Ok(entries)
}

/// The ClusterConfiguration YAML, with keys in the order Go's YAML marshaller writes them.
fn cluster_configuration(opts: &FixtureOptions<'_>, endpoint: &str) -> String {
    let v4 = opts.api_version == KubeadmApiVersion::V1beta4;
    let mut y = String::from("apiServer: {}\n");
    y += &format!("apiVersion: {}\n", opts.api_version.as_str());
    if v4 {
        y += "caCertificateValidityPeriod: 87600h0m0s\ncertificateValidityPeriod: 8760h0m0s\n";
    }
    y += "certificatesDir: /etc/kubernetes/pki\nclusterName: kubernetes\n";
    // sigs.k8s.io/yaml quotes a value that would read as a flow sequence (`[fd00::5]:6443`,
    // kubernetes/kubeadm #3101).
    if endpoint.starts_with('[') {
        y += &format!("controlPlaneEndpoint: '{endpoint}'\n");
    } else {
        y += &format!("controlPlaneEndpoint: {endpoint}\n");
    }
    y += "controllerManager: {}\ndns: {}\n";
    if v4 {
        y += &format!(
            "encryptionAlgorithm: {}\n",
            opts.etcd_ca.profile().encryption_algorithm()
        );
    }
    y += "etcd:\n";
    match &opts.external_etcd {
        Some(ext) => {
            y += "  external:\n    caFile: /etc/kubernetes/pki/etcd/ca.crt\n    certFile: /etc/kubernetes/pki/apiserver-etcd-client.crt\n    endpoints:\n";
            for e in &ext.endpoints {
                y += &format!("    - {e}\n");
            }
            y += "    keyFile: /etc/kubernetes/pki/apiserver-etcd-client.key\n";
        }
        None => {
            y += "  local:\n    dataDir: /var/lib/etcd\n";
            if !opts.etcd_extra_args.is_empty() {
                y += "    extraArgs:\n";
                for (k, v) in &opts.etcd_extra_args {
                    if v4 {
                        y += &format!("    - name: {k}\n      value: \"{v}\"\n");
                    } else {
                        y += &format!("      {k}: \"{v}\"\n");
                    }
                }
            }
        }
    }
    y += "imageRepository: registry.k8s.io\nkind: ClusterConfiguration\n";
    y += &format!("kubernetesVersion: {}\n", opts.kubernetes_version);
    y += "networking:\n  dnsDomain: cluster.local\n  serviceSubnet: 10.96.0.0/12\nproxy: {}\nscheduler: {}\n";
    y
}

fn cluster_status(endpoints: &[ApiEndpoint]) -> String {
    let mut y = String::from("apiEndpoints:\n");
    for e in endpoints {
        y += &format!(
            "  {}:\n    advertiseAddress: {}\n    bindPort: {}\n",
            e.node, e.address, e.port
        );
    }
    y += "apiVersion: kubeadm.k8s.io/v1beta2\nkind: ClusterStatus\n";
    y
}

fn role(ns: &str, name: &str, resource: &str, resource_name: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": name, "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": [resource], "resourceNames": [resource_name], "verbs": ["get"]}],
    })
}

fn binding(
    kind: &str,
    ns: Option<&str>,
    name: &str,
    role_kind: &str,
    subjects: &[(&str, &str)],
) -> Value {
    let subjects: Vec<Value> = subjects
        .iter()
        .map(|(k, n)| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": k, "name": n}))
        .collect();
    let mut meta = json!({"name": name});
    if let Some(ns) = ns {
        meta["namespace"] = ns.into();
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subjects,
    })
}

/// Whether `version` (`v1.32.0`) is kubeadm 1.29 or later, which binds the
/// `kubeadm:cluster-admins` group to `cluster-admin` (`kubeadm init` and `upgrade apply`,
/// `phases/kubeconfig`'s `EnsureAdminClusterRoleBinding`).
fn has_cluster_admins_group(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split('.');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor) >= (1, 29)
}

/// The RBAC `kubeadm init` creates for joining nodes (and, from 1.29, for its admins).
fn rbac(kubernetes_version: &str) -> Vec<Value> {
    let mut out = joining_rbac();
    if has_cluster_admins_group(kubernetes_version) {
        // kube-apiserver's bootstrap policy role, and kubeadm's binding of its admin group.
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cluster-admin"},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        }));
        out.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kubeadm:cluster-admins"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "kubeadm:cluster-admins"}],
        }));
    }
    out
}

/// The RBAC `kubeadm init` creates for joining nodes.
fn joining_rbac() -> Vec<Value> {
    let bootstrappers = ("Group", NODE_BOOTSTRAP_GROUP);
    vec![
        // phases/bootstraptoken/clusterinfo: anonymous may read cluster-info.
        role(
            "kube-public",
            "kubeadm:bootstrap-signer-clusterinfo",
            "configmaps",
            "cluster-info",
        ),
        binding(
            "RoleBinding",
            Some("kube-public"),
            "kubeadm:bootstrap-signer-clusterinfo",
            "Role",
            &[("User", "system:anonymous")],
        ),
        // phases/uploadconfig: nodes and bootstrap tokens may read kubeadm-config.
        role(
            "kube-system",
            "kubeadm:nodes-kubeadm-config",
            "configmaps",
            "kubeadm-config",
        ),
        binding(
            "RoleBinding",
            Some("kube-system"),
            "kubeadm:nodes-kubeadm-config",
            "Role",
            &[bootstrappers, ("Group", "system:nodes")],
        ),
        // phases/copycerts: bootstrap tokens may read kubeadm-certs.
        role(
            "kube-system",
            "kubeadm:kubeadm-certs",
            "secrets",
            "kubeadm-certs",
        ),
        binding(
            "RoleBinding",
            Some("kube-system"),
            "kubeadm:kubeadm-certs",
            "Role",
            &[bootstrappers],
        ),
        // phases/bootstraptoken/node: bootstrap tokens may get nodes (join preflight).
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "kubeadm:get-nodes"},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
        }),
        binding(
            "ClusterRoleBinding",
            None,
            "kubeadm:get-nodes",
            "ClusterRole",
            &[bootstrappers],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jws_has_kubeadm_shape() {
        let jws = detached_jws("hello", "abcdef", "0123456789abcdef");
        let (header, sig) = jws.split_once("..").expect("detached form");
        assert_eq!(
            URL_SAFE_NO_PAD.decode(header).unwrap(),
            br#"{"alg":"HS256","kid":"abcdef"}"#
        );
        assert_eq!(URL_SAFE_NO_PAD.decode(sig).unwrap().len(), 32);
    }

    #[test]
    fn certificate_keys_round_trip() {
        let key = decode_certificate_key(&"ab".repeat(32)).unwrap();
        assert_eq!(key, [0xab; 32]);
        assert!(decode_certificate_key("abc").is_none());
        let sealed = encrypt_bytes(b"secret", &key);
        assert_eq!(sealed.len(), 12 + 6 + 16);
        assert_eq!(decrypt_bytes(&sealed, &key).unwrap(), b"secret");
        assert!(decrypt_bytes(&sealed, &[0u8; 32]).is_none());
    }
}
