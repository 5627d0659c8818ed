//! `joinguard preflight`: decides whether this node's network can carry a control-plane join.
//!
//! Flow (DESIGN section 3): flags -> [`input`] (validated targets and TLS material) -> [`run`]
//! (the paced, adaptive sampler) -> `stats` -> `check` -> `report`. With `--wait`, the whole
//! check is repeated on the retry layer's schedule until fit or until the wait ends.
//!
//! This module wires the stages together and maps outcomes to exit codes; it neither probes nor
//! formats by itself.

pub mod input;
pub mod report;
pub mod run;
pub mod traces;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use crate::check::{exit, CheckName, CheckResult, Checker, Status, CLUSTER_TARGET};
use crate::cli::{Output, PreflightArgs};
use crate::discovery::cluster::{self, ClusterFacts, EtcdMaterial};
use crate::discovery::{self, BootstrapToken, CaTrust, DiscoveryError};
use crate::joinconfig::JoinConfig;
use crate::kube::ApiClient;
use crate::kubeadm;
use crate::output;
use crate::preflight::report::{render_json, render_text, Report};
use crate::probe::identity::{CaBundle, ClientIdentity, TlsFlag, ALPN_HTTP1};
use crate::probe::tls::TlsClient;
use crate::retry::{wait_until, Backoff};
use crate::retry::{Recorder, RetryPolicy};
use crate::sampling::SamplingPolicy;
use crate::stats::Summary;
use crate::target::TargetKind;

pub use input::{InputError, PreflightInput};
pub use run::Observations;

/// The result of one check run.
#[derive(Debug)]
pub enum Outcome {
    /// A report with a verdict.
    Report(Box<Report>),
    /// A certificate did not verify against the given CA: never retried, never downgraded.
    Trust(String),
}

impl Outcome {
    /// The exit code this outcome maps to.
    pub fn exit_code(&self) -> u8 {
        match self {
            Outcome::Report(r) => r.exit_code(),
            Outcome::Trust(_) => exit::TRUST_FAILURE,
        }
    }
}

/// Entry point of `joinguard preflight`: returns the process exit code.
pub fn run_cli(args: PreflightArgs) -> u8 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            output::say(&format!(
                "joinguard preflight: cannot start the runtime: {e}"
            ));
            return exit::UNFIT;
        }
    };
    let started = std::time::Instant::now();
    let mut input = match rt.block_on(resolve_input(args, &Recorder::new())) {
        Ok(i) => i,
        Err((code, e)) => {
            output::say(&format!("joinguard preflight: {e}"));
            return code;
        }
    };
    if input.wait.is_none() {
        // --timeout bounds the whole run: discovery took its share of it already.
        input.timeout = input
            .timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_millis(500));
    }
    let outcome = rt.block_on(preflight(&input));
    print_outcome(&input, &outcome);
    outcome.exit_code()
}

/// Turns preflight's inputs into validated targets and TLS material: the kubeadm join line
/// first (flags, or `--config` under kubeadm's mixing rule), then token discovery
/// (cluster-info, kubeadm-config, kubeadm-certs) when a token is given. `joinguard monitor`
/// reuses it, so both commands accept the same inputs. Errors carry the exit code (2 invalid
/// input, 3 trust failure, 1 discovery failed) and the message.
pub async fn resolve_input(
    mut args: PreflightArgs,
    recorder: &Recorder,
) -> Result<PreflightInput, (u8, String)> {
    let line = kubeadm_join_line(&mut args).map_err(|e| (exit::INVALID_INPUT, e))?;
    let discovery = DiscoveryInput::from_args(&args).map_err(|e| (exit::INVALID_INPUT, e))?;
    let mut input =
        PreflightInput::from_args(&args).map_err(|e| (exit::INVALID_INPUT, e.to_string()))?;
    if let Some(ca) = line.file_ca {
        input.api_ca = Some(ca);
    }
    input.control_plane = line.control_plane;
    input.advertise_address = line.advertise_address;
    input.notes.extend(line.notes);
    for k in input.ignore.kubeadm_checks() {
        input.notes.push(format!(
            "{k} is a kubeadm check; joinguard has nothing to ignore for it"
        ));
    }
    let want_etcd = line.control_plane || line.explicit_etcd;
    if let Some(d) = discovery {
        let budget = match line.discovery_timeout {
            Some(t) => input.timeout.min(t),
            None => input.timeout,
        };
        match d.run(budget, recorder).await {
            Ok(found) => found
                .apply(&mut input, &args, want_etcd)
                .map_err(|e| (exit::INVALID_INPUT, e))?,
            Err(e) => {
                let code = match e {
                    DiscoveryError::Trust(_) => exit::TRUST_FAILURE,
                    DiscoveryError::Input(_) => exit::INVALID_INPUT,
                    DiscoveryError::Failed(_) => exit::UNFIT,
                };
                return Err((code, e.to_string()));
            }
        }
    }
    Ok(input)
}

