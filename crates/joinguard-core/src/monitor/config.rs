//! `monitor.yaml`: the monitor's configuration, parsed strictly (an unknown field is an error that
//! names it) and validated into a [`MonitorConfig`] before anything is probed (exit 2).
//!
//! The `cluster` section takes preflight's inputs under their flag names (camelCase), and is
//! turned into [`PreflightSpec`] so both commands resolve targets, discovery and TLS the same way.
//! This module reads only the config file; it does no network I/O.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::duration::parse_duration;
use crate::input::{Input, Spelling};
use crate::spec::PreflightSpec;
use crate::target::{Target, TargetKind};

/// Prometheus-friendly defaults: a 10 s interval gives 6 samples a minute per (target, probe),
/// enough for a 5-minute p99 alert (30 samples), and costs a member one Status, one quorum read
/// and one peer probe every 10 s.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);
/// How often the monitor probes each host's path MTU: a path's MTU changes with its routes (a
/// new tunnel, a failover), and a round sends a few dozen echoes per host.
pub const DEFAULT_PATH_MTU_INTERVAL: Duration = Duration::from_secs(300);
/// The default cap on targets per instance: it bounds series per instance (see docs/monitor.md).
pub const DEFAULT_MAX_TARGETS: usize = 10_000;

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The YAML crate's message names the field and the line (`unknown field `intervall`, expected
    /// one of ...`).
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {reason}")]
    Field {
        path: String,
        field: String,
        reason: String,
    },
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    interval: Option<String>,
    jitter: Option<f64>,
    probe_timeout: Option<String>,
    window: Option<usize>,
    max_targets: Option<usize>,
    member_list_interval: Option<String>,
    path_mtu_interval: Option<String>,
    listen: Option<String>,
    #[serde(default)]
    probe_endpoint: bool,
    #[serde(default)]
    targets: Vec<RawTarget>,
    cluster: Option<RawCluster>,
    shard: Option<RawShard>,
    tls: Option<RawTls>,
}

/// HTTPS for `/metrics`, named as Kubernetes components name theirs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTls {
    cert_file: PathBuf,
    key_file: PathBuf,
    /// Scrapers must present a client certificate this CA signed (mutual TLS).
    #[serde(rename = "clientCAFile")]
    client_ca_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawTarget {
    name: Option<String>,
    kind: String,
    endpoint: String,
    cacert: Option<PathBuf>,
}

/// preflight's flags, camelCase.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawCluster {
    api_server_endpoint: Option<String>,
    apiserver_cacert: Option<PathBuf>,
    join_config: Option<PathBuf>,
    token: Option<crate::secret::Secret>,
    #[serde(default)]
    discovery_token_ca_cert_hash: Vec<String>,
    #[serde(default)]
    discovery_token_unsafe_skip_ca_verification: bool,
    certificate_key: Option<crate::secret::Secret>,
    cert_dir: Option<PathBuf>,
    #[serde(default)]
    etcd_endpoints: Vec<String>,
    #[serde(default)]
    etcd_peer_endpoints: Vec<String>,
    etcd_cacert: Option<PathBuf>,
    etcd_cert: Option<PathBuf>,
    etcd_key: Option<PathBuf>,
    etcd_heartbeat_interval: Option<String>,
    etcd_election_timeout: Option<String>,
    #[serde(default)]
    ignore_preflight_errors: Vec<String>,
    node_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawShard {
    replicas: u32,
    index: Option<u32>,
    /// Environment variable holding the pod name (StatefulSet: `name-<ordinal>`); default
    /// `POD_NAME`.
    pod_name_env: Option<String>,
}

/// A statically configured target.
#[derive(Clone, Debug)]
pub struct StaticTarget {
    pub name: String,
    pub target: Target,
    /// The CA of an API server: with it the target gets /readyz probes, without it TCP connects.
    pub cacert: Option<PathBuf>,
}

