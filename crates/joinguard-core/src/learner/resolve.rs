//! What `etcd promote` and `etcd cleanup` act on, from their inputs as given
//! ([`EtcdMemberSpec`]): this node's identity (name, address), the run's budget, and the etcd
//! members with the TLS material to reach them ([`EtcdAccess`]).
//!
//! The certificate directory follows kubeadm: its own etcd client during a join uses
//! `etcd/ca.crt` and `apiserver-etcd-client.{crt,key}` under the certificate directory
//! (`etcdutil.NewFromCluster` in `cmd/kubeadm/app/util/etcd/etcd.go`; file names from
//! `cmd/kubeadm/app/constants/constants.go`). A node before its join has no such pair: then a
//! client certificate is minted in memory from `etcd/ca.crt` and `etcd/ca.key`, as preflight
//! mints it. A join configuration gives this node's name and address and the `etcdAPICall`
//! budget; without any of them, the name is the hostname, kubeadm join's default.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{EtcdAccess, NodeRef};
use crate::discovery::cluster::{etcd_material_from_dir, minted_lifetime_text};
use crate::discovery::input::PreflightInput;
use crate::failure::Stopped;
use crate::input::{Input, Named, Spelling};
use crate::joinconfig::JoinConfig;
use crate::notes::Notes;
use crate::probe::identity::{CaBundle, ClientIdentity};
use crate::retry::Recorder;
use crate::secret::Secret;
use crate::spec::PreflightSpec;

/// kubeadm's file names under the certificate directory.
const CA: &str = "etcd/ca.crt";
const CLIENT_CERT: &str = "apiserver-etcd-client.crt";
const CLIENT_KEY: &str = "apiserver-etcd-client.key";

/// kubeadm's `timeouts.etcdAPICall` default (v1beta4; `constants.EtcdAPICallTimeout`).
pub const ETCD_API_CALL: Duration = Duration::from_secs(120);

/// `etcd promote`'s and `etcd cleanup`'s shared inputs as given, before [`resolve`] checks them.
#[derive(Debug)]
pub struct EtcdMemberSpec {
    pub api_server_endpoint: Option<String>,
    pub token: Option<Secret>,
    pub discovery_token_ca_cert_hash: Vec<String>,
    pub discovery_token_unsafe_skip_ca_verification: bool,
    pub certificate_key: Option<Secret>,
    pub etcd_endpoints: Vec<String>,
    pub etcd_cacert: Option<PathBuf>,
    pub etcd_cert: Option<PathBuf>,
    pub etcd_key: Option<PathBuf>,
    pub cert_dir: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub node_name: Option<String>,
    pub apiserver_advertise_address: Option<std::net::IpAddr>,
    pub timeout: Option<Duration>,
    /// How the user spelled these inputs.
    pub spelling: Spelling,
}

/// What the command acts on.
#[derive(Debug)]
pub struct Resolved {
    pub(crate) access: EtcdAccess,
    pub(crate) node: NodeRef,
    pub(crate) timeout: Duration,
}

impl Resolved {
    /// `etcd promote`'s work on what was resolved; `learner_metrics_url`: this node's etcd metrics
    /// listener, read for progress.
    pub fn into_promote(self, learner_metrics_url: Option<String>) -> super::promote::PromoteSpec {
        super::promote::PromoteSpec {
            access: self.access,
            node: self.node,
            timeout: self.timeout,
            per_attempt: None,
            learner_metrics_url,
        }
    }

    /// `etcd cleanup`'s work on what was resolved: this node's member, or `member_id`'s.
    pub fn into_cleanup(
        self,
        member_id: Option<u64>,
        dry_run: bool,
    ) -> super::cleanup::CleanupSpec {
        super::cleanup::CleanupSpec {
            access: self.access,
            node: self.node,
            member_id,
            dry_run,
            timeout: self.timeout,
            per_attempt: None,
        }
    }
}

