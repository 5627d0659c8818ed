//! Path MTU: the largest IP packet that crosses to a host unfragmented, and whether a router
//! says so (ICMP "fragmentation needed", ICMPv6 Packet Too Big) or drops bigger packets
//! silently (a PMTU blackhole).
//!
//! Every other probe is small. A path whose MTU is below the interfaces' (an overlay, a VPN) and
//! whose firewall eats ICMP passes them all, then stalls on the first full-size segment: the
//! learner's snapshot, a large Range, the kubeadm-certs Secret (kubernetes/kubeadm #1353). So this
//! probe sends ICMP echoes of chosen sizes with DF set, all of one round at once, and refines
//! between the largest answered and the smallest lost. The socket uses `IP_PMTUDISC_PROBE`: DF
//! set, and neither the kernel's cached path MTU nor its fragmentation decides what goes out.
//! A "fragmentation needed" (ICMP type 3 code 4) about one of our echoes is recorded with the
//! MTU it carries, from whichever router sent it.
//!
//! Over IPv6 the same probe sends ICMPv6 echoes with `IPV6_PMTUDISC_PROBE` (the device MTU, no
//! local fragmentation, the cached path MTU ignored), never below IPv6's minimum MTU of 1,280
//! bytes (RFC 8200 section 5), and reads a Packet Too Big (ICMPv6 type 2, RFC 4443) quoting one
//! of our echoes as "fragmentation needed": IPv6 routers never fragment, so it is the only way a
//! path says its MTU.
//!
//! This module owns the probe and its wire parsing; judging is `check::pmtu`'s.

#![allow(unsafe_code)] // setsockopt/getsockopt, and reading into MaybeUninit bytes.

use std::collections::BTreeMap;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::Serialize;
use socket2::{SockAddr, Socket};
use tokio::io::unix::AsyncFd;

use super::icmp::{raw_socket, raw_socket6, IcmpError};
use crate::wire::packet;

/// IPv4 and ICMP echo headers: an echo of `size` bytes on the wire carries `size - 28` of data.
const HEADERS: u16 = packet::ECHO_HEADERS;
/// IPv6 and ICMPv6 echo headers (40 + 8).
const HEADERS6: u16 = 48;
/// The smallest size probed: every IPv4 link carries 576 (RFC 791).
pub const MIN_PROBE: u16 = 576;
/// The smallest size probed over IPv6: every IPv6 link carries 1,280 (RFC 8200 section 5).
pub const MIN_PROBE6: u16 = 1280;
/// The largest size probed: jumbo frames.
pub const MAX_PROBE: u16 = 9000;
/// Copies of each size per round: one lost echo must not read as an MTU.
const COPIES: usize = 2;
/// Rounds at most: the first spans the usual MTUs, the others refine.
const MAX_ROUNDS: u32 = 4;
/// A round without any answer gives up after this long (a host that answers no echo).
const SILENT_ROUND: Duration = Duration::from_secs(1);
/// How long after its last echo a size that got no answer is still waited for before it counts
/// as lost (as `ping -W 1`, and the loss stream's late limit).
const LATE: Duration = Duration::from_secs(1);

/// What the probe found for one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PathMtu {
    /// The MTU of the interface the route to the host leaves by, at most 9000 (the largest size
    /// probed).
    pub interface_mtu: u16,
    /// The kernel's path MTU for the route, when it is below the interface's: a router already
    /// reported a smaller MTU (an earlier "fragmentation needed").
    pub cached_mtu: Option<u16>,
    /// The largest echo (whole IP packet, bytes) that was answered.
    pub largest_ok: Option<u16>,
    /// The smallest echo larger than `largest_ok` that was never answered, and how many copies of
    /// it were sent.
    pub smallest_lost: Option<(u16, u32)>,
    /// The next-hop MTU of a "fragmentation needed" (IPv6: Packet Too Big) about one of our
    /// echoes, and its sender.
    pub frag_needed: Option<(u16, IpAddr)>,
    /// Rounds sent (each about one round trip).
    pub rounds: u32,
    /// Time the probe took.
    pub took: Duration,
}

