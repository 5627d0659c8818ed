//! Hostile servers: endpoints that misbehave on purpose, to prove that joinguard ends within its
//! deadline, bounds what it reads and says what is wrong.
//!
//! Each [`HostileServer`] listens on a loopback port of its own (`127.0.0.1:0`) with a tokio
//! runtime on its own thread, and stops (listener closed, every connection dropped) when the guard
//! is dropped, also during a panic. Every fault is bounded: a trickle stops after
//! [`TRICKLE_LIMIT`], a flood after [`FLOOD_BYTES`], so a client that never gives up cannot keep a
//! server busy forever. This module must not listen on anything but loopback.
//!
//! The TLS faults use certificates from [`crate::pki`]: the caller's CA signs the expired, the
//! not-yet-valid and the wrong-SAN leaf, so the client trusts the issuer and must catch the
//! specific fault; the self-signed one is its own issuer.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use crate::pki::{CertSpec, TestCa};
use crate::Error;

/// How long a trickling server keeps trickling one connection.
pub const TRICKLE_LIMIT: Duration = Duration::from_secs(120);
/// How much a flooding server sends on one connection: the 100 MB the issue asks for.
pub const FLOOD_BYTES: u64 = 100 * 1000 * 1000;
/// How long a silent server holds a connection open.
const HOLD: Duration = Duration::from_secs(300);

/// A certificate fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertFault {
    /// notAfter is one day in the past.
    Expired,
    /// notBefore is one day in the future.
    NotYetValid,
    /// Valid, from the CA, but for 198.51.100.7 and `elsewhere.invalid` only.
    WrongSan,
    /// Valid and for 127.0.0.1, but self-signed (not from the CA).
    SelfSigned,
}

/// What a hostile server does with each connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Accepts TCP, reads and discards, never writes.
    Silent,
    /// Answers a TLS ClientHello with a plausible TLS record, one byte a second.
    SlowTlsHandshake,
    /// Completes TLS, then answers the request's head one byte a second.
    SlowHeaders,
    /// Completes TLS, then answers 200 with a 100 MB JSON-looking body, as fast as it can.
    HugeBody,
    /// Completes TLS, then answers `200 OK` and header lines without end (up to 100 MB).
    EndlessHeaders,
    /// A TLS server with a bad certificate; after the handshake it answers `200 ok`.
    BadCert(CertFault),
    /// TLS with ALPN h2 and http/1.1. h2: answers the first stream's HEADERS with a response
    /// head and half a gRPC message, then GOAWAY (INTERNAL_ERROR) and close. http/1.1: a
    /// response head announcing 4096 bytes, 10 of them, then close.
    GoawayMidStream,
    /// Plain HTTP/1.1, no TLS: every read is answered with a `200 OK` page (an "etcd" URL that
    /// points at a web server).
    PlainHttp,
    /// Echoes every byte back (an "etcd" URL that points at an echo service).
    Echo,
}

impl Fault {
    /// Whether the server completes a TLS handshake before misbehaving.
    fn tls(self) -> bool {
        matches!(
            self,
            Fault::SlowHeaders
                | Fault::HugeBody
                | Fault::EndlessHeaders
                | Fault::BadCert(_)
                | Fault::GoawayMidStream
        )
    }
}

