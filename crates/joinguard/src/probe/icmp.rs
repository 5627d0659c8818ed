//! ICMP echo: round-trip loss and latency to a host, as `ping` measures them.
//!
//! Loss is judged on ICMP rather than on TCP connects because a connect that is dropped costs
//! the server a log line ("TLS handshake error ... EOF") and a SYN retransmit hides the loss for
//! a second. Raw ICMP sockets need root or CAP_NET_RAW; [`IcmpError::NoPrivilege`] says so, and
//! the caller falls back to TCP connects.

#![allow(unsafe_code)] // Registering the raw socket with tokio, and reading into MaybeUninit bytes.

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use tokio::io::unix::AsyncFd;

use super::{ProbeFailure, Sample};

/// Why an ICMP prober could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum IcmpError {
    #[error("ICMP echo needs root or CAP_NET_RAW (raw socket: {0}); run as root, or loss is measured with TCP connects")]
    NoPrivilege(io::Error),
    #[error("ICMP echo to {0}: only IPv4 targets are supported")]
    Unsupported(IpAddr),
    #[error("ICMP socket: {0}")]
    Io(#[from] io::Error),
}

/// An echo prober bound to one destination.
#[derive(Debug)]
pub struct Pinger {
    sock: AsyncFd<Socket>,
    dst: Ipv4Addr,
    ident: u16,
    seq: u16,
}