impl PathMtu {
    /// Whether full-size packets (the interface MTU) cross.
    pub(crate) fn full_size_crosses(&self) -> bool {
        self.largest_ok.is_some_and(|ok| ok >= self.interface_mtu)
    }
}

/// Probes the path MTU to `dst` within `budget`.
pub async fn probe(dst: IpAddr, budget: Duration) -> Result<PathMtu, IcmpError> {
    let started = Instant::now();
    let deadline = started + budget;
    let ident: u16 = rand::random();
    let (sock, min_probe) = match dst {
        IpAddr::V4(v4) => {
            let sock = raw_socket()?;
            // Only this probe's echo replies and the ICMP errors quoting a packet to `dst` (the
            // trace's filter: "fragmentation needed" is a Destination Unreachable).
            super::bpf::attach(&sock, &super::bpf::trace_icmp(v4, ident))?;
            set_pmtudisc_probe(&sock)?;
            (sock, MIN_PROBE)
        }
        IpAddr::V6(v6) => {
            // Not connected: a Packet Too Big comes from a router, not from `dst`.
            let sock = raw_socket6()?;
            super::bpf::attach(&sock, &super::bpf::pmtu6(v6, ident))?;
            set_pmtudisc_probe6(&sock)?;
            (sock, MIN_PROBE6)
        }
    };
    sock.set_nonblocking(true)?;
    let (interface_mtu, route_mtu) = mtus(dst);
    // SAFETY: `sock` owns its fd, which stays open until the AsyncFd (which owns it) is dropped.
    let sock = unsafe { AsyncFd::register(sock) }.map_err(|e| IcmpError::Io(e.into()))?;
    let mut state = Probe {
        sock,
        dst,
        ident,
        seq: 0,
        sent: BTreeMap::new(),
        by_seq: BTreeMap::new(),
        answered: BTreeMap::new(),
        frag_needed: None,
    };
    let top = interface_mtu.max(min_probe);
    let mut sizes: Vec<u16> = [
        MIN_PROBE, 1000, 1200, 1280, 1400, 1420, 1450, 1472, 1480, 1492,
    ]
    .into_iter()
    .filter(|s| *s >= min_probe && *s < top)
    .chain([top])
    .collect();
    let mut rounds = 0;
    // Whether the lost sizes above the largest answered one were given LATE to come back.
    let mut settled = false;
    loop {
        while rounds < MAX_ROUNDS && !sizes.is_empty() && Instant::now() < deadline {
            rounds += 1;
            state.round(&sizes, deadline).await;
            match state.refine() {
                Some(next) => sizes = next,
                None => break,
            }
        }
        // Before a size counts as lost, its echoes get LATE to come back: jitter or a queue can
        // hold a reply past a round's window (a 30 ms jitter made 1500 bytes look lost). A
        // late answer that moves the bounds earns one more refining round.
        let (Some(lo), false) = (state.largest_ok(), settled) else {
            break;
        };
        let Some(hi) = state.smallest_lost_above(lo) else {
            break;
        };
        settled = true;
        let until = (state.last_sent_above(lo) + LATE).min(deadline);
        state
            .listen(until, |p| p.smallest_lost_above(lo) != Some(hi))
            .await;
        match state.refine() {
            Some(next) if state.largest_ok() != Some(lo) => {
                sizes = next;
                rounds = rounds.min(MAX_ROUNDS - 1);
            }
            _ => break,
        }
    }
    let largest_ok = state.largest_ok();
    let smallest_lost = largest_ok
        .and_then(|lo| state.smallest_lost_above(lo))
        .or_else(|| state.sent.keys().next().copied())
        .filter(|s| !state.answered.contains_key(s))
        .map(|s| (s, state.copies(s)));
    Ok(PathMtu {
        interface_mtu: top,
        cached_mtu: route_mtu.filter(|r| *r < top),
        largest_ok,
        smallest_lost,
        frag_needed: state.frag_needed,
        rounds,
        took: started.elapsed(),
    })
}

