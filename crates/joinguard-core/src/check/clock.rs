//! `ClockSkew`: the difference between this node's clock and a target's.

use super::model::{CheckName, CheckResult, Status};
use super::wording::{describe, fmt_secs};
use super::Checker;
use crate::target::Target;

impl Checker {
    /// `ClockSkew`: difference between this node's clock and the target's, in seconds (sign
    /// ignored).
    pub(crate) fn clock_skew(&self, target: &Target, skew_seconds: f64) -> CheckResult {
        let t = &self.thresholds.clock_skew;
        let skew = skew_seconds.abs();
        let head = format!(
            "{}: its clock differs from this node's by {}",
            describe(target),
            fmt_secs(skew)
        );
        let (status, message, threshold) = if skew > t.error {
            (
                Status::Error,
                format!(
                    "{head}, more than {} ({}); certificates and tokens issued during the join \
                     would be rejected as not yet valid or expired. Synchronise the clocks (NTP)",
                    fmt_secs(t.error),
                    t.error_basis
                ),
                t.error,
            )
        } else if skew > t.warn {
            (
                Status::Warning,
                format!(
                    "{head}, more than {} ({}); synchronise the clocks (NTP)",
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
            name: CheckName::ClockSkew,
            target: target.endpoint.clone(),
            status,
            message,
            measured: Some(skew),
            threshold: Some(threshold),
        }
    }
}
