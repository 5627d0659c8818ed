//! How a Go client (kubeadm, the kubelet, Cluster API) dials a name with addresses of both
//! families, so joinguard's connects to a dual-stack endpoint see what the join will see.
//!
//! Go sorts a name's addresses by RFC 6724 destination address selection
//! (golang/go `src/net/addrselect.go`, `sortByRFC6724`: rules 1, 2, 5, 6, 8 and 9, the last for
//! IPv6 only, with RFC 6724's default policy table), then `Dialer.DialContext` splits them by
//! the family of the first (`partition`): those of its family are the primaries, the others the
//! fallbacks. The primaries are dialled in turn; the fallbacks start 300 ms later
//! (`fallbackDelay`, RFC 6555 "Happy Eyeballs", Go >= 1.12 by default), or at once if the
//! primaries fail first; the first connection wins, and when both fail the primaries' error is
//! returned (`dialParallel`). Each address of a group gets an equal share of the time left, but
//! at least 2 s (`partialDeadline`).
//!
//! One difference is known: Go's own resolver returns a name found in `/etc/hosts` unsorted
//! (`goLookupIPCNAMEOrder` returns before sorting), and a Go binary built with cgo takes
//! glibc's order; this module sorts every name, as Go does for DNS answers.
//!
//! This module owns the ordering and the race; it does no name lookup.

use std::cmp::Ordering;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// Go's `fallbackDelay` when the dialer sets none (`net.Dialer.FallbackDelay` zero).
pub const FALLBACK_DELAY: Duration = Duration::from_millis(300);
/// Go's least share of the deadline for one address of a group (`partialDeadline`'s
/// `saneMinimum`).
const MIN_SHARE: Duration = Duration::from_secs(2);

/// One row of RFC 6724's default policy table (section 2.1), as Go's `rfc6724policyTable`.
struct Policy {
    prefix: Ipv6Addr,
    bits: u32,
    precedence: u8,
    label: u8,
}

const fn policy(prefix: Ipv6Addr, bits: u32, precedence: u8, label: u8) -> Policy {
    Policy {
        prefix,
        bits,
        precedence,
        label,
    }
}

/// Longest prefixes first, so the first match is the longest.
const POLICY: [Policy; 9] = [
    policy(Ipv6Addr::LOCALHOST, 128, 50, 0),
    policy(Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96, 35, 4),
    policy(Ipv6Addr::UNSPECIFIED, 96, 1, 3),
    policy(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32, 5, 5),
    policy(Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, 30, 2),
    policy(Ipv6Addr::new(0x3ffe, 0, 0, 0, 0, 0, 0, 0), 16, 1, 12),
    policy(Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, 1, 11),
    policy(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, 3, 13),
    policy(Ipv6Addr::UNSPECIFIED, 0, 40, 1),
];

/// An address as RFC 6724 classifies it: IPv4 as IPv4-mapped IPv6.
fn mapped(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

fn classify(ip: IpAddr) -> &'static Policy {
    let a = u128::from(mapped(ip));
    POLICY
        .iter()
        .find(|p| {
            let mask = if p.bits == 0 {
                0
            } else {
                u128::MAX << (128 - p.bits)
            };
            a & mask == u128::from(p.prefix) & mask
        })
        .unwrap_or(&POLICY[8])
}

/// RFC 6724's scope as Go's `classifyScope` gives it: link-local (2) for loopback and
/// link-local addresses of both families, site-local (5) for fec0::/10, the multicast scope for
/// multicast, global (14) otherwise.
fn scope(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() || v4.is_link_local() => 2,
        IpAddr::V4(_) => 14,
        IpAddr::V6(v6) if v6.is_multicast() => v6.octets()[1] & 0x0f,
        IpAddr::V6(v6) if v6.is_loopback() || v6.segments()[0] & 0xffc0 == 0xfe80 => 2,
        IpAddr::V6(v6) if v6.segments()[0] & 0xffc0 == 0xfec0 => 5,
        IpAddr::V6(_) => 14,
    }
}

/// Go's `commonPrefixLen`: over the first 64 bits only (the prefix, not the interface id).
fn common_prefix_len(a: Ipv6Addr, b: Ipv6Addr) -> u32 {
    (u128::from(a) ^ u128::from(b)).leading_zeros().min(64)
}

