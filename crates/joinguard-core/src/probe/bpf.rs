//! Classic BPF socket filters for joinguard's raw sockets: on a busy control-plane node a raw
//! ICMP or TCP socket otherwise receives a copy of every ICMP packet or TCP segment the host
//! gets. Each program is a plain list of instructions, attached with `SO_ATTACH_FILTER`
//! ([`attach`]) and run by the tests on real packets ([`tests::run`]), so what it accepts is
//! checked without a kernel.
//!
//! Only the instructions below are used. A raw IPv4 socket's packet starts at the IP header, a
//! raw ICMPv6 socket's at the ICMPv6 header (the kernel has pulled the IPv6 header before the
//! filter runs, net/ipv6/raw.c; iputils ping's IPv6 filter reads the identifier at offset 4);
//! a load past the packet's end makes the kernel drop it (the program returns 0).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};

/// One instruction: opcode, jump-if-true, jump-if-false (both relative to the next
/// instruction), constant.
pub(crate) type Insn = (u16, u8, u8, u32);

// linux/bpf_common.h, linux/filter.h.
pub(crate) const LD_W_ABS: u16 = 0x20; // A = P[k:4]
pub(crate) const LD_H_ABS: u16 = 0x28; // A = P[k:2]
pub(crate) const LD_B_ABS: u16 = 0x30; // A = P[k:1]
pub(crate) const LD_W_IND: u16 = 0x40; // A = P[X+k:4]
pub(crate) const LD_H_IND: u16 = 0x48; // A = P[X+k:2]
pub(crate) const LD_B_IND: u16 = 0x50; // A = P[X+k:1]
pub(crate) const LDX_B_MSH: u16 = 0xb1; // X = 4 * (P[k] & 0xf): the IP header's length
pub(crate) const JEQ_K: u16 = 0x15; // A == k ? jt : jf
pub(crate) const RET_K: u16 = 0x06; // return k (bytes kept; 0 drops)

/// Keeps at most this much of an accepted packet: all of it.
pub(crate) const ACCEPT: u32 = 0xffff;

/// Attaches `prog` to `sock`, then drops what the socket queued before: a raw socket receives
/// from the moment it is created, so the packets that arrived before the filter (any ICMP the
/// host got in that instant, another pinger's echoes on loopback) are still in its queue,
/// unfiltered.
pub(crate) fn attach(sock: &socket2::Socket, prog: &[Insn]) -> io::Result<()> {
    let filter: Vec<socket2::SockFilter> = prog
        .iter()
        .map(|&(code, jt, jf, k)| socket2::SockFilter::new(code, jt, jf, k))
        .collect();
    sock.attach_filter(&filter)?;
    drain_queued(sock);
    Ok(())
}

/// Reads and drops what `sock` holds now, without waiting (at most `MAX_QUEUED` packets: once
/// the filter is on, nothing that matches it arrives before the caller sends).
fn drain_queued(sock: &socket2::Socket) {
    const MAX_QUEUED: usize = 4096;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 256];
    for _ in 0..MAX_QUEUED {
        if sock.recv_with_flags(&mut buf, libc::MSG_DONTWAIT).is_err() {
            break;
        }
    }
}

/// An echo reply (type 0) from `dst` with identifier `ident`; everything else dropped.
pub(crate) fn echo_reply(dst: Ipv4Addr, ident: u16) -> [Insn; 9] {
    [
        (LD_W_ABS, 0, 0, 12),            // 0: source address
        (JEQ_K, 0, 6, u32::from(dst)),   // 1: not dst -> 8
        (LDX_B_MSH, 0, 0, 0),            // 2: X = IHL * 4
        (LD_B_IND, 0, 0, 0),             // 3: ICMP type
        (JEQ_K, 0, 3, 0),                // 4: not an echo reply -> 8
        (LD_H_IND, 0, 0, 4),             // 5: ICMP identifier
        (JEQ_K, 0, 1, u32::from(ident)), // 6: not ours -> 8
        (RET_K, 0, 0, ACCEPT),           // 7: accept
        (RET_K, 0, 0, 0),                // 8: drop
    ]
}

/// An ICMPv6 echo reply (type 129) with identifier `ident`; everything else dropped. The source
/// is not in what the filter sees: the pinger's socket is connected to its destination.
pub(crate) fn echo6_reply(ident: u16) -> [Insn; 6] {
    [
        (LD_B_ABS, 0, 0, 0),             // 0: ICMPv6 type
        (JEQ_K, 0, 3, 129),              // 1: not an echo reply -> 5
        (LD_H_ABS, 0, 0, 4),             // 2: identifier
        (JEQ_K, 0, 1, u32::from(ident)), // 3: not ours -> 5
        (RET_K, 0, 0, ACCEPT),           // 4: accept
        (RET_K, 0, 0, 0),                // 5: drop
    ]
}

