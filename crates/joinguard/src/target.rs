//! Targets: the network endpoints a join depends on.
//!
//! A target is what a check judges and what a report names. Its `endpoint` is `host:port`, the
//! form scripts match on in the JSON report. This module must not do I/O.

use std::fmt;

use serde::Serialize;

/// The role a target plays in the join.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    /// The API endpoint or load balancer (`controlPlaneEndpoint`).
    ApiServer,
    /// An etcd member's client URL (port 2379).
    EtcdClient,
    /// An etcd member's peer URL (port 2380).
    EtcdPeer,
}

/// One endpoint to probe.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Target {
    pub kind: TargetKind,
    /// `host:port`, as printed and matched in reports.
    pub endpoint: String,
    /// Host part (IP literal or DNS name), used for TLS server name and SAN checks.
    pub host: String,
    pub port: u16,
    /// Whether the endpoint speaks TLS (https URL).
    pub tls: bool,
    /// etcd member name, when known (from MemberList).
    pub member: Option<String>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TargetKind::ApiServer => write!(f, "API server {}", self.endpoint),
            TargetKind::EtcdClient => write!(f, "etcd member {}", self.endpoint),
            TargetKind::EtcdPeer => write!(f, "etcd peer {}", self.endpoint),
        }
    }
}
