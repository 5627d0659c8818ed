//! kubeadm's `JoinConfiguration` (v1beta3 and v1beta4), read as kubeadm reads it: every field
//! name from kubeadm's Go types ([`crate::kubeadm::schema`]), case-sensitive, unknown fields a
//! warning naming the nearest known field (kubeadm ignores them with a warning too), a value of
//! the wrong type an error.
//!
//! A kubeadm config file may hold several YAML documents (`---`), as Cluster API writes
//! InitConfiguration and ClusterConfiguration beside each other; the one with
//! `kind: JoinConfiguration` is used. kubeadm documents of the other kinds are checked against
//! their own tables (for the warnings) and otherwise ignored, as `kubeadm join` ignores kinds it
//! does not read; component configs (KubeletConfiguration, KubeProxyConfiguration) are skipped.
//!
//! Parsing is two steps so that the YAML crate can be replaced without touching the field
//! logic: [`yaml_documents`] turns text into [`Node`] trees (through [`crate::yaml`], the only
//! code that knows the YAML crate), and everything after it works on those trees. This module reads the file it is
//! given and nothing else; it prints nothing (warnings are returned).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::duration::parse_go_duration;
use crate::kubeadm::schema::{self, Node};
use crate::secret::Secret;

/// kube-apiserver's default secure port (`constants.KubeAPIServerPort`).
pub const DEFAULT_BIND_PORT: u16 = 6443;

/// What joinguard takes from a JoinConfiguration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinConfig {
    pub api_version: String,
    /// `nodeRegistration.name`, if set (kubeadm defaults it to the hostname).
    pub node_name: Option<String>,
    /// `controlPlane.localAPIEndpoint`; `None` for a worker join (no `controlPlane`).
    pub local_api_endpoint: Option<(Option<IpAddr>, u16)>,
    /// `discovery.bootstrapToken.apiServerEndpoint`.
    pub api_server_endpoint: Option<String>,
    /// `discovery.bootstrapToken.token`.
    pub token: Option<Secret>,
    /// `discovery.tlsBootstrapToken` (kubeadm defaults it to the discovery token).
    pub tls_bootstrap_token: Option<Secret>,
    /// `discovery.bootstrapToken.caCertHashes`.
    pub ca_cert_hashes: Vec<String>,
    /// `discovery.bootstrapToken.unsafeSkipCAVerification`.
    pub unsafe_skip_ca_verification: bool,
    /// `discovery.file.kubeConfigPath` (a path or an https:// URL).
    pub discovery_file: Option<String>,
    /// `controlPlane.certificateKey`.
    pub certificate_key: Option<Secret>,
    /// `nodeRegistration.ignorePreflightErrors`.
    pub ignore_preflight_errors: Vec<String>,
    /// v1beta4 `timeouts.kubernetesAPICall`.
    pub kubernetes_api_call: Option<Duration>,
    /// v1beta4 `timeouts.etcdAPICall`.
    pub etcd_api_call: Option<Duration>,
    /// v1beta3 `discovery.timeout`, v1beta4 `timeouts.discovery`.
    pub discovery_timeout: Option<Duration>,
    /// Unknown fields and ignored documents, one sentence each, for stderr.
    pub warnings: Vec<String>,
}

/// Why a JoinConfiguration file cannot be used. It names the file; the caller names the input
/// the file came from (a flag, a config key) before it.
#[derive(Debug, thiserror::Error)]
pub enum JoinConfigError {
    #[error("{}: cannot read the file ({source})", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

const VERSIONS: &[&str] = &["kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"];

/// Kinds of kubeadm's other APIs that may share a kubeadm config file (kubeadm's
/// `componentconfigs`); kubeadm join skips them without a word.
const COMPONENT_CONFIGS: &[&str] = &["KubeletConfiguration", "KubeProxyConfiguration"];

/// Splits `text` at `---` and parses each YAML document into a [`Node`] (through
/// [`crate::yaml`], the only code that knows the YAML crate).
pub(crate) fn yaml_documents(text: &str) -> Result<Vec<Node>, crate::yaml::YamlError> {
    crate::yaml::documents(text)
}

/// A JoinConfiguration whose fields have the right types but cannot be used together or as
/// values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("discovery.bootstrapToken and discovery.file are mutually exclusive")]
    BothDiscoveries,
    #[error("controlPlane.localAPIEndpoint.advertiseAddress {0:?} is not an IP address")]
    AdvertiseAddress(String),
    #[error("controlPlane.localAPIEndpoint.bindPort {0} is not a port (1-65535)")]
    BindPort(i64),
}