/// What answers the IPv6 path MTU probe: an ICMPv6 echo reply with identifier `ident`, and a
/// Packet Too Big whose quoted packet went to `target` (its destination address at bytes 32 to
/// 47: 8 of ICMPv6 header, then the quoted IPv6 header's destination at 24).
pub(crate) fn pmtu6(target: Ipv6Addr, ident: u16) -> [Insn; 15] {
    let o = target.octets();
    let w = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
    [
        (LD_B_ABS, 0, 0, 0),              // 0: ICMPv6 type
        (JEQ_K, 0, 2, 129),               // 1: not an echo reply -> 4
        (LD_H_ABS, 0, 0, 4),              // 2: identifier
        (JEQ_K, 9, 10, u32::from(ident)), // 3: ours -> 13, else -> 14
        (JEQ_K, 0, 9, 2),                 // 4: not Packet Too Big -> 14
        (LD_W_ABS, 0, 0, 32),             // 5: quoted destination, first word
        (JEQ_K, 0, 7, w(0)),              // 6: -> 14
        (LD_W_ABS, 0, 0, 36),             // 7
        (JEQ_K, 0, 5, w(4)),              // 8: -> 14
        (LD_W_ABS, 0, 0, 40),             // 9
        (JEQ_K, 0, 3, w(8)),              // 10: -> 14
        (LD_W_ABS, 0, 0, 44),             // 11
        (JEQ_K, 0, 1, w(12)),             // 12: last word: -> 13, else -> 14
        (RET_K, 0, 0, ACCEPT),            // 13: accept
        (RET_K, 0, 0, 0),                 // 14: drop
    ]
}

/// What answers one IPv6 trace: an ICMPv6 echo reply with identifier `ident` (its source is
/// checked by the tracer, which the socket reports), and a Time Exceeded, Destination
/// Unreachable or Packet Too Big whose quoted packet went to `target` (bytes 32 to 47).
pub(crate) fn trace_icmp6(target: Ipv6Addr, ident: u16) -> [Insn; 17] {
    let o = target.octets();
    let w = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
    [
        (LD_B_ABS, 0, 0, 0),               // 0: ICMPv6 type
        (JEQ_K, 0, 2, 129),                // 1: not an echo reply -> 4
        (LD_H_ABS, 0, 0, 4),               // 2: identifier
        (JEQ_K, 11, 12, u32::from(ident)), // 3: ours -> 15, else -> 16
        (JEQ_K, 2, 0, 1),                  // 4: Destination Unreachable -> 7
        (JEQ_K, 1, 0, 2),                  // 5: Packet Too Big -> 7
        (JEQ_K, 0, 9, 3),                  // 6: not Time Exceeded -> 16
        (LD_W_ABS, 0, 0, 32),              // 7: quoted destination, first word
        (JEQ_K, 0, 7, w(0)),               // 8: -> 16
        (LD_W_ABS, 0, 0, 36),              // 9
        (JEQ_K, 0, 5, w(4)),               // 10: -> 16
        (LD_W_ABS, 0, 0, 40),              // 11
        (JEQ_K, 0, 3, w(8)),               // 12: -> 16
        (LD_W_ABS, 0, 0, 44),              // 13
        (JEQ_K, 0, 1, w(12)),              // 14: -> 15, else -> 16
        (RET_K, 0, 0, ACCEPT),             // 15: accept
        (RET_K, 0, 0, 0),                  // 16: drop
    ]
}

/// The answers to an IPv6 TCP trace's SYNs: segments from `port` to `local_port` (a raw IPv6
/// socket reads from the TCP header; the tracer checks the source).
pub(crate) fn trace_tcp6(port: u16, local_port: u16) -> [Insn; 6] {
    [
        (LD_H_ABS, 0, 0, 0),                  // 0: TCP source port
        (JEQ_K, 0, 3, u32::from(port)),       // 1: not the probed port -> 5
        (LD_H_ABS, 0, 0, 2),                  // 2: TCP destination port
        (JEQ_K, 0, 1, u32::from(local_port)), // 3: not ours -> 5
        (RET_K, 0, 0, ACCEPT),                // 4: accept
        (RET_K, 0, 0, 0),                     // 5: drop
    ]
}

