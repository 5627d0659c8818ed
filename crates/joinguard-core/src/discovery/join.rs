//! The join's inputs, shared by `preflight` and `monitor`: the kubeadm join line (flags or
//! `--config` under kubeadm's mixing rule, `--token`, `--control-plane`, `--discovery-file`,
//! this node's advertise address), the validated targets and TLS material ([`super::input`]),
//! and token discovery (cluster-info, kubeadm-config, kubeadm-certs) filling in what the flags
//! left open. Moved here from `preflight` so that the monitor needs no command to read its
//! `cluster:` section. Progress lines go to the caller's [`Notes`]; nothing here probes or
//! judges.

use std::net::IpAddr;
use std::time::Duration;

use super::cluster::{self, ClusterFacts, EtcdMaterial};
use super::{BootstrapToken, CaTrust, DiscoveryError};
use crate::failure::{Stopped, TrustFailure, TrustFailureKind};
use crate::input::{Input, Named, Spelling};
use crate::joinconfig::JoinConfig;
use crate::kube::ApiClient;
use crate::kubeadm;
use crate::notes::Notes;
use crate::probe::identity::{CaBundle, ClientIdentity, ALPN_HTTP1};
use crate::probe::tls::TlsClient;
use crate::retry::{Recorder, RetryPolicy};
use crate::spec::PreflightSpec;
use crate::target::TargetKind;

use super::input::{self, InputError, PreflightInput};

impl PreflightInput {
    /// `joinguard preflight`'s validated input, from its spec: the kubeadm join line first (flags,
    /// or `--config` under kubeadm's mixing rule), then token discovery (cluster-info,
    /// kubeadm-config, kubeadm-certs) when a token is given. `joinguard monitor` and `joinguard etcd`
    /// use it too, so every command accepts the same inputs. Errors say why it stopped (invalid
    /// input, trust failure, discovery failed) with the message; progress lines go to `notes`.
    pub async fn from_spec(
        mut args: PreflightSpec,
        recorder: &Recorder,
        notes: &dyn Notes,
    ) -> Result<PreflightInput, Stopped> {
        let started = std::time::Instant::now();
        let invalid = Stopped::invalid::<InputError>;
        let line = kubeadm_join_line(&mut args, notes).map_err(invalid)?;
        let mut discovery = DiscoveryInput::from_args(&args).map_err(invalid)?;
        // A control-plane verdict needs the etcd paths: with no etcd input, the identity comes from
        // the shared certificates kubeadm expects on this node; without token discovery there is
        // no way to find the members at all.
        if line.control_plane && !line.explicit_etcd {
            match &mut discovery {
                Some(d) => d.shared_certificates = true,
                None => return Err(Stopped::input(no_etcd_input(args.spelling))),
            }
        }
        let mut input = PreflightInput::validate(&args).map_err(invalid)?;
        // Discovery goes where the join's would: through the proxy the environment names for
        // the endpoint. When it fails there, the message says so and gives the NO_PROXY fix.
        let mut proxy_hint = None;
        if let Some(d) = &mut discovery {
            if let Ok(t) = crate::target::Target::parse(TargetKind::ApiServer, &d.endpoint, true) {
                d.via = input.proxy.tunnel_for(&t).cloned();
                proxy_hint = d.via.as_ref().map(|p| {
                    format!(
                        "; kubeadm join's discovery reaches {} through the same proxy ({}://{}, \
                         from {}) and fails the same way; to send it direct: {}",
                        d.endpoint,
                        p.scheme,
                        p.authority,
                        p.variable,
                        input.proxy.no_proxy_with(&t.host)
                    )
                });
            }
        }
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
        for k in input.ignore.unknown_names() {
            input.notes.push(format!(
                "{k} is not a check joinguard runs, nor one of kubeadm's it knows; taken and \
                 passed over, as kubeadm takes any name (joinguard's checks: {})",
                crate::check::CheckName::ALL.map(|c| c.as_str()).join(", ")
            ));
        }
        let want_etcd = line.control_plane || line.explicit_etcd;
        if let Some(d) = discovery {
            // With --wait, discovery waits too (an API endpoint whose load balancer is still
            // reloading), within kubeadm's discovery timeout when the file sets one.
            let base = match input.wait {
                Some(w) => input.timeout.max(w),
                None => input.timeout,
            };
            let budget = match line.discovery_timeout {
                Some(t) => base.min(t),
                None => base,
            };
            match d.run(budget, input.wait.is_some(), recorder, notes).await {
                Ok(found) => found
                    .apply(&mut input, &args, want_etcd, notes)
                    .map_err(invalid)?,
                Err(e) => {
                    let message = e.to_string();
                    return Err(match e {
                        DiscoveryError::Trust(t) => {
                            Stopped::Trust(t.context("trust failure during token discovery: "))
                        }
                        DiscoveryError::Input(_) => Stopped::input(message),
                        DiscoveryError::Failed(_) => {
                            Stopped::failure(format!("{message}{}", proxy_hint.unwrap_or_default()))
                        }
                    });
                }
            }
        }
        // The deadline bounds the whole run, discovery included: the checks get what is left
        // of it (at least half a second, so that one check still runs). With a wait, the wait
        // bounds the run the same way.
        let left = |d: Duration| {
            d.saturating_sub(started.elapsed())
                .max(Duration::from_millis(500))
        };
        match input.wait {
            None => input.timeout = left(input.timeout),
            Some(w) => input.wait = Some(left(w)),
        }
        Ok(input)
    }
}