/// What the kubeadm join line adds to preflight's own inputs.
struct JoinLine {
    /// The CA of `discovery.file` / `--discovery-file` (kubeadm's file discovery trusts it).
    file_ca: Option<CaBundle>,
    control_plane: bool,
    /// etcd inputs were given on purpose (--etcd-*, --cert-dir, --certificate-key).
    explicit_etcd: bool,
    advertise_address: Option<IpAddr>,
    discovery_timeout: Option<Duration>,
    /// For the report's notes (text and JSON).
    notes: Vec<String>,
}

/// The kubeadm flags among the given ones, as kubeadm spells them.
fn kubeadm_flags_given(a: &PreflightArgs) -> Vec<String> {
    a.given
        .iter()
        .filter(|f| kubeadm::flags::lookup(f).is_some())
        .cloned()
        .collect()
}

/// Applies the kubeadm join line to the flags: kubeadm's rule for `--config` beside flags
/// (`ValidateMixedArguments`), the file's fields, `--token` as the default discovery and TLS
/// bootstrap token, `--control-plane` (worker join without it), `--discovery-file`, and this
/// node's advertise address (`newJoinData` in kubeadm's `cmd/join.go`).
fn kubeadm_join_line(a: &mut PreflightArgs) -> Result<JoinLine, String> {
    let given = kubeadm_flags_given(a);
    if let Some(e) = kubeadm::flags::mixed_config_error(&given) {
        return Err(e);
    }
    let unused: Vec<String> = given
        .iter()
        .filter(|f| kubeadm::flags::lookup(f).is_some_and(|k| !k.is_used()))
        .map(|f| format!("--{f}"))
        .collect();
    if !unused.is_empty() && crate::logging::verbosity() >= 1 {
        output::say(&format!(
            "[preflight] kubeadm flags accepted, not used by joinguard: {}",
            unused.join(", ")
        ));
    }
    let mut notes = Vec::new();
    // Notes go into the report (text and JSON), not a second time to stderr.
    let say = |line: String, notes: &mut Vec<String>| notes.push(line);
    let mut line = JoinLine {
        file_ca: None,
        control_plane: a.control_plane,
        explicit_etcd: false,
        advertise_address: None,
        discovery_timeout: None,
        notes: Vec::new(),
    };
    let mut advertise = a.apiserver_advertise_address.clone();
    let mut advertise_source = "--apiserver-advertise-address".to_string();
    let mut discovery_file = a.discovery_file.clone();
    let mut file_source = "--discovery-file".to_string();
    if let Some(tls) = &a.tls_bootstrap_token {
        BootstrapToken::parse(tls).map_err(|e| format!("--tls-bootstrap-token: {e}"))?;
    }
    if let Some(path) = a.config.clone() {
        if a.api_server_endpoint.take().is_some() {
            say(
                "WARNING: the API endpoint argument is ignored beside --config, as kubeadm join \
                 ignores it; discovery.bootstrapToken.apiServerEndpoint is used"
                    .into(),
                &mut notes,
            );
        }
        let c = JoinConfig::load(&path).map_err(|e| e.to_string())?;
        for w in &c.warnings {
            output::say(&format!(
                "[preflight] WARNING: --config {}: {w}",
                path.display()
            ));
        }
        if let Some(tls) = &c.tls_bootstrap_token {
            BootstrapToken::parse(tls).map_err(|e| {
                format!(
                    "--config {}: discovery.tlsBootstrapToken: {e}",
                    path.display()
                )
            })?;
        }
        a.api_server_endpoint = c.api_server_endpoint.clone();
        a.token = c.token.clone();
        a.discovery_token_ca_cert_hash = c.ca_cert_hashes.clone();
        a.discovery_token_unsafe_skip_ca_verification = c.unsafe_skip_ca_verification;
        line.control_plane = c.local_api_endpoint.is_some();
        if let Some((addr, port)) = c.local_api_endpoint {
            advertise = addr.map(|a| a.to_string());
            advertise_source = format!(
                "--config {}: controlPlane.localAPIEndpoint.advertiseAddress",
                path.display()
            );
            a.apiserver_bind_port = Some(port);
            if a.etcd_cert.is_none() && a.cert_dir.is_none() {
                a.certificate_key = c.certificate_key.clone();
            }
        }
        // --node-name may stand beside --config and overrides the file (kubeadm newJoinData).
        if a.node_name.is_none() {
            a.node_name = c.node_name.clone();
        }
        // The flag's list and the file's are merged into one set, as kubeadm merges them.
        a.ignore_preflight_errors
            .extend(c.ignore_preflight_errors.iter().cloned());
        discovery_file = c.discovery_file.clone();
        file_source = format!("--config {}: discovery.file.kubeConfigPath", path.display());
        line.discovery_timeout = c.discovery_timeout;
    } else {
        // --token is the default of both --discovery-token and --tls-bootstrap-token.
        if let Some(d) = a.discovery_token.take() {
            a.token = Some(d);
        }
        if !a.control_plane
            && (a.certificate_key.is_some()
                || a.apiserver_advertise_address.is_some()
                || a.apiserver_bind_port.is_some())
        {
            say(
                "WARNING: --control-plane is also required when passing control-plane related \
                 flags such as [certificate-key, apiserver-advertise-address, \
                 apiserver-bind-port] (kubeadm would join a worker and not use them)"
                    .into(),
                &mut notes,
            );
        }
    }
    if let Some(file) = discovery_file {
        if file.starts_with("https://") || file.starts_with("http://") {
            return Err(format!(
                "{file_source} {file:?}: joinguard does not fetch discovery files over the \
                 network (kubeadm fetches https:// URLs with the host's CA bundle); download the \
                 kubeconfig and pass its path"
            ));
        }
        if a.api_server_endpoint.is_some() {
            return Err(format!(
                "{file_source} and token discovery (the API endpoint argument) are mutually \
                 exclusive, as in kubeadm (discovery.bootstrapToken and discovery.file)"
            ));
        }
        // With file discovery a token only serves the TLS bootstrap.
        a.token = None;
        if a.apiserver_cacert.is_none() {
            let path = std::path::PathBuf::from(&file);
            let k = crate::kube::Kubeconfig::load(&path, None)
                .map_err(|e| format!("{file_source}: {e}"))?;
            a.api_server_endpoint = Some(k.server.clone());
            line.file_ca = Some(
                CaBundle::from_pem(TlsFlag::ApiserverCacert, &path, k.ca_pem)
                    .map_err(|e| format!("{file_source}: {e}"))?,
            );
        }
    }
    if let Some(addr) = advertise.filter(|s| !s.is_empty()) {
        line.advertise_address = Some(this_hosts_address(&advertise_source, &addr)?);
    }
    line.explicit_etcd = !a.etcd_endpoints.is_empty()
        || !a.etcd_peer_endpoints.is_empty()
        || a.etcd_cacert.is_some()
        || a.etcd_cert.is_some()
        || a.cert_dir.is_some()
        || a.certificate_key.is_some();
    if !line.control_plane && !line.explicit_etcd {
        say(
            "worker join (no --control-plane, no controlPlane in --config): only the API path \
             is checked; give --control-plane for the etcd paths of a control-plane join"
                .into(),
            &mut notes,
        );
    }
    line.notes = notes;
    Ok(line)
}

