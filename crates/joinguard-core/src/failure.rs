//! Why a command stopped before it could judge anything, typed by what the binary's exit-code
//! map needs to know: bad input (exit 2), a trust failure (exit 3) or a failure to reach or read
//! the cluster (exit 1). The message is the one the user sees, wording unchanged.
//!
//! [`TrustFailure`] is the one trust type: a certificate our verifier rejected (TLS probes, etcd,
//! the API), a CA pin or a cluster-info signature that did not match (discovery). Every layer
//! that meets one carries it as it is, adding where it happened ([`TrustFailure::context`]).
//! Foundation: imports nothing from the crate.

use std::fmt;
use std::time::SystemTime;

/// The validity window and subject of a server's leaf certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertValidity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// Subject DN, for messages.
    pub subject: String,
}

/// What could not be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrustFailureKind {
    /// The chain does not lead to the given CA: the wrong `--*-cacert`, or a different cluster.
    UnknownIssuer,
    /// A signature in the chain does not verify.
    BadSignature,
    /// The certificate is not valid for the host dialled (no matching SAN).
    NameMismatch,
    /// Now is after notAfter (or this host's clock is ahead).
    Expired,
    /// Now is before notBefore (or this host's clock is behind).
    NotYetValid,
    /// Any other certificate error (bad encoding, wrong key usage, ...).
    Other,
    /// The cluster CA matches none of the `--discovery-token-ca-cert-hash` pins.
    CaPin,
    /// cluster-info carries no valid signature for the token (JWS).
    Signature,
    /// cluster-info is not what kubeadm signs, or changed between two fetches.
    Content,
    /// A TLS failure a transport reported only as text (a gRPC status, a hyper error).
    Transport,
}

/// An answer that could not be trusted. Never retried, never downgraded; the CLI exits 3.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustFailure {
    pub kind: TrustFailureKind,
    /// What did not verify, and what to check: the whole message but for its context.
    pub detail: String,
    /// The rejected certificate's validity window, when it could be captured (for clock skew).
    pub server_cert: Option<CertValidity>,
    /// Where it happened, outermost first, each with its own separator (`10.0.0.11:2379: `).
    context: String,
}

impl TrustFailure {
    pub fn new(kind: TrustFailureKind, detail: impl Into<String>) -> TrustFailure {
        TrustFailure {
            kind,
            detail: detail.into(),
            server_cert: None,
            context: String::new(),
        }
    }

    /// The same failure, its message prefixed with `prefix` (`10.0.0.11:2379: `).
    pub fn context(mut self, prefix: &str) -> TrustFailure {
        self.context.insert_str(0, prefix);
        self
    }
}

impl std::fmt::Display for TrustFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.context)?;
        f.write_str(&self.detail)
    }
}

impl std::error::Error for TrustFailure {}

/// How a command ended, in the terms its exit code states. [`Ending::code`] is the one map from
/// an ending to an exit code: the binary exits with it, and a JSON report that states its exit
/// code (update-status's `exitCode`) takes it from there too. Every typed result a command
/// returns says its ending (`ending()`); nothing else picks an exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// Fit for the join (warnings allowed), the target reached cleanly, or the work done
    /// (including nothing to do). Exit 0.
    Done,
    /// Not fit, not reached, refused, or the cluster could not be reached or read. Exit 1.
    Failed,
    /// A flag, file or config field could not be used; nothing was judged. Exit 2.
    InvalidInput,
    /// A CA pin, cluster-info signature or certificate did not verify. Never retried. Exit 3.
    Untrusted,
}

impl Ending {
    /// The process exit code (docs/architecture.md, README "Exit codes").
    pub const fn code(self) -> u8 {
        match self {
            Ending::Done => 0,
            Ending::Failed => 1,
            Ending::InvalidInput => 2,
            Ending::Untrusted => 3,
        }
    }
}

/// A command that stopped early, with the message for the user and, where an error caused it,
/// that error (its chain is what `std::error::Error::source` walks: the binary prints it at
/// `-vv`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// A flag, config field or file could not be used; nothing was judged.
    #[error(transparent)]
    Invalid(Reason),
    /// A CA pin, JWS signature or certificate did not verify. Never retried or downgraded.
    #[error("{0}")]
    Trust(TrustFailure),
    /// The cluster could not be reached or read within the budget.
    #[error(transparent)]
    Failed(Reason),
}

impl Stopped {
    pub fn ending(&self) -> Ending {
        match self {
            Stopped::Invalid(_) => Ending::InvalidInput,
            Stopped::Trust(_) => Ending::Untrusted,
            Stopped::Failed(_) => Ending::Failed,
        }
    }

    /// Invalid input, in these words (no error behind it).
    pub fn input(message: impl Into<String>) -> Stopped {
        Stopped::Invalid(Reason::from(message.into()))
    }

    /// A failure to reach or read the cluster, in these words.
    pub fn failure(message: impl Into<String>) -> Stopped {
        Stopped::Failed(Reason::from(message.into()))
    }

    /// Invalid input, the message being `e`'s, its cause kept.
    pub fn invalid<E: std::error::Error + Send + Sync + 'static>(e: E) -> Stopped {
        Stopped::Invalid(Reason::caused_by(e))
    }

    /// A failure to reach or read the cluster, the message being `e`'s, its cause kept.
    pub fn failed<E: std::error::Error + Send + Sync + 'static>(e: E) -> Stopped {
        Stopped::Failed(Reason::caused_by(e))
    }

    /// The same kind, its message prefixed (`cluster: ...`).
    pub fn context(self, prefix: &str) -> Stopped {
        match self {
            Stopped::Invalid(m) => Stopped::Invalid(m.prefixed(prefix)),
            Stopped::Trust(t) => Stopped::Trust(t.context(prefix)),
            Stopped::Failed(m) => Stopped::Failed(m.prefixed(prefix)),
        }
    }
}

/// Why a command stopped: the sentence for the user, and the error it came from, if any. The
/// sentence already says what that error says; [`std::error::Error::source`] goes on from the
/// error's own cause (an I/O error under a file error, a TLS error under a transport error).
#[derive(Clone)]
pub struct Reason {
    message: String,
    cause: Option<std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Reason {
    /// `e`'s message, `e` kept for its chain.
    pub fn caused_by<E: std::error::Error + Send + Sync + 'static>(e: E) -> Reason {
        Reason {
            message: e.to_string(),
            cause: Some(std::sync::Arc::new(e)),
        }
    }

    fn prefixed(self, prefix: &str) -> Reason {
        Reason {
            message: format!("{prefix}{}", self.message),
            cause: self.cause,
        }
    }
}

impl From<String> for Reason {
    fn from(message: String) -> Reason {
        Reason {
            message,
            cause: None,
        }
    }
}

impl From<&str> for Reason {
    fn from(message: &str) -> Reason {
        Reason::from(message.to_string())
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.cause {
            Some(c) => write!(f, "{:?} (from {c:?})", self.message),
            None => write!(f, "{:?}", self.message),
        }
    }
}

impl std::error::Error for Reason {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.as_deref().and_then(|c| c.source())
    }
}

/// Two reasons are the same when they say the same (the cause is for the chain, not identity).
impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        self.message == other.message
    }
}

impl Eq for Reason {}