/// Checks the inputs and finds what they name. `need_node`: promote always needs this node's
/// name or address; cleanup not when a member ID names the member. `tag` heads the notes
/// (`[etcd promote]`).
pub async fn resolve(
    spec: &EtcdMemberSpec,
    need_node: bool,
    tag: &str,
    notes: &dyn Notes,
) -> Result<Resolved, Stopped> {
    let spell = |i| spec.spelling.spell(i);
    let name = |i| spec.spelling.name(i);
    // The files first: a directory that is not there is the first thing to fix.
    if let Some(dir) = spec.cert_dir.as_deref().filter(|d| !d.is_dir()) {
        return Err(Stopped::input(format!(
            "{} {}: not a directory; expected kubeadm's certificate directory \
             (/etc/kubernetes/pki, with {CA})",
            name(Input::CertDir),
            dir.display()
        )));
    }
    let join = spec
        .config
        .as_deref()
        .map(JoinConfig::load)
        .transpose()
        .map_err(|e| Stopped::input(format!("{} {e}", name(Input::Config))))?;
    if let Some(j) = &join {
        for w in &j.warnings {
            notes.note(&format!("{tag} WARNING: {}: {w}", spell(Input::Config)));
        }
    }
    let mut node_name = spec
        .node_name
        .clone()
        .or_else(|| join.as_ref().and_then(|j| j.node_name.clone()));
    if node_name.is_none() && spec.apiserver_advertise_address.is_none() && spec.token.is_some() {
        // kubeadm join names the node (and its etcd member) after the hostname by default.
        node_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        if let Some(n) = &node_name {
            notes.note(&format!(
                "{tag} this node's name: {n} (the hostname, kubeadm join's default; {} \
                 overrides it)",
                spell(Input::NodeName)
            ));
        }
    }
    let address = spec.apiserver_advertise_address.or_else(|| {
        join.as_ref()
            .and_then(|j| j.local_api_endpoint)
            .and_then(|(addr, _)| addr)
    });
    let timeout = spec
        .timeout
        .or_else(|| join.as_ref().and_then(|j| j.etcd_api_call))
        .unwrap_or(ETCD_API_CALL);
    if need_node && node_name.is_none() && address.is_none() {
        return Err(Stopped::input(format!(
            "this node's identity is needed: {} NAME (its etcd member's name) and/or {} IP (its \
             peer URL is https://IP:2380), or {} with the join's JoinConfiguration",
            spell(Input::NodeName),
            spell(Input::ApiserverAdvertiseAddress),
            spell(Input::Config),
        )));
    }
    let access = if spec.etcd_endpoints.is_empty() {
        discovered(spec, timeout, notes).await?
    } else {
        let (ca, identity) = match &spec.cert_dir {
            Some(dir) => from_cert_dir(spec.spelling, tag, dir, notes)?,
            None => {
                let ca = spec.etcd_cacert.as_deref().ok_or_else(|| {
                    Stopped::input(format!(
                        "the etcd CA is needed: {} FILE, or {} DIR (kubeadm's \
                         /etc/kubernetes/pki, which holds {CA})",
                        spell(Input::EtcdCacert),
                        spell(Input::CertDir)
                    ))
                })?;
                let ca = CaBundle::load(name(Input::EtcdCacert), ca).map_err(Stopped::invalid)?;
                let identity = match (&spec.etcd_cert, &spec.etcd_key) {
                    (Some(c), Some(k)) => Some(load_identity(spec.spelling, c, k)?),
                    _ => None,
                };
                (ca, identity)
            }
        };
        EtcdAccess {
            endpoints: spec.etcd_endpoints.clone(),
            ca,
            identity,
        }
    };
    Ok(Resolved {
        access,
        node: NodeRef::new(node_name.as_deref(), address),
        timeout,
    })
}