/// A running hostile server. Dropping it stops the server and closes every connection.
#[derive(Debug)]
pub struct HostileServer {
    addr: SocketAddr,
    fault: Fault,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HostileServer {
    /// Starts a server with `fault` on `127.0.0.1:0`. `ca` signs its certificate (where the
    /// fault has one; `BadCert(SelfSigned)` ignores it).
    pub fn start(fault: Fault, ca: &TestCa) -> Result<HostileServer, Error> {
        let tls = if fault.tls() {
            Some(server_config(fault, ca)?)
        } else {
            None
        };
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error::Spawn(format!("hostile server: bind: {e}")))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| Error::Spawn(format!("hostile server: {e}")))?;
        let addr = std_listener
            .local_addr()
            .map_err(|e| Error::Spawn(format!("hostile server: {e}")))?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name(format!("hostile-{fault:?}"))
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("hostile server runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(std_listener).expect("hostile listener");
                    tokio::select! {
                        _ = stopped => {}
                        _ = accept_loop(listener, fault, tls) => {}
                    }
                });
                // Dropping the runtime cancels every connection task.
            })
            .map_err(|e| Error::Spawn(format!("hostile server thread: {e}")))?;
        Ok(HostileServer {
            addr,
            fault,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `host:port`.
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    /// `https://host:port` (or `http://` for the plain-HTTP fault).
    pub fn url(&self) -> String {
        let scheme = if self.fault == Fault::PlainHttp {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The fault this server plays.
    pub fn fault(&self) -> Fault {
        self.fault
    }
}

impl Drop for HostileServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn server_config(fault: Fault, ca: &TestCa) -> Result<Arc<rustls::ServerConfig>, Error> {
    let now = SystemTime::now();
    let day = Duration::from_secs(86_400);
    let loopback = [std::net::IpAddr::from([127, 0, 0, 1])];
    let mut spec = CertSpec::server("hostile", &loopback, &["localhost"]);
    let issued = match fault {
        Fault::BadCert(CertFault::Expired) => {
            spec.not_before = Some(now - 3 * day);
            spec.not_after = Some(now - day);
            ca.issue(&spec)?
        }
        Fault::BadCert(CertFault::NotYetValid) => {
            spec.not_before = Some(now + day);
            spec.not_after = Some(now + 3 * day);
            ca.issue(&spec)?
        }
        Fault::BadCert(CertFault::WrongSan) => ca.issue(&CertSpec::server(
            "hostile",
            &[std::net::IpAddr::from([198, 51, 100, 7])],
            &["elsewhere.invalid"],
        ))?,
        Fault::BadCert(CertFault::SelfSigned) => {
            // A CA of its own, used as the leaf: self-signed, and valid for 127.0.0.1.
            TestCa::new("hostile-self-signed")?.issue(&spec)?
        }
        _ => ca.issue(&spec)?,
    };
    let mut chain = CertificateDer::pem_slice_iter(issued.cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Pki(format!("hostile certificate: {e}")))?;
    if let Fault::BadCert(CertFault::SelfSigned) = fault {
        // Present only the leaf: its issuer is in no trust store the client has.
        chain.truncate(1);
    }
    let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes())
        .map_err(|e| Error::Pki(format!("hostile key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Pki(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| Error::Pki(e.to_string()))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

async fn accept_loop(listener: TcpListener, fault: Fault, tls: Option<Arc<rustls::ServerConfig>>) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    // Bounded: a client that opens connections without end gets at most this many at once.
    let slots = Arc::new(tokio::sync::Semaphore::new(64));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            drop(tcp);
            continue;
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _ =
                tokio::time::timeout(TRICKLE_LIMIT.max(HOLD), serve(tcp, fault, acceptor)).await;
        });
    }
}

async fn serve(
    mut tcp: TcpStream,
    fault: Fault,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
) -> std::io::Result<()> {
    match fault {
        Fault::Silent => {
            let mut buf = [0u8; 4096];
            let until = tokio::time::Instant::now() + HOLD;
            while tokio::time::timeout_at(until, tcp.read(&mut buf))
                .await
                .is_ok_and(|r| r.is_ok_and(|n| n > 0))
            {}
            Ok(())
        }
        Fault::SlowTlsHandshake => {
            let mut buf = [0u8; 4096];
            let _ = tcp.read(&mut buf).await?;
            // A handshake record header announcing 16 KiB, then its body, one byte a second.
            let record = [0x16u8, 0x03, 0x03, 0x40, 0x00, 0x02, 0x00, 0x3f, 0xfc];
            trickle(&mut tcp, record.iter().copied().chain(std::iter::repeat(0))).await
        }
        Fault::PlainHttp => {
            let mut buf = [0u8; 4096];
            loop {
                let n = tcp.read(&mut buf).await?;
                if n == 0 {
                    return Ok(());
                }
                let page = "<html><body>It works!</body></html>\n";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\r\n{page}",
                    page.len()
                );
                tcp.write_all(answer.as_bytes()).await?;
            }
        }
        Fault::Echo => {
            let (mut r, mut w) = tcp.split();
            let mut limited = (&mut r).take(FLOOD_BYTES);
            tokio::io::copy(&mut limited, &mut w).await.map(|_| ())
        }
        _ => {
            let acceptor = acceptor.expect("TLS fault without TLS config");
            let mut tls = acceptor.accept(tcp).await?;
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            match fault {
                Fault::GoawayMidStream if h2 => goaway(&mut tls).await,
                Fault::GoawayMidStream => {
                    read_head(&mut tls).await?;
                    tls.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                          Content-Length: 4096\r\n\r\n{\"kind\":\"St",
                    )
                    .await?;
                    tls.flush().await?;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Ok(())
                }
                Fault::SlowHeaders => {
                    read_head(&mut tls).await?;
                    let head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: ";
                    trickle(
                        &mut tls,
                        head.iter().copied().chain(std::iter::repeat(b'a')),
                    )
                    .await
                }
                Fault::HugeBody => {
                    read_head(&mut tls).await?;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                         Content-Length: {FLOOD_BYTES}\r\n\r\n"
                    );
                    tls.write_all(head.as_bytes()).await?;
                    flood(&mut tls, b"{\"items\":[\"", b'x').await
                }
                Fault::EndlessHeaders => {
                    read_head(&mut tls).await?;
                    tls.write_all(b"HTTP/1.1 200 OK\r\n").await?;
                    let mut sent = 0u64;
                    let mut i = 0u64;
                    while sent < FLOOD_BYTES {
                        let line = format!("X-Endless-{i}: {}\r\n", "h".repeat(100));
                        tls.write_all(line.as_bytes()).await?;
                        sent += line.len() as u64;
                        i += 1;
                    }
                    Ok(())
                }
                Fault::BadCert(_) => {
                    read_head(&mut tls).await?;
                    tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .await?;
                    tls.flush().await
                }
                _ => Ok(()),
            }
        }
    }
}

