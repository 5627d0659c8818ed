//! ICMP echo: round-trip loss and latency to a host, as `ping` measures them, over IPv4
//! (ICMP) and IPv6 (ICMPv6).
//!
//! Loss is judged on ICMP rather than on TCP connects because a connect that is dropped costs
//! the server a log line ("TLS handshake error ... EOF") and a SYN retransmit hides the loss for
//! a second. Raw ICMP sockets need root or CAP_NET_RAW; [`IcmpError::NoPrivilege`] says so, and
//! the caller falls back to TCP connects.

#![allow(unsafe_code)] // Registering the raw socket with tokio, and reading into MaybeUninit bytes.

use crate::wire::packet::checksum;
use std::collections::HashMap;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::unix::AsyncFd;

use super::{ProbeFailure, Sample};

/// Why an ICMP prober could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum IcmpError {
    #[error("ICMP echo needs root or CAP_NET_RAW (raw socket: {0}); run as root, or loss is measured with TCP connects")]
    NoPrivilege(io::Error),
    /// Kept for the probes that have no IPv6 side yet (see `pmtu`).
    #[error("ICMP probe to {0}: only IPv4 targets are supported")]
    Unsupported(IpAddr),
    #[error("ICMP socket: {0}")]
    Io(#[from] io::Error),
}

/// An echo prober bound to one destination.
///
/// The echoes of every [`Pinger::series`] are remembered: a reply that comes back after its
/// batch was handed out (a queue stall, not loss) still counts, until [`Pinger::late_limit`]
/// after its request. Only then is a missing reply lost, as `ping -W` would count it.
#[derive(Debug)]
pub struct Pinger {
    sock: AsyncFd<Socket>,
    dst: IpAddr,
    ident: u16,
    /// Random bytes every request carries and every reply of ours echoes back: a reply that
    /// lacks them was not caused by this pinger (a forged or stray reply with our identifier).
    nonce: [u8; 8],
    seq: u16,
    late_limit: Duration,
    /// Every echo of every series, in the order sent.
    echoes: Vec<Echo>,
    /// Sequence number to index in `echoes`.
    by_seq: HashMap<u16, usize>,
}

#[derive(Clone, Copy, Debug)]
struct Echo {
    sent: Instant,
    /// The wall clock at `sent`, against the kernel's receive timestamp of the reply.
    wall: SystemTime,
    rtt: Option<Duration>,
}

/// How long a reply may take before its echo is lost, unless [`Pinger::set_late_limit`] says
/// otherwise. One second: ICMP replies later than that are rarer than loss on any real path.
pub const DEFAULT_LATE_LIMIT: Duration = Duration::from_secs(1);

impl Pinger {
    /// Opens a raw ICMP (IPv4) or ICMPv6 (IPv6) socket for echoes to `dst`.
    pub fn open(dst: IpAddr) -> Result<Pinger, IcmpError> {
        let ident: u16 = rand::random();
        // The kernel hands this socket only echo replies from `dst` with our identifier: on a
        // busy node a raw ICMP socket otherwise receives every ICMP packet the host gets.
        let sock = match dst {
            IpAddr::V4(v4) => {
                let sock = raw_socket()?;
                super::bpf::attach(&sock, &super::bpf::echo_reply(v4, ident))?;
                sock
            }
            IpAddr::V6(_) => {
                let sock = raw_socket6()?;
                // An IPv6 raw socket reads no IP header, so its filter cannot see the source:
                // connecting it makes the kernel deliver only packets from `dst`
                // (net/ipv6/raw.c, raw_v6_match), and the filter keeps our echo replies.
                sock.connect(&SockAddr::from(SocketAddr::new(dst, 0)))?;
                super::bpf::attach(&sock, &super::bpf::echo6_reply(ident))?;
                sock
            }
        };
        sock.set_nonblocking(true)?;
        crate::wire::socket::enable_rx_timestamps(&sock);
        // SAFETY: `sock` owns its fd, which stays open and unchanged until the AsyncFd (which
        // owns `sock`) is dropped.
        let sock = unsafe { AsyncFd::register(sock) }.map_err(|e| IcmpError::Io(e.into()))?;
        Ok(Pinger {
            sock,
            dst,
            ident,
            nonce: rand::random(),
            seq: 0,
            late_limit: DEFAULT_LATE_LIMIT,
            echoes: Vec::new(),
            by_seq: HashMap::new(),
        })
    }

