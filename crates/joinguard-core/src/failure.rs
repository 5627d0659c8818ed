//! Why a command stopped before it could judge anything, typed by what the binary's exit-code
//! map needs to know: bad input (exit 2), a trust failure (exit 3) or a failure to reach or read
//! the cluster (exit 1). The message is the one the user sees, wording unchanged.
//!
//! [`TrustFailure`] is the one trust type: a certificate our verifier rejected (TLS probes, etcd,
//! the API), a CA pin or a cluster-info signature that did not match (discovery). Every layer
//! that meets one carries it as it is, adding where it happened ([`TrustFailure::context`]).
//! Foundation: imports nothing from the crate.

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

/// A command that stopped early, with the message for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// A flag, config field or file could not be used; nothing was judged.
    #[error("{0}")]
    Invalid(String),
    /// A CA pin, JWS signature or certificate did not verify. Never retried or downgraded.
    #[error("{0}")]
    Trust(TrustFailure),
    /// The cluster could not be reached or read within the budget.
    #[error("{0}")]
    Failed(String),
}

impl Stopped {
    pub fn ending(&self) -> Ending {
        match self {
            Stopped::Invalid(_) => Ending::InvalidInput,
            Stopped::Trust(_) => Ending::Untrusted,
            Stopped::Failed(_) => Ending::Failed,
        }
    }

    /// The same kind, its message prefixed (`cluster: ...`).
    pub fn context(self, prefix: &str) -> Stopped {
        match self {
            Stopped::Invalid(m) => Stopped::Invalid(format!("{prefix}{m}")),
            Stopped::Trust(t) => Stopped::Trust(t.context(prefix)),
            Stopped::Failed(m) => Stopped::Failed(format!("{prefix}{m}")),
        }
    }
}
