//! Error classification: what a failed API or etcd call means for the retry layer.
//!
//! This file owns the error table of docs/retries.md. It turns a Kubernetes API answer (HTTP
//! status plus the `Status` object in the body), a transport failure, or an etcd gRPC error into
//! an [`ErrorClass`]. It decides nothing about timing: the runner in the parent module does.

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use serde::Serialize;

// The API error types live in `kube` (the layer below); re-exported so `retry::classify::ApiError`
// and friends keep their paths.
pub(crate) use crate::kube::error::{bounded, looks_like_trust};
pub use crate::kube::error::{parse_retry_after, ApiCallError, ApiError, TransportError};

/// What a failure means for the retry layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "class", content = "reason", rename_all = "kebab-case")]
pub enum ErrorClass {
    /// Retry after the next backoff step (or the server's `Retry-After`, if later).
    Transient(Reason),
    /// 409 Conflict on an update: re-read and re-apply the mutation, never a blind retry.
    Conflict,
    /// Retrying cannot help: fail at once.
    Permanent(Reason),
    /// A certificate, TLS or CA-pin failure: fail at once; the operator must fix trust.
    Trust,
}

impl ErrorClass {
    /// The class alone, without its reason: a low-cardinality label for counters and metrics.
    pub fn label(&self) -> ClassLabel {
        match self {
            ErrorClass::Transient(_) => ClassLabel::Transient,
            ErrorClass::Conflict => ClassLabel::Conflict,
            ErrorClass::Permanent(_) => ClassLabel::Permanent,
            ErrorClass::Trust => ClassLabel::Trust,
        }
    }

    /// The reason, where the class carries one.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            ErrorClass::Transient(r) | ErrorClass::Permanent(r) => Some(*r),
            ErrorClass::Conflict | ErrorClass::Trust => None,
        }
    }

    /// True when the failure says the endpoint could not be reached at all (refused, reset,
    /// EOF, timeout, unreachable). Only these arm the wake-on-connect watcher: after an HTTP
    /// error the endpoint is plainly up, and a TCP connect tells us nothing.
    pub(crate) fn is_connection(&self) -> bool {
        matches!(self, ErrorClass::Transient(r) if r.is_connection())
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorClass::Transient(r) => write!(f, "transient ({r})"),
            ErrorClass::Conflict => f.write_str("conflict"),
            ErrorClass::Permanent(r) => write!(f, "permanent ({r})"),
            ErrorClass::Trust => f.write_str("trust"),
        }
    }
}

/// An attempt's outcome as a label: the four classes plus `ok`. Used as the counter key and the
/// `class` field of the JSON `retries` array.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClassLabel {
    Ok,
    Transient,
    Conflict,
    Permanent,
    Trust,
}

impl ClassLabel {
    pub fn as_str(&self) -> &'static str {
        match self {
            ClassLabel::Ok => "ok",
            ClassLabel::Transient => "transient",
            ClassLabel::Conflict => "conflict",
            ClassLabel::Permanent => "permanent",
            ClassLabel::Trust => "trust",
        }
    }
}

impl fmt::Display for ClassLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a failure got its class. Names are stable: they appear in the JSON report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    // Transport (connection class: these arm the wake-on-connect watcher).
    ConnectionRefused,
    ConnectionReset,
    UnexpectedEof,
    Timeout,
    /// The runner cut the attempt off at its per-attempt timeout.
    AttemptTimeout,
    /// The attempt was abandoned: its endpoint stopped answering connects during it and answered
    /// again, so the attempt's connection is stuck in retransmission while a fresh one works.
    PathRecovered,
    Unreachable,
    // Transport, but the server is up.
    GoAway,
    Dns,
    // HTTP.
    TooManyRequests,
    BadGateway,
    ServiceUnavailable,
    GatewayTimeout,
    /// 500 with Status reason `ServerTimeout`: the apiserver itself says "retry".
    ServerTimeout,
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    AlreadyExists,
    Invalid,
    InternalError,
    /// Any other HTTP status.
    Status(u16),
    // etcd (in a gRPC status, or in an apiserver 500's message).
    EtcdLeaderChanged,
    EtcdRequestTimedOut,
    EtcdNoLeader,
    EtcdTooManyRequests,
    // gRPC.
    GrpcUnavailable,
    GrpcDeadlineExceeded,
    /// Any other gRPC code (the numeric `tonic::Code`).
    Grpc(i32),
    /// A client-side error that no request could fix (bad argument, URI, encoding).
    Client,
    /// Nothing more specific is known.
    Other,
}

