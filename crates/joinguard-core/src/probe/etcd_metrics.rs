//! An etcd member's own view of its peers and its quota, from the Prometheus text its client port
//! serves at `/metrics` (every etcd version kubeadm runs; the client certificate the join uses is
//! enough): which peers its raft transport has an active stream to
//! (`etcd_network_active_peers{Local,Remote}`, set by `rafthttp/peer_status.go` activate and
//! deactivate), how often a peer dropped (`etcd_network_disconnected_peers_total`), and the
//! backend quota (`etcd_server_quota_backend_bytes`). etcd decides whether to take a new member on
//! exactly that transport state (`isConnectedFullySince`, `isConnectedToQuorumSince...` in
//! `server/etcdserver/util.go`), and no gRPC call exposes it.

use std::time::Duration;

use super::http::{HttpFailure, HttpSession};
use super::tls::TlsClient;
use crate::target::Target;

/// The most of the page read: an etcd 3.4 page is about 150 KB; a large one (many gRPC methods,
/// histograms) stays well within this.
const MAX_PAGE: usize = 4 * 1024 * 1024;

/// What one member's `/metrics` says about its peers and its quota.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EtcdMetrics {
    /// `(local, remote, active)` per peer, member ids as etcd prints them (hex).
    pub peers: Vec<(u64, u64, bool)>,
    /// `(local, remote, count)`: how many times the peer's stream dropped since start.
    pub disconnects: Vec<(u64, u64, u64)>,
    /// `etcd_server_quota_backend_bytes`.
    pub quota_bytes: Option<u64>,
    /// Database snapshots this member sent, per receiving member (`To`, hex): a leader sends one
    /// to a learner that is too far behind for its log (`rafthttp/snapshot_sender.go` `send`).
    pub snapshot_sends: Vec<(u64, SnapshotSends)>,
}

/// One member's snapshot sends to one peer: `etcd_network_snapshot_send_success`,
/// `etcd_network_snapshot_send_failures` (counters since the member started) and
/// `etcd_network_snapshot_send_inflights_total` (a gauge), the same names in etcd 3.4, 3.5 and
/// 3.6 (`rafthttp/metrics.go`). A failed send is retried by raft from byte 0 with a new snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SnapshotSends {
    pub sent: u64,
    pub failed: u64,
    pub in_flight: u64,
}

impl EtcdMetrics {
    /// Parses the Prometheus text format, keeping the families above. Pure, for unit tests and
    /// fuzzing; malformed lines are skipped.
    pub fn parse(text: &str) -> EtcdMetrics {
        let mut m = EtcdMetrics::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("etcd_network_active_peers{") {
                if let Some((l, r, v)) = peer_sample(rest) {
                    m.peers.push((l, r, v > 0.0));
                }
            } else if let Some(rest) = line.strip_prefix("etcd_network_disconnected_peers_total{") {
                if let Some((l, r, v)) = peer_sample(rest) {
                    m.disconnects.push((l, r, v as u64));
                }
            } else if let Some(rest) = line.strip_prefix("etcd_network_snapshot_send_") {
                let (field, rest) = if let Some(r) = rest.strip_prefix("success{") {
                    (0, r)
                } else if let Some(r) = rest.strip_prefix("failures{") {
                    (1, r)
                } else if let Some(r) = rest.strip_prefix("inflights_total{") {
                    (2, r)
                } else {
                    continue;
                };
                let Some((to, v)) = to_sample(rest) else {
                    continue;
                };
                let at = match m.snapshot_sends.iter().position(|(t, _)| *t == to) {
                    Some(at) => at,
                    None => {
                        m.snapshot_sends.push((to, SnapshotSends::default()));
                        m.snapshot_sends.len() - 1
                    }
                };
                let s = &mut m.snapshot_sends[at].1;
                *[&mut s.sent, &mut s.failed, &mut s.in_flight][field] = v;
            } else if let Some(v) = line.strip_prefix("etcd_server_quota_backend_bytes ") {
                m.quota_bytes = v
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|q| q.is_finite() && *q >= 0.0)
                    .map(|q| q as u64);
            }
        }
        m
    }

    /// Whether `local`'s transport has an active stream to `remote`; `None` when the page does
    /// not list the pair (a member that joined after the page was read, or another page).
    pub fn active(&self, local: u64, remote: u64) -> Option<bool> {
        self.peers
            .iter()
            .find(|(l, r, _)| *l == local && *r == remote)
            .map(|(_, _, a)| *a)
    }

    /// This member's snapshot sends to `to`; all zero when the page has none (no snapshot was
    /// ever sent to it: etcd exposes a label only once it is counted).
    pub fn snapshots_to(&self, to: u64) -> SnapshotSends {
        self.snapshot_sends
            .iter()
            .find(|(t, _)| *t == to)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    }
}