impl Pinger {
    /// Opens a raw ICMP socket for echoes to `dst`.
    pub fn open(dst: IpAddr) -> Result<Pinger, IcmpError> {
        let IpAddr::V4(dst) = dst else {
            return Err(IcmpError::Unsupported(dst));
        };
        let sock = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::ICMPV4)).map_err(|e| {
            if e.kind() == io::ErrorKind::PermissionDenied {
                IcmpError::NoPrivilege(e)
            } else {
                IcmpError::Io(e)
            }
        })?;
        sock.set_nonblocking(true)?;
        // SAFETY: `sock` owns its fd, which stays open and unchanged until the AsyncFd (which
        // owns `sock`) is dropped.
        let sock = unsafe { AsyncFd::register(sock) }.map_err(|e| IcmpError::Io(e.into()))?;
        Ok(Pinger {
            sock,
            dst,
            ident: rand::random(),
            seq: 0,
        })
    }

    /// Sends one echo request and waits up to `timeout` for its reply.
    pub async fn ping(&mut self, timeout: Duration) -> Sample {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let packet = echo_request(self.ident, seq);
        let to = SockAddr::from(SocketAddrV4::new(self.dst, 0));
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
                let from_ok = from.as_socket() == Some(SocketAddr::from((self.dst, 0)));
                if from_ok && is_our_reply(bytes, self.ident, seq) {
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
}

impl Pinger {
    /// Sends `count` echoes `interval` apart without waiting for replies (so a long RTT does not
    /// slow the series down), and collects each reply until `timeout` after its request. Returns
    /// one sample per echo, in order; a missing reply is a timeout (loss).
    pub async fn series(
        &mut self,
        count: u16,
        interval: Duration,
        timeout: Duration,
    ) -> Vec<Sample> {
        let to = SockAddr::from(SocketAddrV4::new(self.dst, 0));
        let first = self.seq.wrapping_add(1);
        let mut sent: Vec<Option<Instant>> = vec![None; usize::from(count)];
        let mut got: Vec<Option<Duration>> = vec![None; usize::from(count)];
        let start = Instant::now();
        let mut next_send = 0usize;
        let mut buf = [MaybeUninit::<u8>::uninit(); 1500];
        loop {
            let now = Instant::now();
            let last_deadline = sent.iter().flatten().last().map(|t| *t + timeout);
            let all_sent = next_send >= usize::from(count);
            let all_answered = got.iter().all(Option::is_some);
            if all_sent && (all_answered || last_deadline.is_some_and(|d| now >= d)) {
                break;
            }
            let send_at = start + interval * next_send as u32;
            let wake = if all_sent {
                last_deadline.unwrap_or(now)
            } else {
                send_at
            };
            tokio::select! {
                _ = tokio::time::sleep_until(wake.into()), if !all_sent || last_deadline.is_some() => {
                    if !all_sent && Instant::now() >= send_at {
                        let seq = first.wrapping_add(next_send as u16);
                        let packet = echo_request(self.ident, seq);
                        // Stamp before sending: a preemption after the send would otherwise
                        // shorten the measured RTT, below what the wire allows.
                        let stamp = Instant::now();
                        if self.sock.get_ref().send_to(&packet, &to).is_ok() {
                            sent[next_send] = Some(stamp);
                        }
                        next_send += 1;
                    }
                }
                r = self.sock.readable() => {
                    let Ok(mut g) = r else { break };
                    while let Ok(r) = g.try_io(|s| s.get_ref().recv_from(&mut buf)) {
                        let Ok((n, from)) = r else { break };
                        // SAFETY: recv_from initialised the first `n` bytes.
                        let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
                        if from.as_socket() != Some(SocketAddr::from((self.dst, 0))) {
                            continue;
                        }
                        let Some(seq) = reply_seq(bytes, self.ident) else { continue };
                        let i = usize::from(seq.wrapping_sub(first));
                        if let (Some(Some(t)), Some(slot)) = (sent.get(i), got.get_mut(i)) {
                            if slot.is_none() && t.elapsed() <= timeout {
                                *slot = Some(t.elapsed());
                            }
                        }
                    }
                }
            }
        }
        self.seq = first.wrapping_add(count).wrapping_sub(1);
        got.into_iter()
            .map(|g| Sample {
                result: g.ok_or(ProbeFailure::Timeout(timeout.as_millis() as u64)),
            })
            .collect()
    }
}

/// The sequence number of an echo reply with our identifier.
fn reply_seq(bytes: &[u8], ident: u16) -> Option<u16> {
    let ihl = usize::from(bytes.first()? & 0x0f) * 4;
    let icmp = bytes.get(ihl..).filter(|i| i.len() >= 8)?;
    (icmp[0] == 0 && u16::from_be_bytes([icmp[4], icmp[5]]) == ident)
        .then(|| u16::from_be_bytes([icmp[6], icmp[7]]))
}

fn echo_request(ident: u16, seq: u16) -> Vec<u8> {
    let mut p = vec![8u8, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(b"joinguard-preflight-echo");
    let c = checksum(&p);
    p[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

/// A raw IPv4 socket hands us the IP header too; skip it by its IHL.
fn is_our_reply(bytes: &[u8], ident: u16, seq: u16) -> bool {
    let Some(&vihl) = bytes.first() else {
        return false;
    };
    let ihl = usize::from(vihl & 0x0f) * 4;
    let icmp = match bytes.get(ihl..) {
        Some(i) if i.len() >= 8 => i,
        _ => return false,
    };
    icmp[0] == 0
        && u16::from_be_bytes([icmp[4], icmp[5]]) == ident
        && u16::from_be_bytes([icmp[6], icmp[7]]) == seq
}

/// RFC 1071 Internet checksum.
fn checksum(data: &[u8]) -> u16 {
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

    #[test]
    fn echo_request_checksum_verifies() {
        let p = echo_request(0x1234, 7);
        assert_eq!(checksum(&p), 0, "a packet with its checksum sums to zero");
    }

    #[tokio::test]
    async fn a_series_pipelines_echoes_and_counts_every_reply() {
        let mut p = Pinger::open(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("tests run as root");
        let xs = p
            .series(50, Duration::from_millis(1), Duration::from_millis(500))
            .await;
        assert_eq!(xs.len(), 50);
        assert!(xs.iter().all(|s| s.result.is_ok()), "{xs:?}");
        let again = p.ping(Duration::from_secs(1)).await;
        assert!(
            again.result.is_ok(),
            "sequence numbers continue after a series"
        );
    }

    #[tokio::test]
    async fn pings_loopback() {
        let mut p = Pinger::open(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("tests run as root");
        let s = p.ping(Duration::from_secs(1)).await;
        assert!(s.result.is_ok(), "{s:?}");
    }
}
