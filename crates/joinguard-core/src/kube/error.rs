//! The Kubernetes API's error types: an HTTP error answer ([`ApiError`], with what its `Status`
//! body and `Retry-After` said), a failure below HTTP ([`TransportError`]) and one call's failure
//! ([`ApiCallError`]), with the bounds on what is kept of them.
//!
//! This file owns what a failed API call *was*. What it *means* for retrying (its class) is the
//! retry layer's (`retry::classify` implements `Classify` for these types): retry imports kube,
//! never the reverse.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::{Duration, SystemTime};

/// The largest response body [`ApiError::from_response`] parses. A Kubernetes `Status` object is
/// well under 4 KiB; anything bigger is not one, and is kept only as a truncated message.
pub const MAX_STATUS_BODY: usize = 64 * 1024;

/// The longest error message kept (in records, logs and [`ApiError::message`]).
pub const MAX_MESSAGE: usize = 512;

/// The longest `Retry-After` honoured. Larger values are clamped (they exceed every budget, so
/// the runner gives up at once with a message that quotes the server's figure).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Words that mark a TLS or certificate failure anywhere in an error chain. rustls' and tonic's
/// messages ("invalid peer certificate: UnknownIssuer", "x509: certificate signed by unknown
/// authority") all contain one.
const TRUST_MARKERS: [&str; 5] = [
    "certificate",
    "x509",
    "unknownissuer",
    "tls handshake",
    "handshake failure",
];

pub(crate) fn looks_like_trust(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    TRUST_MARKERS.iter().any(|m| t.contains(m))
}

/// A Kubernetes API error answer: the HTTP status and what its `Status` body said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    /// `Status.reason` (`Conflict`, `AlreadyExists`, `Invalid`, `ServerTimeout`, ...).
    pub reason: Option<String>,
    /// `Status.message`, or the body as text when it was not a Status object (bounded).
    pub message: String,
    pub retry_after: Option<Duration>,
}

#[derive(serde::Deserialize)]
struct StatusBody {
    kind: Option<String>,
    message: Option<String>,
    reason: Option<String>,
    details: Option<StatusDetails>,
}

#[derive(serde::Deserialize)]
struct StatusDetails {
    #[serde(rename = "retryAfterSeconds")]
    retry_after_seconds: Option<u64>,
}

impl ApiError {
    /// Builds the error from an HTTP answer. `retry_after_header` is the raw `Retry-After` value
    /// (delta-seconds or an HTTP date); without one, the Status `details.retryAfterSeconds` is
    /// used. Bodies over [`MAX_STATUS_BODY`] or that are not a Status object are kept as a
    /// truncated text message; this never fails.
    pub fn from_response(status: u16, retry_after_header: Option<&str>, body: &[u8]) -> Self {
        let parsed = if body.len() <= MAX_STATUS_BODY {
            serde_json::from_slice::<StatusBody>(body).ok().filter(|s| {
                s.kind.as_deref() == Some("Status") || s.message.is_some() || s.reason.is_some()
            })
        } else {
            None
        };
        let header_wait = retry_after_header.and_then(|v| parse_retry_after(v, SystemTime::now()));
        match parsed {
            Some(s) => {
                let body_wait = s
                    .details
                    .and_then(|d| d.retry_after_seconds)
                    .filter(|&n| n > 0)
                    .map(Duration::from_secs);
                ApiError {
                    status,
                    reason: s.reason.filter(|r| !r.is_empty()).map(|r| bounded(&r)),
                    message: bounded(s.message.as_deref().unwrap_or("")),
                    retry_after: header_wait.or(body_wait).map(|d| d.min(MAX_RETRY_AFTER)),
                }
            }
            None => {
                let head = &body[..body.len().min(MAX_MESSAGE * 4)];
                ApiError {
                    status,
                    reason: None,
                    message: bounded(&String::from_utf8_lossy(head)),
                    retry_after: header_wait.map(|d| d.min(MAX_RETRY_AFTER)),
                }
            }
        }
    }

    /// The status line text, e.g. `503 Service Unavailable`.
    pub fn status_line(&self) -> String {
        match hyper::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
        {
            Some(text) => format!("{} {text}", self.status),
            None => format!("HTTP {}", self.status),
        }
    }

    /// A 409 whose reason is `AlreadyExists`: the answer to a create, not a conflict.
    pub(crate) fn is_already_exists(&self) -> bool {
        self.status == 409 && self.reason.as_deref() == Some("AlreadyExists")
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.status_line())?;
        if !self.message.is_empty() {
            write!(f, ": {}", self.message)?;
        }
        Ok(())
    }
}

impl StdError for ApiError {}

