//! The tracer: per-hop latency and loss to one target, as `mtr --report` measures them.
//!
//! Each cycle sends one probe per TTL (IPv6: hop limit) (ICMP or ICMPv6 echo, UDP datagram or
//! TCP SYN to the service port)
//! and matches what comes back by what the reply quotes ([`packet`]): Time Exceeded from each
//! router, and from the target an Echo Reply, a Port Unreachable, or a SYN-ACK/RST. Once the
//! target has answered, later cycles stop at its distance. Every probe waits at most
//! `probe_timeout`, and the whole trace ends by `timeout` with whatever it saw.
//!
//! This module returns data ([`PathTrace`]) and never formats it: [`report`] does, for the
//! `trace` command and for preflight. [`analysis`] says where latency or loss first appears.
//!
//! Why not trippy-core: see docs/trace.md ("Why not trippy-core"). In short, it runs its own
//! blocking thread with no way to stop a round from outside (preflight needs an async trace
//! bounded by its remaining `--timeout`), its TCP mode completes a real `connect()` to the
//! target (every probe would be an accepted-then-dropped connection in etcd's log), it pins
//! socket2 0.5 beside our 0.6, and its docs call the API unstable.

pub(crate) mod analysis;
pub mod command;
pub mod report;

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use socket2::Protocol as SockProto;

use crate::wire::packet::{self, ProbeId, Reply, ReplyKind};
use crate::wire::socket::{self, RawSocket};

pub use crate::spec::TraceProtocol;

/// First destination port of UDP probes without --port (traceroute's and mtr's base).
pub const UDP_BASE_PORT: u16 = 33434;

/// What to trace and how long for.
#[derive(Clone, Debug)]
pub struct TraceInput {
    /// The target as the user gave it (a name or an address), for the report.
    pub(crate) label: String,
    pub(crate) target: IpAddr,
    pub(crate) protocol: TraceProtocol,
    /// Destination port (TCP: required; UDP: fixed port instead of 33434 + n; ICMP: unused).
    pub(crate) port: Option<u16>,
    /// Probes per hop.
    pub(crate) cycles: u32,
    pub(crate) max_hops: u8,
    /// Time between the starts of two cycles.
    pub(crate) interval: Duration,
    /// How long one probe waits for its reply before it counts as lost.
    pub(crate) probe_timeout: Duration,
    /// The whole trace ends by then.
    pub(crate) timeout: Duration,
    /// Look up hop names by reverse DNS.
    pub(crate) dns: bool,
    /// Size of each probe (the whole IP packet, bytes), sent with DF set; `None`: small probes
    /// as mtr sends them by default. Where a router answers "fragmentation needed", the hop
    /// records the MTU and later probes shrink to it, as tracepath does.
    pub(crate) size: Option<u16>,
}

/// Why a trace could not run.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "tracing needs raw sockets, which need root or CAP_NET_RAW ({0}). Run as root, or grant \
         the capability once: sudo setcap cap_net_raw+ep \"$(command -v joinguard)\""
    )]
    NoPrivilege(io::Error),
    #[error(
        "no route to {target} from this host ({source}); check its address and this host's routes"
    )]
    NoRoute { target: IpAddr, source: io::Error },
    #[error("trace to {target}: {what}: {source}")]
    Io {
        target: IpAddr,
        what: &'static str,
        source: io::Error,
    },
}

impl TraceError {
    fn io(target: IpAddr, what: &'static str) -> impl FnOnce(io::Error) -> TraceError {
        move |source| {
            if source.kind() == io::ErrorKind::PermissionDenied {
                TraceError::NoPrivilege(source)
            } else {
                TraceError::Io {
                    target,
                    what,
                    source,
                }
            }
        }
    }
}

/// What a trace saw: one row per hop, nearest first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathTrace {
    /// The target as given.
    pub target: String,
    pub address: IpAddr,
    pub protocol: TraceProtocol,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Cycles asked for and cycles whose probes were all sent.
    pub cycles: u32,
    pub cycles_sent: u32,
    /// Whether the target itself answered at least once.
    pub reached: bool,
    /// How the target (or the router that gave up) answered, e.g. `syn-ack`, `echo-reply`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_reply: Option<FinalReply>,
    pub hops: Vec<Hop>,
    /// True when `timeout` ended the trace before every probe was answered or lost.
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The probe size asked for (`--size`), sent with DF set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u16>,
    /// The smallest MTU a router reported ("fragmentation needed"), when one did: the size the
    /// last probes were sent at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_mtu: Option<u16>,
}

