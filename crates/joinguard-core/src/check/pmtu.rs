//! `PathMTU`: whether full-size packets cross to each host, and if not, whether a router says
//! so ("fragmentation needed", which the kernel copes with) or drops them silently (a PMTU
//! blackhole, which stalls the join on its first large transfer: kubernetes/kubeadm #1353).

use super::model::{CheckName, CheckResult, Status};
use super::wording::describe;
use super::Checker;
use crate::probe::pmtu::PathMtu;
use crate::target::Target;

/// The usual fixes, for both the warning and the error.
const FIXES: &str = "set this node's interface MTU (and the members') to the path MTU, clamp \
                     the TCP MSS on the tunnel or VPN (iptables TCPMSS --clamp-mss-to-pmtu), or \
                     let ICMP type 3 code 4 (\"fragmentation needed\") through the firewalls";

impl Checker {
    /// One result per host probed: ok when packets of the interface MTU cross; a warning when
    /// the path MTU is smaller but a router reports it (the kernel lowers its segment size); an
    /// error when larger packets vanish without a report. A host that answered no echo of any
    /// size has no result here: `PacketLoss` and the reachability checks judge it.
    pub fn path_mtu(&self, results: &[(Target, Result<PathMtu, String>)]) -> Vec<CheckResult> {
        results
            .iter()
            .filter_map(|(target, r)| {
                let head = format!("{} ({})", describe(target), target.host);
                let (status, message, measured) = match r {
                    Err(e) => (
                        Status::Warning,
                        format!("{head}: path MTU not measured ({e})"),
                        None,
                    ),
                    Ok(p) => judge(&head, p)?,
                };
                Some(CheckResult {
                    name: CheckName::PathMtu,
                    target: target.endpoint.clone(),
                    status,
                    message,
                    measured,
                    threshold: r.as_ref().ok().map(|p| f64::from(p.interface_mtu)),
                })
            })
            .collect()
    }
}

fn judge(head: &str, p: &PathMtu) -> Option<(Status, String, Option<f64>)> {
    let iface = p.interface_mtu;
    let ok = p.largest_ok?;
    if p.full_size_crosses() {
        return Some((
            Status::Ok,
            format!(
                "{head}: {iface}-byte packets (the interface MTU) cross unfragmented with DF set"
            ),
            Some(f64::from(ok)),
        ));
    }
    let lost = match p.smallest_lost {
        Some((size, copies)) => format!("; {size} bytes: {copies} of {copies} lost"),
        None => String::new(),
    };
    let reported = match (p.frag_needed, p.cached_mtu) {
        (Some((mtu, from)), _) => Some(format!(
            "{from} answers larger packets with ICMP \"fragmentation needed\" (MTU {mtu})"
        )),
        (None, Some(cached)) => Some(format!(
            "the kernel already holds a path MTU of {cached} for this route (a router reported \
             it earlier)"
        )),
        (None, None) => None,
    };
    Some(match reported {
        Some(how) => (
            Status::Warning,
            format!(
                "{head}: path MTU {ok} bytes, below the interface's {iface}; {how}, so TCP lowers \
                 its segment size and the join's large transfers still cross, a round trip later \
                 each time a connection learns it. To avoid it: {FIXES}"
            ),
            Some(f64::from(ok)),
        ),
        None => (
            Status::Error,
            format!(
                "{head}: packets above {ok} bytes are dropped without \"fragmentation needed\" \
                 (largest answered {ok}{lost}; interface MTU {iface}): a path MTU blackhole. \
                 Small requests work, but full-size segments do not cross, so the learner's \
                 snapshot, large reads and the kubeadm-certs Secret stall (kubernetes/kubeadm \
                 #1353). Fix: {FIXES}"
            ),
            Some(f64::from(ok)),
        ),
    })
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use super::*;
    use crate::target::TargetKind;

    fn member() -> Target {
        Target {
            kind: TargetKind::EtcdClient,
            endpoint: "198.18.0.3:2379".into(),
            host: "198.18.0.3".into(),
            port: 2379,
            tls: true,
            member: Some("m2".into()),
        }
    }

    fn found(ok: Option<u16>, lost: Option<(u16, u32)>) -> PathMtu {
        PathMtu {
            interface_mtu: 1500,
            cached_mtu: None,
            largest_ok: ok,
            smallest_lost: lost,
            frag_needed: None,
            rounds: 3,
            took: Duration::from_millis(180),
        }
    }

    fn one(p: Result<PathMtu, String>) -> CheckResult {
        let mut r = Checker::default().path_mtu(&[(member(), p)]);
        assert_eq!(r.len(), 1, "{r:?}");
        r.remove(0)
    }

    #[test]
    fn full_size_crossing_is_ok() {
        let r = one(Ok(found(Some(1500), None)));
        assert_eq!(r.status, Status::Ok, "{}", r.message);
        assert_eq!(r.name.as_str(), "PathMTU");
    }

    #[test]
    fn a_silent_drop_of_large_packets_is_an_error_naming_the_mtu_and_the_fixes() {
        let r = one(Ok(found(Some(1400), Some((1401, 4)))));
        assert_eq!(r.status, Status::Error, "{}", r.message);
        assert_eq!(r.measured, Some(1400.0));
        for want in [
            "packets above 1400 bytes are dropped without",
            "1401 bytes: 4 of 4 lost",
            "blackhole",
            "kubeadm #1353",
            "clamp",
            "type 3 code 4",
        ] {
            assert!(r.message.contains(want), "{want}: {}", r.message);
        }
    }

    #[test]
    fn a_reported_smaller_mtu_is_a_warning() {
        let mut p = found(Some(1400), Some((1401, 4)));
        p.frag_needed = Some((1400, Ipv4Addr::new(198, 18, 0, 3)));
        let r = one(Ok(p));
        assert_eq!(r.status, Status::Warning, "{}", r.message);
        assert!(r.message.contains("path MTU 1400 bytes"), "{}", r.message);
        assert!(r.message.contains("(MTU 1400)"), "{}", r.message);
        // A path MTU the kernel learned earlier says the same.
        let mut p = found(Some(1400), Some((1401, 4)));
        p.cached_mtu = Some(1400);
        assert_eq!(one(Ok(p)).status, Status::Warning);
    }

    #[test]
    fn a_host_that_answers_no_echo_is_left_to_packet_loss() {
        let none = Checker::default().path_mtu(&[(member(), Ok(found(None, Some((576, 2)))))]);
        assert!(none.is_empty(), "{none:?}");
        let r = one(Err("ICMP socket: no buffer space".into()));
        assert_eq!(r.status, Status::Warning);
        assert!(r.message.contains("not measured"), "{}", r.message);
    }
}
