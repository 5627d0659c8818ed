//! Preflight inputs: turns the spec into validated targets and TLS material, or into an
//! [`InputError`] that names the input as the user gave it (flag or config key) and what was
//! expected (exit 2).
//!
//! This module reads the files the flags name and nothing else: no network I/O.

use std::path::Path;
use std::time::Duration;

use super::cluster::{CaError, CertificateKeyError};
use super::{PinError, TokenFormatError};
use crate::check::{CheckNameError, IgnoreList, Thresholds};
use crate::input::{Input, Named, Spelling};
use crate::joinconfig::JoinConfigError;
use crate::probe::identity::{CaBundle, ClientIdentity, IdentityError};
use crate::spec::{Output, PreflightSpec};
use crate::target::{Target, TargetKind};

/// An input whose value cannot be used. Each names the input as the user gave it.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{input} `{value}`: {reason}")]
    Value {
        input: Named,
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
        input: Named,
        #[source]
        source: TokenFormatError,
    },
    #[error("{input} {source}")]
    Pin {
        input: Named,
        #[source]
        source: PinError,
    },
    #[error("{input}: {source}")]
    CertificateKey {
        input: Named,
        #[source]
        source: CertificateKeyError,
    },
    #[error("{input}: {source}")]
    CertDir {
        input: Named,
        #[source]
        source: CaError,
    },
    /// kubeadm's JoinConfiguration file.
    #[error("{input} {source}")]
    Config {
        input: Named,
        #[source]
        source: JoinConfigError,
    },
    #[error(transparent)]
    Mixed(#[from] crate::kubeadm::flags::MixedConfig),
    /// The kubeconfig of file discovery (its CA, when unusable, is an [`InputError::Identity`]).
    #[error("{input} {source}")]
    DiscoveryFile {
        input: Named,
        #[source]
        source: crate::kube::KubeconfigError,
    },
}

/// Everything a preflight run needs, validated: built once by [`PreflightInput::from_spec`] from
/// the flags or the monitor's section, the join configuration and what discovery found, and
/// read-only after (its fields are the core's; callers read them through the methods below).
#[derive(Debug)]
pub struct PreflightInput {
    pub(crate) api: Option<Target>,
    pub(crate) api_ca: Option<CaBundle>,
    pub(crate) etcd_clients: Vec<Target>,
    /// Peer URLs given on the command line; more come from MemberList when there is an identity.
    pub(crate) etcd_peers: Vec<Target>,
    pub(crate) etcd_ca: Option<CaBundle>,
    pub(crate) etcd_identity: Option<ClientIdentity>,
    pub(crate) heartbeat: Duration,
    pub(crate) election: Duration,
    pub(crate) thresholds: Thresholds,
    pub(crate) ignore: IgnoreList,
    pub(crate) write_probe: bool,
    /// Run the bandwidth probe (when an etcd identity is known by then), for at most this long.
    pub(crate) bandwidth: bool,
    pub(crate) bandwidth_cap: Duration,
    pub(crate) wait: Option<Duration>,
    pub(crate) timeout: Duration,
    pub(crate) node_name: String,
    pub(crate) output: Output,
    /// A control-plane join (`--control-plane` or `controlPlane` in `--config`).
    pub(crate) control_plane: bool,
    /// This node's address (`--apiserver-advertise-address`), checked to be local.
    pub(crate) advertise_address: Option<std::net::IpAddr>,
    /// Facts about the inputs for the report (kubeadm check names given, a worker join, ...).
    pub(crate) notes: Vec<String>,
    /// The proxy environment the join's calls will meet (`HTTPS_PROXY`, `NO_PROXY`).
    pub(crate) proxy: crate::proxy::ProxyEnv,
    /// The cluster's service and pod subnets (kubeadm-config), for `HTTPProxyCIDR` on a
    /// control-plane join.
    pub(crate) cluster_cidrs: Vec<String>,
    /// The cluster's `kubernetesVersion` (kubeadm-config), which the joining kubeadm matches:
    /// it decides how kubeadm's etcd client meets a proxy (docs/proxy.md).
    pub(crate) cluster_version: Option<String>,
    /// How the user spelled these inputs: the run's own messages name an input through it
    /// (`--timeout` on the command line, the monitor's YAML key), never by an assumed flag.
    pub(crate) spelling: Spelling,
}

impl PreflightInput {
    /// How long the checks may keep trying for a fit path (`--wait`), what is left of it after
    /// discovery.
    pub fn wait(&self) -> Option<Duration> {
        self.wait
    }