/// The last word on the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinalReply {
    /// ICMP Echo Reply from the target.
    EchoReply,
    /// ICMP Port Unreachable from the target (the UDP answer of a reached host).
    PortUnreachable,
    /// SYN-ACK: the target's port is open.
    SynAck,
    /// RST: the target is up but its port is closed.
    Rst,
    /// ICMP Destination Unreachable (other than port unreachable) from a hop: the path ends there.
    Unreachable { code: u8 },
}

/// One hop of the path (one TTL).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hop {
    /// 1 for the first router.
    pub ttl: u8,
    /// Who answered (the first address seen); `None` when nobody did ("???" in mtr).
    pub address: Option<IpAddr>,
    /// Other addresses that answered at this TTL (ECMP, route changes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_addresses: Vec<IpAddr>,
    /// Reverse DNS name, when asked for and found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub sent: u32,
    pub received: u32,
    pub loss_pct: f64,
    pub last_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub avg_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// mtr's jitter: the mean absolute difference between consecutive RTTs of this hop.
    pub jitter_ms: Option<f64>,
    /// mtr's Jmax: the largest such difference.
    pub jitter_max_ms: Option<f64>,
    /// Whether this hop is the target.
    pub is_target: bool,
    /// Where the path MTU drops: the MTU a router reported ("fragmentation needed") for probes
    /// that were to reach this hop, i.e. the link into it. Only with `--size`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u16>,
    /// Who reported `mtu` (the router before the small link, or this hop).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu_from: Option<IpAddr>,
}

#[derive(Debug)]
struct Probe {
    ttl: u8,
    cycle: u32,
    /// The size it was sent at (`None`: the default small probe).
    size: Option<u16>,
    sent_wall: SystemTime,
    sent: Instant,
    /// The UDP probe's own socket (its port identifies it); dropped once settled.
    udp: Option<socket2::Socket>,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Pending,
    Answered {
        from: IpAddr,
        rtt: Duration,
        kind: ReplyKind,
    },
    Lost,
    /// Too large for a link ("fragmentation needed"): sent again at the reported MTU, and not
    /// counted.
    Resized,
}

/// The port a TCP trace probes when none is given (validation asks for one; preflight's own
/// traces always give one).
const TCP_DEFAULT_PORT: u16 = 80;

/// Sockets and identifiers of one trace.
struct Wire {
    src: IpAddr,
    icmp: RawSocket,
    tcp: Option<(RawSocket, socket2::Socket, u16)>,
    ident: u16,
    tcp_seq_base: u32,
}