impl JoinConfig {
    pub fn load(path: &Path) -> Result<JoinConfig, JoinConfigError> {
        let unreadable = |source| JoinConfigError::Unreadable {
            path: path.to_owned(),
            source,
        };
        let bytes = crate::limits::read_file(path).map_err(unreadable)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            unreadable(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8 text",
            ))
        })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<JoinConfig, JoinConfigError> {
        let invalid = |reason: String| JoinConfigError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let docs = yaml_documents(text).map_err(|e| {
            let hint = crate::yaml::unquoted_ipv6_hint(text).unwrap_or_default();
            invalid(format!("not YAML ({e}){hint}"))
        })?;
        let mut kinds = Vec::new();
        let mut warnings = Vec::new();
        let mut join: Option<(String, Node)> = None;
        for doc in docs {
            if doc == Node::Null {
                continue;
            }
            if !matches!(doc, Node::Map(_)) {
                return Err(invalid(
                    "a document is not a kubeadm object (expected a mapping with apiVersion \
                     and kind)"
                        .into(),
                ));
            }
            let field = |k: &str| -> Result<String, JoinConfigError> {
                match doc.get(k) {
                    None | Some(Node::Null) => Ok(String::new()),
                    Some(Node::Str(s)) => Ok(s.clone()),
                    Some(_) => Err(invalid(format!(
                        "a document is not a kubeadm object ({k} is not a string)"
                    ))),
                }
            };
            let (api_version, kind) = (field("apiVersion")?, field("kind")?);
            if kind == "JoinConfiguration" {
                if !VERSIONS.contains(&api_version.as_str()) {
                    return Err(invalid(format!(
                        "JoinConfiguration apiVersion {api_version:?} is not supported; expected \
                         one of {} (convert older files with `kubeadm config migrate`)",
                        VERSIONS.join(", ")
                    )));
                }
                if join.is_some() {
                    return Err(invalid(
                        "the file has more than one JoinConfiguration document".into(),
                    ));
                }
                join = Some((api_version, doc));
                continue;
            }
            match schema::document(&api_version, &kind) {
                Some(table) => {
                    let found = schema::check(&doc, table);
                    warnings.extend(
                        found
                            .warnings
                            .into_iter()
                            .map(|w| format!("{kind} ({api_version}): {w}")),
                    );
                }
                None if COMPONENT_CONFIGS.contains(&kind.as_str())
                    || api_version.starts_with("kubeadm.k8s.io/") => {}
                None => warnings.push(format!(
                    "ignored a document of kind {kind:?} ({api_version}): kubeadm join does not \
                     read it either"
                )),
            }
            kinds.push(kind);
        }
        let Some((api_version, doc)) = join else {
            return Err(invalid(if kinds.is_empty() {
                "the file has no JoinConfiguration document".to_string()
            } else {
                format!(
                    "the file has no JoinConfiguration document (found: {})",
                    kinds.join(", ")
                )
            }));
        };
        let v1beta4 = api_version.ends_with("v1beta4");
        let table = if v1beta4 {
            schema::v1beta4::JOIN_CONFIGURATION
        } else {
            schema::v1beta3::JOIN_CONFIGURATION
        };
        let found = schema::check(&doc, table);
        if let Some(e) = found.errors.first() {
            return Err(invalid(format!("JoinConfiguration: {e}")));
        }
        let mut own: Vec<String> = found
            .warnings
            .into_iter()
            .map(|w| {
                let mut w = format!("JoinConfiguration ({api_version}): {w}");
                if !v1beta4 && w.contains("unknown field timeouts") {
                    w.push_str("; timeouts needs apiVersion kubeadm.k8s.io/v1beta4");
                }
                w
            })
            .collect();
        own.extend(warnings);
        extract(&doc, api_version, v1beta4, own).map_err(|e| invalid(e.to_string()))
    }
}

