//! The sample model: what a probe measured ([`ProbeKind`]), one attempt's outcome ([`Sample`]) and
//! why it has no latency ([`ProbeFailure`]). Data only: `probe` produces samples, `stats`
//! summarises them, `check` judges the summaries; all three read these types from here.

use std::time::Duration;

use serde::Serialize;

/// What a probe measures. The names are stable: they appear in the JSON report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeKind {
    /// SYN to SYN-ACK: `connect()` time.
    TcpConnect,
    /// TLS handshake time after connect.
    TlsHandshake,
    /// HTTPS GET /readyz (connect + TLS + request, fresh connection).
    ApiReadyz,
    /// etcd Maintenance.Status on an established connection.
    EtcdStatus,
    /// etcd linearizable Range of a missing key on an established connection.
    EtcdQuorumRead,
    /// etcd peer GET /raft/probing on an established connection, as etcd's own prober does.
    EtcdPeerProbe,
    /// Opt-in: lease grant + put + get + revoke.
    EtcdWrite,
    /// Opt-in: bounded snapshot stream throughput (bytes/s is carried in the sample's extra).
    EtcdSnapshot,
    /// ICMP echo.
    IcmpEcho,
}

impl ProbeKind {
    /// Stable name, as in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::TcpConnect => "tcp-connect",
            ProbeKind::TlsHandshake => "tls-handshake",
            ProbeKind::ApiReadyz => "api-readyz",
            ProbeKind::EtcdStatus => "etcd-status",
            ProbeKind::EtcdQuorumRead => "etcd-quorum-read",
            ProbeKind::EtcdPeerProbe => "etcd-peer-probe",
            ProbeKind::EtcdWrite => "etcd-write",
            ProbeKind::EtcdSnapshot => "etcd-snapshot",
            ProbeKind::IcmpEcho => "icmp-echo",
        }
    }
}

/// Why one probe attempt produced no latency.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", content = "detail", rename_all = "kebab-case")]
pub enum ProbeFailure {
    /// No answer within the per-sample timeout (counts as loss).
    #[error("timed out after {0} ms")]
    Timeout(u64),
    /// Connection refused (RST): the host is up but nothing listens.
    #[error("connection refused")]
    Refused,
    /// Any other I/O error (reset, unreachable).
    #[error("{0}")]
    Io(String),
    /// TLS failed: certificate not trusted, wrong SAN, expired, or handshake error.
    #[error("TLS: {0}")]
    Tls(String),
    /// The server answered, but not as expected (HTTP status, gRPC status, bad body).
    #[error("{0}")]
    Protocol(String),
}

/// One probe attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Latency of the attempt, or why there is none.
    pub result: Result<Duration, ProbeFailure>,
}
