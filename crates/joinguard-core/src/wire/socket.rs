//! The tracer's sockets: raw ICMP, ICMPv6 and TCP sockets registered with tokio, kernel receive
//! timestamps, the source-address lookup, and reverse DNS.
//!
//! This is the only part of the tracer that touches file descriptors; it knows nothing about
//! hops or cycles.

#![allow(unsafe_code)] // setsockopt(SO_TIMESTAMPNS), reading recvmsg's control bytes, getnameinfo.

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use socket2::{Domain, MaybeUninitSlice, MsgHdrMut, Protocol, SockAddr, Socket, Type};
use tokio::io::unix::AsyncFd;

/// A raw socket of one protocol (the kernel builds the IP header). An IPv4 socket's reads
/// include the IP header, an IPv6 socket's start at the protocol's header.
#[derive(Debug)]
pub struct RawSocket {
    fd: AsyncFd<Socket>,
}

impl RawSocket {
    /// Opens a raw socket of `target`'s family for `proto` (ICMP, ICMPv6 or TCP).
    /// `PermissionDenied` means no CAP_NET_RAW.
    pub fn open(target: IpAddr, proto: Protocol) -> io::Result<RawSocket> {
        let s = Socket::new(
            Domain::for_address(SocketAddr::new(target, 0)),
            Type::RAW,
            Some(proto),
        )?;
        s.set_nonblocking(true)?;
        enable_rx_timestamps(&s);
        // SAFETY: `s` owns its fd, which stays open and unchanged until the AsyncFd (which owns
        // `s`) is dropped.
        let fd = unsafe { AsyncFd::register(s) }.map_err(io::Error::from)?;
        Ok(RawSocket { fd })
    }

    /// Binds the socket's source address (the kernel then uses it for what we send).
    pub fn bind(&self, src: IpAddr) -> io::Result<()> {
        self.fd
            .get_ref()
            .bind(&SockAddr::from(SocketAddr::new(src, 0)))
    }

    /// Sends `payload` to `dst` with IP TTL (IPv6: hop limit) `ttl`. Returns the wall-clock
    /// stamp taken just before the send: a preemption after it can only lengthen an RTT, never
    /// shorten it.
    pub(crate) fn send_with_ttl(
        &self,
        payload: &[u8],
        dst: IpAddr,
        ttl: u8,
    ) -> io::Result<SystemTime> {
        let s = self.fd.get_ref();
        set_hops(s, dst, ttl)?;
        let stamp = SystemTime::now();
        s.send_to(payload, &SockAddr::from(SocketAddr::new(dst, 0)))?;
        Ok(stamp)
    }

    /// The socket, for options.
    pub fn socket(&self) -> &Socket {
        self.fd.get_ref()
    }

    /// Waits until the socket is readable.
    pub async fn readable(&self) -> io::Result<tokio::io::unix::AsyncFdReadyGuard<'_, Socket>> {
        self.fd.readable().await
    }

    /// Reads one packet without blocking, with the kernel's receive timestamp when it gave one
    /// and the sender's address. `WouldBlock` when drained.
    pub(crate) fn try_recv(
        &self,
        buf: &mut [u8],
    ) -> io::Result<(usize, Option<SystemTime>, Option<IpAddr>)> {
        // SAFETY: an initialised byte slice is a valid `[MaybeUninit<u8>]` of the same length;
        // recvmsg only writes initialised bytes into it.
        let buf = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
        recv_stamped_from(self.fd.get_ref(), buf)
    }
}

/// Sets the TTL (IPv4) or the unicast hop limit (IPv6) of what `s` sends to `dst`.
fn set_hops(s: &Socket, dst: IpAddr, ttl: u8) -> io::Result<()> {
    match dst {
        IpAddr::V4(_) => s.set_ttl_v4(u32::from(ttl)),
        IpAddr::V6(_) => s.set_unicast_hops_v6(u32::from(ttl)),
    }
}