/// Runs one trace. Ends by `spec.timeout` whatever the path does.
pub async fn trace(spec: &TraceInput) -> Result<PathTrace, TraceError> {
    let started = Instant::now();
    let deadline = started + spec.timeout;
    let target = spec.target;
    let src =
        socket::source_for(target).map_err(|source| TraceError::NoRoute { target, source })?;
    let ident: u16 = rand::random();
    // Every mode reads the ICMP errors of routers from a raw ICMP (ICMPv6) socket, filtered in
    // the kernel to this trace's answers.
    let (icmp_proto, icmp_filter) = match target {
        IpAddr::V4(v4) => (
            SockProto::ICMPV4,
            crate::probe::bpf::trace_icmp(v4, ident).to_vec(),
        ),
        IpAddr::V6(v6) => (
            SockProto::ICMPV6,
            crate::probe::bpf::trace_icmp6(v6, ident).to_vec(),
        ),
    };
    let icmp =
        RawSocket::open(target, icmp_proto).map_err(TraceError::io(target, "raw ICMP socket"))?;
    crate::probe::bpf::attach(icmp.socket(), &icmp_filter)
        .map_err(TraceError::io(target, "filter the raw ICMP socket"))?;
    let tcp = match spec.protocol {
        TraceProtocol::Tcp => {
            let dport = spec.port.unwrap_or(TCP_DEFAULT_PORT);
            let raw = RawSocket::open(target, SockProto::TCP)
                .map_err(TraceError::io(target, "raw TCP socket"))?;
            raw.bind(src)
                .map_err(TraceError::io(target, "bind the raw TCP socket"))?;
            let (hold, port) = socket::reserve_tcp_port(src)
                .map_err(TraceError::io(target, "reserve a TCP port"))?;
            let filter = match target {
                IpAddr::V4(v4) => crate::probe::bpf::trace_tcp(v4, dport, port).to_vec(),
                IpAddr::V6(_) => crate::probe::bpf::trace_tcp6(dport, port).to_vec(),
            };
            crate::probe::bpf::attach(raw.socket(), &filter)
                .map_err(TraceError::io(target, "filter the raw TCP socket"))?;
            Some((raw, hold, port))
        }
        _ => None,
    };
    let wire = Wire {
        src,
        icmp,
        tcp,
        ident,
        tcp_seq_base: rand::random(),
    };
    if spec.size.is_some() {
        // DF set, and the kernel's cached path MTU does not stop a probe on its way out.
        crate::probe::pmtu::set_pmtudisc_probe_for(wire.icmp.socket(), target)
            .map_err(TraceError::io(target, "set DF on the raw ICMP socket"))?;
        if let Some((raw, _, _)) = &wire.tcp {
            crate::probe::pmtu::set_pmtudisc_probe_for(raw.socket(), target)
                .map_err(TraceError::io(target, "set DF on the raw TCP socket"))?;
        }
    }
    // The size probes go out at: `spec.size`, lowered by each "fragmentation needed".
    let mut size = spec.size;
    // (TTL of the probe, MTU reported, who reported it).
    let mut mtu_reports: Vec<(u8, u16, IpAddr)> = Vec::new();

    let mut probes: Vec<Probe> = Vec::new();
    let mut by_id: HashMap<ProbeId, usize> = HashMap::new();
    let mut target_ttl: Option<u8> = None;
    let mut dead_end: Option<(u8, u8)> = None; // (ttl, code) of a Destination Unreachable
    let mut cycles_sent = 0u32;
    let mut buf = vec![0u8; 2048];
    let mut timed_out = false;

    loop {
        let now = Instant::now();
        if now >= deadline {
            timed_out =
                cycles_sent < spec.cycles || probes.iter().any(|p| p.state == State::Pending);
            break;
        }
        for p in probes.iter_mut().filter(|p| p.state == State::Pending) {
            if now.duration_since(p.sent) >= spec.probe_timeout {
                p.state = State::Lost;
                p.udp = None;
            }
        }
        let next_cycle_at = started + spec.interval * cycles_sent;
        if cycles_sent < spec.cycles && now >= next_cycle_at {
            let limit = target_ttl
                .or(dead_end.map(|(t, _)| t))
                .unwrap_or(spec.max_hops)
                .min(spec.max_hops);
            for ttl in 1..=limit {
                send_and_record(spec, &wire, ttl, cycles_sent, size, &mut probes, &mut by_id);
            }
            cycles_sent += 1;
            tracing::debug!(cycle = cycles_sent, of = spec.cycles, "trace cycle sent");
            continue;
        }
        let pending = probes.iter().filter(|p| p.state == State::Pending);
        let next_expiry = pending.map(|p| p.sent + spec.probe_timeout).min();
        if cycles_sent >= spec.cycles && next_expiry.is_none() {
            break;
        }
        let mut wake = deadline;
        if cycles_sent < spec.cycles {
            wake = wake.min(started + spec.interval * cycles_sent);
        }
        if let Some(e) = next_expiry {
            wake = wake.min(e);
        }
        let replies = wait_replies(&wire, wake, &mut buf).await;
        for (reply, at) in replies {
            let Some(&i) = by_id.get(&reply.probe) else {
                continue;
            };
            if reply.quoted_dst.is_some_and(|d| d != target) {
                continue;
            }
            // An echo reply, SYN-ACK or RST answers only from the target (an IPv6 socket's
            // filter cannot see the source; this holds for IPv4 too).
            let from_target_only = matches!(
                reply.kind,
                ReplyKind::EchoReply | ReplyKind::SynAck | ReplyKind::Rst
            );
            if from_target_only && reply.from != target {
                continue;
            }
            let p = &mut probes[i];
            if p.state != State::Pending {
                continue;
            }
            if let ReplyKind::FragNeeded { mtu } = reply.kind {
                // Not an answer: the probe was too large for a link on the way. Note where,
                // shrink the probes to the MTU reported, and send this one again.
                p.state = State::Resized;
                p.udp = None;
                let (ttl, cycle, sent_at) = (p.ttl, p.cycle, p.size);
                let mtu = plausible_mtu(mtu, sent_at);
                mtu_reports.push((ttl, mtu, reply.from));
                size = Some(size.map_or(mtu, |s| s.min(mtu)));
                if sent_at.is_none_or(|s| s > mtu) {
                    send_and_record(spec, &wire, ttl, cycle, size, &mut probes, &mut by_id);
                } else {
                    probes[i].state = State::Lost;
                }
                continue;
            }
            let rtt = match at {
                Some(t) => t
                    .duration_since(p.sent_wall)
                    .unwrap_or_else(|_| p.sent.elapsed()),
                None => p.sent.elapsed(),
            };
            if rtt > spec.probe_timeout {
                continue; // a late reply: already lost as far as the report goes
            }
            p.state = State::Answered {
                from: reply.from,
                rtt,
                kind: reply.kind,
            };
            p.udp = None;
            let at_target = reply.from == target;
            match reply.kind {
                ReplyKind::Unreachable(code)
                    if !(at_target && code == packet::CODE_PORT_UNREACHABLE) =>
                {
                    if dead_end.is_none_or(|(t, _)| p.ttl < t) && !at_target {
                        dead_end = Some((p.ttl, code));
                    }
                    if at_target {
                        target_ttl = Some(target_ttl.map_or(p.ttl, |t| t.min(p.ttl)));
                    }
                }
                _ if at_target => {
                    target_ttl = Some(target_ttl.map_or(p.ttl, |t| t.min(p.ttl)));
                }
                _ => {}
            }
        }
    }

    let mut trace = summarize(spec, &probes, target_ttl, dead_end, cycles_sent, timed_out);
    mark_mtu_drops(&mut trace, &mtu_reports);
    if spec.dns {
        resolve_names(&mut trace, deadline).await;
    }
    trace.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(trace)
}

