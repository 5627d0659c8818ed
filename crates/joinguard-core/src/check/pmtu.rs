//! `PathMTU`: whether full-size packets cross to each host, and if not, whether a router says
//! so ("fragmentation needed", which the kernel copes with) or drops them silently (a PMTU
//! blackhole, which stalls the join on its first large transfer: kubernetes/kubeadm #1353).

use super::model::{CheckName, CheckResult, Status};
use super::wording::describe;
use super::Checker;
use crate::probe::fullsize::FullSize;
use crate::probe::pmtu::PathMtu;
use crate::target::Target;

/// The usual fixes, for both the warning and the error.
const FIXES: &str = "set this node's interface MTU (and the members') to the path MTU, clamp \
                     the TCP MSS on the tunnel or VPN (iptables TCPMSS --clamp-mss-to-pmtu), or \
                     let ICMP type 3 code 4 (\"fragmentation needed\") through the firewalls";
/// The same over IPv6, where routers never fragment and Packet Too Big is how a path says its
/// MTU (RFC 4443 3.2; RFC 4890 says firewalls must not drop it).
const FIXES6: &str = "set this node's interface MTU (and the members') to the path MTU, clamp \
                      the TCP MSS on the tunnel or VPN (ip6tables TCPMSS --clamp-mss-to-pmtu), \
                      or let ICMPv6 type 2 (\"Packet Too Big\") through the firewalls (RFC 4890)";

impl Checker {
    /// One result per host: from the ICMP probe (`icmp`, per host) and the TCP exchange with a
    /// member's peer port (`tcp`, per peer target), judged together.
    ///
    /// ICMP alone: ok when packets of the interface MTU cross; a warning when the path MTU is
    /// smaller but a router reports it (the kernel lowers its segment size); an error when
    /// larger packets vanish without a report. TCP then settles what the join needs: a blackhole
    /// for ICMP whose TCP request crossed is a path that clamps the TCP MSS (a warning, not an
    /// error: the join's traffic is TCP), and where ICMP could not run, the TCP exchange judges
    /// alone. A host that answered no echo and had no exchange has no result here:
    /// `PacketLoss` and the reachability checks judge it.
    pub(crate) fn path_mtu<E: std::fmt::Display, F>(
        &self,
        icmp: &[(Target, Result<PathMtu, E>)],
        tcp: &[(Target, Result<FullSize, F>)],
    ) -> Vec<CheckResult> {
        let mut hosts: Vec<&str> = Vec::new();
        for t in icmp
            .iter()
            .map(|(t, _)| t)
            .chain(tcp.iter().map(|(t, _)| t))
        {
            if !hosts.contains(&t.host.as_str()) {
                hosts.push(&t.host);
            }
        }
        hosts
            .into_iter()
            .filter_map(|host| {
                let i = icmp.iter().find(|(t, _)| t.host == host);
                let t = tcp.iter().find(|(t, _)| t.host == host);
                let target = i.map(|(t, _)| t).or(t.map(|(t, _)| t))?;
                let head = format!("{} ({})", describe(target), target.host);
                let by_icmp = match i.map(|(_, r)| r) {
                    Some(Ok(p)) => {
                        let v6 = target.ip().is_some_and(|ip| ip.is_ipv6());
                        judge(&head, p, v6).map_or(Icmp::None, Icmp::Judged)
                    }
                    Some(Err(e)) => {
                        Icmp::NotMeasured(format!("{head}: path MTU not measured ({e})"))
                    }
                    None => Icmp::None,
                };
                let exchange = t.and_then(|(_, r)| r.as_ref().ok());
                let (status, message, measured) = combine(&head, &target.host, by_icmp, exchange)?;
                Some(CheckResult {
                    name: CheckName::PathMtu,
                    target: target.endpoint.clone(),
                    status,
                    message,
                    measured,
                    threshold: i
                        .and_then(|(_, r)| r.as_ref().ok())
                        .map(|p| f64::from(p.interface_mtu)),
                })
            })
            .collect()
    }
}

type Judged = (Status, String, Option<f64>);

/// What the ICMP side said about a host.
enum Icmp {
    /// Judged from the echoes.
    Judged(Judged),
    /// The probe could not run (the message says why).
    NotMeasured(String),
    /// No result: no probe, or no echo of any size answered.
    None,
}

