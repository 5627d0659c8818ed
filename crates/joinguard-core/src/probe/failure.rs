//! Probe failure mapping: the etcd and HTTP probes' own failure types as the [`ProbeFailure`] a
//! [`super::Sample`] carries. Shared by preflight and the monitor so both report a failure the
//! same way. Mapping only: no I/O.

use super::etcd::EtcdFailure;
use super::http::HttpFailure;
use super::tls;
use super::ProbeFailure;

/// An etcd probe's failure as the sample's [`ProbeFailure`]: transport kinds kept, everything
/// else (gRPC status, bad answers) reported as a protocol failure.
pub(crate) fn etcd_probe_failure(e: &EtcdFailure) -> ProbeFailure {
    match e {
        EtcdFailure::Timeout(ms) => ProbeFailure::Timeout(*ms),
        EtcdFailure::Refused => ProbeFailure::Refused,
        EtcdFailure::Io(s) => ProbeFailure::Io(s.clone()),
        EtcdFailure::Untrusted(t) => ProbeFailure::Tls(t.to_string()),
        EtcdFailure::Tls(s) => ProbeFailure::Tls(s.clone()),
        other => ProbeFailure::Protocol(other.to_string()),
    }
}

/// An HTTP probe's failure as the sample's [`ProbeFailure`]; a TCP failure under TLS keeps
/// its own kind.
pub(crate) fn http_probe_failure(e: &HttpFailure) -> ProbeFailure {
    match e {
        HttpFailure::Timeout { after_ms, .. } => ProbeFailure::Timeout(*after_ms),
        HttpFailure::Tls(tls::TlsFailure::Tcp(f)) => f.clone(),
        HttpFailure::Tls(t) => ProbeFailure::Tls(t.to_string()),
        HttpFailure::Protocol(p) => ProbeFailure::Protocol(p.clone()),
    }
}