    /// How long after its request a reply still counts.
    pub(crate) fn late_limit(&self) -> Duration {
        self.late_limit
    }

    /// Changes [`Pinger::late_limit`] for replies still to come.
    pub fn set_late_limit(&mut self, limit: Duration) {
        self.late_limit = limit;
    }

    /// Sends one echo request and waits up to `timeout` for its reply. Not part of the series
    /// history.
    pub async fn ping(&mut self, timeout: Duration) -> Sample {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let packet = echo_request(self.dst, self.ident, seq, &self.nonce);
        let to = SockAddr::from(SocketAddr::new(self.dst, 0));
        let start = Instant::now();
        let result = tokio::time::timeout(timeout, async {
            loop {
                let mut g = self.sock.writable().await?;
                match g.try_io(|s| s.get_ref().send_to(&packet, &to)) {
                    Ok(r) => {
                        r?;
                        break;
                    }
                    Err(_would_block) => continue,
                }
            }
            let mut buf = [MaybeUninit::<u8>::uninit(); 1500];
            loop {
                let mut g = self.sock.readable().await?;
                let got = g.try_io(|s| s.get_ref().recv_from(&mut buf));
                let Ok(r) = got else { continue };
                let (n, from) = r?;
                // SAFETY: recv_from initialised the first `n` bytes.
                let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
                let from_ok = from.as_socket().map(|a| a.ip()) == Some(self.dst);
                if from_ok && is_our_reply(self.dst, bytes, self.ident, seq, &self.nonce) {
                    return Ok::<_, io::Error>(start.elapsed());
                }
            }
        })
        .await;
        Sample {
            result: match result {
                Ok(Ok(d)) => Ok(d),
                Ok(Err(e)) => Err(ProbeFailure::Io(e.to_string())),
                Err(_) => Err(ProbeFailure::Timeout(timeout.as_millis() as u64)),
            },
        }
    }

    /// Sends `count` echoes `interval` apart without waiting for replies (so a long RTT does not
    /// slow the series down), then listens until every echo sent so far is answered or lost, or
    /// `wait` after the last request, whichever is first. Replies to earlier series count too.
    pub async fn series(&mut self, count: u16, interval: Duration, wait: Duration) {
        let to = SockAddr::from(SocketAddr::new(self.dst, 0));
        let start = Instant::now();
        let mut last_sent = start;
        for i in 0..count {
            let send_at = start + interval * u32::from(i);
            self.listen_until(send_at, false).await;
            last_sent = self.send_to(&to);
        }
        self.listen_until(last_sent + wait, true).await;
    }

    /// Sends one echo now, without waiting for its reply; returns when it was sent. Replies are
    /// recorded by [`Pinger::listen`], [`Pinger::series`] and [`Pinger::drain`].
    pub fn send(&mut self) -> Instant {
        let to = SockAddr::from(SocketAddr::new(self.dst, 0));
        self.send_to(&to)
    }

    fn send_to(&mut self, to: &SockAddr) -> Instant {
        self.seq = self.seq.wrapping_add(1);
        let packet = echo_request(self.dst, self.ident, self.seq, &self.nonce);
        // Stamp before sending: a preemption after the send would otherwise shorten the
        // measured RTT, below what the wire allows.
        let stamp = Instant::now();
        let wall = SystemTime::now();
        // A failed send is an echo lost on the way out.
        let _ = self.sock.get_ref().send_to(&packet, to);
        self.by_seq.insert(self.seq, self.echoes.len());
        self.echoes.push(Echo {
            sent: stamp,
            wall,
            rtt: None,
        });
        stamp
    }

    /// Records replies until `until`.
    pub async fn listen(&mut self, until: Instant) {
        self.listen_until(until, false).await;
    }

    /// Echoes sent so far.
    pub fn sent(&self) -> usize {
        self.echoes.len()
    }

    /// Echoes sent at least `age` ago.
    pub fn due(&self, age: Duration) -> usize {
        let now = Instant::now();
        self.echoes
            .iter()
            .take_while(|e| now.duration_since(e.sent) >= age)
            .count()
    }

