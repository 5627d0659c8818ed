//! The joining node's own etcd metrics listener, read while its learner catches up.
//!
//! A learner does not serve its client port until it has caught up (etcd's `serve` waits for
//! `ReadyNotify`, `server/embed/serve.go`), so its `Status` cannot show progress. kubeadm starts
//! etcd with `--listen-metrics-urls=http://127.0.0.1:2381` (`http://[::1]:2381` when the advertise
//! address is IPv6; `getEtcdCommand` in `cmd/kubeadm/app/phases/etcd/local.go`, kubernetes/kubernetes
//! at 0009808f5c66e87cead133ccc5c6d00149aae951), which answers from the start (measured in the lab
//! tests): `etcd_server_proposals_committed_total` (a gauge of the committed
//! raft index) and `etcd_network_peer_received_bytes_total` (bytes received from peers) give the
//! learner's index and the transfer rate; `etcd_network_snapshot_receive_inflights_total` says a
//! snapshot is on its way (its bytes are counted nowhere until it is applied: measured on etcd
//! 3.5.30, a 45 MiB snapshot at 1 MB/s showed index 0 and 38 KiB received for 50 s, then the
//! leader's index at once). Plain HTTP, read-only, bounded in time and size.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most we read from a metrics listener: etcd's whole exposition is about 200 KiB.
const MAX_BYTES: usize = 4 << 20;

/// What the learner's metrics say.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LearnerMetrics {
    pub committed_index: Option<u64>,
    pub received_bytes: Option<u64>,
    /// A snapshot from a peer is being received (`etcd_network_snapshot_receive_inflights_total`
    /// above 0). Its bytes are not in `received_bytes`, and the committed index stays 0 until it
    /// is applied.
    pub receiving_snapshot: Option<bool>,
}

/// `GET <url>/metrics` (url `http://host:port`), within `timeout`. `None` on any failure: this
/// is a progress figure, never a reason to fail.
pub(crate) async fn read(url: &str, timeout: Duration) -> Option<LearnerMetrics> {
    let hostport = url.strip_prefix("http://")?.trim_end_matches('/');
    let hostport = hostport.strip_suffix("/metrics").unwrap_or(hostport);
    let body = tokio::time::timeout(timeout, async {
        let mut s = TcpStream::connect(hostport).await.ok()?;
        let req = format!("GET /metrics HTTP/1.0\r\nHost: {hostport}\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 16 << 10];
        loop {
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 || buf.len() + n > MAX_BYTES {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Some(String::from_utf8_lossy(&buf).into_owned())
    })
    .await
    .ok()??;
    if !body.starts_with("HTTP/1.") || !body.lines().next()?.contains(" 200") {
        return None;
    }
    Some(parse(&body))
}

pub(crate) fn parse(text: &str) -> LearnerMetrics {
    LearnerMetrics {
        committed_index: sum(text, "etcd_server_proposals_committed_total").map(|v| v as u64),
        received_bytes: sum(text, "etcd_network_peer_received_bytes_total").map(|v| v as u64),
        receiving_snapshot: sum(text, "etcd_network_snapshot_receive_inflights_total")
            .map(|v| v > 0.0),
    }
}

/// The sum of every sample of `name`, labels ignored.
fn sum(text: &str, name: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        if let Some(v) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            *total.get_or_insert(0.0) += v;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_etcds_exposition() {
        let text = "# HELP etcd_server_proposals_committed_total x\n\
                    etcd_server_proposals_committed_total 1234\n\
                    etcd_server_proposals_committed_total_other 9\n\
                    etcd_network_peer_received_bytes_total{From=\"0\"} 10\n\
                    etcd_network_peer_received_bytes_total{From=\"8e9e05c52164694d\"} 2.5e+06\n\
                    etcd_network_snapshot_receive_inflights_total{From=\"8e9e05c52164694d\"} 1\n";
        let m = parse(text);
        assert_eq!(m.committed_index, Some(1234));
        assert_eq!(m.received_bytes, Some(2_500_010));
        assert_eq!(m.receiving_snapshot, Some(true));
        assert_eq!(parse("").committed_index, None);
        assert_eq!(parse("").receiving_snapshot, None);
        let done = "etcd_network_snapshot_receive_inflights_total{From=\"8e\"} 0\n";
        assert_eq!(parse(done).receiving_snapshot, Some(false));
    }
}