    /// The run's deadline (`--timeout`), what is left of it after discovery.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The report's format.
    pub fn output(&self) -> Output {
        self.output
    }

    /// This node's name (the flag, the join configuration, or the hostname).
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// kubeadm 1.34 links grpc-go 1.72.1, which decides the proxy once, for the etcd client's
    /// target (its first endpoint), and tunnels every member's calls the same way
    /// (grpc/grpc-go #7881, fixed in 1.72.2 by #8329). The first endpoint when this cluster's
    /// kubeadm does so.
    pub fn etcd_proxy_decided_by(&self) -> Option<&Target> {
        let minor = self
            .cluster_version
            .as_deref()?
            .trim_start_matches('v')
            .split('.')
            .nth(1)?
            .parse::<u32>()
            .ok()?;
        (minor == 34).then(|| self.etcd_clients.first()).flatten()
    }
}

impl PreflightInput {
    /// Validates the inputs of `joinguard preflight`.
    pub(crate) fn validate(a: &PreflightSpec) -> Result<PreflightInput, InputError> {
        let name = |i: Input| a.spelling.name(i);
        let api_ca = load_ca(name(Input::ApiserverCacert), a.apiserver_cacert.as_deref())?;
        let api = a
            .api_server_endpoint
            .as_deref()
            .map(|v| {
                parse_endpoint(
                    name(Input::ApiServerEndpoint),
                    v,
                    TargetKind::ApiServer,
                    true,
                )
            })
            .transpose()?;
        if let Some(api) = &api {
            if !api.tls {
                return Err(value_err(
                    name(Input::ApiServerEndpoint),
                    a.api_server_endpoint.as_deref().unwrap_or_default(),
                    "the Kubernetes API is served over HTTPS; use host:port or https://host:port",
                ));
            }
        }

        let (cacert, cert, key) = (
            name(Input::EtcdCacert),
            name(Input::EtcdCert),
            name(Input::EtcdKey),
        );
        let etcd_ca = load_ca(cacert.clone(), a.etcd_cacert.as_deref())?;
        let etcd_identity = match (&a.etcd_cert, &a.etcd_key) {
            (Some(c), Some(k)) => Some(ClientIdentity::load((cert.clone(), c), (key.clone(), k))?),
            (None, None) => None,
            _ => {
                return Err(InputError::Other(format!(
                    "{cert} and {key} go together: give both or neither"
                )))
            }
        };
        if etcd_identity.is_some() && etcd_ca.is_none() {
            return Err(InputError::Other(format!(
                "{cert} needs {cacert}: without the etcd CA the member's certificate cannot be \
                 verified (kubeadm: /etc/kubernetes/pki/etcd/ca.crt)"
            )));
        }
        let tls_given = etcd_ca.is_some() || etcd_identity.is_some();
        let parse_list = |input: Input, vals: &[String], kind| {
            let flag = name(input);
            let mut out: Vec<Target> = Vec::new();
            for v in vals.iter().map(|v| v.trim()).filter(|v| !v.is_empty()) {
                let t = parse_endpoint(flag.clone(), v, kind, true)?;
                if !t.tls && tls_given {
                    return Err(value_err(
                        flag,
                        v,
                        "this is an http URL but etcd TLS certificates are given; \
                         kubeadm's etcd serves https (use https://...)",
                    ));
                }
                if out.iter().any(|o| o.endpoint == t.endpoint) {
                    return Err(value_err(flag, v, "this endpoint is listed twice"));
                }
                out.push(t);
            }
            Ok::<_, InputError>(out)
        };
        let etcd_clients = parse_list(
            Input::EtcdEndpoints,
            &a.etcd_endpoints,
            TargetKind::EtcdClient,
        )?;
        let etcd_peers = parse_list(
            Input::EtcdPeerEndpoints,
            &a.etcd_peer_endpoints,
            TargetKind::EtcdPeer,
        )?;
        if api.is_none() && etcd_clients.is_empty() && etcd_peers.is_empty() {
            return Err(InputError::Other(format!(
                "nothing to check: give the API endpoint ({}, as kubeadm join takes it) and/or {}",
                name(Input::ApiServerEndpoint),
                name(Input::EtcdEndpoints),
            )));
        }

        let hb = a
            .etcd_heartbeat_interval
            .unwrap_or(crate::spec::DEFAULT_ETCD_HEARTBEAT_INTERVAL);
        let el = a
            .etcd_election_timeout
            .unwrap_or(crate::spec::DEFAULT_ETCD_ELECTION_TIMEOUT);
        etcd_timing(
            (name(Input::EtcdHeartbeatInterval), hb),
            (name(Input::EtcdElectionTimeout), el),
        )?;
        if a.timeout < Duration::from_millis(500) {
            return Err(value_err(
                name(Input::Timeout),
                &humantime::format_duration(a.timeout).to_string(),
                "too short to measure anything; expected at least 500ms (default 60s)",
            ));
        }
        let ignore =
            IgnoreList::from_sources(&a.ignore_preflight_errors, &[]).map_err(|e| match e {
                // kubeadm's own message names the list already.
                e @ CheckNameError::AllWithOthers { .. } => InputError::Other(e.to_string()),
                e => value_err(
                    name(Input::IgnorePreflightErrors),
                    &a.ignore_preflight_errors.join(","),
                    &e.to_string(),
                ),
            })?;
        if (a.write_probe || a.bandwidth) && etcd_identity.is_none() {
            let f = name(if a.write_probe {
                Input::WriteProbe
            } else {
                Input::Bandwidth
            });
            return Err(InputError::Other(format!(
                "{f} needs an etcd identity: give {cacert}, {cert} and {key}"
            )));
        }
        if (a.write_probe || a.bandwidth) && etcd_clients.is_empty() {
            return Err(InputError::Other(format!(
                "{} and {} need {}",
                name(Input::WriteProbe),
                name(Input::Bandwidth),
                name(Input::EtcdEndpoints)
            )));
        }
        let node_name = match &a.node_name {
            Some(n) => validate_node_name(a.spelling, n)?,
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
            cluster_cidrs: Vec::new(),
            cluster_version: None,
            spelling: a.spelling,
            proxy: if a.ignore_proxy_env {
                crate::proxy::ProxyEnv::default()
            } else {
                crate::proxy::ProxyEnv::from_env(&|k| std::env::var(k).ok())
                    .map_err(|e| InputError::Other(format!("the environment's {e}")))?
            },
        })
    }
}