    /// One sample per echo sent at least `age` ago, in order: those are the echoes whose reply
    /// is due by now, and one without a reply counts as lost ([`Pinger::samples`] has all).
    pub fn samples_older_than(&self, age: Duration) -> Vec<Sample> {
        let now = Instant::now();
        let lost = ProbeFailure::Timeout(self.late_limit.as_millis() as u64);
        self.echoes
            .iter()
            .take_while(|e| now.duration_since(e.sent) >= age)
            .map(|e| Sample {
                result: e.rtt.ok_or_else(|| lost.clone()),
            })
            .collect()
    }

    /// Listens for stragglers until none is outstanding or `until`, whichever is first.
    pub async fn drain(&mut self, until: Instant) {
        self.listen_until(until, true).await;
    }

    /// Echoes sent but neither answered nor past the late limit yet.
    pub fn outstanding(&self) -> usize {
        let now = Instant::now();
        self.echoes
            .iter()
            .filter(|e| e.rtt.is_none() && now.duration_since(e.sent) <= self.late_limit)
            .count()
    }

    /// When the youngest outstanding echo becomes lost, if any is outstanding.
    pub(crate) fn settles_at(&self) -> Option<Instant> {
        let now = Instant::now();
        self.echoes
            .iter()
            .filter(|e| e.rtt.is_none() && now.duration_since(e.sent) <= self.late_limit)
            .map(|e| e.sent + self.late_limit)
            .max()
    }

    /// One sample per echo of every series, in order. An echo without a reply is a timeout,
    /// whether it is lost or still outstanding ([`Pinger::outstanding`] tells them apart).
    pub fn samples(&self) -> Vec<Sample> {
        let lost = ProbeFailure::Timeout(self.late_limit.as_millis() as u64);
        self.echoes
            .iter()
            .map(|e| Sample {
                result: e.rtt.ok_or_else(|| lost.clone()),
            })
            .collect()
    }

    /// Records replies until `until`. With `settle`, returns as soon as no echo is outstanding.
    async fn listen_until(&mut self, until: Instant, settle: bool) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 1500];
        loop {
            let deadline = if settle {
                match self.settles_at() {
                    Some(at) => until.min(at),
                    None => return,
                }
            } else {
                until
            };
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline.into()) => {}
                r = self.sock.readable() => {
                    let Ok(mut g) = r else { return };
                    while let Ok(r) = g.try_io(|s| crate::wire::socket::recv_stamped(s.get_ref(), &mut buf)) {
                        let Ok((n, kernel)) = r else { break };
                        // SAFETY: recvmsg initialised the first `n` bytes.
                        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
                        // A raw IPv4 socket reads the IP header: its source must be `dst`. (An
                        // IPv6 one is connected to `dst`, and reads no header.)
                        if let IpAddr::V4(v4) = self.dst {
                            if bytes.get(12..16) != Some(&v4.octets()[..]) {
                                continue;
                            }
                        }
                        let Some(seq) = reply_seq(self.dst, bytes, self.ident, &self.nonce) else { continue };
                        let Some(&i) = self.by_seq.get(&seq) else { continue };
                        let e = &mut self.echoes[i];
                        let rtt = stamped_rtt(e, kernel);
                        if e.rtt.is_none() && rtt <= self.late_limit {
                            e.rtt = Some(rtt);
                        }
                    }
                }
            }
        }
    }
}

/// An echo's RTT: from its send to the kernel's receive timestamp of the reply, so the time the
/// reply waited for this thread to be scheduled is not counted (it was a tail of milliseconds
/// when the joiner is busy: the p99 read 1.9 ms over the wire's truth at 50 ms RTT). The
/// time of the read when the kernel gave no stamp, or when the wall clock stepped between the
/// send and the reply (the kernel's figure is then longer than the read's, or negative).
fn stamped_rtt(e: &Echo, kernel: Option<SystemTime>) -> Duration {
    let read = e.sent.elapsed();
    kernel
        .and_then(|k| k.duration_since(e.wall).ok())
        .filter(|k| *k <= read)
        .unwrap_or(read)
}

/// A raw IPv4 ICMP socket; [`IcmpError::NoPrivilege`] without root or CAP_NET_RAW.
pub(crate) fn raw_socket() -> Result<Socket, IcmpError> {
    raw(Domain::IPV4, Protocol::ICMPV4)
}

/// A raw ICMPv6 socket; [`IcmpError::NoPrivilege`] without root or CAP_NET_RAW. The kernel
/// fills in the ICMPv6 checksum of what it sends (RFC 3542 section 3.1; net/ipv6/raw.c).
pub(crate) fn raw_socket6() -> Result<Socket, IcmpError> {
    raw(Domain::IPV6, Protocol::ICMPV6)
}

