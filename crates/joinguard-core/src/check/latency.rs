//! The latency judges: `EtcdPeerLatency`, `EtcdClientLatency`, `EtcdQuorumReadLatency` and
//! `APIServerLatency`, each a latency figure of a summary against its [`Threshold`].

use super::model::{CheckName, CheckResult, Status};
use super::thresholds::Threshold;
use super::wording::{describe, describe_figure, fmt_ms, unreachable};
use super::Checker;
use crate::sampling::{latency_band, Band, LatencyFigure};
use crate::stats::Summary;

impl Checker {
    /// `EtcdPeerLatency`: effective RTT (robust p99 + robust jitter) to a member's peer port.
    pub(crate) fn peer_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::EtcdPeerLatency,
            s,
            LatencyFigure::EffectiveRtt,
            &self.thresholds.etcd_peer_latency,
            "the join would risk leader elections. Fix the path or raise etcd's \
             heartbeat-interval and election-timeout on all members (and give joinguard the \
             new values)",
            "the margin to leader elections is small",
        )
    }

    /// `EtcdClientLatency`: robust p99 of Status (or TCP connect) to a member's client port.
    pub(crate) fn client_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::EtcdClientLatency,
            s,
            LatencyFigure::RobustP99,
            &self.thresholds.etcd_client_latency,
            "kubeadm's etcd calls (member add, promote) through this member would be slow to \
             time out. Fix the path to this member",
            "etcd calls through this member will be slow",
        )
    }

    /// `EtcdQuorumReadLatency`: robust p99 of a linearizable read (member, leader, quorum).
    pub(crate) fn quorum_read_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::EtcdQuorumReadLatency,
            s,
            LatencyFigure::RobustP99,
            &self.thresholds.etcd_quorum_read_latency,
            "every consistent read through this member waits on the leader and a quorum. Fix \
             the paths between this member, the leader and the others",
            "consistent reads through this member are slow",
        )
    }

    /// `APIServerLatency`: p90 of `/readyz` through the API endpoint or load balancer.
    pub(crate) fn api_server_latency(&self, s: &Summary) -> CheckResult {
        self.latency_check(
            CheckName::ApiServerLatency,
            s,
            LatencyFigure::P90,
            &self.thresholds.api_server_latency,
            "kubeadm join's API calls would time out or retry. Check the load balancer and the \
             path to it",
            "API calls during the join will be slow",
        )
    }

    pub(super) fn latency_check(
        &self,
        name: CheckName,
        s: &Summary,
        figure: LatencyFigure,
        t: &Threshold,
        error_consequence: &str,
        warn_consequence: &str,
    ) -> CheckResult {
        let head = || format!("{} ({})", describe(&s.target), s.probe.as_str());
        let Some(l) = &s.latency else {
            return unreachable(name, s, &head());
        };
        let value = figure.value(l);
        let what = || describe_figure(figure, l, s.samples);
        let (status, message, threshold) = match latency_band(l, figure, t.warn, t.error) {
            Band::Error => (
                Status::Error,
                format!(
                    "{}: {} exceeds {} ({}); {error_consequence}",
                    head(),
                    what(),
                    fmt_ms(t.error),
                    t.error_basis
                ),
                t.error,
            ),
            Band::Warning => (
                Status::Warning,
                format!(
                    "{}: {} exceeds {} ({}); {warn_consequence}",
                    head(),
                    what(),
                    fmt_ms(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
            Band::Ok if !self.ok_messages => (Status::Ok, String::new(), t.warn),
            Band::Ok => (
                Status::Ok,
                format!(
                    "{}: {} is within {} ({})",
                    head(),
                    what(),
                    fmt_ms(t.warn),
                    t.warn_basis
                ),
                t.warn,
            ),
        };
        CheckResult {
            name,
            target: s.target.endpoint.clone(),
            status,
            message,
            measured: Some(value),
            threshold: Some(threshold),
        }
    }
}