/// `addr` parsed, and one of this host's addresses: binding a UDP socket to it succeeds only
/// then (no packet is sent). kubeadm's etcd member would advertise https://ADDR:2380.
fn this_hosts_address(source: &str, addr: &str) -> Result<IpAddr, String> {
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{source} `{addr}`: not an IP address"))?;
    if ip.is_unspecified() || ip.is_loopback() {
        return Err(format!(
            "{source} `{addr}`: this node's etcd member and API server advertise this address to \
             the others; give the address they reach this node on"
        ));
    }
    std::net::UdpSocket::bind((ip, 0)).map_err(|e| {
        format!(
            "{source} `{addr}`: this host has no such address ({e}); the new etcd member would \
             advertise https://{addr}:2380 and its peers could not reach it"
        )
    })?;
    Ok(ip)
}

/// Token discovery's inputs, validated (exit 2 before any network call).
struct DiscoveryInput {
    endpoint: String,
    token: BootstrapToken,
    trust: CaTrust,
    certificate_key: Option<zeroize::Zeroizing<[u8; 32]>>,
    /// The etcd identity built from `--cert-dir`, read before any network call.
    cert_dir: Option<EtcdMaterial>,
}

/// What discovery adds to the flags.
struct Discovered {
    api_ca: CaBundle,
    facts: ClusterFacts,
    etcd: Option<EtcdMaterial>,
}