/// Which shard of the fleet this instance probes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub replicas: u32,
    pub index: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard {
            replicas: 1,
            index: 0,
        }
    }
}

/// The validated configuration.
#[derive(Debug)]
pub struct MonitorConfig {
    pub(crate) interval: Duration,
    /// Each probe's start moves by up to +-jitter x interval, so replicas and targets do not
    /// probe in lockstep.
    pub(crate) jitter: f64,
    pub(crate) probe_timeout: Duration,
    /// Samples per (target, probe) the checks judge: the sliding window.
    pub(crate) window: usize,
    pub(crate) max_targets: usize,
    pub(crate) member_list_interval: Duration,
    /// How often each host's path MTU is probed (0: never). Needs CAP_NET_RAW.
    pub(crate) path_mtu_interval: Duration,
    pub(crate) listen: Option<SocketAddr>,
    /// Serve `/probe?target=...&module=...` (blackbox_exporter's interface), so a Prometheus
    /// drives probes through relabelling. Off by default: it makes the monitor connect where a
    /// request asks.
    pub(crate) probe_endpoint: bool,
    pub(crate) targets: Vec<StaticTarget>,
    /// preflight's inputs for the cluster section, ready for `PreflightInput::from_spec`.
    pub(crate) cluster: Option<PreflightSpec>,
    pub(crate) shard: Shard,
    /// Which joinguard this is, for `joinguard_build_info` (not from the file: the binary sets
    /// it).
    pub(crate) build: super::metrics::BuildLabels,
    /// HTTPS (and, with a client CA, mutual TLS) for the endpoints; plain HTTP when `None`.
    pub(crate) tls: Option<std::sync::Arc<rustls::ServerConfig>>,
}

impl MonitorConfig {
    /// The same configuration, labelled with the joinguard that runs it (`joinguard_build_info`).
    pub fn built_by(self, build: super::metrics::BuildLabels) -> MonitorConfig {
        MonitorConfig { build, ..self }
    }

    /// The cluster section's preflight inputs, when the file has one.
    pub fn cluster(&self) -> Option<&PreflightSpec> {
        self.cluster.as_ref()
    }

    /// Which shard of the fleet this instance probes.
    pub fn shard(&self) -> Shard {
        self.shard
    }

    /// The address to serve on from the file (`listen`), if it names one.
    pub fn listen(&self) -> Option<SocketAddr> {
        self.listen
    }

    /// Reads and validates `path`. `pod_name` looks up an environment variable (injected so tests
    /// need not touch the process environment).
    pub fn load(
        path: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<MonitorConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        MonitorConfig::parse(&text, &path.display().to_string(), env)
    }