fn load_ca(input: Named, path: Option<&Path>) -> Result<Option<CaBundle>, InputError> {
    Ok(path.map(|p| CaBundle::load(input, p)).transpose()?)
}

/// etcd's own limits on its timing, for a value from a flag and from kubeadm-config alike: a
/// heartbeat between 1 ms and 10 s, an election timeout of at least 5 heartbeats and at most
/// 50 s (etcd refuses to start otherwise; etcd tuning guide). Each value is named by where it
/// came from.
pub(crate) fn etcd_timing(hb: (Named, Duration), el: (Named, Duration)) -> Result<(), InputError> {
    let ((hb_name, hb), (el_name, el)) = (hb, el);
    if hb.is_zero() || hb > Duration::from_secs(10) {
        return Err(value_err(
            hb_name,
            &humantime::format_duration(hb).to_string(),
            "expected the cluster's etcd heartbeat, between 1ms and 10s (etcd default 100ms)",
        ));
    }
    if el < hb * 5 || el > Duration::from_secs(50) {
        return Err(value_err(
            el_name,
            &humantime::format_duration(el).to_string(),
            "expected at least 5x the heartbeat interval and at most 50s (etcd default 1s)",
        ));
    }
    Ok(())
}

fn value_err(input: Named, value: &str, reason: &str) -> InputError {
    InputError::Value {
        input,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Parses an endpoint with the one endpoint parser ([`Target::parse`]); the error names the
/// input, and never repeats a URL with credentials.
pub fn parse_endpoint(
    input: Named,
    value: &str,
    kind: TargetKind,
    allow_bare: bool,
) -> Result<Target, InputError> {
    Target::parse(kind, value, allow_bare).map_err(|e| InputError::Value {
        input,
        value: e.url,
        reason: e.problem.to_string(),
    })
}

/// Kubernetes node names are DNS-1123 subdomains; the name lands in an etcd key.
fn is_node_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}

fn validate_node_name(spelling: Spelling, n: &str) -> Result<String, InputError> {
    if is_node_name(n) {
        Ok(n.to_string())
    } else {
        Err(value_err(
            spelling.name(Input::NodeName),
            n,
            "expected a DNS-1123 name: lowercase letters, digits, '-' and '.'",
        ))
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_ascii_lowercase())
        .ok()
        .filter(|s| is_node_name(s))
        .unwrap_or_else(|| "unknown-node".to_string())
}

#[cfg(test)]
mod tests;
