//! Plain-HTTP GETs to a listener in a lab (etcd's metrics port, joinguard's monitor), made from
//! inside a host and bounded by one overall deadline: connect, send and every read share it.
//!
//! This module owns a deliberately small HTTP/1.0 client (one request per connection, the body
//! read to EOF, no TLS, no redirects, no chunked encoding), so that what a test checks is the
//! server's answer and not a client library's interpretation of it. It must not be used for TLS
//! endpoints (the API server stand-in and etcd's client port are checked with the real `kubectl`,
//! `etcdctl` and `curl`) or to send traffic anywhere but a lab host or loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::{Error, Host};

/// An HTTP answer: its status code and body (lossily decoded as UTF-8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpReply {
    /// The status code of the status line.
    pub status: u16,
    /// Everything after the header block.
    pub body: String,
}

impl HttpReply {
    /// A 2xx status.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// A plain HTTP/1.0 GET of `path` on `addr`, made from inside `host`, bounded by `timeout`
/// overall. Returns the body of a 2xx answer; any other status is an error carrying the body.
pub fn http_get(
    host: &Host,
    addr: SocketAddr,
    path: &str,
    timeout: Duration,
) -> Result<String, Error> {
    let path = path.to_string();
    host.run(move || http_get_here(addr, &path, timeout))?
}

/// [`http_get`] from the calling thread's network namespace (loopback, or a thread that is
/// already inside a host).
pub fn http_get_here(addr: SocketAddr, path: &str, timeout: Duration) -> Result<String, Error> {
    let reply = http_get_status_here(addr, path, "*/*", timeout)?;
    if reply.is_success() {
        Ok(reply.body)
    } else {
        Err(Error::Http {
            addr,
            path: path.to_string(),
            stage: format!("HTTP {}", reply.status),
            detail: reply.body.trim().to_string(),
        })
    }
}

/// A plain HTTP/1.0 GET of `path` on `addr` with the given `Accept` header, made from inside
/// `host`, bounded by `timeout` overall. Any status is an answer (a 503 from `/readyz` is what
/// a test may want to see); only a failure to get one is an error.
pub fn http_get_status(
    host: &Host,
    addr: SocketAddr,
    path: &str,
    accept: &str,
    timeout: Duration,
) -> Result<HttpReply, Error> {
    let (path, accept) = (path.to_string(), accept.to_string());
    host.run(move || http_get_status_here(addr, &path, &accept, timeout))?
}

/// [`http_get_status`] from the calling thread's network namespace.
pub fn http_get_status_here(
    addr: SocketAddr,
    path: &str,
    accept: &str,
    timeout: Duration,
) -> Result<HttpReply, Error> {
    let deadline = Instant::now() + timeout;
    let err = |stage: &str, e: &dyn std::fmt::Display| Error::Http {
        addr,
        path: path.to_string(),
        stage: stage.to_string(),
        detail: e.to_string(),
    };
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| err("timed out", &format!("{timeout:?}")))
    };
    let mut s = TcpStream::connect_timeout(&addr, left()?).map_err(|e| err("connect", &e))?;
    s.set_write_timeout(Some(left()?))
        .map_err(|e| err("socket", &e))?;
    s.write_all(
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n").as_bytes(),
    )
    .map_err(|e| err("send", &e))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        s.set_read_timeout(Some(left()?))
            .map_err(|e| err("socket", &e))?;
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(err("receive", &e)),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| err("malformed response", &format!("{text:?}")))?;
    let status: u16 = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| err("malformed status line", &head.lines().next().unwrap_or("")))?;
    Ok(HttpReply {
        status,
        body: body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers each of `answers` (status line, body) to one connection, checking the request.
    fn serve(
        answers: Vec<(&'static str, &'static str)>,
        accept: &'static str,
    ) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            for (status, body) in answers {
                let (mut c, _) = listener.accept().unwrap();
                let mut req = [0u8; 1024];
                let n = c.read(&mut req).unwrap();
                let req = String::from_utf8_lossy(&req[..n]).into_owned();
                assert!(req.starts_with("GET /health HTTP/1.0\r\n"), "{req}");
                assert!(req.contains(&format!("\r\nAccept: {accept}\r\n")), "{req}");
                let _ = write!(
                    c,
                    "HTTP/1.0 {status}\r\nContent-Type: text/plain\r\n\r\n{body}"
                );
            }
        });
        (addr, server)
    }

    #[test]
    fn http_get_here_reads_status_and_body() {
        let (addr, server) = serve(
            vec![
                ("200 OK", "{\"health\":\"true\"}"),
                ("503 Service Unavailable", "nope"),
            ],
            "*/*",
        );
        let ok = http_get_here(addr, "/health", Duration::from_secs(2)).unwrap();
        assert_eq!(ok, "{\"health\":\"true\"}");
        let err = http_get_here(addr, "/health", Duration::from_secs(2)).unwrap_err();
        assert!(err.to_string().contains("HTTP 503"), "{err}");
        assert!(err.to_string().contains("nope"), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn http_get_status_here_returns_any_status_with_its_body() {
        let (addr, server) = serve(
            vec![("503 Service Unavailable", "not ready\n")],
            "text/plain",
        );
        let reply =
            http_get_status_here(addr, "/health", "text/plain", Duration::from_secs(2)).unwrap();
        assert_eq!(
            reply,
            HttpReply {
                status: 503,
                body: "not ready\n".into()
            }
        );
        assert!(!reply.is_success());
        server.join().unwrap();
    }

    #[test]
    fn http_get_here_times_out_on_a_silent_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let t = Instant::now();
        // The kernel completes the handshake; nobody ever answers.
        let err = http_get_here(addr, "/health", Duration::from_millis(300)).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        let msg = err.to_string();
        assert!(
            msg.contains("timed out") || msg.contains("receive"),
            "{msg}"
        );
        drop(listener);
    }

    #[test]
    fn a_refused_connection_names_the_url() {
        // Bind and drop to find a port nobody listens on.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = http_get_here(addr, "/metrics", Duration::from_secs(2)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("GET http://{addr}/metrics: connect")),
            "{msg}"
        );
    }
}
