//! Through an HTTP proxy: `CONNECT host:port` and the proxy's answer, timed, as a Go client
//! (client-go, gRPC) opens its tunnel before the TLS handshake with the target.
//!
//! One probe is one fresh connection to the proxy, one CONNECT request, and the status line and
//! headers of its answer (at most [`MAX_HEAD`] bytes); the tunnel is closed at once. A `200`
//! is an open tunnel; anything else is the proxy refusing it, which is what the join would get.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::{tcp, ProbeFailure, Sample};
use crate::proxy::ProxyUrl;

/// The most of a proxy's answer read before its blank line.
const MAX_HEAD: usize = 8 * 1024;

/// Opens a tunnel to `host:port` (`host` without brackets) through `proxy` within `timeout`:
/// the time to the proxy's `200`, or why it did not come.
pub async fn connect(proxy: &ProxyUrl, host: &str, port: u16, timeout: Duration) -> Sample {
    Sample {
        result: open(proxy, host, port, timeout).await.map(|t| {
            let _ = t.stream.set_zero_linger();
            t.connect
        }),
    }
}

/// Opens a tunnel to `host:port` through `proxy` within `timeout` and hands it over, as the
/// connection a TLS handshake with the target then runs on (what client-go does for a proxied
/// call). `peer` is the proxy's address, `connect` the time to the proxy's `200`.
pub async fn open(
    proxy: &ProxyUrl,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<tcp::TcpConnected, ProbeFailure> {
    if proxy.scheme != "http" {
        return Err(ProbeFailure::Io(format!(
            "a {} proxy is not probed (only http:// proxies, which tunnel with CONNECT)",
            proxy.scheme
        )));
    }
    let started = Instant::now();
    let deadline = started + timeout;
    let mut c = tcp::connect(&proxy.host, proxy.port, timeout)
        .await
        .map_err(|e| match e {
            ProbeFailure::Refused => ProbeFailure::Io(format!(
                "the proxy {} refused the connection",
                proxy.authority
            )),
            other => other,
        })?;
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let request = format!(
        "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: joinguard/{}\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    // The answer is read a byte at a time up to its blank line, so that nothing the target sends
    // after it (its TLS ServerHello, once the client has spoken) is taken from the tunnel.
    let io = async {
        c.stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::with_capacity(256);
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") && head.len() < MAX_HEAD {
            if c.stream.read(&mut byte).await? == 0 {
                break;
            }
            head.push(byte[0]);
        }
        Ok::<_, std::io::Error>(head)
    };
    let head = match tokio::time::timeout_at(deadline, io).await {
        Err(_) => return Err(ProbeFailure::Timeout(tcp::ms(timeout))),
        Ok(Err(e)) => return Err(ProbeFailure::Io(format!("proxy {}: {e}", proxy.authority))),
        Ok(Ok(h)) => h,
    };
    let line = String::from_utf8_lossy(&head);
    let status_line = line.lines().next().unwrap_or("").trim().to_string();
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let refused = if !version.starts_with("HTTP/") {
        ProbeFailure::Protocol(format!(
            "the proxy {} did not answer CONNECT in HTTP ({:?})",
            proxy.authority,
            status_line.chars().take(40).collect::<String>()
        ))
    } else if code == "200" {
        return Ok(tcp::TcpConnected {
            connect: started.elapsed(),
            ..c
        });
    } else {
        ProbeFailure::Protocol(format!(
            "the proxy {} answered CONNECT {authority} with `{}`",
            proxy.authority,
            status_line.chars().take(80).collect::<String>()
        ))
    };
    let _ = c.stream.set_zero_linger();
    Err(refused)
}