/// Without etcd endpoints: the members and the etcd client identity found as preflight finds
/// them from the join's inputs (`PreflightInput::from_spec`, one input model): token discovery
/// from the join configuration or the join line, then kubeadm-config for the members and
/// kubeadm-certs (the certificate key), the certificate directory, or the shared certificates
/// kubeadm expects on this node for the identity.
async fn discovered(
    spec: &EtcdMemberSpec,
    timeout: Duration,
    notes: &dyn Notes,
) -> Result<EtcdAccess, Stopped> {
    let spell = |i| spec.spelling.spell(i);
    if spec.config.is_none() && spec.token.is_none() {
        return Err(Stopped::input(format!(
            "the etcd members are needed: {} URL[,URL...], {} with the join's \
             JoinConfiguration, or the join line (API_SERVER_ENDPOINT {} ... {} ...); token \
             discovery then finds the members and the etcd CA, as preflight does",
            spell(Input::EtcdEndpoints),
            spell(Input::Config),
            spell(Input::Token),
            spell(Input::DiscoveryTokenCaCertHash),
        )));
    }
    if spec.etcd_cacert.is_some() || spec.etcd_cert.is_some() {
        return Err(Stopped::input(format!(
            "{}, {} and {} go with {}; with {} or the join line the etcd CA comes from the \
             cluster",
            spell(Input::EtcdCacert),
            spell(Input::EtcdCert),
            spell(Input::EtcdKey),
            spell(Input::EtcdEndpoints),
            spell(Input::Config),
        )));
    }
    // The kubeadm flags given, for kubeadm's rule on a join configuration beside them (kubeadm's
    // own names: the rule and its message are kubeadm's).
    let given = [
        (spec.config.is_some(), "config"),
        (spec.cert_dir.is_some(), "cert-dir"),
        (spec.token.is_some(), "token"),
        (
            !spec.discovery_token_ca_cert_hash.is_empty(),
            "discovery-token-ca-cert-hash",
        ),
        (
            spec.discovery_token_unsafe_skip_ca_verification,
            "discovery-token-unsafe-skip-ca-verification",
        ),
        (spec.certificate_key.is_some(), "certificate-key"),
    ]
    .into_iter()
    .filter(|(set, _)| *set)
    .map(|(_, f)| f.to_string())
    .collect();
    let preflight = PreflightSpec {
        api_server_endpoint: spec.api_server_endpoint.clone(),
        config: spec.config.clone(),
        token: spec.token.clone(),
        discovery_token_ca_cert_hash: spec.discovery_token_ca_cert_hash.clone(),
        discovery_token_unsafe_skip_ca_verification: spec
            .discovery_token_unsafe_skip_ca_verification,
        certificate_key: spec.certificate_key.clone(),
        control_plane: true,
        cert_dir: spec.cert_dir.clone(),
        no_bandwidth: true,
        timeout,
        given,
        ..PreflightSpec::new(spec.spelling)
    };
    let input = PreflightInput::from_spec(preflight, &Recorder::new(), notes).await?;
    EtcdAccess::discovered(input).map_err(Stopped::failed)
}

/// kubeadm's certificate directory: the join's own etcd client identity
/// (`apiserver-etcd-client.{crt,key}`) when both files are there; otherwise a client certificate
/// minted in memory from the etcd CA (`etcd/ca.crt`, `etcd/ca.key`), as preflight mints it.
fn from_cert_dir(
    spelling: Spelling,
    tag: &str,
    dir: &Path,
    notes: &dyn Notes,
) -> Result<(CaBundle, Option<ClientIdentity>), Stopped> {
    let invalid = |e: &dyn std::fmt::Display| Stopped::input(e.to_string());
    let in_cert_dir = |what: &'static str| Named::new(Input::CertDir, what);
    let (cert, key) = (dir.join(CLIENT_CERT), dir.join(CLIENT_KEY));
    if cert.exists() || key.exists() {
        let ca = CaBundle::load(in_cert_dir("the etcd CA in"), &dir.join(CA))
            .map_err(|e| invalid(&e))?;
        return Ok((ca, Some(load_identity(spelling, &cert, &key)?)));
    }
    let m = etcd_material_from_dir(dir)
        .map_err(|e| invalid(&format!("{}: {e}", spelling.spell(Input::CertDir))))?;
    notes.note(&format!(
        "{tag} {}: no {CLIENT_CERT} (a node before its join); minted an in-memory etcd client \
         certificate from {} (valid {}{})",
        dir.display(),
        dir.join("etcd/ca.key").display(),
        minted_lifetime_text(),
        m.ca_key
            .as_deref()
            .map(|k| format!("; etcd CA key {k}"))
            .unwrap_or_default()
    ));
    let ca = CaBundle::from_pem(in_cert_dir("the etcd CA in"), &dir.join(CA), m.ca_pem)
        .map_err(|e| invalid(&e))?;
    let minted = Path::new("etcd client certificate");
    let identity = ClientIdentity::from_pem(
        (
            Named::new(Input::EtcdCert, "the minted"),
            minted,
            m.cert_pem,
        ),
        (
            Named::new(Input::EtcdKey, "the key of the minted"),
            minted,
            m.key_pem,
        ),
    )
    .map_err(|e| invalid(&e))?;
    Ok((ca, Some(identity)))
}

fn load_identity(spelling: Spelling, cert: &Path, key: &Path) -> Result<ClientIdentity, Stopped> {
    ClientIdentity::load(
        (spelling.name(Input::EtcdCert), cert),
        (spelling.name(Input::EtcdKey), key),
    )
    .map_err(Stopped::invalid)
}