impl DiscoveryInput {
    fn from_args(a: &PreflightArgs) -> Result<Option<DiscoveryInput>, String> {
        let Some(token) = &a.token else {
            let orphan = if a.certificate_key.is_some() {
                Some("--certificate-key")
            } else if a.cert_dir.is_some() {
                Some("--cert-dir")
            } else if !a.discovery_token_ca_cert_hash.is_empty() {
                Some("--discovery-token-ca-cert-hash")
            } else if a.discovery_token_unsafe_skip_ca_verification {
                Some("--discovery-token-unsafe-skip-ca-verification")
            } else {
                None
            };
            return match orphan {
                Some(f) => Err(format!(
                    "{f} is part of token discovery and needs --token (or \
                     discovery.bootstrapToken.token in --config)"
                )),
                None => Ok(None),
            };
        };
        let token = BootstrapToken::parse(token).map_err(|e| format!("--token: {e}"))?;
        // Pins that are given are checked, whatever unsafeSkipCAVerification says: kubeadm's
        // token discovery (`discovery/token/token.go`) skips the pin check only when the pin set
        // is empty.
        let trust = if !a.discovery_token_ca_cert_hash.is_empty() {
            CaTrust::Pins(
                a.discovery_token_ca_cert_hash
                    .iter()
                    .map(|p| discovery::parse_pin(p))
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("--discovery-token-ca-cert-hash {e}"))?,
            )
        } else if a.discovery_token_unsafe_skip_ca_verification {
            CaTrust::UnsafeSkip
        } else {
            return Err(
                "--token needs --discovery-token-ca-cert-hash sha256:<hex> (or, \
                        knowingly, --discovery-token-unsafe-skip-ca-verification), as kubeadm \
                        join does"
                    .into(),
            );
        };
        let Some(endpoint) = a.api_server_endpoint.as_deref() else {
            return Err(
                "--token needs the API endpoint (as kubeadm join takes it: host:port, \
                        or discovery.bootstrapToken.apiServerEndpoint in --config)"
                    .into(),
            );
        };
        let endpoint = endpoint
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        let certificate_key = a
            .certificate_key
            .as_deref()
            .map(cluster::parse_certificate_key)
            .transpose()
            .map_err(|e| format!("--certificate-key: {e}"))?;
        let cert_dir = a
            .cert_dir
            .as_deref()
            .map(cluster::etcd_material_from_dir)
            .transpose()
            .map_err(|e| format!("--cert-dir: {e}"))?;
        Ok(Some(DiscoveryInput {
            endpoint,
            token,
            trust,
            certificate_key,
            cert_dir,
        }))
    }

    /// Runs discovery on the `connect` policy within `timeout`, then reads what the token may
    /// read about the cluster (kubeadm-config; kubeadm-certs with a certificate key).
    async fn run(
        &self,
        timeout: Duration,
        recorder: &Recorder,
    ) -> Result<Discovered, DiscoveryError> {
        let deadline = tokio::time::Instant::now() + timeout;
        output::say(&format!(
            "[preflight] Discovering the cluster CA from {} (token id {})",
            self.endpoint,
            self.token.id()
        ));
        let policy = discovery::policy(Some(deadline));
        let d = discovery::discover(&self.endpoint, &self.token, &self.trust, &policy, recorder)
            .await?;
        if d.ca_unverified {
            output::say(
                "[preflight] WARNING: the cluster CA was not verified against a pin \
                 (--discovery-token-unsafe-skip-ca-verification): an attacker in the path could \
                 have supplied it",
            );
        } else {
            output::say("[preflight] The cluster CA matches the pin and signed cluster-info");
        }
        let unusable =
            |e: String| DiscoveryError::Trust(format!("the discovered CA is not usable: {e}"));
        let api_ca = CaBundle::from_pem(
            TlsFlag::ApiserverCacert,
            std::path::Path::new("cluster-info"),
            d.ca_pem.clone(),
        )
        .map_err(|e| unusable(e.to_string()))?;
        let tls =
            TlsClient::new(&api_ca, None, &[ALPN_HTTP1]).map_err(|e| unusable(e.to_string()))?;
        let client = ApiClient::with_tls(
            &format!("https://{}", self.endpoint),
            tls,
            Some(self.token.expose().as_str()),
        )
        .map_err(DiscoveryError::Failed)?;
        let read = RetryPolicy::read().with_deadline(deadline);
        let server = format!("https://{}", self.endpoint);
        let admin = |cert: &[u8], key: zeroize::Zeroizing<Vec<u8>>| {
            let src = std::path::Path::new("minted admin certificate");
            let id = ClientIdentity::from_pem_for(
                (TlsFlag::Kubeconfig, src, cert.to_vec()),
                (TlsFlag::Kubeconfig, src, key),
            )
            .map_err(|e| e.to_string())?;
            let tls =
                TlsClient::new(&api_ca, Some(&id), &[ALPN_HTTP1]).map_err(|e| e.to_string())?;
            ApiClient::with_tls(&server, tls, None)
        };
        let (facts, etcd) = cluster::read_cluster(
            &client,
            admin,
            &read,
            recorder,
            match (&self.certificate_key, &self.cert_dir) {
                (Some(k), _) => Some(cluster::CertSource::KubeadmCerts(k)),
                (None, Some(m)) => Some(cluster::CertSource::Files(m.clone())),
                (None, None) => None,
            },
        )
        .await?;
        // Which CA key signed (e.g. "RSA-2048 PKCS#1").
        let ca_key = |m: &EtcdMaterial| {
            m.ca_key
                .as_deref()
                .map(|k| format!("; etcd CA key {k}"))
                .unwrap_or_default()
        };
        if let (Some(m), Some(_)) = (&etcd, &self.cert_dir) {
            output::say(&format!(
                "[preflight] {}: minted an in-memory etcd client certificate from the etcd CA \
                 (valid 1h{})",
                m.source,
                ca_key(m)
            ));
        } else if let Some(m) = &etcd {
            output::say(&if m.minted {
                format!(
                    "[preflight] kubeadm-certs decrypted: minted an in-memory etcd client \
                     certificate from the etcd CA (valid 1h{})",
                    ca_key(m)
                )
            } else {
                "[preflight] kubeadm-certs decrypted: using the external etcd client certificate"
                    .to_string()
            });
        }
        Ok(Discovered {
            api_ca,
            facts,
            etcd,
        })
    }
}