/// The source address the kernel would use toward `dst`, as Go finds it (a UDP connect; nothing
/// is sent); `None` when there is no route (RFC 6724 rule 1: an unusable destination).
pub fn source_for(dst: IpAddr) -> Option<IpAddr> {
    let any: IpAddr = match dst {
        IpAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let s = UdpSocket::bind((any, 0)).ok()?;
    s.connect((dst, 9)).ok()?;
    s.local_addr().ok().map(|a| a.ip())
}

/// Orders `dsts` as Go's `sortByRFC6724` does, given each one's source address (`None`:
/// unreachable). Stable: equal addresses keep the resolver's order (rule 10).
pub fn sort_rfc6724(dsts: &mut [(SocketAddr, Option<IpAddr>)]) {
    dsts.sort_by(|(da, sa), (db, sb)| compare(da.ip(), *sa, db.ip(), *sb));
}

fn compare(da: IpAddr, sa: Option<IpAddr>, db: IpAddr, sb: Option<IpAddr>) -> Ordering {
    let prefer_a = Ordering::Less;
    let prefer_b = Ordering::Greater;
    // Rule 1: avoid unusable destinations.
    match (sa, sb) {
        (None, None) => return Ordering::Equal,
        (Some(_), None) => return prefer_a,
        (None, Some(_)) => return prefer_b,
        _ => {}
    }
    let (Some(sa), Some(sb)) = (sa, sb) else {
        return Ordering::Equal;
    };
    // Rule 2: prefer matching scope.
    let (a_match, b_match) = (scope(da) == scope(sa), scope(db) == scope(sb));
    if a_match != b_match {
        return if a_match { prefer_a } else { prefer_b };
    }
    // Rule 5: prefer matching label.
    let (a_label, b_label) = (
        classify(da).label == classify(sa).label,
        classify(db).label == classify(sb).label,
    );
    if a_label != b_label {
        return if a_label { prefer_a } else { prefer_b };
    }
    // Rule 6: prefer higher precedence.
    let (pa, pb) = (classify(da).precedence, classify(db).precedence);
    if pa != pb {
        return pb.cmp(&pa);
    }
    // Rule 8: prefer smaller scope.
    let (sca, scb) = (scope(da), scope(db));
    if sca != scb {
        return sca.cmp(&scb);
    }
    // Rule 9: longest matching prefix, IPv6 only (Go: issues 13283, 18518).
    if let (IpAddr::V6(a6), IpAddr::V6(b6), IpAddr::V6(s6a), IpAddr::V6(s6b)) = (da, db, sa, sb) {
        let (la, lb) = (common_prefix_len(s6a, a6), common_prefix_len(s6b, b6));
        if la != lb {
            return lb.cmp(&la);
        }
    }
    Ordering::Equal
}

/// The addresses in the order Go dials them, split as `DialContext` splits them: the family of
/// the first is primary, the rest are the fallbacks.
pub fn go_order(addrs: &[SocketAddr]) -> (Vec<SocketAddr>, Vec<SocketAddr>) {
    let mut with_src: Vec<(SocketAddr, Option<IpAddr>)> =
        addrs.iter().map(|a| (*a, source_for(a.ip()))).collect();
    sort_rfc6724(&mut with_src);
    let sorted: Vec<SocketAddr> = with_src.into_iter().map(|(a, _)| a).collect();
    let Some(first) = sorted.first() else {
        return (Vec::new(), Vec::new());
    };
    let v4 = first.is_ipv4();
    sorted.iter().partition(|a| a.is_ipv4() == v4)
}

/// Why a dial failed: the last error of the group that decided it (the primaries' when both
/// failed), or the deadline.
#[derive(Debug)]
pub enum DialError {
    Io(io::Error),
    Timeout,
}

/// Dials `group` in turn until `deadline`, each address with its share of the time left (at
/// least [`MIN_SHARE`]), as Go's `dialSerial`.
async fn serial(
    group: &[SocketAddr],
    deadline: Instant,
) -> Result<(TcpStream, SocketAddr), DialError> {
    // Go's dialSerial returns the first error.
    let mut first: Option<DialError> = None;
    for (i, addr) in group.iter().enumerate() {
        let now = Instant::now();
        if now >= deadline {
            return Err(first.unwrap_or(DialError::Timeout));
        }
        let left = deadline - now;
        let share = (left / u32::try_from(group.len() - i).unwrap_or(1)).max(MIN_SHARE);
        let until = (now + share).min(deadline);
        let e = match tokio::time::timeout_at(until, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => return Ok((s, *addr)),
            Ok(Err(e)) => DialError::Io(e),
            Err(_) => DialError::Timeout,
        };
        first.get_or_insert(e);
    }
    Err(first.unwrap_or(DialError::Timeout))
}

/// Connects to one of `addrs` as Go's dialer would (see the module's docs), by `deadline`.
/// Returns the stream and the address that answered.
pub async fn connect(
    addrs: &[SocketAddr],
    deadline: Instant,
) -> Result<(TcpStream, SocketAddr), DialError> {
    let (primaries, fallbacks) = go_order(addrs);
    if fallbacks.is_empty() {
        return serial(&primaries, deadline).await;
    }
    let primary = serial(&primaries, deadline);
    tokio::pin!(primary);
    // The primaries alone until the fallback delay, or until they fail.
    let first = tokio::select! {
        r = &mut primary => Some(r),
        _ = tokio::time::sleep(FALLBACK_DELAY) => None,
    };
    let primary_err = match first {
        Some(Ok(c)) => return Ok(c),
        Some(Err(e)) => Some(e),
        None => None,
    };
    let fallback = serial(&fallbacks, deadline);
    tokio::pin!(fallback);
    match primary_err {
        // The primaries failed: the fallbacks alone; on failure, the primaries' error.
        Some(e) => fallback.await.map_err(|_| e),
        None => {
            tokio::select! {
                r = &mut primary => match r {
                    Ok(c) => Ok(c),
                    Err(e) => fallback.await.map_err(|_| e),
                },
                r = &mut fallback => match r {
                    Ok(c) => Ok(c),
                    Err(_) => primary.await,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn order(dsts: &[(&str, Option<&str>)]) -> Vec<String> {
        let mut v: Vec<(SocketAddr, Option<IpAddr>)> = dsts
            .iter()
            .map(|(d, s)| (sa(d), s.map(|s| s.parse().unwrap())))
            .collect();
        sort_rfc6724(&mut v);
        v.into_iter().map(|(a, _)| a.to_string()).collect()
    }

    /// Go's own cases (golang/go src/net/addrselect_test.go, TestSortByRFC6724, re-expressed):
    /// global IPv6 before IPv4 with both usable; an unusable destination last; a ULA against
    /// IPv4 goes after it (precedence 3 against 35); loopback first.
    #[test]
    fn addresses_sort_as_go_sorts_them() {
        assert_eq!(
            order(&[
                ("198.51.100.121:443", Some("198.51.100.117")),
                ("[2001:db8:1::1]:443", Some("2001:db8:1::2")),
            ]),
            ["[2001:db8:1::1]:443", "198.51.100.121:443"],
            "a global IPv6 address (::/0, precedence 40) before IPv4 (35)"
        );
        assert_eq!(
            order(&[
                ("198.51.100.121:443", Some("198.51.100.117")),
                ("[2001:0:5ef5:79fd::1]:443", Some("2001:0:5ef5:79fd::2")),
            ]),
            ["198.51.100.121:443", "[2001:0:5ef5:79fd::1]:443"],
            "Teredo (2001::/32, precedence 5) after IPv4"
        );
        assert_eq!(
            order(&[
                ("198.51.100.121:443", Some("198.51.100.117")),
                ("[2600:1f18::1]:443", Some("2600:1f18::2")),
            ]),
            ["[2600:1f18::1]:443", "198.51.100.121:443"],
            "global IPv6 (precedence 40) before IPv4 (35)"
        );
        assert_eq!(
            order(&[
                ("[2600:1f18::1]:443", None),
                ("198.51.100.121:443", Some("198.51.100.117")),
            ]),
            ["198.51.100.121:443", "[2600:1f18::1]:443"],
            "rule 1: no route to the IPv6 address"
        );
        assert_eq!(
            order(&[
                ("[fd00:198:18::5]:6443", Some("fd00:198:18::2")),
                ("198.18.0.5:6443", Some("198.18.0.2")),
            ]),
            ["198.18.0.5:6443", "[fd00:198:18::5]:6443"],
            "a unique-local address (precedence 3) after IPv4 (35)"
        );
        assert_eq!(
            order(&[
                ("127.0.0.1:6443", Some("127.0.0.1")),
                ("[::1]:6443", Some("::1")),
            ]),
            ["[::1]:6443", "127.0.0.1:6443"],
            "::1 (precedence 50) first"
        );
        // Rule 9 among IPv6 addresses: the longer common prefix with the source first.
        assert_eq!(
            order(&[
                ("[2600:1f18:aaaa::1]:443", Some("2600:1f18:bbbb::2")),
                ("[2600:1f18:bbbb::1]:443", Some("2600:1f18:bbbb::2")),
            ]),
            ["[2600:1f18:bbbb::1]:443", "[2600:1f18:aaaa::1]:443"]
        );
    }

    /// Happy Eyeballs on loopback: the primary (::1) refuses, so the fallback (127.0.0.1) is
    /// dialled at once, without the 300 ms delay. (A dark primary, where the delay applies, needs
    /// a lab: `tests/lab/ipv6.rs`.)
    #[tokio::test]
    async fn a_refused_primary_falls_back_at_once() {
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = v4.local_addr().unwrap().port();
        // Nothing listens on [::1]:port (an IPv4 socket), so the primary is refused.
        let addrs = [
            sa(&format!("[::1]:{port}")),
            sa(&format!("127.0.0.1:{port}")),
        ];
        let (p, f) = go_order(&addrs);
        assert_eq!(
            (p[0].is_ipv6(), f[0].is_ipv4()),
            (true, true),
            "::1 is primary"
        );
        let t0 = Instant::now();
        let (_, peer) = connect(&addrs, Instant::now() + Duration::from_secs(5))
            .await
            .expect("the fallback connects");
        assert_eq!(peer, addrs[1]);
        assert!(
            t0.elapsed() < FALLBACK_DELAY,
            "no fallback delay after a refusal"
        );
    }
}
