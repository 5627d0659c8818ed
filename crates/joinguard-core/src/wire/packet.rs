//! Wire formats of the tracer: the probes it builds (ICMP echo, TCP SYN) and the replies it
//! reads (ICMP Time Exceeded / Destination Unreachable quoting a probe, Echo Reply, SYN-ACK, RST).
//!
//! Pure functions over byte slices: no sockets, no clocks. A reply is matched to its probe by
//! what the probe carried that the reply quotes back (RFC 792: an ICMP error quotes the
//! original IP header and at least the first 8 bytes of its payload, which hold the ICMP
//! identifier and sequence, the UDP ports, or the TCP ports and sequence number).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// ICMP types (RFC 792).
pub const ICMP_ECHO_REPLY: u8 = 0;
pub const ICMP_DEST_UNREACHABLE: u8 = 3;
pub const ICMP_ECHO_REQUEST: u8 = 8;
pub const ICMP_TIME_EXCEEDED: u8 = 11;
/// Destination Unreachable code "port unreachable": a UDP probe reached the target.
pub const CODE_PORT_UNREACHABLE: u8 = 3;
/// Destination Unreachable code "fragmentation needed and DF set" (RFC 1191: the next-hop MTU
/// is in bytes 6 and 7 of the ICMP header).
pub const CODE_FRAG_NEEDED: u8 = 4;
/// IPv4 and ICMP echo headers (20 + 8): the smallest echo probe on the wire.
pub const ECHO_HEADERS: u16 = 28;
/// IPv4 and UDP headers (20 + 8).
pub const UDP_HEADERS: u16 = 28;
/// IPv4 and TCP headers with the MSS option (20 + 24).
pub const SYN_HEADERS: u16 = 44;
/// The IPv6 header is 20 bytes longer than IPv4's without options: 40.
pub const IPV6_EXTRA: u16 = 20;

/// ICMPv6 types (RFC 4443).
pub const ICMP6_DEST_UNREACHABLE: u8 = 1;
pub const ICMP6_PACKET_TOO_BIG: u8 = 2;
pub const ICMP6_TIME_EXCEEDED: u8 = 3;
pub const ICMP6_ECHO_REQUEST: u8 = 128;
pub const ICMP6_ECHO_REPLY: u8 = 129;

/// The headers of a probe of `protocol` to `target`: the IPv4 figure, or 20 more over IPv6.
pub(crate) fn headers(ipv4_headers: u16, target: IpAddr) -> u16 {
    match target {
        IpAddr::V4(_) => ipv4_headers,
        IpAddr::V6(_) => ipv4_headers + IPV6_EXTRA,
    }
}

const PROTO_ICMP: u8 = 1;
const PROTO_ICMPV6: u8 = 58;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_ACK: u8 = 0x10;

/// What a probe carried, as a reply quotes it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeId {
    /// ICMP echo identifier and sequence number.
    Echo { ident: u16, seq: u16 },
    /// UDP source and destination port.
    Udp { src_port: u16, dst_port: u16 },
    /// TCP source and destination port and sequence number.
    Tcp {
        src_port: u16,
        dst_port: u16,
        seq: u32,
    },
}

/// One packet read from a raw socket that may answer a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Who sent it (the IP source): a router, or the target.
    pub from: IpAddr,
    pub kind: ReplyKind,
    /// The probe it answers.
    pub probe: ProbeId,
    /// For ICMP errors, the destination of the quoted probe (must be our target).
    pub quoted_dst: Option<IpAddr>,
}

/// What kind of answer a reply is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyKind {
    /// A router's TTL ran out (ICMP type 11).
    TimeExceeded,
    /// ICMP Destination Unreachable with this code (port unreachable is the UDP target's answer).
    /// ICMPv6's codes are given as their ICMP counterparts ([`icmp6_unreachable_code`]).
    Unreachable(u8),
    /// ICMP "fragmentation needed" (type 3 code 4): the probe was larger than the next link's
    /// MTU, which the router reports (0 from a router older than RFC 1191).
    FragNeeded { mtu: u16 },
    /// ICMP Echo Reply from the target.
    EchoReply,
    /// TCP SYN-ACK: the port is open.
    SynAck,
    /// TCP RST: the host is there, the port is closed.
    Rst,
}