struct Probe {
    sock: AsyncFd<Socket>,
    dst: IpAddr,
    ident: u16,
    seq: u16,
    /// Size to the sequence numbers sent at it.
    sent: BTreeMap<u16, Vec<u16>>,
    /// Every echo of every round: sequence number to (size, when sent), so a reply that comes
    /// back in a later round still counts.
    by_seq: BTreeMap<u16, (u16, Instant)>,
    /// Size to its first answer's round trip.
    answered: BTreeMap<u16, Duration>,
    frag_needed: Option<(u16, IpAddr)>,
}

impl Probe {
    fn largest_ok(&self) -> Option<u16> {
        self.answered.keys().next_back().copied()
    }

    fn smallest_lost_above(&self, lo: u16) -> Option<u16> {
        self.sent
            .keys()
            .copied()
            .find(|s| *s > lo && !self.answered.contains_key(s))
    }

    fn copies(&self, size: u16) -> u32 {
        self.sent.get(&size).map_or(0, |v| v.len() as u32)
    }

    /// The sizes of the next round, between the largest answered and the smallest lost: up to
    /// 10 evenly spaced, the lost size again, and the largest answered one, whose answer times
    /// the round (a round of only lost sizes would wait out SILENT_ROUND). `None` when nothing
    /// answered (a host that answers no echo: not an MTU), nothing above it was lost, or the
    /// bound is found.
    fn refine(&self) -> Option<Vec<u16>> {
        let lo = self.largest_ok()?;
        let hi = self.smallest_lost_above(lo)?;
        let gap = hi - lo;
        if gap <= 1 && self.copies(hi) >= 2 * COPIES as u32 {
            return None;
        }
        let steps = u32::from(gap.min(11));
        let between = |i: u32| lo + u16::try_from(u32::from(gap) * i / steps).unwrap_or(gap);
        let mut sizes: Vec<u16> = std::iter::once(lo)
            .chain((1..steps).map(between))
            .chain([hi])
            .collect();
        sizes.dedup();
        Some(sizes)
    }

    /// When the last echo above `lo` bytes went out.
    fn last_sent_above(&self, lo: u16) -> Instant {
        self.by_seq
            .values()
            .filter(|(size, _)| *size > lo)
            .map(|(_, at)| *at)
            .max()
            .unwrap_or_else(Instant::now)
    }

    /// Sends `COPIES` echoes of each size at once, then listens until every size is answered,
    /// or 3 x the slowest answer so far (at least 50 ms) after the first answer, or a second
    /// without any answer, or the deadline. Replies to earlier rounds' echoes count too.
    async fn round(&mut self, sizes: &[u16], deadline: Instant) {
        let to = SockAddr::from(SocketAddr::new(self.dst, 0));
        let start = Instant::now();
        for _ in 0..COPIES {
            for &size in sizes {
                self.seq = self.seq.wrapping_add(1);
                let packet = match self.dst {
                    IpAddr::V4(_) => echo_request(self.ident, self.seq, size),
                    IpAddr::V6(_) => echo_request6(self.ident, self.seq, size),
                };
                let stamp = Instant::now();
                // A failed send (EMSGSIZE past the interface MTU) is an echo that never crossed.
                let _ = self.sock.get_ref().send_to(&packet, &to);
                self.sent.entry(size).or_default().push(self.seq);
                self.by_seq.insert(self.seq, (size, stamp));
            }
        }
        loop {
            if sizes.iter().all(|s| self.answered.contains_key(s)) {
                return;
            }
            let answered: Vec<Duration> = sizes
                .iter()
                .filter_map(|s| self.answered.get(s))
                .copied()
                .collect();
            let until = match answered.iter().max() {
                Some(slowest) => start + (*slowest * 3).max(Duration::from_millis(50)),
                None => start + SILENT_ROUND,
            }
            .min(deadline);
            if Instant::now() >= until {
                return;
            }
            let n = answered.len();
            let sizes = sizes.to_vec();
            self.listen(until, move |p| {
                sizes.iter().filter(|s| p.answered.contains_key(s)).count() != n
            })
            .await;
        }
    }