/// A UDP socket bound to an ephemeral port, for one UDP probe. Its local port identifies the
/// probe in the ICMP error a router or the target sends back.
pub(crate) fn udp_probe_socket(src: IpAddr) -> io::Result<(Socket, u16)> {
    let at = SocketAddr::new(src, 0);
    let s = Socket::new(Domain::for_address(at), Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(true)?;
    s.bind(&SockAddr::from(at))?;
    let port = local_port(&s)?;
    Ok((s, port))
}

/// The local port a bound socket got from the kernel (it identifies the probe's flow).
fn local_port(s: &Socket) -> io::Result<u16> {
    Ok(s.local_addr()?.as_socket().map_or(0, |a| a.port()))
}

/// Sends one UDP probe with TTL `ttl`, with a short payload or `data` bytes of one; returns the
/// stamp taken just before the send.
pub(crate) fn udp_send(
    s: &Socket,
    dst: IpAddr,
    port: u16,
    ttl: u8,
    data: Option<usize>,
) -> io::Result<SystemTime> {
    set_hops(s, dst, ttl)?;
    let payload = match data {
        Some(n) => super::packet::filler(n),
        None => b"joinguard-trace".to_vec(),
    };
    let stamp = SystemTime::now();
    s.send_to(&payload, &SockAddr::from(SocketAddr::new(dst, port)))?;
    Ok(stamp)
}

/// Reserves a local TCP port for SYN probes: a bound, never-connected socket. While it is held no
/// other local connection takes the port, and the kernel, finding no connection for the target's
/// SYN-ACK, answers it with RST, so the target never sees a completed handshake.
pub(crate) fn reserve_tcp_port(src: IpAddr) -> io::Result<(Socket, u16)> {
    let at = SocketAddr::new(src, 0);
    let s = Socket::new(Domain::for_address(at), Type::STREAM, Some(Protocol::TCP))?;
    s.bind(&SockAddr::from(at))?;
    let port = local_port(&s)?;
    Ok((s, port))
}

/// The source address the kernel would use toward `dst` (a routing lookup, nothing is sent).
pub(crate) fn source_for(dst: IpAddr) -> io::Result<IpAddr> {
    let any: IpAddr = match dst {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let s = UdpSocket::bind((any, 0))?;
    s.connect((dst, 33434))?;
    Ok(s.local_addr()?.ip())
}

pub(crate) fn enable_rx_timestamps(s: &Socket) {
    let on: libc::c_int = 1;
    // SAFETY: a valid fd, a pointer to a c_int that outlives the call, and its size. Failure only
    // means no kernel timestamps; the caller falls back to the time of the read.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Reads one packet with the kernel's receive timestamp (when the socket has
/// [`enable_rx_timestamps`] and the kernel gave one).
pub(crate) fn recv_stamped(
    s: &Socket,
    buf: &mut [MaybeUninit<u8>],
) -> io::Result<(usize, Option<SystemTime>)> {
    recv_stamped_from(s, buf).map(|(n, at, _)| (n, at))
}

/// [`recv_stamped`], and the sender's address (an IPv6 raw socket's reads carry no IP header).
pub(crate) fn recv_stamped_from(
    s: &Socket,
    buf: &mut [MaybeUninit<u8>],
) -> io::Result<(usize, Option<SystemTime>, Option<IpAddr>)> {
    let mut control = [MaybeUninit::<u8>::new(0); 128];
    // SAFETY: an all-zero sockaddr_storage is a valid (unspecified-family) address to write into.
    let mut from = unsafe { SockAddr::try_init(|_, _| Ok(())) }.map(|((), a)| a)?;
    let (n, clen) = {
        let mut bufs = [MaybeUninitSlice::new(buf)];
        let mut msg = MsgHdrMut::new()
            .with_addr(&mut from)
            .with_buffers(&mut bufs)
            .with_control(&mut control);
        let n = s.recvmsg(&mut msg, 0)?;
        (n, msg.control_len())
    };
    // SAFETY: `control` was fully initialised with zeros above (and the kernel wrote the first
    // `clen` bytes); `clen` never exceeds its length.
    let bytes: &[u8] = unsafe {
        std::slice::from_raw_parts(control.as_ptr().cast::<u8>(), clen.min(control.len()))
    };
    Ok((
        n,
        timestamp_from_control(bytes),
        from.as_socket().map(|a| a.ip()),
    ))
}

/// Finds SCM_TIMESTAMPNS in recvmsg's control data (a sequence of cmsghdr + data, each aligned
/// to the size of a pointer, as `CMSG_NXTHDR` walks it).
fn timestamp_from_control(c: &[u8]) -> Option<SystemTime> {
    let align = std::mem::size_of::<usize>();
    let hdr = std::mem::size_of::<libc::cmsghdr>();
    let up = |x: usize| x.div_ceil(align) * align;
    let mut off = 0;
    while off + hdr <= c.len() {
        let len = usize::from_ne_bytes(c[off..off + align].try_into().ok()?);
        let level = i32::from_ne_bytes(c[off + align..off + align + 4].try_into().ok()?);
        let ty = i32::from_ne_bytes(c[off + align + 4..off + align + 8].try_into().ok()?);
        if len < hdr {
            return None;
        }
        let data = off + up(hdr);
        if level == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPNS && data + 16 <= c.len() {
            let sec = i64::from_ne_bytes(c[data..data + 8].try_into().ok()?);
            let nsec = i64::from_ne_bytes(c[data + 8..data + 16].try_into().ok()?);
            let d = Duration::new(u64::try_from(sec).ok()?, u32::try_from(nsec).ok()?);
            return Some(UNIX_EPOCH + d);
        }
        off += up(len);
    }
    None
}

/// The name of `addr` by reverse DNS (getnameinfo with NI_NAMEREQD), or `None`. Blocking: call it
/// from `spawn_blocking`.
pub(crate) fn reverse_name(addr: IpAddr) -> Option<String> {
    let sa = SockAddr::from(SocketAddr::new(addr, 0));
    let mut host = [0 as libc::c_char; 1025];
    // SAFETY: `sa` holds a valid sockaddr of its family and the given length; `host` is a
    // writable buffer of the given length that getnameinfo NUL-terminates on success; no
    // service buffer is asked.
    let rc = unsafe {
        libc::getnameinfo(
            sa.as_ptr().cast(),
            sa.len(),
            host.as_mut_ptr(),
            host.len() as libc::socklen_t,
            std::ptr::null_mut(),
            0,
            libc::NI_NAMEREQD,
        )
    };
    if rc != 0 {
        return None;
    }
    // SAFETY: on success `host` holds a NUL-terminated string within its bounds.
    let name = unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_timestamp_among_control_messages() {
        let align = std::mem::size_of::<usize>();
        let hdr = std::mem::size_of::<libc::cmsghdr>();
        let mut c = Vec::new();
        // An unrelated message first (IP_TTL, 4 bytes of data, padded).
        c.extend_from_slice(&(hdr + 4).to_ne_bytes());
        c.extend_from_slice(&libc::IPPROTO_IP.to_ne_bytes());
        c.extend_from_slice(&libc::IP_TTL.to_ne_bytes());
        c.resize(hdr, 0);
        c.extend_from_slice(&64i32.to_ne_bytes());
        c.resize((hdr + 4).div_ceil(align) * align, 0);
        c.extend_from_slice(&(hdr + 16).to_ne_bytes());
        c.extend_from_slice(&libc::SOL_SOCKET.to_ne_bytes());
        c.extend_from_slice(&libc::SCM_TIMESTAMPNS.to_ne_bytes());
        let start = c.len();
        c.resize(start + (hdr - align - 8), 0);
        c.extend_from_slice(&1_700_000_000i64.to_ne_bytes());
        c.extend_from_slice(&5i64.to_ne_bytes());
        let t = timestamp_from_control(&c).expect("timestamp");
        assert_eq!(
            t.duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_700_000_000, 5)
        );
        assert!(timestamp_from_control(&c[..8]).is_none());
    }
}
