//! Probes: timed, bounded network operations against one target.
//!
//! A probe returns data (a [`Sample`]) and never formats or judges it; `stats` summarises, `check`
//! judges and `report` prints. Every I/O here is bounded by a timeout.

pub(crate) mod bpf;
pub mod dial;
pub mod etcd;
pub mod etcd_metrics;
pub(crate) mod failure;
pub(crate) mod fullsize;
pub mod http;
pub mod icmp;
pub mod identity;
pub mod peer;
pub(crate) mod pmtu;
pub mod proxy;
pub mod tcp;
pub mod tls;

pub use crate::sample::{ProbeFailure, ProbeKind, Sample};
