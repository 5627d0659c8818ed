//! netlab: the joinguard test fabric.
//!
//! A [`Lab`] is a set of hosts (network namespaces with addresses in 198.18.0.0/15) joined by one
//! userspace forwarder that holds a TUN device in each host and applies per-pair, per-direction
//! impairments: delay, jitter, loss, rate and blackout. On top of it, [`etcd`] starts real etcd
//! clusters with mTLS from a test CA ([`pki`]). Everything a lab creates is removed when it is
//! dropped, also during a panic; [`sweep`] removes what a killed run left behind.
//!
//! Beside the fabric: [`apiserver`] (a Kubernetes API server stand-in over the lab's etcd),
//! [`hostile`] (servers that misbehave on purpose), [`measure`] (the fabric's own accuracy),
//! the generic helpers [`process`] (run with a deadline), [`http`] (plain GETs to lab listeners)
//! and [`metrics`] (Prometheus samples), and [`harness`], the lab test harness (lock,
//! environment builder, runs of the program under test, [`labtest!`]) that lab tests share.
//!
//! netlab is never published. It exists so that joinguard is tested against real components.

pub mod apiserver;
pub mod control;
pub mod etcd;
pub mod forwarder;
pub mod harness;
pub mod host;
pub mod hostile;
pub mod http;
pub mod impair;
pub mod join;
pub mod lab;
pub mod measure;
pub mod metrics;
pub mod pki;
pub mod process;
pub mod proxy;
pub mod sweep;

pub use forwarder::{Network, PairStats};
pub use host::{Host, HostProcess};
pub use impair::{Impairment, Jitter, Loss, ParseImpairmentError};
pub use lab::{authority, host_addr6, IpFamily, Lab, LabBuilder, NETWORK6};

/// What can go wrong while building or running a lab.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A prerequisite (root, /dev/net/tun, iproute2, etcd) is missing. In CI this is a failure.
    #[error("netlab prerequisite missing: {0}")]
    Prerequisite(String),
    /// Creating, entering or deleting a namespace failed.
    #[error("netlab namespace: {0}")]
    Netns(String),
    /// Creating or driving a TUN device failed.
    #[error("netlab tun: {0}")]
    Tun(String),
    /// A process could not be started.
    #[error("netlab spawn: {0}")]
    Spawn(String),
    /// An etcd operation failed or timed out.
    #[error("netlab etcd: {0}")]
    Etcd(String),
    /// Certificate generation failed.
    #[error("netlab pki: {0}")]
    Pki(String),
    /// A lab description was invalid (unknown host, duplicate name, too many hosts).
    #[error("netlab: {0}")]
    Invalid(String),
    /// A command did not finish within its deadline (and was killed).
    #[error("netlab: {what} did not finish within {after:?}")]
    Timeout {
        /// The command.
        what: String,
        /// The deadline it was given.
        after: std::time::Duration,
    },
    /// A plain-HTTP GET to a lab listener got no answer, or (where a 2xx is required) another
    /// status.
    #[error("netlab http: GET http://{addr}{path}: {stage}: {detail}")]
    Http {
        /// The listener.
        addr: std::net::SocketAddr,
        /// The path requested.
        path: String,
        /// What failed: `connect`, `send`, `receive`, `timed out`, `HTTP 503`, ...
        stage: String,
        /// The I/O error, or the body of a non-2xx answer.
        detail: String,
    },
}