    /// Reads replies until `done` holds after one, or until `until`.
    async fn listen(&mut self, until: Instant, done: impl Fn(&Probe) -> bool) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 2048];
        loop {
            if Instant::now() >= until {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => return,
                r = self.sock.readable() => {
                    let Ok(mut g) = r else { return };
                    while let Ok(r) = g.try_io(|s| s.get_ref().recv_from(&mut buf)) {
                        let Ok((n, from)) = r else { break };
                        // SAFETY: recv_from initialised the first `n` bytes.
                        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
                        let from = from.as_socket().map(|a| a.ip());
                        let answer = match self.dst {
                            IpAddr::V4(_) => parse(bytes, self.ident),
                            IpAddr::V6(dst) => parse6(bytes, self.ident, dst),
                        };
                        match answer {
                            Some(Answer::Reply(seq)) => {
                                if let (true, Some(&(size, sent))) =
                                    (from == Some(self.dst), self.by_seq.get(&seq))
                                {
                                    self.answered.entry(size).or_insert(sent.elapsed());
                                }
                            }
                            Some(Answer::FragNeeded { seq, mtu }) if self.by_seq.contains_key(&seq) => {
                                self.frag_needed =
                                    Some((mtu, from.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))));
                            }
                            Some(Answer::FragNeeded { .. }) | None => {}
                        }
                    }
                }
            }
            if done(self) {
                return;
            }
        }
    }
}

/// What a received ICMP message says about our echoes.
#[derive(Debug, PartialEq, Eq)]
enum Answer {
    /// An echo reply with our identifier.
    Reply(u16),
    /// "Fragmentation needed" quoting one of our echoes, with the next-hop MTU (RFC 1191).
    FragNeeded { seq: u16, mtu: u16 },
}

/// Parses an IPv4 packet from the raw socket (IP header included).
fn parse(bytes: &[u8], ident: u16) -> Option<Answer> {
    let ihl = usize::from(bytes.first()? & 0x0f) * 4;
    let icmp = bytes.get(ihl..).filter(|i| i.len() >= 8)?;
    match (icmp[0], icmp[1]) {
        (0, 0) if u16::from_be_bytes([icmp[4], icmp[5]]) == ident => {
            Some(Answer::Reply(u16::from_be_bytes([icmp[6], icmp[7]])))
        }
        (3, 4) => {
            let mtu = u16::from_be_bytes([icmp[6], icmp[7]]);
            let inner = icmp.get(8..)?;
            let inner_ihl = usize::from(inner.first()? & 0x0f) * 4;
            if inner.get(9) != Some(&1) {
                return None;
            }
            let echo = inner.get(inner_ihl..).filter(|e| e.len() >= 8)?;
            (echo[0] == 8 && u16::from_be_bytes([echo[4], echo[5]]) == ident).then(|| {
                Answer::FragNeeded {
                    seq: u16::from_be_bytes([echo[6], echo[7]]),
                    mtu,
                }
            })
        }
        _ => None,
    }
}

/// Parses an ICMPv6 message from the raw socket (no IP header): an echo reply with our
/// identifier, or a Packet Too Big (type 2, the MTU in 32 bits, RFC 4443 3.2) quoting one of our
/// echo requests to `dst`.
fn parse6(bytes: &[u8], ident: u16, dst: Ipv6Addr) -> Option<Answer> {
    let icmp = bytes.get(..8)?;
    match (icmp[0], icmp[1]) {
        (129, 0) if u16::from_be_bytes([icmp[4], icmp[5]]) == ident => {
            Some(Answer::Reply(u16::from_be_bytes([icmp[6], icmp[7]])))
        }
        (2, 0) => {
            let mtu = u32::from_be_bytes([icmp[4], icmp[5], icmp[6], icmp[7]]);
            let inner = bytes.get(8..)?;
            // The quoted IPv6 header: ICMPv6 (58) to `dst`, then our echo request.
            if inner.len() < 48 || inner[0] >> 4 != 6 || inner[6] != 58 {
                return None;
            }
            if inner[24..40] != dst.octets() {
                return None;
            }
            let echo = &inner[40..48];
            (echo[0] == 128 && u16::from_be_bytes([echo[4], echo[5]]) == ident).then(|| {
                Answer::FragNeeded {
                    seq: u16::from_be_bytes([echo[6], echo[7]]),
                    mtu: u16::try_from(mtu).unwrap_or(u16::MAX),
                }
            })
        }
        _ => None,
    }
}