fn raw(domain: Domain, protocol: Protocol) -> Result<Socket, IcmpError> {
    Socket::new(domain, Type::RAW, Some(protocol)).map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            IcmpError::NoPrivilege(e)
        } else {
            IcmpError::Io(e)
        }
    })
}

/// The payload of every request after the ICMP header: a fixed text, then the nonce.
const PAYLOAD_TEXT: &[u8] = b"joinguard-preflight-echo";

/// ICMP echo request and reply types: 8 and 0 (RFC 792), 128 and 129 for ICMPv6 (RFC 4443).
fn echo_types(dst: IpAddr) -> (u8, u8) {
    match dst {
        IpAddr::V4(_) => (8, 0),
        IpAddr::V6(_) => (128, 129),
    }
}

/// The ICMP part of what a raw socket read if it is an echo reply to us: our identifier and our
/// nonce after the payload text. An IPv4 socket reads the IP header too, skipped by its IHL; an
/// IPv6 socket reads from the ICMPv6 header.
fn our_reply<'a>(dst: IpAddr, bytes: &'a [u8], ident: u16, nonce: &[u8; 8]) -> Option<&'a [u8]> {
    let header = match dst {
        IpAddr::V4(_) => usize::from(bytes.first()? & 0x0f) * 4,
        IpAddr::V6(_) => 0,
    };
    let icmp = bytes.get(header..).filter(|i| i.len() >= 8)?;
    let payload = &icmp[8..];
    (icmp[0] == echo_types(dst).1
        && u16::from_be_bytes([icmp[4], icmp[5]]) == ident
        && payload.get(PAYLOAD_TEXT.len()..PAYLOAD_TEXT.len() + 8) == Some(&nonce[..]))
    .then_some(icmp)
}

/// The sequence number of an echo reply to us.
fn reply_seq(dst: IpAddr, bytes: &[u8], ident: u16, nonce: &[u8; 8]) -> Option<u16> {
    our_reply(dst, bytes, ident, nonce).map(|icmp| u16::from_be_bytes([icmp[6], icmp[7]]))
}