/// A control-plane join given neither token discovery nor any etcd input.
fn no_etcd_input(spelling: Spelling) -> String {
    let f = |i| spelling.spell(i);
    format!(
        "a control-plane join needs its etcd paths checked, and nothing given lets joinguard \
         find or reach the etcd members. Give one of: {token} with {pin} and {key} (as kubeadm \
         join takes them; the etcd members and CA come from the cluster), {token} with {dir} \
         DIR or the shared certificates in /etc/kubernetes/pki, {config} with the join's \
         JoinConfiguration, or {explicit}. For a worker join, drop {cp}",
        token = f(Input::Token),
        pin = f(Input::DiscoveryTokenCaCertHash),
        key = f(Input::CertificateKey),
        dir = f(Input::CertDir),
        config = f(Input::Config),
        explicit = spelling.explicit_etcd(),
        cp = f(Input::ControlPlane),
    )
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
fn kubeadm_flags_given(a: &PreflightSpec) -> Vec<String> {
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
fn kubeadm_join_line(a: &mut PreflightSpec, sink: &dyn Notes) -> Result<JoinLine, InputError> {
    let given = kubeadm_flags_given(a);
    if let Some(e) = kubeadm::flags::mixed_config_error(&given) {
        return Err(InputError::Mixed(e));
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
    let name = |i: Input| a.spelling.name(i);
    let config = name(Input::Config);
    let mut advertise = a.apiserver_advertise_address.clone();
    let mut advertise_source = name(Input::ApiserverAdvertiseAddress);
    let mut discovery_file = a.discovery_file.clone();
    let mut file_source = name(Input::DiscoveryFile);
    if let Some(tls) = &a.tls_bootstrap_token {
        BootstrapToken::parse(tls.expose()).map_err(|source| InputError::Token {
            input: name(Input::TlsBootstrapToken),
            source,
        })?;
    }
    if let Some(path) = a.config.clone() {
        if a.api_server_endpoint.take().is_some() {
            say(
                format!(
                    "WARNING: the API endpoint argument is ignored beside {config}, as kubeadm \
                     join ignores it; discovery.bootstrapToken.apiServerEndpoint is used"
                ),
                &mut notes,
            );
        }
        let c = JoinConfig::load(&path).map_err(|source| InputError::Config {
            input: config.clone(),
            source,
        })?;
        // A field of the file, named as the user finds it.
        let field = |input: Input, field: &str| {
            Named::new(input, format!("{config} {}: {field}", path.display()))
        };
        for w in &c.warnings {
            sink.note(&format!(
                "[preflight] WARNING: {config} {}: {w}",
                path.display()
            ));
        }
        if let Some(tls) = &c.tls_bootstrap_token {
            BootstrapToken::parse(tls.expose()).map_err(|source| InputError::Token {
                input: field(Input::TlsBootstrapToken, "discovery.tlsBootstrapToken"),
                source,
            })?;
        }
        a.api_server_endpoint = c.api_server_endpoint.clone();
        a.token = c.token.clone();
        a.discovery_token_ca_cert_hash = c.ca_cert_hashes.clone();
        a.discovery_token_unsafe_skip_ca_verification = c.unsafe_skip_ca_verification;
        line.control_plane = c.local_api_endpoint.is_some();
        if let Some((addr, port)) = c.local_api_endpoint {
            advertise = addr.map(|a| a.to_string());
            advertise_source = field(
                Input::ApiserverAdvertiseAddress,
                "controlPlane.localAPIEndpoint.advertiseAddress",
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
        // The flag's list and the file's are merged into one set, as kubeadm merges them; `all`
        // is refused in the file (kubeadm's ValidateIgnorePreflightErrors).
        if c.ignore_preflight_errors
            .iter()
            .flat_map(|e| e.split(','))
            .any(|e| e.trim().eq_ignore_ascii_case("all"))
        {
            return Err(InputError::Other(format!(
                "{}: {}",
                path.display(),
                crate::check::CheckNameError::AllInConfig
            )));
        }
        a.ignore_preflight_errors
            .extend(c.ignore_preflight_errors.iter().cloned());
        discovery_file = c.discovery_file.clone();
        file_source = field(Input::DiscoveryFile, "discovery.file.kubeConfigPath");
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
            return Err(InputError::Other(format!(
                "{file_source} {file:?}: joinguard does not fetch discovery files over the \
                 network (kubeadm fetches https:// URLs with the host's CA bundle); download the \
                 kubeconfig and pass its path"
            )));
        }
        if a.api_server_endpoint.is_some() {
            return Err(InputError::Other(format!(
                "{file_source} and token discovery (the API endpoint argument) are mutually \
                 exclusive, as in kubeadm (discovery.bootstrapToken and discovery.file)"
            )));
        }
        // With file discovery a token only serves the TLS bootstrap.
        a.token = None;
        if a.apiserver_cacert.is_none() {
            let path = std::path::PathBuf::from(&file);
            let k = crate::kube::Kubeconfig::load(&path, None).map_err(|source| {
                InputError::DiscoveryFile {
                    input: file_source.clone(),
                    source,
                }
            })?;
            a.api_server_endpoint = Some(k.server.clone());
            line.file_ca = Some(CaBundle::from_pem(file_source.clone(), &path, k.ca_pem)?);
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
        let cp = name(Input::ControlPlane);
        say(
            format!(
                "worker join (no {cp}, no controlPlane in {config}): only the API path is \
                 checked; give {cp} for the etcd paths of a control-plane join"
            ),
            &mut notes,
        );
    }
    line.notes = notes;
    Ok(line)
}

/// `addr` parsed, and one of this host's addresses: binding a UDP socket to it succeeds only
/// then (no packet is sent). kubeadm's etcd member would advertise https://ADDR:2380.
fn this_hosts_address(source: &Named, addr: &str) -> Result<IpAddr, InputError> {
    let bad = |reason: String| InputError::Value {
        input: source.clone(),
        value: addr.to_string(),
        reason,
    };
    let ip: IpAddr = addr.parse().map_err(|_| bad("not an IP address".into()))?;
    if ip.is_unspecified() || ip.is_loopback() {
        return Err(bad(
            "this node's etcd member and API server advertise this address to the others; give \
             the address they reach this node on"
                .into(),
        ));
    }
    std::net::UdpSocket::bind((ip, 0)).map_err(|e| {
        bad(format!(
            "this host has no such address ({e}); the new etcd member would advertise \
             https://{addr}:2380 and its peers could not reach it"
        ))
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
    /// A control-plane join with no etcd input: read the etcd identity from the cluster's
    /// `certificatesDir`, where kubeadm expects the shared certificates.
    shared_certificates: bool,
    /// How the user spelled the inputs, for the notes.
    spelling: Spelling,
    /// This node's name, for the CN of a minted admin certificate (the audit log names it).
    node_name: Option<String>,
    /// The proxy the environment sends the join's calls to the endpoint through.
    via: Option<crate::proxy::ProxyUrl>,
}

/// What discovery adds to the flags.
struct Found {
    api_ca: CaBundle,
    facts: ClusterFacts,
    etcd: Option<EtcdMaterial>,
}

impl DiscoveryInput {
    fn from_args(a: &PreflightSpec) -> Result<Option<DiscoveryInput>, InputError> {
        let name = |i: Input| a.spelling.name(i);
        let (token_name, config) = (name(Input::Token), name(Input::Config));
        let Some(token) = &a.token else {
            let orphan = if a.certificate_key.is_some() {
                Some(Input::CertificateKey)
            } else if a.cert_dir.is_some() {
                Some(Input::CertDir)
            } else if !a.discovery_token_ca_cert_hash.is_empty() {
                Some(Input::DiscoveryTokenCaCertHash)
            } else if a.discovery_token_unsafe_skip_ca_verification {
                Some(Input::DiscoveryTokenUnsafeSkipCaVerification)
            } else {
                None
            };
            return match orphan.map(name) {
                Some(f) => Err(InputError::Other(format!(
                    "{f} is part of token discovery and needs {token_name} (or \
                     discovery.bootstrapToken.token in {config})"
                ))),
                None => Ok(None),
            };
        };
        let token = BootstrapToken::parse(token.expose()).map_err(|source| InputError::Token {
            input: token_name.clone(),
            source,
        })?;
        // Pins that are given are checked, whatever unsafeSkipCAVerification says: kubeadm's
        // token discovery (`discovery/token/token.go`) skips the pin check only when the pin set
        // is empty.
        let trust = if !a.discovery_token_ca_cert_hash.is_empty() {
            CaTrust::Pins(
                a.discovery_token_ca_cert_hash
                    .iter()
                    .map(|p| super::parse_pin(p))
                    .collect::<Result<_, _>>()
                    .map_err(|source| InputError::Pin {
                        input: name(Input::DiscoveryTokenCaCertHash),
                        source,
                    })?,
            )
        } else if a.discovery_token_unsafe_skip_ca_verification {
            CaTrust::UnsafeSkip
        } else {
            return Err(InputError::Other(format!(
                "{token_name} needs {} sha256:<hex> (or, knowingly, {}), as kubeadm join does",
                name(Input::DiscoveryTokenCaCertHash),
                name(Input::DiscoveryTokenUnsafeSkipCaVerification),
            )));
        };
        let Some(endpoint) = a.api_server_endpoint.as_deref() else {
            return Err(InputError::Other(format!(
                "{token_name} needs the API endpoint ({}: host:port as kubeadm join takes it, or \
                 discovery.bootstrapToken.apiServerEndpoint in {config})",
                name(Input::ApiServerEndpoint)
            )));
        };
        let endpoint = endpoint
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .to_string();
        let certificate_key = a
            .certificate_key
            .as_ref()
            .map(|k| cluster::parse_certificate_key(k.expose()))
            .transpose()
            .map_err(|source| InputError::CertificateKey {
                input: name(Input::CertificateKey),
                source,
            })?;
        let cert_dir = a
            .cert_dir
            .as_deref()
            .map(cluster::etcd_material_from_dir)
            .transpose()
            .map_err(|source| InputError::CertDir {
                input: name(Input::CertDir),
                source,
            })?;
        Ok(Some(DiscoveryInput {
            endpoint,
            token,
            trust,
            certificate_key,
            cert_dir,
            shared_certificates: false,
            spelling: a.spelling,
            node_name: a.node_name.clone(),
            via: None,
        }))
    }

    /// Runs discovery on the `connect` policy within `timeout`, then reads what the token may
    /// read about the cluster (kubeadm-config; kubeadm-certs with a certificate key).
    async fn run(
        &self,
        timeout: Duration,
        patient: bool,
        recorder: &Recorder,
        notes: &dyn Notes,
    ) -> Result<Found, DiscoveryError> {
        let deadline = tokio::time::Instant::now() + timeout;
        notes.note(&format!(
            "[preflight] Discovering the cluster CA from {} (token id {})",
            self.endpoint,
            self.token.id()
        ));
        // The connect policy gives up after 15 s (fail fast); waiting, discovery retries for
        // its whole budget.
        let policy = if patient {
            super::policy(Some(deadline)).with_budget(timeout)
        } else {
            super::policy(Some(deadline))
        };
        let via = self.via.as_ref();
        if let Some(p) = via {
            notes.note(&format!(
                "[preflight] The join reaches {} through the proxy {}://{} (from {})",
                self.endpoint, p.scheme, p.authority, p.variable
            ));
        }
        let d = super::discover(
            &self.endpoint,
            &self.token,
            &self.trust,
            via,
            &policy,
            recorder,
        )
        .await?;
        if d.ca_unverified {
            notes.note(&format!(
                "[preflight] WARNING: the cluster CA was not verified against a pin ({}): an \
                 attacker in the path could have supplied it",
                self.spelling
                    .spell(Input::DiscoveryTokenUnsafeSkipCaVerification)
            ));
        } else {
            notes.note("[preflight] The cluster CA matches the pin and signed cluster-info");
        }
        let unusable = |e: String| {
            DiscoveryError::Trust(TrustFailure::new(
                TrustFailureKind::Content,
                format!("the discovered CA is not usable: {e}"),
            ))
        };
        let api_ca = CaBundle::from_pem(
            Named::new(Input::ApiserverCacert, "the cluster CA from"),
            std::path::Path::new("cluster-info"),
            d.ca_pem.clone(),
        )
        .map_err(|e| unusable(e.to_string()))?;
        let tls = TlsClient::new(&api_ca, None, &[ALPN_HTTP1])
            .map_err(|e| unusable(e.to_string()))?
            .through(via);
        let client = ApiClient::with_tls(
            &format!("https://{}", self.endpoint),
            tls,
            Some(self.token.expose().as_str()),
        )
        .map_err(|e| DiscoveryError::Failed(e.to_string()))?;
        let read = RetryPolicy::read().with_deadline(deadline);
        let server = format!("https://{}", self.endpoint);
        let admin = |cert: &[u8], key: zeroize::Zeroizing<Vec<u8>>| {
            let src = std::path::Path::new("minted admin certificate");
            let id = ClientIdentity::from_pem(
                (Named::new(Input::Kubeconfig, "the"), src, cert.to_vec()),
                (Named::new(Input::Kubeconfig, "the key of the"), src, key),
            )?;
            let tls = TlsClient::new(&api_ca, Some(&id), &[ALPN_HTTP1])?.through(via);
            Ok(ApiClient::with_tls(&server, tls, None)?)
        };
        let (facts, etcd) = cluster::read_cluster(
            &client,
            admin,
            &read,
            recorder,
            match (&self.certificate_key, &self.cert_dir) {
                (Some(k), _) => Some(cluster::CertSource::KubeadmCerts(k)),
                (None, Some(m)) => Some(cluster::CertSource::Files(m.clone())),
                (None, None) if self.shared_certificates => {
                    Some(cluster::CertSource::CertificatesDir)
                }
                (None, None) => None,
            },
            self.spelling,
            self.node_name.as_deref(),
        )
        .await?;
        // Which CA key signed (e.g. "RSA-2048 PKCS#1").
        let ca_key = |m: &EtcdMaterial| {
            m.ca_key
                .as_deref()
                .map(|k| format!("; etcd CA key {k}"))
                .unwrap_or_default()
        };
        if let (Some(m), true) = (&etcd, self.cert_dir.is_some() || self.shared_certificates) {
            notes.note(&format!(
                "[preflight] {}: minted an in-memory etcd client certificate from the etcd CA \
                 (valid {}{})",
                m.source,
                crate::discovery::cluster::minted_lifetime_text(),
                ca_key(m)
            ));
        } else if let Some(m) = &etcd {
            notes.note(&if m.minted {
                format!(
                    "[preflight] kubeadm-certs decrypted: minted an in-memory etcd client \
                     certificate from the etcd CA (valid {}{})",
                    crate::discovery::cluster::minted_lifetime_text(),
                    ca_key(m)
                )
            } else {
                "[preflight] kubeadm-certs decrypted: using the external etcd client certificate"
                    .to_string()
            });
        }
        Ok(Found {
            api_ca,
            facts,
            etcd,
        })
    }
}

impl Found {
    /// Fills in what the flags left open: the API CA, etcd endpoints (external etcd, or the
    /// ClusterStatus addresses on :2379), the etcd identity, and etcd's timing when the flags are
    /// at their defaults.
    fn apply(
        self,
        input: &mut PreflightInput,
        args: &PreflightSpec,
        want_etcd: bool,
        notes: &dyn Notes,
    ) -> Result<(), InputError> {
        input.api_ca = Some(self.api_ca);
        // kubeadm checks the subnets' proxying on a control-plane join only (RunInitNodeChecks).
        if input.control_plane {
            input.cluster_cidrs = self.facts.cluster_cidrs.clone();
        }
        input.cluster_version = self.facts.kubernetes_version.clone();
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
                    Named::new(Input::EtcdEndpoints, "kubeadm-config etcd endpoint"),
                    c,
                    TargetKind::EtcdClient,
                    true,
                )?;
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
                notes.note(&format!(
                    "[preflight] etcd endpoints from {source}: {}",
                    candidates.join(",")
                ));
            } else if self.etcd.is_some() {
                notes.note(&format!(
                    "[preflight] found no etcd endpoint (no external etcd, no ClusterStatus, no \
                     annotated etcd pod): give {} for one or more members; the others come from \
                     MemberList",
                    args.spelling.spell(Input::EtcdEndpoints)
                ));
            }
        }
        if let Some(m) = self.etcd {
            let src = std::path::Path::new("kubeadm-certs");
            let found = |input, what| Named::new(input, what);
            input.etcd_ca = Some(CaBundle::from_pem(
                found(Input::EtcdCacert, "the etcd CA from"),
                src,
                m.ca_pem,
            )?);
            input.etcd_identity = Some(ClientIdentity::from_pem(
                (
                    found(Input::EtcdCert, "the etcd client certificate from"),
                    src,
                    m.cert_pem,
                ),
                (
                    found(Input::EtcdKey, "the etcd client key from"),
                    src,
                    m.key_pem,
                ),
            )?);
        }
        // etcd's timing: a value given explicitly wins; otherwise kubeadm-config's, which passes
        // the same range checks a flag does; otherwise etcd's default (already in `input`).
        let from_config = |input: Input, key: &'static str| {
            Named::new(
                input,
                format!("kubeadm-config's etcd.local.extraArgs {key}"),
            )
        };
        let pick = |given: Option<Duration>,
                    config: Option<Duration>,
                    flag: Input,
                    key: &'static str,
                    current: Duration| {
            match (given, config) {
                (Some(g), Some(c)) if g != c => {
                    notes.note(&format!(
                        "[preflight] etcd {key} {} as given ({}); kubeadm-config says {}: the \
                         given value is used",
                        humantime::format_duration(g),
                        args.spelling.spell(flag),
                        humantime::format_duration(c)
                    ));
                    (g, None)
                }
                (Some(g), _) => (g, None),
                (None, Some(c)) => (c, Some(from_config(flag, key))),
                (None, None) => (current, None),
            }
        };
        let (hb, hb_source) = pick(
            args.etcd_heartbeat_interval,
            self.facts.heartbeat,
            Input::EtcdHeartbeatInterval,
            "heartbeat-interval",
            input.heartbeat,
        );
        let (el, el_source) = pick(
            args.etcd_election_timeout,
            self.facts.election,
            Input::EtcdElectionTimeout,
            "election-timeout",
            input.election,
        );
        if hb_source.is_some() || el_source.is_some() {
            let named = |source: Option<Named>, flag: Input| {
                source.unwrap_or_else(|| args.spelling.name(flag))
            };
            input::etcd_timing(
                (named(hb_source, Input::EtcdHeartbeatInterval), hb),
                (named(el_source, Input::EtcdElectionTimeout), el),
            )?;
            notes.note(&format!(
                "[preflight] etcd timing: heartbeat {} ms, election {} ms (from kubeadm-config \
                 where not given)",
                hb.as_millis(),
                el.as_millis()
            ));
        }
        input.heartbeat = hb;
        input.election = el;
        input.thresholds = crate::check::Thresholds::from_etcd_timing(hb, el);
        Ok(())
    }
}
