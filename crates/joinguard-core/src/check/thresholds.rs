//! The limits every check compares against, and why each has its value (the bases are quoted in
//! messages). Derived from the members' etcd timing; every limit can be overridden.

use std::time::Duration;

use super::wording::fmt_duration;

/// A warning and an error limit, and why each has its value (quoted in messages).
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub warn: f64,
    pub error: f64,
    pub warn_basis: String,
    pub error_basis: String,
}

impl Threshold {
    pub(super) fn new(warn: f64, error: f64, warn_basis: String, error_basis: String) -> Threshold {
        Threshold {
            warn,
            error,
            warn_basis,
            error_basis,
        }
    }

    /// Limits set by the operator instead of derived.
    pub fn overridden(warn: f64, error: f64) -> Threshold {
        Threshold::new(warn, error, "override".into(), "override".into())
    }
}

/// Every limit the checks use. Fields are public so any limit can be overridden.
///
/// Units: latency limits in ms, packet loss in percent, snapshot transfer and clock skew in s.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// The members' `--heartbeat-interval` the limits were derived from (for messages).
    pub heartbeat: Duration,
    /// The members' `--election-timeout`.
    pub election: Duration,
    pub etcd_peer_latency: Threshold,
    pub etcd_client_latency: Threshold,
    pub etcd_quorum_read_latency: Threshold,
    pub packet_loss: Threshold,
    pub api_server_latency: Threshold,
    /// kubeadm's budget for etcd calls such as promoting the learner (EtcdAPICall).
    pub etcd_api_call_budget: Duration,
    pub etcd_snapshot_transfer: Threshold,
    pub clock_skew: Threshold,
}

impl Default for Thresholds {
    /// etcd's defaults: heartbeat 100 ms, election timeout 1000 ms (`server/embed/config.go`
    /// TickMs/ElectionMs; kubeadm overrides neither).
    fn default() -> Self {
        Thresholds::from_etcd_timing(Duration::from_millis(100), Duration::from_millis(1000))
    }
}

impl Thresholds {
    /// The default limits (etcd's tuning guidance for the peer and client paths, joinguard's own
    /// defaults for loss, API latency and clock skew), scaled by the members' timing.
    pub fn from_etcd_timing(heartbeat: Duration, election: Duration) -> Thresholds {
        let hb = heartbeat.as_secs_f64() * 1000.0;
        let el = election.as_secs_f64() * 1000.0;
        let hb_s = fmt_duration(heartbeat);
        let el_s = fmt_duration(election);

        // Peer RTT. OpenShift's etcd docs (etcd-network-latency-jitter.adoc) recommend an
        // effective RTT (RTT + jitter) below 33 ms and at most 66 ms for a 100 ms heartbeat: 1/3
        // and 2/3 of it. The etcd tuning guide (docs/v3.5/tuning.md) also requires the election
        // timeout to be at least 10 x RTT, so a short election timeout lowers the error limit.
        let by_heartbeat = 2.0 * hb / 3.0;
        let by_election = el / 10.0;
        let (peer_error, peer_error_basis) = if by_election < by_heartbeat {
            (
                by_election,
                format!(
                    "1/10 of the {el_s} election timeout; etcd needs it to be at least 10 x RTT"
                ),
            )
        } else {
            (
                by_heartbeat,
                format!("2/3 of the {hb_s} heartbeat interval"),
            )
        };
        let peer_warn = (hb / 3.0).min(peer_error);

        // The etcd API call budget: kubeadm's EtcdAPICall timeout (2 min) bounds promoting the
        // learner (cmd/kubeadm/app/phases/etcd/local.go); v1beta4 timeouts.etcdAPICall overrides.
        let budget = Duration::from_secs(120);
        let budget_s = budget.as_secs_f64();

        Thresholds {
            heartbeat,
            election,
            etcd_peer_latency: Threshold::new(
                peer_warn,
                peer_error,
                format!("1/3 of the {hb_s} heartbeat interval, the recommended maximum"),
                peer_error_basis,
            ),
            // A client request that takes longer than the heartbeat interval waits for more than
            // one raft round.
            etcd_client_latency: Threshold::new(
                hb / 2.0,
                hb,
                format!("1/2 of the {hb_s} heartbeat interval"),
                format!("the {hb_s} heartbeat interval"),
            ),
            etcd_quorum_read_latency: Threshold::new(
                hb / 2.0,
                hb,
                format!("1/2 of the {hb_s} heartbeat interval"),
                format!("the {hb_s} heartbeat interval"),
            ),
            // joinguard defaults; loss is the round-trip loss of a probe.
            packet_loss: Threshold::new(
                1.0,
                5.0,
                "joinguard's default".into(),
                "joinguard's default".into(),
            ),
            // joinguard defaults for the /readyz p90 through the endpoint.
            api_server_latency: Threshold::new(
                250.0,
                1000.0,
                "joinguard's default".into(),
                "joinguard's default".into(),
            ),
            etcd_api_call_budget: budget,
            etcd_snapshot_transfer: Threshold::new(
                0.25 * budget_s,
                0.5 * budget_s,
                "25% of kubeadm's 2 min etcd API call budget (EtcdAPICall)".into(),
                "50% of kubeadm's 2 min etcd API call budget (EtcdAPICall)".into(),
            ),
            // joinguard defaults: certificates and tokens carry second-level
            // validity times; 30 s of skew makes fresh ones "not yet valid" on the other side.
            clock_skew: Threshold::new(
                1.0,
                30.0,
                "joinguard's default".into(),
                "joinguard's default".into(),
            ),
        }
    }
}