/// An echo request to `dst`. The ICMPv6 checksum is left to the kernel (it covers a pseudo
/// header with the source address, which the kernel picks).
fn echo_request(dst: IpAddr, ident: u16, seq: u16, nonce: &[u8; 8]) -> Vec<u8> {
    let mut p = vec![echo_types(dst).0, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(PAYLOAD_TEXT);
    p.extend_from_slice(nonce);
    if dst.is_ipv4() {
        let c = checksum(&p);
        p[2..4].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// Whether `bytes` is the reply to our echo `seq`.
fn is_our_reply(dst: IpAddr, bytes: &[u8], ident: u16, seq: u16, nonce: &[u8; 8]) -> bool {
    reply_seq(dst, bytes, ident, nonce) == Some(seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const V4_LO: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const V6_LO: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

    #[test]
    fn echo_request_checksum_verifies() {
        let p = echo_request(V4_LO, 0x1234, 7, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(checksum(&p), 0, "a packet with its checksum sums to zero");
        let p6 = echo_request(V6_LO, 0x1234, 7, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(p6[0], 128, "ICMPv6 echo request");
        assert_eq!(&p6[4..], &p[4..], "same identifier, sequence and payload");
    }

    #[tokio::test]
    async fn a_series_pipelines_echoes_and_counts_every_reply() {
        for lo in [V4_LO, V6_LO] {
            let mut p = Pinger::open(lo).expect("tests run as root");
            p.series(50, Duration::from_millis(1), Duration::from_millis(500))
                .await;
            p.series(10, Duration::from_millis(1), Duration::from_millis(500))
                .await;
            let xs = p.samples();
            assert_eq!(xs.len(), 60, "{lo}: one sample per echo of both series");
            assert!(xs.iter().all(|s| s.result.is_ok()), "{lo}: {xs:?}");
            assert_eq!(p.outstanding(), 0);
            let again = p.ping(Duration::from_secs(1)).await;
            assert!(
                again.result.is_ok(),
                "{lo}: sequence numbers continue after a series"
            );
        }
    }

    /// A reply counts only with our identifier and our nonce: a reply to another pinger with the
    /// same identifier (or a forged one) is not ours.
    #[test]
    fn a_reply_without_our_nonce_is_not_ours() {
        let nonce = [9u8; 8];
        let reply = |n: &[u8; 8]| {
            let mut icmp = echo_request(V4_LO, 0x1234, 7, n);
            icmp[0] = 0; // echo reply
            let mut ip = vec![
                0x45u8, 0, 0, 0, 0, 0, 0, 0, 64, 1, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
            ];
            ip.extend_from_slice(&icmp);
            ip
        };
        assert!(is_our_reply(V4_LO, &reply(&nonce), 0x1234, 7, &nonce));
        assert!(!is_our_reply(V4_LO, &reply(&[8u8; 8]), 0x1234, 7, &nonce));
        assert!(!is_our_reply(V4_LO, &reply(&nonce), 0x1235, 7, &nonce));
        assert_eq!(
            reply_seq(V4_LO, &reply(&nonce)[..30], 0x1234, &nonce),
            None,
            "truncated"
        );
        // ICMPv6: no IP header before the message, and the reply is type 129.
        let mut r6 = echo_request(V6_LO, 0x1234, 7, &nonce);
        assert!(!is_our_reply(V6_LO, &r6, 0x1234, 7, &nonce), "a request");
        r6[0] = 129;
        assert!(is_our_reply(V6_LO, &r6, 0x1234, 7, &nonce));
        assert!(!is_our_reply(V6_LO, &r6, 0x1235, 7, &nonce));
        r6[0] = 0;
        assert!(
            !is_our_reply(V6_LO, &r6, 0x1234, 7, &nonce),
            "type 0 is no ICMPv6 echo reply"
        );
    }

    /// The socket's BPF filter: a pinger's socket receives nothing of another pinger's echoes to
    /// the same host (on loopback a raw ICMP socket otherwise sees every request and reply).
    #[tokio::test]
    async fn the_kernel_hands_a_pinger_only_its_own_replies() {
        for lo in [V4_LO, V6_LO] {
            let quiet = Pinger::open(lo).expect("tests run as root");
            let mut other = Pinger::open(lo).expect("tests run as root");
            while other.ident == quiet.ident {
                other = Pinger::open(lo).expect("tests run as root");
            }
            other
                .series(20, Duration::from_millis(1), Duration::from_millis(500))
                .await;
            assert!(other.samples().iter().all(|s| s.result.is_ok()), "{lo}");
            let mut buf = [MaybeUninit::<u8>::uninit(); 1500];
            let r = quiet.sock.get_ref().recv_from(&mut buf);
            assert_eq!(
                r.map(|(n, _)| n).map_err(|e| e.kind()),
                Err(io::ErrorKind::WouldBlock),
                "{lo}: another pinger's traffic reached this socket"
            );
        }
    }

    /// A raw socket receives from the moment it exists: what it queued before its filter
    /// (here another pinger's requests and replies on loopback) is dropped when the filter is
    /// attached, so the filter's promise holds from the first read.
    #[tokio::test]
    async fn what_a_raw_socket_queued_before_its_filter_is_dropped() {
        let lo = Ipv4Addr::LOCALHOST;
        let sock = raw_socket().expect("tests run as root");
        let mut other = Pinger::open(IpAddr::V4(lo)).expect("tests run as root");
        other
            .series(5, Duration::from_millis(1), Duration::from_millis(500))
            .await;
        let mut buf = [MaybeUninit::<u8>::uninit(); 1500];
        let flags = libc::MSG_DONTWAIT;
        assert!(
            sock.recv_with_flags(&mut buf, flags | libc::MSG_PEEK)
                .is_ok(),
            "the unfiltered socket saw the other pinger's echoes"
        );
        let ident = other.ident.wrapping_add(1);
        super::super::bpf::attach(&sock, &super::super::bpf::echo_reply(lo, ident)).unwrap();
        let r = sock.recv_with_flags(&mut buf, flags);
        assert_eq!(
            r.map_err(|e| e.kind()),
            Err(io::ErrorKind::WouldBlock),
            "a packet queued before the filter was left in the socket"
        );
    }

    #[tokio::test]
    async fn pings_loopback() {
        for lo in [V4_LO, V6_LO] {
            let mut p = Pinger::open(lo).expect("tests run as root");
            let s = p.ping(Duration::from_secs(1)).await;
            assert!(s.result.is_ok(), "{lo}: {s:?}");
        }
    }
}
