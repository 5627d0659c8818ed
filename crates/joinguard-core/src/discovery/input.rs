//! Preflight inputs: turns flags into validated targets and TLS material, or into an
//! [`InputError`] that names the flag and what was expected (exit 2).
//!
//! This module reads the files the flags name and nothing else: no network I/O.

use std::path::Path;
use std::time::Duration;

use super::cluster::{CaError, CertificateKeyError};
use super::{PinError, TokenFormatError};
use crate::check::{CheckNameError, IgnoreList, Thresholds};
use crate::joinconfig::JoinConfigError;
use crate::probe::identity::{CaBundle, ClientIdentity, IdentityError, TlsFlag};
use crate::spec::{Output, PreflightSpec};
use crate::target::{Target, TargetKind};

/// A flag whose value cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{flag} `{value}`: {reason}")]
    Flag {
        flag: String,
        value: String,
        reason: String,
    },
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("{0}")]
    Other(String),
    /// A bootstrap token (`--token`, `--tls-bootstrap-token`, or a field of `--config`).
    #[error("{input}: {source}")]
    Token {
        input: String,
        #[source]
        source: TokenFormatError,
    },
    #[error("--discovery-token-ca-cert-hash {0}")]
    Pin(#[source] PinError),
    #[error("--certificate-key: {0}")]
    CertificateKey(#[source] CertificateKeyError),
    #[error("--cert-dir: {0}")]
    CertDir(#[source] CaError),
    #[error(transparent)]
    Config(#[from] JoinConfigError),
    #[error(transparent)]
    Mixed(#[from] crate::kubeadm::flags::MixedConfig),
    /// The kubeconfig of file discovery (`--discovery-file`, `discovery.file.kubeConfigPath`).
    #[error("{input}: {source}")]
    DiscoveryFile {
        input: String,
        #[source]
        source: DiscoveryFileError,
    },
}

/// Why the kubeconfig of file discovery cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryFileError {
    #[error(transparent)]
    Kubeconfig(#[from] crate::kube::KubeconfigError),
    #[error(transparent)]
    Ca(#[from] IdentityError),
}

/// Everything a preflight run needs, validated.
#[derive(Debug)]
pub struct PreflightInput {
    pub api: Option<Target>,
    pub api_ca: Option<CaBundle>,
    pub etcd_clients: Vec<Target>,
    /// Peer URLs given on the command line; more come from MemberList when there is an identity.
    pub etcd_peers: Vec<Target>,
    pub etcd_ca: Option<CaBundle>,
    pub etcd_identity: Option<ClientIdentity>,
    pub heartbeat: Duration,
    pub election: Duration,
    pub thresholds: Thresholds,
    pub ignore: IgnoreList,
    pub write_probe: bool,
    /// Run the bandwidth probe (when an etcd identity is known by then), for at most this long.
    pub bandwidth: bool,
    pub bandwidth_cap: Duration,
    pub wait: Option<Duration>,
    pub timeout: Duration,
    pub node_name: String,
    pub output: Output,
    /// A control-plane join (`--control-plane` or `controlPlane` in `--config`).
    pub control_plane: bool,
    /// This node's address (`--apiserver-advertise-address`), checked to be local.
    pub advertise_address: Option<std::net::IpAddr>,
    /// Facts about the inputs for the report (kubeadm check names given, a worker join, ...).
    pub notes: Vec<String>,
}

impl PreflightInput {
    /// Validates the flags of `joinguard preflight`.
    pub fn from_args(a: &PreflightSpec) -> Result<PreflightInput, InputError> {
        let api_ca = load_ca(TlsFlag::ApiserverCacert, a.apiserver_cacert.as_deref())?;
        let api = a
            .api_server_endpoint
            .as_deref()
            .map(|v| parse_endpoint("API_SERVER_ENDPOINT", v, TargetKind::ApiServer, true))
            .transpose()?;
        if let Some(api) = &api {
            if !api.tls {
                return Err(flag_err(
                    "API_SERVER_ENDPOINT",
                    a.api_server_endpoint.as_deref().unwrap_or_default(),
                    "the Kubernetes API is served over HTTPS; use host:port or https://host:port",
                ));
            }
        }

        let etcd_ca = load_ca(TlsFlag::EtcdCacert, a.etcd_cacert.as_deref())?;
        let etcd_identity = match (&a.etcd_cert, &a.etcd_key) {
            (Some(c), Some(k)) => Some(ClientIdentity::load(c, k)?),
            (None, None) => None,
            _ => {
                return Err(InputError::Other(
                    "--etcd-cert and --etcd-key go together: give both or neither".into(),
                ))
            }
        };
        if etcd_identity.is_some() && etcd_ca.is_none() {
            return Err(InputError::Other(
                "--etcd-cert needs --etcd-cacert: without the etcd CA the member's certificate \
                 cannot be verified (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)"
                    .into(),
            ));
        }
        let tls_given = etcd_ca.is_some() || etcd_identity.is_some();
        let parse_list = |flag: &'static str, vals: &[String], kind| {
            let mut out: Vec<Target> = Vec::new();
            for v in vals.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
                let t = parse_endpoint(flag, v, kind, true)?;
                if !t.tls && tls_given {
                    return Err(flag_err(
                        flag,
                        v,
                        "this is an http URL but etcd TLS certificates are given; \
                         kubeadm's etcd serves https (use https://...)",
                    ));
                }
                if out.iter().any(|o| o.endpoint == t.endpoint) {
                    return Err(flag_err(flag, v, "this endpoint is listed twice"));
                }
                out.push(t);
            }
            Ok::<_, InputError>(out)
        };
        let etcd_clients = parse_list(
            "--etcd-endpoints",
            &a.etcd_endpoints,
            TargetKind::EtcdClient,
        )?;
        let etcd_peers = parse_list(
            "--etcd-peer-endpoints",
            &a.etcd_peer_endpoints,
            TargetKind::EtcdPeer,
        )?;
        if api.is_none() && etcd_clients.is_empty() && etcd_peers.is_empty() {
            return Err(InputError::Other(
                "nothing to check: give the API endpoint (like kubeadm join) and/or \
                 --etcd-endpoints; see `joinguard preflight --help`"
                    .into(),
            ));
        }

        let hb = a.etcd_heartbeat_interval;
        let el = a.etcd_election_timeout;
        if hb.is_zero() || hb > Duration::from_secs(10) {
            return Err(flag_err(
                "--etcd-heartbeat-interval",
                &humantime::format_duration(hb).to_string(),
                "expected the cluster's etcd heartbeat, between 1ms and 10s (etcd default 100ms)",
            ));
        }
        // etcd refuses an election timeout under 5 heartbeats and over 50 s (etcd tuning guide).
        if el < hb * 5 || el > Duration::from_secs(50) {
            return Err(flag_err(
                "--etcd-election-timeout",
                &humantime::format_duration(el).to_string(),
                "expected at least 5x the heartbeat interval and at most 50s (etcd default 1s)",
            ));
        }
        if a.timeout < Duration::from_millis(500) {
            return Err(flag_err(
                "--timeout",
                &humantime::format_duration(a.timeout).to_string(),
                "too short to measure anything; expected at least 500ms (default 60s)",
            ));
        }
        let ignore =
            IgnoreList::from_sources(&a.ignore_preflight_errors, &[]).map_err(|e| match e {
                // kubeadm's own message names the list already.
                e @ CheckNameError::AllWithOthers { .. } => InputError::Other(e.to_string()),
                e => flag_err(
                    "--ignore-preflight-errors",
                    &a.ignore_preflight_errors.join(","),
                    &e.to_string(),
                ),
            })?;
        if (a.write_probe || a.bandwidth) && etcd_identity.is_none() {
            let f = if a.write_probe {
                "--write-probe"
            } else {
                "--bandwidth"
            };
            return Err(InputError::Other(format!(
                "{f} needs an etcd identity: give --etcd-cacert, --etcd-cert and --etcd-key"
            )));
        }
        if (a.write_probe || a.bandwidth) && etcd_clients.is_empty() {
            return Err(InputError::Other(
                "--write-probe and --bandwidth need --etcd-endpoints".into(),
            ));
        }
        let node_name = match &a.node_name {
            Some(n) => validate_node_name(n)?,
            None => hostname(),
        };
        Ok(PreflightInput {
            api,
            api_ca,
            etcd_clients,
            etcd_peers,
            etcd_ca,
            etcd_identity,
            heartbeat: hb,
            election: el,
            thresholds: Thresholds::from_etcd_timing(hb, el),
            ignore,
            write_probe: a.write_probe,
            // On by default: a read of at most 8 MiB that catches a path too thin for the
            // learner's catch-up (the join sweep's false fit: 1 Mbit/s with a 100 MB database).
            bandwidth: !a.no_bandwidth,
            bandwidth_cap: if a.bandwidth {
                Duration::from_secs(20)
            } else {
                Duration::from_secs(5)
            },
            wait: a.wait,
            timeout: a.timeout,
            node_name,
            output: a.output,
            control_plane: a.control_plane,
            advertise_address: None,
            notes: Vec::new(),
        })
    }
}

fn load_ca(flag: TlsFlag, path: Option<&Path>) -> Result<Option<CaBundle>, InputError> {
    Ok(path.map(|p| CaBundle::load(flag, p)).transpose()?)
}

fn flag_err(flag: &'static str, value: &str, reason: &str) -> InputError {
    InputError::Flag {
        flag: flag.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Parses an endpoint flag value with the one endpoint parser ([`Target::parse`]); the error
/// names the flag, and never repeats a URL with credentials.
pub fn parse_endpoint(
    flag: &'static str,
    value: &str,
    kind: TargetKind,
    allow_bare: bool,
) -> Result<Target, InputError> {
    Target::parse(kind, value, allow_bare).map_err(|e| InputError::Flag {
        flag: flag.to_string(),
        value: e.url,
        reason: e.problem.to_string(),
    })
}

fn validate_node_name(n: &str) -> Result<String, InputError> {
    // Kubernetes node names are DNS-1123 subdomains; the name lands in an etcd key.
    let ok = !n.is_empty()
        && n.len() <= 253
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if ok {
        Ok(n.to_string())
    } else {
        Err(flag_err(
            "--node-name",
            n,
            "expected a DNS-1123 name: lowercase letters, digits, '-' and '.'",
        ))
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_ascii_lowercase())
        .ok()
        .filter(|s| validate_node_name(s).is_ok())
        .unwrap_or_else(|| "unknown-node".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_to_host_port() {
        let t = parse_endpoint(
            "--etcd-endpoints",
            "https://10.0.0.11:2379",
            TargetKind::EtcdClient,
            true,
        )
        .unwrap();
        assert_eq!((t.endpoint.as_str(), t.tls), ("10.0.0.11:2379", true));
        let t = parse_endpoint("x", "10.0.0.11", TargetKind::EtcdClient, true).unwrap();
        assert_eq!(t.endpoint, "10.0.0.11:2379");
        let t = parse_endpoint("x", "http://[fd00::1]:2380", TargetKind::EtcdPeer, true).unwrap();
        assert_eq!((t.endpoint.as_str(), t.tls), ("[fd00::1]:2380", false));
        let t = parse_endpoint("x", "api.example.com:6443", TargetKind::ApiServer, true).unwrap();
        assert_eq!(t.host, "api.example.com");
    }

    #[test]
    fn malformed_endpoints_name_the_flag() {
        for bad in [
            "https://",
            "ftp://10.0.0.1:21",
            "https://10.0.0.1:99999",
            "https://h:1/path",
            "https://u:p@h:1",
        ] {
            let e =
                parse_endpoint("--etcd-endpoints", bad, TargetKind::EtcdClient, true).unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("--etcd-endpoints"), "{bad}: {msg}");
            assert!(!msg.contains("u:p@"), "credentials leaked: {msg}");
        }
    }
}
