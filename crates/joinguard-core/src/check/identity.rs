//! `EtcdIdentity`: warns when the etcd checks ran without a client identity.

use super::model::{CheckName, CheckResult, Status, CLUSTER_TARGET};
use super::Checker;

impl Checker {
    /// `EtcdIdentity`: a warning when etcd checks ran without a client identity.
    pub fn etcd_identity(&self, identity_given: bool) -> CheckResult {
        let (status, message) = if identity_given {
            (
                Status::Ok,
                "etcd client identity given; etcd checks use etcd's own requests".to_string(),
            )
        } else {
            (
                Status::Warning,
                "no etcd client identity given (etcd CA, client certificate and key): etcd \
                 latency checks fell back to TCP connect timing, and EtcdHealth, quorum reads \
                 and peer probes were skipped"
                    .to_string(),
            )
        };
        CheckResult {
            name: CheckName::EtcdIdentity,
            target: CLUSTER_TARGET.to_string(),
            status,
            message,
            measured: None,
            threshold: None,
        }
    }
}
