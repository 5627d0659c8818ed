//! HTTPS probes: `GET /readyz` and `/livez` on a fresh connection, phase by phase, and the HTTP/1.1
//! session that the peer probe reuses.
//!
//! This module owns speaking HTTP/1.1 (hyper 1, `client::conn::http1`) over a TLS stream from
//! [`super::tls`], bounding the body it reads ([`MAX_BODY`]) and reading the `Date` header for the
//! clock-skew check. It returns status, body and timings; deciding what a status means is the
//! checks' job ([`HttpResponse::is_ok`] is the one convenience).

use std::error::Error as _;
use std::fmt;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::tcp::ms;
use super::tls::{self, Observed, TlsClient, TlsFailure, TlsHandshake};
use super::{ProbeFailure, Sample};
use crate::target::Target;

/// Largest body read from a probe response. `/readyz` answers "ok", `/raft/probing` a small JSON
/// object; anything bigger is cut here (every read has a size limit: `crate::limits`).
pub const MAX_BODY: usize = 64 * 1024;

/// The phase an HTTP probe was in when its time ran out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HttpPhase {
    /// HTTP/1.1 connection set-up on the TLS stream.
    Setup,
    /// Request sent, waiting for the response head.
    FirstByte,
    /// Reading the body.
    Body,
}

impl fmt::Display for HttpPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HttpPhase::Setup => "HTTP set-up",
            HttpPhase::FirstByte => "waiting for the response",
            HttpPhase::Body => "reading the body",
        })
    }
}

/// Why an HTTPS probe failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpFailure {
    /// TCP or TLS failed (see [`TlsFailure::trust_failure`] for exit 3).
    #[error("{0}")]
    Tls(TlsFailure),
    /// The per-sample timeout elapsed after the TLS handshake.
    #[error("timed out {phase} after {after_ms} ms")]
    Timeout { phase: HttpPhase, after_ms: u64 },
    /// The connection broke or the server spoke something other than HTTP/1.1.
    #[error("HTTP: {0}")]
    Protocol(String),
}

impl HttpFailure {
    /// The trust failure, if that is what this is.
    pub fn trust_failure(&self) -> Option<&tls::TrustFailure> {
        match self {
            HttpFailure::Tls(t) => t.trust_failure(),
            _ => None,
        }
    }
}

impl From<TlsFailure> for HttpFailure {
    fn from(t: TlsFailure) -> Self {
        HttpFailure::Tls(t)
    }
}

impl From<HttpFailure> for ProbeFailure {
    fn from(f: HttpFailure) -> Self {
        match f {
            HttpFailure::Tls(t) => t.into(),
            HttpFailure::Timeout { after_ms, .. } => ProbeFailure::Timeout(after_ms),
            HttpFailure::Protocol(p) => ProbeFailure::Protocol(p),
        }
    }
}

/// One request/response on an open session.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpExchange {
    pub status: u16,
    /// The body, at most [`MAX_BODY`] bytes.
    pub body: Bytes,
    /// The body was longer than [`MAX_BODY`] and was cut.
    pub body_truncated: bool,
    /// The `Date` header, if present and parseable (second resolution).
    pub date: Option<SystemTime>,
    /// Request written to response head received.
    pub first_byte: Duration,
    /// Request written to the last body byte read.
    pub total: Duration,
}

/// A fresh-connection HTTPS GET, phase by phase.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpResponse {
    /// DNS, TCP connect and TLS handshake timings and the server certificate.
    pub tls: TlsHandshake,
    pub exchange: HttpExchange,
}

impl HttpResponse {
    /// Connect + TLS + request to the last byte: the application round trip a client sees.
    pub fn total(&self) -> Duration {
        self.tls.dns + self.tls.connect + self.tls.handshake + self.exchange.total
    }

    /// `/readyz` and `/livez` semantics: status 200 and body "ok".
    pub fn is_ok(&self) -> bool {
        self.exchange.status == 200 && self.exchange.body.trim_ascii() == b"ok"
    }
}

/// An HTTP/1.1 keep-alive connection over TLS. The connection task is aborted when the session is
/// dropped.
#[derive(Debug)]
pub struct HttpSession {
    sender: SendRequest<Empty<Bytes>>,
    conn: Option<JoinHandle<Result<(), hyper::Error>>>,
    observed: std::sync::Arc<Observed>,
    authority: String,
    /// How the connection was set up.
    pub tls: TlsHandshake,
}

impl Drop for HttpSession {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.abort();
        }
    }
}

impl HttpSession {
    /// Connects, completes TLS and the HTTP/1.1 set-up, all within `timeout`.
    pub async fn open(
        host: &str,
        port: u16,
        tls: &TlsClient,
        timeout: Duration,
    ) -> Result<Self, HttpFailure> {
        let deadline = Instant::now() + timeout;
        let (stream, handshake, observed) =
            tls::handshake_observed(host, port, tls, timeout).await?;
        let setup = crate::limits::http1_client().handshake(TokioIo::new(stream));
        let (sender, conn) = match tokio::time::timeout_at(deadline, setup).await {
            Err(_) => {
                return Err(HttpFailure::Timeout {
                    phase: HttpPhase::Setup,
                    after_ms: ms(timeout),
                })
            }
            Ok(Err(e)) => return Err(HttpFailure::Protocol(e.to_string())),
            Ok(Ok(pair)) => pair,
        };
        let authority = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(HttpSession {
            sender,
            conn: Some(tokio::spawn(conn)),
            observed,
            authority,
            tls: handshake,
        })
    }

