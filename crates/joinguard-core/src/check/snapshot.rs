//! `EtcdSnapshotTransfer`: the predicted time to send the backend to a new member, against
//! kubeadm's etcd API call budget.

use super::model::{CheckName, CheckResult, Status};
use super::wording::{describe, fmt_bytes, fmt_secs};
use super::Checker;
use crate::target::Target;

impl Checker {
    /// `EtcdSnapshotTransfer`: predicted time to send the backend to a new member (DB size /
    /// measured throughput), against kubeadm's etcd API call budget.
    pub(crate) fn snapshot_transfer(
        &self,
        target: &Target,
        db_size_bytes: u64,
        bytes_per_second: f64,
    ) -> CheckResult {
        let t = &self.thresholds.etcd_snapshot_transfer;
        let secs = if bytes_per_second > 0.0 {
            db_size_bytes as f64 / bytes_per_second
        } else {
            f64::INFINITY
        };
        let head = format!(
            "{}: a full snapshot of {} at the measured {}/s would take {}",
            describe(target),
            fmt_bytes(db_size_bytes as f64),
            fmt_bytes(bytes_per_second.max(0.0)),
            fmt_secs(secs)
        );
        let (status, message, threshold) = if secs > t.error {
            (
                Status::Error,
                format!(
                    "{head}, more than {} ({}); the learner would likely not catch up before \
                     kubeadm gives up promoting it. Join over a faster path, or compact and \
                     defragment etcd first",
                    fmt_secs(t.error),
                    t.error_basis
                ),
                t.error,
            )
        } else if secs > t.warn {
            (
                Status::Warning,
                format!(
                    "{head}, more than {} ({}); promotion may be slow",
                    fmt_secs(t.warn),
                    t.warn_basis
                ),
                t.warn,
            )
        } else {
            (
                Status::Ok,
                format!("{head}, within {} ({})", fmt_secs(t.warn), t.warn_basis),
                t.warn,
            )
        };
        CheckResult {
            name: CheckName::EtcdSnapshotTransfer,
            target: target.endpoint.clone(),
            status,
            message,
            measured: Some(secs),
            threshold: Some(threshold),
        }
    }
}
