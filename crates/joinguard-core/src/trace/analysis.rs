//! Where on a path latency and loss first appear.
//!
//! The rule is mtr's reading rule: a hop's figure only counts if it persists to every later hop
//! that answered. Routers answer TTL-expired probes on a slow path and rate-limit them, so an
//! intermediate hop can look slow or lossy while the hops behind it are fine; that is the
//! router, not the path. So each hop's latency is taken as the lowest average RTT of it and of
//! every hop behind it (its *floor*), and likewise its loss. The step between two floors is what
//! that hop adds to the path. Pure functions: no I/O.

use std::net::IpAddr;

use serde::Serialize;

use super::{Hop, PathTrace};

/// A latency step smaller than this is noise (the base RTT through one router is ~0.1 ms).
pub const MIN_LATENCY_STEP_MS: f64 = 1.0;
/// A step counts as where latency "first appears" when it is at least this share of the largest
/// step: two smaller steps before one big one are named only if they matter.
const STEP_SHARE: f64 = 0.25;

/// Where the path's latency or loss comes from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Attribution {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyStep>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<LossStep>,
}

/// The first hop that adds a lasting RTT.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyStep {
    pub hop: u8,
    pub address: Option<IpAddr>,
    /// RTT this hop adds over the previous answering hop (floors, ms).
    pub added_ms: f64,
    /// The floor RTT at this hop (ms).
    pub rtt_ms: f64,
}

/// The first hop from which loss persists to the end of the path.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LossStep {
    pub hop: u8,
    pub address: Option<IpAddr>,
    /// The loss that persists from this hop on (percent).
    pub loss_pct: f64,
}

/// Attributes a trace's latency and loss to hops.
pub(crate) fn attribute(t: &PathTrace) -> Attribution {
    let answering: Vec<&Hop> = t.hops.iter().filter(|h| h.received > 0).collect();
    Attribution {
        latency: latency_step(&answering),
        loss: loss_step(&answering),
    }
}

fn latency_step(hops: &[&Hop]) -> Option<LatencyStep> {
    let avg: Vec<f64> = hops.iter().map(|h| h.avg_ms.unwrap_or(0.0)).collect();
    let floors = suffix_min(&avg);
    let steps: Vec<f64> = floors
        .iter()
        .enumerate()
        .map(|(i, f)| f - if i == 0 { 0.0 } else { floors[i - 1] })
        .collect();
    let largest = steps.iter().copied().fold(0.0, f64::max);
    if largest < MIN_LATENCY_STEP_MS {
        return None;
    }
    let bar = (largest * STEP_SHARE).max(MIN_LATENCY_STEP_MS);
    let i = steps.iter().position(|s| *s >= bar)?;
    Some(LatencyStep {
        hop: hops[i].ttl,
        address: hops[i].address,
        added_ms: round1(steps[i]),
        rtt_ms: round1(floors[i]),
    })
}

fn loss_step(hops: &[&Hop]) -> Option<LossStep> {
    let loss: Vec<f64> = hops.iter().map(|h| h.loss_pct).collect();
    let floors = suffix_min(&loss);
    let i = floors.iter().position(|l| *l > 0.0)?;
    Some(LossStep {
        hop: hops[i].ttl,
        address: hops[i].address,
        loss_pct: round1(floors[i]),
    })
}

/// `out[i] = min(xs[i..])`.
fn suffix_min(xs: &[f64]) -> Vec<f64> {
    let mut out = xs.to_vec();
    for i in (0..out.len().saturating_sub(1)).rev() {
        out[i] = out[i].min(out[i + 1]);
    }
    out
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::trace::TraceProtocol;

    pub(crate) fn hop(ttl: u8, avg: Option<f64>, sent: u32, received: u32) -> Hop {
        Hop {
            ttl,
            address: Some(std::net::Ipv4Addr::new(198, 18, 0, ttl + 1).into()),
            other_addresses: vec![],
            name: None,
            sent,
            received,
            loss_pct: if sent == 0 {
                0.0
            } else {
                f64::from(sent - received) * 100.0 / f64::from(sent)
            },
            last_ms: avg,
            min_ms: avg,
            avg_ms: avg,
            max_ms: avg,
            jitter_ms: avg.map(|_| 0.01),
            jitter_max_ms: avg.map(|_| 0.02),
            is_target: false,
            mtu: None,
            mtu_from: None,
        }
    }

    pub(crate) fn path(hops: Vec<Hop>) -> PathTrace {
        PathTrace {
            target: "198.18.0.4".into(),
            address: std::net::Ipv4Addr::new(198, 18, 0, 4).into(),
            protocol: TraceProtocol::Tcp,
            port: Some(2380),
            cycles: 10,
            cycles_sent: 10,
            reached: true,
            final_reply: Some(crate::trace::FinalReply::SynAck),
            hops,
            timed_out: false,
            duration_ms: 2000,
            size: None,
            path_mtu: None,
        }
    }

    #[test]
    fn names_the_hop_where_latency_steps_up_and_stays() {
        let t = path(vec![
            hop(1, Some(0.1), 10, 10),
            hop(2, Some(60.2), 10, 10),
            hop(3, Some(60.3), 10, 10),
        ]);
        let a = attribute(&t);
        let l = a.latency.unwrap();
        assert_eq!((l.hop, l.added_ms), (2, 60.1));
        assert_eq!(
            l.address,
            Some(std::net::Ipv4Addr::new(198, 18, 0, 3).into())
        );
        assert!(a.loss.is_none());
    }

    #[test]
    fn a_slow_router_whose_delay_does_not_persist_is_not_blamed() {
        // Hop 2 answers TTL-expired slowly (control plane), but hop 3 is fast: the path is not.
        let t = path(vec![
            hop(1, Some(0.2), 10, 10),
            hop(2, Some(45.0), 10, 6),
            hop(3, Some(20.3), 10, 10),
        ]);
        let a = attribute(&t);
        let l = a.latency.unwrap();
        assert_eq!(l.hop, 2, "the 20 ms that persists appears at hop 2");
        assert_eq!(l.added_ms, 20.1);
        assert!(a.loss.is_none(), "hop 2's lost replies do not persist");
    }

    #[test]
    fn loss_is_attributed_to_the_first_hop_it_persists_from() {
        let t = path(vec![
            hop(1, Some(0.2), 20, 20),
            hop(2, Some(0.3), 20, 11),
            hop(3, Some(0.4), 20, 10),
        ]);
        let l = attribute(&t).loss.unwrap();
        assert_eq!(l.hop, 2);
        assert_eq!(l.loss_pct, 45.0);
    }

    #[test]
    fn a_clean_path_has_no_attribution_and_dark_rows_are_skipped() {
        let t = path(vec![
            hop(1, Some(0.2), 10, 10),
            hop(2, None, 10, 0),
            hop(3, Some(0.5), 10, 10),
        ]);
        assert_eq!(attribute(&t), Attribution::default());
    }
}