impl Discovered {
    /// Fills in what the flags left open: the API CA, etcd endpoints (external etcd, or the
    /// ClusterStatus addresses on :2379), the etcd identity, and etcd's timing when the flags are
    /// at their defaults.
    fn apply(
        self,
        input: &mut PreflightInput,
        args: &PreflightArgs,
        want_etcd: bool,
    ) -> Result<(), String> {
        input.api_ca = Some(self.api_ca);
        // A worker join does not touch etcd: its members are looked up only for a control-plane
        // join or when etcd inputs were given.
        if input.etcd_clients.is_empty() && want_etcd {
            let candidates: Vec<String> = if !self.facts.external_etcd.is_empty() {
                self.facts.external_etcd.clone()
            } else if !self.facts.etcd_pod_urls.is_empty() {
                self.facts.etcd_pod_urls.clone()
            } else {
                self.facts
                    .control_plane_addresses
                    .iter()
                    .map(|a| format!("https://{a}:2379"))
                    .collect()
            };
            for c in &candidates {
                let t = input::parse_endpoint(
                    "kubeadm-config etcd endpoint",
                    c,
                    TargetKind::EtcdClient,
                    2379,
                    true,
                )
                .map_err(|e| e.to_string())?;
                if !input.etcd_clients.iter().any(|o| o.endpoint == t.endpoint) {
                    input.etcd_clients.push(t);
                }
            }
            if !candidates.is_empty() {
                let source = if self.facts.etcd_pod_urls.is_empty() {
                    "kubeadm-config"
                } else {
                    "the etcd pods"
                };
                output::say(&format!(
                    "[preflight] etcd endpoints from {source}: {}",
                    candidates.join(",")
                ));
            } else if self.etcd.is_some() {
                output::say(
                    "[preflight] found no etcd endpoint (no external etcd, no ClusterStatus, no \
                     annotated etcd pod): give --etcd-endpoints for one or more members; the \
                     others come from MemberList",
                );
            }
        }
        if let Some(m) = self.etcd {
            let src = std::path::Path::new("kubeadm-certs");
            input.etcd_ca = Some(
                CaBundle::from_pem(TlsFlag::EtcdCacert, src, m.ca_pem)
                    .map_err(|e| e.to_string())?,
            );
            input.etcd_identity = Some(
                ClientIdentity::from_pem_for(
                    (TlsFlag::EtcdCert, src, m.cert_pem),
                    (TlsFlag::EtcdKey, src, m.key_pem),
                )
                .map_err(|e| e.to_string())?,
            );
        }
        let defaults = args.etcd_heartbeat_interval == Duration::from_millis(100)
            && args.etcd_election_timeout == Duration::from_secs(1);
        if defaults {
            if let (Some(hb), el) = (self.facts.heartbeat, self.facts.election) {
                let el = el.unwrap_or(input.election);
                input.heartbeat = hb;
                input.election = el;
                input.thresholds = crate::check::Thresholds::from_etcd_timing(hb, el);
                output::say(&format!(
                    "[preflight] etcd timing from kubeadm-config: heartbeat {} ms, election {} ms",
                    hb.as_millis(),
                    el.as_millis()
                ));
            } else if let Some(el) = self.facts.election {
                input.election = el;
                input.thresholds = crate::check::Thresholds::from_etcd_timing(input.heartbeat, el);
            }
        }
        Ok(())
    }
}

