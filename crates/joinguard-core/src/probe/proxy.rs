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
        result: tunnel(proxy, host, port, timeout).await,
    }
}

async fn tunnel(
    proxy: &ProxyUrl,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<Duration, ProbeFailure> {
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
    let io = async {
        c.stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::with_capacity(512);
        let mut buf = [0u8; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            let n = c.stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(head)
    };
    let head = match tokio::time::timeout_at(deadline, io).await {
        Err(_) => return Err(ProbeFailure::Timeout(tcp::ms(timeout))),
        Ok(Err(e)) => return Err(ProbeFailure::Io(format!("proxy {}: {e}", proxy.authority))),
        Ok(Ok(h)) => h,
    };
    let _ = c.stream.set_zero_linger();
    let line = String::from_utf8_lossy(&head);
    let status_line = line.lines().next().unwrap_or("").trim().to_string();
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/") {
        return Err(ProbeFailure::Protocol(format!(
            "the proxy {} did not answer CONNECT in HTTP ({:?})",
            proxy.authority,
            status_line.chars().take(40).collect::<String>()
        )));
    }
    if code == "200" {
        return Ok(started.elapsed());
    }
    Err(ProbeFailure::Protocol(format!(
        "the proxy {} answered CONNECT {authority} with `{}`",
        proxy.authority,
        status_line.chars().take(80).collect::<String>()
    )))
}