/// `To="…"} value` → (to, value), the value a non-negative count.
fn to_sample(rest: &str) -> Option<(u64, u64)> {
    let (labels, value) = rest.split_once('}')?;
    let at = labels.find("To=\"")? + 4;
    let end = labels[at..].find('"')? + at;
    let to = u64::from_str_radix(&labels[at..end], 16).ok()?;
    let v = value.split_whitespace().next()?.parse::<f64>().ok()?;
    (v.is_finite() && v >= 0.0).then_some((to, v as u64))
}

/// `Local="…",Remote="…"} value` → (local, remote, value).
fn peer_sample(rest: &str) -> Option<(u64, u64, f64)> {
    let (labels, value) = rest.split_once('}')?;
    let label = |name: &str| -> Option<u64> {
        let at = labels.find(&format!("{name}=\""))? + name.len() + 2;
        let end = labels[at..].find('"')? + at;
        u64::from_str_radix(&labels[at..end], 16).ok()
    };
    let value = value.split_whitespace().next()?.parse::<f64>().ok()?;
    Some((label("Local")?, label("Remote")?, value))
}

/// `GET /metrics` on an etcd member's client URL with the join's client identity, within
/// `timeout`.
pub async fn fetch(
    target: &Target,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<EtcdMetrics, HttpFailure> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut session = HttpSession::open(&target.host, target.port, tls, timeout).await?;
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let page = session.get_at_most("/metrics", left, MAX_PAGE).await?;
    if page.status != 200 {
        return Err(HttpFailure::Protocol(format!(
            "/metrics answered HTTP {}",
            page.status
        )));
    }
    Ok(EtcdMetrics::parse(&String::from_utf8_lossy(&page.body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as etcd 3.4.23 serves them (a lab member with one peer stopped).
    const PAGE: &str = "\
# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local=\"79e7d97bbcca0814\",Remote=\"11f7ab40f9341953\"} 1
etcd_network_active_peers{Local=\"79e7d97bbcca0814\",Remote=\"4cddb0d0dc2df765\"} 0
# TYPE etcd_network_disconnected_peers_total counter
etcd_network_disconnected_peers_total{Local=\"79e7d97bbcca0814\",Remote=\"4cddb0d0dc2df765\"} 1
etcd_network_peer_sent_bytes_total{To=\"11f7ab40f9341953\"} 12345
# TYPE etcd_server_quota_backend_bytes gauge
etcd_server_quota_backend_bytes 2.147483648e+09
etcd_network_active_peers{Local=\"zz\",Remote=\"1\"} 1
# TYPE etcd_network_snapshot_send_failures counter
etcd_network_snapshot_send_failures{To=\"4cddb0d0dc2df765\"} 3
etcd_network_snapshot_send_inflights_total{To=\"4cddb0d0dc2df765\"} 1
etcd_network_snapshot_send_success{To=\"11f7ab40f9341953\"} 2
etcd_network_snapshot_send_total_duration_seconds_count{To=\"11f7ab40f9341953\"} 2
etcd_network_snapshot_send_failures{To=\"nothex\"} 9
";

    #[test]
    fn peers_and_quota_from_a_real_page() {
        let m = EtcdMetrics::parse(PAGE);
        let (me, up, down) = (0x79e7d97bbcca0814, 0x11f7ab40f9341953, 0x4cddb0d0dc2df765);
        assert_eq!(m.active(me, up), Some(true));
        assert_eq!(m.active(me, down), Some(false));
        assert_eq!(m.active(up, me), None);
        assert_eq!(m.peers.len(), 2, "the malformed id is skipped");
        assert_eq!(m.disconnects, vec![(me, down, 1)]);
        assert_eq!(m.quota_bytes, Some(2_147_483_648));
        let to_down = m.snapshots_to(down);
        assert_eq!((to_down.sent, to_down.failed, to_down.in_flight), (0, 3, 1));
        assert_eq!(m.snapshots_to(up).sent, 2);
        assert_eq!(m.snapshots_to(me), SnapshotSends::default());
        assert_eq!(
            m.snapshot_sends.len(),
            2,
            "the histogram and the bad id are skipped"
        );
    }
}