/// Runs the check once, or with `--wait` until fit or the wait ends; then traces the targets
/// that failed a latency or loss check, within what is left of the last run's `--timeout`.
pub async fn preflight(input: &PreflightInput) -> Outcome {
    let mut outcome = check_until_done(input).await;
    if let Outcome::Report(r) = &mut outcome {
        let left = input
            .timeout
            .saturating_sub(Duration::from_millis(r.duration_ms));
        traces::attach(r, left).await;
    }
    outcome
}

async fn check_until_done(input: &PreflightInput) -> Outcome {
    let Some(wait) = input.wait else {
        return check_once(input, input.timeout).await;
    };
    let deadline = Instant::now() + wait;
    let text = input.output == Output::Text;
    let waited = wait_until(
        &Backoff::PREFLIGHT_WAIT,
        deadline.into(),
        |_attempt| async move {
            let left = deadline.saturating_duration_since(Instant::now());
            match check_once(
                input,
                input.timeout.min(left.max(Duration::from_millis(500))),
            )
            .await
            {
                // A trust failure ends the wait: waiting cannot fix a wrong CA.
                o @ Outcome::Trust(_) => Ok(o),
                Outcome::Report(r) if r.exit_code() == exit::FIT => Ok(Outcome::Report(r)),
                Outcome::Report(r) => Err(r),
            }
        },
        |p| {
            let errors: Vec<String> = p
                .not_yet
                .checks
                .iter()
                .filter(|c| c.status == Status::Error)
                .map(|c| format!("{} {}", c.name, c.target))
                .collect();
            let next = match p.next_in {
                Some(d) => format!("checking again in {:.1}s", d.as_secs_f64()),
                None => "no time left for another check".to_string(),
            };
            if text || !errors.is_empty() {
                output::say(&format!(
                    "[preflight] check {} after {:.1}s: not fit ({}); {next} (--wait {})",
                    p.attempt,
                    p.elapsed.as_secs_f64(),
                    errors.join(", "),
                    humantime::format_duration(wait)
                ));
            }
        },
    )
    .await;
    match waited {
        Ok(o) => o,
        Err(timed_out) => match timed_out.last {
            Some(r) => {
                output::say(&format!(
                    "[preflight] still not fit after waiting {:.1}s ({} checks); giving up",
                    timed_out.elapsed.as_secs_f64(),
                    timed_out.checks
                ));
                Outcome::Report(r)
            }
            // The deadline cut the only check off: run one final short check for a verdict.
            None => check_once(input, Duration::from_secs(2)).await,
        },
    }
}

