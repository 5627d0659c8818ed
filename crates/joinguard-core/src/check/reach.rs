//! `APIServerReachable`, `EtcdClientReachable`, `EtcdPeerReachable`: every target the run was
//! given is judged, and a target that never answered is an error whatever the probe kind.
//!
//! A target answered when one of its service-port probes (TCP connect, TLS handshake, `/readyz`,
//! etcd Status or quorum read, the peer probe) got a reply: a success, or a reply that says
//! something (an HTTP 503, a gRPC error) and is judged by the probe's own check. A refused
//! connect (RST), a timeout (a dark host), a reset or a failed TLS handshake is no reply. ICMP
//! echo is not a service-port probe: a host that answers pings with its port closed is still
//! unreachable for the join, and a host that drops pings but serves the port is reachable.

use std::collections::BTreeSet;

use super::model::{CheckName, CheckResult, Status};
use super::wording::describe;
use super::Checker;
use crate::input::Input;
use crate::probe::{ProbeFailure, ProbeKind};
use crate::stats::Summary;
use crate::target::{Target, TargetKind};

impl CheckName {
    /// The reachability check of a kind of target.
    pub(crate) fn reachable(kind: TargetKind) -> CheckName {
        match kind {
            TargetKind::ApiServer => CheckName::ApiServerReachable,
            TargetKind::EtcdClient => CheckName::EtcdClientReachable,
            TargetKind::EtcdPeer => CheckName::EtcdPeerReachable,
        }
    }
}

/// Whether a stream got any reply from the service: a success, or a protocol-level answer from a
/// probe whose own check judges such answers (`APIServerReady`, the etcd latency checks).
fn answered(s: &Summary) -> bool {
    let judged = matches!(
        (s.target.kind, s.probe),
        (TargetKind::ApiServer, ProbeKind::ApiReadyz)
            | (
                TargetKind::EtcdClient,
                ProbeKind::EtcdStatus | ProbeKind::EtcdQuorumRead
            )
            | (TargetKind::EtcdPeer, ProbeKind::EtcdPeerProbe)
    );
    s.samples > s.lost || (judged && matches!(s.last_failure, Some(ProbeFailure::Protocol(_))))
}

/// The service-port streams of one endpoint (everything but ICMP echo).
fn service_streams<'a>(
    endpoint: &'a str,
    summaries: &'a [Summary],
) -> impl Iterator<Item = &'a Summary> + 'a {
    summaries
        .iter()
        .filter(move |s| s.target.endpoint == endpoint && s.probe != ProbeKind::IcmpEcho)
}

/// The endpoints, among `targets`, that no service-port probe got a reply from (the same rule
/// as [`Checker::reachability`]); their other checks would only repeat the error.
pub(crate) fn unreachable_endpoints(targets: &[Target], summaries: &[Summary]) -> BTreeSet<String> {
    targets
        .iter()
        .filter(|t| silent(&service_streams(&t.endpoint, summaries).collect::<Vec<_>>()))
        .map(|t| t.endpoint.clone())
        .collect()
}

/// No stream got a reply, or the peer's TLS refused this node's identity: the TCP connects of
/// a peer port still succeed then, but the new member's peer connections would fail the same
/// handshake.
fn silent(streams: &[&Summary]) -> bool {
    let tls_refused = |s: &&Summary| {
        s.probe == ProbeKind::EtcdPeerProbe
            && s.samples == s.lost
            && matches!(s.last_failure, Some(ProbeFailure::Tls(_)))
    };
    !streams.iter().any(|s| answered(s)) || streams.iter().any(tls_refused)
}