/// The bytes after a probe's headers that make its IP packet `size` bytes long (`None`: the
/// short default payload).
pub(crate) fn padding(size: Option<u16>, headers: u16) -> Option<usize> {
    size.map(|s| usize::from(s.saturating_sub(headers)))
}

/// `len` bytes of the tracer's tag, repeated: what fills a probe of a chosen size.
pub(crate) fn filler(len: usize) -> Vec<u8> {
    let tag = b"joinguard-trace-";
    (0..len).map(|i| tag[i % tag.len()]).collect()
}

/// An ICMP echo request with `ident` and `seq`, and a short payload, or `data` bytes of one.
pub(crate) fn echo_request(ident: u16, seq: u16, data: Option<usize>) -> Vec<u8> {
    let mut p = vec![ICMP_ECHO_REQUEST, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    match data {
        Some(n) => p.extend(filler(n)),
        None => p.extend_from_slice(b"joinguard-trace"),
    }
    let c = checksum(&p);
    p[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

/// A TCP SYN from `src:src_port` to `dst:dst_port` with sequence number `seq`, and an MSS option
/// (1460) as a real stack would send, so middleboxes treat it as an ordinary connection attempt.
/// `data` bytes after the header make a probe of a chosen size (a SYN may carry data, RFC 793;
/// the target acknowledges only the SYN).
pub(crate) fn tcp_syn(
    src: IpAddr,
    src_port: u16,
    dst: IpAddr,
    dst_port: u16,
    seq: u32,
    data: Option<usize>,
) -> Vec<u8> {
    let mut t = Vec::with_capacity(24 + data.unwrap_or(0));
    t.extend_from_slice(&src_port.to_be_bytes());
    t.extend_from_slice(&dst_port.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&0u32.to_be_bytes()); // ack
    t.push(6 << 4); // data offset: 6 words (20 + 4 bytes of options)
    t.push(TCP_SYN);
    t.extend_from_slice(&64240u16.to_be_bytes()); // window, as Linux offers
    t.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    t.extend_from_slice(&[2, 4, 0x05, 0xb4]); // MSS 1460
    t.extend(filler(data.unwrap_or(0)));
    let c = checksum(&pseudo_header(src, dst, PROTO_TCP, &t));
    t[16..18].copy_from_slice(&c.to_be_bytes());
    t
}

/// The segment `t` of protocol `proto` behind its pseudo header (RFC 793 for IPv4, RFC 8200
/// section 8.1 for IPv6), as the checksum covers it.
fn pseudo_header(src: IpAddr, dst: IpAddr, proto: u8, t: &[u8]) -> Vec<u8> {
    let mut pseudo = Vec::with_capacity(40 + t.len());
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            pseudo.extend_from_slice(&s.octets());
            pseudo.extend_from_slice(&d.octets());
            pseudo.extend_from_slice(&[0, proto]);
            pseudo.extend_from_slice(&(t.len() as u16).to_be_bytes());
        }
        _ => {
            pseudo.extend_from_slice(&v6(src).octets());
            pseudo.extend_from_slice(&v6(dst).octets());
            pseudo.extend_from_slice(&(t.len() as u32).to_be_bytes());
            pseudo.extend_from_slice(&[0, 0, 0, proto]);
        }
    }
    pseudo.extend_from_slice(t);
    pseudo
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// An ICMPv6 echo request with `ident` and `seq` and a short payload, or `data` bytes of one.
/// The kernel fills in the checksum of a raw ICMPv6 socket's packets.
pub(crate) fn echo_request6(ident: u16, seq: u16, data: Option<usize>) -> Vec<u8> {
    let mut p = echo_request(ident, seq, data);
    p[0] = ICMP6_ECHO_REQUEST;
    p[2] = 0;
    p[3] = 0;
    p
}

/// ICMPv6 Destination Unreachable codes (RFC 4443 3.1) as their ICMP counterparts, so one
/// code names one meaning in reports: port unreachable 4 -> 3, no route 0 -> 0 (net
/// unreachable), administratively prohibited 1 and policy failures 5, 6 -> 13, address
/// unreachable 3 -> 1 (host unreachable), beyond scope 2 -> 0.
pub(crate) fn icmp6_unreachable_code(code: u8) -> u8 {
    match code {
        4 => CODE_PORT_UNREACHABLE,
        1 | 5 | 6 => 13,
        3 => 1,
        _ => 0,
    }
}

/// The probe an ICMP or ICMPv6 error quotes: its protocol (from the quoted IP header) and the
/// first 8 bytes of its payload (`payload` has at least 8).
fn quoted_probe(proto: u8, payload: &[u8]) -> Option<ProbeId> {
    Some(match proto {
        PROTO_ICMP if payload[0] == ICMP_ECHO_REQUEST => ProbeId::Echo {
            ident: be16(&payload[4..6]),
            seq: be16(&payload[6..8]),
        },
        PROTO_ICMPV6 if payload[0] == ICMP6_ECHO_REQUEST => ProbeId::Echo {
            ident: be16(&payload[4..6]),
            seq: be16(&payload[6..8]),
        },
        PROTO_UDP => ProbeId::Udp {
            src_port: be16(&payload[0..2]),
            dst_port: be16(&payload[2..4]),
        },
        PROTO_TCP => ProbeId::Tcp {
            src_port: be16(&payload[0..2]),
            dst_port: be16(&payload[2..4]),
            seq: be32(&payload[4..8]),
        },
        _ => return None,
    })
}

/// Parses an ICMPv6 message from the raw ICMPv6 socket (no IP header; `from` is the source the
/// socket reported). Time Exceeded, Destination Unreachable and Packet Too Big quote the probe's
/// IPv6 header (its next header and destination) and the first bytes of its payload.
pub(crate) fn parse_icmp6(icmp: &[u8], from: IpAddr) -> Option<Reply> {
    if icmp.len() < 8 {
        return None;
    }
    let (ty, code) = (icmp[0], icmp[1]);
    match ty {
        ICMP6_ECHO_REPLY => Some(Reply {
            from,
            kind: ReplyKind::EchoReply,
            probe: ProbeId::Echo {
                ident: be16(&icmp[4..6]),
                seq: be16(&icmp[6..8]),
            },
            quoted_dst: None,
        }),
        ICMP6_TIME_EXCEEDED | ICMP6_DEST_UNREACHABLE | ICMP6_PACKET_TOO_BIG => {
            let quoted = icmp.get(8..)?;
            if quoted.len() < 48 || quoted[0] >> 4 != 6 {
                return None;
            }
            let qdst = Ipv6Addr::from(<[u8; 16]>::try_from(&quoted[24..40]).ok()?);
            let qpayload = &quoted[40..];
            let probe = quoted_probe(quoted[6], qpayload)?;
            let kind = match ty {
                ICMP6_TIME_EXCEEDED => ReplyKind::TimeExceeded,
                ICMP6_PACKET_TOO_BIG => ReplyKind::FragNeeded {
                    mtu: u16::try_from(be32(&icmp[4..8])).unwrap_or(u16::MAX),
                },
                _ => ReplyKind::Unreachable(icmp6_unreachable_code(code)),
            };
            Some(Reply {
                from,
                kind,
                probe,
                quoted_dst: Some(IpAddr::V6(qdst)),
            })
        }
        _ => None,
    }
}

/// Parses a segment from the raw IPv6 TCP socket (no IP header; `from` as the socket reported
/// it), as [`parse_tcp`] does.
pub(crate) fn parse_tcp6(tcp: &[u8], from: IpAddr) -> Option<Reply> {
    tcp_reply(tcp, from)
}

/// Parses a packet from the raw ICMP socket (IP header included). `None` for anything that
/// cannot answer a probe: echo requests, other ICMP types, truncated quotes.
pub(crate) fn parse_icmp(pkt: &[u8]) -> Option<Reply> {
    let (from, _, proto, icmp) = ip_header(pkt)?;
    let from = IpAddr::V4(from);
    if proto != PROTO_ICMP || icmp.len() < 8 {
        return None;
    }
    let (ty, code) = (icmp[0], icmp[1]);
    match ty {
        ICMP_ECHO_REPLY => Some(Reply {
            from,
            kind: ReplyKind::EchoReply,
            probe: ProbeId::Echo {
                ident: be16(&icmp[4..6]),
                seq: be16(&icmp[6..8]),
            },
            quoted_dst: None,
        }),
        ICMP_TIME_EXCEEDED | ICMP_DEST_UNREACHABLE => {
            let (_, qdst, qproto, qpayload) = ip_header(&icmp[8..])?;
            if qpayload.len() < 8 {
                return None;
            }
            let probe = quoted_probe(qproto, qpayload)?;
            let kind = match (ty, code) {
                (ICMP_TIME_EXCEEDED, _) => ReplyKind::TimeExceeded,
                (_, CODE_FRAG_NEEDED) => ReplyKind::FragNeeded {
                    mtu: be16(&icmp[6..8]),
                },
                (_, code) => ReplyKind::Unreachable(code),
            };
            Some(Reply {
                from,
                kind,
                probe,
                quoted_dst: Some(IpAddr::V4(qdst)),
            })
        }
        _ => None,
    }
}

/// Parses a packet from the raw TCP socket (IP header included): a SYN-ACK or RST answering a
/// SYN whose sequence number was `ack - 1`. Other segments (every TCP packet of the host reaches
/// a raw TCP socket) give `None`.
pub(crate) fn parse_tcp(pkt: &[u8]) -> Option<Reply> {
    let (from, _, proto, tcp) = ip_header(pkt)?;
    if proto != PROTO_TCP {
        return None;
    }
    tcp_reply(tcp, IpAddr::V4(from))
}

/// A SYN-ACK or RST in `tcp` (from its header on) as the answer to a SYN.
fn tcp_reply(tcp: &[u8], from: IpAddr) -> Option<Reply> {
    if tcp.len() < 20 {
        return None;
    }
    let flags = tcp[13];
    let kind = if flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK {
        ReplyKind::SynAck
    } else if flags & TCP_RST != 0 && flags & TCP_ACK != 0 {
        ReplyKind::Rst
    } else {
        return None;
    };
    let ack = be32(&tcp[8..12]);
    // The reply's ports are the probe's, swapped.
    Some(Reply {
        from,
        kind,
        probe: ProbeId::Tcp {
            src_port: be16(&tcp[2..4]),
            dst_port: be16(&tcp[0..2]),
            seq: ack.wrapping_sub(1),
        },
        quoted_dst: None,
    })
}

/// Source, destination, protocol and payload of an IPv4 packet.
fn ip_header(pkt: &[u8]) -> Option<(Ipv4Addr, Ipv4Addr, u8, &[u8])> {
    let vihl = *pkt.first()?;
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(vihl & 0x0f) * 4;
    if ihl < 20 || pkt.len() < ihl {
        return None;
    }
    let src = Ipv4Addr::new(pkt[12], pkt[13], pkt[14], pkt[15]);
    let dst = Ipv4Addr::new(pkt[16], pkt[17], pkt[18], pkt[19]);
    Some((src, dst, pkt[9], &pkt[ihl..]))
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// RFC 1071 Internet checksum.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
    const ME: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const TARGET: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 4);

    fn ip(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 1, proto, 0, 0];
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        p.extend_from_slice(payload);
        p
    }

    fn icmp_error(ty: u8, code: u8, quoted: &[u8]) -> Vec<u8> {
        let mut m = vec![ty, code, 0, 0, 0, 0, 0, 0];
        m.extend_from_slice(quoted);
        ip(ROUTER, ME, PROTO_ICMP, &m)
    }

    #[test]
    fn checksums_verify() {
        assert_eq!(checksum(&echo_request(0xbeef, 9, None)), 0);
        let syn = tcp_syn(ME.into(), 40000, TARGET.into(), 2380, 0x01020304, None);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ME.octets());
        pseudo.extend_from_slice(&TARGET.octets());
        pseudo.extend_from_slice(&[0, PROTO_TCP, 0, syn.len() as u8]);
        pseudo.extend_from_slice(&syn);
        assert_eq!(checksum(&pseudo), 0);
        assert_eq!(syn[13], TCP_SYN);
    }

    #[test]
    fn time_exceeded_quoting_an_echo_names_its_sequence() {
        let probe = ip(ME, TARGET, PROTO_ICMP, &echo_request(0xbeef, 9, None));
        let r = parse_icmp(&icmp_error(ICMP_TIME_EXCEEDED, 0, &probe)).unwrap();
        assert_eq!(r.from, ROUTER);
        assert_eq!(r.kind, ReplyKind::TimeExceeded);
        assert_eq!(
            r.probe,
            ProbeId::Echo {
                ident: 0xbeef,
                seq: 9
            }
        );
        assert_eq!(r.quoted_dst, Some(TARGET.into()));
    }

    #[test]
    fn time_exceeded_quoting_a_syn_names_its_sequence_number() {
        let syn = tcp_syn(ME.into(), 40000, TARGET.into(), 2380, 77, None);
        // Routers may quote only 8 bytes of the payload.
        let probe = ip(ME, TARGET, PROTO_TCP, &syn[..8]);
        let r = parse_icmp(&icmp_error(ICMP_TIME_EXCEEDED, 0, &probe)).unwrap();
        assert_eq!(
            r.probe,
            ProbeId::Tcp {
                src_port: 40000,
                dst_port: 2380,
                seq: 77
            }
        );
    }

    #[test]
    fn sized_probes_make_packets_of_the_size_asked_and_checksum() {
        let e = echo_request(1, 2, padding(Some(1400), ECHO_HEADERS));
        assert_eq!(e.len() + 20, 1400);
        assert_eq!(checksum(&e), 0);
        let syn = tcp_syn(
            ME.into(),
            40000,
            TARGET.into(),
            2380,
            5,
            padding(Some(1400), SYN_HEADERS),
        );
        assert_eq!(syn.len() + 20, 1400);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ME.octets());
        pseudo.extend_from_slice(&TARGET.octets());
        pseudo.extend_from_slice(&[0, PROTO_TCP]);
        pseudo.extend_from_slice(&(syn.len() as u16).to_be_bytes());
        pseudo.extend_from_slice(&syn);
        assert_eq!(checksum(&pseudo), 0);
        // Smaller than the headers: the headers alone.
        assert_eq!(padding(Some(20), ECHO_HEADERS), Some(0));
        assert_eq!(padding(None, ECHO_HEADERS), None);
    }

    #[test]
    fn fragmentation_needed_carries_the_next_hop_mtu() {
        let probe = ip(ME, TARGET, PROTO_ICMP, &echo_request(0xbeef, 3, Some(1472)));
        let mut m = vec![
            ICMP_DEST_UNREACHABLE,
            CODE_FRAG_NEEDED,
            0,
            0,
            0,
            0,
            0x05,
            0x78,
        ];
        m.extend_from_slice(&probe[..28]);
        let r = parse_icmp(&ip(ROUTER, ME, PROTO_ICMP, &m)).unwrap();
        assert_eq!(r.kind, ReplyKind::FragNeeded { mtu: 1400 });
        assert_eq!(
            r.probe,
            ProbeId::Echo {
                ident: 0xbeef,
                seq: 3
            }
        );
        assert_eq!(r.from, ROUTER);
    }

    #[test]
    fn port_unreachable_quoting_udp_names_its_ports() {
        let udp = [0x9c, 0x40, 0x82, 0x9a, 0, 8, 0, 0];
        let probe = ip(ME, TARGET, PROTO_UDP, &udp);
        let r = parse_icmp(&icmp_error(ICMP_DEST_UNREACHABLE, 3, &probe)).unwrap();
        assert_eq!(r.kind, ReplyKind::Unreachable(CODE_PORT_UNREACHABLE));
        assert_eq!(
            r.probe,
            ProbeId::Udp {
                src_port: 40000,
                dst_port: 33434
            }
        );
    }

    #[test]
    fn echo_replies_parse_and_requests_and_short_quotes_do_not() {
        let mut reply = echo_request(1, 2, None);
        reply[0] = ICMP_ECHO_REPLY;
        let r = parse_icmp(&ip(TARGET, ME, PROTO_ICMP, &reply)).unwrap();
        assert_eq!(r.kind, ReplyKind::EchoReply);
        assert_eq!(r.probe, ProbeId::Echo { ident: 1, seq: 2 });
        assert!(parse_icmp(&ip(ME, TARGET, PROTO_ICMP, &echo_request(1, 2, None))).is_none());
        let short = ip(ME, TARGET, PROTO_TCP, &[0x9c, 0x40, 0x09]);
        assert!(parse_icmp(&icmp_error(ICMP_TIME_EXCEEDED, 0, &short)).is_none());
        assert!(parse_icmp(&[0x45, 0]).is_none());
    }

    #[test]
    fn syn_ack_and_rst_match_the_syn_they_answer() {
        let mut seg = vec![0u8; 20];
        seg[0..2].copy_from_slice(&2380u16.to_be_bytes());
        seg[2..4].copy_from_slice(&40000u16.to_be_bytes());
        seg[8..12].copy_from_slice(&78u32.to_be_bytes());
        seg[12] = 5 << 4;
        seg[13] = TCP_SYN | TCP_ACK;
        let r = parse_tcp(&ip(TARGET, ME, PROTO_TCP, &seg)).unwrap();
        assert_eq!(r.kind, ReplyKind::SynAck);
        assert_eq!(
            r.probe,
            ProbeId::Tcp {
                src_port: 40000,
                dst_port: 2380,
                seq: 77
            }
        );
        seg[13] = TCP_RST | TCP_ACK;
        assert_eq!(
            parse_tcp(&ip(TARGET, ME, PROTO_TCP, &seg)).unwrap().kind,
            ReplyKind::Rst
        );
        seg[13] = TCP_ACK; // an ordinary segment of some other connection
        assert!(parse_tcp(&ip(TARGET, ME, PROTO_TCP, &seg)).is_none());
    }

    const ROUTER6: &str = "fd00:198:18::2";
    const ME6: &str = "fd00:198:18::1";
    const TARGET6: &str = "fd00:198:18::4";

    fn ip6(a: &str) -> IpAddr {
        a.parse().unwrap()
    }

    /// An IPv6 header from ME6 to `dst` carrying `next`, then `payload` (as a router quotes it).
    fn quoted6(dst: &str, next: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, payload.len() as u8, next, 1];
        p.extend_from_slice(&v6(ip6(ME6)).octets());
        p.extend_from_slice(&v6(ip6(dst)).octets());
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn icmpv6_answers_name_their_probe_and_kind() {
        let echo = echo_request6(0xbeef, 9, None);
        assert_eq!(
            (echo[0], echo[2], echo[3]),
            (128, 0, 0),
            "checksum left to the kernel"
        );
        let mut te = vec![ICMP6_TIME_EXCEEDED, 0, 0, 0, 0, 0, 0, 0];
        te.extend_from_slice(&quoted6(TARGET6, PROTO_ICMPV6, &echo));
        let r = parse_icmp6(&te, ip6(ROUTER6)).unwrap();
        assert_eq!(r.from, ip6(ROUTER6));
        assert_eq!(r.kind, ReplyKind::TimeExceeded);
        assert_eq!(
            r.probe,
            ProbeId::Echo {
                ident: 0xbeef,
                seq: 9
            }
        );
        assert_eq!(r.quoted_dst, Some(ip6(TARGET6)));
        // Port unreachable (code 4) from the target reads as ICMP's port unreachable.
        let udp = [0x9c, 0x40, 0x82, 0x9a, 0, 8, 0, 0];
        let mut pu = vec![ICMP6_DEST_UNREACHABLE, 4, 0, 0, 0, 0, 0, 0];
        pu.extend_from_slice(&quoted6(TARGET6, PROTO_UDP, &udp));
        let r = parse_icmp6(&pu, ip6(TARGET6)).unwrap();
        assert_eq!(r.kind, ReplyKind::Unreachable(CODE_PORT_UNREACHABLE));
        assert_eq!(
            r.probe,
            ProbeId::Udp {
                src_port: 40000,
                dst_port: 33434
            }
        );
        // Packet Too Big: the MTU is 32 bits.
        let syn = tcp_syn(ip6(ME6), 40000, ip6(TARGET6), 2380, 77, Some(1400));
        let mut ptb = vec![ICMP6_PACKET_TOO_BIG, 0, 0, 0, 0, 0, 0x05, 0x78];
        ptb.extend_from_slice(&quoted6(TARGET6, PROTO_TCP, &syn[..8]));
        let r = parse_icmp6(&ptb, ip6(ROUTER6)).unwrap();
        assert_eq!(r.kind, ReplyKind::FragNeeded { mtu: 1400 });
        assert_eq!(
            r.probe,
            ProbeId::Tcp {
                src_port: 40000,
                dst_port: 2380,
                seq: 77
            }
        );
        // An echo reply; a request and a short quote are not answers.
        let mut reply = echo.clone();
        reply[0] = ICMP6_ECHO_REPLY;
        assert_eq!(
            parse_icmp6(&reply, ip6(TARGET6)).unwrap().kind,
            ReplyKind::EchoReply
        );
        assert!(parse_icmp6(&echo, ip6(ME6)).is_none());
        assert!(parse_icmp6(&te[..40], ip6(ROUTER6)).is_none());
    }

    #[test]
    fn an_ipv6_syn_checksums_over_the_ipv6_pseudo_header() {
        let syn = tcp_syn(ip6(ME6), 40000, ip6(TARGET6), 2380, 5, None);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&v6(ip6(ME6)).octets());
        pseudo.extend_from_slice(&v6(ip6(TARGET6)).octets());
        pseudo.extend_from_slice(&(syn.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, PROTO_TCP]);
        pseudo.extend_from_slice(&syn);
        assert_eq!(checksum(&pseudo), 0);
        let mut seg = vec![0u8; 20];
        seg[0..2].copy_from_slice(&2380u16.to_be_bytes());
        seg[2..4].copy_from_slice(&40000u16.to_be_bytes());
        seg[8..12].copy_from_slice(&6u32.to_be_bytes());
        seg[13] = TCP_SYN | TCP_ACK;
        let r = parse_tcp6(&seg, ip6(TARGET6)).unwrap();
        assert_eq!((r.kind, r.from), (ReplyKind::SynAck, ip6(TARGET6)));
        assert_eq!(
            r.probe,
            ProbeId::Tcp {
                src_port: 40000,
                dst_port: 2380,
                seq: 5
            }
        );
    }
}