/// One check run, bounded by `budget`.
pub async fn check_once(input: &PreflightInput, budget: Duration) -> Outcome {
    let started = Instant::now();
    let obs = run::observe(input, SamplingPolicy::default(), budget).await;
    if let Some(t) = &obs.trust_failure {
        return Outcome::Trust(t.clone());
    }
    Outcome::Report(Box::new(evaluate(input, obs, started.elapsed())))
}

/// Judges what a run saw.
pub fn evaluate(input: &PreflightInput, obs: Observations, took: Duration) -> Report {
    let summaries: Vec<Summary> = obs
        .series
        .iter()
        .map(|s| Summary::from_samples(&s.target, s.probe, &s.samples))
        .collect();
    let checker = Checker::new(input.thresholds.clone(), input.ignore.clone());
    let mut checks = checker.evaluate_summaries(&summaries);

    // Where a host has an ICMP loss stream, that stream alone judges its packet loss: the
    // other probes of that host would judge the same path again, on far fewer samples.
    let host_of = |endpoint: &str| -> Option<IpAddr> {
        let host = endpoint.rsplit_once(':').map(|(h, _)| h)?;
        host.trim_matches(|c| c == '[' || c == ']').parse().ok()
    };
    let icmp_hosts: Vec<IpAddr> = obs
        .icmp_endpoints
        .iter()
        .filter_map(|e| host_of(e))
        .collect();
    checks.retain(|c| {
        c.name != CheckName::PacketLoss
            || obs.icmp_endpoints.contains(&c.target)
            || !host_of(&c.target).is_some_and(|h| icmp_hosts.contains(&h))
    });

    if !obs.members.is_empty() {
        checks.extend(checker.etcd_health(&obs.members));
    }
    for (target, skew) in &obs.skews {
        checks.push(checker.clock_skew(target, *skew));
    }
    if !input.etcd_clients.is_empty() {
        checks.push(checker.etcd_identity(input.etcd_identity.is_some()));
    }
    let mut notes = input.notes.clone();
    notes.extend(obs.notes.iter().cloned());
    if let Some(addr) = input.advertise_address {
        notes.extend(source_address_notes(addr, &summaries));
    }
    if let Some((target, db_size, result)) = &obs.snapshot {
        match result {
            Ok(p) => checks.push(checker.snapshot_transfer(target, *db_size, p.bytes_per_second())),
            Err(e) => notes.push(format!("{target}: the bandwidth probe failed: {e}")),
        }
    }
    for (target, e) in &obs.write_failures {
        checks.push(CheckResult {
            name: CheckName::EtcdHealth,
            target: target.endpoint.clone(),
            status: Status::Error,
            message: format!(
                "{target}: the write probe failed: {e}; a join writes to etcd (member add, \
                 learner promotion), so it would fail the same way"
            ),
            measured: None,
            threshold: None,
        });
    }
    if checks.is_empty() {
        checks.push(CheckResult {
            name: CheckName::EtcdHealth,
            target: CLUSTER_TARGET.to_string(),
            status: Status::Error,
            message: "nothing could be measured before --timeout ended; give the run more time"
                .to_string(),
            measured: None,
            threshold: None,
        });
    }
    let checks = checker.finish(checks);
    let mut report = Report::new(&summaries, checks, notes, took);
    report.ignored_all = input.ignore.is_all();
    report.worker_join = !input.control_plane
        && input.etcd_clients.is_empty()
        && input.etcd_peers.is_empty()
        && input.etcd_identity.is_none();
    report
}