/// A failure below HTTP: the request got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error("connection refused")]
    Refused,
    #[error("connection reset")]
    Reset,
    #[error("connection closed before the answer was complete (EOF)")]
    Eof,
    #[error("timed out")]
    Timeout,
    #[error("network or host unreachable")]
    Unreachable,
    /// The server sent HTTP/2 GOAWAY (it is draining, e.g. an apiserver shutting down).
    #[error("HTTP/2 GOAWAY: {0}")]
    GoAway(String),
    #[error("name resolution failed: {0}")]
    Dns(String),
    /// The server's certificate was rejected by our verifier.
    #[error("TLS/certificate failure: {0}")]
    Untrusted(Box<crate::failure::TrustFailure>),
    /// Another TLS failure (an alert, a failure only a transport's text names).
    #[error("TLS/certificate failure: {0}")]
    Tls(String),
    /// The endpoint does not speak TLS: a wrong endpoint, not a trust question.
    #[error("{0}")]
    NotTls(String),
    #[error("{0}")]
    Other(String),
}

impl TransportError {
    /// Maps an `io::Error` by kind (and the OS error, for the kinds std groups loosely).
    pub(crate) fn from_io(e: &io::Error) -> Self {
        use io::ErrorKind as K;
        match e.kind() {
            K::ConnectionRefused => TransportError::Refused,
            K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::NotConnected => {
                TransportError::Reset
            }
            K::UnexpectedEof => TransportError::Eof,
            K::TimedOut => TransportError::Timeout,
            K::HostUnreachable | K::NetworkUnreachable | K::NetworkDown => {
                TransportError::Unreachable
            }
            _ => {
                if let Some(inner) = e.get_ref() {
                    if looks_like_trust(&inner.to_string()) {
                        return TransportError::Tls(bounded(&inner.to_string()));
                    }
                }
                TransportError::Other(bounded(&e.to_string()))
            }
        }
    }

    /// Walks an error's source chain (hyper, hyper-util, tonic transport, rustls, io) and picks
    /// the most specific transport failure it finds.
    pub(crate) fn from_error(e: &(dyn StdError + 'static)) -> Self {
        let mut text = String::new();
        let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
        let mut depth = 0;
        while let Some(err) = cur {
            if depth >= 16 {
                break;
            }
            depth += 1;
            if err.downcast_ref::<rustls::Error>().is_some() {
                return TransportError::Tls(bounded(&err.to_string()));
            }
            if let Some(io) = err.downcast_ref::<io::Error>() {
                let mapped = TransportError::from_io(io);
                if !matches!(mapped, TransportError::Other(_)) {
                    return mapped;
                }
            }
            if let Some(h) = err.downcast_ref::<hyper::Error>() {
                if h.is_timeout() {
                    return TransportError::Timeout;
                }
                if h.is_incomplete_message() {
                    return TransportError::Eof;
                }
            }
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&err.to_string());
            cur = err.source();
        }
        let lower = text.to_ascii_lowercase();
        if looks_like_trust(&lower) {
            TransportError::Tls(bounded(&text))
        } else if lower.contains("goaway")
            || lower.contains("go away")
            || lower.contains("connection error received")
        {
            // h2 prints a remote GOAWAY as "connection error received: <reason>".
            TransportError::GoAway(bounded(&text))
        } else if lower.contains("dns error") || lower.contains("failed to lookup address") {
            TransportError::Dns(bounded(&text))
        } else if lower.contains("connection refused") {
            TransportError::Refused
        } else if lower.contains("connection reset") || lower.contains("broken pipe") {
            TransportError::Reset
        } else if lower.contains("connection closed before message completed")
            || lower.contains("unexpected eof")
        {
            TransportError::Eof
        } else if lower.contains("timed out") || lower.contains("deadline has elapsed") {
            TransportError::Timeout
        } else {
            TransportError::Other(bounded(&text))
        }
    }
}

/// One Kubernetes API call's failure: an HTTP answer or no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiCallError {
    #[error("{0}")]
    Status(ApiError),
    #[error("{0}")]
    Transport(TransportError),
}

impl From<ApiError> for ApiCallError {
    fn from(e: ApiError) -> Self {
        ApiCallError::Status(e)
    }
}

impl From<TransportError> for ApiCallError {
    fn from(e: TransportError) -> Self {
        ApiCallError::Transport(e)
    }
}

/// Parses a `Retry-After` value: delta-seconds, or an HTTP date (RFC 9110 section 10.2.3). A
/// date in the past means "now" (zero).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(MAX_RETRY_AFTER),
    )
}

/// Trims, strips control characters and bounds a message to [`MAX_MESSAGE`] bytes (on a char
/// boundary).
pub(crate) fn bounded(s: &str) -> String {
    let clean: String = s
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.len() <= MAX_MESSAGE {
        return clean;
    }
    let mut end = MAX_MESSAGE;
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &clean[..end])
}