impl Reason {
    /// Refused, reset, EOF, timeout, unreachable: the endpoint may be gone.
    pub(crate) fn is_connection(&self) -> bool {
        matches!(
            self,
            Reason::ConnectionRefused
                | Reason::ConnectionReset
                | Reason::UnexpectedEof
                | Reason::Timeout
                | Reason::AttemptTimeout
                | Reason::PathRecovered
                | Reason::Unreachable
        )
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Reason::ConnectionRefused => "connection refused",
            Reason::ConnectionReset => "connection reset",
            Reason::UnexpectedEof => "unexpected EOF",
            Reason::Timeout => "timeout",
            Reason::AttemptTimeout => "attempt timed out",
            Reason::PathRecovered => "endpoint back after an outage",
            Reason::Unreachable => "unreachable",
            Reason::GoAway => "HTTP/2 GOAWAY",
            Reason::Dns => "name resolution failed",
            Reason::TooManyRequests => "429 Too Many Requests",
            Reason::BadGateway => "502 Bad Gateway",
            Reason::ServiceUnavailable => "503 Service Unavailable",
            Reason::GatewayTimeout => "504 Gateway Timeout",
            Reason::ServerTimeout => "500 ServerTimeout",
            Reason::BadRequest => "400 Bad Request",
            Reason::Unauthorized => "401 Unauthorized",
            Reason::Forbidden => "403 Forbidden",
            Reason::NotFound => "404 Not Found",
            Reason::AlreadyExists => "409 AlreadyExists",
            Reason::Invalid => "422 Invalid",
            Reason::InternalError => "500 Internal Server Error",
            Reason::Status(s) => return write!(f, "HTTP {s}"),
            Reason::EtcdLeaderChanged => "etcdserver: leader changed",
            Reason::EtcdRequestTimedOut => "etcdserver: request timed out",
            Reason::EtcdNoLeader => "etcdserver: no leader",
            Reason::EtcdTooManyRequests => "etcdserver: too many requests",
            Reason::GrpcUnavailable => "gRPC Unavailable",
            Reason::GrpcDeadlineExceeded => "gRPC DeadlineExceeded",
            Reason::Grpc(c) => return write!(f, "gRPC {:?}", tonic::Code::from_i32(*c)),
            Reason::Client => "client error",
            Reason::Other => "other",
        };
        f.write_str(s)
    }
}

/// Anything the retry layer can run: it must say what its failures mean.
pub trait Classify: fmt::Display {
    /// The class of this failure (docs/retries.md's table).
    fn classify(&self) -> ErrorClass;

    /// The server's requested wait (`Retry-After`, or a Status `details.retryAfterSeconds`).
    fn retry_after(&self) -> Option<Duration> {
        None
    }

    /// A 404. The runner lets the call site decide what it means ([`super::NotFound`]).
    fn is_not_found(&self) -> bool {
        false
    }

    /// The certificate our verifier rejected, when this failure is one.
    fn trust_failure(&self) -> Option<&crate::failure::TrustFailure> {
        None
    }

    /// The library error behind this failure, whose words the failure's own text replaced: what
    /// `-vv` shows under the message (the retry error's `source`).
    fn cause(&self) -> Option<&(dyn std::error::Error + 'static)> {
        None
    }
}

/// etcd's transient server conditions, as they appear in a gRPC status message or, wrapped, in
/// an apiserver 500's Status message (etcd `server/etcdserver/errors`: ErrLeaderChanged,
/// ErrTimeout, ErrNoLeader, ErrTooManyRequests).
const ETCD_TRANSIENT: [(&str, Reason); 4] = [
    ("leader changed", Reason::EtcdLeaderChanged),
    ("request timed out", Reason::EtcdRequestTimedOut),
    ("no leader", Reason::EtcdNoLeader),
    ("too many requests", Reason::EtcdTooManyRequests),
];