    /// GETs `path` on this connection within `timeout`, reading at most [`MAX_BODY`] bytes.
    pub async fn get(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<HttpExchange, HttpFailure> {
        self.get_at_most(path, timeout, MAX_BODY).await
    }

    /// [`HttpSession::get`], reading at most `max_body` bytes of the body.
    pub async fn get_at_most(
        &mut self,
        path: &str,
        timeout: Duration,
        max_body: usize,
    ) -> Result<HttpExchange, HttpFailure> {
        let deadline = Instant::now() + timeout;
        let request = hyper::Request::get(path)
            .header(hyper::header::HOST, &self.authority)
            .header(hyper::header::USER_AGENT, "joinguard")
            .body(Empty::<Bytes>::new())
            .map_err(|e| HttpFailure::Protocol(format!("bad request for {path:?}: {e}")))?;
        let timeout_in = |phase| HttpFailure::Timeout {
            phase,
            after_ms: ms(timeout),
        };
        match tokio::time::timeout_at(deadline, self.sender.ready()).await {
            Err(_) => return Err(timeout_in(HttpPhase::FirstByte)),
            Ok(Err(e)) => return Err(self.classify(e).await),
            Ok(Ok(())) => {}
        }
        let t0 = Instant::now();
        let response =
            match tokio::time::timeout_at(deadline, self.sender.send_request(request)).await {
                Err(_) => return Err(timeout_in(HttpPhase::FirstByte)),
                Ok(Err(e)) => return Err(self.classify(e).await),
                Ok(Ok(r)) => r,
            };
        let first_byte = t0.elapsed();
        let status = response.status().as_u16();
        let date = response
            .headers()
            .get(hyper::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok());
        let mut body = response.into_body();
        let mut buf = Vec::new();
        let mut body_truncated = false;
        loop {
            let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
                Err(_) => return Err(timeout_in(HttpPhase::Body)),
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(self.classify(e).await),
                Ok(Some(Ok(frame))) => frame,
            };
            if let Ok(data) = frame.into_data() {
                let room = max_body - buf.len();
                if data.len() > room {
                    buf.extend_from_slice(&data[..room]);
                    body_truncated = true;
                    break;
                }
                buf.extend_from_slice(&data);
            }
        }
        let total = t0.elapsed();
        if body_truncated {
            // The rest of the body is still in flight: this connection cannot carry another
            // request. Close it so the next `get` fails fast instead of reading garbage.
            if let Some(conn) = self.conn.take() {
                conn.abort();
            }
        }
        Ok(HttpExchange {
            status,
            body: Bytes::from(buf),
            body_truncated,
            date,
            first_byte,
            total,
        })
    }

    /// Turns a hyper error into a failure, preferring the connection task's error (a TLS alert
    /// such as `certificate_required` surfaces there, not on the request).
    async fn classify(&mut self, err: hyper::Error) -> HttpFailure {
        if let Some(conn) = self.conn.take() {
            // The connection task ends right after a fatal read; give it a moment to report.
            if let Ok(Ok(Err(conn_err))) =
                tokio::time::timeout(Duration::from_millis(50), conn).await
            {
                if let Some(f) = classify_error(&conn_err, &self.observed) {
                    return f;
                }
            }
        }
        classify_error(&err, &self.observed)
            .unwrap_or_else(|| HttpFailure::Protocol(err.to_string()))
    }
}

/// Finds a rustls or I/O error in `err`'s source chain.
fn classify_error(err: &hyper::Error, observed: &Observed) -> Option<HttpFailure> {
    let mut source = err.source();
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<rustls::Error>() {
            return Some(HttpFailure::Tls(TlsFailure::from_rustls(r, observed)));
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if let Some(r) = io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return Some(HttpFailure::Tls(TlsFailure::from_rustls(r, observed)));
            }
            return Some(HttpFailure::Protocol(format!("{err}: {io}")));
        }
        source = s.source();
    }
    None
}

/// HTTPS GET `path` on a fresh connection to `host:port`, closed afterwards; the whole probe is
/// bounded by `timeout`.
pub async fn get(
    host: &str,
    port: u16,
    path: &str,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<HttpResponse, HttpFailure> {
    let deadline = Instant::now() + timeout;
    let mut session = HttpSession::open(host, port, tls, timeout).await?;
    let left = deadline.saturating_duration_since(Instant::now());
    let exchange = session.get(path, left).await.map_err(|e| match e {
        HttpFailure::Timeout { phase, .. } => HttpFailure::Timeout {
            phase,
            after_ms: ms(timeout),
        },
        other => other,
    })?;
    Ok(HttpResponse {
        tls: session.tls.clone(),
        exchange,
    })
}

/// `GET /readyz` on the API server (anonymous access to it is allowed by default).
pub async fn readyz(
    target: &Target,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<HttpResponse, HttpFailure> {
    get(&target.host, target.port, "/readyz", tls, timeout).await
}

/// `GET /livez` on the API server.
pub async fn livez(
    target: &Target,
    tls: &TlsClient,
    timeout: Duration,
) -> Result<HttpResponse, HttpFailure> {
    get(&target.host, target.port, "/livez", tls, timeout).await
}

/// An HTTP probe result as a [`Sample`]: any HTTP answer is a latency data point (connect + TLS
/// + request); whether the status is healthy is judged from [`HttpResponse::is_ok`], not here.
pub fn sample(result: &Result<HttpResponse, HttpFailure>) -> Sample {
    Sample {
        result: match result {
            Ok(r) => Ok(r.total()),
            Err(e) => Err(e.clone().into()),
        },
    }
}
