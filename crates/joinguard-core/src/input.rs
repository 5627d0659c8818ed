//! The inputs of joinguard's commands, named by meaning.
//!
//! The core never spells a flag. An error about an input names it through a [`Named`], which a
//! [`Spelling`] makes from an [`Input`]: the binary spells inputs as the flags the user typed
//! (`--etcd-cacert`), the monitor as the keys of its YAML file (`cluster.etcdCacert`). So a
//! monitor user is never told about a flag they did not give, and a flag renamed in the binary
//! changes one table there.

use std::borrow::Cow;
use std::fmt;

/// An input of a command, by what it means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// The API server endpoint of the join (kubeadm join's positional argument).
    ApiServerEndpoint,
    /// The cluster CA that signs the API server certificate.
    ApiserverCacert,
    /// This node's API server advertise address.
    ApiserverAdvertiseAddress,
    /// A kubeconfig: its CA, client certificate or key, or its server URL.
    Kubeconfig,
    /// kubeadm's JoinConfiguration file.
    Config,
    /// A control-plane join (not a worker's).
    ControlPlane,
    /// The bootstrap token for discovery and TLS bootstrap.
    Token,
    /// The bootstrap token for the TLS bootstrap alone.
    TlsBootstrapToken,
    /// The pins of the cluster CA (`sha256:<hex>`).
    DiscoveryTokenCaCertHash,
    /// Token discovery without a CA pin.
    DiscoveryTokenUnsafeSkipCaVerification,
    /// The kubeconfig of file discovery.
    DiscoveryFile,
    /// The key that decrypts kubeadm's uploaded certificates (`kubeadm-certs`).
    CertificateKey,
    /// kubeadm's certificate directory (`/etc/kubernetes/pki`).
    CertDir,
    /// The etcd members' client URLs.
    EtcdEndpoints,
    /// The etcd members' peer URLs.
    EtcdPeerEndpoints,
    /// The etcd CA bundle.
    EtcdCacert,
    /// The etcd client certificate.
    EtcdCert,
    /// The etcd client private key.
    EtcdKey,
    /// The cluster's etcd heartbeat interval.
    EtcdHeartbeatInterval,
    /// The cluster's etcd election timeout.
    EtcdElectionTimeout,
    /// kubeadm check names whose errors become warnings.
    IgnorePreflightErrors,
    /// The etcd write probe.
    WriteProbe,
    /// The longer etcd bandwidth probe.
    Bandwidth,
    /// This node's name.
    NodeName,
    /// The command's overall deadline.
    Timeout,
    /// How long preflight keeps checking until the path is fit.
    Wait,
    /// The host (and port) a trace goes to.
    TraceTarget,
    /// The port a trace probes.
    Port,
    /// The protocol a trace probes with.
    Protocol,
    /// The size of a trace's probes.
    Size,
    /// The pause between a trace's probes.
    Interval,
    /// How long a trace's probe waits for its answer.
    ProbeTimeout,
}

impl Input {
    /// Every input, for the tests that check a spelling covers them.
    pub const ALL: &'static [Input] = &[
        Input::ApiServerEndpoint,
        Input::ApiserverCacert,
        Input::ApiserverAdvertiseAddress,
        Input::Kubeconfig,
        Input::Config,
        Input::ControlPlane,
        Input::Token,
        Input::TlsBootstrapToken,
        Input::DiscoveryTokenCaCertHash,
        Input::DiscoveryTokenUnsafeSkipCaVerification,
        Input::DiscoveryFile,
        Input::CertificateKey,
        Input::CertDir,
        Input::EtcdEndpoints,
        Input::EtcdPeerEndpoints,
        Input::EtcdCacert,
        Input::EtcdCert,
        Input::EtcdKey,
        Input::EtcdHeartbeatInterval,
        Input::EtcdElectionTimeout,
        Input::IgnorePreflightErrors,
        Input::WriteProbe,
        Input::Bandwidth,
        Input::NodeName,
        Input::Timeout,
        Input::Wait,
        Input::TraceTarget,
        Input::Port,
        Input::Protocol,
        Input::Size,
        Input::Interval,
        Input::ProbeTimeout,
    ];
}

/// How a caller spells the inputs where its user gave them: flags, or config keys.
#[derive(Clone, Copy)]
pub struct Spelling(fn(Input) -> &'static str);

impl Spelling {
    pub const fn new(spell: fn(Input) -> &'static str) -> Spelling {
        Spelling(spell)
    }

    /// `input` as the user gave it.
    pub(crate) fn spell(self, input: Input) -> &'static str {
        (self.0)(input)
    }

    /// `input`, named for an error or a note.
    pub fn name(self, input: Input) -> Named {
        Named::new(input, self.spell(input))
    }

    /// The explicit etcd inputs, as the user would give them: `--etcd-endpoints with
    /// --etcd-cacert, --etcd-cert and --etcd-key` on the command line.
    pub(crate) fn explicit_etcd(self) -> String {
        let f = |i| self.spell(i);
        format!(
            "{} with {}, {} and {}",
            f(Input::EtcdEndpoints),
            f(Input::EtcdCacert),
            f(Input::EtcdCert),
            f(Input::EtcdKey)
        )
    }
}

impl fmt::Debug for Spelling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Spelling(..)")
    }
}

/// An input and the words that name it to the user: a flag, a config key, or a field of a file
/// (`--config /run/kubeadm/kubeadm-join-config.yaml: discovery.file.kubeConfigPath`), or, for
/// material joinguard found itself, where it found it (`kubeadm-certs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    input: Input,
    spelled: Cow<'static, str>,
}

impl Named {
    pub fn new(input: Input, spelled: impl Into<Cow<'static, str>>) -> Named {
        Named {
            input,
            spelled: spelled.into(),
        }
    }

    /// The input, by meaning.
    pub fn input(&self) -> Input {
        self.input
    }

    /// The words the user reads.
    pub fn as_str(&self) -> &str {
        &self.spelled
    }
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelled)
    }
}

#[cfg(test)]
pub(crate) mod tests;
