//! TCP connect probe: name resolution and `connect()` time, each timed separately.
//!
//! This module owns the first two phases every connection-based probe goes through (DNS and the
//! SYN/SYN-ACK round trip) and the classification of their failures into refused, timed out and
//! other I/O. It opens a fresh socket per call and never keeps it unless the caller asks for the
//! stream; it does not retry.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{ProbeFailure, Sample};
use crate::target::Target;

/// A connected socket and how long it took to get it.
#[derive(Debug)]
pub struct TcpConnected {
    pub stream: TcpStream,
    /// The address actually connected to.
    pub peer: SocketAddr,
    /// Name resolution (zero for IP literals).
    pub dns: Duration,
    /// `connect()` to the established socket: one SYN/SYN-ACK round trip.
    pub connect: Duration,
}

/// Milliseconds in a timeout, as carried by [`ProbeFailure::Timeout`].
pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Maps a connect error to a probe failure: RST is [`ProbeFailure::Refused`], a kernel timeout is
/// [`ProbeFailure::Timeout`], anything else is [`ProbeFailure::Io`].
pub(crate) fn classify_io(err: &io::Error, timeout: Duration) -> ProbeFailure {
    match err.kind() {
        io::ErrorKind::ConnectionRefused => ProbeFailure::Refused,
        io::ErrorKind::TimedOut => ProbeFailure::Timeout(ms(timeout)),
        _ => ProbeFailure::Io(err.to_string()),
    }
}

/// Resolves `host` (an IP literal or a DNS name) and connects to the first address that accepts,
/// all within `timeout`, in the order and with the family fallback of a Go client
/// ([`super::dial`]); the failure reported is the primary family's.
pub async fn connect(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<TcpConnected, ProbeFailure> {
    let c = connect_socket(host, port, timeout).await?;
    // Probes send small requests and wait for the answer: Nagle would add delay.
    let _ = c.stream.set_nodelay(true);
    Ok(c)
}

/// [`connect`] without the socket options a conversation needs.
async fn connect_socket(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<TcpConnected, ProbeFailure> {
    let deadline = Instant::now() + timeout;
    let start = Instant::now();
    let addrs: Vec<SocketAddr> = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            // Brackets are part of the endpoint syntax for IPv6, not of the address.
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
                vec![SocketAddr::new(ip, port)]
            } else {
                match tokio::time::timeout_at(deadline, tokio::net::lookup_host((bare, port))).await
                {
                    Err(_) => return Err(ProbeFailure::Timeout(ms(timeout))),
                    Ok(Err(e)) => return Err(ProbeFailure::Io(format!("resolve {host}: {e}"))),
                    Ok(Ok(it)) => it.collect(),
                }
            }
        }
    };
    let dns = start.elapsed();
    if addrs.is_empty() {
        return Err(ProbeFailure::Io(format!("resolve {host}: no addresses")));
    }
    // A name's addresses are dialled as a Go client (kubeadm) dials them: RFC 6724 order, the
    // other family 300 ms later ("Happy Eyeballs", `dial`).
    let t0 = Instant::now();
    match super::dial::connect(&addrs, deadline).await {
        Ok((stream, peer)) => Ok(TcpConnected {
            stream,
            peer,
            dns,
            connect: t0.elapsed(),
        }),
        Err(super::dial::DialError::Timeout) => Err(ProbeFailure::Timeout(ms(timeout))),
        Err(super::dial::DialError::Io(e)) => Err(classify_io(&e, timeout)),
    }
}

/// One TCP connect sample against `target`: the `connect()` time, excluding name resolution.
/// The socket is closed before returning, with a reset (SO_LINGER 0), as HAProxy closes its
/// health-check connections: a graceful close would leave a TIME_WAIT socket on this host for
/// each probe (60 s each on Linux; 600,000 of them at the monitor's 10,000 targets a second,
/// past `net.ipv4.tcp_max_tw_buckets`) and cost four more segments. The target sees what a
/// probe that closes at once shows it either way: a connection that ends before a request.
pub async fn probe(target: &Target, timeout: Duration) -> Sample {
    Sample {
        result: connect_socket(&target.host, target.port, timeout)
            .await
            .map(|c| {
                let _ = c.stream.set_zero_linger();
                c.connect
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The probe's socket ends with a reset, so it leaves no TIME_WAIT behind on the prober: the
    /// accepted side reads "connection reset", not an orderly end of stream.
    #[tokio::test]
    async fn a_connect_probe_closes_with_a_reset() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let target = Target::parse_url(
            crate::target::TargetKind::EtcdPeer,
            &format!("https://127.0.0.1:{port}"),
        )
        .unwrap();
        let sample = probe(&target, Duration::from_secs(2)).await;
        assert!(sample.result.is_ok(), "{sample:?}");
        let (mut accepted, _) = listener.accept().unwrap();
        accepted
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 16];
        let read = accepted.read(&mut buf);
        assert_eq!(
            read.as_ref().map_err(std::io::Error::kind).err(),
            Some(std::io::ErrorKind::ConnectionReset),
            "{read:?}"
        );
    }
}
