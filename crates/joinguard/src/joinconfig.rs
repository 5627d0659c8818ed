//! kubeadm's `JoinConfiguration` (v1beta3 and v1beta4), as far as joinguard uses it: the node
//! name, the control plane's local API endpoint, and v1beta4's `timeouts`.
//!
//! A kubeadm config file may hold several YAML documents (`---`); the one with
//! `kind: JoinConfiguration` is used and the others are ignored, as kubeadm does for kinds a
//! command does not read. Unknown fields are ignored too (kubeadm is strict about them in its
//! own validation; joinguard is not the place to repeat that).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// kube-apiserver's default secure port (`constants.KubeAPIServerPort`).
pub const DEFAULT_BIND_PORT: u16 = 6443;

/// What joinguard takes from a JoinConfiguration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinConfig {
    pub api_version: String,
    /// `nodeRegistration.name`, if set (kubeadm defaults it to the hostname).
    pub node_name: Option<String>,
    /// `controlPlane.localAPIEndpoint`; `None` for a worker join.
    pub local_api_endpoint: Option<(Option<IpAddr>, u16)>,
    /// `discovery.bootstrapToken.apiServerEndpoint`.
    pub api_server_endpoint: Option<String>,
    /// `discovery.bootstrapToken.token` (falls back to `discovery.tlsBootstrapToken`).
    pub token: Option<String>,
    /// `discovery.bootstrapToken.caCertHashes`.
    pub ca_cert_hashes: Vec<String>,
    /// `discovery.bootstrapToken.unsafeSkipCAVerification`.
    pub unsafe_skip_ca_verification: bool,
    /// `discovery.file.kubeConfigPath`.
    pub discovery_file: Option<PathBuf>,
    /// `controlPlane.certificateKey`.
    pub certificate_key: Option<String>,
    /// `nodeRegistration.ignorePreflightErrors`.
    pub ignore_preflight_errors: Vec<String>,
    /// v1beta4 `timeouts.kubernetesAPICall`.
    pub kubernetes_api_call: Option<Duration>,
    /// v1beta4 `timeouts.etcdAPICall`.
    pub etcd_api_call: Option<Duration>,
}