/// Where the kernel would send this node's etcd traffic from. etcd peers check a peer
/// certificate's IP SANs against the address a connection comes from, and kubeadm puts the
/// advertise address into the etcd peer certificate: a route that leaves from another address
/// fails the member's TLS. A UDP `connect` picks the source without sending a packet.
fn source_address_notes(advertise: IpAddr, summaries: &[Summary]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for s in summaries {
        if !matches!(s.target.kind, TargetKind::EtcdPeer | TargetKind::EtcdClient) {
            continue;
        }
        let Ok(ip) = s.target.host.parse::<IpAddr>() else {
            continue;
        };
        if !seen.insert(ip) {
            continue;
        }
        let unspecified: IpAddr = if ip.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        };
        let Ok(sock) = std::net::UdpSocket::bind((unspecified, 0)) else {
            continue;
        };
        let source = sock
            .connect((ip, s.target.port))
            .and_then(|()| sock.local_addr())
            .map(|a| a.ip());
        if let Ok(src) = source {
            if src != advertise {
                out.push(format!(
                    "the route to etcd member {ip} leaves from {src}, not from the advertise \
                     address {advertise}: the new member's peer certificate carries \
                     {advertise}, and its peers check the address a connection comes from"
                ));
            }
        }
    }
    if out.is_empty() && !seen.is_empty() {
        out.push(format!(
            "this node's etcd traffic leaves from the advertise address {advertise} (the new \
             member would advertise https://{advertise}:2380)"
        ));
    }
    out
}

fn print_outcome(input: &PreflightInput, outcome: &Outcome) {
    match outcome {
        Outcome::Trust(msg) => output::say(&format!(
            "[preflight] trust failure: {msg}\n[preflight] This is not retried: check that the CA \
             file belongs to this cluster, or that nothing intercepts the connection."
        )),
        Outcome::Report(r) => {
            let mut buf = Vec::new();
            let res = match input.output {
                Output::Text => render_text(r, &mut buf),
                Output::Json => render_json(r, &mut buf),
            };
            if res.is_ok() {
                output::stdout(&String::from_utf8_lossy(&buf));
            }
        }
    }
}