/// The ICMP judgement with the TCP exchange's evidence (if any) for `host`.
fn combine(head: &str, host: &str, icmp: Icmp, tcp: Option<&FullSize>) -> Option<Judged> {
    let Some(x) = tcp else {
        return match icmp {
            Icmp::Judged(j) => Some(j),
            Icmp::NotMeasured(message) => Some((Status::Warning, message, None)),
            Icmp::None => None,
        };
    };
    let req = x.request_bytes;
    let inbound = if x.inbound_full() {
        format!(
            ", and the member's answers came in segments of up to {} bytes",
            x.rcv_mss
        )
    } else {
        String::new()
    };
    let crossed = format!(
        "a {req}-byte request to the peer port crossed in segments of {} bytes (the TCP MSS \
         this node sends with){inbound}",
        x.snd_mss
    );
    let why = x.failure.as_deref().unwrap_or("no answer");
    let lost = format!(
        "a {req}-byte request to the peer port got no answer ({why}) after a TLS handshake that \
         completed"
    );
    Some(match (icmp, x.outbound_ok()) {
        // ICMP saw a blackhole, TCP crossed: the path clamps the MSS (the usual fix).
        (Icmp::Judged((Status::Error, _, measured)), true) => (
            Status::Warning,
            format!(
                "{head}: ICMP echoes above {} bytes are dropped without \"fragmentation \
                 needed\", but TCP fits the path: {crossed}. The path clamps the TCP MSS, so the \
                 join's TCP traffic (the learner's snapshot, large reads, the kubeadm-certs \
                 Secret) crosses; larger packets of other protocols (ICMP, an overlay's UDP) \
                 still vanish. To fix that too: set this node's interface MTU (and the \
                 members') to the path MTU, or let ICMP type 3 code 4 (\"fragmentation \
                 needed\") through the firewalls",
                measured.map_or("the largest answered".to_string(), |m| format!("{m:.0}"))
            ),
            measured,
        ),
        (Icmp::Judged((Status::Error, message, measured)), false) => (
            Status::Error,
            format!("{message} On TCP too: {lost}."),
            measured,
        ),
        // ICMP found nothing wrong and TCP crossed: ICMP's word stands.
        (Icmp::Judged(j), true) => j,
        (Icmp::Judged((Status::Ok, _, measured)), false) => (
            Status::Warning,
            format!(
                "{head}: full-size ICMP echoes cross, but {lost}: full-size TCP segments toward \
                 this member may vanish (a middlebox that treats TCP differently), or the member \
                 is slow to answer. `joinguard trace {host} --protocol tcp --port 2380 --size \
                 1500` shows where large SYNs stop"
            ),
            measured,
        ),
        (Icmp::Judged((_, message, measured)), false) => (
            Status::Warning,
            format!("{message}. On TCP: {lost}"),
            measured,
        ),
        // ICMP did not run: TCP judges.
        (Icmp::NotMeasured(message), true) => (
            Status::Ok,
            format!("{head}: full-size TCP segments cross: {crossed} ({message})"),
            None,
        ),
        (Icmp::NotMeasured(message), false) => {
            (Status::Warning, format!("{message}. On TCP: {lost}"), None)
        }
        // No ICMP result (no privilege, or no echo answered at any size): TCP alone.
        (Icmp::None, true) => (
            Status::Ok,
            format!("{head}: full-size TCP segments cross: {crossed}"),
            None,
        ),
        (Icmp::None, false) => (
            Status::Warning,
            format!(
                "{head}: {lost}: full-size segments toward this member may vanish (a path MTU \
                 blackhole), or the member is slow to answer; the ICMP path MTU probe, which \
                 would tell, needs root or CAP_NET_RAW"
            ),
            None,
        ),
    })
}