fn etcd_transient(message: &str) -> Option<Reason> {
    let m = message.to_ascii_lowercase();
    ETCD_TRANSIENT
        .iter()
        .find(|(needle, _)| m.contains(needle))
        .map(|(_, r)| *r)
}

impl Classify for ApiError {
    fn classify(&self) -> ErrorClass {
        use ErrorClass::{Permanent, Transient};
        match self.status {
            409 if self.is_already_exists() => Permanent(Reason::AlreadyExists),
            409 => ErrorClass::Conflict,
            429 => Transient(Reason::TooManyRequests),
            502 => Transient(Reason::BadGateway),
            503 => Transient(Reason::ServiceUnavailable),
            504 => Transient(Reason::GatewayTimeout),
            500 => match etcd_transient(&self.message) {
                Some(r) => Transient(r),
                // kube-apiserver passes a gRPC error from its etcd client on as a 500 with Go's
                // text, `rpc error: code = Unavailable desc = ...`: the member it used went away
                // and the write may not have been sent. Unavailable is transient (docs/retries.md).
                None if self.message.contains("code = Unavailable") => {
                    Transient(Reason::GrpcUnavailable)
                }
                // apiserver's StatusReasonServerTimeout means "retry"; kubeadm's PatchNode
                // retries it too (apierrors.IsServerTimeout).
                None if self.reason.as_deref() == Some("ServerTimeout") => {
                    Transient(Reason::ServerTimeout)
                }
                None => Permanent(Reason::InternalError),
            },
            400 => Permanent(Reason::BadRequest),
            401 => Permanent(Reason::Unauthorized),
            403 => Permanent(Reason::Forbidden),
            404 => Permanent(Reason::NotFound),
            422 => Permanent(Reason::Invalid),
            other => Permanent(Reason::Status(other)),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    fn is_not_found(&self) -> bool {
        self.status == 404
    }
}

impl Classify for TransportError {
    fn classify(&self) -> ErrorClass {
        use ErrorClass::{Permanent, Transient};
        match self {
            TransportError::Refused => Transient(Reason::ConnectionRefused),
            TransportError::Reset => Transient(Reason::ConnectionReset),
            TransportError::Eof => Transient(Reason::UnexpectedEof),
            TransportError::Timeout => Transient(Reason::Timeout),
            TransportError::Unreachable => Transient(Reason::Unreachable),
            TransportError::GoAway(_) => Transient(Reason::GoAway),
            // A load balancer's name may be briefly unresolvable while DNS is reconfigured; the
            // budget bounds how long we wait for it.
            TransportError::Dns(_) => Transient(Reason::Dns),
            TransportError::Tls(_) | TransportError::Untrusted(_) => ErrorClass::Trust,
            // Not TLS at all: the wrong endpoint (a plain HTTP listener), which retrying does not
            // fix and which no certificate explains.
            TransportError::NotTls(_) => Permanent(Reason::Other),
            // Unknown transport failures are not on the retried list: fail fast and say
            // what happened rather than spin on something we do not understand.
            TransportError::Other(_) => Permanent(Reason::Other),
        }
    }
}

impl Classify for ApiCallError {
    fn classify(&self) -> ErrorClass {
        match self {
            ApiCallError::Status(e) => e.classify(),
            ApiCallError::Transport(e) => e.classify(),
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiCallError::Status(e) => e.retry_after(),
            ApiCallError::Transport(_) => None,
        }
    }

    fn is_not_found(&self) -> bool {
        matches!(self, ApiCallError::Status(e) if e.is_not_found())
    }

    fn trust_failure(&self) -> Option<&crate::failure::TrustFailure> {
        match self {
            ApiCallError::Transport(TransportError::Untrusted(t)) => Some(t.as_ref()),
            _ => None,
        }
    }
}

/// Classifies a gRPC status from etcd: trust first, then etcd's transient messages, then the code.
pub fn classify_grpc(status: &tonic::Status) -> ErrorClass {
    use tonic::Code;
    use ErrorClass::{Permanent, Transient};
    let mut chain = status.message().to_string();
    let mut cur = StdError::source(status);
    let mut depth = 0;
    while let (Some(e), true) = (cur, depth < 16) {
        chain.push_str(": ");
        chain.push_str(&e.to_string());
        cur = e.source();
        depth += 1;
    }
    if looks_like_trust(&chain) {
        return ErrorClass::Trust;
    }
    if let Some(r) = etcd_transient(status.message()) {
        return Transient(r);
    }
    match status.code() {
        Code::Unavailable => {
            // tonic reports a failed connect as Unavailable with the io error as its source;
            // keep the connection reason so the wake-on-connect watcher can arm.
            match StdError::source(status) {
                Some(src) => match TransportError::from_error(src).classify() {
                    c @ Transient(r) if r.is_connection() => c,
                    _ => Transient(Reason::GrpcUnavailable),
                },
                None => Transient(Reason::GrpcUnavailable),
            }
        }
        Code::DeadlineExceeded => Transient(Reason::GrpcDeadlineExceeded),
        other => Permanent(Reason::Grpc(other as i32)),
    }
}

impl Classify for etcd_client::Error {
    fn classify(&self) -> ErrorClass {
        use etcd_client::Error as E;
        match self {
            E::GRpcStatus(s) => classify_grpc(s),
            E::IoError(e) => TransportError::from_io(e).classify(),
            E::TransportError(e) => match TransportError::from_error(e) {
                // A tonic transport error is always about reaching the member; one we cannot
                // name further is still worth the etcd budget.
                TransportError::Other(_) => ErrorClass::Transient(Reason::GrpcUnavailable),
                t => t.classify(),
            },
            E::InvalidArgs(_)
            | E::InvalidUri(_)
            | E::Utf8Error(_)
            | E::InvalidMetadataValue(_)
            | E::EndpointError(_)
            | E::EndpointsNotManaged => ErrorClass::Permanent(Reason::Client),
            _ => ErrorClass::Permanent(Reason::Other),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use crate::kube::error::{MAX_MESSAGE, MAX_RETRY_AFTER, MAX_STATUS_BODY};

    use std::time::SystemTime;

    use super::*;
    use ErrorClass::{Conflict, Permanent, Transient, Trust};

    fn status_body(code: u16, reason: &str, message: &str) -> Vec<u8> {
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code
        })
        .to_string()
        .into_bytes()
    }

    /// docs/retries.md, every HTTP row.
    #[test]
    fn http_table() {
        let rows: &[(u16, &str, &str, ErrorClass)] = &[
            (
                429,
                "TooManyRequests",
                "too many requests",
                Transient(Reason::TooManyRequests),
            ),
            (502, "", "bad gateway", Transient(Reason::BadGateway)),
            (
                503,
                "ServiceUnavailable",
                "",
                Transient(Reason::ServiceUnavailable),
            ),
            (504, "Timeout", "", Transient(Reason::GatewayTimeout)),
            (
                500,
                "InternalError",
                "Internal error occurred: etcdserver: leader changed",
                Transient(Reason::EtcdLeaderChanged),
            ),
            (
                500,
                "",
                "etcdserver: request timed out",
                Transient(Reason::EtcdRequestTimedOut),
            ),
            (
                500,
                "",
                "etcdserver: no leader",
                Transient(Reason::EtcdNoLeader),
            ),
            (
                500,
                "",
                "etcdserver: too many requests",
                Transient(Reason::EtcdTooManyRequests),
            ),
            (
                500,
                "",
                "rpc error: code = Unavailable desc = tcp connect error",
                Transient(Reason::GrpcUnavailable),
            ),
            (
                500,
                "",
                "rpc error: code = InvalidArgument desc = etcdserver: key is not provided",
                Permanent(Reason::InternalError),
            ),
            (
                500,
                "ServerTimeout",
                "try again",
                Transient(Reason::ServerTimeout),
            ),
            (
                500,
                "InternalError",
                "nil pointer",
                Permanent(Reason::InternalError),
            ),
            (409, "Conflict", "the object has been modified", Conflict),
            (
                409,
                "AlreadyExists",
                "exists",
                Permanent(Reason::AlreadyExists),
            ),
            (400, "BadRequest", "", Permanent(Reason::BadRequest)),
            (401, "Unauthorized", "", Permanent(Reason::Unauthorized)),
            (403, "Forbidden", "forbidden", Permanent(Reason::Forbidden)),
            (404, "NotFound", "not found", Permanent(Reason::NotFound)),
            (422, "Invalid", "spec invalid", Permanent(Reason::Invalid)),
            (501, "", "", Permanent(Reason::Status(501))),
            (405, "MethodNotAllowed", "", Permanent(Reason::Status(405))),
        ];
        for (code, reason, message, want) in rows {
            let e = ApiError::from_response(*code, None, &status_body(*code, reason, message));
            assert_eq!(e.classify(), *want, "{code} {reason} {message:?}");
        }
    }

    /// docs/retries.md, every transport row (GOAWAY, refused, reset, EOF, timeout) and trust.
    #[test]
    fn transport_table() {
        let io = |k: io::ErrorKind| TransportError::from_io(&io::Error::new(k, "x"));
        let rows = [
            (
                io(io::ErrorKind::ConnectionRefused),
                Transient(Reason::ConnectionRefused),
            ),
            (
                io(io::ErrorKind::ConnectionReset),
                Transient(Reason::ConnectionReset),
            ),
            (
                io(io::ErrorKind::BrokenPipe),
                Transient(Reason::ConnectionReset),
            ),
            (
                io(io::ErrorKind::UnexpectedEof),
                Transient(Reason::UnexpectedEof),
            ),
            (io(io::ErrorKind::TimedOut), Transient(Reason::Timeout)),
            (
                io(io::ErrorKind::HostUnreachable),
                Transient(Reason::Unreachable),
            ),
            (
                TransportError::GoAway("NO_ERROR".into()),
                Transient(Reason::GoAway),
            ),
            (TransportError::Tls("UnknownIssuer".into()), Trust),
            (
                TransportError::Other("weird".into()),
                Permanent(Reason::Other),
            ),
        ];
        for (e, want) in rows {
            assert_eq!(e.classify(), want, "{e}");
        }
        // Connection-class reasons arm the watcher; GOAWAY and HTTP answers do not.
        assert!(Transient(Reason::ConnectionRefused).is_connection());
        assert!(Transient(Reason::AttemptTimeout).is_connection());
        assert!(!Transient(Reason::GoAway).is_connection());
        assert!(!Transient(Reason::ServiceUnavailable).is_connection());
    }

    #[derive(Debug)]
    struct Wrap(&'static str, Option<Box<dyn StdError + Send + Sync>>);
    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }
    impl StdError for Wrap {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn StdError + 'static))
        }
    }

    #[test]
    fn transport_from_error_chain() {
        let refused = Wrap(
            "client error (Connect)",
            Some(Box::new(io::Error::from(io::ErrorKind::ConnectionRefused))),
        );
        assert_eq!(
            TransportError::from_error(&refused),
            TransportError::Refused
        );
        let goaway = Wrap(
            "http2 error",
            Some(Box::new(Wrap(
                "connection error received: not a result of an error",
                None,
            ))),
        );
        assert!(matches!(
            TransportError::from_error(&goaway),
            TransportError::GoAway(_)
        ));
        let cert = Wrap("invalid peer certificate: UnknownIssuer", None);
        assert_eq!(TransportError::from_error(&cert).classify(), Trust);
        let rustls_err = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        assert_eq!(TransportError::from_io(&rustls_err).classify(), Trust);
    }

    /// docs/retries.md for etcd: Unavailable/DeadlineExceeded and etcd's messages are transient;
    /// other codes permanent; TLS trust.
    #[test]
    fn etcd_table() {
        use tonic::{Code, Status};
        let rows = [
            (
                Status::new(Code::Unavailable, "etcdserver: leader changed"),
                Transient(Reason::EtcdLeaderChanged),
            ),
            (
                Status::new(Code::Unavailable, "etcdserver: request timed out"),
                Transient(Reason::EtcdRequestTimedOut),
            ),
            (
                Status::new(Code::Unavailable, "etcdserver: no leader"),
                Transient(Reason::EtcdNoLeader),
            ),
            (
                Status::new(Code::ResourceExhausted, "etcdserver: too many requests"),
                Transient(Reason::EtcdTooManyRequests),
            ),
            (
                Status::new(Code::Unavailable, "transport is closing"),
                Transient(Reason::GrpcUnavailable),
            ),
            (
                Status::new(Code::DeadlineExceeded, "context deadline exceeded"),
                Transient(Reason::GrpcDeadlineExceeded),
            ),
            (
                Status::new(Code::InvalidArgument, "etcdserver: key is not provided"),
                Permanent(Reason::Grpc(Code::InvalidArgument as i32)),
            ),
            (
                Status::new(Code::PermissionDenied, "etcdserver: permission denied"),
                Permanent(Reason::Grpc(Code::PermissionDenied as i32)),
            ),
            (
                Status::new(Code::Unauthenticated, "etcdserver: invalid auth token"),
                Permanent(Reason::Grpc(Code::Unauthenticated as i32)),
            ),
            (
                Status::new(Code::FailedPrecondition, "etcdserver: member not found"),
                Permanent(Reason::Grpc(Code::FailedPrecondition as i32)),
            ),
            (
                Status::new(
                    Code::ResourceExhausted,
                    "etcdserver: mvcc: database space exceeded",
                ),
                Permanent(Reason::Grpc(Code::ResourceExhausted as i32)),
            ),
            (
                Status::new(Code::Unknown, "h2 protocol error"),
                Permanent(Reason::Grpc(Code::Unknown as i32)),
            ),
            (
                Status::new(
                    Code::Unavailable,
                    "error trying to connect: invalid peer certificate: UnknownIssuer",
                ),
                Trust,
            ),
        ];
        for (s, want) in rows {
            let msg = s.message().to_string();
            let e = etcd_client::Error::GRpcStatus(s);
            assert_eq!(e.classify(), want, "{msg}");
        }
        let io = etcd_client::Error::IoError(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(io.classify(), Transient(Reason::ConnectionRefused));
        let args = etcd_client::Error::InvalidArgs("bad".into());
        assert_eq!(args.classify(), Permanent(Reason::Client));
        let watch = etcd_client::Error::WatchError("gone".into());
        assert_eq!(watch.classify(), Permanent(Reason::Other));
    }

    #[test]
    fn status_body_parsing_is_robust() {
        // Header wins over details.retryAfterSeconds.
        let body = br#"{"kind":"Status","message":"slow down","reason":"TooManyRequests","details":{"retryAfterSeconds":7},"code":429}"#;
        let e = ApiError::from_response(429, Some("2"), body);
        assert_eq!(e.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(e.reason.as_deref(), Some("TooManyRequests"));
        assert_eq!(e.message, "slow down");
        let e = ApiError::from_response(429, None, body);
        assert_eq!(e.retry_after, Some(Duration::from_secs(7)));
        // Not JSON: the text is kept, bounded.
        let e = ApiError::from_response(502, Some("garbage"), b"<html>bad gateway</html>");
        assert_eq!(e.message, "<html>bad gateway</html>");
        assert_eq!(e.retry_after, None);
        assert_eq!(e.to_string(), "502 Bad Gateway: <html>bad gateway</html>");
        // Empty body.
        let e = ApiError::from_response(503, None, b"");
        assert_eq!(e.to_string(), "503 Service Unavailable");
        // Oversized body is not parsed; message is bounded.
        let mut big = br#"{"kind":"Status","message":""#.to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_STATUS_BODY + 10));
        big.extend(br#""}"#);
        let e = ApiError::from_response(500, None, &big);
        assert!(e.message.len() <= MAX_MESSAGE + 3);
        assert_eq!(e.reason, None);
        // JSON that is not a Status object.
        let e = ApiError::from_response(500, None, br#"[1,2,3]"#);
        assert_eq!(e.message, "[1,2,3]");
        // Control characters do not reach logs.
        let e = ApiError::from_response(400, None, b"bad\n\x1b[31mred");
        assert!(!e.message.contains('\n') && !e.message.contains('\x1b'));
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(" 2 ", now), Some(Duration::from_secs(2)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("99999999", now), Some(MAX_RETRY_AFTER));
    }
}
