//! The TCP side of `PathMTU`: one exchange with an etcd member's peer port whose bytes must
//! cross in full-size TCP segments, and what the kernel's `TCP_INFO` says about the segment
//! sizes on that connection.
//!
//! ICMP echoes show the largest *IP packet* that crosses; what the join needs is that *TCP*
//! crosses, and the two differ on the commonest fix for a small path MTU: a gateway that clamps
//! the TCP MSS (iptables `TCPMSS`) lets every TCP connection fit while a 1500-byte echo still
//! vanishes. So this probe opens a TLS connection to the peer port (the server's certificate
//! flight is a few kilobytes: full-size segments toward this node), sends a `GET /raft/probing`
//! padded with a 4 KiB header (several full-size segments toward the member), and reads
//! `TCP_INFO`: the MSS this node sends with (`tcpi_snd_mss`, lowered by the peer's MSS option
//! and the route's path MTU) and the largest segment it received (`tcpi_rcv_mss`). An answer
//! proves the request's full-size segments arrived. It needs no privilege.
//!
//! This module measures; `check::pmtu` judges.

#![allow(unsafe_code)] // getsockopt(TCP_INFO).

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::identity::ALPN_HTTP1;
use super::tls::{self, TlsClient};

/// Padding in the request: several segments at any MSS, so it is answered only if full-size
/// segments cross toward the member.
pub const PAD_BYTES: usize = 4096;

/// What one exchange showed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FullSize {
    /// The MSS this node sends with on the connection.
    pub snd_mss: u32,
    /// The largest segment received on it (the kernel's estimate of the peer's MSS).
    pub rcv_mss: u32,
    /// The MSS this node advertised (its route's MTU minus 40).
    pub adv_mss: u32,
    /// The path MTU the connection uses.
    pub pmtu: u32,
    /// Bytes of the padded request (HTTP, before TLS).
    pub request_bytes: usize,
    /// How long the padded request took to be answered (`None`: it was not).
    pub answered_ms: Option<f64>,
    /// Why it was not answered.
    pub failure: Option<String>,
    /// Segments this node retransmitted on the connection.
    pub retransmits: u32,
}

impl FullSize {
    /// Whether full-size segments crossed toward the member (the padded request was answered).
    pub(crate) fn outbound_ok(&self) -> bool {
        self.answered_ms.is_some()
    }

    /// Whether segments of about this node's MSS arrived from the member (its handshake flight
    /// was large enough to fill one).
    pub(crate) fn inbound_full(&self) -> bool {
        // Timestamps (12 bytes) and other options make a full segment's payload a little
        // smaller than the MSS.
        self.rcv_mss + 64 >= self.snd_mss.min(self.adv_mss)
    }
}

/// Why the exchange could not start: the connection or its TLS handshake failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct NoExchange(pub String);

/// The exchange with `host:port` (an etcd peer URL) with the peer identity `tls`, within
/// `timeout`.
pub async fn exchange(
    host: &str,
    port: u16,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<FullSize, NoExchange> {
    let deadline = tokio::time::Instant::now() + timeout;
    let tls = tls.with_alpn(&[ALPN_HTTP1]);
    let (mut stream, _) = tls::handshake(host, port, &tls, timeout)
        .await
        .map_err(|e| NoExchange(format!("TLS to {host}:{port}: {e}")))?;
    let pad: String = "joinguard-full-size-"
        .chars()
        .cycle()
        .take(PAD_BYTES)
        .collect();
    let request = format!(
        "GET /raft/probing HTTP/1.1\r\nHost: {host}:{port}\r\nX-Joinguard-Padding: {pad}\r\n\
         Connection: close\r\n\r\n"
    );
    let started = Instant::now();
    let answer = tokio::time::timeout_at(deadline, async {
        stream.write_all(request.as_bytes()).await?;
        stream.flush().await?;
        let mut head = [0u8; 16];
        let n = stream.read(&mut head).await?;
        Ok::<_, io::Error>(head[..n].to_vec())
    })
    .await;
    let (answered_ms, failure) = match answer {
        Ok(Ok(head)) if head.starts_with(b"HTTP/1.") => {
            (Some(started.elapsed().as_secs_f64() * 1000.0), None)
        }
        Ok(Ok(head)) if head.is_empty() => (None, Some("the member closed the connection".into())),
        Ok(Ok(_)) => (None, Some("the answer was not HTTP".into())),
        Ok(Err(e)) => (None, Some(e.to_string())),
        Err(_) => (
            None,
            Some(format!(
                "no answer within {} ms",
                deadline
                    .saturating_duration_since(started.into())
                    .as_millis()
                    .max(1)
            )),
        ),
    };
    let info = tcp_info(stream.get_ref().0).map_err(|e| NoExchange(format!("TCP_INFO: {e}")))?;
    Ok(FullSize {
        snd_mss: info.tcpi_snd_mss,
        rcv_mss: info.tcpi_rcv_mss,
        adv_mss: info.tcpi_advmss,
        pmtu: info.tcpi_pmtu,
        request_bytes: request.len(),
        answered_ms,
        failure,
        retransmits: info.tcpi_total_retrans,
    })
}

/// `getsockopt(TCP_INFO)` of a connected socket.
fn tcp_info(s: &impl AsRawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data (integers only): all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid fd; `info` and `len` live across the call and `len` is `info`'s size (the
    // kernel writes at most that many bytes).
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // A kernel older than the fields read here, or an emulator (qemu-user copies 4 bytes for
    // every TCP option), fills less: the zeroes left would read as an MSS of 0.
    let needed = std::mem::offset_of!(libc::tcp_info, tcpi_total_retrans)
        + std::mem::size_of_val(&info.tcpi_total_retrans);
    if (len as usize) < needed {
        return Err(io::Error::other(format!(
            "the kernel filled {len} bytes of tcp_info, fewer than the {needed} that hold the MSS \
             and retransmission counts"
        )));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn tcp_info_reads_the_mss_of_a_loopback_connection() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, s) = tokio::join!(tokio::net::TcpStream::connect(addr), l.accept());
        let (c, _s) = (c.unwrap(), s.unwrap());
        let info = tcp_info(&c).unwrap();
        assert!(info.tcpi_snd_mss > 1000, "{}", info.tcpi_snd_mss);
        assert!(info.tcpi_advmss > 1000, "{}", info.tcpi_advmss);
        assert_eq!(info.tcpi_total_retrans, 0);
    }

    fn seen(snd: u32, rcv: u32, answered: bool) -> FullSize {
        FullSize {
            snd_mss: snd,
            rcv_mss: rcv,
            adv_mss: 1460,
            pmtu: 1500,
            request_bytes: 4200,
            answered_ms: answered.then_some(2.0),
            failure: (!answered).then(|| "no answer within 5000 ms".into()),
            retransmits: 0,
        }
    }

    #[test]
    fn full_segments_are_told_from_a_small_flight() {
        assert!(seen(1448, 1448, true).inbound_full());
        assert!(
            seen(1308, 1308, true).inbound_full(),
            "a clamped MSS is full"
        );
        assert!(!seen(1448, 536, true).inbound_full());
        assert!(seen(1448, 1448, true).outbound_ok());
        assert!(!seen(1448, 1448, false).outbound_ok());
    }
}