/// Reads until the end of an HTTP/1.1 request head (or 64 KiB, or EOF).
async fn read_head<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 * 1024 {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

/// Writes `bytes` one a second, for at most [`TRICKLE_LIMIT`].
async fn trickle<S: AsyncWrite + Unpin>(
    s: &mut S,
    bytes: impl Iterator<Item = u8>,
) -> std::io::Result<()> {
    let until = tokio::time::Instant::now() + TRICKLE_LIMIT;
    for b in bytes {
        if tokio::time::Instant::now() >= until {
            break;
        }
        s.write_all(&[b]).await?;
        s.flush().await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}

/// Writes `prefix` and then `fill` up to [`FLOOD_BYTES`] in total.
async fn flood<S: AsyncWrite + Unpin>(s: &mut S, prefix: &[u8], fill: u8) -> std::io::Result<()> {
    s.write_all(prefix).await?;
    let chunk = vec![fill; 64 * 1024];
    let mut sent = prefix.len() as u64;
    while sent < FLOOD_BYTES {
        let n = chunk.len().min((FLOOD_BYTES - sent) as usize);
        s.write_all(&chunk[..n]).await?;
        sent += n as u64;
    }
    s.flush().await
}

/// HTTP/2 frame types and flags used below (RFC 9113 section 6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The h2 side of [`Fault::GoawayMidStream`]: settings, then on the first request stream a
/// response head (`:status 200`, `content-type: application/grpc`) and a DATA frame with the
/// first 10 bytes of a gRPC message that announces 4096, then GOAWAY and close.
async fn goaway<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> std::io::Result<()> {
    let mut preface = [0u8; 24];
    s.read_exact(&mut preface).await?;
    s.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
    s.flush().await?;
    // Bounded: a client that sends frames without ever opening a stream gets at most 256 read.
    for _ in 0..256 {
        let mut head = [0u8; 9];
        s.read_exact(&mut head).await?;
        let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len.min(1 << 20)];
        s.read_exact(&mut payload).await?;
        if kind == SETTINGS && flags & ACK == 0 {
            s.write_all(&frame(SETTINGS, ACK, 0, &[])).await?;
            s.flush().await?;
        }
        if kind == HEADERS && stream != 0 {
            // HPACK: indexed `:status: 200` (static index 8), then `content-type` (static index
            // 31) as a literal without indexing.
            let mut block = vec![0x88, 0x0f, 0x10, 16];
            block.extend_from_slice(b"application/grpc");
            s.write_all(&frame(HEADERS, END_HEADERS, stream, &block))
                .await?;
            let mut data = vec![0u8, 0, 0, 0x10, 0x00];
            data.extend_from_slice(&[0x0a; 5]);
            s.write_all(&frame(DATA, 0, stream, &data)).await?;
            let mut ga = stream.to_be_bytes().to_vec();
            ga.extend_from_slice(&2u32.to_be_bytes()); // INTERNAL_ERROR
            ga.extend_from_slice(b"netlab hostile: GOAWAY mid-stream");
            s.write_all(&frame(GOAWAY, 0, 0, &ga)).await?;
            s.flush().await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_listen_and_stop_on_drop() {
        let ca = TestCa::new("hostile-test").unwrap();
        let s = HostileServer::start(Fault::Echo, &ca).unwrap();
        let addr = s.addr();
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        use std::io::{Read, Write};
        c.write_all(b"ping").unwrap();
        let mut got = [0u8; 4];
        c.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
        drop(s);
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "still listening after drop"
        );
    }
}