impl Checker {
    /// One result per target (the first of each endpoint): ok when a service-port probe got a
    /// reply, an error when none did or when no probe ran before the run's deadline.
    pub(crate) fn reachability(
        &self,
        targets: &[Target],
        summaries: &[Summary],
    ) -> Vec<CheckResult> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for t in targets {
            if !seen.insert(t.endpoint.as_str()) {
                continue;
            }
            let streams: Vec<&Summary> = service_streams(&t.endpoint, summaries).collect();
            let name = CheckName::reachable(t.kind);
            let tried: Vec<String> = streams.iter().map(|s| tried(s)).collect();
            let (status, message) = if streams.is_empty() {
                (
                    Status::Error,
                    format!(
                        "{}: not probed: no probe of its port ran before the run's deadline \
                         ({timeout}) ended, so nothing shows the join could reach it; give the \
                         run more time",
                        describe(t),
                        timeout = self.input(Input::Timeout, "its time limit"),
                    ),
                )
            } else if !silent(&streams) {
                (
                    Status::Ok,
                    format!("{}: answered ({})", describe(t), tried.join(", ")),
                )
            } else {
                (
                    Status::Error,
                    format!(
                        "{}: unreachable: {}; {}",
                        describe(t),
                        tried.join(", "),
                        advice(t, &streams)
                    ),
                )
            };
            out.push(CheckResult {
                name,
                target: t.endpoint.clone(),
                status,
                message,
                measured: None,
                threshold: None,
            });
        }
        out
    }
}

/// "3 of 3 tcp-connect probes failed (last: connection refused)".
fn tried(s: &Summary) -> String {
    let ok = s.samples - s.lost;
    match &s.last_failure {
        Some(f) if ok == 0 => format!(
            "{} of {} {} probes failed (last: {f})",
            s.lost,
            s.samples,
            s.probe.as_str()
        ),
        _ => format!(
            "{} of {} {} probes answered",
            ok,
            s.samples,
            s.probe.as_str()
        ),
    }
}

/// What to do, from how the probes failed and what the target is.
fn advice(t: &Target, streams: &[&Summary]) -> String {
    let failures: Vec<&ProbeFailure> = streams
        .iter()
        .filter(|s| s.samples == s.lost)
        .filter_map(|s| s.last_failure.as_ref())
        .collect();
    let what = match t.kind {
        TargetKind::ApiServer => {
            "kubeadm join would fail at discovery (its first API call); check that \
             kube-apiserver or the load balancer listens on this address and port"
        }
        TargetKind::EtcdClient => {
            "kubeadm join would fail at member add (it dials every member's client URL); check \
             that etcd listens on its client URL (--listen-client-urls) and that the path passes it"
        }
        TargetKind::EtcdPeer => {
            "the new member could not exchange raft messages with this member; check that etcd \
             listens on its peer URL (--listen-peer-urls) and that the path passes port 2380"
        }
    };
    let tls_timeout =
        |f: &&ProbeFailure| matches!(f, ProbeFailure::Tls(m) if m.contains("timed out"));
    let cause = if !failures.is_empty() && failures.iter().all(tls_timeout) {
        "the port answers TCP but the TLS handshake timed out: the server's certificates travel \
         in full-size packets, so a path that drops them (see PathMTU) or a server too busy to \
         answer stalls here; a wrong CA or certificate fails at once instead"
    } else if failures
        .iter()
        .any(|f| matches!(f, ProbeFailure::Tls(m) if m.contains("does not speak TLS")))
    {
        "the port answers, but not in TLS: a plain HTTP listener or another service is on it, \
         not the endpoint the join needs; check the address and the port"
    } else if failures
        .iter()
        .any(|f| matches!(f, ProbeFailure::Tls(_)) && !tls_timeout(f))
    {
        match t.kind {
            TargetKind::ApiServer => {
                "the TLS handshake failed: check the cluster CA given (kubeadm: \
                 /etc/kubernetes/pki/ca.crt) and that this is the API server's address"
            }
            TargetKind::EtcdClient | TargetKind::EtcdPeer => {
                "the TLS handshake failed: check the etcd CA and the client certificate given \
                 (kubeadm: /etc/kubernetes/pki/etcd/ca.crt and healthcheck-client.crt)"
            }
        }
    } else if failures.iter().all(|f| matches!(f, ProbeFailure::Refused)) {
        "the host is up but nothing listens on the port (connection refused)"
    } else if failures
        .iter()
        .all(|f| matches!(f, ProbeFailure::Timeout(_)))
    {
        "nothing came back within the probe timeout: the host is down, or a firewall drops the \
         traffic"
    } else {
        "the connection failed"
    };
    format!("{cause}. {what}")
}