fn judge(head: &str, p: &PathMtu, v6: bool) -> Option<(Status, String, Option<f64>)> {
    let (fixes, answer) = if v6 {
        (FIXES6, "ICMPv6 \"Packet Too Big\"")
    } else {
        (FIXES, "ICMP \"fragmentation needed\"")
    };
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
            "{from} answers larger packets with {answer} (MTU {mtu})"
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
                 each time a connection learns it. To avoid it: {fixes}"
            ),
            Some(f64::from(ok)),
        ),
        None => (
            Status::Error,
            format!(
                "{head}: packets above {ok} bytes are dropped without {answer} \
                 (largest answered {ok}{lost}; interface MTU {iface}): a path MTU blackhole. \
                 Small requests work, but full-size segments do not cross, so the learner's \
                 snapshot, large reads and the kubeadm-certs Secret stall (kubernetes/kubeadm \
                 #1353). Fix: {fixes}"
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

    fn one(p: Result<PathMtu, &str>) -> CheckResult {
        let mut r = Checker::default().path_mtu::<_, &str>(&[(member(), p)], &[]);
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
        p.frag_needed = Some((1400, Ipv4Addr::new(198, 18, 0, 3).into()));
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
        let none = Checker::default()
            .path_mtu::<&str, &str>(&[(member(), Ok(found(None, Some((576, 2)))))], &[]);
        assert!(none.is_empty(), "{none:?}");
        let r = one(Err("ICMP socket: no buffer space"));
        assert_eq!(r.status, Status::Warning);
        assert!(r.message.contains("not measured"), "{}", r.message);
    }

    fn peer() -> Target {
        Target {
            kind: TargetKind::EtcdPeer,
            endpoint: "198.18.0.3:2380".into(),
            port: 2380,
            ..member()
        }
    }

    fn exchange(snd: u32, answered: bool) -> FullSize {
        FullSize {
            snd_mss: snd,
            rcv_mss: snd,
            adv_mss: 1460,
            pmtu: 1500,
            request_bytes: 4190,
            answered_ms: answered.then_some(1.5),
            failure: (!answered).then(|| "no answer within 4990 ms".into()),
            retransmits: 0,
        }
    }

    fn both(icmp: Option<Result<PathMtu, &str>>, tcp: FullSize) -> CheckResult {
        let icmp: Vec<_> = icmp.into_iter().map(|r| (member(), r)).collect();
        let mut r = Checker::default().path_mtu::<_, &str>(&icmp, &[(peer(), Ok(tcp))]);
        assert_eq!(r.len(), 1, "one result per host: {r:?}");
        r.remove(0)
    }

    #[test]
    fn an_icmp_blackhole_that_tcp_crosses_is_a_clamped_mss_and_a_warning() {
        let r = both(
            Some(Ok(found(Some(1400), Some((1401, 4))))),
            exchange(1308, true),
        );
        assert_eq!(r.status, Status::Warning, "{}", r.message);
        assert_eq!(r.target, "198.18.0.3:2379", "on the ICMP stream's target");
        for want in [
            "ICMP echoes above 1400 bytes are dropped",
            "clamps the TCP MSS",
            "segments of 1308 bytes",
        ] {
            assert!(r.message.contains(want), "{want}: {}", r.message);
        }
    }

    #[test]
    fn an_icmp_blackhole_that_tcp_cannot_cross_stays_an_error_with_both() {
        let r = both(
            Some(Ok(found(Some(1400), Some((1401, 4))))),
            exchange(1448, false),
        );
        assert_eq!(r.status, Status::Error, "{}", r.message);
        assert!(
            r.message.contains("On TCP too: a 4190-byte request"),
            "{}",
            r.message
        );
    }

    #[test]
    fn without_icmp_the_tcp_exchange_judges_and_never_errs_alone() {
        let ok = both(None, exchange(1448, true));
        assert_eq!(ok.status, Status::Ok, "{}", ok.message);
        assert_eq!(ok.target, "198.18.0.3:2380");
        assert!(
            ok.message.contains("full-size TCP segments cross"),
            "{}",
            ok.message
        );
        let not_measured = both(Some(Err("ICMP socket: busy")), exchange(1448, true));
        assert_eq!(not_measured.status, Status::Ok, "{}", not_measured.message);
        let lost = both(None, exchange(1448, false));
        assert_eq!(lost.status, Status::Warning, "{}", lost.message);
        assert!(lost.message.contains("CAP_NET_RAW"), "{}", lost.message);
        let lost = both(Some(Ok(found(Some(1500), None))), exchange(1448, false));
        assert_eq!(lost.status, Status::Warning, "{}", lost.message);
        assert!(lost.message.contains("--size 1500"), "{}", lost.message);
        // A frag-needed warning keeps its word when TCP crosses.
        let mut p = found(Some(1400), Some((1401, 4)));
        p.frag_needed = Some((1400, Ipv4Addr::new(198, 18, 0, 3).into()));
        let w = both(Some(Ok(p)), exchange(1348, true));
        assert_eq!(w.status, Status::Warning);
        assert!(w.message.contains("path MTU 1400 bytes"), "{}", w.message);
    }
}