/// An echo request that makes an IPv4 packet of `size` bytes (20 of IP header, 8 of ICMP).
fn echo_request(ident: u16, seq: u16, size: u16) -> Vec<u8> {
    packet::echo_request(ident, seq, packet::padding(Some(size), HEADERS))
}

/// An ICMPv6 echo request that makes an IPv6 packet of `size` bytes (40 of IPv6 header, 8 of
/// ICMPv6); the kernel fills in the checksum.
fn echo_request6(ident: u16, seq: u16, size: u16) -> Vec<u8> {
    let mut p = vec![128, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend(packet::filler(usize::from(size.saturating_sub(HEADERS6))));
    p
}

/// DF set and the cached path MTU ignored, for a socket of `target`'s family.
pub(crate) fn set_pmtudisc_probe_for(sock: &Socket, target: IpAddr) -> io::Result<()> {
    match target {
        IpAddr::V4(_) => set_pmtudisc_probe(sock),
        IpAddr::V6(_) => set_pmtudisc_probe6(sock),
    }
}

/// `IPV6_MTU_DISCOVER = IPV6_PMTUDISC_PROBE`: send up to the device MTU whatever the cached path
/// MTU, never fragment locally (a larger send fails with EMSGSIZE).
fn set_pmtudisc_probe6(sock: &Socket) -> io::Result<()> {
    set_int(
        sock,
        libc::IPPROTO_IPV6,
        libc::IPV6_MTU_DISCOVER,
        libc::IPV6_PMTUDISC_PROBE,
    )
}

/// `IP_MTU_DISCOVER = IP_PMTUDISC_PROBE`: set DF, ignore the cached path MTU.
pub(crate) fn set_pmtudisc_probe(sock: &Socket) -> io::Result<()> {
    set_int(
        sock,
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_PROBE,
    )
}

/// `setsockopt(level, opt, v)` for an integer option.
fn set_int(sock: &Socket, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: a valid fd, and a pointer to a c_int that lives across the call with its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The MTU of the interface the route to `dst` leaves by (from /proc/net/route and sysfs; 1500
/// when they cannot say), and the kernel's path MTU for that route (`IP_MTU` of a connected UDP
/// socket), which is lower when a router reported a smaller MTU.
pub(crate) fn mtus(dst: IpAddr) -> (u16, Option<u16>) {
    let route = route_mtu(dst);
    // This host's own addresses are reached over loopback (the local routing table, which
    // /proc/net/route does not list).
    let local = dst.is_loopback() || super::dial::source_for(dst) == Some(dst);
    let dev = match dst {
        _ if local => Some("lo".to_string()),
        IpAddr::V4(v4) => std::fs::read_to_string("/proc/net/route")
            .ok()
            .and_then(|t| route_interface(&t, v4)),
        IpAddr::V6(v6) => std::fs::read_to_string("/proc/net/ipv6_route")
            .ok()
            .and_then(|t| route_interface6(&t, v6)),
    };
    let iface = dev
        .and_then(|dev| std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu")).ok())
        .and_then(|m| m.trim().parse::<u32>().ok())
        .map(clamp_mtu);
    match (iface, route) {
        (Some(i), r) => (i, r),
        (None, Some(r)) => (r, None),
        (None, None) => (1500, None),
    }
}

fn route_mtu(dst: IpAddr) -> Option<u16> {
    let (any, level, opt) = match dst {
        IpAddr::V4(_) => ("0.0.0.0:0", libc::IPPROTO_IP, libc::IP_MTU),
        IpAddr::V6(_) => ("[::]:0", libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let s = UdpSocket::bind(any).ok()?;
    s.connect((dst, 9)).ok()?;
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: a valid fd; `v` and `len` live across the call and `len` is `v`'s size.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0 && v > 0).then(|| clamp_mtu(v.unsigned_abs()))
}

/// MTUs are probed up to jumbo frames (9000); loopback's 65536 is not a path anyone joins over.
fn clamp_mtu(m: u32) -> u16 {
    u16::try_from(m.min(MAX_PROBE.into())).unwrap_or(MAX_PROBE)
}

/// The interface of the longest-prefix route to `dst` in /proc/net/route's text (addresses in
/// host byte order hex, as the kernel prints them on little-endian machines).
fn route_interface(table: &str, dst: Ipv4Addr) -> Option<String> {
    let d = u32::from_le_bytes(dst.octets());
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dest = u32::from_str_radix(f.get(1)?, 16).ok()?;
            let mask = u32::from_str_radix(f.get(7)?, 16).ok()?;
            (d & mask == dest).then(|| (mask.count_ones(), f[0].to_string()))
        })
        .max_by_key(|(bits, _)| *bits)
        .map(|(_, dev)| dev)
}

/// The interface of the longest-prefix route to `dst` in /proc/net/ipv6_route's text (32 hex
/// digits of destination, its prefix length in hex, ..., the device last); unreachable routes
/// are skipped. (This host's own addresses never get here: `mtus` takes loopback for them.)
fn route_interface6(table: &str, dst: Ipv6Addr) -> Option<String> {
    let d = u128::from(dst);
    table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dest = u128::from_str_radix(f.first()?, 16).ok()?;
            let bits = u32::from_str_radix(f.get(1)?, 16).ok()?;
            let dev = f.get(9)?;
            let flags = u32::from_str_radix(f.get(8)?, 16).ok()?;
            // RTF_REJECT (0x200): an unreachable route.
            if flags & 0x200 != 0 || bits > 128 {
                return None;
            }
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            (d & mask == dest & mask).then(|| (bits, dev.to_string()))
        })
        .max_by_key(|(bits, _)| *bits)
        .map(|(_, dev)| dev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::packet::checksum;

    #[test]
    fn an_echo_request_makes_a_packet_of_the_size_asked() {
        let p = echo_request(7, 9, 1400);
        assert_eq!(p.len() + 20, 1400);
        assert_eq!(checksum(&p), 0, "checksum verifies");
        assert_eq!(echo_request(7, 9, MIN_PROBE).len() + 20, 576);
    }

    fn ip(proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0, 198, 18, 0, 3, 198, 18, 0, 1,
        ];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn replies_and_fragmentation_needed_are_told_apart_and_matched_to_our_echoes() {
        let reply = ip(1, &[0, 0, 0, 0, 0, 7, 0, 42, 1, 2]);
        assert_eq!(parse(&reply, 7), Some(Answer::Reply(42)));
        assert_eq!(parse(&reply, 8), None, "another prober's reply");
        // Fragmentation needed, MTU 1400, quoting our echo request seq 43.
        let quoted = ip(1, &[8, 0, 0, 0, 0, 7, 0, 43]);
        let mut icmp = vec![3, 4, 0, 0, 0, 0, 0x05, 0x78];
        icmp.extend_from_slice(&quoted);
        assert_eq!(
            parse(&ip(1, &icmp), 7),
            Some(Answer::FragNeeded { seq: 43, mtu: 1400 })
        );
        assert_eq!(parse(&ip(1, &icmp), 8), None);
        // Port unreachable, or a quoted TCP segment: not ours.
        icmp[1] = 3;
        assert_eq!(parse(&ip(1, &icmp), 7), None);
        let mut tcp = vec![3, 4, 0, 0, 0, 0, 0x05, 0x78];
        tcp.extend_from_slice(&ip(6, &[8, 0, 0, 0, 0, 7, 0, 43]));
        assert_eq!(parse(&ip(1, &tcp), 7), None);
    }

    #[test]
    fn icmpv6_replies_and_packet_too_big_are_told_apart_and_matched_to_our_echoes() {
        let dst: Ipv6Addr = "fd00:198:18::3".parse().unwrap();
        let reply = [129, 0, 0, 0, 0, 7, 0, 42, 1, 2];
        assert_eq!(parse6(&reply, 7, dst), Some(Answer::Reply(42)));
        assert_eq!(parse6(&reply, 8, dst), None, "another prober's reply");
        // Packet Too Big, MTU 1400, quoting our echo request seq 43 to dst.
        let quoted = |to: Ipv6Addr, next: u8| {
            let mut ip = vec![0x60, 0, 0, 0, 0x05, 0x50, next, 64];
            ip.extend_from_slice(&"fd00:198:18::1".parse::<Ipv6Addr>().unwrap().octets());
            ip.extend_from_slice(&to.octets());
            ip.extend_from_slice(&[128, 0, 0, 0, 0, 7, 0, 43]);
            ip
        };
        let ptb = |inner: Vec<u8>| {
            let mut m = vec![2, 0, 0, 0, 0, 0, 0x05, 0x78];
            m.extend_from_slice(&inner);
            m
        };
        assert_eq!(
            parse6(&ptb(quoted(dst, 58)), 7, dst),
            Some(Answer::FragNeeded { seq: 43, mtu: 1400 })
        );
        assert_eq!(parse6(&ptb(quoted(dst, 58)), 8, dst), None);
        let other: Ipv6Addr = "fd00:198:18::4".parse().unwrap();
        assert_eq!(
            parse6(&ptb(quoted(other, 58)), 7, dst),
            None,
            "to another host"
        );
        assert_eq!(parse6(&ptb(quoted(dst, 6)), 7, dst), None, "a TCP segment");
        let echo = echo_request6(7, 9, 1400);
        assert_eq!(echo.len() + 40, 1400);
        assert_eq!(echo[0], 128);
    }

    #[test]
    fn the_ipv6_route_interface_is_the_longest_prefix_match() {
        let table = "\
00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth0
fd000198001800000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     lab0
fd000198001800000000000000000003 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000001 00000000 00000001      wg0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
";
        let at = |a: &str| route_interface6(table, a.parse().unwrap());
        assert_eq!(at("fd00:198:18::3").as_deref(), Some("wg0"));
        assert_eq!(at("fd00:198:18::2").as_deref(), Some("lab0"));
        assert_eq!(at("2001:db8::1").as_deref(), Some("eth0"));
        assert_eq!(at("::1").as_deref(), Some("lo"));
    }

    #[test]
    fn the_route_interface_is_the_longest_prefix_match() {
        let table =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                     eth0\t00000000\t0100A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
                     tun0\t000012C6\t00000000\t0001\t0\t0\t0\t0000FEFF\t0\t0\t0\n\
                     wg0\t030012C6\t00000000\t0005\t0\t0\t0\tFFFFFFFF\t0\t0\t0\n";
        let at = |a: [u8; 4]| route_interface(table, Ipv4Addr::from(a));
        assert_eq!(at([198, 18, 0, 3]).as_deref(), Some("wg0"));
        assert_eq!(at([198, 18, 0, 2]).as_deref(), Some("tun0"));
        assert_eq!(at([10, 0, 0, 1]).as_deref(), Some("eth0"));
    }

    #[tokio::test]
    async fn loopback_carries_its_interface_mtu() {
        // Needs a raw socket; skip without privilege, as the ICMP tests do.
        match probe(IpAddr::V4(Ipv4Addr::LOCALHOST), Duration::from_secs(3)).await {
            Err(IcmpError::NoPrivilege(_)) => {}
            Err(e) => panic!("{e}"),
            Ok(p) => {
                assert!(p.full_size_crosses(), "{p:?}");
                assert_eq!(p.largest_ok, Some(p.interface_mtu));
                assert_eq!(p.rounds, 1, "{p:?}");
            }
        }
    }
}