#[derive(Debug, thiserror::Error)]
pub enum JoinConfigError {
    #[error("--config {}: cannot read the file ({source})", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--config {}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "apiVersion", default)]
    api_version: String,
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawJoin {
    #[serde(default)]
    node_registration: RawNodeRegistration,
    control_plane: Option<RawControlPlane>,
    #[serde(default)]
    discovery: RawDiscovery,
    #[serde(default)]
    timeouts: RawTimeouts,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawNodeRegistration {
    name: Option<String>,
    #[serde(default)]
    ignore_preflight_errors: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawControlPlane {
    #[serde(rename = "localAPIEndpoint", default)]
    local_api_endpoint: RawEndpoint,
    certificate_key: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawEndpoint {
    advertise_address: Option<String>,
    bind_port: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawDiscovery {
    bootstrap_token: Option<RawBootstrapToken>,
    file: Option<RawFileDiscovery>,
    tls_bootstrap_token: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawFileDiscovery {
    kube_config_path: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawBootstrapToken {
    api_server_endpoint: Option<String>,
    token: Option<String>,
    #[serde(default)]
    ca_cert_hashes: Vec<String>,
    #[serde(default)]
    unsafe_skip_ca_verification: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct RawTimeouts {
    #[serde(rename = "kubernetesAPICall")]
    kubernetes_api_call: Option<String>,
    #[serde(rename = "etcdAPICall")]
    etcd_api_call: Option<String>,
}

const VERSIONS: &[&str] = &["kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"];

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
        let mut kinds = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(text) {
            let value = serde_yaml::Value::deserialize(doc)
                .map_err(|e| invalid(format!("not YAML ({e})")))?;
            if value.is_null() {
                continue;
            }
            let head: Head = serde_yaml::from_value(value.clone())
                .map_err(|e| invalid(format!("a document is not a kubeadm object ({e})")))?;
            if head.kind != "JoinConfiguration" {
                kinds.push(head.kind);
                continue;
            }
            if !VERSIONS.contains(&head.api_version.as_str()) {
                return Err(invalid(format!(
                    "JoinConfiguration apiVersion {:?} is not supported; expected one of {} \
                     (convert older files with `kubeadm config migrate`)",
                    head.api_version,
                    VERSIONS.join(", ")
                )));
            }
            let raw: RawJoin = serde_yaml::from_value(value)
                .map_err(|e| invalid(format!("JoinConfiguration: {e}")))?;
            let v1beta4 = head.api_version.ends_with("v1beta4");
            let duration = |field: &str, v: Option<String>| -> Result<_, JoinConfigError> {
                match v {
                    None => Ok(None),
                    Some(_) if !v1beta4 => Err(invalid(format!(
                        "timeouts.{field} needs apiVersion kubeadm.k8s.io/v1beta4"
                    ))),
                    Some(s) => parse_go_duration(&s).map(Some).ok_or_else(|| {
                        invalid(format!(
                            "timeouts.{field}: {s:?} is not a duration like 40s or 2m0s"
                        ))
                    }),
                }
            };
            let certificate_key = raw
                .control_plane
                .as_ref()
                .and_then(|c| c.certificate_key.clone())
                .filter(|k| !k.is_empty());
            let bt = raw.discovery.bootstrap_token.unwrap_or_default();
            let discovery_file = raw.discovery.file.and_then(|f| f.kube_config_path);
            if discovery_file.is_some() && bt.api_server_endpoint.is_some() {
                return Err(invalid(
                    "discovery.bootstrapToken and discovery.file are mutually exclusive".into(),
                ));
            }
            let local_api_endpoint = match raw.control_plane {
                None => None,
                Some(cp) => {
                    let ep = cp.local_api_endpoint;
                    let addr = match ep.advertise_address.filter(|a| !a.is_empty()) {
                        None => None,
                        Some(a) => Some(a.parse::<IpAddr>().map_err(|_| {
                            invalid(format!(
                                "controlPlane.localAPIEndpoint.advertiseAddress {a:?} is not an IP address"
                            ))
                        })?),
                    };
                    let port = match ep.bind_port {
                        None | Some(0) => DEFAULT_BIND_PORT,
                        Some(p) => u16::try_from(p).map_err(|_| {
                            invalid(format!(
                                "controlPlane.localAPIEndpoint.bindPort {p} is not a port (1-65535)"
                            ))
                        })?,
                    };
                    Some((addr, port))
                }
            };
            return Ok(JoinConfig {
                api_version: head.api_version,
                node_name: raw.node_registration.name.filter(|n| !n.is_empty()),
                local_api_endpoint,
                api_server_endpoint: bt.api_server_endpoint,
                token: bt
                    .token
                    .or(raw.discovery.tls_bootstrap_token)
                    .filter(|t| !t.is_empty()),
                ca_cert_hashes: bt.ca_cert_hashes,
                unsafe_skip_ca_verification: bt.unsafe_skip_ca_verification,
                discovery_file,
                certificate_key,
                ignore_preflight_errors: raw.node_registration.ignore_preflight_errors,
                kubernetes_api_call: duration(
                    "kubernetesAPICall",
                    raw.timeouts.kubernetes_api_call,
                )?,
                etcd_api_call: duration("etcdAPICall", raw.timeouts.etcd_api_call)?,
            });
        }
        Err(invalid(if kinds.is_empty() {
            "the file has no JoinConfiguration document".to_string()
        } else {
            format!(
                "the file has no JoinConfiguration document (found: {})",
                kinds.join(", ")
            )
        }))
    }
}

/// A Go `time.Duration` string as metav1.Duration prints and parses it: `40s`, `2m0s`, `1h`,
/// `1.5s`, `500ms`. Negative durations are refused.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() || s.starts_with('-') {
        return None;
    }
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_end);
        let n: f64 = num.parse().ok()?;
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let secs = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * secs;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(c.token.as_deref(), Some("abcdef.0123456789abcdef"));
        assert_eq!(c.ca_cert_hashes, ["sha256:aa"]);
        assert_eq!(c.certificate_key.as_deref(), Some("0011"));
        assert_eq!(c.ignore_preflight_errors, ["EtcdPeerLatency"]);
        assert_eq!(c.kubernetes_api_call, Some(Duration::from_secs(90)));
        assert_eq!(c.etcd_api_call, Some(Duration::from_secs(120)));
    }

    #[test]
    fn v1beta3_defaults_the_port_and_refuses_timeouts() {
        let text = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: 10.0.0.12\n";
        let c = JoinConfig::parse(Path::new("j"), text).unwrap();
        assert_eq!(
            c.local_api_endpoint,
            Some((Some("10.0.0.12".parse().unwrap()), 6443))
        );
        assert_eq!(c.node_name, None);
        let with_timeouts = format!("{text}timeouts:\n  kubernetesAPICall: 40s\n");
        let e = JoinConfig::parse(Path::new("j"), &with_timeouts).unwrap_err();
        assert!(
            e.to_string()
                .contains("needs apiVersion kubeadm.k8s.io/v1beta4"),
            "{e}"
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