/// Sends the next probe with `ttl` for `cycle` at `size`, and records it.
fn send_and_record(
    spec: &TraceInput,
    wire: &Wire,
    ttl: u8,
    cycle: u32,
    size: Option<u16>,
    probes: &mut Vec<Probe>,
    by_id: &mut HashMap<ProbeId, usize>,
) {
    let seq = probes.len();
    match send_probe(spec, wire, ttl, seq, size) {
        Ok((id, sent_wall, udp)) => {
            by_id.insert(id, probes.len());
            probes.push(Probe {
                ttl,
                cycle,
                size,
                sent_wall,
                sent: Instant::now(),
                udp,
                state: State::Pending,
            });
        }
        // A send the kernel refuses (no buffer, unreachable) is a probe lost on the way out; a
        // missing privilege would have failed at open.
        Err(e) => tracing::debug!(ttl, error = %e, "probe send failed"),
    }
}

/// The MTU to shrink to after a "fragmentation needed" for a probe of `sent` bytes: the one
/// the router reported, or, from a router older than RFC 1191 (0) or one reporting no less
/// than what it refused, the next plateau below the probe's size (RFC 1191, section 7).
fn plausible_mtu(reported: u16, sent: Option<u16>) -> u16 {
    let sent = sent.unwrap_or(u16::MAX);
    if (68..sent).contains(&reported) {
        return reported;
    }
    const PLATEAUS: [u16; 10] = [32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68];
    PLATEAUS.into_iter().find(|p| *p < sent).unwrap_or(68)
}

/// Puts each MTU reported on the hop it first appeared at: the link into that hop is where the
/// path MTU drops to it.
fn mark_mtu_drops(trace: &mut PathTrace, reports: &[(u8, u16, IpAddr)]) {
    let mut sorted = reports.to_vec();
    sorted.sort_by_key(|(ttl, mtu, _)| (*ttl, std::cmp::Reverse(*mtu)));
    let mut known = trace.size.unwrap_or(u16::MAX);
    for (ttl, mtu, from) in sorted {
        if mtu >= known {
            continue;
        }
        known = mtu;
        if let Some(h) = trace.hops.iter_mut().find(|h| h.ttl == ttl) {
            h.mtu = Some(mtu);
            h.mtu_from = Some(from);
        }
    }
    trace.path_mtu = reports.iter().map(|(_, m, _)| *m).min();
}