/// The string at `path`, `None` when absent, null or empty (the walker checked the type).
fn text_at(doc: &Node, path: &[&str]) -> Option<String> {
    doc.at(path)
        .and_then(Node::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn strings_at(doc: &Node, path: &[&str]) -> Vec<String> {
    match doc.at(path) {
        Some(Node::Seq(items)) => items
            .iter()
            .filter_map(Node::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

fn duration_at(doc: &Node, path: &[&str]) -> Option<Duration> {
    doc.at(path)
        .and_then(Node::as_str)
        .and_then(parse_go_duration)
}

fn extract(
    doc: &Node,
    api_version: String,
    v1beta4: bool,
    warnings: Vec<String>,
) -> Result<JoinConfig, FieldError> {
    let bt = ["discovery", "bootstrapToken"];
    let has_bootstrap = !matches!(doc.at(&bt), None | Some(Node::Null));
    let discovery_file = text_at(doc, &["discovery", "file", "kubeConfigPath"]);
    if discovery_file.is_some() && has_bootstrap {
        return Err(FieldError::BothDiscoveries);
    }
    // A null or absent `controlPlane` is Go's nil pointer: a worker join.
    let local_api_endpoint = match doc.get("controlPlane") {
        Some(Node::Map(_)) => {
            let addr = match text_at(
                doc,
                &["controlPlane", "localAPIEndpoint", "advertiseAddress"],
            ) {
                None => None,
                Some(a) => Some(
                    a.parse::<IpAddr>()
                        .map_err(|_| FieldError::AdvertiseAddress(a.clone()))?,
                ),
            };
            let port = match doc.at(&["controlPlane", "localAPIEndpoint", "bindPort"]) {
                Some(Node::Int(0)) | None | Some(Node::Null) => DEFAULT_BIND_PORT,
                Some(Node::Int(p)) => u16::try_from(*p)
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or(FieldError::BindPort(*p))?,
                Some(_) => DEFAULT_BIND_PORT,
            };
            Some((addr, port))
        }
        _ => None,
    };
    let unsafe_skip = matches!(
        doc.at(&["discovery", "bootstrapToken", "unsafeSkipCAVerification"]),
        Some(Node::Bool(true))
    );
    let (kubernetes_api_call, etcd_api_call, discovery_timeout) = if v1beta4 {
        (
            duration_at(doc, &["timeouts", "kubernetesAPICall"]),
            duration_at(doc, &["timeouts", "etcdAPICall"]),
            duration_at(doc, &["timeouts", "discovery"]),
        )
    } else {
        (None, None, duration_at(doc, &["discovery", "timeout"]))
    };
    Ok(JoinConfig {
        api_version,
        node_name: text_at(doc, &["nodeRegistration", "name"]),
        local_api_endpoint,
        api_server_endpoint: text_at(doc, &["discovery", "bootstrapToken", "apiServerEndpoint"]),
        token: text_at(doc, &["discovery", "bootstrapToken", "token"]).map(Secret::new),
        tls_bootstrap_token: text_at(doc, &["discovery", "tlsBootstrapToken"]).map(Secret::new),
        ca_cert_hashes: strings_at(doc, &["discovery", "bootstrapToken", "caCertHashes"]),
        unsafe_skip_ca_verification: unsafe_skip,
        discovery_file,
        certificate_key: text_at(doc, &["controlPlane", "certificateKey"]).map(Secret::new),
        ignore_preflight_errors: strings_at(doc, &["nodeRegistration", "ignorePreflightErrors"]),
        kubernetes_api_call,
        etcd_api_call,
        discovery_timeout,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzz target `joinconfig`'s secret oracle on fixed inputs: whatever follows a token
    /// and a certificate key (a continuation, a duplicate key, wrong types, another document,
    /// broken YAML), no error, warning or `Debug` output repeats either.
    /// kubernetes/kubeadm #3101: an unquoted `[v6]:port` is not YAML; the error says to quote it,
    /// and the quoted form is taken.
    #[test]
    fn an_unquoted_ipv6_endpoint_is_named_and_the_quoted_one_taken() {
        let doc = |endpoint: &str| {
            format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  \
                 bootstrapToken:\n    apiServerEndpoint: {endpoint}\n    token: \
                 abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\n"
            )
        };
        let e = JoinConfig::parse(Path::new("jc.yaml"), &doc("[fd00::5]:6443")).unwrap_err();
        assert!(
            e.to_string().contains(
                "line 5: quote the IPv6 endpoint, `\"[fd00::5]:6443\"` (unquoted, YAML reads"
            ),
            "{e}"
        );
        let c = JoinConfig::parse(Path::new("jc.yaml"), &doc("\"[fd00::5]:6443\"")).unwrap();
        assert_eq!(c.api_server_endpoint.as_deref(), Some("[fd00::5]:6443"));
    }

    #[test]
    fn no_error_or_warning_echoes_the_token_or_the_certificate_key() {
        const TOKEN: &str = "q7tokensecretq7";
        const KEY: &str = "k9certkeysecretk9";
        for tail in [
            "",
            "  continued as a multi-line scalar",
            "token: again",
            "unknownField: 1",
            "caCertHashes: {a: b}",
            "apiServerEndpoint: [x]",
            "timeout: forever",
            "\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration",
            "\ncontrolPlane: {certificateKey: [1, 2]}",
            "\ncontrolPlane: 5",
            "\ndiscovery: 7",
            ": bad",
            "\t",
            "- a list",
            "'unterminated",
            "\napiVersion: kubeadm.k8s.io/v1beta9",
        ] {
            let doc = format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  \
                 certificateKey: {KEY}\ndiscovery:\n  bootstrapToken:\n    token: {TOKEN}\n    {tail}"
            );
            let shown = match JoinConfig::parse(Path::new("join.yaml"), &doc) {
                Ok(cfg) => format!("{cfg:?} {}", cfg.warnings.join("\n")),
                Err(e) => e.to_string(),
            };
            assert!(
                !shown.contains(TOKEN) && !shown.contains(KEY),
                "{tail:?}: {shown}"
            );
        }
    }

    #[test]
    fn v1beta4_control_plane_join_with_timeouts_among_other_documents() {
        let text = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
nodeRegistration:
  name: cp-2
  criSocket: unix:///run/containerd/containerd.sock
  ignorePreflightErrors:
  - EtcdPeerLatency
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.10:6443
    token: abcdef.0123456789abcdef
    caCertHashes:
    - sha256:aa
controlPlane:
  certificateKey: '0011'
  localAPIEndpoint:
    advertiseAddress: 10.0.0.12
    bindPort: 6444
timeouts:
  kubernetesAPICall: 1m30s
  etcdAPICall: 2m0s
";
        let c = JoinConfig::parse(Path::new("join.yaml"), text).unwrap();
        assert_eq!(c.node_name.as_deref(), Some("cp-2"));
        assert_eq!(
            c.local_api_endpoint,
            Some((Some("10.0.0.12".parse().unwrap()), 6444))
        );
        assert_eq!(c.api_server_endpoint.as_deref(), Some("10.0.0.10:6443"));
        assert_eq!(
            c.token.as_ref().map(Secret::expose),
            Some("abcdef.0123456789abcdef")
        );
        assert_eq!(c.ca_cert_hashes, ["sha256:aa"]);
        assert_eq!(c.certificate_key.as_ref().map(Secret::expose), Some("0011"));
        assert_eq!(c.ignore_preflight_errors, ["EtcdPeerLatency"]);
        assert_eq!(c.kubernetes_api_call, Some(Duration::from_secs(90)));
        assert_eq!(c.etcd_api_call, Some(Duration::from_secs(120)));
    }

    #[test]
    fn v1beta3_defaults_the_port_and_warns_about_timeouts() {
        let text = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: 10.0.0.12\n";
        let c = JoinConfig::parse(Path::new("j"), text).unwrap();
        assert_eq!(
            c.local_api_endpoint,
            Some((Some("10.0.0.12".parse().unwrap()), 6443))
        );
        assert_eq!(c.node_name, None);
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        // v1beta3 has no timeouts: kubeadm ignores the field with a warning, and so do we.
        let with_timeouts = format!("{text}timeouts:\n  kubernetesAPICall: 40s\n");
        let c = JoinConfig::parse(Path::new("j"), &with_timeouts).unwrap();
        assert_eq!(c.kubernetes_api_call, None);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("unknown field timeouts")
                && c.warnings[0].contains("needs apiVersion kubeadm.k8s.io/v1beta4"),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        let e = JoinConfig::parse(
            Path::new("j"),
            "apiVersion: kubeadm.k8s.io/v1beta2\nkind: JoinConfiguration\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("kubeadm config migrate"), "{e}");
        let e = JoinConfig::parse(
            Path::new("j"),
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("found: InitConfiguration"), "{e}");
        let e = JoinConfig::parse(
            Path::new("j"),
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: cp-2.example\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("is not an IP address"), "{e}");
        let e = JoinConfig::parse(
            Path::new("j"),
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ntimeouts:\n  kubernetesAPICall: soon\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a duration"), "{e}");
    }

    /// The field paths a parsed document sets, in [`schema::paths`]' notation.
    fn set_paths(node: &Node, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
        match node {
            Node::Map(m) => {
                for (k, v) in m {
                    let p = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    out.insert(p.clone());
                    // Free-form maps (extra args, feature gates) have no field names of their own.
                    if !matches!(
                        k.as_str(),
                        "kubeletExtraArgs" | "extraArgs" | "featureGates"
                    ) || matches!(v, Node::Seq(_))
                    {
                        set_paths(v, &p, out);
                    }
                }
            }
            Node::Seq(items) => {
                for it in items {
                    if matches!(it, Node::Map(_)) {
                        set_paths(it, &format!("{prefix}[]"), out);
                    }
                }
            }
            _ => {}
        }
    }

    /// Parses each text, asserts none has a warning and that together they set every field of
    /// `table` (`discovery.bootstrapToken` and `discovery.file` exclude each other, so a
    /// JoinConfiguration needs two files). Returns the first file's config.
    fn every_field(texts: &[&str], kind: &str, table: &'static [schema::Field]) -> JoinConfig {
        let mut got = std::collections::BTreeSet::new();
        let mut first = None;
        for text in texts {
            let c = JoinConfig::parse(Path::new("join.yaml"), text).unwrap();
            assert!(c.warnings.is_empty(), "{:?}", c.warnings);
            first.get_or_insert(c);
            let docs = yaml_documents(text).unwrap();
            let doc = docs
                .iter()
                .find(|d| d.get("kind").and_then(Node::as_str) == Some(kind))
                .unwrap();
            set_paths(doc, "", &mut got);
        }
        let c = first.unwrap();
        let want: std::collections::BTreeSet<String> = schema::paths(table).into_iter().collect();
        let missing: Vec<&String> = want.difference(&got).collect();
        assert!(
            missing.is_empty(),
            "{kind}: fields not set by the test file: {missing:?}"
        );
        c
    }

    /// The same file with file discovery in place of the bootstrap token.
    fn file_discovery(text: &str) -> String {
        let start = text.find("  bootstrapToken:\n").unwrap();
        let end = text[start..].find("  tlsBootstrapToken:").unwrap() + start;
        format!(
            "{}  file:\n    kubeConfigPath: /etc/kubernetes/discovery.conf\n{}",
            &text[..start],
            &text[end..]
        )
    }

    const EVERY_V1BETA4: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
dryRun: false
caCertPath: /etc/kubernetes/pki/ca.crt
nodeRegistration:
  name: cp-2
  criSocket: unix:///run/containerd/containerd.sock
  taints:
  - key: node-role.kubernetes.io/control-plane
    value: ''
    effect: NoSchedule
    timeAdded: '2026-01-01T00:00:00Z'
  kubeletExtraArgs:
  - name: node-ip
    value: 10.0.0.12
  ignorePreflightErrors:
  - NumCPU
  - EtcdPeerLatency
  imagePullPolicy: IfNotPresent
  imagePullSerial: true
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.10:6443
    token: abcdef.0123456789abcdef
    caCertHashes:
    - sha256:aa
    unsafeSkipCAVerification: true
  tlsBootstrapToken: abcdef.0123456789abcdef
controlPlane:
  localAPIEndpoint:
    advertiseAddress: 10.0.0.12
    bindPort: 6443
  certificateKey: '0b1c2d3e'
skipPhases:
- addon/kube-proxy
patches:
  directory: /etc/kubernetes/patches
timeouts:
  controlPlaneComponentHealthCheck: 4m0s
  kubeletHealthCheck: 4m0s
  kubernetesAPICall: 1m0s
  etcdAPICall: 2m0s
  tlsBootstrap: 5m0s
  discovery: 45s
  upgradeManifests: 5m0s
";

    #[test]
    fn v1beta4_every_field_is_known_and_read() {
        let c = every_field(
            &[EVERY_V1BETA4, &file_discovery(EVERY_V1BETA4)],
            "JoinConfiguration",
            schema::v1beta4::JOIN_CONFIGURATION,
        );
        assert!(c.unsafe_skip_ca_verification);
        assert_eq!(c.ca_cert_hashes, ["sha256:aa"]);
        assert_eq!(
            c.tls_bootstrap_token.as_ref().map(Secret::expose),
            Some("abcdef.0123456789abcdef")
        );
        assert_eq!(c.etcd_api_call, Some(Duration::from_secs(120)));
        assert_eq!(c.kubernetes_api_call, Some(Duration::from_secs(60)));
        assert_eq!(c.discovery_timeout, Some(Duration::from_secs(45)));
        assert_eq!(c.ignore_preflight_errors, ["NumCPU", "EtcdPeerLatency"]);
        assert_eq!(
            c.local_api_endpoint,
            Some((Some("10.0.0.12".parse().unwrap()), 6443))
        );
    }

    #[test]
    fn v1beta3_every_field_is_known_and_read() {
        let text = "\
apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
caCertPath: /etc/kubernetes/pki/ca.crt
nodeRegistration:
  name: cp-2
  criSocket: unix:///var/run/containerd/containerd.sock
  taints:
  - key: node-role.kubernetes.io/control-plane
    value: ''
    effect: NoSchedule
    timeAdded: null
  kubeletExtraArgs:
    node-ip: 10.0.0.12
  ignorePreflightErrors: [Swap]
  imagePullPolicy: Always
discovery:
  bootstrapToken:
    apiServerEndpoint: 10.0.0.10:6443
    token: abcdef.0123456789abcdef
    caCertHashes: [sha256:aa, sha256:bb]
    unsafeSkipCAVerification: false
  tlsBootstrapToken: abcdef.0123456789abcdef
  timeout: 5m0s
controlPlane:
  localAPIEndpoint: {advertiseAddress: 10.0.0.12, bindPort: 6444}
  certificateKey: '0b1c'
skipPhases: [preflight]
patches: {directory: /etc/kubernetes/patches}
";
        let c = every_field(
            &[text, &file_discovery(text)],
            "JoinConfiguration",
            schema::v1beta3::JOIN_CONFIGURATION,
        );
        assert_eq!(c.discovery_timeout, Some(Duration::from_secs(300)));
        assert_eq!(c.ca_cert_hashes, ["sha256:aa", "sha256:bb"]);
        assert!(!c.unsafe_skip_ca_verification);
        assert_eq!(c.kubernetes_api_call, None);
        assert_eq!(
            c.local_api_endpoint,
            Some((Some("10.0.0.12".parse().unwrap()), 6444))
        );
    }

    /// What Cluster API's bootstrap provider (CABPK) renders: a ClusterConfiguration and an
    /// InitConfiguration may share the file with the JoinConfiguration, each with every field.
    #[test]
    fn cluster_api_documents_beside_the_join_configuration() {
        let cluster = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
etcd:
  local:
    imageRepository: registry.k8s.io
    imageTag: 3.5.15-0
    dataDir: /var/lib/etcd
    extraArgs:
    - {name: heartbeat-interval, value: '100'}
    extraEnvs:
    - {name: GOMAXPROCS, value: '2', valueFrom: null}
    serverCertSANs: [etcd.local]
    peerCertSANs: [10.0.0.11]
  external:
    endpoints: [https://10.0.0.20:2379]
    caFile: /etc/etcd/ca.crt
    certFile: /etc/etcd/client.crt
    keyFile: /etc/etcd/client.key
networking: {serviceSubnet: 10.96.0.0/12, podSubnet: 192.168.0.0/16, dnsDomain: cluster.local}
kubernetesVersion: v1.31.4
controlPlaneEndpoint: 10.0.0.10:6443
apiServer:
  extraArgs: [{name: cloud-provider, value: external}]
  extraVolumes:
  - {name: audit, hostPath: /var/log/audit, mountPath: /var/log/audit, readOnly: false, pathType: DirectoryOrCreate}
  extraEnvs: [{name: HTTP_PROXY, value: '', valueFrom: null}]
  certSANs: [api.example]
controllerManager:
  extraArgs: [{name: v, value: '2'}]
  extraVolumes: [{name: x, hostPath: /x, mountPath: /x, readOnly: true, pathType: Directory}]
  extraEnvs: [{name: A, value: b, valueFrom: null}]
scheduler:
  extraArgs: [{name: v, value: '2'}]
  extraVolumes: [{name: x, hostPath: /x, mountPath: /x, readOnly: true, pathType: Directory}]
  extraEnvs: [{name: A, value: b, valueFrom: null}]
dns: {imageRepository: registry.k8s.io/coredns, imageTag: v1.11.3, disabled: false}
proxy: {disabled: false}
certificatesDir: /etc/kubernetes/pki
imageRepository: registry.k8s.io
featureGates: {ControlPlaneKubeletLocalMode: true}
clusterName: workload
encryptionAlgorithm: RSA-2048
certificateValidityPeriod: 8760h0m0s
caCertificateValidityPeriod: 87600h0m0s
";
        let init = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: abcdef.0123456789abcdef
  description: kubeadm bootstrap token
  ttl: 24h0m0s
  expires: '2026-01-02T00:00:00Z'
  usages: [signing, authentication]
  groups: ['system:bootstrappers:kubeadm:default-node-token']
dryRun: false
nodeRegistration:
  name: cp-1
  criSocket: unix:///run/containerd/containerd.sock
  taints: [{key: node-role.kubernetes.io/control-plane, value: '', effect: NoSchedule, timeAdded: null}]
  kubeletExtraArgs: [{name: node-ip, value: 10.0.0.11}]
  ignorePreflightErrors: [Mem]
  imagePullPolicy: IfNotPresent
  imagePullSerial: false
localAPIEndpoint: {advertiseAddress: 10.0.0.11, bindPort: 6443}
certificateKey: '00'
skipPhases: [addon/kube-proxy]
patches: {directory: /etc/kubernetes/patches}
timeouts:
  controlPlaneComponentHealthCheck: 4m0s
  kubeletHealthCheck: 4m0s
  kubernetesAPICall: 1m0s
  etcdAPICall: 2m0s
  tlsBootstrap: 5m0s
  discovery: 5m0s
  upgradeManifests: 5m0s
";
        let kubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n";
        let text = format!("{cluster}---\n{init}---\n{kubelet}---\n{EVERY_V1BETA4}");
        every_field(
            &[&text],
            "ClusterConfiguration",
            schema::v1beta4::CLUSTER_CONFIGURATION,
        );
        every_field(
            &[&text],
            "InitConfiguration",
            schema::v1beta4::INIT_CONFIGURATION,
        );
        let c = every_field(
            &[&text, &file_discovery(&text)],
            "JoinConfiguration",
            schema::v1beta4::JOIN_CONFIGURATION,
        );
        assert_eq!(c.node_name.as_deref(), Some("cp-2"));

        // An unknown field in a neighbour document is named too, with its kind.
        let typo = text.replace("clusterName: workload", "clustername: workload");
        let c = JoinConfig::parse(Path::new("j"), &typo).unwrap();
        assert_eq!(
            c.warnings,
            [
                "ClusterConfiguration (kubeadm.k8s.io/v1beta4): unknown field clustername \
              (kubeadm ignores it too); the nearest known field is clusterName"
            ]
        );
    }

    #[test]
    fn a_misspelt_field_is_a_warning_and_kubeadms_spelling_is_read() {
        let base = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  bootstrapToken:\n    token: abcdef.0123456789abcdef\n    apiServerEndpoint: 10.0.0.10:6443\n";
        let c = JoinConfig::parse(
            Path::new("j"),
            &format!("{base}    unsafeSkipCAVerification: true\n"),
        )
        .unwrap();
        assert!(c.unsafe_skip_ca_verification);
        assert!(c.warnings.is_empty());
        let c = JoinConfig::parse(
            Path::new("j"),
            &format!("{base}    unsafeSkipCaVerification: true\n"),
        )
        .unwrap();
        assert!(
            !c.unsafe_skip_ca_verification,
            "kubeadm matches names case-sensitively"
        );
        assert_eq!(
            c.warnings,
            ["JoinConfiguration (kubeadm.k8s.io/v1beta4): unknown field \
              discovery.bootstrapToken.unsafeSkipCaVerification (kubeadm ignores it too); the \
              nearest known field is discovery.bootstrapToken.unsafeSkipCAVerification"]
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("40s"), Some(Duration::from_secs(40)));
        assert_eq!(parse_go_duration("2m0s"), Some(Duration::from_secs(120)));
        assert_eq!(parse_go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_go_duration("-1s"), None);
        assert_eq!(parse_go_duration("10"), None);
        assert_eq!(parse_go_duration("5d"), None);
    }
}