/// What answers one trace: an echo reply from `target` with identifier `ident`, and a Time
/// Exceeded or Destination Unreachable (fragmentation needed included) whose quoted packet went
/// to `target`.
pub(crate) fn trace_icmp(target: Ipv4Addr, ident: u16) -> [Insn; 13] {
    let target = u32::from(target);
    [
        (LDX_B_MSH, 0, 0, 0),            // 0: X = IHL * 4
        (LD_B_IND, 0, 0, 0),             // 1: ICMP type
        (JEQ_K, 0, 4, 0),                // 2: not an echo reply -> 7
        (LD_W_ABS, 0, 0, 12),            // 3: source address
        (JEQ_K, 0, 7, target),           // 4: not the target -> 12
        (LD_H_IND, 0, 0, 4),             // 5: ICMP identifier
        (JEQ_K, 4, 5, u32::from(ident)), // 6: ours -> 11, else -> 12
        (JEQ_K, 1, 0, 11),               // 7: Time Exceeded -> 9
        (JEQ_K, 0, 3, 3),                // 8: not Destination Unreachable -> 12
        (LD_W_IND, 0, 0, 24),            // 9: the quoted packet's destination (8 + 16)
        (JEQ_K, 0, 1, target),           // 10: not the target -> 12
        (RET_K, 0, 0, ACCEPT),           // 11: accept
        (RET_K, 0, 0, 0),                // 12: drop
    ]
}