/// Sends the probe number `seq` with `ttl`, of `size` bytes when given.
fn send_probe(
    spec: &TraceInput,
    w: &Wire,
    ttl: u8,
    seq: usize,
    size: Option<u16>,
) -> io::Result<(ProbeId, SystemTime, Option<socket2::Socket>)> {
    match spec.protocol {
        TraceProtocol::Icmp => {
            let seq = seq as u16;
            let data = packet::padding(size, packet::headers(packet::ECHO_HEADERS, spec.target));
            let pkt = match spec.target {
                IpAddr::V4(_) => packet::echo_request(w.ident, seq, data),
                IpAddr::V6(_) => packet::echo_request6(w.ident, seq, data),
            };
            let at = w.icmp.send_with_ttl(&pkt, spec.target, ttl)?;
            Ok((
                ProbeId::Echo {
                    ident: w.ident,
                    seq,
                },
                at,
                None,
            ))
        }
        TraceProtocol::Udp => {
            let (s, src_port) = socket::udp_probe_socket(w.src)?;
            if size.is_some() {
                crate::probe::pmtu::set_pmtudisc_probe_for(&s, spec.target)?;
            }
            let dst_port = spec
                .port
                .unwrap_or_else(|| UDP_BASE_PORT.wrapping_add(seq as u16));
            let data = packet::padding(size, packet::headers(packet::UDP_HEADERS, spec.target));
            let at = socket::udp_send(&s, spec.target, dst_port, ttl, data)?;
            Ok((ProbeId::Udp { src_port, dst_port }, at, Some(s)))
        }
        TraceProtocol::Tcp => {
            let (raw, _, src_port) = w
                .tcp
                .as_ref()
                .ok_or_else(|| io::Error::other("no TCP socket"))?;
            let dst_port = spec.port.unwrap_or(TCP_DEFAULT_PORT);
            let tcp_seq = w.tcp_seq_base.wrapping_add(seq as u32);
            let data = packet::padding(size, packet::headers(packet::SYN_HEADERS, spec.target));
            let pkt = packet::tcp_syn(w.src, *src_port, spec.target, dst_port, tcp_seq, data);
            let at = raw.send_with_ttl(&pkt, spec.target, ttl)?;
            Ok((
                ProbeId::Tcp {
                    src_port: *src_port,
                    dst_port,
                    seq: tcp_seq,
                },
                at,
                None,
            ))
        }
    }
}