    /// Parses the YAML text of a config; `path` names it in errors.
    pub fn parse(
        text: &str,
        path: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<MonitorConfig, ConfigError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig::default()
        } else {
            crate::yaml::from_str(text).map_err(|e| ConfigError::Parse {
                path: path.to_string(),
                message: format!(
                    "{e}{}",
                    crate::yaml::unquoted_ipv6_hint(text).unwrap_or_default()
                ),
            })?
        };
        let field = |field: &str, reason: String| ConfigError::Field {
            path: path.to_string(),
            field: field.to_string(),
            reason,
        };
        let dur = |name: &str, v: &Option<String>, default: Duration| match v {
            None => Ok(default),
            Some(s) => parse_duration(s).map_err(|e| field(name, e.to_string())),
        };
        let interval = dur("interval", &raw.interval, DEFAULT_INTERVAL)?;
        if interval < Duration::from_millis(100) || interval > Duration::from_secs(3600) {
            return Err(field(
                "interval",
                format!(
                    "{} is out of range; use 100ms to 1h (default 10s)",
                    humantime::format_duration(interval)
                ),
            ));
        }
        let jitter = raw.jitter.unwrap_or(0.1);
        if !(0.0..=0.5).contains(&jitter) {
            return Err(field(
                "jitter",
                format!("{jitter} is not a fraction of the interval between 0 and 0.5"),
            ));
        }
        // A probe may take up to the interval: a longer one would overlap the next round.
        let probe_timeout = dur(
            "probeTimeout",
            &raw.probe_timeout,
            interval.min(Duration::from_secs(2)),
        )?;
        if probe_timeout.is_zero() || probe_timeout > interval {
            return Err(field(
                "probeTimeout",
                format!(
                    "{} must be above 0 and at most the interval ({})",
                    humantime::format_duration(probe_timeout),
                    humantime::format_duration(interval)
                ),
            ));
        }
        let window = raw.window.unwrap_or(30);
        if !(3..=1000).contains(&window) {
            return Err(field(
                "window",
                format!("{window} samples: use 3 to 1000 (default 30)"),
            ));
        }
        let max_targets = raw.max_targets.unwrap_or(DEFAULT_MAX_TARGETS);
        if max_targets == 0 || max_targets > 100_000 {
            return Err(field(
                "maxTargets",
                format!("{max_targets}: use 1 to 100000"),
            ));
        }
        let member_list_interval = dur(
            "memberListInterval",
            &raw.member_list_interval,
            Duration::from_secs(30),
        )?;
        if member_list_interval < Duration::from_millis(100) {
            return Err(field(
                "memberListInterval",
                "must be at least 100ms".to_string(),
            ));
        }
        let path_mtu_interval = dur(
            "pathMtuInterval",
            &raw.path_mtu_interval,
            DEFAULT_PATH_MTU_INTERVAL,
        )?;
        if !path_mtu_interval.is_zero() && path_mtu_interval < Duration::from_secs(10) {
            return Err(field(
                "pathMtuInterval",
                format!(
                    "{}: use 0 (off) or at least 10s (default 5m); a path's MTU changes with \
                     its routes, not by the second",
                    humantime::format_duration(path_mtu_interval)
                ),
            ));
        }
        let listen = raw
            .listen
            .as_deref()
            .map(|l| {
                l.parse::<SocketAddr>()
                    .map_err(|e| field("listen", format!("`{l}`: {e}; expected IP:PORT")))
            })
            .transpose()?;

        let mut targets = Vec::new();
        for (i, t) in raw.targets.iter().enumerate() {
            let at = |f: &str| format!("targets[{i}].{f}");
            let kind = match t.kind.as_str() {
                "api-server" => TargetKind::ApiServer,
                "etcd-client" => TargetKind::EtcdClient,
                "etcd-peer" => TargetKind::EtcdPeer,
                other => {
                    return Err(field(
                        &at("kind"),
                        format!("`{other}`: expected api-server, etcd-client or etcd-peer"),
                    ))
                }
            };
            let target = Target::parse_url(kind, &t.endpoint)
                .map_err(|e| field(&at("endpoint"), e.to_string()))?;
            if t.cacert.is_some() && kind != TargetKind::ApiServer {
                return Err(field(
                    &at("cacert"),
                    "only api-server targets take a cacert (for /readyz); etcd TLS goes in the \
                     cluster section"
                        .into(),
                ));
            }
            let name = t.name.clone().unwrap_or_else(|| default_name(&target));
            if name.is_empty() || name.len() > 200 {
                return Err(field(&at("name"), "must be 1 to 200 characters".into()));
            }
            if targets.iter().any(|o: &StaticTarget| o.name == name) {
                return Err(field(&at("name"), format!("`{name}` is listed twice")));
            }
            targets.push(StaticTarget {
                name,
                target,
                cacert: t.cacert.clone(),
            });
        }