/// The answers to a TCP trace's SYNs: segments from `target`:`port` to `local_port`.
pub(crate) fn trace_tcp(target: Ipv4Addr, port: u16, local_port: u16) -> [Insn; 9] {
    [
        (LD_W_ABS, 0, 0, 12),                 // 0: source address
        (JEQ_K, 0, 6, u32::from(target)),     // 1: not the target -> 8
        (LDX_B_MSH, 0, 0, 0),                 // 2: X = IHL * 4
        (LD_H_IND, 0, 0, 0),                  // 3: TCP source port
        (JEQ_K, 0, 3, u32::from(port)),       // 4: not the probed port -> 8
        (LD_H_IND, 0, 0, 2),                  // 5: TCP destination port
        (JEQ_K, 0, 1, u32::from(local_port)), // 6: not ours -> 8
        (RET_K, 0, 0, ACCEPT),                // 7: accept
        (RET_K, 0, 0, 0),                     // 8: drop
    ]
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Runs `prog` on `pkt` as the kernel would for the instructions used here: what it returns
    /// (0: dropped). A load past the end drops, as in the kernel.
    pub(crate) fn run(prog: &[Insn], pkt: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0usize, 0usize);
        let load = |at: usize, n: usize| -> Option<u32> {
            let b = pkt.get(at..at + n)?;
            Some(b.iter().fold(0u32, |v, &byte| (v << 8) | u32::from(byte)))
        };
        loop {
            let &(code, jt, jf, k) = prog.get(pc).expect("a program ends in a return");
            pc += 1;
            let k_at = k as usize;
            match code {
                LD_W_ABS | LD_H_ABS | LD_B_ABS => {
                    let n = match code {
                        LD_W_ABS => 4,
                        LD_H_ABS => 2,
                        _ => 1,
                    };
                    match load(k_at, n) {
                        Some(v) => a = v,
                        None => return 0,
                    }
                }
                LD_W_IND | LD_H_IND | LD_B_IND => {
                    let n = match code {
                        LD_W_IND => 4,
                        LD_H_IND => 2,
                        _ => 1,
                    };
                    match load(x + k_at, n) {
                        Some(v) => a = v,
                        None => return 0,
                    }
                }
                LDX_B_MSH => match pkt.get(k_at) {
                    Some(b) => x = usize::from(b & 0x0f) * 4,
                    None => return 0,
                },
                JEQ_K => pc += usize::from(if a == k { jt } else { jf }),
                RET_K => return k,
                other => panic!("opcode {other:#x} is not interpreted here"),
            }
        }
    }

    /// An IPv4 header (20 bytes, no options) from `src` to `dst` carrying `proto`, then `body`.
    pub(crate) fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, body: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, proto, 0, 0];
        p.extend_from_slice(&src.octets());
        p.extend_from_slice(&dst.octets());
        let len = (p.len() + body.len()) as u16;
        p[2..4].copy_from_slice(&len.to_be_bytes());
        p.extend_from_slice(body);
        p
    }

    /// An ICMP message of `kind` with the 4 bytes after the checksum and a `rest`.
    fn icmp(kind: u8, code: u8, word: [u8; 4], rest: &[u8]) -> Vec<u8> {
        let mut m = vec![kind, code, 0, 0];
        m.extend_from_slice(&word);
        m.extend_from_slice(rest);
        m
    }

    const ME: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const TARGET: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);
    const ROUTER: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);
    const OTHER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 7);

    fn echo_reply_from(src: Ipv4Addr, ident: u16) -> Vec<u8> {
        let id = ident.to_be_bytes();
        ipv4(src, ME, 1, &icmp(0, 0, [id[0], id[1], 0, 1], b"joinguard"))
    }

    /// An ICMP error from `from` quoting a packet this host sent to `quoted_dst`.
    fn error_from(from: Ipv4Addr, kind: u8, code: u8, quoted_dst: Ipv4Addr) -> Vec<u8> {
        let quoted = ipv4(ME, quoted_dst, 6, &[0x9c, 0x40, 0x09, 0x50, 0, 0, 0, 1]);
        ipv4(from, ME, 1, &icmp(kind, code, [0; 4], &quoted))
    }

    #[test]
    fn the_pinger_keeps_only_its_own_echo_replies() {
        let prog = echo_reply(TARGET, 0x1234);
        assert_eq!(run(&prog, &echo_reply_from(TARGET, 0x1234)), ACCEPT);
        assert_eq!(
            run(&prog, &echo_reply_from(TARGET, 0x4321)),
            0,
            "another ident"
        );
        assert_eq!(
            run(&prog, &echo_reply_from(OTHER, 0x1234)),
            0,
            "another host"
        );
        assert_eq!(run(&prog, &error_from(ROUTER, 11, 0, TARGET)), 0);
        assert_eq!(
            run(&prog, &echo_reply_from(TARGET, 0x1234)[..22]),
            0,
            "truncated"
        );
    }

    /// ICMPv6, as a raw ICMPv6 socket's filter sees it: from the ICMPv6 header.
    #[test]
    fn the_icmpv6_pinger_keeps_only_its_own_echo_replies() {
        let prog = echo6_reply(0x1234);
        let echo = |kind: u8, ident: u16| {
            let id = ident.to_be_bytes();
            icmp(kind, 0, [id[0], id[1], 0, 1], b"joinguard")
        };
        assert_eq!(run(&prog, &echo(129, 0x1234)), ACCEPT);
        assert_eq!(run(&prog, &echo(129, 0x4321)), 0, "another ident");
        assert_eq!(run(&prog, &echo(128, 0x1234)), 0, "a request (loopback)");
        assert_eq!(run(&prog, &echo(1, 0x1234)), 0, "destination unreachable");
        assert_eq!(run(&prog, &echo(129, 0x1234)[..5]), 0, "truncated");
    }

    #[test]
    fn the_ipv6_path_mtu_probe_keeps_its_replies_and_packet_too_big_about_its_target() {
        let target: Ipv6Addr = "fd00:198:18::3".parse().unwrap();
        let prog = pmtu6(target, 0x1234);
        let reply = |ident: u16| {
            let id = ident.to_be_bytes();
            icmp(129, 0, [id[0], id[1], 0, 1], b"joinguard")
        };
        let ptb = |to: Ipv6Addr| {
            let mut quoted = vec![0x60, 0, 0, 0, 0x05, 0x50, 58, 64];
            quoted.extend_from_slice(&[0xfd; 16]);
            quoted.extend_from_slice(&to.octets());
            quoted.extend_from_slice(&[128, 0, 0, 0, 0x12, 0x34, 0, 1]);
            icmp(2, 0, [0, 0, 0x05, 0x78], &quoted)
        };
        assert_eq!(run(&prog, &reply(0x1234)), ACCEPT);
        assert_eq!(run(&prog, &reply(0x4321)), 0, "another ident");
        assert_eq!(run(&prog, &ptb(target)), ACCEPT, "packet too big");
        let other: Ipv6Addr = "fd00:198:18::4".parse().unwrap();
        assert_eq!(run(&prog, &ptb(other)), 0, "about another host");
        let last = "fd00:198:18::2".parse().unwrap();
        assert_eq!(run(&prog, &ptb(last)), 0, "the last word differs");
        assert_eq!(run(&prog, &ptb(target)[..40]), 0, "truncated");
        assert_eq!(
            run(&prog, &icmp(1, 4, [0; 4], &[0; 48])),
            0,
            "destination unreachable"
        );
    }

    #[test]
    fn an_ipv6_trace_keeps_only_the_answers_to_its_probes() {
        let target: Ipv6Addr = "fd00:198:18::4".parse().unwrap();
        let prog = trace_icmp6(target, 0x1234);
        let error = |kind: u8, to: Ipv6Addr| {
            let mut quoted = vec![0x60, 0, 0, 0, 0, 8, 17, 1];
            quoted.extend_from_slice(&[0xfd; 16]);
            quoted.extend_from_slice(&to.octets());
            quoted.extend_from_slice(&[0x9c, 0x40, 0x82, 0x9a, 0, 8, 0, 0]);
            icmp(kind, 0, [0; 4], &quoted)
        };
        let reply = |ident: u16| {
            let id = ident.to_be_bytes();
            icmp(129, 0, [id[0], id[1], 0, 1], b"joinguard")
        };
        assert_eq!(run(&prog, &reply(0x1234)), ACCEPT);
        assert_eq!(run(&prog, &reply(0x4321)), 0, "another trace's ping");
        for kind in [1, 2, 3] {
            assert_eq!(run(&prog, &error(kind, target)), ACCEPT, "type {kind}");
        }
        let other: Ipv6Addr = "fd00:198:18::7".parse().unwrap();
        assert_eq!(run(&prog, &error(3, other)), 0, "another trace");
        assert_eq!(run(&prog, &error(4, target)), 0, "a parameter problem");
        assert_eq!(run(&prog, &error(137, target)), 0, "a redirect");
        let tcp = trace_tcp6(2380, 40000);
        let seg = |sport: u16, dport: u16| {
            let mut t = sport.to_be_bytes().to_vec();
            t.extend_from_slice(&dport.to_be_bytes());
            t.extend_from_slice(&[0; 16]);
            t
        };
        assert_eq!(run(&tcp, &seg(2380, 40000)), ACCEPT);
        assert_eq!(run(&tcp, &seg(2379, 40000)), 0);
        assert_eq!(run(&tcp, &seg(2380, 40001)), 0);
    }

    #[test]
    fn a_trace_keeps_only_the_answers_to_its_probes() {
        let prog = trace_icmp(TARGET, 0x1234);
        assert_eq!(run(&prog, &echo_reply_from(TARGET, 0x1234)), ACCEPT);
        assert_eq!(
            run(&prog, &error_from(ROUTER, 11, 0, TARGET)),
            ACCEPT,
            "time exceeded"
        );
        assert_eq!(
            run(&prog, &error_from(TARGET, 3, 3, TARGET)),
            ACCEPT,
            "port unreachable"
        );
        assert_eq!(
            run(&prog, &error_from(ROUTER, 3, 4, TARGET)),
            ACCEPT,
            "frag needed"
        );
        assert_eq!(
            run(&prog, &echo_reply_from(TARGET, 0x4321)),
            0,
            "another ping"
        );
        assert_eq!(run(&prog, &echo_reply_from(OTHER, 0x1234)), 0);
        assert_eq!(
            run(&prog, &error_from(ROUTER, 11, 0, OTHER)),
            0,
            "another trace"
        );
        assert_eq!(
            run(&prog, &error_from(ROUTER, 5, 0, TARGET)),
            0,
            "a redirect"
        );
        // An IP header with options (IHL 6): the ICMP header is found past them.
        let mut with_options = error_from(ROUTER, 11, 0, TARGET);
        with_options[0] = 0x46;
        with_options.splice(20..20, [1, 1, 1, 0]);
        assert_eq!(run(&prog, &with_options), ACCEPT);
    }

    #[test]
    fn a_tcp_trace_keeps_only_the_answers_to_its_syns() {
        let prog = trace_tcp(TARGET, 2380, 40000);
        let seg = |src: Ipv4Addr, sport: u16, dport: u16| {
            let mut t = sport.to_be_bytes().to_vec();
            t.extend_from_slice(&dport.to_be_bytes());
            t.extend_from_slice(&[0; 16]);
            ipv4(src, ME, 6, &t)
        };
        assert_eq!(run(&prog, &seg(TARGET, 2380, 40000)), ACCEPT);
        assert_eq!(run(&prog, &seg(TARGET, 2379, 40000)), 0, "another service");
        assert_eq!(
            run(&prog, &seg(TARGET, 2380, 40001)),
            0,
            "another connection"
        );
        assert_eq!(run(&prog, &seg(OTHER, 2380, 40000)), 0, "another host");
    }
}