/// Waits until `wake` or until replies arrive, and returns every reply read (with the kernel's
/// receive timestamp when there is one).
async fn wait_replies(w: &Wire, wake: Instant, buf: &mut [u8]) -> Vec<(Reply, Option<SystemTime>)> {
    let mut out = Vec::new();
    let tcp_ready = async {
        match &w.tcp {
            Some((raw, _, _)) => raw.readable().await.map(|mut g| g.clear_ready()),
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::time::sleep_until(wake.into()) => return out,
        r = w.icmp.readable() => { if let Ok(mut g) = r { g.clear_ready(); } }
        _ = tcp_ready => {}
    }
    // Drain both sockets: clear_ready above re-arms readiness, and a read that would block
    // simply ends the drain.
    let v6 = w.src.is_ipv6();
    let (icmp, tcp): (Parse, Parse) = if v6 {
        (packet::parse_icmp6, packet::parse_tcp6)
    } else {
        (|p, _| packet::parse_icmp(p), |p, _| packet::parse_tcp(p))
    };
    drain(&w.icmp, buf, icmp, &mut out);
    if let Some((raw, _, _)) = &w.tcp {
        drain(raw, buf, tcp, &mut out);
    }
    out
}

/// Parses what a raw socket read, given the sender it reported (an IPv4 socket's reads carry
/// their IP header; an IPv6 socket's do not).
type Parse = fn(&[u8], IpAddr) -> Option<Reply>;

fn drain(s: &RawSocket, buf: &mut [u8], parse: Parse, out: &mut Vec<(Reply, Option<SystemTime>)>) {
    // Bounded: a busy host's TCP traffic cannot keep the tracer here.
    for _ in 0..256 {
        let Ok((n, at, from)) = s.try_recv(buf) else {
            break;
        };
        let from = from.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
        if let Some(r) = parse(&buf[..n.min(buf.len())], from) {
            out.push((r, at));
        }
    }
}

/// Builds the hop table from the probes.
fn summarize(
    spec: &TraceInput,
    probes: &[Probe],
    target_ttl: Option<u8>,
    dead_end: Option<(u8, u8)>,
    cycles_sent: u32,
    timed_out: bool,
) -> PathTrace {
    let last_answering = probes
        .iter()
        .filter(|p| matches!(p.state, State::Answered { .. }))
        .map(|p| p.ttl)
        .max();
    let rows = match (target_ttl, dead_end) {
        (Some(t), _) => t,
        (None, Some((t, _))) => t,
        // Not reached: the hops that answered, then one dark row for where the path goes quiet.
        (None, None) => last_answering
            .map_or(1, |t| t.saturating_add(1))
            .min(spec.max_hops),
    };
    let mut hops = Vec::new();
    for ttl in 1..=rows {
        let mut mine: Vec<&Probe> = probes
            .iter()
            .filter(|p| p.ttl == ttl && !matches!(p.state, State::Pending | State::Resized))
            .collect();
        mine.sort_by_key(|p| p.cycle);
        let answered: Vec<(IpAddr, Duration)> = mine
            .iter()
            .filter_map(|p| match p.state {
                State::Answered { from, rtt, .. } => Some((from, rtt)),
                _ => None,
            })
            .collect();
        let mut addrs: Vec<IpAddr> = Vec::new();
        for (a, _) in &answered {
            if !addrs.contains(a) {
                addrs.push(*a);
            }
        }
        let ms: Vec<f64> = answered
            .iter()
            .map(|(_, d)| d.as_secs_f64() * 1000.0)
            .collect();
        let sent = mine.len() as u32;
        let received = answered.len() as u32;
        let diffs: Vec<f64> = ms.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        let address = addrs.first().copied();
        hops.push(Hop {
            ttl,
            address,
            other_addresses: addrs.iter().skip(1).copied().collect(),
            name: None,
            sent,
            received,
            loss_pct: if sent == 0 {
                0.0
            } else {
                round3(f64::from(sent - received) * 100.0 / f64::from(sent))
            },
            last_ms: ms.last().copied().map(round3),
            min_ms: ms.iter().copied().reduce(f64::min).map(round3),
            avg_ms: (!ms.is_empty()).then(|| round3(ms.iter().sum::<f64>() / ms.len() as f64)),
            max_ms: ms.iter().copied().reduce(f64::max).map(round3),
            jitter_ms: (!diffs.is_empty())
                .then(|| round3(diffs.iter().sum::<f64>() / diffs.len() as f64)),
            jitter_max_ms: diffs.iter().copied().reduce(f64::max).map(round3),
            is_target: address == Some(spec.target),
            mtu: None,
            mtu_from: None,
        });
    }
    let final_reply = match (target_ttl, dead_end) {
        (Some(t), _) => probes
            .iter()
            .filter(|p| p.ttl == t)
            .find_map(|p| match p.state {
                State::Answered { from, kind, .. } if from == spec.target => Some(match kind {
                    ReplyKind::EchoReply => FinalReply::EchoReply,
                    ReplyKind::SynAck => FinalReply::SynAck,
                    ReplyKind::Rst => FinalReply::Rst,
                    ReplyKind::Unreachable(packet::CODE_PORT_UNREACHABLE) => {
                        FinalReply::PortUnreachable
                    }
                    ReplyKind::Unreachable(code) => FinalReply::Unreachable { code },
                    ReplyKind::FragNeeded { .. } => FinalReply::Unreachable {
                        code: packet::CODE_FRAG_NEEDED,
                    },
                    ReplyKind::TimeExceeded => FinalReply::Unreachable { code: 255 },
                }),
                _ => None,
            }),
        (None, Some((_, code))) => Some(FinalReply::Unreachable { code }),
        (None, None) => None,
    };
    PathTrace {
        target: spec.label.clone(),
        address: spec.target,
        protocol: spec.protocol,
        port: match spec.protocol {
            TraceProtocol::Icmp => None,
            _ => spec.port,
        },
        cycles: spec.cycles,
        cycles_sent,
        reached: target_ttl.is_some(),
        final_reply,
        hops,
        timed_out,
        duration_ms: 0,
        size: spec.size,
        path_mtu: None,
    }
}

/// Fills in hop names by reverse DNS, all at once, bounded by the trace's deadline (and 2 s) as a
/// whole: the lookups share one budget, they do not get it each.
async fn resolve_names(trace: &mut PathTrace, deadline: Instant) {
    let until = deadline.min(Instant::now() + Duration::from_secs(2));
    let lookups: Vec<_> = trace
        .hops
        .iter()
        .map(|h| {
            h.address
                .map(|a| tokio::task::spawn_blocking(move || socket::reverse_name(a)))
        })
        .collect();
    for (hop, name) in trace.hops.iter_mut().zip(join_until(until, lookups).await) {
        if let Some(name) = name.flatten() {
            hop.name = Some(name);
        }
    }
}

/// The results of `tasks` that finished by `until` (one shared deadline), in order; `None` for a
/// task that was absent, failed or was late. Late tasks are left to finish on their own.
async fn join_until<T>(
    until: Instant,
    tasks: Vec<Option<tokio::task::JoinHandle<T>>>,
) -> Vec<Option<T>> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(match t {
            Some(t) => tokio::time::timeout_at(until.into(), t)
                .await
                .ok()
                .and_then(Result::ok),
            None => None,
        });
    }
    out
}