        let tls = raw
            .tls
            .map(|t| {
                super::serve::tls_config(&t.cert_file, &t.key_file, t.client_ca_file.as_deref())
                    .map_err(|e| field("tls", e.to_string()))
            })
            .transpose()?;
        let cluster = raw.cluster.map(|c| cluster_args(c, &field)).transpose()?;
        if targets.is_empty() && cluster.is_none() {
            return Err(field(
                "targets",
                "nothing to monitor: give `targets` (a static list) and/or a `cluster` section \
                 (the inputs of joinguard preflight); docs/monitor.md describes both (the .deb installs it \
                 under /usr/share/doc/joinguard/)"
                    .into(),
            ));
        }

        let shard = match raw.shard {
            None => Shard::default(),
            Some(s) => {
                if s.replicas == 0 || s.replicas > 1000 {
                    return Err(field(
                        "shard.replicas",
                        format!("{}: use 1 to 1000", s.replicas),
                    ));
                }
                let index = match s.index {
                    Some(i) => i,
                    None => {
                        let var = s.pod_name_env.as_deref().unwrap_or("POD_NAME");
                        let pod = env(var).ok_or_else(|| {
                            field(
                                "shard.index",
                                format!(
                                    "not given, and ${var} is not set; give shard.index or run \
                                     in a StatefulSet with {var} from the downward API"
                                ),
                            )
                        })?;
                        ordinal(&pod).ok_or_else(|| {
                            field(
                                "shard.index",
                                format!(
                                    "not given, and ${var}=`{pod}` does not end in -<ordinal> \
                                     (StatefulSet pod names do)"
                                ),
                            )
                        })?
                    }
                };
                if index >= s.replicas {
                    return Err(field(
                        "shard.index",
                        format!("{index} is not below shard.replicas ({})", s.replicas),
                    ));
                }
                Shard {
                    replicas: s.replicas,
                    index,
                }
            }
        };

        Ok(MonitorConfig {
            interval,
            jitter,
            probe_timeout,
            window,
            max_targets,
            member_list_interval,
            path_mtu_interval,
            listen,
            probe_endpoint: raw.probe_endpoint,
            targets,
            cluster,
            shard,
            build: super::metrics::BuildLabels::default(),
            tls,
        })
    }
}

/// `api-server/10.0.0.10:6443`: the kind keeps an etcd member's client and peer targets apart.
pub(crate) fn default_name(t: &Target) -> String {
    let kind = match t.kind {
        TargetKind::ApiServer => "api-server",
        TargetKind::EtcdClient => "etcd-client",
        TargetKind::EtcdPeer => "etcd-peer",
    };
    format!("{kind}/{}", t.endpoint)
}

/// The ordinal at the end of a StatefulSet pod name (`joinguard-monitor-2` -> 2).
pub fn ordinal(pod: &str) -> Option<u32> {
    let (_, n) = pod.rsplit_once('-')?;
    n.parse().ok()
}

/// The monitor's spelling of preflight's inputs: the keys of its `cluster:` section, so an error
/// names the key the user wrote. Inputs the section has no key for are named by what the monitor
/// does instead.
fn key(i: Input) -> &'static str {
    match i {
        Input::ApiServerEndpoint => "cluster.apiServerEndpoint",
        Input::ApiserverCacert => "cluster.apiserverCacert",
        Input::Config => "cluster.joinConfig",
        Input::Token => "cluster.token",
        Input::DiscoveryTokenCaCertHash => "cluster.discoveryTokenCaCertHash",
        Input::DiscoveryTokenUnsafeSkipCaVerification => {
            "cluster.discoveryTokenUnsafeSkipCaVerification"
        }
        Input::CertificateKey => "cluster.certificateKey",
        Input::CertDir => "cluster.certDir",
        Input::EtcdEndpoints => "cluster.etcdEndpoints",
        Input::EtcdPeerEndpoints => "cluster.etcdPeerEndpoints",
        Input::EtcdCacert => "cluster.etcdCacert",
        Input::EtcdCert => "cluster.etcdCert",
        Input::EtcdKey => "cluster.etcdKey",
        Input::EtcdHeartbeatInterval => "cluster.etcdHeartbeatInterval",
        Input::EtcdElectionTimeout => "cluster.etcdElectionTimeout",
        Input::IgnorePreflightErrors => "cluster.ignorePreflightErrors",
        Input::NodeName => "cluster.nodeName",
        // Set by the monitor itself, or by a joinConfig's own fields.
        Input::ApiserverAdvertiseAddress => "the joinConfig's advertise address",
        Input::ControlPlane => "cluster (the monitor watches a control-plane join's paths)",
        Input::TlsBootstrapToken => "the joinConfig's discovery.tlsBootstrapToken",
        Input::DiscoveryFile => "the joinConfig's discovery.file",
        Input::Timeout => "the monitor's discovery deadline",
        Input::WriteProbe | Input::Bandwidth => "a probe the monitor does not run",
        Input::Wait => "a preflight input the monitor does not take (it probes without end)",
        Input::Kubeconfig => "a kubeconfig",
        Input::TraceTarget
        | Input::Port
        | Input::Protocol
        | Input::Size
        | Input::Interval
        | Input::ProbeTimeout => "a trace input the monitor does not take",
    }
}

