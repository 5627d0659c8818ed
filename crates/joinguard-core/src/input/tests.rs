//! A spelling for the core's own unit tests: the binary's flags, so the tests read the messages a
//! command-line user sees. The binary's table (`joinguard::cli::FLAGS`) is the one users get; its
//! tests check every input has a real flag.

use super::{Input, Named, Spelling};

fn flag(i: Input) -> &'static str {
    match i {
        Input::ApiServerEndpoint => "API_SERVER_ENDPOINT",
        Input::ApiserverCacert => "--apiserver-cacert",
        Input::ApiserverAdvertiseAddress => "--apiserver-advertise-address",
        Input::Kubeconfig => "--kubeconfig",
        Input::Config => "--config",
        Input::ControlPlane => "--control-plane",
        Input::Token => "--token",
        Input::TlsBootstrapToken => "--tls-bootstrap-token",
        Input::DiscoveryTokenCaCertHash => "--discovery-token-ca-cert-hash",
        Input::DiscoveryTokenUnsafeSkipCaVerification => {
            "--discovery-token-unsafe-skip-ca-verification"
        }
        Input::DiscoveryFile => "--discovery-file",
        Input::CertificateKey => "--certificate-key",
        Input::CertDir => "--cert-dir",
        Input::EtcdEndpoints => "--etcd-endpoints",
        Input::EtcdPeerEndpoints => "--etcd-peer-endpoints",
        Input::EtcdCacert => "--etcd-cacert",
        Input::EtcdCert => "--etcd-cert",
        Input::EtcdKey => "--etcd-key",
        Input::EtcdHeartbeatInterval => "--etcd-heartbeat-interval",
        Input::EtcdElectionTimeout => "--etcd-election-timeout",
        Input::IgnorePreflightErrors => "--ignore-preflight-errors",
        Input::WriteProbe => "--write-probe",
        Input::Bandwidth => "--bandwidth",
        Input::NodeName => "--node-name",
        Input::Timeout => "--timeout",
        Input::Wait => "--wait",
        Input::TraceTarget => "TARGET",
        Input::Port => "--port",
        Input::Protocol => "--protocol",
        Input::Size => "--size",
        Input::Interval => "--interval",
        Input::ProbeTimeout => "--probe-timeout",
    }
}

/// The command line's spelling, for unit tests.
pub(crate) const FLAGS: Spelling = Spelling::new(flag);

/// `input` as a flag, for unit tests.
pub(crate) fn named(input: Input) -> Named {
    FLAGS.name(input)
}

#[test]
fn a_named_input_reads_as_its_spelling_and_keeps_its_meaning() {
    let n = named(Input::EtcdCacert);
    assert_eq!(
        (n.to_string(), n.input()),
        ("--etcd-cacert".to_string(), Input::EtcdCacert)
    );
    let f = Named::new(
        Input::DiscoveryFile,
        "--config j.yaml: discovery.file.kubeConfigPath".to_string(),
    );
    assert_eq!(f.as_str(), "--config j.yaml: discovery.file.kubeConfigPath");
    assert_eq!(f.input(), Input::DiscoveryFile);
}
