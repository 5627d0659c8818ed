//! `PacketLoss`: the round-trip loss of a probe stream, judged on statistical evidence.

use super::model::{CheckName, CheckResult, Status};
use super::wording::{describe, fmt_num};
use super::Checker;
use crate::sampling::Band;
use crate::stats::Summary;

impl Checker {
    /// `PacketLoss`: round-trip loss of a probe stream, in percent. An error needs statistical
    /// evidence (see [`SamplingPolicy::loss_band`]), not just an observed ratio.
    pub(crate) fn packet_loss(&self, s: &Summary) -> CheckResult {
        let t = &self.thresholds.packet_loss;
        let est = s.loss();
        let pct = est.ratio() * 100.0;
        let band = self
            .sampling
            .loss_band(&est, t.warn / 100.0, t.error / 100.0);
        // Formatted only for a message that is kept (see `Checker::terse`).
        let head = || {
            format!(
                "{} ({}): loss {pct:.1}% ({} of {} probes)",
                describe(&s.target),
                s.probe.as_str(),
                est.lost,
                est.attempts
            )
        };
        let (status, message, threshold) = match band {
            Band::Error => (
                Status::Error,
                format!(
                    "{} exceeds {}% ({}); raft messages and the join's API calls would stall \
                     on retransmissions. Fix the path",
                    head(),
                    fmt_num(t.error),
                    t.error_basis
                ),
                t.error,
            ),
            Band::Warning if pct > t.error => (
                Status::Warning,
                format!(
                    "{} is above {}% ({}), but too few probes to be sure; check the path \
                     and run again",
                    head(),
                    fmt_num(t.error),
                    t.error_basis
                ),
                t.warn,
            ),
            Band::Warning => (
                Status::Warning,
                format!(
                    "{} exceeds {}% ({}); the join can proceed, but expect retransmission \
                     delays",
                    head(),
                    fmt_num(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
            Band::Ok if !self.ok_messages => (Status::Ok, String::new(), t.warn),
            Band::Ok => (
                Status::Ok,
                format!(
                    "{} is within {}% ({})",
                    head(),
                    fmt_num(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
        };
        CheckResult {
            name: CheckName::PacketLoss,
            target: s.target.endpoint.clone(),
            status,
            message,
            measured: Some(pct),
            threshold: Some(threshold),
        }
    }
}