/// How monitor.yaml spells preflight's inputs.
pub const KEYS: Spelling = Spelling::new(key);

fn cluster_args(
    c: RawCluster,
    field: &dyn Fn(&str, String) -> ConfigError,
) -> Result<PreflightSpec, ConfigError> {
    let given_dur = |name: &str, v: &Option<String>| {
        v.as_deref()
            .map(|s| parse_duration(s).map_err(|e| field(name, e.to_string())))
            .transpose()
    };
    const NO_CERTIFICATE_KEY: &str = "the monitor runs for months, but kubeadm deletes the \
        kubeadm-certs Secret 2 hours after `kubeadm init phase upload-certs` and a certificate \
        minted from it lives 1 hour: mount the etcd client files instead \
        (/etc/kubernetes/pki/etcd/ca.crt, apiserver-etcd-client.crt and \
        apiserver-etcd-client.key) and set etcdCacert, etcdCert and etcdKey, or certDir";
    if c.certificate_key.is_some() {
        return Err(field("cluster.certificateKey", NO_CERTIFICATE_KEY.into()));
    }
    // The same key inside the join's JoinConfiguration. A file that cannot be read or parsed is
    // reported where it is resolved, with the rest of the cluster section.
    if let Some(path) = &c.join_config {
        if let Ok(j) = crate::joinconfig::JoinConfig::load(path) {
            if j.certificate_key.is_some() {
                return Err(field(
                    "cluster.joinConfig",
                    format!(
                        "{} has controlPlane.certificateKey: {NO_CERTIFICATE_KEY} (or point \
                         joinConfig at a copy without the key)",
                        path.display()
                    ),
                ));
            }
        }
    }
    // The cluster section's fields under their kubeadm flag names, so that kubeadm's rule for
    // `--config` beside flags applies to `joinConfig` beside them too.
    let mut given = Vec::new();
    for (set, flag) in [
        (c.join_config.is_some(), "config"),
        (c.token.is_some(), "token"),
        (
            !c.discovery_token_ca_cert_hash.is_empty(),
            "discovery-token-ca-cert-hash",
        ),
        (
            c.discovery_token_unsafe_skip_ca_verification,
            "discovery-token-unsafe-skip-ca-verification",
        ),
        (c.certificate_key.is_some(), "certificate-key"),
        (c.node_name.is_some(), "node-name"),
        (
            !c.ignore_preflight_errors.is_empty(),
            "ignore-preflight-errors",
        ),
    ] {
        if set {
            given.push(flag.to_string());
        }
    }
    let defaults = PreflightSpec::new(KEYS);
    Ok(PreflightSpec {
        // The monitor watches the paths of a control-plane join (a joinConfig decides itself).
        control_plane: true,
        given,
        api_server_endpoint: c.api_server_endpoint,
        apiserver_cacert: c.apiserver_cacert,
        config: c.join_config,
        token: c.token,
        discovery_token_ca_cert_hash: c.discovery_token_ca_cert_hash,
        discovery_token_unsafe_skip_ca_verification: c.discovery_token_unsafe_skip_ca_verification,
        certificate_key: c.certificate_key,
        cert_dir: c.cert_dir,
        etcd_endpoints: c.etcd_endpoints,
        etcd_peer_endpoints: c.etcd_peer_endpoints,
        etcd_cacert: c.etcd_cacert,
        etcd_cert: c.etcd_cert,
        etcd_key: c.etcd_key,
        // Set in monitor.yaml, or not at all (kubeadm-config's then, else etcd's default).
        etcd_heartbeat_interval: given_dur(
            "cluster.etcdHeartbeatInterval",
            &c.etcd_heartbeat_interval,
        )?,
        etcd_election_timeout: given_dur("cluster.etcdElectionTimeout", &c.etcd_election_timeout)?,
        ignore_preflight_errors: c.ignore_preflight_errors,
        // The monitor's own probes measure the paths all the time; no one-off bandwidth read.
        no_bandwidth: true,
        node_name: c.node_name,
        // preflight's deadline serves as discovery's at start-up.
        ..defaults
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse(text: &str) -> Result<MonitorConfig, ConfigError> {
        MonitorConfig::parse(text, "monitor.yaml", &no_env)
    }

    #[test]
    fn defaults_and_static_targets() {
        let c = parse(
            "targets:\n  - kind: api-server\n    endpoint: 10.0.0.10:6443\n  - name: m1-peer\n    kind: etcd-peer\n    endpoint: https://10.0.0.11\n",
        )
        .unwrap();
        assert_eq!(c.interval, DEFAULT_INTERVAL);
        assert_eq!(c.probe_timeout, Duration::from_secs(2));
        assert_eq!(c.targets[0].name, "api-server/10.0.0.10:6443");
        assert_eq!(c.targets[1].target.endpoint, "10.0.0.11:2380");
        assert_eq!(c.shard, Shard::default());
    }

    /// The token of the cluster section never shows in Debug output, and a wrong YAML type for
    /// it is reported without the value.
    #[test]
    fn cluster_secrets_are_redacted() {
        let c = parse(
            "cluster:\n  token: abcdef.0123456789abcdef\n  discoveryTokenUnsafeSkipCaVerification: true\n  apiServerEndpoint: 10.0.0.10:6443\n",
        )
        .unwrap();
        let spec = c.cluster.unwrap();
        let shown = format!("{spec:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        assert_eq!(
            spec.token.as_ref().map(|t| t.expose()),
            Some("abcdef.0123456789abcdef")
        );
        let e = parse("cluster:\n  token: [abcdef.0123456789abcdef]\n").unwrap_err();
        assert!(!e.to_string().contains("0123456789abcdef"), "{e}");
    }

    /// A certificate key has no place in a service that runs for months: the message says which
    /// files to mount instead, and never repeats the key.
    #[test]
    fn a_certificate_key_is_refused_with_the_files_to_mount() {
        let e = parse("cluster:\n  certificateKey: 00112233\n  token: abcdef.0123456789abcdef\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cluster.certificateKey"), "{e}");
        assert!(e.contains("apiserver-etcd-client.crt"), "{e}");
        assert!(!e.contains("00112233"), "{e}");
    }

    /// The key inside a JoinConfiguration given as `joinConfig` is refused too, by the key
    /// that names the file, without repeating the key.
    #[test]
    fn a_join_configs_certificate_key_is_refused_too() {
        let dir = tempfile::tempdir().unwrap();
        let join = dir.path().join("kubeadm-join-config.yaml");
        let key = "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
        std::fs::write(
            &join,
            format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  \
                 bootstrapToken:\n    apiServerEndpoint: 10.0.0.10:6443\n    token: \
                 abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\ncontrolPlane:\n  \
                 certificateKey: {key}\n"
            ),
        )
        .unwrap();
        let e = parse(&format!("cluster:\n  joinConfig: {}\n", join.display()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cluster.joinConfig"), "{e}");
        assert!(e.contains("controlPlane.certificateKey"), "{e}");
        assert!(e.contains("apiserver-etcd-client.crt"), "{e}");
        assert!(!e.contains(key) && !e.contains("0123456789abcdef"), "{e}");
        // Without the key, the same file is taken.
        std::fs::write(
            &join,
            "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ndiscovery:\n  \
             bootstrapToken:\n    apiServerEndpoint: 10.0.0.10:6443\n    token: \
             abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\ncontrolPlane: {}\n",
        )
        .unwrap();
        parse(&format!("cluster:\n  joinConfig: {}\n", join.display())).expect("taken");
    }

    /// A monitor user is told about the key they wrote in monitor.yaml, never about a flag of
    /// `joinguard preflight` they did not give.
    #[test]
    fn cluster_errors_name_the_yaml_key_not_a_flag() {
        let spec = |yaml: &str| parse(yaml).unwrap().cluster.unwrap();
        let no_flag = |msg: &str| !msg.split_whitespace().any(|w| w.starts_with('-'));
        for (yaml, key) in [
            (
                "cluster:\n  etcdEndpoints: [https://10.0.0.11:2379]\n  etcdCacert: /nonexistent/ca.crt\n",
                "cluster.etcdCacert /nonexistent/ca.crt: cannot read the file",
            ),
            (
                "cluster:\n  etcdEndpoints: [https://10.0.0.11:2379]\n  etcdCert: /c.crt\n",
                "cluster.etcdCert and cluster.etcdKey go together",
            ),
            (
                "cluster:\n  etcdEndpoints: ['https://u:p@10.0.0.11:2379']\n",
                "cluster.etcdEndpoints `<redacted>`: credentials in the URL",
            ),
            (
                "cluster:\n  etcdEndpoints: [https://10.0.0.11:2379]\n  nodeName: CP_2\n",
                "cluster.nodeName `CP_2`",
            ),
        ] {
            let msg = crate::discovery::input::PreflightInput::validate(&spec(yaml))
                .unwrap_err()
                .to_string();
            assert!(msg.starts_with(key), "{yaml}: {msg}");
            assert!(no_flag(&msg), "{yaml}: a flag in {msg}");
        }
    }

    #[test]
    fn join_config_beside_kubeadm_fields_meets_kubeadms_rule() {
        let c = parse(
            "cluster:\n  joinConfig: /run/kubeadm/kubeadm-join-config.yaml\n  token: abcdef.0123456789abcdef\n  nodeName: cp-2\n  etcdHeartbeatInterval: 200ms\n",
        )
        .unwrap();
        let args = c.cluster.unwrap();
        assert_eq!(args.given, ["config", "token", "node-name"]);
        assert_eq!(
            crate::kubeadm::flags::mixed_config_error(&args.given)
                .map(|e| e.to_string())
                .as_deref(),
            Some("can not mix '--config' with arguments [token]")
        );
        let c = parse("cluster:\n  joinConfig: /j.yaml\n  nodeName: cp-2\n  ignorePreflightErrors: [NumCPU]\n").unwrap();
        assert_eq!(
            crate::kubeadm::flags::mixed_config_error(&c.cluster.unwrap().given),
            None
        );
    }

    #[test]
    fn path_mtu_interval_defaults_to_5m_and_0_turns_it_off() {
        let t = "targets:\n  - kind: etcd-peer\n    endpoint: a:2380\n";
        assert_eq!(
            parse(t).unwrap().path_mtu_interval,
            Duration::from_secs(300)
        );
        let off = parse(&format!("pathMtuInterval: 0s\n{t}")).unwrap();
        assert!(off.path_mtu_interval.is_zero());
        let e = parse(&format!("pathMtuInterval: 5s\n{t}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pathMtuInterval") && e.contains("at least 10s"),
            "{e}"
        );
    }

    #[test]
    fn unknown_field_is_named() {
        let e = parse("intervall: 1s\ntargets: []\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `intervall`"), "{e}");
        let e = parse("cluster:\n  etcdEndpoint: [https://a:2379]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("etcdEndpoint"), "{e}");
    }

    /// An IPv6 endpoint must be quoted in YAML; unquoted, the error says so, and the quoted form
    /// is a bracketed target.
    #[test]
    fn an_unquoted_ipv6_endpoint_is_named_and_the_quoted_one_taken() {
        let e = parse("targets:\n  - {kind: etcd-peer, endpoint: [fd00:198:18::3]:2380}\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("line 2: quote the IPv6 endpoint, `\"[fd00:198:18::3]:2380\"`"),
            "{e}"
        );
        let c = parse("targets:\n  - {kind: etcd-peer, endpoint: \"[fd00:198:18::3]:2380\"}\n")
            .unwrap();
        assert_eq!(c.targets[0].name, "etcd-peer/[fd00:198:18::3]:2380");
    }

    #[test]
    fn bad_values_name_their_field() {
        let t = "targets:\n  - kind: api-server\n    endpoint: a:1\n";
        let e = parse(&format!("interval: 5x\n{t}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("interval"), "{e}");
        let e = parse(&format!("jitter: 2\n{t}")).unwrap_err().to_string();
        assert!(e.contains("jitter"), "{e}");
        let e = parse(&format!("interval: 1s\nprobeTimeout: 3s\n{t}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("probeTimeout"), "{e}");
        let e = parse("targets:\n  - kind: dns\n    endpoint: a:1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("targets[0].kind"), "{e}");
        let e = parse(&format!("shard: {{replicas: 2, index: 2}}\n{t}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("shard.index"), "{e}");
        let e = parse("").unwrap_err().to_string();
        assert!(e.contains("nothing to monitor"), "{e}");
    }

    #[test]
    fn shard_index_from_pod_name() {
        let env = |k: &str| (k == "POD_NAME").then(|| "joinguard-monitor-2".to_string());
        let c = MonitorConfig::parse(
            "shard: {replicas: 3}\ntargets:\n  - kind: api-server\n    endpoint: a:1\n",
            "m.yaml",
            &env,
        )
        .unwrap();
        assert_eq!(
            c.shard,
            Shard {
                replicas: 3,
                index: 2
            }
        );
        assert_eq!(ordinal("joinguard-monitor-7b9f"), None);
    }
}

/// The monitor's findings name its YAML keys, the CLI's its flags: the same checks, spelled by
/// each caller.
#[cfg(test)]
mod spelling_tests {
    use super::KEYS;
    use crate::check::{Checker, Status};
    use crate::target::{Target, TargetKind};

    #[test]
    fn a_finding_names_the_deadline_as_the_monitor_or_the_cli_spells_it() {
        let p = Target::parse_url(TargetKind::EtcdPeer, "https://10.0.0.3:2380").unwrap();
        let error = |c: Checker| {
            c.judge(std::slice::from_ref(&p), &[])
                .into_iter()
                .find(|r| r.status == Status::Error)
                .expect("an unprobed target is an error")
                .message
        };
        let monitor = error(Checker::default().spelled(KEYS));
        assert!(!monitor.contains("--"), "{monitor}");
        assert!(
            monitor.contains("(the monitor's discovery deadline)"),
            "{monitor}"
        );
        let cli = error(Checker::default().spelled(crate::input::tests::FLAGS));
        assert!(
            cli.contains("before the run's deadline (--timeout) ended"),
            "{cli}"
        );
    }
}