/// Microsecond precision is all a millisecond figure needs.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::analysis::tests::{hop, path};

    /// Lookups share one deadline: eight that each take 10 s end, all together, at the 300 ms
    /// budget (one at a time, each with the whole budget, they took 8 x 300 ms).
    #[tokio::test(start_paused = true)]
    async fn lookups_share_one_deadline() {
        let clock = tokio::time::Instant::now();
        let started = Instant::now();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                Some(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    i
                }))
            })
            .chain([None, Some(tokio::spawn(async { 99 }))])
            .collect();
        let got = join_until(started + Duration::from_millis(300), tasks).await;
        let took = clock.elapsed();
        assert!(
            took >= Duration::from_millis(300) && took < Duration::from_millis(400),
            "{took:?}"
        );
        assert_eq!(got[..8], [None; 8]);
        assert_eq!(got[8..], [None, Some(99)]);
    }

    #[test]
    fn a_reported_mtu_is_taken_unless_it_cannot_be_right() {
        assert_eq!(plausible_mtu(1400, Some(1500)), 1400);
        // A router older than RFC 1191 says 0: the next plateau below the probe.
        assert_eq!(plausible_mtu(0, Some(1500)), 1492);
        assert_eq!(plausible_mtu(0, Some(1492)), 1006);
        // No smaller than what it refused: a confused router; still shrink.
        assert_eq!(plausible_mtu(1500, Some(1500)), 1492);
        assert_eq!(plausible_mtu(0, Some(60)), 68);
    }

    #[test]
    fn each_mtu_drop_lands_on_the_first_hop_that_reported_it() {
        let mut t = path(vec![
            hop(1, Some(0.1), 10, 10),
            hop(2, Some(0.2), 10, 10),
            hop(3, Some(0.3), 10, 10),
            hop(4, Some(0.4), 10, 10),
        ]);
        t.size = Some(1500);
        let r2: IpAddr = std::net::Ipv4Addr::new(198, 18, 0, 3).into();
        let r3: IpAddr = std::net::Ipv4Addr::new(198, 18, 0, 4).into();
        // The first cycle's probes to hops 2 to 4 all hit the 1400 link; then 1300 past hop 3.
        let reports = [
            (3, 1400, r2),
            (2, 1400, r2),
            (4, 1400, r2),
            (4, 1300, r3),
            (3, 1300, r3),
        ];
        mark_mtu_drops(&mut t, &reports);
        let mtus: Vec<Option<u16>> = t.hops.iter().map(|h| h.mtu).collect();
        assert_eq!(mtus, [None, Some(1400), Some(1300), None]);
        assert_eq!(t.hops[2].mtu_from, Some(r3));
        assert_eq!(t.path_mtu, Some(1300));
        let mut clean = path(vec![hop(1, Some(0.1), 10, 10)]);
        mark_mtu_drops(&mut clean, &[]);
        assert_eq!((clean.hops[0].mtu, clean.path_mtu), (None, None));
    }
}
